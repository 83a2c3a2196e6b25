"""Evaluation speed: our log-likelihood scorer vs lm-evaluation-harness's HFLM, same model, same requests.

    python bench/bench_eval.py [--docs 200] [--threads 1] [--hidden 256] [--layers 4]

A random transformers LlamaForCausalLM (fp32) with a byte-level BPE trained on the bench text is
saved with save_pretrained; both scorers load that folder. The (context, continuation) requests of
the first --docs examples of a multiple-choice task with multi-token choices (ARC-Easy) and of one
with one-token choices (MMLU: " A".." D") are scored by `HFLM.loglikelihood` and by ours; the
script prints examples/s of each (wall clock, and CPU seconds of this one-thread process, which a
busy shared machine disturbs less), the ratios, and the largest log-likelihood difference (must be
< 1e-4). --repeat N times each scorer N times and keeps its best. Needs ../shared/data/benchmarks
(or $PRETRAIN_BENCHMARKS), lm-eval and accelerate.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def make_model(out: Path, hidden: int, layers: int, vocab: int) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from pretrain.tokens.tokenizer import EOT, build_bpe
    from pretrain.train.testing import fallback_text

    shared = ROOT.parent / "shared/data/lm/tinyshakespeare/input.txt"
    text = (shared if shared.is_file() else fallback_text(out / "t.txt")).read_text()[:300_000]
    tok, trainer = build_bpe(vocab)
    tok.train_from_iterator([text[i:i + 2000] for i in range(0, len(text), 2000)], trainer)
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOT, bos_token=EOT).save_pretrained(out)
    torch.manual_seed(0)
    ff = hidden * 8 // 3 // 64 * 64 or 64
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=ff,
                      num_hidden_layers=layers, num_attention_heads=max(1, hidden // 64),
                      num_key_value_heads=max(1, hidden // 64), max_position_embeddings=1024,
                      bos_token_id=0, eos_token_id=0, tie_word_embeddings=False)
    LlamaForCausalLM(cfg).save_pretrained(out)


def pairs_of(task_name: str, bench: str, docs: int) -> tuple[list, int]:
    from pretrain.eval.harness import requests_of
    from pretrain.eval.tasks import load_task

    task = load_task(task_name, bench)
    n = min(docs, len(task.docs))
    return [p for i in range(n) for p in requests_of(task, i, 0, 1234)], n


def best_of(fn, repeat: int) -> tuple[float, float, list]:
    """(best wall seconds, best CPU seconds, result) of fn() run `repeat` times."""
    walls, cpus = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return min(walls), min(cpus), out


def time_peer(model_dir: Path, pairs: list, repeat: int) -> tuple[float, float, list[float]]:
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=str(model_dir), dtype="float32", batch_size=8, device="cpu")
    reqs = [Instance(request_type="loglikelihood", doc={}, arguments=p, idx=i) for i, p in enumerate(pairs)]
    wall, cpu, out = best_of(lambda: lm.loglikelihood(reqs, disable_tqdm=True), repeat)
    return wall, cpu, [float(ll) for ll, _ in out]


def time_ours(model_dir: Path, pairs: list, repeat: int) -> tuple[float, float, list[float]]:
    from pretrain.eval.lm import from_hf_dir
    from pretrain.eval.scoring import loglikelihoods

    model = from_hf_dir(model_dir)
    wall, cpu, out = best_of(lambda: loglikelihoods(model, pairs), repeat)
    return wall, cpu, [ll for ll, _ in out]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=200)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--tasks", default="arc_easy,mmlu", help="comma-separated (default arc_easy,mmlu)")
    ap.add_argument("--repeat", type=int, default=1, help="time each scorer N times, keep the best")
    args = ap.parse_args()
    bench = os.environ.get("PRETRAIN_BENCHMARKS") or str(ROOT.parent / "shared/data/benchmarks")
    try:
        import lm_eval  # noqa: F401
    except ImportError:
        print("lm-eval is not installed: pip install 'lm-eval' accelerate")
        return 0
    if not Path(bench).is_dir():
        print(f"no benchmarks folder at {bench}: set PRETRAIN_BENCHMARKS")
        return 0
    import torch

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(tmp)
        make_model(model_dir, args.hidden, args.layers, args.vocab)
        print(f"model: LlamaForCausalLM hidden {args.hidden}, {args.layers} layers, vocab {args.vocab}, "
              f"fp32, {args.threads} thread(s)")
        for task in args.tasks.split(","):
            pairs, n = pairs_of(task, bench, args.docs)
            w_peer, c_peer, ll_peer = time_peer(model_dir, pairs, args.repeat)
            w_ours, c_ours, ll_ours = time_ours(model_dir, pairs, args.repeat)
            diff = max(abs(a - b) for a, b in zip(ll_peer, ll_ours))
            print(f"{task:<9} {n} examples, {len(pairs)} requests: lm-eval {n / w_peer:8.1f} ex/s   "
                  f"ours {n / w_ours:8.1f} ex/s   {w_peer / w_ours:5.2f}x wall   "
                  f"{c_peer / c_ours:5.2f}x CPU ({c_peer:.2f} vs {c_ours:.2f} s)   max |dll| {diff:.2e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
