"""The `blocks` extractor before and after a change: same output, and how much faster, in one run.

Loads the cutter (`blocks`) and the tree walk (`BlockModel.keep_probability`) of an earlier
revision of curate/extract_blocks.py from git (`--base`, default main before issue 19 session 9's
body columns) beside this checkout's, and that revision's shipped trees
(src/pretrain/data/extract_blocks.json), then:

1. identity: on every page of AEB, trafilatura-eval (all 679) and Mozilla's Readability pages,
   both cutters on the same resiliparse output must give the same blocks (kind, text, link chars,
   links), as must this checkout's one-parse path (`extract_body.main_blocks`: render from the
   parsed tree), and both walks on the same matrix (this checkout's `block_matrix`, body columns
   included) the same keep probabilities (max abs difference printed; it must be 0). Exit status 1
   when anything differs.
2. speed, per AEB page, CPU time of this process (time.process_time), best of `--repeat`
   alternating runs: resiliparse's pass (`render`), cutting (old, new), `features`, trees (old,
   new), and the whole extractor without the rescue (old = render + old cutter + features + the
   old trees at their threshold; new = `main_blocks` (one parse, render, cut, body columns) +
   features + trees + the core decoder), page by page and as the `extract` step runs it: batches
   of BATCH_PAGES pages, each stage over the batch, one tree walk per batch; with resiliparse's
   plain main-content extraction and trafilatura (one pass) measured in the same run as peers.
   The machine load (os.getloadavg) is printed at each step: on a shared machine the old/new
   ratios mean more than the absolute figures.
3. the whole path against `--same` (default SAME: main before session 10's speed work), bit for
   bit: that revision's extract_blocks, extract_body and extract_rescue with its model files,
   imported as another package, beside this checkout's, on every page of the three sets and the
   real crawl pages of ../shared/data/warc, in the `extract` step's batches: blocks, body columns,
   the trees' input matrix (the batch's and each page's `block_matrix`), keep probabilities, keep
   flags, the rescue's candidate matrices, texts with and without the rescue and which pages were
   rescued must be equal to the bit (exit status 1 otherwise); then the step's path (main_blocks
   per page, page_texts per batch, rescue on) old and new alternating, per set, pages/s per core,
   and this checkout's stages timed in place in the step's batches.

Run: .venv/bin/python bench/bench_blocks_speed.py [--base REV] [--same REV] [--repeat 5] [--no-identity]
     [--same-only]
"""

from __future__ import annotations

import argparse
import atexit
import gzip
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from pretrain.curate import extract_blocks as new
from pretrain.curate.extract import BATCH_PAGES, extract_text
from pretrain.curate.extract_body import main_blocks
from pretrain.curate.extract_eval import aeb_pages, crawl_records, trafilatura_pages

ROOT = Path(__file__).resolve().parents[1]
# PRETRAIN_SHARED_DATA: where ../shared/data is when the checkout sits elsewhere (a git worktree).
SHARED = Path(os.environ.get("PRETRAIN_SHARED_DATA") or ROOT.parent / "shared" / "data")
DATA = SHARED / "html"
BASE = "f00ec0e"  # main before issue 19 session 9's body columns (1f12579: before its speed work)
SAME = "fd075ff"  # main with the headline rule, before session 10's speed work: the output to match


def old_trees(rev: str) -> new.BlockModel:
    """The `blocks` trees shipped at `rev` (whatever features they were trained on)."""
    raw = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:src/pretrain/data/extract_blocks.json"],
                         capture_output=True, text=True)
    if raw.returncode != 0:
        raise SystemExit(f"git show {rev}:src/pretrain/data/extract_blocks.json failed: {raw.stderr.strip()}")
    return new.BlockModel.from_dict(json.loads(raw.stdout)["model"])


def old_module(rev: str):
    """curate/extract_blocks.py as it was at `rev`, imported under another name."""
    src = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:src/pretrain/curate/extract_blocks.py"],
        capture_output=True, text=True,
    )
    if src.returncode != 0:
        raise SystemExit(f"git show {rev}:src/pretrain/curate/extract_blocks.py failed: {src.stderr.strip()}")
    tmp = Path(tempfile.mkdtemp(prefix="old_blocks_")) / "old_extract_blocks.py"
    atexit.register(shutil.rmtree, tmp.parent, True)
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
            bs_tree, cols = main_blocks(html)
            n_blocks += len(bs_new)
            if _key(bs_old) != _key(bs_new) or _key(bs_tree) != _key(bs_new):
                differ += 1
                if differ <= 3:
                    print(f"  blocks differ on {key}")
                continue
            if bs_new:
                x = new.block_matrix(bs_new, cols, model)
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
    """CPU ms per page of each stage of the new extractor as it runs (stages timed in place, page
    after page, so that each sees the caches the others leave), the least over `repeat` passes."""
    from pretrain.curate.extract_blocks import render
    from pretrain.curate.extract_body import body_columns, parse

    model, clock = new.load_model(), time.process_time
    stages = ("parse", "render", "cut into blocks", "body columns", "features", "trees", "decoder + join")
    best: dict[str, float] = {}
    for _ in range(repeat):
        t = dict.fromkeys(stages, 0.0)
        for html in pages:
            t0 = clock()
            tree = parse(html)
            t1 = clock()
            minimal = render(tree)
            t2 = clock()
            bs = new.blocks(minimal)
            t3 = clock()
            cols = body_columns(tree, bs)
            t4 = clock()
            if bs:
                x = new.block_matrix(bs, cols, model)
                t5 = clock()
                p = model.keep_probability(x)
                t6 = clock()
                keep = new.core_flags(p, np.array([len(b.text) for b in bs]), model.threshold)
                "\n".join(b.text for b, k in zip(bs, keep) if k)
                t["features"] += t5 - t4
                t["trees"] += t6 - t5
                t["decoder + join"] += clock() - t6
            for k, a, b in zip(stages[:4], (t0, t1, t2, t3), (t1, t2, t3, t4)):
                t[k] += b - a
        best = {k: min(v, best.get(k, v)) for k, v in t.items()}
    return {k: 1e3 * v / len(pages) for k, v in best.items()}


def speed(old, pages: list[str], repeat: int, base_model: new.BlockModel) -> None:
    model = new.load_model()
    rendered = [new.render(h) for h in pages]
    mains = [main_blocks(h) for h in pages]
    feats = [new.block_matrix(bs, c, model) for bs, c in mains if bs]

    def old_texts(pages_bs: list) -> list[str]:  # the old extractor: features + its trees at 0.5
        m = base_model
        rows = [new.features(bs, m.words.score(bs) if m.words else None) for bs in pages_bs if bs]
        keep = (old.BlockModel.keep_probability(m, np.concatenate(rows)) >= m.threshold) if rows else []
        out, at = [], 0
        for bs in pages_bs:
            out.append("\n".join(b.text for b, k in zip(bs, keep[at : at + len(bs)]) if k))
            at += len(bs)
        return out

    def old_extract(html: str) -> str:
        return old_texts([old.blocks(new.render(html))])[0]

    def new_extract(html: str) -> str:
        bs, cols = main_blocks(html)
        return new.kept_texts([bs], model, [cols])[0]

    def old_batch(batch: list[str]) -> list[str]:
        return old_texts([old.blocks(new.render(h)) for h in batch])

    def batch_extract(batch: list[str]) -> list[str]:  # as the `extract` step runs it (no rescue)
        got = [main_blocks(h) for h in batch]
        return new.kept_texts([bs for bs, _ in got], model, [c for _, c in got])

    batches = [pages[i : i + BATCH_PAGES] for i in range(0, len(pages), BATCH_PAGES)]
    pairs = {  # stage: (old, new, items, pages per item); old and new alternate, best of `repeat` each
        "cut into blocks": (old.blocks, new.blocks, rendered, 1),
        "trees": (lambda x: old.BlockModel.keep_probability(model, x), model.keep_probability, feats, 1),
        "whole extractor": (old_extract, new_extract, pages, 1),
        f"... batches of {BATCH_PAGES}": (old_batch, batch_extract, batches, BATCH_PAGES),
    }
    res: dict[str, list[float]] = {k: [float("inf"), float("inf")] for k in pairs}
    for _ in range(repeat):
        for stage, (f_old, f_new, items, per) in pairs.items():
            res[stage][0] = min(res[stage][0], best_ms(f_old, items, 1) / per)
            res[stage][1] = min(res[stage][1], best_ms(f_new, items, 1) / per)
    print(f"\nspeed per AEB page ({len(pages)} pages), CPU ms of one process, "
          f"best of {repeat} alternating runs; load {os.getloadavg()[0]:.1f}")
    print("  stage by stage, in place (new): " + ", ".join(
        f"{k} {v:.3f}" for k, v in profile(pages, repeat).items()))
    for stage, (o, n) in res.items():
        print(f"  {stage:<17} old {o:.3f}  new {n:.3f}  ({o / n:.2f}x)")
    o, n = res["whole extractor"]
    ob, nb = res[f"... batches of {BATCH_PAGES}"]
    print(f"  blocks pages/s/core: old {1e3 / o:.0f}, new {1e3 / n:.0f}; in batches old {1e3 / ob:.0f}, "
          f"new {1e3 / nb:.0f}")
    res_ms = best_ms(lambda h: extract_text(h, "resiliparse"), pages, repeat)
    tra_ms = best_ms(lambda h: extract_text(h, "trafilatura"), pages, 1)
    print(f"  peers, same run: resiliparse {1e3 / res_ms:.0f} pages/s/core, trafilatura {1e3 / tra_ms:.0f} "
          f"(one pass); blocks new / trafilatura {tra_ms / n:.1f}x; load {os.getloadavg()[0]:.1f}")


_SAME_FILES = ("curate/extract_blocks.py", "curate/extract_body.py", "curate/extract_rescue.py",
               "data/extract_blocks.json", "data/extract_blocks_rescue.json")


def package_at(rev: str) -> SimpleNamespace:
    """extract_blocks, extract_body and extract_rescue as they were at `rev`, with that revision's
    model files, imported as the package `pretrain_at_rev` (their imports of each other rewritten;
    the rest of `pretrain` is this checkout's)."""
    root = Path(tempfile.mkdtemp(prefix="pretrain_at_rev_"))
    atexit.register(shutil.rmtree, root, True)  # (its model files are read lazily: removed at exit)
    for rel in _SAME_FILES:
        got = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:src/pretrain/{rel}"],
                             capture_output=True)
        if got.returncode != 0:
            raise SystemExit(f"git show {rev}:src/pretrain/{rel} failed: {got.stderr.decode().strip()}")
        text = got.stdout.decode("utf-8")
        for mod in ("extract_blocks", "extract_body", "extract_rescue"):
            text = text.replace(f"pretrain.curate.{mod}", f"pretrain_at_rev.curate.{mod}")
        (root / "pretrain_at_rev" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "pretrain_at_rev" / rel).write_text(text, encoding="utf-8")
    for init in ("pretrain_at_rev/__init__.py", "pretrain_at_rev/curate/__init__.py"):
        (root / init).write_text("", encoding="utf-8")
    sys.path.insert(0, str(root))
    return SimpleNamespace(**{m: importlib.import_module(f"pretrain_at_rev.curate.{m}")
                              for m in ("extract_blocks", "extract_body", "extract_rescue")})


def _this() -> SimpleNamespace:
    """This checkout's three modules, as package_at gives a revision's."""
    return SimpleNamespace(**{m: importlib.import_module(f"pretrain.curate.{m}")
                              for m in ("extract_blocks", "extract_body", "extract_rescue")})


def _step_batch(pkg: SimpleNamespace, batch: list[str], gate: int, rescued: list[int] | None = None):
    """What the `extract` step does with a batch: main_blocks per page (since session 10 main_page,
    keeping the tree of a page whose main content is short for the rescue), then page_texts."""
    body, rescue = pkg.extract_body, pkg.extract_rescue
    if not hasattr(body, "main_page"):
        mains = [body.main_blocks(h) for h in batch]
        return rescue.page_texts(batch, [bs for bs, _ in mains], min_main_chars=gate, rescued=rescued,
                                 cols=[c for _, c in mains])
    mains, cols, trees = [], [], []
    for h in batch:  # (a tree not kept is freed at once, as in the step)
        tree, bs, c = body.main_page(h)
        mains.append(bs)
        cols.append(c)
        trees.append(tree if sum(len(b.text) for b in bs) < gate else None)
    return rescue.page_texts(batch, mains, min_main_chars=gate, rescued=rescued, cols=cols, trees=trees)


def _batch_outputs(pkg: SimpleNamespace, batch: list[str], matrix) -> dict[str, list]:
    """Everything the two revisions must agree on for one batch, as comparable values per page."""
    eb, rescue = pkg.extract_blocks, pkg.extract_rescue
    model = eb.load_model()
    mains = [pkg.extract_body.main_blocks(h) for h in batch]
    pages, cols = [bs for bs, _ in mains], [c for _, c in mains]
    x = matrix(pages, cols, model)
    p = model.keep_probability(x) if len(x) else np.zeros(0)
    sizes = np.cumsum([0] + [len(bs) for bs in pages])
    out: dict[str, list] = {"blocks": [_key(bs) for bs in pages], "body columns": [c.tobytes() for c in cols],
                            "matrix": [], "page matrix": [], "probabilities": [], "rescue matrix": []}
    for i, (bs, c) in enumerate(zip(pages, cols)):
        out["matrix"].append(x[sizes[i] : sizes[i + 1]].tobytes())
        out["page matrix"].append(eb.block_matrix(bs, c, model).tobytes() if bs else b"")
        out["probabilities"].append(p[sizes[i] : sizes[i + 1]].tobytes())
        short = sum(len(b.text) for b in bs) < eb.MIN_MAIN_CHARS
        cand = rescue.candidates(rescue.whole_page(batch[i]), bs, words=model.words) if short else None
        out["rescue matrix"].append(cand[1].tobytes() if cand else b"")
    out["flags"] = eb.keep_flags(pages, model, cols)
    rescued: list[int] = []
    out["texts"] = _step_batch(pkg, batch, eb.MIN_MAIN_CHARS, rescued)
    out["rescued"] = [i in rescued for i in range(len(batch))]
    out["texts, no rescue"] = _step_batch(pkg, batch, 0)
    return out


def same_check(pkg: SimpleNamespace, sets: dict[str, list[tuple[str, str]]]) -> bool:
    """This checkout against `pkg` on every page, batch by batch; prints what differs."""
    this = _this()

    def old_matrix(pages, cols, model):  # the old keep_flags' input: each page's block_matrix, stacked
        rows = [pkg.extract_blocks.block_matrix(bs, c, model) for bs, c in zip(pages, cols) if bs]
        return np.concatenate(rows) if rows else np.zeros((0, len(new.BLOCK_FEATURES)), np.float32)

    new_matrix = getattr(new, "batch_matrix", old_matrix)
    ok, what = True, ("blocks", "body columns", "matrix", "page matrix", "probabilities", "flags",
                      "rescue matrix", "texts", "rescued", "texts, no rescue")
    print(f"{'set':<18}{'pages':>6}{'rescued':>8}  pages differing in " + ", ".join(what))
    for name, pages in sets.items():
        htmls = [h for _, h in pages]
        differ, n_rescued = dict.fromkeys(what, 0), 0
        for i in range(0, len(htmls), BATCH_PAGES):
            batch = htmls[i : i + BATCH_PAGES]
            a, b = _batch_outputs(pkg, batch, old_matrix), _batch_outputs(this, batch, new_matrix)
            n_rescued += sum(b["rescued"])
            for k in what:
                bad = [j for j, (u, v) in enumerate(zip(a[k], b[k], strict=True)) if u != v]
                differ[k] += len(bad)
                if bad and differ[k] == len(bad):
                    print(f"  {name}: {k} differ on {pages[i + bad[0]][0]}")
        ok = ok and not any(differ.values())
        print(f"{name:<18}{len(htmls):>6}{n_rescued:>8}  " + ", ".join(str(differ[k]) for k in what))
    return ok


def batch_profile(htmls: list[str], repeat: int) -> dict[str, float]:
    """CPU ms per page of each stage of this checkout's step path, timed in place batch by batch
    (per page: parse, render, cut, the container selector, the rest of the body columns; per batch:
    word scores, features, the trees, the decoder and join, the rescue), the least over `repeat`."""
    from pretrain.curate.extract_body import BODY_SELECTOR, body_columns, parse
    from pretrain.curate.extract_rescue import page_texts

    model, clock, gate = new.load_model(), time.process_time, new.MIN_MAIN_CHARS
    best: dict[str, float] = {}
    for _ in range(repeat):
        t: dict[str, float] = {}
        for i in range(0, len(htmls), BATCH_PAGES):
            batch, mains, cols, trees = htmls[i : i + BATCH_PAGES], [], [], []
            for h in batch:
                t0 = clock()
                tree = parse(h)
                t1 = clock()
                minimal = new.render(tree)
                t2 = clock()
                bs = new.blocks(minimal)
                t3 = clock()
                if bs and tree.document is not None:
                    tree.document.query_selector(BODY_SELECTOR)
                t4 = clock()
                c = body_columns(tree, bs)  # (the selector again, subtracted below)
                t5 = clock()
                mains.append(bs)
                cols.append(c)
                trees.append(tree if sum(len(b.text) for b in bs) < gate else None)
                for k, v in (("parse", t1 - t0), ("render", t2 - t1), ("cut", t3 - t2), ("selector", t4 - t3),
                             ("body columns' rest", t5 - t4 - (t4 - t3))):
                    t[k] = t.get(k, 0.0) + v
            t0 = clock()
            flat = [b for bs in mains for b in bs]
            ws = model.words.score(flat)
            t1 = clock()
            x = np.hstack([new.batch_features(mains, ws), np.concatenate(cols)])
            t2 = clock()
            p = model.keep_probability(x)
            t3 = clock()
            first = np.cumsum([0] + [len(bs) for bs in mains[:-1]])
            keep = new.core_flags(p, np.array([len(b.text) for b in flat]), model.threshold, first)
            "\n".join(b.text for b, k in zip(flat, keep) if k)
            t4 = clock()
            page_texts(batch, mains, model, cols=cols, trees=trees)
            t5 = clock()
            page_texts(batch, mains, model, cols=cols, min_main_chars=0)
            t6 = clock()
            for k, v in (("word scores", t1 - t0), ("features", t2 - t1), ("trees", t3 - t2),
                         ("decoder + join", t4 - t3), ("rescue", (t5 - t4) - (t6 - t5))):
                t[k] = t.get(k, 0.0) + v
        best = {k: min(v, best.get(k, v)) for k, v in t.items()}
    return {k: 1e3 * v / len(htmls) for k, v in best.items()}


def step_speed(pkg: SimpleNamespace, sets: dict[str, list[str]], repeat: int) -> None:
    """The `extract` step's path (rescue on), old and new alternating, best of `repeat`, per set."""
    this = _this()
    gate = new.MIN_MAIN_CHARS
    print(f"\nthe extract step's batches of {BATCH_PAGES} (rescue on), CPU ms per page, best of {repeat} "
          f"alternating runs; old = --same; load {os.getloadavg()[0]:.1f}")
    for name, htmls in sets.items():
        batches = [htmls[i : i + BATCH_PAGES] for i in range(0, len(htmls), BATCH_PAGES)]
        o = n = float("inf")
        for _ in range(repeat):
            o = min(o, best_ms(lambda b: _step_batch(pkg, b, gate), batches, 1) * len(batches) / len(htmls))
            n = min(n, best_ms(lambda b: _step_batch(this, b, gate), batches, 1) * len(batches) / len(htmls))
        print(f"  {name:<17} old {o:.3f}  new {n:.3f}  ({o / n:.2f}x)   pages/s/core: old {1e3 / o:.0f}, "
              f"new {1e3 / n:.0f}   load {os.getloadavg()[0]:.1f}")
        print("    stage by stage, in place (new): " + ", ".join(
            f"{k} {v:.3f}" for k, v in batch_profile(htmls, repeat).items()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default=BASE, help=f"git revision of the old extractor (default {BASE})")
    ap.add_argument("--repeat", type=int, default=5, help="timed passes per stage (old and new alternate)")
    ap.add_argument("--same", default=SAME, help=f"git revision whose output must be matched bit for bit "
                    f"(default {SAME})")
    ap.add_argument("--no-identity", action="store_true", help="skip the identity checks (speed only)")
    ap.add_argument("--same-only", action="store_true", help="only the comparison with --same")
    args = ap.parse_args()
    if not DATA.is_dir():
        print(f"no data at {DATA}; nothing to measure")
        return 0
    sets = all_pages()
    ok = True
    if not args.same_only:
        old = old_module(args.base)
        print(f"old: {args.base}   new: this checkout   load {os.getloadavg()[0]:.1f}")
        ok = args.no_identity or identity(old, sets)
        speed(old, [h for _, h in sets["AEB"]], args.repeat, old_trees(args.base))
    pkg = package_at(args.same)
    sets["real crawl"] = [(f"{rel}#{d.id}", d.text) for rel, d in crawl_records(SHARED / "warc")]
    print(f"\nsame output as {args.same}, bit for bit, in the step's batches of {BATCH_PAGES}; "
          f"load {os.getloadavg()[0]:.1f}")
    ok = (args.no_identity or same_check(pkg, sets)) and ok
    step_speed(pkg, {k: [h for _, h in v] for k, v in sets.items() if k != "Readability"}, args.repeat)
    if not ok:
        print("OUTPUT DIFFERS")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
