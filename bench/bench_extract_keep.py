"""Issue 19, session 11: where `blocks` loses must-keep snippets today, cheap ways to win keep back, and
the headroom traded for drop by a stricter decoder.

1. Where keep is lost (trafilatura-eval, the shipped path: site-fold trees, rescue on): each lost
   must-keep snippet is put in one class: on a page whose main content is under MIN_MAIN_CHARS (the
   rescue's pages; in the whole-page render or not), not in the main-content render (in the whole-page
   render, or not even there), in a main-content block the decoder drops (by the block's keep
   probability: the trees' < 0.5, the core decoder's 0.5-0.6 outside the core, the headline rule), or
   spread over several blocks. `--examples F` writes each lost snippet with its class to F.
2. Variants, each a fixed setting scored out of fold by site with the rescue (as bench_extract.py
   scores `blocks`): resiliparse options of the main-content render (hidden_elements, post_meta,
   alt_texts, noscript, comments), the rescue's gate (MIN_MAIN_CHARS) and span (SPAN).
3. The trade: the decoder "strict d" (no-core threshold 0.5 + d, CORE_IN 0.5 + d, CORE_OUT 0.6 + d, the
   core's definition unchanged) on the shipped render and on each keep variant that passed, and, with
   --strict-folds, session 11's "gate vote" (bench_extract_page.py) on top; the setting chosen by a
   nested rule over the 10 site folds.

The rule, stated before any variant was scored: a keep variant passes if keep > shipped, drop >=
shipped - 1 snippet and AEB F1 >= shipped - 0.0005. Nested: for each test fold, on the other nine,
among the settings with keep >= 0.93 and AEB F1 >= 0.955, the most drop (ties: more F1); none: shipped.

Then the crawl set (full models, titles apart; by site: the mean over sites) for the shipped setting,
the passing keep variants and the nested choices. `--speed N`: pages/s per core of the step's path,
shipped against the given settings, best of N alternating.

Run: PYTHONPATH=src PRETRAIN_SHARED_DATA=../shared/data .venv/bin/python bench/bench_extract_keep.py
[--strict-folds SF --strict S] [--core-only] [--examples F]   (about 6-9 minutes on the shared machine)
[--crawl-only | --speed N] --only 'NAME;NAME'   (a setting's name as the tables print it)
The strict files: scripts/train_extract_blocks.py --weak-weight 0.5 --per-page --out S --folds-out SF
(bench_extract_page.py's docstring). Numbers: docs/extraction.md, "keep headroom, then traded for drop".
"""

from __future__ import annotations

import argparse
import functools
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import pretrain.curate.extract_body as body_mod
import pretrain.curate.extract_rescue as rescue_mod
from pretrain.curate.extract_blocks import (
    CORE_CHARS,
    CORE_P,
    MIN_MAIN_CHARS,
    MINIMAL_HTML,
    batch_matrix,
    blocks,
    headline_off,
    load_model,
    model_for,
)
from pretrain.curate.extract_body import body_columns, parse
from pretrain.curate.extract_eval import (
    _norm,
    aeb_pages,
    crawl_pages,
    crawl_scores,
    site_fold,
    snippet_scores,
    token_prf,
    trafilatura_pages,
)
from pretrain.curate.extract_rescue import SPAN, load_rescue, page_texts, rescue_for, whole_page

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_extract_page as bp  # noqa: E402  (aggregate, paired, combine: session 11's pair harness)
import bench_extract_stack as st  # noqa: E402

SHARED = st.SHARED


@dataclass(frozen=True)
class Setting:
    render: tuple = ()  # extra (option, value) pairs of the main-content render
    min_main: int = MIN_MAIN_CHARS
    span: int = SPAN
    d: float = 0.0  # the decoder's thresholds raised by d
    rule: str = "shipped"  # or "gate vote" (needs the strict trees)
    core_only: bool = False  # d raises the thresholds on pages with a core only (post hoc: see main)
    whole: tuple = ()  # extra options of the rescue's whole-page render
    extra: dict = field(default_factory=dict, compare=False, hash=False)


KEEP_VARIANTS = {
    "shipped": Setting(),
    "hidden": Setting(render=(("hidden_elements", True),)),
    "post_meta": Setting(render=(("post_meta", True),)),
    "alt": Setting(render=(("alt_texts", True),)),
    "noscript": Setting(render=(("noscript", True),)),
    "comments": Setting(render=(("comments", True),)),
    "gate 1000": Setting(min_main=1000),
    "gate 2000": Setting(min_main=2000),
    "span 5": Setting(span=5),
    "span 20": Setting(span=20),
    # added after the first run (post hoc, from its lost-snippet table): noscript in both renders;
    # the rescue on every page (what a second render on every page would buy)
    "noscript both": Setting(render=(("noscript", True),), whole=(("noscript", True),)),
    "rescue all": Setting(min_main=10**9),
    # post hoc, after reading what noscript adds on pages it does not help ("enable JavaScript"
    # notices): a second render with noscript only where the main content is under MIN_MAIN_CHARS
    "noscript if short": Setting(render=(("noscript if short", True),)),
}
DS = (0.0, 0.025, 0.05, 0.075, 0.1)
# added after the trade was scored: printed beside the others, never fed to the trade or the nested rule
PRINT_ONLY = ("noscript if short",)


def render_with(tree, opts: tuple) -> str:
    from resiliparse.extract.html2text import extract_plain_text

    kw = dict(main_content=True, comments=False, post_meta=False, **MINIMAL_HTML)
    kw.update(dict(opts))
    return extract_plain_text(tree, **kw)


def decode(p: np.ndarray, chars: np.ndarray, d: float, core_only: bool = False) -> np.ndarray:
    """core_flags with every threshold raised by d (the core's own definition, p >= CORE_P with >= CORE_CHARS
    characters, unchanged); d = 0 is core_flags (checked: 'strict 0' prints the shipped row)."""
    from pretrain.curate.extract_blocks import CORE_IN, CORE_MARGIN, CORE_OUT

    at = np.flatnonzero((p >= CORE_P) & (chars >= CORE_CHARS))
    if not len(at):
        return p >= 0.5 + (0.0 if core_only else d)
    row = np.arange(len(p))
    inside = (row >= at[0] - CORE_MARGIN) & (row <= at[-1] + CORE_MARGIN)
    return np.where(inside, p >= CORE_IN + d, p >= CORE_OUT + d)


@dataclass(frozen=True)
class Decider(bp.ShippedTrees):
    """What page_texts gets as `model`: the shipped trees (words, threshold for the rescue), how to decide."""

    ship: object
    strict: object
    s: Setting


def flags_of(pages, m: Decider, cols):
    got = bp.shipped_p(pages, m.ship, cols)
    if got is None:
        return [[] for _ in pages]
    x, chars, ps = got
    pt = m.strict.keep_probability(x) if m.s.rule != "shipped" else ps
    out, at = [], 0
    for bs in pages:
        k = len(bs)
        sl = slice(at, at + k)
        p = bp.combine(m.s.rule, ps[sl], pt[sl], chars[sl])
        out.append(headline_off(decode(p, chars[sl], m.s.d, m.s.core_only), bs, p, chars[sl]).tolist())
        at += k
    return out


@contextmanager
def deciding(span: int = SPAN, whole: tuple = ()):
    original, cands, wp = rescue_mod.keep_flags, rescue_mod.candidates, rescue_mod.whole_page

    def flags(pages, model=None, cols=None):
        return flags_of(pages, model, cols) if isinstance(model, Decider) else original(pages, model, cols)

    rescue_mod.keep_flags = flags
    rescue_mod.candidates = functools.partial(cands, span=span)
    if whole:
        def whole_with(html):
            from resiliparse.extract.html2text import extract_plain_text

            return blocks(extract_plain_text(html, main_content=False, **{**MINIMAL_HTML, **dict(whole)}))

        rescue_mod.whole_page = whole_with
    try:
        yield
    finally:
        rescue_mod.keep_flags, rescue_mod.candidates, rescue_mod.whole_page = original, cands, wp


class Page:
    """One page parsed once; its main-content blocks and body columns per render setting, cached."""

    def __init__(self, html: str, tree=None):
        self.html, self.tree, self._r = html, parse(html) if tree is None else tree, {}

    @classmethod
    def of(cls, html: str, tree) -> Page:
        return cls(html, tree)

    def main(self, opts: tuple):
        if opts not in self._r:
            if ("noscript if short", True) in opts:
                base = tuple(o for o in opts if o[0] != "noscript if short")
                got = self.main(base)
                if sum(len(b.text) for b in got[0]) < MIN_MAIN_CHARS:
                    got = self.main((*base, ("noscript", True)))
                self._r[opts] = got
                return got
            bs = blocks(render_with(self.tree, opts))
            self._r[opts] = (bs, body_columns(self.tree, bs))
        return self._r[opts]

    def text(self, s: Setting, ship, strict, resc, rescued=None, titles=None) -> str:
        bs, cols = self.main(s.render)
        with deciding(s.span, s.whole):
            return page_texts([self.html], [bs], Decider(ship, strict, s), resc, s.min_main, cols=[cols],
                              trees=[self.tree], rescued=rescued, titles=titles)[0]


def bench_pages():
    aeb = [("aeb", u, h, t) for _, h, t, u in aeb_pages(SHARED / "html" / "scrapinghub-aeb", with_url=True)]
    tra = [("trafilatura-eval", u, h, (k, dr)) for _, h, k, dr, u in
           trafilatura_pages(SHARED / "html" / "trafilatura-eval", with_url=True)]
    return aeb + tra


def score_all(pages, settings: dict[str, Setting], strict_folds: str | None) -> dict[str, dict]:
    """{setting: {fold: {page: score}}}, out of fold by site, rescue on."""
    out: dict = {n: {} for n in settings}
    for i, (bench, url, html, truth) in enumerate(pages):
        fold = f"{bench}/{site_fold(url)}"
        pg = Page(html)
        ship, resc = model_for(bench, url), rescue_for(bench, url)
        strict = load_model(strict_folds, fold) if strict_folds else ship
        for n, s in settings.items():
            text = pg.text(s, ship, strict, resc)
            r = token_prf(text, truth) if bench == "aeb" else snippet_scores(text, *truth)
            out[n].setdefault(fold, {})[f"{url}\t{i}"] = [float(v) for v in r]
    return {n: dict(sorted(f.items())) for n, f in out.items()}


def where_lost(pages, s: Setting, examples: str | None) -> None:
    """Classify each must-keep snippet of trafilatura-eval that the setting loses (and each must-drop
    snippet it keeps), shipped path, site-fold models, rescue on."""
    from collections import Counter

    lost, kept_drop, lines = Counter(), Counter(), []
    for bench, url, html, truth in pages:
        if bench != "trafilatura-eval":
            continue
        keep, drop = truth
        pg = Page(html)
        ship, resc = model_for(bench, url), rescue_for(bench, url)
        text = _norm(pg.text(s, ship, ship, resc))
        bs, cols = pg.main(s.render)
        main_chars = sum(len(b.text) for b in bs)
        miss = [k for k in keep if _norm(k) not in text]
        leak = [k for k in drop if _norm(k) in text]
        if not miss and not leak:
            continue
        main = _norm("\n".join(b.text for b in bs))
        whole = _norm("\n".join(b.text for b in whole_page(pg.tree)))
        x = batch_matrix([bs], [cols], ship) if bs else None
        p = ship.keep_probability(x) if bs else np.zeros(0)
        chars = np.array([len(b.text) for b in bs], np.int64)
        has_core = bool(((p >= CORE_P) & (chars >= CORE_CHARS)).any()) if bs else False
        for k in miss:
            nk = _norm(k)
            if main_chars < s.min_main:
                c = "rescue page: " + ("in whole render" if nk in whole else "not in whole render")
            elif nk not in main:
                c = "not in main render: " + ("in whole render" if nk in whole else "not in whole render")
            else:
                j = next((j for j, b in enumerate(bs) if nk in _norm(b.text)), None)
                if j is None:
                    c = "in main, across blocks"
                else:
                    q = p[j]
                    c = ("in main, trees p < 0.2" if q < 0.2 else "in main, trees p 0.2-0.5" if q < 0.5
                         else "in main, p 0.5-0.6 outside the core" if q < 0.6 and has_core
                         else "in main, headline rule" if bs[j].kind == "h1"
                         else "in main, kept block?")
                    c += f" ({bs[j].kind})"
            lost[c] += 1
            lines.append(f"LOST\t{c}\t{url}\t{k[:200]!r}")
        for k in leak:
            c = "rescue page" if main_chars < s.min_main else "main content"
            kept_drop[c] += 1
            lines.append(f"LEAK\t{c}\t{url}\t{k[:200]!r}")
    n_lost = sum(lost.values())
    print(f"\nwhere must-keep snippets are lost (trafilatura-eval, out of fold, rescue on): {n_lost}")
    for c, n in sorted(lost.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {n:>4}  {c}")
    print(f"must-drop snippets kept: {sum(kept_drop.values())}: "
          + ", ".join(f"{c} {n}" for c, n in kept_drop.items()))
    if examples:
        tmp = Path(f"{examples}.tmp")  # whole or not at all: a killed run leaves the old file
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
        tmp.replace(examples)


def crawl_rows(settings: dict[str, Setting], strict: str | None) -> dict[str, dict]:
    titles: dict = {}
    cps = list(crawl_pages(SHARED / "warc", titles=titles))
    parsed = {id(p[1]): Page(p[1]) for p in cps}
    ship, resc = load_model(), load_rescue()
    strict_m = load_model(strict) if strict else ship
    out = {}
    for name, s in settings.items():
        texts = {}
        for k, pg in parsed.items():
            got: list[str] = []
            texts[k] = (pg.text(s, ship, strict_m, resc, titles=got), got[0])

        def extract(html, url, texts=texts):
            return texts[id(html)]

        out[name] = bp.by_site(crawl_scores(extract, cps, titles), extract, cps)
    return out


def nested(res: dict[str, dict], names: list[str]) -> tuple[dict, list[str]]:
    folds = list(res["shipped"])
    out, chosen = {}, []
    for test in folds:
        train = [f for f in folds if f != test]
        best, value = "shipped", None
        for n in names:
            s = bp.aggregate(res[n], train)
            if s["keep"] < 0.93 or s["F1"] < 0.955:
                continue
            v = (round(s["drop"], 12), round(s["F1"], 12))
            if value is None or v > value:
                best, value = n, v
        chosen.append(best)
        out[test] = res[best][test]
    return out, chosen


def row(name: str, s: dict) -> str:
    return (f"{name:<26}" + "".join(f"{s[k]:8.4f}" for k in ("P", "R", "F1", "keep", "drop"))
            + f"   kept {s['kept']:.0f}, dropped {s['dropped']:.0f}")


def speed(settings: dict[str, Setting], strict: str | None, repeat: int) -> None:
    import os
    import time

    from pretrain.curate.extract import BATCH_PAGES

    sets = bp.speed_sets()
    ship, resc = load_model(), load_rescue()
    strict_m = load_model(strict) if strict else ship

    def run(htmls, s):
        m = ship if s is None else Decider(ship, strict_m, s)
        t = time.process_time()
        with deciding(SPAN if s is None else s.span, () if s is None else s.whole):
            for i in range(0, len(htmls), BATCH_PAGES):
                batch = htmls[i : i + BATCH_PAGES]
                if s is None:  # the extract step's own calls
                    parsed = [body_mod.main_page(h) for h in batch]
                    trees, mains, cols = ([x[j] for x in parsed] for j in range(3))
                else:
                    trees = [parse(h) for h in batch]
                    got = [Page.of(h, tr).main(s.render) for h, tr in zip(batch, trees)]
                    mains, cols = [g[0] for g in got], [g[1] for g in got]
                page_texts(batch, mains, m, resc, MIN_MAIN_CHARS if s is None else s.min_main,
                           cols=cols, trees=trees)
        return time.process_time() - t

    models = {"shipped (the step's path)": None, **settings}
    print(f"\nspeed: pages/s per core, best of {repeat} alternating (load {os.getloadavg()[0]:.1f})")
    for name, htmls, best in bp.best_of(sets, models, run, repeat):
        b0 = best["shipped (the step's path)"]
        print(f"  {name:<17} {len(htmls):>4} pages: " + ", ".join(
            f"{k} {len(htmls) / v:.0f} ({b0 / v:.3f}x)" for k, v in best.items()))


def picked(grid: dict[str, Setting], only: str, strict: str | None) -> dict[str, Setting]:
    """The settings named in `only` (';'-separated), or SystemExit naming the bad one."""
    out = {}
    for n in (x.strip() for x in only.split(";")):
        if not n:
            continue
        if n not in grid:
            raise SystemExit(f"--only: no setting {n!r}; e.g. 'noscript', 'noscript, d 0.05, vote', "
                             "'shipped, d 0.075, vote, core only' (the names the tables print)")
        if grid[n].rule != "shipped" and not strict:
            raise SystemExit(f"--only: {n!r} needs the strict trees (--strict)")
        out[n] = grid[n]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--strict", help="the strict full model (bench_extract_page.py's): 'gate vote' on crawl")
    ap.add_argument("--strict-folds", help="its 10 fold models: adds 'gate vote' to the trade")
    ap.add_argument("--examples", help="write each lost must-keep / kept must-drop snippet here")
    ap.add_argument("--core-only", action="store_true",
                    help="also the post-hoc family: d on pages with a core only (crawl's non-articles)")
    ap.add_argument("--skip-lost", action="store_true", help="without the lost-snippet table")
    ap.add_argument("--speed", type=int, default=0, metavar="REPEAT")
    ap.add_argument("--only", default="", help="with --speed or --crawl-only: the settings, separated by ;")
    ap.add_argument("--crawl-only", action="store_true", help="only the crawl table of --only's settings")
    args = ap.parse_args()
    if st.no_data():
        return 0
    if args.speed:
        with_strict = True  # every name, so that a vote without --strict is a clear error
        grid = {**KEEP_VARIANTS, **trade_grid(list(KEEP_VARIANTS), with_strict, True)}
        speed(picked(grid, args.only, args.strict), args.strict, args.speed)
        return 0
    if args.crawl_only:
        grid = {**KEEP_VARIANTS, **trade_grid(list(KEEP_VARIANTS), True, True)}
        crawl = crawl_rows({"shipped": grid["shipped"], **picked(grid, args.only, args.strict)}, args.strict)
        print_crawl(crawl)
        return 0
    pages = bench_pages()
    if not args.skip_lost:
        where_lost(pages, KEEP_VARIANTS["shipped"], args.examples)
    res = score_all(pages, KEEP_VARIANTS, None)
    folds = list(res["shipped"])
    base = bp.aggregate(res["shipped"], folds)
    head = "".join(f"{k:>8}" for k in ("AEB P", "R", "F1", "keep", "drop"))
    print(f"\n{'keep variant':<26}{head}   (out of fold by site, rescue on)")
    good = []
    for n in KEEP_VARIANTS:
        s = bp.aggregate(res[n], folds)
        ok = (s["kept"] > base["kept"] and s["dropped"] >= base["dropped"] - 1
              and s["F1"] >= base["F1"] - 0.0005)
        print(row(n, s) + ("" if not ok or n == "shipped" else "   passes (post hoc: not traded)"
                           if n in PRINT_ONLY else "   PASSES"))
        if n != "shipped":
            print("    vs shipped: " + bp.paired(res["shipped"], res[n]))
        if ok and n not in ("shipped", *PRINT_ONLY):
            good.append(n)
    grid = trade_grid(["shipped", *good], bool(args.strict_folds), args.core_only)
    if len(good) > 1:
        print(f"  (all passing together: {' + '.join(good)})")
    res2 = score_all(pages, {n: s for n, s in grid.items() if n not in res}, args.strict_folds)
    res.update(res2)
    print(f"\n{'trade (decoder on variant)':<26}{head}")
    for n in grid:
        print(row(n, bp.aggregate(res[n], folds)))
        if n != "shipped":
            print("    vs shipped: " + bp.paired(res["shipped"], res[n]))
    print("\nnested (each fold's setting chosen on the other nine: keep >= 0.93, AEB F1 >= 0.955, most drop)")
    shown = ["shipped", *good]
    stated = [n for n in grid if "core only" not in n]
    for label, names in (("stated", stated), ("+ post hoc", list(grid))):
        if label != "stated" and names == stated:
            continue
        out, chosen = nested(res, names)
        shown += chosen
        print(row(label, bp.aggregate(out, folds)))
        print("    vs shipped: " + bp.paired(res["shipped"], out))
        print("    chosen: " + "; ".join(f"{f}: {c}" for f, c in zip(folds, chosen)))
        for f in folds:
            s0, s1 = bp.aggregate(res["shipped"], [f]), bp.aggregate(out, [f])
            ks = ("F1",) if f.startswith("aeb") else ("keep", "drop")
            print(f"    {f:<20} " + ", ".join(f"{k} {s0[k]:.4f} -> {s1[k]:.4f}" for k in ks))
    show = dict.fromkeys(shown)
    print_crawl(crawl_rows({n: grid.get(n, KEEP_VARIANTS.get(n)) for n in show}, args.strict))
    return 0


def print_crawl(crawl: dict[str, dict]) -> None:
    print(f"\ncrawl ({crawl['shipped']['pages']} pages, full models, rescue on, titles apart; by site: mean)")
    print(f"{'setting':<26}{'keep':>8}{'drop':>8}{'titles':>8}{'site keep':>10}{'site drop':>10}"
          "  no-main clean")
    for n, q in crawl.items():
        print(f"{n:<26}{q['kept']:8.4f}{q['dropped']:8.4f}{q['title_kept']:8.4f}{q['kept_by_site']:10.4f}"
              f"{q['dropped_by_site']:10.4f}  {q['no_main_clean'] * q['no_main']:.0f}/{q['no_main']}")


def trade_grid(variants: list[str], with_strict: bool, core_only: bool = False) -> dict[str, Setting]:
    """'strict d' on each variant (and 'gate vote' on top with the strict trees); d = 0 on 'shipped' is the
    shipped setting itself (named 'shipped'), through this bench's decoder."""
    grid: dict[str, Setting] = {}
    keep = {**KEEP_VARIANTS}
    if len([v for v in variants if v != "shipped"]) > 1:
        vs = [KEEP_VARIANTS[v] for v in variants if v != "shipped"]
        keep["all passing"] = Setting(render=tuple(o for v in vs for o in v.render),
                                      min_main=max(v.min_main for v in vs),
                                      span=max(v.span for v in vs),
                                      whole=tuple(o for v in vs for o in v.whole))
        variants = [*variants, "all passing"]
    for v in variants:
        base = keep[v]
        for d in DS:
            for rule in ("shipped", "gate vote") if with_strict else ("shipped",):
                name = (v if d == 0 and rule == "shipped"
                        else f"{v}, d {d:g}" + (", vote" if rule != "shipped" else ""))
                grid[name] = Setting(base.render, base.min_main, base.span, d, rule, whole=base.whole)
                if d and core_only:
                    grid[name + ", core only"] = Setting(base.render, base.min_main, base.span, d, rule, True,
                                                         base.whole)
    return grid


if __name__ == "__main__":
    sys.exit(main())
