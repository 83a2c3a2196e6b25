"""Learn the `blocks` extractor's keep/drop model (src/pretrain/data/extract_blocks.json) and its fold models.

Labelled pages (../shared/data/html):
- Mozilla Readability's 130 test pages: each comes with the article Readability.js extracts
  (`expected_html`), checked in by hand by its maintainers. A block is "keep" when at least
  KEEP_SHARE of its words are in that article.
- ScrapingHub AEB's 181 pages: the same, against the true article body.
- trafilatura's evaluation set (679 pages): a block holding a must-keep snippet is 1, a must-drop
  snippet 0. The other blocks (88% of them) get a weak label: "keep" when KEEP_SHARE of their
  words are in trafilatura's own output (favor_precision) for the page. Chosen by grouped 5-fold
  cross-validation on the without_aeb training pages only (Readability + trafilatura-eval, fold =
  page index mod 5, scored on the gold-labelled blocks of the held-out pages): block accuracy
  0.8720 -> 0.8767, drop recall 0.426 -> 0.472, keep recall 0.963 -> 0.960 (2026-12-01).

The model is 100 gradient-boosted trees of depth 4 (scikit-learn), exported to complete heap-ordered
arrays that `BlockModel` walks in numpy. Eleven are fitted: one on every set (the one the extractor
uses) and ten cross-fitted ones (extract_blocks_folds.json.gz): grouped 5-fold cross-fitting within
each benchmark, by site (`extract_eval.site_fold`: crc32 of the URL's host without "www." mod 5).
Model "aeb/k" learns from Readability, trafilatura-eval and the AEB pages outside fold k, and
scores AEB's fold k, so no benchmark page is scored by a model that saw a page of its site (the
same for "trafilatura-eval/k"). The script prints the scores per fold and overall. Deterministic
(random_state=0, gzip mtime 0): a run without --cache rewrote both files byte for byte
(2026-12-01), whatever PYTHONHASHSEED and thread counts (2026-12-02) — given the same OpenBLAS
kernels, which the script pins (BLAS_CORE, see `_pin_blas`): the word model's rounding depends on
them (docs/extraction.md, "Retraining on another CPU"). Time: 3 min 41 s on the shared 2-core
machine (2 min 34 s CPU; 11 tree fits of ~13 s are most of it), 3 min 01 s from --cache.

Each block's features are FEATURES plus the three body-container columns of extract_body.py
(BLOCK_FEATURES; from 2026-12-02, issue 19 session 9); the extractor decodes the probabilities
with extract_blocks.core_flags and headline_off (`keep_flags`), and so does the printed evaluation.

Each model also carries a word model (`WordModel`: logistic regression over the tokens of short
blocks) whose score is a tree feature; in training, a block's score comes from a word model
fitted without its page's site (inner site folds), see `train`.

How the trees learn is `Fitting` (FITTING: the shipped defaults; options --trees, --learning-rate,
--min-leaf, --weak-weight, --per-page, --balanced). Session 10 (issue 19) tried the weights and the
ensemble's shape with bench/bench_extract_train.py and shipped none: docs/extraction.md, "Tried
2026-12-02 (issue 19, session 10): how the trees learn".

    PYTHONPATH=src .venv/bin/python scripts/train_extract_blocks.py [--no-weak] [--cache FILE]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import sys
import zlib
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

# OpenBLAS (scipy's, which liblinear's TRON calls for its dot products and norms) picks its kernels
# by CPU when it loads: AVX-512 CPUs get "SkylakeX", whose sums round differently from "Haswell"'s.
# The word model's weights move by ~1e-6 with the summation order and are stored to 4 decimals, so
# a CPU change flips a rounding and every tree after it (docs/extraction.md, session 10). Pinned
# before numpy loads OpenBLAS; `blas_core` says which kernels ran (the files record any other).
BLAS_CORE = "Haswell"  # the kernels the shipped files were trained with (needs AVX2 and FMA)


def _pin_blas() -> None:
    """OPENBLAS_CORETYPE=BLAS_CORE on an x86-64 CPU that has its instructions, unless already set."""
    if platform.machine() not in ("x86_64", "AMD64") or "OPENBLAS_CORETYPE" in os.environ:
        return
    try:
        flags = next(ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("flags"))
    except (OSError, StopIteration):
        return
    if {"avx2", "fma"} <= set(flags.split()):  # (kernels a CPU lacks would stop on an illegal instruction)
        os.environ["OPENBLAS_CORETYPE"] = BLAS_CORE


if "numpy" not in sys.modules:  # (run as a script or imported first by train_extract_rescue.py; a test
    _pin_blas()  # or a bench that imports this module has numpy loaded already: see blas_core)

import numpy as np  # noqa: E402

from pretrain.curate.extract_blocks import (  # noqa: E402
    BLOCK_FEATURES,
    BODY_COLUMNS,
    FOLDS_PATH,
    MODEL_PATH,
    Block,
    BlockModel,
    WordModel,
    features,
    keep_flags,
    word_features,
)
from pretrain.curate.extract_body import main_blocks  # noqa: E402
from pretrain.curate.extract_eval import tokens  # noqa: E402

DATA = Path(os.environ.get("PRETRAIN_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
KEEP_SHARE = 0.6  # a block is "keep" when at least this share of its words is in the true article
N_TREES, DEPTH, LEARNING_RATE = 100, 4, 0.1
WORD_MAX_CHARS = 200  # only shorter blocks are read word by word (time: see WordModel)
MIN_PAGES = 3  # a word feature enters the vocabulary when seen on at least this many training pages
WORD_C = 1.0  # inverse L2 strength of the word model


@dataclass(frozen=True)
class Fitting:
    """How the trees learn (issue 19, session 10; the defaults are the shipped model's, and with them
    `fit` passes no sample weights, so the files are the same bytes as before the option existed).

    trees, learning_rate: the ensemble (depth stays DEPTH: the extractor walks trees x DEPTH nodes per
    block); min_leaf: scikit-learn's min_samples_leaf; weak: the weight of a weak label (a
    trafilatura-eval block labelled by trafilatura's output, not by a snippet) against 1 for a gold
    one; per_page: each page's labelled blocks share the same total weight (long pages do not
    dominate); balanced: the two classes get the same total weight."""

    trees: int = N_TREES
    learning_rate: float = LEARNING_RATE
    min_leaf: int = 1
    weak: float = 1.0
    per_page: bool = False
    balanced: bool = False

    def weighted(self) -> bool:
        return self.weak != 1.0 or self.per_page or self.balanced


FITTING = Fitting()  # what scripts/train_extract_blocks.py trains the shipped files with


def blas_core() -> str:
    """The kernels of the loaded OpenBLAS libraries (numpy's, scipy's) as threadpoolctl reads them, "/"
    between different ones; "" without OpenBLAS (another BLAS: the files then record "")."""
    import scipy.linalg  # noqa: F401  (loads scipy's OpenBLAS, the one liblinear calls)
    from threadpoolctl import threadpool_info

    found = {i.get("architecture") or "?" for i in threadpool_info() if i.get("internal_api") == "openblas"}
    return "/".join(sorted(found))


def _write(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically (a killed run leaves the old file, never half a new one)."""
    tmp = path.with_name(path.name + ".part")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def plain(html: str) -> str:
    from resiliparse.extract.html2text import extract_plain_text

    return extract_plain_text(html, main_content=False, alt_texts=False)


def readability_pages() -> list[tuple[str, str, str]]:
    out = []
    for f in sorted((DATA / "html" / "mozilla-readability").glob("*.jsonl.gz")):
        for line in gzip.open(f, "rt", encoding="utf-8"):
            d = json.loads(line)
            out.append((f"readability/{d['name']}", d["source_html"], plain(d["expected_html"])))
    return out


def page_matrix(html: str, truth: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Features and labels of one page whose true main text is known: keep = most words in it."""
    bs, y, _ = page_labels(html, truth)
    return features(bs), y, [b.text for b in bs]


def page_labels(html: str, truth: str) -> tuple[list[Block], np.ndarray, np.ndarray]:
    """A page's blocks, their labels and their body columns."""
    bs, cols = main_blocks(html)
    have = Counter(tokens(truth))
    y = []
    for b in bs:
        ts = tokens(b.text)
        y.append(1 if ts and sum(t in have for t in ts) / len(ts) >= KEEP_SHARE else 0)
    return bs, np.array(y, int), cols


def snippet_matrix(
    html: str, keep: list[str], drop: list[str], weak: str | None = None
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Labels from trafilatura-eval's snippets: a block holding a must-keep snippet is 1, a must-drop
    one 0; blocks holding neither get their weak label from `weak` (another extractor's text of the
    page, as in page_matrix) or, without it, are left out (label -1, dropped before fitting)."""
    bs, y, _ = snippet_labels(html, keep, drop, weak)
    return features(bs), y, [b.text for b in bs]


def snippet_labels(
    html: str, keep: list[str], drop: list[str], weak: str | None
) -> tuple[list[Block], np.ndarray, np.ndarray]:
    bs, cols = main_blocks(html)
    have = Counter(tokens(weak)) if weak is not None else None
    y = []
    for b, label in zip(bs, gold_labels(bs, keep, drop)):
        if label < 0 and have is not None:
            ts = tokens(b.text)
            label = 1 if ts and sum(w in have for w in ts) / len(ts) >= KEEP_SHARE else 0
        y.append(label)
    return bs, np.array(y, int), cols


def gold_labels(bs: list[Block], keep: list[str], drop: list[str]) -> list[int]:
    """Each block's label from trafilatura-eval's snippets: 0 when it holds a must-drop snippet (or
    lies inside one), else 1 for a must-keep one, else -1 (none: a weak label, or left out)."""
    keep_n, drop_n = [_norm(s) for s in keep], [_norm(s) for s in drop]
    out = []
    for b in bs:
        t = _norm(b.text)
        hit = lambda ss, t=t: any(s and (s in t or (len(t) > 20 and t in s)) for s in ss)  # noqa: E731
        out.append(0 if hit(drop_n) else 1 if hit(keep_n) else -1)
    return out


def trafilatura_text(html: str) -> str:
    from pretrain.curate.extract import extract_text

    return extract_text(html, "trafilatura")


def _norm(s: str) -> str:
    return " ".join(s.split())


def fit(
    x: np.ndarray, y: np.ndarray, threshold: float, weight: np.ndarray | None = None, how: Fitting = FITTING
) -> BlockModel:
    """Gradient-boosted trees (scikit-learn), exported to the complete heap-ordered trees BlockModel walks."""
    from sklearn.ensemble import GradientBoostingClassifier

    gb = GradientBoostingClassifier(
        n_estimators=how.trees,
        max_depth=DEPTH,
        learning_rate=how.learning_rate,
        subsample=0.8,
        random_state=0,
        min_samples_leaf=how.min_leaf,
    ).fit(x, y, sample_weight=weight)
    inner = 2**DEPTH - 1
    feature = np.zeros((how.trees, inner), np.intp)
    split = np.full((how.trees, inner), np.inf)
    value = np.zeros((how.trees, inner + 1))
    for i, est in enumerate(gb.estimators_):
        _to_heap(est[0].tree_, 0, 0, 0, feature[i], split[i], value[i])
    value *= how.learning_rate
    # scikit-learn's constant start (the log-odds of the prior): what its raw score has beyond the trees.
    no_init = BlockModel(feature, split, value, 0.0, DEPTH, 0.5)
    p = np.clip(no_init.keep_probability(x[:1000]), 1e-12, 1 - 1e-12)
    init = float(np.mean(gb.decision_function(x[:1000]) - np.log(p / (1 - p))))
    model = BlockModel(feature, split, value, init, DEPTH, threshold)
    # The numpy walk must reproduce scikit-learn's probabilities after the JSON round trip.
    again = BlockModel.from_dict(json.loads(json.dumps(model.to_dict())))
    diff = np.abs(again.keep_probability(x) - gb.predict_proba(x)[:, 1]).max()
    assert diff < 1e-4, f"the exported trees differ from scikit-learn's by {diff}"
    return model


def _to_heap(t, node: int, h: int, d: int, feature, split, value) -> None:
    """Copy scikit-learn tree `t` from `node` into heap slot `h` at depth `d` (complete to DEPTH)."""
    if d == DEPTH:
        value[h - (2**DEPTH - 1)] = t.value[node, 0, 0]
        return
    if t.children_left[node] == -1:  # an early leaf: always go left (split stays +inf) down to the bottom
        _to_heap(t, node, 2 * h + 1, d + 1, feature, split, value)
        return
    feature[h], split[h] = t.feature[node], t.threshold[node]
    _to_heap(t, t.children_left[node], 2 * h + 1, d + 1, feature, split, value)
    _to_heap(t, t.children_right[node], 2 * h + 2, d + 1, feature, split, value)


@dataclass
class Page:
    """One labelled page: which set, its URL (for the site folds), its blocks, their labels (-1: none)
    and their body columns (extract_body.body_columns)."""

    source: str
    url: str
    blocks: list[Block]
    y: np.ndarray
    cols: np.ndarray
    truth: str = ""  # AEB: the true article body (for scoring)
    keep: list[str] = field(default_factory=list)  # trafilatura-eval: must-keep snippets
    drop: list[str] = field(default_factory=list)  # trafilatura-eval: must-drop snippets


def load_pages(weak: bool = True, cache: Path | None = None) -> list[Page]:
    """Every labelled page of the three sets, from `cache` (a JSON file) when it exists, else rendered."""
    if cache and cache.exists():
        raw = json.loads(gzip.decompress(cache.read_bytes()))
        return [
            Page(
                d["source"],
                d["url"],
                [Block(*b) for b in d["blocks"]],
                np.array(d["y"], int),
                np.array(d["cols"], np.float32).reshape(-1, len(BODY_COLUMNS)),
                d["truth"],
                d["keep"],
                d["drop"],
            )
            for d in raw
        ]
    from pretrain.curate.extract_eval import aeb_pages, trafilatura_pages

    out = []
    for url, h, t in readability_pages():
        out.append(Page("readability", url, *page_labels(h, t)))
    for _, h, t, url in aeb_pages(DATA / "html" / "scrapinghub-aeb", with_url=True):
        out.append(Page("aeb", url, *page_labels(h, t), truth=t))
    for _, h, k, d, url in trafilatura_pages(DATA / "html" / "trafilatura-eval", with_url=True):
        weak_text = trafilatura_text(h) if weak else None
        out.append(Page("trafilatura-eval", url, *snippet_labels(h, k, d, weak_text), keep=k, drop=d))
    if cache:
        rows = [
            {
                "source": p.source,
                "url": p.url,
                "blocks": [[b.kind, b.text, b.link_chars, b.links] for b in p.blocks],
                "y": p.y.tolist(),
                "cols": p.cols.ravel().tolist(),
                "truth": p.truth,
                "keep": p.keep,
                "drop": p.drop,
            }
            for p in out
        ]
        _write(cache, gzip.compress(json.dumps(rows).encode(), mtime=0))
    return out


# --------------------------------------------------------------------------- the word model


def fit_words(pages: list[Page]) -> WordModel:
    """Logistic regression (L2, liblinear) over the word features of the labelled short blocks of
    `pages`; vocabulary: features seen on at least MIN_PAGES pages (rarer ones cannot generalise)."""
    from scipy.sparse import csr_matrix
    from sklearn.linear_model import LogisticRegression

    df: Counter = Counter()
    rows = []
    for p in pages:
        seen = set()
        for b, label in zip(p.blocks, p.y):
            if label >= 0 and len(b.text) < WORD_MAX_CHARS:
                fs = word_features(b.text)
                seen.update(fs)
                rows.append((fs, label))
        df.update(seen)
    vocab = {t: i for i, t in enumerate(sorted(t for t, c in df.items() if c >= MIN_PAGES))}
    ind, ptr, val = [], [0], []
    for fs, _ in rows:
        c = Counter(vocab[t] for t in fs if t in vocab)
        ind.extend(c)
        val.extend(c.values())
        ptr.append(len(ind))
    ind32, ptr32 = np.array(ind, np.int32), np.array(ptr, np.int32)  # liblinear takes 32-bit indices
    x = csr_matrix((np.array(val, float), ind32, ptr32), shape=(len(rows), len(vocab)))
    y = np.array([label for _, label in rows])
    lr = LogisticRegression(C=WORD_C, solver="liblinear").fit(x, y)
    names = sorted(vocab, key=vocab.get)
    w = {t: round(float(c), 4) for t, c in zip(names, lr.coef_[0]) if abs(c) >= 0.01}
    return WordModel(w, round(float(lr.intercept_[0]), 4), WORD_MAX_CHARS)


def oof_word_scores(pages: list[Page]) -> list[np.ndarray]:
    """Each page's word scores from a word model that never saw that page's site (5 inner site folds):
    the trees must learn how far to trust the score on blocks the word model has not memorised."""
    from pretrain.curate.extract_eval import site

    fold = [zlib.crc32(f"inner:{site(p.url)}".encode()) % 5 for p in pages]
    out: list[np.ndarray] = [np.zeros(0)] * len(pages)
    for k in range(5):
        wm = fit_words([p for p, f in zip(pages, fold) if f != k])
        for i, p in enumerate(pages):
            if fold[i] == k:
                out[i] = wm.score(p.blocks)
    return out


def gold_mask(p: Page) -> np.ndarray:
    """Which blocks of a page carry a gold label (Readability, AEB: all; trafilatura-eval: a snippet's)."""
    if p.source != "trafilatura-eval":
        return np.ones(len(p.blocks), bool)
    return np.array(gold_labels(p.blocks, p.keep, p.drop), int) >= 0


def sample_weights(pages: list[Page], how: Fitting) -> np.ndarray | None:
    """The weight of each labelled block of `pages` (in training order), or None when all are 1."""
    if not how.weighted():
        return None
    ws = []
    for p in pages:
        w = np.where(gold_mask(p), 1.0, how.weak)[p.y >= 0]
        if how.per_page and w.size:
            w = w / w.sum()  # every page the same total weight
        ws.append(w)
    w = np.concatenate(ws)
    if how.balanced:
        y = np.concatenate([p.y[p.y >= 0] for p in pages])
        for c in (0, 1):
            w[y == c] *= 0.5 * w.sum() / max(w[y == c].sum(), 1e-12)
    return w * (len(w) / w.sum())  # mean 1: min_samples_leaf and the trees' scale stay comparable


def train(pages: list[Page], threshold: float, words: bool, how: Fitting = FITTING) -> BlockModel:
    """Trees (with the word model stacked under them when `words`) on the labelled blocks of `pages`."""
    scores = oof_word_scores(pages) if words else [None] * len(pages)
    xs = [np.hstack([features(p.blocks, s), p.cols])[p.y >= 0] for p, s in zip(pages, scores)]
    ys = [p.y[p.y >= 0] for p in pages]
    m = fit(np.vstack(xs), np.concatenate(ys), threshold, sample_weights(pages, how), how)
    return replace(m, words=fit_words(pages)) if words else m


# --------------------------------------------------------------------------- cross-fitting


BENCHMARKS = ("aeb", "trafilatura-eval")


def fold_models(
    pages: list[Page], threshold: float, words: bool, how: Fitting = FITTING
) -> dict[str, BlockModel]:
    """Grouped 5-fold cross-fitting within each benchmark: model "B/k" is trained on every other set
    in full plus B's pages outside site fold k, and scores B's pages in fold k."""
    from pretrain.curate.extract_eval import site_fold

    out = {}
    for bench in BENCHMARKS:
        for k in range(5):
            train_on = [p for p in pages if not (p.source == bench and site_fold(p.url) == k)]
            out[f"{bench}/{k}"] = train(train_on, threshold, words, how)
    return out


def evaluate(pages: list[Page], models: dict[str, BlockModel]) -> dict[str, dict]:
    """Scores of each benchmark fold and overall, with each page scored by its fold's model (the same
    text extract_blocks_text gives: the kept blocks joined by newlines)."""
    from pretrain.curate.extract_eval import site_fold, snippet_scores, token_prf

    acc: dict[str, list] = {}
    for p in pages:
        if p.source not in BENCHMARKS:
            continue
        m = models[f"{p.source}/{site_fold(p.url)}"]
        keep = keep_flags([p.blocks], m, [p.cols])[0]  # the extractor's decoder (no rescue)
        text = "\n".join(b.text for b, k in zip(p.blocks, keep) if k)
        r = token_prf(text, p.truth) if p.source == "aeb" else snippet_scores(text, p.keep, p.drop)
        for key in (p.source, f"{p.source}/{site_fold(p.url)}"):
            acc.setdefault(key, []).append(r)
    out = {}
    for key, rs in acc.items():
        a = np.array(rs, float)
        if key.startswith("aeb"):
            out[key] = dict(zip(("P", "R", "F1"), a.mean(0).round(4)), pages=len(rs))
        else:
            s = a.sum(0)
            out[key] = {"keep": round(s[0] / s[1], 4), "drop": round(s[2] / s[3], 4), "pages": len(rs)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=MODEL_PATH, help="the shipped model (trained on everything)")
    ap.add_argument("--folds-out", type=Path, default=FOLDS_PATH, help="the 10 cross-fitted models")
    ap.add_argument("--threshold", type=float, default=0.5, help="keep probability")
    ap.add_argument("--no-weak", action="store_true", help="leave trafilatura-eval's unlabelled blocks out")
    ap.add_argument("--no-words", action="store_true", help="trees on the layout features alone")
    ap.add_argument("--cache", type=Path, help="reuse (or write) the rendered, labelled pages here")
    ap.add_argument("--trees", type=int, default=FITTING.trees, help=f"number of trees (depth stays {DEPTH})")
    ap.add_argument("--learning-rate", type=float, default=FITTING.learning_rate)
    ap.add_argument("--min-leaf", type=int, default=FITTING.min_leaf, help="min_samples_leaf")
    ap.add_argument("--weak-weight", type=float, default=FITTING.weak, help="weak label weight (gold: 1)")
    ap.add_argument("--per-page", action="store_true", default=FITTING.per_page,
                    help="each page's labelled blocks share the same total weight")
    ap.add_argument("--balanced", action="store_true", default=FITTING.balanced,
                    help="both classes the same total weight")
    ap.add_argument("--blas", action="store_true", help="print the OpenBLAS kernels a run uses, and stop")
    args = ap.parse_args()
    if args.blas:
        print(blas_core() or "none")
        return 0
    how = Fitting(
        args.trees, args.learning_rate, args.min_leaf, args.weak_weight, args.per_page, args.balanced
    )
    pages = load_pages(weak=not args.no_weak, cache=args.cache)
    for n in ("readability", *BENCHMARKS):
        ps = [p for p in pages if p.source == n]
        ys = np.concatenate([p.y for p in ps])  # (a page resiliparse finds nothing on has no blocks)
        print(f"{n}: {len(ps)} pages, {int((ys >= 0).sum())} labelled blocks, {int((ys == 1).sum())} keep")
    words = not args.no_words
    folds = fold_models(pages, args.threshold, words, how)
    for key, r in sorted(evaluate(pages, folds).items()):
        print(f"  {key:<20} " + "  ".join(f"{k} {v}" for k, v in r.items()))
    info = {
        "trees": how.trees,
        "depth": DEPTH,
        "learning_rate": how.learning_rate,
        "keep_share": KEEP_SHARE,
        "weak_labels": "none" if args.no_weak else "trafilatura-eval's unlabelled blocks: trafilatura",
        "words": {"max_chars": WORD_MAX_CHARS, "min_pages": MIN_PAGES, "C": WORD_C} if words else None,
        "script": "scripts/train_extract_blocks.py",
    }
    core = blas_core()
    print(f"OpenBLAS kernels: {core or 'none'} (the shipped files: {BLAS_CORE})")
    if core != BLAS_CORE:  # (absent when the pinned kernels: the files as before)
        info["openblas"] = core
        print(f"warning: OpenBLAS runs {core or 'no'} kernels, not {BLAS_CORE}: the word models' weights may"
              " differ from the shipped files' in the 4th decimal, and the trees with them", file=sys.stderr)
    if how.min_leaf != 1 or how.weighted():  # (absent when the defaults: the files as before)
        info["fitting"] = {"min_leaf": how.min_leaf, "weak": how.weak, "per_page": how.per_page,
                           "balanced": how.balanced}
    doc = {
        "features": list(BLOCK_FEATURES),
        "info": {**info, "folds": "B/k: every other set + B's pages whose site_fold != k"},
        "folds": {k: m.to_dict() for k, m in folds.items()},
    }
    _write(args.folds_out, gzip.compress(json.dumps(doc, separators=(",", ":")).encode(), mtime=0))
    print(f"-> {args.folds_out} ({args.folds_out.stat().st_size / 1e3:.0f} kB)")
    model = train(pages, args.threshold, words, how)
    doc = {
        "features": list(BLOCK_FEATURES),
        "info": {**info, "trained_on": ["readability", *BENCHMARKS]},
        "model": model.to_dict(),
    }
    _write(args.out, (json.dumps(doc, separators=(",", ":")) + "\n").encode())
    print(f"-> {args.out} ({args.out.stat().st_size / 1e3:.0f} kB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
