"""The GPU checks of the training issue, as one prepared script for a lent GPU (H200 here).

    PYTHONPATH=src python3 bench/bench_gpu.py [--out DIR]           # on the GPU machine, ~3-5 min
    .venv/bin/python bench/bench_gpu.py --device cpu --tiny         # the same code path, tiny, on a CPU

For each model, `pretrain train`'s Trainer runs bf16 (autocast, fp32 master weights) with
`parallel.compile=true`, a few untimed steps (compilation), then timed steps; it prints tokens/s and
MFU = tokens/s x FLOPs per token (plan.compute, 6N + 12 L d s) / the device's peak (989 TFLOP/s dense
bf16 for the H100/H200 SXM). The models: GPT-2 small (124M, context 1024) and Llama 3.2 1B's shape
(1.24B, context 2048 here). The issue's goal: MFU >= 50% at ~1B.
Then fp8 (E4M3 forward, E5M2 gradients, per-tensor scales): the same 1B model's tokens/s, and a short
run of gpt2-124m in bf16 and in fp8 from the same seed and batches, whose losses must stay close.
Initialization (train/init.py): seconds for the 1B model to be allocated and filled on the device
(values drawn on the CPU in row blocks, the same on any layout and device). Context parallelism's
attention on the GPU path (SDPA with the positions' mask): one rank's half of an 8,192-token
sequence over the whole sequence's keys, against causal SDPA on the whole sequence (the two cp
ranks' slices compared; a one-GPU machine cannot run two NCCL ranks on one device), and its time.
Results go to stdout and, as JSON lines, to OUT/bench_gpu.jsonl. With no CUDA device and no
`--device cpu`, it says so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

from pretrain.train.testing import fallback_text, tiny_config
from pretrain.train.trainer import Trainer

PEAK = 989e12  # H100/H200 SXM, dense bf16 (plan.hardware)
MODELS = {  # name -> overrides; batch x seq_len tokens per step
    "gpt2-124m": ["model.preset=gpt2-124m", "data.batch_size=32"],
    "llama-3.2-1b": ["model.preset=llama-3.2-1b", "model.seq_len=2048", "data.batch_size=8"],
}
TINY = {"tiny": ["model.preset=tiny-cpu", "model.seq_len=64", "data.batch_size=4"]}
COMMON = ["train.threads=0", "log.tensorboard=false", "checkpoint.every=1000000", "optim.lr=3e-4",
          "schedule.warmup_steps=10", "stability.rollback=false", "precision.dtype=bf16"]


def measure(name: str, over: list[str], device: str, text: Path, tmp: Path, warmup: int, steps: int,
            extra: tuple[str, ...] = ()) -> dict:
    sets = COMMON + over + [f"train.device={device}", f"log.peak_flops={PEAK if device == 'cuda' else 0}",
                            f"train.steps={warmup + steps}", *extra]
    _sync(device)
    t_init = time.perf_counter()
    t = Trainer(tiny_config(tmp / name, text, *sets), quiet=True)
    _sync(device)
    init_s = time.perf_counter() - t_init
    n_params = sum(p.numel() for p in t.params)
    t0 = time.perf_counter()
    for _ in range(warmup):
        t.train_step()
    compile_s = time.perf_counter() - t0
    _sync(device)
    t0 = time.perf_counter()
    recs = [t.train_step() for _ in range(steps)]
    _sync(device)
    dt = time.perf_counter() - t0
    tokens = steps * t.cfg.data.batch_size * t.shape.seq_len
    tps = tokens / dt
    mem = torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else 0.0
    return {"model": name, "params": n_params, "precision": t.cfg.precision.dtype, "tokens_per_s": tps,
            "mfu": tps * t.fpt / PEAK if device == "cuda" else None, "flops_per_token": t.fpt,
            "warmup_s": compile_s, "steps": steps, "trainer_init_s": init_s, "max_mem_gib": mem,
            "losses": [r["loss"] for r in recs if r]}


def cp_attention(device: str, seq: int, cp: int = 2) -> dict:
    """Each cp rank's queries over all keys with the positions' mask (train/context.py) against the
    matching rows of causal attention over the whole sequence; bf16 on a GPU, fp32 on a CPU."""
    import numpy as np

    from pretrain.train.context import ContextParallel, positions
    from pretrain.train.model import masked_attention

    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    gen = torch.Generator(device=device).manual_seed(0)
    q, k, v = (torch.randn(1, 16, seq, 64, device=device, dtype=dtype, generator=gen) for _ in range(3))
    full = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    k_pos = torch.as_tensor(np.concatenate([positions(seq, cp, r) for r in range(cp)]))
    err, secs = 0.0, 0.0
    for r in range(cp):
        pos = torch.as_tensor(positions(seq, cp, r))
        ctx = ContextParallel(None, pos, k_pos)
        kk, vv = k[:, :, k_pos.to(device)], v[:, :, k_pos.to(device)]  # the gathered order
        _sync(device)
        t0 = time.perf_counter()
        y = masked_attention(q[:, :, pos.to(device)], kk, vv, ctx.mask(dtype, device))
        _sync(device)
        secs = max(secs, time.perf_counter() - t0)
        err = max(err, (y.float() - full[:, :, pos.to(device)].float()).abs().max().item())
    return {"model": f"cp{cp} attention", "check": "cp_attention", "seq": seq, "max_abs_diff": err,
            "seconds_per_rank": secs}


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def fp8_vs_bf16(name: str, over: list[str], device: str, text: Path, tmp: Path, steps: int) -> dict:
    """The same seed and batches in bf16 and fp8: the final losses' gap (fp8 should track bf16)."""
    runs = {}
    for dtype in ("bf16", "fp8"):
        sets = COMMON + over + [f"train.device={device}", f"train.steps={steps}", f"precision.dtype={dtype}",
                                "parallel.compile=false"]
        t = Trainer(tiny_config(tmp / f"cmp-{dtype}", text, *sets), quiet=True)
        runs[dtype] = [r["loss"] for r in (t.train_step() for _ in range(steps)) if r]
    last = {k: sum(v[-5:]) / 5 for k, v in runs.items()}
    return {"model": name, "check": "fp8_vs_bf16", "steps": steps, "bf16_last5": last["bf16"],
            "fp8_last5": last["fp8"], "rel_gap": abs(last["fp8"] - last["bf16"]) / last["bf16"],
            "first": {k: v[0] for k, v in runs.items()}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--tiny", action="store_true", help="a tiny model only (checks this script on a CPU)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--out", default="", help="folder for bench_gpu.jsonl")
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: nothing to measure (run on a GPU, or --device cpu --tiny)")
        return 0
    if args.device == "cuda":
        p = torch.cuda.get_device_properties(0)
        print(f"device: {p.name}, {p.total_memory / 2**30:.0f} GiB, sm_{p.major}{p.minor}; "
              f"torch {torch.__version__}")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        text = fallback_text(tmp / "topics.txt")
        models = TINY if args.tiny else MODELS
        compiled = ("parallel.compile=true",) if args.device == "cuda" else ()
        for name, over in models.items():
            results.append(measure(name, over, args.device, text, tmp, args.warmup, args.steps, compiled))
        fp8_ok = args.device == "cuda" and torch.cuda.get_device_capability() >= (8, 9)
        if fp8_ok:
            name = "llama-3.2-1b" if not args.tiny else "tiny"
            results.append(measure(name, models[name], args.device, text, tmp, args.warmup, args.steps,
                                   (*compiled, "precision.dtype=fp8")))
            small = "gpt2-124m" if not args.tiny else "tiny"
            results.append(fp8_vs_bf16(small, models[small], args.device, text, tmp, 40))
        results.append(cp_attention(args.device, 1024 if args.tiny else 8192))
    for r in results:
        if "tokens_per_s" in r:
            mfu = f"MFU {r['mfu']:.1%}" if r["mfu"] is not None else "MFU n/a (CPU)"
            print(f"{r['model']:14s} {r['params'] / 1e6:8.1f}M  {r['precision']:4s}  "
                  f"{r['tokens_per_s']:12,.0f} tok/s  {mfu}  warmup {r['warmup_s']:.1f} s  "
                  f"peak mem {r['max_mem_gib']:.1f} GiB  init {r['trainer_init_s']:.1f} s  "
                  f"loss {r['losses'][0]:.3f} -> {r['losses'][-1]:.3f}")
        elif r.get("check") == "cp_attention":
            print(f"{r['model']:14s} seq {r['seq']}: max |diff| vs causal SDPA {r['max_abs_diff']:.2e}, "
                  f"{r['seconds_per_rank'] * 1e3:.1f} ms per rank")
        else:
            print(f"{r['model']:14s} fp8 vs bf16 over {r['steps']} steps: last-5 mean loss "
                  f"{r['fp8_last5']:.4f} vs {r['bf16_last5']:.4f} ({r['rel_gap']:.2%} apart)")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "bench_gpu.jsonl").write_text("".join(json.dumps(r) + "\n" for r in results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
