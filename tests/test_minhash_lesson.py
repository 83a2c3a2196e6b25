"""MinHash and LSH against the lesson's worked numbers (section 1e-1g) and their definitions."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from pretrain.curate import minhash
from pretrain.curate.dedup_synth import Generator
from pretrain.curate.minhash import MinHasher, candidate_probability, estimate_jaccard, shingle_hashes


def test_jaccard_of_the_lessons_two_sentences_is_three_sevenths():
    a = minhash.shingles("the cat sat on the mat", n=2)
    b = minhash.shingles("the cat sat on a mat", n=2)
    assert len(a & b) == 3 and len(a | b) == 7
    assert minhash.jaccard(a, b) == pytest.approx(3 / 7)


def test_first_shared_element_in_12_of_24_orders():
    a, b = {"a", "b", "c"}, {"b", "c", "d"}
    orders = list(itertools.permutations("abcd"))
    agree = sum(next(x for x in o if x in a) == next(x for x in o if x in b) for o in orders)
    assert (agree, len(orders)) == (12, 24)
    assert agree / len(orders) == minhash.jaccard(a, b)


def test_our_permutations_agree_with_probability_j():
    """Each of our hash functions acts as a random order: agreement rate -> J = 0.5 over many."""
    x = minhash.word_hashes(["a", "b", "c", "d"])
    h = MinHasher(bands=500, rows=8, seed=3)  # 4,000 independent permutations
    est = estimate_jaccard(h.signature(x[:3]), h.signature(x[1:]))
    assert abs(est - 0.5) < 4 * math.sqrt(0.25 / h.k)


def test_signature_is_the_exact_modular_minimum():
    """The vectorized fold equals min_x ((a*x + b) mod 2^64) mod (2^61 - 1) in Python integers."""
    gen = Generator(seed=1)
    x = shingle_hashes(gen.text(700))
    h = MinHasher(bands=4, rows=4, seed=9)
    want = [min(((int(a) * int(v) + int(b)) % 2**64) % minhash.MERSENNE for v in x)
            for a, b in zip(h.a, h.b)]
    assert h.signature(x).tolist() == want
    batch = h.signatures([x[:5], x, x[100:300]])  # block cuts inside and across documents
    assert batch[1].tolist() == want
    assert batch[0].tolist() == h.signature(x[:5]).tolist()


def test_signature_reduces_the_rare_fold_results_at_or_above_p():
    """Values y = a*x + b (mod 2^64) whose fold lands in [p, p + 7] must still be reduced mod p."""
    h = MinHasher(bands=4, rows=4, seed=9)
    i = next(j for j, a in enumerate(h.a) if int(a) % 2)  # an odd a is invertible mod 2^64
    a, b = int(h.a[i]), int(h.b[i])
    x = [((y - b) * pow(a, -1, 2**64)) % 2**64 for y in (minhash.MERSENNE, 2**64 - 1, 3 << 61)]
    x = np.array(x + [12345], np.uint64)
    want = [min(((int(a_) * int(v) + int(b_)) % 2**64) % minhash.MERSENNE for v in x)
            for a_, b_ in zip(h.a, h.b)]
    assert want[i] == 0  # p mod p: the fold gives exactly p, the largest value before reduction
    assert h.signature(x).tolist() == want


def test_error_at_128_hashes_matches_sqrt_j_1_minus_j_over_k():
    """Std of the estimate over 400 seeds ~ sqrt(0.25/128) = 0.044 for a pair with J = 0.5."""
    gen = Generator(seed=2)
    ws = gen.words(400)
    twin, true_j = gen.twin(ws, 0.5)
    sa, sb = shingle_hashes(" ".join(ws)), shingle_hashes(twin)
    assert minhash.jaccard(set(sa.tolist()), set(sb.tolist())) == pytest.approx(true_j)
    ests = []
    for seed in range(400):
        h = MinHasher(bands=16, rows=8, seed=seed)
        sig = h.signatures([sa, sb])
        ests.append(estimate_jaccard(sig[0], sig[1]))
    predicted = math.sqrt(true_j * (1 - true_j) / 128)
    assert round(math.sqrt(0.25 / 128), 3) == 0.044
    assert np.std(ests) == pytest.approx(predicted, rel=0.15)
    assert np.mean(ests) == pytest.approx(true_j, abs=3 * predicted / math.sqrt(400))


def test_lsh_s_curve_at_20_bands_5_rows():
    assert round(float(candidate_probability(0.8, 20, 5)), 4) == 0.9996
    assert round(float(candidate_probability(0.3, 20, 5)), 4) == 0.0475
    assert round(minhash.threshold(20, 5), 2) == 0.55
    # FineWeb's 14 x 8 at 0.8 (datatrove's docs quote 0.924)
    assert round(float(candidate_probability(0.8, 14, 8)), 3) == 0.924


def test_normalization_rules():
    # "1,000.50": the number pattern takes "1,000" then "50" (as datatrove's does) -> "0 0"
    text = "  Héllo,\tWORLD!  Ça   coûte 1,000.50 $ -- ok "
    assert minhash.normalize(text) == "hello world ca coute 0 0 ok"
    assert minhash.words("") == []
    assert minhash.shingles("one two three four", n=5) == set()  # shorter than n: no shingle


def test_ascii_fast_path_equals_the_unicode_path():
    """ASCII text takes byte tables; a trailing non-ASCII word forces the general regex path."""
    import random

    rng = random.Random(0)
    alphabet = "0123456789.,;:ab CD-x!\t\n'\"$%()[]_"
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        assert minhash.words(text) + ["e"] == minhash.words(text + " é")


def test_batched_ngram_hashes_equal_per_document_ones():
    """Hashing a batch's concatenation and dropping straddling n-grams = hashing each document."""
    gen = Generator(seed=6)
    docs = [minhash.word_hashes(minhash.word_bytes(gen.text(k))) for k in (0, 1, 4, 5, 6, 30, 3, 200, 5)]
    for n in (1, 5, 9):
        x, counts = minhash.ngram_hashes_many(docs, n)
        want = [minhash.ngram_hashes(d, n) for d in docs]
        assert counts.tolist() == [len(w) for w in want]
        assert x.tolist() == np.concatenate(want).tolist()
    h = MinHasher(bands=4, rows=4, seed=9)
    keep = [d for d in docs if len(d) >= 5]
    x, counts = minhash.ngram_hashes_many(keep, 5)
    one_by_one = h.signatures([minhash.ngram_hashes(d, 5) for d in keep])
    assert h.signatures_concat(x, counts).tolist() == one_by_one.tolist()
    assert minhash.ngram_hashes_many([], 5)[0].size == 0


def test_stream_safe_scan_skips_only_texts_without_a_long_run():
    """The quick scan is sound: no code point below U+0300 is a non-starter (unicodedata), and on
    texts with runs of marks just under, at and over the limit (Latin, Tibetan, CJK) the result
    equals the full non-starter class's."""
    import unicodedata

    assert not any(unicodedata.combining(chr(cp)) for cp in range(0x300))
    assert all(ord(c) >= 0x300 for c in minhash._NONSTARTER_DECOMPOSITIONS)
    n = minhash.SAFE_RUN

    def cut(m):
        return minhash._CGJ.join(m.group()[i:i + n] for i in range(0, len(m.group()), n))

    for k in (n - 1, n, n + 1, 3 * n + 2):
        for mark in ("\u0301", "\u0f73", "\u0301\u0316"):
            for text in ("Wörd a" + mark * k + " b", "漢字" * 40 + mark * k, mark * k):
                assert minhash.stream_safe(text) == minhash._nonstarter_runs().sub(cut, text)


def test_lazy_fold_classifies_every_bmp_character_as_the_rule_says():
    """Characters are folded to ASCII on first sight; over the whole BMP the result is the rule's:
    punctuation (the punct class) or whitespace -> " ", an ASCII letter + only Mn marks under NFD
    -> that letter, anything else (and the number separators, surrogates, astral) -> not folded.
    And a text folded that way gives the general Unicode path's words."""
    import random
    import unicodedata

    punct = minhash._tables()[0].bmp
    fold = minhash._Fold()
    folded = []
    for cp in range(0x80, 0x10000):
        c = chr(cp)
        base = unicodedata.normalize("NFD", c)
        if c in "\u060c\u066b\u2396\u2397\u2398" or 0xD800 <= cp < 0xE000:
            want = None
        elif punct.fullmatch(c) or c.isspace():
            want = " "
        elif len(base) > 1 and base[0].isascii() and base[0].isalpha() and all(
                unicodedata.category(m) == "Mn" for m in base[1:]):
            want = base[0]
        else:
            want = None
        assert fold.classify(c) == want, hex(cp)
        if want is not None:
            folded.append(c)
    assert fold.classify("\U0001f600") is None
    rng = random.Random(1)
    alphabet = "ab 1,2.5 x-y!\n" + "".join(rng.sample(folded, 200)) + "\u060c\u2397"
    for _ in range(2000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))).lower()
        assert minhash.word_bytes(text) == minhash._unicode_word_bytes(text), repr(text)
