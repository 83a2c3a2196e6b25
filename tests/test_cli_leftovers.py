"""Run it twice, session 7 leftovers: `pretrain train` resumed with train.steps below its checkpoint,
and `pretrain eval` into a run's result file after the run was trained again from scratch (another
model at the same path and step). Tiny models, in-process; ~10 s."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pretrain import config as cfgmod
from pretrain.cli import main
from pretrain.train.testing import tiny_config

pytestmark = pytest.mark.usefixtures("restore_torch_threads")


def _recipe(tmp_path: Path, text: Path, *overrides: str) -> Path:
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(cfgmod.dumps(tiny_config(tmp_path / "run", text, "train.steps=4", "checkpoint.every=2",
                                            "log.tensorboard=false", *overrides)))
    return cfg


def test_resume_with_fewer_steps_than_the_checkpoint_says_so_and_changes_nothing(tmp_path, text, capsys):
    """The checkpoint is at step 4; train.steps=2 cannot be honoured (a run is not rewound). One line
    says so, and the run directory is left as it was: its config.toml said train.steps=2 and its
    record a config_change 4 -> 2 for a model trained 4 steps."""
    cfg = _recipe(tmp_path, text)
    assert main(["train", str(cfg), "--quiet"]) == 0
    run = tmp_path / "run"
    before = {p.name: p.read_bytes() for p in (run / "config.toml", run / "metrics.jsonl")}
    capsys.readouterr()
    assert main(["train", str(cfg), "--quiet", "--set", "train.steps=2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("nothing to do: the run is already at step 4 (train.steps=2); it is past that"), out
    assert out.count("\n") == 1 and "another train.out" in out
    assert {p.name: p.read_bytes() for p in (run / "config.toml", run / "metrics.jsonl")} == before


def test_eval_of_a_run_trained_again_from_scratch_does_not_merge_the_old_models_tasks(tmp_path, text, capsys):
    """RUN/eval/step_4.json scored the first model; the run is trained again from scratch (its
    checkpoints moved aside): another model at the same path and step. Its evaluation must not
    keep the first model's tasks beside its own."""
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("To be, or not to be, that is the question. " * 4)
    b.write_text("Whether 'tis nobler in the mind to suffer the slings. " * 4)
    cfg = _recipe(tmp_path, text)
    assert main(["train", str(cfg), "--quiet"]) == 0
    run = tmp_path / "run"
    assert main(["eval", str(run), "--tasks", f"ppl:{a}", "--quiet", "--threads", "1"]) == 0
    assert main(["train", str(cfg), "--quiet", "--set", "train.resume=false", "--set", "train.seed=7"]) == 0
    capsys.readouterr()
    assert main(["eval", str(run), "--tasks", f"ppl:{b}", "--quiet", "--threads", "1"]) == 0
    doc = json.loads((run / "eval" / "step_0000004.json").read_text())
    assert list(doc["results"]) == ["ppl:b.txt"], doc["results"]
    moved = json.loads((run / "previous-1" / "eval" / "step_0000004.json").read_text())
    assert list(moved["results"]) == ["ppl:a.txt"]  # the first model's scores went with its record
