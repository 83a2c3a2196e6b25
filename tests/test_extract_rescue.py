"""The rescue pass of the `blocks` extractor (curate/extract_rescue.py): it changes nothing where
resiliparse's main content is whole, and brings an article back where main content loses it.

Benchmark floors use the cross-fitted trees of both models (each set scored by trees that never saw it).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from pretrain.curate.extract_blocks import blocks, extract_blocks_text, load_model, render
from pretrain.curate.extract_eval import aeb_pages, snippet_scores, token_prf, trafilatura_pages
from pretrain.curate.extract_rescue import (
    MIN_MAIN_CHARS,
    RESCUE_FEATURES,
    aligned,
    compose,
    extract_rescue_text,
    load_rescue,
    whole_page,
)

PARAS = [
    f"Paragraph {i}: the delta forms when the river deposits sand and silt over many years, "
    "slowly building new land where the water meets the sea."
    for i in range(6)
]


def genesis_page(wrapper: str) -> str:
    """The page layout of the Genesis WordPress theme: the article sits in `div.content-sidebar-wrap`."""
    nav = "<nav>" + " ".join(f"<a href='/s{i}'>Section {i}</a>" for i in range(8)) + "</nav>"
    article = (
        "<main class='content'><article class='post type-post entry'><h1>The river delta</h1>"
        "<div class='entry-content'>" + "".join(f"<p>{p}</p>" for p in PARAS) + "</div></article></main>"
    )
    return (
        "<html><body><div class='site-container'><header class='site-header'>" + nav + "</header>"
        f"<div class='site-inner'><div class='{wrapper}'>" + article + "</div></div>"
        "<footer class='site-footer'><p>Copyright 2024 Example Corp. All rights reserved.</p></footer>"
        "</div></body></html>"
    )


def test_article_that_main_content_drops_is_rescued():
    lost, whole = genesis_page("content-sidebar-wrap"), genesis_page("content-wrap")
    # resiliparse's main content drops the whole article for one class word on a wrapper...
    assert blocks(render(lost)) == [] and len(blocks(render(whole))) == 7
    assert extract_blocks_text(lost) == ""
    # ...the rescue pass brings the article back and still drops navigation and footer
    text = extract_rescue_text(lost)
    assert all(p in text for p in PARAS), text
    assert "Section 3" not in text and "All rights reserved" not in text
    assert extract_rescue_text(whole) == extract_blocks_text(whole)  # main content whole: no change


def test_alignment_marks_what_resiliparse_main_content_has():
    html = genesis_page("content-wrap")
    main_bs, whole_bs = blocks(render(html)), whole_page(html)
    ex = aligned(whole_bs, main_bs)
    assert [b.text for b, m in zip(whole_bs, ex[:, 0]) if m] == [b.text for b in main_bs]
    assert ex[0, 0] == 0 and ex[0, 2] > 0  # the navigation is not main content, and is away from it
    assert aligned([], main_bs).shape == (0, 6)
    # composing: main blocks as decided, a rescued block in its page position
    keep_whole = [not m and "Copyright" in b.text for b, m in zip(whole_bs, ex[:, 0])]
    out = compose(main_bs, [True] * len(main_bs), whole_bs, ex[:, 0] > 0, keep_whole)
    assert out == [b.text for b in main_bs] + ["Copyright 2024 Example Corp. All rights reserved."]


def test_bad_input_and_a_model_for_other_features(tmp_path):
    assert extract_rescue_text("") == ""
    assert extract_rescue_text("<html><body><nav><a href='/'>Home</a></nav></body></html>") == ""
    assert load_rescue().feature.max() < len(RESCUE_FEATURES)
    bad = tmp_path / "r.json"
    bad.write_text('{"features": ["other"], "model": {}}')
    with pytest.raises(ValueError, match="r.json.*train_extract_rescue"):
        load_rescue(str(bad))


# --- real benchmarks: floors just under the figures measured on these subsets


def test_unchanged_where_main_content_is_long_and_off_switch(shared_data):
    pages = list(itertools.islice(aeb_pages(shared_data / "html" / "scrapinghub-aeb"), 40))
    for _, html, _ in pages:
        base = extract_blocks_text(html)
        assert extract_rescue_text(html, min_main_chars=0) == base
        if sum(len(b.text) for b in blocks(render(html))) >= MIN_MAIN_CHARS:
            assert extract_rescue_text(html) == base


def test_trafilatura_eval_keeps_more_drops_as_much(shared_data):
    """With the trees that never saw trafilatura-eval: measured 1,862 -> 1,865 of 2,012 must-keep
    snippets kept, 1,708 -> 1,707 of 2,021 must-drop dropped (5 pages changed). (Grouped by site,
    with trafilatura-eval's other folds in training, the gain is +18: docs/extraction.md.)"""
    fold = "without_trafilatura_eval"
    model, rescue = load_model(fold=fold), load_rescue(fold=fold)
    base, res = np.zeros(4), np.zeros(4)
    for _, html, keep, drop in trafilatura_pages(shared_data / "html" / "trafilatura-eval"):
        base += snippet_scores(extract_blocks_text(html, model), keep, drop)
        res += snippet_scores(extract_rescue_text(html, model, rescue), keep, drop)
    assert res[0] >= base[0] + 2 and res[2] >= base[2] - 2, (base, res)
    assert res[0] / res[1] >= 0.926, res


def test_aeb_f1_not_lower(shared_data):
    fold = "without_aeb"
    model, rescue = load_model(fold=fold), load_rescue(fold=fold)
    pages = list(aeb_pages(shared_data / "html" / "scrapinghub-aeb"))
    base = sum(token_prf(extract_blocks_text(h, model), t)[2] for _, h, t in pages) / len(pages)
    res = sum(token_prf(extract_rescue_text(h, model, rescue), t)[2] for _, h, t in pages) / len(pages)
    assert res >= base - 0.001 and res >= 0.945, (base, res)  # measured: 0.9463 both
