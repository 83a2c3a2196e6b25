"""Benchmark: Gopher repetition's word path on a cold chunk cache, this checkout against a git revision.

In the belt every worker starts with an empty chunk cache, so the first pages a worker sees pay
the spaCy-style splitter for every chunk it has not met (`bench_belt.py` times exactly that: its
warm-up is three tiny pages). This bench isolates that cost. Texts: the article bodies of the AEB
benchmark (../shared/data/html/scrapinghub-aeb, what `blocks` keeps of those pages) and the
paragraphs of WikiText-2's test split, cut into page-sized documents. Each side runs in a fresh
process whose `pretrain` comes from this checkout or from `--base`'s `src/` (`git archive`); the
sides take turns `--repeat` times and each keeps its least CPU. Per side, CPU ms per page:

- split, cold: `spacy_words` of every text with a fresh tokenizer (warmed on one sentence),
- split, warm: the same texts again (every chunk cached),
- words + rule, cold: `GopherRepetitionFilter.keep` on fresh documents with a fresh tokenizer and
  word-info table (the split, the word ids and lengths, the n-gram rules),
- n-gram rules: `ngram_verdict` alone on words already split.

It also checks that both sides give the same tokens (a digest of all of them) and the same verdict
on every document, and exits 1 otherwise.

Run: .venv/bin/python bench/bench_rules_cold.py [--base main] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_belt_ab import run_worker  # noqa: E402  (a fresh worker process)
from srctree import export_src  # noqa: E402  (a revision's src/)

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("PRETRAIN_SHARED_DATA") or ROOT.parent / "shared" / "data")
PAGE_CHARS = 4000  # WikiText is cut into documents of about this many characters (AEB: 4,437)


def texts() -> list[str]:
    aeb = json.loads((SHARED / "html" / "scrapinghub-aeb" / "ground-truth.json").read_text(encoding="utf-8"))
    out = [v["articleBody"] for _, v in sorted(aeb.items()) if v.get("articleBody")]
    page: list[str] = []
    for line in (SHARED / "lm" / "wikitext-2" / "test.txt").read_text(encoding="utf-8").splitlines():
        if line.strip():
            page.append(line.strip())
        if sum(map(len, page)) >= PAGE_CHARS:
            out.append("\n".join(page))
            page = []
    return out


def worker(path: str) -> dict:
    """One measurement in this fresh process (its `pretrain` is the side's)."""
    import hashlib
    import time

    from pretrain.curate import rules, words
    from pretrain.curate.document import Document
    from pretrain.curate.ngrams import ngram_verdict

    docs = json.loads(Path(path).read_text(encoding="utf-8"))
    n = len(docs)
    cfg = rules.RulesConfig()
    top = {int(k): float(t) for k, t in cfg.top_n_grams}
    dup = {int(k): float(t) for k, t in cfg.dup_n_grams}
    warm_up = "The river runs past the old mill, and the miller keeps a ledger."

    def fresh() -> None:
        words._TOKENIZER = None
        words.spacy_words(warm_up)
        rules._WORD_INFO.clear()

    out = {}
    fresh()
    t0 = time.process_time()
    split = [words.spacy_words(t) for t in docs]
    out["split, cold"] = time.process_time() - t0
    t0 = time.process_time()
    for t in docs:
        words.spacy_words(t)
    out["split, warm"] = time.process_time() - t0
    digest = hashlib.sha256("\x00".join("\x01".join(w) for w in split).encode("utf-8", "surrogatepass"))
    fresh()
    step = rules.GopherRepetitionFilter(cfg)
    fresh_docs = [Document(id=str(i), text=t) for i, t in enumerate(docs)]
    t0 = time.process_time()
    verdicts = [step.keep(d) for d in fresh_docs]
    out["words + rule, cold"] = time.process_time() - t0
    ws = [rules.Words(w) for w in split]
    args = [(w.ids, w.counts, w.lens, len(t)) for w, t in zip(ws, docs) if len(w.words) >= 2]
    t0 = time.process_time()
    for ids, counts, lens, chars in args:
        ngram_verdict(ids, counts, lens, chars, top, dup)
    out["n-gram rules"] = time.process_time() - t0
    return {"ms": {k: 1e3 * v / n for k, v in out.items()}, "tokens": digest.hexdigest(),
            "verdicts": [str(v) for v in verdicts]}


def run_side(src: Path, data: Path) -> dict:
    return run_worker(src, [__file__, "--worker", str(data)])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="main", help="the git revision to compare with (default: main)")
    ap.add_argument("--repeat", type=int, default=5, help="runs per side, in turns; the least CPU is kept")
    ap.add_argument("--worker", help=argparse.SUPPRESS)  # internal: one measurement
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker)))
        return 0
    if not (SHARED / "html" / "scrapinghub-aeb").is_dir() or not (SHARED / "lm" / "wikitext-2").is_dir():
        print(f"no data at {SHARED} (html/scrapinghub-aeb, lm/wikitext-2); nothing to measure")
        return 0
    docs = texts()
    with tempfile.TemporaryDirectory(prefix="bench_rules_cold_") as tmp:
        base_src = export_src(args.base, Path(tmp))
        data = Path(tmp) / "texts.json"
        data.write_text(json.dumps(docs), encoding="utf-8")
        sides = {args.base: base_src, "this checkout": ROOT / "src"}
        best: dict[str, dict] = {}
        results: dict[str, dict] = {}
        for _ in range(args.repeat):
            for name, src in sides.items():
                r = results[name] = run_side(src, data)
                b = best.setdefault(name, dict(r["ms"]))
                for k, v in r["ms"].items():
                    b[k] = min(b[k], v)
    chars = sum(map(len, docs)) // len(docs)
    print(f"{len(docs)} documents (AEB article bodies and WikiText-2 pages), {chars} characters on average; "
          f"CPU ms per document, best of {args.repeat}; load {os.getloadavg()[0]:.1f}")
    keys = list(best[args.base])
    print(f"{'':<16}" + "".join(f"{k:>22}" for k in keys))
    for name in sides:
        print(f"{name:<16}" + "".join(f"{best[name][k]:>22.4f}" for k in keys))
    ratios = (best[args.base][k] / best["this checkout"][k] for k in keys)
    print(f"{'ratio':<16}" + "".join(f"{r:>21.2f}x" for r in ratios))
    base, new = results[args.base], results["this checkout"]
    same_tokens = base["tokens"] == new["tokens"]
    differ = sum(a != b for a, b in zip(base["verdicts"], new["verdicts"]))
    print(f"same tokens: {same_tokens}; documents whose verdict differs: {differ} of {len(docs)}")
    return 0 if same_tokens and not differ else 1


if __name__ == "__main__":
    raise SystemExit(main())
