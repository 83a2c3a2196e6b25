"""Benchmark: the curation belt of this checkout against the belt of another git revision, same run.

A before/after measure for changes to the belt's own (non-extraction) CPU. The older revision's
`src/` is exported with `git archive` into a temporary directory; each timed run is a fresh process
of `bench/bench_belt.py --worker` (its warm-up on three tiny pages, then the belt on one input set,
with its per-stage CPU) whose `pretrain` package comes from one side or the other via PYTHONPATH.
The two sides take turns, `--repeat` times per set, and each keeps its least-CPU run, so a change in
the shared machine's load falls on both alike: read the ratio column, not the absolute rates.
It also checks that both sides kept the same documents.

Run: .venv/bin/python bench/bench_belt_ab.py [--base main] [--backend blocks] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_belt as bb  # noqa: E402  (the worker, the input sets, the warm-up WARC)
from srctree import export_src  # noqa: E402  (a revision's src/)

STAGES = ["read", "extract", "language", "gopher_repetition", "gopher_quality", "c4_quality",
          "fineweb_quality", "dedup signatures", "global dedup", "write jsonl.zst"]


def one_run(src: Path, files: list[Path], backend: str, warm: Path) -> dict:
    job = {"files": [str(f) for f in files], "backend": backend, "language": True, "rest": True,
           "warmup": str(warm), "batch_pages": None}
    return run_worker(src, [bb.__file__, "--worker", json.dumps(job)])


def run_worker(src: Path, argv: list[str]) -> dict:
    """`argv` (a script and its arguments) in a fresh process whose `pretrain` is src's; its last line of
    output read as JSON (a failed worker: SystemExit with the end of its stderr)."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    proc = subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"worker on {src} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="main", help="the git revision to compare with (default: main)")
    ap.add_argument("--backend", default="blocks", help="the extractor of both belts")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per side and set; the best is kept")
    args = ap.parse_args()
    if not (bb.SHARED / "warc").is_dir():
        print(f"no data at {bb.SHARED / 'warc'}; nothing to measure")
        return 0
    with tempfile.TemporaryDirectory(prefix="bench_belt_ab_") as tmp:
        sides = {args.base: export_src(args.base, Path(tmp)), "this checkout": bb.ROOT / "src"}
        warm = bb.write_warmup_warc(Path(tmp) / "warmup.warc.gz")
        totals = {side: [0, 0.0] for side in sides}
        for name, files in bb.input_sets():
            best: dict[str, dict] = {}
            for _ in range(args.repeat):
                for side, src in sides.items():
                    r = one_run(src, files, args.backend, warm)
                    if side not in best or r["cpu"] < best[side]["cpu"]:
                        best[side] = r
            a, b = (best[s] for s in sides)
            same = "same kept documents" if a["kept_ids"] == b["kept_ids"] else "KEPT DOCUMENTS DIFFER"
            print(f"\n== {name}: {a['pages']} pages, {args.backend} + lang belt, best of {args.repeat}; "
                  f"{same}; load {os.getloadavg()[0]:.1f}")
            for side, r in best.items():
                totals[side][0] += r["pages"]
                totals[side][1] += r["cpu"]
                ms = ", ".join(f"{k} {1e3 * r['stages'][k] / r['pages']:.2f}"
                               for k in STAGES if k in r["stages"])
                print(f"  {side:<14}{r['pages'] / r['cpu']:>7.1f} pages/s/core   ms/page: {ms}")
            print(f"  ratio (this checkout / {args.base}): {a['cpu'] / b['cpu']:.3f}x pages/s per core")
        (pa, ca), (pb, cb) = totals.values()
        print(f"\n== all sets: {args.base} {pa / ca:.1f}, this checkout {pb / cb:.1f} pages/s/core, "
              f"ratio {ca / cb:.3f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
