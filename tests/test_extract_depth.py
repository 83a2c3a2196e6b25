"""The extract step's depth check on floods of tags (red team, session 14: 980,000 `<br>` cost 26-30 s,
most of it `tree_depth`'s Python walk). The truth is lexbor's own tree (`tree_depth` with no limit):
`depth_bound` must never be below it, on random tag soup and on the real pages; the bombs must reach
their verdict without the walk, or with at most WALK_ELEMENTS of it (work counted, not seconds)."""

from __future__ import annotations

import random

import pytest

from pretrain.curate import extract
from pretrain.curate.document import Document
from pretrain.curate.extract import ExtractConfig, build_extract_step, depth_bound, nesting_depth, tree_depth

# Tags that nest in ways the tokenizer hides: implied table parts, li/dd closing only up to a
# special element, option/ruby in body, formatting clones (reconstruction, adoption agency),
# foreign content where void names nest, end tags the parser ignores, comments and raw text.
SOUP = ["<li>", "<dd>", "<dt>", "<p>", "</p>", "<td>", "<tr>", "<table>", "</table>", "<b>", "</b>",
        "<i>", "</i>", "<a href=x>", "</a>", "<nobr>", "<div>", "</div>", "<span>", "</span>", "<svg>",
        "<math>", "<mi>", "<foreignObject>", "<source>", "<wbr>", "<br>", "</br>", "<option>",
        "<optgroup>", "<select>", "<rt>", "<rb>", "<ruby>", "<button>", "<caption>", "<template>",
        "</template>", "<col>", "<colgroup>", "<tbody>", "<th>", "<ul>", "</li>", "<font color=r>",
        "<applet>", "<object>", "<marquee>", "<form>", "<b id=1>", "<b id=2>", "<u>", "</u>", "x",
        "<!--", "-->", "<script>", "</script>", "<textarea>", "<h1>", "</h1>", "<image>", "<html>",
        "<body>", "<LI>", "<P >", "<p/>", "<desc>", "<mtext>", "<br-x>", "<p\u212a>"]

BACKENDS = ["resiliparse", "blocks", "blocks+strict"]  # the default, and maybe soon (extract.strict)

# Shapes whose depth the tag count (nesting_depth) misses: each nests in lexbor's tree.
NESTING = {"li dd": "<li><dd>", "option optgroup": "<option><optgroup>", "ruby": "<rb><rtc>",
           "table cell": "<table><td>", "svg void": "<svg><wbr>", "custom p": "<p-x>"}


def test_depth_bound_is_never_below_lexbors_depth_on_random_tag_soup():
    rng = random.Random(14)
    for _ in range(1500):
        vocab = rng.sample(SOUP, rng.randint(2, 12))
        html = "".join(rng.choice(vocab) for _ in range(rng.choice([5, 20, 100, 400])))
        assert tree_depth(html, 10**9) <= depth_bound(html), html


@pytest.mark.parametrize("shape", NESTING)
def test_depth_bound_covers_the_shapes_the_tag_count_misses(shape):
    html = NESTING[shape] * 300
    depth = tree_depth(html, 10**9)
    assert nesting_depth(html) < depth <= depth_bound(html) and depth >= 300


def test_depth_bound_holds_on_the_real_pages(shared_data):
    from pretrain.curate.extract_eval import aeb_pages, trafilatura_pages

    pages = [h for _, h, _ in aeb_pages(shared_data / "html" / "scrapinghub-aeb")]
    pages += [h for _, h, _, _ in trafilatura_pages(shared_data / "html" / "trafilatura-eval", subset=False)]
    big = [h for h in pages if h.count("<") > extract.DEPTH_SCAN_FROM]
    assert len(big) >= 10  # the pages where the check runs at all
    for html in big:
        assert tree_depth(html, 10**9) <= depth_bound(html)


def _doc(html: str) -> Document:
    d = Document(id="0", text=html)
    d.cache["html"] = True
    return d


def _run(backend: str, html: str, monkeypatch) -> tuple[list[Document], dict, list]:
    walks: list[tuple] = []
    real = extract.tree_depth

    def counted(page, limit, max_elements=None):
        walks.append((limit, max_elements))
        return real(page, limit, max_elements)

    monkeypatch.setattr(extract, "tree_depth", counted)
    step = build_extract_step(ExtractConfig(backend=backend.removesuffix("+strict"),
                                            strict=backend.endswith("+strict")))
    out = list(step(iter([_doc(html)])))
    return out, {k: v for k, v in step.stats.items() if k != "seconds" and v}, walks


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bomb, reason", [("<br>\n", "dropped.extract_empty"), ("<p>Plain words x.", None),
                                          ("<hr><img src=a><input>", "dropped.extract_empty")])
def test_a_flood_of_flat_tags_is_decided_without_walking_the_tree(backend, bomb, reason, monkeypatch):
    html = "<html><body>" + bomb * 20_000
    assert depth_bound(html) <= 1000 < html.count("<")  # shallow by the start tags alone
    out, stats, walks = _run(backend, html, monkeypatch)
    assert walks == [] and "deep_whole_page" not in stats
    if reason:
        assert out == [] and stats[reason] == 1
    else:
        assert out[0].text.count("x") > 1000  # the text is there: main content, not whole-page


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_flat_flood_of_divs_stops_the_walk_at_its_budget_and_goes_whole_page(backend, monkeypatch):
    monkeypatch.setattr(extract, "WALK_ELEMENTS", 5000)
    html = "<div>x</div>" * 20_000
    assert tree_depth(html, 1000) == 3 and tree_depth(html, 1000, 5000) == 1001  # unproven past 5,000
    out, stats, walks = _run(backend, html, monkeypatch)
    assert walks == [(1000, 5000)] and stats["deep_whole_page"] == 1
    assert out[0].text.count("x") == 20_000


@pytest.mark.parametrize("backend", BACKENDS)
def test_nested_spans_are_found_deep_by_the_tag_count_without_the_walk(backend, monkeypatch):
    out, stats, walks = _run(backend, "<span>" * 20_000 + "deep text", monkeypatch)
    assert walks == [] and stats["deep_whole_page"] == 1 and out[0].text.strip() == "deep text"


def test_a_million_attributes_on_one_tag_are_one_tag(monkeypatch):
    html = "<div " + "a " * 1_000_000 + ">text</div>"
    assert depth_bound(html) == 8 + 5  # one <div>
    out, stats, walks = _run("resiliparse", html, monkeypatch)
    assert walks == [] and out[0].text.strip() == "text"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_page_of_more_tags_than_main_content_is_given_goes_whole_page_unmeasured(backend, monkeypatch):
    # 500,000 <p> (2 MB) cost `blocks` 21 s of its per-line Python; past MAIN_CONTENT_TAGS a page
    # gets the linear whole-page render, without depth_bound, the tag count or the walk
    monkeypatch.setattr(extract, "MAIN_CONTENT_TAGS", 10_000)
    measured: list[str] = []
    for name in ("depth_bound", "nesting_depth"):
        monkeypatch.setattr(extract, name, lambda html, *a, name=name: measured.append(name) or 0)
    html = "<p>Plain words x." * 20_000
    out, stats, walks = _run(backend, html, monkeypatch)
    assert walks == measured == [] and stats["deep_whole_page"] == 1
    assert out[0].text == extract.extract_text(html, main_content=False)
