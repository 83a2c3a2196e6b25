"""Seconds a `pretrain` process spends after its command is done: the entry (`python -m pretrain`,
gc.freeze() before exit) against the same command run through `cli.main` with the interpreter's
plain shutdown (the entry before 2026-12-02), alternated in one run.

    .venv/bin/python bench/bench_exit.py [--rounds 4]

The command is a 1-step training run of the tiny CPU model (what the tests' subprocesses run); the
figure is wall time from the command's last line ("done: ...") to the process's exit."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLAIN = "import sys; from pretrain.cli import main; raise SystemExit(main())"


def _exit_seconds(launch: list[str], cfg: Path, out: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, *launch, "train", str(cfg), "--set", f"train.out={out}"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    last = None
    for line in proc.stdout:
        if line.startswith("done:"):
            last = time.monotonic()
    proc.wait()
    if proc.returncode != 0 or last is None:
        raise SystemExit(f"the run failed (exit {proc.returncode})")
    return time.monotonic() - last


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    from pretrain import config as cfgmod
    from pretrain.train.testing import fallback_text, tiny_config

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        text = fallback_text(tmp / "topics.txt")
        cfg = tmp / "run.toml"
        cfg.write_text(cfgmod.dumps(tiny_config(tmp / "run", text, "train.steps=1", "log.tensorboard=false",
                                                "train.resume=false")))
        got: dict[str, list[float]] = {"entry": [], "plain": []}
        for i in range(args.rounds):
            got["entry"].append(_exit_seconds(["-m", "pretrain"], cfg, tmp / f"e{i}"))
            got["plain"].append(_exit_seconds(["-c", PLAIN], cfg, tmp / f"p{i}"))
    load = os.getloadavg()[0]
    for name, xs in got.items():
        print(f"{name:5s} exit after the last line: median {statistics.median(xs):.2f} s  "
              f"({' '.join(f'{x:.2f}' for x in xs)})")
    ratio = statistics.median(got["plain"]) / max(statistics.median(got["entry"]), 1e-9)
    print(f"plain / entry: {ratio:.1f}x  (load average {load:.1f}, {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
