"""Benchmark: the corpus job layer (one driver for curate, dedup, decontaminate).

    .venv/bin/python bench/bench_job.py memory            # peak RSS, 100k and 1M tiny docs, one file
    .venv/bin/python bench/bench_job.py memory --docs 100000,300000
    .venv/bin/python bench/bench_job.py s3                # curate WARCs from/to a local S3 server vs disk
    .venv/bin/python bench/bench_job.py scaling           # belt pages/s with 1 and 2 workers

memory: one JSONL file of N tiny documents (a few words each, 1% exact copies) through
`pretrain dedup` and through a filter-only belt (`steps = ["rules"]`, which drops most of them:
every drop is a reject record). Each run is a child process; its peak RSS is its own VmHWM. A
shard's memory should stay flat in N: documents and rejects stream to their writers. Dedup is
not flat by design: a shard's signatures (~0.6 KB/doc) are sorted in memory before they are
written, and the global stages use up to `dedup.memory_mb`; it runs up to --dedup-max documents.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = str(ROOT / "src")


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))


def tiny_corpus(path: Path, n: int) -> None:
    """n documents of 6-11 words from a 20k-word vocabulary (seeded); every 100th an exact copy
    of the one before (so dedup removes 1%)."""
    import random

    rng = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyz"  # no digits: normalization maps every digit to 0
    vocab = ["".join(rng.choices(letters, k=rng.randint(3, 8))) for _ in range(20_000)]
    prev = ""
    with open(path, "w") as f:
        for i in range(n):
            text = prev if i % 100 == 99 else " ".join(rng.choices(vocab, k=rng.randint(6, 11)))
            prev = text
            f.write(json.dumps({"id": f"d{i}", "text": text}) + "\n")


_CHILD = """
import sys, json, time
from pretrain.curate.dedup_job import job_config
from pretrain.curate.pipeline import curate
from pretrain.curate.executor import LocalExecutor
job, inp, out, overrides = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
t0 = time.process_time()
stats = curate([inp], out, job_config(job, None, overrides), executor=LocalExecutor(1), job=job)
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
print(json.dumps({"kb": hwm, "cpu": time.process_time() - t0, "read": stats["documents"]["read"],
                  "kept": stats["documents"]["kept"]}))
"""


def run_child(job: str, inp: Path, out: Path, overrides: list[str]) -> dict:
    res = subprocess.run([sys.executable, "-c", _CHILD, job, str(inp), str(out), json.dumps(overrides)],
                         env=_env(), capture_output=True, text=True, timeout=900)
    if res.returncode:
        raise SystemExit(res.stderr[-3000:])
    return json.loads(res.stdout.strip().splitlines()[-1])


def bench_memory(sizes: list[int], dedup_max: int) -> None:
    print("peak RSS of one shard (one file), single process; tiny docs of 4-9 words")
    print(f"{'job':<22}{'docs':>10}{'read':>10}{'kept':>10}{'CPU s':>8}{'peak MB':>9}")
    with tempfile.TemporaryDirectory(prefix="bench-job-") as tmp:
        for n in sizes:
            inp = Path(tmp) / f"tiny{n}.jsonl"
            tiny_corpus(inp, n)
            for job, overrides in (("dedup", []), ("filters (rules)", ['steps=["rules"]'])):
                if job == "dedup" and n > dedup_max:
                    continue
                kind = "dedup" if job == "dedup" else "curate"
                r = run_child(kind, inp, Path(tmp) / f"out-{kind}-{n}", overrides)
                mb = r["kb"] / 1024
                print(f"{job:<22}{n:>10,}{r['read']:>10,}{r['kept']:>10,}{r['cpu']:>8.1f}{mb:>9.0f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["memory", "s3", "scaling"])
    ap.add_argument("--docs", default="100000,1000000", help="memory: corpus sizes, comma-separated")
    ap.add_argument("--dedup-max", type=int, default=300_000, help="memory: largest corpus for dedup")
    args = ap.parse_args()
    t0 = time.time()
    if args.what == "memory":
        bench_memory([int(x) for x in args.docs.split(",")], args.dedup_max)
    print(f"({time.time() - t0:.0f} s; the machine is shared, CPU seconds are per process)")


if __name__ == "__main__":
    main()
