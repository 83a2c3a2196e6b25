"""Benchmark: a gzip member holding several WARC records, one of which lies about its length and is
followed by `--mib` MiB of junk (spaces: a few kB compressed), then the member's last records.
Read by `tests/hostile.py`'s child (VmHWM above the imports, seconds, documents kept) with this
checkout's reader and with `--before`'s in the same run (default: ../../main/src when it exists).
Real records from ../shared/data/warc/dolma/sample-0000.warc.gz (the file is skipped, with a
line, when ../shared is absent). `--window` sets `reader.warc_max_skip_bytes` (default: the
reader's own, 256 MiB).

With `--speed`, the cost on normal input instead: the same real file read whole, best of 3, the
two readers alternating `--rounds` times (only same-run ratios mean anything on a shared machine).

Run: .venv/bin/python bench/bench_warc_members.py [--mib 1024] [--window BYTES] [--speed]
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE / "tests"))
sys.path.insert(0, str(HERE / "bench"))
from bench_parquet_cells import SPEED  # noqa: E402  (the child that reads a file whole, best of 3)

DATA = Path(os.environ.get("PRETRAIN_SHARED_DATA") or HERE.parent.parent / "shared" / "data")
SAMPLE = DATA / "warc" / "dolma" / "sample-0000.warc.gz"


def records(n: int) -> list[bytes]:
    raw, out = SAMPLE.read_bytes(), []
    while raw and len(out) < n:
        d = zlib.decompressobj(31)
        m = d.decompress(raw)
        raw = d.unused_data
        if b"WARC-Type: response" in m[:600] and len(m) < 30_000:
            out.append(m)
    return out


def build(folder: Path, mib: int) -> Path:
    from hostile import spaces_member

    a, r0, r1, r2, r3, b = records(6)
    length = re.search(rb"Content-Length: (\d+)", r1)[1]
    lying = r1.replace(b"Content-Length: " + length, b"Content-Length: %d" % (2 * (mib << 20)), 1)
    path = folder / "member.warc.gz"
    path.write_bytes(gzip.compress(a, mtime=0) + spaces_member(r0 + lying, mib, b"\r\n\r\n" + r2 + r3)
                     + gzip.compress(b, mtime=0))
    return path


def main() -> None:
    import hostile

    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--window", type=int, default=None, help="reader.warc_max_skip_bytes")
    ap.add_argument("--src", default=str(HERE / "src"))
    main_src = HERE.parent.parent / "main" / "src"
    ap.add_argument("--before", default=str(main_src) if main_src.is_dir() else None)
    ap.add_argument("--speed", action="store_true")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if not SAMPLE.is_file():
        print(f"skipped: {SAMPLE} not found (set PRETRAIN_SHARED_DATA)")
        return
    labels = [(label, src) for label, src in (("before", args.before), ("now", args.src)) if src]
    if args.speed:
        rates: dict[str, list[float]] = {label: [] for label, _ in labels}
        for _ in range(args.rounds):
            for label, src in labels:
                r = subprocess.run([sys.executable, "-c", SPEED, str(SAMPLE)], capture_output=True, text=True,
                                   env={**os.environ, "PYTHONPATH": src}, check=True)
                rates[label].append(float(r.stdout.strip()))
        for label, got in rates.items():
            print(f"{label:6} {SAMPLE.name}: {', '.join(f'{x:,.0f}' for x in got)} docs/s")
        if len(rates) == 2:
            print(f"now / before, best against best: {max(rates['now']) / max(rates['before']):.2f}")
        return
    cfg = {} if args.window is None else {"warc_max_skip_bytes": args.window}
    with tempfile.TemporaryDirectory() as tmp:
        path = build(Path(tmp), args.mib)
        for label, src in labels:
            hostile.SRC = src
            r = hostile.read_in_child(path, timeout=600, mem_mb=4096, **cfg)
            print(f"{label:6} {path.stat().st_size:,} B file, {args.mib} MiB of junk in the member: "
                  f"{r['n']} of 5 documents, {r['peak_mb'] - r['base_mb']:,.0f} MB above the imports, "
                  f"{r['seconds']:.2f} s; {[why[:110] for _, why in r['errors']]}")


if __name__ == "__main__":
    main()
