"""Issue 19, session 10: how the `blocks` trees learn (sample weights, ensemble shape), judged out of fold.

The trees see the same features and labels as scripts/train_extract_blocks.py; only the fitting
changes (`Fitting`: the weight of trafilatura-eval's weak labels against gold ones, each page the
same total weight, balanced classes; the number of trees and learning rate at depth 4, so that the
extractor walks the same or fewer nodes; min_samples_leaf). For each setting the ten site-fold
models are refitted (the shipped setting too: the base of every comparison is its refit from the
same cache in the same harness; the committed fold files are printed beside it) and every AEB and
trafilatura-eval page is scored by the model that did not see its site (the training script's
`evaluate`: the shipped decoder, core_flags + headline_off, no rescue). Then the nested rule of
docs/extraction.md: for each of the 10 test folds (benchmark x site fold) the setting is chosen on
all other benchmark pages (keep >= the shipped setting's and AEB F1 >= its, then the most drop + F1)
and scored on the test fold.

Each fold's matrices (word scores from inner site folds, exactly as `train` computes them) are
computed once and kept in --work, and so is each (setting, fold)'s page scores: a rerun or a
resume after a kill refits nothing it has. The `--full SETTING` pass trains the full model and
scores the 86 labelled crawl pages through the shipped path with the rescue (crawl titles apart),
beside the shipped model.

Run: PYTHONPATH=src PRETRAIN_SHARED_DATA=../shared/data .venv/bin/python bench/bench_extract_train.py
[--work DIR] [--settings a,b] [--full SETTING]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from pretrain.curate.extract_blocks import BlockModel, WordModel, features, keep_flags
from pretrain.curate.extract_eval import site_fold, snippet_scores, token_prf

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_extract_stack as st  # noqa: E402  (the training script loader, the data folder)

SHARED = st.SHARED
BENCHES = st.BENCHES
tr = st.load_train_script()
F = tr.Fitting
SETTINGS = {  # in the order they are run; "shipped" first (the base of every comparison)
    "shipped": F(),
    "weak 0.5": F(weak=0.5),
    "per page": F(per_page=True),
    "weak 0.25": F(weak=0.25),
    "weak 2": F(weak=2.0),
    "balanced": F(balanced=True),
    "50 trees lr 0.2": F(trees=50, learning_rate=0.2),
    "min leaf 20": F(min_leaf=20),
    "min leaf 50": F(min_leaf=50),
    "weak 0.5 per page": F(weak=0.5, per_page=True),
    "100 trees lr 0.15": F(learning_rate=0.15),
    "75 trees lr 0.15": F(trees=75, learning_rate=0.15),
}


def write_atomic(path: Path, data: bytes) -> None:
    part = path.with_name(path.name + ".part")
    part.write_bytes(data)
    os.replace(part, path)


def load_pages(work: Path):
    final = work / "pages.json.gz"
    if not final.exists():  # the training script writes its cache in place: a temporary name here
        part = work / "pages.json.gz.part"
        part.unlink(missing_ok=True)
        tr.load_pages(cache=part)
        os.replace(part, final)
    return tr.load_pages(cache=final)


def fold_data(pages, bench: str, k: int, work: Path):
    """Model "bench/k"'s training matrix (as `train` builds it), the indices of its training pages and
    its word model (fitted on all of them, as `train` attaches it)."""
    path = work / f"fold-{bench}-{k}.npz"
    train_on = [i for i, p in enumerate(pages) if not (p.source == bench and site_fold(p.url) == k)]
    return fold_matrix(pages, train_on, path)


def fold_matrix(pages, train_on: list[int], path: Path):
    """The training matrix, labels and word model of the pages `train_on` (as `train` builds them), made
    once into `path` (written whole or not at all) and read from it; with `train_on` back."""
    if not path.exists():
        ps = [pages[i] for i in train_on]
        scores = tr.oof_word_scores(ps)
        x = np.vstack([np.hstack([features(p.blocks, s), p.cols])[p.y >= 0] for p, s in zip(ps, scores)])
        y = np.concatenate([p.y[p.y >= 0] for p in ps])
        wm = json.dumps(tr.fit_words(ps).to_dict()).encode()
        part = path.with_name(path.name + ".part.npz")
        np.savez(part, x=x, y=y, words=np.frombuffer(wm, np.uint8))
        os.replace(part, path)
    d = np.load(path)
    return d["x"], d["y"], train_on, WordModel.from_dict(json.loads(d["words"].tobytes()))


def page_results(pages, idx: list[int], m: BlockModel) -> dict[str, list]:
    """Each page's score (AEB: P, R, F1; trafilatura-eval: kept, keep, dropped, drop snippets)."""
    flags = keep_flags([pages[i].blocks for i in idx], m, [pages[i].cols for i in idx])
    out = {}
    for i, f in zip(idx, flags):
        p = pages[i]
        text = "\n".join(b.text for b, k in zip(p.blocks, f) if k)
        r = token_prf(text, p.truth) if p.source == "aeb" else snippet_scores(text, p.keep, p.drop)
        out[p.url + "\t" + str(i)] = [float(v) for v in r]
    return out


def run_setting(pages, name: str, how, work: Path, reverse: bool = False) -> dict[str, dict]:
    """{fold key: {page: score}} of one setting, each fold fitted once and kept in `work` (`reverse`:
    folds in the other order, for a second process sharing `work`)."""
    out = {}
    d = work / "results" / name.replace(" ", "_")
    d.mkdir(parents=True, exist_ok=True)
    order = [(b, k) for b in BENCHES for k in range(5)]
    for bench, k in reversed(order) if reverse else order:
        f = d / f"{bench}-{k}.json"
        if not f.exists():
            t = time.process_time()
            x, y, train_on, wm = fold_data(pages, bench, k, work)
            w = tr.sample_weights([pages[i] for i in train_on], how)
            m = replace(tr.fit(x, y, 0.5, w, how), words=wm)
            test = [i for i, p in enumerate(pages) if p.source == bench and site_fold(p.url) == k]
            write_atomic(f, json.dumps(page_results(pages, test, m)).encode())
            print(f"  {name}: {bench}/{k} ({time.process_time() - t:.0f} s CPU)", flush=True)
        out[f"{bench}/{k}"] = json.loads(f.read_text())
    return {f"{b}/{k}": out[f"{b}/{k}"] for b, k in order}


def aggregate(res: dict[str, dict], folds) -> dict[str, float]:
    a = np.array([r for f in folds if f.startswith("aeb") for r in res[f].values()])
    t = np.array([r for f in folds if f.startswith("traf") for r in res[f].values()])
    out = {}
    if len(a):
        out.update(zip(("P", "R", "F1"), a.mean(0)))
    if len(t):
        s = t.sum(0)
        out.update(keep=s[0] / s[1], drop=s[2] / s[3], kept=s[0], dropped=s[2])
    return out


def row(name: str, s: dict) -> str:
    cells = (f"{s.get(k, float('nan')):.4f}".rjust(7) for k in ("P", "R", "F1", "keep", "drop"))
    return f"{name:<28} " + " ".join(cells)


def paired(base: dict, other: dict) -> str:
    """AEB F1, keep and drop of `other` minus `base`, +- the standard error over pages."""
    parts = []
    a = np.array([other[f][p][2] - base[f][p][2] for f in base if f.startswith("aeb") for p in base[f]])
    parts.append(f"F1 {a.mean():+.4f} +- {a.std(ddof=1) / np.sqrt(len(a)):.4f}")
    t = [(base[f][p], other[f][p]) for f in base if f.startswith("traf") for p in base[f]]
    for name, i, n in (("keep", 0, 1), ("drop", 2, 3)):
        d = np.array([o[i] - b[i] for b, o in t])
        tot = sum(b[n] for b, _ in t)
        parts.append(f"{name} {d.sum() / tot:+.4f} +- {d.std(ddof=1) * np.sqrt(len(d)) / tot:.4f}"
                     f" (+{int((d > 0).sum())}/-{int((d < 0).sum())} pages)")
    return ", ".join(parts)


def choose(results: dict[str, dict], candidates=None, folds=None) -> tuple[dict, list[str]]:
    """The nested rule: each test fold's setting among `candidates` (default: all) chosen on the other
    folds (keep and F1 >= shipped's, then the most drop + F1); ({fold: its scores}, the names chosen)."""
    folds = folds or [f"{b}/{k}" for b in BENCHES for k in range(5)]
    base = results["shipped"]
    out, chosen = {}, []
    for test in folds:
        train = [f for f in folds if f != test]
        b = aggregate(base, train)
        best, value = "shipped", -1e9
        for name in candidates or results:
            s = aggregate(results[name], train)
            if s["keep"] < b["keep"] - 1e-12 or s["F1"] < b["F1"] - 1e-12:
                continue
            if s["drop"] + s["F1"] > value + 1e-12:
                best, value = name, s["drop"] + s["F1"]
        chosen.append(best)
        out[test] = results[best][test]
    return out, chosen


def nested(results: dict[str, dict]) -> None:
    folds = [f"{b}/{k}" for b in BENCHES for k in range(5)]
    base = results["shipped"]
    out, chosen = choose(results, folds=folds)
    chosen = [f"{test}: {c}" for test, c in zip(folds, chosen)]
    print("\nnested (each test fold's setting chosen on the other nine: keep and F1 >= shipped's, "
          "then the most drop + F1)")
    print(row("nested choice", aggregate(out, folds)))
    print("  vs shipped: " + paired(base, out))
    print("  chosen: " + "; ".join(chosen))


def full(pages, name: str, how) -> None:
    """The full model of setting `name` against the shipped one on the 86 crawl pages (shipped path,
    rescue on, titles apart)."""
    from pretrain.curate.extract_blocks import load_model
    from pretrain.curate.extract_body import main_blocks
    from pretrain.curate.extract_eval import crawl_pages, crawl_scores
    from pretrain.curate.extract_rescue import load_rescue, page_texts

    t = time.process_time()
    model = tr.train(pages, 0.5, True, how)
    print(f"full model '{name}': {time.process_time() - t:.0f} s CPU")
    titles: dict = {}
    crawl = list(crawl_pages(SHARED / "warc", titles=titles))

    def path(m, rescue):
        def extract(html, url):
            bs, cols = main_blocks(html)
            got: list[str] = []
            return page_texts([html], [bs], m, rescue, cols=[cols], titles=got)[0], got[0]
        return extract

    per_page = []
    for label, m in (("shipped", load_model()), (name, model)):
        s = crawl_scores(path(m, load_rescue()), crawl, titles)
        print(f"crawl {label:<20} keep {s['kept']:.4f} drop {s['dropped']:.4f} titles {s['title_kept']:.4f}"
              f" no-main clean {s['no_main_clean'] * s['no_main']:.0f}/{s['no_main']}")
        per_page.append([snippet_scores(path(m, load_rescue())(h, u)[0], k, d) for _, h, k, d, _, u in crawl])
    moved = sorted(range(len(crawl)), key=lambda i: -abs(per_page[1][i][0] - per_page[0][i][0]))[:5]
    for i in moved:  # where the must-keep snippets moved most
        (a, n, _, _), b = per_page[0][i], per_page[1][i][0]
        print(f"  {crawl[i][5][:60]:<60} kept {a} -> {b} of {n}")
    return model


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/pretrain-extract-train"))
    ap.add_argument("--settings", help="comma-separated names of SETTINGS (default: all, in order)")
    ap.add_argument("--full", help="also train this setting's full model and score the crawl set")
    ap.add_argument("--report", action="store_true",
                    help="fit nothing: report the settings whose ten folds are all in --work")
    ap.add_argument("--reverse", action="store_true",
                    help="folds and settings in the other order (a second process sharing --work)")
    args = ap.parse_args()
    if not (SHARED / "html").is_dir():
        print(f"no data at {SHARED}; nothing to measure")
        return 0
    args.work.mkdir(parents=True, exist_ok=True)
    pages = load_pages(args.work)
    names = args.settings.split(",") if args.settings else list(SETTINGS)
    if args.report:
        done = lambda n: len(list((args.work / "results" / n.replace(" ", "_")).glob("*-[0-4].json"))) == 10  # noqa: E731
        names = [n for n in names if done(n)]
    order = ["shipped", *[n for n in names if n != "shipped"]]
    results = {}
    for name in reversed(order) if args.reverse else order:
        results[name] = run_setting(pages, name, SETTINGS[name], args.work, args.reverse)
    results = {n: results[n] for n in order}
    folds = list(results["shipped"])
    from pretrain.curate.extract_blocks import load_model

    committed = {}  # the committed fold models (extract_blocks_folds.json.gz), scored the same way
    for f in folds:
        bench, k = f.split("/")
        test = [i for i, p in enumerate(pages) if p.source == bench and site_fold(p.url) == int(k)]
        committed[f] = page_results(pages, test, load_model(fold=f))
    head = "".join(f"{k:>8}" for k in ("AEB P", "R", "F1", "keep", "drop"))
    print(f"\n{'setting':<28}{head}   (out of fold by site, no rescue)")
    for name, res in results.items():
        print(row(name, aggregate(res, folds)) + f"   nodes/block {SETTINGS[name].trees * tr.DEPTH}")
        if name != "shipped":
            print("    vs shipped: " + paired(results["shipped"], res))
    print(row("(the committed fold files)", aggregate(committed, folds)))
    print("    vs shipped refitted: " + paired(results["shipped"], committed))
    nested(results)
    if args.full:
        full(pages, args.full, SETTINGS[args.full])
    return 0


if __name__ == "__main__":
    sys.exit(main())
