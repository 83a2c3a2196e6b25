"""Evaluations during training: `log.eval_tasks` events in metrics.jsonl and TensorBoard, equal to
`pretrain eval` of the checkpoint saved at the same step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import data_file

torch = pytest.importorskip("torch")


def test_eval_tasks_events_match_offline_eval(tmp_path, text, restore_torch_threads):
    from pretrain.eval.harness import evaluate
    from pretrain.eval.lm import from_run
    from pretrain.eval.tasks import load_task
    from pretrain.train.metrics import read_metrics
    from pretrain.train.testing import tiny_config
    from pretrain.train.trainer import Trainer

    bench = data_file("benchmarks")
    sample = tmp_path / "sample.txt"
    sample.write_text(Path(text).read_text()[:2000])
    run = tmp_path / "run"
    cfg = tiny_config(run, text, "train.steps=10", "model.seq_len=64", "log.tensorboard=true",
                      f"log.eval_tasks=copa,ppl:{sample}", "log.eval_tasks_every=5", "log.eval_tasks_limit=8",
                      f"log.eval_benchmarks={bench}")
    Trainer(cfg, quiet=True).fit()
    _, events = read_metrics(run / "metrics.jsonl")
    ev = [e for e in events if e["event"] == "eval_tasks"]
    assert [e["step"] for e in ev] == [5, 10]
    assert set(ev[-1]["tasks"]) == {"copa", "ppl:sample.txt"}
    # the live model at step 10 scores what the step-10 checkpoint scores offline
    model, step = from_run(run, 10)
    offline = evaluate(model, load_task("copa", bench), limit=8)
    assert ev[-1]["tasks"]["copa"]["acc"] == offline["metrics"]["acc"]
    saved = json.loads((run / "eval" / "step_0000010.json").read_text())
    lls = [x for e in saved["examples"]["copa"] for x in e["lls"]]
    assert lls == pytest.approx([x for e in offline["examples"] for x in e["lls"]], abs=1e-5)
    # TensorBoard has the curves
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run / "tensorboard"))
    acc.Reload()
    assert [s.step for s in acc.Scalars("eval/copa/acc")] == [5, 10]
    assert "eval/ppl:sample.txt/bits_per_byte" in acc.Tags()["scalars"]


def test_sharded_layouts_are_refused(tmp_path, text):
    from pretrain.errors import UserError
    from pretrain.eval.callback import check_layout
    from pretrain.train.parallel import dims_from_config
    from pretrain.train.testing import tiny_config

    cfg = tiny_config(tmp_path, text, "log.eval_tasks=copa", "parallel.dp_shard=2")
    with pytest.raises(UserError, match="eval_tasks"):
        check_layout(cfg, dims_from_config(cfg.parallel))
    cfg = tiny_config(tmp_path, text, "log.eval_tasks=copa", "parallel.dp_replicate=2")
    check_layout(cfg, dims_from_config(cfg.parallel))
