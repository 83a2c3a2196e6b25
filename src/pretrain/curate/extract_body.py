"""The article body container of a page, as three columns of the `blocks` trees (BODY_COLUMNS).

Many article pages wrap the article in one element named for it (`itemprop="articleBody"`,
`class="entry-content"`, ...): trafilatura's first BODY_XPATH looks for such names. Session 8
(issue 19) counted which found the 448 containers of the benchmarks (entry-content 151 pages,
post-content 52, article-content 51, article-body 35, articlebody 22; itemprop 39) and kept this
cheap group: 0.13 ms per AEB page against 0.75 for 25 words. Each main-content block gets
`in_body` (its text lies in the container), `body_found` (the page has one) and `body_share` (the
share of the main content's characters in it); the trees learn how far to trust them, and the
core decoder (extract_blocks.core_flags) stacks on top (docs/extraction.md, issue 19, session 9:
AEB F1 +0.002, drop +0.017 out of fold by site).

`main_blocks` parses a page once, renders resiliparse's main content from that tree (the same text
as `extract_blocks.render`) and runs the selector on it; `main_page` also returns the tree, for the
rescue's whole-page render of a page whose main content is short. Bounds: parsing and the selector are
linear in the page (lexbor; the `extract` step's size and depth checks run first); the alignment
scans the container's text at most BODY_SCAN_CHARS characters per page in all, after which the
remaining blocks count as outside.
"""

from __future__ import annotations

import numpy as np

from pretrain.curate.extract_blocks import BODY_COLUMNS, Block, blocks, render

BODY_WORDS = ("entry-content", "post-content", "article-content", "article-body", "articlebody")
# 11 selectors: case-insensitive substrings of any element's class or id, and itemprop
BODY_SELECTOR = ", ".join(
    ['[itemprop="articleBody" i]'] + [f'[{a}*="{w}" i]' for w in BODY_WORDS for a in ("class", "id")]
)
# At most this many characters of the container's text are scanned per page (a normal page: well
# under 1 million; a hostile one of 100,000 blocks outside a 1 MB container would scan 10^11).
BODY_SCAN_CHARS = 50_000_000


def parse(html: str):
    """resiliparse's (lexbor's) tree of a page."""
    from resiliparse.parse.html import HTMLTree

    return HTMLTree.parse(html)


def main_blocks(html: str) -> tuple[list[Block], np.ndarray]:
    """A page's main-content blocks and their BODY_COLUMNS, from one parse."""
    _, bs, cols = main_page(html)
    return bs, cols


def main_page(html: str) -> tuple[object, list[Block], np.ndarray]:
    """`main_blocks` and the parsed tree, which the rescue can render again as the whole page
    (extract_rescue.page_texts(trees=...): rendering does not change the tree, so that gives the
    same blocks as parsing the page again, without the second parse)."""
    tree = parse(html)
    bs = blocks(render(tree))
    return tree, bs, body_columns(tree, bs)


def body_columns(tree, bs: list[Block]) -> np.ndarray:
    """(n, 3) float32: in_body, body_found, body_share of each block (zeros without a container).

    A block is in the body when its text, spaces removed, is a substring of the first container's
    DOM text with all white space removed (resiliparse puts spaces at <br> where the DOM text has
    none; the container is not rendered: extract_plain_text takes a string or a tree, not a node).
    """
    n = len(bs)
    node = tree.document.query_selector(BODY_SELECTOR) if n and tree.document is not None else None
    if node is None:
        return np.zeros((n, len(BODY_COLUMNS)), np.float32)
    ref = "".join(node.text.split())
    inside = np.array(_inside(ref, [b.text.replace(" ", "") for b in bs]), float)  # (blocks are squashed)
    chars = np.array([len(b.text) for b in bs], float)
    share = (chars * inside).sum() / max(chars.sum(), 1.0)
    return np.column_stack([inside, np.ones(n), np.full(n, share)]).astype(np.float32)


def _inside(ref: str, needles: list[str]) -> list[bool]:
    """`s in ref` for each needle, searched from where the previous hit ended first (blocks come in
    page order, so a hit usually costs the gap to it, not a scan of the whole text), then before
    it; once BODY_SCAN_CHARS are spent, False."""
    out, at, budget = [], 0, BODY_SCAN_CHARS
    for s in needles:
        if budget <= 0:
            out.append(False)
            continue
        i = ref.find(s, at)
        if i >= 0:
            budget -= i + len(s) - at
        else:
            budget -= len(ref) - at
            if at:  # a start before the cursor (repeated text, or blocks out of DOM order)
                budget -= at
                i = ref.find(s, 0, at + len(s) - 1)
        at = max(at, i + len(s)) if i >= 0 else at
        out.append(i >= 0)
    return out
