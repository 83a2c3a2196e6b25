"""Scoring HTML extraction against benchmarks with known answers (used by tests and bench/).

- ScrapingHub's article-extraction benchmark (AEB): token-level precision, recall and F1 of the
  extracted text against the true article body, per page, then averaged over pages (the
  benchmark's own protocol scores bags of tokens; we lower-case and split on word characters).
- trafilatura's evaluation set: per page, snippets that must be kept (`with`) and must not be
  (`without`); we report the share of must-keep snippets found and of must-drop snippets absent,
  after collapsing whitespace on both sides.

Both sets are split into 5 folds by site (`site_fold`) so that a learnt extractor can be scored on
each page by a model that never saw a page of the same site (grouped cross-fitting).
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

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


def site(url: str) -> str:
    """The site a benchmark page comes from: its URL's host without a leading "www.".

    trafilatura-eval names a few pages `hard::<host>-<words>.html` instead of by URL; their site is
    that host (`hard::blog.python.org.html` -> `blog.python.org`).
    """
    if "://" in url:
        host = (urlsplit(url).hostname or "").lower()
    else:
        host = url.rsplit("::", 1)[-1].removesuffix(".html").split("-", 1)[0].lower()
    return host.removeprefix("www.")


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
