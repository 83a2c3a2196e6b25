"""Run one reader (or extractor) on a hostile file in a child process bounded in time and memory,
and make hostile inputs cheaply (`spaces_member`: a gzip member of gigabytes in a few kB).

The child sets RLIMIT_AS before importing anything heavy, reads every document, and prints one JSON
line: the ids kept (the first 100, their count and the last), the errors reported, its peak RSS
and its seconds. A reader that runs away in memory dies with MemoryError (a failed test, not a
swapping machine); one that runs away in time is killed by the parent's timeout.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")

# `peak_mb()` as source text for the `python -c` children that measure themselves (here, in
# tests/test_tokens_pieces.py and bench/bench_tokens_long.py): VmHWM is this process's own peak in
# MB (ru_maxrss keeps the forking parent's across exec).
PEAK_MB = r"""
def peak_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
"""

_CHILD = r"""
import json, resource, sys, time""" + PEAK_MB + r"""limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from pretrain.curate.readers import ReaderConfig, read_documents
if sys.argv[2].endswith(".parquet"):
    import pyarrow.parquet  # noqa: F401  (the Parquet reader imports it lazily: base, not reading)
cfg = ReaderConfig(**json.loads(sys.argv[3]))
base_mb = peak_mb()  # the interpreter, torch-free imports and pyarrow: what reading adds is peak - base
errors, ids, n, last, t0 = [], [], 0, None, time.perf_counter()
docs = read_documents(sys.argv[2], cfg, lambda p, r, why: errors.append([str(r), why]))
if len(sys.argv) > 4:  # the records are HTML pages: run them through the extract step too
    from pretrain.curate.extract import ExtractConfig, ExtractStep
    step = ExtractStep(ExtractConfig(**json.loads(sys.argv[4])))
    step.on_reject = lambda doc, name, why: errors.append([doc.id, why])
    docs = step(d for d in docs if d.cache.update(html=True) is None)
for doc in docs:
    n, last = n + 1, doc.id
    if n <= 100:  # a million ids would measure this list, not the reader
        ids.append(doc.id)
print(json.dumps({"ids": ids, "n": n, "last": last, "errors": errors[:100],
                  "seconds": time.perf_counter() - t0,
                  "peak_mb": peak_mb(), "base_mb": base_mb}))
"""


def read_in_child(path: Path, timeout: float = 60, mem_mb: int = 2048, extract: dict | None = None,
                  **cfg) -> dict:
    """Documents of `path` read by a child with `mem_mb` of address space and `timeout` seconds.

    With `extract` (an ExtractConfig's fields), each record is an HTML page and goes through the
    extract step; its drops are reported as errors (id, reason).
    """
    env = {**os.environ, "PYTHONPATH": SRC}
    args = [str(mem_mb << 20), str(path), json.dumps(cfg)]
    if extract is not None:
        args.append(json.dumps(extract))
    r = subprocess.run([sys.executable, "-c", _CHILD, *args],
                       capture_output=True, text=True, timeout=timeout, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


MiB = 1 << 20


def spaces_member(before: bytes, mib: int, after: bytes) -> bytes:
    """A gzip member: `before`, `mib` MiB of spaces, `after` (CRC and size true), built without
    compressing the spaces more than once: after a full flush each MiB deflates to the same bytes."""
    block = b" " * MiB
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = c.compress(before) + c.flush(zlib.Z_FULL_FLUSH)
    rep = c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)
    assert rep == c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)  # steady state: the same bytes
    last = c.compress(after) + c.flush()
    crc = zlib.crc32(before)
    for _ in range(mib):
        crc = zlib.crc32(block, crc)
    size = len(before) + mib * MiB + len(after)
    trailer = struct.pack("<II", zlib.crc32(after, crc), size & 0xFFFFFFFF)
    return b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff" + first + rep * mib + last + trailer
