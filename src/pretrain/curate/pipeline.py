"""The belt: one driver for every corpus job (curate, dedup, decontaminate are belt configs).

A job is a `CurateConfig` whose `steps` list names the per-document steps in order (datatrove's
pipelines are lists too), optionally ending with the global `dedup` stage. Stages (each unit writes
atomically and records a done marker carrying the job's identity hash):
  A. per shard (consecutive input files, curate/grouping.py): read -> the configured steps; kept
     documents stream to work/kept/, rejects to rejects/filters_*, dedup signatures to work/dedup/.
  B. global (when `dedup` is in the list): exact then near duplicates -> one removal list.
  B'. with `dedup.site_lines = K`: per shard, the survivors' (site, line) keys counted; globally,
     the keys of >= K + 1 documents of a site (curate/site_lines.py).
  C. per shard: kept minus the removal list, minus those lines -> data/; dedup rejects (with the
     kept twin).
The FineWeb order (datatrove examples/fineweb.py) with PII moved before dedup so that stage C
only removes. Priorities for "first kept" are (shard index, position), fixed by the shard plan,
so the output is the same for any number of workers and any executor.

Memory per shard is bounded by a constant: documents and rejects go to their writers as they come,
rejects keep an excerpt of the text, stage C streams. Layout and identity live in `job.py`.
"""

from __future__ import annotations

import importlib
import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pretrain.curate import io, site_lines, versions
from pretrain.curate.card import Shape
from pretrain.curate.classifier import ClassifierConfig, ClassifierFilter, build_classifier_steps
from pretrain.curate.decontam import DecontamConfig, build_decontam_step
from pretrain.curate.dedup import DedupConfig, shard_ok, sign_shard
from pretrain.curate.document import Document
from pretrain.curate.extract import ExtractConfig, build_extract_step
from pretrain.curate.grouping import ShardsConfig
from pretrain.curate.job import Layout
from pretrain.curate.language import REASON_SCORE as LANGUAGE_SCORE
from pretrain.curate.language import LanguageConfig, LanguageFilter, build_language_step
from pretrain.curate.pii import PIIConfig, build_pii_step
from pretrain.curate.readers import ReaderConfig, read_documents
from pretrain.curate.removals import shard_removals
from pretrain.curate.rules import RulesConfig, build_rule_steps
from pretrain.curate.step import Step, run_steps
from pretrain.curate.urlfilter import URLFilterConfig, build_url_filter
from pretrain.errors import UserError
from pretrain.faults import count_fault
from pretrain.progress import ShardMeter

MAX_ERROR_EXAMPLES = 100
SHARD_BITS = 40  # priority = shard << 40 | position: 2^40 records per shard, 2^23 shards
REJECT_TEXT_CHARS = 2000  # a reject keeps this much text (and its full length): enough to judge it

# The belt's families in FineWeb's order; `steps` picks and orders them ("module:callable" adds one).
BELT = ("url_filter", "extract", "language", "rules", "classifier", "decontaminate", "pii", "dedup")


@dataclass
class CurateConfig:
    """Every section of the belt; `pretrain curate --set section.key=value` overrides any field."""

    # Per-document steps in order, then optionally "dedup" (global, last). A family left out does
    # not run; "package.module:callable" is a user's step (called with no argument, returns a Step).
    steps: tuple[str, ...] = BELT
    keep: str = "first"  # which document of a duplicate cluster stays: "first" in input order, or "id"
    reader: ReaderConfig = field(default_factory=ReaderConfig)
    url_filter: URLFilterConfig = field(default_factory=URLFilterConfig)
    extract: ExtractConfig = field(default_factory=ExtractConfig)
    language: LanguageConfig = field(default_factory=LanguageConfig)
    rules: RulesConfig = field(default_factory=RulesConfig)
    classifier: ClassifierConfig = field(default_factory=ClassifierConfig)
    decontam: DecontamConfig = field(default_factory=DecontamConfig)
    pii: PIIConfig = field(default_factory=PIIConfig)
    dedup: DedupConfig = field(default_factory=DedupConfig)
    # How inputs are packed into shards (curate/grouping.py): the plan's, not the job's identity
    shards: ShardsConfig = field(default_factory=ShardsConfig)

    def __post_init__(self) -> None:
        steps = tuple(self.steps)
        for name in steps:
            if name not in BELT and ":" not in name:
                raise UserError(f"unknown step {name!r} in steps; choose from {', '.join(BELT)} "
                                "or give your own as package.module:callable")
        if len(set(steps)) != len(steps):
            raise UserError(f"steps lists a step twice: {', '.join(steps)}")
        if "dedup" in steps and steps[-1] != "dedup":
            raise UserError("dedup is a global stage: it must come last in steps")
        if self.keep not in ("first", "id"):
            raise UserError(f"keep must be 'first' or 'id', got {self.keep!r}")
        self.steps = steps

    @property
    def dedups(self) -> bool:
        return "dedup" in self.steps and (self.dedup.exact or self.dedup.url or self.dedup.near
                                          or self.dedup.site_lines > 0)

    @property
    def passthrough(self) -> bool:
        """No per-document step: stage C reads the input again instead of a copy in work/kept
        (a dedup job's disk stays at the corpus plus its output, as datatrove's does)."""
        return all(name == "dedup" for name in self.steps)


_FAMILIES: dict[str, Callable[[CurateConfig], list[Step | None]]] = {
    "url_filter": lambda c: [build_url_filter(c.url_filter)],
    "extract": lambda c: [build_extract_step(c.extract)],
    "language": lambda c: [build_language_step(c.language)],
    "rules": lambda c: list(build_rule_steps(c.rules)),
    "classifier": lambda c: list(build_classifier_steps(c.classifier)),
    "decontaminate": lambda c: [build_decontam_step(c.decontam)],
    "pii": lambda c: [build_pii_step(c.pii)],
    "dedup": lambda c: [],
}


def user_step(spec: str) -> Step:
    """`package.module:callable` -> the Step it returns (a Step subclass itself works)."""
    mod_name, _, attr = spec.partition(":")
    try:
        obj = getattr(importlib.import_module(mod_name), attr)
    except (ImportError, AttributeError) as e:
        raise UserError(f"step {spec!r}: cannot import it ({e})") from e
    step = obj()
    if not isinstance(step, Step):
        raise UserError(f"step {spec!r} returned {type(step).__name__}, not a pretrain.curate.step.Step")
    return step


def build_family(name: str, cfg: CurateConfig) -> list[Step | None]:
    """The steps one entry of `cfg.steps` stands for (None where disabled)."""
    return [user_step(name)] if ":" in name else _FAMILIES[name](cfg)


def build_steps(cfg: CurateConfig) -> list[Step]:
    """The per-document part of the belt, in the configured order; disabled steps are left out."""
    steps: list[Step | None] = []
    for name in cfg.steps:
        steps.extend(build_family(name, cfg))
    return [s for s in steps if s is not None]


def step_order(cfg: CurateConfig, shard_stats: list[dict]) -> list[str]:
    """Names of the funnel's rows in belt order: the steps as a shard built them (its stats keep
    the list; a dict's keys would come back sorted), then the global dedup stage's two."""
    names = shard_stats[0].get("step_order", list(shard_stats[0]["steps"])) if shard_stats else []
    site = ["site_lines"] if cfg.dedups and cfg.dedup.site_lines > 0 else []
    return names + (["exact_dedup", "near_dedup", *site] if cfg.dedups else [])


@dataclass(frozen=True)
class ShardInput:
    """One input file of a shard: its path or URL, its source name (`Document.source`), and its
    size and version when the job listed it (OUT/plan.json): a file or object rewritten since is
    refused, not read (see `_check_unchanged`, curate/versions.py)."""

    path: str
    source: str
    size: int | None = None
    version: dict | None = None


@dataclass(frozen=True)
class ShardTask:
    """One shard: consecutive inputs of the job's sorted list (curate/grouping.py), read in order."""

    shard: int
    inputs: tuple[ShardInput, ...]
    out: str
    cfg: CurateConfig
    job_hash: str
    work: str
    # The first input URL of the shard that runs next in this same process (units run one after
    # another), downloaded in a thread while this one runs; None in a pool or on Ray.
    prefetch: tuple[int, int, str, dict | None] | None = None  # (shard, input, URL, its version)
    # Units run one after another in this process into a URL OUT: a unit's uploads and marker are
    # committed in a thread while the next unit runs (one commit in flight; see `_commit`).
    overlap: bool = False

    @property
    def path(self) -> str:
        """The shard's first input (a one-input shard's only one)."""
        return self.inputs[0].path

    @property
    def label(self) -> str:
        """The shard's inputs in a few words, for a message."""
        more = len(self.inputs) - 1
        return self.path + (f" (and {more:,} more input{'s' * (more != 1)})" if more else "")


# ----------------------------------------------------------------------------- stage A


def reject_record(doc: Document, step: str, reason: str, **extra: Any) -> dict:
    """The one reject shape of every job: who, which step, why, the measured values, an excerpt."""
    rec: dict[str, Any] = {"id": doc.id, "url": doc.url, "source": doc.source, "step": step, "reason": reason}
    rec.update(extra)
    rec["metadata"] = doc.metadata  # the scores that decided it (language score, rule values, ...)
    rec["text"] = doc.text[:REJECT_TEXT_CHARS]
    rec["text_chars"] = len(doc.text)
    return rec


def measured(step: Step, doc: Document, reason: str) -> dict:
    """The value a step measured and the threshold it held it to, for a reject record; a step may
    say so itself with `measured(doc, reason)`, the belt's own score filters are read here."""
    own = getattr(step, "measured", None)
    if own is not None:
        return dict(own(doc, reason))
    if isinstance(step, LanguageFilter) and reason == LANGUAGE_SCORE:
        return {"value": doc.metadata.get("language_score"), "threshold": step.cfg.threshold}
    if isinstance(step, ClassifierFilter):
        return {"value": doc.metadata.get(step.key), "threshold": step.threshold}
    from pretrain.curate.rule_values import measure  # Gopher, FineWeb: the number behind the reason

    return measure(step, doc, reason)


class _Errors:
    """Bad records: counted by kind (pretrain/faults.py), the first of each kind and the first few
    overall kept as examples (file, record, reason).

    `shown` names the input as the user gave it when the reader reads a local copy of it (an
    object's download in work/tmp, removed when the shard ends): the copy's path points at nothing."""

    def __init__(self, shown: dict[str, str] | None = None) -> None:
        self.counts: dict[str, int] = {}
        self.first: dict[str, dict] = {}
        self.examples: list[dict] = []
        self.shown = dict(shown or {})

    def __call__(self, path: str, record: object, reason: str) -> None:
        kind = count_fault(self.counts, reason)
        example = {"file": self.shown.get(str(path), str(path)), "record": record, "reason": reason}
        self.first.setdefault(kind, example)
        if len(self.examples) < MAX_ERROR_EXAMPLES:
            self.examples.append(example)

    def summary(self) -> dict:
        return {"count": sum(self.counts.values()), "by_reason": dict(self.counts), "first": self.first,
                "examples": self.examples}


def run_shard(task: ShardTask) -> dict:
    """Stage A for one shard: steps, rejects, dedup signatures. Skips when already done."""
    lay = Layout(task.out, Path(task.work))
    marker = lay.marker("filter", task.shard)
    done = filtered_stats(task)
    if done is not None:
        return done
    t0 = time.time()
    steps = build_steps(task.cfg)
    read_stats: Counter[str] = Counter()
    errors = _Errors()
    shape = Shape()  # the JSON types of this shard's rejects, for OUT/README.md (card.py)
    if task.prefetch:
        _start_prefetch(task.prefetch, lay)
    stamps: list[dict | None] = []  # what each local input's bytes were (versions.of_read)
    with io.collect_uploads() as pending:
        # the first input URL is fetched before any writer opens (a gone object: no file begun)
        first = _input_copy(task.shard, 0, task.inputs[0], lay) if io.is_url(task.path) else None
        docs = _read_inputs(task, lay, errors, read_stats, stamps, first)
        try:
            counted = _markup_counted(docs, read_stats, any(s.name == "extract" for s in steps))
            n_read, n_kept, n_rejects = _filter(task, lay, steps, counted, shape)
        finally:
            docs.close()  # the current input URL's local copy goes now, not when collected
            if first is not None:  # (a generator never started runs no finally)
                first.unlink(missing_ok=True)
            for inp in task.inputs[1:]:  # this shard's own prefetch, left by an error
                drop_prefetched(lay, inp.path)
    stats = {
        "shard": task.shard,
        "input": task.path,
        **({"inputs": len(task.inputs)} if len(task.inputs) > 1 else {}),
        "read": n_read,
        "kept": n_kept,
        "records": dict(read_stats),
        "leaks": [leak for st in steps for leak in getattr(st, "leaks", [])],
        "step_order": [s.name for s in steps],  # stats files are written with sorted keys
        "steps": {s.name: dict(s.stats) for s in steps},
        "errors": errors.summary(),
        "seconds": round(time.time() - t0, 3),
        "shapes": {"rejects": shape.tree},
    }
    # a one-input shard's marker keeps the key it always had; stamps of URL inputs are None
    read = ({"input": stamps[0]} if len(stamps) == 1 else {"inputs": stamps}) if any(stamps) else {}

    def commit() -> None:  # the objects first, the marker last
        io.upload_pending(pending)
        io.write_json_atomic(lay.shard_stats(task.shard), stats)
        io.mark_done(lay.shard_stats(task.shard), {"job_hash": task.job_hash, "rejects": n_rejects, **read},
                     marker)

    _commit(task.overlap, commit, pending)
    return stats


def filtered_stats(task: ShardTask) -> dict | None:
    """Stage A's stats of a shard done already (`_filtered`), read from its work folder; None when
    the shard must run. The driver asks first (job.map_left): a finished unit needs no executor."""
    lay = Layout(task.out, Path(task.work))
    if not _filtered(task, lay):
        return None
    drop_prefetched(lay, task.path)
    return json.loads(lay.shard_stats(task.shard).read_text())


def _markup_counted(docs: Iterator[Document], stats: Counter[str], extracts: bool) -> Iterator[Document]:
    """`docs`, counting what the belt will judge as markup, for the funnel's warning
    (report.markup_warning): HTML pages (an .html file, a WARC response) in a belt without
    `extract` (the dedup and decontaminate presets), under `html_not_extracted`; and records whose
    text is a whole HTML page that no reader marked as one (a JSONL `html` field read with
    --text-field; extract passes such text through), under `html_in_text`."""
    for doc in docs:
        if doc.cache.get("html"):
            stats["html_not_extracted"] += not extracts
        elif doc.text[:64].lstrip().lower().startswith(("<!doctype html", "<html")):
            stats["html_in_text"] += 1
        yield doc


def _read_inputs(task: ShardTask, lay: Layout, errors: _Errors, read_stats: Counter,
                 stamps: list, first: Path | None = None) -> Iterator[Document]:
    """The documents of the shard's inputs, one file after another; each local input's stamp
    (the bytes read) is appended to `stamps` once it is read whole, None for a URL's copy (its
    GET's ETag checked it). An input URL is copied to work/tmp for the time it is read, the next
    one downloading meanwhile (`first`: the first one's, fetched already). The bar's meter counts
    bytes across the shard's files."""
    meter_file = lay.work / "progress" / f"{task.shard}.json"
    base, total = 0, sum(inp.size or 0 for inp in task.inputs)
    for k, inp in enumerate(task.inputs):
        nxt = task.inputs[k + 1] if k + 1 < len(task.inputs) else None
        if nxt is not None and io.is_url(nxt.path):
            _start_prefetch((task.shard, k + 1, nxt.path, nxt.version), lay)
        if k == 0 and first is not None:
            local = first
        else:
            local = _input_copy(task.shard, k, inp, lay) if io.is_url(inp.path) else Path(inp.path)
        errors.shown[str(local)] = inp.path  # errors name the input as the user gave it
        try:
            _check_unchanged(inp, local)
            read = versions.of_read(local) if local == Path(inp.path) else None  # the bytes it reads
            meter = ShardMeter(meter_file, local, base, total or None)
            yield from meter.wrap(read_documents(local, task.cfg.reader, errors, source=inp.source,
                                                 stats=read_stats))
            if read is not None:
                versions.unchanged(local, read)
            stamps.append(read)
        finally:
            if local != Path(inp.path):
                local.unlink(missing_ok=True)
        base += inp.size or 0


def _filtered(task: ShardTask, lay: Layout) -> bool:
    """Stage A of this shard is done, its output still there and its signature files check out
    (else the shard runs again)."""
    done = io.done_info(lay.shard_stats(task.shard), task.job_hash, lay.marker("filter", task.shard))
    # a key absent from the marker (None): a marker of an older version
    return done is not None and _there(lay.rejects(task.shard), done.get("rejects")) and \
        _kept_there(task, lay) and \
        (not task.cfg.dedups or shard_ok(lay.dedup_dir, task.shard, task.cfg.dedup))


def _written(task: ShardTask, lay: Layout) -> dict | None:
    """Stage C of this shard is done, its outputs not removed since: what its marker recorded."""
    done = io.done_info(lay.data(task.shard), task.job_hash, lay.marker("write", task.shard))
    if done is None:
        return None
    counts = done.get("counts") or {}
    kept = counts.get("kept")
    dropped = None if kept is None else counts.get("in", 0) - kept
    there = _there(lay.data(task.shard), kept) and _there(lay.dedup_rejects(task.shard), dropped)
    return done if there else None


def _there(path: str, records: int | None) -> bool:
    """An output is where its marker left it: a file of `records` records exists, one of none was
    never written (`keep_empty=False`); `records` unknown (an older marker): the file exists."""
    return records == 0 or io.exists(path)


def _kept_there(task: ShardTask, lay: Layout) -> bool:
    """Stage C still needs stage A's copy of the survivors (work/ deleted in part, a data shard
    too): without it stage A runs again."""
    return _rereads_input(task) or lay.kept(task.shard).exists() or _written(task, lay) is not None


def _input_path(shard: int, k: int, url: str, lay: Layout) -> Path:
    """The local copy of input `k` of a shard (two inputs of a shard may share a file name)."""
    return lay.tmp / f"input_{shard:05d}_{k:04d}_{url.rstrip('/').rsplit('/', 1)[-1]}"


def _download(shard: int, k: int, url: str, lay: Layout, stamp: dict | None = None) -> Path:
    fs, path = io.url_fs(url)
    local = _input_path(shard, k, url, lay)
    local.parent.mkdir(parents=True, exist_ok=True)
    try:
        versions.download(fs, path, local, url, stamp)  # refused when its ETag is not the job's
    except FileNotFoundError as e:  # listed by this job, deleted since: name it (the client does not)
        local.unlink(missing_ok=True)
        raise UserError(f"{url}: gone since this job listed it; restore it, or run without it "
                        "into a new --output") from e
    return local


# Prefetched inputs of this process: (work tmp folder, URL) -> ((shard, input), the future of its
# local copy). Units that run one after another in one process prefetch the next unit's first
# input (ShardTask.prefetch); a unit prefetches its own next input: in a pool, the other workers'
# belts already fill a core while one waits for its first download.
_prefetched: dict[tuple[str, str], tuple[tuple[int, int], Future]] = {}
_prefetcher: ThreadPoolExecutor | None = None


def _start_prefetch(prefetch: tuple[int, int, str, dict | None], lay: Layout) -> None:
    global _prefetcher
    shard, k, url, stamp = prefetch
    if (str(lay.tmp), url) in _prefetched:
        return
    if _prefetcher is None:
        _prefetcher = ThreadPoolExecutor(1, thread_name_prefix="pretrain-prefetch")
    _prefetched[str(lay.tmp), url] = (shard, k), _prefetcher.submit(_download, shard, k, url, lay, stamp)


def _input_copy(shard: int, k: int, inp: ShardInput, lay: Layout) -> Path:
    """The local copy of an input URL: the prefetched one (waited for) or a download now. A
    failed prefetch is retried here, so its error is this input's, raised where it always was."""
    _, fut = _prefetched.pop((str(lay.tmp), inp.path), (None, None))
    if fut is not None:
        try:
            return fut.result()
        except Exception:
            pass
    return _download(shard, k, inp.path, lay, inp.version)


def drop_prefetched(lay: Layout, url: str | None = None) -> None:
    """Forget a prefetched input of this job (all of them when `url` is None), delete its copy."""
    keys = [(str(lay.tmp), url)] if url else [k for k in _prefetched if k[0] == str(lay.tmp)]
    for key in keys:
        where, fut = _prefetched.pop(key, (None, None))
        if fut is None:
            continue
        try:
            fut.result()
        except Exception:  # a failed download may have left part of the file: deleted below too
            pass
        _input_path(*where, key[1], lay).unlink(missing_ok=True)


class _Counting:
    """A writer that only counts (a passthrough belt keeps no copy of its survivors)."""

    count = 0

    def __enter__(self) -> _Counting:
        return self

    def __exit__(self, *exc) -> None:
        pass

    def write(self, rec: dict) -> None:
        self.count += 1


def _filter(task: ShardTask, lay: Layout, steps: list[Step], docs: Iterator[Document],
            shape: Shape) -> tuple[int, int, int]:
    """Documents through the steps: survivors stream to work/kept (and dedup signing), rejects to
    rejects/ (no file when none); nothing is held but the current document. Returns (read, kept,
    rejected)."""
    n_read = 0

    def counted(it: Iterator[Document]) -> Iterator[Document]:
        nonlocal n_read
        for d in it:
            n_read += 1
            yield d

    keeper = _Counting() if _rereads_input(task) else io.JsonlZstWriter(lay.kept(task.shard), lay.tmp)
    with keeper as kept, \
            io.JsonlZstWriter(lay.rejects(task.shard), lay.tmp, keep_empty=False) as rejects:
        for step in steps:
            step.on_reject = lambda d, s, r, st=step: rejects.write(
                shape.add(reject_record(d, s, r, **measured(st, d, r))))

        def survivors() -> Iterator[tuple[Document, int]]:
            for i, doc in enumerate(run_steps(steps, counted(docs))):
                kept.write(doc.to_json())
                yield doc, ((task.shard << SHARD_BITS) | i) if task.cfg.keep == "first" else 0

        try:
            if task.cfg.dedups:
                sign_shard(survivors(), task.shard, lay.dedup_dir, task.cfg.dedup)
            else:
                for _ in survivors():
                    pass
        finally:
            for step in steps:  # e.g. the extract step's time-bounded child process
                if hasattr(step, "close"):
                    step.close()
    return n_read, kept.count, rejects.count


# ----------------------------------------------------------------------------- stage C


def write_shard(task_and_removals: tuple[ShardTask, str | None]) -> dict:
    """Stage C for one shard: drop what dedup removed; stream data/ and dedup rejects."""
    task, removals_path = task_and_removals
    lay = Layout(task.out, Path(task.work))
    marker = lay.marker("write", task.shard)
    done = written_counts(task_and_removals)
    if done is not None:
        return done
    t0 = time.time()
    # this shard's removals only (job.split_removals): memory is the shard's, not the corpus's
    mine = Path(removals_path) / f"shard_{task.shard:05d}.jsonl.zst" if removals_path else None
    removals = shard_removals(mine) if mine else iter(())
    hit = next(removals, None)  # both streams are in row order: a merge, nothing held
    by_reason: Counter[str] = Counter()
    strip = site_lines.load_stripper(lay.dedup_dir) if task.cfg.dedup.site_lines > 0 else None
    shapes = {"data": Shape(), "rejects": Shape()}  # for OUT/README.md (card.py)
    # on object storage, data and dedup rejects go up together: one round trip's wait, not two
    # a shard that keeps (or drops) nothing leaves no file there (io.JsonlZstWriter's keep_empty)
    with io.collect_uploads() as pending, \
            io.JsonlZstWriter(lay.data(task.shard), lay.tmp, keep_empty=False) as data, \
            io.JsonlZstWriter(lay.dedup_rejects(task.shard), lay.tmp, keep_empty=False) as dropped:
        for rec, (step, reason, twin) in _after_removals(task, lay, removals, hit):
            if step == "rename":  # a later copy of an id that stays: ids are unique in data/
                rec, step = {**rec, "id": twin}, None
            if step is None and strip is not None and (text := strip(rec)) is not None:
                if text.strip():
                    rec = {**rec, "text": text}
                else:  # nothing but its site's boilerplate
                    step, reason, twin = "site_lines", "site_boilerplate", None
            if step is None:
                data.write(shapes["data"].add(rec))
                continue
            by_reason[f"{step}.{reason}"] += 1
            doc = Document(rec["id"], rec["text"], rec.get("url"), rec.get("source", ""),
                           rec.get("metadata", {}))
            dropped.write(shapes["rejects"].add(reject_record(doc, step, reason,
                                                              **({"kept_id": twin} if twin else {}))))
    counts = {
        "in": data.count + dropped.count,
        "kept": data.count,
        "dropped": dict(by_reason),
        "seconds": round(time.time() - t0, 3),
        "shapes": {k: v.tree for k, v in shapes.items()},
    }
    if strip is not None:  # site -> [lines, characters] removed from the documents that stayed
        counts["site_lines"] = strip.removed

    def commit() -> None:  # the objects first, the marker last
        io.upload_pending(pending)
        io.mark_done(lay.data(task.shard), {"job_hash": task.job_hash, "counts": counts}, marker)

    _commit(task.overlap, commit, pending)
    return counts


def written_counts(task_and_removals: tuple[ShardTask, str | None]) -> dict | None:
    """Stage C's counts of a shard written already (`_written`); None when it must run."""
    task = task_and_removals[0]
    done = _written(task, Layout(task.out, Path(task.work)))
    return None if done is None else done["counts"]


def _after_removals(task: ShardTask, lay: Layout, removals: Iterator, hit) -> Iterator[tuple[dict, tuple]]:
    """Each survivor of stage A with its removal record (step, reason, kept twin's id), or
    (None, None, None) when dedup keeps it: the two streams merged by row, as signed in stage A."""
    for row, (where, n, rec) in enumerate(_survivors(task, lay)):
        if hit is None or hit[0] != row:  # by row, as signed in stage A: ids may repeat
            yield rec, (None, None, None)
            continue
        (_, (step, reason, twin, signed_id)), hit = hit, next(removals, None)
        if rec["id"] != signed_id:  # the input re-read is not what stage A signed
            raise UserError(f"{where}: document {n} is {rec['id']!r}, signed as {signed_id!r}: the input "
                            "changed during the job; rerun into a new --output")
        yield rec, (step, reason, twin)


def count_site_lines(task_and_removals: tuple[ShardTask, str]) -> int:
    """Step 1 of the site-lines pass for one shard: the keys of the documents exact and near
    dedup keep (curate/site_lines.py). Skips when its marker is there."""
    task, removals_path = task_and_removals
    lay = Layout(task.out, Path(task.work))
    if site_lines.counted(lay.dedup_dir, task.shard, task.job_hash):
        return 0
    removals = shard_removals(Path(removals_path) / f"shard_{task.shard:05d}.jsonl.zst")
    kept = (rec for rec, (step, _, _) in _after_removals(task, lay, removals, next(removals, None))
            if step in (None, "rename"))
    n = site_lines.count_shard(kept, site_lines.count_path(lay.dedup_dir, task.shard), lay.tmp)
    site_lines.mark_counted(lay.dedup_dir, task.shard, task.job_hash, n)
    return n


# The one commit in flight in this process (`ShardTask.overlap`): double buffering, so a slow
# bucket holds back the belt by at most one shard and at most one shard's outputs wait on disk.
_committer: ThreadPoolExecutor | None = None
_in_flight: Future | None = None


def _commit(background: bool, commit: Callable[[], None], pending: list) -> None:
    """Run a unit's commit (uploads, then its marker) now, or in a thread once the previous one
    has finished. A SIGKILL before the marker only means the unit runs again."""
    global _committer, _in_flight
    try:
        wait_commits()
    except BaseException:
        io.discard_pending(pending)
        raise
    if not background:
        commit()
        return
    if _committer is None:
        _committer = ThreadPoolExecutor(1, thread_name_prefix="pretrain-commit")
    _in_flight = _committer.submit(commit)


def wait_commits() -> None:
    """Wait for the commit in flight; its error (a failed upload) is raised here."""
    global _in_flight
    fut, _in_flight = _in_flight, None
    if fut is not None:
        fut.result()


def _rereads_input(task: ShardTask) -> bool:
    """Whether stage C reads the inputs again instead of stage A's copy in work/kept: for a belt
    without per-document steps on local files (a dedup job's disk stays at the corpus plus its
    output, as datatrove's does). An input URL is not fetched twice: stage A keeps its copy."""
    return task.cfg.passthrough and not any(io.is_url(inp.path) for inp in task.inputs)


def _survivors(task: ShardTask, lay: Layout) -> Iterator[tuple[str, int, dict]]:
    """Stage A's survivors, each with the file it was read from and its number there (for a
    message): its work/kept file, or the local inputs read again (the same reader, so the same
    documents in the same order)."""
    if not _rereads_input(task):
        kept = lay.kept(task.shard)
        for n, rec in enumerate(io.read_jsonl_zst(kept), 1):
            yield str(kept), n, rec
        return
    stamps = read_stamps(lay, task.shard)
    for k, inp in enumerate(task.inputs):
        _check_unchanged(inp, Path(inp.path))  # stage A's removals are positions in these files
        versions.check_local(inp.path, stamps[k] if stamps else None)  # the bytes stage A read
        docs = read_documents(Path(inp.path), task.cfg.reader, source=inp.source)
        for n, doc in enumerate(docs, 1):
            yield inp.path, n, doc.to_json()


def _check_unchanged(inp: ShardInput, local: Path) -> None:
    """Refuse an input whose size differs from the one the job listed: another writer replaced
    it, and reading it would mix two versions in one corpus (or, in stage C, apply the removals
    found in one version to the other). Size and, for a local file, mtime (plan.json's
    `versions`): a same-size rewrite of an object is caught by the ETag of its download."""
    if inp.size is None:
        return
    now = local.stat().st_size
    if now != inp.size:
        raise UserError(f"{inp.path}: changed since this job listed it ({inp.size:,} bytes then, "
                        f"{now:,} now); restore it, or run the new version into a new --output")
    if local == Path(inp.path):  # a local input (a URL's copy was checked by its GET's ETag)
        versions.check_local(local, inp.version)  # a finished stage A's stamp (settle_inputs)


def _marker_stamps(info: dict) -> list | None:
    """The stamps a stage A marker recorded, one per input (None for a URL's): `input` for a
    one-input shard, `inputs` for more; None for a marker of an older pretrain (no stamp)."""
    if isinstance(info.get("inputs"), list):
        return [s if isinstance(s, dict) else None for s in info["inputs"]]
    return [info["input"]] if isinstance(info.get("input"), dict) else None


def read_stamps(lay: Layout, shard: int) -> list | None:
    """The stamps (size, mtime, xxh3_128) of the local inputs stage A read, from its marker; None
    when the shard is not done or its marker was written by an older pretrain."""
    try:
        info = json.loads(lay.marker("filter", shard).read_text())
    except (OSError, ValueError):
        return None
    return _marker_stamps(info) if isinstance(info, dict) else None


def settle_inputs(tasks: list[ShardTask], lay: Layout) -> list[ShardTask]:
    """Each local input against the stamp its finished stage A recorded (versions.settle): the
    same bytes under a new mtime are taken into the marker, other bytes refused; a shard not yet
    done read nothing and checks nothing. Its task carries the settled stamps (stage A run again,
    stage C reading the inputs again compare with them)."""
    out = []
    for task in tasks:
        if all(io.is_url(inp.path) for inp in task.inputs):
            out.append(task)
            continue
        marker = lay.marker("filter", task.shard)
        info = io.done_info(marker, task.job_hash, marker)
        if info is None:
            out.append(replace(task, inputs=tuple(inp if io.is_url(inp.path) else replace(inp, version=None)
                                                  for inp in task.inputs)))
            continue
        thens = _marker_stamps(info) or [None] * len(task.inputs)
        inputs = tuple(inp if io.is_url(inp.path) else
                       replace(inp, version=versions.settle(inp.path, then or inp.version))
                       for inp, then in zip(task.inputs, thens, strict=True))
        nows = [None if io.is_url(inp.path) else inp.version for inp in inputs]
        if nows != thens:
            rest = {k: v for k, v in info.items() if k not in ("input", "inputs")}
            key = {"input": nows[0]} if len(nows) == 1 else {"inputs": nows}
            io.write_json_atomic(marker, {**rest, **key})
        out.append(replace(task, inputs=inputs))
    return out


# ----------------------------------------------------------------------------- the job


def curate(inputs: list[str], out: str | Path, cfg: CurateConfig, executor=None, progress=None,
           job: str = "curate", work_dir: str | Path | None = None, claimed=None,
           exclude: tuple[str, ...] = ()) -> dict:
    """Run a corpus job (any belt config) from paths or URLs into a path or URL; returns the stats
    also written to OUT/stats.json. `claimed(cfg)` runs once OUT is this job's, given the config it
    runs with (job.plan_shards); `exclude`: --exclude GLOB, the files of input folders left out
    (inputs.excluded)."""
    from pretrain.curate.job import run_job

    return run_job(inputs, out, cfg, executor=executor, progress=progress, job=job, work_dir=work_dir,
                   claimed=claimed, exclude=exclude)
