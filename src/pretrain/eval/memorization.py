"""Extractable memorization (Carlini et al. 2022, "Quantifying Memorization Across Neural Language
Models", sec. 2): a training sequence is memorized when, prompted with its first k tokens, the model's
greedy continuation reproduces the next m tokens exactly. The share of memorized sequences is
reported by how many times each sequence occurs in the training data (their Fig. 1: it grows with
the number of duplicates), which is why deduplication reduces it (Lee et al. 2022, sec. 6).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pretrain.eval.lm import EvalModel
from pretrain.eval.scoring import greedy_generate

BUCKETS = ((1, 1), (2, 9), (10, 99), (100, None))  # occurrence counts, as Carlini et al.'s log bins


def count_occurrences(stream: np.ndarray, seq: Sequence[int]) -> int:
    """Times `seq` occurs in the token stream (overlapping occurrences count)."""
    seq = np.asarray(seq, dtype=stream.dtype)
    L = seq.size
    if L == 0 or stream.size < L:
        return 0
    cand = np.flatnonzero(stream[:stream.size - L + 1] == seq[0])
    for j in range(1, L):  # narrow the candidates one position at a time: O(n) for the first, then tiny
        if cand.size == 0:
            break
        cand = cand[stream[cand + j] == seq[j]]
    return int(cand.size)


def extracted(model: EvalModel, sequences: Sequence[Sequence[int]], k: int, m: int,
              batch_size: int = 16) -> list[bool]:
    """For each sequence (at least k + m tokens): does greedy decoding from its first k tokens give
    exactly its next m tokens?"""
    prompts = [list(s[:k]) for s in sequences]
    gens = greedy_generate(model, prompts, m, batch_size=batch_size)
    return [list(g) == list(s[k:k + m]) for g, s in zip(gens, sequences)]


def bucket_of(count: int) -> str:
    for lo, hi in BUCKETS:
        if count >= lo and (hi is None or count <= hi):
            return f"{lo}+" if hi is None else (f"{lo}" if lo == hi else f"{lo}-{hi}")
    return "0"


def probe(model: EvalModel, stream: np.ndarray, k: int = 32, m: int = 32, n: int = 200, seed: int = 0,
          extra: Sequence[Sequence[int]] = ()) -> dict:
    """Memorization of n random training windows (plus `extra` sequences), split by occurrence count.

    Returns {"k", "m", "n", "rate", "by_count": {bucket: {"n", "memorized", "rate"}},
             "sequences": [{"start" or "extra", "count", "memorized"}]}.
    """
    stream = np.asarray(stream)
    L = k + m
    if stream.size < L:
        raise ValueError(f"training stream of {stream.size} tokens is shorter than k + m = {L}")
    rng = np.random.default_rng(seed)
    starts = sorted(rng.choice(stream.size - L + 1, size=min(n, stream.size - L + 1), replace=False).tolist())
    seqs = [stream[s:s + L].tolist() for s in starts] + [list(x[:L]) for x in extra]
    hits = extracted(model, seqs, k, m)
    rows = []
    for i, (seq, hit) in enumerate(zip(seqs, hits)):
        where = {"start": starts[i]} if i < len(starts) else {"extra": i - len(starts)}
        rows.append({**where, "count": count_occurrences(stream, seq), "memorized": bool(hit)})
    by: dict[str, dict] = {}
    for r in rows:
        b = by.setdefault(bucket_of(r["count"]), {"n": 0, "memorized": 0})
        b["n"] += 1
        b["memorized"] += int(r["memorized"])
    for b in by.values():
        b["rate"] = b["memorized"] / b["n"]
    total = sum(r["memorized"] for r in rows)
    return {"k": k, "m": m, "n": len(rows), "rate": total / max(1, len(rows)), "by_count": by,
            "sequences": rows}
