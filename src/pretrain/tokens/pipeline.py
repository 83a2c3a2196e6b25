"""`pretrain tokenize` as a library: corpus files -> token shards, parallel, streaming, resumable.

One input file is one unit of work and becomes one shard (`shard_NNNNN`, N = the file's position in
the sorted input list), so the bytes of every shard depend only on its file and the tokenizer: the
output is identical for any number of workers. Each shard gets a done marker (recording the
tokenizer fingerprint and the input's identity) after its `.bin` and `.idx` are renamed into place;
a rerun skips finished shards, and refuses an output directory made with another tokenizer.
`manifest.json` is written last: its presence means the directory is complete.

Beside the identity, not in it: each done marker's `versions`, the stamp of the input its shard
was read from (curate/versions.py: a local file's size, mtime and xxh3_128, an object's ETag from
the listing). A rerun refuses a finished shard whose input now holds other bytes (a same-size
rewrite, which the identity's size cannot see; a new mtime alone is hashed, and the same bytes are
taken silently); a marker written before stamps were recorded resumes, said once, then upgraded.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

from pretrain.curate import versions
from pretrain.curate.io import done_marker, is_done, mark_done, write_bytes_atomic
from pretrain.errors import UserError
from pretrain.faults import MAX_FAULT_KINDS, count_fault, merge_faults
from pretrain.lifeline import init_worker, sigint_held, stop_pool
from pretrain.tokens import pieces, shards
from pretrain.tokens.tokenizer import eot_id, load_tokenizer

# One encode_batch call gets up to this many documents or bytes: big enough to amortize the call
# (measured: batches of 64 documents cost ~1.5x the time of one big call), small enough in memory.
BATCH_DOCS = 4096
BATCH_BYTES = 16 * 2**20


def field_read(path: Path, text_field: str) -> str:
    """The field a file's text is read from: `text_field` for records with fields (JSON Lines,
    Parquet, Arrow), "text" for a file without (a .txt is one document whatever --text-field says),
    so that its shard's identity does not change with a setting it never read (session 14: a rerun
    with another --text-field over .txt beside JSONL refused the .txt shards too)."""
    from pretrain.curate.inputs import FIELD_SUFFIXES

    return text_field if path.name.lower().endswith(FIELD_SUFFIXES) else "text"


def unit_hash(tok_sha: str, path: Path, text_field: str = "text") -> str:
    """Identity of one unit: tokenizer + input file (path, size) + the field read (when not "text":
    the hashes of earlier runs stay valid); a changed unit is refused, not mixed."""
    text_field = field_read(path, text_field)
    key = {"tokenizer": tok_sha, "input": str(path.resolve()), "size": path.stat().st_size,
           "format": shards.VERSION, **({"text_field": text_field} if text_field != "text" else {})}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def unit_settings(tok_sha: str, path: Path, text_field: str = "text") -> dict[str, Any]:
    """What unit_hash fingerprints, every setting spelled out: kept in the done marker, so a rerun
    refused for another unit says which setting changed (old -> new), not two hashes."""
    text_field = field_read(path, text_field)
    return {"tokenizer": tok_sha, "input": str(path.resolve()), "size": path.stat().st_size,
            "format": shards.VERSION, "text_field": text_field}


_TOKENIZERS: dict[str, Any] = {}


def _tokenizer(path: str):
    # One load per worker process, reused for every unit it runs.
    if path not in _TOKENIZERS:
        _TOKENIZERS[path] = load_tokenizer(path)
    return _TOKENIZERS[path]


def iter_texts(path: Path, errors: dict[str, int], text_field: str = "text",
               first: dict[str, str] | None = None) -> Iterator[str]:
    """Document texts of one corpus file (`text_field` of JSON and Parquet records); bad records and
    empty texts are counted in `errors` by kind of fault (pretrain/faults.py, as curate), and `first`
    keeps the first record of each kind with its full reason (`line 3: invalid UTF-8 at byte 14`)."""
    from pretrain.curate.readers import ReaderConfig, read_documents

    def on_error(p: str, record: object, reason: str) -> None:
        kind = count_fault(errors, reason)
        if first is not None and kind not in first and len(first) < MAX_FAULT_KINDS:
            first[kind] = f"{record}: {reason}" if record else reason

    for text in (d.text for d in read_documents(path, ReaderConfig(text_field=text_field), on_error)):
        if text:
            yield text
        else:
            count_fault(errors, "empty text")


def oversize_hint(skipped: dict[str, int]) -> str:
    """The way on when documents were skipped for their size (the readers' 8 MiB bound per record,
    a whole plain-text file being one record): "" when none was."""
    if not any("max_record_bytes" in k for k in skipped):
        return ""
    return ("; a document over 8 MiB (max_record_bytes; a plain-text file is one document) is "
            "skipped: split it into JSONL records of one document each")


def _encoded(tok, texts: Iterator[str], said: dict[str, Any] | None = None) -> Iterator[np.ndarray]:
    """Ids of each text, in order; `said["cut_runs"]` counts the documents with a run cut inside
    (tokens/pieces.py: ids next to such a cut may differ from whole-document encoding),
    `said["encoded_whole"]` the long ones encoded whole because the tokenizer has no cut rule
    (`said["whole_why"]`: why)."""
    encode = getattr(tok, "encode_batch_fast", tok.encode_batch)  # no offsets: we only need ids

    def ids(batch: list[str]) -> Iterator[np.ndarray]:
        return (np.asarray(e.ids, dtype=np.int64) for e in encode(batch, add_special_tokens=False))

    rule = None  # where the tokenizer's texts may be cut: decided at the first long document
    batch: list[str] = []
    size = 0
    for t in texts:
        if len(t) > pieces.LONG_DOC:  # in pieces (tokens/pieces.py), in order: the batch before it first
            rule = pieces.cut_rule(tok) if rule is None else rule
            yield from ids(batch)
            batch, size = [], 0
            yield np.concatenate(list(pieces.encode_pieces(tok, t, rule)))
            if said is not None and isinstance(rule, str):
                said["encoded_whole"] = said.get("encoded_whole", 0) + 1
                said["whole_why"] = rule
            elif said is not None and pieces.hard_cuts(t, rule=rule):
                said["cut_runs"] = said.get("cut_runs", 0) + 1
            continue
        batch.append(t)
        size += len(t)
        if len(batch) == BATCH_DOCS or size >= BATCH_BYTES:
            yield from ids(batch)
            batch, size = [], 0
    if batch:
        yield from ids(batch)


def tokenize_unit(tok_path: str, path: str, out_dir: str, index: int, uhash: str,
                  text_field: str = "text", stamps: dict[str, dict] | None = None,
                  settings: dict | None = None, meter: str | None = None) -> dict[str, Any]:
    """Tokenize one input file into shard `index`; returns its manifest entry. Runs in a worker.
    `stamps` ({name: stamp}) is the version of the input that the marker records; a local file
    whose mtime is no longer the listed one is refused before it is read. `meter`: a JSON file
    where the documents read and the position in the file are kept for the driver's bar
    (progress.ShardMeter; a shard of one 10 GB file was silent for its whole hour)."""
    # a local input's stamp becomes the one of the bytes read (size, mtime, xxh3_128: versions.py)
    stamps = {name: versions.of_read(path) if "mtime_ns" in s else s for name, s in (stamps or {}).items()}
    tok = _tokenizer(tok_path)
    dtype = shards.dtype_for_vocab(tok.get_vocab_size(with_added_tokens=True))
    name = shards.shard_name(index)
    errors: dict[str, int] = {}
    first: dict[str, str] = {}
    t0 = time.perf_counter()
    texts = iter_texts(Path(path), errors, text_field, first)
    if meter:
        from pretrain.progress import ShardMeter

        texts = ShardMeter(meter, path).wrap(texts)
    said: dict[str, Any] = {}
    n_tokens, n_docs = shards.write_shard(Path(out_dir), name, _encoded(tok, texts, said), dtype, eot_id(tok))
    for s in stamps.values():
        if "xxh3_128" in s:
            versions.unchanged(path, s)
    entry = {"bin": f"{name}.bin", "idx": f"{name}.idx", "tokens": n_tokens, "documents": n_docs,
             "input": path, "skipped": errors, "first_skipped": first,
             "seconds": round(time.perf_counter() - t0, 3), **said}
    mark_done(Path(out_dir) / name, {"config_hash": uhash, **entry, "versions": stamps,
                                     **({"settings": settings} if settings else {})})
    return entry


def done_entry(out_dir: Path, index: int, uhash: str, settings: dict | None = None) -> dict[str, Any] | None:
    name = shards.shard_name(index)
    if not is_done(out_dir / name, uhash, settings=settings):
        return None
    info = json.loads(done_marker(out_dir / name).read_text())
    info.pop("config_hash", None)
    info.pop("settings", None)
    return info


def tokenize_corpus(
    inputs: list[str],
    tokenizer: str | Path,
    out_dir: str | Path,
    source: str | None = None,
    workers: int | None = None,
    on_unit: Callable[[dict[str, Any]], None] | None = None,
    text_field: str | None = None,
    origins: dict[str, tuple[str, dict]] | None = None,
    progress=None,
    exclude: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Tokenize every input file into `out_dir`; returns the manifest (also written to disk).
    `text_field`: the JSON/Parquet field of the text; None reads "text", a name given for inputs
    without fields (.txt only) is refused (`inputs.text_field_for`).
    `origins` maps a local copy (resolved path) to (its URL, the object's stamp from the listing):
    its shard records and is checked against that, not the copy's mtime. `progress`: a
    `pretrain.progress.Progress` whose bar follows the bytes read of every input (when enabled)."""
    from pretrain.curate.inputs import text_field_for
    from pretrain.curate.readers import list_inputs
    from pretrain.tokens.imports import resolve_tokenizer

    out = Path(out_dir)
    files = list_inputs([str(p) for p in inputs], exclude=exclude)  # --exclude GLOB: inputs.excluded
    if not files:
        raise UserError(f"no input files in {', '.join(map(str, inputs))}")
    text_field = text_field_for(text_field, files)
    if said := held_out_splits(files):
        print(said, file=sys.stderr)
    tokenizer = resolve_tokenizer(tokenizer)  # a Hugging Face folder: its tokenizer.json (as import-*)
    tok = load_tokenizer(tokenizer)
    canonical = tok.to_str()
    sha, eot = hashlib.sha256(canonical.encode()).hexdigest(), eot_id(tok)
    vocab = tok.get_vocab_size(with_added_tokens=True)
    check_not_corpus_output(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot write {e.filename or out}: {e.strerror or e}") from e
    check_existing_manifest(out, sha, tokenizer)
    check_same_inputs(out, len(files), [str(f) for f in files])
    # Temporary files of a killed run's atomic writes (one run per directory at a time): shards,
    # done markers, the tokenizer copy, the manifest.
    for pattern in (".shard_*.tmp", f".{shards.MANIFEST}.*.tmp", ".tokenizer.json.*.tmp"):
        for debris in out.glob(pattern):
            debris.unlink(missing_ok=True)
    shutil.rmtree(out / METERS, ignore_errors=True)  # a killed run's progress bar positions
    tok_copy = out / "tokenizer.json"
    write_bytes_atomic(tok_copy, canonical.encode())  # the exact tokenizer, beside its tokens
    _TOKENIZERS[str(tok_copy)] = tok  # the in-process path reuses it instead of loading it again

    hashes = [unit_hash(sha, f, text_field) for f in files]
    settings = [unit_settings(sha, f, text_field) for f in files]
    stamps = [_stamp(f, origins or {}) for f in files]
    entries: dict[int, dict[str, Any]] = {}
    for i, h in enumerate(hashes):
        if (e := done_entry(out, i, h, settings[i])) is not None:
            entries[i] = e
    check_done_versions(entries, stamps, out)
    todo = [i for i in range(len(files)) if i not in entries]
    with _bar(progress, files, entries, out / METERS) as (meters, tick):
        for i, e in _run_units(str(tok_copy), files, out, todo, hashes, workers, text_field, stamps, settings,
                               meters):
            entries[i] = e
            tick({"shard": i, "read": e["documents"]})
            if on_unit:
                on_unit(e)
    return _finish(out, files, [entries[i] for i in range(len(files))], source or out.resolve().name,
                   sha, eot, vocab, str(tokenizer))


METERS = ".progress"  # the workers' positions while a run goes on (a dot name: TokenDir and uploads skip it)


@contextlib.contextmanager
def _bar(progress, files: list[Path], done: dict[int, dict[str, Any]], meters: Path):
    """(meters folder or None, tick) for the run: the workers' meter files live in `meters`,
    removed at the end (a killed run's, by the rerun's sweep); finished shards count whole."""
    if progress is None or not progress.enabled:
        yield None, lambda result=None: None
        return
    meters.mkdir(exist_ok=True)
    try:
        tick = progress.start("tokenize", len(files), [str(f) for f in files], meters)
        for i, e in done.items():
            tick({"shard": i, "read": e.get("documents", 0)})
        yield meters, tick
        progress.stop("tokenize")
    finally:
        shutil.rmtree(meters, ignore_errors=True)


def _stamp(f: Path, origins: dict[str, tuple[str, dict]]) -> dict[str, dict]:
    """{name: stamp} of one input: its URL and the listing's stamp for a staged object, else its
    resolved path and mtime (from the stat that also gave its size)."""
    key = str(f.resolve())
    if key in origins and origins[key][1]:
        return {origins[key][0]: origins[key][1]}
    return {key: versions.of_local(f.stat())}


def check_done_versions(entries: dict[int, dict[str, Any]], now: list[dict[str, dict]], out: Path,
                        way: str = "run it into a new output directory") -> None:
    """Refuse a finished shard whose input is no longer what its marker recorded (the shard holds
    the old version): an object by its stamp, a local file by versions.settle (a new mtime is
    hashed; the same bytes take the new mtime into the marker). A marker without stamps (an older
    pretrain) is said once, then given this input's stamp."""
    if any(not isinstance(e.get("versions"), dict) for e in entries.values()):
        print("pretrain: this output's finished shards record no input versions (written by an older "
              "pretrain): a same-size rewrite of an input before this attempt is not detected; resuming",
              file=sys.stderr)
    for i, e in sorted(entries.items()):
        recorded = e.get("versions") if isinstance(e.get("versions"), dict) else None
        settled = {}
        for name, then in (now[i] if recorded is None else recorded).items():
            if "mtime_ns" in (then or {}):
                settled[name] = versions.settle(name, None if recorded is None else then, way)
            elif recorded is not None and versions.differs(then, now[i].get(name), name):
                raise versions.changed(name, then, now[i][name])
            else:
                settled[name] = then
        if settled != recorded:
            _restamp(out, i, settled)
            e["versions"] = settled


def _restamp(out: Path, index: int, stamps: dict[str, dict]) -> None:
    """Write the settled stamps into shard `index`'s done marker (the rest of it kept)."""
    marker = done_marker(out / shards.shard_name(index))
    mark_done(out / shards.shard_name(index), {**json.loads(marker.read_text()), "versions": stamps})


def _run_units(tok_path, files, out, todo, hashes, workers, text_field="text", stamps=None, settings=None,
               meters: Path | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    cores = os.cpu_count() or 1
    workers = max(1, min(workers or cores, len(todo) or 1))
    stamps = stamps or [{} for _ in files]
    settings = settings or [None for _ in files]
    meter = [str(meters / f"{i}.json") if meters else None for i in range(len(files))]
    if workers == 1:
        for i in todo:
            yield i, tokenize_unit(tok_path, str(files[i]), str(out), i, hashes[i], text_field, stamps[i],
                                   settings[i], meter[i])
        return
    # spawn: HF tokenizers' thread pool does not survive fork; each worker gets an equal share of
    # the cores for its own Rust threads (RAYON_NUM_THREADS is read when the pool starts).
    threads = max(1, cores // workers)
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn"), initializer=_init_worker,
                             initargs=(threads, os.getpid())) as pool:
        try:
            with sigint_held():  # the workers start at the first submit
                futures = {i: pool.submit(tokenize_unit, tok_path, str(files[i]), str(out), i, hashes[i],
                                          text_field, stamps[i], settings[i], meter[i]) for i in todo}
            for i in todo:
                yield i, futures[i].result()
        except BaseException:  # Ctrl-C, a failed unit: stop now, not after every queued file
            stop_pool(pool)
            raise


def _init_worker(threads: int, parent: int) -> None:
    os.environ.setdefault("RAYON_NUM_THREADS", str(threads))
    # A parent killed by SIGKILL (or the OOM killer) cannot stop its pool: without this watch the
    # workers went on tokenizing queued files into the directory a rerun writes, then idled forever.
    init_worker(parent)


HELD_OUT = ("test", "validation", "valid", "dev", "eval")  # split names datasets users hold out


def held_out_splits(files: list[Path]) -> str:
    """A note when `files` hold the held-out splits of a `DatasetDict.save_to_disk` folder (a
    `dataset_dict.json` beside one folder per split): the readers read every split (docs/readers.md),
    so its test split became training tokens without a word. "" when none."""
    found: dict[Path, set[str]] = {}
    for f in files:
        split = f.parent
        if split.name in HELD_OUT and (split.parent / "dataset_dict.json").is_file():
            found.setdefault(split.parent, set()).add(split.name)
    if not found:
        return ""
    root, names = sorted(found.items())[0]
    are = "splits are" if len(names) != 1 else "split is"
    return (f"pretrain: {root} is a datasets DatasetDict: its {', '.join(sorted(names))} {are} "
            f"tokenized with the rest; name {root / 'train'} to tokenize the training split only")


def check_not_corpus_output(out: Path) -> None:
    """Refuse a token directory inside a corpus job's OUT (plan.json + data/, docs/curation.md):
    shards beside its corpus made one folder two things (`report` showed the job, `mix` the tokens)."""
    from pretrain.curate.outputs import is_job_plan_file

    if (out / "data").is_dir() and is_job_plan_file(out / "plan.json"):
        raise UserError(f"{out} is a corpus job's output (plan.json, data/): token shards go to a folder "
                        f"of their own (-o {out / 'tokens'}, or another); nothing written")


def check_existing_manifest(out: Path, sha: str, path: str | Path | None = None) -> None:
    """Refuse an output made with another tokenizer, naming both (path and sha256 prefix, old -> new)."""
    if (out / shards.MANIFEST).exists():
        man = shards.read_manifest(out)
        if man["tokenizer"]["sha256"] != sha:
            then = f"{man['tokenizer'].get('path', '?')}, sha256 {man['tokenizer']['sha256'][:12]}"
            now = f"{path}, sha256 {sha[:12]}" if path else f"sha256 {sha[:12]}"
            raise UserError(f"{out} holds tokens from another tokenizer (tokenizer: {then} -> {now}); "
                            "use a new output directory")


def check_same_inputs(out: Path, n: int, names: list[str] | None = None) -> None:
    """A rerun with more or fewer inputs is another job: refused, never mixed. (Each shard's done
    marker already refuses another file at its position.) Fewer inputs used to rewrite the manifest
    and leave the earlier run's later shards behind. With `names` (this run's inputs) the refusal
    names a file given then and not now, or now and not then."""
    if (out / shards.MANIFEST).exists():
        man = shards.read_manifest(out)
        have = len(man["shards"])
        if have != n:
            changed = _what_changed(man.get("inputs"), names)
            raise UserError(f"{out} holds {have} shards made from other inputs ({have:,} input files then, "
                            f"{n:,} now{changed}); use a new output directory")
    beyond = sorted(p for p in out.glob("shard_*.done") if p.stem[6:].isdigit() and int(p.stem[6:]) >= n)
    if beyond:
        raise UserError(f"{out} holds {beyond[0].name} of a run with other inputs ({n:,} input files now"
                        f"{_marker_input(beyond[0])}); use a new output directory")


def _what_changed(then: object, now: list[str] | None) -> str:
    """`: a.jsonl no longer given` / `: c.jsonl new` (the first of each, and how many more): the
    manifest's `inputs` against this run's; "" when either is unknown. The manifest may be anyone's."""
    from pretrain.untrusted import printable

    if now is None or not isinstance(then, list) or not all(isinstance(x, str) for x in then):
        return ""
    gone, new = [x for x in then if x not in set(now)], [x for x in now if x not in set(then)]

    def first(xs: list[str], what: str) -> list[str]:
        more = f" (and {len(xs) - 1:,} more)" if len(xs) > 1 else ""
        return [f"{printable(xs[0])[:200]} {what}{more}"] if xs else []

    said = first(gone, "no longer given") + first(new, "new")
    return ": " + ", ".join(said) if said else ""


def _marker_input(marker: Path) -> str:
    """`, it read corp/c.jsonl`: the input a leftover done marker records ("" if unreadable)."""
    from pretrain.untrusted import printable

    try:  # our own small JSON file, but in a directory anyone may have written
        got = json.loads(marker.read_bytes()[:1 << 20]).get("input")
    except (OSError, ValueError, AttributeError):
        return ""
    return f"; {marker.stem} read {printable(got)[:200]}" if isinstance(got, str) else ""


def _finish(out: Path, files: list[Path], entries: list[dict[str, Any]], source: str, sha: str,
            eot: int, vocab: int, tok_path: str) -> dict[str, Any]:
    tokens = sum(e["tokens"] for e in entries)
    docs = sum(e["documents"] for e in entries)
    skipped: dict[str, int] = {}
    for e in entries:  # by kind, bounded as each shard's (pretrain/faults.py)
        merge_faults(skipped, e.get("skipped", {}))
    manifest = {
        "dtype": shards.dtype_for_vocab(vocab).name,
        "eot_id": eot,
        "vocab_size": vocab,
        "tokenizer": {"sha256": sha, "path": tok_path, "copy": "tokenizer.json"},
        "tokens": tokens,
        "documents": docs,
        "sources": {source: {"tokens": tokens, "documents": docs}},
        "inputs": [str(f) for f in files],
        "skipped": skipped,
        "shards": [{k: e[k] for k in ("bin", "idx", "tokens", "documents", "input", "skipped")}
                   for e in entries],
    }
    shards.write_manifest(out, manifest)
    return {"format": shards.FORMAT, "version": shards.VERSION, **manifest}
