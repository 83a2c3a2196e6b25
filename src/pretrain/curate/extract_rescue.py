"""Rescue for the `blocks` extractor: whole-page blocks brought back where resiliparse's main content fails.

resiliparse's main-content pass sometimes drops the article itself: a class word on an ancestor
(`content-sidebar-wrap` in the Genesis theme, `entry share`, `share-zone`, `is-collapsed`) or a
wrong region pick leaves a few hundred characters of main content. On those pages (main content
under MIN_MAIN_CHARS characters: 4% of AEB + trafilatura-eval pages, 9 of 53 real crawl pages in
../shared/data/warc) the `blocks` backend renders the whole page too, aligns its blocks with the
main-content blocks (same normalised text), and lets a second set of trees decide the whole-page
blocks that are *not* main content and sit within SPAN blocks of it. The main-content blocks are
decided by the `blocks` model exactly as without the rescue, so on every other page the output is
the same, byte for byte. `page_texts` does this for a batch of pages (the `extract` step's path
and `extract_blocks_text`'s, so both give the same text).

The rescue trees see the `blocks` FEATURES of each whole-page block (computed over the candidate
blocks; the word score from the `blocks` model's own word model) plus ALIGNED; they are learnt by
scripts/train_extract_rescue.py and stored, in the same format as the `blocks` model, in
pretrain/data/extract_blocks_rescue.json, with ten cross-fitted fold models (by site, as the
`blocks` fold models) in extract_blocks_rescue_folds.json.gz; retrain them when FEATURES change.
Numbers: docs/extraction.md ("Rescue").

Bounds: the whole-page render (`main_content=False`) is linear in the page (100,000 nested
`<div>` in 0.18 s) and runs only on pages that passed the step's size and depth checks; what
follows it is linear in its blocks.
"""

from __future__ import annotations

from bisect import bisect_left
from functools import lru_cache
from pathlib import Path

import numpy as np

from pretrain.curate.extract_blocks import (
    FEATURES,
    MIN_MAIN_CHARS,
    MINIMAL_HTML,
    Block,
    BlockModel,
    Strict,
    WordModel,
    blocks,
    features,
    headline,
    keep_flags,
    load_model,
    pick_trees,
)

RESCUE_PATH = Path(__file__).resolve().parents[1] / "data" / "extract_blocks_rescue.json"
RESCUE_FOLDS_PATH = Path(__file__).resolve().parents[1] / "data" / "extract_blocks_rescue_folds.json.gz"
SPAN = 10  # candidates: whole-page blocks within this many blocks of the main content
ALIGNED = ("in_main", "in_main_span", "dist_main", "main_share", "prev_in_main", "next_in_main")
RESCUE_FEATURES = (*FEATURES, *ALIGNED)


def whole_page(html) -> list[Block]:
    """Blocks of resiliparse's whole-page render (html: a string or an HTMLTree), same settings otherwise."""
    from resiliparse.extract.html2text import extract_plain_text

    return blocks(extract_plain_text(html, main_content=False, **MINIMAL_HTML))  # comments and post meta kept


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


def candidates(whole_bs: list[Block], main_bs: list[Block], span: int = SPAN, words: WordModel | None = None):
    """The whole-page blocks around the main content (within `span` blocks of it; all when it has no
    block in the whole page), their rescue features (word scores from `words`, else 0) and which of
    them are main content."""
    ex = aligned(whole_bs, main_bs)
    inm = ex[:, 0] > 0
    idx = np.flatnonzero(inm)
    if len(idx):
        lo, hi = max(int(idx[0]) - span, 0), int(idx[-1]) + span + 1
        whole_bs, ex, inm = whole_bs[lo:hi], ex[lo:hi], inm[lo:hi]
    if not whole_bs:
        return [], np.zeros((0, len(RESCUE_FEATURES)), np.float32), inm
    scores = words.score(whole_bs) if words else None
    return whole_bs, np.hstack([features(whole_bs, scores), ex.astype(np.float32)]), inm


def compose(main_bs, keep_main, whole_bs, inm, keep_whole) -> list[str]:
    """Kept texts in page order: every main block as `keep_main` says, each rescued whole-page block
    placed between the main blocks it sits between; with nothing rescued, the main blocks alone."""
    pos: dict[str, list[int]] = {}
    for j, b in enumerate(main_bs):
        pos.setdefault(b.text, []).append(j)
    out, j = [], 0
    for b, is_main, k in zip(whole_bs, inm, keep_whole):
        if is_main:
            xs = pos.get(b.text, ())
            at = bisect_left(xs, j)  # the first copy at or after j (a scan would be quadratic on a
            if at < len(xs):  # hostile page of one repeated text)
                out += [main_bs[x].text for x in range(j, xs[at] + 1) if keep_main[x]]
                j = xs[at] + 1
        elif k:
            out.append(b.text)
    return out + [main_bs[x].text for x in range(j, len(main_bs)) if keep_main[x]]


_RETRAIN = "run scripts/train_extract_rescue.py"


@lru_cache(maxsize=16)
def load_rescue(path: str = "", fold: str = "") -> BlockModel:
    """The rescue trees shipped in the package (or at `path`); `fold` ("aeb/0" ... "trafilatura-eval/4")
    picks a cross-fitted one from RESCUE_FOLDS_PATH (or `path`), as `load_model` does."""
    return pick_trees((RESCUE_PATH, RESCUE_FEATURES, "rescue model", _RETRAIN),
                      (RESCUE_FOLDS_PATH, RESCUE_FEATURES, "rescue model", _RETRAIN), path, fold)


def rescue_for(benchmark: str, url: str) -> BlockModel:
    """The rescue trees to score page `url` of `benchmark` with: trained without that page's site
    fold, like `model_for`'s main trees (use the two together)."""
    from pretrain.curate.extract_eval import site_fold

    return load_rescue(fold=f"{benchmark}/{site_fold(url)}")


def page_texts(
    htmls: list[str],
    mains: list[list[Block]],
    model: BlockModel | Strict | None = None,
    rescue: BlockModel | None = None,
    min_main_chars: int = MIN_MAIN_CHARS,
    rescued: list[int] | None = None,
    cols: list[np.ndarray] | None = None,
    titles: list[str] | None = None,
    trees: list | None = None,
) -> list[str]:
    """Main text of each page of a batch (`mains`: the blocks of each page's main-content render;
    `cols`: their body columns, extract_body.main_blocks; None: computed here from `htmls`):
    the blocks `model` keeps, and on pages whose main content is under `min_main_chars` characters
    (0: never) the whole-page blocks `rescue` brings back. One walk of each set of trees per batch.
    `rescued`, when given, receives the index of each page that got at least one block back;
    `titles`, when given, each page's headline (extract_blocks.headline: "" when none).
    `trees`: each page's parsed tree or None (extract_body.main_page), which the rescue renders
    instead of parsing the page again (the same blocks; a page whose main content is long needs none)."""
    m = model or load_model()
    if cols is None:
        from pretrain.curate.extract_body import body_columns, parse

        cols = [body_columns(parse(h), bs) for h, bs in zip(htmls, mains, strict=True)]
    flags = keep_flags(mains, m, cols)
    if titles is not None:
        titles.extend(headline(bs, f) for bs, f in zip(mains, flags, strict=True))
    out = ["\n".join(b.text for b, k in zip(bs, f) if k) for bs, f in zip(mains, flags)]
    short = [i for i, bs in enumerate(mains) if sum(len(b.text) for b in bs) < min_main_chars]
    if not short:
        return out
    # a second resiliparse pass (whole page) only here: 4-17% of pages
    pages = [whole_page(trees[i] if trees is not None and trees[i] is not None else htmls[i]) for i in short]
    cands = [(i, *candidates(whole_bs, mains[i], words=m.words)) for i, whole_bs in zip(short, pages)]
    xs = [x for _, whole_bs, x, _ in cands if whole_bs]
    if not xs:
        return out
    r = rescue or load_rescue()
    keep = r.keep_probability(np.concatenate(xs)) >= r.threshold
    at = 0
    for i, whole_bs, _, inm in cands:
        if whole_bs:
            keep_whole = keep[at : at + len(whole_bs)] & ~inm
            at += len(whole_bs)
            if rescued is not None and keep_whole.any():
                rescued.append(i)
            out[i] = "\n".join(compose(mains[i], flags[i], whole_bs, inm, keep_whole))
    return out
