"""WARC, WET and ARC files -> Documents (called by `readers.read_documents`).

fastwarc (resiliparse) parses WARC and WET, gzip per record or whole file, in quirks mode so that
LF-only line endings and odd headers (ClueWeb's WARC/0.18) are read. warcio reads what fastwarc
cannot: the legacy ARC format. Per record type:

- `response`: HTTP headers parsed; non-2xx statuses and non-HTML payloads skipped and counted;
  chunked transfer encoding undone; a `Content-Encoding` undone only when the bytes really are
  compressed (ClueWeb stores decoded bodies under `Content-Encoding: gzip`); charset from the HTTP
  header, then the `<meta>` tag, then detection. The Document holds the raw HTML in `text` with
  `cache["html"] = True`; the extract step turns it into main text.
- `conversion` (WET): the text as Common Crawl extracted it.
- `revisit`: no payload of its own (it points at an earlier capture): counted, skipped.
- `request`, `metadata`, `warcinfo`: counted only.

`Document.id` is the WARC-Record-ID (ARC records have none: `stable_id(source, "record N")`), `url`
the WARC-Target-URI without the angle brackets some crawlers write around it.

Bad input is reported through `on_error` with the byte offset of the record and reading goes on:
records over `max_record_bytes`, binary bodies labelled HTML, truncated gzip members, and bytes
the parser had to skip (a Content-Length that lies, a record without a version line): after each
record the framing is re-read (`_GapChecker`) so that nothing is dropped silently.
"""

from __future__ import annotations

import re
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from pretrain.curate.document import Document, stable_id
from pretrain.curate.readers import OnError, ReaderConfig, _looks_binary, decode_html

HTML_TYPES = ("text/html", "application/xhtml+xml")
_HEADER_END = re.compile(rb"\r?\n\r?\n")


def read_warc(
    path: Path, cfg: ReaderConfig, on_error: OnError, src: str, stats: Counter[str]
) -> Iterator[Document]:
    name = path.name.lower()
    if name.endswith((".arc", ".arc.gz")):
        yield from _read_arc(path, cfg, on_error, src, stats)
        return
    if path.stat().st_size == 0:
        on_error(str(path), None, "empty file")
        return
    yield from _read_fastwarc(path, cfg, on_error, src, stats)


def clean_url(uri: str | None) -> str | None:
    """WARC-Target-URI without the `<...>` that some crawlers (wget) write around it."""
    if not uri:
        return None
    uri = uri.strip()
    if uri.startswith("<") and uri.endswith(">"):
        uri = uri[1:-1].strip()
    return uri or None


# --------------------------------------------------------------------------- fastwarc


def _read_fastwarc(
    path: Path, cfg: ReaderConfig, on_error: OnError, src: str, stats: Counter[str]
) -> Iterator[Document]:
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    gaps = _GapChecker(path, cfg.warc_check_gaps == "all") if cfg.warc_check_gaps != "off" else None
    prev: tuple[int, int] | None = None  # (stream_pos, content_length) of the previous record
    first = True
    try:
        it = ArchiveIterator(
            str(path),
            record_types=WarcRecordType.any_type,
            parse_http=True,
            quirks_mode=True,
            auto_decode="none",
            fsspec_args=False,
        )
        for rec in it:
            rtype = str(rec.record_type).rsplit(".", 1)[-1]
            if first and rtype in ("unknown", "no_type"):
                on_error(str(path), "offset 0", "not a WARC file (no WARC version line and record type)")
                return
            if gaps is not None:
                gaps.report(prev, rec.stream_pos, on_error, stats)
            prev, first = (rec.stream_pos, _warc_length(rec)), False
            stats[f"records.{rtype}"] += 1
            doc = _fastwarc_doc(rec, rtype, cfg, on_error, src, stats, str(path))
            if doc is not None:
                stats["documents"] += 1
                yield doc
    except (OSError, ValueError, EOFError, zlib.error) as e:
        where = f"after offset {prev[0]}" if prev else "offset 0"
        on_error(str(path), where, f"unreadable WARC data (truncated or corrupt): {e}")
        stats["errors.truncated"] += 1
        return
    if first:
        if _is_arc(path):
            yield from _read_arc(path, cfg, on_error, src, stats)
        else:
            on_error(str(path), "offset 0", "not a WARC file (no record found)")
        return
    if gaps is not None:
        gaps.report(prev, None, on_error, stats)


def _warc_length(rec) -> int:
    """The record block's length from its header (`rec.content_length` drops parsed HTTP headers)."""
    try:
        return int(rec.headers.get("Content-Length") or rec.content_length)
    except ValueError:
        return rec.content_length


def _fastwarc_doc(
    rec, rtype: str, cfg: ReaderConfig, on_error: OnError, src: str, stats: Counter[str], path: str
) -> Document | None:
    where = f"offset {rec.stream_pos}"
    if rtype == "revisit":
        stats["skipped.revisit"] += 1
        return None
    if rtype not in ("response", "conversion", "resource"):
        return None
    if rec.headers.get("Content-Length") is None:
        on_error(path, where, "truncated or corrupt record: no WARC headers")
        stats["errors.truncated"] += 1
        return None
    if _warc_length(rec) > cfg.max_record_bytes:
        on_error(
            path,
            where,
            f"record of {_warc_length(rec)} bytes is larger than max_record_bytes={cfg.max_record_bytes}",
        )
        stats["skipped.too_large"] += 1
        return None
    rid = rec.headers.get("WARC-Record-ID") or stable_id(src, rec.stream_pos)
    url = clean_url(rec.headers.get("WARC-Target-URI"))
    meta = {"warc_date": rec.headers.get("WARC-Date")} if rec.headers.get("WARC-Date") else {}
    if rtype == "conversion":
        from resiliparse.parse.encoding import bytes_to_str

        body = rec.reader.read(cfg.max_record_bytes + 1)
        if len(body) < rec.content_length:
            on_error(path, where, f"truncated record: {len(body)} of {rec.content_length} bytes")
            return None
        if _looks_binary(body):
            on_error(path, where, "binary bytes in a WET conversion record")
            return None
        return Document(id=rid, text=bytes_to_str(body, "utf-8"), url=url, source=src, metadata=meta)
    if rtype == "resource":
        ctype = (rec.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if ctype not in HTML_TYPES:
            stats["skipped.non_html"] += 1
            return None
        return _html_doc(
            rec.reader.read(cfg.max_record_bytes + 1), None, rid, url, src, meta, on_error, path, where, stats
        )
    return _response_doc(rec, cfg, rid, url, src, meta, on_error, path, where, stats)


def _response_doc(
    rec,
    cfg: ReaderConfig,
    rid: str,
    url: str | None,
    src: str,
    meta: dict,
    on_error: OnError,
    path: str,
    where: str,
    stats: Counter[str],
) -> Document | None:
    if not rec.is_http:
        on_error(path, where, "response record without HTTP headers")
        return None
    status = rec.http_headers.status_code
    if status and not 200 <= status < 300:
        stats["skipped.http_status"] += 1
        return None
    ctype = (rec.http_content_type or "").lower()
    if ctype and cfg.html_only and ctype not in HTML_TYPES:  # skip before reading the body
        stats["skipped.non_html"] += 1
        return None
    body = rec.reader.read(cfg.max_record_bytes + 1)
    if len(body) < rec.content_length:
        on_error(path, where, f"truncated record: {len(body)} of {rec.content_length} payload bytes")
        stats["errors.truncated"] += 1
        return None
    if not ctype:
        ctype = "text/html" if re.search(rb"<(!doctype\s+html|html|head|body)\b", body[:2048], re.I) else ""
    if cfg.html_only and ctype not in HTML_TYPES:
        stats["skipped.non_html"] += 1
        return None
    headers = rec.http_headers
    body = _undo_transfer_encoding(body, headers.get("Transfer-Encoding"))
    body = _undo_content_encoding(body, headers.get("Content-Encoding"), cfg.max_record_bytes)
    if body is None:
        on_error(path, where, "body larger than max_record_bytes after decompression")
        return None
    return _html_doc(body, rec.http_charset, rid, url, src, meta, on_error, path, where, stats)


def _html_doc(
    body: bytes,
    charset: str | None,
    rid: str,
    url: str | None,
    src: str,
    meta: dict,
    on_error: OnError,
    path: str,
    where: str,
    stats: Counter[str],
) -> Document | None:
    if not body.strip():
        stats["skipped.empty"] += 1
        return None
    if _looks_binary(body):
        on_error(path, where, "binary body labelled as HTML")
        stats["skipped.binary"] += 1
        return None
    doc = Document(id=rid, text=decode_html(body, charset), url=url, source=src, metadata=meta)
    doc.cache["html"] = True
    return doc


def _undo_transfer_encoding(body: bytes, te: str | None) -> bytes:
    """Undo `Transfer-Encoding: chunked` (RFC 9112 §7.1); keep the bytes when they are not chunked.

    Crawlers often store the de-chunked body but keep the header, so a body that does not parse
    as chunks is taken as it is.
    """
    if not te or "chunked" not in te.lower():
        return body
    out, pos = bytearray(), 0
    while True:
        eol = body.find(b"\r\n", pos)
        if eol < 0:
            return body
        size_field = body[pos:eol].split(b";", 1)[0].strip()
        try:
            size = int(size_field, 16)
        except ValueError:
            return body
        if size == 0:
            return bytes(out)
        start = eol + 2
        if start + size > len(body):
            return body
        out += body[start : start + size]
        pos = start + size + 2


def _undo_content_encoding(body: bytes, ce: str | None, limit: int) -> bytes | None:
    """Decompress gzip/deflate bodies, bounded by `limit`; bodies not really compressed pass through."""
    if not ce:
        return body
    ce = ce.lower()
    if "gzip" in ce and body[:2] == b"\x1f\x8b":
        wbits = 31
    elif "deflate" in ce and body[:1] in (b"\x78", b"\x58", b"\x68", b"\x08"):
        wbits = 15
    else:
        return body
    d = zlib.decompressobj(wbits)
    try:
        out = d.decompress(body, limit + 1)
    except zlib.error:
        return body
    return None if len(out) > limit else out


# --------------------------------------------------------------------------- skipped bytes


class _GapChecker:
    """Finds bytes between two records that the parser skipped, and says what they were.

    fastwarc in quirks mode resynchronises on the next `WARC/` line when a record is malformed,
    so a record without a version line (cc_net's sample WET) or a Content-Length that lies
    would vanish without a word. After each record we re-read its framing: header block,
    `Content-Length` bytes, then only blank lines may come before the next record. Works on
    uncompressed files and, with `warc_check_gaps = "all"`, on gzip-per-record files (one member
    per record, as Common Crawl writes them) at the price of a second decompression; a
    whole-file gzip has no record offsets and is not checked. Truncated records are caught
    without it: their payload is shorter than their Content-Length.
    """

    def __init__(self, path: Path, gzip_members: bool):
        self.path = path
        self.mode = self._mode(path)
        if self.mode == "members" and not gzip_members:
            self.mode = None
        self.size = path.stat().st_size

    @staticmethod
    def _mode(path: Path) -> str | None:
        with open(path, "rb") as f:
            head = f.read(1 << 20)
        if head[:2] != b"\x1f\x8b":
            return "plain"
        d = zlib.decompressobj(31)
        try:
            d.decompress(head, 64 << 20)
        except zlib.error:
            return None
        return "members" if d.eof and d.unused_data else None

    def report(
        self, prev: tuple[int, int] | None, next_pos: int | None, on_error: OnError, stats: Counter[str]
    ) -> None:
        if self.mode is None:
            return
        end = self.size if next_pos is None else next_pos
        if prev is None:
            start, length = 0, None
        else:
            start, length = prev
        if end <= start:
            return
        at, junk = self._junk(start, end, length)
        if junk:
            first_line = junk.split(b"\n", 1)[0][:80].decode("utf-8", "replace").strip()
            where = f"offset {at}" if self.mode == "plain" else f"gzip member at offset {start}"
            on_error(
                str(self.path),
                where,
                f"{len(junk)} bytes skipped between records: not a valid record "
                f"(no WARC version line, or a wrong Content-Length); first line: {first_line!r}",
            )
            stats["errors.skipped_bytes"] += 1

    def _region(self, start: int, end: int, limit: int) -> bytes:
        with open(self.path, "rb") as f:
            f.seek(start)
            raw = f.read(min(end - start, limit if self.mode == "plain" else end - start))
        if self.mode == "plain":
            return raw
        out = bytearray()
        while raw and len(out) <= limit:
            d = zlib.decompressobj(31)
            try:
                out += d.decompress(raw, limit + 1 - len(out))
            except zlib.error:
                break
            raw = d.unused_data
        return bytes(out)

    def _junk(self, start: int, end: int, length: int | None) -> tuple[int, bytes]:
        """(file offset, bytes) of what follows the record starting at `start`, up to `end`."""
        if length is None:  # bytes before the first record
            return start, self._region(start, end, 1 << 16).strip()
        if self.mode == "plain":  # read the header block, then only the tail after the content
            m = _HEADER_END.search(self._region(start, end, 1 << 16))
            if not m:
                return start, b""
            tail = start + m.end() + length
            if tail >= end:
                return tail, b""
            raw = self._region(tail, end, 1 << 16)
            return tail + len(raw) - len(raw.lstrip()), raw.strip()
        data = self._region(start, end, length + (1 << 20))
        m = _HEADER_END.search(data, 0, 1 << 20)
        return start, (data[m.end() + length :].strip() if m else b"")


# --------------------------------------------------------------------------- ARC via warcio


def _is_arc(path: Path) -> bool:
    import gzip

    try:
        with gzip.open(path, "rb") if path.name.lower().endswith(".gz") else open(path, "rb") as f:
            return f.read(16).startswith(b"filedesc://")
    except (OSError, EOFError):
        return False


def _read_arc(
    path: Path, cfg: ReaderConfig, on_error: OnError, src: str, stats: Counter[str]
) -> Iterator[Document]:
    """Legacy ARC (fastwarc cannot read it): warcio converts each record to a WARC response.

    warcio invents a random WARC-Record-ID for converted records, so the id is
    `stable_id(source, "record N")` instead (N counts records from 0; asking warcio for the byte
    offset before reading the body empties the body).
    """
    from warcio.archiveiterator import ArchiveIterator
    from warcio.exceptions import ArchiveLoadFailed

    offset = -1
    try:
        with open(path, "rb") as fh:
            for offset, rec in enumerate(ArchiveIterator(fh, arc2warc=True)):
                stats[f"records.{rec.rec_type}"] += 1
                doc = _warcio_doc(rec, offset, cfg, on_error, src, stats, str(path))
                if doc is not None:
                    stats["documents"] += 1
                    yield doc
    except (ArchiveLoadFailed, OSError, EOFError, zlib.error, ValueError) as e:
        on_error(str(path), f"record {offset + 1}", f"unreadable ARC/WARC data: {e}")


def _read_bounded(stream, limit: int) -> bytes:
    """Read up to `limit` bytes in chunks (warcio's decoding streams return short reads)."""
    out = bytearray()
    while len(out) < limit:
        part = stream.read(min(1 << 16, limit - len(out)))
        if not part:
            break
        out += part
    return bytes(out)


def _warcio_doc(
    rec, offset: int, cfg: ReaderConfig, on_error: OnError, src: str, stats: Counter[str], path: str
) -> Document | None:
    if rec.rec_type != "response" or rec.http_headers is None:
        return None
    where = f"record {offset}"
    status = rec.http_headers.get_statuscode()
    if status and status.isdigit() and not 200 <= int(status) < 300:
        stats["skipped.http_status"] += 1
        return None
    ctype = (rec.http_headers.get_header("Content-Type") or "").split(";")[0].strip().lower()
    if cfg.html_only and ctype not in HTML_TYPES:
        stats["skipped.non_html"] += 1
        return None
    body = _read_bounded(rec.content_stream(), cfg.max_record_bytes + 1)
    if len(body) > cfg.max_record_bytes:
        on_error(path, where, f"record larger than max_record_bytes={cfg.max_record_bytes}")
        return None
    m = re.search(r"charset=([^;\s]+)", rec.http_headers.get_header("Content-Type") or "", re.I)
    url = clean_url(rec.rec_headers.get_header("WARC-Target-URI"))
    return _html_doc(
        body, m.group(1) if m else None, stable_id(src, where), url, src, {}, on_error, path, where, stats
    )
