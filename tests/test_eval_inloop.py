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
    assert {k.split("/")[0] for k in ev[-1] if "/" in k} == {"copa", "ppl:sample.txt"}
    # the live model at step 10 scores what the step-10 checkpoint scores offline
    model, step = from_run(run, 10)
    offline = evaluate(model, load_task("copa", bench), limit=8)
    assert ev[-1]["copa/acc"] == offline["metrics"]["acc"]
    saved = json.loads((run / "eval" / "step_0000010.json").read_text())
    lls = [x for e in saved["examples"]["copa"] for x in e["lls"]]
    assert lls == pytest.approx([x for e in offline["examples"] for x in e["lls"]], abs=1e-5)
    # TensorBoard has the curves
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run / "tensorboard"))
    acc.Reload()
    assert [s.step for s in acc.Scalars("eval/copa/acc")] == [5, 10]
    assert "eval/ppl:sample.txt/bits_per_byte" in acc.Tags()["scalars"]
    # and `pretrain report` draws the curves and tabulates the result files
    from pretrain.report_run import run_section

    body = run_section(run, "run").body
    assert "in-loop evaluations" in body and "step_0000010.json" in body and "acc_norm" in body
    assert saved["tasks"]["copa"]["in_loop"] == {"precision": "fp32"}
    assert "training loop (log.eval_tasks; the live model in fp32): copa, ppl:sample.txt" in body


def test_pretrain_eval_names_the_in_loop_scores_it_replaces(tmp_path, text, restore_torch_threads, capsys):
    """The final `pretrain eval` of the step the trainer evaluated (the demo's step 8) replaces the
    in-loop scores: it says so with both numbers, not "scored again" (that is for a rerun of the
    same command); a second run of the command then takes the checkpoint's score from the file."""
    from pretrain.cli import main
    from pretrain.train.testing import tiny_config
    from pretrain.train.trainer import Trainer

    sample = tmp_path / "sample.txt"
    sample.write_text(Path(text).read_text()[:1500])
    run = tmp_path / "run"
    cfg = tiny_config(run, text, "train.steps=4", "model.seq_len=32", "precision.dtype=bf16",
                      f"log.eval_tasks=ppl:{sample}", "log.eval_tasks_every=4", "log.eval_tasks_limit=0")
    Trainer(cfg, quiet=True).fit()
    inloop = json.loads((run / "eval" / "step_0000004.json").read_text())
    assert inloop["tasks"]["ppl:sample.txt"]["in_loop"] == {"precision": "bf16"}
    argv = ["eval", str(run), "--tasks", f"ppl:{sample}", "--quiet"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    final = json.loads((run / "eval" / "step_0000004.json").read_text())
    before, now = (d["results"]["ppl:sample.txt"]["bits_per_byte"] for d in (inloop, final))
    assert "scored again" not in err and "in_loop" not in final["tasks"]["ppl:sample.txt"]
    assert (f"replaced the in-loop scores of step 4 in {run / 'eval' / 'step_0000004.json'} (the live "
            "model during training, in bf16; these are the checkpoint's, in fp32") in err
    assert f"ppl:sample.txt bits_per_byte {before:.4f} -> {now:.4f}" in err
    from pretrain.report_run import eval_table

    assert "training loop" in eval_table(inloop) and "training loop" not in eval_table(final)
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "ppl:sample.txt: from" in err and "(same model, same settings)" in err and "in-loop" not in err
    assert json.loads((run / "eval" / "step_0000004.json").read_text()) == final


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


@pytest.mark.parametrize("spec, said", [("arc_eazy", "unknown task 'arc_eazy'"),
                                        ("ppl:nothere.txt", "nothere.txt")])
def test_a_task_that_cannot_run_stops_the_run_before_its_first_step(tmp_path, text, restore_torch_threads,
                                                                   spec, said):
    """`log.eval_tasks` with a typo'd task or a missing file trained until the first evaluation step
    (hours, in a real run), then stopped with no checkpoint; the trainer now says so at start, as
    `pretrain eval` does before it loads a model."""
    from pretrain.errors import UserError
    from pretrain.train.testing import tiny_config
    from pretrain.train.trainer import Trainer

    cfg = tiny_config(tmp_path / "run", text, "train.steps=4", f"log.eval_tasks={spec}",
                      "log.eval_tasks_every=2")
    with pytest.raises(UserError, match=said):
        Trainer(cfg, quiet=True)
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


@pytest.mark.slow
def test_two_gloo_ranks_equal_one_process(tmp_path, text):
    """Sharded evaluation: during training with two gloo ranks (dp_replicate=2) each rank scores half
    of the examples; the gathered per-example scores and metrics equal one process's offline
    evaluation of the checkpoint saved at that step."""
    from pretrain.eval.lm import from_run
    from pretrain.eval.suite import run_tasks
    from pretrain.train.metrics import read_metrics
    from pretrain.train.testing import run_distributed

    bench = data_file("benchmarks")
    sample = tmp_path / "sample.txt"
    sample.write_text(Path(text).read_text()[:3000])
    run = tmp_path / "run"
    specs = f"copa,winogrande,ppl:{sample}"
    over = ["train.steps=4", "model.seq_len=64", "parallel.dp_replicate=2", f"log.eval_tasks={specs}",
            "log.eval_tasks_every=4", "log.eval_tasks_limit=9", "log.eval_tasks_shots=1",
            f"log.eval_benchmarks={bench}", "checkpoint.every=4"]
    run_distributed("pretrain.train.testing.train_records", 2, str(run), str(text), over)
    _, events = read_metrics(run / "metrics.jsonl")
    ev = [e for e in events if e["event"] == "eval_tasks"]
    assert [e["step"] for e in ev] == [4]
    saved = json.loads((run / "eval" / "step_0000004.json").read_text())
    assert saved["settings"]["world_size"] == 2
    model, _ = from_run(run, 4)
    single, _ = run_tasks(model, specs.split(","), str(bench), shots=1, limit=9)
    for res in single:
        name = res["task"]
        got = saved["results"][name]
        for k, v in res["metrics"].items():
            assert got[k] == pytest.approx(v, rel=1e-6), (name, k)
        ours = saved["examples"][name]
        assert [e["i"] for e in ours] == [e["i"] for e in res["examples"]]
        flat = [x for e in ours for x in e.get("lls", [])]
        assert flat == pytest.approx([x for e in res["examples"] for x in e.get("lls", [])], abs=1e-5)


def test_the_in_loop_line_reads_a_hostile_file_safely():
    """RUN/eval/ travels with a run: a marker that is not ours prints "?" (no terminal escape from the
    file reaches stderr), and a result that is not a table of numbers shows the task's name alone."""
    from pretrain.eval.resume import replaced_in_loop

    old = {"tasks": {"a": {"in_loop": {"precision": "\x1b[2Jbf16"}}, "b": {"in_loop": "bf16"}},
           "results": {"a": [1], "b": {"acc": 0.5}}}
    doc = {"results": {"a": {"acc": 0.125}, "b": {"acc": 0.25}}, "model": {"step": 3}}
    said = replaced_in_loop(old, doc, ["a", "b"], Path("f.json"))
    assert "\x1b" not in said and "during training, in ?;" in said
    assert said.endswith(": a, b acc 0.5000 -> 0.2500")
