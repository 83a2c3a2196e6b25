"""Benchmark: the hostile inputs of red team round 5 (session 14), each read by a child process.

Builds each input in a temporary folder and runs it with the code under `--src` (default: this
checkout's) and, with `--before COMMIT`, with an export of that commit, in the same run; prints
seconds, the child's peak RSS and its last line, and the ratio before/after. Children are limited
to `--limit-gb` of address space (default 6) and 150 s, so the code before stops with a
MemoryError (or the timeout) where it would take more.

- task-dense: `eval.tasks.load_file` of a task file of `--lines` lines, each 8 MiB of `{}` in a
  field no kind reads (a ~300 KB .gz);
- eval-longctx: `pretrain eval RUN --tasks FILE` of one example whose query is 4 MB of text and
  whose choices are 1,000 letters (RUN: a 2-step tiny run, bytes as tokens);
- html-lists: `pretrain curate` (extract only) of one page of 544,000 nested `<ul><li>` (4.9 MB).

Shared 2-core machine: seconds are indicative.
Run: PYTHONPATH=src .venv/bin/python bench/bench_hostile_round5.py --before b1db2a7
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from srctree import add_sides, capped, sides  # noqa: E402  (bench/: a revision's src/)

HERE = Path(__file__).resolve().parents[1]


def make_inputs(root: Path, lines: int) -> dict[str, list[str]]:
    from pretrain.train.testing import fallback_text, tiny_config
    from pretrain.train.trainer import Trainer

    dense = root / "dense.jsonl.gz"
    line = ('{"context":"a","continuation":"b","x":[' + ",".join(["{}"] * 2_700_000) + "]}\n").encode()
    with gzip.open(dense, "wb") as f:
        for _ in range(lines):
            f.write(line)
    run = root / "run"
    Trainer(tiny_config(run, fallback_text(root / "topics.txt"), "train.steps=2"), quiet=True).fit()
    longctx = root / "longctx.jsonl"
    query = ("the quick brown fox jumps over the lazy dog. " * 100_000)[:4_000_000]
    longctx.write_text(json.dumps({"query": query, "choices": [chr(97 + i % 26) for i in range(1000)],
                                   "gold": 0}) + "\n")
    pages = root / "html"
    pages.mkdir()
    (pages / "lists.html").write_text("<html><body>" + "<ul><li>x" * 544_000 + "</body></html>")
    load = (f"from pretrain.eval.tasks import load_file; t = load_file({str(dense)!r}); "
            "print(len(t.docs), 'docs')")
    return {"task-dense": ["-c", load],
            "eval-longctx": ["-m", "pretrain", "eval", str(run), "--tasks", str(longctx), "-o",
                             str(root / "res.json"), "--quiet"],
            "html-lists": ["-m", "pretrain", "curate", str(pages), "-o", str(root / "OUT"), "--set",
                           'steps=["extract"]', "--workers", "1"]}


def child(args: list[str], src: str, limit_gb: float, cwd: Path) -> tuple[float, float, int, str]:
    """(seconds, peak RSS in MB, exit status, last line) of `python ARGS` under `src` (rich's table
    borders are not a last line)."""
    return capped(args, src, limit_gb, cwd, 150, lambda x: x.strip()[0] in "│┃┏┡└╇━")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_sides(ap)
    ap.add_argument("--lines", type=int, default=40)
    ap.add_argument("--limit-gb", type=float, default=6.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="round5-") as tmp:
        root = Path(tmp)
        srcs = sides(args, root)
        for case, cmd in make_inputs(root, args.lines).items():
            seen = {}
            for side, src in srcs.items():  # a fresh child per side: RUSAGE_CHILDREN is a running max
                subprocess.run(["rm", "-rf", str(root / "OUT"), str(root / "res.json")])
                r = subprocess.run([sys.executable, __file__, "--one", side, src, str(args.limit_gb), tmp,
                                    json.dumps(cmd)], capture_output=True, text=True)
                seen[side] = json.loads(r.stdout.strip().splitlines()[-1])
                s, mb, rc, last = seen[side]
                print(f"{case:12} {side:6}: {s:7.2f} s {mb:8.0f} MB rc {rc:3}  {last}", flush=True)
            if len(seen) == 2:
                print(f"{case:12} before/after: {seen['before'][0] / seen['after'][0]:.1f}x time, "
                      f"{seen['before'][1] / seen['after'][1]:.1f}x peak memory", flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        _, _, side, src, limit, cwd, cmd = sys.argv
        print(json.dumps(child(json.loads(cmd), src, float(limit), Path(cwd))))
    else:
        main()
