"""Benchmark: layout search time for llama-3-405b on 16,384 H100s and llama-3-8b on 8, and the cost of
evaluating one layout against llm-analysis (a pure-Python training memory/latency estimator) measured
in the same run.

    .venv/bin/python bench/bench_plan_search.py [--repeat 5]

The peer runs in its own interpreter: $PLAN_PEER_PYTHON, else .venv-peers/bin/python, when it can
import llm_analysis (pip install llm-analysis==0.2.2). Without it the peer line says so.
llm-analysis evaluates one given layout per call and has no search; the fair comparison is time per
evaluated layout.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from pretrain.plan.hardware import get_gpu
from pretrain.plan.search import Job, search
from pretrain.plan.shapes import get_shape

PEER_SCRIPT = r"""
import json, time
from llm_analysis.analysis import train
lays = [(tp, pp, z, rc) for tp in (1, 2, 4, 8) for pp in (1, 2, 4, 8) for z in (0, 1, 2, 3)
        for rc in (0, 1, 2) if 8 % (tp * pp) == 0]
best = None
for _ in range(REPEAT):
    t = time.perf_counter()
    for tp, pp, z, rc in lays:
        train("NousResearch_Llama-2-7b-hf", gpu_name="h100-sxm-80gb", total_num_gpus=8, tp_size=tp,
              pp_size=pp, ds_zero=z, activation_recomputation=rc, batch_size_per_gpu=1, seq_len=4096,
              global_batch_size=1024, log_level="ERROR", flops_efficiency=0.6)
    dt = time.perf_counter() - t
    best = dt if best is None else min(best, dt)
print(json.dumps({"layouts": len(lays), "seconds": best}))
"""


def time_search(model: str, gpus: int, batch_tokens: int, repeat: int) -> tuple[float, int, str]:
    job = Job(get_shape(model), get_gpu("h100"), gpus, batch_tokens)
    best, result = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        result = search(job)
        best = min(best, time.perf_counter() - t)
    assert result is not None
    winner = result.best.layout.label() if result.best else "none fits"
    return best, result.evaluated, winner


def peer_python() -> str | None:
    default = Path(__file__).parents[1] / ".venv-peers/bin/python"
    for cand in (os.environ.get("PLAN_PEER_PYTHON"), str(default)):
        if cand and Path(cand).exists():
            ok = subprocess.run([cand, "-c", "import llm_analysis"], capture_output=True, timeout=60)
            if ok.returncode == 0:
                return cand
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    rows = []
    for model, gpus, batch in (("llama-3-405b", 16384, 16 * 2**20), ("llama-3-8b", 8, 2**22),
                               ("llama-2-7b", 8, 1024 * 4096)):
        secs, n, winner = time_search(model, gpus, batch, args.repeat)
        rows.append((model, gpus, secs, n))
        print(f"search {model:13s} on {gpus:6,d} H100: {secs * 1e3:8.1f} ms for {n:5,d} layouts "
              f"({secs / n * 1e6:5.1f} us/layout); winner {winner}")
    ours_per_layout = rows[2][2] / rows[2][3]
    peer = peer_python()
    if peer is None:
        print("peer llm-analysis: not installed (set PLAN_PEER_PYTHON or add llm-analysis to .venv-peers)")
        return 0
    out = subprocess.run([peer, "-c", PEER_SCRIPT.replace("REPEAT", str(args.repeat))], capture_output=True,
                         text=True, timeout=600)
    if out.returncode != 0:
        print(f"peer llm-analysis failed: {out.stderr.strip().splitlines()[-1:]}")
        return 0
    res = json.loads(out.stdout.strip().splitlines()[-1])
    peer_per_layout = res["seconds"] / res["layouts"]
    print(f"llm-analysis 0.2.2, llama-2-7b on 8 H100: {peer_per_layout * 1e6:8.1f} us/layout "
          f"({res['layouts']} layouts, no search)")
    print(f"per-layout evaluation: ours is {peer_per_layout / ours_per_layout:.0f}x faster than llm-analysis")
    return 0


if __name__ == "__main__":
    sys.exit(main())
