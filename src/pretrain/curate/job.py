"""The corpus job around the belt: the layout of OUT, the driver of the stages, the stats.

Every corpus command (curate, dedup, decontaminate) runs through `run_job`:
- **Identity.** OUT/plan.json holds what the job is; a rerun of it resumes, another job into the
  same OUT is refused (identity.py).
- **Layout.** OUT/data/ and OUT/rejects/ hold only `*.jsonl.zst` (what `datasets` and datatrove
  read as a folder); done markers, temporary files and intermediate shards live under OUT/work/.
- **Attempts.** Each attempt's wall time, its lock on OUT/work and the debris a killed one left
  (attempts.py).
- **Stages.** The per-document stage, shard by shard; the global dedup over all shards; the
  write stage; each unit skipped when its done marker holds this job's hash.
- **Stats.** One schema for every job (`documents`, `steps` in belt order, `errors`, ...), read by
  the funnel printer and `pretrain report`.
- **Any filesystem.** Inputs and OUT may be fsspec URLs (`s3://`, `gs://`, `memory://`). Outputs go
  to OUT as whole objects (see `io`); the work folder (markers, intermediate shards, dedup
  signatures) stays on a local or shared disk: OUT/work for a local OUT, else `--work-dir` or a
  folder named after OUT under ~/.cache/pretrain/work. An input URL is copied to the work folder's
  tmp/ for the time its shard runs. Object stores never get temporary objects: a URL output is
  written locally and uploaded whole (see `io`).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import xxhash

from pretrain import config as cfgmod
from pretrain.curate import grouping, io
from pretrain.curate.attempts import Attempts, attempt_lock, sweep_debris
from pretrain.curate.card import card, merged
from pretrain.curate.identity import (  # noqa: F401  (list_any_inputs, without_neutral: used from here)
    claim,
    identity,
    list_any_inputs,
    same_job,
    without_neutral,
)
from pretrain.curate.inputs import text_field_for
from pretrain.curate.outputs import abort_open_uploads, check_writable, is_own_output, refuse_foreign
from pretrain.errors import UserError
from pretrain.faults import first_of_kinds, merge_faults
from pretrain.progress import count

if TYPE_CHECKING:
    from pretrain.curate.grouping import ShardsConfig
    from pretrain.curate.pipeline import CurateConfig, ShardTask

MAX_ERROR_EXAMPLES = 100


def default_work_dir(out: str) -> Path:
    """OUT/work for a local OUT; for a URL, a local folder named after it."""
    if not io.is_url(out):
        return Path(out) / "work"
    base = Path(os.environ.get("PRETRAIN_WORK_DIR") or Path.home() / ".cache" / "pretrain" / "work")
    return base / xxhash.xxh3_64_hexdigest(out.rstrip("/").encode())


@dataclass(frozen=True)
class Layout:
    """Where every file of a job lives: outputs under OUT (a path or URL), the rest under `work`."""

    out: str
    work: Path

    def kept(self, shard: int) -> Path:
        return self.work / "kept" / f"shard_{shard:05d}.jsonl.zst"

    def shard_stats(self, shard: int) -> Path:
        return self.work / "stats" / f"shard_{shard:05d}.json"

    def rejects(self, shard: int) -> str:
        return io.join(self.out, "rejects", f"filters_{shard:05d}.jsonl.zst")

    def dedup_rejects(self, shard: int) -> str:
        return io.join(self.out, "rejects", f"dedup_{shard:05d}.jsonl.zst")

    def data(self, shard: int) -> str:
        return io.join(self.out, "data", f"shard_{shard:05d}.jsonl.zst")

    def file(self, name: str) -> str:
        return io.join(self.out, name)

    def marker(self, stage: str, shard: int) -> Path:
        return self.work / "done" / f"{stage}_{shard:05d}.done"

    @property
    def tmp(self) -> Path:
        return self.work / "tmp"

    @property
    def dedup_dir(self) -> Path:
        return self.work / "dedup"

    @property
    def removals_dir(self) -> Path:
        return self.work / "dedup" / "removals_by_shard"

    @property
    def removals_marker(self) -> Path:
        return self.work / "done" / "removals.done"

    @property
    def attempts(self) -> Path:
        return self.work / "attempts.json"


# ----------------------------------------------------------------------------- the driver


def plan_shards(inputs: list[str], lay: Layout, cfg: CurateConfig, job: str,
                stack: contextlib.ExitStack, claimed=None, ready=None,
                exclude: tuple[str, ...] = ()) -> list[ShardTask]:
    """The inputs in sorted order, grouped into shards (grouping.py: by `[shards]`, or as OUT's
    plan grouped them); the job's identity is claimed in OUT, under the attempt lock (held until
    `stack` closes), and an earlier attempt's debris is swept. `claimed()` runs once OUT is this
    job's: what the command says first (its settings echo, which names OUT/config.toml) must not
    come before a refusal, when OUT holds another job's config. `ready(ident)` runs once the
    job's identity is known, before anything is written. The tasks' config holds the `[shards]`
    the job runs with (the plan's); `claimed(cfg)` is given that config, so its echo shows them."""
    from pretrain.curate.pipeline import settle_inputs

    sizes: dict[str, int] = {}
    stamps: dict[str, dict] = {}
    files = [(f, src) for f, src in list_any_inputs(inputs, lay.out, sizes, stamps, exclude)
             if not is_own_output(f, lay.out, lay.work)]  # an OUT inside an input folder
    if not files:
        raise UserError(f"no input files found in {', '.join(map(str, inputs))}")
    # a text field named for .txt/HTML/WARC inputs only was dropped in silence (exit 0, kept 0)
    field = cfg.reader.text_field
    text_field_for(None if field == "text" else field, [Path(f) for f, _ in files])
    ident = identity(job, [f for f, _ in files], cfg, sizes, stamps)
    counts = grouping.group([i["size"] for i in ident["inputs"]], cfg.shards)
    ident["shards"] = grouping.record(cfg.shards, counts)
    refuse_foreign(lay.out)
    if ready is not None:
        ready(ident)
    check_writable(lay.out, lay.work)
    alone = stack.enter_context(attempt_lock(lay))
    if alone is None:
        raise UserError(f"{lay.out} is being written by another attempt right now ({lay.work}/attempt.lock "
                        "is held); let it finish or stop it, then rerun")
    seen, plan = claim(lay, ident)
    used, counts = _plan_grouping(lay, plan, len(files))
    given, cfg = cfg.shards, replace(cfg, shards=used)
    if claimed is not None:  # the settings echo shows the [shards] the job runs with, not the rerun's
        claimed(cfg)
    if used != given:
        print(f"pretrain {job}: {lay.out} was planned with [shards] {grouping.describe(used)} "
              f"({count(len(counts), 'shard')}); the rerun keeps that grouping, not "
              f"{grouping.describe(given)} (those apply to a new --output)", file=sys.stderr)
    if alone:  # OUT holds this job: what its killed attempts left is ours to remove
        sweep_debris(lay)
        if io.is_url(lay.out):
            abort_open_uploads(lay.out)
    return settle_inputs(shard_tasks(files, ident, counts, lay, cfg, seen), lay)


def _plan_grouping(lay: Layout, plan: dict, n_inputs: int) -> tuple[ShardsConfig, list[int]]:
    try:
        return grouping.recorded(plan, n_inputs)
    except (ValueError, TypeError, KeyError) as e:
        raise UserError(f"{lay.file('plan.json')}: {e}; use a new --output") from e


def shard_tasks(files: list[tuple[str, str]], ident: dict, counts: list[int], lay: Layout,
                cfg: CurateConfig, seen: dict[str, dict]) -> list[ShardTask]:
    """One task per shard: its inputs (file, source name, listed size, version seen), in order."""
    from pretrain.curate.pipeline import ShardInput, ShardTask

    listed = ident["inputs"]
    ins = [ShardInput(f, src, size=listed[i]["size"], version=seen.get(listed[i]["path"]))
           for i, (f, src) in enumerate(files)]
    return [ShardTask(n, tuple(ins[i] for i in span), lay.out, cfg, ident["hash"], str(lay.work))
            for n, span in enumerate(grouping.spans(counts))]


def decontaminates(cfg: CurateConfig) -> bool:
    return "decontaminate" in cfg.steps and cfg.decontam.enabled and bool(cfg.decontam.benchmarks)


def _preflight(cfg: CurateConfig, progress=None, index: bool = True) -> None:
    """Fail before writing anything when a step cannot be built (a missing model, list or benchmark file).
    The benchmark index takes seconds (~6 s for llm-foundry's 17 sets; 8.9 s for a 12-shard job's
    sets, session 11): on a terminal a transient line says so, gone before anything else is said.
    `index=False` (`index_needed`: a refusal or nothing left to do) builds none."""
    from pretrain.curate.decontam import load_index
    from pretrain.curate.pipeline import build_family

    if index and decontaminates(cfg):
        shown = progress is not None and progress.enabled
        with (progress.console.status(f"indexing the benchmarks' {cfg.decontam.n}-grams ...")
              if shown else contextlib.nullcontext()):
            load_index(tuple(cfg.decontam.benchmarks), cfg.decontam.n, cfg.decontam.min_words,
                       cfg.decontam.max_grams)
    for name in cfg.steps:  # every step built once here: a missing model or list file is refused
        if name != "decontaminate":  # before OUT/plan.json claims the job for a config that cannot run
            build_family(name, cfg)


def run_job(inputs: list[str], out: str | Path, cfg: CurateConfig, executor=None, progress=None,
            job: str = "curate", work_dir: str | Path | None = None, claimed=None,
            exclude: tuple[str, ...] = ()) -> dict:
    """Run the belt `cfg` over `inputs` into `out` (a path or URL); returns the stats also written
    to OUT/stats.json. `work_dir`: markers and intermediate files (default `default_work_dir`);
    `claimed(cfg)`: called once OUT is known to be this job's, with the config it runs with
    (see `plan_shards`)."""
    from pretrain.curate.executor import LocalExecutor

    executor = executor or LocalExecutor()
    out = str(out).rstrip("/") if io.is_url(out) else str(out)
    started = time.time()  # the attempt's wall time counts the steps' building (a benchmark index)
    lay = Layout(out, Path(work_dir) if work_dir else default_work_dir(out))
    indexed: list[bool] = []

    def ready(ident: dict) -> None:  # the job known, nothing written yet
        indexed.append(decontaminates(cfg) and index_needed(lay, ident))
        _preflight(cfg, progress, indexed[0])

    with contextlib.ExitStack() as stack:
        tasks = plan_shards(inputs, lay, cfg, job, stack, claimed, ready, exclude)
        cfg = tasks[0].cfg  # with the [shards] of OUT's plan
        stats = _run_claimed(tasks, lay, cfg, executor, progress, job, started)
    if decontaminates(cfg):
        stats["this_attempt"]["indexed"] = indexed[0]
    return stats


def index_needed(lay: Layout, ident: dict) -> bool:
    """Whether this attempt must index the benchmarks (seconds): not when OUT holds another job or
    other versions of the inputs (the refusal comes next and alone), nor when every shard is done
    and OUT/decontam_report.json written (a rerun with nothing to do). Read only: OUT is not yet
    claimed. Were a shard to run after all (its outputs deleted since), it builds the index itself."""
    import json

    from pretrain.curate import versions
    from pretrain.curate.report import markers

    plan = lay.file("plan.json")
    try:
        old = json.loads(io.read_bytes(plan)) if io.exists(plan) else None
    except (OSError, ValueError):
        return False  # claim refuses an unreadable plan
    if old is None:
        return True
    if not isinstance(old, dict) or not same_job(old, ident):
        return False
    if isinstance(old.get("versions"), dict):
        try:
            versions.check_rerun(old, ident["versions"])
        except UserError:
            return False
    try:
        shards = len(grouping.recorded(old, len(ident["inputs"]))[1])
    except (ValueError, TypeError, KeyError):
        return False  # claim refuses a plan whose grouping does not fit
    names = markers(lay)
    done = all({lay.marker("filter", i).name, lay.marker("write", i).name} <= names for i in range(shards))
    return not (done and io.exists(lay.file("decontam_report.json")))


def _run_claimed(tasks: list[ShardTask], lay: Layout, cfg: CurateConfig, executor, progress,
                 job: str, started: float | None = None) -> dict:
    from pretrain.curate.pipeline import drop_prefetched, filtered_stats, wait_commits

    filtered = answers(filtered_stats, tasks, lay.out)  # the shards done already: read here, not sent
    if getattr(executor, "in_process", lambda n: False)(len(tasks)):
        tasks = with_prefetch(tasks, [f is None for f in filtered])
    try:
        return _run(tasks, lay, cfg, executor, progress, job, started, filtered)
    finally:
        drop_prefetched(lay)
        try:
            wait_commits()  # a failed job still commits the unit it finished (less to redo)
        except Exception:
            pass  # _run raised already, or waited for this commit and raised its error


def with_prefetch(tasks: list[ShardTask], left: list[bool] | None = None) -> list[ShardTask]:
    """Units that run one after another in this process download the next shard's input URL
    while the current shard runs, and upload their outputs while the next one runs (the waits
    for GETs and PUTs overlap the belt instead of adding to it). `left`: which shards stage A
    still runs (the next one to fetch is the next of those; default all)."""
    chain = [t for t, go in zip(tasks, left or [True] * len(tasks), strict=True) if go]
    nexts = {t.shard: (n.shard, 0, n.path, n.inputs[0].version) if io.is_url(n.path) else None
             for t, n in zip(chain, chain[1:])}
    return [replace(t, prefetch=nexts.get(t.shard), overlap=io.is_url(t.out)) for t in tasks]


def answers(done, items: list, out: str) -> list:
    """`done(item)` for every item (a finished unit's result from its marker, else None). Into an
    object store each asks whether the unit's outputs are there (a HEAD each): threads overlap
    those round trips, as the executor's workers did when every unit was sent to them."""
    if not io.is_url(out) or len(items) < 2:
        return [done(item) for item in items]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(16, len(items)), thread_name_prefix="pretrain-done") as pool:
        return list(pool.map(done, items))


def map_left(executor, fn, items: list, done: list, on_result=None) -> list:
    """`executor.map(fn, items)`, where `done[i]`, when not None, is item i's result read from
    its done marker already: only the others are sent. A finished job's rerun then starts no
    executor (Ray took 14-28 s to start an instance whose tasks only read markers, the local pool
    4-6 s to spawn; now ~1 s either way, session 14), and one with a few shards left sends those."""
    out = list(done)
    if on_result:
        for res in out:
            if res is not None:
                on_result(res)
    left = [i for i, res in enumerate(out) if res is None]
    if left:
        ran = executor.map(fn, [items[i] for i in left], on_result=on_result)
        for i, res in zip(left, ran, strict=True):
            out[i] = res
    return out


def _run(tasks: list[ShardTask], lay: Layout, cfg: CurateConfig, executor, progress, job: str,
         started: float | None = None, filtered: list[dict | None] | None = None) -> dict:
    """The stages; `filtered`: stage A's stats of the shards done already (None for the others)."""
    from pretrain.curate.pipeline import run_shard, step_order, wait_commits, write_shard, written_counts

    clock = Attempts(lay, started)
    io.write_bytes_atomic(lay.file("config.toml"), cfgmod.dumps(cfg).encode(), lay.tmp)
    if not io.is_url(lay.out):  # a shard that keeps nothing writes no file: the folders are there anyway
        for sub in ("data", "rejects"):
            Path(lay.out, sub).mkdir(exist_ok=True)
    from pretrain.curate.report import markers, resuming, shards_left

    names = markers(lay)
    fresh = shards_left(tasks, lay, names)  # this attempt's work, said after the funnel
    said = resuming(tasks, lay, job, clock.count(), names) if progress else None
    if said:
        progress.console.print(said, markup=False, highlight=False, soft_wrap=True)

    def ticker(stage: str):
        by_bytes = stage == "filter" and not any(io.is_url(i.path) for t in tasks for i in t.inputs)
        files = [[i.path for i in t.inputs] for t in tasks] if by_bytes else None  # inside the files
        noun = "file" if all(len(t.inputs) == 1 for t in tasks) else "shard"
        tick = progress.start(stage, len(tasks), files, lay.work / "progress", noun) if progress else None

        def on_result(res) -> None:
            clock.save()
            if tick:
                tick(res)

        return on_result

    shard_stats = map_left(executor, run_shard, tasks, filtered or [None] * len(tasks), ticker("filter"))
    wait_commits()  # every stage A marker is down before dedup reads the shards' work
    if progress:
        progress.stop("filter")
    removals, dedup_summary = _global_dedup(tasks, lay, cfg, executor) if cfg.dedups else (None, {})
    clock.save()
    units = [(t, removals) for t in tasks]
    written = answers(written_counts, units, lay.out)
    write_counts = map_left(executor, write_shard, units, written, ticker("write"))
    wait_commits()
    if progress:
        progress.stop("write")
    clock.save()
    order = step_order(cfg, shard_stats)
    stats = aggregate(job, shard_stats, write_counts, order, dedup_summary, clock.total(), clock.count())
    if fresh or not io.exists(lay.file("decontam_report.json")):  # else the same report is there
        _decontam_report(cfg, shard_stats, stats, lay)
    card_text = dataset_card(job, shard_stats, write_counts)  # before stats.json: that says "done"
    io.write_bytes_atomic(lay.file("README.md"), card_text.encode(), lay.tmp)
    io.write_json_atomic(lay.file("stats.json"), stats, lay.tmp)
    # not in stats.json (the job's record, the same whichever attempt wrote it last): what this
    # attempt did, for the terminal (report.print_funnel)
    return {**stats, "this_attempt": {"shards": len(tasks), "written": fresh, "seconds": clock.last}}


def dataset_card(job: str, shard_stats: list[dict], write_counts: list[dict]) -> str:
    """OUT/README.md: the types every shard wrote, merged in shard order (card.py)."""
    data = merged([w.get("shapes", {}).get("data") for w in write_counts])
    rejects = merged([s.get("shapes", {}).get("rejects") for s in shard_stats]
                     + [w.get("shapes", {}).get("rejects") for w in write_counts])
    return card(data, rejects, job)


def aggregate(job: str, shard_stats: list[dict], write_counts: list[dict], order: list[str],
              dedup_summary: dict, seconds: float, attempts: int = 1) -> dict:
    """stats.json: per step (belt order) in/kept/dropped by reason and seconds, errors, totals."""
    steps: dict[str, Counter] = {name: Counter() for name in order if not name.endswith("_dedup")}
    for s in shard_stats:
        for name, c in s["steps"].items():
            steps.setdefault(name, Counter()).update(c)
    errors: dict[str, int] = {}
    first: dict[str, dict] = {}  # kind -> its first bad record, shards in order
    examples: list = []
    records: Counter = Counter()
    for s in shard_stats:
        part = s["errors"]  # a shard's stats written before kinds: its examples give the firsts
        merge_faults(errors, part["by_reason"], first, part.get("first") or first_of_kinds(part["examples"]))
        examples.extend(s["errors"]["examples"])
        records.update(s.get("records", {}))
    read = sum(s["read"] for s in shard_stats)
    kept = sum(w["kept"] for w in write_counts)
    per_step = {name: _step_summary(c) for name, c in steps.items()}
    if "exact_dedup" in order:
        dedup: Counter = Counter()
        for w in write_counts:
            dedup.update(w["dropped"])
        dd_in = sum(w["in"] for w in write_counts)
        for name in ("exact_dedup", "near_dedup", "site_lines"):
            if name not in order:
                continue
            by = {k.split(".", 1)[1]: v for k, v in sorted(dedup.items()) if k.startswith(name + ".")}
            dropped = sum(by.values())
            per_step[name] = {"in": dd_in, "kept": dd_in - dropped, "dropped": by}
            dd_in -= dropped
        if "site_lines" in order:  # lines and characters removed, per site (the largest first)
            from pretrain.curate.site_lines import summary

            per_step["site_lines"].update(summary([w.get("site_lines", {}) for w in write_counts]))
    return {
        "job": job,
        "documents": {"read": read, "kept": kept, "dropped": read - kept},
        "records": dict(sorted(records.items())),
        "steps": per_step,
        "step_order": [n for n in order if n in per_step] + [n for n in per_step if n not in order],
        "dedup": dedup_summary,
        "errors": {"count": sum(errors.values()), "by_reason": errors, "first": first,
                   "examples": examples[:MAX_ERROR_EXAMPLES]},
        "shards": len(shard_stats),
        "work_seconds": round(sum(s.get("seconds", 0) for s in shard_stats)
                              + sum(w.get("seconds", 0) for w in write_counts)
                              + dedup_summary.get("seconds", 0), 3),
        "wall_seconds": round(seconds, 3),
        "attempts": attempts,  # wall_seconds is their sum (OUT/work/attempts.json)
    }


def _step_summary(c: Counter) -> dict:
    dropped = {k.split(".", 1)[1]: v for k, v in sorted(c.items()) if k.startswith("dropped.")}
    out = {"in": c.get("in", 0), "kept": c.get("kept", 0), "dropped": dropped}
    extra = {k: v for k, v in sorted(c.items()) if k not in ("in", "kept") and not k.startswith("dropped.")}
    if "seconds" in extra:
        extra["seconds"] = round(extra["seconds"], 4)
    out.update(extra)
    return out


def _decontam_report(cfg: CurateConfig, shard_stats: list[dict], stats: dict, lay: Layout) -> None:
    """OUT/decontam_report.json: per benchmark, which items leaked into which documents."""
    from pretrain.curate.decontam import build_report, load_index

    if "decontaminate" not in cfg.steps or not cfg.decontam.enabled or not cfg.decontam.benchmarks:
        return
    leaks = [leak for s in shard_stats for leak in s.get("leaks", [])]
    counts = Counter({k: v for k, v in stats["steps"].get("decontaminate", {}).items() if isinstance(v, int)})
    index = load_index(tuple(cfg.decontam.benchmarks), cfg.decontam.n, cfg.decontam.min_words,
                       cfg.decontam.max_grams)
    io.write_json_atomic(lay.file("decontam_report.json"), build_report(index, leaks, counts), lay.tmp)


def _global_dedup(tasks: list[ShardTask], lay: Layout, cfg: CurateConfig, executor) -> tuple[str, dict]:
    from pretrain.curate.dedup import find_duplicates, removal_summary

    marker, job_hash = lay.removals_marker, tasks[0].job_hash
    done = io.done_info(marker, job_hash, marker)
    if done is None:
        path = find_duplicates(lay.dedup_dir, len(tasks), cfg.dedup, map_fn=executor.map)
        split_removals(path, lay.removals_dir, len(tasks), lay.tmp)
        done = {"job_hash": job_hash, "path": os.path.relpath(path, lay.work)}
        io.mark_done(marker, done, marker)
    path = lay.work / done["path"]
    summary = removal_summary(path)
    if cfg.dedup.site_lines > 0:
        from pretrain.curate.site_lines import global_pass

        summary["site_lines"] = global_pass(tasks, lay, cfg.dedup, executor.map)
    return str(lay.removals_dir), summary


def split_removals(path: Path, folder: Path, shards: int, tmp: Path) -> None:
    """One removal file per shard, so that stage C holds its own shard's removals, not the
    corpus's. The list is ordered by input position, so shard numbers only go up: one pass, one
    writer open at a time."""
    records = io.read_jsonl_zst(path)
    pending = next(records, None)
    for shard in range(shards):
        with io.JsonlZstWriter(folder / f"shard_{shard:05d}.jsonl.zst", tmp) as w:
            while pending is not None and pending["shard"] == shard:
                w.write(pending)
                pending = next(records, None)
    if pending is not None:
        raise ValueError(f"{path}: removal of shard {pending['shard']} out of order or past {shards} shards")
