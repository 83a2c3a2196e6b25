"""Issue 19, session 10: boilerplate containers named by a FIXED vocabulary, as soft features of `blocks`.

Session 9 learnt the class/id tokens of each block's ancestors (Dragnet): drop +0.023 on the
benchmarks, but crawl keep 0.922 -> 0.652 (site-specific tokens) and 4.5 ms per page of alignment.
This tries the opposite end: no learnt vocabulary, only the boilerplate container cues the field
publishes (trafilatura's discard expressions and Readability's "unlikely candidate" / negative
class patterns, regrouped here by what the container holds), as VOCAB_GROUPS columns: a block is
"in group g" when it lies inside an element whose class or id holds one of g's words (substring,
case-insensitive) or, for three groups, whose tag is `nav`, `footer` or `aside`. The columns come
from the tree the extractor already parses (one lexbor selector group, `query_selector_all`), and a
block lies inside a matched element when its text, spaces removed, is a substring of the element's
DOM text with all white space removed (extract_body's alignment; per group, the matched elements'
texts joined by a separator).

What it does (`--work DIR` keeps every step; delete the files after changing the vocabulary):
1. the training script's labelled pages (its cache) and the vocabulary columns of each;
2. the ten site-fold models and the full model of scripts/train_extract_blocks.py retrained with
   BLOCK_FEATURES + the vocabulary columns (same pages, labels, word model, trees);
3. every benchmark page scored out of fold by site with the shipped fold models ("shipped") and the
   retrained ones ("vocab"), the 86 labelled crawl pages with the two full models, rescue on, each
   decoded by the shipped core decoder at a threshold t (inside the core t, outside t + 0.1, a page
   without a core t; t = 0.5 is the shipped decoder);
4. session 6's nested rule for t (per test fold, on all other benchmark pages: keep >= the shipped
   trees' and AEB F1 >= theirs, then the most drop + F1), paired deltas against the shipped trees
   (mean +- standard error over pages), the crawl set's paired bootstrap over its 36 sites;
5. `--cost` (instead of 3-4): CPU ms per AEB page of the columns beside the shipped path (slow:
   resiliparse hands each matched element to Python at 1-5 ms apiece, so about 6 minutes).

`--variant outside`: a matched element whose text holds the page's longest main-content block (a
wrapper of the article) is left out. Results and the decision: docs/extraction.md, "Tried
2026-12-02 (issue 19, session 10)": not shipped.

Run: PYTHONPATH=src .venv/bin/python bench/bench_extract_vocab.py [--work DIR] [--variant outside] [--cost]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
from collections import Counter
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_extract_crawl_decode as cd  # noqa: E402  (the crawl bench's scoring and bootstrap)
import bench_extract_stack as st  # noqa: E402  (its caches, training loops, page scoring, nested rule)

from pretrain.curate.extract_blocks import (  # noqa: E402
    BLOCK_FEATURES,
    CORE_CHARS,
    CORE_MARGIN,
    CORE_P,
    BlockModel,
    block_matrix,
    blocks,
    load_model,
    model_for,
    render,
)
from pretrain.curate.extract_body import body_columns, parse  # noqa: E402
from pretrain.curate.extract_eval import aeb_pages  # noqa: E402

SHARED = st.SHARED
BENCHES = st.BENCHES

# Boilerplate container cues, regrouped by what the container holds. The words are those trafilatura's
# discard expressions and Readability's class/id patterns test for (each a case-insensitive substring
# of a class or an id here); the tags are the HTML5 elements of the same meaning.
VOCAB_GROUPS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "related": (("related", "recommend", "popular", "trending", "outbrain", "taboola", "more-stories",
                 "read-more", "readmore"), ()),
    "comment": (("comment", "disqus", "reply", "respond", "discussion"), ()),
    "share": (("share", "sharing", "social", "sociable", "syndication", "follow"), ()),
    "author": (("author", "byline", "avatar", "user-info", "profile", "contributor"), ()),
    "meta": (("meta", "tags", "tag-list", "timestamp", "dateline", "categor", "infoline"), ()),
    "promo": (("newsletter", "subscribe", "signup", "promo", "sponsor", "advert", "banner", "-ad-",
               "cookie", "consent", "paywall", "popup", "modal"), ()),
    "nav": (("nav", "menu", "breadcrumb", "pagination", "pager"), ("nav",)),
    "footer": (("footer", "copyright", "disclaimer"), ("footer",)),
    "sidebar": (("sidebar", "widget"), ("aside",)),
}
VOCAB_COLUMNS = tuple(f"in_{g}" for g in VOCAB_GROUPS)
VOCAB_SELECTOR = ", ".join(
    [f'[{a}*="{w}" i]' for ws, _ in VOCAB_GROUPS.values() for w in ws for a in ("class", "id")]
    + [t for _, ts in VOCAB_GROUPS.values() for t in ts]
)
_SEP = "\x00"
# "outside" (--variant outside): a matched element whose text holds the page's longest main-content
# block is left out (theme wrappers such as Genesis' `content-sidebar-wrap` or a `meta` wrapper
# around the whole post hold the article itself, not boilerplate).
VARIANT = {"outside": False}


def _variant() -> str:
    return "outside" if VARIANT["outside"] else "all"


def _groups_of(node) -> list[int]:
    tag = node.tag
    name = f"{node.class_name or ''} {node.id or ''}".lower()
    return [g for g, (ws, ts) in enumerate(VOCAB_GROUPS.values()) if tag in ts or any(w in name for w in ws)]


def vocab_columns(tree, bs) -> np.ndarray:
    """(n, len(VOCAB_GROUPS)) float32: whether each block lies inside an element of each group."""
    n = len(bs)
    out = np.zeros((n, len(VOCAB_GROUPS)), np.float32)
    if not n or tree.document is None:
        return out
    texts: list[list[str]] = [[] for _ in VOCAB_GROUPS]
    for node in tree.document.query_selector_all(VOCAB_SELECTOR):
        t = "".join(node.text.split())
        if t:
            for g in _groups_of(node):
                texts[g].append(t)
    needles = [b.text.replace(" ", "") for b in bs]
    if VARIANT["outside"]:  # an element holding the page's longest block wraps the article: not boilerplate
        anchor = max(needles, key=len)
        texts = [[t for t in ts if anchor not in t] for ts in texts]
    for g, ts in enumerate(texts):
        if ts:
            ref = _SEP.join(ts)
            out[:, g] = [s in ref for s in needles]
    return out


# --------------------------------------------------------------------------- training


def vocab_models(work: Path) -> dict[str, BlockModel]:
    out = work / "models.json.gz"
    names = [*BLOCK_FEATURES, *VOCAB_COLUMNS]
    if out.exists():
        doc = json.loads(gzip.decompress(out.read_bytes()))
        if doc.pop("features", None) != names or doc.pop("variant", None) != _variant():
            raise SystemExit(f"{out}: trees of other features or another --variant; delete it to retrain")
        return {k: BlockModel.from_dict(d) for k, d in doc.items()}
    tr = st.load_train_script()
    pages, cols = st.training_pages(tr, work, vocab_columns, f"vocab-{_variant()}.json.gz",
                                    len(VOCAB_COLUMNS))
    pages = [replace(p, cols=np.hstack([p.cols, c])) for p, c in zip(pages, cols)]
    n = sum(len(c) for c in cols)
    print(f"vocabulary columns: {n} blocks; share in each group: "
          + ", ".join(f"{g} {np.concatenate(cols)[:, i].mean():.3f}" for i, g in enumerate(VOCAB_GROUPS)))
    models = st.fold_models(pages, lambda keep: tr.train([pages[i] for i in keep], 0.5, True))
    doc = {"features": names, "variant": _variant(), **{k: m.to_dict() for k, m in models.items()}}
    st.write_atomic(out, gzip.compress(json.dumps(doc).encode()))
    return models


# --------------------------------------------------------------------------- scoring


def page_both(bench, key, html, url, base, base_rescue, new, new_rescue) -> tuple[dict, dict]:
    tree = parse(html)
    bs = blocks(render(tree))
    cols = body_columns(tree, bs)
    vcols = vocab_columns(tree, bs)
    return (st.scored_page(bench, key, html, url, bs, base, base_rescue,
                           lambda: block_matrix(bs, cols, base), vocab=vcols),
            st.scored_page(bench, key, html, url, bs, new, new_rescue,
                           lambda: np.hstack([block_matrix(bs, cols, new), vcols]), vocab=vcols))


def all_pages(models) -> tuple[list[dict], list[dict]]:
    """Every page scored by the shipped trees (out of fold by site) and by the retrained `models`."""
    return st.all_pages(models, page_both, model_for, load_model)


THRESHOLDS = (0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7)


def decoder(t: float):
    """The shipped core decoder (extract_blocks.core_flags) with its thresholds moved together."""
    return partial(cd.core_flags, conf=CORE_P, min_chars=CORE_CHARS, margin=CORE_MARGIN,
                   t_in=t, t_out=round(t + 0.1, 2), t_none=t)


def separation(base: list[dict]) -> None:
    """Where the snippets the shipped trees keep lie: per group, must-keep vs must-drop (trafilatura-eval)."""
    dec = decoder(0.5)
    rows = Counter()
    for d in base:
        if d["bench"] != "trafilatura-eval" or not len(d["p"]):
            continue
        kept = dec(d["p"], d["chars"])
        norm = [" ".join(t.split()) for t in d["text"]]
        for kind, snips in (("keep", d["keep"]), ("drop", d["drop"])):
            for s in snips:
                s = " ".join(s.split())
                hit = [i for i, t in enumerate(norm) if s and (s in t or (len(t) > 20 and t in s))]
                if not hit:
                    continue
                i = hit[0]
                if not kept[i]:
                    continue
                rows[(kind, "any")] += 1
                for g, name in enumerate(VOCAB_GROUPS):
                    if d["vocab"][i, g]:
                        rows[(kind, name)] += 1
                if d["vocab"][i].any():
                    rows[(kind, "some group")] += 1
    print("snippets kept by the shipped trees (trafilatura-eval), by group of their block: "
          "must-keep / must-drop")
    for name in ("any", "some group", *VOCAB_GROUPS):
        print(f"  {name:<12} {rows[('keep', name)]:>5} / {rows[('drop', name)]:>5}")


def by_site(crawl: list[dict], base: dict, other: dict) -> None:
    """Crawl sites where the two differ: must-keep kept and must-drop dropped, shipped -> vocab (t = 0.5)."""
    from pretrain.curate.extract_eval import site

    sums: dict[str, np.ndarray] = {}
    for d in crawl:
        k = (d["bench"], d["key"])
        row = np.array([base[k][0], other[k][0], base[k][1], base[k][2], other[k][2], base[k][3]], int)
        sums[site(d["url"])] = sums.get(site(d["url"]), 0) + row
    print("crawl sites that differ at t = 0.5 (must-keep kept, must-drop dropped; shipped -> vocab):")
    for s, (k0, k1, nk, d0, d1, nd) in sorted(sums.items(), key=lambda kv: -abs(kv[1][4] - kv[1][3])):
        if k0 != k1 or d0 != d1:
            print(f"  {s:<32} keep {k0} -> {k1} of {nk}, drop {d0} -> {d1} of {nd}")


def cost(models) -> None:
    """CPU ms per AEB page (best of 3): the columns on a parsed tree, beside parse + render."""
    htmls = [h for _, h, _ in aeb_pages(SHARED / "html" / "scrapinghub-aeb")]
    trees = [parse(h) for h in htmls]
    main = [blocks(render(t)) for t in trees]

    def render_path():
        for h in htmls:
            tr = parse(h)
            body_columns(tr, blocks(render(tr)))

    sels = VOCAB_SELECTOR.split(", ")

    def count_only(k):  # lexbor's walk and matching alone: no node handed to Python
        group = ", ".join(sels[:k])
        for t in trees:
            len(t.document.query_selector_all(group))

    def selector():
        for t in trees:
            list(t.document.query_selector_all(VOCAB_SELECTOR))

    def columns():
        for t, bs in zip(trees, main):
            vocab_columns(t, bs)

    best = {}
    for _ in range(3):
        for name, f in (("parse, render, cut, body columns", render_path),
                        *((f"vocab selector, first {k} of {len(sels)}, count only", partial(count_only, k))
                          for k in (2, 10, 30, len(sels))),
                        ("vocab selector, matches as DOMNodes", selector),
                        ("vocab columns (selector + alignment)", columns)):
            t0 = time.process_time()
            f()
            best[name] = min(best.get(name, 1e9), (time.process_time() - t0) / len(htmls) * 1e3)
    print(f"\nCPU ms per AEB page (best of 3, load {os.getloadavg()[0]:.1f}):")
    for k, v in best.items():
        print(f"  {k:<45} {v:.3f}")
    c = trees[0].document.query_selector_all("[class]")
    t0 = time.perf_counter()
    for i in range(min(50, len(c))):
        _ = c[i].tag
    print(f"  one DOMNode taken from a collection (50 of one page's {len(c)} [class] elements): "
          f"{(time.perf_counter() - t0) / min(50, len(c)) * 1e3:.3f} ms wall each")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/pretrain-extract-vocab"))
    ap.add_argument("--cost", action="store_true", help="only the columns' CPU time")
    ap.add_argument("--variant", choices=("all", "outside"), default="all",
                    help="outside: leave out matched elements that hold the page's longest block")
    args = ap.parse_args()
    VARIANT["outside"] = args.variant == "outside"
    if st.no_data():
        return 0
    args.work.mkdir(parents=True, exist_ok=True)
    models = vocab_models(args.work)
    if args.cost:
        cost(models)
        return 0
    t = time.process_time()
    base, new = all_pages(models)
    print(f"{dict(Counter(d['bench'] for d in base))} pages; probabilities in "
          f"{time.process_time() - t:.1f} s CPU")
    separation(base)
    keys = [(d["bench"], d["key"]) for d in base]
    crawl = [d for d in base if d["bench"] == "crawl"]
    print(f"{'trees, decoder':<40} {'AEB P':>6} {'R':>6} {'F1':>6} {'keep':>6} {'drop':>6} | "
          "crawl keep, drop, no-main clean")
    results = {}
    for trees, pages in (("shipped", base), ("vocab", new)):
        for th in THRESHOLDS:
            results[f"{trees} | core t={th}"] = pp = cd.per_page(pages, decoder(th))
            print(cd.row(f"{trees} | core t={th}", cd.aggregate(pp, keys)), flush=True)
    bk = [k for k in keys if k[0] != "crawl"]
    b0 = results["shipped | core t=0.5"]
    for name in ("vocab | core t=0.5", "vocab | core t=0.55"):
        print(f"{name} vs shipped: {st.paired(b0, results[name], bk)}; "
              f"{cd.bootstrap(b0, results[name], crawl)}")
    by_site(crawl, b0, results["vocab | core t=0.5"])
    for prefix in ("vocab |", "shipped |"):
        st.nested_rule(base, results, "shipped | core t=0.5", prefix, f"nested {prefix.strip(' |')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
