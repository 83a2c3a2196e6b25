"""`make bench`: run every benchmark in bench/ in turn, each printing its figures and peer ratios.

    python bench/run_all.py [NAME ...]     # e.g. rules dedup  (default: all)

Each benchmark is its own script (runnable alone); a failing one is reported and the rest go on.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(names: list[str]) -> int:
    scripts = sorted(HERE.glob("bench_*.py"))
    if names:
        scripts = [s for s in scripts if s.stem.removeprefix("bench_") in names]
    failed = []
    for script in scripts:
        print(f"\n=== {script.name} " + "=" * (60 - len(script.name)), flush=True)
        t0 = time.time()
        rc = subprocess.call([sys.executable, str(script)])
        print(f"--- {script.name}: exit {rc}, {time.time() - t0:.0f} s", flush=True)
        if rc:
            failed.append(script.name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
