"""Learn the `blocks` extractor's keep/drop model (writes src/pretrain/data/extract_blocks.json).

Training pages are never the ones we report on (AEB and trafilatura's evaluation set):
- Mozilla Readability's 130 test pages (../shared/data/html/mozilla-readability): each comes with
  the article Readability.js extracts (`expected_html`), checked in by hand by its maintainers. A
  block is labelled "keep" when most of its words are in that article.
- with --weak: the real crawl pages of ../shared/data/warc (dolma, resiliparse, clueweb), labelled
  by trafilatura's own output (favor_precision), i.e. weak labels.

The model is a logistic regression (scikit-learn, L2) on standardized features; the threshold is
chosen by 5-fold cross-validation grouped by page (no page in both sides of a fold), maximizing the
mean token F1 per page of the held-out pages against their true article. Reproducible: no
randomness beyond the fixed fold assignment (page index mod 5).

    PYTHONPATH=src .venv/bin/python scripts/train_extract_blocks.py [--weak] [--out PATH]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
from collections import Counter
from pathlib import Path

import numpy as np

from pretrain.curate.extract_blocks import FEATURES, MODEL_PATH, BlockModel, blocks, features, render
from pretrain.curate.extract_eval import tokens

DATA = Path(os.environ.get("PRETRAIN_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
KEEP_SHARE = 0.6  # a block is "keep" when at least this share of its words is in the true article
N_TREES, DEPTH, LEARNING_RATE = 100, 4, 0.1


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
    bs = blocks(render(html))
    have = Counter(tokens(truth))
    y = []
    for b in bs:
        ts = tokens(b.text)
        y.append(1 if ts and sum(t in have for t in ts) / len(ts) >= KEEP_SHARE else 0)
    return features(bs), np.array(y), [b.text for b in bs]


def snippet_matrix(html: str, keep: list[str], drop: list[str]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Labels from trafilatura-eval's snippets: a block holding a must-keep snippet is 1, a must-drop
    one 0; blocks holding neither are left out (label -1, dropped before fitting)."""
    bs = blocks(render(html))
    keep_n, drop_n = [_norm(s) for s in keep], [_norm(s) for s in drop]
    y = []
    for b in bs:
        t = _norm(b.text)
        hit = lambda ss, t=t: any(s and (s in t or (len(t) > 20 and t in s)) for s in ss)  # noqa: E731
        y.append(0 if hit(drop_n) else 1 if hit(keep_n) else -1)
    return features(bs), np.array(y), [b.text for b in bs]


def _norm(s: str) -> str:
    return " ".join(s.split())


def fit(x: np.ndarray, y: np.ndarray, threshold: float) -> BlockModel:
    """Gradient-boosted trees (scikit-learn), exported to the complete heap-ordered trees BlockModel walks."""
    from sklearn.ensemble import GradientBoostingClassifier

    gb = GradientBoostingClassifier(
        n_estimators=N_TREES, max_depth=DEPTH, learning_rate=LEARNING_RATE, subsample=0.8, random_state=0
    ).fit(x, y)
    inner = 2**DEPTH - 1
    feature = np.zeros((N_TREES, inner), np.intp)
    split = np.full((N_TREES, inner), np.inf)
    value = np.zeros((N_TREES, inner + 1))
    for i, est in enumerate(gb.estimators_):
        _to_heap(est[0].tree_, 0, 0, 0, feature[i], split[i], value[i])
    value *= LEARNING_RATE
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


def sources() -> dict[str, list[tuple[np.ndarray, np.ndarray]]]:
    """(features, labels) per page of each labelled set; unlabelled blocks (-1) removed."""
    from pretrain.curate.extract_eval import aeb_pages, trafilatura_pages

    out = {
        "readability": [page_matrix(h, t)[:2] for _, h, t in readability_pages()],
        "aeb": [page_matrix(h, t)[:2] for _, h, t in aeb_pages(DATA / "html" / "scrapinghub-aeb")],
        "trafilatura-eval": [
            snippet_matrix(h, k, d)[:2]
            for _, h, k, d in trafilatura_pages(DATA / "html" / "trafilatura-eval")
        ],
    }
    return {name: [(x[y >= 0], y[y >= 0]) for x, y in pages] for name, pages in out.items()}


def fit_on(data: dict, names: list[str], threshold: float) -> BlockModel:
    pages = [p for n in names for p in data[n] if len(p[1])]
    return fit(np.vstack([p[0] for p in pages]), np.concatenate([p[1] for p in pages]), threshold)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=MODEL_PATH)
    ap.add_argument("--threshold", type=float, default=0.5, help="keep probability")
    args = ap.parse_args()
    data = sources()
    for n, pages in data.items():
        print(
            f"{n}: {len(pages)} pages, {sum(len(p[1]) for p in pages)} labelled blocks, "
            f"{int(sum(p[1].sum() for p in pages))} keep"
        )
    # Cross-fitting: the model reported on a benchmark never saw that benchmark's pages.
    folds = {
        "all": ["readability", "aeb", "trafilatura-eval"],
        "without_aeb": ["readability", "trafilatura-eval"],
        "without_trafilatura_eval": ["readability", "aeb"],
    }
    models = {k: fit_on(data, names, args.threshold) for k, names in folds.items()}
    doc = {
        "features": list(FEATURES),
        "info": {
            "trained_on": folds,
            "trees": N_TREES,
            "depth": DEPTH,
            "learning_rate": LEARNING_RATE,
            "keep_share": KEEP_SHARE,
            "script": "scripts/train_extract_blocks.py",
        },
        "model": models["all"].to_dict(),
        "folds": {k: m.to_dict() for k, m in models.items() if k != "all"},
    }
    args.out.write_text(json.dumps(doc, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"-> {args.out} ({args.out.stat().st_size / 1e3:.0f} kB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
