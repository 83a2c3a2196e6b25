"""Does "this block's text is a block of other pages of the same site" separate boilerplate? (issue 19)

A measurement on the labelled crawl pages (data/extract_crawl_labels.json), not a shipped pass: for
each site with at least two distinct pages (different HTML), each keep and drop snippet is found in
the page's whole-page blocks (resiliparse, main_content=False) and counted as repeated when one of
its blocks is a block of another distinct page of that site. Then a post-pass on each backend's
output: drop the output lines that are blocks of >= 1 (or >= 2) other distinct pages of the site,
and the crawl keep/drop before and after. A crawl-wide belt pass would count block hashes per site
over the whole crawl first; here the "crawl" is the 86 pages.

Run: .venv/bin/python bench/bench_extract_site_repeat.py  (seconds)
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections import Counter, defaultdict
from pathlib import Path

from pretrain.curate.extract import extract_text
from pretrain.curate.extract_eval import _norm, crawl_pages, site, snippet_scores
from pretrain.curate.extract_rescue import whole_page

SHARED = Path(
    os.environ.get("PRETRAIN_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data"
)


def by_site() -> dict[str, list[dict]]:
    sites: dict[str, list[dict]] = defaultdict(list)
    for _, html, keep, drop, _, url in crawl_pages(SHARED / "warc"):
        sites[site(url)].append(
            {
                "html": html,
                "sha": hashlib.sha256(html.encode("utf-8")).hexdigest(),
                "blocks": {_norm(b.text) for b in whole_page(html)},
                "keep": keep,
                "drop": drop,
            }
        )
    return sites


def elsewhere(page: dict, pages: list[dict]) -> Counter:
    """On how many other distinct pages (by HTML) of the site each block text occurs."""
    seen, out = {page["sha"]}, Counter()
    for q in pages:
        if q["sha"] not in seen:
            seen.add(q["sha"])
            out.update(q["blocks"])
    return out


def separation(sites: dict[str, list[dict]]) -> None:
    counts = Counter()
    for pages in sites.values():
        for p in pages:
            other = elsewhere(p, pages)
            for kind in ("keep", "drop"):
                for s in p[kind]:
                    hit = [b for b in p["blocks"] if _norm(s) in b]
                    if hit:
                        counts[kind, "of"] += 1
                        counts[kind, "repeated"] += any(other[b] for b in hit)
    for kind in ("keep", "drop"):
        n, r = counts[kind, "of"], counts[kind, "repeated"]
        print(f"  {kind} snippets in a block repeated on another page: {r} of {n} ({r / max(n, 1):.1%})")


def post_pass(sites: dict[str, list[dict]], backend: str, at_least: int) -> tuple[float, float, float, float]:
    """crawl keep and drop of `backend` before and after dropping the output lines that are blocks of
    >= `at_least` other distinct pages of the same site."""
    tot = Counter()
    for pages in sites.values():
        for p in pages:
            other = elsewhere(p, pages)
            out = extract_text(p["html"], backend)
            post = "\n".join(line for line in out.split("\n") if other[_norm(line)] < at_least)
            for name, text in (("base", out), ("post", post)):
                k, nk, d, nd = snippet_scores(text, p["keep"], p["drop"])
                tot[name, "k"], tot[name, "nk"] = tot[name, "k"] + k, tot[name, "nk"] + nk
                tot[name, "d"], tot[name, "nd"] = tot[name, "d"] + d, tot[name, "nd"] + nd
    return tuple(tot[n, x] / tot[n, "n" + x] for n in ("base", "post") for x in ("k", "d"))


def main() -> int:
    if not (SHARED / "warc").is_dir():
        print(f"no data at {SHARED}; nothing to measure")
        return 0
    sites = by_site()
    multi = {s: ps for s, ps in sites.items() if len({p["sha"] for p in ps}) >= 2}
    sizes = sorted(((len({p["sha"] for p in ps}), s) for s, ps in multi.items()), reverse=True)
    print(
        f"{len(sites)} sites; {len(multi)} with >= 2 distinct pages: "
        + ", ".join(f"{s} {n}" for n, s in sizes)
    )
    print("on those sites:")
    separation(multi)
    print("post-pass on each backend's output, all 86 pages (keep, drop: before -> after)")
    for backend in ("resiliparse", "blocks", "trafilatura"):
        for at_least in (1, 2):
            k0, d0, k1, d1 = post_pass(sites, backend, at_least)
            print(
                f"  {backend:<11} >= {at_least} other: keep {k0:.4f} -> {k1:.4f}, drop {d0:.4f} -> {d1:.4f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
