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
record the framing is re-read (`warc_framing.GapChecker`) so that nothing is dropped silently.

A Content-Length that claims more than the record has would make the parser swallow the records
after it. When that record comes out truncated (the claim ran to the end of the file), or, with
`warc_check_gaps = "all"`, whenever it overruns its own gzip member, reading restarts at the next
record (the end of its member; in a plain file, the next version line) and says how many bytes of
the lying record were skipped. Members are inflated 1 MiB at a time for these checks: a claimed
length never decides how much is held in memory.
"""

from __future__ import annotations

import re
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from pretrain.curate.document import Document, stable_id
from pretrain.curate.readers import RATIO_SLACK, OnError, ReaderConfig, _looks_binary, decode_html
from pretrain.curate.warc_framing import (
    GAVE_UP,
    STOP,
    GapChecker,
    _next_version_line,
    layout,
    next_member,
    resync,
)
from pretrain.curate.warc_members import Member, lie_in_member, unreadable_in_member, where_in

HTML_TYPES = ("text/html", "application/xhtml+xml")
_RAN_ON = re.compile(rb"\n\r?\nWARC/\d[.\d]*\r?\n[A-Za-z-]+:")  # a record start, in a payload
SKIP_TAIL = 1 << 20  # inflated past max_record_bytes to see a too-large record's member end


class _Inflated:
    """The bytes of payload one file has handed on (after its gzip members and each body's own
    `Content-Encoding`), held to max_ratio times the file (+ RATIO_SLACK) and max_file_bytes.
    A member inflates at most ~1030x, but a gzip body inside a gzip member multiplies the two: a
    17 KB file of 40 records read as 320 MiB of HTML (~19,000x), so 1 MB would be ~19 GB; bodies
    skipped as binary after decoding cost the same inflating. Counted per file, across both layers."""

    def __init__(self, path: Path, cfg: ReaderConfig):
        self.cfg, self.total, self.over = cfg, 0, False
        self.limit = cfg.max_file_bytes
        if cfg.max_ratio:
            self.limit = min(self.limit, int(cfg.max_ratio * max(path.stat().st_size, 1)) + RATIO_SLACK)

    def add(self, n: int) -> bool:
        """Count `n` bytes; False once the file has handed on more than its bound."""
        self.total += n
        self.over = self.over or self.total > self.limit
        return not self.over

    def why(self) -> str:
        why = (f"more than max_file_bytes={self.cfg.max_file_bytes} of payloads"
               if self.total > self.cfg.max_file_bytes else
               f"payloads expand more than max_ratio={self.cfg.max_ratio:g} times the file")
        return f"{why} (gzip bodies inside gzip members: a compression bomb?): the rest of the file skipped"


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
    scan = _Scan(path, cfg, on_error, stats)
    try:
        yield from _read_all(scan, 0, cfg, on_error, src, stats)
    finally:
        scan.forget()
    if scan.first and not scan.stop:
        if _is_arc(path):
            yield from _read_arc(path, cfg, on_error, src, stats)
        else:
            on_error(str(path), "offset 0", "not a WARC file (no record found)")


def _read_all(
    scan: _Scan, start: int | None, cfg: ReaderConfig, on_error: OnError, src: str, stats: Counter[str]
) -> Iterator[Document]:
    while start is not None:  # a resynchronisation restarts the parser at the next record
        start = yield from _read_from(start, scan, cfg, on_error, src, stats)
        if scan.stop:
            return
    if scan.gaps is not None and scan.prev is not None:
        _gap(scan, None, on_error, stats)


class _Scan:
    """What reading one WARC file has seen so far, across resynchronisations."""

    def __init__(self, path: Path, cfg: ReaderConfig, on_error: OnError, stats: Counter[str]):
        self.path, self.layout = path, layout(path)
        cap = cfg.max_record_bytes + SKIP_TAIL
        gaps = cfg.warc_check_gaps
        self.gaps = GapChecker(path, gaps == "all", cap) if gaps != "off" else None
        self.check_members = cfg.warc_check_gaps == "all" and self.layout == "members"
        self.prev: tuple[int, int] | None = None  # (stream_pos, content_length) of the previous record
        self.first, self.stop, self.resumed, self.at = True, False, False, 0
        self.cap = cap  # how much of a record over max_record_bytes is inflated to find its end
        self.prev_id: str | None = None  # the previous record's WARC-Record-ID
        # records with a WARC-Record-ID read before the last one, in its gzip member (one stream:
        # since reading started): a bad record is looked up by id at or after as many id lines, so
        # an earlier record with the same id never sends reading back (each record comes out once)
        self.named, self.k = 0, 0
        self.in_member = 0  # records before this one in its gzip member (fastwarc gives them one offset)
        self.limit, self.member = cfg.warc_max_skip_bytes, None  # an inflated member (warc_members)
        self.inflated = _Inflated(path, cfg)  # a member's sub-scan shares its file's (_rest_of_member)

    def member_at(self, pos: int) -> Member:
        if self.member is None or self.member.pos != pos:
            self.forget()
            self.member = Member(self.path, pos, self.limit)
        return self.member

    def forget(self) -> None:
        if self.member is not None:
            self.member.close()
            self.member = None


def _gap(scan: _Scan, next_pos: int | None, on_error: OnError, stats: Counter[str]) -> None:
    """The gap check after the previous record (`warc_framing.GapChecker`) and, under `"all"`, once
    a gzip member holding several records is left, the bytes after its last record: the gap check
    cannot judge them (the member's tail is the other records'), its inflated window can (junk at
    a member's end went unsaid: session 11)."""
    several = scan.in_member > 0
    m, prev = scan.member, scan.prev
    if several and scan.check_members and m is not None and prev is not None and next_pos != prev[0] \
            and m.pos == prev[0] and m.last[:2] == (scan.prev_id, scan.k):
        at, junk = m.tail()
        if junk:
            first = junk.split(b"\n", 1)[0][:80].decode("utf-8", "replace").strip()
            on_error(str(scan.path), where_in(m.pos, f"offset {at}"), f"{len(junk)} bytes skipped between "
                     f"records: not a valid record (no WARC version line, or a wrong Content-Length); first "
                     f"line: {first!r}")
            stats["errors.skipped_bytes"] += 1
    scan.gaps.report(prev, next_pos, on_error, stats, several=several)


def _read_from(
    start: int, scan: _Scan, cfg: ReaderConfig, on_error: OnError, src: str, stats: Counter[str]
) -> Iterator[Document]:
    """Records from byte `start` on; returns where to resume when a record overran, else None."""
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    path, scan.at, scan.named = scan.path, start, 0
    part = None  # (an inflated member, where in it reading goes on) after a bad record inside it
    try:
        with _open_at(path, start, scan.layout) as f:
            it = ArchiveIterator(f, record_types=WarcRecordType.any_type, parse_http=True,
                                 quirks_mode=True, auto_decode="none")
            for rec in it:
                rtype = str(rec.record_type).rsplit(".", 1)[-1]
                if scan.first and rtype in ("unknown", "no_type"):
                    on_error(str(path), "offset 0", "not a WARC file (no WARC version line and record type)")
                    scan.stop = True
                    return None
                if scan.gaps is not None and not scan.resumed:
                    _gap(scan, rec.stream_pos, on_error, stats)
                pos, length = rec.stream_pos, _warc_length(rec)
                same = scan.layout == "members" and not scan.resumed and scan.prev and scan.prev[0] == pos
                scan.in_member = scan.in_member + 1 if same else 0
                rid = rec.headers.get("WARC-Record-ID")
                if scan.layout == "members" and not same:  # a new member: its own count
                    scan.named = 0
                scan.k, scan.named = scan.named, scan.named + bool(rid)
                scan.prev, scan.prev_id, scan.first, scan.resumed = (pos, length), rid, False, False
                stats[f"records.{rtype}"] += 1
                before = (stats["errors.truncated"], stats["skipped.too_large"])
                said: list[tuple] = []  # the record's reports, held until resync has judged its length
                where = _where(scan, pos, rid)
                doc = _fastwarc_doc(rec, rtype, cfg, _held(said), src, stats, str(path), where,
                                    _look_for_next(scan), scan.inflated)
                if scan.inflated.over:
                    on_error(str(path), where, scan.inflated.why())
                    stats["errors.expands"] += 1
                    scan.stop = True
                    return None
                resume, part, said = _judge(scan, rec, doc, length, before, cfg, stats, said)
                for e in said:
                    on_error(*e)
                if doc is not None and resume is None and part is None:  # an overrun's payload ends in junk
                    stats["documents"] += 1
                    yield doc
                if part is not None:
                    break
                if resume == STOP:
                    scan.stop = True
                    return None
                if resume is not None:
                    scan.resumed = True
                    return resume
    except (OSError, ValueError, EOFError, zlib.error) as e:
        part = unreadable_in_member(scan, start, e, on_error, stats)
        if part is None:
            return _unreadable(scan, start, e, on_error, stats)
    if part is not None:  # outside the parser's try: the rest of the member reports its own errors
        return (yield from _rest_of_member(scan, *part, cfg, on_error, src, stats))
    return None


def _judge(
    scan: _Scan, rec, doc: Document | None, length: int, before: tuple[int, int], cfg: ReaderConfig,
    stats: Counter[str], said: list[tuple],
) -> tuple[int | None, tuple[Member, int] | None, list[tuple]]:
    """(where to resume, the rest of a member to read, the record's reports) once the record's
    claimed length is checked against its framing: always in a plain file and under
    `warc_check_gaps = "all"`, else when it came out truncated or too large, or its payload holds
    a record start (the claim may have run into the next record)."""
    too_large = stats["skipped.too_large"] > before[1]
    suspect = too_large or stats["errors.truncated"] > before[0]
    ran_on = doc is not None and doc.cache.pop("warc_ran_on", False)
    if not (suspect or ran_on or scan.check_members or scan.layout == "plain"):
        return None, None, said
    rid, pos = rec.headers.get("WARC-Record-ID"), rec.stream_pos
    claimed = length if _is_number(rec.headers.get("Content-Length")) else None
    framing: list[tuple] = []
    lies = stats["errors.resynchronised"]
    resume, part = None, lie_in_member(scan, pos, claimed, rid, too_large, suspect or ran_on, _held(framing),
                                       stats)
    if part is None:
        bound = (scan.cap, cfg.warc_max_skip_bytes) if too_large else (None, None)
        resume = resync(scan.path, scan.layout, pos, length, _held(framing), stats, rid, *bound,
                        after=scan.at if scan.layout is None else 0, named=scan.k)
    # a Content-Length that lied: its line names the lie and the bytes skipped; the payload's own
    # `truncated record` would count the one bad record twice
    return resume, part, framing if stats["errors.resynchronised"] > lies else said + framing


def _look_for_next(scan: _Scan) -> bool:
    """Whether to look for a record start inside a payload (its claimed length may have run into
    the next record): in a gzip member that holds several records (a later one of them, or one
    stream). Not in a record that has its member to itself (Common Crawl's files): searching every
    page's text made reading ../shared/data/warc a third slower; a claim there overruns into the
    next member, which `warc_check_gaps = "all"` checks."""
    return bool(scan.in_member) or scan.layout is None and scan.at == 0


def _is_number(value: str | None) -> bool:
    return value is not None and value.strip().isdigit()


def _unreadable(scan: _Scan, start: int, e: Exception, on_error: OnError, stats: Counter[str]) -> int | None:
    """Where reading resumes after a record the parser refused, said with its offset; None (the
    file ends there, said too) when no later record can be found."""
    bad, resume = _past_unreadable(scan, start)
    if resume is not None:
        # the offset goes in the record field, and " of N bytes" is cut from the summary's kinds
        on_error(str(scan.path), f"offset {bad}", f"unreadable WARC record ({e}): a record of "
                 f"{resume - bad:,} bytes skipped, reading resumes at the next one")
        stats["errors.unreadable_record"] += 1
        scan.resumed = True
        return resume
    where = f"after offset {scan.prev[0]}" if scan.prev else "offset 0"
    on_error(str(scan.path), where, f"unreadable WARC data (truncated or corrupt): {e}")
    stats["errors.truncated"] += 1
    scan.stop = True
    return None


def _past_unreadable(scan: _Scan, start: int) -> tuple[int | None, int | None]:
    """(where the record the parser failed on starts, where the record after it starts) in a file
    of gzip members or a plain one; (None, None) when unknown (one gzip stream, or the end). A
    record with 32 KiB of headers (fastwarc's bound: "Maximum header length exceeded") ended the
    file there: one 40 kB record lost the ~40,000 after it in a Common Crawl file."""
    if scan.layout == "members":
        find = next_member
    elif scan.layout == "plain":
        find = _next_version_line
    else:
        return None, None
    after = scan.prev[0] if scan.prev and scan.prev[0] >= start else None
    bad = start if after is None else find(scan.path, after + 1 if find is next_member else after)
    if bad is None or bad < 0:
        return None, None
    resume = find(scan.path, bad + 1 if find is next_member else bad)
    return (bad, resume) if resume is not None and resume > max(bad, start) else (None, None)


def _where(scan: _Scan, pos: int, rid: str | None) -> str:
    """A record's place for error lines: its offset; in a gzip member holding several, which one
    of them; in one gzip stream read from its start (fastwarc's offsets then mean nothing), its id."""
    if scan.layout is None and scan.at == 0 and rid:
        return f"record {rid}"
    return f"offset {pos}" + (f", record {scan.in_member + 1} of its gzip member" if scan.in_member else "")


def _rest_of_member(
    scan: _Scan, member: Member, at: int | None, cfg: ReaderConfig, on_error: OnError, src: str,
    stats: Counter[str],
) -> Iterator[Document]:
    """The records of `member` from offset `at` of its window on, read as a plain WARC window after
    window (errors name the member and the decompressed offset); returns where reading goes on
    after the member."""
    def said(_p: str, where: object, why: str) -> None:
        on_error(str(scan.path), where_in(member.pos, where, member.base), why)

    while at is not None:
        sub = _Scan(member.file, cfg, said, stats)
        sub.first, sub.resumed = False, True  # what precedes `at` was judged already
        sub.inflated = scan.inflated
        try:
            yield from _read_all(sub, at, cfg, said, src, stats)
        finally:
            sub.forget()
        if sub.stop:
            scan.stop = True
            return None
        at = 0 if member.slide() else None  # a window ends at a record start: the next one is there
    # the member was judged here: neither the next record's nor the file's last gap check is its
    scan.resumed, scan.in_member, scan.prev = True, 0, None
    if not member.whole:
        on_error(str(scan.path), f"gzip member at offset {member.pos}", f"the rest of a gzip member holding "
                 f"several records is not read (truncated or corrupt gzip data, after {member.inflated:,} "
                 "bytes)")
        stats["errors.truncated"] += 1
        if scan.layout != "members":
            return None
        end = next_member(scan.path, member.pos + 1)
        return None if end is None or end == GAVE_UP else end
    return member.end if scan.layout == "members" and member.end < scan.path.stat().st_size else None


def _held(into: list) -> OnError:
    """An on_error that keeps the reports in `into`, to be said or dropped once a record is judged."""
    return lambda *e: into.append(e)


def _open_at(path: Path, start: int, kind: str | None):
    """The file at byte `start`; for one gzip stream resumed past 0, the decompressed stream there
    (fastwarc then reads plain WARC and reports decompressed offsets)."""
    import gzip

    f = gzip.open(path, "rb") if kind is None and start else open(path, "rb")
    f.seek(start)
    return f


def _warc_length(rec) -> int:
    """The record block's length from its header (`rec.content_length` drops parsed HTTP headers)."""
    try:
        return int(rec.headers.get("Content-Length") or rec.content_length)
    except ValueError:
        return rec.content_length


def _fastwarc_doc(
    rec, rtype: str, cfg: ReaderConfig, on_error: OnError, src: str, stats: Counter[str], path: str,
    where: str, look: bool = False, inflated: _Inflated | None = None,
) -> Document | None:
    """The record's Document, or None (counted or reported). `look`: mark a payload that holds a
    record start (`doc.cache["warc_ran_on"]`), searched in its raw bytes (a gzip body's text
    would not show it). `inflated`: the file's payload bytes so far (None: not counted); a record
    that passes its bound is not made into a Document."""
    declared = rec.headers.get("Content-Length")
    if declared is not None and not declared.strip().isdigit():
        on_error(path, where, "Content-Length is not a number: the record is skipped; it reads: "
                 f"{declared[:40]!r}")
        stats["errors.bad_content_length"] += 1
        return None
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
        if inflated is not None and not inflated.add(len(body)):
            return None
        if _looks_binary(body):
            on_error(path, where, "binary bytes in a WET conversion record")
            return None
        doc = Document(id=rid, text=bytes_to_str(body, "utf-8"), url=url, source=src, metadata=meta)
        return _mark_ran_on(doc, body, look)
    if rtype == "resource":
        ctype = (rec.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if ctype not in HTML_TYPES:
            stats["skipped.non_html"] += 1
            return None
        body = rec.reader.read(cfg.max_record_bytes + 1)
        if inflated is not None and not inflated.add(len(body)):
            return None
        doc = _html_doc(body, None, rid, url, src, meta, on_error, path, where, stats)
        return _mark_ran_on(doc, body, look)
    return _response_doc(rec, cfg, rid, url, src, meta, on_error, path, where, stats, look, inflated)


def _mark_ran_on(doc: Document | None, raw: bytes, look: bool) -> Document | None:
    if doc is not None and look and b"\nWARC/" in raw and _RAN_ON.search(raw) is not None:
        doc.cache["warc_ran_on"] = True
    return doc


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
    look: bool = False,
    inflated: _Inflated | None = None,
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
    headers, raw = rec.http_headers, body
    body = _undo_transfer_encoding(body, headers.get("Transfer-Encoding"))
    body = _undo_content_encoding(body, headers.get("Content-Encoding"), cfg.max_record_bytes)
    if body is None:
        on_error(path, where, "body larger than max_record_bytes after decompression")
        return None
    if inflated is not None and not inflated.add(len(body)):
        return None
    doc = _html_doc(body, rec.http_charset, rid, url, src, meta, on_error, path, where, stats)
    return _mark_ran_on(doc, raw, look)


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

    offset, inflated = -1, _Inflated(path, cfg)
    try:
        with open(path, "rb") as fh:
            for offset, rec in enumerate(ArchiveIterator(fh, arc2warc=True)):
                stats[f"records.{rec.rec_type}"] += 1
                doc = _warcio_doc(rec, offset, cfg, on_error, src, stats, str(path), inflated)
                if inflated.over:
                    on_error(str(path), f"record {offset}", inflated.why())
                    stats["errors.expands"] += 1
                    return
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
    rec, offset: int, cfg: ReaderConfig, on_error: OnError, src: str, stats: Counter[str], path: str,
    inflated: _Inflated,
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
    if not inflated.add(len(body)):
        return None
    m = re.search(r"charset=([^;\s]+)", rec.http_headers.get_header("Content-Type") or "", re.I)
    url = clean_url(rec.rec_headers.get_header("WARC-Target-URI"))
    return _html_doc(
        body, m.group(1) if m else None, stable_id(src, where), url, src, {}, on_error, path, where, stats
    )
