"""How often a SIGTERM sent the moment a driver says "ready" misses the driver's `except Terminated`:
tests/test_ray_lifeline.py's SIGTERM driver before session 14 (it printed "ready" before its
`try`, then slept 600 s) against the driver as it is now (prints inside the `try`, sleeps in 0.1 s
slices), alternated in one run, without Ray (the race is in the driver, not in Ray).

    .venv/bin/python bench/bench_sigterm_race.py [--runs 20] [--all-cores]

By default this process and its drivers are pinned to one core, as a loaded 2-core CI machine
does to them: the driver is preempted by the reader it wakes with "ready", the SIGTERM arrives while
its `print` returns, and `Terminated` is raised outside the `try` (status 1, nothing said). A
SIGTERM between the last check for signals and the start of the sleep is acted on only when the
sleep ends: a hang, counted after HANG_S."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HANG_S = 10.0

BEFORE = """
import time
from pretrain.lifeline import Terminated, sigterm_raises
with sigterm_raises():
    print("ready", flush=True)
    try:
        time.sleep(600)
    except Terminated:
        print("terminated", flush=True)
"""
NOW = """
import time
from pretrain.lifeline import Terminated, sigterm_raises
with sigterm_raises():
    try:
        print("ready", flush=True)
        for _ in range(6000):
            time.sleep(0.1)
    except Terminated:
        print("terminated", flush=True)
"""


def _once(driver: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    p = subprocess.Popen([sys.executable, "-c", driver], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    if p.stdout.readline().strip() != "ready":
        p.kill()
        p.wait()
        return "no ready line"
    os.kill(p.pid, signal.SIGTERM)
    try:
        said, _ = p.communicate(timeout=HANG_S)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        return "hung"
    if said.strip() == "terminated" and p.returncode == 0:
        return "ok"
    return f"status {p.returncode}, said {said.strip()!r}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--all-cores", action="store_true", help="do not pin to one core")
    args = ap.parse_args()
    if not args.all_cores and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # the drivers inherit it
    counts = {"before": Counter(), "now": Counter()}
    for _ in range(args.runs):
        for name, driver in (("before", BEFORE), ("now", NOW)):
            counts[name][_once(driver)] += 1
    for name, c in counts.items():
        other = ", ".join(f"{k} {v}" for k, v in c.items() if k != "ok")
        print(f"{name:6s}: {c['ok']}/{args.runs} ok; {other}")
    missed = {k: args.runs - c["ok"] for k, c in counts.items()}
    print(f"missed: before {missed['before']}, now {missed['now']} of {args.runs} runs each")


if __name__ == "__main__":
    main()
