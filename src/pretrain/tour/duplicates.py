"""Section 1e-1h of the tour: Jaccard similarity and its MinHash estimate (`curate.minhash`), the LSH
S-curve on the crawl's scraper copy, and why a line seen many times is recited verbatim (a bigram
model on a small corpus of our own lines)."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np

from pretrain.tour.cleaning import CRAWL
from pretrain.tour.parts import Part, Section, Table


def _jaccard_and_minhash(sec: Section) -> None:
    from pretrain.curate.minhash import MinHasher, estimate_jaccard, jaccard, shingles

    a, b = shingles("the cat sat on the mat", 2), shingles("the cat sat on a mat", 2)
    sec.values["jaccard_shared_union"] = (len(a & b), len(a | b))
    sec.values["jaccard_cat_mat"] = jaccard(a, b)
    # Every ordering of {a, b, c, d} as a hash ranking: A's and B's minima agree in J of them.
    sa, sb = {"a", "b", "c"}, {"b", "c", "d"}
    orders = list(itertools.permutations("abcd"))
    agree = sum(min(sa, key=o.index) == min(sb, key=o.index) for o in orders)
    sec.values["minhash_orders"] = (agree, len(orders))
    # Standard error of the k = 128 estimate: formula, and measured with the real MinHasher.
    sec.values["minhash_stderr_k128"] = math.sqrt(0.5 * 0.5 / 128)
    # Random 64-bit values stand in for shingle hashes (which are mixed, hence random-looking).
    pool = np.random.default_rng(0).integers(0, 2**63, 400, dtype=np.int64).astype(np.uint64)
    A, B = pool[:300], pool[100:]  # J(A, B) = 200 / 400
    est = [
        estimate_jaccard(h.signature(A), h.signature(B))
        for h in (MinHasher(bands=16, rows=8, seed=s) for s in range(200))
    ]
    sec.values["minhash_k128_measured_std"] = float(np.std(est))
    sec.values["minhash_k128_measured_mean"] = float(np.mean(est))
    sec.notes.append(
        f"1e-f. Jaccard('the cat sat on the mat', 'the cat sat on a mat') = {len(a & b)}/{len(a | b)}"
        f" = {jaccard(a, b):.2f}; the minima agree in {agree} of {len(orders)} orders; "
        f"k=128 error {sec.values['minhash_stderr_k128']:.3f} (measured over 200 seeds: "
        f"{sec.values['minhash_k128_measured_std']:.3f})."
    )


def _lsh(sec: Section) -> None:
    from pretrain.curate.minhash import (
        MinHasher,
        candidate_probability,
        estimate_jaccard,
        jaccard,
        shingle_hashes,
        shingles,
        threshold,
    )

    sec.values["lsh_p_0.8"] = float(candidate_probability(0.8, 20, 5))
    sec.values["lsh_p_0.3"] = float(candidate_probability(0.3, 20, 5))
    sec.values["lsh_threshold_20x5"] = threshold(20, 5)
    sec.values["lsh_p_0.8_fineweb_14x8"] = float(candidate_probability(0.8, 14, 8))
    sec.values["scraper_copy_jaccard"] = jaccard(shingles(CRAWL[0][1]), shingles(CRAWL[5][1]))
    sec.tables.append(
        Table(
            "1g. P(candidate) = 1 - (1 - s^r)^b",
            ["s", "20 bands x 5 rows", "14 x 8 (FineWeb)"],
            [
                [
                    s,
                    f"{float(candidate_probability(s, 20, 5)):.4f}",
                    f"{float(candidate_probability(s, 14, 8)):.4f}",
                ]
                for s in (0.3, 0.5, 0.7, 0.8, 0.9)
            ],
        )
    )
    # The scraper's copy against page 0: MinHash estimates with k hashes (real MinHasher, one row per band).
    ha, hb = shingle_hashes(CRAWL[0][1]), shingle_hashes(CRAWL[5][1])
    est = {
        k: estimate_jaccard(MinHasher(k, 1, seed=0).signature(ha), MinHasher(k, 1, seed=0).signature(hb))
        for k in (8, 32, 128, 512)
    }
    sec.values["scraper_copy_minhash_estimates"] = est
    sec.tables.append(
        Table(
            "1f. Page 0 vs the scraper's copy: MinHash estimates",
            ["hashes k", "true Jaccard", "estimate"],
            [[k, f"{sec.values['scraper_copy_jaccard']:.3f}", f"{e:.3f}"] for k, e in est.items()],
        )
    )
    sec.notes.append(
        f"1g. Steepest near (1/b)^(1/r) = {threshold(20, 5):.2f}; the scraper's copy shares "
        f"{sec.values['scraper_copy_jaccard']:.0%} of page 0's 5-word shingles."
    )


# The bigram corpus of section 1h (our own lines). Counted after each word of the boilerplate:
# tap -> below 1 of 2, below -> to 1 of 2, to -> join 1 of 3, join -> our 2 of 2, our -> mailing
# 1 of 3, mailing -> list 1 of 2: the same fractions as the lesson's line, so 1/72 once.
BOILERPLATE = "tap below to join our mailing list"
OTHER_LINES = [
    "tap the screen twice to open it",
    "scroll below the map to see our shop",
    "join our club today",
    "the mailing address is on the box",
    "rain fell all night",
]


def bigram_verbatim_probability(copies: int) -> float:
    """P(a bigram model continues the boilerplate's first word into the whole line), trained on
    OTHER_LINES plus `copies` of BOILERPLATE (maximum-likelihood counts)."""
    pairs: Counter[tuple[str, str]] = Counter()
    for line in OTHER_LINES + [BOILERPLATE] * copies:
        ws = line.split()
        pairs.update(zip(ws, ws[1:]))
    after: Counter[str] = Counter()
    for (w, _), c in pairs.items():
        after[w] += c
    ws = BOILERPLATE.split()
    return math.prod(pairs[(x, y)] / after[x] for x, y in zip(ws, ws[1:]))


def _bigram(sec: Section) -> None:
    sec.values["bigram_once"] = bigram_verbatim_probability(1)
    sec.values["bigram_100"] = bigram_verbatim_probability(100)
    sec.tables.append(
        Table(
            f"1h. A bigram model reciting '{BOILERPLATE}'",
            ["copies", "P(whole line)"],
            [[c, f"{bigram_verbatim_probability(c):.3f}"] for c in (1, 10, 100, 1000)],
        )
    )


PARTS: list[Part] = [
    (("pretrain.curate.minhash",), _jaccard_and_minhash),
    (("pretrain.curate.minhash",), _lsh),
    ((), _bigram),
]
