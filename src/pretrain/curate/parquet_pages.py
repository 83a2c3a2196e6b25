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

Supported: a flat column (no repetition), data pages v1 and v2, PLAIN and dictionary encodings.
Anything else returns None from `text_cells` and the caller reads the row group with pyarrow.
Layout from the Parquet format spec (parquet-format: PageHeader, Encodings.md).
"""

from __future__ import annotations

import io
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


NO_PARENT = object()  # a struct leaf's slot where the struct itself is null


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


def text_cells(f, chunk, max_def: int, max_bytes: int, parent_def: int = 0) -> Iterator[list]:
    """Per data page, its cells in row order: bytes, None (null) or TooBig; NO_PARENT where the
    definition level is under `parent_def` (a struct leaf: the struct itself is null). Raises Unsupported for
    what it cannot read (the caller falls back to pyarrow, before anything was yielded: every page
    header is checked first)."""
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
            levels = _levels_v1(s, dp[1], max_def)
            yield _cells(s, dp.get(2), levels, max_def, parent_def, dictionary, max_bytes)
        elif kind == _DATA_V2:
            yield _page_v2(f, data, header, codec, max_def, parent_def, dictionary, max_bytes)
        # index pages and unknown kinds carry no values


def _levels_v1(s: _Inflated, count: int, max_def: int) -> np.ndarray:
    """A v1 page's `count` definition levels (4-byte length, then the hybrid levels)."""
    if max_def == 0:
        return np.zeros(count, dtype=np.int64)
    (n,) = struct.unpack("<I", s.read(4))
    return _hybrid(s.read(n), max_def.bit_length(), count)


def _page_v2(f, data: int, header: dict, codec: str, max_def: int, parent_def: int, dictionary: list,
             max_bytes: int) -> list:
    dp = header[8]
    count, def_len, rep_len = dp[1], dp.get(5, 0), dp.get(6, 0)
    f.seek(data + rep_len)
    levels = f.read(def_len)
    levels = _hybrid(levels, max_def.bit_length(), count) if max_def else np.zeros(count, np.int64)
    skip = rep_len + def_len
    body = _Region(f, data + skip, header[3] - skip)
    s = _Inflated(body, codec if dp.get(7, True) else "UNCOMPRESSED", header[2] - skip)
    return _cells(s, dp.get(4), levels, max_def, parent_def, dictionary, max_bytes)


def _cells(s: _Inflated, encoding: int, levels: np.ndarray, max_def: int, parent_def: int, dictionary: list,
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
    return [next(it) if p else None if d >= parent_def else NO_PARENT
            for p, d in zip(present, levels.tolist())]


# --------------------------------------------------------------------------- rows of a row group


def group_rows(path, pf, g: int, cols: list[str], text_field: str, max_bytes: int,
               leaves: dict[str, int], extra: frozenset[str] = frozenset()
               ) -> Iterator[tuple[int, dict | str]] | None:
    """Rows of row group `g` as (index in the group, {column: value}) or (index, why it is bad),
    each flat string column whose pages can hold a cell over `max_bytes` (the text column, or any
    other read: `id`, `url`, FineWeb's `dump`, a stray `junk`) read by pages; None when no page of
    the columns read can hold such a cell or one that can is a column this reader does not decode
    (the caller reads the group with pyarrow). `leaves`: the file's leaf columns by path, with
    their index."""
    f = open(path, "rb")
    try:
        paged: dict[str, Iterator] = {}
        others: list[str] = []
        for name in cols:
            leaf_paths = [name] if name in leaves else [k for k in leaves if k.startswith(name + ".")]
            if any(k.count(".") > 1 for k in leaf_paths):  # deeper nesting: read whole by pyarrow
                others.append(name)
                continue
            kept = []
            for leaf in leaf_paths:
                found, chunk = _string_leaf(pf, leaf, leaves), pf.metadata.row_group(g).column(leaves[leaf])
                if found is not None and big_pages(f, chunk, max_bytes):
                    desc, parent_def = found
                    pages = text_cells(f, chunk, desc.max_definition_level, max_bytes, parent_def)
                    first = next(pages, [])  # raises Unsupported here, before any row is given out
                    paged[leaf] = _chain(first, pages)
                else:
                    kept.append(leaf)
            others += [name] if kept == leaf_paths else kept
    except (OSError, *_errors()):
        f.close()
        return None
    if not paged:
        f.close()
        return None
    return _rows(f, pf, g, others, paged, text_field, max_bytes, extra)


def _string_leaf(pf, leaf: str, leaves: dict[str, int]):
    """(column descriptor, the struct's own definition level) of leaf `leaf` when it is a UTF-8
    string that `text_cells` decodes: a top-level column (`text`, `url`) or a string field of a
    top-level struct (datatrove's `metadata.url`), nothing repeated; else None."""
    import pyarrow as pa

    parts = leaf.split(".")
    if len(parts) > 2 or parts[0] not in pf.schema_arrow.names:
        return None
    field = pf.schema_arrow.field(parts[0])
    if len(parts) == 2:
        if not pa.types.is_struct(field.type) or field.type.get_field_index(parts[1]) < 0:
            return None
        field = field.type.field(parts[1])
    if not (pa.types.is_string(field.type) or pa.types.is_large_string(field.type)):
        return None
    desc = pf.schema.column(leaves[leaf])
    if desc.max_repetition_level or desc.physical_type != "BYTE_ARRAY" or desc.path != leaf:
        return None
    parent_def = desc.max_definition_level - (1 if field.nullable else 0) if len(parts) == 2 else 0
    return desc, parent_def


def _chain(first: list, pages: Iterator[list]) -> Iterator:
    yield from first
    for page in pages:
        yield from page


def _rows(f, pf, g: int, others: list[str], paged: dict[str, Iterator], text_field: str,
          max_bytes: int, extra: frozenset[str]) -> Iterator[tuple[int, dict | str]]:
    tops = {leaf.split(".")[0] for leaf in paged if "." in leaf}
    order = {top: [c.name for c in pf.schema_arrow.field(top).type] for top in tops}
    with f:
        rows = pf.iter_batches(64, row_groups=[g], columns=others, use_threads=False) if others else iter(())
        n, total = 0, pf.metadata.row_group(g).num_rows
        while n < total:
            batch = next(rows, None)
            k = batch.num_rows if batch is not None else min(64, total - n)
            cells = {name: [next(it, None) for _ in range(k)] for name, it in paged.items()}
            for i, obj in enumerate(_others(batch, k, cells, max_bytes, extra)):
                row = _with_cells(obj, {name: c[i] for name, c in cells.items()}, g, n, max_bytes, extra)
                for top, names in order.items():  # a struct's fields in the file's order, as pyarrow
                    if isinstance(row, dict) and isinstance(row.get(top), dict):
                        row[top] = {k: row[top][k] for k in names if k in row[top]}
                yield n, row
                n += 1


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
        total += [c.size if isinstance(c, TooBig) else len(c) if isinstance(c, bytes) else 0 for c in page]
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
                extra: frozenset[str]) -> dict | str:
    """The row with its paged cells decoded, or why it is skipped (a cell over the bound names its
    column, row group and row in the group)."""
    if isinstance(obj, str):  # the row's other columns were already bad
        return obj
    for name, cell in cells.items():
        if isinstance(cell, TooBig):
            return (f"record larger than max_record_bytes={max_bytes}: column {name!r} holds "
                    f"{cell.size:,} bytes (row group {g}, row {n} of the group), skipped unread")
    out = dict(obj)
    for leaf, cell in cells.items():
        top, _, child = leaf.partition(".")
        if child:  # a struct's field: into the struct read with its other fields, if any
            if cell is NO_PARENT:
                out[top] = None
                continue
            if out.get(top) is None:
                out[top] = {}
            holder, key = out[top], child
        else:
            holder, key = out, leaf
        try:
            holder[key] = cell.decode("utf-8") if cell is not None else None
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
