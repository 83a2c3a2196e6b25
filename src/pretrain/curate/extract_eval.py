"""Scoring HTML extraction against benchmarks with known answers (used by tests and bench/).

- ScrapingHub's article-extraction benchmark (AEB): token-level precision, recall and F1 of the
  extracted text against the true article body, per page, then averaged over pages (the
  benchmark's own protocol scores bags of tokens; we lower-case and split on word characters).
- trafilatura's evaluation set: per page, snippets that must be kept (`with`) and must not be
  (`without`); we report the share of must-keep snippets found and of must-drop snippets absent,
  after collapsing whitespace on both sides.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

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


def aeb_pages(root: Path) -> Iterator[tuple[str, str, str]]:
    """(key, html, true article body) for each page of the AEB folder, sorted by key."""
    truth = json.loads((root / "ground-truth.json").read_text(encoding="utf-8"))
    from pretrain.curate.readers import decode_html

    for key in sorted(truth):
        f = root / "html" / f"{key}.html.gz"
        if f.exists():
            yield key, decode_html(gzip.decompress(f.read_bytes())), truth[key]["articleBody"]


def trafilatura_pages(root: Path, subset: bool = True) -> Iterator[tuple[str, str, list[str], list[str]]]:
    """(file, html, must_keep, must_drop) for each page of trafilatura's evaluation set."""
    name = "evaldata-subset.json" if subset else "evaldata-full.json"
    data = json.loads((root / name).read_text(encoding="utf-8"))
    from pretrain.curate.readers import decode_html

    for _url, item in sorted(data.items()):
        f = root / "html" / f"{Path(item['file']).stem}.html.gz"
        if not f.exists():
            f = root / "html" / (item["file"] + ".gz")
        if f.exists():
            yield (
                item["file"],
                decode_html(gzip.decompress(f.read_bytes())),
                item.get("with", []),
                item.get("without", []),
            )


def _norm(s: str) -> str:
    return _SPACE.sub(" ", s).strip()


def snippet_scores(text: str, keep: list[str], drop: list[str]) -> tuple[int, int, int, int]:
    """(kept, of must-keep, dropped, of must-drop) for one page."""
    t = _norm(text)
    kept = sum(1 for s in keep if _norm(s) in t)
    dropped = sum(1 for s in drop if _norm(s) not in t)
    return kept, len(keep), dropped, len(drop)
