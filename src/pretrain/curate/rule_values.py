"""What a quality rule measured on a document it dropped, and the threshold it failed.

The rules in rules.py answer only keep or a reason (their hot path stays as fast as it is); for
the few documents they drop, `measure(step, doc, reason)` computes the one quantity behind that
reason again, with the rule's own helpers and config, so a reject record (and the report) can say
"0.41 duplicated paragraphs, over 0.3" instead of a bare reason. Reasons without one number
(a curly bracket, lorem ipsum, the n-gram rules' combined verdict) get the threshold alone or
nothing.
"""

from __future__ import annotations

import numpy as np

from pretrain.curate.document import Document
from pretrain.curate.rules import (
    _FINEWEB_V1_STOP,
    _PARAGRAPHS,
    TERMINAL_PUNCTUATION,
    FineWebQualityFilter,
    GopherQualityFilter,
    GopherRepetitionFilter,
    dup_counts,
    newline_runs_split,
    word_count,
    words_of,
)


def measure(step, doc: Document, reason: str) -> dict:
    """{"value": ..., "threshold": ...} for a drop by one of the rule steps; {} if not one of them."""
    if isinstance(step, GopherQualityFilter):
        return _gopher_quality(step, doc, reason)
    if isinstance(step, GopherRepetitionFilter):
        return _gopher_repetition(step.cfg, doc.text, reason)
    if isinstance(step, FineWebQualityFilter):
        return _fineweb(step.cfg, doc, reason)
    return {}


def _out(value: float | None, threshold: float | None) -> dict:
    return {"value": None if value is None else round(float(value), 4), "threshold": threshold}


def _gopher_quality(step, doc: Document, reason: str) -> dict:
    cfg, text = step.cfg, doc.text
    w = words_of(doc, cfg.profile)
    n_words = len(w.words)
    content = ((w.info & 3) & 1).astype(bool)
    n_content = int(content.sum())
    mean_len = float(w.lens[content].sum()) / n_content if n_content else 0.0
    lines = text.splitlines() or [""]
    per_word = max(n_words, 1)
    ellipses = text.count("...") + text.count("…")
    bullets = sum(1 for s in lines if s.lstrip().startswith(("•", "-")))
    end_ellipses = sum(1 for s in lines if s.rstrip().endswith(("...", "…")))
    table = {
        "gopher_short_doc": (n_content, cfg.min_doc_words),
        "gopher_long_doc": (n_content, cfg.max_doc_words),
        "gopher_below_avg_threshold": (mean_len, cfg.min_avg_word_length),
        "gopher_above_avg_threshold": (mean_len, cfg.max_avg_word_length),
        "gopher_too_many_hashes": (text.count("#") / per_word, cfg.max_symbol_word_ratio),
        "gopher_too_many_ellipsis": (ellipses / per_word, cfg.max_symbol_word_ratio),
        "gopher_too_many_bullets": (bullets / len(lines), cfg.max_bullet_lines_ratio),
        "gopher_too_many_end_ellipsis": (end_ellipses / len(lines), cfg.max_ellipsis_lines_ratio),
        "gopher_below_alpha_threshold": (int(np.count_nonzero(w.info & 2)) / per_word,
                                         cfg.max_non_alpha_words_ratio),
        "gopher_enough_stop_words": (step._stop_words(w), cfg.min_stop_words),  # noqa: SLF001
    }
    return _out(*table[reason]) if reason in table else {}


def _gopher_repetition(cfg, text: str, reason: str) -> dict:
    if reason.startswith("dup_para"):
        stripped = text.strip()
        paragraphs = _PARAGRAPHS.split(stripped) if stripped else [""]
        dup, chars = dup_counts(paragraphs)
        if reason == "dup_para_frac":
            return _out(dup / len(paragraphs), cfg.dup_para_frac)
        return _out(chars / max(len(text), 1), cfg.dup_para_char_frac)
    if reason.startswith("dup_line"):
        lines = text.splitlines() if cfg.profile == "fineweb-2024" else newline_runs_split(text)
        dup, chars = dup_counts(lines)
        if reason == "dup_line_frac":
            return _out(dup / max(len(lines), 1), cfg.dup_line_frac)
        return _out(chars / max(len(text), 1), cfg.dup_line_char_frac)
    for kind, pairs in (("top_", cfg.top_n_grams), ("duplicated_", cfg.dup_n_grams)):
        for n, t in pairs:  # "top_2_gram", "duplicated_5_n_grams": the share is not kept by the rule
            if reason.startswith(f"{kind}{int(n)}_"):
                return _out(None, float(t))
    return {}


def _fineweb(cfg, doc: Document, reason: str) -> dict:
    text = doc.text
    v1 = cfg.profile == "fineweb-2024"
    lines = text.split("\n") if v1 else [x for x in text.split("\n") if x.strip()]
    n = max(len(lines), 1)
    if reason == "line_punct_ratio":
        ends = (sum(1 for x in lines if x.endswith(_FINEWEB_V1_STOP)) if v1
                else sum(1 for x in lines if x and x[-1] in TERMINAL_PUNCTUATION))
        return _out(ends / n, cfg.line_punct_thr)
    if reason == "short_line_ratio":
        return _out(sum(1 for x in lines if len(x) <= cfg.short_line_length) / n, cfg.short_line_thr)
    if reason == "char_dup_ratio":
        dup_lines = [x for x in lines if x.strip()]
        chars = max(1, len(text) - text.count("\n"))
        return _out(dup_counts(dup_lines)[1] / chars, cfg.char_duplicates_ratio)
    if reason == "list_ratio":
        return _out(text.count("\n") / max(word_count(doc, cfg.profile), 1), cfg.new_line_ratio)
    return {}
