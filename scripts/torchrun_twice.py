"""Run training twice under torchrun on the CPU (gloo): every layout against one process, a SIGKILL
mid-run then the same command, a SIGKILL during an async save, and one run resumed under five other
layouts in turn (DCP resharding). Prints, per case, the largest |loss difference| per step against
the single-process run that was never stopped, and the resume line the rerun printed.

    python scripts/torchrun_twice.py OUT [--only fsdp2,tp2] [--skip-kill] [--skip-chain]

A tiny model (4 layers x 64, global batch 8 of 32 tokens, 10 steps, a save every 3); about 30 s a
2-process and 45 s a 4-process run on a busy 2-core machine (docs/decisions.md, session 14).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TINY = ["model.preset=tiny-cpu", "model.n_layers=4", "model.d_model=64", "model.n_heads=4",
        "model.n_kv_heads=2", "model.d_ff=176", "model.seq_len=32", "schedule.warmup_steps=2",
        "log.tensorboard=false", "precision.dtype=fp32", "log.eval_every=0", "train.threads=1",
        "train.steps=10", "checkpoint.every=3"]
# name: (processes, settings); data.batch_size is per data-parallel rank: 8 sequences a step for all
LAYOUTS = {
    "one": (1, ["data.batch_size=8"]),
    "ddp2": (2, ["parallel.dp_replicate=2", "data.batch_size=4"]),
    "fsdp2": (2, ["parallel.dp_shard=2", "data.batch_size=4"]),
    "tp2": (2, ["parallel.tp=2", "data.batch_size=8"]),
    "pp2": (2, ["parallel.pp=2", "data.batch_size=8"]),
    "fsdp4": (4, ["parallel.dp_shard=4", "data.batch_size=2"]),
    "fsdp2tp2": (4, ["parallel.dp_shard=2", "parallel.tp=2", "data.batch_size=4"]),
    "hsdp22": (4, ["parallel.dp_replicate=2", "parallel.dp_shard=2", "data.batch_size=2"]),
    "pp2fsdp2": (4, ["parallel.pp=2", "parallel.dp_shard=2", "data.batch_size=4"]),
    "pp2tp2": (4, ["parallel.pp=2", "parallel.tp=2", "data.batch_size=8"]),
}
CHAIN = (("fsdp2", 3), ("fsdp4", 5), ("tp2", 6), ("pp2", 8), ("hsdp22", 9), ("one", 10))


def command(layout: str, out: Path, *extra: str) -> list[str]:
    n, settings = LAYOUTS[layout]
    cmd = [sys.executable]
    if n > 1:
        cmd += ["-m", "torch.distributed.run", "--nproc-per-node", str(n), "--rdzv-backend", "c10d",
                "--rdzv-endpoint", "127.0.0.1:0"]
    cmd += ["-m", "pretrain", "train", str(ROOT / "recipes" / "tiny-cpu.toml")]
    for s in [*TINY, *settings, f"train.out={out}", *extra]:
        cmd += ["--set", s]
    return cmd


def train(layout: str, out: Path, *extra: str, kill_on: str | None = None) -> tuple[int, str]:
    """Run it; with `kill_on`, SIGKILL torchrun (its ranks follow it) at the first stderr line
    starting with that text. Returns the exit status and stderr."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT / "src")}
    p = subprocess.Popen(command(layout, out, *extra), cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    said = []
    for line in p.stderr:
        said.append(line)
        if kill_on and line.startswith(kill_on):
            p.send_signal(signal.SIGKILL)
            break
    return p.wait(), "".join(said)


def losses(run: Path) -> dict[int, float]:
    out = {}
    for line in (run / "metrics.jsonl").read_text().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and "event" not in rec:
            out[rec["step"]] = rec["loss"]
    return out


def gap(ref: dict[int, float], got: dict[int, float]) -> str:
    if sorted(got) != sorted(ref):
        return f"steps {sorted(got)}, not {sorted(ref)}"
    return f"{max(abs(ref[s] - got[s]) for s in ref):.1e}"


def resumed(stderr: str) -> str:
    lines = [x for x in stderr.splitlines() if x.startswith(("resuming", "no checkpoint"))]
    return lines[0][:160] if lines else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--only", default="", help="comma-separated layouts (default: all)")
    ap.add_argument("--skip-kill", action="store_true")
    ap.add_argument("--skip-chain", action="store_true")
    args = ap.parse_args()
    layouts = [x for x in args.only.split(",") if x] or list(LAYOUTS)
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    train("one", args.out / "reference")
    ref = losses(args.out / "reference")
    for name in layouts:
        full = args.out / f"{name}-full"
        train(name, full)
        print(f"{name:9} uninterrupted vs one process: {gap(ref, losses(full))}", flush=True)
        if args.skip_kill:
            continue
        for case, at in (("kill at step 8", "step 8/"), ("kill in the save of 6", "[checkpoint] step 6 ->")):
            run = args.out / f"{name}-{case.replace(' ', '-')}"
            rc, _ = train(name, run, kill_on=at)
            rc2, said = train(name, run)
            print(f"{name:9} {case}: exit {rc}, rerun exit {rc2}, vs one process {gap(ref, losses(run))}; "
                  f"{resumed(said)}", flush=True)
    if not args.skip_chain:
        run = args.out / "chain"
        for name, stop in CHAIN:
            rc, said = train(name, run, *([f"train.stop_at={stop}"] if stop < 10 else []))
            upto = {s: v for s, v in ref.items() if s <= stop}
            print(f"chain -> {name:9} to step {stop}: exit {rc}, vs one process {gap(upto, losses(run))}; "
                  f"{resumed(said)}", flush=True)


if __name__ == "__main__":
    main()
