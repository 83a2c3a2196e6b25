"""Parity with the peers: datasketch's MinHash/MinHashLSH and datatrove's text normalization."""

from __future__ import annotations

import json
import math
import subprocess
import unicodedata
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, data_file

from pretrain.curate import minhash
from pretrain.curate.dedup_synth import Generator
from pretrain.curate.minhash import MinHasher, candidate_probability, estimate_jaccard

PEERS_PY = ROOT / ".venv-peers" / "bin" / "python"


def _shingle_strings(text: str) -> set[str]:
    return minhash.shingles(text, 5)


def _pairs(levels, per_level, seed=0, n_words=300):
    gen = Generator(seed)
    out = []
    for j in levels:
        for _ in range(per_level):
            ws = gen.words(n_words)
            twin, true_j = gen.twin(ws, j)
            out.append((" ".join(ws), twin, true_j))
    return out


def test_jaccard_estimates_agree_with_datasketch_within_sampling_error():
    datasketch = pytest.importorskip("datasketch")
    ours = MinHasher(14, 8, seed=1)
    k = ours.k
    diffs, our_err, their_err = [], [], []
    for a, b, true_j in _pairs([0.3, 0.5, 0.7, 0.8, 0.9], 12):
        sa, sb = _shingle_strings(a), _shingle_strings(b)
        assert minhash.jaccard(sa, sb) == pytest.approx(true_j)
        ma, mb = datasketch.MinHash(num_perm=k, seed=1), datasketch.MinHash(num_perm=k, seed=1)
        ma.update_batch([s.encode() for s in sa])
        mb.update_batch([s.encode() for s in sb])
        theirs = ma.jaccard(mb)
        sig = ours.signatures([minhash.shingle_hashes(a), minhash.shingle_hashes(b)])
        est = estimate_jaccard(sig[0], sig[1])
        sigma = math.sqrt(true_j * (1 - true_j) / k)
        our_err.append((est - true_j) / sigma)
        their_err.append((theirs - true_j) / sigma)
        diffs.append(est - theirs)
    # Both are unbiased with the same spread: standardized errors have mean ~0 and std ~1.
    for errs in (our_err, their_err):
        assert abs(np.mean(errs)) < 4 / math.sqrt(len(errs))
        assert 0.7 < np.std(errs) < 1.3
    assert max(abs(e) for e in our_err) < 4.5


def test_lsh_candidates_match_datasketch_and_the_s_curve():
    """Fraction of planted pairs that become candidates, ours vs MinHashLSH(params=(14, 8))."""
    datasketch = pytest.importorskip("datasketch")
    levels, per = [0.5, 0.7, 0.8, 0.9], 60
    pairs = _pairs(levels, per, seed=5, n_words=200)
    ours = MinHasher(14, 8, seed=1)
    sigs = ours.signatures([minhash.shingle_hashes(t) for p in pairs for t in p[:2]])
    keys = ours.band_keys(sigs)
    lsh = datasketch.MinHashLSH(num_perm=112, params=(14, 8))
    mins = []
    for i, (a, b, _) in enumerate(pairs):
        for side, text in (("a", a), ("b", b)):
            m = datasketch.MinHash(num_perm=112, seed=1)
            m.update_batch([s.encode() for s in _shingle_strings(text)])
            mins.append((f"{i}{side}", m))
    with lsh.insertion_session() as session:
        for key, m in mins:
            session.insert(key, m)
    for li, level in enumerate(levels):
        rows = range(li * per, (li + 1) * per)
        our_rate = np.mean([(keys[2 * i] == keys[2 * i + 1]).any() for i in rows])
        their_rate = np.mean([f"{i}b" in lsh.query(mins[2 * i][1]) for i in rows])
        p = float(candidate_probability(np.mean([pairs[i][2] for i in rows]), 14, 8))
        tol = 4 * math.sqrt(p * (1 - p) / per) + 0.02
        assert abs(our_rate - p) <= tol, (level, our_rate, p)
        assert abs(their_rate - p) <= tol, (level, their_rate, p)


def _datatrove_simplify(texts: list[str]) -> list[str]:
    if not PEERS_PY.exists():
        pytest.skip(f"peer venv missing: {PEERS_PY} (make peers)")
    code = ("import sys, json\nfrom datatrove.utils.text import simplify_text\n"
            "for line in sys.stdin:\n    print(json.dumps(simplify_text(json.loads(line))))\n")
    proc = subprocess.run([str(PEERS_PY), "-c", code], input="".join(json.dumps(t) + "\n" for t in texts),
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        pytest.skip(f"datatrove unavailable in the peer venv: {proc.stderr[-300:]}")
    return [json.loads(line) for line in proc.stdout.splitlines()]


def _without_punctuation(text: str) -> list[str]:
    return "".join(" " if unicodedata.category(c)[0] in "PSC" else c for c in text).split()


def test_normalization_matches_datatrove_up_to_its_punctuation_list():
    """Real sentences in 75 languages and WikiText lines: same words once punctuation is set aside.

    datatrove lists punctuation by hand; we take Unicode categories, so we also split on
    characters its list misses (U+2018 left quote, the Devanagari danda, the Arabic comma, ...).
    """
    lingua = Path(data_file("langid/lingua/lingua-sentences-75lang-100each.tsv"))
    wiki = Path(data_file("lm/wikitext-2/test.txt"))
    lines = lingua.read_text(encoding="utf-8").splitlines()
    texts = [line.split("\t", 1)[1] for line in lines if "\t" in line]
    texts += [line.strip() for line in wiki.read_text(encoding="utf-8").splitlines() if line.strip()][:2000]
    theirs = _datatrove_simplify(texts)
    ours = [minhash.normalize(t) for t in texts]
    same = np.mean([a == b for a, b in zip(ours, theirs)])
    print(f"\nidentical normalization on {len(texts)} texts: {same:.3f}")
    assert same > 0.9
    assert all(_without_punctuation(a) == _without_punctuation(b) for a, b in zip(ours, theirs))
