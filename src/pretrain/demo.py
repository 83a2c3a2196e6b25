"""`pretrain demo`: a shipped crawl all the way to a small base model and a report, on one CPU.

Each stage is the real `pretrain` command a user would type, run in a child process and printed
first, so the demo doubles as a walkthrough:
crawl -> curate -> tokenizer -> tokens (+ held-out split) -> mixture -> plan -> train -> sample
-> evaluate -> report. The crawl (src/pretrain/data/demo/crawl.warc.gz, written by scripts/make_demo_crawl.py)
has the junk a real crawl has: navigation pages, spam, re-crawled and edited copies, other
languages, binary bodies. `--data PATH` adds your own inputs (e.g. recipes/data).
"""

from __future__ import annotations

import json
import random
import shlex
import shutil
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import xxhash

from pretrain.commands.mix import table_text as mix_table
from pretrain.curate import io as cio
from pretrain.errors import UserError
from pretrain.lifeline import child_env
from pretrain.report import headline_text, plan_headline, tokens_per_s

CRAWL = Path(__file__).resolve().parent / "data" / "demo" / "crawl.warc.gz"


@dataclass
class DemoSettings:
    out: Path
    data: list[str]
    steps: int
    vocab: int
    workers: int | None


def _run(console, title: str, argv: list[str], capture: bool = False, watch=None, show=None) -> str:
    """Run one stage as the real command; `watch()` -> a status line shown while it runs. A watched
    stage's stdout (train's one "done:" line) is held and shown after the last status line: passed
    through, it came before the progress it concludes (run-it-twice review, session 9). `show(stdout)`
    prints a captured stage's output before its "done in" line (it came after, session 11)."""
    cmd = ["pretrain", *argv]
    console.rule(f"[bold]{title}")
    console.print(f"[dim]$ {shlex.join(cmd)}", highlight=False)
    t0 = time.time()
    held = capture or watch is not None
    proc = subprocess.Popen(
        [sys.executable, "-m", "pretrain", *argv], text=True, stdout=subprocess.PIPE if held else None,
        env=stage_env(console),
    )
    try:
        if watch is not None:
            # drained by a thread while the status line runs: a stage that writes more than a pipe
            # holds (64 KiB) to stdout would otherwise block on a pipe nobody reads
            chunks: list[str] = []
            reader = threading.Thread(target=lambda: chunks.extend(iter(proc.stdout.readline, "")),
                                      daemon=True)
            reader.start()
            _watch(console, proc, watch)
            proc.wait()
            reader.join()
            stdout = "".join(chunks)
        else:
            stdout, _ = proc.communicate()
    except KeyboardInterrupt:
        _let_stage_stop(console, proc)
        raise
    if held and not capture and stdout:
        console.print(stdout.rstrip("\n"), highlight=False, markup=False)
    if proc.returncode == 130:  # the stage alone was interrupted (its own SIGINT/SIGTERM), and said so
        raise KeyboardInterrupt
    if proc.returncode != 0:
        raise UserError(f"demo stage '{title}' failed (exit {proc.returncode}): {shlex.join(cmd)}")
    took = time.time() - t0
    if show is not None:
        show(stdout or "")
    console.print(f"[green]done[/] in {took:.1f} s")
    return stdout or ""


# With no terminal at all (a log, cron, CI) rich takes 80 columns: the funnel's and eval's tables
# were squeezed and the `$ pretrain ...` lines broken mid-path, which a newcomer then pastes. 120 is
# the width `pretrain plan` and `pretrain tour` already print at when piped.
PIPED_WIDTH = 120


def _terminal_attached() -> bool:
    """A terminal on stdin, stdout or stderr: rich takes its width from it (`demo | tee log` on an
    80-column terminal keeps 80, and the stages' progress bars on stderr fit it)."""
    import os

    for stream in (sys.__stdin__, sys.__stdout__, sys.__stderr__):
        try:
            os.get_terminal_size(stream.fileno())
            return True
        except (AttributeError, OSError, ValueError):
            continue
    return False


def demo_console(file=None):
    """The demo's console: on a terminal, its width; printed elsewhere, lines are never wrapped, and
    with no terminal attached at all it draws at least PIPED_WIDTH columns (COLUMNS, when set, is the
    user's word and rich honours it)."""
    import os

    from rich.console import Console

    con = Console(file=file)
    if con.is_terminal or os.environ.get("COLUMNS"):
        return con
    width = con.width if _terminal_attached() else max(con.width, PIPED_WIDTH)
    return Console(file=file, width=width, soft_wrap=True)


def stage_env(console) -> dict:
    """A stage's environment: with no terminal attached, the demo's width (COLUMNS), so its tables
    are drawn as wide as the demo's own lines; with one, the stage finds that terminal itself."""
    env = child_env()
    if not console.is_terminal and not _terminal_attached():
        env.setdefault("COLUMNS", str(console.width))
    return env


def _let_stage_stop(console, proc: subprocess.Popen, grace_s: float = 120) -> None:
    """Ctrl-C reaches the demo and its stage together (one process group). The stage stops on its
    own (train finishes its step and saves a checkpoint); leaving at once would end it mid-save,
    since a stage exits with the demo (lifeline.exit_with_env_parent). A second Ctrl-C leaves now."""
    if proc.poll() is None:
        console.print("[yellow]interrupted: waiting for the stage to stop (train saves a checkpoint); "
                      "Ctrl-C again to leave now[/]")
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:  # a stage that did not get the signal (kill -INT of the demo)
        proc.terminate()  # SIGTERM: train saves and exits as on SIGINT
        proc.wait(timeout=grace_s)


def _watch(console, proc: subprocess.Popen, line, every: float = 0.5) -> None:
    """One live status line on a terminal; elsewhere (a log, a pipe) a line every ~10 seconds.
    The last state is printed when the stage ends, either way."""
    last, printed = 0.0, ""
    with console.status("starting", spinner="dots") if console.is_terminal else _nothing() as status:
        while proc.poll() is None:
            time.sleep(every)
            text = line()
            if not text:
                continue
            if status is not None:
                status.update(text)
            elif time.time() - last >= 10 and text != printed:
                console.print(text, highlight=False)
                last, printed = time.time(), text
    final = line()
    if final and final != printed:
        console.print(final, highlight=False)


@contextmanager
def _nothing():
    yield None


def _metric_lines(metrics: Path) -> set[str]:
    try:
        return set(metrics.read_text().splitlines())
    except FileNotFoundError:
        return set()


def _training_line(metrics: Path, steps: int, before: frozenset[str] | set[str] = frozenset()) -> str:
    """'step 120/300  loss 3.21  tok/s 8,400 (median)' from the run's metrics.jsonl so far; "" until
    this stage writes a step line of its own (`before`: the lines there when it started). A rerun of
    a finished run trains nothing, and the earlier run's last line must not read as progress."""
    try:
        lines = metrics.read_text().splitlines()
    except FileNotFoundError:
        return ""
    recs = []
    for x in lines:
        try:
            recs.append((json.loads(x), x))
        except json.JSONDecodeError:  # a line being written
            continue
    train = [(r, x) for r, x in recs if isinstance(r, dict) and "loss" in r and "event" not in r]
    if not train or train[-1][1] in before:
        return ""
    train = [r for r, _ in train]
    tps = tokens_per_s(train)
    rate = f"  tok/s {tps:,.0f} (median)" if tps else ""
    return f"step {train[-1]['step']}/{steps}  loss {train[-1]['loss']:.3f}{rate}"


def split_heldout(corpus: Path, out: Path, every: int = 20) -> tuple[Path, Path, int, int]:
    """Split curated documents into train and held-out JSONL by a hash of their id (stable)."""
    train, held = [], []
    for shard in sorted((corpus / "data").glob("*.jsonl.zst")):
        for rec in cio.read_jsonl_zst(shard):
            (held if xxhash.xxh3_64_intdigest(rec["id"].encode()) % every == 0 else train).append(rec)
    if not train or not held:
        raise UserError(f"{corpus}: too few documents survived curation to split off a held-out set")
    tp, hp = out / "split" / "train.jsonl.zst", out / "split" / "heldout.jsonl.zst"
    for path, recs in ((tp, train), (hp, held)):
        tmp = path.with_name(path.name + ".new")
        cio.write_jsonl_zst(tmp, recs)
        _keep_if_same(tmp, path)
    return tp, hp, len(train), len(held)


def _keep_if_same(new: Path, path: Path) -> None:
    """`new` replaces `path` only when its bytes differ: a rerun leaves the inputs of the stages
    after it untouched (their jobs resume instead of noting a file modified since they listed it)."""
    if path.is_file() and path.read_bytes() == new.read_bytes():
        new.unlink()
    else:
        new.replace(path)


SMOKE_NOTE = ("a smoke test built from the demo's own held-out documents, not a benchmark: "
              "does the model prefer a line's true next words to words from another document?")


def write_eval_files(heldout: Path, dest: Path, n: int = 48, max_bytes: int = 16_000,
                     seed: int = 0) -> tuple[Path, Path]:
    """The demo's evaluation material, from held-out documents only (no ../shared benchmarks):
    heldout.txt for `ppl:` (perplexity, bits per byte) and next_words.jsonl, a multiple-choice task
    in llm-foundry's format {query, choices, gold}: a line's first words, then its next three words
    against three-word spans of other documents (chance: 1/4)."""
    texts = [r["text"] for r in cio.read_jsonl_zst(heldout)]
    rng = random.Random(seed)
    words = [(d, x.split()) for d, t in enumerate(texts) for x in t.splitlines()]
    lines = [(d, w) for d, w in words if 8 <= len(w) <= 80]
    rng.shuffle(lines)
    items = []
    for d, words in lines:
        others = [w for e, w in lines if e != d]
        if len(items) == n or len(others) < 3:
            break
        cut = rng.randint(5, len(words) - 3)
        gold = " ".join(words[cut:cut + 3])
        wrong = []
        for w in rng.sample(others, 3):
            at = rng.randint(0, len(w) - 3)
            wrong.append(" ".join(w[at:at + 3]))
        if gold in wrong or len(set(wrong)) < 3:
            continue
        choices = [gold, *wrong]
        rng.shuffle(choices)
        items.append({"query": " ".join(words[:cut]), "choices": choices, "gold": choices.index(gold)})
    if not items:
        raise UserError(f"{heldout}: too few held-out lines to build the demo's evaluation task")
    dest.mkdir(parents=True, exist_ok=True)
    text = "\n\n".join(texts).encode("utf-8")[:max_bytes].decode("utf-8", errors="ignore")
    ppl, mc = dest / "heldout.txt", dest / "next_words.jsonl"
    cio.write_bytes_atomic(ppl, text.encode("utf-8"))
    cio.write_bytes_atomic(mc, "".join(json.dumps(x) + "\n" for x in items).encode("utf-8"))
    return ppl, mc


def eval_specs(out: Path) -> str:
    """The tasks the demo's run evaluates in the loop (`log.eval_tasks` / `pretrain eval --tasks`)."""
    return f"ppl:{out / 'eval' / 'heldout.txt'},{out / 'eval' / 'next_words.jsonl'}"


def train_recipe(out: Path, run: Path, steps: int, vocab: int) -> str:
    """The tiny-cpu recipe (recipes/tiny-cpu.toml) pointed at the demo's token shards."""
    return f"""# written by `pretrain demo`; run it again with: pretrain train {out / "train.toml"}
[train]
steps = {steps}
out = "{run}"
threads = 1

[model]
preset = "tiny-cpu"
vocab_size = {vocab}
seq_len = 128

[data]
kind = "tokens"
batch_size = 16
sources = {{ web = "{out / "tokens" / "web"}" }}
weights = {{ web = 1.0 }}
eval_sources = {{ heldout = "{out / "tokens" / "heldout"}" }}

[optim]
lr = 3e-3
weight_decay = 0.1

[schedule]
kind = "cosine"
warmup_steps = {max(2, steps // 10)}
min_lr_ratio = 0.1

[precision]
dtype = "bf16"

[stability]
clip = 1.0

[checkpoint]
every = {max(10, steps // 3)}
keep = 2

[log]
eval_every = {max(5, steps // 6)}
# {SMOKE_NOTE}
eval_tasks = "{eval_specs(out)}"
eval_tasks_every = {max(5, steps // 6)}
eval_tasks_limit = 0
"""


# What the demo writes under OUT: cleared when a rerun changes the inputs or settings, because each
# stage refuses (curate, tokenize) or resumes (train) an output made from other inputs.
OUTPUTS = ("input", "corpus", "split", "eval", "tokenizer.json", "tokens", "mixture.toml", "mixture.json",
           "plan.json", "train.toml", "run", "report.html", "summary.json")


def crawl_identity() -> dict:
    """The shipped crawl as the demo knows it: its bytes, not where this checkout keeps them."""
    data = CRAWL.read_bytes()
    return {"name": CRAWL.name, "size": len(data), "xxh3": xxhash.xxh3_64_hexdigest(data)}


def shipped_crawl(out: Path) -> Path:
    """OUT/input/crawl.warc.gz, the copy of the shipped crawl that stage 1 reads. A curate job is
    its inputs' paths (docs/curation.md): read from the package, a clone elsewhere or a moved
    checkout was another job and the demo into the same OUT started over (~10 min); read from
    OUT, it is the same path while OUT is. Rewritten only when its bytes differ (the job's stamp)."""
    copy = out / "input" / CRAWL.name
    copy.parent.mkdir(parents=True, exist_ok=True)
    new = copy.with_name(copy.name + ".new")
    cio.write_bytes_atomic(new, CRAWL.read_bytes())
    _keep_if_same(new, copy)
    return copy


def prepare_out(s: DemoSettings, console) -> None:
    """OUT/demo.json records the settings; a rerun with the same ones resumes, other ones start over.
    The shipped crawl is recorded by its bytes (`crawl_identity`), your --data by their paths (a
    curate job's identity: the demo's curate refuses another path anyway), and the belt's default
    extractor (`extractor`)."""
    inputs = [str(Path(p).resolve()) for p in s.data]
    me = {"crawl": crawl_identity(), "inputs": inputs, "steps": s.steps, "vocab": s.vocab,
          "extract": extractor()}
    marker = s.out / "demo.json"
    before = json.loads(marker.read_text()) if marker.exists() else None
    if before is None and s.out.is_dir() and any(s.out.iterdir()):
        if not (s.out / "corpus" / "plan.json").exists():  # a demo written before demo.json existed has one
            raise UserError(f"{s.out} is not empty and was not written by `pretrain demo`; choose another -o")
    if s.out.is_dir() and before != me:
        if before is not None or any((s.out / n).exists() for n in OUTPUTS):
            why = _what_differs(before, me)
            console.print(f"[yellow]{s.out} holds a demo of other inputs or settings ({why}): "
                          "starting it over[/]", highlight=False)
        for name in OUTPUTS:
            p = s.out / name
            if p.is_dir():
                shutil.rmtree(p)
            else:
                p.unlink(missing_ok=True)
    s.out.mkdir(parents=True, exist_ok=True)
    cio.write_json_atomic(marker, me)


def extractor() -> str:
    """The curate belt's default extractor, as the demo records it: when the default changes, the
    demo's corpus is another curate job (refused), so the demo starts over (2026-12-03: resiliparse
    -> blocks strict)."""
    from pretrain.curate.extract import ExtractConfig

    cfg = ExtractConfig()
    return cfg.backend + (" strict" if cfg.backend == "blocks" and cfg.strict else "")


def _what_differs(before: dict | None, me: dict) -> str:
    """The first setting of OUT/demo.json that differs from this run's, in words."""
    if not isinstance(before, dict):
        return "written before pretrain recorded the demo's settings"
    if "crawl" not in before:  # sessions 11-13 recorded the crawl's absolute path, read in place
        return "written by an older pretrain, which read the shipped crawl from its checkout"
    if before["crawl"] != me["crawl"]:
        return "the shipped crawl differs (another pretrain version)"
    for key in ("steps", "vocab"):
        if before.get(key) != me[key]:
            return f"{key} {before.get(key)} -> {me[key]}"
    was = before.get("extract", "resiliparse")  # a demo.json without the key: the default until 2026-12-03
    if was != me["extract"]:
        return f"the curate belt's default extractor {was} -> {me['extract']}"
    was, now = before.get("inputs") or [], me["inputs"]
    gone, new = [p for p in was if p not in now], [p for p in now if p not in was]
    said = [f"{word} {paths[0]}" + (f" and {len(paths) - 1} more" if len(paths) > 1 else "")
            for word, paths in (("new input", new), ("no input", gone)) if paths]
    return "; ".join(said) or "inputs in another order"


def run_demo(s: DemoSettings) -> dict:
    console = demo_console()
    out = s.out
    prepare_out(s, console)
    inputs = [str(shipped_crawl(out)), *s.data]
    workers = ["--workers", str(s.workers)] if s.workers else []
    _run(console, "1. curate the crawl", ["curate", *inputs, "-o", str(out / "corpus"), *workers, "--quiet"])
    tp, hp, n_train, n_held = split_heldout(out / "corpus", out)
    console.print(f"held-out split: {n_train} training documents, {n_held} held out")
    ppl, mc = write_eval_files(hp, out / "eval")
    console.print(f"evaluation material from the held-out documents: {ppl.name}, {mc.name} ({SMOKE_NOTE})")
    tok = out / "tokenizer.json"
    _run(
        console,
        "2. train a byte-level BPE tokenizer",
        ["tokenizer", "train", str(tp), "-o", str(tok), "--vocab-size", str(s.vocab)],
    )
    _run(
        console,
        "3. tokenize into memory-mappable shards",
        [
            "tokenize",
            str(tp),
            "--tokenizer",
            str(tok),
            "-o",
            str(out / "tokens" / "web"),
            "--source",
            "web",
            *workers,
        ],
    )
    _run(
        console,
        "   ... and the held-out documents",
        [
            "tokenize",
            str(hp),
            "--tokenizer",
            str(tok),
            "-o",
            str(out / "tokens" / "heldout"),
            "--source",
            "heldout",
            *workers,
        ],
    )
    vocab = json.loads((out / "tokens" / "web" / "manifest.json").read_text())["vocab_size"]
    budget = s.steps * 16 * 128
    (out / "mixture.toml").write_text(
        f'budget = {budget}\nseq_len = 128\n[sources.web]\npath = "tokens/web"\nweight = 1.0\n'
    )
    def show_mix(text: str) -> None:
        (out / "mixture.json").write_text(text)
        # the table `pretrain mix` prints, not the JSON the report reads (14-digit epochs, "warning": true)
        shown = json.loads(text)
        console.print(mix_table(shown["budget"], shown["weights_sum"], shown["sources"]), highlight=False)
        # the command above says --json: what was shown is what it prints without it (a newcomer copying it)
        console.print(f"[dim](the table `pretrain mix {out / 'mixture.toml'}` prints; --json wrote "
                      f"{out / 'mixture.json'} for the report)", highlight=False)

    _run(console, "4. the mixture: epochs per source", ["mix", str(out / "mixture.toml"), "--json"],
         capture=True, show=show_mix)

    def show_plan(text: str) -> None:
        (out / "plan.json").write_text(text)
        plan = json.loads(text)
        console.print(headline_text(plan_headline(plan)), highlight=False)
        expect = (plan.get("headline") or {}).get("published_note")
        if expect:  # an 8B model's MFU against the published runs: what `pretrain plan` says first
            console.print(f"Expect: {expect}", highlight=False)
        console.print(f"[dim](its headline; without --json `pretrain plan` prints the whole plan; --json "
                      f"wrote {out / 'plan.json'} for the report)", highlight=False)

    _run(console, "5. plan: what this recipe would take at scale (Llama-3-8B on 64 H100s, 1T tokens)",
         ["plan", "--model", "llama-3-8b", "--gpus", "64", "--gpu", "h100", "--tokens", "1T", "--json"],
         capture=True, show=show_plan)
    run = out / "run"
    cfg = out / "train.toml"
    cfg.write_text(train_recipe(out, run, s.steps, vocab))
    before = _metric_lines(run / "metrics.jsonl")
    _run(
        console,
        f"6. train a tiny model on the CPU ({s.steps} steps)",
        ["train", str(cfg), "--quiet"],
        watch=lambda: _training_line(run / "metrics.jsonl", s.steps, before),
    )
    sample = _run(
        console,
        "7. sample from the newest checkpoint",
        ["sample", str(run), "--prompt", "The", "--tokens", "80", "--seed", "0"],
        capture=True, show=lambda text: console.print(text.strip(), highlight=False),
    )
    (run / "samples.txt").write_text(sample)
    _run(
        console,
        "8. evaluate the final model (held-out perplexity, the smoke task)",
        ["eval", str(run), "--tasks", eval_specs(out), "--quiet"],
        capture=True, show=lambda text: console.print(text.strip(), highlight=False),
    )
    report = out / "report.html"
    _run(
        console,
        "9. report",
        [
            "report",
            str(out / "corpus"),
            str(out / "tokens" / "web"),
            str(out / "mixture.json"),
            str(out / "plan.json"),
            str(run),
            "-o",
            str(report),
            "--title",
            "pretrain demo: crawl to base model",
        ],
    )
    return summarize(out, report, console)


def summarize(out: Path, report: Path, console) -> dict:
    stats = json.loads((out / "corpus" / "stats.json").read_text())
    manifest = json.loads((out / "tokens" / "web" / "manifest.json").read_text())
    steps = [json.loads(x) for x in (out / "run" / "metrics.jsonl").read_text().splitlines() if x.strip()]
    train = [r for r in steps if "loss" in r and "event" not in r]  # per-step lines
    evals = [r for r in steps if "eval_loss" in r]  # written as {"event": "eval", ...} lines
    summary = {
        "documents_read": stats["documents"]["read"],
        "documents_kept": stats["documents"]["kept"],
        "tokens": manifest.get("tokens", manifest.get("total_tokens")),
        "first_loss": train[0]["loss"] if train else None,
        "final_loss": train[-1]["loss"] if train else None,
        "final_eval_loss": evals[-1]["eval_loss"] if evals else None,
        "tokens_per_s": tokens_per_s(train),  # the report's definition: median over logged steps
        "report": str(report),
    }
    console.rule("[bold]demo summary")
    for k, v in summary.items():
        console.print(f"{k:>18}: {_shown(k, v)}", highlight=False)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    # the demo's last screen is where a newcomer asks "and now?" (session 14 sweep)
    console.print(f"next: open {report} in a browser; add your own files to the crawl with `pretrain demo "
                  "--data DIR` (make demo DATA=DIR), or run each stage yourself as README.md's \"The path by "
                  "hand\" does", highlight=False)
    return summary


def _shown(key: str, v) -> str:
    """A summary value as the report shows it: counts with thousands separators, tokens/s whole
    (a median of noisy per-step figures), losses to 3 decimals."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, int) or key == "tokens_per_s":
        return f"{v:,.0f}"
    return f"{v:.3f}"
