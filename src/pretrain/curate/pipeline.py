"""The belt: build it from a config, run it shard by shard, dedup globally, write the corpus.

Stages (each unit writes atomically and leaves a done marker carrying the config hash):
  A. per shard (one input file): read -> url_filter -> extract -> language -> gopher_repetition
     -> gopher_quality -> c4_quality -> fineweb_quality -> classifier -> decontaminate -> pii;
     survivors go to work/kept/, rejects to rejects/, dedup signatures to work/dedup/.
  B. global: exact then near duplicates over every shard's signatures -> one removal list.
  C. per shard: survivors minus the removal list -> data/; dedup rejects (with the kept twin).
The FineWeb order (datatrove examples/fineweb.py) with PII moved before dedup so that stage C
only removes. Priorities for "first kept" are (shard index, position), fixed by the shard plan,
so the output is the same for any number of workers and any executor.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pretrain import config as cfgmod
from pretrain.curate import io
from pretrain.curate.classifier import ClassifierConfig, build_classifier_steps
from pretrain.curate.decontam import DecontamConfig, build_decontam_step
from pretrain.curate.dedup import DedupConfig, find_duplicates, load_removals, shard_ok, sign_shard
from pretrain.curate.document import Document
from pretrain.curate.extract import ExtractConfig, build_extract_step
from pretrain.curate.language import LanguageConfig, build_language_step
from pretrain.curate.pii import PIIConfig, build_pii_step
from pretrain.curate.readers import ReaderConfig, list_inputs, read_documents, source_name
from pretrain.curate.rules import RulesConfig, build_rule_steps
from pretrain.curate.step import Step, run_steps
from pretrain.curate.urlfilter import URLFilterConfig, build_url_filter
from pretrain.errors import UserError
from pretrain.progress import ShardMeter

MAX_ERROR_EXAMPLES = 100
SHARD_BITS = 40  # priority = shard << 40 | position: 2^40 records per shard, 2^23 shards


@dataclass
class CurateConfig:
    """Every section of the belt; `pretrain curate --set section.key=value` overrides any field."""

    reader: ReaderConfig = field(default_factory=ReaderConfig)
    url_filter: URLFilterConfig = field(default_factory=URLFilterConfig)
    extract: ExtractConfig = field(default_factory=ExtractConfig)
    language: LanguageConfig = field(default_factory=LanguageConfig)
    rules: RulesConfig = field(default_factory=RulesConfig)
    classifier: ClassifierConfig = field(default_factory=ClassifierConfig)
    decontam: DecontamConfig = field(default_factory=DecontamConfig)
    pii: PIIConfig = field(default_factory=PIIConfig)
    dedup: DedupConfig = field(default_factory=DedupConfig)


def build_steps(cfg: CurateConfig) -> list[Step]:
    """The per-document part of the belt, in order; disabled steps are left out."""
    steps: list[Step | None] = [
        build_url_filter(cfg.url_filter),
        build_extract_step(cfg.extract),
        build_language_step(cfg.language),
        *build_rule_steps(cfg.rules),
        *build_classifier_steps(cfg.classifier),
        build_decontam_step(cfg.decontam),
        build_pii_step(cfg.pii),
    ]
    return [s for s in steps if s is not None]


# ----------------------------------------------------------------------------- layout


@dataclass(frozen=True)
class Layout:
    """Where every file of a run lives under OUT."""

    out: Path

    def kept(self, shard: int) -> Path:
        return self.out / "work" / "kept" / f"shard_{shard:05d}.jsonl.zst"

    def shard_stats(self, shard: int) -> Path:
        return self.out / "work" / "stats" / f"shard_{shard:05d}.json"

    def rejects(self, shard: int) -> Path:
        return self.out / "rejects" / f"filters_{shard:05d}.jsonl.zst"

    def dedup_rejects(self, shard: int) -> Path:
        return self.out / "rejects" / f"dedup_{shard:05d}.jsonl.zst"

    def data(self, shard: int) -> Path:
        return self.out / "data" / f"shard_{shard:05d}.jsonl.zst"

    @property
    def dedup_dir(self) -> Path:
        return self.out / "work" / "dedup"

    @property
    def removals_marker(self) -> Path:
        return self.out / "work" / "removals"


@dataclass(frozen=True)
class ShardTask:
    shard: int
    path: str
    root: str
    out: str
    cfg: CurateConfig
    cfg_hash: str


# ----------------------------------------------------------------------------- stage A


def reject_record(doc: Document, step: str, reason: str, **extra: Any) -> dict:
    rec = {"id": doc.id, "url": doc.url, "source": doc.source, "step": step, "reason": reason}
    rec.update(extra)
    rec["metadata"] = doc.metadata  # the scores that decided it (language score, contamination, ...)
    rec["text"] = doc.text
    return rec


def run_shard(task: ShardTask) -> dict:
    """Stage A for one shard: filters, rejects, dedup signatures. Skips when already done."""
    lay = Layout(Path(task.out))
    if io.is_done(lay.shard_stats(task.shard), task.cfg_hash) and shard_ok(
        lay.dedup_dir, task.shard, task.cfg.dedup
    ):  # done, and its signature files check out (a damaged one makes the shard run again)
        return json.loads(lay.shard_stats(task.shard).read_text())
    t0 = time.time()
    errors: list[dict] = []
    error_counts: Counter[str] = Counter()

    def on_error(path: str, record: object, reason: str) -> None:
        error_counts[reason.split(":")[0]] += 1
        if len(errors) < MAX_ERROR_EXAMPLES:
            errors.append({"file": str(path), "record": record, "reason": reason})

    rejects: list[dict] = []
    steps = build_steps(task.cfg)
    for step in steps:
        step.on_reject = lambda d, s, r: rejects.append(reject_record(d, s, r))
    read_stats: Counter[str] = Counter()
    docs = read_documents(
        Path(task.path),
        task.cfg.reader,
        on_error,
        source=source_name(Path(task.path), task.root),
        stats=read_stats,
    )
    kept: list[Document] = []
    n_read = 0

    def counted(it):
        nonlocal n_read
        for d in it:
            n_read += 1
            yield d

    meter = ShardMeter(Path(task.out) / "work" / "progress" / f"{task.shard}.json", task.path)
    try:
        for doc in run_steps(steps, meter.wrap(counted(docs))):
            kept.append(doc)
    finally:
        for step in steps:  # e.g. the extract step's time-bounded child process
            if hasattr(step, "close"):
                step.close()
    io.write_jsonl_zst(lay.kept(task.shard), (d.to_json() for d in kept))
    io.write_jsonl_zst(lay.rejects(task.shard), rejects)
    sign_shard(
        ((d, (task.shard << SHARD_BITS) | i) for i, d in enumerate(kept)),
        task.shard,
        lay.dedup_dir,
        task.cfg.dedup,
    )
    stats = {
        "shard": task.shard,
        "input": task.path,
        "read": n_read,
        "kept": len(kept),
        "records": dict(read_stats),
        "leaks": [leak for st in steps for leak in getattr(st, "leaks", [])],
        "steps": {s.name: dict(s.stats) for s in steps},
        "errors": {"count": sum(error_counts.values()), "by_reason": dict(error_counts), "examples": errors},
        "seconds": round(time.time() - t0, 3),
    }
    io.write_json_atomic(lay.shard_stats(task.shard), stats)
    io.mark_done(lay.shard_stats(task.shard), {"config_hash": task.cfg_hash})
    return stats


# ----------------------------------------------------------------------------- stage C


def write_shard(task_and_removals: tuple[ShardTask, str]) -> dict:
    """Stage C for one shard: drop what dedup removed; write data/ and dedup rejects."""
    task, removals_path = task_and_removals
    lay = Layout(Path(task.out))
    if io.is_done(lay.data(task.shard), task.cfg_hash):
        return json.loads(io.done_marker(lay.data(task.shard)).read_text())["counts"]
    removals = load_removals(Path(removals_path))
    kept, dropped = [], []
    for rec in io.read_jsonl_zst(lay.kept(task.shard)):
        hit = removals.get(rec["id"])
        if hit is None:
            kept.append(rec)
        else:
            step, reason, twin = hit
            dropped.append(
                {
                    "id": rec["id"],
                    "url": rec.get("url"),
                    "source": rec.get("source"),
                    "step": step,
                    "reason": reason,
                    "kept_id": twin,
                    "text": rec["text"],
                }
            )
    io.write_jsonl_zst(lay.dedup_rejects(task.shard), dropped)
    io.write_jsonl_zst(lay.data(task.shard), kept)
    counts = {
        "in": len(kept) + len(dropped),
        "kept": len(kept),
        "dropped": dict(Counter(f"{d['step']}.{d['reason']}" for d in dropped)),
    }
    io.mark_done(lay.data(task.shard), {"config_hash": task.cfg_hash, "counts": counts})
    return counts


# ----------------------------------------------------------------------------- the job


def plan_shards(inputs: list[str], out: Path, cfg: CurateConfig) -> list[ShardTask]:
    """One shard per input file, in sorted order; the plan is saved and checked on rerun."""
    files = list_inputs(inputs)
    if not files:
        raise UserError(f"no input files found in {inputs}")
    cfg_hash = cfgmod.config_hash(cfg)
    plan = {"config_hash": cfg_hash, "inputs": [str(f) for f in files]}
    plan_path = out / "plan.json"
    if plan_path.exists():
        old = json.loads(plan_path.read_text())
        if old != plan:
            raise UserError(f"{out} holds a run with other inputs or config; use a new --output")
    else:
        io.write_json_atomic(plan_path, plan)
    roots = [_root_of(f, inputs) for f in files]
    return [
        ShardTask(i, str(f), str(r), str(out), cfg, cfg_hash) for i, (f, r) in enumerate(zip(files, roots))
    ]


def _root_of(f: Path, inputs: list[str]) -> Path:
    for raw in inputs:
        p = Path(raw)
        if p.is_dir() and p.resolve() in f.resolve().parents:
            return p
    return f.parent


def aggregate(shard_stats: list[dict], write_counts: list[dict], seconds: float) -> dict:
    """stats.json: per step in/kept/dropped by reason, dedup, errors, totals."""
    steps: dict[str, Counter] = {}
    for s in shard_stats:
        for name, c in s["steps"].items():
            steps.setdefault(name, Counter()).update(c)
    dedup: Counter = Counter()
    for w in write_counts:
        dedup.update(w["dropped"])
    errors: Counter = Counter()
    examples: list = []
    for s in shard_stats:
        errors.update(s["errors"]["by_reason"])
        examples.extend(s["errors"]["examples"])
    records: Counter = Counter()
    for s in shard_stats:
        records.update(s.get("records", {}))
    read = sum(s["read"] for s in shard_stats)
    kept = sum(w["kept"] for w in write_counts)
    per_step = {name: _step_summary(c) for name, c in steps.items()}
    dd_in = sum(w["in"] for w in write_counts)
    for name in ("exact_dedup", "near_dedup"):
        by = {k.split(".", 1)[1]: v for k, v in dedup.items() if k.startswith(name + ".")}
        dropped = sum(by.values())
        per_step[name] = {"in": dd_in, "kept": dd_in - dropped, "dropped": by}
        dd_in -= dropped
    return {
        "documents": {"read": read, "kept": kept, "dropped": read - kept},
        "records": dict(sorted(records.items())),
        "steps": per_step,
        "step_order": list(per_step),  # stats.json is written with sorted keys; this keeps belt order
        "errors": {
            "count": sum(errors.values()),
            "by_reason": dict(errors),
            "examples": examples[:MAX_ERROR_EXAMPLES],
        },
        "shards": len(shard_stats),
        "wall_seconds": round(seconds, 3),
    }


def _step_summary(c: Counter) -> dict:
    dropped = {k.split(".", 1)[1]: v for k, v in sorted(c.items()) if k.startswith("dropped.")}
    out = {"in": c.get("in", 0), "kept": c.get("kept", 0), "dropped": dropped}
    extra = {k: v for k, v in sorted(c.items()) if k not in ("in", "kept") and not k.startswith("dropped.")}
    if "seconds" in extra:
        extra["seconds"] = round(extra["seconds"], 4)
    out.update(extra)
    return out


def curate(inputs: list[str], out: str | Path, cfg: CurateConfig, executor=None, progress=None) -> dict:
    """Run the whole belt; returns the stats also written to OUT/stats.json."""
    from pretrain.curate.executor import LocalExecutor

    executor = executor or LocalExecutor()
    out = Path(out)
    _check_writable(out)
    t0 = time.time()
    tasks = plan_shards(inputs, out, cfg)
    io.write_bytes_atomic(out / "config.toml", cfgmod.dumps(cfg).encode())
    meters = out / "work" / "progress"  # ShardMeter files: the bar moves inside one big input
    tick = progress.start("filter", len(tasks), [t.path for t in tasks], meters) if progress else None
    shard_stats = executor.map(run_shard, tasks, on_result=tick)
    if progress:
        progress.stop("filter")
    removals = _global_dedup(tasks, out, cfg, executor)
    tick = progress.start("write", len(tasks)) if progress else None
    write_counts = executor.map(write_shard, [(t, str(removals)) for t in tasks], on_result=tick)
    if progress:
        progress.stop("write")
    stats = aggregate(shard_stats, write_counts, time.time() - t0)
    _decontam_report(cfg, shard_stats, stats, out)
    io.write_json_atomic(out / "stats.json", stats)
    return stats


def _decontam_report(cfg: CurateConfig, shard_stats: list[dict], stats: dict, out: Path) -> None:
    """OUT/decontam_report.json: per benchmark, which items leaked into which documents."""
    from pretrain.curate.decontam import build_report, load_index

    if not cfg.decontam.enabled or not cfg.decontam.benchmarks:
        return
    leaks = [leak for s in shard_stats for leak in s.get("leaks", [])]
    counts = Counter({k: v for k, v in stats["steps"].get("decontaminate", {}).items() if isinstance(v, int)})
    index = load_index(tuple(cfg.decontam.benchmarks), cfg.decontam.n, cfg.decontam.min_words)
    io.write_json_atomic(out / "decontam_report.json", build_report(index, leaks, counts))


def _global_dedup(tasks: list[ShardTask], out: Path, cfg: CurateConfig, executor) -> Path:
    lay = Layout(out)
    marker = lay.removals_marker
    cfg_hash = tasks[0].cfg_hash
    if io.is_done(marker, cfg_hash):
        return Path(json.loads(io.done_marker(marker).read_text())["path"])
    path = find_duplicates(lay.dedup_dir, len(tasks), cfg.dedup, map_fn=executor.map)
    io.mark_done(marker, {"config_hash": cfg_hash, "path": str(path)})
    return path


def _check_writable(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-probe"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise UserError(f"cannot write to output directory {out}: {e.strerror or e}") from e
