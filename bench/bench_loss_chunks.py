"""The trainer's loss whole and over train.loss_chunks slices, side by side in one run on the CPU.

For each chunk count: tokens/s of one forward and backward of the trainer's own step
(Trainer._forward_backward: a 2-layer model whose head dominates, V = 32,768, d_model 128, 8 x 256
tokens), best of 5, interleaved so machine load hits every row alike; the peak bytes the step adds
over its start, counted live by storage (the CPU has no allocator statistics); and what
fits.estimate predicts for the loss (plan/memory.py, 12 bytes per vocabulary entry per token,
divided by the chunks). The unchunked path (chunks 1) is the reference row.
Run: PYTHONPATH=$PWD/src .venv/bin/python bench/bench_loss_chunks.py [bf16|fp32]
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

SHAPE = ("log.tensorboard=false", "checkpoint.every=0", "model.n_layers=2", "model.d_model=128",
         "model.d_ff=256", "model.n_heads=4", "model.n_kv_heads=2", "model.seq_len=256",
         "model.vocab_size=32768", "data.batch_size=8")
CHUNKS = (1, 2, 4, 8, 16)


def trainer(tmp: Path, text: Path, dtype: str, chunks: int):
    from pretrain.train.testing import tiny_config
    from pretrain.train.trainer import Trainer

    cfg = tiny_config(tmp / f"{dtype}-{chunks}", text, *SHAPE, f"precision.dtype={dtype}",
                      f"train.loss_chunks={chunks}", "train.threads=1")
    return cfg, Trainer(cfg, quiet=True)


def peak(tr) -> int:
    from test_plan_activations_peers import _LiveBytes

    live = _LiveBytes()
    with live:
        tr._forward_backward(1)  # noqa: SLF001
    tr.optimizer.zero_grad(set_to_none=True)
    return live.peak


def main() -> None:
    from pretrain.train.fits import estimate
    from pretrain.train.model import resolve_shape
    from pretrain.train.parallel import dims_from_config
    from pretrain.train.testing import fallback_text

    dtype = sys.argv[1] if len(sys.argv) > 1 else "bf16"
    tmp = Path(tempfile.mkdtemp(prefix="bench_loss_chunks-"))
    shared = (Path(os.environ.get("PRETRAIN_SHARED_DATA") or HERE.parent.parent / "shared" / "data")
              / "lm" / "tinyshakespeare" / "input.txt")
    text = shared if shared.is_file() else fallback_text(tmp / "topics.txt")
    runs = {c: trainer(tmp, text, dtype, c) for c in CHUNKS}
    torch.set_num_threads(1)
    tokens = 8 * 256
    times: dict[int, list[float]] = {c: [] for c in CHUNKS}
    for _ in range(5):
        for c, (_, tr) in runs.items():
            t0 = time.perf_counter()
            tr._forward_backward(1)  # noqa: SLF001
            times[c].append(time.perf_counter() - t0)
            tr.optimizer.zero_grad(set_to_none=True)
    print(f"{dtype}, one thread, {tokens:,} tokens per step, V = 32,768, d_model 128; best of 5")
    print(f"{'chunks':>6} {'tokens/s':>9} {'vs whole':>9} {'peak MB':>8} {'loss MB (est.)':>15}")
    base = tokens / min(times[1])
    for c, (cfg, tr) in runs.items():
        rate = tokens / min(times[c])
        need = estimate(cfg, resolve_shape(cfg.model), dims_from_config(cfg.parallel))
        print(f"{c:>6} {rate:>9,.0f} {rate / base:>9.2f} {peak(tr) / 1e6:>8.1f} {need.logits / 1e6:>15.1f}")


if __name__ == "__main__":
    main()
