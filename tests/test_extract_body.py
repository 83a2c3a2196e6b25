"""The body container columns (curate/extract_body.py) and the core decoder (extract_blocks.core_flags)
of the `blocks` extractor: found and aligned as an independent parser finds them, the alignment
equal to a plain substring test and bounded, and the decoder the plain threshold on a page without
a confident core."""

from __future__ import annotations

import time

import numpy as np
import pytest

from pretrain.curate import extract_body
from pretrain.curate.extract_blocks import (
    BLOCK_FEATURES,
    BODY_COLUMNS,
    FEATURES,
    Block,
    blocks,
    core_flags,
    extract_blocks_text,
    load_model,
    render,
)
from pretrain.curate.extract_body import BODY_WORDS, _inside, body_columns, main_blocks, parse

PARAS = [
    f"Paragraph {i}: the delta forms when the river deposits sand and silt over many years, "
    "slowly building new land where the water meets the sea."
    for i in range(4)
]
PAGE = (
    "<html><body><div class='main'><h1>The river delta</h1><p>By A. Writer</p>"
    "<div class='post Entry-Content'>" + "".join(f"<p>{p}</p>" for p in PARAS)
    + "<p>Line one<br>line two</p></div>"
    "<p>Related: the estuary, the lagoon and the sandbar, three stories from our archive.</p>"
    "</div></body></html>"
)


def test_container_found_and_blocks_aligned_on_a_small_page():
    bs, cols = main_blocks(PAGE)
    assert [b.text for b in bs] == [b.text for b in blocks(render(PAGE))]  # one parse, same blocks
    inside = {b.text: bool(c[0]) for b, c in zip(bs, cols)}
    assert all(inside[p] for p in PARAS) and inside["Line one line two"]  # (a <br> space the DOM has not)
    assert not inside["The river delta"] and not inside["By A. Writer"]
    assert not any(v for t, v in inside.items() if t.startswith("Related"))
    assert (cols[:, 1] == 1).all()
    chars = np.array([len(b.text) for b in bs])
    assert cols[0, 2] == pytest.approx(chars[cols[:, 0] > 0].sum() / chars.sum())
    no_container = PAGE.replace("Entry-Content", "story")
    bs, cols = main_blocks(no_container)
    assert bs and cols.shape == (len(bs), len(BODY_COLUMNS)) and not cols.any()
    assert body_columns(parse(PAGE), []).shape == (0, 3)


def _lxml_inside(html: str, bs: list[Block]) -> list[bool] | None:
    """The same container found by lxml (libxml2), an independent parser and matcher: the first
    element in document order whose itemprop is articleBody or whose class or id holds a body word."""
    import lxml.html

    for el in lxml.html.fromstring(html).iter():
        if not isinstance(el.tag, str):
            continue
        attrs = [(el.get("class") or "").lower(), (el.get("id") or "").lower()]
        body = (el.get("itemprop") or "").lower() == "articlebody"
        if body or any(w in a for w in BODY_WORDS for a in attrs):
            ref = "".join(el.text_content().split())
            return ["".join(b.text.split()) in ref for b in bs]
    return None


def test_container_on_real_pages_matches_an_independent_parser(shared_data):
    pytest.importorskip("lxml.html")
    from pretrain.curate.extract_eval import aeb_pages

    pages = sorted(aeb_pages(shared_data / "html" / "scrapinghub-aeb"), key=lambda p: len(p[1]))[:12]
    found = 0
    for key, html, _ in pages:
        bs, cols = main_blocks(html)
        want = _lxml_inside(html, bs)
        if want is None:
            assert not cols.any(), key
            continue
        found += 1
        assert cols[:, 1].all() and list(cols[:, 0] > 0) == want, key
    assert found >= 3  # a container on 120 of the 181 pages


def test_alignment_is_a_substring_test_in_any_order():
    rng = np.random.default_rng(0)
    ref = "".join(rng.choice(list("abc"), 400))
    needles = [ref[i : i + n] for i, n in zip(rng.integers(0, 390, 60), rng.integers(1, 9, 60))]
    needles += ["".join(rng.choice(list("abcd"), 6)) for _ in range(40)]  # some not in it
    rng.shuffle(needles)
    assert _inside(ref, needles) == [s in ref for s in needles]


def test_alignment_is_bounded_on_a_hostile_page(monkeypatch):
    # 20,000 blocks none of which is in a 200,000-character container: without the budget, 4 * 10^9
    # characters scanned; with it, the blocks past the budget count as outside
    monkeypatch.setattr(extract_body, "BODY_SCAN_CHARS", 2_000_000)
    ref = "x" * 200_000
    t = time.process_time()
    got = _inside(ref, [f"y{i}" for i in range(20_000)])
    assert time.process_time() - t < 2.0 and not any(got)
    assert _inside(ref, ["xx"]) == [True]


def test_core_decoder_without_a_core_is_the_plain_threshold():
    p = np.array([0.97, 0.55, 0.45, 0.62, 0.99])
    chars = np.array([500, 40, 300, 120, 60])  # the 0.99 block is short: no core on this page
    assert core_flags(p, chars).tolist() == (p >= 0.5).tolist()
    assert core_flags(p, chars, 0.6).tolist() == (p >= 0.6).tolist()
    # with a core (p >= 0.98, >= 80 characters at index 3): keep at 0.5 from one block before to
    # one after it, at 0.6 outside
    p = np.array([0.58, 0.55, 0.52, 0.985, 0.51, 0.57, 0.61])
    chars = np.full(7, 200)
    assert core_flags(p, chars).tolist() == [False, False, True, True, True, False, True]


def test_shipped_trees_use_the_body_columns():
    model = load_model()
    assert len(BLOCK_FEATURES) == len(FEATURES) + 3
    assert model.feature.max() < len(BLOCK_FEATURES)
    assert (model.feature[model.split < np.inf] >= len(FEATURES)).any()  # the trees split on them
    assert extract_blocks_text(PAGE).count("Paragraph") == len(PARAS)
