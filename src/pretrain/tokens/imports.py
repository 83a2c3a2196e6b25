"""Token files other tools wrote -> our token directory: Megatron-LM's indexed dataset, datatrove's `.ds`.

Readers here treat every input as hostile: each header field, count, pointer and document boundary
is checked against the file sizes before a token is read, and a bad one is a `DataError` naming the
file and the field (never an out-of-bounds read or a numpy traceback). Token ids are then checked
as they are copied (negative, or past the tokenizer's vocabulary: refused, naming the token).

- Megatron-LM (`tools/preprocess_data.py`, megatron/core/datasets/indexed_dataset.py, index version
  1): `PREFIX.idx` = magic `MMIDIDX\\0\\0`, `<Q` version, `<B` dtype code, `<Q` sequence count S,
  `<Q` document-index count D, int32 lengths[S], int64 byte pointers[S], int64 document indices[D]
  (sequence numbers, `[0, ..., S]`); `PREFIX.bin` = the tokens. A document is the concatenation of
  its sequences (several with `--split-sentences`).
- datatrove (`DocumentTokenizer`/`TokenizedFile`): `NAME.ds` = raw little-endian uint16 or uint32
  tokens (uint32 when the vocabulary exceeds 65,536 ids, as we do), `NAME.ds.index` = uint64
  document end offsets in tokens, no header.

End-of-text: our shards end every document with the end-of-text id. When every document of an input
already ends with it (Megatron's `--append-eod`, datatrove's `eos_token`), the tokens are copied as
they are; otherwise the id is appended to every document, and the manifest says so (`eot`).
Each input becomes one shard, written to temporary names and renamed, then a done marker: a rerun
skips finished shards and a killed run leaves no half shard that a reader would take. Each done
marker records the mtime_ns of the files its shard was read from (`versions`, beside the identity,
as `pretrain tokenize` does): a same-size rewrite of a finished input is refused on the rerun.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pretrain.curate import versions
from pretrain.curate.io import atomic_path, mark_done, write_bytes_atomic
from pretrain.errors import DataError, UserError
from pretrain.tokens import shards
from pretrain.tokens.pipeline import (
    check_done_versions,
    check_existing_manifest,
    check_not_corpus_output,
    check_same_inputs,
    done_entry,
)
from pretrain.tokens.tokenizer import eot_id, load_tokenizer

MAGIC = b"MMIDIDX\x00\x00"
HEADER = len(MAGIC) + 8 + 1 + 8 + 8  # magic, version, dtype code, sequence count, document-index count
# Megatron's DType codes (indexed_dataset.py); floats cannot be token ids.
MEGATRON_DTYPES = {1: "uint8", 2: "int8", 3: "int16", 4: "int32", 5: "int64", 8: "uint16"}
MEGATRON_FLOATS = {6: "float64", 7: "float32"}
CHUNK = 1 << 22  # tokens copied per step: memory stays bounded for any input size
ENDS = 1 << 20  # document ends read per step (datatrove's index; the shard's offsets): ~8 MB each array


@dataclass
class Source:
    """One validated input: a token file and where its documents end (in tokens)."""

    bin: Path
    dtype: np.dtype
    tokens: int
    ends: Any  # int64 array or an IndexFile, non-decreasing, ends[-1] == tokens (empty documents: equal ends)
    files: list[Path] = field(default_factory=list)  # every file it was read from (its identity)
    kind: str = ""
    loss_masked: int = 0  # datatrove tokens its .ds.loss excludes from the loss (we train on them)
    stamps: dict[str, dict] = field(default_factory=dict)  # {resolved file: mtime_ns} when validated


def _u64(buf: bytes, at: int) -> int:
    return struct.unpack_from("<Q", buf, at)[0]


def read_megatron(prefix: str | Path) -> Source:
    """Validate `PREFIX.idx` against `PREFIX.bin`; returns the documents' token ends."""
    idx_path, bin_path = Path(f"{prefix}.idx"), Path(f"{prefix}.bin")
    for p in (idx_path, bin_path):
        _regular(p, "Megatron's PREFIX.bin and PREFIX.idx are both needed")
    size = idx_path.stat().st_size
    with open(idx_path, "rb") as f:
        head = f.read(HEADER)
    if len(head) < HEADER or head[:len(MAGIC)] != MAGIC:
        raise DataError(str(idx_path), "header",
                        "not a Megatron MMIDIDX index (magic bytes differ or file too short)")
    version, code = _u64(head, 9), head[17]
    if version != 1:
        raise DataError(str(idx_path), "version", f"index version {version} (this reads version 1)")
    if code in MEGATRON_FLOATS:
        raise DataError(str(idx_path), "dtype",
                        f"code {code} ({MEGATRON_FLOATS[code]}): token ids must be integers")
    if code not in MEGATRON_DTYPES:
        raise DataError(str(idx_path), "dtype", f"unknown dtype code {code}")
    dtype = np.dtype(MEGATRON_DTYPES[code]).newbyteorder("<")
    n_seq, n_doc = _u64(head, 18), _u64(head, 26)
    expect = HEADER + 12 * n_seq + 8 * n_doc  # Python ints: a hostile count cannot overflow here
    if size == expect + n_seq and n_seq:
        raise DataError(str(idx_path), "size", "a multimodal index (sequence modes follow): text tokens only")
    if size != expect:
        raise DataError(str(idx_path), "size", f"{size} bytes, but {n_seq} sequences and {n_doc} document "
                        f"indices need {expect}: truncated or not an index")
    lengths = np.memmap(idx_path, "<i4", "r", HEADER, (n_seq,)) if n_seq else np.zeros(0, "<i4")
    pointers = np.memmap(idx_path, "<i8", "r", HEADER + 4 * n_seq, (n_seq,)) if n_seq else np.zeros(0, "<i8")
    doc_idx = np.memmap(idx_path, "<i8", "r", HEADER + 12 * n_seq, (n_doc,)) if n_doc else np.zeros(0, "<i8")
    bin_tokens = _bin_tokens(bin_path, dtype)
    _check_document_indices(idx_path, doc_idx, n_seq)
    ends, total = _document_ends(idx_path, lengths, pointers, doc_idx[1:], bin_tokens, dtype.itemsize)
    if total != bin_tokens:
        raise DataError(str(bin_path), "size", f"{bin_tokens} {dtype.name} tokens, the index's sequences "
                        f"hold {total}: truncated or not this index's .bin")
    return Source(bin_path, dtype, bin_tokens, ends, [bin_path, idx_path], "megatron")


def _regular(p: Path, why: str) -> None:
    """A regular file (a link to /dev/zero or a FIFO would be read without end)."""
    if not p.exists():
        raise UserError(f"{p}: not found ({why})")
    if not p.is_file():
        raise UserError(f"{p}: not a regular file")


def _bin_tokens(bin_path: Path, dtype: np.dtype) -> int:
    size = bin_path.stat().st_size
    if size % dtype.itemsize:
        raise DataError(str(bin_path), "size", f"{size} bytes is not a whole number of {dtype.name} tokens")
    return size // dtype.itemsize


def _check_document_indices(idx_path: Path, doc_idx: np.ndarray, n_seq: int) -> None:
    """Sequence numbers from 0 to the sequence count, never decreasing (checked in chunks)."""
    if doc_idx.size < 1 or int(doc_idx[0]) != 0 or int(doc_idx[-1]) != n_seq:
        raise DataError(str(idx_path), "document_indices", f"must run from 0 to the sequence count {n_seq}")
    for lo in range(0, doc_idx.size - 1, CHUNK):
        step = np.diff(np.asarray(doc_idx[lo:lo + CHUNK + 1], dtype=np.int64))
        if np.any(step < 0):
            bad = lo + int(np.nonzero(step < 0)[0][0]) + 1
            raise DataError(str(idx_path), f"document_indices[{bad}]", "decreasing: documents would overlap")


def _document_ends(idx_path: Path, lengths: np.ndarray, pointers: np.ndarray, doc_ends: np.ndarray,
                   bin_tokens: int, itemsize: int) -> tuple[np.ndarray, int]:
    """One pass over the sequences, CHUNK at a time: lengths non-negative, never past the .bin,
    pointers back to back in order. Returns each document's end in tokens and the total tokens;
    memory: 8 bytes per document (like our .idx) plus one chunk."""
    ends = np.zeros(doc_ends.size, dtype=np.int64)  # documents before any sequence end at token 0
    total = 0
    for lo in range(0, lengths.size, CHUNK):
        part = np.asarray(lengths[lo:lo + CHUNK], dtype=np.int64)
        if int(part.min()) < 0:
            bad = lo + int(np.argmin(part))
            raise DataError(str(idx_path), f"lengths[{bad}]", f"negative sequence length {int(part.min())}")
        # Each length is < 2**31 and the running total stays <= the .bin: no int64 overflow.
        cum = total + np.cumsum(part)  # cum[j]: where sequence lo + j ends
        if int(cum[-1]) > bin_tokens:
            raise DataError(str(idx_path.with_suffix(".bin")), "size",
                            f"{bin_tokens} tokens, the index's sequences need more: truncated .bin")
        expect = (cum - part) * itemsize
        got = np.asarray(pointers[lo:lo + CHUNK], dtype=np.int64)
        if not np.array_equal(got, expect):
            j = int(np.nonzero(got != expect)[0][0])
            raise DataError(str(idx_path), f"pointers[{lo + j}]", f"byte {int(got[j])}, expected "
                            f"{int(expect[j])} (sequences must lie back to back, in order)")
        # Documents whose last sequence is in this chunk: doc_ends holds sequence numbers, sorted.
        a, b = (int(np.searchsorted(doc_ends, v, side="right")) for v in (lo, lo + part.size))
        ends[a:b] = cum[np.asarray(doc_ends[a:b], dtype=np.int64) - lo - 1]
        total = int(cum[-1])
    return ends, total


def read_datatrove(ds: str | Path, token_size: int | None) -> Source:
    """Validate `NAME.ds` against `NAME.ds.index` (uint64 document ends, in tokens)."""
    ds = Path(ds)
    index = Path(f"{ds}.index")
    _regular(ds, "a datatrove NAME.ds")
    _regular(index, "documents' boundaries are unknown without it (DocumentTokenizer writes it "
             "unless save_index=False)")
    size = token_size or _metadata_token_size(ds)
    if size not in (2, 4):
        raise DataError(str(ds), "token_size", f"{size} bytes per token (datatrove writes 2 or 4)")
    dtype = np.dtype("<u2" if size == 2 else "<u4")
    tokens = _bin_tokens(ds, dtype)
    n = index.stat().st_size
    if n % 8:
        raise DataError(str(index), "size", f"{n} bytes is not a whole number of uint64 document ends")
    # Read and checked ENDS at a time, never whole: an index of 100M documents is 800 MB, and
    # the whole of it in memory (its int64 copy, its differences) took ~4x that (session 14).
    ends = IndexFile(index, n // 8)
    _check_datatrove_ends(ds, index, ends, tokens)
    return Source(ds, dtype, tokens, ends, [ds, index], "datatrove", _loss_masked(ds, tokens))


class IndexFile:
    """A file of little-endian uint64 values read a slice at a time (`len`, `[lo:hi]`), not mapped:
    a mapping's pages stay resident in the process as they are read (a 800 MB index, 800 MB)."""

    def __init__(self, path: Path, size: int):
        self.path, self.size = path, size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, part: slice) -> np.ndarray:
        lo, hi, _ = part.indices(self.size)
        with open(self.path, "rb") as f:
            return np.fromfile(f, "<u8", count=max(0, hi - lo), offset=8 * lo)


def _check_datatrove_ends(ds: Path, index: Path, ends: IndexFile, tokens: int) -> None:
    """Document ends never past the .ds, never decreasing, the last one at its end: one pass, ENDS
    at a time (memory bounded whatever the index's size)."""
    prev = 0
    for lo in range(0, len(ends), ENDS):
        part = np.asarray(ends[lo:lo + ENDS])
        if int(part.max()) > tokens:  # before int64: a hostile end >= 2**63 would turn negative
            raise DataError(str(ds), "size", f"{tokens} tokens, the index ends a document at "
                            f"{int(part.max())}: truncated .ds or another file's index")
        part = part.astype(np.int64)
        step = np.diff(part, prepend=prev)
        if np.any(step < 0):
            bad = lo + int(np.nonzero(step < 0)[0][0])
            raise DataError(str(index), f"end[{bad}]", "decreasing: documents would overlap")
        prev = int(part[-1])
    if prev != tokens:
        raise DataError(str(ds), "size", f"{tokens} tokens, the index's documents end at {prev}: not this "
                        "index's .ds")


def _loss_masked(ds: Path, tokens: int) -> int:
    """Tokens a `.ds.loss` (one 0/1 byte per token, datatrove's no_loss_ranges) masks out. Pretraining
    has no loss mask: they are trained on, and counted so the user sees it."""
    loss = Path(f"{ds}.loss")
    if not loss.is_file():
        return 0
    if loss.stat().st_size != tokens:
        raise DataError(str(loss), "size", f"{loss.stat().st_size} bytes, one per token of {ds.name} "
                        f"({tokens}): truncated or another file's")
    mm = np.memmap(loss, np.uint8, "r") if tokens else np.zeros(0, np.uint8)
    return sum(int(np.count_nonzero(mm[lo:lo + CHUNK] == 0)) for lo in range(0, tokens, CHUNK))


def _metadata_token_size(ds: Path) -> int:
    """datatrove's `.ds.metadata` first line is `tokenizer|token_size`; without it, ask the caller."""
    meta = Path(f"{ds}.metadata")
    if not meta.is_file():
        raise UserError(f"{ds}: no {meta.name} to give the token size; pass --token-size 2 or 4")
    try:
        with open(meta, "rb") as f:  # a few bytes of the first line, whatever the file's size
            first = f.read(4096).decode("utf-8", errors="replace").splitlines()[0]
        return int(first.rsplit("|", 1)[-1])
    except (ValueError, IndexError) as e:
        raise DataError(str(meta), "token_size", "first line is not `tokenizer|token_size`") from e


def _checked(chunk: np.ndarray, src: Source, lo: int, vocab: int) -> None:
    """Every id of a chunk is an id of the tokenizer's vocabulary (never negative, never past it)."""
    if not chunk.size:
        return
    low, high = int(chunk.min()), int(chunk.max())
    if low >= 0 and high < vocab:
        return
    bad = int(np.nonzero((chunk < 0) | (chunk >= vocab))[0][0])
    raise DataError(str(src.bin), f"token {lo + bad}", f"id {int(chunk[bad])} is not an id of the "
                    f"{vocab}-token vocabulary (wrong --tokenizer, or not a token file)")


def _document_ends_in_chunks(ends: np.ndarray) -> Iterator[np.ndarray]:
    """A source's document ends (int64), ENDS at a time, without the empty documents' (an end equal
    to the one before: no token, dropped). Bounded memory for a memmapped index of any length."""
    prev = 0
    for lo in range(0, len(ends), ENDS):
        part = np.asarray(ends[lo:lo + ENDS], dtype=np.int64)
        keep = np.diff(part, prepend=prev) > 0
        prev = int(part[-1])
        yield part[keep]


def _ends_upto(stream: Iterator[np.ndarray], pending: list[np.ndarray], hi: int) -> np.ndarray:
    """The next document ends <= hi from `stream` (sorted), keeping the rest in `pending`. At most
    one per token below hi: bounded by the chunk of tokens being copied."""
    out = []
    while True:
        if not pending:
            nxt = next(stream, None)
            if nxt is None:
                break
            pending.append(nxt)
        head = pending[0]
        k = int(np.searchsorted(head, hi, side="right"))
        out.append(head[:k])
        if k < head.size:
            pending[0] = head[k:]
            break
        pending.pop(0)
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def copy_shard(src: Source, out_dir: Path, name: str, dtype: np.dtype, eot: int,
               vocab: int) -> dict[str, Any]:
    """Write `name.bin` + `name.idx` from a validated source, chunk by chunk; returns its counts.
    Memory: a chunk of tokens and of document ends, whatever the input's size (the ends are read
    three times: end-of-text present?, where to insert it, the offsets)."""
    mm = np.memmap(src.bin, src.dtype, "r") if src.tokens else np.zeros(0, src.dtype)
    docs, has_eot = 0, True
    for ends in _document_ends_in_chunks(src.ends):
        docs += ends.size
        has_eot = has_eot and bool(np.all(np.asarray(mm[ends - 1]) == eot))
    has_eot = has_eot and docs > 0
    stream, pending = _document_ends_in_chunks(src.ends), []
    with atomic_path(out_dir / f"{name}.bin") as tmp, open(tmp, "wb") as f:
        for lo in range(0, src.tokens, CHUNK):
            chunk = np.asarray(mm[lo:lo + CHUNK])
            _checked(chunk, src, lo, vocab)
            out = chunk.astype(dtype)
            if not has_eot:  # one end-of-text after every document ending in this chunk
                at = _ends_upto(stream, pending, lo + chunk.size) - lo
                out = np.insert(out, at, np.asarray(eot, dtype=dtype))
            f.write(out.tobytes())
    with atomic_path(out_dir / f"{name}.idx") as tmp, open(tmp, "wb") as f:
        tokens = _write_offsets(f, src.ends, docs, has_eot)
    empty = int(len(src.ends) - docs)
    return {"bin": f"{name}.bin", "idx": f"{name}.idx", "tokens": tokens,
            "documents": docs, "input": str(src.bin), "eot": "present" if has_eot else "appended",
            "skipped": {"empty document": empty} if empty else {},
            **({"loss_masked": src.loss_masked} if src.loss_masked else {})}


def _write_offsets(f, ends: np.ndarray, docs: int, has_eot: bool) -> int:
    """Our `.idx` (an .npy of docs + 1 uint64 offsets, np.save's bytes), written a chunk at a time:
    the header, 0, then each document's end (+ the end-of-text ids inserted before and in it).
    Returns the last offset: the shard's tokens."""
    np.lib.format.write_array_header_1_0(f, {"descr": "<u8", "fortran_order": False, "shape": (docs + 1,)})
    f.write(np.zeros(1, "<u8").tobytes())
    done = last = 0
    for part in _document_ends_in_chunks(ends):
        if not has_eot:
            part = part + np.arange(done + 1, done + part.size + 1)
        f.write(part.astype("<u8").tobytes())
        done, last = done + part.size, int(part[-1]) if part.size else last
    return last


def unit_settings(tok_sha: str, src: Source) -> dict[str, Any]:
    """An import's identity: tokenizer + every input file (path, size) + how its tokens are read (a
    `--token-size` changed on a rerun reads other ids); kept in the done marker, so a refusal
    names what changed (old -> new)."""
    return {"tokenizer": tok_sha, "kind": src.kind, "format": shards.VERSION, "dtype": src.dtype.str,
            "inputs": [[str(p.resolve()), p.stat().st_size] for p in src.files]}


def unit_hash(tok_sha: str, src: Source) -> str:
    """The hash of unit_settings: another one is refused, not mixed."""
    return hashlib.sha256(json.dumps(unit_settings(tok_sha, src), sort_keys=True).encode()).hexdigest()[:16]


def import_tokens(kind: str, inputs: list[str], tokenizer: str | Path, out_dir: str | Path,
                  source: str | None = None, token_size: int | None = None,
                  on_unit: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Import Megatron prefixes (`kind="megatron"`) or datatrove `.ds` files (`"datatrove"`) into
    `out_dir`, one shard each, in the order given; returns the manifest (also written).
    `on_unit(entry)` is called for each shard written by this call (not for one already done)."""
    tok_path = resolve_tokenizer(tokenizer)
    tok = load_tokenizer(tok_path)
    canonical = tok.to_str()
    sha, eot = hashlib.sha256(canonical.encode()).hexdigest(), eot_id(tok)
    vocab = tok.get_vocab_size(with_added_tokens=True)
    def read(p: str) -> Source:
        return read_megatron(p) if kind == "megatron" else read_datatrove(p, token_size)

    # Every input is validated before anything is written; only its identity is kept (its document
    # offsets are read again when its shard is copied: memory is one input's, not the corpus's).
    srcs = [_identity(read(p)) for p in inputs]
    _check_distinct(srcs)
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot write {e.filename or out}: {e.strerror or e}") from e
    _check_not_inside(out, srcs)
    check_not_corpus_output(out)
    check_existing_manifest(out, sha, tok_path)
    check_same_inputs(out, len(srcs))
    for pattern in (".shard_*.tmp", f".{shards.MANIFEST}.*.tmp", ".tokenizer.json.*.tmp"):
        for debris in out.glob(pattern):  # a killed run's temporary files (one run per directory)
            debris.unlink(missing_ok=True)
    write_bytes_atomic(out / "tokenizer.json", canonical.encode())
    dtype = shards.dtype_for_vocab(vocab)
    hashes, settings = [unit_hash(sha, src) for src in srcs], [unit_settings(sha, src) for src in srcs]
    done = {i: e for i, h in enumerate(hashes) if (e := done_entry(out, i, h, settings[i])) is not None}
    check_done_versions(done, [src.stamps for src in srcs], out)
    entries = []
    for i, src in enumerate(srcs):
        name, entry = shards.shard_name(i), done.get(i)
        if entry is None:
            read_now = {path: versions.of_read(path) for path in src.stamps}  # the bytes copied
            entry = copy_shard(read(inputs[i]), out, name, dtype, eot, vocab)
            for path, stamp in read_now.items():
                versions.unchanged(path, stamp)
            mark_done(out / name, {"config_hash": hashes[i], **entry, "versions": read_now,
                                   "settings": settings[i]})
            if on_unit:
                on_unit(entry)
        entries.append(entry)
    return _finish(out, entries, kind, source or out.resolve().name, sha, eot, vocab, str(tok_path))


def _identity(src: Source) -> Source:
    """The source without its offsets: what names it (files, dtype, kind) and their stamps now."""
    stamps = {str(p.resolve()): versions.of_local(p.stat()) for p in src.files}
    return Source(src.bin, src.dtype, src.tokens, np.zeros(0, np.int64), src.files, src.kind, stamps=stamps)


def _check_distinct(srcs: list[Source]) -> None:
    """Each input once: a file named twice (`web` and `./web`, a folder and a file in it) would be
    two shards of the same documents, drawn by a mixture at twice their weight."""
    seen: dict[Path, Path] = {}
    for src in srcs:
        key = src.bin.resolve()
        if key in seen:
            also = "" if seen[key] == src.bin else f" (also as {seen[key]})"
            raise UserError(f"{src.bin}: given twice{also}: it would be imported twice, two shards of "
                            "the same documents; give it once")
        seen[key] = src.bin


def _check_not_inside(out: Path, srcs: list[Source]) -> None:
    """No input lives in the output directory: one named like a shard would be replaced while it is
    read, one named like a killed run's temporary file would be swept away."""
    for p in (p for s in srcs for p in s.files):
        if p.resolve().parent == out.resolve():
            raise UserError(f"{p} is inside the output directory {out}: choose another output directory")


def other_tool(path: str | Path) -> str | None:
    """What another tool's token files at `path` are, with the import that makes a token directory
    of them; None when they are not. `tokens inspect`, `mix` and `train` on a teammate's Megatron
    prefix said "not found", and on its folder "an interrupted one: rerun its command" (session 13).
    Reads the 9 magic bytes of at most 1,000 `.idx` files."""
    import itertools

    p = Path(path)
    then = "-o TOKENS --tokenizer TOKENIZER` makes a token directory of it"
    prefix = p.with_suffix("") if p.suffix in (".bin", ".idx") else p
    if _megatron_pair(prefix):
        return (f"a Megatron-LM indexed dataset ({prefix}.bin + .idx): `pretrain tokens import-megatron "
                f"{prefix} {then}")
    ds = Path(str(p).removesuffix(".index")) if p.name.endswith(".ds.index") else p
    if ds.name.endswith(".ds") and ds.is_file():
        return f"a datatrove tokenized file: `pretrain tokens import-datatrove {ds} {then}"
    if not p.is_dir():
        return None
    found = [i.with_suffix("") for i in itertools.islice(p.glob("*.idx"), 1000)
             if _megatron_pair(i.with_suffix(""))]
    if found:
        shown = " ".join(str(f) for f in sorted(found)[:3]) + (" ..." if len(found) > 3 else "")
        return f"a folder of Megatron-LM indexed datasets: `pretrain tokens import-megatron {shown} {then}"
    if next(p.glob("*.ds"), None) is not None:
        return f"a folder of datatrove tokenized files (.ds): `pretrain tokens import-datatrove {p} {then}"
    return None


def _megatron_pair(prefix: Path) -> bool:
    try:
        with open(f"{prefix}.idx", "rb") as f:
            return f.read(len(MAGIC)) == MAGIC and Path(f"{prefix}.bin").is_file()
    except OSError:
        return False


def resolve_tokenizer(path: str | Path) -> Path:
    """A tokenizer.json, or a directory holding one (a Hugging Face model folder)."""
    p = Path(path)
    if p.is_dir():
        if not (p / "tokenizer.json").is_file():
            raise UserError(f"{p}: no tokenizer.json in this directory")
        return p / "tokenizer.json"
    return p


def _finish(out: Path, entries: list[dict[str, Any]], kind: str, source: str, sha: str, eot: int,
            vocab: int, tok_path: str) -> dict[str, Any]:
    tokens, docs = sum(e["tokens"] for e in entries), sum(e["documents"] for e in entries)
    skipped: dict[str, int] = {}
    for e in entries:
        for reason, n in e.get("skipped", {}).items():
            skipped[reason] = skipped.get(reason, 0) + n
    eots = sorted({e["eot"] for e in entries})
    manifest = {
        "dtype": shards.dtype_for_vocab(vocab).name, "eot_id": eot, "vocab_size": vocab,
        "tokenizer": {"sha256": sha, "path": tok_path, "copy": "tokenizer.json"},
        "tokens": tokens, "documents": docs, "sources": {source: {"tokens": tokens, "documents": docs}},
        "inputs": [e["input"] for e in entries], "skipped": skipped,
        "imported": {"from": kind, "eot": eots[0] if len(eots) == 1 else "mixed"},
        "shards": [{k: e[k] for k in ("bin", "idx", "tokens", "documents", "input", "skipped", "eot",
                                      "loss_masked") if k in e} for e in entries],
    }
    shards.write_manifest(out, manifest)
    return {"format": shards.FORMAT, "version": shards.VERSION, **manifest}
