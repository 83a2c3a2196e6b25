"""Benchmark: `pretrain report` on hostile JSON files of a run or corpus folder (peak RSS, seconds).

Each case is one small real output (a `pretrain curate` of 200 documents; a run folder of 100
trainer-shaped metrics lines) with one file replaced by a hostile one of `--mib` MiB (default
1024, the bound of plan.json, decontam_report.json and metrics.jsonl):

- plan-values: OUT/plan.json a job identity whose `inputs` is `[0,0,0,...]` (millions of values);
- decontam-deep: OUT/decontam_report.json of `[[[[...` (deep lists);
- decontam-values: OUT/decontam_report.json of `[{},{},...]` (millions of small values);
- metrics-dense: RUN/metrics.jsonl of trainer lines each padded with 10,000 `{}`;
- input-plan: `pretrain dedup DIR` (not report) where DIR/job/ is a job OUT (plan.json, data/)
  whose plan.json is plan-values' (is it a job's, whose rejects/ are left out?).

`pretrain report` (or dedup) runs in a child process (RLIMIT_AS 6 GB, so a runaway fails instead of
swapping) with the code under `--src` (default: this checkout's); the child prints its VmHWM and
seconds and what the report said. Run it with an export of an older commit as `--before` for the
"before" column in the same run (`git archive COMMIT src | tar -x -C /tmp/old`).

The machine these numbers come from is shared (2 cores, 9 agents): seconds are indicative.
Run: .venv/bin/python bench/bench_hostile_json.py [--mib 1024] [--before /tmp/old/src] [--tmp DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from srctree import run_cli  # noqa: E402  (bench/: a pretrain command in a capped child)

MiB = 1 << 20
HERE = Path(__file__).resolve().parents[1]



def write_repeated(path: Path, head: bytes, unit: bytes, tail: bytes, size: int) -> None:
    """`head` + `unit` repeated to about `size` bytes + `tail`, written 8 MiB at a time."""
    block = unit * max(1, (8 * MiB) // len(unit))
    with open(path, "wb") as f:
        f.write(head)
        for _ in range(max(1, (size - len(head) - len(tail) - 1) // len(block))):  # under a bound of `size`
            f.write(block)
        f.write(tail)


def make_cases(tmp: Path, size: int, src: str) -> dict[str, Path]:
    docs = tmp / "docs.jsonl"
    docs.write_text("".join(json.dumps({"id": f"d{i}", "text": f"Document {i} says something about the "
                                        "weather and the sea, in a sentence or two of plain English. " * 3})
                            + "\n" for i in range(200)))
    corpus = tmp / "corpus"
    subprocess.run([sys.executable, "-m", "pretrain", "curate", str(docs), "-o", str(corpus), "--quiet"],
                   check=True, env={**os.environ, "PYTHONPATH": src}, capture_output=True)
    cases = {}
    for name in ("plan-values", "decontam-deep", "decontam-values"):
        shutil.copytree(corpus, tmp / name)
        cases[name] = tmp / name
    write_repeated(tmp / "plan-values" / "plan.json", b'{"job": "curate", "hash": "x", "inputs": [0',
                   b",0", b"]}", size)
    write_repeated(tmp / "decontam-deep" / "decontam_report.json", b"", b"[", b"", size)
    write_repeated(tmp / "decontam-values" / "decontam_report.json", b"[{}", b",{}", b"]", size)
    run = tmp / "metrics-dense"
    run.mkdir()
    line = {"step": 0, "loss": 7.6479811668396, "lr": 0.0001, "grad_norm": 1.2824246883392334,
            "tokens_per_s": 5421.1, "loss_scale": 1.0, "mfu": None}
    pad = ",".join(["{}"] * 10_000)
    dense = (json.dumps(line)[:-1] + f', "x": [{pad}]}}\n').encode()
    write_repeated(run / "metrics.jsonl", "".join(json.dumps({**line, "step": i}) + "\n"
                                                  for i in range(1, 101)).encode(), dense, b"", size)
    cases["metrics-dense"] = run
    (tmp / "input-plan" / "job" / "data").mkdir(parents=True)
    shutil.copy(docs, tmp / "input-plan" / "docs.jsonl")
    shutil.copy(tmp / "plan-values" / "plan.json", tmp / "input-plan" / "job" / "plan.json")
    cases["input-plan"] = tmp / "input-plan"
    return cases


def measure(case: Path, src: str, page: Path) -> str:
    shutil.rmtree(page.parent / "dedup-out", ignore_errors=True)
    argv = ["report", str(case), "-o", str(page)] if case.name != "input-plan" else \
        ["dedup", str(case), "-o", str(page.parent / "dedup-out"), "--workers", "1", "--quiet"]
    out = run_cli(argv, src, cap_gb=6)
    if str(out["rc"]).startswith("failed"):
        return out["rc"]
    said = out["said"][-110:] or "(nothing on stderr)"
    return f"{out['seconds']:>6} s {out['peak_mb']:>6} MB  rc {out['rc']}  {said}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", default=str(HERE / "src"), help="the source tree to measure")
    ap.add_argument("--before", help="an older source tree, measured in the same run")
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--tmp", help="where the hostile files go (--mib times 4 on disk)")
    ap.add_argument("--cases", default="plan-values,decontam-deep,decontam-values,metrics-dense,input-plan")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        cases = make_cases(Path(tmp), args.mib * MiB, args.src)
        trees = [("after", args.src)] + ([("before", args.before)] if args.before else [])
        for case in args.cases.split(","):
            size = sum(f.stat().st_size for f in cases[case].rglob("*") if f.is_file())
            print(f"{case} ({size / 1e6:,.0f} MB on disk):")
            for label, src in trees:
                print(f"  {label:6} {measure(cases[case], src, Path(tmp) / 'page.html')}", flush=True)


if __name__ == "__main__":
    main()
