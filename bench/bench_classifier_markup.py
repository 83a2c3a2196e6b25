"""Benchmark: what `pretrain classifier score` counted as words on WARC input, before and after it
extracted the main text (session 13).

The classifier commands scored a WARC response's raw HTML: tags, attributes and scripts voted as
words. They now run the belt's extract step first, as `pretrain curate` does before its
classifier step. On dolma's two real WARC samples (../shared/data/warc/dolma, 37 pages), with a
model trained on WikiText-2 valid (good) against Tiny Shakespeare (bad), this prints per file the
words scored on the raw markup (the previous code) and on the main text (now), their ratio, and
the pages that lean good either way.

    PRETRAIN_SHARED_DATA=/work/shared/data PYTHONPATH=src .venv/bin/python bench/bench_classifier_markup.py
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path

from pretrain.curate.classifier import NaiveBayes
from pretrain.curate.classifier_inputs import Skipped, documents
from pretrain.curate.language import words
from pretrain.curate.readers import ReaderConfig, read_documents

# PRETRAIN_SHARED_DATA: where ../shared/data is when the checkout sits elsewhere (a git worktree)
DATA = Path(os.environ.get("PRETRAIN_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")


def main() -> int:
    if not DATA.is_dir():
        print(f"real data not found at {DATA}", file=sys.stderr)
        return 1
    good = (DATA / "lm/wikitext-2/valid.txt").read_text().split("\n \n")
    bad = (DATA / "lm/tinyshakespeare/input.txt").read_text().split("\n\n")
    model = NaiveBayes.train(good, bad)
    for warc in sorted((DATA / "warc/dolma").glob("sample-*.warc.gz")):
        raw = list(read_documents(warc, ReaderConfig(), lambda *a: None))  # the previous code's input
        text = list(documents([(str(warc), warc.name)], ReaderConfig(), Skipped(), Counter()))
        n_raw, n_text = (sum(len(words(d.text)) for d in docs) for docs in (raw, text))
        lean = [sum(model.score(d.text) > 0 for d in docs) for docs in (raw, text)]
        print(f"{warc.name}: {len(raw)} pages; words scored: raw markup {n_raw:,}, main text {n_text:,} "
              f"({n_raw / max(n_text, 1):.1f}x); lean good: {lean[0]} raw, {lean[1]} main text "
              f"({len(text)} pages with text)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
