"""Seeded synthetic corpora for dedup tests and benchmarks: pairs planted at a known Jaccard.

Words are random lowercase letter strings drawn from a fixed vocabulary, so after normalization
they stay themselves and two unrelated documents share no word 5-gram. A planted twin keeps the
first m words of its original and continues with fresh words: with L words and n-gram size n the
pair shares m - n + 1 of its L - n + 1 shingles each, so J = (m-n+1) / (2(L-n+1) - (m-n+1)), and
m is solved from the target J (the true J is returned too, computed from the word counts).
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass


@dataclass
class PlantedPair:
    original: str  # document id
    twin: str
    jaccard: float  # the pair's true shingle Jaccard


class Generator:
    """Seeded documents of random words; the same seed gives the same corpus on any machine."""

    def __init__(self, seed: int = 0, vocab: int = 50_000):
        self.rng = random.Random(seed)
        letters = string.ascii_lowercase
        self.vocab = ["".join(self.rng.choices(letters, k=self.rng.randint(3, 8))) for _ in range(vocab)]

    def words(self, n: int) -> list[str]:
        return self.rng.choices(self.vocab, k=n)

    def text(self, n_words: int) -> str:
        return " ".join(self.words(n_words))

    def twin(self, words: list[str], jaccard: float, ngram: int = 5) -> tuple[str, float]:
        """A text whose shingle Jaccard with `words` is as close to `jaccard` as whole words allow."""
        total = len(words) - ngram + 1
        shared = round(2 * total * jaccard / (1 + jaccard))
        m = shared + ngram - 1
        twin = words[:m] + self.words(len(words) - m)
        return " ".join(twin), shared / (2 * total - shared)


def planted_corpus(jaccards: list[float], pairs_per_level: int, n_words: int = 500, singles: int = 0,
                   seed: int = 0, ngram: int = 5) -> tuple[list[tuple[str, str]], list[PlantedPair]]:
    """(id, text) documents in a shuffled order, and the planted pairs with their true Jaccard."""
    gen = Generator(seed)
    docs: list[tuple[str, str]] = []
    pairs: list[PlantedPair] = []
    for level, target in enumerate(jaccards):
        for i in range(pairs_per_level):
            ws = gen.words(n_words)
            twin, true_j = gen.twin(ws, target, ngram)
            a, b = f"p{level:02d}-{i:05d}-a", f"p{level:02d}-{i:05d}-b"
            docs += [(a, " ".join(ws)), (b, twin)]
            pairs.append(PlantedPair(a, b, true_j))
    docs += [(f"s-{i:06d}", gen.text(n_words)) for i in range(singles)]
    gen.rng.shuffle(docs)
    return docs, pairs
