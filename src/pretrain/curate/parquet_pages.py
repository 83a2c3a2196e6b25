"""Parquet string columns read page by page, so that a huge cell is measured and skipped unread:
the text column and every other flat string column read (`id`, `url`, a metadata-bound `dump` or
`junk`; session 10: a 256 MB `junk` cell cost 835 MB before).

pyarrow decodes a whole column chunk before anything can look at it: one 200 MB cell among small
rows costs ~4x its size (decompressed page, the array builder growing) before the reader can see
its length and drop it. A value never spans pages, so the page headers (Thrift, beside the page
data, read without decompressing anything) bound every cell: when no page of a string column in
a row group is larger than `max_record_bytes`, no cell is either and pyarrow reads it as before.
When one is, `text_cells` reads that column itself: each page is inflated as a stream (zstd, gzip,
uncompressed; other codecs in one call, 1x the page), each value's 4-byte length is read first and
an oversized value is skipped without being kept. The dictionary page is read the same way and its
oversized entries are remembered by index.

Session 11: string leaves nested deeper are read the same way: a field of structs at any depth
(`metadata.info.note`; where an enclosing struct is null, `NullAt` says which) and a top-level
list of strings (`tags`), whose rows are put together from the repetition levels (`leaf_rows`).
A list's row can span pages, and a dictionary entry can be repeated in it, so its measure is the
column chunk's decoded bound (`list_bound`: the pages, plus each value at the longest entry),
not its largest page; a list row over the bound is counted, its strings not kept.

Supported: a string leaf of those shapes, data pages v1 and v2, PLAIN and dictionary encodings.
Anything else (lists of structs, of lists or of numbers, maps) returns None from `_string_leaf`
or raises Unsupported from `text_cells`, and pyarrow reads it, under `max_row_group_bytes`.
Layout from the Parquet format spec (parquet-format: PageHeader, Encodings.md).
"""

from __future__ import annotations

import io
import itertools
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import zstandard


@dataclass(frozen=True)
class TooBig:
    """A cell skipped unread: only its length (bytes) is known."""

    size: int


@dataclass(frozen=True)
class NullAt:
    """A nested leaf's slot where an enclosing struct is null: the path's part at `depth` (0: the
    top-level column)."""

    depth: int


@dataclass(frozen=True)
class Shape:
    """How a string leaf nests: `present[k]`, the definition level from which the path's part k
    (an enclosing struct, or a top-level list) is there; `listed`: a top-level list of strings
    (`present` then says: the list is there, the list is not empty)."""

    present: tuple[int, ...] = ()
    listed: bool = False


class Unsupported(Exception):
    """The column uses a feature this reader does not decode: read it with pyarrow instead."""


def _errors() -> tuple[type[BaseException], ...]:
    return (Unsupported, IndexError, KeyError, TypeError, AttributeError, struct.error, ValueError,
            RecursionError, zlib.error, zstandard.ZstdError)


# --------------------------------------------------------------------------- Thrift compact protocol


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7
        if shift > 63:
            raise Unsupported("varint too long")


def _zigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def _value(buf: bytes, i: int, kind: int):
    """One value of compact type `kind` at `i`: (value, next index); structs come back as dicts."""
    if kind in (1, 2):
        return kind == 1, i
    if kind == 3:
        return struct.unpack_from("b", buf, i)[0], i + 1
    if kind in (4, 5, 6):
        v, i = _varint(buf, i)
        return _zigzag(v), i
    if kind == 7:
        return struct.unpack_from("<d", buf, i)[0], i + 8
    if kind == 8:
        n, i = _varint(buf, i)
        if i + n > len(buf):
            raise IndexError("binary past the buffer")
        return bytes(buf[i:i + n]), i + n
    if kind in (9, 10):
        head = buf[i]
        i += 1
        size, elem = head >> 4, head & 0x0F
        if size == 15:
            size, i = _varint(buf, i)
        out = []
        for _ in range(size):
            if elem in (1, 2):  # a bool in a collection is one byte
                v, i = buf[i] == 1, i + 1
            else:
                v, i = _value(buf, i, elem)
            out.append(v)
        return out, i
    if kind == 11:
        size, i = _varint(buf, i)
        if size == 0:
            return {}, i
        types = buf[i]
        i += 1
        out = {}
        for _ in range(size):
            k, i = _value(buf, i, types >> 4)
            v, i = _value(buf, i, types & 0x0F)
            out[k if not isinstance(k, list) else tuple(k)] = v
        return out, i
    if kind == 12:
        return _struct(buf, i)
    raise Unsupported(f"Thrift type {kind}")


def _struct(buf: bytes, i: int) -> tuple[dict, int]:
    out, last = {}, 0
    while True:
        head = buf[i]
        i += 1
        if head == 0:
            return out, i
        delta, kind = head >> 4, head & 0x0F
        if delta:
            fid = last + delta
        else:
            raw, i = _varint(buf, i)
            fid = _zigzag(raw)
        out[fid], i = _value(buf, i, kind)
        last = fid


def _page_header(f, offset: int) -> tuple[dict, int]:
    """(PageHeader as {field id: value}, where the page's data starts)."""
    size = 1 << 12
    while True:
        f.seek(offset)
        buf = f.read(size)
        try:
            header, used = _struct(buf, 0)
            return header, offset + used
        except IndexError:
            if len(buf) < size or size >= 1 << 24:  # the file ended, or no sane header is this big
                raise Unsupported("unreadable page header") from None
            size *= 8


# --------------------------------------------------------------------------- pages as streams

_DATA, _DICT, _DATA_V2 = 0, 2, 3
_PLAIN, _PLAIN_DICT, _RLE_DICT = 0, 2, 8
_CODECS = {"SNAPPY": "snappy", "LZ4": "lz4_raw", "LZ4_RAW": "lz4_raw", "BROTLI": "brotli"}


class _Region(io.RawIOBase):
    """`size` bytes of an open file from `offset`, as a stream."""

    def __init__(self, f, offset: int, size: int):
        self.f, self.pos, self.left = f, offset, size

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = min(len(b), self.left)
        if n <= 0:
            return 0
        self.f.seek(self.pos)
        data = self.f.read(n)
        b[:len(data)] = data
        self.pos, self.left = self.pos + len(data), self.left - len(data)
        return len(data)


class _Inflated:
    """`read(n)` / `skip(n)` over a page's decompressed bytes, never more than the header's size
    (a bomb stops there); a skip holds at most 1 MiB."""

    def __init__(self, raw: _Region, codec: str, size: int):
        self.left = size
        if codec in _CODECS and size > 1 << 30:  # one call would allocate the claimed size
            raise Unsupported(f"{codec} page of {size} bytes")
        if codec == "UNCOMPRESSED":
            self.s = raw
        elif codec == "ZSTD":
            self.s = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
        elif codec == "GZIP":
            self.s = _GzipStream(raw)
        elif codec in _CODECS:  # block formats: one call, the page's size once
            import pyarrow as pa

            data = raw.read(raw.left)
            self.s = io.BytesIO(pa.Codec(_CODECS[codec]).decompress(data, size).to_pybytes())
        else:
            raise Unsupported(f"codec {codec}")

    def read(self, n: int) -> bytes:
        if n > self.left:
            raise Unsupported("a value runs past its page")
        self.left -= n
        out = b""
        while len(out) < n:
            chunk = self.s.read(n - len(out))
            if not chunk:
                raise Unsupported("page shorter than its values")
            out += chunk
        return out

    def skip(self, n: int) -> None:
        while n > 0:
            n -= len(self.read(min(n, 1 << 20)))


class _GzipStream:
    def __init__(self, raw: _Region):
        self.raw, self.d, self.buf = raw, zlib.decompressobj(47), b""

    def read(self, n: int) -> bytes:
        while len(self.buf) < n and not self.d.eof:
            data = self.d.unconsumed_tail or self.raw.read(1 << 16)
            if not data:
                break
            self.buf += self.d.decompress(data, max(n - len(self.buf), 1 << 16))
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


def _hybrid(data: bytes, width: int, count: int) -> np.ndarray:
    """`count` values of the RLE / bit-packed hybrid encoding (Encodings.md)."""
    out, i, n = np.zeros(count, dtype=np.int64), 0, 0
    nbytes = (width + 7) // 8
    while n < count:
        head, i = _varint(data, i)
        if head & 1:  # bit-packed groups of 8 values, little-endian bit order
            groups = head >> 1
            raw = np.frombuffer(data, dtype=np.uint8, count=groups * width, offset=i)
            i += groups * width
            bits = np.unpackbits(raw, bitorder="little").reshape(-1, width) if width else None
            vals = bits @ (1 << np.arange(width, dtype=np.int64)) if width else np.zeros(groups * 8, np.int64)
            take = min(len(vals), count - n)
            out[n:n + take] = vals[:take]
            n += take
        else:
            run = head >> 1
            v = int.from_bytes(data[i:i + nbytes], "little")
            i += nbytes
            out[n:n + run] = v
            n += run
    return out


def _plain_values(s: _Inflated, count: int, max_bytes: int) -> list:
    """`count` PLAIN byte arrays: bytes, or TooBig for one longer than `max_bytes` (skipped)."""
    out = []
    for _ in range(count):
        (n,) = struct.unpack("<I", s.read(4))
        if n > max_bytes:
            s.skip(n)
            out.append(TooBig(n))
        else:
            out.append(s.read(n))
    return out


# --------------------------------------------------------------------------- the column


def big_pages(f, chunk, max_bytes: int) -> bool:
    """True when a page of this column chunk is over `max_bytes` uncompressed (only headers read)."""
    for header, _start in _pages(f, chunk):
        if header.get(2, 0) > max_bytes:
            return True
    return False


def list_bound(f, chunk, max_bytes: int) -> int:
    """Bytes a list column chunk can decode to (only headers and the dictionary page read): its
    pages' sizes, plus, for each value, the longest dictionary entry (a list of 262,144 copies of
    one 1 KiB entry is 2.8 kB on disk and 256 MiB decoded)."""
    total = longest = 0
    for header, data in _pages(f, chunk):
        kind = header.get(1)
        if kind == _DICT:
            s = _Inflated(_Region(f, data, header[3]), chunk.compression, header[2])
            entries = _plain_values(s, header[7][1], max_bytes)
            longest = max((v.size if isinstance(v, TooBig) else len(v) for v in entries), default=0)
        elif kind in (_DATA, _DATA_V2):
            total += header[2] + (header[5] if kind == _DATA else header[8])[1] * longest
    return total


def _pages(f, chunk) -> Iterator[tuple[dict, int]]:
    start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
    if start is None:
        raise Unsupported("no page offset")
    offset, end = start, start + chunk.total_compressed_size
    while offset < end:
        header, data = _page_header(f, offset)
        sizes = header.get(2), header.get(3)
        if not all(isinstance(v, int) for v in sizes) or min(sizes) < 0:
            raise Unsupported("page header without sizes")
        yield header, data
        offset = data + header[3]  # strictly forward: a header is at least one byte


def text_cells(f, chunk, max_def: int, max_bytes: int, max_rep: int = 0) -> Iterator[tuple]:
    """Per data page, (its repetition levels or None, its definition levels, its values: bytes or
    TooBig where the level is `max_def`, else None). Raises Unsupported for what it cannot read (the
    caller falls back to pyarrow, before anything was yielded: every page header is checked
    first)."""
    pages = list(_pages(f, chunk))
    for header, _ in pages:
        if header.get(1) == _DATA and header[5].get(2) not in (_PLAIN, _PLAIN_DICT, _RLE_DICT):
            raise Unsupported(f"encoding {header[5].get(2)}")
        if header.get(1) == _DATA_V2 and header[8].get(4) not in (_PLAIN, _PLAIN_DICT, _RLE_DICT):
            raise Unsupported(f"encoding {header[8].get(4)}")
    codec = chunk.compression
    dictionary: list = []
    for header, data in pages:
        kind, size, csize = header.get(1), header[2], header[3]
        if kind == _DICT:
            s = _Inflated(_Region(f, data, csize), codec, size)
            dictionary = _plain_values(s, header[7][1], max_bytes)
        elif kind == _DATA:
            s = _Inflated(_Region(f, data, csize), codec, size)
            dp = header[5]
            reps = _levels_v1(s, dp[1], max_rep) if max_rep else None
            levels = _levels_v1(s, dp[1], max_def)
            yield reps, levels, _cells(s, dp.get(2), levels, max_def, dictionary, max_bytes)
        elif kind == _DATA_V2:
            yield _page_v2(f, data, header, codec, max_def, max_rep, dictionary, max_bytes)
        # index pages and unknown kinds carry no values


def _levels_v1(s: _Inflated, count: int, max_level: int) -> np.ndarray:
    """A v1 page's `count` repetition or definition levels (4-byte length, then the hybrid levels)."""
    if max_level == 0:
        return np.zeros(count, dtype=np.int64)
    (n,) = struct.unpack("<I", s.read(4))
    return _hybrid(s.read(n), max_level.bit_length(), count)


def _page_v2(f, data: int, header: dict, codec: str, max_def: int, max_rep: int, dictionary: list,
             max_bytes: int) -> tuple:
    dp = header[8]
    count, def_len, rep_len = dp[1], dp.get(5, 0), dp.get(6, 0)
    f.seek(data)
    raw = f.read(rep_len + def_len)
    reps = _hybrid(raw[:rep_len], max_rep.bit_length(), count) if max_rep else None
    levels = _hybrid(raw[rep_len:], max_def.bit_length(), count) if max_def else np.zeros(count, np.int64)
    skip = rep_len + def_len
    body = _Region(f, data + skip, header[3] - skip)
    s = _Inflated(body, codec if dp.get(7, True) else "UNCOMPRESSED", header[2] - skip)
    return reps, levels, _cells(s, dp.get(4), levels, max_def, dictionary, max_bytes)


def _cells(s: _Inflated, encoding: int, levels: np.ndarray, max_def: int, dictionary: list,
           max_bytes: int) -> list:
    present = levels == max_def
    n = int(present.sum())
    if encoding == _PLAIN:
        values = _plain_values(s, n, max_bytes)
    else:  # dictionary indices: a bit width byte, then the hybrid encoding over the rest
        rest = s.read(s.left)  # bit width and indices: a few bits per row
        idx = _hybrid(rest[1:], rest[0], n) if n else np.zeros(0, np.int64)
        if len(idx) and (int(np.max(idx)) >= len(dictionary) or int(np.min(idx)) < 0):
            raise Unsupported("dictionary index out of range")
        values = [dictionary[i] for i in idx.tolist()]
    it = iter(values)
    return [next(it) if p else None for p in present]


def leaf_rows(pages: Iterator[tuple], shape: Shape, max_def: int, max_bytes: int) -> Iterator:
    """One cell per row from `text_cells`' pages: bytes, None, TooBig or NullAt (an enclosing struct
    is null); for a top-level list, the row's list (None: a null list), or TooBig when its strings
    together exceed `max_bytes` (their bytes are then no longer kept: a list of a million strings,
    spread over many small pages, is counted, not held)."""
    if not shape.listed:
        for _, levels, values in pages:
            for d, v in zip(levels.tolist(), values):
                if d == max_def:
                    yield v
                else:
                    k = next((k for k, t in enumerate(shape.present) if d < t), None)
                    yield None if k is None else NullAt(k)
        return
    row: list | TooBig | None = None
    started, size = False, 0
    for reps, levels, values in pages:
        for r, d, v in zip(reps.tolist(), levels.tolist(), values):
            if r == 0:
                if started:
                    yield row
                started, size = True, 0
                row = None if d < shape.present[0] else []
                if d < shape.present[1]:
                    continue
            elif row is None or not started:
                raise Unsupported("a list element without its list")
            size += v.size if isinstance(v, TooBig) else len(v) if v is not None else 0
            if size > max_bytes:
                row = TooBig(size)
            elif isinstance(row, list):
                row.append(v)
    if started:
        yield row


# --------------------------------------------------------------------------- rows of a row group


def group_rows(path, pf, g: int, cols: list[str], text_field: str, max_bytes: int,
               leaves: dict[str, int], extra: frozenset[str] = frozenset()
               ) -> Iterator[tuple[int, dict | str]] | None:
    """Rows of row group `g` as (index in the group, {column: value}) or (index, why it is bad),
    each string leaf that can hold a cell over `max_bytes` read by pages: a flat column (the text,
    `id`, `url`, FineWeb's `dump`, a stray `junk`), a string field of structs at any depth
    (`metadata.info.note`), a top-level list of strings (`tags`; its row can span pages, so its
    whole chunk is the measure); None when no column read can hold such a cell or one that can is
    a column this reader does not decode (the caller reads the group with pyarrow). `leaves`: the
    file's leaf columns by path, with their index."""
    # Each lookup below once per file and row group, not per column: `pf.schema_arrow` converts the
    # whole schema at every access and a struct's leaves were found by scanning every leaf, so a
    # file of 8,000 columns took 85 s (quadratic; bench/bench_parquet_columns.py).
    schema, rg, parquet_schema = pf.schema_arrow, pf.metadata.row_group(g), pf.schema
    below: dict[str, list[str]] = {}
    for k in leaves:
        if "." in k:
            below.setdefault(k.split(".", 1)[0], []).append(k)
    f = open(path, "rb")
    try:
        paged: dict[str, Iterator] = {}
        others: list[str] = []
        for name in cols:
            leaf_paths = [name] if name in leaves else below.get(name, [])
            kept = []
            for leaf in leaf_paths:
                found, chunk = _string_leaf(schema, parquet_schema, leaf, leaves), rg.column(leaves[leaf])
                if found is not None and (list_bound(f, chunk, max_bytes) > max_bytes if found[1].listed
                                          else big_pages(f, chunk, max_bytes)):
                    desc, shape = found
                    levels = desc.max_definition_level, max_bytes, desc.max_repetition_level
                    pages = text_cells(f, chunk, *levels)
                    first = next(pages, None)  # raises Unsupported here, before any row is given out
                    chained = itertools.chain([first] if first is not None else [], pages)
                    paged[leaf] = leaf_rows(chained, shape, desc.max_definition_level, max_bytes)
                else:
                    kept.append(leaf)
            others += [name] if kept == leaf_paths else kept
    except (OSError, *_errors()):
        f.close()
        return None
    if not paged:
        f.close()
        return None
    return _rows(f, pf, schema, g, others, paged, text_field, max_bytes, extra)


def _string_leaf(schema, parquet_schema, leaf: str, leaves: dict[str, int]):
    """(column descriptor, Shape) of leaf `leaf` when it is a UTF-8 string that `text_cells`
    decodes: a top-level column (`text`, `url`), a string field of structs at any depth
    (datatrove's `metadata.url`, `metadata.info.note`) or the strings of a top-level list (`tags`);
    else None (a list of structs, of lists or of numbers, a map: pyarrow reads them)."""
    import pyarrow as pa

    parts = leaf.split(".")
    if schema.get_field_index(parts[0]) < 0:  # -1 also when two top-level columns share the name
        return None
    desc = parquet_schema.column(leaves[leaf])
    if desc.physical_type != "BYTE_ARRAY" or desc.path != leaf:
        return None
    field = schema.field(parts[0])
    strings = (pa.types.is_string, pa.types.is_large_string)
    if pa.types.is_list(field.type) or pa.types.is_large_list(field.type):
        item = field.type.value_field
        if not any(is_(item.type) for is_ in strings) or desc.max_repetition_level != 1:
            return None
        top = int(field.nullable)
        if desc.max_definition_level != top + 1 + int(item.nullable):
            return None
        return desc, Shape((top, top + 1), listed=True)
    if desc.max_repetition_level:
        return None
    present, level = [], 0
    for part in parts[1:]:
        if not pa.types.is_struct(field.type) or field.type.get_field_index(part) < 0:
            return None
        level += int(field.nullable)
        present.append(level)
        field = field.type.field(part)
    if not any(is_(field.type) for is_ in strings):
        return None
    if level + int(field.nullable) != desc.max_definition_level:
        return None
    return desc, Shape(tuple(present))


def _rows(f, pf, schema, g: int, others: list[str], paged: dict[str, Iterator], text_field: str,
          max_bytes: int, extra: frozenset[str]) -> Iterator[tuple[int, dict | str]]:
    tops = {leaf.split(".")[0] for leaf in paged if "." in leaf}
    types = {top: schema.field(top).type for top in tops}
    lists = frozenset(leaf for leaf in paged  # a top-level list's strings: `tags.list.element`
                      if "." in leaf and not _is_struct(types[leaf.split(".")[0]]))
    with f:
        rows = pf.iter_batches(64, row_groups=[g], columns=others, use_threads=False) if others else iter(())
        n, total = 0, pf.metadata.row_group(g).num_rows
        while n < total:
            batch = next(rows, None)
            k = batch.num_rows if batch is not None else min(64, total - n)
            cells = {name: [next(it, None) for _ in range(k)] for name, it in paged.items()}
            for i, obj in enumerate(_others(batch, k, cells, max_bytes, extra)):
                row = _with_cells(obj, {name: c[i] for name, c in cells.items()}, g, n, max_bytes, extra,
                                  lists)
                for top, t in types.items():  # a struct's fields in the file's order, as pyarrow
                    if isinstance(row, dict) and isinstance(row.get(top), dict) and _is_struct(t):
                        row[top] = _in_order(row[top], t)
                yield n, row
                n += 1


def _is_struct(t) -> bool:
    import pyarrow as pa

    return t is not None and pa.types.is_struct(t)


def _in_order(value: dict, t) -> dict:
    """A struct's dict with its fields (nested ones too) in the schema's order, as pyarrow gives."""
    out = {}
    for field in t:
        if field.name in value:
            v = value[field.name]
            nested = isinstance(v, dict) and _is_struct(field.type)
            out[field.name] = _in_order(v, field.type) if nested else v
    return out


def _cell_bytes(c) -> int:
    if isinstance(c, TooBig):
        return c.size
    if isinstance(c, bytes):
        return len(c)
    if isinstance(c, list):
        return sum(len(v) for v in c if v is not None)
    return 0


def _others(batch, k: int, cells: dict[str, list], max_bytes: int, extra: frozenset[str]) -> list[dict | str]:
    """The rows of the other columns' batch as dicts, a row whose cells together exceed
    `max_bytes` as the reason instead (or {} when a paged cell is itself over: it says why),
    measured in Arrow before any str is made (as the pyarrow path measures them:
    `parquet._row_bytes`)."""
    import pyarrow as pa

    from pretrain.curate.parquet import _row_bytes

    total = np.zeros(k, dtype=np.int64)
    skipped = np.zeros(k, dtype=bool)
    for page in cells.values():
        total += [_cell_bytes(c) for c in page]
        skipped |= [isinstance(c, TooBig) for c in page]
    if batch is None:
        return [{} for _ in range(k)]
    for col in batch.columns:
        total += _row_bytes(col)
    too_big = total > max_bytes
    if not too_big.any():
        return pylist(batch, extra)
    kept = iter(pylist(batch.filter(pa.array(~too_big)), extra))
    why = f"record larger than max_record_bytes={max_bytes}"
    return [why if big and not skip else {} if big else next(kept) for big, skip in zip(too_big, skipped)]


def _with_cells(obj: dict | str, cells: dict, g: int, n: int, max_bytes: int,
                extra: frozenset[str], lists: frozenset[str] = frozenset()) -> dict | str:
    """The row with its paged cells decoded, or why it is skipped (a cell over the bound names its
    column, row group and row in the group)."""
    if isinstance(obj, str):  # the row's other columns were already bad
        return obj
    for name, cell in cells.items():
        if isinstance(cell, TooBig):
            shown = name.split(".")[0] if name in lists else name
            return (f"record larger than max_record_bytes={max_bytes}: column {shown!r} holds "
                    f"{cell.size:,} bytes (row group {g}, row {n} of the group), skipped unread")
    out = dict(obj)
    for leaf, cell in cells.items():
        parts = leaf.split(".")
        top = parts[0]
        try:
            if leaf in lists:  # a top-level list of strings
                out[top] = None if cell is None else [v if v is None else v.decode("utf-8") for v in cell]
                continue
            holder, path = out, parts
            if isinstance(cell, NullAt):  # an enclosing struct is null: the dicts above it are there
                path = parts[:cell.depth + 1]
            for part in path[:-1]:  # into the structs read with their other fields, if any
                if not isinstance(holder.get(part), dict):
                    holder[part] = {}
                holder = holder[part]
            holder[path[-1]] = None if cell is None or isinstance(cell, NullAt) else cell.decode("utf-8")
        except UnicodeDecodeError as e:
            if top in extra:  # as `pylist`: a bad cell of a metadata-bound column is left out
                continue
            return f"invalid UTF-8 in {leaf!r} at byte {e.start}"
    return out


def pylist(batch, extra: frozenset[str] = frozenset()) -> list[dict | str]:
    """The rows of a record batch as dicts; a row whose string cell is not UTF-8 (Parquet does not
    check: one bad cell made `to_pylist` raise and cost its whole row group, a million rows) is
    the reason instead, and the other rows still come out. A bad cell of an `extra` column (one
    bound for the metadata, not text, id, url or metadata) is left out of its row, which is kept."""
    try:
        return batch.to_pylist()
    except UnicodeDecodeError:
        return [_row(batch.slice(i, 1), extra) for i in range(batch.num_rows)]


def _row(one, extra: frozenset[str]) -> dict | str:
    try:
        return one.to_pylist()[0]
    except UnicodeDecodeError as e:
        why = f"invalid UTF-8 in a string column at byte {e.start}"
    row = {}
    for name, col in zip(one.schema.names, one.columns):
        try:
            row[name] = col.to_pylist()[0]
        except UnicodeDecodeError:
            if name not in extra:
                return why
    return row


PAGE_ERRORS = _errors()  # what a corrupt page raises mid-group: the caller reports the row group
