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
