"""Benchmark: layout search time (405B on 16,384 H100s at 8k and 128k tokens, 8B on 8), and the time
model against published runs side by side with llm-analysis (a pure-Python training estimator, in
the peers venv), both fed the exact model and layout of every row of pretrain.plan.published, with
the per-layout evaluation cost of each measured in the same run.

    .venv/bin/python bench/bench_plan_search.py [--repeat 5]

The peer runs in its own interpreter: $PLAN_PEER_PYTHON, else .venv-peers/bin/python, when it can
import llm_analysis (pip install llm-analysis==0.2.2). Without it the peer lines say so. The peer
gets each shape as a model-config JSON file (no download), its own GPU table (a100-sxm-80gb,
h100-sxm-80gb) and its default efficiencies: what a user of it would get.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pretrain.plan.hardware import get_gpu
from pretrain.plan.search import Job, search
from pretrain.plan.shapes import get_shape

PEER_SCRIPT = r"""
import json, sys, time
from llm_analysis.analysis import train
rows = json.load(open(sys.argv[1]))
out = []
t = time.perf_counter()
for r in rows:
    try:
        s = train(r["model_file"], gpu_name=r["gpu"], total_num_gpus=r["gpus"], tp_size=r["tp"],
                  pp_size=r["pp"], ds_zero=r["zero"], activation_recomputation=r["recompute"],
                  batch_size_per_gpu=r["mbs"], seq_len=r["seq"], global_batch_size=r["batch"],
                  flash_attn=r["flash"], mlp_gated_linear_units=r["gated"], softmax_dropout=not r["flash"],
                  log_level="ERROR")
        out.append(s["latency_per_iter"])
    except Exception as e:  # noqa: BLE001 - report the peer's refusal per row
        out.append(repr(e)[:80])
print(json.dumps({"latency": out, "seconds": time.perf_counter() - t}))
"""


def time_search(model: str, gpus: int, batch_tokens: int, repeat: int,
                seq: int) -> tuple[float, float, int, str]:
    """Best wall and CPU seconds of a search (CPU time is what a loaded shared machine cannot inflate)."""
    job = Job(get_shape(model).with_(seq_len=seq), get_gpu("h100"), gpus, batch_tokens)
    best, cpu, result = float("inf"), float("inf"), None
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        result = search(job)
        best, cpu = min(best, time.perf_counter() - t), min(cpu, time.process_time() - c)
    assert result is not None
    winner = result.best.layout.label() if result.best else "none fits"
    return best, cpu, result.evaluated, winner


def peer_python() -> str | None:
    default = Path(__file__).parents[1] / ".venv-peers/bin/python"
    for cand in (os.environ.get("PLAN_PEER_PYTHON"), str(default)):
        if cand and Path(cand).exists():
            ok = subprocess.run([cand, "-c", "import llm_analysis"], capture_output=True, timeout=60)
            if ok.returncode == 0:
                return cand
    return None


def peer_rows(runs, folder: Path) -> list[dict]:
    """Each published run as llm-analysis arguments, its shape as a model-config file."""
    rows = []
    for i, r in enumerate(runs):
        s, lay = r.job.shape, r.layout
        model = {"name": f"row{i}", "num_layers": s.n_layers, "n_head": s.n_heads, "hidden_dim": s.d_model,
                 "vocab_size": s.vocab_size, "max_seq_len": s.seq_len, "num_key_value_heads": s.n_kv_heads,
                 "ffn_embed_dim": s.d_ff, "model_type": "llama" if s.mlp == "swiglu" else "gpt"}
        f = folder / f"row{i}.json"
        f.write_text(json.dumps(model))
        gpu = ("h100-sxm-80gb" if "h100" in r.job.gpu.name else
               "a100-sxm-40gb" if "40gb" in r.job.gpu.name else "a100-sxm-80gb")
        rows.append({"model_file": str(f), "gpu": gpu,
                     "gpus": r.job.n_gpus, "tp": lay.tp, "pp": lay.pp, "zero": lay.zero, "mbs": lay.mbs,
                     "recompute": {"none": 0, "selective": 1, "full": 2}[lay.recompute], "seq": s.seq_len,
                     "batch": r.job.batch_seqs, "flash": r.job.flash, "gated": s.mlp == "swiglu",
                     "cp": lay.cp})
    return rows


def _predict(r):
    """Our estimate of a run, timed also when the memory model says it does not fit (9 held-out
    llm-foundry runs ran that it rejects; docs/planner.md)."""
    from pretrain.plan.search import Estimate, evaluate, time_layout

    est = evaluate(r.job, r.layout)
    if not est.fits:
        est = Estimate(r.layout, None, est.m, est.memory)
        time_layout(r.job, r.layout, est)
    return est


def _peer_latencies(peer: str | None, runs) -> tuple[list, float | None]:
    if not peer:
        return [None] * len(runs), None
    with tempfile.TemporaryDirectory() as d:
        rows = peer_rows(runs, Path(d))
        (Path(d) / "rows.json").write_text(json.dumps(rows))
        out = subprocess.run([peer, "-c", PEER_SCRIPT, str(Path(d) / "rows.json")],
                             capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        print(f"peer llm-analysis failed: {out.stderr.strip().splitlines()[-1:]}")
        return [None] * len(runs), None
    res = json.loads(out.stdout.strip().splitlines()[-1])
    return res["latency"], res["seconds"] / len(runs)


def _peer_error(r, lat) -> float | None:
    return r.measured_step_s / lat - 1 if isinstance(lat, int | float) and lat > 0 else None


def side_by_side(peer: str | None) -> None:
    from pretrain.plan.published import runs as published

    runs = published()
    t = time.perf_counter()
    ours = [_predict(r) for r in runs]
    ours_s = (time.perf_counter() - t) / len(runs)
    peer_lat, peer_s = _peer_latencies(peer, runs)
    print(f"\n{'published run':58s} {'measured':>9s} {'ours':>8s} {'llm-analysis':>13s}")
    errs_ours, errs_peer = [], []
    for r, est, lat in zip(runs, ours, peer_lat):
        e_ours = r.measured_step_s / est.step_s - 1
        errs_ours.append(abs(e_ours))
        e_peer = _peer_error(r, lat)
        if e_peer is not None:
            errs_peer.append(abs(e_peer))
            peer_txt = f"{e_peer:+12.1%}" + (" (no cp)" if r.layout.cp > 1 else "")
        else:
            peer_txt = "       n/a" if lat is None else f" refused: {lat}"
        print(f"{r.source:58s} {r.measured_step_s:8.2f}s {e_ours:+7.1%} {peer_txt}")
    print(f"median |error| of throughput: ours {statistics.median(errs_ours):.1%} (max {max(errs_ours):.1%})"
          + (f"; llm-analysis {statistics.median(errs_peer):.1%} (max {max(errs_peer):.1%}) over "
             f"{len(errs_peer)} rows" if errs_peer else ""))
    if peer_s:
        print(f"per-layout evaluation: ours {ours_s * 1e6:.0f} us, llm-analysis {peer_s * 1e6:.0f} us "
              f"({peer_s / ours_s:.0f}x)")


def held_out_side_by_side(peer: str | None) -> None:
    """The held-out runs (pretrain.plan.heldout) by group: median and worst |error|, ours and the
    peer's (fed the same shapes and layouts; it has no FlashAttention-1 setting)."""
    from pretrain.plan.heldout import held_out

    runs = held_out()
    peer_lat, _ = _peer_latencies(peer, runs)
    groups: dict[str, tuple[list, list]] = {}
    for r, lat in zip(runs, peer_lat):
        key = " ".join(r.source.split()[:2]) if r.source.startswith("llm-foundry") else \
            "MT-NLG 530B" if r.source.startswith("MT-NLG") else \
            "fms-fsdp" if r.source.startswith("fms-fsdp") else \
            "torchtitan + torch.compile" if "compile" in r.source else "torchtitan Llama 2"
        if r.source.startswith("llm-foundry") and r.job.shape.seq_len >= 16_384:
            key += " seq>=16k"
        for k in (key, "all held-out"):
            ours, theirs = groups.setdefault(k, ([], []))
            ours.append(abs(r.measured_step_s / _predict(r).step_s - 1))
            if (e := _peer_error(r, lat)) is not None:
                theirs.append(abs(e))
    print(f"\n{'held-out runs (session 7)':34s} {'rows':>4s} {'ours median (worst)':>20s} "
          f"{'llm-analysis median (worst)':>28s}")
    for k, (ours, theirs) in groups.items():
        peer_txt = (f"{statistics.median(theirs):10.1%} ({max(theirs):.0%}) over {len(theirs)}"
                    if theirs else "n/a")
        print(f"{k:34s} {len(ours):4d} {statistics.median(ours):12.1%} ({max(ours):4.0%}) {peer_txt:>28s}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    for model, gpus, batch, seq in (("llama-3-405b", 16384, 16 * 2**20, 8192),
                                    ("llama-3-405b", 16384, 16 * 2**20, 131072),
                                    ("llama-3-8b", 8, 2**22, 8192)):
        secs, cpu, n, winner = time_search(model, gpus, batch, args.repeat, seq)
        print(f"search {model:13s} seq {seq:6,d} on {gpus:6,d} H100: {secs * 1e3:7.1f} ms wall, "
              f"{cpu * 1e3:7.1f} ms CPU for {n:6,d} layouts; winner {winner}")
    peer = peer_python()
    if peer is None:
        print("peer llm-analysis: not installed (set PLAN_PEER_PYTHON or add llm-analysis to .venv-peers)")
    side_by_side(peer)
    held_out_side_by_side(peer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
