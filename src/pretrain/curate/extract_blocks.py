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
   most of the signal.
4. A small ensemble of gradient-boosted trees (in `pretrain/data/extract_blocks.json`, learnt by
   `scripts/train_extract_blocks.py`; see there for what it learnt from) gives each block a keep
   probability; blocks at or above the model's threshold (0.5) are kept, in order.

A page whose blocks are all boilerplate yields "" (the `extract` step then drops it as
`extract_empty`). Time: both passes are linear in the page (resiliparse's in the HTML, ours in its
output), so like resiliparse it runs in-process under the step's size bound.
"""

from __future__ import annotations

import html as html_lib
import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

MODEL_PATH = Path(__file__).resolve().parents[1] / "data" / "extract_blocks.json"

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


class _Builder:
    """Accumulates text runs into blocks; knows which runs sit inside a link."""

    def __init__(self) -> None:
        self.out: list[Block] = []
        self.kind = "text"
        self.parts: list[str] = []
        self.link_chars = 0
        self.links = 0

    def text(self, s: str, in_link: bool) -> None:
        # Outside block tags, each line is its own block (resiliparse ends each div with a newline).
        pieces = s.split("\n") if self.kind == "text" else [s]
        for i, piece in enumerate(pieces):
            if i:
                self.end()
            if piece:
                self.parts.append(piece)
                if in_link:
                    self.link_chars += len(" ".join(piece.split()))

    def end(self, next_kind: str | None = None) -> None:
        text = html_lib.unescape(" ".join("".join(self.parts).split()))
        if text:
            self.out.append(Block(self.kind, text, min(self.link_chars, len(text)), self.links))
        self.parts, self.link_chars, self.links = [], 0, 0
        if next_kind is not None:
            self.kind = next_kind


def blocks(minimal_html: str) -> list[Block]:
    """Cut resiliparse's minimal-HTML output into blocks, in page order."""
    b = _Builder()
    in_link, pos = False, 0
    for m in _TAG.finditer(minimal_html):
        b.text(minimal_html[pos : m.start()], in_link)
        pos = m.end()
        closing, tag = m.group(1), m.group(2).lower()
        if tag == "a":
            in_link = not closing
            b.links += not closing
        elif tag == "br":
            b.text("\n", False)
        else:  # any other tag opens or closes a block
            b.end("text" if closing else _BLOCK_TAGS.get(tag, "text"))
    b.text(minimal_html[pos:], in_link)
    b.end()
    return b.out


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
    ]
)


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


def features(bs: list[Block]) -> np.ndarray:
    """(n_blocks, len(FEATURES)) float32 matrix describing each block in its page."""
    n = len(bs)
    if n == 0:
        return np.zeros((0, len(FEATURES)), np.float32)
    own = _own(bs)  # (n, 9)
    tags = np.zeros((n, len(_TAG_KINDS)))
    tags[np.arange(n), [_TAG_KINDS.index(b.kind) for b in bs]] = 1.0
    is_p = tags[:, 0:1]
    nb = np.hstack([own[:, [0, 2, 3]], is_p])  # what a neighbour shows: length, links, punctuation, <p>
    pad = np.zeros((1, nb.shape[1]))
    prev = np.vstack([pad, nb[:-1]])
    nxt = np.vstack([nb[1:], pad])
    chars = np.array([len(b.text) for b in bs], np.float64)
    total = chars.sum()
    cum = np.cumsum(chars) - chars
    longest = int(np.argmax(chars))
    idx = np.arange(n)
    long_p = (chars >= 200) & (tags[:, 0] == 1)
    lp_before = np.cumsum(long_p) - long_p
    lp_after = long_p[::-1].cumsum()[::-1] - long_p
    words = np.exp(own[:, 1]) - 1
    seen = Counter(b.text for b in bs)
    page = np.column_stack(
        [
            idx / max(n - 1, 1),
            cum / total,
            (total - cum - chars) / total,
            chars / total,
            np.full(n, math.log1p(total)),
            np.array([b.links for b in bs]) / np.maximum(words, 1),
            (idx < longest).astype(float),
            (idx > longest).astype(float),
            np.minimum(np.abs(idx - longest), 20) / 20,
            np.minimum(lp_before, 5) / 5,
            np.minimum(lp_after, 5) / 5,
            np.log1p([seen[b.text] - 1 for b in bs]),  # "Read more", "Share": the same text again and again
            np.ones(n),
        ]
    )
    return np.hstack([tags, own, prev, nxt, page]).astype(np.float32)


# --------------------------------------------------------------------------- the model


@dataclass(frozen=True)
class BlockModel:
    """Gradient-boosted trees (Friedman 2001) on the block features, evaluated level by level in numpy.

    Arrays are (trees, nodes): split feature, split value (go left when x <= value), child indices and
    leaf values (already scaled by the learning rate). Leaves point to themselves, so every tree can be
    walked `depth` steps at once for all blocks. keep when sigmoid(init + sum of leaves) >= threshold.
    """

    feature: np.ndarray
    split: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray
    init: float
    depth: int
    threshold: float

    def keep_probability(self, x: np.ndarray) -> np.ndarray:
        t = np.arange(self.feature.shape[0])[:, None]  # (T, 1)
        node = np.zeros((self.feature.shape[0], x.shape[0]), np.intp)  # (T, blocks)
        rows = np.arange(x.shape[0])[None, :]
        for _ in range(self.depth):
            go_left = x[rows, self.feature[t, node]] <= self.split[t, node]
            node = np.where(go_left, self.left[t, node], self.right[t, node])
        z = self.init + self.value[t, node].sum(0)
        return 1.0 / (1.0 + np.exp(-z))

    def to_dict(self) -> dict:
        return {
            "init": self.init,
            "depth": self.depth,
            "threshold": self.threshold,
            "feature": self.feature.tolist(),
            "split": [[float(v) for v in row] for row in _floor32(self.split)],
            "left": self.left.tolist(),
            "right": self.right.tolist(),
            "value": [[round(float(v), 6) for v in row] for row in self.value],
        }

    @classmethod
    def from_dict(cls, d: dict) -> BlockModel:
        split = np.asarray(d["split"], np.float32)
        return cls(
            np.asarray(d["feature"], np.intp),
            split,
            np.asarray(d["left"], np.intp),
            np.asarray(d["right"], np.intp),
            np.asarray(d["value"], np.float32),
            float(d["init"]),
            int(d["depth"]),
            float(d["threshold"]),
        )


def _floor32(a: np.ndarray) -> np.ndarray:
    """The largest float32 at or below each value: for float32 features, x <= a exactly when x <= this.

    (scikit-learn's split points are float64 midpoints; stored this way they stay exact in 9 digits.)
    """
    f = a.astype(np.float32)
    return np.where(f > a, np.nextafter(f, np.float32(-np.inf)), f)


@lru_cache(maxsize=8)
def load_model(path: str = "", fold: str = "") -> BlockModel:
    """The model shipped in the package (or one at `path`); its feature list must match this code's.

    `fold` picks a cross-fitted model that never saw one benchmark (`without_aeb`,
    `without_trafilatura_eval`): tests and bench/ report each benchmark with the model that did not
    learn from it; the extractor itself uses the model fitted on everything.
    """
    p = Path(path) if path else MODEL_PATH
    d = json.loads(p.read_text(encoding="utf-8"))
    if d.get("features") != list(FEATURES):
        raise ValueError(f"{p}: model features do not match this version's FEATURES; retrain it")
    return BlockModel.from_dict(d["folds"][fold] if fold else d["model"])


def render(html: str) -> str:
    """resiliparse's main content as minimal HTML (headings, paragraphs, lists, links)."""
    from resiliparse.extract.html2text import extract_plain_text

    return extract_plain_text(
        html,
        preserve_formatting="minimal_html",
        main_content=True,
        links=True,
        alt_texts=False,
        form_fields=False,
        noscript=False,
        list_bullets=False,
        comments=False,  # reader comments are not the page's text (trafilatura: include_comments=False)
        post_meta=False,  # "Posted by X on <date>", "PUBLISHED: | UPDATED:"
    )


def extract_blocks_text(html: str, model: BlockModel | None = None) -> str:
    """Main text of one page: the blocks the model keeps, one paragraph per line."""
    bs = blocks(render(html))
    if not bs:
        return ""
    m = model or load_model()
    keep = m.keep_probability(features(bs)) >= m.threshold
    return "\n".join(b.text for b, k in zip(bs, keep) if k)
