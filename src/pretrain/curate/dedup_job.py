"""The standalone dedup job behind `pretrain dedup`: files in, deduplicated corpus out.

Each input file is one shard. Three passes, each resumable (done markers, atomic files):
1. per file: read documents, `dedup.sign_shard` (skipped when the shard's files check out);
2. `dedup.find_duplicates` over all shards -> removal list;
3. per file: read again, write kept documents to OUT/data/NNNNN.jsonl.zst and removed ones to
   OUT/rejects/NNNNN.jsonl.zst with the id of the kept twin; OUT/stats.json sums it up.
Reading twice keeps memory bounded: no pass holds the corpus.

Which copy is kept: `keep = "id"` (default) keeps the smallest document id of each cluster;
`keep = "first"` keeps the first in input order (file order, then position in the file).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pretrain import config
from pretrain.curate import io
from pretrain.curate.dedup import (
    DedupConfig,
    find_duplicates,
    load_removals,
    removal_summary,
    shard_ok,
    sign_shard,
)
from pretrain.curate.readers import ReaderConfig, list_inputs, read_documents
from pretrain.errors import UserError

SHARD_BITS = 40  # priority for keep="first": file << 40 | position
MAX_ERROR_EXAMPLES = 20


@dataclass
class DedupJobConfig:
    """`pretrain dedup` settings: `[reader]`, `[dedup]` and which copy to keep."""

    reader: ReaderConfig = field(default_factory=ReaderConfig)
    dedup: DedupConfig = field(default_factory=DedupConfig)
    keep: str = "id"  # "id": smallest id of a cluster; "first": first in input order

    def __post_init__(self) -> None:
        if self.keep not in ("id", "first"):
            raise UserError(f"keep must be 'id' or 'first', got {self.keep!r}")


def _work(out: Path) -> Path:
    return out / "work" / "dedup"


def _errors_sink(counts: Counter, examples: list[dict]) -> Callable[[str, object, str], None]:
    def on_error(path: str, record: object, reason: str) -> None:
        counts[reason.split(":")[0]] += 1
        if len(examples) < MAX_ERROR_EXAMPLES:
            examples.append({"file": str(path), "record": record, "reason": reason})

    return on_error


def _sign_file(args: tuple) -> dict:
    """Pass 1 for one input file (a top-level function: runs in any executor)."""
    shard, path, out, cfg = args
    stats_path = _work(Path(out)) / "read" / f"s{shard:06d}.json"
    if shard_ok(_work(Path(out)), shard, cfg.dedup) and stats_path.exists():
        return json.loads(stats_path.read_text())
    counts: Counter[str] = Counter()
    examples: list[dict] = []
    docs = read_documents(Path(path), cfg.reader, _errors_sink(counts, examples))
    n = 0

    def items():
        nonlocal n
        for pos, doc in enumerate(docs):
            n += 1
            yield doc, ((shard << SHARD_BITS) | pos) if cfg.keep == "first" else 0

    sign_shard(items(), shard, _work(Path(out)), cfg.dedup)
    stats = {"file": str(path), "read": n, "errors": {"count": sum(counts.values()),
                                                      "by_reason": dict(counts), "examples": examples}}
    io.write_json_atomic(stats_path, stats)
    return stats


def _write_file(args: tuple) -> dict:
    """Pass 3 for one input file: kept documents to data/, removed ones to rejects/."""
    shard, path, out, cfg, removals_path, job_hash = args
    out = Path(out)
    data, rejects = out / "data" / f"{shard:05d}.jsonl.zst", out / "rejects" / f"{shard:05d}.jsonl.zst"
    if io.is_done(data, job_hash):
        return json.loads(io.done_marker(data).read_text())["counts"]
    removals = load_removals(Path(removals_path))
    dropped: list[dict] = []
    by_reason: Counter[str] = Counter()

    def kept():
        for doc in read_documents(Path(path), cfg.reader):
            hit = removals.get(doc.id)
            if hit is None:
                yield doc.to_json()
                continue
            step, reason, twin = hit
            by_reason[f"{step}.{reason}"] += 1
            dropped.append({"id": doc.id, "url": doc.url, "source": doc.source, "step": step,
                            "reason": reason, "kept_id": twin})

    n_kept = io.write_jsonl_zst(data, kept())
    io.write_jsonl_zst(rejects, dropped)
    counts = {"in": n_kept + len(dropped), "kept": n_kept, "dropped": dict(by_reason)}
    io.mark_done(data, {"config_hash": job_hash, "counts": counts})
    return counts


def run_dedup(inputs: list[str], out: str | Path, cfg: DedupJobConfig,
              map_fn: Callable[[Callable, Iterable], Iterable] = map) -> dict:
    """Deduplicate the corpus in `inputs` into `out`; returns the stats written to stats.json."""
    t0 = time.time()
    files = list_inputs(inputs)
    if not files:
        raise UserError(f"no input files in {inputs}")
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create output directory {out}: {e}") from e
    job_hash = config.config_hash(cfg)
    resolved = config.dumps(cfg)
    previous = out / "config.toml"
    if previous.exists() and previous.read_text() != resolved:
        raise UserError(f"{out} holds a run with a different config ({previous}); "
                        "use a new output directory or remove the old one")
    io.write_bytes_atomic(previous, resolved.encode())
    read = list(map_fn(_sign_file, [(i, str(f), str(out), cfg) for i, f in enumerate(files)]))
    removals = find_duplicates(_work(out), len(files), cfg.dedup, map_fn)
    written = list(map_fn(_write_file, [(i, str(f), str(out), cfg, str(removals), job_hash)
                                        for i, f in enumerate(files)]))
    stats = _aggregate(read, written, removal_summary(removals), time.time() - t0)
    io.write_json_atomic(out / "stats.json", stats)
    return stats


def _aggregate(read: list[dict], written: list[dict], summary: dict, seconds: float) -> dict:
    dropped: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    for w in written:
        dropped.update(w["dropped"])
    for r in read:
        errors.update(r["errors"]["by_reason"])
    docs_in = sum(w["in"] for w in written)
    kept = sum(w["kept"] for w in written)
    steps = {}
    for step in ("exact_dedup", "near_dedup"):
        reasons = {k.split(".", 1)[1]: v for k, v in sorted(dropped.items()) if k.startswith(step + ".")}
        steps[step] = {"dropped": sum(reasons.values()), "by_reason": reasons}
    examples = [e for r in read for e in r["errors"]["examples"]][:MAX_ERROR_EXAMPLES]
    return {
        "files": len(read), "documents_in": docs_in, "kept": kept, "dropped": docs_in - kept,
        "steps": steps, "dedup": summary,
        "errors": {"count": sum(errors.values()), "by_reason": dict(errors), "examples": examples},
        "seconds": round(seconds, 3),
    }
