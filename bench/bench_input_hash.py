"""Benchmark: what a rerun pays to hash a local input whose mtime moved (curate/versions.py).

`versions.content` (xxh3_128 in 8 MiB blocks) against peers on the same file in the same run:
hashlib's md5 (the algorithm of an S3 ETag for a single-part upload) and sha256 (what a registry
or `sha256sum` checks), and a bare read of the same blocks (the floor: no hashing at all). The
file is a real one, a WARC from ../shared/data (or PRETRAIN_SHARED_DATA) repeated to --mb MB
(absent: CPython's pydoc topics repeated), hashed from the page cache (a rerun's input was just
written or read); disk speed is not measured. Throughput in MB/s of file bytes, best of 3 (the
machine may be shared: CPU seconds of this process are printed too).

Run: .venv/bin/python bench/bench_input_hash.py [--mb 256]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import tempfile
import time
from pathlib import Path

from pretrain.curate import versions

WARC = "warc/derived/scrapinghub-aeb-responses.part1.warc.gz"


def source_bytes() -> tuple[str, bytes]:
    here = Path(__file__).resolve().parents[2] / "shared" / "data"  # ../shared/data of the checkout
    shared = Path(os.environ.get("PRETRAIN_SHARED_DATA") or here)
    if (shared / WARC).is_file():
        return str(shared / WARC), (shared / WARC).read_bytes()
    import pydoc_data.topics

    return "pydoc topics", "".join(pydoc_data.topics.topics.values()).encode()


def peer(name: str):
    def run(path: Path) -> str:
        h = hashlib.new(name)
        with open(path, "rb") as f:
            while block := f.read(versions.HASH_BLOCK):
                h.update(block)
        return h.hexdigest()
    return run


def bare_read(path: Path) -> int:
    n = 0
    with open(path, "rb") as f:
        while block := f.read(versions.HASH_BLOCK):
            n += len(block)
    return n


def best(fn, path: Path) -> tuple[float, float]:
    """(wall s, CPU s) of the fastest of 3 runs."""
    runs = []
    for _ in range(3):
        t0, c0 = time.perf_counter(), time.process_time()
        fn(path)
        runs.append((time.perf_counter() - t0, time.process_time() - c0))
    return min(runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=256, help="size of the file hashed, MB")
    args = ap.parse_args()
    name, data = source_bytes()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "input.warc.gz"
        with open(path, "wb") as f:
            for _ in range(max(1, args.mb * 10**6 // len(data))):
                f.write(data)
        size = path.stat().st_size
        print(f"file: {name} repeated to {size / 1e6:.0f} MB (page cache)")
        for label, fn in [("bare read (floor)", bare_read), ("ours: xxh3_128", versions.content),
                          ("peer: hashlib md5", peer("md5")), ("peer: hashlib sha256", peer("sha256"))]:
            wall, cpu = best(fn, path)
            print(f"{label:24s} {size / 1e6 / wall:8.0f} MB/s  ({wall:.3f} s wall, {cpu:.3f} s CPU)")


if __name__ == "__main__":
    main()
