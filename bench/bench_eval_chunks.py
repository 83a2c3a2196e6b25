"""What scoring a task in fixed chunks costs (eval/partial.py: the chunks a killed run continues from)
against scoring it in one piece (the code before session 14), same model, same examples, same run.

    python bench/bench_eval_chunks.py MODEL [--tasks piqa,ppl:recipes/data/tinyshakespeare-200k.txt]
        [--limit 1024] [--chunk 256] [--repeat 2]

MODEL is a run directory or a Hugging Face folder (`pretrain eval`'s). Prints, per task, the CPU
seconds of this one-thread process (a busy shared machine disturbs them less than the wall clock)
and the wall seconds of each way, the ratio chunked / whole, and the largest difference between the
two ways' per-example log-likelihoods (float rounding of other batches: < 1e-4).
Needs ../shared/data/benchmarks (or $PRETRAIN_BENCHMARKS) for benchmark names.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def timed(fn, repeat: int):
    best = None
    for _ in range(repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        out = fn()
        t = (time.process_time() - c0, time.perf_counter() - w0)
        best = t if best is None or t[0] < best[0] else best
    return out, best


def lls(result: dict) -> list[float]:
    if result["kind"] == "ppl":
        return [result["metrics"]["nll"]]
    return [x for r in result["examples"] for x in r.get("lls", [])]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--tasks", default="piqa,ppl:" + str(ROOT / "recipes/data/tinyshakespeare-200k.txt"))
    ap.add_argument("--limit", type=int, default=1024)
    ap.add_argument("--ppl-tokens", type=int, default=100_000)
    ap.add_argument("--chunk", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()

    import torch

    from pretrain.eval import partial
    from pretrain.eval.lm import load_model
    from pretrain.eval.suite import benchmarks_dir, run_tasks

    torch.set_num_threads(1)
    model, _ = load_model(args.model, None, "", "cpu", None)
    for spec in args.tasks.split(","):
        limit = None if spec.startswith("ppl:") else args.limit
        got = {}
        for name, chunk in (("whole", 10**12), ("chunked", args.chunk)):
            partial.CHUNK = chunk
            (res, _), t = timed(lambda s=spec, n=limit: run_tasks(model, [s], benchmarks_dir(None), limit=n,
                                                                  ppl_tokens=args.ppl_tokens), args.repeat)
            got[name] = (res[0], t)
        (whole, tw), (chunked, tc) = got["whole"], got["chunked"]
        diff = max((abs(a - b) for a, b in zip(lls(whole), lls(chunked))), default=0.0)
        print(f"{whole['task']}: n {whole['n']}; whole {tw[0]:.2f} s CPU ({tw[1]:.2f} wall); chunks of "
              f"{args.chunk} {tc[0]:.2f} s CPU ({tc[1]:.2f} wall); ratio {tc[0] / tw[0]:.3f}; "
              f"max |d ll| {diff:.2e}")


if __name__ == "__main__":
    main()
