"""Lists nested thousands deep (red team round 5): resiliparse indents each line inside a list by
two spaces per enclosing list, so a whole-page render (main content off, the deep-page fallback,
`blocks`' rescue) grows with the square of the depth. The truth for the count is resiliparse's own
output on small pages; the step drops a page past the bound before any render."""

from __future__ import annotations

import pytest

from pretrain.curate.document import Document
from pretrain.curate.extract import ExtractConfig, build_extract_step, extract_text, list_indent

SHAPES = {"ul li": "<ul><li>x{i}", "ul text": "<ul>x{i}", "ol li closed": "<ol><li>x{i}</li>",
          "upper case": "<UL><LI>x{i}",
          "three deep": "<div><ul><li>a{i}<ul><li>b{i}<ul><li>c</ul></ul></ul></div>"}


def _page(shape: str, n: int) -> str:
    items = "".join(SHAPES[shape].format(i=i) for i in range(n))
    return "<html><body><p>Intro.</p>" + items + "</body></html>"


def _doc(html: str) -> Document:
    d = Document(id="0", text=html)
    d.cache["html"] = True
    return d


@pytest.mark.parametrize("shape", SHAPES)
def test_the_count_follows_the_spaces_resiliparse_writes(shape):
    from resiliparse.parse.html import HTMLTree

    html = _page(shape, 600)
    out = extract_text(html, "resiliparse", main_content=False)
    spaces = sum(len(line) - len(line.lstrip(" ")) for line in out.split("\n"))
    counted = list_indent(HTMLTree.parse(html))
    assert 0.98 * spaces <= counted <= 2 * spaces + 100, (spaces, counted)


@pytest.mark.parametrize("backend, main", [("resiliparse", True), ("resiliparse", False), ("blocks", True)])
def test_a_page_of_lists_nested_thousands_deep_is_dropped_before_it_is_rendered(backend, main):
    """20,000 nested `<ul><li>` (180 KB, past max_depth, so rendered whole-page) wrote 400 MB of
    spaces; 4.9 MB of them (544,000 deep) did not end in 150 s. A page of ordinary nested lists
    beside it keeps the text resiliparse gives it."""
    deep, plain = _page("ul li", 20_000), _page("three deep", 50)
    step = build_extract_step(ExtractConfig(backend=backend, main_content=main))
    out = list(step(iter([_doc(deep), _doc(plain)])))
    assert step.stats["dropped.html_nested_lists"] == 1 and step.stats["kept"] == 1
    assert len(out) == 1 and ("b49" in out[0].text) == (not main)
    if backend == "resiliparse":
        assert out[0].text == extract_text(plain, "resiliparse", main_content=main)
