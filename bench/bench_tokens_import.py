"""Benchmark of `pretrain tokens import-megatron` against a plain copy of the same files, same run.

Writes a Megatron-LM indexed dataset with megatron-core's own `IndexedDatasetBuilder` (documents of
random ids, 1 to 4,000 tokens, int32 as `preprocess_data.py` writes a vocabulary past 65,500 ids,
or uint16), then times, on one core:
- `shutil.copyfile` of PREFIX.bin + PREFIX.idx (the floor for any import that writes its own copy);
- megatron-core's `IndexedDataset` reading every document (what Megatron itself does with them);
- `import_tokens` (validate the index, check every id, convert, write shard + offsets + manifest),
  with end-of-text already present (--append-eod) and without it (one id inserted per document).

Run: .venv/bin/python bench/bench_tokens_import.py [--mtokens 20] [--repeats 3]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np


def build(prefix: Path, n_tokens: int, vocab: int, eot: int | None, dtype) -> int:
    import torch
    from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

    rng = np.random.default_rng(0)
    b = IndexedDatasetBuilder(f"{prefix}.bin", dtype=dtype)
    written = docs = 0
    while written < n_tokens:
        ids = rng.integers(1, vocab, size=int(rng.integers(1, 4000)))
        if eot is not None:
            ids[-1] = eot
        b.add_item(torch.from_numpy(ids))
        b.end_document()
        written, docs = written + ids.size, docs + 1
    b.finalize(f"{prefix}.idx")
    return docs


def best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mtokens", type=float, default=20, help="millions of tokens (default 20)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    from pretrain.tokens.imports import import_tokens
    from pretrain.tokens.tokenizer import train_tokenizer

    n = int(args.mtokens * 1e6)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        tok = train_tokenizer(["a b c d e f g"] * 10, vocab_size=300)
        tok.save(str(root / "tok.json"))
        vocab = tok.get_vocab_size()
        prefix = root / "mg"
        for label, eot, dtype in (("eod present, int32", 0, np.int32), ("no eod, int32", None, np.int32),
                                  ("eod present, uint16", 0, np.uint16)):
            docs = build(prefix, n, vocab, eot, dtype)
            size = sum(Path(f"{prefix}{s}").stat().st_size for s in (".bin", ".idx"))

            def copy() -> None:
                for s in (".bin", ".idx"):
                    shutil.copyfile(f"{prefix}{s}", root / f"copy{s}")

            def megatron_read() -> None:
                ds = IndexedDataset(str(prefix), mmap=True)
                for i in range(len(ds)):
                    ds[i].sum()

            def ours() -> None:
                shutil.rmtree(root / "out", ignore_errors=True)
                import_tokens("megatron", [str(prefix)], root / "tok.json", root / "out")

            t_copy, t_read, t_ours = (best(f, args.repeats) for f in (copy, megatron_read, ours))
            print(f"{label}: {n / 1e6:.0f}M tokens, {docs:,} documents, {size / 2**20:.0f} MiB")
            print(f"  plain copy of .bin+.idx      {t_copy:7.3f} s  {n / t_copy / 1e6:7.1f} M tokens/s")
            print(f"  megatron IndexedDataset read {t_read:7.3f} s  {n / t_read / 1e6:7.1f} M tokens/s")
            print(f"  pretrain import-megatron     {t_ours:7.3f} s  {n / t_ours / 1e6:7.1f} M tokens/s "
                  f"({t_ours / t_copy:.1f}x the copy)")


if __name__ == "__main__":
    main()
