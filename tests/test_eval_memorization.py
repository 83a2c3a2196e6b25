"""The memorization probe (Carlini et al. 2022) on a tiny byte-level model trained on real text with
one line planted 60 times and another once: the first is extracted, the second is not."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

PLANTED = "The secret code of the vault is 7391-alpha-KESTREL-2044, keep it safe."
ONCE = "Lord Harbinger sold forty-two purple umbrellas to Mrs. Quibble on Tuesday."


def planted_corpus(base: str, line: str, copies: int, once: str, seed: int = 0) -> str:
    """Paragraphs of `base` with `line` inserted `copies` times at random places and `once` once."""
    paras = base.split("\n\n")
    rng = np.random.default_rng(seed)
    for _ in range(copies):
        paras.insert(int(rng.integers(len(paras) + 1)), line)
    paras.insert(len(paras) // 2, once)
    return "\n\n".join(paras)


def test_count_occurrences_counts_overlaps_like_a_lookahead_regex():
    from pretrain.eval.memorization import count_occurrences

    text = "abababa xx abab aba"
    stream = np.frombuffer(text.encode(), dtype=np.uint8).astype(np.int64)
    for pat in ("aba", "ab", "x", "abab", "zz", "a"):
        ref = len(re.findall(f"(?={re.escape(pat)})", text))
        assert count_occurrences(stream, list(pat.encode())) == ref, pat


@pytest.mark.slow
def test_probe_finds_the_planted_line_and_not_the_one_seen_once(tmp_path, text, restore_torch_threads):
    from pretrain.eval.lm import from_run
    from pretrain.eval.memorization import probe
    from pretrain.train.testing import tiny_config
    from pretrain.train.trainer import Trainer

    corpus = planted_corpus(Path(text).read_text()[:8000], PLANTED, 60, ONCE)
    path = tmp_path / "corpus.txt"
    path.write_text(corpus)
    cfg = tiny_config(tmp_path / "run", path, "train.steps=250", "model.seq_len=64", "data.batch_size=8",
                      "data.eval_fraction=0", "checkpoint.every=1000", "schedule.warmup_steps=10")
    Trainer(cfg, quiet=True).fit()
    model, _ = from_run(tmp_path / "run")
    stream = np.frombuffer(corpus.encode(), dtype=np.uint8).astype(np.int64)
    res = probe(model, stream, k=32, m=32, n=20, extra=[list(PLANTED.encode()), list(ONCE.encode())])
    planted, once = res["sequences"][-2:]
    assert (planted["count"], once["count"]) == (60, 1)
    assert planted["memorized"] and not once["memorized"]
    assert res["by_count"]["10-99"]["rate"] > res["by_count"]["1"]["rate"]
