"""Benchmark: the whole curation belt on WARC input, end to end, against datatrove in the same run.

Our belt (`pretrain.curate.pipeline.curate` with `LocalExecutor(1)`: one worker, in-process):
url_filter -> extract -> language -> gopher_repetition -> gopher_quality -> c4_quality ->
fineweb_quality -> exact and near dedup, with the output written as `pretrain curate` writes it.
Configurations: `blocks` with `extract.strict` + language (the default belt since 2026-12-03;
resiliparse before), the same without language,
trafilatura + language, trafilatura without language (like for like with datatrove), and
read -> trafilatura alone (against datatrove's WarcReader -> Trafilatura alone).
datatrove 0.10 (`.venv-peers`, a script generated into a temporary directory, run as a
subprocess): WarcReader -> Trafilatura(favour_precision=True) -> GopherRepetitionFilter ->
GopherQualityFilter -> C4QualityFilter(filter_no_terminal_punct=False) -> FineWebQualityFilter,
chained as its LocalPipelineExecutor chains them. Its LanguageFilter downloads a model at run time,
so it is left out there; its pipeline has no URL filter (ours runs one with a small inline list)
and no dedup (ours does both exact and near dedup): datatrove does less work than our belt.

Inputs: ../shared/data/warc/derived/*.warc.gz (181 real article pages), the real Common Crawl
excerpt ../shared/data/warc/resiliparse/warcfile.warc.gz, and the demo crawl shipped in the
package. Per set and configuration it prints pages/s per core (CPU seconds of the worker and its
extraction child, via time.process_time and getrusage(RUSAGE_CHILDREN)), pages/s of wall time, MB/s
of HTML per core, the funnel (documents left after each step), and the ratio against datatrove.
Every timed run is a fresh process that first runs its belt once on a tiny generated WARC (three
short pages that pass every step), so imports, model loads and one-time table builds are not
timed, while caches that learn from the text (our word splitter's chunk cache, spaCy's) start
equally cold on both sides and no run profits from an earlier run over the same pages. Each
timed run starts its own extraction child, as a real job does (ours: one per shard, i.e. per
input file; datatrove: one per task). Extraction time bound: 10 s on both sides (ours' default;
datatrove's is 1 s, which a loaded shared machine can trip). `--repeat N` keeps the best (least
CPU) of N runs. `--profile` adds a cProfile of the default belt (its per-call overhead inflates
Python-heavy code several-fold: read the unprofiled stage breakdown for shares).

`--backend blocks` (or a comma list, `resiliparse,blocks`; `blocks-strict`: `blocks` with
`extract.strict = true`) chooses the extractor of the first belts
and of the stage breakdown; `--page-by-page` adds each one's +lang belt with the extract step's
batch of one page (as it ran before batches); `--ours-only` skips trafilatura's belts and datatrove.

What it is doing (the peer check, each set, each belt's fresh process and its result) goes to
stderr as it goes, with the seconds since the start; the tables go to stdout.

Run: .venv/bin/python bench/bench_belt.py [--backend blocks-strict] [--page-by-page] [--ours-only]
     [--repeat 1] [--reasons] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io as _io
import json
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from pretrain.curate import io
from pretrain.curate.dedup import DedupConfig
from pretrain.curate.executor import LocalExecutor
from pretrain.curate.extract import BACKENDS, ExtractConfig
from pretrain.curate.language import LanguageConfig
from pretrain.curate.pipeline import CurateConfig, curate
from pretrain.curate.readers import ReaderConfig, read_documents
from pretrain.curate.rules import RulesConfig
from pretrain.curate.urlfilter import URLFilterConfig

ROOT = Path(__file__).resolve().parents[1]
# PRETRAIN_SHARED_DATA: where ../shared/data is when the checkout sits elsewhere (a git worktree).
SHARED = Path(os.environ.get("PRETRAIN_SHARED_DATA") or ROOT.parent / "shared" / "data")
PEERS = ROOT / ".venv-peers" / "bin" / "python"
DEMO = ROOT / "src" / "pretrain" / "data" / "demo" / "crawl.warc.gz"
TIMEOUT_S = 10.0
# Our steps, in belt order; datatrove's equivalents map onto the same columns.
COLUMNS = ["read", "url_filter", "extract", "language", "gopher_repetition", "gopher_quality",
           "c4_quality", "fineweb_quality", "exact_dedup", "near_dedup"]
SHORT = {"read": "read", "url_filter": "url", "extract": "extr", "language": "lang",
         "gopher_repetition": "g_rep", "gopher_quality": "g_qual", "c4_quality": "c4",
         "fineweb_quality": "fw", "exact_dedup": "exact", "near_dedup": "near"}
PEER_CONFIGS = [  # (label, extraction backend, language step on, the rest of the belt on)
    ("ours trafilatura+lang", "trafilatura", True, True),
    ("ours trafilatura", "trafilatura", False, True),
    ("ours trafilatura read+extract", "trafilatura", False, False),
]


def configs(backends: list[str], ours_only: bool, page_by_page: bool = False) -> list[tuple]:
    """The belts to time: each chosen extractor with and without language ID (and, with
    `page_by_page`, its +lang belt with the extract step's batches of one page), then (unless
    `ours_only`) trafilatura's belts, which are compared like for like with datatrove."""
    mine: list[tuple] = []
    for b in backends:
        mine += [(f"ours {b}+lang", b, True, True), (f"ours {b}", b, False, True)]
        if page_by_page and b != "trafilatura":
            mine.append((f"ours {b}+lang unbatched", b, True, True, 1))
    return mine + ([] if ours_only else [c for c in PEER_CONFIGS if c[0] not in {m[0] for m in mine}])
PEER, PEER_EXTRACT = "datatrove trafilatura", "datatrove read+extract"


@dataclass
class Run:
    """One timed pass of a belt over one input set."""

    pages: int
    cpu: float
    wall: float
    funnel: dict[str, int]  # documents left after each step (COLUMNS)
    reasons: dict[str, dict[str, int]] = field(default_factory=dict)
    kept_ids: set[str] = field(default_factory=set)  # survivors of the filters (before dedup)
    stages: dict[str, float] = field(default_factory=dict)  # CPU seconds by stage (ours only)


def input_sets() -> list[tuple[str, list[Path]]]:
    derived = sorted((SHARED / "warc" / "derived").glob("*.warc.gz"))
    return [
        ("derived (AEB articles)", derived),
        ("Common Crawl excerpt", [SHARED / "warc" / "resiliparse" / "warcfile.warc.gz"]),
        ("demo crawl", [DEMO]),
    ]


def cpu_seconds() -> float:
    """CPU seconds of this process and its reaped children (the extraction child is reaped when the
    step closes): a per-core figure that does not depend on what else the shared machine runs."""
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + c.ru_utime + c.ru_stime


def belt_config(backend: str, language: bool, rest: bool = True) -> CurateConfig:
    """The belt with the given extractor; `rest=False` keeps only read -> extract (and the output)."""
    cfg = CurateConfig()
    strict = backend == "blocks-strict"  # `blocks` with extract.strict = true (issue 19, session 14)
    cfg.extract = ExtractConfig(backend="blocks" if strict else backend, timeout_s=TIMEOUT_S, strict=strict)
    cfg.language = LanguageConfig(enabled=language)
    if not rest:
        cfg.rules = RulesConfig(gopher_repetition=False, gopher_quality=False, c4_quality=False,
                                fineweb_quality=False)
        cfg.dedup = DedupConfig(exact=False, near=False)
        return cfg
    # We ship no default blocklist; a small inline one makes the step run (and be timed) as it
    # would with a user's lists. Lookups are set memberships, so list size barely matters.
    cfg.url_filter = URLFilterConfig(
        domains=["blocked.example", "casino.example"], banned_words=["porn", "xxx", "casino"],
        soft_banned_words=["sex", "adult", "cams"], banned_subwords=["pornhub"],
    )
    return cfg


def html_megabytes(files: list[Path]) -> float:
    """Decoded HTML of the documents our reader yields: the bytes the extractors actually parse."""
    return sum(len(d.text.encode("utf-8")) for f in files for d in read_documents(f, ReaderConfig())) / 1e6


WARMUP_TEXT = [  # our own sentences, so that every step (all rules, both dedups) runs during the warm-up
    "The river runs past the old mill and turns north before it reaches the town. Farmers bring "
    "their grain there in the autumn, and the miller keeps a ledger of every sack that he grinds.",
    "A short guide to the station: trains leave every hour, tickets are sold at the window on the "
    "left, and the waiting room stays open until the last train of the evening has gone.",
    "Notes from the garden. We planted beans, peas and three rows of onions this year; the soil "
    "was wet in April, so the seeds went in late, but the first shoots came up within two weeks.",
    "Our library opens at nine on weekdays. Children can borrow up to six books at a time, and "
    "the reading room on the second floor is quiet enough for anyone who needs to study.",
    "The recipe is simple. Warm the milk, stir in the flour a spoonful at a time, and keep the "
    "pan moving so that nothing sticks; after ten minutes the sauce should coat the spoon.",
    "Last winter the lake froze for the first time in years. People walked across it to the "
    "island, and some of them said they could hear the ice singing under their boots at night.",
]


def write_warmup_warc(path: Path) -> Path:
    """Three small HTML response records (gzip per record, as a crawler writes them) that pass the
    whole belt, so that the warm-up reaches every step, including one-time table builds."""
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    with open(path, "wb") as fh:
        writer = WARCWriter(fh, gzip=True)
        for i in range(3):
            paras = "".join(f"<p>{WARMUP_TEXT[(i + k) % len(WARMUP_TEXT)]}</p>" for k in range(4))
            body = (f"<html><head><title>Page {i}</title></head><body><nav>Home | About</nav>"
                    f"<article><h1>Notes, part {i}</h1>{paras}</article></body></html>")
            data = body.encode("utf-8")
            http = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8"),
                                               ("Content-Length", str(len(data)))], protocol="HTTP/1.1")
            writer.write_record(writer.create_warc_record(
                f"http://warmup.example/page{i}", "response", payload=_io.BytesIO(data), http_headers=http))
    return path


# ----------------------------------------------------------------------------- ours


def run_ours(files: list[Path], cfg: CurateConfig, profiler: cProfile.Profile | None = None) -> Run:
    with tempfile.TemporaryDirectory(prefix="bench_belt_") as tmp:
        out = Path(tmp) / "out"
        c0, w0 = cpu_seconds(), time.perf_counter()
        if profiler:
            profiler.enable()
        stats = curate([str(f) for f in files], out, cfg, executor=LocalExecutor(1))
        if profiler:
            profiler.disable()
        cpu, wall = cpu_seconds() - c0, time.perf_counter() - w0
        kept_ids = {r["id"] for p in sorted((out / "data").glob("*.jsonl.zst")) for r in io.read_jsonl_zst(p)}
        kept_ids |= {r["id"] for p in sorted((out / "rejects").glob("dedup_*.jsonl.zst"))
                     for r in io.read_jsonl_zst(p)}
    steps = stats["steps"]
    funnel, left = {"read": stats["documents"]["read"]}, stats["documents"]["read"]
    for name in COLUMNS[1:]:
        if name in steps:
            left = steps[name]["kept"]
        funnel[name] = left
    reasons = {name: s["dropped"] for name, s in steps.items() if s["dropped"]}
    return Run(funnel["read"], cpu, wall, funnel, reasons, kept_ids)


def worker(job: dict) -> dict:
    """One measurement in this (fresh) process: warm up on the tiny WARC, then time the belt."""
    cfg = belt_config(job["backend"], job["language"], job["rest"])
    if job.get("batch_pages"):  # the extract step's batch size (in-process backends; 1: page by page)
        from pretrain.curate import extract

        extract.BATCH_PAGES = job["batch_pages"]
    run_ours([Path(job["warmup"])], cfg)
    files = [Path(f) for f in job["files"]]
    timer = StageTimer()
    timer.install()
    r = run_ours(files, cfg)
    order = ["read", *COLUMNS[1:8], "dedup signatures", "global dedup", "write jsonl.zst"]
    stages = {k: timer.seconds[k] for k in order if k in timer.seconds}
    return {"pages": r.pages, "cpu": r.cpu, "wall": r.wall, "funnel": r.funnel, "reasons": r.reasons,
            "kept_ids": sorted(r.kept_ids), "stages": stages}


T0 = time.perf_counter()


def say(what: str) -> None:
    """What the bench is doing, on stderr as it goes (it was silent for over 60 s before its first
    table): the results on stdout stay a clean record."""
    print(f"[{time.perf_counter() - T0:6.1f} s] {what}", file=sys.stderr, flush=True)


def in_fresh_process(python: Path | str, argv: list[str], cwd: str | None = None) -> dict:
    proc = subprocess.run([str(python), *argv], capture_output=True, text=True, cwd=cwd)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:1])} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure_ours(files: list[Path], conf: tuple, warm: Path, repeat: int) -> Run:
    _, backend, language, rest, *batch = conf
    job = {"files": [str(f) for f in files], "backend": backend, "language": language, "rest": rest,
           "warmup": str(warm), "batch_pages": batch[0] if batch else None}
    say(f"  {conf[0]}: a fresh process loads the belt (models, tables), warms up on 3 pages, then times "
        f"{len(files)} file(s)")
    runs = [in_fresh_process(sys.executable, [__file__, "--worker", json.dumps(job)]) for _ in range(repeat)]
    best = to_run(min(runs, key=lambda r: r["cpu"]))
    say(f"  {conf[0]}: {best.pages} pages in {best.cpu:.1f} CPU s")
    return best


def to_run(r: dict) -> Run:
    return Run(r["pages"], r["cpu"], r["wall"], r["funnel"], r["reasons"], set(r["kept_ids"]), r["stages"])


# ----------------------------------------------------------------------------- datatrove

DATATROVE_SCRIPT = r'''
"""Generated by bench/bench_belt.py: datatrove's WARC -> trafilatura -> quality-filter pipeline,
chained as LocalPipelineExecutor chains steps, timed in CPU seconds of this process and children."""
import json, resource, sys, time, types
from pathlib import Path

try:  # a peers venv whose huggingface_hub is older than datatrove needs cannot import the writers
    import datatrove.pipeline.writers.huggingface  # noqa: F401
    SHIM = False
except ImportError:  # the hub writers are not used here: stand-ins let the rest of datatrove import
    SHIM = True
    _m = types.ModuleType("datatrove.pipeline.writers.huggingface")
    _m.HuggingFaceBucketWriter = _m.HuggingFaceDatasetWriter = None
    sys.modules[_m.__name__] = _m

from datatrove.pipeline.extractors import Trafilatura
from datatrove.pipeline.filters import (C4QualityFilter, FineWebQualityFilter, GopherQualityFilter,
                                        GopherRepetitionFilter)
from datatrove.pipeline.readers import WarcReader
from datatrove.utils.logging import logger

logger.remove()  # progress chatter on stderr is not part of the work
job = json.loads(sys.argv[1])
NAMES = ["extract", "gopher_repetition", "gopher_quality", "c4_quality", "fineweb_quality"]


def cpu():
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + c.ru_utime + c.ru_stime


def run(files, filters):
    folder = str(Path(files[0]).parent)
    names = sorted(Path(f).name for f in files)
    pattern = names[0] if len(names) == 1 else "*.warc.gz"
    reader = WarcReader(folder, glob_pattern=pattern, recursive=False)
    steps = [Trafilatura(favour_precision=True, timeout=job["timeout"])]
    if filters:
        steps += [GopherRepetitionFilter(), GopherQualityFilter(),
                  C4QualityFilter(filter_no_terminal_punct=False), FineWebQualityFilter()]
    counts = dict.fromkeys(["read", *NAMES[: len(steps)]], 0)

    def count(it, key):
        for d in it:
            counts[key] = counts.get(key, 0) + 1
            yield d

    c0, w0 = cpu(), time.perf_counter()
    data = count(reader(None, 0, 1), "read")
    for name, step in zip(NAMES, steps):
        data = count(step(data, 0, 1), name)
    kept = [d.id for d in data]
    cpu_s, wall = cpu() - c0, time.perf_counter() - w0
    reasons = {}
    for name, step in zip(NAMES, steps):
        drops = {k[len("dropped_"):]: int(v.total) for k, v in step.stats.stats.items()
                 if k.startswith("dropped_")}
        for k in ("timeout", "clean_error", "broken_process"):
            if k in step.stats.stats:
                drops[k] = int(step.stats.stats[k].total)
        if drops:
            reasons[name] = drops
    return {"cpu": cpu_s, "wall": wall, "counts": counts, "reasons": reasons, "kept_ids": kept}


run([job["warmup"]], job["filters"])
out = run(job["files"], job["filters"])
out["shim"] = SHIM
print(json.dumps(out))
'''


def measure_peer(files: list[Path], filters: bool, warm: Path, repeat: int) -> Run:
    """datatrove's pipeline (`filters`) or its WarcReader -> Trafilatura alone, best of `repeat`."""
    with tempfile.TemporaryDirectory(prefix="bench_belt_dt_") as tmp:
        script = Path(tmp) / "datatrove_belt.py"
        script.write_text(DATATROVE_SCRIPT, encoding="utf-8")
        job = {"timeout": TIMEOUT_S, "filters": filters, "warmup": str(warm),
               "files": [str(f) for f in files]}
        label = PEER if filters else PEER_EXTRACT
        say(f"  {label}: a fresh .venv-peers process imports datatrove, warms up, then times "
            f"{len(files)} file(s)")
        runs = [in_fresh_process(PEERS, [str(script), json.dumps(job)], cwd=tmp) for _ in range(repeat)]
    best = min(runs, key=lambda r: r["cpu"])
    say(f"  {label}: {best['counts']['read']} pages in {best['cpu']:.1f} CPU s")
    if best["shim"] and not getattr(measure_peer, "noted", False):
        measure_peer.noted = True  # type: ignore[attr-defined]
        print("note: .venv-peers' huggingface_hub is too old for datatrove's hub writers (unused here); "
              "stand-ins were put in their place so that datatrove imports")
    funnel, left = {}, 0
    for col in COLUMNS:  # steps datatrove lacks pass everything through
        left = best["counts"].get(col, left)
        funnel[col] = left
    return Run(best["counts"]["read"], best["cpu"], best["wall"], funnel, best["reasons"],
               set(best["kept_ids"]))


def datatrove_missing() -> str | None:
    if not PEERS.exists():
        return f"{PEERS} missing (make peers)"
    probe = "import datatrove.pipeline.extractors, trafilatura, spacy, cchardet, magic"
    proc = subprocess.run([str(PEERS), "-c", probe], capture_output=True, text=True)
    if proc.returncode != 0:
        last = proc.stderr.strip().splitlines()[-1:] or ["?"]
        return f"datatrove's WarcReader cannot run in .venv-peers: {last[0]}"
    return None


# ----------------------------------------------------------------------------- report


def print_table(title: str, files: list[Path], rows: list[tuple[str, Run]], html_mb: float,
                reasons: bool) -> None:
    gz_mb = sum(f.stat().st_size for f in files) / 1e6
    pages = rows[0][1].pages
    print(f"\n== {title}: {len(files)} file(s), {gz_mb:.2f} MB gzip, {html_mb:.2f} MB HTML, {pages} pages")
    cols = "".join(f"{SHORT[c]:>7}" for c in COLUMNS)
    print(f"{'belt':<34}{'pages/s/core':>13}{'pages/s wall':>13}{'HTML MB/s/core':>15}  funnel:{cols}")
    for label, r in rows:
        funnel = "".join(f"{r.funnel[c]:>7}" for c in COLUMNS)
        print(f"{label:<34}{r.pages / r.cpu:>13.1f}{r.pages / r.wall:>13.1f}{html_mb / r.cpu:>15.2f}"
              f"         {funnel}")
        if reasons:
            for step, by in r.reasons.items():
                print(f"{'':<28}{step}: " + ", ".join(f"{k} {v}" for k, v in sorted(by.items())))


def print_ratios(rows: dict[str, Run]) -> None:
    """Each of our belts against datatrove's pipeline; read+extract alone against read+extract."""
    def rate(r: Run) -> float:
        return r.pages / r.cpu

    peer, base = rows[PEER], rate(rows[PEER])
    print(f"{'':<4}per core, against datatrove's pipeline ({base:.1f} pages/s): " + "   ".join(
        f"{label.removeprefix('ours ')} {rate(r) / base:.1f}x" for label, r in rows.items()
        if label.startswith("ours") and "read+extract" not in label))
    ours_x, peer_x = rows["ours trafilatura read+extract"], rows[PEER_EXTRACT]
    print(f"{'':<4}read+extract only (trafilatura): ours {rate(ours_x):.1f}, datatrove {rate(peer_x):.1f} "
          f"pages/s/core ({rate(ours_x) / rate(peer_x):.1f}x)")
    like = rows["ours trafilatura"]  # same extractor, same filters: the survivors should agree
    both = len(like.kept_ids & peer.kept_ids)
    only_ours, only_peer = len(like.kept_ids - peer.kept_ids), len(peer.kept_ids - like.kept_ids)
    print(f"{'':<4}survivors before dedup, ours trafilatura vs datatrove: both {both}, "
          f"only ours {only_ours}, only datatrove {only_peer}")


class StageTimer:
    """Exclusive CPU seconds (this process) of each stage of `curate` runs, by wrapping the belt's
    parts where `pipeline` looks them up: the belt keeps no per-step timers, and this keeps src/
    untouched. A stage entered inside another (a write inside global dedup) pauses the outer one.
    The extraction child's CPU is not here: it is reaped when the step closes (time it with the
    table's figures instead). Two clock reads per document and step: negligible."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._stack: list[list] = []  # [stage, start]

    def _enter(self, stage: str) -> None:
        now = time.process_time()
        if self._stack:
            top = self._stack[-1]
            self.seconds[top[0]] = self.seconds.get(top[0], 0.0) + now - top[1]
        self._stack.append([stage, now])

    def _exit(self) -> None:
        now = time.process_time()
        stage, start = self._stack.pop()
        self.seconds[stage] = self.seconds.get(stage, 0.0) + now - start
        if self._stack:
            self._stack[-1][1] = now

    def timed(self, stage: str, fn):
        def wrapper(*args, **kwargs):
            self._enter(stage)
            try:
                return fn(*args, **kwargs)
            finally:
                self._exit()
        return wrapper

    def timed_iter(self, stage: str, it):
        while True:
            self._enter(stage)
            try:
                item = next(it)
            except StopIteration:
                return
            finally:
                self._exit()
            yield item

    def install(self) -> None:
        from pretrain.curate import dedup, io, pipeline

        build, read = pipeline.build_steps, pipeline.read_documents

        def build_timed(cfg: CurateConfig) -> list:
            steps = build(cfg)
            for step in steps:
                step.process = self.timed(step.name, step.process)
                if hasattr(step, "prepare"):  # the extract step's batch pass (in-process backends)
                    step.prepare = self.timed(step.name, step.prepare)
            return steps

        pipeline.build_steps = build_timed
        pipeline.read_documents = lambda *a, **k: self.timed_iter("read", read(*a, **k))
        pipeline.sign_shard = self.timed("dedup signatures", pipeline.sign_shard)
        dedup.find_duplicates = self.timed("global dedup", dedup.find_duplicates)  # job.py imports it late
        io.JsonlZstWriter.write = self.timed("write jsonl.zst", io.JsonlZstWriter.write)  # streamed writes


def print_breakdown(name: str, label: str, r: Run) -> None:
    if not r.stages:
        return
    rest = max(r.cpu - sum(r.stages.values()), 0.0)
    print(f"{'':<4}where {label}'s {r.cpu:.2f} CPU s go on {name} (ms per page read, share; "
          "rest: planning, stage C, stats, done markers):")
    parts = [f"{stage} {1e3 * s / r.pages:.2f} ({100 * s / r.cpu:.0f}%)" for stage, s in r.stages.items()]
    parts.append(f"rest {1e3 * rest / r.pages:.2f} ({100 * rest / r.cpu:.0f}%)")
    print(f"{'':<8}" + ", ".join(parts))


def print_profile(files: list[Path], backend: str, top: int = 15) -> None:
    """Where the default belt's CPU goes on one input set (cProfile with a CPU-time clock, so that
    waits on a shared machine do not count; its own overhead inflates Python-heavy code)."""
    prof = cProfile.Profile(time.process_time)
    run_ours(files, belt_config(backend, True), prof)
    buf = _io.StringIO()
    ps = pstats.Stats(prof, stream=buf)
    total = sum(v[2] for v in ps.stats.values())  # tottime summed: all time spent
    print(f"\n== profile: {backend}+lang belt on {files[0].parent.name}/ ({total:.2f} CPU s profiled)")
    print(f"{'tottime':>8} {'share':>6}  function")
    rows = sorted(ps.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    for (path, _line, fn), (_, _, tt, _, _) in rows:
        where = fn if path == "~" else f"{_short(path)}:{fn}"
        print(f"{tt:>8.3f} {100 * tt / total:>5.1f}%  {where}")
    print("per step (cumulative):")
    for (path, line, fn), (_, _, _, ct, _) in sorted(ps.stats.items(), key=lambda kv: -kv[1][3]):
        if "pretrain/curate" in path and fn in ("keep", "process", "sign_shard", "read_documents",
                                                "find_duplicates", "write_shard"):
            print(f"{ct:>8.3f} {100 * ct / total:>5.1f}%  {_short(path)}:{_owner(path, line)}{fn}")


def _owner(path: str, line: int) -> str:
    """'Class.' of the class a method at `line` belongs to ('' for a module-level function)."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()[: line - 1]
    except OSError:
        return ""
    for text in reversed(lines):
        if text.startswith("class "):
            return text[6:].split("(")[0].split(":")[0] + "."
        if text.startswith("def "):
            return ""
    return ""


def _short(path: str) -> str:
    for marker in ("site-packages/", "src/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=1, help="timed runs per belt and set; the best is kept")
    ap.add_argument("--reasons", action="store_true", help="print drop reasons under each funnel")
    ap.add_argument("--profile", action="store_true", help="cProfile the first +lang belt on the derived set")
    ap.add_argument("--backend", default="blocks-strict",
                    help="extractor(s) of the first belts, comma-separated: blocks-strict (blocks with"
                         " extract.strict = true: the default belt), blocks (strict off), resiliparse,"
                         " trafilatura")
    ap.add_argument("--page-by-page", action="store_true",
                    help="also time each chosen +lang belt with the extract step's batches of one page")
    ap.add_argument("--ours-only", action="store_true",
                    help="time only the chosen belts: no trafilatura belts, no datatrove (quick)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)  # internal: one measurement, JSON job
    args = ap.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # each table as it is made, through `| tee` too
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    if not (SHARED / "warc").is_dir():
        print(f"no data at {SHARED / 'warc'}; nothing to measure")
        return 0
    backends = [b.strip() for b in args.backend.split(",") if b.strip()]
    bad = [b for b in backends if b not in (*BACKENDS, "blocks-strict")]
    if bad or not backends:
        ap.error(f"--backend: unknown extractor {bad or args.backend!r}; choose from"
                 f" {', '.join(BACKENDS)}, blocks-strict")
    say("checking the peer (datatrove in .venv-peers)" if not args.ours_only else "ours only: no peer")
    missing = None if args.ours_only else datatrove_missing()
    if missing:
        print(f"{missing}; no peer to compare with, nothing measured")
        return 0
    confs = configs(backends, args.ours_only, args.page_by_page)
    with tempfile.TemporaryDirectory(prefix="bench_belt_warm_") as tmp:
        warm = write_warmup_warc(Path(tmp) / "warmup.warc.gz")
        totals = measure_all(input_sets(), confs, warm, args.repeat, args.reasons, not args.ours_only)
        base = totals[PEER][0] / totals[PEER][1] if PEER in totals else None
        print("\n== all three sets together (pages / CPU seconds summed over sets)")
        for label, (pages, cpu, wall) in totals.items():
            peer = f"   {pages / cpu / base:>5.1f}x datatrove's pipeline" if base else ""
            print(f"{label:<34}{pages / cpu:>8.1f} pages/s/core {pages / wall:>8.1f} pages/s wall{peer}")
        if base:
            print("datatrove runs no language step (its LanguageFilter downloads a model), no URL filter and "
                  "no dedup; our belt runs all of them.")
        if args.profile:
            run_ours([warm], belt_config(backends[0], True))
            print_profile(input_sets()[0][1], backends[0])
    return 0


def measure_all(sets: list[tuple[str, list[Path]]], confs: list[tuple], warm: Path, repeat: int,
                reasons: bool, peers: bool = True) -> dict:
    """Every belt on every set, printed set by set; returns pages, CPU and wall seconds per belt.
    Our belts take turns (one run of each, `repeat` times over) so that a change in the shared
    machine's load falls on all of them alike; each keeps its best run."""
    totals: dict[str, list[float]] = {}
    runs = len(sets) * (len(confs) * repeat + 2 * peers)
    say(f"{runs} timed runs ({len(sets)} input sets x {len(confs)} of our belts"
        f"{' + 2 of datatrove' if peers else ''}{f', {repeat} times' if repeat > 1 else ''}), each in a "
        "fresh process; a table per set")
    for name, files in sets:
        say(f"set {name}: {len(files)} file(s)")
        rows: dict[str, Run] = {}
        for _ in range(repeat):
            for conf in confs:
                r = measure_ours(files, conf, warm, 1)
                if conf[0] not in rows or r.cpu < rows[conf[0]].cpu:
                    rows[conf[0]] = r
        if peers:
            rows[PEER] = measure_peer(files, True, warm, repeat)
            rows[PEER_EXTRACT] = measure_peer(files, False, warm, repeat)
        print_table(name, files, list(rows.items()), html_megabytes(files), reasons)
        print(f"{'':<4}load average {os.getloadavg()[0]:.1f} (a shared machine: compare rows, not runs)")
        if peers:
            print_ratios(rows)
        for conf in confs:
            if conf[2] and conf[3] and len(conf) == 4:  # each chosen extractor's full belt
                print_breakdown(name, conf[0], rows[conf[0]])
        for label, r in rows.items():
            t = totals.setdefault(label, [0, 0.0, 0.0])
            t[0], t[1], t[2] = t[0] + r.pages, t[1] + r.cpu, t[2] + r.wall
    return totals


if __name__ == "__main__":
    sys.exit(main())
