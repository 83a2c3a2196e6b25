"""The heuristic quality rules of the belt: Gopher repetition, Gopher quality, C4, FineWeb.

Definitions and thresholds are datatrove's (huggingface/datatrove), which FineWeb ran in this order
(`examples/fineweb.py`): Gopher repetition -> Gopher quality -> C4 quality -> FineWeb quality.
Sources: Gopher = Rae et al. 2021, "Scaling Language Models", Table A1 and section A.1.1;
C4 = Raffel et al. 2020, section 2.2; FineWeb = Penedo et al. 2024, section 3.

Two profiles pin down the details that changed between datatrove versions:

- ``"datatrove-0.10"`` (current): spaCy ``blank("en")`` words, stop words counted once each,
  repetition lines by ``re.split("\\n+")``, FineWeb's 159 Unicode terminal marks over non-empty
  lines with strict comparisons, and the ``list_ratio`` rule.
- ``"fineweb-2024"`` (as FineWeb was built): NLTK ``word_tokenize`` words, stop-word
  *occurrences*, repetition lines by ``splitlines()`` (repeated blank lines count), FineWeb v1's
  stop characters ``. ' " ! ?`` over all lines with ``<=`` / ``>=`` comparisons, no ``list_ratio``.

A document is split into words once per profile; the words live in ``doc.cache`` and every rule
reuses them. C4's rule rewrites the text (it drops lines), so it is a step of its own that clears
``doc.cache`` when the text changes. Drop reasons are datatrove's identifiers, listed in `REASONS`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from pretrain.config import bounded
from pretrain.curate.document import Document
from pretrain.curate.ngrams import ngram_verdict
from pretrain.curate.step import Filter, Step
from pretrain.curate.words import (
    nltk_sentence_count,
    nltk_words,
    spacy_sentence_count,
    spacy_word_count,
    spacy_words,
)
from pretrain.errors import UserError

PROFILES = ("datatrove-0.10", "fineweb-2024")

# Every drop reason, stable across versions (the same strings datatrove writes).
REASONS: dict[str, str] = {
    "empty": "no text (Gopher repetition) or no non-empty line (FineWeb)",
    "dup_para_frac": "duplicate paragraphs / paragraphs > 0.3",
    "dup_para_char_frac": "characters in duplicate paragraphs / characters > 0.2",
    "dup_line_frac": "duplicate lines / lines > 0.3",
    "dup_line_char_frac": "characters in duplicate lines / characters > 0.2",
    **{
        f"top_{n}_gram": f"characters of the most frequent word {n}-gram / characters > threshold"
        for n in (2, 3, 4)
    },
    **{
        f"duplicated_{n}_n_grams": f"characters in repeated word {n}-grams / characters > threshold"
        for n in range(5, 11)
    },
    "gopher_short_doc": "fewer than 50 words that are not only punctuation",
    "gopher_long_doc": "more than 100,000 words that are not only punctuation",
    "gopher_below_avg_threshold": "mean word length < 3",
    "gopher_above_avg_threshold": "mean word length > 10",
    "gopher_too_many_hashes": "'#' per word > 0.1",
    "gopher_too_many_ellipsis": "ellipses per word > 0.1",
    "gopher_too_many_bullets": "lines starting with a bullet > 0.9",
    "gopher_too_many_end_ellipsis": "lines ending with an ellipsis > 0.3",
    "gopher_below_alpha_threshold": "words with a letter / words < 0.8",
    "gopher_enough_stop_words": "fewer than 2 of the, be, to, of, and, that, have, with",
    "lorem_ipsum": "C4: a kept line contains 'lorem ipsum'",
    "curly_bracket": "C4: a kept line contains '{'",
    "too_few_sentences": "C4: fewer than 5 sentences in the kept lines",
    "line_punct_ratio": "FineWeb: lines ending in terminal punctuation / lines < 0.12",
    "short_line_ratio": "FineWeb: lines of <= 30 characters / lines > 0.67",
    "char_dup_ratio": "FineWeb: characters in duplicate lines / non-newline characters > 0.01",
    "list_ratio": "FineWeb (datatrove 0.10): newlines / words > 0.3",
}

GOPHER_STOP_WORDS = ("the", "be", "to", "of", "and", "that", "have", "with")


# Upper bounds of counts and lengths: a record is at most reader.max_record_bytes (8 MiB) of text, so
# no page has 10**7 words; a "word" above 10**5 characters is a blob, not a word length to filter on.
MAX_WORDS = 10_000_000
WORDS_WHY = "a count of words, lines or sentences of one page; 0 turns the rule off"
MAX_WORD_CHARS = 100_000
WORD_LEN_WHY = "characters of a word; 0 turns the rule off"
SYMBOLS_WHY = "# or ellipses per word (Gopher: 0.1); above 1 it keeps pages of more symbols than words"
NEWLINES_WHY = "newlines per word (FineWeb: 0.3); above 1 it keeps pages of more lines than words"


@dataclass
class RulesConfig:
    """Which rule families run, under which profile, with which thresholds.

    Defaults are datatrove's, except `c4_filter_no_terminal_punct`, which is False as in FineWeb's
    pipeline (datatrove's own default is True). A threshold of 0 disables its rule, as in datatrove.
    """

    profile: str = "datatrove-0.10"
    gopher_repetition: bool = True
    gopher_quality: bool = True
    c4_quality: bool = True
    fineweb_quality: bool = True
    # Gopher repetition (Gopher Table A1)
    dup_line_frac: float = bounded(0.3, hi=1, why="a share of lines; 0 turns the rule off")
    dup_para_frac: float = bounded(0.3, hi=1, why="a share of paragraphs; 0 turns the rule off")
    dup_line_char_frac: float = bounded(0.2, hi=1, why="a share of characters; 0 turns the rule off")
    dup_para_char_frac: float = bounded(0.2, hi=1, why="a share of characters; 0 turns the rule off")
    top_n_grams: tuple[tuple[int, float], ...] = ((2, 0.2), (3, 0.18), (4, 0.16))
    dup_n_grams: tuple[tuple[int, float], ...] = (
        (5, 0.15),
        (6, 0.14),
        (7, 0.13),
        (8, 0.12),
        (9, 0.11),
        (10, 0.10),
    )
    # Gopher quality (Gopher section A.1.1)
    min_doc_words: int = bounded(50, hi=MAX_WORDS, why=WORDS_WHY)
    max_doc_words: int = bounded(100_000, hi=MAX_WORDS, why=WORDS_WHY)
    min_avg_word_length: float = bounded(3.0, hi=MAX_WORD_CHARS, why=WORD_LEN_WHY)
    max_avg_word_length: float = bounded(10.0, hi=MAX_WORD_CHARS, why=WORD_LEN_WHY)
    max_symbol_word_ratio: float = bounded(0.1, hi=1, why=SYMBOLS_WHY)
    max_bullet_lines_ratio: float = bounded(0.9, hi=1, why="a share of lines")
    max_ellipsis_lines_ratio: float = bounded(0.3, hi=1, why="a share of lines")
    max_non_alpha_words_ratio: float = bounded(0.8, hi=1, why="a share of words")
    min_stop_words: int = bounded(2, hi=MAX_WORDS, why=WORDS_WHY)
    stop_words: tuple[str, ...] = GOPHER_STOP_WORDS
    # C4 (Raffel et al. 2020, section 2.2; datatrove's C4QualityFilter)
    c4_remove_citations: bool = True
    c4_filter_no_terminal_punct: bool = False
    c4_min_num_sentences: int = bounded(5, hi=MAX_WORDS, why=WORDS_WHY)
    c4_min_words_per_line: int = bounded(3, hi=MAX_WORDS, why=WORDS_WHY)
    c4_max_word_length: int = bounded(1000, hi=MAX_WORD_CHARS, why=WORD_LEN_WHY)
    c4_filter_lorem_ipsum: bool = True
    c4_filter_javascript: bool = True
    c4_filter_curly_bracket: bool = True
    c4_filter_policy: bool = True
    # FineWeb (Penedo et al. 2024)
    line_punct_thr: float = bounded(0.12, hi=1, why="a share of lines")
    line_punct_exclude_zero: bool = False
    short_line_thr: float = bounded(0.67, hi=1, why="a share of lines")
    short_line_length: int = bounded(30, hi=MAX_WORD_CHARS, why="characters of a line")
    char_duplicates_ratio: float = bounded(0.01, hi=1, why="a share of characters")
    new_line_ratio: float = bounded(0.3, hi=1, why=NEWLINES_WHY)

    def __post_init__(self) -> None:
        if self.profile not in PROFILES:
            raise UserError(f"rules.profile must be one of {', '.join(PROFILES)}, got {self.profile!r}")
        for key, pairs in (("top_n_grams", self.top_n_grams), ("dup_n_grams", self.dup_n_grams)):
            for pair in pairs:  # (n, share of characters): an n of 0 or 10**6 counted nothing, for hours
                ok = (isinstance(pair, (list, tuple)) and len(pair) == 2 and _is_int(pair[0])
                      and 1 <= pair[0] <= 100 and _is_share(pair[1]))
                if not ok:
                    raise UserError(f"rules.{key}: each pair is [n, share] with 1 <= n <= 100 and "
                                    f"share in [0, 1], got {pair!r}")
        # a minimum above its maximum (0 turns either off) drops every document
        for lo, hi in (("min_doc_words", "max_doc_words"), ("min_avg_word_length", "max_avg_word_length")):
            if getattr(self, lo) and getattr(self, hi) and getattr(self, lo) > getattr(self, hi):
                raise UserError(f"rules.{lo}={getattr(self, lo)} is above rules.{hi}={getattr(self, hi)}: "
                                "every document would be dropped")


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_share(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x <= 1


# --- words, split once per document and profile ------------------------------------------------

_SPLITTERS: dict[str, Callable[[str], list[str]]] = {
    "datatrove-0.10": spacy_words,
    "fineweb-2024": nltk_words,
}


class Words:
    """A document's words under one profile, with the arrays every rule derives from them."""

    __slots__ = ("words", "first", "_ids", "_info", "_counts")

    def __init__(self, words: list[str]) -> None:
        self.words = words
        # word -> index of its first occurrence: a dense-enough integer id per distinct word.
        self.first: dict[str, int] = {}
        self._ids: np.ndarray | None = None
        self._info: np.ndarray | None = None
        self._counts: np.ndarray | None = None

    @property
    def ids(self) -> np.ndarray:
        if self._ids is None:
            first = self.first
            n = len(self.words)
            self._ids = np.fromiter(map(first.setdefault, self.words, range(n)), np.int64, n)
        return self._ids

    def distinct(self) -> dict[str, int]:
        """word -> index of its first occurrence (its id)."""
        if self._ids is None:
            _ = self.ids  # fills self.first
        return self.first

    @property
    def counts(self) -> np.ndarray:
        """Occurrences of each distinct word, at the index of its first occurrence."""
        if self._counts is None:
            self._counts = np.bincount(self.ids, minlength=len(self.words))
        return self._counts

    @property
    def lens(self) -> np.ndarray:
        return self.info >> 2

    @property
    def info(self) -> np.ndarray:
        """Per word: length << 2 | (has a letter) << 1 | (not only punctuation); one lookup each."""
        if self._info is None:
            self._info = np.fromiter(map(_WORD_INFO.__getitem__, self.words), np.int64, len(self.words))
        return self._info


class _WordInfo(dict):
    """word -> len(word) << 2 | has a letter << 1 | not only punctuation; filled on first sight,
    bounded (holds only strings and ints)."""

    def __missing__(self, word: str) -> int:
        if len(self) > 200_000:
            self.clear()
        if word.isalpha():  # most words; no letter is in PUNCTUATION_SET
            info = self[word] = len(word) << 2 | 3
            return info
        nonsym = not PUNCTUATION_SET.issuperset(word)
        info = self[word] = len(word) << 2 | any(c.isalpha() for c in word) << 1 | nonsym
        return info


_WORD_INFO = _WordInfo()


def words_of(doc: Document, profile: str) -> Words:
    """The document's words for `profile`, computed once and kept in `doc.cache`."""
    key = "words:" + profile
    w = doc.cache.get(key)
    if w is None:
        w = doc.cache[key] = Words(_SPLITTERS[profile](doc.text))
    return w


def word_count(doc: Document, profile: str) -> int:
    """Number of words; spaCy-style words are counted from the chunk cache without building the list."""
    w = doc.cache.get("words:" + profile)
    if w is not None:
        return len(w.words)
    if profile == "datatrove-0.10":
        return spacy_word_count(doc.text)
    return len(words_of(doc, profile).words)


def newline_runs_split(text: str) -> list[str]:
    """re.split(r"\n+", text) (datatrove 0.10's lines), by str.split: ~4x faster on web pages."""
    if not text:
        return [""]
    lines = [x for x in text.split("\n") if x]
    if text.startswith("\n"):  # re.split keeps an empty first and last piece
        lines.insert(0, "")
    if text.endswith("\n"):
        lines.append("")
    return lines


def dup_counts(items: list[str]) -> tuple[int, int]:
    """(number, characters) of the 2nd and later occurrences of each item (datatrove's find_duplicates)."""
    uniq = set(items)
    return len(items) - len(uniq), sum(map(len, items)) - sum(map(len, uniq))


# --- Gopher repetition -------------------------------------------------------------------------

_PARAGRAPHS = re.compile(r"\n{2,}")


class GopherRepetitionFilter(Filter):
    """Repeated paragraphs, lines and word n-grams (Gopher Table A1). Denominator: len(text)."""

    name = "gopher_repetition"

    def __init__(self, cfg: RulesConfig) -> None:
        super().__init__()
        self.cfg = cfg

    def keep(self, doc: Document) -> bool | str:
        cfg, text = self.cfg, doc.text
        if not text:
            return "empty"
        n_chars = len(text)
        stripped = text.strip()
        if "\n\n" not in stripped:
            paragraphs = [stripped]
        elif "\n\n\n" not in stripped:  # every gap is exactly two newlines: a plain split (faster)
            paragraphs = stripped.split("\n\n")
        else:
            paragraphs = _PARAGRAPHS.split(stripped)
        dup, chars = dup_counts(paragraphs)
        if cfg.dup_para_frac and dup / len(paragraphs) > cfg.dup_para_frac:
            return "dup_para_frac"
        if cfg.dup_para_char_frac and chars / n_chars > cfg.dup_para_char_frac:
            return "dup_para_char_frac"
        lines = text.splitlines() if cfg.profile == "fineweb-2024" else newline_runs_split(text)
        dup, chars = dup_counts(lines)
        if lines and cfg.dup_line_frac and dup / len(lines) > cfg.dup_line_frac:
            return "dup_line_frac"
        if cfg.dup_line_char_frac and chars / n_chars > cfg.dup_line_char_frac:
            return "dup_line_char_frac"
        return self._ngrams(words_of(doc, cfg.profile), n_chars)

    def _ngrams(self, w: Words, n_chars: int) -> bool | str:
        top = {int(n): float(t) for n, t in self.cfg.top_n_grams}
        dup = {int(n): float(t) for n, t in self.cfg.dup_n_grams}
        if len(w.words) < 2:
            return True
        return ngram_verdict(w.ids, w.counts, w.lens, n_chars, top, dup)


# --- Gopher quality ----------------------------------------------------------------------------

# datatrove.utils.text.PUNCTUATION_SET: ASCII/CJK punctuation, control characters and the
# terminal marks below; a word made only of these is a "symbol" word.
_PUNCTUATION = (
    "!/—”:％１〈&(、━\\【#%「」，】；+^]~“《„';’{|∶´[=-`*．（–？！：$～«〉,><》)?）。…@_.\"}►»"
    + "".join(chr(x) for a, b in ((0, 9), (11, 13), (13, 32), (127, 160)) for x in range(a, b))
)
# datatrove.utils.text.TERMINAL_PUNCTUATION: Unicode sentence terminators (no quotes, no "…").
TERMINAL_PUNCTUATION = frozenset(
    "᪩？⁈𑩂．꩞𑅃﹗𑂾\u1b7d፧𑅂꡶꘎⁉࠾᪨𑊩𑱂᱿𖩮᥅\U00011f43\U00011f44﹒𑈹𑈸።܂؞꛳\U00010f88𑗍𐩖𑙂\u061d꩟᠉\u1b7e𑗗᰼𑻸؟𑪜"
    "꧉𑗉𐽙𖫵𖬷܀꓿᜵𑗏𑁇𑗓𑥄៖𑥆𑗑𑗒꯫۔𐩗\U00010f86꡷\u2e54｡៕߹⸮.𑇅࠹𛲟꫰꤯𐽗᭞𑜼፨𑃁꣏𑇟𖬸𑪛𑜾࠷𝪈?𑃀𑗃！։꣎॥𑗖᭛"
    "᠃!၊𖺘⁇𑗌𑑋𖭄᭟𑅁𑙁⸼꩝𑗋。꧈꫱𑜽𐽖𑂿᙮។꛷\U00010f89៚᥄𑗕𑗎᪪᭚࠽𑇞𑗊𐽘\u2e53𑗔𖩯𑇍𑻷𐽕𑩃।𑗂𑇆𑁈။᱾𑱁꘏܁᜶‼𑈻‽᪫﹖"
    "𑑌𑈼\U00010f87𑗐៙᰻"
)
PUNCTUATION_SET = frozenset(_PUNCTUATION) | TERMINAL_PUNCTUATION


# Per distinct word, bounded; holds only strings and small ints.
# Bit 0: not only punctuation; bit 1: has a letter.
class GopherQualityFilter(Filter):
    """Length, symbol, bullet, ellipsis, alphabetic and stop-word rules (Gopher section A.1.1)."""

    name = "gopher_quality"

    def __init__(self, cfg: RulesConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.stop_words = frozenset(cfg.stop_words)

    def keep(self, doc: Document) -> bool | str:
        cfg, text = self.cfg, doc.text
        w = words_of(doc, cfg.profile)
        n_words = len(w.words)
        flags = w.info & 3
        content = (flags & 1).astype(bool)
        n_content = int(content.sum())
        if cfg.min_doc_words and n_content < cfg.min_doc_words:
            return "gopher_short_doc"
        if cfg.max_doc_words and n_content > cfg.max_doc_words:
            return "gopher_long_doc"
        if n_content:
            mean_len = float(w.lens[content].sum()) / n_content
            if cfg.min_avg_word_length and mean_len < cfg.min_avg_word_length:
                return "gopher_below_avg_threshold"
            if cfg.max_avg_word_length and mean_len > cfg.max_avg_word_length:
                return "gopher_above_avg_threshold"
        if n_words and cfg.max_symbol_word_ratio:
            if text.count("#") / n_words > cfg.max_symbol_word_ratio:
                return "gopher_too_many_hashes"
            if (text.count("...") + text.count("…")) / n_words > cfg.max_symbol_word_ratio:
                return "gopher_too_many_ellipsis"
        verdict = self._lines(text)
        if verdict is not True:
            return verdict
        if n_words and cfg.max_non_alpha_words_ratio:
            if int(np.count_nonzero(flags & 2)) / n_words < cfg.max_non_alpha_words_ratio:
                return "gopher_below_alpha_threshold"
        if cfg.min_stop_words and self._stop_words(w) < cfg.min_stop_words:
            return "gopher_enough_stop_words"
        return True

    def _lines(self, text: str) -> bool | str:
        cfg = self.cfg
        lines = text.splitlines()
        if not lines:
            return True
        # Each marked line holds at least one mark, so the marks in the whole text bound the share
        # of marked lines (float division is monotonic): below the threshold, skip the line scan.
        n_marks = text.count("-") + text.count("•")
        if cfg.max_bullet_lines_ratio and n_marks / len(lines) > cfg.max_bullet_lines_ratio:
            bullets = sum(1 for s in lines if s.lstrip().startswith(("•", "-")))
            if bullets / len(lines) > cfg.max_bullet_lines_ratio:
                return "gopher_too_many_bullets"
        n_ellipsis = text.count("...") + text.count("…")
        if cfg.max_ellipsis_lines_ratio and n_ellipsis / len(lines) > cfg.max_ellipsis_lines_ratio:
            ends = sum(1 for s in lines if s.rstrip().endswith(("...", "…")))
            if ends / len(lines) > cfg.max_ellipsis_lines_ratio:
                return "gopher_too_many_end_ellipsis"
        return True

    def _stop_words(self, w: Words) -> int:
        first = w.distinct()
        present = self.stop_words.intersection(first)
        if self.cfg.profile == "fineweb-2024":
            return int(sum(w.counts[first[s]] for s in present))  # FineWeb counted occurrences
        return len(present)  # datatrove 0.10 counts distinct stop words


# --- C4 -----------------------------------------------------------------------------------------

_CITATION = re.compile(r"\[\d*]|\[edit]|\[citation needed]")
_END_PUNCT = (".", "?", "!", '"', "'")
_POLICY = ("terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies", "use cookies")
_POLICY_RE = re.compile("|".join(map(re.escape, _POLICY)))  # one scan instead of six `in` tests


class C4QualityFilter(Step):
    """C4's line rules (Raffel et al. 2020, section 2.2, as datatrove implements them).

    A modifier: lines are dropped and the kept ones joined with "\\n"; the document is dropped for
    lorem ipsum, a curly bracket, or fewer than `c4_min_num_sentences` sentences.
    """

    name = "c4_quality"

    def __init__(self, cfg: RulesConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.count_sentences = nltk_sentence_count if cfg.profile == "fineweb-2024" else spacy_sentence_count

    def process(self, doc: Document) -> Document | None:
        verdict = self.rewrite(doc)
        if verdict is True:
            return doc
        self.drop(doc, verdict)
        return None

    def rewrite(self, doc: Document) -> bool | str:
        """Apply the rules; on keep, replace `doc.text` with the kept lines (clearing `doc.cache`)."""
        cfg, kept, sentences = self.cfg, [], 0
        limit, min_words = cfg.c4_max_word_length, cfg.c4_min_words_per_line
        for line in doc.text.splitlines():
            line = line.strip()
            if limit != -1 and len(line) > limit and max(map(len, line.split()), default=0) > limit:
                continue
            # Fewer than `min_words` words (counted before citations go, as datatrove does): at
            # most min_words - 1 splits answer that without splitting the whole line.
            if min_words > 0 and len(line.split(None, min_words - 1)) < min_words:
                continue
            if cfg.c4_remove_citations and "[" in line:
                line = _CITATION.sub("", line)
            if cfg.c4_filter_no_terminal_punct and (not line.endswith(_END_PUNCT) or line.endswith("...")):
                continue
            lower = line.lower()
            if cfg.c4_filter_lorem_ipsum and "lorem ipsum" in lower:
                return "lorem_ipsum"
            if cfg.c4_filter_javascript and "javascript" in lower:
                continue
            if cfg.c4_filter_curly_bracket and "{" in line:
                return "curly_bracket"
            if cfg.c4_filter_policy and _POLICY_RE.search(lower):
                continue
            # Only `sentences < minimum` matters: once reached, the rest need not be counted.
            if cfg.c4_min_num_sentences != -1 and sentences < cfg.c4_min_num_sentences:
                sentences += self.count_sentences(line)
            kept.append(line)
        if sentences < cfg.c4_min_num_sentences:
            return "too_few_sentences"
        text = "\n".join(kept).strip()
        if text != doc.text:
            doc.text = text
            doc.cache.clear()
        return True


# --- FineWeb -----------------------------------------------------------------------------------

_FINEWEB_V1_STOP = (".", "'", '"', "!", "?")


class FineWebQualityFilter(Filter):
    """FineWeb's own rules: terminal punctuation, short lines, duplicated lines, list-like text."""

    name = "fineweb_quality"

    def __init__(self, cfg: RulesConfig) -> None:
        super().__init__()
        self.cfg = cfg

    def keep(self, doc: Document) -> bool | str:
        if self.cfg.profile == "fineweb-2024":
            return self._v1(doc.text)
        cfg, text = self.cfg, doc.text
        lines = [x for x in text.split("\n") if x.strip()]
        if not lines:
            return "empty"
        ratio = sum(1 for x in lines if x[-1] in TERMINAL_PUNCTUATION) / len(lines)  # all single marks
        if ratio < cfg.line_punct_thr and not (ratio == 0 and cfg.line_punct_exclude_zero):
            return "line_punct_ratio"
        if sum(1 for x in lines if len(x) <= cfg.short_line_length) / len(lines) > cfg.short_line_thr:
            return "short_line_ratio"
        if dup_counts(lines)[1] / max(1, len(text) - text.count("\n")) > cfg.char_duplicates_ratio:
            return "char_dup_ratio"
        n_words = word_count(doc, cfg.profile)
        if n_words and text.count("\n") / n_words > cfg.new_line_ratio:
            return "list_ratio"
        return True

    def _v1(self, text: str) -> bool | str:
        """FineWeb v1 (datatrove commit 2aa32d4d): all lines, v1 stop characters, <= and >=."""
        cfg, lines = self.cfg, text.split("\n")
        ratio = sum(1 for x in lines if x.endswith(_FINEWEB_V1_STOP)) / len(lines)
        if ratio <= cfg.line_punct_thr and not (ratio == 0 and cfg.line_punct_exclude_zero):
            return "line_punct_ratio"
        if sum(1 for x in lines if len(x) <= cfg.short_line_length) / len(lines) >= cfg.short_line_thr:
            return "short_line_ratio"
        non_empty = [x for x in lines if x.strip()]
        if dup_counts(non_empty)[1] / max(1, len(text) - text.count("\n")) >= cfg.char_duplicates_ratio:
            return "char_dup_ratio"
        return True


# --- the chain -----------------------------------------------------------------------------------


def build_rule_steps(cfg: RulesConfig) -> list[Step]:
    """The enabled rule families in FineWeb's order: repetition, quality, C4, FineWeb."""
    steps: list[Step] = []
    if cfg.gopher_repetition:
        steps.append(GopherRepetitionFilter(cfg))
    if cfg.gopher_quality:
        steps.append(GopherQualityFilter(cfg))
    if cfg.c4_quality:
        steps.append(C4QualityFilter(cfg))
    if cfg.fineweb_quality:
        steps.append(FineWebQualityFilter(cfg))
    return steps


def verdicts(docs: Sequence[Document], steps: list[Step]) -> list[tuple[str, str] | None]:
    """For each document, (step name, reason) of the first step that drops it, else None.

    Runs the chain one document at a time; handy for parity checks and re-tuning reports.
    """
    out: list[tuple[str, str] | None] = []
    for doc in docs:
        result = None
        for step in steps:
            if isinstance(step, Filter):
                v = step.keep(doc)
            elif isinstance(step, C4QualityFilter):
                v = step.rewrite(doc)
            else:
                v = True if step.process(doc) is not None else step.name
            if v is not True:
                result = (step.name, v if isinstance(v, str) else step.name)
                break
        out.append(result)
    return out
