"""The belt's fast paths give exactly what the general algorithms they short-cut give.

Each fast path (the splitter's plain-chunk path, MinHash normalization's mostly-ASCII path, the
rules' str-based line split) is checked against the general code it stands in for, on real text
from ../shared/data (article bodies of the AEB benchmark, WikiText, 75-language sentences) and on
enumerated or random inputs built to reach every branch. The datatrove parity tests check the
general algorithms themselves against the peers.
"""

from __future__ import annotations

import gzip
import itertools
import json
import random
import re
import string

import pytest
from conftest import SHARED_DATA, data_file

from pretrain.curate import minhash
from pretrain.curate.rules import PUNCTUATION_SET, newline_runs_split
from pretrain.curate.words import _MARKS, MAX_CHUNK, SpacyLikeTokenizer


@pytest.fixture(scope="module")
def tok() -> SpacyLikeTokenizer:
    return SpacyLikeTokenizer()


def full(tok: SpacyLikeTokenizer, chunk: str) -> tuple[str, ...]:
    """The general algorithm: the affix loop, then the special-case merge pass."""
    parts = tok._split(chunk)
    return tuple(tok._merge_specials(parts) if len(parts) > 1 else parts)


def mismatches(tok: SpacyLikeTokenizer, chunks) -> tuple[int, list[str]]:
    taken, bad = 0, []
    for c in chunks:
        got = tok._plain(c)
        if got is not None:
            taken += 1
            if got != full(tok, c):
                bad.append(c)
    return taken, bad[:10]


def article_texts() -> list[str]:
    truth = json.loads(data_file("html/scrapinghub-aeb/ground-truth.json").read_text(encoding="utf-8"))
    return [v["articleBody"] for v in truth.values()]


def test_plain_chunks_match_the_full_splitter_on_real_text(tok):
    wiki = data_file("lm/wikitext-2/test.txt").read_text(encoding="utf-8")
    chunks = {c for t in [*article_texts(), wiki] for c in t.split() if len(c) <= MAX_CHUNK}
    taken, bad = mismatches(tok, chunks)
    assert not bad
    assert taken > 0.8 * len(chunks)  # the fast path carries most of the work


def test_plain_chunks_match_the_full_splitter_on_every_mark_combination(tok):
    marks = [*_MARKS, "."]
    closes = ["", *marks, *("".join(p) for p in itertools.product(marks, repeat=2))]
    bodies = [*"aAsSIxD", "ab", "AB", "aB", "Ab", "the", "1", "12", "x-ray", "A-b-C"]
    taken, bad = mismatches(tok, combos(bodies, ("", "'s", "\u2019s", "'S"), closes))
    assert not bad
    assert taken > 5_000
    # The words inside special cases ("don't" -> "don", "t"), in three casings, so that the checks
    # against the table of special cases are reached.
    inner = {p for key in tok._special for p in re.findall(r"[A-Za-z]+|[0-9]+", key)}
    inner = {form for p in inner for form in (p, p.upper(), p.capitalize())}
    taken, bad = mismatches(tok, combos(sorted(inner), ("", "'s"), ["", ".", ",", "'", ".)", ")."]))
    assert not bad
    taken, bad = mismatches(tok, list(tok._special))  # every special case, through the table
    assert not bad and taken == len(tok._special)


def combos(bodies, possessives, closes):
    for pre in ("", "(", '"', "'", "\u201c", "\u2018"):
        for body in bodies:
            for poss in possessives:
                for close in closes:
                    yield pre + body + poss + close


def test_letter_only_chunks_match_the_full_splitter_in_every_script(tok):
    letters = [chr(cp) for cp in range(0x80, 0x30000) if chr(cp).isalpha()]
    chunks = [c for ch in letters for c in (ch, ch + ch, "a" + ch, ch + "A")]
    taken, bad = mismatches(tok, chunks)
    assert not bad and taken == len(chunks)
    # With marks: whether a final "." is cut depends on the script and case of the letter before it.
    sample = letters[::5]  # every block still has letters in the sample
    chunks = [f"{pre}{b}{close}" for b in sample for pre in ("", "(") for close in (".", "’s", ".”", ")")]
    taken, bad = mismatches(tok, chunks)
    assert not bad and taken > len(chunks) // 2


def test_words_of_a_text_are_the_tokens_of_its_chunks():
    tok = SpacyLikeTokenizer(max_cache=50)  # a tiny cache: the clearing path runs too
    long = "ab" * MAX_CHUNK  # past MAX_CHUNK: cut linearly and never cached
    text = f"The cat's “toy”, (e-mail) {long} don't 3.5km U.S.A. — end."
    reference = SpacyLikeTokenizer()
    expected = [t for c in text.split() for t in reference._chunk(c)]
    assert tok.words(text) == expected
    assert tok.words(text) == expected  # now from the cache
    assert tok.count(text) == len(expected)


def test_no_letter_is_punctuation_for_gopher():
    # GopherQuality's per-word info takes letter-only words as "not only punctuation" without a scan.
    assert not [c for c in PUNCTUATION_SET if c.isalpha()]


@pytest.mark.parametrize("text", ["", "\n", "\n\n", "a", "a\n", "\na", "\n\na\n\n\nb\n", "a\r\n\nb"])
def test_newline_runs_split_is_re_split(text):
    assert newline_runs_split(text) == re.split(r"\n+", text)


def test_newline_runs_split_is_re_split_on_real_text():
    for t in article_texts():
        assert newline_runs_split(t) == re.split(r"\n+", t)


def lingua_sentences() -> list[str]:
    path = data_file("langid/lingua/lingua-sentences-75lang-full.tsv.gz")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        rows = [line.split("\t", 1)[-1] for line in itertools.islice(fh, 40_000)]
    return ["".join(rows[i : i + 20]) for i in range(0, len(rows), 20)]


def test_minhash_fold_path_matches_the_unicode_path_on_real_text():
    texts = article_texts() + lingua_sentences()
    folded = 0
    for t in texts:
        low = t.lower()
        if not low.isascii() and minhash._fold().fold(low) is not None:  # the fold path applies
            folded += 1
            assert minhash.word_bytes(t) == minhash._unicode_word_bytes(low)
    assert folded > 100  # most article bodies only have a few curly quotes and dashes


def test_minhash_fold_path_matches_the_unicode_path_on_mixed_characters():
    fold = minhash._fold()
    # ASCII letters, digits and number separators next to folded characters (punctuation, spaces,
    # accented letters) and the non-ASCII separators the number pattern keeps between digits.
    rng = random.Random(0)
    foldable = [c for c in map(chr, range(0x80, 0x10000)) if fold.classify(c) is not None]
    pool = [*"ab z09.,"] * 4 + [*"\u060c\u066b\u2396\u2397\u2398"] * 2 + rng.sample(foldable, 60)
    pool += [*"\u00e9\u0301\u2019\u00a0\u2028"]
    for _ in range(20_000):
        t = "".join(rng.choice(pool) for _ in range(rng.randint(1, 24)))
        assert minhash.word_bytes(t) == minhash._unicode_word_bytes(t.lower()), ascii(t)


def test_minhash_ascii_path_matches_the_unicode_path():
    rng = random.Random(1)
    pool = string.printable + "0000...,,,"
    for _ in range(5_000):
        t = "".join(rng.choice(pool) for _ in range(rng.randint(1, 40)))
        assert minhash.word_bytes(t) == minhash._unicode_word_bytes(t.lower()), ascii(t)


def _relabel(groups: tuple[list[int], list[int], list[int]]) -> tuple[list[int], list[int], list[int]]:
    """Group ids are labels only: number them in order of first appearance."""
    pos, gid, first = groups
    seen: dict[int, int] = {}
    return list(pos), [seen.setdefault(g, len(seen)) for g in gid], list(first)


@pytest.mark.parametrize("win_cells", [None, 0])  # the window-rows hash, then Horner's rule
def test_ngram_groups_match_grouping_by_id_tuples(tok, monkeypatch, win_cells):
    """The hashed n-gram grouping equals grouping every candidate window by its exact id tuple."""
    import numpy as np

    from pretrain.curate import ngrams
    from pretrain.curate.rules import Words

    if win_cells is not None:
        monkeypatch.setattr(ngrams, "_WIN_CELLS", win_cells)
    rng = random.Random(7)
    # real articles where ../shared/data is present, else generated prose; then each with a passage
    # of itself repeated, and runs over small vocabularies
    have_data = (SHARED_DATA / "html/scrapinghub-aeb/ground-truth.json").exists()
    texts = article_texts()[:60] if have_data else [
        " ".join(rng.choice(string.ascii_lowercase[:12]) * rng.randint(1, 6) for _ in range(400))
        for _ in range(40)]
    texts += [t + " " + " ".join(t.split()[:40]) * 2 for t in texts[:20]]  # a repeated passage
    texts += [" ".join(rng.choice("a b c the of and".split()[: rng.randint(2, 6)]) for _ in range(200))
              for _ in range(20)]
    checked = 0
    for text in texts:
        w = Words(tok.words(text))
        minima = ngrams._window_minima(w.counts[w.ids], 10)
        for n, fewest in minima.items():
            got = ngrams._exact_groups(w.ids, fewest, n)
            truth = ngrams._groups_by_tuple(w.ids, np.flatnonzero(fewest >= 2), n)
            assert _relabel(got) == _relabel(truth), (n, text[:60])
            checked += bool(got[0])
    assert checked > 100  # repeats were found, not only empty results


def _chars(items) -> set[str]:
    """Characters one consuming regex item (LITERAL, IN, a repeat or group of them) can consume."""
    from re import _constants as c

    out: set[str] = set()
    for op, av in items:
        if op in (c.ASSERT, c.ASSERT_NOT, c.AT):
            continue  # lookarounds and anchors consume nothing
        if op is c.LITERAL:
            out.add(chr(av))
        elif op is c.IN:
            for kind, arg in av:
                if kind is c.LITERAL:
                    out.add(chr(arg))
                elif kind is c.RANGE:
                    out.update(map(chr, range(arg[0], arg[1] + 1)))
                else:
                    raise AssertionError(f"class item {kind} not handled")
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT):
            out |= _chars(av[2])
        elif op is c.SUBPATTERN:
            out |= _chars(av[-1])
        elif op is c.BRANCH:
            for alt in av[1]:
                out |= _chars(alt)
        else:
            raise AssertionError(f"regex op {op} not handled")
    return out


def _final_chars(items) -> set[str]:
    """Characters a match of the sequence `items` can end on (its last consuming item's)."""
    from re import _constants as c

    consuming = [(op, av) for op, av in items if op not in (c.ASSERT, c.ASSERT_NOT, c.AT)]
    op, av = consuming[-1]
    if op is c.BRANCH:
        return set().union(*(_final_chars(alt) for alt in av[1]))
    if op is c.SUBPATTERN:
        return _final_chars(av[-1])
    if op in (c.MAX_REPEAT, c.MIN_REPEAT):
        assert av[0] >= 1, "a final item that may be absent"
        return _final_chars(av[2])
    return _chars([(op, av)])


def test_suffix_and_infix_shortcuts_follow_the_patterns(tok):
    """The splitter skips the suffix search when the chunk's last character ends no suffix rule,
    and the infix search when no character of the remainder can be consumed by an infix rule: both
    facts read off the compiled patterns."""
    from re import _parser

    ends = _final_chars(_parser.parse(tok._suffix.pattern, tok._suffix.flags))
    assert ends and ends <= tok._suffix_ends
    consumed = _chars(_parser.parse(tok._infix.pattern, tok._infix.flags))
    assert "," in consumed and consumed <= tok._infix_chars
    # and on real chunks, against the searches they skip
    wiki = data_file("lm/wikitext-2/test.txt").read_text(encoding="utf-8")
    chunks = {c for t in [*article_texts(), wiki] for c in t.split() if len(c) <= MAX_CHUNK}
    for c in chunks:
        w = max(0, len(c) - 8)
        if tok._suffix.search(c, w) is None:
            assert tok._suffix_len(c) == 0, c
        else:
            assert tok._suffix_len(c) > 0, c
        if tok._infix_chars.isdisjoint(c):
            assert next(tok._infix.finditer(c), None) is None, c


def test_ngram_reach_bound_in_numpy_matches_the_loop():
    """The characters the longer repeated-n-gram rules could still count, in numpy (many
    positions), against the loop over positions it stands in for."""
    import numpy as np

    from pretrain.curate import ngrams

    rng = random.Random(11)
    for _ in range(300):
        n_words = rng.randint(12, 400)
        cum = np.concatenate(([0], np.cumsum([rng.randint(1, 12) for _ in range(n_words)])))
        pos = sorted(rng.sample(range(n_words - 5), rng.randint(1, min(200, n_words - 5))))
        first = [p if rng.random() < 0.3 else rng.choice(pos) for p in pos]
        width = rng.randint(1, 12)
        covered, end = 0, -1  # the loop: each later occurrence's window, cut where the last ended
        for p, f in zip(pos, first):
            if p == f:
                continue
            a, b = max(p, end), min(p + width, n_words)
            if b > a:
                covered += int(cum[b] - cum[a])
                end = b
        assert ngrams._covered(np.array(pos), np.array(first), cum, width, n_words) == covered
