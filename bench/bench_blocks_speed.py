"""The `blocks` extractor before and after a change: same output, and how much faster, in one run.

Loads the cutter (`blocks`) and the tree walk (`BlockModel.keep_probability`) of an earlier
revision of curate/extract_blocks.py from git (`--base`, default the commit before issue 19's
speed work) beside this checkout's, then:

1. identity: on every page of AEB, trafilatura-eval (all 679) and Mozilla's Readability pages,
   both cutters on the same resiliparse output must give the same blocks (kind, text, link chars,
   links), and both walks on the same feature matrix (this checkout's `features()`) the same keep
   probabilities (max abs difference printed; it must be 0). Exit status 1 when anything differs.
2. speed, per AEB page, CPU time of this process (time.process_time), best of `--repeat`
   alternating runs: resiliparse's pass (`render`), cutting (old, new), `features`, trees (old,
   new), and the whole extractor (old = render + old cutter + features + old walk, new =
   `extract_blocks_text`, and new as the `extract` step runs it: batches of BATCH_PAGES pages, each
   stage over the batch, one tree walk per batch), with resiliparse's plain main-content
   extraction and trafilatura (one pass) measured in the same run as peers. The machine load
   (os.getloadavg) is printed at each step: on a shared machine the old/new ratios mean more than
   the absolute figures.

Run: .venv/bin/python bench/bench_blocks_speed.py [--base REV] [--repeat 5] [--no-identity]
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from pretrain.curate import extract_blocks as new
from pretrain.curate.extract import BATCH_PAGES, extract_text
from pretrain.curate.extract_eval import aeb_pages, trafilatura_pages

ROOT = Path(__file__).resolve().parents[1]
# PRETRAIN_SHARED_DATA: where ../shared/data is when the checkout sits elsewhere (a git worktree).
SHARED = Path(os.environ.get("PRETRAIN_SHARED_DATA") or ROOT.parent / "shared" / "data")
DATA = SHARED / "html"
BASE = "1f12579"  # main before issue 19's speed work on `blocks`


def old_module(rev: str):
    """curate/extract_blocks.py as it was at `rev`, imported under another name."""
    src = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:src/pretrain/curate/extract_blocks.py"],
        capture_output=True, text=True,
    )
    if src.returncode != 0:
        raise SystemExit(f"git show {rev}:src/pretrain/curate/extract_blocks.py failed: {src.stderr.strip()}")
    tmp = Path(tempfile.mkdtemp(prefix="old_blocks_")) / "old_extract_blocks.py"
    tmp.write_text(src.stdout, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("old_extract_blocks", tmp)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def readability_pages() -> list[tuple[str, str]]:
    out = []
    for f in sorted((DATA / "mozilla-readability").glob("*.jsonl.gz")):
        with gzip.open(f, "rt", encoding="utf-8") as fh:
            out += [(f"readability/{d['name']}", d["source_html"]) for d in map(json.loads, fh)]
    return out


def all_pages() -> dict[str, list[tuple[str, str]]]:
    return {
        "AEB": [(k, h) for k, h, _ in aeb_pages(DATA / "scrapinghub-aeb")],
        "trafilatura-eval": [
            (k, h) for k, h, _, _ in trafilatura_pages(DATA / "trafilatura-eval", subset=False)
        ],
        "Readability": readability_pages(),
    }


def _key(bs) -> list[tuple]:
    return [(b.kind, b.text, b.link_chars, b.links) for b in bs]


def identity(old, sets: dict[str, list[tuple[str, str]]]) -> bool:
    """Old and new cutter and walk on every page; prints what differs."""
    model, ok = new.load_model(), True
    print(f"{'set':<18}{'pages':>6}{'blocks':>8}{'pages differing':>17}{'max |p_old - p_new|':>21}")
    for name, pages in sets.items():
        n_blocks = differ = 0
        worst = 0.0
        for key, html in pages:
            minimal = new.render(html)
            bs_old, bs_new = old.blocks(minimal), new.blocks(minimal)
            n_blocks += len(bs_new)
            if _key(bs_old) != _key(bs_new):
                differ += 1
                if differ <= 3:
                    print(f"  blocks differ on {key}")
                continue
            if bs_new:
                x = new.features(bs_new)
                p_old, p_new = old.BlockModel.keep_probability(model, x), model.keep_probability(x)
                worst = max(worst, float(np.abs(p_old - p_new).max()))
        ok = ok and differ == 0 and worst == 0.0
        print(f"{name:<18}{len(pages):>6}{n_blocks:>8}{differ:>17}{worst:>21.3g}")
    return ok


def best_ms(fn, items: list, repeat: int) -> float:
    """Least CPU ms per item over `repeat` passes."""
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        for it in items:
            fn(it)
        best = min(best, time.process_time() - t)
    return 1e3 * best / len(items)


def profile(pages: list[str], repeat: int) -> dict[str, float]:
    """CPU ms per page of each stage of `extract_blocks_text` as it runs (stages timed in place,
    page after page, so that each sees the caches the others leave), the least over `repeat` passes."""
    model, clock = new.load_model(), time.process_time
    best: dict[str, float] = {}
    for _ in range(repeat):
        t = dict.fromkeys(("render", "cut into blocks", "features", "trees", "join"), 0.0)
        for html in pages:
            t0 = clock()
            minimal = new.render(html)
            t1 = clock()
            bs = new.blocks(minimal)
            t2 = clock()
            if bs:
                x = new.features(bs)
                t3 = clock()
                keep = model.keep_probability(x) >= model.threshold
                t4 = clock()
                "\n".join(b.text for b, k in zip(bs, keep) if k)
                t["features"] += t3 - t2
                t["trees"] += t4 - t3
                t["join"] += clock() - t4
            t["render"] += t1 - t0
            t["cut into blocks"] += t2 - t1
        best = {k: min(v, best.get(k, v)) for k, v in t.items()}
    return {k: 1e3 * v / len(pages) for k, v in best.items()}


def speed(old, pages: list[str], repeat: int) -> None:
    model = new.load_model()
    rendered = [new.render(h) for h in pages]
    cut = [new.blocks(r) for r in rendered]
    feats = [new.features(b) for b in cut if b]

    def old_extract(html: str) -> str:
        bs = old.blocks(new.render(html))
        if not bs:
            return ""
        keep = old.BlockModel.keep_probability(model, new.features(bs)) >= model.threshold
        return "\n".join(b.text for b, k in zip(bs, keep) if k)

    def batch_extract(batch: list[str]) -> list[str]:  # as the `extract` step runs it
        return new.kept_texts([new.blocks(new.render(h)) for h in batch], model)

    batches = [pages[i : i + BATCH_PAGES] for i in range(0, len(pages), BATCH_PAGES)]
    pairs = {  # stage: (old, new, items, pages per item); old and new alternate, best of `repeat` each
        "cut into blocks": (old.blocks, new.blocks, rendered, 1),
        "trees": (lambda x: old.BlockModel.keep_probability(model, x), model.keep_probability, feats, 1),
        "whole extractor": (old_extract, new.extract_blocks_text, pages, 1),
        f"... batches of {BATCH_PAGES}": (old_extract, batch_extract, batches, BATCH_PAGES),
    }
    res: dict[str, list[float]] = {k: [float("inf"), float("inf")] for k in pairs}
    for _ in range(repeat):
        for stage, (f_old, f_new, items, per) in pairs.items():
            res[stage][0] = min(res[stage][0], best_ms(f_old, pages if per > 1 else items, 1))
            res[stage][1] = min(res[stage][1], best_ms(f_new, items, 1) / per)
    print(f"\nspeed per AEB page ({len(pages)} pages), CPU ms of one process, "
          f"best of {repeat} alternating runs; load {os.getloadavg()[0]:.1f}")
    print("  stage by stage, in place (new): " + ", ".join(
        f"{k} {v:.3f}" for k, v in profile(pages, repeat).items()))
    for stage, (o, n) in res.items():
        print(f"  {stage:<17} old {o:.3f}  new {n:.3f}  ({o / n:.2f}x)")
    o, n = res["whole extractor"]
    nb = res[f"... batches of {BATCH_PAGES}"][1]
    print(f"  blocks pages/s/core: old {1e3 / o:.0f}, new {1e3 / n:.0f}, new in batches {1e3 / nb:.0f}")
    res_ms = best_ms(lambda h: extract_text(h, "resiliparse"), pages, repeat)
    tra_ms = best_ms(lambda h: extract_text(h, "trafilatura"), pages, 1)
    print(f"  peers, same run: resiliparse {1e3 / res_ms:.0f} pages/s/core, trafilatura {1e3 / tra_ms:.0f} "
          f"(one pass); blocks new / trafilatura {tra_ms / n:.1f}x; load {os.getloadavg()[0]:.1f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default=BASE, help=f"git revision of the old extractor (default {BASE})")
    ap.add_argument("--repeat", type=int, default=5, help="timed passes per stage (old and new alternate)")
    ap.add_argument("--no-identity", action="store_true", help="skip the identity check (speed only)")
    args = ap.parse_args()
    if not DATA.is_dir():
        print(f"no data at {DATA}; nothing to measure")
        return 0
    old = old_module(args.base)
    print(f"old: {args.base}   new: this checkout   load {os.getloadavg()[0]:.1f}")
    sets = all_pages()
    ok = args.no_identity or identity(old, sets)
    speed(old, [h for _, h in sets["AEB"]], args.repeat)
    if not ok:
        print("OUTPUT DIFFERS")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
