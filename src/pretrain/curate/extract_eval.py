"""Scoring HTML extraction against benchmarks with known answers (used by tests and bench/).

- ScrapingHub's article-extraction benchmark (AEB): token-level precision, recall and F1 of the
  extracted text against the true article body, per page, then averaged over pages (the
  benchmark's own protocol scores bags of tokens; we lower-case and split on word characters).
- trafilatura's evaluation set: per page, snippets that must be kept (`with`) and must not be
  (`without`); we report the share of must-keep snippets found and of must-drop snippets absent,
  after collapsing whitespace on both sides.
- "crawl": the HTML responses of the real crawl files under ../shared/data/warc (not derived/),
  labelled the same way by hand (data/extract_crawl_labels.json, its protocol in the file and in
  docs/extraction.md), many of them pages with no main content at all (`no_main`): there we also
  report the share of pages whose extraction is empty or holds none of their must-drop snippets.
- "fresh": non-article pages (products, listings, home, about, docs, legal pages) shipped as test
  fixtures in PyPI sdists, from sites in none of the sets above, labelled by the crawl set's protocol
  (data/extract_fresh_labels.json); the pages are not in the repository: `fresh_pages(DIR)` reads them
  from the folder where the sdists named in the file were unpacked.

Both sets are split into 5 folds by site (`site_fold`) so that a learnt extractor can be scored on
each page by a model that never saw a page of the same site (grouped cross-fitting).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

from pretrain.curate.site_lines import site  # noqa: F401 (benchmarks group pages by site)

_TOKEN = re.compile(r"\w+", re.UNICODE)
_SPACE = re.compile(r"\s+")


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def token_prf(pred: str, truth: str) -> tuple[float, float, float]:
    """Bag-of-tokens precision, recall, F1 of `pred` against `truth` (1.0 when both are empty)."""
    p, t = Counter(tokens(pred)), Counter(tokens(truth))
    if not p and not t:
        return 1.0, 1.0, 1.0
    common = sum((p & t).values())
    precision = common / sum(p.values()) if p else 0.0
    recall = common / sum(t.values()) if t else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def aeb_pages(root: Path, with_url: bool = False) -> Iterator[tuple]:
    """(key, html, true article body) for each page of the AEB folder, sorted by key.

    `with_url=True` appends the page's URL (ground-truth.json's `url`) to each tuple.
    """
    truth = json.loads((root / "ground-truth.json").read_text(encoding="utf-8"))
    from pretrain.curate.readers import decode_html

    for key in sorted(truth):
        f = root / "html" / f"{key}.html.gz"
        if f.exists():
            page = (key, decode_html(gzip.decompress(f.read_bytes())), truth[key]["articleBody"])
            yield (*page, truth[key].get("url", "")) if with_url else page


def trafilatura_pages(root: Path, subset: bool = True, with_url: bool = False) -> Iterator[tuple]:
    """(file, html, must_keep, must_drop) for each page of trafilatura's evaluation set.

    `with_url=True` appends the page's key in the set's JSON: its URL, or for a few pages a name
    such as `hard::blog.python.org.html` (see `site`).
    """
    name = "evaldata-subset.json" if subset else "evaldata-full.json"
    data = json.loads((root / name).read_text(encoding="utf-8"))
    from pretrain.curate.readers import decode_html

    for url, item in sorted(data.items()):
        f = root / "html" / f"{Path(item['file']).stem}.html.gz"
        if not f.exists():
            f = root / "html" / (item["file"] + ".gz")
        if f.exists():
            page = (
                item["file"],
                decode_html(gzip.decompress(f.read_bytes())),
                item.get("with", []),
                item.get("without", []),
            )
            yield (*page, url) if with_url else page


def site_fold(url: str, k: int = 5) -> int:
    """Which of `k` folds a page's site is in (crc32: the same in every process, unlike hash())."""
    return zlib.crc32(site(url).encode("utf-8")) % k


def _norm(s: str) -> str:
    return _SPACE.sub(" ", s).strip()


def snippet_scores(text: str, keep: list[str], drop: list[str]) -> tuple[int, int, int, int]:
    """(kept, of must-keep, dropped, of must-drop) for one page."""
    t = _norm(text)
    kept = sum(1 for s in keep if _norm(s) in t)
    dropped = sum(1 for s in drop if _norm(s) not in t)
    return kept, len(keep), dropped, len(drop)


CRAWL_LABELS = Path(__file__).resolve().parents[1] / "data" / "extract_crawl_labels.json"


def crawl_records(root: Path) -> Iterator[tuple[str, object]]:
    """(file relative to `root`, Document) for each HTML response of the WARC/ARC files under `root`
    (../shared/data/warc), file by file in sorted order; derived/ is left out (AEB's pages again)."""
    from pretrain.curate.readers import ReaderConfig, read_documents

    files = sorted(
        p for p in root.rglob("*")
        if p.is_file() and "derived" not in p.relative_to(root).parts
        and p.name.endswith((".warc", ".warc.gz", ".arc.gz"))
    )
    for f in files:
        for d in read_documents(f, ReaderConfig()):
            if d.cache.get("html"):
                yield f.relative_to(root).as_posix(), d


def page_headline(html: str) -> str:
    """The text of a page's first `<h1>` that has any, whitespace collapsed ("" when none)."""
    from resiliparse.parse.html import HTMLTree

    tree = HTMLTree.parse(html)
    for e in tree.document.query_selector_all("h1") if tree.document else ():
        if t := _norm(e.text):
            return t
    return ""


def split_titles(html: str, keep: list[str]) -> tuple[list[str], list[str]]:
    """(must-keep snippets, title snippets): a must-keep snippet that lies inside the page's headline
    (`page_headline`) is the title, which the field puts in a document's metadata, not its text
    (issue 19, session 10, docs/extraction.md); scored apart (`crawl_scores`' `titles`)."""
    head = page_headline(html)
    title = [k for k in keep if head and _norm(k) in head]
    return [k for k in keep if k not in title], title


def crawl_pages(root: Path, labels: Path = CRAWL_LABELS, titles: dict | None = None) -> Iterator[tuple]:
    """(key, html, must_keep, must_drop, no_main, url) for each labelled crawl page under `root`.

    `titles`: None, the labels as made (a headline snippet is must-keep); a dict, the headline
    snippets (`split_titles`) leave must_keep and go to `titles[key]`, for `crawl_scores`.

    A labelled record that is missing, or whose HTML no longer hashes to the labelled SHA-256, is a
    ValueError naming the file and the record: labels of a changed page would mis-score silently.
    Records without a label (a file added later) are not yielded.
    """
    want = {(p["file"], p["record_id"]): p for p in json.loads(labels.read_text(encoding="utf-8"))["pages"]}
    seen = set()
    for rel, d in crawl_records(root):
        page = want.get((rel, d.id))
        if page is None:
            continue
        if hashlib.sha256(d.text.encode("utf-8")).hexdigest() != page["sha256"]:
            raise ValueError(
                f"{root / rel}: record {d.id} ({d.url}): HTML changed since it was labelled in {labels.name}"
            )
        seen.add((rel, d.id))
        keep = page["keep"]
        if titles is not None:
            keep, titles[f"{rel}#{d.id}"] = split_titles(d.text, keep)
        yield f"{rel}#{d.id}", d.text, keep, page["drop"], page["no_main"], d.url or ""
    if missing := sorted(set(want) - seen):
        rel, rid = missing[0]
        raise ValueError(
            f"{root / rel}: record {rid} labelled in {labels.name} not found ({len(missing)} missing)"
        )


FRESH_LABELS = Path(__file__).resolve().parents[1] / "data" / "extract_fresh_labels.json"


def fresh_pages(root: Path, labels: Path = FRESH_LABELS, titles: dict | None = None) -> Iterator[tuple]:
    """(key, html, must_keep, must_drop, no_main, url) for each labelled "fresh" page under `root`, the
    folder where the sdists named in `labels` were unpacked (each in its own `dir`); `titles` as in
    `crawl_pages`. The HTML is decoded as the readers decode a page without an HTTP charset.

    A missing page, or one whose bytes no longer hash to the labelled SHA-256 (another version of the
    sdist), is a ValueError naming the file and how to get the right one.
    """
    from pretrain.curate.readers import decode_html

    head = json.loads(labels.read_text(encoding="utf-8"))
    for page in head["pages"]:
        sdist = head["sdists"][page["package"]]
        if sdist["version"] != page["version"]:
            raise ValueError(f"{labels.name}: {page['path']}: version {page['version']} is not the sdist's")
        f = root / sdist["dir"] / page["path"]
        if not f.resolve().is_relative_to(root.resolve()):  # a label is data too: no path out of root
            raise ValueError(f"{labels.name}: {page['path']}: outside {root}")
        if not f.is_file():
            raise ValueError(f"{f}: labelled in {labels.name} but missing; get it with: {sdist['get']}")
        body = f.read_bytes()
        if hashlib.sha256(body).hexdigest() != page["sha256"]:
            name = f"{page['package']} {page['version']}"
            raise ValueError(f"{f}: changed since it was labelled in {labels.name} (not {name}?)")
        key, html, keep = f"{sdist['dir']}/{page['path']}", decode_html(body), page["keep"]
        if titles is not None:
            keep, titles[key] = split_titles(html, keep)
        yield key, html, keep, page["drop"], page["no_main"], page["url"]


def crawl_scores(
    extract: Callable[[str, str], str | tuple[str, str]], pages: list[tuple], titles: dict | None = None
) -> dict[str, float]:
    """keep / drop shares over all snippets of the crawl pages, and on `no_main` pages the share whose
    extraction is empty or holds none of their must-drop snippets (`no_main_clean`). With `titles`
    (crawl_pages'), also `title_kept`: the share of title snippets found in the text or in the
    title `extract` returns beside it (a (text, title) pair; a plain text has no title)."""
    kept = total_keep = dropped = total_drop = clean = n_none = t_kept = t_total = 0
    for key, html, keep, drop, no_main, url in pages:
        text = extract(html, url)
        text, title = text if isinstance(text, tuple) else (text, "")
        k, nk, d, nd = snippet_scores(text, keep, drop)
        if titles is not None:
            t_total += len(titles[key])
            t_kept += sum(_norm(s) in _norm(text) or _norm(s) in _norm(title) for s in titles[key])
        kept, total_keep, dropped, total_drop = kept + k, total_keep + nk, dropped + d, total_drop + nd
        if no_main:
            n_none += 1
            clean += not text.strip() or d == nd
    return {
        "kept": kept / max(total_keep, 1),
        "dropped": dropped / max(total_drop, 1),
        "no_main_clean": clean / max(n_none, 1),
        "pages": len(pages),
        "no_main": n_none,
        **({"title_kept": t_kept / max(t_total, 1), "titles": t_total} if titles is not None else {}),
    }
