"""Benchmark: `pretrain report RUN` peak RSS on two metrics.jsonl files, this checkout against an older
commit in the same run (session 14: the report's reader holds only what the page uses, `Slim` in
report_metrics.py):

- events: EVENTS events of 70 ten-character string fields each (session 13's case: 150 MB held
  1.3 GB, ~8.8x the file);
- steps: STEPS trainer-shaped step lines (146 bytes each, as `pretrain train` writes them).

Each is a run folder (config-less: the page draws the curves and the events) reported by
`pretrain report` in a child process (RLIMIT_AS 8 GB), with PYTHONPATH set to the tree measured; the
child prints VmHWM and seconds. The older tree is `git archive --before-rev` (default b1db2a7, the
reader before session 14) unpacked in a temporary folder. The machine is shared (2 cores, 9 agents):
seconds are indicative, peak RSS is not.

Run: .venv/bin/python bench/bench_report_metrics.py [--events 100000] [--steps 300000] [--before-rev REV]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from srctree import export_src, run_cli  # noqa: E402  (bench/: a revision's src/, a capped child)

HERE = Path(__file__).resolve().parents[1]


STEP = {"step": 0, "loss": 7.6479811668396, "lr": 0.0001, "grad_norm": 1.2824246883392334,
        "tokens_per_s": 5421.1, "loss_scale": 1.0, "mfu": None}


def write_events(run: Path, n: int) -> None:
    """100 trainer steps, then `n` events of 70 distinct ten-character string fields."""
    run.mkdir(parents=True)
    with open(run / "metrics.jsonl", "w") as f:
        for i in range(1, 101):
            f.write(json.dumps({**STEP, "step": i}) + "\n")
        for i in range(n):
            fields = {f"f{j:02d}": f"{i:06d}{j:04d}" for j in range(70)}
            f.write(json.dumps({"event": "note", "step": 100, **fields}) + "\n")


def write_steps(run: Path, n: int) -> None:
    run.mkdir(parents=True)
    with open(run / "metrics.jsonl", "w") as f:
        for i in range(1, n + 1):
            f.write(json.dumps({**STEP, "step": i, "loss": 7.6479811668396 - i * 1e-6}) + "\n")


def measure(run: Path, src: Path) -> dict:
    page = run.parent / f"{run.name}.html"
    return run_cli(["report", str(run), "-o", str(page)], src, cap_gb=8)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--steps", type=int, default=300_000)
    ap.add_argument("--before-rev", default="b1db2a7", help="the commit measured as 'before'")
    ap.add_argument("--tmp", help="where the files go (~200 MB at the defaults)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        tmp = Path(tmp)
        trees = {"before": export_src(args.before_rev, tmp), "after": HERE / "src"}
        runs = {"base": tmp / "base", "events": tmp / "events", "steps": tmp / "steps"}
        write_steps(runs["base"], 100)  # the page's own cost: imports, figures
        write_events(runs["events"], args.events)
        write_steps(runs["steps"], args.steps)
        small = runs.pop("base")
        base = {label: measure(small, src)["peak_mb"] for label, src in trees.items()}
        print(f"a run of 100 steps (imports, figures): peak {base['before']:,} MB before, "
              f"{base['after']:,} after")
        for name, run in runs.items():
            mb = (run / "metrics.jsonl").stat().st_size / 1e6
            print(f"{name}: metrics.jsonl {mb:,.0f} MB")
            got = {}
            for label, src in trees.items():
                got[label] = r = measure(run, src)
                held = r["peak_mb"] - base[label]  # what the file added over the 100-step run
                print(f"  {label:6} ({args.before_rev if label == 'before' else 'this checkout'}): "
                      f"peak {r['peak_mb']:>6,} MB, {held:>6,} MB over the 100-step run "
                      f"({held / mb:4.1f}x the file), {r['seconds']} s, rc {r['rc']}", flush=True)
            after, before = got["after"]["peak_mb"], got["before"]["peak_mb"]
            if after and before:
                print(f"  after / before peak: {after / before:.2f}")


if __name__ == "__main__":
    main()
