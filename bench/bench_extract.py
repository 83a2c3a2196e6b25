"""Benchmark and evaluation of HTML extraction backends (resiliparse, blocks, trafilatura).

Prints, per backend, on the same pages and in the same run:
- ScrapingHub AEB (181 pages): mean token precision / recall / F1 against the true article body;
- trafilatura's evaluation set (679 pages): share of must-keep snippets kept, must-drop dropped;
- "crawl" (86 hand-labelled pages of ../shared/data/warc, data/extract_crawl_labels.json): the same
  shares, then on its 13 pages with no main content the share whose output is empty or holds none of
  their must-drop snippets, and the keep/drop shares averaged over sites (29 pages are one shop's);
- speed per core (CPU seconds of this process and its children): pages/s and MB/s of HTML
  (extraction only, in-process), and pages/s through the `extract` step with its child-process
  time bound (the child's start-up, about a second for trafilatura's imports, included).

`blocks` is scored on each AEB and trafilatura-eval page by a cross-fitted model that never learnt
from a page of that page's site (grouped 5-fold cross-fitting within each benchmark, `model_for`; see
scripts/train_extract_blocks.py), and its rescue pass by the rescue trees of the same fold
(`rescue_for`); its speed is the shipped models'. `blocks (no rescue)` is the same backend with
`extract.rescue = false`; `blocks (strict)` is `extract.strict = true` (the strict trees with the per-page
fallback to the shipped ones, extract_blocks.Strict; out of fold by `strict_for`, both sets of trees of the
page's site fold; issue 19, session 14). On the crawl set it is the shipped models' (they never saw those
pages: session 5's weak labels on them were not adopted).

Then the rescue's cost: CPU ms per page of the `blocks` step (batches, as the belt runs it) with
and without the rescue, on AEB, trafilatura-eval and the real crawl pages of ../shared/data/warc
(every HTML response of its WARC/ARC files but derived/, which holds AEB's pages again), best of
`--repeat` alternating rounds, with the share of pages whose main content is short enough to be
rescued. `--rescue-only` prints only that.

Run: .venv/bin/python bench/bench_extract.py [--limit N] [--repeat 5] [--rescue-only] [--crawl-only]
     [--fresh DIR]  (only the fresh set's table: extract_eval.fresh_pages, docs/extraction.md)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from pretrain.curate.document import Document
from pretrain.curate.extract import ExtractConfig, build_extract_step, extract_text
from pretrain.curate.extract_blocks import (
    MIN_MAIN_CHARS,
    blocks,
    extract_blocks_text,
    model_for,
    render,
    strict_for,
)
from pretrain.curate.extract_eval import (
    aeb_pages,
    crawl_pages,
    crawl_records,
    crawl_scores,
    fresh_pages,
    site,
    snippet_scores,
    token_prf,
    trafilatura_pages,
)

# PRETRAIN_SHARED_DATA: where ../shared/data is when the checkout sits elsewhere (a git worktree).
SHARED = os.environ.get("PRETRAIN_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data"
DATA = Path(SHARED) / "html"
WARC = Path(SHARED) / "warc"


ROWS = ("resiliparse", "blocks (no rescue)", "blocks", "blocks (strict)", "trafilatura")


def scorer(backend: str, benchmark: str):
    """The extractor to score a benchmark's page with: for `blocks`, the cross-fitted model that
    never saw a page of the page's site."""
    from pretrain.curate.extract_rescue import rescue_for

    if not backend.startswith("blocks"):
        return lambda html, url: extract_text(html, backend)
    if backend == "blocks (no rescue)":
        return lambda html, url: extract_blocks_text(html, model_for(benchmark, url), min_main_chars=0)
    if backend == "blocks (strict)":
        return lambda html, url: extract_blocks_text(html, strict_for(benchmark, url),
                                                     rescue_for(benchmark, url))
    return lambda html, url: extract_blocks_text(html, model_for(benchmark, url), rescue_for(benchmark, url))


def evaluate(backend: str, aeb: list, tra: list) -> dict:
    on_aeb, on_tra = scorer(backend, "aeb"), scorer(backend, "trafilatura-eval")
    prf = [token_prf(on_aeb(html, url), truth) for _, html, truth, url in aeb]
    n = max(len(prf), 1)
    kept = total_keep = dropped = total_drop = 0
    for _, html, keep, drop, url in tra:
        k, nk, d, nd = snippet_scores(on_tra(html, url), keep, drop)
        kept, total_keep, dropped, total_drop = kept + k, total_keep + nk, dropped + d, total_drop + nd
    return {
        "precision": sum(p for p, _, _ in prf) / n,
        "recall": sum(r for _, r, _ in prf) / n,
        "f1": sum(f for _, _, f in prf) / n,
        "kept": kept / max(total_keep, 1),
        "dropped": dropped / max(total_drop, 1),
    }


def cpu() -> float:
    """CPU seconds of this process and its finished children (robust on a shared machine)."""
    import resource

    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + c.ru_utime + c.ru_stime


def _backend(name: str) -> tuple[str, bool, bool]:
    """(backend, rescue, strict) of a row's name."""
    return {"blocks (no rescue)": ("blocks", False, False),
            "blocks (strict)": ("blocks", True, True)}.get(name, (name, True, False))


def speed(name: str, pages: list[str]) -> tuple[float, float]:
    backend, rescue, strict = _backend(name)
    mb = sum(len(p.encode("utf-8")) for p in pages) / 1e6
    t = cpu()
    for html in pages:
        extract_text(html, backend, rescue=rescue, strict=strict)
    dt = cpu() - t
    return len(pages) / dt, mb / dt


def step_speed(name: str, isolation: str, pages: list[str]) -> float:
    backend, rescue, strict = _backend(name)
    cfg = ExtractConfig(backend=backend, isolation=isolation, rescue=rescue, strict=strict)
    step = build_extract_step(cfg)
    docs = []
    for i, html in enumerate(pages):
        d = Document(id=str(i), text=html)
        d.cache["html"] = True
        docs.append(d)
    t = cpu()
    n = sum(1 for _ in step(iter(docs)))
    step.close()
    dt = cpu() - t
    assert n > 0
    return len(pages) / dt


def blocks_parts(pages: list[str]) -> dict[str, float]:
    """ms per page of each part of the `blocks` path (CPU time over `pages`, best of 3 passes)."""
    import numpy as np

    from pretrain.curate.extract_blocks import BODY_COLUMNS, blocks, features, load_model, render

    m = load_model()
    rendered = [render(h) for h in pages]
    cut = [blocks(r) for r in rendered]
    scores = [m.words.score(bs) if m.words else None for bs in cut]
    cols = [np.zeros((len(bs), len(BODY_COLUMNS)), np.float32) for bs in cut]  # (their cost: extract_body)
    xs = [np.hstack([features(bs, s), c]) for bs, s, c in zip(cut, scores, cols)]
    parts = {
        "render": lambda: [render(h) for h in pages],
        "cut": lambda: [blocks(r) for r in rendered],
        "words": lambda: [m.words.score(bs) for bs in cut] if m.words else None,
        "features": lambda: [features(bs, s) for bs, s in zip(cut, scores)],
        "trees": lambda: [m.keep_probability(x) for x in xs if len(x)],
        "whole": lambda: [extract_blocks_text(h, m) for h in pages],
    }
    out = {}
    for name, run in parts.items():
        best = float("inf")
        for _ in range(3):
            t = time.process_time()
            run()
            best = min(best, time.process_time() - t)
        out[name] = best / len(pages) * 1e3
    return out


def crawl_html() -> list[str]:
    """The HTML responses of the real crawl files under ../shared/data/warc (not derived/: AEB again)."""
    return [d.text for _, d in crawl_records(WARC)]


def crawl_scorer(backend: str):
    """The extractor of a crawl page: the shipped models for `blocks` (no page of the set is in them)."""
    if backend == "blocks (no rescue)":
        return lambda html, url: extract_blocks_text(html, min_main_chars=0)
    if backend == "blocks (strict)":
        return lambda html, url: extract_text(html, "blocks", strict=True)
    return lambda html, url: extract_text(html, backend)


def evaluate_crawl(backend: str, pages: list) -> dict:
    """crawl_scores over all pages, plus keep and drop averaged over sites (each site weighs one), from
    one pass over the pages (extract_text empties trafilatura's cross-page dedup memory before each
    page since 2026-12-02, so the order of the pages no longer matters)."""
    f = crawl_scorer(backend)
    texts = {id(p[1]): f(p[1], p[5]) for p in pages}

    def extract(html, url):
        return texts[id(html)]

    return by_site(crawl_scores(extract, pages), extract, pages)


def by_site(q: dict, extract, pages: list) -> dict:
    """`q` (crawl_scores of `pages`) with keep and drop averaged over sites (each site weighs one; keep
    over the sites with a must-keep snippet) and the number of sites."""
    sites: dict[str, list] = {}
    for page in pages:
        sites.setdefault(site(page[5]), []).append(page)
    per = [crawl_scores(extract, ps) for ps in sites.values()]
    keeps = [p["kept"] for p, ps in zip(per, sites.values()) if any(x[2] for x in ps)]
    q["kept_by_site"] = sum(keeps) / max(len(keeps), 1)
    q["dropped_by_site"] = sum(p["dropped"] for p in per) / len(per)
    q["sites"] = len(per)
    return q


def step_ms(pages: list[str], rescue: bool) -> float:
    """CPU ms per page of the in-process `blocks` step (its batches), rescue on or off."""
    step = build_extract_step(ExtractConfig(backend="blocks", rescue=rescue))
    docs = []
    for i, html in enumerate(pages):
        d = Document(id=str(i), text=html)
        d.cache["html"] = True
        docs.append(d)
    t = time.process_time()
    for _ in step(iter(docs)):
        pass
    return (time.process_time() - t) / len(pages) * 1e3


def crawl_table(fresh: str = "") -> None:
    """keep / drop / no-main-clean of each backend on the labelled crawl pages (or with `fresh`, the
    fresh set's pages unpacked there: extract_eval.fresh_pages), all and by site."""
    if fresh:
        crawl, what = list(fresh_pages(Path(fresh))), f"fresh: {fresh}"
    else:
        crawl, what = (list(crawl_pages(WARC)) if WARC.is_dir() else []), "crawl: warc/"
    if not crawl:
        return
    keep, drop = sum(len(p[2]) for p in crawl), sum(len(p[3]) for p in crawl)
    print(
        f"\n{what}: {len(crawl)} labelled pages, {keep} keep and {drop} drop snippets, "
        f"{sum(p[4] for p in crawl)} pages with no main content"
    )
    head = f"{'backend':<18} {'kept':>6} {'dropped':>8} {'no-main clean':>14}"
    print(f"{head} {'by site: kept':>14} {'dropped':>8}")
    for backend in ROWS:
        q = evaluate_crawl(backend, crawl)
        print(
            f"{backend:<18} {q['kept']:6.3f} {q['dropped']:8.3f} {q['no_main_clean']:14.3f} "
            f"{q['kept_by_site']:14.3f} {q['dropped_by_site']:8.3f}"
        )
    print(f"(by site: the mean over the {q['sites']} sites of each site's shares)")


def rescue_cost(sets: dict[str, list[str]], repeat: int) -> None:
    """The blocks step with and without the rescue, side by side, best of `repeat` alternating rounds."""
    load = os.getloadavg()[0]
    print(f"\nblocks step, CPU ms per page, best of {repeat} alternating rounds (load {load:.1f})")
    head = f"{'pages':<18} {'n':>5} {'short main':>10} {'no rescue':>10} {'rescue':>8} {'ratio':>6}"
    print(f"{head} {'pages/s':>15}")
    for name, pages in sets.items():
        short = sum(sum(len(b.text) for b in blocks(render(h))) < MIN_MAIN_CHARS for h in pages)
        best = {False: float("inf"), True: float("inf")}
        for _ in range(repeat):
            for rescue in (False, True):
                best[rescue] = min(best[rescue], step_ms(pages, rescue))
        off, on = best[False], best[True]
        print(
            f"{name:<18} {len(pages):>5} {short / len(pages):>10.1%} {off:>10.3f} {on:>8.3f} "
            f"{on / off:>6.3f} {1e3 / off:>7.0f} -> {1e3 / on:<5.0f}"
        )
    print(f"(load after: {os.getloadavg()[0]:.1f})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=0, help="use only the first N pages of each set")
    ap.add_argument("--repeat", type=int, default=5, help="alternating rounds of the rescue's cost")
    ap.add_argument("--rescue-only", action="store_true", help="only the blocks step with and without rescue")
    ap.add_argument("--crawl-only", action="store_true", help="only the labelled crawl pages' table")
    ap.add_argument("--fresh", metavar="DIR", help="only the fresh set's table, its sdists unpacked in DIR")
    args = ap.parse_args()
    if args.fresh:
        try:
            crawl_table(args.fresh)
        except ValueError as e:  # a missing or changed page: the message names it and how to get it
            print(f"fresh set: {e}", file=sys.stderr)
            return 2
        return 0
    if not DATA.is_dir():
        print(f"no data at {DATA}; nothing to measure")
        return 0
    if args.crawl_only:
        crawl_table()
        return 0
    aeb = list(aeb_pages(DATA / "scrapinghub-aeb", with_url=True))
    tra = list(trafilatura_pages(DATA / "trafilatura-eval", with_url=True))
    if args.limit:
        aeb, tra = aeb[: args.limit], tra[: args.limit]
    pages = [h for _, h, _, _ in aeb]
    sets = {"AEB": pages, "trafilatura-eval": [h for _, h, _, _, _ in tra]}
    sets["real crawl (warc/)"] = crawl_html()
    if args.rescue_only:
        rescue_cost(sets, args.repeat)
        return 0
    print(
        f"AEB pages: {len(aeb)}   trafilatura-eval pages: {len(tra)}   "
        f"AEB HTML: {sum(len(p.encode()) for p in pages) / 1e6:.1f} MB"
    )
    print(
        f"{'backend':<18} {'P':>6} {'R':>6} {'F1':>6} {'kept':>6} {'dropped':>8} {'pages/s':>8} {'MB/s':>6} "
        f"{'step pages/s (isolation)':>26}"
    )
    res = {}
    for backend in ROWS:
        q = evaluate(backend, aeb, tra)
        ps, mbs = speed(backend, pages)
        iso = "process"
        sps = step_speed(backend, iso, pages)
        res[backend] = ps
        print(
            f"{backend:<18} {q['precision']:6.3f} {q['recall']:6.3f} {q['f1']:6.3f} {q['kept']:6.3f} "
            f"{q['dropped']:8.3f} {ps:8.1f} {mbs:6.2f} {sps:17.1f} ({iso})"
        )
    crawl_table()
    print(f"resiliparse / trafilatura speed: {res['resiliparse'] / res['trafilatura']:.1f}x (one core)")
    print(f"blocks / trafilatura speed: {res['blocks'] / res['trafilatura']:.1f}x (one core)")
    parts = blocks_parts(pages)
    print(
        "blocks, ms per AEB page (process time, best of 3): "
        + ", ".join(f"{k} {v:.3f}" for k, v in parts.items())
    )
    rescue_cost(sets, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
