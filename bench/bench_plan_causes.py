"""The numbers behind docs/planner.md "Causes of the held-out errors" (session 7), printed from the
planner's own functions so each can be reproduced and argued with:

1. memory: the held-out runs that ran but are refused, with and without each memory cause
   (dropout masks MPT never saves; torchtitan's own saved tensors instead of our trainer's);
2. llm-foundry at sequences <= 8k: median error per table and model, and its correlation with the
   GEMM share of the predicted step (a small-shape GEMM penalty would follow model size);
3. torchtitan PR #442 (compiling only the RMSNorms: ~9% faster on Llama 3 8B without checkpointing)
   against the planner's prediction for that swap, with the eager norm counted as the profile in use
   does (24h bytes per norm forward) and as torchtitan's bf16 RMSNorm runs it op by op (36h);
4. every torchtitan row with torchtitan's own eager element-wise bytes (bf16 residual adds, no
   autocast casts, its rotary) instead of our trainer's profile: recorded, not applied.

    .venv/bin/python bench/bench_plan_causes.py        (about 10 s; pure Python, no GPU)
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import replace

from pretrain.plan import timing
from pretrain.plan.hardware import get_gpu
from pretrain.plan.heldout import held_out
from pretrain.plan.layout import Layout
from pretrain.plan.published import runs
from pretrain.plan.search import Estimate, Job, evaluate, time_layout
from pretrain.plan.shapes import get_shape

IN_USE = timing.elementwise_bytes_per_token


def titan_eager_bytes(shape, lay, flash, eager=False):
    """torchtitan's eager block, forward bytes per token counted from its code: RMSNorm in bf16 op by
    op (upcast 6h, pow 8h, mean 4h, multiply 8h, cast back 6h, weight 4h), bf16 residual adds (6h),
    no autocast casts, rotary as an fp32 complex round trip (20 bytes a value), repeat_kv copies,
    the attention output's transpose (4h), SiLU and the product (10f)."""
    if not eager:
        return IN_USE(shape, lay, flash, eager)
    h, kv, f, t = shape.d_model, shape.kv_dim, shape.d_ff, lay.tp
    rep = t if lay.sp else 1
    per = (2 * 36 * h + 2 * 6 * h) / rep
    per += (20 * (h + kv) + (4 * (kv + h) if kv < h else 0) + 4 * h) / t
    return per + 10 * f / t


def step(job, lay) -> Estimate:
    est = evaluate(job, lay)
    if not est.fits:  # still timed: the runs ran
        est = Estimate(lay, None, est.m, est.memory)
        time_layout(job, lay, est)
    return est


def error(run, job=None) -> float:
    return run.measured_step_s / step(job or run.job, run.layout).step_s - 1


def memory_causes(rows) -> None:
    print("1. held-out runs that ran, refused as 'does not fit'")
    mpt = [r for r in rows if r.source.startswith("llm-foundry")]
    titan = [r for r in rows if r.source.startswith("torchtitan")]
    for name, group, before in (("llm-foundry, masks counted", mpt, {"dropout": True}),
                                ("torchtitan, our trainer's profile", titan, {"activations": "pretrain"})):
        old = [r for r in group if not evaluate(replace(r.job, **before), r.layout).fits]
        new = [r for r in group if not evaluate(r.job, r.layout).fits]
        print(f"   {name}: {len(old)} refused -> {len(new)} with the cause applied")
        for r in new:
            mem = evaluate(r.job, r.layout).memory
            print(f"     still refused: {r.source}: {mem.total / 2**30:.1f} GiB of "
                  f"{r.job.usable_bytes / 2**30:.1f} usable ({r.job.gpu.memory_gb:.0f} GiB HBM)")


def foundry_by_model(rows) -> None:
    print("2. llm-foundry, sequences <= 8k: median error by table and model; corr(GEMM share, error)")
    by = defaultdict(list)
    share = defaultdict(list)
    for r in rows:
        if not r.source.startswith("llm-foundry") or r.job.shape.seq_len >= 16_384:
            continue
        table, model = r.source.split()[1:3]
        est = step(r.job, r.layout)
        e = r.measured_step_s / est.step_s - 1
        by[table, model].append(e)
        share[table].append((est.times["gemm"] / est.step_s, e))
    for table in ("h100-2024", "h100", "a100-80", "a100-40"):
        cells = "  ".join(f"{m[4:]} {statistics.median(v):+.0%}" for (t, m), v in by.items() if t == table)
        xs = share[table]
        mx, my = (sum(p[i] for p in xs) / len(xs) for i in (0, 1))
        cov = sum((x - mx) * (y - my) for x, y in xs)
        corr = cov / math.sqrt(sum((x - mx) ** 2 for x, _ in xs) * sum((y - my) ** 2 for _, y in xs))
        print(f"   {table:9s} {cells}   corr {corr:+.2f} ({len(xs)} rows)")


def compiled_norms() -> None:
    print("3. torchtitan PR #442: compiling only the RMSNorms, Llama 3 8B, no AC (measured ~9%)")
    shape = get_shape("llama-3-8b")
    lay = Layout(dp_shard=8, zero=3, mbs=1, recompute="none")
    for gpu in ("h100", "h100-hbm2e", "a100-80gb"):
        job = Job(shape, get_gpu(gpu), 8, 8 * shape.seq_len, activations="torchtitan", kernels="eager",
                  reduce_dtype="fp32")
        out = []
        for fn, norm in ((IN_USE, 24), (titan_eager_bytes, 36)):
            timing.elementwise_bytes_per_token = fn
            eager = step(job, lay).step_s
            timing.elementwise_bytes_per_token = (
                lambda s, ly, fl, eg=False, _fn=fn, _n=norm: _fn(s, ly, fl, eg) - (2 * (_n - 4) * s.d_model
                                                                                  if eg else 0))
            fused = step(job, lay).step_s
            timing.elementwise_bytes_per_token = IN_USE
            out.append(1 - fused / eager)
        print(f"   {gpu:11s} predicted saving: profile in use (24h/norm) {out[0]:.1%}, "
              f"torchtitan's RMSNorm op by op (36h/norm) {out[1]:.1%}")


def titan_eager_rows(rows) -> None:
    print("4. torchtitan rows: error with the eager profile in use -> with torchtitan's own bytes")
    for r in rows:
        before = error(r)
        timing.elementwise_bytes_per_token = titan_eager_bytes
        after = error(r)
        timing.elementwise_bytes_per_token = IN_USE
        print(f"   {r.source:72s} {before:+.1%} -> {after:+.1%}")


def main() -> None:
    held = held_out()
    memory_causes(held)
    foundry_by_model(held)
    compiled_norms()
    titan_eager_rows([r for r in runs() + held if r.source.startswith("torchtitan")])


if __name__ == "__main__":
    main()
