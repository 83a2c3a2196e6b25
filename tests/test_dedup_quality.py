"""Quality of the answer on pairs planted at a known Jaccard, next to the S-curve's prediction."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from pretrain.curate.dedup import DedupConfig, find_duplicates, load_removals, sign_shard
from pretrain.curate.dedup_synth import planted_corpus
from pretrain.curate.document import Document
from pretrain.curate.minhash import candidate_probability

LEVELS = [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95]


@pytest.fixture(scope="module")
def corpus():
    docs, pairs = planted_corpus(LEVELS, pairs_per_level=100, n_words=250, singles=200, seed=11)
    extra, extra_pairs = planted_corpus([0.8], pairs_per_level=300, n_words=250, seed=12)
    return docs + [(f"x{i}", t) for i, t in extra], pairs + _renamed(extra_pairs)


def _renamed(pairs):
    for p in pairs:  # keep the ids of the second corpus apart from the first's
        p.original, p.twin = f"x{p.original}", f"x{p.twin}"
    return pairs


def _run(docs, tmp: Path, cfg: DedupConfig, shards: int = 3):
    for s in range(shards):
        sign_shard(((Document(id=i, text=t), 0) for i, t in docs[s::shards]), s, tmp, cfg)
    return load_removals(find_duplicates(tmp, shards, cfg))


def _table(pairs, removed) -> dict[float, tuple[int, float, float]]:
    rows = {}
    for level in sorted({round(p.jaccard, 2) for p in pairs}):
        group = [p for p in pairs if round(p.jaccard, 2) == level]
        found = np.mean([p.twin in removed and removed[p.twin][2] == p.original for p in group])
        predicted = float(np.mean([candidate_probability(p.jaccard, 14, 8) for p in group]))
        rows[level] = (len(group), float(found), predicted)
    return rows


def _print(title, rows):
    print(f"\n{title}\n   J   pairs  P(candidate) 14x8  removed")
    for level, (n, found, predicted) in rows.items():
        print(f"  {level:4.2f}  {n:4d}  {predicted:12.4f}  {found:8.4f}")


def test_recall_and_false_removals_with_signature_check(corpus, tmp_path):
    docs, pairs = corpus
    removed = _run(docs, tmp_path, DedupConfig())
    rows = _table(pairs, removed)
    _print("default (14x8, candidates checked: signature agreement >= 0.7)", rows)
    high = [p for p in pairs if p.jaccard >= 0.85]
    assert np.mean([p.twin in removed for p in high]) >= 0.99
    at_08 = [p for p in pairs if abs(p.jaccard - 0.8) < 0.01]
    assert np.mean([p.twin in removed for p in at_08]) >= 0.9
    low = [p for p in pairs if p.jaccard <= 0.5 + 1e-9]
    assert np.mean([p.twin in removed or p.original in removed for p in low]) < 0.01
    assert not [i for i, _ in docs if i.startswith("s-") and i in removed]  # unrelated documents
    assert all(removed[p.twin][2] == p.original for p in pairs if p.twin in removed)


def test_without_check_the_removal_rate_follows_the_s_curve(corpus, tmp_path):
    docs, pairs = corpus
    rows = _table(pairs, _run(docs, tmp_path, DedupConfig(verify="none")))
    _print("no candidate check (datatrove's behaviour)", rows)
    for level, (n, found, predicted) in rows.items():
        tol = 4 * math.sqrt(predicted * (1 - predicted) / n) + 1.5 / n
        assert abs(found - predicted) <= tol, (level, found, predicted)
