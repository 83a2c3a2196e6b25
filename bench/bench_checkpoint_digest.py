"""Benchmark: what the checkpoint digests cost (train/checkpoint.py: `own_digests` at a save,
`verify` at a load), against the DCP save and load of the same state in the same run.

A state of --mb MB of fp32 tensors (random, so no file system can compress it), shaped like a
model's (a few large matrices, many small vectors) plus AdamW-like moments, saved with
`dcp.save` to a temporary folder; then the digest read-back of every file the save wrote
(xxh3_128, 8 MiB blocks, as the save's background thread does it), sha256 of the same files (the
peer: what `sha256sum` checks), and `dcp.load` of the whole state (what every resume pays
anyway). Files are read from the page cache (just written); disk speed is not measured. Best of 3;
seconds per GB of checkpoint and the ratio digest / save in the same run are printed (the machine
may be shared by other jobs: ratios, not absolute times, are the claim).

Run: .venv/bin/python bench/bench_checkpoint_digest.py [--mb 512]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import warnings
from pathlib import Path

import torch
import torch.distributed.checkpoint as dcp

from pretrain.train import checkpoint as ck

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_numerics import best_of as best  # noqa: E402  (best of 3, wall seconds)

warnings.filterwarnings("ignore")


def state(mb: int) -> dict:
    g = torch.Generator().manual_seed(0)
    n = mb * (1 << 20) // 4 // 3  # params, exp_avg, exp_avg_sq
    side = 1024
    out, i = {}, 0
    while n > 0:
        rows = min(n // side, 4096) or 1
        for part in ("w", "m", "v"):
            out[f"{part}{i}"] = torch.randn(rows, side, generator=g)
        out[f"b{i}"] = torch.randn(side, generator=g)
        n -= rows * side
        i += 1
    return out


def sha256_all(path: Path) -> None:
    for p in sorted(path.iterdir()):
        h = hashlib.sha256()
        with open(p, "rb") as f:
            while chunk := f.read(8 << 20):
                h.update(chunk)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=512)
    args = ap.parse_args()
    sd = state(args.mb)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "step_0000001"

        def save():
            dcp.save(sd, checkpoint_id=str(path), no_dist=True)

        save_s = best(save)
        gb = sum(p.stat().st_size for p in path.iterdir()) / 1e9
        xxh_s = best(lambda: ck.own_digests(path, 0))
        sha_s = best(lambda: sha256_all(path))
        target = {k: torch.empty_like(v) for k, v in sd.items()}
        load_s = best(lambda: dcp.load(target, checkpoint_id=str(path), no_dist=True))
    print(f"checkpoint: {gb:.3f} GB in {len(list(sd))} tensors, torch threads {torch.get_num_threads()}")
    for name, s in (("dcp.save", save_s), ("dcp.load", load_s), ("xxh3_128 read-back (ours)", xxh_s),
                    ("sha256 read-back (peer)", sha_s)):
        print(f"  {name:28s} {s:7.3f} s  {s / gb:6.3f} s/GB  {gb / s:6.2f} GB/s")
    print(f"ratio xxh3 digest / dcp.save: {xxh_s / save_s:.2f}; / dcp.load: {xxh_s / load_s:.2f}; "
          f"sha256 / xxh3: {sha_s / xxh_s:.1f}x")


if __name__ == "__main__":
    main()
