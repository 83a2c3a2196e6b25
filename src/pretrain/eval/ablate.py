"""Data ablations: small twin models trained on variants of the data at the same token budget.

"Mixture weights are usually chosen by training small models on candidate mixtures and comparing
them" (the lesson); the same method measures what a curation step does. Each variant is a text
corpus, optionally passed through the belt's deduplication (`pretrain dedup`: exact + MinHash near
dedup over its paragraphs); every twin trains with the same recipe for the same number of steps
(so the same tokens), then is evaluated: memorization of the planted lines, of random training
windows, and perplexity on held-out text, plus any `pretrain eval` tasks.

The shipped experiment (`recipes/ablate-dedup.toml`) reproduces the lesson's claim about duplicates
on real text: a book's paragraphs with real sentences from another book planted `copies` times each,
trained raw and after dedup; the regurgitation rate is the share of planted sentences whose next m
tokens the model reproduces from their first k (Carlini et al. 2022). Lee et al. 2022 measured about
ten times less memorized text after deduplication.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pretrain import config as cfgmod
from pretrain.config import bounded
from pretrain.errors import UserError
from pretrain.untrusted import load_toml


@dataclass
class Planted:
    text: str = "../shared/data/lm/gutenberg/sherlock.txt"  # the corpus: paragraphs of a real book
    lines_from: str = "../shared/data/lm/gutenberg/nltk-selection/austen-emma.txt"  # planted sentences
    base_chars: int = bounded(20_000, lo=1, hi=10**9, why="characters of the book trained on")
    lines: int = bounded(8, lo=1, hi=10**5, why="sentences planted")
    copies: int = bounded(40, lo=1, hi=10**5, why="copies of each planted sentence")
    # the text's tail after base_chars: perplexity, never trained on
    heldout_chars: int = bounded(8_000, lo=1, hi=10**9, why="characters of held-out text")
    seed: int = bounded(0, hi=2**63 - 1, why="numpy's default_rng seed")


@dataclass
class Variant:
    name: str
    data: str = ""  # a text file; "" = the planted corpus
    dedup: bool = False  # run the belt's exact + near dedup over the paragraphs first


@dataclass
class AblationConfig:
    out: str = "runs/ablate"
    steps: int = bounded(500, lo=1, hi=10**7, why="training steps of each twin")
    set: list = field(default_factory=list)  # training overrides for every twin (pretrain train --set)
    tasks: str = ""  # extra `pretrain eval` tasks for every twin
    k: int = bounded(32, lo=1, hi=2**16, why="tokens of the memorization prefix")
    m: int = bounded(32, lo=1, hi=2**16, why="tokens of the suffix to reproduce")
    random_windows: int = bounded(64, hi=10**6, why="random training windows probed per twin; 0 = none")
    planted: Planted = field(default_factory=Planted)
    variants: list = field(default_factory=list)


def load_config(path: str | Path, overrides: dict | None = None) -> AblationConfig:
    p = Path(path)
    if not p.is_file():
        raise UserError(f"ablation config not found: {p}")
    raw = load_toml(p, what="ablation config")
    raw.update(overrides or {})
    try:
        variants = raw.pop("variants", [])
        if not isinstance(variants, list) or not all(isinstance(v, dict) for v in variants):
            raise UserError("[[variants]] must be tables, each with a name")
        # every number in range (bounded fields), strings where strings go: one line each
        cfg = cfgmod.from_dict(AblationConfig, raw)
        cfg.variants = [cfgmod.from_dict(Variant, v, "variants.") for v in variants]
    except UserError as e:
        raise UserError(f"{p}: {e}") from None
    if len({v.name for v in cfg.variants}) != len(cfg.variants) or not cfg.variants:
        raise UserError(f"{p}: give at least one [[variants]] with distinct names")
    return cfg


SHARED = "../shared/data/"  # where the shipped recipe's texts lie in a checkout beside ../shared


def _resolve(path: str, base: Path) -> Path:
    """Relative paths are tried from the working directory, then from the config's folder; a
    `../shared/data/...` path not found either way is read under $PRETRAIN_SHARED_DATA, the data
    folder `pretrain eval` finds its benchmarks in (a clone elsewhere than beside ../shared)."""
    p = Path(path)
    if p.is_absolute() or p.exists():
        return p
    shared = os.environ.get("PRETRAIN_SHARED_DATA")
    if path.startswith(SHARED) and shared and not (base / p).exists():
        return Path(shared) / path[len(SHARED):]
    return base / p


def _fallback_text() -> str:
    from pydoc_data.topics import topics  # every CPython ships it: the experiment runs on a fresh clone

    return "\n\n".join(topics[k] for k in sorted(topics))


def planted_corpus(pc: Planted, base: Path) -> tuple[list[str], list[str], str]:
    """(paragraphs with the planted sentences inserted, the planted sentences, held-out text)."""
    src, lines_src = _resolve(pc.text, base), _resolve(pc.lines_from, base)
    if not src.is_file() or not lines_src.is_file():
        print(f"ablate: {src if not src.is_file() else lines_src} not found; using CPython's pydoc text "
              "(set planted.text / planted.lines_from)", file=sys.stderr)
    full = src.read_text(errors="replace") if src.is_file() else _fallback_text()
    body, heldout = full[:pc.base_chars], full[pc.base_chars:pc.base_chars + pc.heldout_chars]
    pool_text = lines_src.read_text(errors="replace") if lines_src.is_file() else full[-200_000:]
    sentences = re.split(r"(?<=[.!?])\s+", " ".join(pool_text.split()))
    pool = sorted({t for t in sentences if 100 <= len(t) <= 200})
    if len(pool) < pc.lines:
        raise UserError(f"{lines_src}: fewer than {pc.lines} lines of 100-200 characters to plant")
    rng = np.random.default_rng(pc.seed)
    lines = [pool[i] for i in rng.choice(len(pool), size=pc.lines, replace=False)]
    paras = [p for p in body.split("\n\n") if p.strip()]
    for line in lines:
        for _ in range(pc.copies):
            paras.insert(int(rng.integers(len(paras) + 1)), line)
    return paras, lines, heldout


def dedup_paragraphs(paras: list[str], work: Path) -> list[str]:
    """The belt's dedup (exact + MinHash near duplicates) over paragraphs as documents, in order."""
    from pretrain.curate.dedup_job import job_config, run_dedup
    from pretrain.curate.io import read_jsonl_zst

    work.mkdir(parents=True, exist_ok=True)
    src = work / "paragraphs.jsonl"
    text = "".join(json.dumps({"id": f"p{i:07d}", "text": t}) + "\n" for i, t in enumerate(paras))
    if not src.is_file() or src.read_text() != text:  # the same bytes keep their mtime: the dedup job
        src.write_text(text)  # below resumes (it refuses an input rewritten since it listed it)
    out = work / "dedup"
    run_dedup([str(src)], out, job_config("dedup", overrides=['keep="first"']))
    kept = {r["id"]: r["text"] for f in sorted((out / "data").glob("*.jsonl.zst")) for r in read_jsonl_zst(f)}
    return [kept[k] for k in sorted(kept)]


def twin_config(cfg: AblationConfig, text_path: Path, run: Path):
    """The training config of one twin: the tiny CPU shape, the same steps for every variant."""
    from pretrain import config as cfgmod
    from pretrain.train.config import RunConfig
    from pretrain.train.testing import TINY

    over = [*TINY, f"train.out={run}", f"data.path={text_path}", f"train.steps={cfg.steps}",
            "data.eval_fraction=0", "checkpoint.every=1000000", "log.tensorboard=false",
            "stability.rollback=false", *cfg.set]  # memorizing drives the loss low: batches without
    # planted lines then look like spikes, and rolling back would change what each twin sees
    return cfgmod.load(RunConfig, None, over)


def _new_twin_if_changed(vdir: Path, twin) -> bool:
    """A twin trained under other settings (steps, `set`) is trained anew, as for a new corpus: continuing
    it would give numbers no fresh ablation gives (another schedule), and twins must be comparable.
    True when an earlier twin was removed for that (the user is told)."""
    import shutil

    from pretrain import config as cfgmod

    mark, want = vdir / "twin.hash", cfgmod.config_hash(twin)
    if mark.is_file() and mark.read_text().strip() == want:
        return False
    removed = mark.is_file() and (vdir / "run").is_dir()
    shutil.rmtree(vdir / "run", ignore_errors=True)
    tmp = mark.with_name("twin.hash.tmp")
    tmp.write_text(want + "\n")
    tmp.replace(mark)
    return removed


def evaluate_twin(cfg: AblationConfig, run: Path, text: str, lines: list[str], heldout: str) -> dict:
    """Memorization of the planted lines and of random windows; bits per byte on held-out text."""
    from pretrain.eval.lm import from_run
    from pretrain.eval.memorization import count_occurrences, extracted, probe
    from pretrain.eval.perplexity import text_perplexity

    model, step = from_run(run)
    stream = np.asarray(model.encode(text), dtype=np.int64)
    res: dict = {"step": step, "tokens_in_corpus": int(stream.size)}
    seqs = [ids for ids in (model.encode(ln) for ln in lines) if len(ids) >= cfg.k + cfg.m]
    if seqs:
        hits = extracted(model, seqs, cfg.k, cfg.m)
        res["planted_lines"] = len(seqs)
        res["planted_copies"] = [count_occurrences(stream, s) for s in seqs]
        res["planted_memorized"] = sum(hits) / len(seqs)
    mem = probe(model, stream, cfg.k, cfg.m, cfg.random_windows, seed=0)
    res["random_memorized"] = mem["rate"]
    if heldout.strip():
        res["heldout_bits_per_byte"] = text_perplexity(model, heldout)["bits_per_byte"]
    if cfg.tasks:
        from pretrain.eval.suite import benchmarks_dir, run_tasks, split_specs

        results, _ = run_tasks(model, split_specs(cfg.tasks), benchmarks_dir(None), limit=200)
        res["tasks"] = {r["task"]: r["metrics"] for r in results}
    return res


PROGRESS_S = 30.0  # seconds between a twin's progress lines


class _progress:
    """`[raw] step 120/500 (31 s)` every PROGRESS_S while a twin trains, then `[raw] trained 500
    steps in 242 s` (a finished twin: the trainer's "already complete" line). The twins train quietly
    (their step lines would be 1,000 lines), and the shipped recipe's four minutes and more were
    silent but for spike lines (session 14 sweep)."""

    def __init__(self, name: str, trainer, steps: int, say):
        self.name, self.trainer, self.steps, self.say = name, trainer, steps, say

    def __enter__(self):
        import threading
        import time

        self.t0, self.first, self.stop = time.monotonic(), self.trainer.step, threading.Event()

        def loop():
            while not self.stop.wait(PROGRESS_S):
                self.say(f"[{self.name}] step {self.trainer.step:,}/{self.steps:,} "
                         f"({time.monotonic() - self.t0:.0f} s)")
        self.thread = threading.Thread(target=loop, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, kind, *_):
        import time

        self.stop.set()
        self.thread.join()
        if kind is None and self.trainer.step > self.first:  # a finished twin: the trainer says so
            self.say(f"[{self.name}] trained {self.trainer.step - self.first:,} steps in "
                     f"{time.monotonic() - self.t0:.0f} s")
        return False


def run_ablation(cfg: AblationConfig, base: Path, say=print) -> dict:
    """Build each variant's corpus, train its twin (resuming a finished one is free), evaluate."""
    from pretrain.eval.report import write_json
    from pretrain.train.trainer import Trainer

    out = Path(cfg.out)
    paras, lines, heldout = planted_corpus(cfg.planted, base)
    results = {}
    for v in cfg.variants:
        vdir = out / v.name
        vparas = paras if not v.data else _resolve(v.data, base).read_text(errors="replace").split("\n\n")
        if v.dedup:
            vparas = dedup_paragraphs(vparas, vdir / "work")
        text = "\n\n".join(vparas)
        text_path = vdir / "corpus.txt"
        vdir.mkdir(parents=True, exist_ok=True)
        anew = ""  # an earlier twin here is removed, and the user told why (it was done in silence)
        if not text_path.exists() or text_path.read_text() != text:  # a new corpus: a new twin
            import shutil

            anew = "its corpus changed" if (vdir / "run").is_dir() else ""
            shutil.rmtree(vdir / "run", ignore_errors=True)
            tmp = text_path.with_name("corpus.txt.tmp")
            tmp.write_text(text)
            tmp.replace(text_path)
        twin = twin_config(cfg, text_path, vdir / "run")
        if _new_twin_if_changed(vdir, twin):
            anew = "the twin there was trained under other settings (steps or set)"
        say(f"[{v.name}] {len(vparas):,} paragraphs, {len(text):,} characters; {cfg.steps:,} steps"
            + (f"; trained anew: {anew}" if anew else ""))
        trainer = Trainer(twin, quiet=True, label=v.name)  # its [spike] lines say whose they are
        with _progress(v.name, trainer, cfg.steps, say):
            trainer.fit()
        res = evaluate_twin(cfg, vdir / "run", text, lines if not v.data else [], heldout)
        res.update(paragraphs=len(vparas), dedup=v.dedup,
                   tokens_trained=cfg.steps * trainer.cfg.data.batch_size * trainer.shape.seq_len)
        results[v.name] = res
    doc = {"schema": "pretrain.ablate/1", "planted": vars(cfg.planted), "steps": cfg.steps, "k": cfg.k,
           "m": cfg.m, "variants": results}
    write_json(doc, out / "results.json")
    plot(doc, out / "ablation.png")
    return doc


def table(doc: dict) -> str:
    cols = ("planted_memorized", "random_memorized", "heldout_bits_per_byte")
    head = f"{'variant':<12} {'dedup':<6} {'paragraphs':>10} {'tokens':>9}  "
    head += "  ".join(f"{c:>21}" for c in cols)
    lines = [head, "-" * len(head)]
    for name, r in doc["variants"].items():
        cells = "  ".join(f"{r[c]:>21.4f}" if c in r else f"{'-':>21}" for c in cols)
        dedup = "yes" if r["dedup"] else "no"  # not Python's True/False
        row = f"{name:<12} {dedup:<6} {r['paragraphs']:>10,} {r['tokens_trained']:>9,}  "
        lines.append(row + cells)
    return "\n".join(lines)


def plot(doc: dict, path: Path) -> None:
    """One bar per variant: the planted lines' regurgitation rate (and random windows')."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(doc["variants"])
    planted = [doc["variants"][n].get("planted_memorized", 0.0) for n in names]
    rand = [doc["variants"][n]["random_memorized"] for n in names]
    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.bar(x - 0.2, planted, 0.4, label=f"planted lines (x{doc['planted']['copies']} in raw)")
    ax.bar(x + 0.2, rand, 0.4, label="random training windows")
    ax.set_xticks(x, names)
    ax.set_ylabel(f"memorized ({doc['k']}-token prefix -> {doc['m']} tokens)")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=8)
    fig.tight_layout()
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    tmp.replace(path)
