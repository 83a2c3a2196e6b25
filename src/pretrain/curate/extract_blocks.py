"""The `blocks` extractor: resiliparse's main-content DOM pass, then a small model keeps or drops each block.

resiliparse (C++ on lexbor) is fast but keeps boilerplate that sits inside its main-content
region: bylines, "share this", "related stories", comment counts, app-store badges. trafilatura
removes more of it but is 15x slower. This module keeps resiliparse's speed and adds a decision
per block:

1. resiliparse renders the main content as *minimal HTML* (`preserve_formatting="minimal_html"`,
   `links=True`): headings, paragraphs, list items, `<pre>` and `<a>` survive; everything else is
   text. One pass in C++.
2. `blocks()` cuts that into blocks (one per `<p>`, `<hN>`, `<li>`, `<pre>` or bare line) and
   records the tag, the text and how much of it sits inside links.
3. `features()` describes each block by its own text (length, link density, punctuation, digits,
   capitals), its tag, its position in the page and the same few numbers for its neighbours: the
   shallow text features of Kohlschütter et al. (2010, "Boilerplate Detection using Shallow Text
   Features"), which found that word counts and link density of a block and its neighbours carry
   most of the signal; plus what a short block *says*: the log-odds of a logistic regression over
   its words (`WordModel`: "Das könnte Sie auch interessieren!", "Lea también:", "© ... |"), for
   the block and its neighbours.
4. Three columns say whether the block lies in the page's article body container
   (`itemprop="articleBody"`, `class="entry-content"`, ...: curate/extract_body.py, which also
   parses the page once for steps 1 and 4).
5. A small ensemble of gradient-boosted trees (in `pretrain/data/extract_blocks.json`, learnt by
   `scripts/train_extract_blocks.py`; see there for what it learnt from, and for the ten
   cross-fitted models in `extract_blocks_folds.json.gz` that score the benchmarks) gives each block a keep
   probability; `core_flags` keeps blocks in order: at p >= 0.5 within the page's confident core
   (from the first to the last block at p >= 0.98 with >= 80 characters, one block either side),
   at p >= 0.6 outside it, and at the model's threshold (0.5) on a page without a core; an `<h1>`
   before the core (the headline) is dropped from the text (`headline_off`) and goes to the
   document's metadata as `title` (`headline`; the extract step's batches).
   Optional (`extract.strict = true`, off by default; issue 19, session 14): `Strict`, the strict
   trees (`extract_blocks_strict.json`: learnt with weak labels at 0.5 and each page the same weight)
   decide each page, and a page falls back to the shipped trees' decision when the strict one keeps
   under 0.85 x its characters or drops a block of >= 200 characters it keeps (`strict_falls_back`).
6. Rescue: where the main content is under MIN_MAIN_CHARS characters (resiliparse sometimes drops
   the article itself), a whole-page render and a second set of trees may bring blocks back
   (curate/extract_rescue.py); on every other page steps 1-5 are the whole output.

A page whose blocks are all boilerplate yields "" (the `extract` step then drops it as
`extract_empty`). Time: our pass is linear in resiliparse's output; resiliparse's main-content
pass is bounded by the `extract` step's size and depth checks (curate/extract.py), and the
rescue's whole-page pass is linear in the page (it runs only on pages that passed them), so like
resiliparse it runs in-process.
"""

from __future__ import annotations

import gzip
import html as html_lib
import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from itertools import repeat
from pathlib import Path

import numpy as np

MODEL_PATH = Path(__file__).resolve().parents[1] / "data" / "extract_blocks.json"
# The 10 cross-fitted models that score the benchmarks (never loaded by the extractor itself).
FOLDS_PATH = Path(__file__).resolve().parents[1] / "data" / "extract_blocks_folds.json.gz"

# Below this many characters of main content the render is suspect and the rescue pass runs
# (curate/extract_rescue.py; 500-2,000 measured the same on AEB and trafilatura-eval).
MIN_MAIN_CHARS = 500

# Tags resiliparse's minimal HTML uses for blocks (ul/ol only wrap li); <a> and <br> are inline.
_TAG = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9]*)[^>]*>")
_BLOCK_TAGS = {
    "p": "p",
    "h1": "h1",
    "h2": "h",
    "h3": "h",
    "h4": "h",
    "h5": "h",
    "h6": "h",
    "li": "li",
    "pre": "pre",
}
_TAG_KINDS = ("p", "h1", "h", "li", "pre", "text")


@dataclass
class Block:
    """One block of the main content: its kind (`p`, `h1`, `h`, `li`, `pre`, `text`), text and link text."""

    kind: str
    text: str
    link_chars: int
    links: int


# A tag that ends a block: any but <a> and <br>, its name read as _TAG reads it (the longest run of
# letters and digits, so <abbr> and <brand> end blocks).
_NAME_END = "(?![a-zA-Z0-9])"
_BREAK = re.compile(rf"<(/?)((?![aA]{_NAME_END}|[bB][rR]{_NAME_END})[a-zA-Z][a-zA-Z0-9]*)[^>]*>")


def squash(s: str) -> str:
    """`" ".join(s.split())`, without splitting the text that is already squashed (most of it).

    A printable string holds no whitespace but " " (every other whitespace character is a control
    or a separator, which str.isprintable rejects), so with no double and no edge space it is
    its own squash: three scans in C instead of a list of all its words.
    """
    if s.isprintable() and "  " not in s and not s.startswith(" ") and not s.endswith(" "):
        return s
    return " ".join(s.split())


def blocks(minimal_html: str) -> list[Block]:
    """Cut resiliparse's minimal-HTML output into blocks, in page order.

    One block per `<p>`, `<hN>`, `<li>`, `<pre>`; outside those, one per line (resiliparse ends
    each div with a newline). Text inside `<a>` counts as link text; `<br>` breaks a line.
    Every tag but `<a>` and `<br>` ends a block, so the page is first split at those (in C) and
    each stretch between them is cut on its own; only whether a link is open carries over.
    """
    out: list[Block] = []
    toks = _BREAK.split(minimal_html)  # stretch, closing slash, tag name, stretch, ...
    kind, in_link = "text", False
    for i in range(0, len(toks), 3):
        run = toks[i]
        if run and not run.isspace():  # (the newlines between blocks hold nothing)
            in_link = _stretch(out, kind, run, in_link)
        if i + 1 < len(toks):
            kind = "text" if toks[i + 1] else _BLOCK_TAGS.get(toks[i + 2].lower(), "text")
    return out


def _add(out: list[Block], kind: str, text: str, link_chars: int, links: int) -> None:
    text = squash(text)
    if "&" in text:
        text = html_lib.unescape(text)
    if text:
        out.append(Block(kind, text, min(link_chars, len(text)), links))


def _stretch(out: list[Block], kind: str, run: str, in_link: bool) -> bool:
    """Blocks of one stretch between block-ending tags (only text, <a> and <br> inside); returns
    whether a link is still open at its end."""
    if "<" not in run:  # no link and no break inside: the common case
        for line in run.split("\n") if kind == "text" else (run,):
            _add(out, kind, line, len(squash(line)) if in_link else 0, 0)
        return in_link
    parts: list[str] = []
    link_chars = links = 0
    toks = _TAG.split(run)  # text, closing slash, tag name (a or br), text, ...
    for i in range(0, len(toks), 3):
        text = toks[i]
        if text:
            if kind == "text" and "\n" in text:
                *lines, text = text.split("\n")
                for line in lines:
                    parts.append(line)
                    link_chars += len(squash(line)) if in_link else 0
                    _add(out, kind, "".join(parts), link_chars, links)
                    parts, link_chars, links = [], 0, 0
            parts.append(text)
            link_chars += len(squash(text)) if in_link else 0
        if i + 1 >= len(toks):
            break
        if toks[i + 2].lower() == "a":
            in_link = not toks[i + 1]
            links += in_link
        elif kind == "text":  # <br> ends a line
            _add(out, kind, "".join(parts), link_chars, links)
            parts, link_chars, links = [], 0, 0
        else:  # <br> inside a block
            parts.append(" ")
    _add(out, kind, "".join(parts), link_chars, links)
    return in_link


# --------------------------------------------------------------------------- features

# Per-block numbers; each is also given for the previous and the next block (neighbours).
_OWN = (
    "log_chars",
    "log_words",
    "link_density",
    "end_punct",
    "punct_per_word",
    "digit_share",
    "upper_share",
    "title_case",
    "mean_word_len",
)
FEATURES = (
    [f"tag_{k}" for k in _TAG_KINDS]
    + list(_OWN)
    + [f"prev_{f}" for f in ("log_chars", "link_density", "end_punct", "is_p")]
    + [f"next_{f}" for f in ("log_chars", "link_density", "end_punct", "is_p")]
    + [
        "rel_index",
        "chars_before",
        "chars_after",
        "share_of_page",
        "log_page_chars",
        "links_per_word",
        "before_longest",
        "after_longest",
        "dist_longest",
        "long_p_before",
        "long_p_after",
        "repeats",
        "bias",
        "word_score",
        "prev_word_score",
        "next_word_score",
    ]
)
# The article body container (curate/extract_body.py), appended for the `blocks` trees only: the
# rescue's trees (extract_rescue.RESCUE_FEATURES) see FEATURES without them.
BODY_COLUMNS = ("in_body", "body_found", "body_share")
BLOCK_FEATURES = (*FEATURES, *BODY_COLUMNS)


# Character classes as bits, looked up for a whole page at once (Python's own str predicates).
_ALPHA, _DIGIT, _UPPER, _PUNCT, _END_CHAR, _WORD_CHAR = 1, 2, 4, 8, 16, 32
_END_CHARS = ".!?:;\u3002\uff01\uff1f\"'\u201d\u00bb)"


@lru_cache(maxsize=1)
def _char_table() -> np.ndarray:
    """(65536,) uint8: the class bits of every character of the Basic Multilingual Plane."""
    t = np.zeros(65536, np.uint8)
    for i in range(65536):
        c = chr(i)
        t[i] = (
            _ALPHA * c.isalpha()
            | _DIGIT * c.isdigit()
            | _UPPER * c.isupper()
            | _PUNCT * (c in ".,;:!?")
            | _END_CHAR * (c in _END_CHARS)
            | _WORD_CHAR * (c.isalnum() or c == "_")
        )
    return t


def _own(bs: list[Block]) -> np.ndarray:
    """(n, len(_OWN)) numbers of each block's own text, computed over the page's characters at once."""
    texts = [b.text for b in bs]
    lens = np.array([len(t) for t in texts])
    starts = np.concatenate([[0], np.cumsum(lens + 1)[:-1]])
    cps = np.frombuffer("\n".join(texts).encode("utf-32-le"), np.uint32)
    bits = _char_table()[np.minimum(cps, 65535)]
    bits[cps > 65535] = _ALPHA | _WORD_CHAR  # outside the BMP: mostly CJK ideographs and emoji

    def count(mask: np.ndarray) -> np.ndarray:
        return np.add.reduceat(mask.astype(np.int64), starts)

    word = (bits & _WORD_CHAR) > 0
    word_start = word & ~np.concatenate([[False], word[:-1]])
    nw = count(word_start)
    nw1 = np.maximum(nw, 1)
    letters = np.maximum(count(bits & _ALPHA) / _ALPHA, 1)
    last = bits[starts + lens - 1]
    return np.column_stack(
        [
            np.log1p(lens),
            np.log1p(nw),
            np.array([b.link_chars for b in bs]) / lens,
            ((last & _END_CHAR) > 0).astype(float),
            count(bits & _PUNCT) / _PUNCT / nw1,
            count(bits & _DIGIT) / _DIGIT / lens,
            count(bits & _UPPER) / _UPPER / letters,
            count(word_start & ((bits & _UPPER) > 0)) / nw1,
            np.minimum(count(word) / nw1, 20.0) / 10.0,
        ]
    )


def features(bs: list[Block], word_score: np.ndarray | None = None) -> np.ndarray:
    """(n_blocks, len(FEATURES)) float32 matrix describing each block in its page.

    `word_score` is what the block's words say (`WordModel.score`, one number per block; zeros
    when None), given for the block and its two neighbours.
    """
    return batch_features([bs], word_score)


_KIND_INDEX = {k: i for i, k in enumerate(_TAG_KINDS)}


def batch_features(pages: list[list[Block]], word_score: np.ndarray | None = None) -> np.ndarray:
    """`features` of each page of a batch, stacked: (blocks of all pages, len(FEATURES)) float32;
    `word_score`: one number per block of the batch, in the same order (zeros when None).

    One numpy pass over the whole batch instead of ~40 small ones per page (0.09 ms of a 28-block
    page was call overhead): page-level numbers are taken per segment of rows (`first`: each page's
    first row). Every value is the same to the bit as page by page: sums and counts are of integers
    (exact in float64), and every other number comes from the same elementwise operation.
    """
    flat = [b for bs in pages for b in bs]
    n = len(flat)
    if n == 0:
        return np.zeros((0, len(FEATURES)), np.float32)
    sizes = np.array([len(bs) for bs in pages if bs])
    first = np.concatenate([[0], np.cumsum(sizes)[:-1]])  # each page's first row
    # each row's page; with one page, 0: a page's numbers then index to scalars that broadcast
    # (the same values, without ~20 gathers: page by page as fast as before batches)
    page = np.repeat(np.arange(len(sizes)), sizes) if len(sizes) > 1 else 0
    own = _own(flat)  # (n, 9)
    tags = np.zeros((n, len(_TAG_KINDS)))
    tags[np.arange(n), [_KIND_INDEX[b.kind] for b in flat]] = 1.0
    is_p = tags[:, 0:1]
    nb = np.hstack([own[:, [0, 2, 3]], is_p])  # what a neighbour shows: length, links, punctuation, <p>
    prev, nxt = _shifted(nb, first, sizes)
    chars = np.array([len(b.text) for b in flat], np.float64)
    total = np.add.reduceat(chars, first)
    run = np.cumsum(chars)
    cum = run - chars - (run - chars)[first][page]  # characters before the block in its page
    idx = np.arange(n) - first[page]
    longest = _first_max(chars, first, page)[page] - first[page]
    long_p = (chars >= 200) & (tags[:, 0] == 1)
    lp_run = np.cumsum(long_p)
    lp_before = lp_run - long_p - (lp_run - long_p)[first][page]
    lp_after = np.add.reduceat(long_p.astype(np.int64), first)[page] - lp_before - long_p
    words = np.exp(own[:, 1]) - 1
    repeats: list[int] = []
    for bs in pages:
        seen = Counter(b.text for b in bs)
        repeats += [seen[b.text] - 1 for b in bs]
    tot = total[page]
    layout = np.column_stack(
        [
            idx / np.maximum(sizes - 1, 1)[page],
            cum / tot,
            (tot - cum - chars) / tot,
            chars / tot,
            np.repeat([math.log1p(t) for t in total], sizes),  # (math's log1p, as page by page before)
            np.array([b.links for b in flat]) / np.maximum(words, 1),
            (idx < longest).astype(float),
            (idx > longest).astype(float),
            np.minimum(np.abs(idx - longest), 20) / 20,
            np.minimum(lp_before, 5) / 5,
            np.minimum(lp_after, 5) / 5,
            np.log1p(repeats),  # "Read more", "Share": the same text again and again
            np.ones(n),
        ]
    )
    ws = np.zeros(n) if word_score is None else np.asarray(word_score, np.float64)
    return np.hstack([tags, own, prev, nxt, layout, np.column_stack([ws, *_shifted(ws, first, sizes)])]
                     ).astype(np.float32)


def _shifted(a: np.ndarray, first: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's previous and next row within its page (zeros past the page's ends)."""
    pad = np.zeros((1, *a.shape[1:]))
    prev, nxt = np.concatenate([pad, a[:-1]]), np.concatenate([a[1:], pad])
    prev[first] = 0.0
    nxt[first + sizes - 1] = 0.0
    return prev, nxt


def _first_max(x: np.ndarray, first: np.ndarray, page: np.ndarray | int) -> np.ndarray:
    """The row of each page's largest value (the first of equals, as np.argmax)."""
    if isinstance(page, int):  # one page
        return np.array([np.argmax(x)])
    at = np.flatnonzero(x == np.maximum.reduceat(x, first)[page])
    return at[np.searchsorted(at, first)]


# --------------------------------------------------------------------------- what the words say

def word_features(text: str) -> list[str]:
    """The sparse features a block's text fires: its lower-cased whitespace-separated tokens (signs
    stay attached: "informationen:", "©", "|", "»") and the first and last of them marked as such
    ("^lea", "informationen:$"): "Lea también: ...", "Weitere Informationen:". str.split, not a
    regex: 4x faster (0.013 vs 0.049 ms per AEB page), and no worse on the benchmarks."""
    toks = text.lower().split()
    if toks:
        toks.append("^" + toks[0])
        toks.append(toks[-2] + "$")
    return toks


@dataclass(frozen=True)
class WordModel:
    """A logistic regression over the words of short blocks: its log-odds of keep become a feature
    of the trees (stacking, Wolpert 1992). Long blocks (>= max_chars) score 0: they are told apart
    by their length and punctuation, and reading them would cost most of the time."""

    weight: dict[str, float]
    bias: float
    max_chars: int

    def score(self, bs: list[Block]) -> np.ndarray:
        """bias + the weights of `word_features(text)` for each short block (inlined: ~1 us a block)."""
        get, zeros, bias, top = self.weight.get, repeat(0.0), self.bias, self.max_chars
        out = []  # (a list, then one array: 20% less than item by item into numpy)
        for b in bs:
            text = b.text
            if len(text) < top and (toks := text.lower().split()):
                s = bias + sum(map(get, toks, zeros))
                out.append(s + get("^" + toks[0], 0.0) + get(toks[-1] + "$", 0.0))
            else:
                out.append(bias if len(text) < top else 0.0)
        return np.array(out, np.float64)

    def to_dict(self) -> dict:
        return {"bias": self.bias, "max_chars": self.max_chars, "weight": self.weight}

    @classmethod
    def from_dict(cls, d: dict) -> WordModel:
        return cls({str(k): float(v) for k, v in d["weight"].items()}, float(d["bias"]), int(d["max_chars"]))


# --------------------------------------------------------------------------- the model


WALK_ROWS = 16_384  # rows per tree walk: (100 trees, 16,384) int64 is 13 MB (an AEB page: ~28 rows)


@dataclass(frozen=True)
class BlockModel:
    """Gradient-boosted trees (Friedman 2001) on the block features, evaluated level by level in numpy.

    Every tree is stored complete and in heap order (node i has children 2i+1 and 2i+2): `feature`
    and `split` are (trees, 2^depth - 1) for the inner nodes (go left when x <= split), `value` is
    (trees, 2^depth) for the leaves, already scaled by the learning rate. A leaf that scikit-learn
    reached early is an inner node that always goes left (split = +inf) down to its copy at the
    bottom. keep when sigmoid(init + sum of leaves) >= threshold.
    """

    feature: np.ndarray
    split: np.ndarray
    value: np.ndarray
    init: float
    depth: int
    threshold: float
    words: WordModel | None = None

    def __post_init__(self) -> None:
        if self.depth < 1 or self.feature.shape[1] != 2**self.depth - 1:
            raise ValueError(f"trees of depth {self.depth} need {2**self.depth - 1} inner nodes each")
        # The walk's tables, over nodes numbered tree by tree (node j of tree t is t * inner + j):
        # a node's left child, as a node number or, below the last inner level, as a leaf's place
        # in value.ravel(); the right child is always the left one plus one.
        n_trees, inner = self.feature.shape
        t, j = np.divmod(np.arange(n_trees * inner), inner)
        left = np.where(2 * j + 1 < inner, t * inner + 2 * j + 1, t * (inner + 1) + 2 * j + 1 - inner)
        object.__setattr__(self, "_left", left)
        object.__setattr__(self, "_flat", (self.feature.ravel(), self.split.ravel(), self.value.ravel()))

    def keep_probability(self, x: np.ndarray) -> np.ndarray:
        """(n,) keep probabilities of a (n, features) float32 matrix: all trees walked together,
        one level at a time, by node numbers (T, n) and a few `take`s per level; WALK_ROWS rows at
        a time, so that a hostile page of 600,000 blocks does not hold (T, n) arrays of ~0.5 GB each."""
        if x.shape[0] > WALK_ROWS:
            return np.concatenate([self._walk(x[i : i + WALK_ROWS]) for i in range(0, x.shape[0], WALK_ROWS)])
        return self._walk(x)

    def _walk(self, x: np.ndarray) -> np.ndarray:
        n_trees, inner = self.feature.shape
        n = x.shape[0]
        feature, split, value = self._flat
        xt = x.T.ravel()  # feature-major: x[b, f] sits at f * n + b
        at_f = feature * n  # where each node's feature starts in xt
        row = np.arange(n)
        # the root of every tree reads one column: a plain gather, then its child
        g = self._left[::inner, None] + (x[:, self.feature[:, 0]].T > self.split[:, :1])
        for _ in range(self.depth - 1):
            i = at_f.take(g)
            i += row
            right = xt.take(i) > split.take(g)
            g = self._left.take(g)
            g += right
        z = self.init + value.take(g).sum(0)  # (T, n) summed over trees in order, as before
        return 1.0 / (1.0 + np.exp(-z))

    def to_dict(self) -> dict:
        return {
            "words": self.words.to_dict() if self.words else None,
            "init": self.init,
            "depth": self.depth,
            "threshold": self.threshold,
            "feature": self.feature.tolist(),
            "split": [[float(v) for v in row] for row in _floor32(self.split)],
            "value": [[float(f"{v:.6g}") for v in row] for row in self.value],
        }

    @classmethod
    def from_dict(cls, d: dict) -> BlockModel:
        return cls(
            np.asarray(d["feature"], np.intp),
            np.asarray(d["split"], np.float32),
            np.asarray(d["value"], np.float64),
            float(d["init"]),
            int(d["depth"]),
            float(d["threshold"]),
            WordModel.from_dict(d["words"]) if d.get("words") else None,
        )


def _floor32(a: np.ndarray) -> np.ndarray:
    """The largest float32 at or below each value: for float32 features, x <= a exactly when x <= this.

    (scikit-learn's split points are float64 midpoints; stored this way they stay exact in 9 digits.)
    """
    f = a.astype(np.float32)
    return np.where(f > a, np.nextafter(f, np.float32(-np.inf)), f)


@lru_cache(maxsize=8)
def read_trees(path: str, features: tuple, what: str, fix: str) -> dict:
    """A model file (JSON, or gzip JSON) whose feature list must equal `features`, else one line
    naming the file and `fix`. Shared by the blocks trees and the rescue's (extract_rescue.py)."""
    p = Path(path)
    raw = gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()
    d = json.loads(raw.decode("utf-8"))
    if d.get("features") != list(features):
        raise ValueError(f"{p}: {what} features do not match this version's; {fix}")
    return d


def pick_trees(file: tuple, folds_file: tuple, path: str, fold: str) -> BlockModel:
    """The shipped trees of `file` ((default path, features, what, fix)), or with `fold` the
    cross-fitted ones of `folds_file`; `path` replaces the default path of either."""
    if not fold:
        return BlockModel.from_dict(read_trees(path or str(file[0]), *file[1:])["model"])
    folds = read_trees(path or str(folds_file[0]), *folds_file[1:])["folds"]
    if fold not in folds:
        raise ValueError(f"{path or folds_file[0]}: no fold {file[2]} {fold!r} (have {', '.join(folds)})")
    return BlockModel.from_dict(folds[fold])


_RETRAIN = "retrain it (scripts/train_extract_blocks.py)"


@lru_cache(maxsize=16)
def load_model(path: str = "", fold: str = "") -> BlockModel:
    """The model shipped in the package (or one at `path`); its feature list must match this code's.

    `fold` ("aeb/0" ... "trafilatura-eval/4") picks instead one of the cross-fitted models in
    FOLDS_PATH (or `path`): the one that scores that benchmark's pages of that site fold, trained
    on the other sets and the benchmark's other four folds. See `model_for`.
    """
    return pick_trees((MODEL_PATH, BLOCK_FEATURES, "model", _RETRAIN),
                      (FOLDS_PATH, BLOCK_FEATURES, "model", _RETRAIN), path, fold)


# The strict trees (issue 19, sessions 11, 13, 14; docs/extraction.md): scripts/train_extract_blocks.py
# --weak-weight 0.5 --per-page, and their ten cross-fitted fold models (the benchmarks' scores).
STRICT_PATH = Path(__file__).resolve().parents[1] / "data" / "extract_blocks_strict.json"
STRICT_FOLDS_PATH = Path(__file__).resolve().parents[1] / "data" / "extract_blocks_strict_folds.json.gz"
_RETRAIN_STRICT = "retrain it (scripts/train_extract_blocks.py --weak-weight 0.5 --per-page)"
# The per-page fallback (session 13, post hoc; judged on fresh pages in session 14): the shipped
# decision when the strict one keeps under STRICT_R x its characters (the strict trees dropping a
# product page's short text and keeping its template) or drops a block of >= STRICT_LONG characters
# the shipped one keeps (the features' "long paragraph").
STRICT_R, STRICT_LONG = 0.85, 200


@lru_cache(maxsize=16)
def load_strict(path: str = "", fold: str = "") -> BlockModel:
    """The strict trees shipped in the package (or at `path`); `fold` as in `load_model`."""
    return pick_trees((STRICT_PATH, BLOCK_FEATURES, "strict model", _RETRAIN_STRICT),
                      (STRICT_FOLDS_PATH, BLOCK_FEATURES, "strict model", _RETRAIN_STRICT), path, fold)


class ShippedTrees:
    """A pair of trees as the rescue reads it (`words`, `threshold`): its shipped trees' (`ship`)."""

    @property
    def words(self):
        return self.ship.words

    @property
    def threshold(self) -> float:
        return self.ship.threshold


@dataclass(frozen=True)
class Strict(ShippedTrees):
    """The strict trees deciding each page, falling back per page to the shipped trees' decision
    (`strict_falls_back`); a `model` for keep_flags, page_texts and extract_blocks_text. The rescue
    reads the shipped trees' word model and threshold."""

    ship: BlockModel
    strict: BlockModel
    r: float = STRICT_R
    long_chars: int = STRICT_LONG


def strict_model(fold: str = "") -> Strict:
    """The shipped trees and the strict ones, full (`fold` ""), or both of one site fold."""
    return Strict(load_model(fold=fold), load_strict(fold=fold))


def strict_for(benchmark: str, url: str) -> Strict:
    """`Strict` of the fold that never saw page `url`'s site (as `model_for`)."""
    from pretrain.curate.extract_eval import site_fold

    return strict_model(f"{benchmark}/{site_fold(url)}")


def strict_falls_back(fs: np.ndarray, ft: np.ndarray, chars: np.ndarray, r: float = STRICT_R,
                      long_chars: int = STRICT_LONG) -> bool:
    """Whether a page takes the shipped decision `fs` over the strict one `ft` (chars: each block's
    length): the strict one keeps under r x the shipped one's characters, or drops a block of >=
    `long_chars` characters the shipped one keeps."""
    return bool(chars[ft].sum() < r * chars[fs].sum() or ((chars >= long_chars) & fs & ~ft).any())


def _same_words(a: BlockModel, b: BlockModel) -> bool:
    return (a.words is None and b.words is None) or (
        a.words is not None and b.words is not None and a.words.to_dict() == b.words.to_dict())


def model_for(benchmark: str, url: str) -> BlockModel:
    """The model to score page `url` of `benchmark` ("aeb", "trafilatura-eval") with: one that never
    saw a page of that page's site (grouped 5-fold cross-fitting; `extract_eval.site_fold`)."""
    from pretrain.curate.extract_eval import site_fold

    return load_model(fold=f"{benchmark}/{site_fold(url)}")


# resiliparse's rendering as minimal HTML: headings, paragraphs, lists, links (also the rescue's)
MINIMAL_HTML = dict(
    preserve_formatting="minimal_html", links=True, alt_texts=False, form_fields=False, noscript=False,
    list_bullets=False,
)


def render(html) -> str:
    """resiliparse's main content as minimal HTML (headings, paragraphs, lists, links), from a page's
    HTML or from its parsed `HTMLTree` (the same text; extract_body parses once for both uses)."""
    from resiliparse.extract.html2text import extract_plain_text

    return extract_plain_text(
        html,
        main_content=True,
        comments=False,  # reader comments are not the page's text (trafilatura: include_comments=False)
        post_meta=False,  # "Posted by X on <date>", "PUBLISHED: | UPDATED:"
        **MINIMAL_HTML,
    )


def extract_blocks_text(
    html: str,
    model: BlockModel | Strict | None = None,
    rescue: BlockModel | None = None,
    min_main_chars: int = MIN_MAIN_CHARS,
) -> str:
    """Main text of one page: the blocks the model keeps, one paragraph per line; where the main
    content is shorter than `min_main_chars` (0: never), whole-page blocks the rescue trees bring
    back (curate/extract_rescue.py). The `extract` step gives the same text, a batch at a time."""
    from pretrain.curate.extract_body import main_page
    from pretrain.curate.extract_rescue import page_texts

    tree, bs, cols = main_page(html)
    return page_texts([html], [bs], model, rescue, min_main_chars, cols=[cols], trees=[tree])[0]


# The core decoder (issue 19, sessions 6 and 9; chosen by the nested rule in 7 of 10 site folds):
# a page's core runs from the first to the last block at p >= CORE_P with >= CORE_CHARS characters,
# widened by CORE_MARGIN blocks; inside keep at CORE_IN, outside at CORE_OUT, and a page without a
# core keeps at the model's threshold. It never keeps less than 0.5 would, so a non-article page
# (no confident long block: 76 of the 86 crawl pages) is decided as before.
CORE_P, CORE_CHARS, CORE_MARGIN, CORE_IN, CORE_OUT = 0.98, 80, 1, 0.5, 0.6


def core_flags(p: np.ndarray, chars: np.ndarray, threshold: float = 0.5, first: np.ndarray | None = None
               ) -> np.ndarray:
    """Keep flags of one page's blocks (keep probabilities `p`, lengths `chars`) by the core decoder;
    with `first` (the row where each page starts), of the stacked blocks of a batch of pages."""
    at = np.flatnonzero((p >= CORE_P) & (chars >= CORE_CHARS))  # the core's blocks, in order
    if not len(at):
        return p >= threshold
    if first is None:  # one page: its core runs from its first to its last core block
        has, start, end = True, at[0], at[-1]
    else:  # each row's page's first and last core block (has: whether the page has a core)
        first = np.asarray(first, np.int64)
        page = np.repeat(np.arange(len(first)), np.diff(np.append(first, len(p))))
        lo = np.searchsorted(page[at], np.arange(len(first)))
        hi = np.searchsorted(page[at], np.arange(len(first)), "right") - 1
        has, start, end = (lo <= hi)[page], at[np.minimum(lo, len(at) - 1)][page], at[hi][page]
    row = np.arange(len(p))
    inside = (row >= start - CORE_MARGIN) & (row <= end + CORE_MARGIN)
    return np.where(has, np.where(inside, p >= CORE_IN, p >= CORE_OUT), p >= threshold)


def headline_off(flags: np.ndarray, bs: list[Block], p: np.ndarray, chars: np.ndarray) -> np.ndarray:
    """`flags` (core_flags') without an `<h1>` that comes before the page's core: the headline. The
    field's text is the body and the title is metadata (trafilatura, so FineWeb; AEB's truth holds
    no headline on any of its pages): the headline goes to the document's metadata instead
    (`headline`, the extract step's `title`; issue 19, session 10, docs/extraction.md). A page
    without a core (no confident long block: listings, profiles, most non-articles) is unchanged."""
    core = np.flatnonzero((p >= CORE_P) & (chars >= CORE_CHARS))
    for i in range(core[0] if len(core) else 0):
        if flags[i] and bs[i].kind == "h1":
            flags[i] = False
    return flags


def headline(bs: list[Block], flags) -> str:
    """A page's headline for its metadata: the first `<h1>` block before the first kept block that
    the flags drop ("" when none): the title that the text, like trafilatura's, leaves out."""
    for b, k in zip(bs, flags):
        if k:
            break
        if b.kind == "h1":
            return b.text
    return ""


def block_matrix(bs: list[Block], cols: np.ndarray, model: BlockModel) -> np.ndarray:
    """The trees' input for one page: FEATURES (word scores from the model's word model), then the
    body columns (extract_body.body_columns)."""
    return batch_matrix([bs], [cols], model)


def batch_matrix(pages: list[list[Block]], cols: list[np.ndarray], model: BlockModel) -> np.ndarray:
    """`block_matrix` of each page of a batch, stacked (one pass over the batch: batch_features)."""
    if len(cols) != len(pages):
        raise ValueError(f"body columns of {len(cols)} pages for the blocks of {len(pages)}")
    for i, (c, bs) in enumerate(zip(cols, pages)):
        if len(c) != len(bs):
            raise ValueError(f"page {i} of the batch: {len(c)} rows of body columns for {len(bs)} blocks")
    flat = [b for bs in pages for b in bs]
    x = batch_features(pages, model.words.score(flat) if model.words else None)
    return np.hstack([x, np.concatenate(cols) if cols else np.zeros((0, len(BODY_COLUMNS)), np.float32)])


def keep_flags(
    pages: list[list[Block]], model: BlockModel | Strict | None = None, cols: list[np.ndarray] | None = None
) -> list[list[bool]]:
    """Whether the model keeps each block of each page of a batch (`cols`: each page's body
    columns; None: pages without a container). The trees walk all the batch's blocks in one call
    (rows are independent: the same probabilities as page by page), then the pages are decoded,
    each on its own rows. A `Strict` model walks both sets of trees and picks per page."""
    m = model or load_model()
    cols = cols or [np.zeros((len(bs), len(BODY_COLUMNS)), np.float32) for bs in pages]
    sizes = [len(bs) for bs in pages]
    if not sum(sizes):
        return [[] for _ in pages]
    ship = m.ship if isinstance(m, Strict) else m
    x = batch_matrix(pages, cols, ship)
    chars = np.fromiter((len(b.text) for bs in pages for b in bs), np.int64, len(x))
    first = np.cumsum([0, *sizes[:-1]]) if len(pages) > 1 else None
    p = ship.keep_probability(x)
    keep = core_flags(p, chars, m.threshold, first)
    if isinstance(m, Strict):  # a second walk (the word model is shared: the same matrix)
        xt = x if _same_words(ship, m.strict) else batch_matrix(pages, cols, m.strict)
        pt = m.strict.keep_probability(xt)
        kt = core_flags(pt, chars, m.threshold, first)
    out, at = [], 0
    for bs in pages:  # the headline rule per page, on its rows (views of the batch's arrays)
        k = slice(at, at + len(bs))
        f = headline_off(keep[k], bs, p[k], chars[k])
        if isinstance(m, Strict):
            ft = headline_off(kt[k], bs, pt[k], chars[k])
            f = f if strict_falls_back(f, ft, chars[k], m.r, m.long_chars) else ft
        out.append(f.tolist())
        at += len(bs)
    return out


def kept_texts(
    pages: list[list[Block]], model: BlockModel | Strict | None = None, cols: list[np.ndarray] | None = None
) -> list[str]:
    """Main text of each page of a batch: the blocks the model keeps, one paragraph per line (no rescue)."""
    flags = keep_flags(pages, model, cols)
    return ["\n".join(b.text for b, k in zip(bs, f) if k) for bs, f in zip(pages, flags)]
