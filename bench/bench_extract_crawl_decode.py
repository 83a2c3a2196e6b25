"""Session 6's structure decoders for `blocks`, judged again with the labelled crawl pages (issue 19).

Session 6 (bench/bench_extract_decode.py, kept at a local tag that was never published) did not ship
its "core" decoder because the benchmarks hold only article pages; data/extract_crawl_labels.json
now labels 86 real crawl pages (13 without main content). This prints, for the plain threshold
(0.45-0.75) and the core decoder's grid (session 6's `core_flags`, re-implemented below):

1. each decoder out of fold on AEB (P, R, F1) and trafilatura-eval (keep, drop), as session 6 did,
   beside the crawl set (keep, drop, share of no-main pages clean) with the shipped models;
2. the nested choice (for each of the 10 test folds, benchmark x site fold, the setting of one
   family chosen on all other benchmark pages by session 6's rules), scored on the test folds, and
   the setting it chose most often on the crawl set against the threshold 0.5 with a 95% interval
   of the difference from a paired bootstrap over the crawl set's 36 sites (the noise).

Out of fold: each benchmark page's block probabilities come from the site-fold model that never
saw its site (`model_for`, `rescue_for`), computed once (≈10-20 s), so each decoder is a post-pass.
About 1-2 minutes on one core.

Run: .venv/bin/python bench/bench_extract_crawl_decode.py
"""

from __future__ import annotations

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
    load_model,
    model_for,
)
from pretrain.curate.extract_eval import (
    aeb_pages,
    crawl_pages,
    site,
    site_fold,
    snippet_scores,
    token_prf,
    trafilatura_pages,
)
from pretrain.curate.extract_rescue import candidates, compose, load_rescue, rescue_for, whole_page

SHARED = Path(
    os.environ.get("PRETRAIN_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data"
)


def core_flags(p, chars, conf, min_chars, margin, t_in, t_out, t_none=None) -> np.ndarray:
    """Session 6's core decoder (not shipped; its code was not published): the span from the first
    to the last block with p >= conf and >= min_chars characters, widened by `margin`; inside it keep
    at p >= t_in, outside at p >= t_out; a page without such a block keeps at t_none (default t_in)."""
    core = np.flatnonzero((p >= conf) & (chars >= min_chars))
    if not len(core):
        return p >= (t_in if t_none is None else t_none)
    at = np.arange(len(p))
    inside = (at >= core[0] - margin) & (at <= core[-1] + margin)
    return np.where(inside, p >= t_in, p >= t_out)


def page(bench: str, key: str, html: str, url: str, model, rescue) -> dict:
    """A page's blocks, their keep probabilities and (on a short main content) its rescue."""
    from pretrain.curate.extract_blocks import block_matrix
    from pretrain.curate.extract_body import main_blocks

    bs, cols = main_blocks(html)  # (the trees take the body columns since 2026-12-02, session 9)
    p = model.keep_probability(block_matrix(bs, cols, model)) if bs else np.zeros(0)
    d = {
        "bench": bench,
        "key": key,
        "url": url,
        "text": [b.text for b in bs],
        "p": p,
        "chars": np.array([len(b.text) for b in bs], int),
    }
    if sum(len(b.text) for b in bs) < MIN_MAIN_CHARS:
        whole_bs, x, inm = candidates(whole_page(html), bs, words=model.words)
        if whole_bs:
            d["rescue"] = (whole_bs, inm, (rescue.keep_probability(x) >= rescue.threshold) & ~inm)
    return d


def load_pages() -> list[dict]:
    out = []
    for key, html, truth, url in aeb_pages(SHARED / "html" / "scrapinghub-aeb", with_url=True):
        out.append(
            {**page("aeb", key, html, url, model_for("aeb", url), rescue_for("aeb", url)), "truth": truth}
        )
    tra = "trafilatura-eval"
    for key, html, keep, drop, url in trafilatura_pages(SHARED / "html" / tra, with_url=True):
        out.append(
            {
                **page(tra, key, html, url, model_for(tra, url), rescue_for(tra, url)),
                "keep": keep,
                "drop": drop,
            }
        )
    m, r = load_model(), load_rescue()  # the shipped models: no crawl page is in their training data
    for key, html, keep, drop, no_main, url in crawl_pages(SHARED / "warc"):
        out.append({**page("crawl", key, html, url, m, r), "keep": keep, "drop": drop, "no_main": no_main})
    return out


def text_of(d: dict, flags) -> str:
    if "rescue" in d:
        whole_bs, inm, keep_whole = d["rescue"]
        return "\n".join(
            compose([Block("p", t, 0, 0) for t in d["text"]], list(flags), whole_bs, inm, keep_whole)
        )
    return "\n".join(t for t, k in zip(d["text"], flags) if k)


def score(d: dict, text: str) -> tuple:
    if d["bench"] == "aeb":
        return token_prf(text, d["truth"])
    k, nk, dr, nd = snippet_scores(text, d["keep"], d["drop"])
    return k, nk, dr, nd, int(bool(d.get("no_main")) and (not text.strip() or dr == nd))


def per_page(pages: list[dict], decode) -> dict:
    out = {}
    for d in pages:
        f = np.asarray(decode(d["p"], d["chars"]), bool) if len(d["p"]) else np.zeros(0, bool)
        out[(d["bench"], d["key"])] = score(d, text_of(d, f))
    return out


def aggregate(pp: dict, keys) -> dict:
    a = np.array([pp[k] for k in keys if k[0] == "aeb"] or [(1.0, 1.0, 1.0)])
    t = np.array([pp[k] for k in keys if k[0] == "trafilatura-eval"] or [(0, 1, 0, 1, 0)])
    c = np.array([pp[k] for k in keys if k[0] == "crawl"] or [(0, 1, 0, 1, 0)])
    return dict(
        P=a[:, 0].mean(),
        R=a[:, 1].mean(),
        F1=a[:, 2].mean(),
        keep=t[:, 0].sum() / t[:, 1].sum(),
        drop=t[:, 2].sum() / t[:, 3].sum(),
        ckeep=c[:, 0].sum() / c[:, 1].sum(),
        cdrop=c[:, 2].sum() / c[:, 3].sum(),
        cclean=c[:, 4].sum(),
    )


def row(name: str, s: dict) -> str:
    return (
        f"{name:<40} {s['P']:.4f} {s['R']:.4f} {s['F1']:.4f} {s['keep']:.4f} {s['drop']:.4f} | "
        f"{s['ckeep']:.4f} {s['cdrop']:.4f} {s['cclean']:>3.0f}"
    )


def at_least(p: np.ndarray, chars: np.ndarray, t: float) -> np.ndarray:
    return p >= t


def grid() -> dict:
    """The thresholds and session 6's `small` core grid (with and without 0.5 on pages without a core)."""
    g = {f"threshold {t}": partial(at_least, t=t) for t in (0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75)}
    for conf, n, m, ti, to in itertools.product(
        (0.95, 0.98), (80, 200), (0, 1), (0.25, 0.3, 0.4), (0.6, 0.7, 0.8)
    ):
        name = f"core p>={conf} chars>={n} +{m} in={ti} out={to}"
        g[name] = partial(core_flags, conf=conf, min_chars=n, margin=m, t_in=ti, t_out=to)
        g["core-0.5 " + name[5:]] = partial(
            core_flags, conf=conf, min_chars=n, margin=m, t_in=ti, t_out=to, t_none=0.5
        )
    return g


def bootstrap(base: dict, other: dict, crawl: list[dict], n: int = 2000) -> str:
    """Crawl keep and drop of `other` minus `base`, and a 95% interval resampling the sites."""
    by_site: dict[str, list] = {}
    for d in crawl:
        by_site.setdefault(site(d["url"]), []).append((d["bench"], d["key"]))
    sums = np.array(
        [[sum(pp[k][i] for k in ks) for i in range(4) for pp in (base, other)] for ks in by_site.values()]
    )
    # columns: base kept, other kept, base of, other of, base dropped, other dropped, base of, other of

    def diff(s):
        return s[1] / s[3] - s[0] / s[2], s[5] / s[7] - s[4] / s[6]

    rng = np.random.default_rng(0)
    draws = np.array([diff(sums[rng.integers(0, len(sums), len(sums))].sum(0)) for _ in range(n)])
    (dk, dd), lo, hi = diff(sums.sum(0)), np.percentile(draws, 2.5, 0), np.percentile(draws, 97.5, 0)
    return f"crawl keep {dk:+.4f} [{lo[0]:+.4f}, {hi[0]:+.4f}], drop {dd:+.4f} [{lo[1]:+.4f}, {hi[1]:+.4f}]"


def nested(pages: list[dict], results: dict) -> None:
    folds = {
        (d["bench"], d["key"]): (d["bench"], site_fold(d["url"])) for d in pages if d["bench"] != "crawl"
    }
    crawl = [d for d in pages if d["bench"] == "crawl"]
    ckeys = [(d["bench"], d["key"]) for d in crawl]
    base = "threshold 0.5"
    print("\nnested: for each of the 10 test folds, one family's setting chosen on the other benchmark pages")
    for family in ("core ", "core-0.5", "threshold"):
        for rule in (
            "keep >= base, F1 >= base; max drop + F1",
            "keep >= 0.93, F1 >= base; max drop + F1",
            "max F1 + keep + drop",
        ):
            out, chosen = {}, Counter()
            for test in sorted(set(folds.values())):
                train = [k for k, f in folds.items() if f != test]
                b = aggregate(results[base], train)
                best, value = base, -1e9
                for name, pp in results.items():
                    if not name.startswith(family):
                        continue
                    s = aggregate(pp, train)
                    floor = b["keep"] if rule.startswith("keep >= base") else 0.93
                    if rule.startswith("keep") and (s["keep"] < floor or s["F1"] < b["F1"]):
                        continue
                    v = s["drop"] + s["F1"] + (0 if rule.startswith("keep") else s["keep"])
                    if v > value + 1e-12:
                        best, value = name, v
                chosen[best] += 1
                out.update({k: results[best][k] for k, f in folds.items() if f == test})
            top = chosen.most_common(1)[0][0]
            out.update({k: results[top][k] for k in ckeys})
            print(row(f"{family.strip()}, {rule.split(';')[0]}", aggregate(out, list(out))))
            print(
                f"    chosen {dict(chosen)}; on crawl (most chosen) vs threshold 0.5: "
                + bootstrap(results[base], results[top], crawl)
            )


def main() -> int:
    if not (SHARED / "warc").is_dir():
        print(f"no data at {SHARED}; nothing to measure")
        return 0
    t = time.process_time()
    pages = load_pages()
    keys = [(d["bench"], d["key"]) for d in pages]
    n = Counter(d["bench"] for d in pages)
    print(f"{dict(n)} pages; probabilities in {time.process_time() - t:.1f} s CPU")
    print(
        f"{'decoder':<40} {'AEB P':>6} {'R':>6} {'F1':>6} {'keep':>6} {'drop':>6} | crawl keep, drop, "
        f"no-main clean (of {sum(bool(d.get('no_main')) for d in pages)})"
    )
    results = {}
    for name, f in grid().items():
        results[name] = per_page(pages, f)
        print(row(name, aggregate(results[name], keys)), flush=True)
    nested(pages, results)
    for name in (
        "threshold 0.6",
        "threshold 0.7",
        "core p>=0.98 chars>=80 +0 in=0.4 out=0.7",
        "core p>=0.95 chars>=80 +0 in=0.3 out=0.7",
    ):
        crawl = [d for d in pages if d["bench"] == "crawl"]
        print(f"{name} vs threshold 0.5: " + bootstrap(results["threshold 0.5"], results[name], crawl))
    return 0


if __name__ == "__main__":
    sys.exit(main())
