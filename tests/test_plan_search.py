"""The layout search: what it calls feasible fits by the memory model, what it rejects does not; layouts
that really ran fit; the time model's MFU/HFU bookkeeping; the explanation is consistent."""

from __future__ import annotations

import pytest

from pretrain.plan import compute, memory
from pretrain.plan.hardware import get_gpu, load_table
from pretrain.plan.layout import Layout, data_parallel
from pretrain.plan.search import Job, evaluate, explain, search, shard_group
from pretrain.plan.shapes import PRESETS, get_shape


@pytest.fixture(scope="module")
def result_8b():
    return search(Job(get_shape("llama-3-8b"), get_gpu("h100"), 64, 2**22))


def test_feasible_fits_and_rejected_does_not(result_8b):
    job = result_8b.job
    seen = {"fits": 0, "memory": 0}
    for lay, est in result_8b.all.items():
        if est.reason not in (None, "does not fit in memory"):
            continue
        mem = memory.memory_per_gpu(job.shape, lay.tp, lay.pp, shard_group(lay), lay.zero, lay.mbs,
                                    lay.recompute, lay.sp, job.flash, lay.v, est.m, job.accounting, lay.cp,
                                    job.activations)
        if est.fits:
            assert mem.total <= 0.9 * 80 * 2**30  # 90% of an "80 GB" H100's 80 GiB
            seen["fits"] += 1
        else:
            assert mem.total > 0.9 * 80 * 2**30
            seen["memory"] += 1
    assert seen["fits"] > 100 and seen["memory"] > 100  # both sides of the line are exercised


def test_state_of_a_pp1_layout_is_the_zero_formula(result_8b):
    n = get_shape("llama-3-8b").params()
    for lay, est in result_8b.all.items():
        if est.memory and lay.pp == 1:
            assert est.memory.state == pytest.approx(memory.zero_memory_per_gpu(n / lay.tp, lay.zero, lay.dp))


def test_ranking_and_explanation(result_8b):
    speeds = [e.tokens_per_s for e in result_8b.ranked]
    assert speeds == sorted(speeds, reverse=True)
    lines = explain(result_8b)
    assert result_8b.best.layout.label() in lines[0]
    ratios = [float(line.split(": ")[1].split("x")[0]) for line in lines[1:] if "x the tokens/s" in line]
    assert ratios and all(r <= 1.0 for r in ratios)  # no single-knob change beats the winner


def test_mfu_and_hfu_bookkeeping(result_8b):
    shape = get_shape("llama-3-8b")
    fpt = compute.flops_per_token(shape)
    for est in result_8b.ranked[:50]:
        assert est.mfu == pytest.approx(est.tokens_per_s * fpt / (64 * 989e12))
        extra = compute.recompute_flops_per_token(shape, est.layout.recompute)
        assert est.hfu / est.mfu == pytest.approx((fpt + extra) / fpt)


def test_lesson_7b_does_not_fit_one_gpu_but_fits_64():  # lesson sec. 2 and 3b
    shape = get_shape("llama-2-7b")
    assert search(Job(shape, get_gpu("h100"), 1, 2**20)).best is None
    best = search(Job(shape, get_gpu("h100"), 64, 2**22)).best
    assert best is not None and best.memory.total <= 72e9


MEGATRON_RAN = [(24, 2304, 1, 1, 32, 512), (30, 3072, 2, 1, 64, 512), (36, 4096, 4, 1, 128, 512),
                (40, 6144, 8, 1, 256, 1024), (48, 8192, 8, 2, 512, 1536), (60, 10240, 8, 4, 1024, 1792),
                (80, 12288, 8, 8, 1536, 2304), (96, 16384, 8, 16, 1920, 2160),
                (105, 20480, 8, 35, 2520, 2520), (128, 25600, 8, 64, 3072, 3072)]


@pytest.mark.parametrize("L,h,tp,pp,gpus,batch", MEGATRON_RAN)
def test_megatron_table1_layouts_fit_an_a100_80gb(L, h, tp, pp, gpus, batch):
    # Megatron-LM 2021 Table 1 ran these on 80 GB A100s with activation recomputation and fp32 grads (18 B)
    shape = next(s for s in PRESETS.values() if (s.n_layers, s.d_model) == (L, h))
    job = Job(shape, get_gpu("a100-80gb"), gpus, batch * 2048, accounting="18B", flash=False)
    est = evaluate(job, data_parallel(gpus // (tp * pp), 0, tp=tp, pp=pp, recompute="full"))
    assert est.fits, (est.reason, est.memory)


def test_structural_rejections():
    job = Job(get_shape("llama-2-7b"), get_gpu("h100"), 64, 2**22)
    assert evaluate(job, Layout(tp=16, dp_replicate=4)).reason == "tp spans nodes"
    assert "not the 64 GPUs" in evaluate(job, Layout(dp_replicate=32)).reason
    assert evaluate(job, Layout(dp_replicate=64, sp=True)).reason == "sequence parallelism needs tp > 1"


def test_bigger_memory_admits_more(tmp_path):
    f = tmp_path / "hw.toml"
    f.write_text('[h100]\nmemory_gb = 160\n')
    table = load_table(f)
    assert table["h100"].memory_gb == 160 and table["h200"].memory_gb == 141
    shape = get_shape("llama-3-8b")
    small = search(Job(shape, get_gpu("h100"), 8, 2**22))
    big = search(Job(shape, table["h100"], 8, 2**22))
    fit_small = {lay for lay, e in small.all.items() if e.fits}
    fit_big = {lay for lay, e in big.all.items() if e.fits}
    assert fit_small < fit_big


def test_405b_on_16384_gpus_finds_a_layout():
    r = search(Job(get_shape("llama-3-405b"), get_gpu("h100"), 16384, 16 * 2**20))
    assert r.best is not None and r.best.layout.tp * r.best.layout.pp * r.best.layout.dp == 16384
    assert r.evaluated > 1000


# torchtitan's elastic-scaling tables (docs/performance.md), Memory(GiB) per GPU as printed, on
# Grand Teton H100s of 96 GB HBM2e: Tables 1-4 (Llama 3.1 8B and 70B; FSDP, CP, TP; compile, Float8).
TORCHTITAN_PRINTED_GIB = (82.4, 77.0, 76.8, 83.9, 84.2, 84.0, 84.5, 67.0, 62.0, 61.8, 71.9, 67.6)


def test_default_headroom_refuses_none_of_the_peaks_torchtitan_ran_at():
    # an upper bound on the headroom from runs that ran: their peaks (allocator reserve included)
    # reach 88% of the GPU, so keeping 10% free refuses none of them, 15% would
    from pretrain.plan.search import HEADROOM

    gpu = get_gpu("h100-hbm2e")
    assert gpu.memory_gb == 96
    job = Job(get_shape("llama-3-8b"), gpu, 8)
    assert job.headroom == HEADROOM == 0.10
    assert max(TORCHTITAN_PRINTED_GIB) * 2**30 <= job.usable_bytes
    wider = Job(get_shape("llama-3-8b"), gpu, 8, headroom=0.15)
    assert max(TORCHTITAN_PRINTED_GIB) * 2**30 > wider.usable_bytes


def test_a_layout_refused_only_by_the_headroom_is_named_so():
    # torchtitan ran Llama 2 13B without checkpointing at local batch 2 on 80 GB A100s (2,162
    # tokens/s): its counted 77.4 GiB exceed the 72 GiB usable, not the 80 GiB of HBM
    from dataclasses import replace

    from pretrain.errors import UserError
    from pretrain.plan.heldout import held_out
    from pretrain.plan.search import headroom_note

    run = next(r for r in held_out() if r.source.startswith("torchtitan Llama 2 13B, no AC"))
    est = evaluate(run.job, run.layout)
    assert est.reason == "does not fit in memory" and run.job.refused_by_headroom(est.memory)
    assert "only the 10% headroom" in headroom_note(run.job)
    assert evaluate(replace(run.job, headroom=0.0), run.layout).fits
    too_big = evaluate(replace(run.job, shape=get_shape("llama-2-70b")), run.layout)
    assert not run.job.refused_by_headroom(too_big.memory)  # over the HBM itself: no such note
    for bad in (1.0, -0.1, float("nan")):
        with pytest.raises(UserError, match="--headroom"):
            replace(run.job, headroom=bad)


def test_causal_execution_halves_the_counted_attention():
    # a causal mask keeps s(s+1)/2 of the s² (query, key) pairs: the flash kernel skips the rest, so
    # what runs is the PaLM count with the attention core (and its re-run under recompute) halved
    torch = pytest.importorskip("torch")
    shape = get_shape("llama-3-8b").with_(seq_len=512)
    s, L, q = shape.seq_len, shape.n_layers, shape.q_dim
    kept = float(torch.ones(s, s).tril().sum()) / s**2
    for rc, attn_rerun in (("none", 0), ("selective", 4), ("full", 4)):
        counted = compute.flops_per_token(shape) + compute.recompute_flops_per_token(shape, rc)
        executed = compute.executed_flops_per_token(shape, rc)
        attention = (12 + attn_rerun) * L * q * s
        assert counted - executed == pytest.approx(attention * (1 - kept), rel=2 / s), rc
        assert compute.executed_flops_per_token(shape, rc, causal_kernel=False) == counted


def test_an_hfu_above_one_is_explained_and_the_executed_share_is_not():
    # Llama 3 8B at 128K tokens with full recompute on a GPU described at its peak (every efficiency
    # 1, as a --hardware file may say): attention dominates, counted twice what runs, so HFU > 1
    import io
    from dataclasses import replace

    from rich.console import Console

    from pretrain.plan import report
    from pretrain.plan.render import print_plan

    gpu = replace(get_gpu("h100"), gemm_efficiency=1.0, attention_efficiency=1.0, hbm_efficiency=1.0)
    job = Job(get_shape("llama-3-8b").with_(seq_len=131072), gpu, 64, 2**23)
    lay = data_parallel(32, cp=2, zero=3, recompute="full")
    plan = report.build_plan(job, report.Budget(1e12), lay, top=1)
    t = plan["time"]
    assert t["hfu"] > 1 >= t["hfu_causal"] and t["mfu"] < t["hfu"]
    assert "no causal halving" in t["flops_convention"] and "Above 100%" in t["flops_convention"]
    out = io.StringIO()
    print_plan(plan, Console(file=out, width=200))
    flat = " ".join(out.getvalue().split())
    assert "Above 100% because the counted attention FLOPs are twice those executed" in flat
    assert f"{t['hfu_causal']:.1%} of peak is what runs" in flat
