"""The vectorized rules against a plain, line-by-line transcription of the definitions.

The reference below is written straight from ../shared/reference/quality_rules.md with lists,
Counter and loops, no shortcuts; it shares only the word splitter with the code under test. Both
run on generated documents full of repetition at random scales, so the n-gram bookkeeping (exact
n-gram ids, sparse levels, the jump-ahead scan) meets many cases near the thresholds. Needs no peer.
"""

from __future__ import annotations

import random
import re
from collections import Counter

import pytest

from pretrain.curate.document import Document
from pretrain.curate.rules import GopherQualityFilter, GopherRepetitionFilter, RulesConfig
from pretrain.curate.words import nltk_words, spacy_words

SPLIT = {"datatrove-0.10": spacy_words, "fineweb-2024": nltk_words}
PUNCT = set("!/—”:％１〈&(、━\\【#%「」，】；+^]~“《„';’{|∶´[=-`*．（–？！：$～«〉,><》)?）。…@_.\"}►»")


def dups(xs: list[str]) -> tuple[int, int]:
    seen, n, chars = set(), 0, 0
    for x in xs:
        if x in seen:
            n, chars = n + 1, chars + len(x)
        else:
            seen.add(x)
    return n, chars


def ref_repetition(text: str, profile: str, lines_and_paragraphs: bool = True) -> bool | str:
    if not text:
        return "empty"
    if lines_and_paragraphs:
        verdict = ref_lines(text, profile)
        if verdict is not True:
            return verdict
    return ref_ngrams(text, profile)


def ref_lines(text: str, profile: str) -> bool | str:
    paras = re.split(r"\n{2,}", text.strip())
    n, chars = dups(paras)
    if n / len(paras) > 0.3:
        return "dup_para_frac"
    if chars / len(text) > 0.2:
        return "dup_para_char_frac"
    lines = text.splitlines() if profile == "fineweb-2024" else re.split("\n+", text)
    n, chars = dups(lines)
    if n / len(lines) > 0.3:
        return "dup_line_frac"
    if chars / len(text) > 0.2:
        return "dup_line_char_frac"
    return True


def ref_ngrams(text: str, profile: str) -> bool | str:
    words = SPLIT[profile](text)
    for n, thr in ((2, 0.2), (3, 0.18), (4, 0.16)):
        grams = [" ".join(words[i : i + n]) for i in range(len(words) - n + 1)]
        if grams:
            top, count = Counter(grams).most_common(1)[0]
            if len(top) * count / len(text) > thr:
                return f"top_{n}_gram"
    for n, thr in ((5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10)):
        seen, idx, repeated = set(), 0, 0
        while idx < len(words) - n + 1:
            g = "".join(words[idx : idx + n])
            if g in seen:
                repeated += len(g)
                idx += n
            else:
                seen.add(g)
                idx += 1
        if repeated / len(text) > thr:
            return f"duplicated_{n}_n_grams"
    return True


def ref_quality(text: str, profile: str) -> bool | str:
    words = SPLIT[profile](text)
    content = [w for w in words if any(c not in PUNCT for c in w)]
    if len(content) < 50:
        return "gopher_short_doc"
    mean = sum(map(len, content)) / len(content)
    if mean < 3:
        return "gopher_below_avg_threshold"
    if mean > 10:
        return "gopher_above_avg_threshold"
    if text.count("#") / len(words) > 0.1:
        return "gopher_too_many_hashes"
    if (text.count("...") + text.count("…")) / len(words) > 0.1:
        return "gopher_too_many_ellipsis"
    lines = text.splitlines()
    if sum(x.lstrip().startswith(("•", "-")) for x in lines) / len(lines) > 0.9:
        return "gopher_too_many_bullets"
    if sum(x.rstrip().endswith(("...", "…")) for x in lines) / len(lines) > 0.3:
        return "gopher_too_many_end_ellipsis"
    if sum(any(c.isalpha() for c in w) for w in words) / len(words) < 0.8:
        return "gopher_below_alpha_threshold"
    stop = {"the", "be", "to", "of", "and", "that", "have", "with"}
    found = sum(w in stop for w in words) if profile == "fineweb-2024" else len(stop & set(words))
    return "gopher_enough_stop_words" if found < 2 else True


VOCAB = "the of and to a in is it that with be have data cat sat on mat # ... - 1 2 3 , . ! ?".split()


def repetitive_docs(n: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        # a random base text, then random spans of it pasted back in: repeats of every length
        words = [rng.choice(VOCAB + [f"w{rng.randint(0, 300)}"] * 4) for _ in range(rng.randint(20, 400))]
        for _ in range(rng.randint(0, 6)):
            a = rng.randrange(len(words))
            span = words[a : a + rng.randint(1, 25)]
            b = rng.randrange(len(words))
            words[b:b] = span * rng.randint(1, 3)
        seps = [rng.choice([" "] * 20 + ["\n", "\n\n"]) for _ in words]
        out.append("".join(w + s for w, s in zip(words, seps)))
    return out


@pytest.mark.parametrize("profile", ["datatrove-0.10", "fineweb-2024"])
def test_repetition_and_quality_match_plain_reference(profile):
    cfg = RulesConfig(profile=profile)
    rep, qual = GopherRepetitionFilter(cfg), GopherQualityFilter(cfg)
    ngrams_only = GopherRepetitionFilter(
        RulesConfig(
            profile=profile, dup_line_frac=0, dup_para_frac=0, dup_line_char_frac=0, dup_para_char_frac=0
        )
    )
    seen = Counter()
    for text in repetitive_docs(400):
        assert rep.keep(Document("d", text)) == ref_repetition(text, profile), text
        assert qual.keep(Document("d", text)) == ref_quality(text, profile), text
        expected = ref_repetition(text, profile, lines_and_paragraphs=False)
        assert ngrams_only.keep(Document("d", text)) == expected, text
        seen[expected] += 1
    # the generated documents reach the n-gram rules, on both sides of them
    assert seen[True] > 10 and sum(v for k, v in seen.items() if str(k).startswith("duplicated")) > 10, seen


def test_hostile_chunks_are_bounded():
    # Long non-space runs skip the affix loop (quadratic in spaCy too) and split linearly.
    assert spacy_words("!" * 5000) == ["!"] * 5000
    assert spacy_words("ab" * 3000) == ["ab" * 3000]
    # a single letter + period is an initial to the Punkt stand-in: one sentence, one final period
    assert nltk_words("a. " * 20000) == ["a."] * 19999 + ["a", "."]
