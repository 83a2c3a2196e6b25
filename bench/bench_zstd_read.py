"""Benchmark: reading a .jsonl.zst file, ours against the `zstd` command-line tool on the same file.

Writes a JSONL file of web-like documents (Tiny Shakespeare paragraphs from ../shared/data when
present, else CPython's pydoc topics), compresses it with zstandard (level 3, zstd's default),
then measures, in CPU seconds of the process or child doing the work (the machine is shared):
- `zstd -dc FILE > /dev/null`: the peer's decompression throughput;
- our line reader (`_open_binary` + the bounded readline loop of `_read_jsonl`, no JSON parsing):
  the layer issue 20 made linear (it copied its pending buffer on every read);
- `read_documents` end to end (JSON parsing and Document objects included), for scale.
Throughputs are in decompressed MB/s; the goal is ours >= 0.5x the zstd tool.

Run: .venv/bin/python bench/bench_zstd_read.py [--mb 200]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import zstandard

from pretrain.curate.readers import ReaderConfig, _Bounded, _compressed_pos, _open_binary, read_documents

SHARED = Path(os.environ.get("PRETRAIN_SHARED_DATA")
        or Path(__file__).resolve().parents[2] / "shared" / "data")
SHAKESPEARE = SHARED / "lm" / "tinyshakespeare" / "input.txt"


def make_file(path: Path, mb: int) -> int:
    """A .jsonl.zst of about `mb` MB of JSONL; returns the decompressed size in bytes."""
    if SHAKESPEARE.is_file():
        paras = [p for p in SHAKESPEARE.read_text().split("\n\n") if p.strip()]
    else:
        from pydoc_data.topics import topics

        paras = [p for t in topics.values() for p in t.split("\n\n") if p.strip()]
    cctx = zstandard.ZstdCompressor(level=3)
    size, i = 0, 0
    with open(path, "wb") as f, cctx.stream_writer(f) as w:
        while size < mb << 20:
            doc = "\n\n".join(paras[(i * 7 + k) % len(paras)] for k in range(8))
            rec = {"id": f"doc-{i}", "url": f"https://example.org/{i}", "text": doc}
            line = json.dumps(rec).encode() + b"\n"
            w.write(line)
            size, i = size + len(line), i + 1
    return size


def cpu_self() -> float:
    return time.process_time()


def cpu_children() -> float:
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return c.ru_utime + c.ru_stime


def zstd_tool(path: Path) -> float:
    t0 = cpu_children()
    subprocess.run(["zstd", "-q", "-d", "-c", str(path)], stdout=subprocess.DEVNULL, check=True)
    return cpu_children() - t0


def our_lines(path: Path, cfg: ReaderConfig) -> tuple[float, int]:
    t0, n = cpu_self(), 0
    with _open_binary(path) as raw:
        stream = _Bounded(raw, cfg.max_file_bytes, cfg.max_ratio, _compressed_pos(raw))
        while line := stream.readline(cfg.max_record_bytes + 1):
            n += len(line)
    return cpu_self() - t0, n


def our_documents(path: Path, cfg: ReaderConfig) -> tuple[float, int]:
    t0 = cpu_self()
    n = sum(1 for _ in read_documents(path, cfg))
    return cpu_self() - t0, n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=int, default=200, help="decompressed size of the test file (default 200)")
    args = ap.parse_args()
    if shutil.which("zstd") is None:
        print("the zstd command-line tool is not installed: nothing to compare with", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "docs.jsonl.zst"
        size = make_file(path, args.mb)
        mb = size / 1e6
        print(f"file: {path.stat().st_size / 1e6:.1f} MB zstd -> {mb:.1f} MB JSONL")
        cfg = ReaderConfig()
        tool = min(zstd_tool(path) for _ in range(3))
        lines, n = min(our_lines(path, cfg) for _ in range(3))
        assert n == size, (n, size)
        docs, ndocs = our_documents(path, cfg)
        print(f"zstd -dc (peer)  {mb / tool:6.0f} MB/s  ({tool:.2f} CPU s)")
        print(f"ours, lines      {mb / lines:6.0f} MB/s  ({lines:.2f} CPU s) = {tool / lines:.2f}x the tool")
        print(f"ours, documents  {mb / docs:6.0f} MB/s  ({docs:.2f} CPU s, {ndocs:,} docs, JSON too)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
