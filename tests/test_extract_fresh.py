"""The "fresh" set: hand-labelled non-article pages of three PyPI sdists (issue 19, session 14).

Its labels (src/pretrain/data/extract_fresh_labels.json) are checked against the pages themselves when
they are present (PRETRAIN_FRESH_PAGES=DIR, the folder where the sdists were unpacked; docs/extraction.md
gives the commands): every snippet occurs in resiliparse's whole-page text, so a typo cannot pass as a
label. The pages are not in the repository, so without them those tests skip; the labels' own shape
and the errors for a changed or missing page are checked either way.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from pretrain.curate.extract_eval import CRAWL_LABELS, FRESH_LABELS, fresh_pages
from pretrain.curate.site_lines import site


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


def _head() -> dict:
    return json.loads(FRESH_LABELS.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def pages():
    root = os.environ.get("PRETRAIN_FRESH_PAGES")
    if not root:
        pytest.skip("the fresh pages are not in the repository: set PRETRAIN_FRESH_PAGES to the folder where"
                    " the sdists of extract_fresh_labels.json were unpacked (docs/extraction.md)")
    return list(fresh_pages(Path(root)))


def test_labels_follow_the_protocol_on_sites_of_no_other_set():
    head = _head()
    assert {"protocol", "key", "source", "sdists"} <= set(head)
    ps = head["pages"]
    assert len(ps) == 57 and sum(p["no_main"] for p in ps) == 13
    for p in ps:
        assert p["keep"] or p["drop"], p["path"]
        assert not (p["no_main"] and p["keep"]), p["path"]  # a page without main content has nothing to keep
        assert not any(_norm(d) in _norm(k) for d in p["drop"] for k in p["keep"]), p["path"]
        assert len(p["keep"]) <= 4 and len(p["drop"]) <= 4, p["path"]
    sites = {site(p["url"]) for p in ps}
    crawl = {site(p["url"]) for p in json.loads(CRAWL_LABELS.read_text(encoding="utf-8"))["pages"]}
    assert len(sites) == 54 and not sites & crawl


def test_every_snippet_is_on_its_page(pages):
    from resiliparse.extract.html2text import extract_plain_text

    assert len(pages) == 57
    for key, html, keep, drop, _, _ in pages:
        whole = _norm(extract_plain_text(html, main_content=False))
        missing = [s for s in keep + drop if _norm(s) not in whole]
        assert not missing, (key, missing)


def test_a_changed_or_missing_page_is_an_error_naming_it(tmp_path):
    head = _head()
    first = head["pages"][0]
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({"sdists": head["sdists"], "pages": [first]}), encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(first["path"]) + ".*missing; get it with: pip download"):
        list(fresh_pages(tmp_path, labels))
    f = tmp_path / head["sdists"][first["package"]]["dir"] / first["path"]
    f.parent.mkdir(parents=True)
    f.write_bytes(b"<html><body><p>another version of the page</p></body></html>")
    with pytest.raises(ValueError, match=re.escape(first["path"]) + ": changed since it was labelled"):
        list(fresh_pages(tmp_path, labels))
    out = dict(first, path="../../outside.html")
    labels.write_text(json.dumps({"sdists": head["sdists"], "pages": [out]}), encoding="utf-8")
    with pytest.raises(ValueError, match="outside"):
        list(fresh_pages(tmp_path, labels))
