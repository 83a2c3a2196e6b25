"""Which requests `_score_trees` packs into one row: the rule before session 14 (every group of
requests sharing a context, however short) against `scoring.tree_rows` (a context at least as long
as each branch, rows at most `ROW_WIDTH` windows wide), and no packing at all; same model, same
examples, same run.

    python bench/bench_eval_pack.py MODEL [--tasks ppl:../shared/data/lm/wikitext-2/valid.txt,piqa,copa]
        [--limit 1024] [--ppl-tokens 100000] [--repeat 2]

MODEL is a run directory or a Hugging Face folder (`pretrain eval`'s). Each task is scored as
`pretrain eval` scores it (`suite.run_tasks`: chunks of `partial.CHUNK`). Prints, per task, the CPU
seconds of this one-thread process (best of --repeat) of each way, the ratio new / old, and the
largest difference of a per-example log-likelihood (a `ppl:` text: of its total nll) between new
and old and between new and unpacked. Needs ../shared/data/benchmarks (or $PRETRAIN_BENCHMARKS;
$PRETRAIN_SHARED_DATA for the default text).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def old_rows(n_ctx: int, n_conts: list[int], ix: list[int], max_length: int) -> list[list[int]]:
    """The rule before session 14: one row for every group of two or more that has a branch."""
    return [list(ix)] if len(ix) > 1 and max(n_conts) > 1 else []


def lls(result: dict) -> list[float]:
    if result["kind"] == "ppl":
        return [result["metrics"]["nll"]]
    return [x for r in result["examples"] for x in r.get("lls", [])]


def diff(got: dict, a: str, b: str) -> float:
    return max((abs(x - y) for x, y in zip(got[a][0], got[b][0])), default=0.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    data = Path(os.environ.get("PRETRAIN_SHARED_DATA", ROOT.parent / "shared/data"))
    ap.add_argument("--tasks", default=f"ppl:{data / 'lm/wikitext-2/valid.txt'},piqa,copa")
    ap.add_argument("--limit", type=int, default=1024)
    ap.add_argument("--ppl-tokens", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()

    import torch

    from pretrain.eval import scoring
    from pretrain.eval.lm import load_model
    from pretrain.eval.suite import benchmarks_dir, run_tasks

    torch.set_num_threads(1)
    model, _ = load_model(args.model, None, "", "cpu", None)
    new_rows = scoring.tree_rows
    ways = {"old": (model, old_rows), "new": (model, new_rows),
            "unpacked": (dataclasses.replace(model, tree_logits=None), new_rows)}
    for spec in args.tasks.split(","):
        limit = None if spec.startswith("ppl:") else args.limit
        got = {}
        for name, (m, rule) in ways.items():
            scoring.tree_rows = rule
            best, res = None, None
            for _ in range(args.repeat):
                c0 = time.process_time()
                res = run_tasks(m, [spec], benchmarks_dir(None), limit=limit,
                                ppl_tokens=args.ppl_tokens)[0][0]
                t = time.process_time() - c0
                best = t if best is None else min(best, t)
            got[name] = (lls(res), best, res)
        scoring.tree_rows = new_rows

        res = got["new"][2]
        print(f"{res['task']}: n {res['n']}; old {got['old'][1]:.2f} s CPU, new {got['new'][1]:.2f}, "
              f"unpacked {got['unpacked'][1]:.2f}; ratio new/old {got['new'][1] / got['old'][1]:.3f}; "
              f"max |d ll| new-old {diff(got, 'new', 'old'):.2e}, "
              f"new-unpacked {diff(got, 'new', 'unpacked'):.2e}")


if __name__ == "__main__":
    main()
