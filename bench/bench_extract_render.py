"""Which resiliparse render should `blocks` cut into blocks? Ceilings, cross-fitted quality, time.

For each render variant, on the same pages and in the same run:
- ceilings: the share of trafilatura-eval's must-keep snippets present in the render's text (what the
  best possible keep/drop decisions could keep), the share of must-drop snippets present (what the
  model has to drop), and AEB token recall of the whole render;
- out-of-fold quality of the keep/drop trees trained on that render's blocks: AEB P / R / F1,
  trafilatura-eval keep / drop;
- ms per AEB page of the whole pass (render, blocks, features, trees; CPU time, interleaved rounds).

Protocol (grouped 5-fold cross-fitting by site): group = URL host without a leading "www."; fold =
zlib.crc32(group) % 5. A page of benchmark B in fold k is scored by a model trained on Readability's
pages, the other benchmark in full and B's pages outside fold k. Labels as in
scripts/train_extract_blocks.py (trafilatura-eval's unlabelled blocks: trafilatura's own output).

Variants: `base` (today's render: main content, comments and post meta off), `postmeta`,
`comments`, `both` (resiliparse's comments / post_meta switches on), `hidden` (hidden_elements),
`inclusive` (all three), `whole` (main_content=False: the model decides everything), `aligned`
(the whole-page render, each block told whether it is in the main-content render: both renders
from one parsed tree), `unmask` / `unmask-all` (the ancestors of article-like elements lose their
boilerplate class words / all class and id before the main-content pass), `rescueK` (the base
model decides the main-content blocks as today; a second model, trained only on whole-page blocks
outside the main-content render and within K blocks of it, may bring some back; K=-1: all).
`thr`: the rescue threshold for rescueK, the keep threshold otherwise; `rescueK<500`: the rescue
only on pages whose main content is under 500 characters (as curate/extract_rescue.py ships it).

    PYTHONPATH=src .venv/bin/python bench/bench_extract_render.py [--variants all] [--trees shipped]

By default it compares `base` and `rescue10` (~3 minutes on a busy core) with scikit-learn's
histogram trees of the same size (seconds per fit; on `base` they score within 0.006 of the
shipped kind, and ranked the variants the same where both were run); `--trees shipped` fits the
shipped kind (GradientBoostingClassifier, as scripts/train_extract_blocks.py: minutes per fit).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import sys
import time
import zlib
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np

from pretrain.curate.extract_blocks import FEATURES, MINIMAL_HTML, blocks, features, load_model
from pretrain.curate.extract_eval import aeb_pages, snippet_scores, token_prf, tokens, trafilatura_pages
from pretrain.curate.extract_rescue import aligned  # the features the shipped rescue uses

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("PRETRAIN_SHARED_DATA") or ROOT.parent / "shared" / "data")
DATA = SHARED / "html"
_spec = importlib.util.spec_from_file_location(
    "train_extract_blocks", ROOT / "scripts" / "train_extract_blocks.py"
)
train = importlib.util.module_from_spec(_spec)
sys.modules["train_extract_blocks"] = train  # its dataclasses look their module up
_spec.loader.exec_module(train)

RENDER = dict(MINIMAL_HTML, main_content=True, comments=False, post_meta=False)  # as render()
SWITCHES = {
    "base": {},
    "postmeta": {"post_meta": True},
    "comments": {"comments": True},
    "both": {"comments": True, "post_meta": True},
    "hidden": {"hidden_elements": True},
    "inclusive": {"comments": True, "post_meta": True, "hidden_elements": True},
    "whole": {"main_content": False},
}
ALL = (
    "base",
    "postmeta",
    "comments",
    "both",
    "inclusive",
    "hidden",
    "whole",
    "aligned",
    "rescue10",
    "rescue-1",
)


def render(html, **switches):
    """resiliparse's minimal HTML with today's settings plus `switches` (html: a string or a parsed tree)."""
    from resiliparse.extract.html2text import extract_plain_text

    return extract_plain_text(html, **{**RENDER, **switches})


def two_renders(html: str):
    """Blocks of the main-content and of the whole-page render, from one parsed tree (resiliparse
    does not change the tree it renders)."""
    from resiliparse.parse.html import HTMLTree

    tree = HTMLTree.parse(html)
    return blocks(render(tree)), blocks(render(tree, main_content=False))


_ARTICLE = "article, main, [itemprop=articleBody], .entry-content, .post-content, .article-body"
_MASKS = ("sidebar", "share", "comment", "collapsed", "teaser", "hidden")


def unmasked(html: str, strip_all: bool):
    """The parsed page with the class/id words that made resiliparse drop articles (`_MASKS`; with
    `strip_all`, every class and id) taken off the ancestors of article-like elements (12 levels)."""
    from resiliparse.parse.html import HTMLTree

    tree = HTMLTree.parse(html)
    for el in tree.body.query_selector_all(_ARTICLE) if tree.body else ():
        a = el.parent
        for _ in range(12):
            if a is None or a.tag in ("body", "html"):
                break
            for attr in ("class", "id"):
                words = (a.getattr(attr) or "").split()
                kept = [] if strip_all else [w for w in words if not any(m in w.lower() for m in _MASKS)]
                if len(kept) != len(words):
                    a.setattr(attr, " ".join(kept))
            a = a.parent
    return tree


def view(variant: str, html: str) -> dict:
    """What the model sees of one page: `bs`/`x` (blocks it decides), and for rescue the main blocks."""
    if variant in SWITCHES or variant.startswith("unmask"):
        src = unmasked(html, variant == "unmask-all") if variant.startswith("unmask") else html
        bs = blocks(render(src, **SWITCHES.get(variant, {})))
        return {"bs": bs, "x": features(bs)}
    main_bs, whole_bs = two_renders(html)
    ex = aligned(whole_bs, main_bs)
    if variant == "aligned":
        return {"bs": whole_bs, "x": np.hstack([features(whole_bs), ex.astype(np.float32)])}
    k = int(variant.removeprefix("rescue"))
    inm = ex[:, 0] > 0
    idx = np.flatnonzero(inm)
    if k >= 0 and len(idx):
        lo, hi = max(idx[0] - k, 0), idx[-1] + k + 1
        whole_bs, ex, inm = whole_bs[lo:hi], ex[lo:hi], inm[lo:hi]
    empty = np.zeros((0, len(FEATURES) + 6), np.float32)
    xw = np.hstack([features(whole_bs), ex.astype(np.float32)]) if whole_bs else empty
    return {"bs": main_bs, "x": features(main_bs), "whole": whole_bs, "xw": xw, "inm": inm}


def labels(page: dict, bs) -> np.ndarray:
    """Block labels as scripts/train_extract_blocks.py sets them (page_matrix, snippet_matrix)."""
    if "truth" in page:
        have = Counter(tokens(page["truth"]))
        share = [sum(t in have for t in ts) / len(ts) if ts else 0 for ts in (tokens(b.text) for b in bs)]
        return (np.array(share) >= train.KEEP_SHARE).astype(int)
    keep_n, drop_n = [train._norm(s) for s in page["keep"]], [train._norm(s) for s in page["drop"]]
    have = Counter(tokens(page["weak"]))
    y = []
    for b in bs:
        t = train._norm(b.text)
        hit = lambda ss, t=t: any(s and (s in t or (len(t) > 20 and t in s)) for s in ss)  # noqa: E731
        label = 0 if hit(drop_n) else 1 if hit(keep_n) else -1
        if label < 0:
            ts = tokens(b.text)
            label = int(bool(ts) and sum(w in have for w in ts) / len(ts) >= train.KEEP_SHARE)
        y.append(label)
    return np.array(y, int)


def load_pages(cache: Path | None) -> list[dict]:
    """Readability (always trained on), AEB and trafilatura-eval with their site group's fold."""

    def fold(url: str) -> int:
        host = (urlsplit(url).hostname or "").lower().removeprefix("www.")
        return zlib.crc32(host.encode()) % 5

    pages = [
        {"set": "readability", "html": h, "truth": t, "fold": -1} for _, h, t in train.readability_pages()
    ]
    gt = json.loads((DATA / "scrapinghub-aeb" / "ground-truth.json").read_text(encoding="utf-8"))
    for key, html, truth in aeb_pages(DATA / "scrapinghub-aeb"):
        pages.append({"set": "aeb", "html": html, "truth": truth, "fold": fold(gt[key]["url"])})
    ev = json.loads((DATA / "trafilatura-eval" / "evaldata-subset.json").read_text(encoding="utf-8"))
    url_of = {item["file"]: url for url, item in ev.items()}
    weak = json.loads(cache.read_text(encoding="utf-8")) if cache and cache.exists() else {}
    n_weak = len(weak)
    for f, html, keep, drop in trafilatura_pages(DATA / "trafilatura-eval"):
        if f not in weak:
            weak[f] = train.trafilatura_text(html)
        pages.append(
            {
                "set": "trafilatura-eval",
                "html": html,
                "keep": keep,
                "drop": drop,
                "weak": weak[f],
                "fold": fold(url_of[f]),
            }
        )
    if cache and len(weak) > n_weak:
        tmp = cache.with_name(cache.name + ".tmp")
        tmp.write_text(json.dumps(weak), encoding="utf-8")
        tmp.replace(cache)
    return pages


def fit(x, y, hist: bool):
    from sklearn.ensemble import GradientBoostingClassifier, HistGradientBoostingClassifier

    if hist:
        return HistGradientBoostingClassifier(
            max_iter=train.N_TREES,
            max_depth=train.DEPTH,
            learning_rate=train.LEARNING_RATE,
            early_stopping=False,
            random_state=0,
        ).fit(x, y)
    return GradientBoostingClassifier(
        n_estimators=train.N_TREES,
        max_depth=train.DEPTH,
        learning_rate=train.LEARNING_RATE,
        subsample=0.8,
        random_state=0,
    ).fit(x, y)


def compose(v: dict, pm, pw, tm: float, tw: float) -> str:
    """Kept text in page order: main blocks by the base model's probability `pm` at `tm` (exactly the
    base extractor's output when nothing is rescued), other whole-page blocks by `pw` at `tw`."""
    if "whole" not in v:
        return "\n".join(b.text for b, q in zip(v["bs"], pm) if q >= tm)
    main, pos = v["bs"], {}
    for j, b in enumerate(main):
        pos.setdefault(b.text, []).append(j)
    out, j = [], 0
    for b, inm, q in zip(v["whole"], v["inm"], pw):
        if inm:
            later = [x for x in pos.get(b.text, []) if x >= j]
            if later:
                out += [main[x].text for x in range(j, later[0] + 1) if pm[x] >= tm]
                j = later[0] + 1
        elif q >= tw:
            out.append(b.text)
    out += [main[x].text for x in range(j, len(main)) if pm[x] >= tm]
    return "\n".join(out)


def ceilings(pages, views) -> dict:
    kept = nk = present = nd = 0
    rec = []
    for p, v in zip(pages, views):
        # everything the variant could output: all its blocks (for rescue, main blocks and candidates)
        text = compose(v, np.ones(len(v["bs"])), np.ones(len(v.get("whole", ()))), 0.5, 0.5)
        if p["set"] == "trafilatura-eval":
            k, a, d, b = snippet_scores(text, p["keep"], p["drop"])
            kept, nk, present, nd = kept + k, nk + a, present + b - d, nd + b
        elif p["set"] == "aeb":
            rec.append(token_prf(text, p["truth"])[1])
    return {"keep_ceil": kept / nk, "drop_present": present / nd, "aeb_R_ceil": float(np.mean(rec))}


def cross_fit(pages, views, hist: bool):
    """Out-of-fold probabilities: (base or only model on v['x'], rescue model on v['xw'] or None)."""
    pm, pw = [None] * len(pages), [None] * len(pages)
    ys = [labels(p, v["bs"]) for p, v in zip(pages, views)]
    yw = [labels(p, v["whole"]) if "whole" in v else None for p, v in zip(pages, views)]
    for bench, other in (("aeb", "trafilatura-eval"), ("trafilatura-eval", "aeb")):
        for k in range(5):
            tr = [
                i
                for i, p in enumerate(pages)
                if p["set"] in ("readability", other) or (p["set"] == bench and p["fold"] != k)
            ]
            m = fit(np.vstack([views[i]["x"] for i in tr]), np.concatenate([ys[i] for i in tr]), hist)
            mw = None
            if yw[0] is not None:
                out = [i for i in tr if (~views[i]["inm"]).any()]
                mw = fit(
                    np.vstack([views[i]["xw"][~views[i]["inm"]] for i in out]),
                    np.concatenate([yw[i][~views[i]["inm"]] for i in out]),
                    hist,
                )
            for i, p in enumerate(pages):
                if p["set"] == bench and p["fold"] == k:
                    v = views[i]
                    pm[i] = m.predict_proba(v["x"])[:, 1] if len(v["x"]) else np.zeros(0)
                    if mw is not None:
                        pw[i] = mw.predict_proba(v["xw"])[:, 1] if len(v["xw"]) else np.zeros(0)
    return pm, pw


def score(pages, views, pm, pw, tm=0.5, tw=0.5, gate=0) -> dict:
    """Out-of-fold quality; with `gate`, rescue only pages whose main content is under `gate` chars."""
    prf, k = [], np.zeros(4)
    for p, v, a, b in zip(pages, views, pm, pw):
        if p["set"] == "readability":
            continue
        if gate and sum(len(x.text) for x in v["bs"]) >= gate:
            b = np.zeros(len(b))
        text = compose(v, a, b, tm, tw)
        if p["set"] == "aeb":
            prf.append(token_prf(text, p["truth"]))
        else:
            k += snippet_scores(text, p["keep"], p["drop"])
    prf = np.array(prf).mean(0)
    return {"P": prf[0], "R": prf[1], "F1": prf[2], "keep": k[0] / k[1], "drop": k[2] / k[3]}


def ms_per_page(variants, pages, rounds: int) -> dict:
    """CPU ms per AEB page of render + blocks + features + the shipped trees (on the first
    len(FEATURES) columns: the cost depends on the number of blocks), best and median of
    interleaved rounds."""
    m = load_model()
    html = [p["html"] for p in pages if p["set"] == "aeb"]
    res = {v: [] for v in variants}
    for _ in range(rounds):
        for var in variants:
            t = time.process_time()
            for h in html:
                v = view(var, h)
                pm = m.keep_probability(v["x"]) if len(v["x"]) else np.zeros(0)
                xw = v.get("xw", [])
                pw = m.keep_probability(np.ascontiguousarray(xw[:, : len(FEATURES)])) if len(xw) else pm
                compose(v, pm, pw, 0.5, 0.5)
            res[var].append((time.process_time() - t) / len(html) * 1e3)
    return {v: (min(r), float(np.median(r))) for v, r in res.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", default="base,rescue10", help=f"comma-separated, or all: {','.join(ALL)}")
    ap.add_argument(
        "--trees",
        choices=("hist", "shipped"),
        default="hist",
        help="histogram trees (fast) or the shipped kind",
    )
    ap.add_argument("--rounds", type=int, default=3, help="timing rounds (interleaved)")
    ap.add_argument("--weak-cache", type=Path, help="JSON file caching trafilatura's output per page")
    args = ap.parse_args()
    variants = list(ALL) if args.variants == "all" else args.variants.split(",")
    for v in variants:
        if v not in (*SWITCHES, "aligned", "unmask", "unmask-all") and not re.fullmatch(r"rescue-?\d+", v):
            ap.error(f"unknown variant {v!r}: one of {', '.join(ALL)} (rescueK for any K)")
    if not DATA.is_dir():
        print(f"no data at {DATA}; nothing to measure")
        return 0
    hist = args.trees == "hist"
    pages = load_pages(args.weak_cache)
    print(f"pages: {Counter(p['set'] for p in pages)}; trees: {'histogram' if hist else 'as shipped'}")
    times = ms_per_page(variants, pages, args.rounds)
    print(
        f"{'variant':<12} {'thr':>5} {'keep_ceil':>9} {'drop_pres':>9} {'aebR_ceil':>9} {'P':>6} {'R':>6} "
        f"{'F1':>6} {'keep':>6} {'drop':>6} {'ms min/med':>11}"
    )
    for var in variants:
        views = [view(var, p["html"]) for p in pages]
        c = ceilings(pages, views)
        pm, pw = cross_fit(pages, views, hist)
        rescue = var.startswith("rescue")
        sweep = [(t, 0) for t in (0.5, 0.6, 0.7, 0.8, 0.9)] + [(0.7, 500), (0.8, 500)]
        for t, gate in sweep if rescue else [(t, 0) for t in ((0.4, 0.5, 0.6) if var == "base" else (0.5,))]:
            s = score(pages, views, pm, pw, 0.5 if rescue else t, t, gate)
            name = f"{var}<{gate}" if gate else var
            ceil = f"{c['keep_ceil']:9.4f} {c['drop_present']:9.4f} {c['aeb_R_ceil']:9.4f}"
            ms = f"{times[var][0]:5.2f}/{times[var][1]:<5.2f}"
            if gate:  # the gated pass is timed on the shipped function (docs/extraction.md)
                ceil, ms = f"{'-':>9} {'-':>9} {'-':>9}", f"{'-':>11}"
            print(
                f"{name:<12} {t:5.2f} {ceil} "
                f"{s['P']:6.4f} {s['R']:6.4f} {s['F1']:6.4f} {s['keep']:6.4f} {s['drop']:6.4f} {ms}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
