"""Learn the rescue trees of the `blocks` extractor (writes src/pretrain/data/extract_blocks_rescue.json).

The rescue trees decide whole-page blocks that resiliparse's main content does not have
(curate/extract_rescue.py). They learn from the same pages and labels as the `blocks` model
(scripts/train_extract_blocks.py: Readability and AEB against their true article, trafilatura-eval
by its snippets, its other blocks weakly by trafilatura's own output), on the candidate blocks of
every page: whole-page blocks within SPAN blocks of the main content and not in it. Three fits as
there: one on every set and the two cross-fitted ones, so each benchmark is reported by trees that
never saw it. The keep threshold is 0.7: chosen on the benchmarks' out-of-fold results
(bench/bench_extract_render.py: 0.7 and 0.8 keep the drop share within one snippet; 0.5-0.6 lose
drop), not on separate pages; say so when quoting its numbers. Deterministic (random_state=0).

    PYTHONPATH=src .venv/bin/python scripts/train_extract_rescue.py [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_extract_blocks as tb  # noqa: E402

from pretrain.curate.extract_blocks import blocks, render  # noqa: E402
from pretrain.curate.extract_eval import aeb_pages, tokens, trafilatura_pages  # noqa: E402
from pretrain.curate.extract_rescue import RESCUE_FEATURES, RESCUE_PATH, SPAN, candidates, whole_page  # noqa: E402

THRESHOLD = 0.7


def labels(bs, truth: str | None = None, keep=(), drop=(), weak: str | None = None) -> np.ndarray:
    """As train_extract_blocks.page_matrix (truth given) or snippet_matrix (snippets + weak text)."""
    if truth is not None:
        have = Counter(tokens(truth))
    else:
        keep_n, drop_n = [tb._norm(s) for s in keep], [tb._norm(s) for s in drop]
        have = Counter(tokens(weak or ""))
    y = []
    for b in bs:
        label = -1
        if truth is None:
            t = tb._norm(b.text)
            hit = lambda ss, t=t: any(s and (s in t or (len(t) > 20 and t in s)) for s in ss)  # noqa: E731
            label = 0 if hit(drop_n) else 1 if hit(keep_n) else -1
        if label < 0:
            ts = tokens(b.text)
            label = int(bool(ts) and sum(w in have for w in ts) / len(ts) >= tb.KEEP_SHARE)
        y.append(label)
    return np.array(y, int)


def page(html: str, **label_args) -> tuple[np.ndarray, np.ndarray]:
    """Rescue features and labels of one page's candidates that are not main content."""
    main_bs = blocks(render(html))
    whole_bs, x, inm = candidates(whole_page(html), main_bs, SPAN)
    if not whole_bs:
        return np.zeros((0, len(RESCUE_FEATURES)), np.float32), np.zeros(0, int)
    return x[~inm], labels([b for b, m in zip(whole_bs, inm) if not m], **label_args)


def sources() -> dict[str, list[tuple[np.ndarray, np.ndarray]]]:
    data = tb.DATA / "html"
    return {
        "readability": [page(h, truth=t) for _, h, t in tb.readability_pages()],
        "aeb": [page(h, truth=t) for _, h, t in aeb_pages(data / "scrapinghub-aeb")],
        "trafilatura-eval": [
            page(h, keep=k, drop=d, weak=tb.trafilatura_text(h))
            for _, h, k, d in trafilatura_pages(data / "trafilatura-eval")
        ],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=RESCUE_PATH)
    args = ap.parse_args()
    data = sources()
    for n, pages in data.items():
        print(
            f"{n}: {len(pages)} pages, {sum(len(p[1]) for p in pages)} candidates, "
            f"{int(sum(p[1].sum() for p in pages))} keep"
        )
    folds = {
        "all": ["readability", "aeb", "trafilatura-eval"],
        "without_aeb": ["readability", "trafilatura-eval"],
        "without_trafilatura_eval": ["readability", "aeb"],
    }
    models = {k: tb.fit_on(data, names, THRESHOLD) for k, names in folds.items()}
    doc = {
        "features": list(RESCUE_FEATURES),
        "info": {
            "trained_on": folds,
            "candidates": f"whole-page blocks within {SPAN} blocks of the main content, not in it",
            "trees": tb.N_TREES,
            "depth": tb.DEPTH,
            "learning_rate": tb.LEARNING_RATE,
            "keep_share": tb.KEEP_SHARE,
            "script": "scripts/train_extract_rescue.py",
        },
        "model": models["all"].to_dict(),
        "folds": {k: m.to_dict() for k, m in models.items() if k != "all"},
    }
    tmp = args.out.with_name(args.out.name + ".tmp")
    tmp.write_text(json.dumps(doc, separators=(",", ":")) + "\n", encoding="utf-8")
    tmp.replace(args.out)
    print(f"-> {args.out} ({args.out.stat().st_size / 1e3:.0f} kB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
