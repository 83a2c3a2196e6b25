"""Training at the lesson's size, measured on this CPU: initialization memory and time per rank, and
context parallelism against one process at a long sequence.

    .venv/bin/python bench/bench_scale.py init [--ranks 4] [--layers 2]
    .venv/bin/python bench/bench_scale.py cp [--seq 4096] [--steps 3]

init: the llama-3.2-1b shape under FSDP x ranks (gloo, spawned processes). "before" is the former
path (every rank fills the whole model in fp32 from one sequential generator, then keeps its piece);
"after" is train/init.py (each rank allocates its shard and draws only its row blocks). Peak RSS
growth per rank is the process's peak RSS after initialization minus its RSS before (conservative).
The former path costs the whole model on every rank, so on a shared 24 GB machine "before" runs with
few layers (--layers 1: 323 M parameters, 1.29 GB in fp32, the 128k x 2048 embedding being most of
it); "after" also runs at the full 16 layers.

cp: one process on the whole sequence against CP x 2 (each rank half of every sequence), same model
and batch, fp32, one thread per rank; tokens/s of the job and peak RSS per rank. On a machine with
two shared cores the two ranks compete for the CPU, so tokens/s says little about speed-up; the
memory per rank is the point (attention scores are T/cp x T per rank instead of T x T).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEXT = Path(os.environ.get("PRETRAIN_SHARED_DATA")
        or ROOT.parent / "shared" / "data") / "lm" / "tinyshakespeare" / "input.txt"
CP_SHAPE = ["model.n_layers=2", "model.d_model=128", "model.n_heads=4", "model.n_kv_heads=4",
            "model.d_ff=352", "data.batch_size=1", "train.resume=false", "checkpoint.every=0",
            "checkpoint.first_at=100000", "schedule.warmup_steps=1"]


def old_init_worker(rank: int, preset: str, overrides: list) -> dict:
    """The former initialization: the whole model on the CPU per rank, then this rank's piece kept."""
    import torch
    from torch.distributed.tensor import DTensor, distribute_tensor

    from pretrain import config as cfgmod
    from pretrain.train.config import RunConfig
    from pretrain.train.model import build_model, resolve_shape
    from pretrain.train.parallel import Layout, dims_from_config, init_distributed, parallelize, plain_name
    from pretrain.train.testing import _rss_now

    cfg = cfgmod.load(RunConfig, None, [f"model.preset={preset}", "train.device=cpu", *overrides])
    init_distributed(torch.device("cpu"), 120.0)
    dims = dims_from_config(cfg.parallel)
    layout = Layout(dims, torch.device("cpu"))
    shape = resolve_shape(cfg.model)
    model = build_model(shape, cfg.model, "meta")
    parallelize(model, dims, cfg.parallel, layout, "fp32")
    before = _rss_now()
    t0 = time.perf_counter()
    with torch.no_grad():
        full = build_model(shape, cfg.model, "meta").to_empty(device="cpu")
        gen = torch.Generator().manual_seed(0)
        for p in full.parameters():
            p.normal_(0.0, 0.02, generator=gen)
        model.to_empty(device="cpu")
        ref = dict(full.named_parameters())
        for name, t in model.named_parameters():
            src = ref[plain_name(name)]
            if isinstance(t, DTensor):
                src = distribute_tensor(src, t.device_mesh, t.placements, src_data_rank=None).to_local()
                t = t.to_local()
            t.copy_(src)
        del full, ref
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"peak_growth": peak - before, "seconds": seconds}


def cp_worker(rank: int, out: str, text: str, overrides: list, steps: int) -> dict:
    from pretrain.train.testing import tiny_config
    from pretrain.train.trainer import Trainer

    t = Trainer(tiny_config(out, text, *overrides), quiet=True)
    t.train_step()  # warm-up
    t0 = time.perf_counter()
    for _ in range(steps):
        t.train_step()
    dt = time.perf_counter() - t0
    return {"seconds": dt, "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def gb(x: float) -> str:
    return f"{x / 1e9:.2f} GB"


def bench_init(ranks: int, layers: int) -> None:
    from pretrain.train.testing import run_distributed

    layout = [f"parallel.dp_shard={ranks}"]
    few = [*layout, f"model.n_layers={layers}"]
    rows = [("before", f"{layers} layers", "bench_scale.old_init_worker", few),
            ("after", f"{layers} layers", "pretrain.train.testing.init_peak_rss", few),
            ("after", "16 layers (1.24 B)", "pretrain.train.testing.init_peak_rss", layout)]
    print(f"llama-3.2-1b shape, FSDP x {ranks} on this CPU (gloo; peak RSS growth per rank, max over ranks)")
    for when, size, fn, over in rows:
        res = run_distributed(fn, ranks, "llama-3.2-1b", over, timeout=900)
        peak = max(r["peak_growth"] for r in res)
        secs = max(r["seconds"] for r in res)
        print(f"  {when:6s} {size:20s} init {secs:6.1f} s   peak RSS growth {gb(peak)}"
              + (f"   (fp32 model {gb(res[0]['full'])}, this rank holds {gb(res[0]['held'])})"
                 if "full" in res[0] else ""), flush=True)


def bench_cp(seq: int, steps: int) -> None:
    from pretrain.train.testing import fallback_text, run_distributed

    with tempfile.TemporaryDirectory() as tmp:
        text = TEXT if TEXT.is_file() else fallback_text(Path(tmp) / "t.txt")
        over = [*CP_SHAPE, f"model.seq_len={seq}", "precision.dtype=fp32"]
        rows = [("one process", 1, over), ("cp x 2", 2, [*over, "parallel.cp=2"])]
        print(f"seq {seq}, batch 1, d_model 128, 2 layers, fp32, {steps} timed steps, one thread per rank")
        for name, n, o in rows:
            res = run_distributed("bench_scale.cp_worker", n, str(Path(tmp) / name.replace(" ", "_")),
                                  str(text), o, steps, timeout=900)
            secs = max(r["seconds"] for r in res)
            print(f"  {name:12s} {seq * steps / secs:8.0f} tokens/s   peak RSS per rank "
                  f"{gb(max(r['peak_rss'] for r in res))}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    i = sub.add_parser("init", help="init time and peak RSS per rank, before and after")
    i.add_argument("--ranks", type=int, default=4)
    i.add_argument("--layers", type=int, default=1, help="layers for the before/after pair (default 1)")
    c = sub.add_parser("cp", help="CP x 2 against one process at a long sequence")
    c.add_argument("--seq", type=int, default=4096)
    c.add_argument("--steps", type=int, default=3)
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # spawned workers import bench_scale
    if args.what == "init":
        bench_init(args.ranks, args.layers)
    else:
        bench_cp(args.seq, args.steps)
    print(json.dumps({"machine": "2 shared cores, 24 GB, other jobs running"}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
