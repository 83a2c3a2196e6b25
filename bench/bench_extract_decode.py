"""Where `blocks` still errs, and what a structure decoder or a page-level cascade buys (issue 19, session 6).

All out of fold: each benchmark page's block probabilities come from the site-fold model that never
saw its site (`model_for`, `rescue_for`; computed once, ≈10 s), so every variant is scored in
seconds without retraining. Prints:

1. Error classes at the shipped threshold (0.5) on trafilatura-eval: each surviving must-drop
   snippet by where it sits (a: in a block that also holds must-keep text; a2: a fragment of a
   longer kept block; b: alone, more than 2 blocks outside the span of the page's must-keep blocks;
   c: 1-2 blocks outside it; c-in: alone inside it; e: rescued page), each lost must-keep snippet
   (d: not in our render), AEB's false-positive tokens the same way, and how concentrated they are
   by page (share held by the top 3% / 10% of pages).
2. Decoders: thresholds; `region_flags` (the maximum-sum contiguous run of logit(p) - bias, keep
   at t_in inside, t_out outside) on a grid; a 2-state Viterbi; `core_flags` (the span from the
   first to the last block with p >= conf and >= N characters, +margin; t_in inside, t_out outside,
   t_in on a page without such a block; `core-0.5`: 0.5 there). Then the region decoder with its
   three parameters chosen for each test fold on the *other* pages only (nested), by three rules.
3. Cost of the decoder, ms per AEB page (process time, best of 3 over the 181 pages).
3b. What the best core decoder (p >= 0.98, >= 80 characters, in 0.4, out 0.7) does on the real
   crawl pages of ../shared/data/warc (no labels: pages without a core block, characters kept).
4. With --cascade: routing the pages a cheap page score flags (2.5 / 5 / 10%) to trafilatura
   (uncertain = kept at p in [0.5, 0.8); expected errors = 1 - p of kept, p of dropped blocks),
   against an oracle that routes the pages where trafilatura does best (trafilatura runs on all
   860 pages first: ≈15-100 s).

Run: .venv/bin/python bench/bench_extract_decode.py [--cascade] [--grid small|full]
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from collections import Counter
from functools import partial
from pathlib import Path

import numpy as np

from pretrain.curate.extract_blocks import (
    MIN_MAIN_CHARS,
    Block,
    blocks,
    core_flags,
    features,
    model_for,
    region_flags,
    render,
)
from pretrain.curate.extract_eval import (
    _norm,
    aeb_pages,
    site_fold,
    snippet_scores,
    token_prf,
    tokens,
    trafilatura_pages,
)
from pretrain.curate.extract_rescue import candidates, compose, rescue_for, whole_page

SHARED = os.environ.get("PRETRAIN_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data"
DATA = Path(SHARED) / "html"


def oof_page(bench: str, key: str, html: str, url: str) -> dict:
    """A page's blocks and their out-of-fold keep probabilities (and its rescue, if short)."""
    m = model_for(bench, url)
    bs = blocks(render(html))
    p = m.keep_probability(features(bs, m.words.score(bs) if m.words else None)) if bs else np.zeros(0)
    d = {
        "bench": bench,
        "key": key,
        "fold": site_fold(url),
        "text": [b.text for b in bs],
        "p": p,
        "chars": np.array([len(b.text) for b in bs], int),
        "html": html,
    }
    if sum(len(b.text) for b in bs) < MIN_MAIN_CHARS:
        whole_bs, x, inm = candidates(whole_page(html), bs, words=m.words)
        if whole_bs:
            r = rescue_for(bench, url)
            d["rescue"] = (whole_bs, inm, (r.keep_probability(x) >= r.threshold) & ~inm)
    return d


def load_pages() -> list[dict]:
    out = []
    for key, html, truth, url in aeb_pages(DATA / "scrapinghub-aeb", with_url=True):
        out.append({**oof_page("aeb", key, html, url), "truth": truth})
    for key, html, keep, drop, url in trafilatura_pages(DATA / "trafilatura-eval", with_url=True):
        out.append({**oof_page("trafilatura-eval", key, html, url), "keep": keep, "drop": drop})
    return out


def text_of(d: dict, flags) -> str:
    if "rescue" in d:
        whole_bs, inm, keep_whole = d["rescue"]
        main_bs = [Block("p", t, 0, 0) for t in d["text"]]
        return "\n".join(compose(main_bs, list(flags), whole_bs, inm, keep_whole))
    return "\n".join(t for t, k in zip(d["text"], flags) if k)


def page_score(d: dict, text: str) -> tuple:
    return token_prf(text, d["truth"]) if d["bench"] == "aeb" else snippet_scores(text, d["keep"], d["drop"])


_MEMO: dict = {}


def per_page(pages: list[dict], decode) -> dict:
    """{page key: (P, R, F1) on AEB, (kept, of, dropped, of) on trafilatura-eval} of a decoder."""
    out = {}
    for d in pages:
        f = np.asarray(decode(d["p"], d["chars"]), bool) if len(d["p"]) else np.zeros(0, bool)
        memo = (d["bench"], d["key"], f.tobytes())
        if memo not in _MEMO:
            _MEMO[memo] = page_score(d, text_of(d, f))
        out[(d["bench"], d["key"])] = _MEMO[memo]
    return out


def aggregate(pp: dict, keys=None) -> dict:
    keys = list(pp) if keys is None else keys
    a = np.array([pp[k] for k in keys if k[0] == "aeb"] or [(1.0, 1.0, 1.0)])
    t = np.array([pp[k] for k in keys if k[0] != "aeb"] or [(0, 1, 0, 1)])
    return dict(
        P=a[:, 0].mean(),
        R=a[:, 1].mean(),
        F1=a[:, 2].mean(),
        keep=t[:, 0].sum() / t[:, 1].sum(),
        drop=t[:, 2].sum() / t[:, 3].sum(),
        nk=int(t[:, 0].sum()),
        nd=int(t[:, 2].sum()),
    )


def row(name: str, s: dict) -> str:
    return (
        f"{name:<34} {s['P']:.4f} {s['R']:.4f} {s['F1']:.4f} {s['keep']:.4f} ({s['nk']}) "
        f"{s['drop']:.4f} ({s['nd']})"
    )


def viterbi_flags(p: np.ndarray, switch: float, t_in: float, t_out: float) -> np.ndarray:
    """2-state segmentation (out / in the article): emissions log(1-p) / log p, `switch` per change
    of state; keep at t_in in the article, t_out outside."""
    q = np.clip(p, 1e-6, 1 - 1e-6)
    e = np.stack([np.log1p(-q), np.log(q)])
    v, back = e[:, 0].copy(), np.zeros((len(q), 2), int)
    for i in range(1, len(q)):
        stay, move = v, v[::-1] - switch
        back[i] = np.where(stay >= move, [0, 1], [1, 0])
        v = np.maximum(stay, move) + e[:, i]
    st = np.zeros(len(q), int)
    st[-1] = int(v[1] > v[0])
    for i in range(len(q) - 1, 0, -1):
        st[i - 1] = back[i, st[i]]
    return np.where(st == 1, q >= t_in, q >= t_out)


# ---------------------------------------------------------------- 1. error classes


def _locate(snippet: str, texts: list[str]) -> list[int] | None:
    """Indices of the blocks the first occurrence of `snippet` overlaps in the blocks' joined text."""
    starts, at = [], 0
    for t in texts:
        starts.append(at)
        at += len(_norm(t)) + 1
    s = _norm(snippet)
    i = " ".join(_norm(t) for t in texts).find(s) if s else -1
    if i < 0:
        return None
    a, b = np.searchsorted(starts, [i, i + len(s) - 1], "right") - 1
    return list(range(int(a), int(b) + 1))


def _where(idx: list[int], article: list[int]) -> str:
    if not article:
        return "e: no article located"
    lo, hi = min(article), max(article)
    if all(lo <= i <= hi for i in idx):
        return "c-in: alone, inside the article's span"
    gap = min(min(abs(i - lo), abs(i - hi)) for i in idx)
    return "c: alone, adjacent (1-2 blocks out)" if gap <= 2 else "b: alone, far (> 2 blocks out)"


def _concentration(by_page: Counter, n_pages: int) -> str:
    v, parts = sorted(by_page.values(), reverse=True), []
    for share in (0.03, 0.10):
        k = round(share * n_pages)
        parts.append(f"top {share:.0%} of pages ({k}) hold {sum(v[:k]) / max(sum(v), 1):.0%}")
    return f"{sum(v)} on {len(v)} pages; " + ", ".join(parts)


def error_classes(pages: list[dict]) -> None:
    drop_c, keep_c, drop_p, keep_p, fp_c, fp_p = (
        Counter(),
        Counter(),
        Counter(),
        Counter(),
        Counter(),
        Counter(),
    )
    tra = [d for d in pages if d["bench"] != "aeb"]
    for d in tra:
        texts, flags = d["text"], d["p"] >= 0.5
        out = _norm(text_of(d, flags))
        article = sorted({i for s in d["keep"] for i in (_locate(s, texts) or [])})
        kept = [i for i in range(len(texts)) if flags[i]]
        for s in d["drop"]:
            if _norm(s) not in out:
                continue
            drop_p[d["key"]] += 1
            w = None if "rescue" in d else _locate(s, [texts[i] for i in kept])
            if w is None:
                drop_c["e: rescued page (or not located)"] += 1
                continue
            idx = [kept[i] for i in w]
            if any(i in article for i in idx):
                drop_c["a: shares a block with must-keep text"] += 1
            else:
                longer = sum(len(texts[i]) for i in idx) > 2 * len(_norm(s)) + 20
                drop_c[("a2 (fragment of a longer block), " if longer else "") + _where(idx, article)] += 1
        for s in d["keep"]:
            if _norm(s) in out:
                continue
            keep_p[d["key"]] += 1
            w = _locate(s, texts)
            if "rescue" in d:
                keep_c["e: rescued page"] += 1
            elif w is None:
                whole = _norm(" ".join(b.text for b in whole_page(d["html"])))
                keep_c[
                    "d: not in the main render"
                    + (", in the whole page" if _norm(s) in whole else " nor the whole page")
                ] += 1
            else:
                p = max(d["p"][i] for i in w)
                keep_c["dropped block, p < 0.2" if p < 0.2 else "dropped block, p 0.2-0.5"] += 1
    for d in (d for d in pages if d["bench"] == "aeb"):
        truth = Counter(tokens(d["truth"]))
        share = [sum(1 for x in tk if x in truth) / max(len(tk), 1) for tk in map(tokens, d["text"])]
        article = [i for i, s in enumerate(share) if s >= 0.6]
        left = Counter(truth)
        for i, t in enumerate(d["text"]):
            if d["p"][i] < 0.5:
                continue
            fp = 0
            for x in tokens(t):
                fp += left[x] <= 0
                left[x] -= 1
            if fp:
                fp_p[d["key"]] += fp
                fp_c[
                    "a: in an article block (>= 60% truth words; extra copies)"
                    if share[i] >= 0.6
                    else _where([i], article)
                ] += fp
    inside, at, n_blocks, covered = [], 0.5, 0, 0
    for d in tra:
        if "rescue" in d or not len(d["p"]):
            continue
        run = region_flags(d["p"], 0.0, 0.0, 1.1)  # True exactly inside the maximum-sum run
        n_blocks, covered = n_blocks + len(run), covered + int(run.sum())
        kept = [i for i in range(len(d["p"])) if d["p"][i] >= at]
        for s in d["drop"]:
            w = _locate(s, [d["text"][i] for i in kept])
            if w is not None:
                inside.append((all(run[kept[i]] for i in w), max(d["p"][kept[i]] for i in w)))
    print(
        f"\nsurviving must-drop snippets on pages without a rescue: {len(inside)}, inside the maximum-sum "
        f"run of logit(p) (bias 0; the run covers {covered / max(n_blocks, 1):.0%} of blocks): "
        f"{sum(i for i, _ in inside)}; median keep probability {np.median([p for _, p in inside]):.2f}"
    )
    for title, c, by_page, n in (
        ("trafilatura-eval: must-drop snippets that survive", drop_c, drop_p, len(tra)),
        ("trafilatura-eval: must-keep snippets lost", keep_c, keep_p, len(tra)),
        ("AEB: false-positive tokens", fp_c, fp_p, len(pages) - len(tra)),
    ):
        print(f"\n{title}: {sum(c.values())}")
        for k, v in sorted(c.items()):
            print(f"  {v:5d}  {k}")
        print("  " + _concentration(by_page, n))


# ---------------------------------------------------------------- 2. decoders


def at_least(p: np.ndarray, chars: np.ndarray, t: float) -> np.ndarray:
    return p >= t


def region(p: np.ndarray, chars: np.ndarray, **kw) -> np.ndarray:
    return region_flags(p, **kw)


def viterbi(p: np.ndarray, chars: np.ndarray, **kw) -> np.ndarray:
    return viterbi_flags(p, **kw)


def grids(size: str) -> dict:
    """Every decoder of the grid: `small` (≈100, the default) or `full` (≈320, ≈3x longer)."""
    full = size == "full"
    g = {f"threshold {t}": partial(at_least, t=t) for t in (0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75)}
    biases = (-0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0) if full else (-0.25, 0.0, 0.25, 0.5, 1.0)
    t_ins = (0.35, 0.4, 0.45, 0.5, 0.55) if full else (0.45, 0.5)
    t_outs = (0.5, 0.6, 0.7, 0.8, 0.95) if full else (0.6, 0.8, 0.95)
    for b, ti, to in itertools.product(biases, t_ins, t_outs):
        if to >= ti:
            g[f"region b={b} in={ti} out={to}"] = partial(region, bias=b, t_in=ti, t_out=to)
    for c, ti in itertools.product((1.0, 2.0, 4.0), (0.45, 0.5, 0.6)):
        g[f"viterbi switch={c} in={ti} out=0.9"] = partial(viterbi, switch=c, t_in=ti, t_out=0.9)
    margins = (0, 1, 2, 3) if full else (0, 1)
    t_ins = (0.2, 0.25, 0.3, 0.4, 0.5) if full else (0.25, 0.3, 0.4)
    for conf, n, m, ti, to in itertools.product(
        (0.9, 0.95, 0.98), (80, 200), margins, t_ins, (0.6, 0.7, 0.8)
    ):
        if full or conf != 0.9:
            name = f"core p>={conf} chars>={n} +{m} in={ti} out={to}"
            g[name] = partial(core_flags, conf=conf, min_chars=n, margin=m, t_in=ti, t_out=to)
            # the same with the threshold left at 0.5 on a page without a core ("core-0.5" family)
            g["core-0.5 " + name[5:]] = partial(
                core_flags, conf=conf, min_chars=n, margin=m, t_in=ti, t_out=to, t_none=0.5
            )
    return g


def nested(pages: list[dict], results: dict) -> None:
    """Decoder parameters (of one family) chosen per test fold (benchmark, site fold) on all other pages."""
    folds = {(d["bench"], d["key"]): (d["bench"], d["fold"]) for d in pages}
    base_name = "threshold 0.5"
    print("\nnested: parameters chosen for each of the 10 test folds on the other pages only")
    print("(under the floors on those pages, the one with the most drop + F1; or the most F1 + keep + drop)")
    for family in ("core ", "core-0.5", "region", "threshold"):
        for rule in (
            "keep >= base, F1 >= base; max drop + F1",
            "keep >= 0.93, F1 >= base; max drop + F1",
            "max F1 + keep + drop",
        ):
            out, chosen = {}, Counter()
            for test in sorted(set(folds.values())):
                train = [k for k, f in folds.items() if f != test]
                base = aggregate(results[base_name], train)
                best, value = base_name, -1e9
                for name, pp in results.items():
                    if not name.startswith(family):
                        continue
                    s = aggregate(pp, train)
                    floor = base["keep"] if rule.startswith("keep >= base") else 0.93
                    if rule.startswith("keep") and (s["keep"] < floor or s["F1"] < base["F1"]):
                        continue
                    v = s["drop"] + s["F1"] + (0 if rule.startswith("keep") else s["keep"])
                    if v > value + 1e-12:
                        best, value = name, v
                chosen[best] += 1
                out.update({k: results[best][k] for k, f in folds.items() if f == test})
            print(row(f"{family.strip()}, {rule.split(';')[0]}", aggregate(out)), " chosen:", dict(chosen))


def decoder_ms(pages: list[dict]) -> None:
    """(the block lengths core_flags reads are counted inside its timing, from the texts)"""
    aeb = [(d["p"], d["text"]) for d in pages if d["bench"] == "aeb" and len(d["p"])]
    for name, f in (
        (
            "core_flags",
            lambda p, t: core_flags(p, np.fromiter(map(len, t), int, len(t)), 0.95, 80, 0, 0.3, 0.6),
        ),
        ("region_flags", lambda p, t: region_flags(p, 0.0, 0.45, 0.6)),
        ("threshold", lambda p, t: p >= 0.5),
        ("viterbi (numpy per block)", lambda p, t: viterbi_flags(p, 2.0, 0.5, 0.9)),
    ):
        best = float("inf")
        for _ in range(3):
            t = time.process_time()
            for p, texts in aeb:
                f(p, texts)
            best = min(best, time.process_time() - t)
        print(f"  {name:<26} {best / len(aeb) * 1e3:.4f} ms per AEB page")


def crawl_effect() -> None:
    """The core decoder on unlabelled real crawl pages: how many have no core, how much more is kept."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_extract import crawl_pages

    from pretrain.curate.extract_blocks import load_model

    m, n, no_core, kept = load_model(), 0, 0, np.zeros((2, 2))
    for html in crawl_pages():
        bs = blocks(render(html))
        if not bs:
            continue
        p = m.keep_probability(features(bs, m.words.score(bs) if m.words else None))
        chars = np.array([len(b.text) for b in bs])
        has_core = bool(((p >= 0.98) & (chars >= 80)).any())
        n, no_core = n + 1, no_core + (not has_core)
        for j, f in enumerate((p >= 0.5, core_flags(p, chars, 0.98, 80, 0, 0.4, 0.7))):
            kept[j, 0] += chars[f].sum()
            kept[j, 1] += 0 if has_core else chars[f].sum()
    print(f"\nreal crawl pages (shipped model): {n} with blocks, {no_core} without a core block")
    print(
        f"  characters kept, threshold 0.5 -> core decoder: all pages {kept[0, 0]:.0f} -> {kept[1, 0]:.0f} "
        f"({kept[1, 0] / kept[0, 0] - 1:+.1%}), pages without a core {kept[0, 1]:.0f} -> {kept[1, 1]:.0f} "
        f"({kept[1, 1] / max(kept[0, 1], 1) - 1:+.1%})"
    )


# ---------------------------------------------------------------- 4. cascade


def cascade(pages: list[dict], base: dict) -> None:
    from pretrain.curate.extract import extract_text

    t = time.process_time()
    traf = {(d["bench"], d["key"]): page_score(d, extract_text(d["html"], "trafilatura")) for d in pages}
    print(f"\ncascade to trafilatura (its pass over {len(pages)} pages: {time.process_time() - t:.0f} s CPU)")
    print(row("trafilatura on every page", aggregate(traf)))

    def gain(d):
        b, t = base[(d["bench"], d["key"])], traf[(d["bench"], d["key"])]
        return t[2] - b[2] if d["bench"] == "aeb" else (t[0] + t[2] - b[0] - b[2]) / max(b[1] + b[3], 1)

    def err(d):
        return np.where(d["p"] >= 0.5, 1 - d["p"], d["p"])

    scores = {
        "oracle: trafilatura's gain": gain,
        "uncertain kept blocks, count": lambda d: float(((d["p"] >= 0.5) & (d["p"] < 0.8)).sum()),
        "uncertain kept blocks, share": lambda d: (
            float(((d["p"] >= 0.5) & (d["p"] < 0.8)).mean()) if len(d["p"]) else 0.0
        ),
        "expected errors, sum": lambda d: float(err(d).sum()),
        "expected errors, mean": lambda d: float(err(d).mean()) if len(d["p"]) else 0.0,
        "kept blocks < 80 characters": lambda d: float(
            sum(p >= 0.5 and len(t) < 80 for t, p in zip(d["text"], d["p"]))
        ),
    }
    for name, f in scores.items():
        for share in (0.025, 0.05, 0.10):
            out = dict(base)
            for bench in ("aeb", "trafilatura-eval"):
                ds = [d for d in pages if d["bench"] == bench]
                order = np.argsort([-f(d) for d in ds], kind="stable")[: int(share * len(ds))]
                out.update(
                    {(ds[i]["bench"], ds[i]["key"]): traf[(ds[i]["bench"], ds[i]["key"])] for i in order}
                )
            print(row(f"{name} {share:.1%}", aggregate(out)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--cascade", action="store_true", help="also route pages to trafilatura (runs it on all pages)"
    )
    ap.add_argument(
        "--grid", choices=("small", "full"), default="small", help="decoder grid (full: ≈3x longer)"
    )
    args = ap.parse_args()
    if not DATA.is_dir():
        print(f"no data at {DATA}; nothing to measure")
        return 0
    t = time.process_time()
    pages = load_pages()
    print(
        f"{len(pages)} pages, {sum(len(d['p']) for d in pages)} blocks, out-of-fold probabilities in "
        f"{time.process_time() - t:.1f} s CPU"
    )
    error_classes(pages)
    print(f"\n{'decoder (out of fold)':<34} {'AEB P':>6} {'R':>6} {'F1':>6} {'keep':>13} {'drop':>13}")
    results = {}
    for name, f in grids(args.grid).items():
        results[name] = per_page(pages, f)
        print(row(name, aggregate(results[name])), flush=True)
    nested(pages, results)
    print("\ndecoder cost (process time, best of 3 over the AEB pages):")
    decoder_ms(pages)
    crawl_effect()
    if args.cascade:
        cascade(pages, results["threshold 0.5"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
