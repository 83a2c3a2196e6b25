"""WARC framing, read again beside the parser: skipped bytes and records that overrun (for warc.py).

fastwarc in quirks mode resynchronises silently on the next `WARC/` line when a record is
malformed, and follows a record's claimed Content-Length wherever it leads. This module owns the
two checks that make those cases visible and recoverable:

- `GapChecker`: after each record, bytes between it and the next that are not blank lines (a
  record without a version line, a Content-Length that lies short) are reported with their offset;
- `resync`: a record whose claimed Content-Length overruns its gzip member (or, plain, the end of
  the file or into the next record) swallowed the records after it; reading restarts at the next
  record.

gzip members are inflated 1 MiB at a time here: a claimed length never sets how much is held.
"""

from __future__ import annotations

import functools
import re
import zlib
from collections import Counter
from pathlib import Path

from pretrain.curate.readers import OnError

HEADER_END = re.compile(rb"\r?\n\r?\n")
ID_LINE = re.compile(rb"(?im)^WARC-Record-ID:[ \t]*([^\r\n]*?)[ \t]*\r?$")  # its value: group 1


# --------------------------------------------------------------------------- resynchronisation

# A WARC record starts with a version line; in quirks mode fastwarc accepts WARC/0.18 to WARC/1.1.
def _version_line(buf: bytes, start: int) -> int | None:
    """Offset of the first "WARC/<digit>" after a newline at or after `start` in `buf`. A plain
    find: the regex for it took 33 ms per MiB of spaces (5 s for a 100 MiB record)."""
    i = buf.find(b"\nWARC/", start)
    while i >= 0 and not buf[i + 6 : i + 7].isdigit():
        i = buf.find(b"\nWARC/", i + 1)
    return None if i < 0 or i + 7 > len(buf) else i + 1


def layout(path: Path) -> str | None:
    """"plain", "members" (gzip per record: a record can be found by its member) or None (one gzip)."""
    st = path.stat()  # the reader and its gap check both ask
    return _layout(str(path), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=4)
def _layout(path: str, _size: int, _mtime: int) -> str | None:
    with open(path, "rb") as f:
        data = f.read(1 << 20)
    if data[:2] != b"\x1f\x8b":
        return "plain"
    d, out = zlib.decompressobj(31), 0
    try:  # the first member, up to 64 MiB, inflated 1 MiB at a time (a bomb's first MiB: 1 GB)
        while data and not d.eof and out <= 64 << 20:
            out += len(d.decompress(data, 1 << 20))
            data = d.unconsumed_tail
    except zlib.error:
        return None
    return "members" if d.eof and d.unused_data else None


# `resync`'s answer for "nothing after this record can be reached without inflating it".
STOP = -1


def resync(path: Path, kind: str | None, pos: int, length: int, on_error: OnError,
           stats: Counter[str], rid: str | None = None, cap: int | None = None,
           max_skip: int | None = None, after: int = 0, named: int = 0) -> int | None:
    """Where the record after the one at `pos` starts, when that record's claimed `length` overruns
    its gzip member (plain: the end of the file, the next version line being where to resume; one
    gzip stream: the end of the file, the offset being in the decompressed stream).

    `cap` (for a record already known to be over max_record_bytes): at most this many bytes of it
    are inflated. A gzip member holding more resumes at the next member, found in the compressed
    bytes; in one gzip stream, a claim over `max_skip` ends the file (`STOP`): the parser would
    inflate all of it to reach the next record. `after` (one gzip stream): the decompressed offset
    reading started from; the record is looked for past it (an id written twice sent reading back
    to the first, for good), and past `named` records with an id (the parser's count from there:
    an earlier record with the same id sent reading back to the records after it, read twice).
    """
    if kind == "members":
        member = _member(path, pos, cap)
        if member is None:
            return None
        if member is TOO_BIG:
            return _past_big_member(path, pos, on_error)
        end, size, header, _ = member
        if header is None or header + length <= size or end >= path.stat().st_size:
            return None
        what = f"its gzip member ({size - header} bytes of content)"
    elif kind == "plain":
        found = _plain_overrun(path, pos, length)
        if found is None:
            return None
        end, what = found
    elif rid:  # one gzip stream: no member to find, so the record is found by its id, inflated
        big = max_skip is not None and length > max_skip
        found = _in_whole_gzip(path, rid, length, cap if big else None, after, named)
        if found is None and big:
            on_error(str(path), f"record {rid}", f"record of {length} bytes in a file that is one gzip "
                     f"stream: the records after it are not read (reaching them means inflating it; "
                     f"over warc_max_skip_bytes={max_skip})")
            stats["skipped.rest_of_file"] += 1
            return STOP
        if found is None:
            return None
        pos, end = found
        on_error(str(path), f"record {rid}", f"claimed Content-Length {length} overruns the end of the "
                 f"file: resynchronised at the next record (decompressed offset {end}), {end - pos} bytes "
                 "of this record skipped")
        stats["errors.resynchronised"] += 1
        return end
    else:
        return None
    on_error(str(path), f"offset {pos}", f"claimed Content-Length {length} overruns {what}: "
             f"resynchronised at the next record (offset {end}), {end - pos} bytes of this record skipped")
    stats["errors.resynchronised"] += 1
    return end


def _plain_overrun(path: Path, pos: int, length: int) -> tuple[int, str] | None:
    """(offset of the next record, what the claim overran) when the record at `pos` of a plain
    file claims more than it has, else None. Two lies are sure: a claim past the end of the file,
    and one whose end is not followed by a record start (or the end of the file) while a record
    start, with its own WARC-Type header, lies inside the claimed block: the claim ran into the
    next record. A true length never triggers the scan (its end is followed by the next record)."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        f.seek(pos)
        head = f.read(1 << 13)
        m = HEADER_END.search(head) or HEADER_END.search(head + f.read(1 << 16))
        if m is None:
            return None
        claimed_end = pos + m.end() + length
        if claimed_end >= size:
            end = _next_version_line(path, pos + 1)
            return None if end is None or claimed_end == size else (end, "the end of the file")
        f.seek(claimed_end)
        after = f.read(64).lstrip(b"\r\n")
    if not after or after.startswith(b"WARC/"):
        return None
    end = _next_record_start(path, pos + m.end(), claimed_end)
    return None if end is None else (end, "the next record")


# A record start inside a block: the blank line that ends a record, a version line, then a header
# block that names the record's type (a payload quoting "WARC/1.0" rarely has all three).
_RECORD_START = re.compile(rb"\r?\n\r?\n(WARC/\d\.\d+)\r?\n")
_WARC_TYPE = re.compile(rb"\nWARC-Type:", re.IGNORECASE)


def _next_record_start(path: Path, start: int, stop: int) -> int | None:
    """Offset of the first record start in [start, stop) of a plain file, read 1 MiB at a time."""
    with open(path, "rb") as f:
        at, tail = start, b""
        while at < stop:
            f.seek(at)
            data = f.read(min(1 << 20, stop - at))
            if not data:
                return None
            buf, base = tail + data, at - len(tail)
            for m in _RECORD_START.finditer(buf):
                if _is_record_header(f, base + m.start(1)):
                    return base + m.start(1)
            tail, at = buf[-16:], at + len(data)
    return None


def _is_record_header(f, offset: int) -> bool:
    f.seek(offset)
    block = f.read(1 << 13)
    m = HEADER_END.search(block)
    return m is not None and _WARC_TYPE.search(block, 0, m.start()) is not None


def _in_whole_gzip(path: Path, rid: str, length: int, cap: int | None = None,
                   after: int = 0, named: int = 0) -> tuple[int, int] | None:
    """(decompressed offset of the record whose id is `rid`, of the next version line after its
    header), when its claimed `length` runs past the end of the file; else None. The record is the
    first named `rid` at or after the `named`-th WARC-Record-ID line past `after` (the parser read
    `named` records with an id from there before it): an earlier record with the same id is passed
    (resuming after it yielded the records between twice). One streamed pass, 1 MiB at a time,
    stopped as soon as the claim is seen to fit, or `cap` bytes past its header."""
    if cap is not None:
        length = min(length, cap)
    import gzip

    want, buf, base, done, seen = rid.strip().encode("utf-8", "surrogateescape"), b"", 0, after, 0
    start = header_end = nxt = None
    try:
        with gzip.open(path, "rb") as f:
            while True:
                data = f.read(1 << 20)
                if not data:
                    break
                buf += data
                lim = buf.rfind(b"\n") + 1  # whole lines end there
                if len(buf) - lim > 1 << 16:  # a line that long is no header line: passed over
                    lim = len(buf)
                for m in ID_LINE.finditer(buf, max(done - base, 0), lim) if start is None else ():
                    if seen >= named and m[1] == want:
                        v = buf.rfind(b"WARC/", 0, m.start())
                        start = base + (v if v >= 0 else m.start())
                        break
                    seen += 1
                done = max(done, base + lim)
                if start is not None and header_end is None and (m := HEADER_END.search(buf, start - base)):
                    header_end = base + m.end()
                if header_end is not None and nxt is None:
                    i = _version_line(buf, max(header_end - base - 1, 1))
                    nxt = None if i is None else base + i
                if header_end is not None and base + len(buf) > header_end + length:
                    return None  # the claim fits in the file: not an overrun
                # keep only what a match across two chunks needs (memory stays ~2 MiB)
                if start is None:  # the line not yet searched, and room to find a version line
                    keep = min(len(buf), len(buf) - lim + (1 << 13))
                elif header_end is None:
                    keep = base + len(buf) - start  # the header block being read
                    if keep > 1 << 20:
                        return None  # not a WARC header
                else:
                    keep = 16 if nxt is None else 0
                base, buf = base + len(buf) - keep, buf[len(buf) - keep:]
    except (OSError, EOFError, zlib.error):
        return None
    return (start, nxt) if header_end is not None and nxt is not None else None


_Member = tuple[int, int, "int | None", bytes]
TOO_BIG = (-1, -1, None, b"")  # `_member`'s answer for a member that inflates past its cap


def _member(path: Path, start: int, cap: int | None = None) -> _Member | None:
    """(offset where the gzip member at `start` ends, its decompressed size, its WARC header length,
    its last 64 KiB); `TOO_BIG` once more than `cap` bytes came out. Streamed 1 MiB at a time:
    neither a claimed length nor a bomb sets what is held.
    """
    st = path.stat()  # the gap check and the overrun check ask about the same member: inflate it once
    return _member_cached(str(path), start, st.st_size, st.st_mtime_ns, cap)


@functools.lru_cache(maxsize=4)
def _member_cached(path: str, start: int, _size: int, _mtime: int, cap: int | None) -> _Member | None:
    d = zlib.decompressobj(31)
    size, head, tail, at = 0, b"", b"", start
    with open(path, "rb") as f:
        f.seek(start)
        while not d.eof:
            data = f.read(1 << 20)
            if not data:
                return None
            at += len(data)
            while data and not d.eof:
                try:
                    out = d.decompress(data, 1 << 20)
                except zlib.error:
                    return None
                size += len(out)
                if cap is not None and size > cap:
                    return TOO_BIG
                if len(head) < 1 << 16:
                    head += out[: (1 << 16) - len(head)]
                tail = (tail + out)[-(1 << 16):]
                data = d.unconsumed_tail
    m = HEADER_END.search(head)  # no header: the member continues a record split across two
    header = m.end() if m and head.lstrip(b"\r\n").startswith(b"WARC/") else None
    return at - len(d.unused_data), size, header, tail


def _past_big_member(path: Path, pos: int, on_error: OnError) -> int:
    """Offset of the gzip member after the one at `pos`, which inflates past `cap` (the file's end
    when there is none): the parser would inflate all of it (a 4 GiB record in 4 MB: 42 s)."""
    end = next_member(path, pos + 1)  # not reported again: the record was, as too large
    if end == GAVE_UP:
        on_error(str(path), f"offset {pos}", f"no WARC gzip member found after the too large record in "
                 f"{MAX_CANDIDATES} gzip headers that were not one: the rest of the file is skipped")
    return path.stat().st_size if end is None or end == GAVE_UP else end


MAX_CANDIDATES = 4096  # gzip-looking headers tried per search (~5 us each): honest files have none
GAVE_UP = -2


def next_member(path: Path, start: int) -> int | None:
    """Offset of the first gzip member at or after `start` that holds a WARC record, found in the
    compressed bytes (a member header, then a version line when inflated), read 1 MiB at a time;
    `GAVE_UP` after `MAX_CANDIDATES` headers that were not one (a file made of them took 2.5 s per
    MB). A member crafted inside another's stored block is found too: a record like any other."""
    tried = 0
    with open(path, "rb") as f:
        at, tail = start, b""
        while True:
            f.seek(at)
            data = f.read(1 << 20)
            if not data:
                return None
            buf, base = tail + data, at - len(tail)
            i = buf.find(b"\x1f\x8b\x08")
            while i >= 0:
                head = buf[i : i + 4096]
                if len(head) < 4096:  # near the end of this piece: the member's start from the file
                    f.seek(base + i)
                    head = f.read(4096)
                if _starts_warc_member(head):
                    return base + i
                tried += 1
                if tried >= MAX_CANDIDATES:
                    return GAVE_UP
                i = buf.find(b"\x1f\x8b\x08", i + 1)
            tail, at = buf[-2:], at + len(data)


def _starts_warc_member(head: bytes) -> bool:
    try:
        return zlib.decompressobj(31).decompress(head, 16).startswith(b"WARC/")
    except zlib.error:
        return False


def _next_version_line(path: Path, start: int) -> int | None:
    """Offset of the first WARC version line after `start` (a plain file), read 1 MiB at a time."""
    with open(path, "rb") as f:
        f.seek(start)
        at, tail = start, b""
        while True:
            data = f.read(1 << 20)
            if not data:
                return None
            buf = tail + data
            i = _version_line(buf, 1)
            if i is not None:
                return at - len(tail) + i
            tail = buf[-16:]
            at += len(data)


# --------------------------------------------------------------------------- skipped bytes


class GapChecker:
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

    def __init__(self, path: Path, gzip_members: bool, cap: int | None = None):
        self.path, self.cap = path, cap  # a member past `cap` bytes was reported as too large
        self.mode = layout(path)
        if self.mode == "members" and not gzip_members:
            self.mode = None
        self.size = path.stat().st_size

    def report(
        self, prev: tuple[int, int] | None, next_pos: int | None, on_error: OnError, stats: Counter[str],
        several: bool = False,
    ) -> None:
        """`several`: the previous record shared its gzip member with others (the member's tail is
        theirs, not junk; a lie among them is found by warc.py's `_lie_in_member`). Nor is such a
        member inflating past `cap` junk: 3,000 records of 15 kB in one member were said to be
        "more than 9437184 bytes ... not a valid record" under every window size (session 11)."""
        if self.mode is None:
            return
        end = self.size if next_pos is None else next_pos
        if prev is None:
            start, length = 0, None
        else:
            start, length = prev
        if end <= start:
            return
        if not several and self._junk_over_cap(start, length):
            on_error(str(self.path), f"gzip member at offset {start}", f"more than {self.cap} bytes in the "
                     f"gzip member of a record of {length} bytes: the rest is not a valid record; skipped")
            stats["errors.skipped_bytes"] += 1
            return
        at, junk = self._junk(start, end, length, several)
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

    def _junk_over_cap(self, start: int, length: int | None) -> bool:
        """A record small enough to read whose gzip member inflates past `cap`: junk after it (a
        record too large was reported as such; its member is not inflated further)."""
        if self.mode != "members" or self.cap is None or length is None or length > self.cap - (1 << 20):
            return False
        return _member(self.path, start, self.cap) is TOO_BIG

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

    def _junk(self, start: int, end: int, length: int | None, several: bool = False) -> tuple[int, bytes]:
        """(file offset, bytes) of what follows the record starting at `start`, up to `end`."""
        if length is None:  # bytes before the first record
            return start, self._region(start, end, 1 << 16).strip()
        if self.mode == "plain":  # read the header block, then only the tail after the content
            m = HEADER_END.search(self._region(start, end, 1 << 16))
            if not m:
                return start, b""
            tail = start + m.end() + length
            if tail >= end:
                return tail, b""
            raw = self._region(tail, end, 1 << 16)
            return tail + len(raw) - len(raw.lstrip()), raw.strip()
        # Members: the record's own member is streamed (a claimed length never sets how much is
        # inflated); what follows its content there, and any whole member before `end`, is junk.
        # A member of several records is inflated to its end (streamed, bounded memory): past `cap`
        # it is their bytes, and a junk tail that swallowed the next member's record is found after it
        member = _member(self.path, start, None if several else self.cap)
        if member is None or member is TOO_BIG or member[2] is None:
            return start, b""
        stop, size, header, tail = member
        extra = size - header - length
        own = tail[len(tail) - min(extra, len(tail)):] if extra > 0 and not several else b""
        rest = self._region(stop, end, 1 << 16) if stop < end else b""
        return start, (own + rest).strip()
