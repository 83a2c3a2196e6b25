"""The "crawl" benchmark: hand-labelled pages of the real crawl files under ../shared/data/warc.

Its labels (src/pretrain/data/extract_crawl_labels.json) are checked against the pages themselves:
every snippet occurs in resiliparse's whole-page text, so a typo cannot pass as a label; a page
whose HTML changed is an error, not a silent mis-score. Then each backend's floor on it.
"""

from __future__ import annotations

import json
import re

import pytest

from pretrain.curate.document import Document
from pretrain.curate.extract import ExtractConfig, build_extract_step, extract_text
from pretrain.curate.extract_body import main_blocks
from pretrain.curate.extract_eval import CRAWL_LABELS, crawl_pages, crawl_scores, page_headline
from pretrain.curate.extract_rescue import page_texts


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


@pytest.fixture(scope="module")
def pages(shared_data):
    return list(crawl_pages(shared_data / "warc"))


def test_labels_follow_the_protocol_and_every_snippet_is_on_its_page(pages):
    from resiliparse.extract.html2text import extract_plain_text

    head = json.loads(CRAWL_LABELS.read_text(encoding="utf-8"))
    assert {"protocol", "key", "source"} <= set(head) and len(head["protocol"]) >= 4
    assert len(pages) == len(head["pages"]) == 86  # dolma 37, ClueWeb 29, CC excerpt 16, warcio/whirlwind 4
    for key, html, keep, drop, no_main, _ in pages:
        whole = _norm(extract_plain_text(html, main_content=False))
        missing = [s for s in keep + drop if _norm(s) not in whole]
        assert not missing, (key, missing)
        assert drop or keep, key
        assert not (no_main and keep), key  # a page without main content has nothing to keep
        assert not any(_norm(d) in _norm(k) for d in drop for k in keep), key
    assert sum(p[4] for p in pages) == 13


def test_a_changed_or_missing_record_is_an_error_naming_it(shared_data, tmp_path):
    head = json.loads(CRAWL_LABELS.read_text(encoding="utf-8"))
    first = dict(head["pages"][0], sha256="0" * 64)
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps({"pages": [first]}), encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(first["record_id"]) + ".*HTML changed"):
        list(crawl_pages(shared_data / "warc", changed))
    gone = tmp_path / "gone.json"
    gone.write_text(json.dumps({"pages": [dict(first, record_id="<urn:uuid:not-there>")]}), encoding="utf-8")
    with pytest.raises(ValueError, match="not-there.*not found"):
        list(crawl_pages(shared_data / "warc", gone))


@pytest.fixture(scope="module")
def titled(shared_data):
    """The pages with their headline snippets apart (extract_eval.split_titles): (pages, titles)."""
    titles: dict = {}
    return list(crawl_pages(shared_data / "warc", titles=titles)), titles


def test_title_snippets_are_the_headlines_by_one_rule(pages, titled):
    # the rule moves 7 of the 204 must-keep snippets (5 blog-post titles of one site, a newsletter's
    # title, an <h1> lead sentence); nothing else changes
    new, titles = titled
    assert sum(map(len, titles.values())) == 7 and sum(len(p[2]) for p in new) == 197
    for (key, html, keep, drop, no_main, url), n in zip(pages, new, strict=True):
        assert n[0] == key and n[3:] == (drop, no_main, url)
        assert sorted(n[2] + titles[key]) == sorted(keep)
        assert all(" ".join(t.split()) in page_headline(html) for t in titles[key])


def _blocks(html: str, url: str) -> tuple[str, str]:
    """`blocks`' text and the title it hands to the document's metadata (the step's batches)."""
    bs, cols = main_blocks(html)
    titles: list[str] = []
    return page_texts([html], [bs], cols=[cols], titles=titles)[0], titles[0]


# Measured 2026-12-02 (session 10) on the 86 pages (197 keep snippets, 7 title snippets apart, 290
# drop snippets; 13 no_main pages), shipped models: keep / drop / no_main pages clean / titles found
# in the text or the document's title. Under the labels as made (the 7 titles must-keep, 204):
# resiliparse 0.9706 / 0.6724 / 2, blocks 0.9118 (0.9314 before its headline rule) / 0.8655 / 7,
# trafilatura 0.4559 / 0.8655 / 7. Deterministic: floors just under the figures.
CRAWL = {
    "resiliparse": (0.9695, 0.6724, 2 / 13, 7),
    "blocks": (0.9340, 0.8655, 7 / 13, 7),  # before the body columns + core decoder: 0.9216, 0.7586, 4
    # trafilatura with no memory of earlier pages (before 2026-12-02: 0.4510 / 0.9552 from one pass
    # in this order, its cross-page memory acting as a boilerplate remover that depended on order);
    # its text holds 1 of the 7 titles, and FineWeb's pipeline keeps no title beside the text
    "trafilatura": (0.4670, 0.8655, 7 / 13, 1),
}


@pytest.mark.parametrize("backend", sorted(CRAWL))
def test_crawl_floor(titled, backend):
    pages, titles = titled
    run = _blocks if backend == "blocks" else lambda html, url: extract_text(html, backend)
    got = crawl_scores(run, pages, titles)
    keep, drop, clean, found = CRAWL[backend]
    assert got["kept"] >= keep - 1e-3 and got["dropped"] >= drop - 1e-3, (backend, got)
    assert got["no_main_clean"] >= clean - 1e-9, (backend, got)
    assert round(got["title_kept"] * got["titles"]) >= found, (backend, got)


def test_trafilatura_text_does_not_depend_on_the_pages_before_it(pages):
    """The belt's contract (same corpus for any number of workers) needs each page's text to be a
    function of that page: trafilatura's deduplicate=True remembered segments across calls, so the
    shop's pages (one 398-character block on three of them) came out differently in another order."""
    shop = [p for p in pages if p[0].startswith(("resiliparse/clueweb-quirk", "warcio/"))]
    step = build_extract_step(ExtractConfig(backend="trafilatura"))  # one child for both orders

    def texts(order: list) -> dict[str, str]:
        docs = []
        for key, html, *_ in order:
            d = Document(id=key, text=html)
            d.cache["html"] = True
            docs.append(d)
        return {d.id: d.text for d in step(iter(docs))}

    try:
        forward, backward = texts(shop), texts(shop[::-1])
    finally:
        step.close()
    assert len(forward) >= 20
    assert forward == backward


def test_the_headline_reaches_the_corpus_as_its_documents_title(pages, shared_data, tmp_path):
    """`blocks` leaves a blog post's headline out of the text and hands it to the document's metadata:
    in the step's batches, in the timed child process, and through `pretrain curate` to the corpus
    files and their dataset card."""
    from pretrain.curate import io
    from pretrain.curate.executor import LocalExecutor
    from pretrain.curate.pipeline import CurateConfig, curate

    title = "Some things to know about Mastodon"  # maria-antoniak.github.io, its first <h1>
    key, html = next((k, h) for k, h, *_ in pages if page_headline(h) == title)
    for isolation in ("auto", "process"):
        step = build_extract_step(ExtractConfig(backend="blocks", isolation=isolation))
        d = Document(id=key, text=html)
        d.cache["html"] = True
        try:
            (got,) = step(iter([d]))
        finally:
            step.close()
        assert got.metadata == {"title": title} and title not in got.text.split("\n"), isolation
        assert "Mastodon" in got.text  # the post itself is there
    file, rid = key.split("#", 1)
    out = tmp_path / "out"
    cfg = CurateConfig(steps=("extract",), extract=ExtractConfig(backend="blocks"))
    curate([str(shared_data / "warc" / file)], out, cfg, executor=LocalExecutor(1))
    records = {r["id"]: r for p in sorted((out / "data").glob("*.jsonl.zst")) for r in io.read_jsonl_zst(p)}
    assert records[rid]["metadata"]["title"] == title and title not in records[rid]["text"].split("\n")
    assert sum(bool(r["metadata"]["title"]) for r in records.values()) >= 5  # the site's other posts too
    assert 'name: "title"' in (out / "README.md").read_text(encoding="utf-8")  # the card's schema has it
