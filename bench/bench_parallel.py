"""Steps/s per parallel layout on this machine, bytes moved per step against plan/'s prediction, and the
pipeline's measured idle share against the planner's bubble (p-1)/(m+p-1).

    .venv/bin/python bench/bench_parallel.py [--steps 6]

Every layout trains the same model on the same global batch (fp32, gloo, one thread per rank) in
spawned processes. Scaling is not meaningful on a 2-core machine (two ranks share two cores with
whatever else runs); the figures are for comparing layouts with each other and with the planner.

Communication is measured as the bytes the loopback interface carried during the timed steps
(/proc/net/dev, `lo` transmit counter; gloo ranks on one host talk over TCP on 127.0.0.1), divided by
the steps. It includes gloo's framing, the loss and gradient-norm all-reduces and any other loopback
traffic on the machine at the time, so it sits a little above the prediction. The prediction is the
sum over ranks of plan.parallel's per-rank volumes with 4-byte (fp32) elements, twice:
"plan MB" is the algorithm the planner counts (NCCL's ring): DDP 2(g-1)/g * 4P; FSDP (ZeRO-3) 1.5x
that; TP Megatron's 4 all-reduces of s*b*h per layer plus the embedding's all-reduce, the head's input
gradient and the logits' all-gather (tp_bytes_per_step); SP the same volume as reduce-scatter +
all-gather pairs; PP 2*s*b*h per micro-batch per stage boundary (p*v - 1 of them: the interleaved
schedule's 4 stages on 2 ranks cross 3). "gloo MB" is what this run issues: gloo's reduce-scatter
costs a whole all-reduce (measured: 2.0x the buffer on loopback, like all_reduce; all_gather 1.0x), so
FSDP moves 2x DDP, not 1.5x; and PyTorch's per-Linear tensor parallelism all-reduces each of q, k, v,
w1, w3's input gradients separately: 7 all-reduces per SwiGLU layer, not 4. The ratio is measured
over "gloo MB".

The pipeline's idle share is 1 - (T_1 / p) / T_pp, with T_1 one process's step time on the whole batch
(the work spread evenly over p stages is T_1 / p per rank): it counts communication as idle too.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEXT = Path(os.environ.get("PRETRAIN_SHARED_DATA")
        or ROOT.parent / "shared" / "data") / "lm" / "tinyshakespeare" / "input.txt"
SHAPE = ["model.n_layers=4", "model.d_model=128", "model.n_heads=4", "model.n_kv_heads=4", "model.d_ff=352",
         "model.seq_len=128"]
GLOBAL_BATCH = 8
VOCAB = 257  # pretrain.train.testing.TINY


def lo_tx_bytes() -> int:
    for line in Path("/proc/net/dev").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name.strip() == "lo":
            return int(rest.split()[8])
    return 0


def worker(rank: int, out: str, text: str, overrides: list, steps: int) -> dict:
    """Build a trainer, warm up 2 steps, time `steps` steps; rank 0 also counts loopback bytes."""
    import torch.distributed as dist

    from pretrain.train.testing import tiny_config
    from pretrain.train.trainer import Trainer

    t = Trainer(tiny_config(out, text, *overrides), quiet=True)
    for _ in range(2):
        t.train_step()
    sync = dist.barrier if dist.is_initialized() else (lambda: None)
    sync()
    b0, t0 = lo_tx_bytes(), time.perf_counter()
    for _ in range(steps):
        t.train_step()
    sync()
    dt, nbytes = time.perf_counter() - t0, lo_tx_bytes() - b0
    return {"steps_per_s": steps / dt, "step_s": dt / steps, "bytes_per_step": nbytes / steps,
            "params": sum(p.numel() for p in t.model.parameters()) if t.dims.world_size == 1 else 0}


# gloo implements reduce-scatter as a whole all-reduce followed by a local slice: measured on 2 ranks,
# reduce_scatter_tensor of S bytes puts 2.0 S on loopback (as all_reduce does), all_gather 1.0 S. NCCL's
# ring reduce-scatter moves half that; the planner keeps NCCL's (the algorithm's) number.
GLOO_RS = 2.0


def predicted_bytes(kind: str, params: int, p_extra: dict, gloo: bool = False) -> float:
    """Bytes per step summed over the 2 ranks, from pretrain.plan.parallel (fp32 elements).

    gloo=False: the algorithm as the planner counts it (Megatron's fused 4 all-reduces per layer, ring
    reduce-scatter). gloo=True: what this run issues: PyTorch's per-Linear tensor parallelism
    (tp_allreduces_per_layer(fused=False)) and gloo's all-reduce-sized reduce-scatter."""
    from pretrain.plan import parallel as pp

    s, b, h, layers, vocab, t = 128, GLOBAL_BATCH, 128, 4, VOCAB, 2
    act = s * b * h * 4
    rs = GLOO_RS if gloo else 1.0  # a reduce-scatter's cost in units of the ring's (t-1)/t*S
    if kind == "ddp":
        return 2 * pp.dp_bytes_per_step(params, 2, zero=0, grad_bytes=4)
    if kind == "fsdp":  # all-gather forward + all-gather backward + reduce-scatter of the gradients
        return 2 * pp.all_gather_bytes(params * 4, 2) * (2 + rs) if gloo else \
            2 * pp.dp_bytes_per_step(params, 2, zero=3, grad_bytes=4)
    if kind == "tp":
        return 2 * pp.tp_bytes_per_step(s, b, h, layers, vocab, t, act_bytes=4,
                                        allreduces=pp.tp_allreduces_per_layer(fused=not gloo))
    if kind == "sp":  # every all-reduce becomes a reduce-scatter + all-gather pair (2 at the ends)
        pair = pp.all_gather_bytes(act, t) * (1 + rs)
        pairs = layers * pp.tp_allreduces_per_layer(sequence_parallel=True) + 2
        return 2 * (pairs * pair + pp.all_gather_bytes(s * b * vocab * 4, t))
    if kind == "pp":
        m, boundaries = p_extra["m"], 2 * p_extra["v"] - 1  # stage boundaries that cross ranks
        return pp.pp_bytes_per_microbatch(s, b // m, h, act_bytes=4) * m * boundaries
    return 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=6)
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import tempfile

    from pretrain.plan.parallel import pipeline_bubble
    from pretrain.train.testing import fallback_text, run_distributed

    tmp = Path(tempfile.mkdtemp(prefix="bench_parallel_"))
    text = TEXT if TEXT.is_file() else fallback_text(tmp / "topics.txt")
    common = [*SHAPE, "train.resume=false", "checkpoint.first_at=100000", "schedule.warmup_steps=2",
              "train.steps=1000"]
    single = run_distributed("bench_parallel.worker", 1, str(tmp / "one"), str(text),
                             [f"data.batch_size={GLOBAL_BATCH}", *common], args.steps, timeout=600)[0]
    params = single["params"]
    print(f"model: {params:,} parameters, global batch {GLOBAL_BATCH} x 128 tokens, fp32, gloo, "
          f"{args.steps} timed steps")
    print(f"{'layout':<28}{'steps/s':>9}{'vs 1 proc':>11}{'MB/step':>10}{'plan MB':>10}{'gloo MB':>10}"
          f"{'ratio':>8}{'idle':>8}{'plan bubble':>13}")
    print(f"{'1 process':<28}{single['steps_per_s']:>9.2f}{1.0:>11.2f}")
    layouts = [
        ("ddp x2", "ddp", 2, ["parallel.dp_replicate=2"], {}),
        ("fsdp x2", "fsdp", 2, ["parallel.dp_shard=2"], {}),
        ("tp x2", "tp", 1, ["parallel.tp=2"], {}),
        ("tp x2 + sequence parallel", "sp", 1, ["parallel.tp=2", "parallel.sequence_parallel=true"], {}),
    ]
    for sched in ("gpipe", "1f1b", "interleaved1f1b"):
        for m in (2, 4, 8):
            over = ["parallel.pp=2", f"parallel.pp_schedule={sched}", f"parallel.pp_microbatches={m}"]
            layouts.append((f"pp x2 {sched} m={m}", "pp", 1, over,
                            {"m": m, "v": 2 if sched == "interleaved1f1b" else 1}))
    for name, kind, dp, over, extra in layouts:
        res = run_distributed("bench_parallel.worker", 2, str(tmp / name.replace(" ", "_")), str(text),
                              [f"data.batch_size={GLOBAL_BATCH // dp}", *over, *common], args.steps,
                              timeout=600)
        r = res[0]
        step_s = max(x["step_s"] for x in res)
        pred = predicted_bytes(kind, params, extra)
        pred_gloo = predicted_bytes(kind, params, extra, gloo=True)
        row = (f"{name:<28}{1 / step_s:>9.2f}{single['step_s'] / step_s:>11.2f}"
               f"{r['bytes_per_step'] / 1e6:>10.2f}{pred / 1e6:>10.2f}{pred_gloo / 1e6:>10.2f}"
               f"{r['bytes_per_step'] / pred_gloo:>8.2f}")
        if kind == "pp":
            idle = 1 - (single["step_s"] / 2) / step_s
            row += f"{idle:>8.2f}{pipeline_bubble(2, extra['m'], extra['v']):>13.2f}"
        print(row, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
