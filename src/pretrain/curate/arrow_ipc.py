"""The Arrow IPC reader (`read_arrow`, the `.arrow` entry of `readers.FORMATS`): the shards that HF
`datasets`' `save_to_disk` writes (`data-00000-of-00002.arrow`, IPC stream format) and Arrow IPC
files (`ARROW1` magic), read as the Parquet reader reads a row group: the text, id, url and
metadata columns named by `ReaderConfig`, 64 rows at a time, a row whose strings exceed
`max_record_bytes` reported and skipped before it becomes Python objects.

The file is memory-mapped, so a record batch costs address space, not memory, until its rows are
converted. Arrow's own reader trusts the offsets in the file: each batch is validated in full
(offsets inside their buffers, strings UTF-8) before a value is read, and a batch that fails is
reported (`record batch N`) and skipped. A file that is not Arrow at all is refused in one line
that names the way out (`Dataset.to_parquet`).
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from pretrain.curate.document import Document
from pretrain.curate.readers import OnError, ReaderConfig

HINT = "save it with Dataset.to_parquet(...) or to_json(...) instead"


def _inflated_batches(source, wanted):
    """(schema, record batches, random access?, `_inflated_sizes`) of an IPC file (random access:
    a reader with `get_batch(i)`) or stream (what save_to_disk writes: an iterator), the batches
    holding only the columns `wanted(schema)` names: other columns (images) are not decompressed."""
    import pyarrow as pa

    def options(schema):
        names = set(wanted(schema))  # a set: `in` a list per column was quadratic in columns
        return pa.ipc.IpcReadOptions(included_fields=[i for i, n in enumerate(schema.names) if n in names])

    try:
        schema = pa.ipc.open_file(source).schema
        sizes = _inflated_sizes(source, True)
        return schema, pa.ipc.open_file(source, options=options(schema)), True, sizes
    except pa.ArrowInvalid:
        source.seek(0)
        schema = pa.ipc.open_stream(source).schema
        sizes = _inflated_sizes(source, False)  # before the reader: it reads from where the source is
        return schema, iter(pa.ipc.open_stream(source, options=options(schema))), False, sizes


# --------------------------------------------------------------------------- inflated sizes
# A compressed buffer (zstd, lz4) starts with its inflated length, an int64 (-1: stored as is);
# where each buffer lies is in the message's metadata, a flatbuffer (Arrow's format/Message.fbs:
# Message{version, header_type, header, bodyLength}, RecordBatch{length, nodes, buffers,
# compression}, DictionaryBatch{id, data}). Reading those few fields bounds a batch before
# pyarrow inflates all of it at once.

_DICTIONARY_BATCH, _RECORD_BATCH = 2, 3


def _field(buf: bytes, table: int, i: int) -> int | None:
    """Where field `i` of the flatbuffer table at `table` lies, None when it is absent."""
    vtable = table - struct.unpack_from("<i", buf, table)[0]
    (vsize,) = struct.unpack_from("<H", buf, vtable)
    if 4 + 2 * i >= vsize:
        return None
    (off,) = struct.unpack_from("<H", buf, vtable + 4 + 2 * i)
    return table + off if off else None


def _deref(buf: bytes, pos: int | None) -> int:
    if pos is None:
        raise ValueError("a required field is absent")
    return pos + struct.unpack_from("<I", buf, pos)[0]


def inflated(message) -> tuple[str, int, int] | None:
    """(kind, rows, bytes once inflated) of a compressed record or dictionary batch message; None
    for other messages and uncompressed batches (memory-mapped: they cost address space only)."""
    buf = message.metadata.to_pybytes()  # a few hundred bytes
    root = _deref(buf, 0)
    kind_at = _field(buf, root, 1)
    kind = buf[kind_at] if kind_at is not None else 0
    if kind not in (_DICTIONARY_BATCH, _RECORD_BATCH):
        return None
    batch = _deref(buf, _field(buf, root, 2))
    if kind == _DICTIONARY_BATCH:
        batch = _deref(buf, _field(buf, batch, 1))
    if _field(buf, batch, 3) is None:  # no BodyCompression: stored as is
        return None
    rows_at = _field(buf, batch, 0)
    rows = struct.unpack_from("<q", buf, rows_at)[0] if rows_at is not None else 0
    vec = _deref(buf, _field(buf, batch, 2))
    body, total = message.body, 0
    for j in range(struct.unpack_from("<I", buf, vec)[0]):
        off, length = struct.unpack_from("<qq", buf, vec + 4 + 16 * j)
        if length < 8:
            continue  # an empty buffer carries no prefix
        if off < 0 or off + 8 > body.size:
            raise ValueError(f"buffer {j} lies outside the message body")
        (size,) = struct.unpack("<q", body.slice(off, 8).to_pybytes())
        total += length - 8 if size == -1 else size
    return ("dictionary" if kind == _DICTIONARY_BATCH else "record"), rows, total


def _inflated_sizes(source, is_file: bool) -> tuple[list[tuple[int, int] | str], int]:
    """((rows, inflated bytes) of each compressed record batch, (0, 0) for the others, and after
    the last, why the next message could not be measured (a str), if it could not; the largest
    dictionary batch's bytes), from the messages' metadata, nothing inflated. An IPC file is its
    stream after 8 bytes of magic, then a footer."""
    import pyarrow as pa

    source.seek(8 if is_file else 0)
    reader = pa.ipc.MessageReader.open_stream(source)
    batches: list[tuple[int, int] | str] = []
    dictionary = 0
    while True:
        try:
            message = reader.read_next_message()
            size = inflated(message) if message.type in ("record batch", "dictionary batch") else None
        except StopIteration:
            break
        except (pa.ArrowException, OSError, ValueError, struct.error, IndexError) as e:
            batches.append(f"unreadable message ({type(e).__name__}: {e})")
            break
        if message.type == "record batch":
            batches.append(size[1:] if size else (0, 0))
        elif message.type == "dictionary batch":
            dictionary = max(dictionary, size[2] if size else 0)
    source.seek(0)
    return batches, dictionary


def read_arrow(path: Path, cfg: ReaderConfig, on_error: OnError, src: str,
               stats: Counter | None = None) -> Iterator[Document]:
    import pyarrow as pa

    from pretrain.curate.parquet import PARQUET_BATCH_ROWS, _parquet_doc, _parquet_rows, read_columns

    def wanted(schema) -> list[str]:
        return read_columns(schema, cfg)[0]

    try:
        source = pa.memory_map(str(path), "r")
        schema, batches, is_file, (sizes, dictionary) = _inflated_batches(source, wanted)
    except (pa.ArrowException, OSError, ValueError, struct.error, IndexError) as e:
        on_error(str(path), None, f"not a readable Arrow IPC file ({type(e).__name__}: {e}); {HINT}")
        return
    bound = cfg.max_row_group_bytes
    with source:
        if cfg.text_field not in schema.names:
            on_error(str(path), None,
                     f"missing text column {cfg.text_field!r} (columns: {', '.join(sorted(schema.names))})")
            return
        if bound and dictionary > bound:
            on_error(str(path), None, f"a compressed dictionary of {dictionary:,} bytes inflated is over "
                     f"max_row_group_bytes={bound}: file skipped unread; {HINT}")
            return
        cols, dated = read_columns(schema, cfg)
        core = [c for c in (cfg.text_field, cfg.id_field, cfg.url_field, cfg.metadata_field) if c in cols]
        row, b = 0, 0
        while True:
            known = sizes[b] if b < len(sizes) else "not among the messages read first"
            if isinstance(known, str) and (b < batches.num_record_batches if is_file else b < len(sizes)):
                on_error(str(path), f"record batch {b}", f"unreadable ({known}); the rest of the file is "
                         f"skipped; {HINT}")  # unmeasured: never handed to pyarrow to inflate
                return
            if bound and not isinstance(known, str) and known[1] > bound:
                on_error(str(path), f"record batch {b}", f"{sizes[b][1]:,} bytes once inflated (zstd/lz4 "
                         f"buffers): over max_row_group_bytes={bound}, skipped unread" +
                         ("" if is_file else "; a stream's later batches lie behind it: the rest of the "
                          "file is skipped"))
                if not is_file:
                    return
                row, b = row + sizes[b][0], b + 1  # the rows after it keep their numbers
                continue
            try:
                if is_file:
                    batch = batches.get_batch(b) if b < batches.num_record_batches else None
                else:
                    batch = next(batches, None)
                if batch is None:
                    break
                batch.select(core).validate(full=True)
            except (pa.ArrowException, OSError, ValueError) as e:
                on_error(str(path), f"record batch {b}", f"unreadable ({type(e).__name__}: {e}); the rest of "
                         f"the file is skipped; {HINT}")
                return
            batch = batch.select(core + _valid_extras(batch, core, cols, stats))
            for start in range(0, batch.num_rows, PARQUET_BATCH_ROWS):
                for i, obj in _parquet_rows(batch.slice(start, PARQUET_BATCH_ROWS), cfg.max_record_bytes):
                    doc = _parquet_doc(obj, row + start + i, cfg, src, path, on_error, dated)
                    if doc is not None:
                        yield doc
            row, b = row + batch.num_rows, b + 1
    if row == 0:
        on_error(str(path), None, "empty file")


def _valid_extras(batch, core: list[str], cols: list[str], stats: Counter | None) -> list[str]:
    """The columns beside text, id, url and metadata (they go to the metadata) that validate in
    full. One that does not is left out of this batch's metadata and counted
    (`skipped.unreadable_column`): the documents are sound, only an extra field of theirs is not,
    so the rows are not reported as bad records."""
    import pyarrow as pa

    kept = []
    for name in cols:
        if name in core:
            continue
        try:
            batch.column(name).validate(full=True)
            kept.append(name)
        except (pa.ArrowException, ValueError):
            if stats is not None:
                stats["skipped.unreadable_column"] += 1
    return kept
