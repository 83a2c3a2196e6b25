"""Naive Bayes quality classifier: train from files, save/load as JSON, score, and the belt's steps.

The lesson's formula (section 1c), a bag-of-words naive Bayes with add-one (Laplace) smoothing:

    score(doc) = sum over words w of doc:  log P(w | good) / P(w | bad)
    P(w | c)   = (count_c(w) + 1) / (N_c + V)

N_c is the number of words in class c's training text, V the number of distinct words over both
classes. As in the lesson, words never seen in training cast no vote (their vote would be the same
constant log((N_bad + V) / (N_good + V)) for every unseen word, i.e. a length penalty, not evidence).
There is no class prior term: the score is the log-likelihood ratio alone.
GPT-3 (Brown et al., 2020, appendix A) filtered Common Crawl with a linear classifier of this
kind, reference text (WebText, Wikipedia, books) against raw crawl.

A model file is JSON (never pickle): the counts, from which N_c, V and every vote follow.
The belt gets a Tagger `classifier` (metadata["quality_score"], and ["quality_score_per_word"])
and a Filter `classifier_filter` (drop reason `low_quality_score`).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pretrain.config import bounded, signed
from pretrain.curate.document import Document
from pretrain.curate.language import words
from pretrain.curate.step import Filter, Step, Tagger
from pretrain.errors import UserError, not_found
from pretrain.untrusted import printable

FORMAT = "pretrain.naive_bayes"
VERSION = 1
REASON = "low_quality_score"
# A model file larger than this is refused before it is read: loaded, a model holds ~16x its
# JSON bytes in Python objects (13.7 MB, a million words: 224 MB above the imports), so 32 MiB
# (~2.4 M distinct words) is ~550 MB. It was 2 GiB (~40 GB). `classifier.max_model_bytes` raises it.
MAX_MODEL_BYTES = 32 * 1024**2
MAX_VOTE = 44.0  # ln(2**63): one word's vote, add-one smoothed, never goes beyond
# A class's word count (N_c) in a model file: no training text holds 2**63 words. A count past
# it (JSON allows 4,300 digits) made P(w | c) underflow to 0.0: ZeroDivisionError or "math domain
# error" out of every command that loads the model, a traceback.
MAX_COUNT = 2**63 - 1


@dataclass
class ClassifierConfig:
    """`classifier` steps: off unless `model` names a file written by `pretrain classifier train`.

    Keep a document when its score >= `threshold`. With `per_word` (default) the threshold is on
    the mean vote per known word, which does not grow with the document's length; 0 means "leans
    towards the good set" either way.
    """

    model: str | None = None
    # a vote (a log-likelihood ratio, not a probability): below 0 leans towards the bad set. One word's
    # vote is at most ln(2**63) ~ 44 either way (add-one smoothed counts), so a per-word mean beyond it
    # keeps everything or nothing; a sum over a document (per_word=false) is not bounded by it.
    threshold: float = signed(0.0, why="a log-likelihood ratio: per word within -44 and 44")
    per_word: bool = True
    filter: bool = True  # False: only tag the score (annotate now, filter later)
    # a larger model file is refused unread
    max_model_bytes: int = bounded(MAX_MODEL_BYTES, lo=1, why="bytes")

    def __post_init__(self) -> None:
        if self.per_word and isinstance(self.threshold, float) and abs(self.threshold) > MAX_VOTE:
            raise UserError(f"classifier.threshold={self.threshold} with per_word: a mean vote lies within "
                            f"-{MAX_VOTE:g} and {MAX_VOTE:g}, so every document would be kept or dropped")


class NaiveBayes:
    """Word counts of the two classes and the per-word votes derived from them."""

    def __init__(self, good: Counter[str], bad: Counter[str], copy: bool = True):
        self.good, self.bad = (Counter(good), Counter(bad)) if copy else (good, bad)
        self.n_good = sum(self.good.values())
        self.n_bad = sum(self.bad.values())
        self.vocab_size = len(self.good.keys() | self.bad.keys())
        empty = [c for c, n in (("good", self.n_good), ("bad", self.n_bad)) if n == 0]
        if empty:
            raise UserError(f"classifier: the {' and the '.join(empty)} training text has no words "
                            "(a model needs words of both classes)")
        self.votes = {w: self.vote(w) for w in self.good.keys() | self.bad.keys()}

    def vote(self, word: str) -> float:
        """log P(w|good) / P(w|bad) with add-one smoothing (the lesson, section 1c)."""
        p_good = (self.good[word] + 1) / (self.n_good + self.vocab_size)
        p_bad = (self.bad[word] + 1) / (self.n_bad + self.vocab_size)
        return math.log(p_good / p_bad)

    def score_words(self, ws: Iterable[str]) -> tuple[float, int]:
        """(sum of votes, number of words that voted)."""
        votes = self.votes
        total, known = 0.0, 0
        for w in ws:
            v = votes.get(w)
            if v is not None:
                total += v
                known += 1
        return total, known

    def score(self, text: str) -> float:
        return self.score_words(words(text))[0]

    # ------------------------------------------------------------------------- training and files

    @classmethod
    def train(cls, good: Iterable[str], bad: Iterable[str], min_count: int = 1) -> NaiveBayes:
        """Count words of two streams of texts; words seen fewer than `min_count` times in all are dropped."""
        g, b = Counter(), Counter()
        for text in good:
            g.update(words(text))
        for text in bad:
            b.update(words(text))
        if min_count > 1:
            total = g + b
            rare = {w for w, c in total.items() if c < min_count}
            kept_g = Counter({w: c for w, c in g.items() if w not in rare})
            kept_b = Counter({w: c for w, c in b.items() if w not in rare})
            if (g and not kept_g) or (b and not kept_b):  # say why, not "no words"
                raise UserError(f"classifier: min_count={min_count} drops every word of a class "
                                f"(the most frequent word is seen {max(total.values())} times)")
            g, b = kept_g, kept_b
        return cls(g, b)

    def to_json(self) -> dict:
        return {
            "format": FORMAT,
            "version": VERSION,
            "n_good": self.n_good,
            "n_bad": self.n_bad,
            "vocab_size": self.vocab_size,
            "good": dict(sorted(self.good.items())),
            "bad": dict(sorted(self.bad.items())),
        }

    def save(self, path: str | Path) -> None:
        from pretrain.curate.io import write_bytes_atomic

        blob = json.dumps(self.to_json(), ensure_ascii=False, separators=(",", ":"))
        write_bytes_atomic(path, blob.encode())

    @classmethod
    def load(cls, path: str | Path, limit: int = MAX_MODEL_BYTES) -> NaiveBayes:
        """Read a model written by `save`; a wrong or damaged file is a UserError naming it. A file
        over `limit` bytes is refused before it is read, and only a regular file is read (a FIFO
        would block, `/dev/zero` grow), counted as it is read (`untrusted.read_text`)."""
        from pretrain.curate.io import local_only
        from pretrain.untrusted import check_file, read_text

        local_only(path, "classifier model")
        p = Path(path)
        if not p.exists():
            raise not_found("classifier model", p)
        size = check_file(p)
        if size > limit:
            raise UserError(f"{p}: {size:,} bytes is over the {limit:,} a classifier model may hold "
                            "(classifier.max_model_bytes, --max-model-bytes: loaded, a model takes ~16x)")
        text = read_text(p, limit)
        try:
            obj = json.loads(text)
            del text
        except (ValueError, RecursionError) as e:
            # ValueError: JSONDecodeError and integers past Python's 4300-digit limit; RecursionError:
            # arrays nested thousands deep. Either is a damaged (or hostile) file, not a crash.
            why = "nested too deeply" if isinstance(e, RecursionError) else str(e)
            raise UserError(f"{p}: not a classifier model (invalid JSON: {why})") from None
        if not isinstance(obj, dict) or obj.get("format") != FORMAT:
            raise UserError(f"{p}: not a classifier model (format is not {FORMAT!r})")
        version = obj.get("version")
        if not _is_int(version) or version != VERSION:  # JSON true would pass as 1
            raise UserError(f"{p}: classifier model version {json.dumps(version)}; we read {VERSION}")
        counts = [_counts(p, obj.pop(key, None), key) for key in ("good", "bad")]
        for key, c in zip(("good", "bad"), counts, strict=True):
            if sum(c.values()) > MAX_COUNT:
                raise UserError(f"{p}: damaged classifier model ({key!r} counts add up to "
                                f"{_digits(sum(c.values()))}, over 2**63-1 words)")
        model = cls(*counts, copy=False)  # one dict per class: the parsed ones
        totals = [obj.get(k) for k in ("n_good", "n_bad", "vocab_size")]
        if not all(map(_is_int, totals)) or totals != [model.n_good, model.n_bad, model.vocab_size]:
            raise UserError(f"{p}: damaged classifier model (totals do not match the counts)")
        return model


def _is_int(x: object) -> bool:
    """A JSON integer: Python's bool is an int (true == 1) and 2.0 == 2, neither is a count."""
    return type(x) is int


def _digits(n: int) -> str:
    return f"{n:,}" if n < 10**30 else f"a {len(str(n)):,}-digit number"


def _counts(path: Path, obj: object, key: str) -> Counter[str]:
    if not isinstance(obj, dict) or not all(_is_int(c) and c > 0 for c in obj.values()):
        raise UserError(f"{path}: damaged classifier model ({key!r} must map words to positive counts)")
    big = next((w for w, c in obj.items() if c > MAX_COUNT), None)
    if big is not None:
        raise UserError(f"{path}: damaged classifier model ({key!r} counts {printable(big[:60])!r} "
                        f"{_digits(obj[big])} times, over 2**63-1)")
    counts: Counter[str] = Counter()
    dict.update(counts, obj)  # a Counter without a second dict alive beside the parsed one
    return counts


# ----------------------------------------------------------------------------- the belt's steps


class ClassifierTagger(Tagger):
    name = "classifier"

    def __init__(self, model: NaiveBayes):
        super().__init__()
        self.model = model

    def tag(self, doc: Document) -> None:
        total, known = self.model.score_words(words(doc.text))
        doc.metadata["quality_score"] = round(total, 4)
        doc.metadata["quality_score_per_word"] = round(total / known, 4) if known else 0.0


class ClassifierFilter(Filter):
    name = "classifier_filter"

    def __init__(self, threshold: float, per_word: bool):
        super().__init__()
        self.threshold = threshold
        self.key = "quality_score_per_word" if per_word else "quality_score"

    def keep(self, doc: Document) -> bool | str:
        return True if doc.metadata[self.key] >= self.threshold else REASON


def build_classifier_steps(cfg: ClassifierConfig) -> list[Step]:
    """[] when no model is configured; else the tagger, then (unless `filter` is off) the filter."""
    if not cfg.model:
        return []
    steps: list[Step] = [ClassifierTagger(NaiveBayes.load(cfg.model, cfg.max_model_bytes))]
    if cfg.filter:
        steps.append(ClassifierFilter(cfg.threshold, cfg.per_word))
    return steps
