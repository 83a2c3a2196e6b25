"""Input readers: files in, `Document`s out, bad records reported and skipped.

Owns the input side of the belt: `read_documents`, which dispatches on the file's extension
through the `FORMATS` table (the files are listed by `inputs.py`: `list_inputs`, re-exported here):

- `.jsonl`, `.json`, `.ndjson`, plain or `.gz`, `.zst`, `.bz2`, `.xz`: one JSON object per line, or
  one JSON array of objects (`json_array.py`); `ReaderConfig.text_field`,
  `id_field`, `url_field` name the fields.
- `.parquet`: streamed one row group at a time (pyarrow), same field names: see `parquet.py`.
- `.arrow`: Arrow IPC, as HF `datasets`' `save_to_disk` writes it: see `arrow_ipc.py`.
- `.txt`: one document per file. `.html` / `.htm` (plain or `.gz`): one page per file, raw HTML in
  `doc.text` and `doc.cache["html"] = True` so that the extract step turns it into text.
- WARC / WET / ARC (`.warc`, `.warc.gz`, `.wet`, `.wet.gz`, `.arc`, `.arc.gz`): see `warc.py`.

A bad record (malformed JSON, invalid UTF-8, missing text field, record over
`max_record_bytes`, truncated compressed stream, binary garbage) goes to
`on_error(path, record_locator, reason)` (the locator is e.g. `"line 17"`) and reading goes on.
Every decompressed stream is bounded by `max_file_bytes`, so a compression bomb cannot run away.
A missing input path is a `UserError`.
"""

from __future__ import annotations

import bz2
import gzip
import io
import itertools
import json
import lzma
import re
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import zstandard

from pretrain.config import bounded, choice
from pretrain.curate.document import Document, stable_id
from pretrain.curate.inputs import (  # noqa: F401  (the listing side, re-exported for callers)
    HTML_SUFFIXES,
    JSONL_SUFFIXES,
    SUFFIXES,
    WARC_SUFFIXES,
    globbed,
    is_hidden,
    is_supported,
    list_inputs,
    source_name,
    walk_folder,
    walked,
)
from pretrain.curate.json_array import first_line, read_json_array, record_id
from pretrain.errors import UserError
from pretrain.untrusted import lone_surrogate

OnError = Callable[[str, object, str], None]

WARC_CHECK_GAPS = ("off", "uncompressed", "all")


@dataclass
class ReaderConfig:
    """How input files become Documents (TOML section `[reader]`)."""

    text_field: str = "text"
    id_field: str = "id"
    url_field: str = "url"
    # A record's object under this field becomes Document.metadata (e.g. the scores a previous
    # `pretrain curate` wrote), so re-curating or deduplicating a corpus keeps them. "" = ignore.
    metadata_field: str = "metadata"
    # A record (JSON line, Parquet cell, text file, WARC payload) larger than this is skipped.
    max_record_bytes: int = bounded(8 * 1024 * 1024, lo=1, why="bytes; 0 would skip every record")
    # Decompressed bytes read from one file at most (bounded decompression).
    max_file_bytes: int = bounded(64 * 1024**3, lo=1, why="bytes; 0 would read nothing")
    # ... and at most this many times the compressed bytes read (after 16 MiB): web text
    # compresses 3-10x (a file of one line repeated, a few hundred x), a zstd bomb 10,000x and more;
    # gzip cannot pass ~1030x, so its bombs stop at max_file_bytes. 0 = no ratio bound. Below 1 it
    # refused almost every file (past 16 MiB, any that compresses at all): at least 1, or 0.
    max_ratio: float = bounded(1000.0, lo=1, off=0, why="decompressed / compressed bytes, at least 1 "
                               "(web text compresses 3-10x); 0 = no bound")
    # Parquet: a row group whose columns we read hold more than this, uncompressed (the footer
    # says so before anything is decoded), and more than max_record_bytes per row (so some row is
    # oversized), is skipped whole: a page holding a 1 GiB cell would be decoded whole to reach
    # its neighbours. 0 = no bound.
    max_row_group_bytes: int = bounded(1024**3, why="bytes; a limit, any size up to 2**63 (0 = no bound)")
    # Parquet: a footer (schema and every row group's column metadata) larger than this is refused
    # unread: pyarrow parses it whole, at ~16x its size in memory (8 MiB: ~130 MB), whichever
    # columns we read. ~190 bytes per column per row group: 8 MiB is 40,000 column chunks (a
    # 4-column file of 10,000 row groups). 0 = no bound.
    max_footer_bytes: int = bounded(8 * 1024**2, why="bytes; a limit, any size up to 2**63 (0 = no bound)")
    # WARC in one gzip stream (not gzip per record): the records after one over max_record_bytes
    # can only be reached by inflating it; past this many claimed bytes the rest of the file is
    # skipped with one line instead (a 4 GiB record in 4 MB took 42 s). Gzip-per-record files
    # resume at the next member without inflating the big one, whatever its size.
    warc_max_skip_bytes: int = bounded(256 * 1024**2, lo=1, why="bytes")
    # WARC: keep only HTML responses (non-HTML payloads are skipped and counted).
    html_only: bool = True
    # JSONL/Parquet/Arrow: the text field holds a page's HTML (a crawl's `html` or `source_html`
    # column), so the extract step turns it into text as it does a WARC response; off, it passes
    # through and the belt judges the markup.
    text_is_html: bool = False
    # WARC: re-read the framing between records to report records the parser skipped:
    # "uncompressed" (cheap: a few bytes per record), "all" (also gzip-per-record files, which
    # costs a second decompression: about half the reading speed), or "off".
    warc_check_gaps: str = choice("uncompressed", WARC_CHECK_GAPS)

    def __post_init__(self) -> None:
        if self.warc_check_gaps not in WARC_CHECK_GAPS:
            raise ValueError(
                f"reader.warc_check_gaps must be off, uncompressed or all, not {self.warc_check_gaps!r}"
            )


def _ignore_error(path: str, record: object, reason: str) -> None:
    pass


def read_documents(
    path: Path,
    cfg: ReaderConfig,
    on_error: OnError = _ignore_error,
    *,
    source: str | None = None,
    stats: Counter[str] | None = None,
) -> Iterator[Document]:
    """Documents of one file, dispatched on its extension; bad records go to `on_error`.

    `source` defaults to the file's base name; pass `source_name(path, root)` for nested inputs.
    `stats`, when given, counts records by type and what was skipped (WARC: non-HTML, revisits).
    """
    path = Path(path)
    if not path.is_file():
        raise UserError(f"input not found: {path}")
    src = source if source is not None else path.name
    stats = stats if stats is not None else Counter()
    name = path.name.lower()
    for suffixes, reader in FORMATS:
        if name.endswith(suffixes):
            docs = _resolve(reader)(path, cfg, on_error, src, stats)
            yield from _text_bounded(docs, path, cfg, on_error) if suffixes in _BY_REFERENCE else docs
            return
    on_error(str(path), None, f"unsupported file type (known: {', '.join(SUFFIXES)})")


# Suffixes -> reader, in order; a reader is (path, cfg, on_error, source, stats) -> Documents.
# Named as "module:function" and imported on first use: warc.py and parquet.py build on this module's
# helpers, so importing them from here at load time would make the modules import each other.
FORMATS: list[tuple[tuple[str, ...], str]] = [
    (JSONL_SUFFIXES, "pretrain.curate.readers:_read_jsonl"),
    ((".parquet",), "pretrain.curate.parquet:read_parquet"),
    ((".arrow",), "pretrain.curate.arrow_ipc:read_arrow"),
    ((".txt",), "pretrain.curate.readers:_read_text"),
    (HTML_SUFFIXES, "pretrain.curate.readers:_read_html"),
    (WARC_SUFFIXES, "pretrain.curate.warc:read_warc"),
]


# Columnar files whose cells can repeat one stored value: a Parquet dictionary page (or an Arrow
# dictionary) of one 1 MiB string and 20,000 indices to it is a 531-byte file that read as 20 GiB
# of text, every row within max_record_bytes; 2M indices, 2 TiB. The ratio and size bounds of a
# compressed stream (max_ratio, max_file_bytes) apply to the text such a file yields.
_BY_REFERENCE = ((".parquet",), (".arrow",))


def _text_bounded(
    docs: Iterator[Document], path: Path, cfg: ReaderConfig, on_error: OnError
) -> Iterator[Document]:
    """`docs` until their text outgrows max_file_bytes or max_ratio times the file (+ RATIO_SLACK)."""
    limit = cfg.max_file_bytes
    if cfg.max_ratio:
        limit = min(limit, int(cfg.max_ratio * max(path.stat().st_size, 1)) + RATIO_SLACK)
    total = 0
    for doc in docs:
        total += len(doc.text)  # characters: at most its UTF-8 bytes, a bound no tighter than asked
        if total > limit:
            why = (f"more than max_file_bytes={cfg.max_file_bytes}" if total > cfg.max_file_bytes else
                   f"expands more than max_ratio={cfg.max_ratio:g} times")
            on_error(str(path), doc.id, f"{why} in the text of its records (a compression bomb: cells "
                     "that repeat one stored value?): the rest of the file skipped")
            docs.close()
            return
        yield doc


def _resolve(reader: str) -> Callable[..., Iterator[Document]]:
    import importlib

    module, _, function = reader.partition(":")
    return getattr(importlib.import_module(module), function)


# --------------------------------------------------------------------------- JSONL


class _Bounded:
    """A binary stream wrapper that stops with an error after `limit` bytes, or when the output
    outgrows `ratio` times the compressed input read so far (decompression bombs: a 9 KB zstd file
    that expands to 256 MiB stops after RATIO_SLACK bytes instead of holding a worker)."""

    def __init__(self, raw: IO[bytes], limit: int, ratio: float = 0, compressed_pos=None):
        self.raw, self.limit, self.read_bytes = raw, limit, 0
        self.ratio, self.compressed_pos = ratio, compressed_pos
        self.next_check = min(limit, RATIO_SLACK)  # checks once a MiB, not per line (tell() costs)

    def readline(self, size: int = -1) -> bytes:
        line = self.raw.readline(size)
        self.read_bytes += len(line)
        if self.read_bytes > self.next_check:
            self._check()
        return line

    def _check(self) -> None:
        if self.read_bytes > self.limit:
            raise OSError(f"more than max_file_bytes={self.limit} decompressed bytes")
        if self.ratio and self.compressed_pos:
            if self.read_bytes > self.ratio * max(self.compressed_pos(), 1) + RATIO_SLACK:
                raise OSError(f"expands more than max_ratio={self.ratio:g} times (a compression bomb?)")
        self.next_check = min(self.limit, self.read_bytes + (1 << 20))


class _ZstdRaw(io.RawIOBase):
    """A zstd stream that raises on a truncated frame (zstandard's stream_reader ends silently).

    Input is fed in 512-byte pieces: one call expands to at most 128 blocks of 128 KiB (an RLE block
    is 4 bytes), 16 MiB, where 4 KB pieces let a bomb hand over 128 MiB at once; no slower (bench).
    """

    def __init__(self, path: Path):
        self.f = open(path, "rb")
        self.d = zstandard.ZstdDecompressor().decompressobj()
        self.pending = b""
        self.pos = 0  # how much of `pending` was handed out: slicing it off each time is quadratic
        self.started = False

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        while self.pos >= len(self.pending):
            chunk = self.f.read(512)
            if not chunk:
                if self.started and not self.d.eof:
                    raise EOFError("zstd stream ended inside a frame")
                return 0
            self.started = True
            self.pending, self.pos = self.d.decompress(chunk), 0
            if self.d.eof and self.d.unused_data:  # concatenated frames
                rest = self.d.unused_data
                self.d = zstandard.ZstdDecompressor().decompressobj()
                self.pending += self.d.decompress(rest)
        n = min(len(b), len(self.pending) - self.pos)
        b[:n] = memoryview(self.pending)[self.pos:self.pos + n]
        self.pos += n
        return n

    def compressed_pos(self) -> int:
        return self.f.tell()

    def close(self) -> None:
        self.f.close()
        super().close()


# Decompressed bytes a file may produce before the ratio bound applies (a small file of very
# repetitive text is legitimate; 16 MiB of it costs a few milliseconds).
RATIO_SLACK = 16 << 20


def _compressed_pos(stream) -> Callable[[], int] | None:
    """How many compressed bytes the stream consumed so far (None for an uncompressed file)."""
    if isinstance(stream, gzip.GzipFile):
        return stream.fileobj.tell
    if isinstance(stream, (bz2.BZ2File, lzma.LZMAFile)):
        return stream._fp.tell  # the compressed file (private since Python 3.3, never renamed)
    raw = getattr(stream, "raw", None)
    return raw.compressed_pos if isinstance(raw, _ZstdRaw) else None


def _open_binary(path: Path) -> IO[bytes]:
    name = path.name.lower()
    if name.endswith(".gz"):
        return gzip.open(path, "rb")
    if name.endswith(".bz2"):
        return bz2.open(path, "rb")
    if name.endswith(".xz"):
        return lzma.open(path, "rb")
    if name.endswith(".zst"):
        return io.BufferedReader(_ZstdRaw(path), 1 << 16)
    return open(path, "rb")


def _read_jsonl(
    path: Path, cfg: ReaderConfig, on_error: OnError, src: str, _stats: Counter | None = None
) -> Iterator[Document]:
    lineno = 0
    try:
        with _open_binary(path) as raw:
            stream = _Bounded(raw, cfg.max_file_bytes, cfg.max_ratio, _compressed_pos(raw))
            while True:
                line = stream.readline(cfg.max_record_bytes + 1)
                if not line:
                    break
                lineno += 1
                if lineno == 1:
                    line, why = first_line(line)
                    if why is not None:
                        on_error(str(path), None, why)
                        return
                    if line.lstrip()[:1] == b"[":  # one JSON array, not lines (to_json(lines=False))
                        yield from read_json_array(line, stream, path, cfg.max_record_bytes, on_error,
                                                   lambda obj, i, err: make_doc(obj, cfg, src, i, err))
                        return
                    if line.strip() == b"{":  # json.dump(indent=...): metadata, a config, not records
                        on_error(str(path), None, "one pretty-printed JSON object, not JSON Lines nor an "
                                 "array of records")
                        return
                if len(line) > cfg.max_record_bytes and not line.endswith(b"\n"):
                    lineno -= 1  # a bomb met while skipping it is this line's, not the next one's
                    _skip_to_newline(stream, cfg.max_record_bytes)
                    lineno += 1
                    on_error(
                        str(path),
                        f"line {lineno}",
                        f"record larger than max_record_bytes={cfg.max_record_bytes}",
                    )
                    continue
                if not line.strip():
                    continue
                doc = _jsonl_record(line, lineno, cfg, src, path, on_error)
                if doc is not None:
                    yield doc
    except (OSError, EOFError, zlib.error, zstandard.ZstdError, lzma.LZMAError) as e:
        on_error(str(path), f"line {lineno + 1}", f"unreadable or truncated compressed stream: {e}")
        return
    if lineno == 0:
        on_error(str(path), None, "empty file")


def _skip_to_newline(stream: _Bounded, chunk: int) -> None:
    while True:
        part = stream.readline(chunk)
        if not part or part.endswith(b"\n"):
            return


def _jsonl_record(
    line: bytes, lineno: int, cfg: ReaderConfig, src: str, path: Path, on_error: OnError
) -> Document | None:
    where = f"line {lineno}"
    try:
        obj = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError as e:
        on_error(str(path), where, f"invalid UTF-8 at byte {e.start}")
        return None
    except json.JSONDecodeError as e:
        on_error(str(path), where, f"malformed JSON: {e.msg} at column {e.colno}")
        return None
    except ValueError as e:  # an integer past Python's 4300-digit limit (CVE-2020-10735's guard)
        on_error(str(path), where, f"malformed JSON: {e}")
        return None
    except RecursionError:  # [[[[... 100k deep: the C parser gives up; a record, not the job, fails
        on_error(str(path), where, "malformed JSON: nested too deeply")
        return None
    if not isinstance(obj, dict):
        on_error(str(path), where, f"expected a JSON object, got {type(obj).__name__}")
        return None
    if (why := lone_surrogate(line, obj)) is not None:  # parses, then no UTF-8 writer can encode it
        on_error(str(path), where, why)
        return None
    return make_doc(obj, cfg, src, lineno, lambda reason: on_error(str(path), where, reason))


def _fields(obj: dict) -> str:
    """The record's keys, for the user to pick --text-field from: the first 8, each cut to 40
    characters (a hostile record may hold a million keys)."""
    names = [repr(k if len(k) <= 40 else k[:40] + "…") for k in itertools.islice(obj, 8)]
    more = f" and {len(obj) - 8:,} more" if len(obj) > 8 else ""
    return (", ".join(names) + more) if names else "none"


def make_doc(
    obj: dict[str, Any], cfg: ReaderConfig, src: str, position: int, err: Callable
) -> Document | None:
    """A JSON line's object or a Parquet row -> `Document` (its id, else a stable one from `src` and
    `position`); None, after `err(reason)`, when the text field is missing or not a string."""
    text = obj.get(cfg.text_field)
    if text is None:
        # absent (not null): the record's own keys, to pick --text-field from
        fields = "" if cfg.text_field in obj else f"; its fields: {_fields(obj)}"
        err(f"missing text field {cfg.text_field!r}{fields}")
        return None
    if not isinstance(text, str):
        err(f"text field {cfg.text_field!r} is {type(text).__name__}, not a string")
        return None
    doc_id = record_id(obj.get(cfg.id_field))
    url = obj.get(cfg.url_field)
    meta = obj.get(cfg.metadata_field) if cfg.metadata_field else None
    if url is None and isinstance(meta, dict):  # datatrove writes the url into metadata
        url = meta.get(cfg.url_field)
    doc = Document(
        id=doc_id or stable_id(src, position),
        text=text,
        url=url if isinstance(url, str) else None,
        source=src,
        metadata=record_metadata(obj, cfg, meta),
    )
    if cfg.text_is_html:
        doc.cache["html"] = True
    return doc


def record_metadata(obj: dict[str, Any], cfg: ReaderConfig, meta: object) -> dict[str, Any]:
    """Every top-level field but text, id and url (a FineWeb row's `dump`, `date`, `language_score`,
    Dolma's `source`, `added`), then the record's metadata object: what datatrove's readers keep,
    so nothing is lost on the way. On a clash the metadata object wins (datatrove: the top-level
    field): our own outputs carry the file name as top-level `source`, and a re-read must not
    overwrite the `source` that Dolma's record put in the metadata on the first read."""
    taken = (cfg.text_field, cfg.id_field, cfg.url_field, cfg.metadata_field)
    out = {k: v for k, v in obj.items() if k not in taken}
    url = obj.get(cfg.url_field)
    if url is not None and not isinstance(url, str):  # not Document.url: kept as it is
        out[cfg.url_field] = url
    if isinstance(meta, dict):
        out.update(meta)
    elif cfg.metadata_field in obj:  # a metadata that is not an object: kept under its name
        out[cfg.metadata_field] = obj[cfg.metadata_field]
    return out


# --------------------------------------------------------------------------- text and HTML files


def _read_file_bytes(path: Path, cfg: ReaderConfig, on_error: OnError, kind: str) -> bytes | None:
    """The whole file, or None after `on_error` when it is empty, over `max_record_bytes` or binary
    (not `kind`: "text", "HTML")."""
    size = path.stat().st_size
    if size == 0:
        on_error(str(path), None, "empty file")
        return None
    if size > cfg.max_record_bytes:
        on_error(
            str(path), None, f"file of {size} bytes is larger than max_record_bytes={cfg.max_record_bytes}"
        )
        return None
    gz = path.name.lower().endswith(".gz")
    try:  # at most the bound, even from a file that grows after stat() or a gzip bomb
        with (gzip.open if gz else open)(path, "rb") as f:
            data = f.read(cfg.max_record_bytes + 1)
    except (OSError, EOFError, zlib.error) as e:  # not gzip, truncated, a bad CRC
        on_error(str(path), None, f"unreadable gzip ({e or type(e).__name__})")
        return None
    if len(data) > cfg.max_record_bytes:
        grew = "inflates past" if gz else "grew while read, past"
        on_error(str(path), None, f"file {grew} max_record_bytes={cfg.max_record_bytes}")
        return None
    if _looks_binary(data):
        on_error(str(path), None, f"binary content, not {kind}")
        return None
    return data


def _looks_binary(data: bytes) -> bool:
    """NUL bytes or many control characters in the first 4 KB: not text (UTF-16 with a BOM is text)."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return False
    head = data[:4096]
    if b"\x00" in head:
        return True
    controls = len(head) - len(head.translate(None, _CONTROL_BYTES))  # one C pass, not a loop per byte
    return controls > len(head) * 0.1


_CONTROL_BYTES = bytes(range(9)) + bytes(range(14, 32))  # b < 9 or 13 < b < 32


def _read_text(
    path: Path, cfg: ReaderConfig, on_error: OnError, src: str, _stats: Counter | None = None
) -> Iterator[Document]:
    data = _read_file_bytes(path, cfg, on_error, "text")
    if data is None:
        return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        on_error(str(path), None, f"invalid UTF-8 at byte {e.start}")
        return
    yield Document(id=stable_id(src, 0), text=text.removeprefix("\ufeff"), source=src)


_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)


def decode_html(body: bytes, http_charset: str | None = None) -> str:
    """Bytes of a page -> str: the HTTP charset, then the `<meta>` tag, then detection.

    resiliparse's `bytes_to_str` falls back to UTF-8 and cp1252 when the declared charset fails,
    so a page that lies about its encoding still decodes to sane text.
    """
    from resiliparse.parse.encoding import bytes_to_str, detect_encoding

    enc = _known_codec(http_charset)
    if enc is None:
        m = _META_CHARSET.search(body[:4096])
        enc = _known_codec(m.group(1).decode("ascii", "ignore")) if m else None
    if enc is None:
        enc = detect_encoding(body) or "utf-8"
    return bytes_to_str(body, enc)


# The encodings a browser decodes a page with (WHATWG Encoding Standard), as Python codec labels.
# A page names its own charset, and Python knows codecs no page may use: "uu" and "zlib" raised
# LookupError out of the reader (one page stopped `curate`), "raw_unicode_escape" and "utf-7" turn
# `\ud800` into a lone surrogate that no writer can encode, and "punycode" decodes in quadratic time
# (80 KB: 0.44 s; a 5 MB page: about half an hour). Anything else is detected from the bytes.
_WEB_CODEC_LABELS = (
    "utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "ascii", "latin-1", "cp866", "koi8-r",
    "koi8-u", "mac-roman", "mac-cyrillic", "cp874", "gbk", "gb2312", "gb18030", "big5", "big5hkscs",
    "euc-jp", "iso2022-jp", "shift-jis", "cp932", "euc-kr", "cp949",
    *(f"iso8859-{i}" for i in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13, 14, 15, 16)),
    *(f"cp125{i}" for i in range(9)),
)


def _web_codecs() -> frozenset[str]:
    import codecs

    names = set()
    for label in _WEB_CODEC_LABELS:
        try:
            names.add(codecs.lookup(label).name)
        except LookupError:  # a Python built without one: pages naming it are detected instead
            pass
    return frozenset(names)


_WEB_CODECS = _web_codecs()


def _known_codec(name: str | None) -> str | None:
    """`name` when it is a web page encoding Python has, else None (detect from the bytes)."""
    import codecs

    if not name:
        return None
    name = name.strip().strip("\"'").lower()
    try:
        return name if codecs.lookup(name).name in _WEB_CODECS else None
    except LookupError:
        return None


def _read_html(
    path: Path, cfg: ReaderConfig, on_error: OnError, src: str, _stats: Counter | None = None
) -> Iterator[Document]:
    data = _read_file_bytes(path, cfg, on_error, "HTML")
    if data is None:
        return
    doc = Document(id=stable_id(src, 0), text=decode_html(data), source=src)
    doc.cache["html"] = True
    yield doc
