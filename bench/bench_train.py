"""Benchmark `pretrain train` on this CPU against a minimal nanoGPT-style loop (bench/nanogpt_ref.py).

Same shape and batch for both: nanoGPT's shakespeare-char model (6 layers x 384, 6 heads, context 256,
batch 64; GPT-2 style: LayerNorm, GELU, learned positions, tied head), bytes as tokens (vocab 257),
bf16 autocast with fp32 weights, clipping at 1. Each measurement runs in its own process (the trainer
changes process-wide malloc settings, train/cpu.py), alternating (ours, peer, control, ours, ...) so a
shared CPU's load hits all alike; the best run of each is reported. The control is the same peer loop
with our malloc setting applied: the ratio against it shows what the rest of our step is worth.

Also: checkpoint blocking time, async (thread) save vs synchronous DCP save of the same state.

    .venv/bin/python bench/bench_train.py --steps 4 --repeats 2 [--threads 1] [--compile]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import nanogpt_ref  # noqa: E402

from pretrain.train.checkpoint import CheckpointManager  # noqa: E402
from pretrain.train.cpu import keep_freed_memory  # noqa: E402
from pretrain.train.data import encode_text, read_text  # noqa: E402
from pretrain.train.testing import fallback_text, tiny_config  # noqa: E402
from pretrain.train.trainer import Trainer  # noqa: E402

# PRETRAIN_SHARED_DATA: where ../shared/data is when the checkout sits elsewhere (a git worktree).
SHARED = Path(os.environ.get("PRETRAIN_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared"
              / "data")
SHAKESPEARE = SHARED / "lm" / "tinyshakespeare" / "input.txt"
SHAPE = ["model.n_layers=6", "model.d_model=384", "model.n_heads=6", "model.n_kv_heads=6", "model.d_ff=1536",
         "model.seq_len=256", "model.vocab_size=257", "model.mlp=gelu", "model.norm=layernorm",
         "model.learned_pos=true", "model.bias=true", "model.tied_embeddings=true", "data.batch_size=64",
         "precision.dtype=bf16", "stability.clip=1.0", "checkpoint.every=1000000", "train.threads=0",
         "schedule.warmup_steps=10", "optim.lr=1e-3"]


def ours(text: Path, out: Path, steps: int, warmup: int, extra: list[str]) -> tuple[float, float]:
    """(tokens per wall second, tokens per CPU second of this process) over the timed steps."""
    cfg = tiny_config(out, text, *SHAPE, f"train.steps={steps + warmup}", *extra)
    t = Trainer(cfg, quiet=True)
    for _ in range(warmup):
        t.train_step()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(steps):
        t.train_step()
    n = steps * 64 * 256
    return n / (time.perf_counter() - t0), n / (time.process_time() - c0)


def peer(data: np.ndarray, steps: int, warmup: int) -> tuple[float, float]:
    c0 = time.process_time()
    res = nanogpt_ref.run(data, steps, warmup)
    cpu = time.process_time() - c0  # includes the warmup steps: scale to the timed ones
    return res["tokens_per_s"], (steps + warmup) * 64 * 256 / cpu


def save_blocking(text: Path, out: Path, repeats: int) -> tuple[float, float, int]:
    """Median seconds training is blocked by a sync and by an async save of the bench model + AdamW."""
    t = Trainer(tiny_config(out, text, *SHAPE), quiet=True)
    t.train_step()  # creates Adam's moments: the full state is saved
    res = {}
    for mode in (False, True):
        mgr = CheckpointManager(out / f"ck_{mode}", keep=1, async_save=mode)
        times = []
        for i in range(repeats):
            times.append(mgr.save(i + 1, t.model, t.optimizer, t.state()))
            mgr.wait()
        res[mode] = statistics.median(times)
    n = sum(p.numel() for p in t.params)
    return res[False], res[True], n


def training_text(tmp: Path) -> Path:
    """Tiny Shakespeare from ../shared/data, or Python's own docs where it is absent."""
    return SHAKESPEARE if SHAKESPEARE.is_file() else fallback_text(tmp / "topics.txt")


def worker(args) -> None:
    """One measurement in this process; prints {"wall": tok/s, "cpu": tok per CPU s} as JSON."""
    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        text = training_text(tmp)
        if args.worker.startswith("ours"):
            extra = args.extra + (["parallel.compile=true"] if args.worker == "ours-compiled" else [])
            wall, cpu = ours(text, tmp / "run", args.steps, args.warmup, extra)
        else:
            if args.worker == "control":
                keep_freed_memory()
            wall, cpu = peer(encode_text(read_text(text))[0].astype(np.int64), args.steps, args.warmup)
    print(json.dumps({"wall": wall, "cpu": cpu}))


def measure(kind: str, args) -> dict:
    cmd = [sys.executable, __file__, "--worker", kind, "--steps", str(args.steps), "--warmup",
           str(args.warmup), "--threads", str(args.threads)] + [f"--set={x}" for x in args.extra]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


LABELS = {"ours": "pretrain train", "ours-compiled": "pretrain train, compiled", "peer": "nanoGPT-style",
          "control": "nanoGPT-style + our malloc setting"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=4, help="timed steps per run")
    ap.add_argument("--warmup", type=int, default=1, help="untimed steps first (compiled: +1)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0, help="torch threads for both (0: torch's default)")
    ap.add_argument("--compile", action="store_true", help="also measure ours with parallel.compile=true")
    ap.add_argument("--set", action="append", default=[], dest="extra", help="extra overrides for ours")
    ap.add_argument("--worker", choices=sorted(LABELS), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        if args.worker == "ours-compiled":
            args.warmup += 1  # the first steps compile
        return worker(args)
    kinds = ["ours", "peer", "control"] + (["ours-compiled"] if args.compile else [])
    print("shape: 6 x 384, ctx 256, batch 64, vocab 257, bf16 autocast; "
          f"torch threads {args.threads or torch.get_num_threads()}; one process per run")
    runs: dict[str, list[dict]] = {k: [] for k in kinds}
    for r in range(args.repeats):
        for k in kinds:
            runs[k].append(measure(k, args))
        cells = (f"{k} {runs[k][-1]['wall']:,.0f} tok/s ({runs[k][-1]['cpu']:,.0f} per CPU s)" for k in kinds)
        print(f"  repeat {r}: " + "   ".join(cells), flush=True)
    best = {k: max(x["wall"] for x in v) for k, v in runs.items()}
    cpu = {k: max(x["cpu"] for x in v) for k, v in runs.items()}
    for k in kinds:
        print(f"{LABELS[k]:36s} {best[k]:8,.0f} tok/s  {cpu[k]:7,.0f} per CPU s  "
              f"{best[k] / best['peer']:.2f}x the peer")
    print(f"ratio pretrain train / nanoGPT-style: {best['ours'] / best['peer']:.2f}x (goal >= 1.2x); "
          f"per CPU second {cpu['ours'] / cpu['peer']:.2f}x; "
          f"against the control {best['ours'] / best['control']:.2f}x")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        text = training_text(tmp)
        sync_s, async_s, n = save_blocking(text, tmp / "save", 3)
        print(f"checkpoint of {n:,} params + AdamW: sync blocks {sync_s * 1e3:.0f} ms, async blocks "
              f"{async_s * 1e3:.0f} ms ({async_s / sync_s:.0%} of sync; goal <= 10%)")


if __name__ == "__main__":
    main()
