"""Rescue for the `blocks` extractor: whole-page blocks brought back where resiliparse's main content fails.

resiliparse's main-content pass sometimes drops the article itself: a class word on an ancestor
(`content-sidebar-wrap` in the Genesis theme, `entry share`, `share-zone`, `is-collapsed`) or a
wrong region pick leaves a few hundred characters of main content. On those pages (main content
under MIN_MAIN_CHARS characters: 4% of AEB + trafilatura-eval pages, 9 of 53 real crawl pages in
../shared/data/warc) this module renders the whole page too, aligns its
blocks with the main-content blocks (same normalised text), and lets a second set of trees decide
the whole-page blocks that are *not* main content and sit within SPAN blocks of it. The main-content
blocks are decided by the `blocks` model exactly as `extract_blocks_text` does, so on every other
page the output is the same, byte for byte.

Measured (bench/bench_extract_render.py, grouped 5-fold cross-fitting by site, histogram trees):
trafilatura-eval keep 0.923 -> 0.932, drop 0.863 -> 0.863 (one snippet less), AEB F1 0.945 ->
0.945. With the shipped cross-fit by benchmark (trees that never saw trafilatura-eval-like pages)
the gain is 3 snippets (keep 0.9254 -> 0.9269); docs/extraction.md has both and what lost.

The rescue trees see the `blocks` FEATURES of each whole-page block (computed over the whole-page
block list) plus ALIGNED; they are learnt by scripts/train_extract_rescue.py and stored, in the
same format as the `blocks` model, in pretrain/data/extract_blocks_rescue.json (retrain it when
FEATURES change).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np

from pretrain.curate.extract_blocks import FEATURES, Block, BlockModel, blocks, features, load_model, render

RESCUE_PATH = Path(__file__).resolve().parents[1] / "data" / "extract_blocks_rescue.json"
MIN_MAIN_CHARS = 500  # below this the main content is suspect (500-2000 measured the same)
SPAN = 10  # candidates: whole-page blocks within this many blocks of the main content
ALIGNED = ("in_main", "in_main_span", "dist_main", "main_share", "prev_in_main", "next_in_main")
RESCUE_FEATURES = (*FEATURES, *ALIGNED)


def whole_page(html) -> list[Block]:
    """Blocks of resiliparse's whole-page render (html: a string or an HTMLTree), same settings otherwise."""
    from resiliparse.extract.html2text import extract_plain_text

    return blocks(
        extract_plain_text(
            html,
            preserve_formatting="minimal_html",
            main_content=False,
            links=True,
            alt_texts=False,
            form_fields=False,
            noscript=False,
            list_bullets=False,
        )
    )


def aligned(whole_bs: list[Block], main_bs: list[Block]) -> np.ndarray:
    """(n, len(ALIGNED)): per whole-page block, whether the main content has a block of the same text,
    whether it lies between the first and last such block, its distance to the nearest one (capped
    at 10, /10), the main content's share of the page's characters, and the flag of each neighbour.
    One set lookup per block."""
    n = len(whole_bs)
    if n == 0:
        return np.zeros((0, len(ALIGNED)))
    main = {b.text for b in main_bs}
    inm = np.array([b.text in main for b in whole_bs], float)
    idx, ar = np.flatnonzero(inm), np.arange(n)
    if len(idx):
        span = ((ar >= idx[0]) & (ar <= idx[-1])).astype(float)
        pos = np.searchsorted(idx, ar)
        left = np.abs(ar - idx[np.clip(pos - 1, 0, len(idx) - 1)])
        right = np.abs(idx[np.clip(pos, 0, len(idx) - 1)] - ar)
        dist = np.minimum(np.minimum(left, right), 10) / 10
    else:
        span, dist = np.zeros(n), np.ones(n)
    chars = np.array([len(b.text) for b in whole_bs], float)
    share = np.full(n, (chars * inm).sum() / max(chars.sum(), 1))
    prev, nxt = np.concatenate([[0], inm[:-1]]), np.concatenate([inm[1:], [0]])
    return np.column_stack([inm, span, dist, share, prev, nxt])


def candidates(whole_bs: list[Block], main_bs: list[Block], span: int = SPAN):
    """The whole-page blocks around the main content (within `span` blocks of it; all when it has no
    block in the whole page), their rescue features and which of them are main content."""
    ex = aligned(whole_bs, main_bs)
    inm = ex[:, 0] > 0
    idx = np.flatnonzero(inm)
    if len(idx):
        lo, hi = max(int(idx[0]) - span, 0), int(idx[-1]) + span + 1
        whole_bs, ex, inm = whole_bs[lo:hi], ex[lo:hi], inm[lo:hi]
    if not whole_bs:
        return [], np.zeros((0, len(RESCUE_FEATURES)), np.float32), inm
    return whole_bs, np.hstack([features(whole_bs), ex.astype(np.float32)]), inm


def compose(main_bs, keep_main, whole_bs, inm, keep_whole) -> list[str]:
    """Kept texts in page order: every main block as `keep_main` says, each rescued whole-page block
    placed between the main blocks it sits between; with nothing rescued, the main blocks alone."""
    pos: dict[str, list[int]] = {}
    for j, b in enumerate(main_bs):
        pos.setdefault(b.text, []).append(j)
    out, j = [], 0
    for b, is_main, k in zip(whole_bs, inm, keep_whole):
        if is_main:
            later = [x for x in pos.get(b.text, ()) if x >= j]
            if later:
                out += [main_bs[x].text for x in range(j, later[0] + 1) if keep_main[x]]
                j = later[0] + 1
        elif k:
            out.append(b.text)
    return out + [main_bs[x].text for x in range(j, len(main_bs)) if keep_main[x]]


@lru_cache(maxsize=8)
def load_rescue(path: str = "", fold: str = "") -> BlockModel:
    """The rescue trees shipped in the package (or at `path`); `fold` as in `load_model`."""
    p = Path(path) if path else RESCUE_PATH
    d = json.loads(p.read_text(encoding="utf-8"))
    if d.get("features") != list(RESCUE_FEATURES):
        raise ValueError(
            f"{p}: rescue features do not match this version's; run scripts/train_extract_rescue.py"
        )
    return BlockModel.from_dict(d["folds"][fold] if fold else d["model"])


def extract_rescue_text(
    html: str,
    model: BlockModel | None = None,
    rescue: BlockModel | None = None,
    min_main_chars: int = MIN_MAIN_CHARS,
) -> str:
    """`extract_blocks_text`, plus the rescue pass on pages whose main content is shorter than
    `min_main_chars` (0: never; then the output is `extract_blocks_text`'s)."""
    m = model or load_model()
    main_bs = blocks(render(html))
    keep_main = m.keep_probability(features(main_bs)) >= m.threshold if main_bs else []
    if sum(len(b.text) for b in main_bs) >= min_main_chars:
        return "\n".join(b.text for b, k in zip(main_bs, keep_main) if k)
    # a second resiliparse pass (whole page) only here: 4-17% of pages, ~1.8 ms each
    whole_bs, x, inm = candidates(whole_page(html), main_bs)
    r = rescue or load_rescue()
    keep_whole = (r.keep_probability(x) >= r.threshold) & ~inm if len(whole_bs) else []
    return "\n".join(compose(main_bs, keep_main, whole_bs, inm, keep_whole))
