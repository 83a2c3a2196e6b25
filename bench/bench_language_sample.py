"""How far a sample of a long document's text can stand in for all of it in the `language` step.

    .venv/bin/python bench/bench_language_sample.py [--grid] [--max-chars 150] [--windows 5]
        [--accept 0.7] [--reject 0.0] [--reread 600] [--reread-accept 0.75] [--reread-reject 0.45]
        [--third 2000] [--third-accept 0.7] [--third-reject 0.6]
        (defaults: the step's; about a minute, --grid a few more)

The truth here is today's step on the whole text (`language.max_chars = 0`, lid.176 + CLD3). The
step with `max_chars = N` first asks lid.176 about a sample of N characters of a text longer than
4N (`sample_windows` windows spread over the text, `sample_text`) and keeps that answer when
lid.176 is at least `sample_accept` sure of it (or, with `sample_reject`, less sure than that);
otherwise it re-reads `reread_chars` characters (windows of ~100) and keeps that answer when it is
at least `reread_accept` or below `reread_reject`; otherwise it reads `third_chars` characters and
keeps that answer outside [`third_reject`, `third_accept`); otherwise it reads the whole text as
before. The step runs tag-only (threshold 0), as the truth does. Printed per corpus: label
agreement with the whole text, agreement of the keep/drop decision at 0.65 (the page is kept for
the whole text's label), the same two for the pages whose whole text scores >= 0.65 ("confident")
and for the rest, the score difference's distribution, how often a sampled page was read whole
anyway, and characters read per document; then the labels that differ, per whole-text language.

Corpora, all real long documents except the last (texts made once, not timed):
- tuning split (the default was chosen on these): the default belt's documents
  (bench_language.py --belt: AEB, Common Crawl excerpt, dolma WARC samples, demo crawl),
  trafilatura-eval's pages with an even index, the even half of the synthetic documents;
- held out (reported): trafilatura-eval's odd pages, Readability's 130 test pages, dolma's
  cc_en_head jsonl (CCNet's Common Crawl text), the odd half of the synthetic documents.
HTML pages are extracted by resiliparse as the belt does. Synthetic: for each of lingua's 75
languages, 8 documents of 1,000-6,000 characters made of random sentences of lingua's FULL set
that are not in the 100-per-language test file.

`--grid` prints the tuning split's numbers for every sample (length, windows) x third read
(length, band) tried (re-read as the default), then the winner: the fewest characters read with
label agreement >= 0.998 and keep/drop >= 0.994 (the second pass asked 0.995; see
docs/language.md for what the one document between them is).
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_language import SHARED, belt_texts  # noqa: E402

from pretrain.curate.document import Document  # noqa: E402
from pretrain.curate.language import LanguageConfig, LanguageFilter  # noqa: E402

LINGUA = SHARED / "langid" / "lingua"


def html_texts(pages) -> list[str]:
    from pretrain.curate.extract import extract_text

    return [t for t in (extract_text(h) for h in pages) if t]


def synthetic(per_language: int = 8, seed: int = 0) -> list[tuple[str, str]]:
    """(language, text): long single-language documents from lingua's full set minus its test file."""
    test = set((LINGUA / "lingua-sentences-75lang-100each.tsv").read_text(encoding="utf-8").splitlines())
    by_lang: dict[str, list[str]] = defaultdict(list)
    with gzip.open(LINGUA / "lingua-sentences-75lang-full.tsv.gz", "rt", encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line not in test and "\t" in line:
                code, s = line.split("\t", 1)
                by_lang[code].append(s)
    rng = random.Random(seed)
    out = []
    for code in sorted(by_lang):
        for _ in range(per_language):
            target, parts, n = rng.randint(1000, 6000), [], 0
            while n < target:
                s = rng.choice(by_lang[code])
                parts.append(s)
                n += len(s) + 1
            out.append((code, " ".join(parts)))
    return out


def corpora() -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(tuning, held-out) corpora: name -> texts."""
    from pretrain.curate.extract_eval import trafilatura_pages

    belt = belt_texts()
    belt.pop("all sets together")
    tra = html_texts(h for _, h, _, _ in trafilatura_pages(SHARED / "html" / "trafilatura-eval"))
    rd = []
    for part in sorted((SHARED / "html" / "mozilla-readability").glob("*.jsonl.gz")):
        with gzip.open(part, "rt", encoding="utf-8") as f:
            rd += [json.loads(line)["source_html"] for line in f]
    dolma = []
    for part in sorted((SHARED / "warc" / "dolma").glob("cc_en_head-*.jsonl.gz")):
        with gzip.open(part, "rt", encoding="utf-8") as f:
            dolma += [json.loads(line)["text"] for line in f]
    syn = [t for _, t in synthetic()]
    tuning = {f"belt: {k}": v for k, v in belt.items()}
    tuning["trafilatura-eval (even)"] = tra[0::2]
    tuning["lingua synthetic (even)"] = syn[0::2]
    held = {
        "trafilatura-eval (odd)": tra[1::2],
        "readability": html_texts(rd),
        "dolma cc_en_head": [t for t in dolma if t.strip()],
        "lingua synthetic (odd)": syn[1::2],
    }
    return tuning, held


def whole_text(step: LanguageFilter, texts: list[str]) -> list[tuple[str, float, str]]:
    out = []
    for i, t in enumerate(texts):
        d = Document(str(i), t)
        step.annotate(d)
        out.append((d.metadata["language"], d.metadata["language_score"], d.metadata["language_model"]))
    return out


def step_for(cfg: LanguageConfig) -> LanguageFilter:
    """The step with this sampling rule, tag only, its fastText calls kept in `.lines`."""
    step = LanguageFilter(replace(cfg, languages=(), threshold=0.0))
    inner, step.lines = step.predict, []

    def predict(line: str, *args):
        step.lines.append(len(line) - 1)
        return inner(line, *args)

    step.predict = predict
    return step


def compare(texts, full, cfg: LanguageConfig) -> dict:
    """The step with this sampling rule against the whole text's answers, document by document."""
    step = step_for(cfg)
    fallback = chars = 0
    agree = {g: [0, 0, 0] for g in ("all", "confident", "rest")}  # docs, same label, same keep/drop
    diffs, wrong, per_lang = [], Counter(), defaultdict(lambda: [0, 0, 0])
    for i, (t, (flang, fscore, _)) in enumerate(zip(texts, full)):
        step.lines.clear()
        d = Document(str(i), t)
        step.annotate(d)
        lang, score = d.metadata["language"], d.metadata["language_score"]
        chars += sum(step.lines)
        fallback += len(step.lines) > 1 and step.lines[-1] == len(t)
        same = (lang == flang, (lang == flang and score >= 0.65) == (fscore >= 0.65))
        for g in ("all", "confident" if fscore >= 0.65 else "rest"):
            agree[g][0] += 1
            agree[g][1] += same[0]
            agree[g][2] += same[1]
        per_lang[flang][0] += 1
        per_lang[flang][1] += same[0]
        per_lang[flang][2] += same[1]
        diffs.append(abs(score - fscore) if lang == flang else 1.0)
        if lang != flang:
            wrong[f"{flang}->{lang}"] += 1
    diffs.sort()
    k = len(texts)

    def q(p: float) -> float:
        return diffs[min(int(p * k), k - 1)]

    groups = {g: (v[0], v[1] / max(v[0], 1), v[2] / max(v[0], 1)) for g, v in agree.items()}
    return {
        "docs": k, "label": groups["all"][1], "keep": groups["all"][2], "groups": groups,
        "fallback": fallback / k, "chars": chars / k, "p50": q(0.5), "p90": q(0.9), "p99": q(0.99),
        "wrong": wrong, "per_lang": per_lang,
    }  # fmt: skip


def row(name: str, r: dict, mean_len: float) -> str:
    conf, rest = r["groups"]["confident"], r["groups"]["rest"]
    return (
        f"{name:34s} {r['docs']:5d} {mean_len:7.0f} {r['label']:7.4f} {r['keep']:7.4f}"
        f" {conf[0]:5d} {conf[1]:.4f}/{conf[2]:.4f} {rest[0]:4d} {rest[1]:.4f}/{rest[2]:.4f}"
        f" {r['fallback']:6.1%} {r['chars']:6.0f}  {r['p50']:.4f} {r['p90']:.4f} {r['p99']:.4f}"
    )


HEADER = (
    f"{'corpus':34s} {'docs':>5s} {'chars':>7s} {'label=':>7s} {'keep=':>7s} {'conf':>5s} {'label/keep':>13s}"
    f" {'rest':>4s} {'label/keep':>13s} {'whole':>6s} {'read':>6s}  score diff p50 / p90 / p99"
)


def grid(tuning: dict, full: dict) -> None:
    """Every sample x third-read rule on the tuning split; the winner by the rule above."""
    texts = [t for v in tuning.values() for t in v]
    truth = [r for k in tuning for r in full[k]]
    print("tuning split, all corpora together:", len(texts), "documents; re-read 600 at 0.75 / 0.45")
    print(f"{'N':>5s} {'wins':>4s} {'third':>5s} {'t.rej':>5s} {'t.acc':>5s}  label=  keep=  "
          "conf label/keep  rest label/keep  whole  chars read/doc")  # fmt: skip
    bands = ((0.6, 0.7), (0.58, 0.72))
    thirds = [(0, 0.0, 1.0)] + [(k, lo, hi) for k in (1500, 2000, 2500) for lo, hi in bands]
    best = None
    for n in (150, 200):  # under 126, lingua's paragraphs (<= 503 characters) would be sampled
        for w in (3, 5):
            for k, lo, hi in thirds:
                cfg = LanguageConfig(max_chars=n, sample_windows=w, third_chars=k, third_reject=lo,
                                     third_accept=hi)  # fmt: skip
                m = compare(texts, truth, cfg)
                c, r = m["groups"]["confident"], m["groups"]["rest"]
                print(
                    f"{n:5d} {w:4d} {k:5d} {lo:5.2f} {hi:5.2f}  {m['label']:.4f} {m['keep']:.4f}"
                    f"  {c[1]:.4f}/{c[2]:.4f}  {r[1]:.4f}/{r[2]:.4f} {m['fallback']:6.1%} {m['chars']:7.0f}"
                )
                if m["label"] >= 0.998 and m["keep"] >= 0.994 and (best is None or m["chars"] < best[0]):
                    best = (round(m["chars"]), n, w, (k, lo, hi))
    print("winner (fewest characters with label >= 0.998 and keep >= 0.994):", best)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    d = LanguageConfig()
    ap.add_argument("--max-chars", type=int, default=d.max_chars or 1000)
    ap.add_argument("--windows", type=int, default=d.sample_windows)
    ap.add_argument("--accept", type=float, default=d.sample_accept)
    ap.add_argument("--reject", type=float, default=d.sample_reject)
    ap.add_argument("--reread", type=int, default=d.reread_chars)
    ap.add_argument("--reread-accept", type=float, default=d.reread_accept)
    ap.add_argument("--reread-reject", type=float, default=d.reread_reject)
    ap.add_argument("--third", type=int, default=d.third_chars)
    ap.add_argument("--third-accept", type=float, default=d.third_accept)
    ap.add_argument("--third-reject", type=float, default=d.third_reject)
    ap.add_argument("--grid", action="store_true", help="the tuning split for every sample x third-read rule")
    args = ap.parse_args()
    cfg = LanguageConfig(
        max_chars=args.max_chars, sample_windows=args.windows, sample_accept=args.accept,
        sample_reject=args.reject, reread_chars=args.reread, reread_accept=args.reread_accept,
        reread_reject=args.reread_reject, third_chars=args.third, third_accept=args.third_accept,
        third_reject=args.third_reject,
    )  # fmt: skip
    tuning, held = corpora()
    step = LanguageFilter(LanguageConfig(languages=(), threshold=0.0, max_chars=0))
    full = {k: whole_text(step, v) for k, v in {**tuning, **held}.items()}
    if args.grid:
        grid(tuning, full)
    print(
        f"\nmax_chars={cfg.max_chars} in {cfg.sample_windows} windows, accept at {cfg.sample_accept}, reject"
        f" below {cfg.sample_reject}; re-read {cfg.reread_chars} characters, accept at {cfg.reread_accept},"
        f" reject below {cfg.reread_reject}; third read {cfg.third_chars}, accept at {cfg.third_accept},"
        f" reject below {cfg.third_reject}: against the whole text"
    )
    for title, group in (("tuning split", tuning), ("held out", held)):
        print(f"== {title}\n{HEADER}")
        alltexts, allfull = [], []
        for name, texts in group.items():
            r = compare(texts, full[name], cfg)
            print(row(name, r, sum(map(len, texts)) / len(texts)))
            alltexts += texts
            allfull += full[name]
        r = compare(alltexts, allfull, cfg)
        print(row("all together", r, sum(map(len, alltexts)) / len(alltexts)))
        langs = Counter(lang for lang, _, _ in allfull)
        print("labels that differ (whole -> sample):", dict(r["wrong"]) or "none",
              f"| whole-text languages: {len(langs)}, top: {langs.most_common(12)}")  # fmt: skip
        off = {k: f"{v[1]}/{v[0]} labels, {v[2]}/{v[0]} keep" for k, v in sorted(r["per_lang"].items())
               if v[1] < v[0] or v[2] < v[0]}  # fmt: skip
        print(f"per whole-text language: {len(langs) - len(off)} of {len(langs)} agree on every document;",
              "the others:", off)  # fmt: skip


if __name__ == "__main__":
    main()
