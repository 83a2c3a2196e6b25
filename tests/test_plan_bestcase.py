"""Small models against the published runs (session 13, plan/bestcase.py, bench/bench_plan_small.py):
the default plan for a 7B model on one node of A100s predicts an MFU no published run of a model
<= 14B on that GPU reached, and the plan says so beside it, with the measured range."""

from __future__ import annotations

import json
import statistics

import pytest

from pretrain.plan import bestcase
from pretrain.plan.heldout import held_out

A100_PEAK = 312e12


def _mfu(tokens_per_s_per_gpu: float, params: int, layers: int, hidden: int, seq: int) -> float:
    """MFU as PaLM counts it (6N + 12·L·h·s FLOPs per token), from a source's printed throughput."""
    return tokens_per_s_per_gpu * (6 * params + 12 * layers * hidden * seq) / A100_PEAK


def _fms() -> dict:
    return {" ".join(r.source.split()[3:6]): r for r in held_out() if r.source.startswith("fms-fsdp")}


def test_fms_fsdp_rows_give_the_mfu_their_sources_print():
    # the PyTorch blog (2024-03, Table 1) prints MFU 0.57 for 7B on A100s at ~3,700 tokens/s/GPU and
    # 0.37 on H100s at 7,500; fms-fsdp PR #33 "only 0.48 MFU" for 13B (README: 3,760 and 1,700
    # tokens/s/GPU on 128 A100s at 4,096 tokens). The blog's MFU runs 2-4% above PaLM's count.
    rows = _fms()
    assert rows["7B on 128"].measured_mfu == pytest.approx(0.57, abs=0.01)
    assert rows["13B on 128"].measured_mfu == pytest.approx(0.48, abs=0.005)
    assert rows["7B on 96"].measured_mfu == pytest.approx(0.37, abs=0.02)
    assert rows["7B on 128"].measured_mfu == pytest.approx(_mfu(3760, 6_738_415_616, 32, 4096, 4096))


def test_fms_fsdp_rows_are_explained_by_the_interconnect_their_blog_prints():
    # 400 Gbps per A100 node (50 per GPU, not the a100 entry's 200): the 13B at one micro-batch a step
    # exposes its cross-node reduction, and both A100 rows come within 5% (+9% and +29% at 200 Gb/s).
    # On the H100s (800 Gbps a node) the blog's profile shows "a 10% gap due to network": the
    # predicted exposed collectives are 10% of the step there.
    from dataclasses import replace

    from pretrain.plan.hardware import get_gpu

    rows = _fms()
    for key in ("7B on 128", "13B on 128"):
        assert abs(bestcase.error(rows[key])) < 0.05, key
    at_entry = {k: bestcase.error(replace(r, job=replace(r.job, gpu=get_gpu("a100-80gb"))))
                for k, r in rows.items() if "128" in k}
    assert at_entry["7B on 128"] > 0.05 and at_entry["13B on 128"] > 0.25, at_entry
    est = bestcase.predicted(rows["7B on 96"])
    exposed = (est.times["zero3_exposed"] + est.times["dp_comm_exposed"]) / est.step_s
    assert 0.07 < exposed < 0.13, exposed


def _plan(*args: str, capsys) -> tuple[dict, str]:
    from pretrain.cli import main

    assert main(["plan", *args, "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert main(["plan", *args]) == 0
    return plan, " ".join(capsys.readouterr().out.split())


def test_the_default_7b_plan_is_above_every_published_small_run_and_says_so(capsys):
    plan, text = _plan("--params", "7B", "--gpus", "8", "--gpu", "a100-80gb", capsys=capsys)
    assert plan["layout"]["layout"]["recompute"] == "none"
    pub = plan["published"]
    assert pub["gpu"] == "a100-80gb" and pub["recompute"] is False
    # the highest: llm-foundry's MPT-7B at 2,048 tokens on 8 A100 80GB, 37,130 tokens/s (README)
    assert pub["mfu_high"] == pytest.approx(_mfu(37_130 / 8, 6_658_859_008, 32, 4096, 2048))
    assert pub["mfu_high"] == pytest.approx(0.642, abs=0.001)
    assert plan["time"]["mfu"] > 0.80 > pub["mfu_high"]  # 81% predicted
    assert pub["median_error"] > 0.10  # those runs predicted a median 12% fast
    assert "published:" in text and "64%" in text and "above all of them, a best case" in text
    assert plan["time"]["published_check"] in " ".join(json.dumps(plan).split())


def test_the_published_runs_are_predicted_with_the_plans_gpu_entry(capsys):
    # --efficiency 0.69 (what the llm-foundry A100 tables imply, docs/planner.md) slows every
    # prediction: the runs' measured range stays, the median miss follows the entry the plan used
    plan, text = _plan("--params", "7B", "--gpus", "8", "--gpu", "a100-80gb", "--efficiency", "0.69",
                       capsys=capsys)
    pub = plan["published"]
    assert pub["mfu_high"] == pytest.approx(0.642, abs=0.001)
    assert -0.10 < pub["median_error"] < 0.05, pub  # +12.5% at the entry's 0.86
    assert "slow" in text or "fast" in text


def test_no_published_line_for_a_large_model_or_a_gpu_without_rows(capsys):
    plan, text = _plan("--model", "llama-3-70b", "--gpus", "64", "--gpu", "a100-80gb", capsys=capsys)
    assert "published" not in plan and "published:" not in text
    plan, text = _plan("--params", "7B", "--gpus", "8", "--gpu", "b200", capsys=capsys)
    assert "published" not in plan and "published:" not in text


def test_recompute_splits_llm_foundrys_a100_80gb_rows():
    # Within one table (same Composer FSDP, FULL_SHARD, precision and Triton attention), at <= 8k
    # tokens: the runs with activation checkpointing (7B, 13B; 82% of the predicted step in GEMMs)
    # are predicted within 3%, so these GEMMs do run near the 0.86 the GPU table holds; the runs
    # without it are every one predicted fast, by a median 14.5%: what they miss is not the chip's
    # GEMM rate. (Measured 2026-12-03; bench/bench_plan_small.py section 3.)
    rows = [r for r, _ in bestcase.small_runs()
            if r.source.startswith("llm-foundry a100-80 ") and r.job.shape.seq_len <= 8192]
    ac = [bestcase.error(r) for r in rows if r.layout.recompute == "full"]
    none = [bestcase.error(r) for r in rows if r.layout.recompute == "none"]
    assert len(ac) == 6 and len(none) == 28
    assert max(map(abs, ac)) < 0.05, ac
    assert min(none) > 0 and statistics.median(none) > 0.12, none  # +2.2% to +52%


def test_the_one_node_7b_runs_without_recompute_miss_more_than_the_terms_beside_the_gemms():
    # what the 7B default would need to come down to its neighbours' median miss: +12.5 s on a
    # 100.5 s step; the optimizer (0.05 s), launches (0.6 s), the head (1.7 s) and the exposed
    # data-parallel reduction (0.02 s) would each have to grow 7x to 800x; only the GEMMs (82 s) or
    # the attention and element-wise terms (10.5 s, 5.7 s) are of that size
    from pretrain.plan.hardware import get_gpu
    from pretrain.plan.search import Job, search
    from pretrain.plan.shapes import shape_for_params

    est = search(Job(shape_for_params(7e9), get_gpu("a100-80gb"), 8, 4 * 2**20)).best
    miss = est.step_s * bestcase.check(get_gpu("a100-80gb"), False).median_error
    small = ("optimizer", "launch", "head", "dp_comm_exposed", "zero3_exposed")
    assert all(est.times[k] * 5 < miss for k in small), (miss, est.times)
    assert est.times["gemm"] > 5 * miss


def test_the_first_line_says_best_case_with_the_published_range_and_its_days(capsys):
    # session 14: the line under the Time table came ~80 lines down; the first line says it now,
    # with the days the published range would take (time goes as 1/MFU at a fixed model and budget)
    plan, text = _plan("--params", "7B", "--gpus", "8", "--gpu", "a100-80gb", "--tokens", "140B",
                       capsys=capsys)
    head, pub = plan["headline"], plan["published"]
    assert text.startswith("Expect: MFU 81.0% is a best case") and text.index("Expect:") < text.index("Model")
    low, high = head["days"] * head["mfu"] / pub["mfu_high"], head["days"] * head["mfu"] / pub["mfu_low"]
    said = f"measured MFU 43%-64%, which would take {low:,.1f}-{high:,.1f} days, not {head['days']:,.1f}"
    assert said in head["published_note"] and said in text
    # the 1/MFU scaling against the planner itself: a plan whose GEMMs run slower (MFU ~64%) takes
    # the days the line gives for 64%, goodput and all, within 0.5%
    slower, _ = _plan("--params", "7B", "--gpus", "8", "--gpu", "a100-80gb", "--tokens", "140B",
                      "--efficiency", "0.66", capsys=capsys)
    m, d = slower["headline"]["mfu"], slower["headline"]["days"]
    assert 0.55 < m < 0.70 and d == pytest.approx(head["days"] * head["mfu"] / m, rel=0.005)


def test_a_plan_within_the_published_range_is_not_called_a_best_case(capsys):
    # full recompute on the same node: 59% predicted, inside the 34%-60% the 20 runs with recompute
    # measured, which this model predicts a median 4% slow
    plan, text = _plan("--params", "7B", "--gpus", "8", "--gpu", "a100-80gb", "--tokens", "140B",
                       "--layout", "tp=1,pp=1,zero=3,mbs=1,recompute=full", capsys=capsys)
    note = plan["headline"]["published_note"]
    assert note.startswith("MFU 59.3% (53.2 days); 20 published runs") and "best case" not in note
    assert text.startswith("Expect: " + note)


def test_a_damaged_plan_json_has_no_first_line(capsys):
    # plan.json travels (the report reads someone's): a field of the wrong type or a non-finite
    # number leaves the line out instead of printing "inf days" or a traceback
    plan, _ = _plan("--params", "7B", "--gpus", "8", "--gpu", "a100-80gb", capsys=capsys)
    assert bestcase.first_line(plan) == plan["headline"]["published_note"]
    for where, key, bad in (("published", "mfu_low", "x"), ("published", "mfu_high", None),
                            ("headline", "days", "inf"), ("headline", "mfu", float("nan")),
                            ("published", "rows", 0)):
        damaged = json.loads(json.dumps(plan))
        damaged[where][key] = bad
        assert bestcase.first_line(damaged) is None, (where, key, bad)
    assert bestcase.first_line({"published": [], "headline": "x"}) is None
