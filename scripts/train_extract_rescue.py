"""Learn the rescue trees of the `blocks` extractor (src/pretrain/data/extract_blocks_rescue.json and
its ten fold models, extract_blocks_rescue_folds.json.gz).

The rescue trees decide whole-page blocks that resiliparse's main content does not have
(curate/extract_rescue.py). They learn from the same pages and labels as the `blocks` model
(scripts/train_extract_blocks.py: Readability and AEB against their true article, trafilatura-eval
by its snippets, its other blocks weakly by trafilatura's own output), on the candidate blocks of
every page: whole-page blocks within SPAN blocks of the main content and not in it.

Their features include the `blocks` word model's score of each candidate (`word_score` and its
neighbours'). At run time that score comes from the `blocks` model's word model, fitted on every
training page; here, as in train_extract_blocks.py (stacking), each page's candidates are scored by
a word model fitted on the main-content blocks of the training pages of the *other* four inner site
folds, so the trees learn how far to trust it on pages it has not seen.

Eleven fits, split as the `blocks` models are: one on every page (shipped) and "B/k" for each
benchmark B and site fold k (every other set + B's pages outside fold k), so a benchmark page is
scored by main and rescue trees that never saw its site. The keep threshold is 0.7: chosen on the
benchmarks' out-of-fold results in q2's study (bench/bench_extract_render.py), not on separate
pages; say so when quoting its numbers. The script ends by printing each benchmark's out-of-fold
scores with and without the rescue. Deterministic (random_state=0).

`--cv` only checks the gate and the threshold: grouped 5-fold CV by site over all the training
pages, counting the gold-labelled candidates rescued rightly and wrongly (docs/extraction.md).
Time: ≈5.5 minutes (--cv ≈2 with a warm --cache) on a shared 2-core machine.

    PYTHONPATH=src .venv/bin/python scripts/train_extract_rescue.py [--cache FILE] [--cv]
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# isort: off
import train_extract_blocks as tb  # noqa: E402  (first: it pins OpenBLAS's kernels before numpy loads)
import numpy as np  # noqa: E402
# isort: on

from pretrain.curate.extract_blocks import Block, load_model  # noqa: E402
from pretrain.curate.extract_eval import (  # noqa: E402
    aeb_pages,
    site,
    site_fold,
    snippet_scores,
    token_prf,
    tokens,
    trafilatura_pages,
)
from pretrain.curate.extract_rescue import (  # noqa: E402
    RESCUE_FEATURES,
    RESCUE_FOLDS_PATH,
    RESCUE_PATH,
    SPAN,
    candidates,
    page_texts,
    whole_page,
)

THRESHOLD = 0.7
BENCHMARKS = tb.BENCHMARKS


def labels(
    bs, truth: str | None = None, keep=(), drop=(), weak: str | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """As train_extract_blocks.page_labels (truth given) or snippet_labels (snippets + weak text);
    also which labels are gold (from the truth or a snippet, not from trafilatura's output)."""
    if truth is not None:
        have = Counter(tokens(truth))
    else:
        keep_n, drop_n = [tb._norm(s) for s in keep], [tb._norm(s) for s in drop]
        have = Counter(tokens(weak or ""))
    y, gold = [], []
    for b in bs:
        label = -1
        if truth is None:
            t = tb._norm(b.text)
            hit = lambda ss, t=t: any(s and (s in t or (len(t) > 20 and t in s)) for s in ss)  # noqa: E731
            label = 0 if hit(drop_n) else 1 if hit(keep_n) else -1
        gold.append(truth is not None or label >= 0)
        if label < 0:
            ts = tokens(b.text)
            label = int(bool(ts) and sum(w in have for w in ts) / len(ts) >= tb.KEEP_SHARE)
        y.append(label)
    return np.array(y, int), np.array(gold, bool)


@dataclass
class Page:
    """One page: its main-content page (blocks and labels, for the word model; scoring data), its
    whole-page blocks, and the labels of its rescue candidates that are not main content."""

    main: tb.Page
    html: str
    whole: list[Block]
    y: np.ndarray
    gold: np.ndarray  # which of y are gold labels (truth or snippet), for --cv


def load(cache: Path | None) -> list[Page]:
    """Every labelled page of the three sets (the main-content half as train_extract_blocks loads
    it, from its cache when given) with its whole-page blocks and candidate labels."""
    mains = tb.load_pages(cache=cache)
    rd = tb.readability_pages()
    truth = {k: t for k, _, t in rd}
    htmls = [h for _, h, _ in rd] + [h for _, h, _ in aeb_pages(tb.DATA / "html" / "scrapinghub-aeb")]
    tra = list(trafilatura_pages(tb.DATA / "html" / "trafilatura-eval"))
    htmls += [h for _, h, _, _ in tra]
    assert len(htmls) == len(mains), "the page lists of the two scripts differ"
    weak = iter(tb.trafilatura_text(h) for _, h, _, _ in tra)
    out = []
    for m, html in zip(mains, htmls):
        whole = whole_page(html)
        cand, _, inm = candidates(whole, m.blocks, SPAN)
        rest = [b for b, i in zip(cand, inm) if not i]
        if m.source == "trafilatura-eval":
            y, gold = labels(rest, keep=m.keep, drop=m.drop, weak=next(weak))
        else:
            y, gold = labels(rest, truth=m.truth or truth[m.url])
        out.append(Page(m, html, whole, y, gold))
    return out


def rows(p: Page, words) -> np.ndarray:
    """The rescue features of a page's non-main candidates (as at run time), word scores from `words`."""
    cand, x, inm = candidates(p.whole, p.main.blocks, SPAN, words)
    return x[~inm] if cand else np.zeros((0, len(RESCUE_FEATURES)), np.float32)


def train(pages: list[Page]):
    """Rescue trees on `pages`, each page's word scores from a word model that never saw its site."""
    fold = [zlib.crc32(f"inner:{site(p.main.url)}".encode()) % 5 for p in pages]
    xs: list[np.ndarray] = [np.zeros(0)] * len(pages)
    for k in range(5):
        wm = tb.fit_words([p.main for p, f in zip(pages, fold) if f != k])
        for i, p in enumerate(pages):
            if fold[i] == k:
                xs[i] = rows(p, wm)
    keep = [len(p.y) > 0 for p in pages]
    x = np.vstack([x for x, k in zip(xs, keep) if k])
    y = np.concatenate([p.y for p, k in zip(pages, keep) if k])  # (weak labels included, as for blocks)
    return tb.fit(x, y, THRESHOLD)


def evaluate(pages: list[Page], folds: dict) -> None:
    """Out-of-fold scores with the `blocks` fold models, without and with the rescue fold models."""
    for bench in BENCHMARKS:
        ps = [p for p in pages if p.main.source == bench]
        got = {0: [], 1: []}
        for p in ps:
            k = f"{bench}/{site_fold(p.main.url)}"
            model = load_model(fold=k)
            for gate in (0, 1):
                text = page_texts([p.html], [p.main.blocks], model, folds[k], 500 if gate else 0)[0]
                m = p.main
                r = token_prf(text, m.truth) if bench == "aeb" else snippet_scores(text, m.keep, m.drop)
                got[gate].append(r)
        for gate, rs in got.items():
            a = np.array(rs, float)
            name = "rescue" if gate else "blocks"
            if bench == "aeb":
                print(f"  {bench:<17} {name:<7} P R F1 {a.mean(0).round(4)}")
            else:
                s = a.sum(0)
                kd = f"keep {s[0] / s[1]:.4f} ({int(s[0])})  drop {s[2] / s[3]:.4f} ({int(s[2])})"
                print(f"  {bench:<17} {name:<7} {kd}")


def cv(pages: list[Page]) -> None:
    """The gate and the threshold checked by grouped 5-fold CV by site over all training pages: rescue
    trees fitted on four folds (word scores as at run time: a word model fitted on those folds)
    decide the candidates of the fifth; counted on gold-labelled candidates only."""
    fold = [zlib.crc32(f"cv:{site(p.main.url)}".encode()) % 5 for p in pages]
    rows_ = []  # (main chars, probability, label) of every gold-labelled candidate
    for k in range(5):
        train_on = [p for p, f in zip(pages, fold) if f != k]
        r, wm = train(train_on), tb.fit_words([p.main for p in train_on])
        for p, f in zip(pages, fold):
            if f == k and len(p.y):
                prob = r.keep_probability(rows(p, wm))
                chars = sum(len(b.text) for b in p.main.blocks)
                rows_ += [(chars, q, y) for q, y, g in zip(prob, p.y, p.gold) if g]
    a = np.array(rows_, float)
    print("  gate  thr  kept-keep kept-drop  net  (gold candidates of held-out pages with main < gate)")
    for gate in (250, 500, 1000, 2000, 4000):
        for thr in (0.5, 0.6, 0.7, 0.8, 0.9):
            sel = a[(a[:, 0] < gate) & (a[:, 1] >= thr)]
            tp, fp = int((sel[:, 2] == 1).sum()), int((sel[:, 2] == 0).sum())
            print(f"  {gate:>5} {thr:>4} {tp:>9} {fp:>9} {tp - fp:>5}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=RESCUE_PATH)
    ap.add_argument("--folds-out", type=Path, default=RESCUE_FOLDS_PATH)
    ap.add_argument("--cache", type=Path, help="train_extract_blocks' page cache (reused or written)")
    ap.add_argument("--cv", action="store_true", help="only check the gate and threshold by CV by site")
    args = ap.parse_args()
    pages = load(args.cache)
    if args.cv:
        cv(pages)
        return 0
    for n in ("readability", *BENCHMARKS):
        ps = [p for p in pages if p.main.source == n]
        n_keep = int(sum(p.y.sum() for p in ps))
        print(f"{n}: {len(ps)} pages, {sum(len(p.y) for p in ps)} candidates, {n_keep} keep")
    folds = {
        f"{b}/{k}": train([p for p in pages if not (p.main.source == b and site_fold(p.main.url) == k)])
        for b in BENCHMARKS
        for k in range(5)
    }
    info = {
        "candidates": f"whole-page blocks within {SPAN} blocks of the main content, not in it",
        "words": "word_score by the blocks model's word model; in training out of fold (5 inner site folds)",
        "trees": tb.N_TREES,
        "depth": tb.DEPTH,
        "learning_rate": tb.LEARNING_RATE,
        "keep_share": tb.KEEP_SHARE,
        "script": "scripts/train_extract_rescue.py",
    }
    core = tb.blas_core()
    print(f"OpenBLAS kernels: {core or 'none'} (the shipped files: {tb.BLAS_CORE})")
    if core != tb.BLAS_CORE:  # (absent when the pinned kernels: the files as before)
        info["openblas"] = core
    doc = {
        "features": list(RESCUE_FEATURES),
        "info": {**info, "folds": "B/k: every other set + B's pages whose site_fold != k"},
        "folds": {k: m.to_dict() for k, m in folds.items()},
    }
    args.folds_out.write_bytes(gzip.compress(json.dumps(doc, separators=(",", ":")).encode(), mtime=0))
    print(f"-> {args.folds_out} ({args.folds_out.stat().st_size / 1e3:.0f} kB)")
    doc = {
        "features": list(RESCUE_FEATURES),
        "info": {**info, "trained_on": ["readability", *BENCHMARKS]},
        "model": train(pages).to_dict(),
    }
    tmp = args.out.with_name(args.out.name + ".tmp")
    tmp.write_text(json.dumps(doc, separators=(",", ":")) + "\n", encoding="utf-8")
    tmp.replace(args.out)
    print(f"-> {args.out} ({args.out.stat().st_size / 1e3:.0f} kB)")
    evaluate(pages, folds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
