"""Small models against every published row (session 13): is the planner's default prediction for a
model up to 14B too optimistic, and which term would carry it? (docs/planner.md "Small models: the
planner against every published row"; docs/decisions.md 2026-12-03).

1. every published row of a model <= 14B (plan/published.py, plan/heldout.py): measured MFU,
   predicted MFU, error (measured step / predicted step - 1: + when the planner is too fast), the
   GEMM share of the predicted step;
2. the rows by GPU entry and recompute policy (what `pretrain plan` prints beside a small model's
   MFU, plan/bestcase.py), and the one-node (8-GPU) rows apart;
3. within one table (llm-foundry A100 80GB, same software, sharding and precision): the missed
   seconds per predicted GEMM second, with and without activation checkpointing;
4. the default plan `pretrain plan --params 7B --gpus 8 --gpu a100-80gb` term by term, and what
   each term would have to become alone to bring it down to the MFU the rows without recompute
   imply for it (its MFU / (1 + their median error)).

    .venv/bin/python bench/bench_plan_small.py        (about 2 s; pure Python, no GPU)

Nothing here changes the planner.
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from pretrain.plan.bestcase import check, error, predicted, small_runs
from pretrain.plan.hardware import get_gpu
from pretrain.plan.search import Job, evaluate
from pretrain.plan.shapes import shape_for_params


def gemm_share(est) -> float:
    t = est.times
    return (t["gemm"] + t["head"] + t["recompute"]) / est.step_s


def rows_table(rows) -> None:
    print("1. every published row of a model <= 14B (B: the model was built beside it; H: held out)")
    print(f"   {'':1s} {'run':68s} {'gpus':>4s} {'params':>6s} {'pub MFU':>7s} {'pred':>6s} "
          f"{'error':>7s} {'gemm':>5s}")
    for r, built in rows:
        est = predicted(r)
        print(f"   {'B' if built else 'H'} {r.source[:68]:68s} {r.job.n_gpus:4d} "
              f"{r.job.shape.params() / 1e9:5.1f}B {r.measured_mfu:7.1%} {est.mfu:6.1%} {error(r):+7.1%} "
              f"{gemm_share(est):5.2f}")


def groups(rows) -> None:
    print("\n2. by GPU entry and recompute policy (signed median error: + is predicted too fast)")
    print(f"   {'gpu':12s} {'recompute':9s} {'rows':>4s} {'pub MFU':>11s} {'median':>7s} {'|median|':>8s} "
          f"{'worst':>7s} {'1 node':>6s} {'median':>7s}")
    by = defaultdict(list)
    for r, _ in rows:
        by[(r.job.gpu.name, r.layout.recompute != "none")].append(r)
    for (gpu, rc), rs in sorted(by.items()):
        errs = [error(r) for r in rs]
        one = [error(r) for r in rs if r.job.n_gpus <= r.job.gpu.gpus_per_node]
        c = check(get_gpu(gpu), rc)
        print(f"   {gpu:12s} {'yes' if rc else 'no':9s} {len(rs):4d} {c.mfu_low:5.1%}-{c.mfu_high:5.1%} "
              f"{statistics.median(errs):+7.1%} {statistics.median(map(abs, errs)):8.1%} "
              f"{max(errs, key=abs):+7.1%} {len(one):6d} "
              + (f"{statistics.median(one):+7.1%}" if one else f"{'-':>7s}"))
    built = [abs(error(r)) for r, b in rows if b]
    held = [abs(error(r)) for r, b in rows if not b]
    print(f"   built beside ({len(built)}): median |error| {statistics.median(built):.1%}; held out "
          f"({len(held)}): {statistics.median(held):.1%}")


def within_one_table(rows) -> None:
    print("\n3. llm-foundry A100 80GB, sequences <= 8k (FULL_SHARD, DEFAULT precision, Triton FA1 in all):"
          " missed seconds per predicted GEMM (+ head + recompute) second")
    for ac in (False, True):
        rs = [r for r, _ in rows if r.source.startswith("llm-foundry a100-80 ")
              and r.job.shape.seq_len <= 8192 and (r.layout.recompute != "none") == ac]
        ratios, errs = [], []
        for r in rs:
            est = predicted(r)
            t = est.times
            ratios.append((r.measured_step_s - est.step_s) / (t["gemm"] + t["head"] + t["recompute"]))
            errs.append(error(r))
        print(f"   {'with' if ac else 'without'} activation checkpointing: {len(rs)} rows, missed/GEMM "
              f"median {statistics.median(ratios):+.2f} (range {min(ratios):+.2f} to {max(ratios):+.2f}), "
              f"error median {statistics.median(errs):+.1%}, GEMM share median "
              f"{statistics.median(gemm_share(predicted(r)) for r in rs):.2f}")


def default_plan() -> None:
    job = Job(shape_for_params(7e9), get_gpu("a100-80gb"), 8, 4 * 2**20)
    from pretrain.plan.search import search

    est = search(job).best
    est = evaluate(job, est.layout)
    c = check(job.gpu, est.layout.recompute != "none")
    target_mfu = est.mfu / (1 + c.median_error)
    target = est.step_s * est.mfu / target_mfu
    extra = target - est.step_s
    print(f"\n4. pretrain plan --params 7B --gpus 8 --gpu a100-80gb: {est.layout.label()}, step "
          f"{est.step_s:.1f} s, MFU {est.mfu:.1%}; published rows like it ({c.rows}, no recompute): "
          f"MFU {c.mfu_low:.0%}-{c.mfu_high:.0%}, predicted a median {c.median_error:+.1%} fast -> "
          f"{target_mfu:.1%} ({target:.1f} s, +{extra:.1f} s)")
    print(f"   {'term':16s} {'seconds':>8s} {'share':>6s} {'x to add it alone':>18s}")
    for k, v in est.times.items():
        factor = f"{1 + extra / v:.1f}x" if v > 0 else "-"
        print(f"   {k:16s} {v:8.3f} {v / est.step_s:6.1%} {factor:>18s}")
    gemm = est.times["gemm"] + est.times["head"]
    print(f"   the GEMMs (+ head) alone: gemm_efficiency {job.gpu.gemm_efficiency:.2f} -> "
          f"{job.gpu.gemm_efficiency * gemm / (gemm + extra):.2f}")


def main() -> None:
    rows = small_runs()
    rows_table(rows)
    groups(rows)
    within_one_table(rows)
    default_plan()


if __name__ == "__main__":
    main()
