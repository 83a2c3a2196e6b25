"""The value and threshold a reject carries: the quantity behind the rule's own verdict, on
documents whose quantity is known by construction."""

from __future__ import annotations

import pytest

from pretrain.curate.document import Document
from pretrain.curate.rule_values import measure
from pretrain.curate.rules import (
    FineWebQualityFilter,
    GopherQualityFilter,
    GopherRepetitionFilter,
    RulesConfig,
)

SENTENCE = "The quick brown fox jumps over the lazy dog and runs into the forest."


def _verdict(step, text: str) -> tuple[object, dict]:
    doc = Document("d", text)
    reason = step.keep(doc)
    return reason, measure(step, doc, reason)


def test_short_document_counts_its_words():
    reason, m = _verdict(GopherQualityFilter(RulesConfig()), "one two three four five six seven")
    assert reason == "gopher_short_doc" and m == {"value": 7, "threshold": 50}


def test_hashes_per_word():
    text = " ".join(["alpha beta gamma #"] * 25)  # 100 words (a lone "#" is one), 25 hashes
    reason, m = _verdict(GopherQualityFilter(RulesConfig()), text)
    assert reason == "gopher_too_many_hashes" and m == {"value": 0.25, "threshold": 0.1}


def test_duplicated_paragraphs():
    text = "\n\n".join([SENTENCE] * 3 + ["A different closing paragraph about rivers and the sea."])
    reason, m = _verdict(GopherRepetitionFilter(RulesConfig()), text)
    assert reason == "dup_para_frac" and m == {"value": 0.5, "threshold": 0.3}  # 2 repeats of 4


def test_fineweb_lines_without_terminal_punctuation():
    lines = [f"a line of text without an end number {i}" for i in range(9)] + [SENTENCE]
    reason, m = _verdict(FineWebQualityFilter(RulesConfig()), "\n".join(lines))
    assert reason == "line_punct_ratio" and m == {"value": 0.1, "threshold": 0.12}  # 1 of 10 lines


@pytest.mark.parametrize("reason", ["top_2_gram", "duplicated_5_n_grams"])
def test_ngram_rules_give_their_threshold(reason):
    m = measure(GopherRepetitionFilter(RulesConfig()), Document("d", "x"), reason)
    assert m == {"value": None, "threshold": {"top_2_gram": 0.2, "duplicated_5_n_grams": 0.15}[reason]}
