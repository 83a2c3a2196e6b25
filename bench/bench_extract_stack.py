"""Issue 19, session 9: the partial gains that each failed alone, stacked and judged together.

Three earlier tries each moved one number of the `blocks` extractor and were not shipped alone
(docs/extraction.md, "Tried ..." subsections; their code is at git tags absent from this clone, so
this script re-implements them from the docs' descriptions):

- the article body container as three tree features (session 8, the cheap selector: `itemprop=
  "articleBody"` and the five most frequent body words as case-insensitive substrings of any
  element's class or id; columns `in_body`, `body_found`, `body_share`);
- session 6's structure decoders over the block probabilities: "region" (the maximum-sum run of
  logit(p) - bias; inside it keep at p >= t_in, outside at p >= t_out; a page without a positive run
  keeps at 0.5) and "core" with 0.5 left on a page without a core block (the variant that does not
  loosen on non-article pages; session 8 measured the loosening of the other on the crawl set).

What it does (about 10-15 minutes on one core of the shared machine, most of it the 11 tree fits;
`--work DIR` keeps the rendered pages, the body columns and the retrained trees, so a rerun takes
about 1.2 minutes of CPU; delete it after changing the cutting, the labels or the columns):

1. retrains the ten site-fold models and the full model of scripts/train_extract_blocks.py (same
   pages, labels, word model stacking, trees) with the three body columns appended to FEATURES;
2. scores every benchmark page out of fold by site with the shipped fold models ("shipped") and the
   retrained ones ("body"), and the 86 labelled crawl pages with the two full models, rescue on;
3. runs every decoder of the grid over both sets of probabilities, then session 6's nested rule:
   for each of the 10 test folds (benchmark x site fold) the setting of one family is chosen on all
   other benchmark pages (keep >= the shipped trees' at 0.5 and AEB F1 >= theirs, then the most
   drop + F1; and the same with keep >= 0.93), and scored on the test fold; the setting chosen most
   often is scored on the crawl set against the shipped trees at 0.5 (95% interval from a paired
   bootstrap over its 36 sites);
4. prints paired deltas against the shipped trees at 0.5 (mean +- standard error over pages,
   overall and per fold) and the extra CPU time per AEB page of the selector, the columns and the
   decoder beside the shipped extractor's whole path in the same run.

Since 2026-12-02 (session 9) the body columns and the core decoder ship (curate/extract_body.py,
extract_blocks.core_flags): "shipped" here means the trees before that, read from git at SHIPPED_REV.

Run: PYTHONPATH=src .venv/bin/python bench/bench_extract_stack.py [--work DIR]
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import itertools
import json
import os
import sys
import time
from collections import Counter
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_extract_crawl_decode as cd  # noqa: E402  (the crawl bench's scoring and bootstrap)

from pretrain.curate.extract_blocks import (  # noqa: E402
    FEATURES,
    MIN_MAIN_CHARS,
    BlockModel,
    blocks,
    features,
    render,
)
from pretrain.curate.extract_eval import aeb_pages, crawl_pages, site_fold, trafilatura_pages  # noqa: E402
from pretrain.curate.extract_rescue import candidates, load_rescue, rescue_for, whole_page  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("PRETRAIN_SHARED_DATA") or ROOT.parent / "shared" / "data")
BENCHES = ("aeb", "trafilatura-eval")
SHIPPED_REV = "f00ec0e"  # main before the body columns shipped: its trees are this bench's baseline


def _git_bytes(path: str) -> bytes:
    import subprocess

    return subprocess.run(["git", "-C", str(ROOT), "show", f"{SHIPPED_REV}:{path}"], capture_output=True,
                          check=True).stdout


_BEFORE: dict = {}


def load_model(fold: str = "") -> BlockModel:
    """The `blocks` trees shipped before the body columns (the full model, or a site-fold one)."""
    if not _BEFORE:
        _BEFORE["all"] = json.loads(_git_bytes("src/pretrain/data/extract_blocks.json"))["model"]
        folds = gzip.decompress(_git_bytes("src/pretrain/data/extract_blocks_folds.json.gz"))
        _BEFORE.update(json.loads(folds)["folds"])
        _BEFORE.update({k: BlockModel.from_dict(d) for k, d in _BEFORE.items()})
    return _BEFORE[fold or "all"]


def model_for(bench: str, url: str) -> BlockModel:
    return load_model(f"{bench}/{site_fold(url)}")

# --------------------------------------------------------------------------- the body container

# trafilatura's first BODY_XPATH looks for these; session 8 counted which found the 448 containers
# of the benchmarks (entry-content 151 pages, post-content 52, article-content 51, article-body 35,
# articlebody 22; itemprop 39) and kept the cheap group: 0.13 ms per AEB page against 0.75 for 25 words.
BODY_WORDS = ("entry-content", "post-content", "article-content", "article-body", "articlebody")
BODY_SELECTOR = ", ".join(
    ['[itemprop="articleBody" i]'] + [f'[{a}*="{w}" i]' for w in BODY_WORDS for a in ("class", "id")]
)
BODY_COLUMNS = ("in_body", "body_found", "body_share")


def parse(html: str):
    from resiliparse.parse.html import HTMLTree

    return HTMLTree.parse(html)


def body_columns(tree, bs) -> np.ndarray:
    """(n, 3): whether each main-content block lies in the page's body container (its text, spaces
    removed, is a substring of the container's DOM text with all white space removed: resiliparse
    puts spaces at <br> that the DOM text has not), whether the page has a container, and the share
    of the main content's characters in it. The container is not rendered: extract_plain_text takes
    a string or a tree, not a node."""
    n = len(bs)
    node = tree.document.query_selector(BODY_SELECTOR) if tree.document is not None else None
    if node is None or n == 0:
        return np.zeros((n, 3), np.float32)
    ref = "".join(node.text.split())
    inside = np.array(["".join(b.text.split()) in ref for b in bs], float)
    chars = np.array([len(b.text) for b in bs], float)
    share = (chars * inside).sum() / max(chars.sum(), 1.0)
    return np.column_stack([inside, np.ones(n), np.full(n, share)]).astype(np.float32)


def main_render(tree) -> str:
    """`extract_blocks.render` from a parsed tree (same text; the tree is reused for the selector)."""
    from resiliparse.extract.html2text import extract_plain_text

    from pretrain.curate.extract_blocks import MINIMAL_HTML

    return extract_plain_text(tree, main_content=True, comments=False, post_meta=False, **MINIMAL_HTML)


def body_x(model: BlockModel, bs, cols: np.ndarray) -> np.ndarray:
    return np.hstack([features(bs, model.words.score(bs) if model.words else None), cols])


# --------------------------------------------------------------------------- the decoders


def region_flags(p, chars, bias, t_in, t_out) -> np.ndarray:
    """Session 6's region decoder: the maximum-sum run of logit(p) - bias (Kadane); inside keep at
    p >= t_in, outside at p >= t_out; no positive run: keep at 0.5, as the plain extractor does."""
    z = np.log(np.clip(p, 1e-9, 1 - 1e-9) / np.clip(1 - p, 1e-9, 1)) - bias
    best, lo, hi, run, start = 0.0, 0, -1, 0.0, 0
    for i, v in enumerate(z.tolist()):
        if run <= 0:
            run, start = v, i
        else:
            run += v
        if run > best:
            best, lo, hi = run, start, i
    if hi < 0:
        return p >= 0.5
    at = np.arange(len(p))
    return np.where((at >= lo) & (at <= hi), p >= t_in, p >= t_out)


def grid() -> dict:
    g = {f"threshold {t}": partial(cd.at_least, t=t) for t in (0.45, 0.5, 0.55, 0.6, 0.65, 0.7)}
    for b, ti, to in itertools.product((0.0, 0.25, 0.5, 1.0), (0.4, 0.45, 0.5), (0.6, 0.7, 0.8, 0.95)):
        g[f"region bias {b} in={ti} out={to}"] = partial(region_flags, bias=b, t_in=ti, t_out=to)
    core = itertools.product((0.95, 0.98), (80, 200), (0, 1), (0.3, 0.4, 0.5), (0.6, 0.7, 0.8))
    for conf, n, m, ti, to in core:
        g[f"core-0.5 p>={conf} chars>={n} +{m} in={ti} out={to}"] = partial(
            cd.core_flags, conf=conf, min_chars=n, margin=m, t_in=ti, t_out=to, t_none=0.5
        )
    return g


# --------------------------------------------------------------------------- retraining


def write_atomic(path: Path, data: bytes) -> None:
    part = path.with_name(path.name + ".part")
    part.write_bytes(data)
    os.replace(part, path)


def load_train_script():
    path = ROOT / "scripts" / "train_extract_blocks.py"
    spec = importlib.util.spec_from_file_location("train_extract_blocks", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # (its dataclasses look their module up there)
    spec.loader.exec_module(mod)
    return mod


def training_pages(tr, work: Path, columns=body_columns, name: str = "body.json.gz",
                   width: int = len(BODY_COLUMNS)):
    """The training script's labelled pages (its cache) and the `width` columns of each that
    `columns(tree, blocks)` gives (the body columns; cached in `work` / `name`), in the same order."""
    final = work / "pages.json.gz"
    if not final.exists():  # the training script writes its cache in place: here under a temporary
        part = work / "pages.json.gz.part"  # name, renamed when whole (a killed run leaves no torso)
        part.unlink(missing_ok=True)
        tr.load_pages(cache=part)
        os.replace(part, final)
    pages = tr.load_pages(cache=final)
    cache = work / name
    if cache.exists():
        raw = json.loads(gzip.decompress(cache.read_bytes()))
        cols = [np.array(c, np.float32).reshape(-1, width) for c in raw]
    else:
        htmls = [h for _, h, _ in tr.readability_pages()]
        htmls += [h for _, h, _ in aeb_pages(SHARED / "html" / "scrapinghub-aeb")]
        htmls += [h for _, h, _, _ in trafilatura_pages(SHARED / "html" / "trafilatura-eval")]
        cols = [columns(parse(h), p.blocks) for h, p in zip(htmls, pages, strict=True)]
        write_atomic(cache, gzip.compress(json.dumps([c.ravel().tolist() for c in cols]).encode()))
    return pages, cols


def train(tr, pages, cols) -> BlockModel:
    """scripts/train_extract_blocks.train with the body columns appended to each block's features."""
    scores = tr.oof_word_scores(pages)
    xs = [np.hstack([features(p.blocks, s), c])[p.y >= 0] for p, s, c in zip(pages, scores, cols)]
    m = tr.fit(np.vstack(xs), np.concatenate([p.y[p.y >= 0] for p in pages]), 0.5)
    return replace(m, words=tr.fit_words(pages))


def fold_models(pages, fit) -> dict[str, BlockModel]:
    """The ten site-fold models (each without one benchmark's site fold) and the full one ("all"):
    `fit(indices)` trains on those of `pages`."""
    t = time.process_time()
    models = {}
    for bench in BENCHES:
        for k in range(5):
            keep = [i for i, p in enumerate(pages) if not (p.source == bench and site_fold(p.url) == k)]
            models[f"{bench}/{k}"] = fit(keep)
            print(f"  trained {bench}/{k} ({time.process_time() - t:.0f} s CPU)", flush=True)
    models["all"] = fit(list(range(len(pages))))
    return models


def body_models(work: Path) -> dict[str, BlockModel]:
    """The ten site-fold models and the full one ("all"), retrained with the body columns (kept in `work`)."""
    out = work / "models.json.gz"
    if out.exists():
        doc = json.loads(gzip.decompress(out.read_bytes()))
        if doc.pop("features", None) != [*FEATURES, *BODY_COLUMNS]:
            raise SystemExit(f"{out}: trees of other features; delete the file to retrain")
        return {k: BlockModel.from_dict(d) for k, d in doc.items()}
    tr = load_train_script()
    pages, cols = training_pages(tr, work)
    models = fold_models(pages, lambda keep: train(tr, [pages[i] for i in keep], [cols[i] for i in keep]))
    doc = {"features": [*FEATURES, *BODY_COLUMNS], **{k: m.to_dict() for k, m in models.items()}}
    write_atomic(out, gzip.compress(json.dumps(doc).encode()))
    return models


# --------------------------------------------------------------------------- probabilities


def page_both(bench, key, html, url, base, base_rescue, body, body_rescue) -> tuple[dict, dict]:
    """The page as the crawl bench holds it, once with the shipped trees, once with the body trees."""
    tree = parse(html)
    bs = blocks(render(html))
    cols = body_columns(tree, bs)
    found = bool(bs) and bool(cols[:, 1].any())
    return (scored_page(bench, key, html, url, bs, base, base_rescue,
                        lambda bs=bs: features(bs, base.words.score(bs)), body=found),
            scored_page(bench, key, html, url, bs, body, body_rescue,
                        lambda bs=bs: body_x(body, bs, cols), body=found))


def scored_page(bench, key, html, url, bs, model, rescue, x, **extra) -> dict:
    """One page as the crawl bench holds it: the probabilities of `model` on the features `x()` of
    its blocks `bs` (with `extra` fields) and, on a page of little main content, the rescue's picks."""
    p = model.keep_probability(x()) if bs else np.zeros(0)
    d = {"bench": bench, "key": key, "url": url, "text": [b.text for b in bs], "p": p,
         "chars": np.array([len(b.text) for b in bs], int), **extra}
    if sum(len(b.text) for b in bs) < MIN_MAIN_CHARS:
        whole_bs, xr, inm = candidates(whole_page(html), bs, words=model.words)
        if whole_bs:
            d["rescue"] = (whole_bs, inm, (rescue.keep_probability(xr) >= rescue.threshold) & ~inm)
    return d


def all_pages(models, both=None, base_for=None, base_all=None) -> tuple[list[dict], list[dict]]:
    """Every benchmark page (out of fold by site) and crawl page, scored by `both` (page_both's
    arguments) with the baseline trees (`base_for(bench, url)`, `base_all()`: by default this
    bench's, from before the body columns) and with `models` (site-fold ones and "all")."""
    both, base_for, base_all = both or page_both, base_for or model_for, base_all or load_model
    base, body = [], []

    def add(pair, **extra):
        base.append({**pair[0], **extra})
        body.append({**pair[1], **extra})

    for key, html, truth, url in aeb_pages(SHARED / "html" / "scrapinghub-aeb", with_url=True):
        f = f"aeb/{site_fold(url)}"
        add(both("aeb", key, html, url, base_for("aeb", url), rescue_for("aeb", url),
                 models[f], rescue_for("aeb", url)), truth=truth)
    tra = "trafilatura-eval"
    for key, html, keep, drop, url in trafilatura_pages(SHARED / "html" / tra, with_url=True):
        f = f"{tra}/{site_fold(url)}"
        add(both(tra, key, html, url, base_for(tra, url), rescue_for(tra, url),
                 models[f], rescue_for(tra, url)), keep=keep, drop=drop)
    for key, html, keep, drop, no_main, url in crawl_pages(SHARED / "warc"):
        add(both("crawl", key, html, url, base_all(), load_rescue(), models["all"], load_rescue()),
            keep=keep, drop=drop, no_main=no_main)
    return base, body


# --------------------------------------------------------------------------- judging


def paired(base: dict, other: dict, keys) -> str:
    """AEB F1, keep and drop of `other` minus `base`, each +- its standard error over pages."""
    a = np.array([other[k][2] - base[k][2] for k in keys if k[0] == "aeb"])
    t = [k for k in keys if k[0] == "trafilatura-eval"]
    parts = []
    if len(a) > 1:
        parts.append(f"F1 {a.mean():+.4f} +- {a.std(ddof=1) / np.sqrt(len(a)):.4f}")
    for name, i, n in (("keep", 0, 1), ("drop", 2, 3)):
        if len(t) > 1:
            d = np.array([other[k][i] - base[k][i] for k in t], float)
            tot = sum(base[k][n] for k in t)
            parts.append(f"{name} {d.sum() / tot:+.4f} +- {d.std(ddof=1) * np.sqrt(len(d)) / tot:.4f}"
                         f" (+{int((d > 0).sum())}/-{int((d < 0).sum())} pages)")
    return ", ".join(parts)


def nested(pages: list[dict], results: dict, base_name: str) -> None:
    print(f"\nnested choice (per test fold, on the other benchmark pages; base = {base_name})")
    families = {
        "body threshold": "body | threshold",
        "body region": "body | region",
        "body core-0.5": "body | core-0.5",
        "body, any decoder": "body | ",
        "shipped region": "shipped | region",
        "shipped core-0.5": "shipped | core-0.5",
    }
    for label, prefix in families.items():
        for rule in ("keep >= base", "keep >= 0.93"):
            nested_rule(pages, results, base_name, prefix, f"{label}, {rule}"[:40],
                        None if rule == "keep >= base" else 0.93)


def nested_rule(pages: list[dict], results: dict, base_name: str, prefix: str, label: str,
                keep_floor: float | None = None) -> None:
    """Session 6's nested rule for the settings named `prefix`...: per test fold (benchmark x site
    fold), the one with keep >= `keep_floor` (None: the base's) and AEB F1 >= the base's, then the
    most drop + F1, on the other benchmark pages (none passes: the base); the one chosen most often
    on the crawl set. Prints the result under `label`, its paired deltas and the crawl bootstrap."""
    folds = {(d["bench"], d["key"]): (d["bench"], site_fold(d["url"]))
             for d in pages if d["bench"] != "crawl"}
    crawl = [d for d in pages if d["bench"] == "crawl"]
    base = results[base_name]
    out, chosen = {}, Counter()
    for test in sorted(set(folds.values())):
        train = [k for k, f in folds.items() if f != test]
        b = cd.aggregate(base, train)
        floor = b["keep"] if keep_floor is None else keep_floor
        best, value = base_name, -1e9  # nothing in the family passes: the base
        for name, pp in results.items():
            if not name.startswith(prefix):
                continue
            s = cd.aggregate(pp, train)
            if s["keep"] < floor or s["F1"] < b["F1"]:
                continue
            if s["drop"] + s["F1"] > value + 1e-12:
                best, value = name, s["drop"] + s["F1"]
        chosen[best] += 1
        out.update({k: results[best][k] for k, f in folds.items() if f == test})
    top = chosen.most_common(1)[0][0]
    out.update({k: results[top][k] for k in [(d["bench"], d["key"]) for d in crawl]})
    print(cd.row(label, cd.aggregate(out, list(out))))
    print(f"    chosen {dict(chosen)}")
    print(f"    vs base: {paired(base, out, list(folds))}")
    per = []
    for test in sorted(set(folds.values())):
        ks = [k for k, f in folds.items() if f == test]
        s0, s1 = cd.aggregate(base, ks), cd.aggregate(out, ks)
        v = "F1" if test[0] == "aeb" else "drop"
        extra = "" if test[0] == "aeb" else f" keep {s0['keep']:.4f}->{s1['keep']:.4f}"
        per.append(f"{test[0][:3]}/{test[1]} {v} {s0[v]:.4f}->{s1[v]:.4f}{extra}")
    print("    per fold: " + "; ".join(per))
    print(f"    crawl, most chosen vs base: {cd.bootstrap(base, results[top], crawl)}")


def speed(models) -> None:
    """CPU ms per AEB page (best of 5 passes): the shipped path beside what the stack adds."""
    m, body = load_model(), models["all"]
    htmls = [h for _, h, _ in aeb_pages(SHARED / "html" / "scrapinghub-aeb")]
    dec = partial(cd.core_flags, conf=0.98, min_chars=80, margin=0, t_in=0.4, t_out=0.7, t_none=0.5)
    reg = partial(region_flags, bias=0.25, t_in=0.5, t_out=0.8)

    def shipped():
        for h in htmls:
            bs = blocks(render(h))
            if bs:
                _ = m.keep_probability(features(bs, m.words.score(bs))) >= m.threshold

    def stacked():
        for h in htmls:
            tree = parse(h)
            bs = blocks(main_render(tree))
            if bs:
                p = body.keep_probability(body_x(body, bs, body_columns(tree, bs)))
                dec(p, np.array([len(b.text) for b in bs]))

    def shipped_batches():  # as the extract step runs it: each stage over a batch, one walk per batch
        from pretrain.curate.extract import BATCH_PAGES
        from pretrain.curate.extract_rescue import page_texts

        for i in range(0, len(htmls), BATCH_PAGES):
            hs = htmls[i : i + BATCH_PAGES]
            page_texts(hs, [blocks(render(h)) for h in hs], m)

    def stacked_batches():
        from pretrain.curate.extract import BATCH_PAGES

        for i in range(0, len(htmls), BATCH_PAGES):
            mains, cols = [], []
            for h in htmls[i : i + BATCH_PAGES]:  # each tree freed before the next parse
                tree = parse(h)
                mains.append(blocks(main_render(tree)))
                cols.append(body_columns(tree, mains[-1]))
            rows = [body_x(body, bs, c) for bs, c in zip(mains, cols) if bs]
            p = body.keep_probability(np.concatenate(rows))
            at = 0
            for bs in mains:
                c = np.array([len(b.text) for b in bs])
                f = dec(p[at : at + len(bs)], c) if bs else []
                at += len(bs)
                "\n".join(b.text for b, k in zip(bs, f) if k)

    def render_string():
        for h in htmls:
            render(h)

    def render_tree():
        for h in htmls:
            main_render(parse(h))

    def selector_only():
        for h in htmls:
            body_columns(parse(h), [])

    trees = [parse(h) for h in htmls]
    main = [blocks(render(h)) for h in htmls]
    probs = [body.keep_probability(body_x(body, bs, body_columns(t, bs))) for t, bs in zip(trees, main) if bs]
    chars = [np.array([len(b.text) for b in bs]) for bs in main if bs]

    def columns_only():
        for t, bs in zip(trees, main):
            body_columns(t, bs)

    def core_only():
        for p, c in zip(probs, chars):
            dec(p, c)

    def region_only():
        for p, c in zip(probs, chars):
            reg(p, c)

    best = {}
    for _ in range(5):
        for name, f in (("shipped path", shipped), ("stacked path (core)", stacked),
                        ("shipped, the step's batches", shipped_batches),
                        ("stacked, the step's batches", stacked_batches),
                        ("render from the string", render_string),
                        ("parse, render from the tree", render_tree),
                        ("parse + selector", selector_only),
                        ("selector + columns on a parsed tree", columns_only), ("core decoder", core_only),
                        ("region decoder", region_only)):
            t = time.process_time()
            f()
            best[name] = min(best.get(name, 1e9), (time.process_time() - t) / len(htmls) * 1e3)
    print(f"\nCPU ms per AEB page (best of 5, load {os.getloadavg()[0]:.1f}):")
    for k, v in best.items():
        print(f"  {k:<40} {v:.3f}  ({v / best['shipped path']:.2f}x the shipped path; {1e3 / v:.0f} pages/s)")


def no_data() -> bool:
    """Whether the benchmark pages or the crawl are missing from SHARED (said: nothing to measure)."""
    if not (SHARED / "warc").is_dir() or not (SHARED / "html").is_dir():
        print(f"no data at {SHARED}; nothing to measure")
        return True
    return False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/pretrain-extract-stack"),
                    help="rendered pages, body columns and retrained trees are kept here")
    ap.add_argument("--speed-only", action="store_true")
    args = ap.parse_args()
    if no_data():
        return 0
    args.work.mkdir(parents=True, exist_ok=True)
    models = body_models(args.work)
    if args.speed_only:
        speed(models)
        return 0
    t = time.process_time()
    base, body = all_pages(models)
    found = dict(Counter(d["bench"] for d in body if d["body"]))
    print(f"{dict(Counter(d['bench'] for d in base))} pages; probabilities in "
          f"{time.process_time() - t:.1f} s CPU; a container on {found}")
    keys = [(d["bench"], d["key"]) for d in base]
    print(f"{'decoder':<40} {'AEB P':>6} {'R':>6} {'F1':>6} {'keep':>6} {'drop':>6} | "
          "crawl keep, drop, no-main clean")
    results = {}
    for trees, pages in (("shipped", base), ("body", body)):
        for name, f in grid().items():
            results[f"{trees} | {name}"] = pp = cd.per_page(pages, f)
            if name.startswith("threshold") or trees == "body" and name in (
                "region bias 0.25 in=0.5 out=0.8", "core-0.5 p>=0.98 chars>=80 +0 in=0.4 out=0.7"
            ):
                print(cd.row(f"{trees} | {name}"[:40], cd.aggregate(pp, keys)), flush=True)
    bk = [k for k in keys if k[0] != "crawl"]
    crawl = [d for d in base if d["bench"] == "crawl"]
    b0 = results["shipped | threshold 0.5"]
    for name in ("body | threshold 0.5", "body | threshold 0.55", "body | threshold 0.6"):
        print(f"{name} vs shipped 0.5: {paired(b0, results[name], bk)}; "
              f"{cd.bootstrap(b0, results[name], crawl)}")
    nested(base, results, "shipped | threshold 0.5")
    speed(models)
    return 0


if __name__ == "__main__":
    sys.exit(main())
