"""The Parquet reader (`read_parquet`, the `.parquet` entry of `readers.FORMATS`): one row group at
a time, in batches of `PARQUET_BATCH_ROWS` rows, with the text, id, url and metadata columns named
by `ReaderConfig` (datatrove's ParquetWriter keeps url and scores in a `metadata` struct). A row
whose strings (nested ones too) exceed `max_record_bytes` is reported and skipped before it is
copied into Python; a row group the footer shows to be huge and to hold an oversized row is
skipped unread; an unreadable row group is reported and reading goes on with the next one.
Page-level reading of a row group with an oversized cell, in any flat string column read, a
string field of structs at any depth (`metadata.url`, `metadata.info.note`) or a top-level list of
strings (`tags`), is `parquet_pages.py`; lists of other things (structs, lists, numbers) and maps
are decoded by pyarrow, under `max_row_group_bytes`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from pretrain.curate.document import Document
from pretrain.curate.readers import OnError, ReaderConfig, make_doc


def read_parquet(
    path: Path, cfg: ReaderConfig, on_error: OnError, src: str, _stats: Counter | None = None
) -> Iterator[Document]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pretrain.curate.parquet_pages import PAGE_ERRORS, group_rows

    footer = _footer_bytes(path)
    if cfg.max_footer_bytes and footer > cfg.max_footer_bytes:
        on_error(str(path), None, f"Parquet footer of {footer:,} bytes is over max_footer_bytes="
                 f"{cfg.max_footer_bytes} (every column of every row group): file skipped unread")
        return
    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as e:
        on_error(str(path), None, f"not a readable Parquet file: {e}")
        return
    # Leaf columns by path, once: each row group then touches only the chunks we read (20,000
    # columns cost 20,000 metadata objects per row group before). A struct's leaves are
    # `metadata.url`; `ParquetSchema.names` would give `url`, which a top-level column may also be.
    paths = [pf.schema.column(i).path for i in range(len(pf.schema))]
    tops: dict[str, list[int]] = {}
    for i, leaf in enumerate(paths):
        tops.setdefault(leaf.split(".")[0], []).append(i)
    if cfg.text_field not in tops:
        shown = ", ".join(sorted(tops)[:20] + (["..."] if len(tops) > 20 else []))
        on_error(str(path), None, f"missing text column {cfg.text_field!r} (columns: {shown})")
        return
    cols, dated = read_columns(pf.schema_arrow, cfg)
    extra = frozenset(cols) - {cfg.text_field, cfg.id_field, cfg.url_field, cfg.metadata_field}
    chunks = [i for c in cols for i in tops[c]]
    leaves = {leaf: i for i, leaf in enumerate(paths)}
    row = 0
    for g in range(pf.num_row_groups):
        start = row
        size, rows = _row_group_bytes(pf, g, chunks), pf.metadata.row_group(g).num_rows
        # Skipped unread only when it is both big and certain to hold an oversized row (more bytes
        # than max_record_bytes per row): a legit group of a million rows is read, in batches.
        if cfg.max_row_group_bytes and size > cfg.max_row_group_bytes and size > cfg.max_record_bytes * rows:
            on_error(str(path), f"row group {g}", f"{size:,} bytes uncompressed (footer) in {rows} rows: "
                     f"over max_row_group_bytes={cfg.max_row_group_bytes}, with an oversized row: "
                     "skipped unread")
            row += rows
            continue
        try:
            by_pages = group_rows(path, pf, g, cols, cfg.text_field, cfg.max_record_bytes, leaves, extra)
            if by_pages is not None:  # a page can hold an oversized cell: measured before it is read
                for i, obj in by_pages:
                    doc = _parquet_doc(obj, row + i, cfg, src, path, on_error, dated)
                    if doc is not None:
                        yield doc
                row = start + rows
                continue
            for batch in pf.iter_batches(PARQUET_BATCH_ROWS, row_groups=[g], columns=cols, use_threads=False):
                for i, obj in _parquet_rows(batch, cfg.max_record_bytes, extra):
                    doc = _parquet_doc(obj, row + i, cfg, src, path, on_error, dated)
                    if doc is not None:
                        yield doc
                row += batch.num_rows
        except (pa.ArrowException, OSError, MemoryError, *PAGE_ERRORS) as e:
            on_error(str(path), f"row group {g}", f"unreadable row group: {type(e).__name__}: {e}")
            row = start + pf.metadata.row_group(g).num_rows
    if row == 0:
        on_error(str(path), None, "empty file")


def _footer_bytes(path: Path) -> int:
    """The footer's length from the file's last 8 bytes (length, "PAR1"); 0 when they are not that
    (pyarrow then says what is wrong). pyarrow parses a footer whole, every column of every row
    group, holding ~16x its bytes: a 3.7 MB footer of 20,000 columns took 60 MB."""
    import struct

    try:
        with open(path, "rb") as f:
            if f.seek(0, 2) < 12:
                return 0
            f.seek(-8, 2)
            tail = f.read(8)
    except OSError:
        return 0
    return struct.unpack("<I", tail[:4])[0] if tail[4:] == b"PAR1" else 0


def _row_group_bytes(pf, g: int, cols: list[int]) -> int:
    """Uncompressed bytes of the columns we read in row group `g`, from the footer (nothing decoded)."""
    rg = pf.metadata.row_group(g)
    return sum(rg.column(i).total_uncompressed_size for i in cols)  # a struct's leaves included


def read_columns(schema, cfg: ReaderConfig) -> tuple[list[str], frozenset[str]]:
    """The top-level columns a row is read with: text, id, url and metadata, then every other
    column whose values JSON can hold (FineWeb's `dump`, `date`, `language_score`...), which
    `make_doc` puts into the metadata as datatrove's readers do; and those of them holding dates
    or timestamps (written out as ISO 8601 strings). Binary columns (images, audio), decimals,
    durations and views are left unread: our outputs are JSON."""
    times = Counter(schema.names)  # a name twice is read by neither (list.count per column: quadratic)
    core = [c for c in (cfg.text_field, cfg.id_field, cfg.url_field, cfg.metadata_field) if c and c in times]
    extra = [f for f in schema if f.name not in core and times[f.name] == 1 and _jsonable(f.type)]
    dated = frozenset(f.name for f in extra if _jsonable(f.type, dated=True) == "dated")
    return core + [f.name for f in extra], dated


def _jsonable(t, dated: bool = False) -> bool | str:
    """True when every value of Arrow type `t` converts to JSON ("dated" with `dated=True` when
    some are dates or timestamps)."""
    import pyarrow as pa

    types = pa.types
    if types.is_dictionary(t):
        return _jsonable(t.value_type, dated)
    if types.is_list(t) or types.is_large_list(t) or types.is_fixed_size_list(t):
        return _jsonable(t.value_type, dated)
    if types.is_struct(t) or types.is_map(t):
        kids = ([t.key_type, t.item_type] if types.is_map(t)
                else [t.field(i).type for i in range(t.num_fields)])
        marks = [_jsonable(k, dated) for k in kids]
        return False if not all(marks) else ("dated" if "dated" in marks else True)
    if types.is_timestamp(t) or types.is_date(t):
        return "dated" if dated else True
    return (types.is_null(t) or types.is_boolean(t) or types.is_integer(t) or types.is_string(t)
            or types.is_large_string(t) or (types.is_floating(t) and not types.is_float16(t)))


def _iso(value):
    """Dates and timestamps (nested ones too) as ISO 8601 strings, as orjson would write them."""
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _iso(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_iso(v) for v in value]
    return value


def _parquet_doc(obj: dict | str | None, row: int, cfg: ReaderConfig, src: str, path: Path,
                 on_error: OnError, dated: frozenset[str] = frozenset()) -> Document | None:
    def err(reason: str) -> None:
        on_error(str(path), f"row {row}", reason)

    if obj is None:
        err(f"record larger than max_record_bytes={cfg.max_record_bytes}")
        return None
    if isinstance(obj, str):  # the reason a row read by pages is bad
        err(obj)
        return None
    for name in dated:
        obj[name] = _iso(obj[name])
    return make_doc(obj, cfg, src, row, err)


# Rows converted to Python at a time: a row group of 3M rows costs 64 rows of Python objects, and a
# huge cell is measured in Arrow (its length) before anything copies it into a str.
PARQUET_BATCH_ROWS = 64


def _parquet_rows(batch, max_bytes: int, extra: frozenset[str] = frozenset()
                  ) -> Iterator[tuple[int, dict | str | None]]:
    """(index in batch, row as a dict) for each row; None for a row whose strings exceed max_bytes,
    the reason (a str) for a row that is not UTF-8."""
    import numpy as np
    import pyarrow as pa

    from pretrain.curate.parquet_pages import pylist

    total = np.zeros(batch.num_rows, dtype=np.int64)
    for col in batch.columns:
        total += _row_bytes(col)
    too_big = total > max_bytes
    if not too_big.any():
        yield from enumerate(pylist(batch, extra))
        return
    kept = pylist(batch.filter(pa.array(~too_big)), extra)
    it = iter(kept)
    for i, big in enumerate(too_big):
        yield i, None if big else next(it)


def _row_bytes(col):
    """Bytes of the strings in each row of an Arrow column (numpy int64, one per row), measured in
    Arrow before any str is made: strings and binaries, and those inside structs (datatrove's
    metadata), lists and dictionaries (a `datasets` column can be any of them). Fixed-width values
    count their width (a list of a million floats is 8 MB, whatever its strings)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    t, n = col.type, len(col)
    if any(is_(t) for is_ in (pa.types.is_string, pa.types.is_large_string, pa.types.is_binary,
                              pa.types.is_large_binary)):
        # from the offsets buffer (a null's slot spans nothing in what writers make; if a file's
        # does, it counts): two compute calls per column per 64 rows were a third of reading
        offsets = col.buffers()[1]
        if offsets is None or n == 0:
            return pc.fill_null(pc.binary_length(col), 0).to_numpy(zero_copy_only=False).astype(np.int64)
        wide = pa.types.is_large_string(t) or pa.types.is_large_binary(t)
        ends = np.frombuffer(offsets, dtype=np.int64 if wide else np.int32, count=col.offset + n + 1)
        return np.diff(ends[col.offset:]).astype(np.int64)
    if pa.types.is_dictionary(t):
        sizes = _row_bytes(col.dictionary)
        idx = col.indices.fill_null(0).to_numpy(zero_copy_only=False) if n else np.zeros(0, np.int64)
        return sizes[idx] if len(sizes) else np.zeros(n, np.int64)
    if pa.types.is_struct(t):
        total = np.zeros(n, np.int64)
        for child in col.flatten():
            total += _row_bytes(child)
        return total
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
        # offsets index the whole child array (a slice keeps its parent's): sums between them
        if pa.types.is_map(t):
            child = _row_bytes(col.keys) + _row_bytes(col.items)
        else:
            child = _row_bytes(col.values)
        ends = np.concatenate([[0], np.cumsum(child)])
        offsets = col.offsets.to_numpy(zero_copy_only=False)
        return (ends[offsets[1:]] - ends[offsets[:-1]]).astype(np.int64)
    if pa.types.is_fixed_size_list(t):  # `values` ignores a slice's offset: cut it by hand
        k = t.list_size
        child = _row_bytes(col.values)[col.offset * k:(col.offset + n) * k]
        return child.reshape(n, k).sum(axis=1).astype(np.int64) if k else np.zeros(n, np.int64)
    width = getattr(t, "bit_width", 0) if not pa.types.is_null(t) else 0  # int, float, bool, dates
    return np.full(n, max(width // 8, 1) if width else 0, np.int64)
