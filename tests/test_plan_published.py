"""The time model against measured runs: the exact model and layout of every published run in
../shared/reference/planner_vectors.md (Megatron-LM 2021 Table 1; Korthikanti 2022 Table 5; Llama 3
Table 4), predicted step time vs the paper's. The rows live in pretrain.plan.published, each with
its source; no constant of the time model is fitted to them (plan/hardware.py cites each)."""

from __future__ import annotations

import statistics

import pytest

from pretrain.plan.published import runs
from pretrain.plan.search import evaluate

RUNS = runs()


def _error(run) -> float:
    """Relative error of the predicted throughput (equivalently MFU) against the measured one."""
    est = evaluate(run.job, run.layout)
    assert est.fits, (run.source, est.reason, est.memory)
    return run.measured_step_s / est.step_s - 1


@pytest.mark.parametrize("run", RUNS, ids=[r.source for r in RUNS])
def test_published_run_within_25_percent(run):
    assert abs(_error(run)) <= 0.25, run.source


def test_median_error_within_10_percent():
    errors = [abs(_error(r)) for r in RUNS]
    assert statistics.median(errors) <= 0.10, errors


def test_mfu_is_the_step_time_error():
    # the MFU printed with a plan is the measured MFU scaled by the same ratio as the step time
    run = RUNS[-2]
    est = evaluate(run.job, run.layout)
    assert est.mfu == pytest.approx(run.measured_mfu * run.measured_step_s / est.step_s)


_SEARCHES: dict = {}


def _search(run):
    from pretrain.plan.search import search

    key = (run.job, run.zeros)
    if key not in _SEARCHES:
        _SEARCHES[key] = search(run.job, zeros=run.zeros)
    return _SEARCHES[key]


@pytest.mark.parametrize("run", RUNS, ids=[r.source for r in RUNS])
def test_search_ranks_the_published_family_in_its_top_3(run):
    # the family is what the paper chose (TP degree, pipelining, context splitting); the search runs
    # with the ZeRO stages the paper's software had (Megatron-LM 2021/2022: none)
    from pretrain.plan.published import family

    families: list = []
    for est in _search(run).ranked:
        if family(est.layout) not in families:
            families.append(family(est.layout))
    assert run.family in families[:3], (run.source, families[:5])


def test_llama3_405b_on_16384_h100s_picks_pipeline_and_zero3_is_not_free():
    # Llama 3 sec. 3.3.2: TP8 x PP16 at 16,384 GPUs. With a 16M-token batch, ZeRO-3 without a
    # pipeline re-gathers 405B/8 weights per micro-batch over 2,048 ranks: more than it computes.
    run = next(r for r in RUNS if r.job.n_gpus == 16384 and r.job.shape.seq_len == 8192)
    result = _search(run)
    assert result.best.layout.pp > 1 and result.best.layout.tp == 8
    zero3 = [e for e in result.ranked if e.layout.zero == 3 and e.layout.pp == 1]
    assert zero3 and zero3[0].tokens_per_s < 0.8 * result.best.tokens_per_s
    assert zero3[0].times["zero3_exposed"] > 0.1 * zero3[0].step_s


# --- torchtitan's FSDP runs: the software stack, not the chip, explains most of the gap -------------

TORCHTITAN = [r for r in RUNS if r.source.startswith("torchtitan")]


def _step_s(job, lay) -> float:
    """Predicted step time, also for a software profile whose memory model says it does not fit
    (the fused profile saves more per token than torchtitan's per-op checkpointing keeps)."""
    from pretrain.plan.search import Estimate, time_layout

    est = evaluate(job, lay)
    if not est.fits:
        est = Estimate(lay, None, est.m, est.memory)
        time_layout(job, lay, est)
    return est.step_s


@pytest.mark.parametrize("run", TORCHTITAN, ids=[r.source for r in TORCHTITAN])
def test_each_software_cause_moves_the_prediction_towards_torchtitans_measurement(run):
    # fused kernels and Megatron's selective recompute (the planner's defaults) are far too fast for
    # eager PyTorch; each property of torchtitan's code, added in turn, brings the prediction closer
    # (a row whose recompute is full is untouched by the selective policy)
    from dataclasses import replace

    steps = [replace(run.job, activations="fused", kernels="fused", selective="attention",
                     reduce_dtype="bf16"),
             replace(run.job, kernels="eager", selective="attention", reduce_dtype="bf16"),
             replace(run.job, selective="op", reduce_dtype="bf16"),
             run.job]
    errors = [run.measured_step_s / _step_s(j, run.layout) - 1 for j in steps]
    assert errors[0] > 0.2, errors  # the optimism the lead measured (+22% on 70B to +83%)
    for before, after in zip(errors, errors[1:], strict=False):
        assert abs(after) <= abs(before) + 1e-12, errors
    assert abs(errors[-1]) < 0.15, errors


def test_op_policy_recomputes_more_than_attention_and_less_than_full():
    # torchtitan's per-op policy re-runs 3 of the 7 weight matmuls' forward (K, O, up) and every
    # element-wise op: more than the attention core, less than the whole block; it saves less too
    from dataclasses import replace

    from pretrain.plan import memory

    run = TORCHTITAN[0]
    times = {}
    for kind, policy in (("selective", "attention"), ("selective", "op"), ("full", "op")):
        lay = replace(run.layout, recompute=kind)
        times[kind, policy] = evaluate(replace(run.job, selective=policy), lay).times["recompute"]
    assert times["selective", "attention"] < times["selective", "op"] < times["full", "op"]
    shape = run.job.shape
    saved = [memory.saved_bytes_per_token(shape, recompute=r, profile="pretrain", selective="op")
             for r in ("full", "selective", "none")]
    assert saved[0] < saved[1] < saved[2]


def test_hfu_counts_the_matmuls_the_op_policy_reruns():
    # HFU - MFU under --selective op is the forward FLOPs of the K, O and up projections, the same
    # matmuls the time model re-runs: 2·h·(kv + h + f) per token and layer
    run = TORCHTITAN[0]
    est = evaluate(run.job, run.layout)
    shape = run.job.shape
    extra = 2 * shape.n_layers * shape.d_model * (shape.kv_dim + shape.d_model + shape.d_ff)
    from pretrain.plan import compute

    per_token = compute.flops_per_token(shape)
    assert est.hfu / est.mfu == pytest.approx(1 + extra / per_token)


# --- held-out runs (session 7): published runs added after the time model was built ---------------
# pretrain.plan.heldout: llm-foundry's MPT throughput tables (209 bf16 rows), MT-NLG 530B (3 rows),
# torchtitan's Llama 2 table (4 rows) and its torch.compile rows (2). Measured on 2026-12-02 with
# nothing of the model changed but the attention kernel each run used: held-out median |error|
# 15.5%, all 244 rows 13.6% (the 26 rows above: 6.4%). The bounds below are
# those figures, rounded up; rows off by more than 25% carry the reason they are (docs/planner.md).

from pretrain.plan.heldout import FLASH1_TABLES, foundry_rows, held_out, mpt_shape  # noqa: E402

HELD_OUT = held_out()

# llm-foundry rows slower than their own table's neighbours (same model and table, one knob away),
# so no smooth model predicts both: MFU printed beside the neighbour's.
OUTLIERS = {
    "llm-foundry a100-80 MPT-30b seq 8192 on 8, mbs 1, AC": "MFU 39.4 vs 51.4 at seq 4096",
    "llm-foundry a100-80 MPT-760m seq 1024 on 8, mbs 48": "MFU 47.8 vs 56.9 at seq 2048",
    "llm-foundry a100-80 MPT-760m seq 512 on 8, mbs 96": "MFU 45.1 vs 56.9 at seq 2048",
    "llm-foundry a100-40 MPT-70b seq 2048 on 64, mbs 2, AC": "MFU 35.9 vs 48.9 on 128 GPUs",
    "llm-foundry a100-40 MPT-1b seq 2048 on 32, mbs 10": "MFU 45.4 vs 55.4 on 64 GPUs",
    "llm-foundry a100-40 MPT-13b seq 2048 on 8, mbs 4, AC": "MFU 43.9 vs 52.5 on 16 GPUs",
    "llm-foundry a100-40 MPT-13b seq 1024 on 8, mbs 8, AC": "MFU 44.1 vs 52.5 on 16 GPUs at 2048",
    "llm-foundry a100-40 MPT-13b seq 512 on 8, mbs 16, AC": "MFU 44.3 vs 52.5 on 16 GPUs at 2048",
    "llm-foundry a100-40 MPT-125m seq 2048 on 128, mbs 26": "MFU 38.9 vs 42.8 on 8 GPUs",
    "llm-foundry a100-40 MPT-125m seq 2048 on 64, mbs 26": "MFU 39.3 vs 42.8 on 8 GPUs",
    "llm-foundry a100-40 MPT-125m seq 2048 on 32, mbs 26": "MFU 39.9 vs 42.8 on 8 GPUs",
}


def expected_error(run) -> str | None:
    """Why a held-out row is known to miss by more than 25%, or None (it must not)."""
    if run.source.startswith("MT-NLG"):
        return ("MT-NLG: predicted ~40% fast where the same model on Megatron-LM (Table 1, 2,520 GPUs) "
                "is within 10%; the cause (DeepSpeed's pipeline engine?) is not found")
    if "torch.compile" in run.source:
        return ("torchtitan with torch.compile: measured 16% faster than without, the fused-kernel "
                "profile predicts ~50% (the eager profile's element-wise bytes, or what compile leaves "
                "unfused); not resolved")
    if " h100" in run.source and run.job.shape.seq_len < 16_384:
        return ("H100 at sequences <= 8k: predicted 23-54% fast with either attention kernel (the "
                "long-sequence H100 rows are within 5%); not a cost per step: the missed time follows "
                "the GEMM time, a rate of ~0.58 of peak that Llama 3's H100 rows refute for the chip "
                "(session 9, bench/bench_plan_residual.py); its cause in the stack is not found")
    return OUTLIERS.get(run.source)


def _held_out_error(run) -> float:
    return run.measured_step_s / _step_s(run.job, run.layout) - 1


def test_mpt_shapes_count_the_parameters_the_benchmark_printed():
    # the independent check that the shapes are MPT's: NumParams as printed, for every row
    for t, model, seq, *_, params in foundry_rows():
        assert mpt_shape(model, seq).params() == params, (t, model, seq)


@pytest.mark.parametrize("run", HELD_OUT, ids=[r.source for r in HELD_OUT])
def test_held_out_run_within_25_percent_or_its_known_reason(run):
    error = _held_out_error(run)
    if expected_error(run) is None:
        assert abs(error) <= 0.25, (run.source, error)
    else:  # still off the way the docs say: optimistic, by less than 60%
        assert 0.0 < error < 0.60, (run.source, error, expected_error(run))


def test_held_out_medians():
    held = [abs(_held_out_error(r)) for r in HELD_OUT]
    everything = held + [abs(_error(r)) for r in RUNS]
    assert statistics.median(held) <= 0.16, statistics.median(held)
    assert statistics.median(everything) <= 0.14, statistics.median(everything)
    # the 10% median claim holds for the rows the model was built beside, not for all of them
    assert statistics.median(everything) > 0.10
    explained = [abs(_held_out_error(r)) for r in HELD_OUT if expected_error(r) is None]
    assert statistics.median(explained) <= 0.11, statistics.median(explained)  # measured 10.65%


def test_flash_attention_1_is_the_cause_of_the_long_sequence_misses():
    # llm-foundry's 2023 tables ran the Triton FlashAttention-1 kernel (attn_impl "triton"): at
    # FlashAttention-2's speed every such row is predicted too fast, worst at long sequences where
    # attention dominates; at half that speed (Dao 2023) every row comes closer
    from dataclasses import replace

    rows = [r for r in HELD_OUT if r.source.split()[1] in FLASH1_TABLES]
    assert rows and all(r.job.attention == "flash1" for r in rows)
    fa2 = {r.source: r.measured_step_s / _step_s(replace(r.job, attention="flash2"), r.layout) - 1
           for r in rows}
    fa1 = {r.source: _held_out_error(r) for r in rows}
    assert all(abs(fa1[k]) <= abs(fa2[k]) for k in fa1)
    long = [r.source for r in rows if r.job.shape.seq_len >= 16_384]
    assert min(fa2[k] for k in long) > 0.2  # +23% to +88% before (median +63%)
    assert max(abs(fa1[k]) for k in long) < 0.12  # within 11% after


def test_torchtitan_memory_rows_approach_their_printed_peaks_and_none_passes_them():
    # torchtitan's elastic-scaling Tables 1 and 3 print Memory(GiB) per GPU for Llama 3.1 8B, FSDP,
    # local batch 2: 82.4 / 67.0 eager, 77.0 / 62.0 with torch.compile. With its fp32 loss counted
    # (12 bytes per vocabulary entry at the peak, not 4: +15.7 GiB at 16,384 tokens x 128,256) the
    # prediction is within 20% below each (it was 30-40% below); what is left (FSDP2's unsharded
    # layers in flight, the allocator's cache) is not modelled, so none may pass the print.
    from pretrain.plan import memory

    rows = [r for r in RUNS + held_out() if r.peak_gib]
    assert len(rows) == 4
    for run in rows:
        mem = evaluate(run.job, run.layout).memory
        gib = mem.total / 2**30
        s, b, shape = run.job.shape.seq_len, run.layout.mbs, run.job.shape
        korthikanti = gib - (mem.logits - memory.logits_bytes(s, b, shape.d_model, shape.vocab_size)) / 2**30
        assert 0.8 * run.peak_gib < gib <= run.peak_gib, (run.source, gib)
        assert korthikanti < 0.8 * run.peak_gib, (run.source, korthikanti)  # 30-40% below before


# --- the H100 short-sequence residual (session 9; bench/bench_plan_residual.py prints every figure) --
# The 58 llm-foundry H100 rows below 16k tokens are predicted 27-30% fast (median). Two facts about
# the published numbers decide what that missing time can be, each asserted so a change that moves
# them is seen.


def _short_rows(table: str) -> list:
    from pretrain.plan.search import Estimate, time_layout

    out = []
    for r in HELD_OUT:
        if r.source.startswith(f"llm-foundry {table} ") and r.job.shape.seq_len < 16_384:
            est = evaluate(r.job, r.layout)
            if not est.fits:
                est = Estimate(r.layout, None, est.m, est.memory)
                time_layout(r.job, r.layout, est)
            out.append((r, est))
    return out


def _gemm_s(est) -> float:
    return est.times["gemm"] + est.times["head"] + est.times["recompute"]


def _gemm_factor(rows) -> float:
    """Least squares, through 0, of the missed seconds on the predicted GEMM (+ head + recompute) seconds."""
    return (sum(_gemm_s(e) * (r.measured_step_s - e.step_s) for r, e in rows)
            / sum(_gemm_s(e) ** 2 for r, e in rows))


def test_the_h100_short_sequence_residual_is_a_gemm_rate_not_a_cost_per_step():
    # The brief's first suspect, per-step fixed costs (optimizer step, kernel launches, collective
    # latencies), would be the same seconds on a 0.4 s step and a 124 s one. The missed seconds of the
    # 40 rows of the 2023 H100 table instead follow the predicted GEMM time: one factor on it leaves
    # a 3.6% median and a 15% worst row, while the best fixed cost per step (0.29 s, ~10x what the
    # planner counts for launches and the optimizer) leaves a 46% worst row.
    rows = _short_rows("h100")
    assert len(rows) == 40
    k = _gemm_factor(rows)
    after = [abs(r.measured_step_s / (e.step_s + k * _gemm_s(e)) - 1) for r, e in rows]
    assert 0.3 < k < 0.5, k  # 0.39: an effective GEMM efficiency of 0.80 / 1.39 = 0.58
    assert statistics.median(after) < 0.05 and max(after) < 0.20, (statistics.median(after), max(after))
    missed = [r.measured_step_s - e.step_s for r, e in rows]
    worst_per_step = min(max(abs(r.measured_step_s / (e.step_s + c / 100) - 1) for r, e in rows)
                         for c in range(0, 200))  # any fixed cost from 0 to 2 s a step
    assert worst_per_step > 0.40, worst_per_step
    counted = [e.times["launch"] + e.times["optimizer"] for r, e in rows]
    assert statistics.median(missed) > 10 * statistics.median(counted)  # 465 ms against 30 ms


def test_the_gemm_rate_the_foundry_h100_rows_imply_is_not_the_chips():
    # Fitted on the 2023 H100 table alone, that rate (gemm_efficiency 0.58 instead of the shape
    # sweep's 0.80) predicts the rows it was not fitted on: the 2024 H100 table (other software,
    # flash-attn 2.4.2, 128-512 GPUs) from +30% to within 6% (median), torchtitan's torch.compile rows
    # from +36% to +9%. But Llama 3 405B's rows on the same chip, predicted 2-11% slow now, move
    # away: its two 8,192-token rows to -26% and -29%, the 128k one to -13%: it is the rate of the
    # PyTorch FSDP stacks, not of the H100, so the GPU table keeps 0.80.
    from dataclasses import replace

    eff = 0.80 / (1 + _gemm_factor(_short_rows("h100")))

    def error(r) -> float:
        g = r.job.gpu
        job = replace(r.job, gpu=replace(g, gemm_efficiency=eff)) if g.name.startswith("h100") else r.job
        return r.measured_step_s / _step_s(job, r.layout) - 1

    later = [abs(error(r)) for r, _ in _short_rows("h100-2024")]
    assert statistics.median(later) < 0.10, statistics.median(later)  # 30.4% before
    compiled = [error(r) for r in HELD_OUT if "torch.compile" in r.source]
    assert len(compiled) == 2 and max(map(abs, compiled)) < 0.15, compiled  # +36%, +37% before
    llama3 = [r for r in RUNS if r.source.startswith("Llama 3")]
    before = [r.measured_step_s / _step_s(r.job, r.layout) - 1 for r in llama3]
    after = [error(r) for r in llama3]
    assert len(llama3) == 3 and all(a < b < 0 for a, b in zip(after, before, strict=True)), (before, after)
    assert sorted(after)[1] < -0.25, after  # the two 8,192-token rows
