"""Throughput of `pretrain.numerics.quantize` (numpy emulation) against torch's own dtype conversion.

Prints millions of values per second for each format, and the ratio ours / torch, measured in the
same run on the same 4M float32 values. The emulation exists for exactness and teaching, not speed:
torch's conversion is a fused C++ kernel, ours is a dozen numpy passes over float64.
Run: .venv/bin/python bench/bench_numerics.py
"""

from __future__ import annotations

import time

import numpy as np
import torch

from pretrain.numerics import BF16, FP8_E4M3, FP8_E5M2, FP16, quantize

N = 4_000_000
PAIRS = [(BF16, torch.bfloat16), (FP16, torch.float16), (FP8_E4M3, torch.float8_e4m3fn),
         (FP8_E5M2, torch.float8_e5m2)]


def best_of(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    torch.set_num_threads(1)
    x = (np.random.default_rng(0).standard_normal(N) * 100).astype(np.float32)
    xt = torch.from_numpy(x)
    print(f"{N:,} float32 values, one thread; best of 3")
    print(f"{'format':<10} {'ours Mval/s':>12} {'torch Mval/s':>13} {'ours/torch':>11}")
    for fmt, dtype in PAIRS:
        ours = best_of(lambda fmt=fmt: quantize(x, fmt))
        theirs = best_of(lambda dtype=dtype: xt.to(dtype))
        print(f"{fmt.name:<10} {N / ours / 1e6:12.1f} {N / theirs / 1e6:13.1f} {theirs / ours:11.3f}")


if __name__ == "__main__":
    main()
