"""Golden documents: each rule's drop reason exactly at and just around its threshold.

Documents are built from plain lowercase words so both splitters see the same words, and sized so
that the rule's ratio lands exactly on the threshold (kept: the comparisons are strict) or one
step past it (dropped). Thresholds are datatrove's defaults (../shared/reference/quality_rules.md).
"""

from __future__ import annotations

import itertools

import pytest

from pretrain.curate.document import Document
from pretrain.curate.rules import (
    C4QualityFilter,
    FineWebQualityFilter,
    GopherQualityFilter,
    GopherRepetitionFilter,
    RulesConfig,
    build_rule_steps,
)
from pretrain.errors import UserError

BOTH = ("datatrove-0.10", "fineweb-2024")


def verdict(cls, text: str, profile: str = "datatrove-0.10", **kw) -> bool | str:
    f = cls(RulesConfig(profile=profile, **kw))
    doc = Document("d", text)
    return f.rewrite(doc) if cls is C4QualityFilter else f.keep(doc)


def uniq(n: int, length: int = 4) -> list[str]:
    """n distinct lowercase words of `length` letters (no stop words among them)."""
    letters = "bcdfghjklmnpqrsvwxz"
    return ["".join(p) for p, _ in zip(itertools.product(letters, repeat=length), range(n))]


GOOD = ["the", "and"]  # two distinct stop words


# --- Gopher quality ------------------------------------------------------------------------------


@pytest.mark.parametrize("profile", BOTH)
def test_short_doc_at_50_words(profile):
    assert verdict(GopherQualityFilter, " ".join(GOOD + uniq(47)), profile) == "gopher_short_doc"
    assert verdict(GopherQualityFilter, " ".join(GOOD + uniq(48)), profile) is True


def test_long_doc_over_100000_words():
    words = GOOD + uniq(100_000 - 2, 5)
    assert verdict(GopherQualityFilter, " ".join(words)) is True
    assert verdict(GopherQualityFilter, " ".join(words + ["zzzzz"])) == "gopher_long_doc"


@pytest.mark.parametrize("profile", BOTH)
def test_mean_word_length_bounds(profile):
    # mean exactly 3 and exactly 10 are kept; below 3 / above 10 are dropped.
    assert verdict(GopherQualityFilter, " ".join(GOOD + uniq(48, 3)), profile) is True
    assert (
        verdict(GopherQualityFilter, " ".join(GOOD + uniq(47, 3) + ["bc"]), profile)
        == "gopher_below_avg_threshold"
    )
    ten = GOOD + uniq(46, 10) + uniq(2, 17)  # (6 + 460 + 34) / 50 = 10
    assert verdict(GopherQualityFilter, " ".join(ten), profile) is True
    assert (
        verdict(GopherQualityFilter, " ".join(ten[:-1] + ["b" * 18]), profile) == "gopher_above_avg_threshold"
    )


@pytest.mark.parametrize("profile", BOTH)
@pytest.mark.parametrize(
    "mark,reason", [("#", "gopher_too_many_hashes"), ("...", "gopher_too_many_ellipsis")]
)
def test_symbol_to_word_ratio(profile, mark, reason):
    base = GOOD + uniq(52)
    # 6 marks over 60 words is exactly 0.1: kept; 7 over 61 is dropped.
    assert verdict(GopherQualityFilter, " ".join([mark] * 6 + base), profile) is True
    assert verdict(GopherQualityFilter, " ".join([mark] * 7 + base), profile) == reason


@pytest.mark.parametrize("profile", BOTH)
def test_bullet_lines(profile):
    line = " ".join(GOOD + uniq(6))
    nine = "\n".join(["- " + line] * 9 + [line])
    assert verdict(GopherQualityFilter, nine, profile) is True  # 0.9 is not > 0.9
    assert (
        verdict(GopherQualityFilter, "\n".join(["\u2022 " + line] * 10), profile) == "gopher_too_many_bullets"
    )


@pytest.mark.parametrize("profile", BOTH)
def test_end_ellipsis_lines(profile):
    line = " ".join(GOOD + uniq(8))
    three = "\n".join([line + "..."] * 3 + [line] * 7)
    assert verdict(GopherQualityFilter, three, profile) is True  # 0.3
    four = "\n".join([line + "\u2026"] * 4 + [line] * 6)
    assert verdict(GopherQualityFilter, four, profile) == "gopher_too_many_end_ellipsis"


@pytest.mark.parametrize("profile", BOTH)
def test_alpha_words(profile):
    base = GOOD + uniq(50)  # 52 words with letters
    assert verdict(GopherQualityFilter, " ".join(base + ["1234"] * 13), profile) is True  # 52/65 = 0.8
    assert (
        verdict(GopherQualityFilter, " ".join(base + ["1234"] * 14), profile)
        == "gopher_below_alpha_threshold"
    )


def test_stop_words_distinct_vs_occurrences():
    once_each = " ".join(["the"] + uniq(60))
    twice_same = " ".join(["the", "the"] + uniq(60))
    two_kinds = " ".join(["the", "of"] + uniq(60))
    # datatrove 0.10 counts distinct stop words; FineWeb's code counted occurrences.
    assert verdict(GopherQualityFilter, twice_same, "datatrove-0.10") == "gopher_enough_stop_words"
    assert verdict(GopherQualityFilter, twice_same, "fineweb-2024") is True
    for p in BOTH:
        assert verdict(GopherQualityFilter, once_each, p) == "gopher_enough_stop_words"
        assert verdict(GopherQualityFilter, two_kinds, p) is True
    # case-sensitive, as in datatrove
    assert verdict(GopherQualityFilter, " ".join(["The", "And"] + uniq(60))) == "gopher_enough_stop_words"


# --- Gopher repetition ---------------------------------------------------------------------------


def test_empty():
    assert verdict(GopherRepetitionFilter, "") == "empty"


@pytest.mark.parametrize("profile", BOTH)
def test_duplicate_paragraphs(profile):
    # fineweb-2024's splitlines() also sees the blank separator lines as duplicates: isolate paragraphs.
    iso = {"dup_line_frac": 0} if profile == "fineweb-2024" else {}
    long = [" ".join(uniq(300, 4)[i::6]) for i in range(6)]
    keep = "\n\n".join(sum((["bc df", x] for x in long[:4]), []) + long[4:])  # 3 duplicates / 10 = 0.3
    assert verdict(GopherRepetitionFilter, keep, profile, **iso) is True
    drop = "\n\n".join(sum((["bc df", x] for x in long[:5]), []) + long[5:])  # 4 / 11
    assert verdict(GopherRepetitionFilter, drop, profile, **iso) == "dup_para_frac"


@pytest.mark.parametrize("profile", BOTH)
def test_duplicate_paragraph_characters(profile):
    # fineweb-2024's splitlines() also sees the blank separator lines as duplicates: isolate paragraphs.
    iso = {"dup_line_frac": 0} if profile == "fineweb-2024" else {}
    words = uniq(200, 4)
    big = " ".join(words[:20])  # 99 characters, repeated once
    fill = [" ".join(words[20 + 3 * i : 23 + 3 * i]) for i in range(8)]  # 8 x 14
    text = "\n\n".join([big, big] + fill)
    dup = len(big)
    assert dup / len(text) > 0.2
    assert verdict(GopherRepetitionFilter, text, profile, **iso) == "dup_para_char_frac"
    padded = text + " " + " ".join(uniq(400, 5)[200:])
    assert dup / len(padded) <= 0.2
    assert verdict(GopherRepetitionFilter, padded, profile, **iso) is True


@pytest.mark.parametrize("profile", BOTH)
def test_duplicate_lines(profile):
    lines = [" ".join(uniq(300, 4)[i::6]) for i in range(6)]
    keep = "\n".join(sum((["bc df", x] for x in lines[:4]), []) + lines[4:])  # 3 / 10
    assert verdict(GopherRepetitionFilter, keep, profile) is True
    drop = "\n".join(sum((["bc df", x] for x in lines[:5]), []) + lines[5:])  # 4 / 11
    assert verdict(GopherRepetitionFilter, drop, profile) == "dup_line_frac"


def test_blank_lines_count_as_duplicates_only_in_fineweb_2024():
    text = "\n\n\n".join(" ".join(uniq(40, 4)[i::4]) for i in range(4))
    assert verdict(GopherRepetitionFilter, text, "datatrove-0.10") is True
    assert verdict(GopherRepetitionFilter, text, "fineweb-2024") == "dup_line_frac"


def _pad_to(text: str, total: int, word_len: int = 5) -> str:
    """Append distinct padding words so len(text) == total exactly."""
    pad, words = total - len(text), iter(uniq(5000, word_len))
    parts = []
    while pad > word_len + 1 + (word_len + 1):
        w = next(words)
        parts.append(w)
        pad -= len(w) + 1
    parts.append("z" * (pad - 1))
    return text + " " + " ".join(parts)


@pytest.mark.parametrize("profile", BOTH)
def test_top_2_gram(profile):
    base = " ".join(f"bc df {w}" for w in uniq(10, 3))  # "bc df" 10 times: 5 * 10 = 50 characters
    assert verdict(GopherRepetitionFilter, _pad_to(base, 250), profile) is True  # 50 / 250 = 0.2
    assert verdict(GopherRepetitionFilter, _pad_to(base, 249), profile) == "top_2_gram"


@pytest.mark.parametrize("profile", BOTH)
def test_duplicated_5_grams(profile):
    block = " ".join(uniq(30, 3))  # 30 words, 90 letters; repeated once -> 90 repeated characters
    text = block + " " + block
    only5 = {"dup_n_grams": ((5, 0.15),)}  # longer n-grams repeat too; look at the 5-gram rule alone
    assert verdict(GopherRepetitionFilter, _pad_to(text, 600, 6), profile, **only5) is True  # 90 / 600
    assert verdict(GopherRepetitionFilter, _pad_to(text, 599, 6), profile) == "duplicated_5_n_grams"


def test_overlapping_repeats_count_once():
    # 26 x "bcd": 22 5-grams. The scan adds the first, then hits at word 1 and jumps five at a time
    # (1, 6, 11, 16, 21): 5 hits x 15 characters = 75 of 103 (datatrove's find_all_duplicate).
    text = " ".join(["bcd"] * 26)
    for thr, expected in ((75 / 103 - 1e-9, "duplicated_5_n_grams"), (75 / 103, True)):
        f = GopherRepetitionFilter(RulesConfig(dup_line_frac=0, top_n_grams=(), dup_n_grams=((5, thr),)))
        assert f.keep(Document("d", text)) == expected


# --- C4 ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("profile", BOTH)
def test_c4_sentences_and_rewrite(profile):
    good = [f"this is line {w}." for w in uniq(5)]
    assert verdict(C4QualityFilter, "\n".join(good[:4]), profile) == "too_few_sentences"
    text = "\n".join(
        [
            "  " + good[0],
            "Menu",
            "Enable javascript please now.",
            "Read our privacy policy here.",
            "See [1] here too[edit].",
        ]
        + good[1:]
    )
    doc = Document("d", text)
    doc.cache["words:x"] = "stale"
    assert C4QualityFilter(RulesConfig(profile=profile)).rewrite(doc) is True
    assert doc.text == "\n".join([good[0], "See  here too."] + good[1:])
    assert doc.cache == {}  # text changed: the shared word split is gone


def test_c4_counts_sentences_within_lines():
    assert (
        verdict(C4QualityFilter, "One is here. Two is here. Three is here.\nFour is here. Five is here.")
        is True
    )
    assert (
        verdict(C4QualityFilter, "One is here. Two is here.\nFour is here. Five is here.")
        == "too_few_sentences"
    )


def test_c4_document_drops():
    good = "\n".join(f"this is line {w}." for w in uniq(6))
    assert verdict(C4QualityFilter, good + "\nLorem Ipsum dolor sit amet.") == "lorem_ipsum"
    assert verdict(C4QualityFilter, good + "\nvar x = {a: 1};") == "curly_bracket"
    assert verdict(C4QualityFilter, good + "\n{ x") is True  # a two-word line is dropped before the check


def test_c4_terminal_punctuation_option():
    text = "\n".join(f"this is line {w}" for w in uniq(6))
    assert verdict(C4QualityFilter, text) is True  # FineWeb ran C4 without this rule
    assert verdict(C4QualityFilter, text, c4_filter_no_terminal_punct=True) == "too_few_sentences"


# --- FineWeb -------------------------------------------------------------------------------------

LONG = [" ".join(uniq(400, 4)[8 * i : 8 * i + 8]) for i in range(50)]  # 39-character distinct lines


def test_line_punct_ratio_strict_vs_fineweb_v1():
    text = "\n".join([x + "." for x in LONG[:3]] + LONG[3:25])  # 3 / 25 = 0.12
    assert verdict(FineWebQualityFilter, text, "datatrove-0.10") is True
    assert verdict(FineWebQualityFilter, text, "fineweb-2024") == "line_punct_ratio"  # v1: <=
    two = "\n".join([x + "." for x in LONG[:2]] + LONG[2:25])
    for p in BOTH:
        assert verdict(FineWebQualityFilter, two, p) == "line_punct_ratio"


def test_quotes_end_a_line_only_in_fineweb_v1():
    text = "\n".join([x + '"' for x in LONG[:10]] + LONG[10:20])
    assert verdict(FineWebQualityFilter, text, "datatrove-0.10") == "line_punct_ratio"
    assert verdict(FineWebQualityFilter, text, "fineweb-2024") is True


def test_short_lines():
    short = [w + "." for w in uniq(67, 4)]
    text = "\n".join(short + [x + "." for x in LONG[:33]])  # 67 / 100
    assert verdict(FineWebQualityFilter, text, "datatrove-0.10") is True
    assert verdict(FineWebQualityFilter, text, "fineweb-2024") == "short_line_ratio"  # v1: >=
    more = "\n".join(short + ["bbbb."] + [x + "." for x in LONG[:33]])
    assert verdict(FineWebQualityFilter, more, "datatrove-0.10") == "short_line_ratio"


def test_char_dup_ratio():
    lines = [x + "." for x in LONG]
    text = "\n".join(lines + [lines[0]])
    dup, chars = len(lines[0]), len(text) - text.count("\n")
    assert dup / chars > 0.01
    assert verdict(FineWebQualityFilter, text) == "char_dup_ratio"
    assert verdict(FineWebQualityFilter, "\n".join(lines)) is True


def test_list_ratio_only_in_datatrove_0_10():
    # 40 lines of 3 words + a period: 4 words per line, 39 newlines / 160 words = 0.24 -> kept;
    # 40 lines of 2 words + a period: 39 / 120 = 0.325 -> list_ratio.
    words = uniq(120, 16)
    three = "\n".join(" ".join(words[3 * i : 3 * i + 3]) + "." for i in range(40))
    two = "\n".join(" ".join(words[2 * i : 2 * i + 2]) + "." for i in range(40))
    assert verdict(FineWebQualityFilter, three) is True
    assert verdict(FineWebQualityFilter, two) == "list_ratio"
    assert verdict(FineWebQualityFilter, two, "fineweb-2024") is True


def test_fineweb_empty():
    assert verdict(FineWebQualityFilter, "\n \n") == "empty"


# --- configuration -------------------------------------------------------------------------------


def test_chain_order_and_switches():
    names = [s.name for s in build_rule_steps(RulesConfig())]
    assert names == ["gopher_repetition", "gopher_quality", "c4_quality", "fineweb_quality"]
    assert [s.name for s in build_rule_steps(RulesConfig(c4_quality=False))] == [
        "gopher_repetition",
        "gopher_quality",
        "fineweb_quality",
    ]
    with pytest.raises(UserError):
        RulesConfig(profile="fineweb-2025")


def test_zero_threshold_disables_rule():
    text = " ".join(GOOD + uniq(47))
    assert verdict(GopherQualityFilter, text, min_doc_words=0) is True


def test_config_from_toml_overrides():
    from pretrain.config import from_dict

    cfg = from_dict(RulesConfig, {"profile": "fineweb-2024", "top_n_grams": [[2, 0.01]], "min_stop_words": 3})
    text = " ".join(GOOD + ["of"] + uniq(60))
    assert GopherRepetitionFilter(cfg).keep(Document("d", text)) == "top_2_gram"
    assert GopherQualityFilter(cfg).keep(Document("d", text)) is True  # 3 stop-word occurrences
    cfg.min_stop_words = 4
    assert GopherQualityFilter(cfg).keep(Document("d", text)) == "gopher_enough_stop_words"
