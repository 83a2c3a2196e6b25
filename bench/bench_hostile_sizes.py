"""Benchmark: the hostile sizes bounded in session 7, each read by a child process (VmHWM, seconds).

Builds each file in a temporary folder at the size named (a gzip member of N MiB of spaces is one
compressed MiB repeated, so a 4 GiB record is a 4 MB file and no 4 GiB buffer), then reads it with
the code under `--src` (default: this checkout's) in a child process limited to 3 GB of address
space, and prints seconds, peak RSS and what the reader said. Run it once with an export of an
older commit as `--src` to get the "before" column (`git archive COMMIT src | tar -x -C /tmp/old`).

- warc-member: a record of `--warc-mib` MiB alone in its gzip member, between two good records;
- warc-whole: the same three records as one gzip stream;
- parquet-wide: one row group, `--columns` int8 columns beside id and text;
- dedup-same: `pretrain dedup --workers 1` on `--dedup-docs` copies of one text (peak RSS of the run).

The machine these numbers come from is shared (2 cores, 8 agents): seconds are indicative.
Run: .venv/bin/python bench/bench_hostile_sizes.py [--warc-mib 4096] [--columns 20000] [--dedup-docs 200000]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

MiB = 1 << 20
HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE / "tests"))  # the test suite's maker of hostile inputs, shared
from hostile import spaces_member  # noqa: E402

_CHILD = r"""
import json, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
from pretrain.curate.readers import ReaderConfig, read_documents
errors, ids, t0 = [], [], time.perf_counter()
for d in read_documents(sys.argv[1], ReaderConfig(), lambda p, r, why: errors.append(f"{r}: {why}")):
    ids.append(d.id[-6:])
hwm = [int(x.split()[1]) // 1024 for x in open("/proc/self/status") if x.startswith("VmHWM")][0]
print(json.dumps({"seconds": round(time.perf_counter() - t0, 2), "peak_mb": hwm, "ids": ids,
                  "errors": [e[:140] for e in errors]}))
"""


def warc_record(n: int, body: bytes = b"", http_length: int | None = None) -> bytes:
    """A WARC response record; with `http_length`, only its head (the body follows elsewhere)."""
    length = len(body) if http_length is None else http_length
    http = f"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {length}\r\n\r\n".encode()
    head = (f"WARC/1.0\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:00000000-0000-0000-0000-{n:012d}>"
            f"\r\nWARC-Target-URI: http://example.org/{n}\r\nContent-Type: application/http; msgtype=response"
            f"\r\nContent-Length: {len(http) + length}\r\n\r\n").encode()
    return head + http + (body + b"\r\n\r\n" if http_length is None else b"")


def page(n: int) -> bytes:
    return warc_record(n, f"<html><body><p>Page {n}, a good one.</p></body></html>".encode())


def make_files(folder: Path, args) -> dict[str, Path]:
    big = warc_record(1, http_length=args.warc_mib * MiB)
    member = folder / "member.warc.gz"
    member.write_bytes(gzip.compress(page(0), mtime=0) + spaces_member(big, args.warc_mib, b"\r\n\r\n")
                       + gzip.compress(page(2), mtime=0))
    whole = folder / "whole.warc.gz"
    whole.write_bytes(spaces_member(page(0) + big, args.warc_mib, b"\r\n\r\n" + page(2)))
    import pyarrow as pa
    import pyarrow.parquet as pq

    cols = {"id": ["a", "b"], "text": ["one", "two"]}
    cols.update({f"c{i}": pa.array([1, 2], pa.int8()) for i in range(args.columns)})
    wide = folder / "wide.parquet"
    pq.write_table(pa.table(cols), wide)
    same = folder / "same" / "docs.jsonl"
    same.parent.mkdir()
    text = "the same document text repeated across the whole corpus with enough words to shingle"
    lines = (json.dumps({"id": f"d{i:07d}", "text": text}) + "\n" for i in range(args.dedup_docs))
    same.write_text("".join(lines))
    return {"warc-member": member, "warc-whole": whole, "parquet-wide": wide, "dedup-same": same.parent}


def run(case: str, path: Path, src: str, folder: Path) -> str:
    env = {**os.environ, "PYTHONPATH": src}
    if case != "dedup-same":
        r = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, env=env)
        if r.returncode:
            return f"failed: {r.stderr.strip().splitlines()[-1]}"
        out = json.loads(r.stdout.strip().splitlines()[-1])
        return f"{out['seconds']:>7} s {out['peak_mb']:>5} MB  kept {out['ids']}  said {out['errors']}"
    out = folder / f"out-{abs(hash(src))}"
    r = subprocess.run(["/usr/bin/env", "time", "-f", "%e %M", sys.executable, "-m", "pretrain", "dedup",
                        str(path), "-o", str(out), "--workers", "1", "--quiet"],
                       capture_output=True, text=True, env=env)
    if r.returncode:
        return f"failed: {r.stderr.strip()[-300:]}"
    seconds, kb = r.stderr.strip().splitlines()[-1].split()
    return f"{seconds:>7} s {int(kb) // 1024:>5} MB  (whole run, peak RSS)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", default=str(HERE / "src"), help="the source tree to measure")
    ap.add_argument("--warc-mib", type=int, default=1024)
    ap.add_argument("--columns", type=int, default=20000)
    ap.add_argument("--dedup-docs", type=int, default=50000)
    ap.add_argument("--cases", default="warc-member,warc-whole,parquet-wide,dedup-same")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        files = make_files(Path(tmp), args)
        print(f"source: {args.src}")
        for case in args.cases.split(","):
            size = sum(f.stat().st_size for f in files[case].rglob("*")) if files[case].is_dir() \
                else files[case].stat().st_size
            print(f"{case:13} ({size / 1e6:.1f} MB on disk): {run(case, files[case], args.src, Path(tmp))}")


if __name__ == "__main__":
    main()
