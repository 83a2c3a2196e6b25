"""Issue 19, session 11: page-adaptive `blocks`, strict trees on article pages, the shipped ones elsewhere.

Session 10 found one training setting (trafilatura-eval's weak labels at 0.5, each page the same total
weight: "strict") that lifts trafilatura-eval drop by +0.012 out of fold but costs the crawl set's
non-article pages a sixth of their must-keep snippets. Here both sets of trees score every block and a
rule per page decides which probabilities the shipped decoder (core_flags + headline_off) sees:

  shipped    the shipped trees' p
  gate       on a page with a core by the shipped trees (a block at p >= CORE_P with >= CORE_CHARS
             characters, as core_flags defines it): the strict trees' p; elsewhere the shipped p
  gate mean  on such a page the mean of the two logits; elsewhere the shipped p
  mean       the mean of the two logits on every page
  gate vote  on such a page, blocks outside the shipped core's span (+- CORE_MARGIN): min of the two p
             (the strict trees as a second vote); elsewhere the shipped p
  strict     the strict trees everywhere (a reference, not a candidate)
  gate either, gate strict   (added after reading where "strict" gains, so post hoc: printed, never
             a reason to ship) the strict trees on a page with a core by either set of trees / by the
             strict trees; elsewhere the shipped p

The rule stated before any of these was scored: "gate" is the single a-priori candidate; the nested rule
of session 10 (each of the 10 site folds chosen on the other nine: keep and AEB F1 >= the shipped
trees', then the most drop + F1) over {shipped, gate, gate mean, mean, gate vote} is the honest estimate.

Every number is the full shipped path with the rescue: each AEB and trafilatura-eval page through
extract_rescue.page_texts with its site fold's shipped trees (`model_for`), the strict trees of the same
fold and the site fold's rescue trees (`rescue_for`), as bench/bench_extract.py scores `blocks`; the 86
crawl pages with the full models (titles apart), overall and by site. The strict files come from
scripts/train_extract_blocks.py --weak-weight 0.5 --per-page --out S --folds-out SF (the training
script pins OpenBLAS's kernels; this bench fits nothing).

`--speed N`: pages/s per core of the step's path (main_page per page, page_texts per batch of 16,
rescue on), the shipped trees against "gate" and "gate either" in the same run, best of N alternating.
The pair's decoder (`pair_flags`) is what a shipped version would run: one matrix per batch (the two
sets share their word model), the strict trees walked only over the rows of the pages that use them.
With --strict and --strict-folds set to the shipped files every rule must print the shipped row
(a check of the harness; the shipped row is bench/bench_extract.py's `blocks`, to the digit).

Run: PYTHONPATH=src PRETRAIN_SHARED_DATA=../shared/data .venv/bin/python bench/bench_extract_page.py
--strict S --strict-folds SF [--speed N]   (about 1 minute; --speed 3: about 2)
"""

from __future__ import annotations

import argparse
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import pretrain.curate.extract_rescue as rescue_mod
from pretrain.curate.extract_blocks import (
    CORE_CHARS,
    CORE_MARGIN,
    CORE_P,
    BlockModel,
    ShippedTrees,
    batch_matrix,
    core_flags,
    headline_off,
    load_model,
    model_for,
)
from pretrain.curate.extract_body import main_page
from pretrain.curate.extract_eval import (
    aeb_pages,
    crawl_pages,
    crawl_scores,
    site_fold,
    snippet_scores,
    token_prf,
    trafilatura_pages,
)
from pretrain.curate.extract_rescue import load_rescue, page_texts, rescue_for

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_extract_stack as st  # noqa: E402  (the data folder, the missing-data line)
from bench_extract import by_site  # noqa: E402  (crawl keep and drop by site)
from bench_extract_train import aggregate, choose, paired  # noqa: E402  (session 10's harness)

SHARED = st.SHARED
RULES = ("shipped", "gate", "gate mean", "mean", "gate vote", "strict", "gate either", "gate strict")
CANDIDATES = ("shipped", "gate", "gate mean", "mean", "gate vote")  # stated before any score was seen
POST_HOC = ("gate either", "gate strict")  # added after reading where "strict" gains: not for choosing


@dataclass(frozen=True)
class Pair(ShippedTrees):
    """The shipped trees and the strict ones, and the rule that combines them per page."""

    ship: BlockModel
    strict: BlockModel
    rule: str


def _logit(p: np.ndarray) -> np.ndarray:
    q = np.clip(p, 1e-9, 1 - 1e-9)
    return np.log(q / (1 - q))


def _cores(p: np.ndarray, chars: np.ndarray) -> np.ndarray:
    return np.flatnonzero((p >= CORE_P) & (chars >= CORE_CHARS))


def combine(rule: str, ps: np.ndarray, pt: np.ndarray, chars: np.ndarray) -> np.ndarray:
    """One page's keep probabilities under `rule` (ps: shipped trees, pt: strict trees; pt is only
    read where the rule uses it)."""
    if rule == "shipped":
        return ps
    if rule == "strict":
        return pt
    if rule == "mean":
        return 1 / (1 + np.exp(-(_logit(ps) + _logit(pt)) / 2))
    core = _cores(ps, chars)
    if rule == "gate either":  # post hoc: a core by either set of trees
        return pt if len(core) or len(_cores(pt, chars)) else ps
    if rule == "gate strict":  # post hoc: a core by the strict trees
        return pt if len(_cores(pt, chars)) else ps
    if not len(core):
        return ps
    if rule == "gate":
        return pt
    if rule == "gate mean":
        return 1 / (1 + np.exp(-(_logit(ps) + _logit(pt)) / 2))
    if rule == "gate vote":
        row = np.arange(len(ps))
        out = (row < core[0] - CORE_MARGIN) | (row > core[-1] + CORE_MARGIN)
        return np.where(out, np.minimum(ps, pt), ps)
    raise ValueError(rule)


def needs_strict(rule: str, ps: np.ndarray, chars: np.ndarray) -> bool:
    """Whether a page's decision under `rule` reads the strict trees at all."""
    if rule == "shipped":
        return False
    return rule in ("strict", "mean", "gate either", "gate strict") or bool(len(_cores(ps, chars)))


def pair_flags(pages, m: Pair, cols) -> list[list[bool]]:
    """keep_flags with the pair, as a shipped version would run it on the step's batch: one matrix
    (the two sets of trees share their word model: the training script fits it from the pages alone,
    whatever the weights), one walk of the shipped trees over the batch, one walk of the strict trees
    over the rows of the pages the rule sends to them, then each page through core_flags +
    headline_off on its combined p."""
    got = shipped_p(pages, m.ship, cols)
    if got is None:
        return [[] for _ in pages]
    x, chars, ps = got
    sizes = [len(bs) for bs in pages]
    edges = np.cumsum([0, *sizes])
    want = [needs_strict(m.rule, ps[a:b], chars[a:b]) for a, b in zip(edges[:-1], edges[1:])]
    rows = np.concatenate([np.arange(a, b) for a, b, w in zip(edges[:-1], edges[1:], want) if w] or [[]])
    pt = np.full(len(x), np.nan)
    if len(rows):
        xt = x if same_words(m) else batch_matrix(pages, cols, m.strict)
        pt[rows.astype(np.int64)] = m.strict.keep_probability(xt[rows.astype(np.int64)])
    out = []
    for bs, a, b in zip(pages, edges[:-1], edges[1:]):
        p = combine(m.rule, ps[a:b], pt[a:b], chars[a:b])
        out.append(headline_off(core_flags(p, chars[a:b], m.threshold), bs, p, chars[a:b]).tolist())
    return out


def shipped_p(pages, ship: BlockModel, cols):
    """The batch's matrix, each block's characters and the shipped trees' p (None: no blocks)."""
    if not sum(len(bs) for bs in pages):
        return None
    x = batch_matrix(pages, cols, ship)
    chars = np.fromiter((len(b.text) for bs in pages for b in bs), np.int64, len(x))
    return x, chars, ship.keep_probability(x)


_SAME: dict = {}


def same_words(m: Pair) -> bool:
    key = (id(m.ship), id(m.strict))
    if key not in _SAME:
        _SAME[key] = (m.ship.words is None and m.strict.words is None) or (
            m.ship.words is not None and m.strict.words is not None
            and m.ship.words.to_dict() == m.strict.words.to_dict())
    return _SAME[key]


@contextmanager
def paired_decoder():
    """page_texts (the shipped path with the rescue) deciding with `pair_flags` when handed a Pair."""
    original = rescue_mod.keep_flags

    def flags(pages, model=None, cols=None):
        return pair_flags(pages, model, cols) if isinstance(model, Pair) else original(pages, model, cols)

    rescue_mod.keep_flags = flags
    try:
        yield
    finally:
        rescue_mod.keep_flags = original


def text_of(page, m, rescue) -> tuple[str, str]:
    html, (tree, bs, cols) = page
    got: list[str] = []
    return page_texts([html], [bs], m, rescue, cols=[cols], trees=[tree], titles=got)[0], got[0]


def benchmark_scores(strict_folds: str) -> dict[str, dict[str, dict[str, list]]]:
    """{rule: {fold: {page: score}}} on AEB (P, R, F1) and trafilatura-eval (kept, keep, dropped, drop)."""
    aeb = [(u, h, t) for _, h, t, u in aeb_pages(SHARED / "html" / "scrapinghub-aeb", with_url=True)]
    tra = [(u, h, (k, d)) for _, h, k, d, u in
           trafilatura_pages(SHARED / "html" / "trafilatura-eval", with_url=True)]
    out: dict = {r: {} for r in RULES}
    for bench, pages in (("aeb", aeb), ("trafilatura-eval", tra)):
        for i, (url, html, truth) in enumerate(pages):
            fold = f"{bench}/{site_fold(url)}"
            parsed = (html, main_page(html))
            ship, strict, resc = model_for(bench, url), load_model(strict_folds, fold), rescue_for(bench, url)
            for rule in RULES:
                text, _ = text_of(parsed, Pair(ship, strict, rule), resc)
                r = token_prf(text, truth) if bench == "aeb" else snippet_scores(text, *truth)
                out[rule].setdefault(fold, {})[f"{url}\t{i}"] = [float(v) for v in r]
    return {r: dict(sorted(folds.items())) for r, folds in out.items()}


def crawl_table(strict: str) -> dict[str, dict]:
    titles: dict = {}
    pages = list(crawl_pages(SHARED / "warc", titles=titles))
    parsed = {id(p[1]): (p[1], main_page(p[1])) for p in pages}
    ship, resc = load_model(), load_rescue()
    out = {}
    for rule in RULES:
        m = Pair(ship, load_model(strict), rule)
        texts = {k: text_of(v, m, resc) for k, v in parsed.items()}

        def extract(html, url, texts=texts):
            return texts[id(html)]

        q = by_site(crawl_scores(extract, pages, titles), extract, pages)
        q["gated"] = sum(bool(((ship.keep_probability(batch_matrix([v[1][1]], [v[1][2]], ship)) >= CORE_P)
                               & (np.array([len(b.text) for b in v[1][1]]) >= CORE_CHARS)).any())
                         for v in parsed.values() if v[1][1])
        out[rule] = q
    return out


def speed(strict: str, repeat: int, rules=("gate", "gate either")) -> None:
    """Pages/s per core of the step's path (main_page per page, page_texts per batch of BATCH_PAGES,
    rescue on), the shipped trees against each pair rule, alternating, best of `repeat` (CPU time)."""
    import os
    import time

    from pretrain.curate.extract import BATCH_PAGES

    sets = speed_sets()
    ship, resc = load_model(), load_rescue()
    models = {"shipped": ship, **{r: Pair(ship, load_model(strict), r) for r in rules}}

    def run(htmls, m):
        t = time.process_time()
        for i in range(0, len(htmls), BATCH_PAGES):
            batch = htmls[i : i + BATCH_PAGES]
            parsed = [main_page(h) for h in batch]
            page_texts(batch, [b for _, b, _ in parsed], m, resc, cols=[c for _, _, c in parsed],
                       trees=[t for t, _, _ in parsed])
        return time.process_time() - t

    load = os.getloadavg()[0]
    print(f"\nspeed: the step's path, pages/s per core, best of {repeat} alternating (load {load:.1f})")
    for name, htmls, best in best_of(sets, models, run, repeat):
        n = len(htmls)
        print(f"  {name:<17} {n:>4} pages: " + ", ".join(
            f"{k} {n / best[k]:.0f}" + ("" if k == "shipped" else f" ({best['shipped'] / best[k]:.3f}x)")
            for k in models))


def best_of(sets: dict[str, list], models: dict, run, repeat: int):
    """Each set's (name, pages, {model: its least `run(pages, model)`}) over `repeat` rounds in which the
    models take turns (a change in the machine's load falls on all of them alike)."""
    for name, htmls in sets.items():
        best = dict.fromkeys(models, float("inf"))
        for _ in range(repeat):
            for k, m in models.items():
                best[k] = min(best[k], run(htmls, m))
        yield name, htmls, best


def speed_sets() -> dict[str, list[str]]:
    """The html of the pages the speed runs read: AEB, trafilatura-eval, the crawl set."""
    return {
        "AEB": [h for _, h, _ in aeb_pages(SHARED / "html" / "scrapinghub-aeb")],
        "trafilatura-eval": [h for _, h, _, _ in trafilatura_pages(SHARED / "html" / "trafilatura-eval")],
        "crawl": [p[1] for p in crawl_pages(SHARED / "warc")],
    }


def nested(results: dict[str, dict], candidates=CANDIDATES) -> tuple[dict, list[str]]:
    return choose(results, candidates, list(results["shipped"]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--strict", help="the strict full model (train_extract_blocks.py --out)")
    ap.add_argument("--strict-folds", help="its 10 fold models (--folds-out)")
    ap.add_argument("--speed", type=int, default=0, metavar="REPEAT",
                    help="only the step's pages/s, shipped against the pair rules, best of REPEAT")
    args = ap.parse_args()
    if st.no_data():
        return 0
    if not args.strict or not args.strict_folds:  # bench/run_all.py runs every bench without arguments
        print("needs the strict trees, which are not in the repository: PYTHONPATH=src .venv/bin/python"
              " scripts/train_extract_blocks.py --weak-weight 0.5 --per-page --out S --folds-out SF;"
              " then --strict S --strict-folds SF. Nothing measured.")
        return 0
    for f in (args.strict, args.strict_folds):
        if not Path(f).is_file():
            print(f"{f}: no such file; make the strict trees with scripts/train_extract_blocks.py "
                  "--weak-weight 0.5 --per-page --out S --folds-out SF")
            return 2
    if args.speed:
        with paired_decoder():
            speed(args.strict, args.speed)
        return 0
    with paired_decoder():
        res = benchmark_scores(args.strict_folds)
        crawl = crawl_table(args.strict)
    folds = list(res["shipped"])
    head = "".join(f"{k:>8}" for k in ("AEB P", "R", "F1", "keep", "drop"))
    print(f"{'rule':<12}{head}   (out of fold by site, rescue on)")
    for rule in RULES:
        s = aggregate(res[rule], folds)
        print(f"{rule:<12}" + "".join(f"{s[k]:8.4f}" for k in ("P", "R", "F1", "keep", "drop"))
              + f"   kept {s['kept']:.0f}, dropped {s['dropped']:.0f}")
        if rule != "shipped":
            print("    vs shipped: " + paired(res["shipped"], res[rule]))
    shown = ("shipped", "gate", "gate vote", "gate either")
    print("  per fold, AEB F1 / trafilatura-eval keep / drop: " + " -> ".join(shown))
    for f in folds:
        s = [aggregate(res[r], [f]) for r in shown]
        ks = ("F1",) if f.startswith("aeb") else ("keep", "drop")
        print(f"    {f:<20} " + ", ".join(f"{k} " + " -> ".join(f"{x[k]:.4f}" for x in s) for k in ks))
    print("nested (each fold's rule chosen on the other nine: keep and F1 >= shipped's, then most drop + F1)")
    for label, cands in (("stated", CANDIDATES), ("+ post hoc", CANDIDATES + POST_HOC)):
        out, chosen = nested(res, cands)
        s = aggregate(out, folds)
        print(f"{label:<12}" + "".join(f"{s[k]:8.4f}" for k in ("P", "R", "F1", "keep", "drop"))
              + f"   over {', '.join(cands)}")
        print("    vs shipped: " + paired(res["shipped"], out))
        print("    chosen: " + "; ".join(f"{f}: {c}" for f, c in zip(folds, chosen)))
    print(f"\ncrawl ({crawl['shipped']['pages']} pages, full models, rescue on, titles apart;"
          f" pages with a core: {crawl['shipped']['gated']})")
    print(f"{'rule':<12}{'keep':>8}{'drop':>8}{'titles':>8}{'site keep':>10}{'site drop':>10}  no-main clean")
    for rule, q in crawl.items():
        print(f"{rule:<12}{q['kept']:8.4f}{q['dropped']:8.4f}{q['title_kept']:8.4f}{q['kept_by_site']:10.4f}"
              f"{q['dropped_by_site']:10.4f}  {q['no_main_clean'] * q['no_main']:.0f}/{q['no_main']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
