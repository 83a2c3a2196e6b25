"""Run it twice: a second `pretrain train` / `sample` / `export` over a run directory that someone
edited, damaged or handed over. Each case must end in one line naming the file and the reason,
never a traceback, and never cost memory the checkpoint on disk does not account for.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pretrain import config as cfgmod
from pretrain.errors import UserError
from pretrain.train import checkpoint as ck
from pretrain.train.config import RunConfig
from pretrain.train.testing import tiny_config
from pretrain.train.trainer import Trainer

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("restore_torch_threads")


@pytest.fixture(scope="module")
def finished(tmp_path_factory, text):
    """A 10-step run with one checkpoint (step 10)."""
    run = tmp_path_factory.mktemp("finished") / "run"
    Trainer(tiny_config(run, text, "train.steps=10", "checkpoint.every=10"), quiet=True).fit()
    return run


def _copy(finished: Path, tmp_path: Path) -> tuple[Path, Path]:
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    return run, run / "checkpoints" / "step_0000010"


def _edit_state(ckpt: Path, edit) -> None:
    """Change state_rank0.json and keep COMPLETE.json's size record true (a careful tamperer)."""
    path = ckpt / "state_rank0.json"
    state = json.loads(path.read_text())
    edit(state)
    text = json.dumps(state)
    path.write_text(text)
    marker = json.loads((ckpt / "COMPLETE.json").read_text())
    marker["files"]["state_rank0.json"] = len(text.encode())
    marker[ck.DIGEST]["state_rank0.json"] = ck.digest_file(path)  # its digest too
    (ckpt / "COMPLETE.json").write_text(json.dumps(marker))


def _set(keys: str, value):
    def edit(state):
        *path, last = keys.split(".")
        for k in path:
            state = state[k]
        if value is KeyError:
            del state[last]
        else:
            state[last] = value
    return edit


@pytest.mark.parametrize("keys,value,why", [
    ("step", "abc", "step"),
    ("step", -5, "step"),
    ("step", 7, "step"),  # not the step its directory is named for
    ("loader", KeyError, "loader"),
    ("loader.index", "x", "loader"),
    ("rng", KeyError, "rng"),
    ("rng.torch", "AAAA", "rng"),
    ("scaler", {"scale": "x"}, "scaler"),
    ("spikes", {"history": "abc"}, "spikes"),
])
def test_a_tampered_state_file_is_one_line_on_resume(finished, tmp_path, text, keys, value, why):
    run, ckpt = _copy(finished, tmp_path)
    _edit_state(ckpt, _set(keys, value))
    with pytest.raises(UserError) as e:
        Trainer(tiny_config(run, text, "train.steps=12", "checkpoint.every=10"), quiet=True)
    msg = str(e.value)
    assert "\n" not in msg and "state_rank0.json" in msg and why in msg


def _run_cli(*args: str, limit_bytes: int = 3 * 1024**3) -> subprocess.CompletedProcess:
    """`python -m pretrain ARGS` in a child whose address space is capped (a hostile config must not
    reach for memory the checkpoint does not hold)."""
    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, "-m", "pretrain", *args], capture_output=True, text=True,
                          timeout=120, preexec_fn=cap, env=env)


@pytest.mark.parametrize("command,old,new", [
    ("sample", "n_layers = 2", "n_layers = 200000"),  # 9.2 B parameters: 37 GB before the load failed
    ("export", "d_model = 64", "d_model = 6400000"),  # 6.6 GB for the embedding alone
])
def test_an_edited_config_toml_is_refused_before_allocating(finished, tmp_path, command, old, new):
    run, _ = _copy(finished, tmp_path)
    cfg = run / "config.toml"
    assert old in cfg.read_text()
    cfg.write_text(cfg.read_text().replace(old, new))
    args = ["--prompt", "x", "--tokens", "2"] if command == "sample" else ["-o", str(tmp_path / "m.st")]
    r = _run_cli(command, str(run), *args)
    assert r.returncode == 2, r.stderr[-2000:]
    last = r.stderr.strip().splitlines()
    assert len(last) == 1 and "config.toml" in last[0] and "Traceback" not in r.stderr, r.stderr[-2000:]


def test_a_config_toml_from_another_run_names_the_tensor(finished, tmp_path):
    from pretrain.train.runs import load_run_model

    run, _ = _copy(finished, tmp_path)
    cfg = run / "config.toml"
    cfg.write_text(cfg.read_text().replace("d_ff = 176", "d_ff = 180"))  # small: passes the size bound
    with pytest.raises(UserError, match=r"config.toml: describes layers.0.mlp.\w+.weight as \(\d+, \d+\)"):
        load_run_model(run)


def test_a_context_longer_than_the_checkpoint_is_refused_before_its_rotary_tables(finished, tmp_path):
    """model.seq_len is no weight, so the parameter bound let 10^12 through to the rotary tables:
    4 TB asked for, a traceback (10^7: sample ran in 2.2 GB instead of 0.33). Now bounded as an HF
    folder's context is: one byte of checkpoint per number of the tables."""
    import re

    from pretrain.train.runs import load_run_model

    run, _ = _copy(finished, tmp_path)
    cfg = run / "config.toml"
    text = cfg.read_text()
    assert re.search(r"(?m)^seq_len = \d+$", text)
    cfg.write_text(re.sub(r"(?m)^seq_len = \d+$", "seq_len = 1000000000000", text))
    with pytest.raises(UserError, match=r"config.toml: model.seq_len 1,000,000,000,000 needs rotary tables"):
        load_run_model(run)


def test_a_resume_under_another_recipe_is_refused_or_said(finished, tmp_path, text, capsys):
    """The same command resumes; another learning rate or global batch is refused in one line; with
    train.allow_changes it continues and the record says what changed, where; a longer run is said."""
    from pretrain.train.metrics import read_metrics

    run, _ = _copy(finished, tmp_path)
    assert Trainer(tiny_config(run, text, "train.steps=10", "checkpoint.every=10"), quiet=True).step == 10
    same = ("train.steps=12", "checkpoint.every=10")  # steps to train: a finished run refuses nothing
    for change, key in (("optim.lr=1e-2", "optim.lr 0.003 -> 0.01"),
                        ("data.batch_size=8", "global_batch 4 -> 8"),
                        ("schedule.kind=wsd", "schedule.kind 'cosine' -> 'wsd'")):
        with pytest.raises(UserError) as e:
            Trainer(tiny_config(run, text, *same, change), quiet=True)
        assert "\n" not in str(e.value) and key in str(e.value) and "train.allow_changes" in str(e.value)
        assert "to continue this run under the change from step 10, add --set train.allow_changes=true" in \
            str(e.value)
    # the same global batch in two micro-batches: a text loader would read other windows from here on
    with pytest.raises(UserError, match=r"\(micro_batch_rows 4 -> 2\): .*train.grad_accum"):
        Trainer(tiny_config(run, text, *same, "data.batch_size=2", "train.grad_accum=2"), quiet=True)
    # a layout with the same global batch is a reshard, not a change (tests/test_parallel_restart.py)
    t = Trainer(tiny_config(run, text, "train.steps=12", "checkpoint.every=10", "optim.lr=1e-2",
                            "train.allow_changes=true"), quiet=True)
    t.fit()
    assert "changed since step 10: train.steps 10 -> 12, optim.lr 0.003 -> 0.01" in capsys.readouterr().err
    _, events = read_metrics(run / "metrics.jsonl")
    change = [e for e in events if e["event"] == "config_change"]
    assert change == [{"event": "config_change", "step": 10,
                       "changes": {"train.steps": [10, 12], "optim.lr": [0.003, 0.01]}}]
    # the checkpoint now carries the new recipe: the old one is the change
    with pytest.raises(UserError, match="optim.lr 0.01 -> 0.003"):
        Trainer(tiny_config(run, text, "train.steps=14", "checkpoint.every=10"), quiet=True)


def test_a_finished_run_rerun_under_another_recipe_says_the_change_is_not_applied(finished, tmp_path, text,
                                                                                  capsys):
    """A finished run rerun with another optim.lr trains nothing, so nothing is trained under the
    change: it was refused as "another recipe" (left by session 13). Now it is the finished run's
    rerun (exit 0, nothing written), saying the change is not applied and how to continue under it;
    done that way (more steps, allow_changes), the next step trains at the new rate."""
    from pretrain.cli import main
    from pretrain.train.metrics import read_metrics

    run, _ = _copy(finished, tmp_path)
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    recipe = tmp_path / "run.toml"
    cfg = tiny_config(run, text, "train.steps=10", "checkpoint.every=10", "optim.lr=1e-2")
    recipe.write_text(cfgmod.dumps(cfg))
    assert main(["train", str(recipe), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "nothing is trained (" in err, err
    assert ("optim.lr 0.003 -> 0.01 is not applied (no step is trained): to continue this run under it, "
            "raise train.steps and add --set train.allow_changes=true") in err, err
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before
    t = Trainer(tiny_config(run, text, "train.steps=12", "checkpoint.every=10", "optim.lr=1e-2",
                            "train.allow_changes=true"))
    t.fit()
    err = capsys.readouterr().err
    # the cosine schedule over 12 steps at the new peak: lr_at is the independent truth, step 11 trains at it
    from pretrain.train.optim import lr_at

    old, new = lr_at(9, 10, 3e-3, t.cfg.schedule), lr_at(10, 12, 1e-2, t.cfg.schedule)
    assert f"(lr {old:.2e} at step 10, {new:.2e} at step 11 under the new schedule)" in err, err
    steps = {r["step"]: r["lr"] for r in read_metrics(run / "metrics.jsonl")[0]}
    assert f"{steps[10]:.2e}" == f"{old:.2e}" and steps[11] == pytest.approx(new)


def test_a_hf_config_json_larger_than_its_weights_is_refused_at_once(finished, tmp_path, text):
    """A downloaded folder's config.json is as hostile as a run's config.toml: 200,000 layers beside
    a 0.5 MB model.safetensors ran for minutes building modules (killed at 120 s) before reading any."""
    import time

    from pretrain.train.hf_io import export_hf

    folder = tmp_path / "hf"
    export_hf(finished, folder)
    cfg = folder / "config.json"
    cfg.write_text(cfg.read_text().replace('"num_hidden_layers": 2', '"num_hidden_layers": 200000'))
    t0 = time.perf_counter()
    with pytest.raises(UserError, match=r"config.json describes [\d,]+ parameters, but the weight files"):
        Trainer(cfgmod.load(RunConfig, None, [f"model.init_from={folder}", f"train.out={tmp_path / 'run'}",
                                              f"data.path={text}", "train.steps=0", "precision.dtype=fp32"]),
                quiet=True)
    assert time.perf_counter() - t0 < 10


def test_an_export_over_a_folder_removes_only_its_own_stale_shards(finished, tmp_path):
    """A rerun of `export --format hf` with fewer shards drops the earlier export's shards and index,
    and nothing else: a user's model_best.safetensors beside it was deleted (glob model*.safetensors*)."""
    from pretrain.train.hf_io import export_hf

    out = tmp_path / "hf"
    export_hf(finished, out, max_shard_bytes=100_000)  # the 0.5 MB model in several shards
    shards = sorted(p.name for p in out.glob("model-*-of-*.safetensors"))
    assert len(shards) > 1 and (out / "model.safetensors.index.json").is_file()
    theirs = ["model_best.safetensors", "model-v1.safetensors", "model.safetensors.bak"]
    for name in theirs:
        (out / name).write_text("not ours")
    export_hf(finished, out)  # one file now
    left = sorted(p.name for p in out.iterdir() if "safetensors" in p.name)
    assert left == sorted(["model.safetensors", *theirs])


@pytest.mark.parametrize("fmt,make", [("safetensors", "dir"), ("hf", "file")])
def test_export_to_the_wrong_kind_of_path_is_one_line(finished, tmp_path, capsys, fmt, make):
    """-o an existing folder for the one-file format, or an existing file for the folder format: one
    line naming the path, before the model is read (it was IsADirectoryError / NotADirectoryError)."""
    from pretrain.cli import main

    target = tmp_path / "target"
    target.mkdir() if make == "dir" else target.write_text("mine")
    assert main(["export", str(finished), "--format", fmt, "-o", str(target)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(target) in err[0] and "Error:" not in err[0], err
    assert (target.is_dir() and not any(target.iterdir())) if make == "dir" else target.read_text() == "mine"


@pytest.mark.parametrize("where", [".", "checkpoints", "hf"])
def test_an_hf_export_into_its_own_run_directory_is_refused(finished, capsys, where):
    """`export RUN --format hf -o RUN` (or a folder inside it) put config.json, weights and tokenizer
    files beside config.toml and the checkpoints: a folder both a run and a model, which `eval`
    and `model.init_from` then read as one or the other. One line, nothing written."""
    from pretrain.cli import main

    target = finished / where
    before = sorted(p.relative_to(finished) for p in finished.rglob("*"))
    assert main(["export", str(finished), "--format", "hf", "-o", str(target)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "run directory" in err[0] and "Error:" not in err[0], err
    assert sorted(p.relative_to(finished) for p in finished.rglob("*")) == before


def test_eval_output_a_folder_or_a_damaged_earlier_result(finished, tmp_path, capsys):
    """`eval --output` an existing folder: one line before the model loads (it was IsADirectoryError
    after scoring, with a stray temporary file in the working directory). An earlier result file that
    is damaged (its results a list) is replaced, not merged with a traceback."""
    from pretrain.cli import main

    text = tmp_path / "valid.txt"
    text.write_text("To be, or not to be, that is the question.\n" * 4)
    folder = tmp_path / "folder"
    folder.mkdir()
    assert main(["eval", str(finished), "--tasks", f"ppl:{text}", "--output", str(folder), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(folder) in err[0], err
    assert not list(folder.iterdir()) and not list(tmp_path.glob(".*.tmp"))
    out = tmp_path / "res.json"
    args = ["eval", str(finished), "--tasks", f"ppl:{text}", "--output", str(out), "--quiet"]
    assert main(args) == 0
    first = json.loads(out.read_text())
    out.write_text(json.dumps({**first, "results": [1], "tasks": "x"}))  # same model and settings
    assert main(args) == 0
    assert json.loads(out.read_text())["results"] == first["results"]


def test_rerunning_a_finished_run_says_there_is_nothing_to_train(finished, tmp_path, text, capsys):
    """The same command after the run ended: it resumed at the last step and printed nothing more, so
    a user could not tell a finished run from one that failed to start."""
    from pretrain import config as cfgmod
    from pretrain.cli import main

    run, _ = _copy(finished, tmp_path)
    recipe = tmp_path / "run.toml"
    recipe.write_text(cfgmod.dumps(tiny_config(run, text, "train.steps=10", "checkpoint.every=10")))
    assert main(["train", str(recipe), "--quiet"]) == 0
    out = capsys.readouterr()
    said = "nothing to do: the run is already at step 10 (train.steps=10); raise train.steps to go on"
    assert f"{said}; run directory {run}" in out.out
    # its first word on stderr says so too: no "resuming", which reads as training about to start
    first = out.err.splitlines()[0]
    assert first.startswith("already complete: the newest checkpoint is step 10 and train.steps=10; "
                            "nothing is trained ("), out.err
    assert "resuming" not in out.err
    # and it stops there: no model summary after it, as if training were about to start
    assert "parameters," not in out.err and "tokens/step" not in out.err, out.err


def test_the_demo_shows_no_earlier_step_line_as_progress(finished, tmp_path):
    """The demo's live line comes from metrics.jsonl: on a rerun of a finished run it showed the
    earlier run's "step 10/10" before train said it resumed (and trained nothing)."""
    from pretrain.demo import _metric_lines, _training_line

    metrics = _copy(finished, tmp_path)[0] / "metrics.jsonl"
    assert _training_line(metrics, 10).startswith("step 10/10  loss ")  # a first run's own lines
    before = _metric_lines(metrics)
    assert _training_line(metrics, 10, before) == ""  # nothing written by this stage yet
    with metrics.open("a") as f:
        f.write(json.dumps({"step": 11, "loss": 2.5, "tokens_per_s": 100.0}) + "\n")
    assert _training_line(metrics, 12, before).startswith("step 11/12  loss 2.500")


@pytest.mark.parametrize("bad", ["[" * 100_000 + "]" * 100_000, "[1, 2]", "7"])
def test_a_hostile_metrics_line_is_skipped_on_resume_and_in_the_report(finished, tmp_path, text, bad):
    """metrics.jsonl travels with a run directory: a line nested 100,000 deep raised RecursionError on
    resume (its rewind) and in `pretrain report`; a line that is JSON but not an object, KeyError or
    AttributeError. Such a line is skipped like a torn one; the good lines stay."""
    from pretrain.report_run import read_metrics as report_metrics
    from pretrain.train.metrics import read_metrics

    run, _ = _copy(finished, tmp_path)
    with open(run / "metrics.jsonl", "a") as f:
        f.write(bad + "\n")
    steps, _ = read_metrics(run / "metrics.jsonl")
    assert [r["step"] for r in steps] == list(range(1, 11))
    assert [r["step"] for r in report_metrics(run)[0]] == list(range(1, 11))
    t = Trainer(tiny_config(run, text, "train.steps=12", "checkpoint.every=10"), quiet=True)
    t.fit()  # rewinds metrics.jsonl to step 10, then appends 11 and 12
    assert [r["step"] for r in read_metrics(run / "metrics.jsonl")[0]] == list(range(1, 13))


def test_a_rerun_of_a_finished_run_writes_nothing(tmp_path, text):
    """A rerun with nothing to train added an empty TensorBoard event file and a `resume` event at the
    last step each time (the report showed it as a restart). DESIGN.md: one value per step in
    metrics.jsonl and TensorBoard; checked with TensorBoard's own reader."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = tmp_path / "run"
    args = (run, text, "train.steps=3", "checkpoint.every=3", "log.tensorboard=true")
    Trainer(tiny_config(*args), quiet=True).fit()
    before = {p.name: p.read_bytes() for p in run.rglob("*") if p.is_file() and "checkpoints" not in p.parts}
    for _ in range(2):
        assert Trainer(tiny_config(*args), quiet=True).fit() == []
    after = {p.name: p.read_bytes() for p in run.rglob("*") if p.is_file() and "checkpoints" not in p.parts}
    assert after == before
    lines = (run / "metrics.jsonl").read_text().splitlines()
    assert not any(json.loads(x).get("event") == "resume" for x in lines)
    acc = EventAccumulator(str(run / "tensorboard"))
    acc.Reload()
    assert [e.step for e in acc.Scalars("train/loss")] == [1, 2, 3]


@pytest.mark.parametrize("link", ["step", "file"])
def test_a_checkpoint_linking_out_of_its_run_is_refused_in_one_line(finished, tmp_path, text, link):
    """A run directory from someone else is hostile (docs/security.md): `step_X -> elsewhere` or a
    shard inside it linking out was followed by a resume, eval, sample and export."""
    from pretrain.train.runs import load_run_model

    run, ckpt = _copy(finished, tmp_path)
    outside = tmp_path / "elsewhere"
    shutil.move(ckpt, outside)
    if link == "step":
        ckpt.symlink_to(outside, target_is_directory=True)
        named = str(ckpt)
    else:
        shutil.copytree(outside, ckpt)
        shard = next(p for p in ckpt.iterdir() if p.suffix == ".distcp")
        shard.unlink()
        shard.symlink_to(outside / shard.name)
        named = str(shard)
    cfg = tiny_config(run, text, "train.steps=10", "checkpoint.every=10")
    for load in (lambda: load_run_model(run), lambda: load_run_model(run, step=10),
                 lambda: Trainer(cfg, quiet=True)):
        with pytest.raises(UserError) as e:
            load()
        said = str(e.value)
        assert said.startswith(f"{named}: links outside ") and "refusing" in said and "\n" not in said


def test_a_link_inside_the_checkpoints_folder_is_still_read(finished, tmp_path):
    """What stays inside: `step_X -> step_X.real` next to it, as a user may arrange by hand."""
    from pretrain.train.runs import load_run_model

    run, ckpt = _copy(finished, tmp_path)
    shutil.move(ckpt, ckpt.with_name("real"))
    ckpt.symlink_to(ckpt.with_name("real"), target_is_directory=True)
    assert load_run_model(run)[2] == 10


def test_a_run_directorys_config_does_not_choose_where_we_write_or_read(finished, tmp_path, text, capsys):
    """A run directory handed over (docs/security.md: hostile) whose config.toml sends train.out to
    another user's run and checkpoint.storage to another folder: `train RUN/config.toml` resumed
    there, sample/eval/export read there. Refused in one line naming each key and both ways on,
    unless the user puts the key on the command line; inside the run directory it is still read."""
    from pretrain.cli import main
    from pretrain.train.runs import load_run_model

    run, _ = _copy(finished, tmp_path)
    victim, elsewhere = tmp_path / "victim", tmp_path / "elsewhere"
    shutil.copytree(run / "checkpoints", elsewhere)  # readable there: the refusal is the rule, not luck
    saved = tiny_config(victim, text, "train.steps=10", f"checkpoint.storage={elsewhere}")
    (run / "config.toml").write_text(cfgmod.dumps(saved))
    capsys.readouterr()
    assert main(["train", str(run / "config.toml"), "--quiet"]) == 2
    said = capsys.readouterr().err.strip()
    assert "\n" not in said and said.startswith(f"pretrain train: error: {run / 'config.toml'}: a run "
                                                "directory's saved config does not choose where"), said
    assert f"train.out = '{victim}' is not this run directory: --set train.out={run} continues" in said
    assert f"checkpoint.storage = '{elsewhere}' is outside {run}: --set checkpoint.storage= uses" in said
    assert f"{run / 'checkpoints'}, --set" in said  # a resume from there
    shutil.move(run / "checkpoints", tmp_path / "aside")  # none there: the first way on starts over
    assert main(["train", str(run / "config.toml"), "--quiet"]) == 2
    assert f"{run / 'checkpoints'} (no checkpoint there: a fresh start), --set" in capsys.readouterr().err
    shutil.move(tmp_path / "aside", run / "checkpoints")
    assert not victim.exists()
    for args in (["sample", str(run), "--tokens", "2"], ["export", str(run), "-o", str(tmp_path / "m.st")],
                 ["eval", str(run), "--tasks", f"ppl:{text}"]):
        assert main(args) == 2
        err = capsys.readouterr().err
        assert f"checkpoint.storage = '{elsewhere}' is outside the run directory" in err, (args, err)
        assert f"pass --checkpoints {elsewhere} to read them there" in err
    assert load_run_model(run, storage=str(elsewhere))[2] == 10  # named by the user: read there
    # on the command line: the user's choice (here: continue in place, checkpoints in the run)
    assert main(["train", str(run / "config.toml"), "--quiet", f"--set=train.out={run}",
                 "--set=checkpoint.storage="]) == 0
    assert "already complete: the newest checkpoint is step 10" in capsys.readouterr().err
    inside = tiny_config(run, text, "train.steps=10", f"checkpoint.storage={run / 'checkpoints'}")
    (run / "config.toml").write_text(cfgmod.dumps(inside))  # a storage inside the run is its own
    assert load_run_model(run)[2] == 10
    assert main(["train", str(run / "config.toml"), "--quiet"]) == 0


def test_a_relative_storage_names_the_same_checkpoints_from_any_directory(finished, tmp_path, text, capsys,
                                                                          monkeypatch):
    """checkpoint.storage = "run/ckpts" given from the working directory (a recipe, --set) is saved in
    RUN/config.toml relative to the run ("ckpts"), and read so from any other directory: sample, eval,
    export, report and a resume find the run's checkpoints instead of calling them "outside the run"
    (or looking under the working directory). Until session 10 the saved value was read from the cwd."""
    from pretrain.cli import main

    run, _ = _copy(finished, tmp_path)
    shutil.move(run / "checkpoints", run / "ckpts")  # where this run keeps them
    monkeypatch.chdir(tmp_path)
    Trainer(tiny_config("run", text, "train.steps=11", "checkpoint.every=1", "checkpoint.storage=run/ckpts"),
            quiet=True).fit()  # resumes from step 10 (run/ckpts from here), saves step 11 there
    assert cfgmod.load(RunConfig, run / "config.toml").checkpoint.storage == "ckpts"
    assert ck.latest_complete(run / "ckpts")[0] == 11
    (run / "ckpts" / ck.INTERVAL).write_text(json.dumps({"save_interval": 7, "save_s": 0.5, "step_s": 0.25}))
    held_out = tmp_path / "held_out.txt"  # a few lines: the point is which checkpoint is read
    held_out.write_text(text.read_text()[:600])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    capsys.readouterr()
    for args in (["sample", str(run), "--tokens", "2"], ["export", str(run), "-o", str(tmp_path / "m.st")],
                 ["eval", str(run), "--tasks", f"ppl:{held_out}"]):
        assert main(args) == 0, (args, capsys.readouterr().err)
    assert f"{run / 'eval' / 'step_0000011.json'}" in capsys.readouterr().out  # the newest, in RUN/ckpts
    text_of = (run / "config.toml").read_text()
    (run / "config.toml").write_text(text_of.replace("every = 1\n", "every = 0\n", 1))  # Young's rule
    assert main(["report", str(run), "-o", str(tmp_path / "r.html")]) == 0
    assert " = 7 steps (save 0.5 s, step 0.25 s)" in (tmp_path / "r.html").read_text()  # from RUN/ckpts
    # a resume from here with train.out named on the command line (still its way; without it, the
    # saved "run" names RUN since session 11: the next test); the storage is the run's own, so the
    # finished run is found, not started over
    assert main(["train", str(run / "config.toml"), "--quiet", f"--set=train.out={run}"]) == 0
    assert "already complete: the newest checkpoint is step 11" in capsys.readouterr().err
    assert list(elsewhere.iterdir()) == [] and not (run / "checkpoints").exists()
    # a run saved before the rule kept "run/ckpts" (from tmp_path): from there it is not taken for an
    # empty RUN/run/ckpts (a fresh start, in train's case) but named, with the way to read it
    (run / "config.toml").write_text((run / "config.toml").read_text().replace('storage = "ckpts"',
                                                                                 'storage = "run/ckpts"'))
    monkeypatch.chdir(tmp_path)
    assert main(["sample", str(run), "--tokens", "2"]) == 2
    assert "names a folder holding step 11" in capsys.readouterr().err
    assert main(["train", str(run / "config.toml"), "--quiet", f"--set=train.out={run}"]) == 2
    assert "--set checkpoint.storage=run/ckpts resumes from there" in capsys.readouterr().err
    assert not (run / "run").exists()


def test_a_run_resumes_through_its_config_from_any_directory(finished, tmp_path, text, capsys, monkeypatch):
    """train.out = "runs/x" and data.path = "data/text.txt", typed in proj/: `pretrain train
    proj/runs/x/config.toml` from another directory continues the run (its train.out names it: the
    run's path ends with it) with the data read from proj/, and the saved config keeps both values,
    so a third directory finds them too. Until session 11 it was refused (--set train.out=RUN). A
    teammate's copy under another name is still refused, in one line with both ways on."""
    from pretrain.cli import main

    proj = tmp_path / "proj"
    (proj / "data").mkdir(parents=True)
    shutil.copy(text, proj / "data" / "text.txt")
    run = proj / "runs" / "x"
    shutil.copytree(finished, run)
    saved = cfgmod.load(RunConfig, run / "config.toml")
    saved.train.out, saved.data.path = "runs/x", "data/text.txt"  # as trained from proj/
    (run / "config.toml").write_text(cfgmod.dumps(saved))
    for i, where in enumerate((tmp_path / "elsewhere", tmp_path / "elsewhere" / "deeper")):
        where.mkdir()
        monkeypatch.chdir(where)
        capsys.readouterr()
        assert main(["train", str(run / "config.toml"), "--quiet", f"--set=train.steps={11 + i}",
                     "--set=checkpoint.every=1"]) == 0, capsys.readouterr().err
        assert f"resuming from step {10 + i} ({run / 'checkpoints'}" in capsys.readouterr().err
        again = cfgmod.load(RunConfig, run / "config.toml")
        assert (again.train.out, again.data.path) == ("runs/x", "data/text.txt")  # as saved, not as read
        assert ck.latest_complete(run / "checkpoints")[0] == 11 + i
    assert [p.name for p in (tmp_path / "elsewhere").iterdir()] == ["deeper"]
    assert main(["sample", str(run), "--tokens", "2"]) == 0  # and the readers, from there too
    copy = tmp_path / "bob" / "y"  # a teammate's copy under another name: its train.out names no path
    shutil.copytree(run, copy)
    assert main(["train", str(copy / "config.toml"), "--quiet", "--set=train.steps=13"]) == 2
    assert f"train.out = 'runs/x' is not this run directory: --set train.out={copy} continues it here" in (
        capsys.readouterr().err)
    # a data path given from here (relative to this directory): the config keeps this process's view
    # whole, train.out as seen from here too, so its relative paths keep one base
    shutil.copy(text, where / "t.txt")
    assert main(["train", str(run / "config.toml"), "--quiet", "--set=train.steps=13",
                 "--set=data.path=t.txt"]) == 0
    again = cfgmod.load(RunConfig, run / "config.toml")
    assert (again.train.out, again.data.path) == (str(run), "t.txt")
    # from a third directory that relative path names nothing, and the absolute train.out does not
    # tell where it was given from: said so (it was "data.path: text file not found: t.txt")
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["train", str(run / "config.toml"), "--quiet", "--set=train.steps=14"]) == 2
    assert (f"data.path = 't.txt' is relative to the directory the run was trained from, which its absolute "
            f"train.out does not tell, and not found from here ({tmp_path}): run the command from that "
            "directory, or --set data.path=PATH") in capsys.readouterr().err
    monkeypatch.chdir(where)  # from there it resumes, as before
    assert main(["train", str(run / "config.toml"), "--quiet", "--set=train.steps=14"]) == 0


def test_the_checkpoint_lines_on_the_terminal_are_words_matching_the_record(tmp_path, text, capsys):
    """`[checkpoint] step 20 blocking_s=0.027 path=... async=True` and `[checkpoint_complete] step 20
    saved_step=20 noticed_at=20` read as debug output to a newcomer (session 11): said in words, with
    the numbers metrics.jsonl records."""
    from pretrain.train.metrics import read_metrics

    run = tmp_path / "run"
    Trainer(tiny_config(run, text, "train.steps=2", "checkpoint.every=2")).fit()
    err = capsys.readouterr().err
    _, events = read_metrics(run / "metrics.jsonl")
    saved = next(e for e in events if e["event"] == "checkpoint")
    behind = "; written in the background" if saved.get("async") else ""
    assert (f"[checkpoint] step 2 -> {saved['path']} (training paused {saved['blocking_s']:.2f} s{behind})"
            in err), err
    assert ("[checkpoint] step 2 written in full" in err) == any(e["event"] == "checkpoint_complete"
                                                                  for e in events), err
    assert "blocking_s=" not in err and "noticed_at=" not in err
    # and the step lines' tokens per second with a thousands separator, as the demo and the report
    rates = [f"tok/s {r['tokens_per_s']:,.0f}  " for r in read_metrics(run / "metrics.jsonl")[0]]
    assert all(rate in err for rate in rates), err


def test_resume_false_over_checkpoints_says_where_they_went_and_how_to_go_on(finished, tmp_path, text,
                                                                              capsys):
    """`train.resume=false` into a run with checkpoints: the line said "held an earlier run with no
    checkpoint to resume", which was false, and not how to continue that run instead."""
    from pretrain.cli import main

    run, _ = _copy(finished, tmp_path)
    recipe = tmp_path / "run.toml"
    recipe.write_text(cfgmod.dumps(tiny_config(run, text, "train.steps=2", "checkpoint.every=10")))
    assert main(["train", str(recipe), "--quiet", "--set=train.resume=false"]) == 0
    err = capsys.readouterr().err
    assert (f"{run} held an earlier run (newest checkpoint: step 10), not resumed (train.resume=false): "
            f"its record moved to {run / 'previous-1'}. To continue that run instead: stop this one and "
            f"train with --set train.out={run / 'previous-1'} (without train.resume=false): it resumes there "
            "from step 10") in err, err
    assert ck.latest_complete(run / "checkpoints")[0] == 2
    again = Trainer(tiny_config(run / "previous-1", text, "train.steps=12", "checkpoint.every=10"),
                    quiet=True)
    assert again.resumed and again.step == 10  # as said


def test_steps_zero_says_the_model_was_saved_untrained(tmp_path, text, capsys):
    """`train.steps=0` builds the model and saves it (docs: for sample, eval, export); it said
    "nothing to do: the run is already at step 0", as if nothing had been written."""
    from pretrain.cli import main

    run = tmp_path / "run"
    recipe = tmp_path / "run.toml"
    recipe.write_text(cfgmod.dumps(tiny_config(run, text, "train.steps=0")))
    assert main(["train", str(recipe), "--quiet"]) == 0
    saved = ck.latest_complete(run / "checkpoints")
    assert saved[0] == 0
    assert (f"done: train.steps=0: the model is built and saved, untrained, as {saved[1]} (for `pretrain "
            f"sample`, `eval` or `export`); raise train.steps to train it; run directory {run}"
            in capsys.readouterr().out)


def test_a_resume_from_train_stop_at_is_no_restart(tmp_path, text, capsys):
    """A run split with train.stop_at, then continued: the report counted the planned resume as a
    restart ("resumed once: at step 4"), as it would a crash. The stop writes a `stop_at` event, which
    the report reads; without it the same resume is a restart."""
    from pretrain.cli import main
    from pretrain.report_run import _resumes
    from pretrain.train.metrics import read_metrics

    run = tmp_path / "run"
    recipe = tmp_path / "run.toml"
    recipe.write_text(cfgmod.dumps(tiny_config(run, text, "train.steps=6", "checkpoint.every=2")))
    assert main(["train", str(recipe), "--quiet", "--set=train.stop_at=4"]) == 0
    assert ("done: step 4, loss " in (out := capsys.readouterr().out)
            and "(train.stop_at=4 of train.steps=6: the same command with a later train.stop_at, or without "
                "it, goes on)" in out), out
    assert main(["train", str(recipe), "--quiet"]) == 0
    _, events = read_metrics(run / "metrics.jsonl")
    assert [(e["event"], e["step"]) for e in events if e["event"] in ("stop_at", "resume")] == [
        ("stop_at", 4), ("resume", 4)]
    assert _resumes(events, 6) == []
    crashed = [e for e in events if e["event"] != "stop_at"]
    assert _resumes(crashed, 6) == ["resumed once: at step 4"]
    retried = [dict(e, attempts=2) if e["event"] == "resume" else e for e in events]  # the first failed
    assert _resumes(retried, 6) == ["resumed once: at step 4 (2 attempts)"]


def test_the_report_says_the_training_time_summed_over_the_commands(tmp_path, text, capsys):
    """`pretrain report` showed no training time. The last step line's elapsed_s is the run's, summed
    over its commands: more than the first command's (logged at its step 4), less than the two
    commands' wall time as measured here; a third command over the finished run trains nothing and
    is no command of the training."""
    import time

    from pretrain.cli import main
    from pretrain.report_run import run_section
    from pretrain.train.metrics import read_metrics

    run = tmp_path / "run"
    recipe = tmp_path / "run.toml"
    cfg = tiny_config(run, text, "train.steps=6", "checkpoint.every=2", "log.every=1")
    recipe.write_text(cfgmod.dumps(cfg))
    t0 = time.monotonic()
    assert main(["train", str(recipe), "--quiet", "--set=train.stop_at=4"]) == 0
    assert main(["train", str(recipe), "--quiet"]) == 0
    wall = time.monotonic() - t0
    assert main(["train", str(recipe), "--quiet"]) == 0  # "nothing to train"
    capsys.readouterr()
    steps, _ = read_metrics(run / "metrics.jsonl")
    at = {r["step"]: r["elapsed_s"] for r in steps if "loss" in r}
    assert 0 < at[4] < at[6] < wall
    said = dict(run_section(run, "r").facts)["trained"]
    assert at[6] < 60  # a tiny run trains in seconds, said to a tenth
    assert said == f"6 steps in {at[6]:.1f} s over 2 commands", said
    from pretrain.report_run import _duration  # a real run's: hours and minutes, not 11,549.0 s
    assert (_duration(3 * 3600 + 12 * 60 + 29), _duration(4 * 60 + 5)) == ("3 h 12 min", "4 min 05 s")


def test_a_fresh_start_over_a_storage_folder_with_checkpoints_is_refused(tmp_path, text):
    """checkpoint.storage a folder, train.resume=false: only RUN/checkpoints is moved aside, so the new
    run saved beside the earlier run's checkpoints (its step 2 beside their step 4) and the next rerun
    resumed the earlier run. Refused in one line before anything moves, as object storage was."""
    run, store = tmp_path / "run", tmp_path / "store"
    over = ("checkpoint.every=2", f"checkpoint.storage={store}")
    Trainer(tiny_config(run, text, "train.steps=4", *over), quiet=True).fit()
    with pytest.raises(UserError, match=rf"^{store} holds checkpoints of an earlier run \(newest: step 4\) "
                                        r"and this one starts fresh \(train.resume=false\)"):
        Trainer(tiny_config(run, text, "train.steps=2", "train.resume=false", *over), quiet=True)
    assert not (run / "previous-1").exists()
    assert [s for s, _, ok in ck.list_checkpoints(store) if ok] == [2, 4]


def test_a_bad_layout_is_refused_before_the_process_group(tmp_path, text, monkeypatch):
    """Config checks run before the rendezvous: a layout that does not fit torchrun's world size was
    refused only after every rank had joined the process group (a rank of another node not started
    yet kept the others waiting up to parallel.timeout_s for a config every rank refuses)."""
    import socket

    import torch.distributed as dist

    with socket.socket() as s:  # a port nobody listens on: the rendezvous could only wait
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    cfg = tiny_config(tmp_path / "run", text, "parallel.dp_shard=3", "parallel.timeout_s=3")
    with pytest.raises(UserError, match=r"= 3, but the world size is 2"):
        Trainer(cfg, quiet=True)
    assert not dist.is_initialized()


def test_a_resume_under_the_same_config_says_it_in_one_line(tmp_path, text, capsys):
    """Each resume reprinted the whole "config: N settings differ from the defaults" block, the same
    lines each time. Under the config RUN/config.toml holds (the last command's) it is one line; a
    resume under another config (here a later train.stop_at) still prints the block."""
    from pretrain.cli import main

    run = tmp_path / "run"
    recipe = tmp_path / "run.toml"
    recipe.write_text(cfgmod.dumps(tiny_config(run, text, "train.steps=4", "checkpoint.every=2")))
    assert main(["train", str(recipe), "--set=train.stop_at=2"]) == 0
    first = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith(("config:", "  "))]
    assert first[0].startswith("config: ") and "settings differ from the defaults" in first[0]
    assert "  train.stop_at = 2" in first and len(first) > 5, first
    for argv in ([str(recipe), "--set=train.stop_at=2"], [str(run / "config.toml")]):  # a rerun, twice
        assert main(["train", *argv]) == 0
        said = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith(("config:", "  "))]
        assert said == [f"config: as the run's last command had it, resumed at step 2 (full config: "
                        f"{run}/config.toml)"], said
    assert main(["train", str(recipe)]) == 0  # on to train.steps: another config, the block
    said = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith(("config:", "  "))]
    assert "settings differ from the defaults" in said[0], said
    assert said[1:] == [ln for ln in first[1:] if ln != "  train.stop_at = 2"], (first, said)
