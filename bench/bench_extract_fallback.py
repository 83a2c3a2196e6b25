"""Issue 19, session 13: the strict trees on every page, with a per-page fallback to the shipped ones.

Session 11 measured the strict trees (scripts/train_extract_blocks.py --weak-weight 0.5 --per-page)
used everywhere: all three benchmark goals out of fold (AEB F1 0.9566, keep 0.9329, drop 0.9055) but
crawl keep 0.934 -> 0.858, lost on one shop's product pages where the strict trees keep the page's
template and drop its short product text. Here the strict trees decide every page, and a page falls
back to the shipped trees' decision when the strict one looks broken (`falls_back`):

  r   the strict decision keeps less than r x the characters the shipped decision keeps (of the
      main-content blocks, after core_flags + headline_off; 0: never on this ground)
  q   a block rule:
        none          no block rule
        core dropped  the strict decision drops a block of the shipped trees' core (p >= CORE_P with
                      >= CORE_CHARS characters: text the shipped trees are sure of)
        no core       the shipped trees find no core (a non-article page; with r = 0 this is
                      session 11's "gate")

Post hoc (added after reading the one crawl snippet every r < 1 loses, a long acknowledgements
paragraph of an article page that the strict trees drop while keeping 97% of its characters; printed,
never chosen by the stated rules, never a reason to ship):

        long dropped  the strict decision drops a block of >= LONG_CHARS characters that the shipped
                      one keeps (200: the features' "long paragraph", the word model's max_chars)

Candidates (fixed before any was scored): "shipped", and every (r, q) of RATIOS x QS (r = 0 with
q = none is the strict trees everywhere). Two stated rules choose among them, both nested by site
fold, each fold's candidate chosen without its own pages:

- nested (session 10's rule, bench_extract_train.choose): for each of the 10 benchmark test folds,
  on the other nine: keep and AEB F1 >= the shipped trees', then the most drop + F1;
- nested + crawl: the same over 15 test folds (the 86 crawl pages split by site_fold too), with one
  more condition on the training folds: crawl keep >= the shipped trees' - 0.005 (the brief's
  tolerance). A benchmark fold is chosen with all five crawl folds in view, a crawl fold with the
  other four (the shop, 29 pages, is in crawl fold 0): every crawl page is scored by a choice made
  without its site.

Every number is the full shipped path with the rescue: each AEB and trafilatura-eval page through
extract_rescue.page_texts with its site fold's shipped trees (`model_for`), the strict trees of the
same fold and its rescue trees (`rescue_for`), as bench/bench_extract.py scores `blocks`; the crawl
pages with the full models (titles apart), overall and by site (bench_extract.by_site). A page's text
under a candidate is its shipped or its strict text, so each page is extracted twice and every
candidate is scored from the two; the candidates the rules choose are extracted again through
`fallback_flags` (what a shipped version would run: one matrix, both walks, the choice per page) and
must give the same text on every page (printed as a check). With --strict and --strict-folds set to
the shipped files every candidate prints the shipped row.

`--speed N`: pages/s per core of the step's path (main_page per page, page_texts per batch of 16,
rescue on), shipped against the fallback at each `--speed-rule R[:Q]` (default 0.6 and 0.85) and
against `extract.strict = true` (extract_blocks.strict_model, since session 14), best of N
alternating (bench_extract_page's harness).

`--fresh DIR` (issue 19, session 14): only the "fresh" set (extract_eval.fresh_pages: 57 labelled
non-article pages of three PyPI sdists unpacked in DIR, sites in none of the other sets; not in the
repository, docs/extraction.md gives the commands), full models, titles apart, with the decision rule
committed with its labels before any score: candidate C ("r 0.85, long dropped") passes when its keep is
>= shipped's - 0.01 pooled and by site and its drop >= shipped's - 0.02 pooled (`FRESH_RULE`). Also the
strict trees everywhere, r 0.85 alone, resiliparse and trafilatura, by kind of page, and the pages where
C's text differs from shipped's. Needs --strict only; not ../shared/data.

Run: PYTHONPATH=src PRETRAIN_SHARED_DATA=../shared/data .venv/bin/python bench/bench_extract_fallback.py
[--strict S --strict-folds SF] [--paired] [--speed N]   (about 40 s; --speed 5: about 1 minute; without
--strict: the shipped strict trees, src/pretrain/data/extract_blocks_strict*.json*, since session 14)
     PYTHONPATH=src .venv/bin/python bench/bench_extract_fallback.py [--strict S] --fresh DIR
The strict files: PYTHONPATH=src .venv/bin/python scripts/train_extract_blocks.py --weak-weight 0.5
--per-page --cache C --out S --folds-out SF (OpenBLAS pinned to the shipped files' kernels; 4-10
minutes; session 11's and session 13's runs wrote the same bytes: S sha256 6224b221..., SF b5cb630b...).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import pretrain.curate.extract_rescue as rescue_mod
from pretrain.curate.extract_blocks import (
    BODY_COLUMNS,
    CORE_CHARS,
    CORE_P,
    BlockModel,
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
    site,
    site_fold,
    snippet_scores,
    token_prf,
    trafilatura_pages,
)
from pretrain.curate.extract_rescue import load_rescue, page_texts, rescue_for

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_extract_page as pg  # noqa: E402  (ShippedTrees, same_words, the speed harness)
import bench_extract_stack as st  # noqa: E402  (the data folder, the missing-data line)
from bench_extract_train import aggregate, choose, paired  # noqa: E402  (session 10's harness)

SHARED = st.SHARED
RATIOS = (0.0, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0)
QS = ("none", "core dropped", "no core")
POST_QS = ("long dropped",)  # post hoc: see the docstring
LONG_CHARS = 200
MAKE_STRICT = ("PYTHONPATH=src .venv/bin/python scripts/train_extract_blocks.py --weak-weight 0.5 --per-page"
               " --out S --folds-out SF")
CRAWL_TOLERANCE = 0.005  # the brief: crawl keep not below the shipped trees' by more than this


def name(r: float, q: str) -> str:
    return f"r {r:g}" + ("" if q == "none" else f", {q}")


CANDIDATES = ("shipped", *(name(r, q) for q in QS for r in RATIOS))
POST_HOC = tuple(name(r, q) for q in POST_QS for r in RATIOS)


@dataclass(frozen=True)
class Fallback(pg.ShippedTrees):
    """The strict trees, falling back to the shipped ones per page (`falls_back`)."""

    ship: BlockModel
    strict: BlockModel
    r: float
    q: str = "none"


def decode(p: np.ndarray, chars: np.ndarray, bs, threshold: float) -> np.ndarray:
    """One page's keep flags from its probabilities: the shipped decoder (core_flags + headline_off)."""
    return headline_off(core_flags(p, chars, threshold), bs, p, chars)


def falls_back(fs: np.ndarray, ft: np.ndarray, ps: np.ndarray, chars: np.ndarray, r: float, q: str) -> bool:
    """Whether a page takes the shipped decision `fs` instead of the strict one `ft` (ps: the shipped
    trees' p; chars: each block's length)."""
    if chars[ft].sum() < r * chars[fs].sum():
        return True
    if q == "none":
        return False
    core = (ps >= CORE_P) & (chars >= CORE_CHARS)
    if q == "core dropped":
        return bool((core & fs & ~ft).any())
    if q == "no core":
        return not core.any()
    if q == "long dropped":  # post hoc
        return bool(((chars >= LONG_CHARS) & fs & ~ft).any())
    raise ValueError(q)


def fallback_flags(pages, m: Fallback, cols) -> list[list[bool]]:
    """keep_flags with the fallback, as a shipped version would run it on the step's batch: one matrix
    (the two sets of trees share their word model), both walks over the batch, each page decoded
    twice (core_flags over the batch, headline_off per page) and the strict decision kept unless
    `falls_back`."""
    got = pg.shipped_p(pages, m.ship, cols)
    if got is None:
        return [[] for _ in pages]
    x, chars, ps = got
    xt = x if pg.same_words(pg.Pair(m.ship, m.strict, "strict")) else batch_matrix(pages, cols, m.strict)
    pt = m.strict.keep_probability(xt)
    sizes = [len(bs) for bs in pages]
    first = np.cumsum([0, *sizes[:-1]]) if len(pages) > 1 else None
    ks, kt = core_flags(ps, chars, m.threshold, first), core_flags(pt, chars, m.threshold, first)
    out, at = [], 0
    for bs in pages:  # the headline rule and the choice per page, on its rows (as keep_flags decodes)
        k = slice(at, at + len(bs))
        fs, ft = headline_off(ks[k], bs, ps[k], chars[k]), headline_off(kt[k], bs, pt[k], chars[k])
        out.append((fs if falls_back(fs, ft, ps[k], chars[k], m.r, m.q) else ft).tolist())
        at += len(bs)
    return out


def install() -> None:
    """page_texts (the shipped path with the rescue) deciding with `fallback_flags` when handed a
    Fallback, with bench_extract_page's pair_flags when handed a Pair (its speed harness)."""
    original = rescue_mod.keep_flags

    def flags(pages, model=None, cols=None):
        if isinstance(model, Fallback):
            return fallback_flags(pages, model, cols)
        if isinstance(model, pg.Pair):
            return pg.pair_flags(pages, model, cols)
        return original(pages, model, cols)

    rescue_mod.keep_flags = flags


def text_of(parsed, m) -> tuple[str, str]:
    """(text, title) of one parsed page (html, main_page(html)) with model `m` and rescue `parsed`'s."""
    html, (tree, bs, cols), rescue = parsed
    got: list[str] = []
    return page_texts([html], [bs], m, rescue, cols=[cols], trees=[tree], titles=got)[0], got[0]


@dataclass
class Seen:
    """One page: its fold, its shipped and strict texts, and what `falls_back` reads."""

    fold: str
    key: str
    texts: tuple[str, str]
    fs: np.ndarray
    ft: np.ndarray
    ps: np.ndarray
    chars: np.ndarray

    def fallback(self, r: float, q: str) -> bool:
        return falls_back(self.fs, self.ft, self.ps, self.chars, r, q)

    def text(self, cand: str) -> str:
        return self.texts[0] if cand == "shipped" or self.fallback(*parse(cand)) else self.texts[1]


def parse(cand: str) -> tuple[float, str]:
    """(r, q) of a candidate's name (`name`'s inverse)."""
    r, _, q = cand.removeprefix("r ").partition(", ")
    return float(r), q or "none"


def seen(fold: str, key: str, html: str, ship: BlockModel, strict: BlockModel, rescue: BlockModel) -> Seen:
    parsed = (html, main_page(html), rescue)
    _, bs, cols = parsed[1]
    texts = (text_of(parsed, ship)[0], text_of(parsed, strict)[0])
    if not bs:
        e = np.zeros(0)
        return Seen(fold, key, texts, e.astype(bool), e.astype(bool), e, e.astype(np.int64))
    cols = cols if cols is not None else np.zeros((len(bs), len(BODY_COLUMNS)), np.float32)
    chars = np.array([len(b.text) for b in bs], np.int64)
    ps = ship.keep_probability(batch_matrix([bs], [cols], ship))
    pt = strict.keep_probability(batch_matrix([bs], [cols], strict))
    t = ship.threshold
    return Seen(fold, key, texts, decode(ps, chars, bs, t), decode(pt, chars, bs, t), ps, chars)


def benchmark_pages(strict_folds: str) -> tuple[list[Seen], dict]:
    """Each AEB and trafilatura-eval page (its fold's models) and its truth ({key: truth})."""
    out, truth = [], {}
    aeb = [(u, h, t) for _, h, t, u in aeb_pages(SHARED / "html" / "scrapinghub-aeb", with_url=True)]
    tra = [(u, h, (k, d)) for _, h, k, d, u in
           trafilatura_pages(SHARED / "html" / "trafilatura-eval", with_url=True)]
    for bench, pages in (("aeb", aeb), ("trafilatura-eval", tra)):
        for i, (url, html, t) in enumerate(pages):
            fold, key = f"{bench}/{site_fold(url)}", f"{url}\t{i}"
            ship, strict = model_for(bench, url), load_model(strict_folds, fold)
            check_words(ship, strict)
            out.append(seen(fold, key, html, ship, strict, rescue_for(bench, url)))
            truth[key] = (bench, html, t)
    return out, truth


def check_words(ship: BlockModel, strict: BlockModel) -> None:
    if not pg.same_words(pg.Pair(ship, strict, "strict")):  # (the rescue reads the shipped trees' words)
        raise SystemExit("the strict trees' word model differs from the shipped one's: not the same pages?")


def bench_score(bench: str, text: str, truth) -> list[float]:
    return [float(v) for v in (token_prf(text, truth) if bench == "aeb" else snippet_scores(text, *truth))]


def crawl_seen(strict: str) -> tuple[list[Seen], list[tuple], dict]:
    titles: dict = {}
    pages = list(crawl_pages(SHARED / "warc", titles=titles))
    ship, strict_m, resc = load_model(), load_model(strict), load_rescue()
    check_words(ship, strict_m)
    return [seen(f"crawl/{site_fold(p[5])}", p[0], p[1], ship, strict_m, resc) for p in pages], pages, titles


def results(bench: list[Seen], truth: dict, crawl: list[Seen], cpages: list[tuple]) -> dict:
    """{candidate: {fold: {page: score}}}: benchmark pages as session 10's harness scores them, crawl
    pages as (kept, keep, dropped, drop) snippets, titles apart."""
    labels = {p[0]: p for p in cpages}
    out: dict = {}
    for cand in CANDIDATES + POST_HOC:
        res: dict = {}
        for s in bench:
            b, _, t = truth[s.key]
            res.setdefault(s.fold, {})[s.key] = bench_score(b, s.text(cand), t)
        for s in crawl:
            _, _, keep, drop, _, _ = labels[s.key]
            res.setdefault(s.fold, {})[s.key] = [float(v) for v in snippet_scores(s.text(cand), keep, drop)]
        out[cand] = dict(sorted(res.items()))
    return out


def crawl_keep(res: dict, folds) -> float:
    t = np.array([v for f in folds for v in res[f].values()]).reshape(-1, 4).sum(0)
    return t[0] / max(t[1], 1)


def choose_crawl(res: dict, candidates=CANDIDATES) -> tuple[dict, list[str]]:
    """Nested + crawl: each of the 15 test folds' candidate chosen on the other fourteen (keep and F1 >=
    shipped's, crawl keep >= shipped's - CRAWL_TOLERANCE, then the most drop + F1)."""
    folds = list(res["shipped"])
    crawl = [f for f in folds if f.startswith("crawl")]
    out, chosen = {}, []
    for test in folds:
        train = [f for f in folds if f != test and not f.startswith("crawl")]
        ctrain = [f for f in crawl if f != test]
        b, bc = aggregate(res["shipped"], train), crawl_keep(res["shipped"], ctrain)
        best, value = "shipped", -1e9
        for cand in candidates:
            s = aggregate(res[cand], train)
            if s["keep"] < b["keep"] - 1e-12 or s["F1"] < b["F1"] - 1e-12:
                continue
            if crawl_keep(res[cand], ctrain) < bc - CRAWL_TOLERANCE - 1e-12:
                continue
            if s["drop"] + s["F1"] > value + 1e-12:
                best, value = cand, s["drop"] + s["F1"]
        chosen.append(best)
        out[test] = res[best][test]
    return out, chosen


def crawl_row(crawl: list[Seen], cpages: list[tuple], titles: dict, cand: str) -> dict:
    """keep, drop, titles, by site (bench_extract.by_site) and no-main clean of one candidate."""
    from bench_extract import by_site

    from pretrain.curate.extract_eval import crawl_scores

    texts = {s.key: s.text(cand) for s in crawl}
    keys = {id(p[1]): p[0] for p in cpages}

    def extract(html, url):
        return texts[keys[id(html)]]

    return by_site(crawl_scores(extract, cpages, titles), extract, cpages)


def verify(bench: list[Seen], crawl: list[Seen], strict: str, strict_folds: str, cands) -> str:
    """Extract every page again through `fallback_flags` with each candidate in `cands` and count the
    pages whose text differs from the one scored (0 expected)."""
    from pretrain.curate.extract_blocks import load_model as lm

    urls = {}
    sets = (("aeb", "scrapinghub-aeb", aeb_pages),
            ("trafilatura-eval", "trafilatura-eval", trafilatura_pages))
    for bench_name, root, it in sets:
        for i, row in enumerate(it(SHARED / "html" / root, with_url=True)):
            urls[f"{row[-1]}\t{i}"] = (bench_name, row[1], row[-1])
    chtml = {p[0]: p[1] for p in crawl_pages(SHARED / "warc")}
    bad = {}
    for cand in cands:
        if cand == "shipped":
            continue
        r, q = parse(cand)
        n = 0
        for s in bench:
            b, html, url = urls[s.key]
            m = Fallback(model_for(b, url), lm(strict_folds, s.fold), r, q)
            n += text_of((html, main_page(html), rescue_for(b, url)), m)[0] != s.text(cand)
        full = Fallback(lm(), lm(strict), r, q)
        for s in crawl:
            n += text_of((chtml[s.key], main_page(chtml[s.key]), load_rescue()), full)[0] != s.text(cand)
        bad[cand] = n
    return ", ".join(f"{c}: {n}" for c, n in bad.items()) or "none to check (only shipped chosen)"


def report(args) -> None:
    bench, truth = benchmark_pages(args.strict_folds)
    crawl, cpages, titles = crawl_seen(args.strict)
    res = results(bench, truth, crawl, cpages)
    folds = [f for f in res["shipped"] if not f.startswith("crawl")]
    cfolds = [f for f in res["shipped"] if f.startswith("crawl")]
    print(f"{'candidate':<22}{'AEB F1':>8}{'keep':>8}{'drop':>8}{'crawl':>8}{'site':>8}{'c.drop':>8}"
          f"   fell back: AEB, trafilatura-eval, crawl pages  (out of fold by site, rescue on)")
    base = crawl_row(crawl, cpages, titles, "shipped")
    for cand in CANDIDATES + POST_HOC:
        if cand == POST_HOC[0]:
            print("post hoc (never chosen by the stated rules):")
        s = aggregate(res[cand], folds)
        c = base if cand == "shipped" else crawl_row(crawl, cpages, titles, cand)
        fell = [sum(cand != "shipped" and x.fallback(*parse(cand)) for x in xs)
                for xs in ([x for x in bench if x.fold.startswith("aeb")],
                           [x for x in bench if x.fold.startswith("traf")], crawl)]
        print(f"{cand:<22}" + "".join(f"{v:8.4f}" for v in (s["F1"], s["keep"], s["drop"], c["kept"],
                                                              c["kept_by_site"], c["dropped"]))
              + f"   {fell[0]}, {fell[1]}, {fell[2]}   kept {s['kept']:.0f}, dropped {s['dropped']:.0f}")
        if cand != "shipped" and args.paired:
            print("    vs shipped: " + paired(res["shipped"], {f: res[cand][f] for f in folds}))
    ship_bench = {f: res["shipped"][f] for f in folds}
    only_bench = {k: {f: v[f] for f in folds} for k, v in res.items()}
    print("\nnested (each fold's candidate chosen without its pages; ties: the first in the table)")
    picked = set()
    rules = (("nested", False, CANDIDATES), ("  + post hoc", False, CANDIDATES + POST_HOC),
             ("nested + crawl", True, CANDIDATES), ("  + post hoc", True, CANDIDATES + POST_HOC))
    for label, with_crawl, cands in rules:
        out, chosen = choose_crawl(res, cands) if with_crawl else choose(only_bench, cands, folds)
        picked |= set(chosen)
        s = aggregate(out, folds)
        ck = f", crawl keep {crawl_keep(out, cfolds):.4f}" if with_crawl else ""
        print(f"{label:<16} AEB F1 {s['F1']:.4f}, keep {s['keep']:.4f} ({s['kept']:.0f}),"
              f" drop {s['drop']:.4f} ({s['dropped']:.0f}){ck}")
        print("    vs shipped: " + paired(ship_bench, {f: out[f] for f in folds}))
        names = list(res["shipped"]) if with_crawl else folds
        print("    chosen: " + "; ".join(f"{f}: {c}" for f, c in zip(names, chosen)))
        if not with_crawl:
            top = max(chosen, key=chosen.count)
            c = crawl_row(crawl, cpages, titles, top)
            print(f"    crawl under the most chosen ({top}, {chosen.count(top)} of 10): keep {c['kept']:.4f},"
                  f" by site {c['kept_by_site']:.4f}, drop {c['dropped']:.4f}")
    if not args.no_verify:
        print("\npages whose text through fallback_flags differs from the one scored (0 expected): "
              + verify(bench, crawl, args.strict, args.strict_folds, sorted(picked | set(args.verify))))


FRESH_C = "r 0.85, long dropped"  # session 13's post-hoc candidate, the one the fresh set judges
FRESH_ROWS = ("shipped", "r 0", "r 0.85", FRESH_C)
FRESH_RULE = {"keep": 0.01, "keep by site": 0.01, "drop": 0.02}  # C's tolerated loss against shipped


def fresh_verdict(c: dict, ship: dict) -> tuple[bool, str]:
    """The decision rule committed with the fresh labels: C's pooled keep, by-site keep and pooled drop
    each within FRESH_RULE of shipped's."""
    got = {"keep": c["kept"] - ship["kept"], "keep by site": c["kept_by_site"] - ship["kept_by_site"],
           "drop": c["dropped"] - ship["dropped"]}
    ok = {k: got[k] >= -FRESH_RULE[k] - 1e-12 for k in got}
    why = ", ".join(f"{k} {got[k]:+.4f} (>= -{FRESH_RULE[k]}: {'yes' if ok[k] else 'NO'})" for k in got)
    return all(ok.values()), why


def fresh_report(root: Path, strict: str) -> None:
    """The fresh set: each candidate of FRESH_ROWS through the shipped path with the rescue (full models,
    titles apart), resiliparse and trafilatura; overall, by site, by kind; the verdict on C."""
    import json

    from bench_extract import crawl_scorer, evaluate_crawl

    from pretrain.curate.extract_eval import FRESH_LABELS, fresh_pages

    titles: dict = {}
    pages = list(fresh_pages(root, titles=titles))
    head = json.loads(FRESH_LABELS.read_text(encoding="utf-8"))
    kind = {f"{head['sdists'][p['package']]['dir']}/{p['path']}": p["kind"] for p in head["pages"]}
    ship, strict_m, resc = load_model(), load_model(strict), load_rescue()
    check_words(ship, strict_m)
    seen_ = [seen("fresh", p[0], p[1], ship, strict_m, resc) for p in pages]
    n_keep, n_drop = sum(len(p[2]) for p in pages), sum(len(p[3]) for p in pages)
    print(f"fresh: {len(pages)} pages ({sum(p[4] for p in pages)} no main), {n_keep} keep and {n_drop} drop"
          f" snippets, {sum(len(t) for t in titles.values())} title snippets apart; full models, rescue on")
    kinds = sorted(set(kind.values()), key=lambda k: (-sum(v == k for v in kind.values()), k))
    print(f"{'row':<22}{'keep':>8}{'site':>8}{'drop':>8}{'site':>8}{'clean':>7}  fell back   "
          + "  ".join(f"{k} ({sum(v == k for v in kind.values())}) keep/drop" for k in kinds))
    rows, texts = {}, {}
    for cand in FRESH_ROWS + ("resiliparse", "trafilatura"):
        if cand in FRESH_ROWS:
            texts[cand] = {s.key: s.text(cand) for s in seen_}
            fell = sum(cand not in ("shipped", "r 0") and s.fallback(*parse(cand)) for s in seen_)
            q = crawl_row(seen_, pages, titles, cand)
        else:
            q, fell, f = evaluate_crawl(cand, pages), "-", crawl_scorer(cand)
            texts[cand] = {p[0]: f(p[1], p[5]) for p in pages}
        rows[cand] = q
        per = []
        for k in kinds:
            t = np.array([snippet_scores(texts[cand][p[0]], p[2], p[3]) for p in pages if kind[p[0]] == k])
            t = t.sum(0) if len(t) else np.zeros(4)
            per.append(f"{t[0] / max(t[1], 1):.3f}/{t[2] / max(t[3], 1):.3f}")
        print(f"{cand:<22}{q['kept']:8.4f}{q['kept_by_site']:8.4f}{q['dropped']:8.4f}{q['dropped_by_site']:8.4f}"
              f"{q['no_main_clean']:7.3f}  {fell!s:<10}  " + "  ".join(f"{x:>{len(k) + 15}}" for x, k in
                                                                     zip(per, kinds)))
    ok, why = fresh_verdict(rows[FRESH_C], rows["shipped"])
    print(f"\ndecision rule (committed with the labels): C = {FRESH_C}: {'PASSES' if ok else 'FAILS'}: {why}")
    print("\npages where C's text differs from shipped's (kept/keep, dropped/drop: shipped -> C; fell back):")
    for s, p in zip(seen_, pages):
        a, b = texts["shipped"][s.key], texts[FRESH_C][s.key]
        if a != b:
            x, y = snippet_scores(a, p[2], p[3]), snippet_scores(b, p[2], p[3])
            print(f"  {kind[s.key]:<8} {site(p[5]):<28} {x[0]}/{x[1]}, {x[2]}/{x[3]} -> "
                  f"{y[0]}/{y[1]}, {y[2]}/{y[3]}  {s.fallback(*parse(FRESH_C))}  {s.key}")
    r, q = parse(FRESH_C)
    full = Fallback(ship, strict_m, r, q)
    bad = sum(text_of((p[1], main_page(p[1]), resc), full)[0] != texts[FRESH_C][p[0]] for p in pages)
    print(f"\npages whose text through fallback_flags differs from the one scored (0 expected): {bad}")


def speed(strict: str, repeat: int, rules: list[tuple[float, str]]) -> None:
    """Pages/s per core of the step's path, shipped against each fallback, best of `repeat` alternating."""
    import os
    import time

    from pretrain.curate.extract import BATCH_PAGES

    sets = pg.speed_sets()
    ship, resc = load_model(), load_rescue()
    models = {"shipped": ship, **{name(r, q): Fallback(ship, load_model(strict), r, q) for r, q in rules}}
    from pretrain.curate.extract_blocks import strict_model

    models["extract.strict"] = strict_model()  # the shipped option (its own files; keep_flags' walk)

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
    for set_name, htmls, best in pg.best_of(sets, models, run, repeat):
        n = len(htmls)
        print(f"  {set_name:<17} {n:>4} pages: " + ", ".join(
            f"{k} {n / best[k]:.0f}" + ("" if k == "shipped" else f" ({best['shipped'] / best[k]:.3f}x)")
            for k in models))


def rule_arg(s: str) -> tuple[float, str]:
    r, _, q = s.partition(":")
    if q and q not in QS + POST_QS:
        raise argparse.ArgumentTypeError(f"{s}: q is one of {', '.join(QS + POST_QS)}")
    return float(r), q or "none"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--strict", help="the strict full model (train_extract_blocks.py --out; default: the"
                    " shipped extract_blocks_strict.json, since session 14)")
    ap.add_argument("--strict-folds", help="its 10 fold models (--folds-out; default: the shipped ones)")
    ap.add_argument("--paired", action="store_true", help="each candidate's paired deltas against shipped")
    ap.add_argument("--verify", action="append", default=[], metavar="CANDIDATE",
                    help="also extract this candidate (e.g. 'r 0.85') through fallback_flags and compare"
                         " (the candidates the nested rules choose always are)")
    ap.add_argument("--no-verify", action="store_true", help="skip the second extraction")
    ap.add_argument("--speed", type=int, default=0, metavar="REPEAT",
                    help="only the step's pages/s, shipped against --speed-rule, best of REPEAT")
    ap.add_argument("--speed-rule", type=rule_arg, action="append", metavar="R[:Q]",
                    help="a fallback to time (default 0.6 and 0.85)")
    ap.add_argument("--fresh", metavar="DIR",
                    help="only the fresh set, its pages unpacked in DIR (reads --strict only)")
    args = ap.parse_args()
    if not args.strict and not args.strict_folds:  # the shipped strict trees (extract.strict)
        from pretrain.curate.extract_blocks import STRICT_FOLDS_PATH, STRICT_PATH

        args.strict, args.strict_folds = str(STRICT_PATH), str(STRICT_FOLDS_PATH)
    if args.fresh:
        if not args.strict or not Path(args.strict).is_file():
            ap.error(f"--fresh needs --strict S (the strict full model; make it: {MAKE_STRICT})")
        install()
        try:
            fresh_report(Path(args.fresh), args.strict)
        except ValueError as e:  # a missing or changed page: the message names it and how to get it
            print(f"fresh set: {e}", file=sys.stderr)
            return 2
        return 0
    if st.no_data():
        return 0
    if not args.strict or not args.strict_folds:
        ap.error("--strict and --strict-folds go together")
    for f in (args.strict, args.strict_folds):
        if not Path(f).is_file():
            print(f"{f}: no such file; make the strict trees: {MAKE_STRICT}")
            return 2
    install()
    if args.speed:
        speed(args.strict, args.speed, args.speed_rule or [(0.6, "none"), (0.85, "none")])
        return 0
    report(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
