"""gzip members that hold several WARC records: where reading resumes after a bad one (for warc.py).

The standard puts one record in each gzip member, but some crawlers write several, and fastwarc
reads them (warcio refuses them). fastwarc gives every record of such a member the member's
offset, so a resynchronisation that jumps to the next member lost the good records after the bad
one. Here the member is inflated to a temporary plain file, 1 MiB at a time, through a window of
at most `warc_max_skip_bytes` that ends at a record start and slides forward; the bad record is
found in it by its WARC-Record-ID (or as the record after the last good one), and warc.py reads
the rest of the member from there as a plain WARC, window after window, with every check a plain
file gets. A bad record longer than the window is passed by streaming the member to the next
record start (a version line after a blank line, a header block naming WARC-Type and
WARC-Record-ID): memory stays ~2 MiB whatever the member holds (session 11: a member of 1 GB after
a lying record, 16 MB, 3.1 s, every record after it read). A whole-file gzip is one such member, at
offset 0.
"""

from __future__ import annotations

import itertools
import mmap
import os
import re
import tempfile
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from pretrain.curate.readers import OnError
from pretrain.curate.warc_framing import (
    _WARC_TYPE,
    HEADER_END,
    ID_LINE,
    TOO_BIG,
    _is_record_header,
    _member,
    _next_record_start,
    _next_version_line,
    _plain_overrun,
)

MAX_MISSES = 4
_RECORD_ID = re.compile(rb"\nWARC-Record-ID:", re.IGNORECASE)
_VERSION = re.compile(rb"WARC/\d\.\d+\r?\n")


def _starts(buf: bytes, lo: int, hi: int, step: int = 1) -> Iterator[int]:
    """Offsets in [lo, hi) of `buf` where a version line starts a line, forward (`step` 1) or
    backward (-1); the caller checks the header block after it. Found by `find` of "\nWARC/": a
    regex went at 30 ns a byte (30 s for a member of 1 GB of spaces). Not only after a blank line:
    junk before a record need not end with one."""
    i = buf.find(b"\nWARC/", max(lo - 1, 0), hi) if step > 0 else buf.rfind(b"\nWARC/", max(lo - 1, 0), hi)
    while i >= 0:
        if i + 1 >= lo and _VERSION.match(buf, i + 1):
            yield i + 1
        i = buf.find(b"\nWARC/", i + 1, hi) if step > 0 else buf.rfind(b"\nWARC/", max(lo - 1, 0), i)


def _file_chunks(f, start: int, stop: int, at: int) -> Iterator[tuple[int, bytes]]:
    """Bytes [start, stop) of the open file `f` (closed at the end), 1 MiB at a time, as
    (`at` + their offset from `start`, bytes)."""
    with f:
        f.seek(start)
        pos = start
        while pos < stop and (data := f.read(min(1 << 20, stop - pos))):
            yield at + pos - start, data
            pos += len(data)


class Member:
    """One gzip member of `path` at compressed offset `pos`, seen through a window: at most `limit`
    of its decompressed bytes, from decompressed offset `base` on, in a temporary plain file.

    A full window ends at the last record start in it (`cut`: the member goes on there), so that a
    plain read of it never sees a record cut short; `slide` moves the window forward (the bytes
    past the cut, copied aside to an unnamed file, then the inflation where it stopped: a member
    is inflated once however many windows it takes), and `next_record` streams past a bad
    record's bytes to the next record start, however far: memory stays ~2 MiB and the temporary
    files at most 2x `limit` bytes, whatever the member holds.
    `end`: the compressed offset after the member (known once it was inflated to its end);
    `full`: the window stopped at `limit` (the member may go on); `whole`: it reaches the member's
    end; `broken` (when not `full`): the member's compressed bytes are truncated or corrupt.
    """

    def __init__(self, path: Path, pos: int, limit: int):
        self.path, self.pos, self.limit = path, pos, limit
        self.base, self.size, self.end, self.whole, self.cut, self.full = 0, 0, pos, False, False, False
        self.eof, self.broken, self.inflated = False, False, 0
        self._rest: Iterator[tuple[int, bytes]] | None = None  # the member after a full window
        self.file, self.fd = Path(), None
        self.cursor = 0
        self.passed = 0  # WARC-Record-ID lines of the member before the cursor
        self.last_end: int | None = None  # where the last record judged here ended (its claim), in the member
        self._gap: tuple[int, bytes] = (-1, b"")  # the window's bytes after last_end, kept when it slid
        self.misses = 0  # records not found in it (an id written otherwise, or none such)
        self.told = False  # a suspect record that could not be found was reported (once per member)
        self.last: tuple[str | None, int, int] = (None, 0, 0)  # the last record found: (id, k, offset)
        self._open(0)

    # ---- the window

    def _chunks(self, start: int) -> Iterator[tuple[int, bytes]]:
        """(decompressed offset, up to 1 MiB of bytes) of the member from `start` on; at the end,
        `end`, `eof`, `broken` and `inflated` (its decompressed size) say how it ended."""
        d, at, self.eof, corrupt = zlib.decompressobj(31), 0, False, False
        with open(self.path, "rb") as f:
            f.seek(self.pos)
            end = self.pos
            while not d.eof and not corrupt:
                data = f.read(1 << 20)
                if not data:
                    break  # a truncated member: what came out is kept
                end += len(data)
                while data and not d.eof:
                    try:
                        part = d.decompress(data, 1 << 20)
                    except zlib.error:
                        corrupt = True
                        break
                    data = d.unconsumed_tail
                    if at + len(part) > start:
                        yield at, part
                    at += len(part)
        self.inflated, self.eof, self.broken = at, d.eof, not d.eof
        if d.eof:
            self.end = end - len(d.unused_data)

    def _open(self, base: int, source: Iterator[tuple[int, bytes]] | None = None) -> None:
        """The window from decompressed offset `base`, written from `source` ((offset, bytes) from
        `base` or before; by default the member inflated from its start). A full window keeps what
        comes after it (`_rest`: the bytes past its cut, copied aside, then the live inflation), so
        sliding never inflates the member again."""
        source = self._chunks(base) if source is None else source
        self.close()
        fd, name = tempfile.mkstemp(prefix="pretrain-warc-member-", suffix=".warc")
        self.file, self.fd, self._rest = Path(name), None, None
        self.base, self.size, self.whole, self.cut, self.full = base, 0, False, False, False
        self.cursor, self.last = 0, (None, 0, 0)  # last_end is the member's offset: it outlives a window
        try:
            self._unlink_now()  # before anything is written: a SIGKILL mid-window leaves no name
            with os.fdopen(fd, "wb") as out:
                for at, part in source:
                    if at < base:
                        part, at = part[base - at:], base
                    room = self.limit - self.size
                    out.write(part[:room])
                    self.size += min(len(part), room)
                    if self.size >= self.limit:
                        self.full = True
                        tail = [(at + room, part[room:])] if len(part) > room else []
                        self._rest = itertools.chain(tail, source)
                        break
                else:
                    self.whole = self.eof
                out.flush()
                if self.full and (cut := self._last_record_start()):
                    aside = tempfile.TemporaryFile()  # the bytes past the cut: the next window's start
                    with open(self.file, "rb") as f:
                        f.seek(cut)
                        while data := f.read(1 << 20):
                            aside.write(data)
                    past = _file_chunks(aside, 0, self.size - cut, base + cut)
                    self._rest = itertools.chain(past, self._rest)
                    out.truncate(cut)
                    self.size, self.cut = cut, True
        except BaseException:
            self.close()
            raise

    def _last_record_start(self) -> int | None:
        """A full window ends at the last record start in it (a header block naming a WARC-Type;
        none: one record fills it), searched backwards 1 MiB at a time."""
        last, hi = None, self.size
        with open(self.file, "rb") as f:
            while hi > 0 and last is None:
                lo = max(hi - (1 << 20), 0)
                f.seek(lo)
                buf = f.read(hi - lo + (1 << 16))  # what follows: a header block across the edge
                for s in _starts(buf, 0, hi - lo, -1):
                    if lo + s > 0 and _is_record_header(f, lo + s):
                        last = lo + s
                        break
                hi = lo + 16 if lo else 0  # a start across the edge is found in the next piece
                if lo == 0:
                    break
        return last

    def _unlink_now(self) -> None:
        """Where the system allows (Linux), the file is read through an open descriptor and its
        name removed at once: a SIGKILL then leaves nothing in the temp folder (a name would
        stay there for good, up to `limit` bytes)."""
        if os.path.isdir("/proc/self/fd"):
            self.fd = os.open(self.file, os.O_RDONLY)
            self.file.unlink()
            self.file = Path(f"/proc/self/fd/{self.fd}")

    def more(self) -> bool:
        """Whether the member goes on past this window (and can be inflated further)."""
        return self.full

    def slide(self) -> bool:
        """The next window: from this one's cut, or (one record filled it) from the next record
        start after it. False when there is none (the window then is the member's empty end)."""
        if not self.more():
            return False
        if self.cut:
            if self.last_end is not None and self.base <= self.last_end < self.base + self.size:
                with open(self.file, "rb") as f:  # a gap after the last record may go on in the next one
                    f.seek(self.last_end - self.base)
                    self._gap = (self.last_end, f.read(1 << 16))
            self._open(self.base + self.size, self._rest)
            return True
        return self.next_record(self.size) is not None

    def next_record(self, after: int) -> int | None:
        """The window moved to the first record start (a version line after a blank line, then a
        header block naming a WARC-Type and a WARC-Record-ID) past offset `after` of this window,
        found by streaming the member: its offset in the new window (0), or None when the member
        has no record there (the window is then left empty at the member's end)."""
        start = self.base + after
        window = _file_chunks(open(self.file, "rb"), after, self.size, start) if self.size > after else []
        chunks = itertools.chain(window, self._rest or [])
        buf, buf_at = b"", start
        for at, part in chunks:
            if at < start:
                part, at = part[start - at:], start
            buf += part
            for s in _starts(buf, 0, len(buf)):
                head = buf[s:s + (1 << 16)]
                h = HEADER_END.search(head)
                if h is None and len(head) < 1 << 16:
                    break  # the header block goes on in the next chunk: look again then
                named = h is not None and _WARC_TYPE.search(head, 0, h.start())
                if named and _RECORD_ID.search(head, 0, h.start()):
                    self._open(buf_at + s, itertools.chain([(buf_at + s, buf[s:])], chunks))
                    return 0
            keep = min(len(buf), 1 << 16)  # a record start across two chunks is found next time
            buf_at, buf = buf_at + len(buf) - keep, buf[len(buf) - keep:]
        self.close()
        self.base, self.size, self.cut, self.full, self._rest = self.inflated, 0, False, False, None
        self.whole = self.eof
        return None

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        elif self.file != Path():
            self.file.unlink(missing_ok=True)
        self.file = Path()

    def find(self, rid: str | None, k: int = 0) -> int | None:
        """Offset in the window of the record whose WARC-Record-ID is `rid` and before which the
        parser read `k` records with an id in this member: the first line naming `rid` at or after
        the member's k-th WARC-Record-ID line, searched from where the last one was found (records
        come in order, so a member is scanned once), in the later windows when it is not in this
        one. An earlier record with the same id is passed, never returned: reading resumed after
        it and the records between came out twice. After `MAX_MISSES` records not found, None at
        once: each miss scans the rest of the member (the window then comes back where it was)."""
        if rid is not None and self.last[:2] == (rid, k):  # asked again (the record after it failed)
            return self.last[2]
        if not rid or self.misses >= MAX_MISSES:
            return None
        want = rid.strip().encode("utf-8", "surrogateescape")
        origin, back = self.base, (self.cursor, self.passed, self.last)
        while True:
            if self.size:
                with open(self.file, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                    for m in ID_LINE.finditer(mm, self.cursor):
                        if self.passed >= k and m[1] == want:
                            start = mm.rfind(b"\nWARC/", 0, m.start()) + 1  # 0 when the window starts with it
                            self.cursor, self.passed, self.last = m.end(), self.passed + 1, (rid, k, start)
                            return start
                        self.passed += 1
            if not self.slide():
                break
        self.misses += 1
        if self.base != origin:
            self._open(origin)
        self.cursor, self.passed, self.last = back
        return None

    def claim_end(self, start: int, length: int) -> int | None:
        """Where the record at `start` of the window ends by its claim (None: no header end)."""
        with open(self.file, "rb") as f:
            f.seek(start)
            m = HEADER_END.search(f.read(1 << 16))
        return None if m is None else start + m.end() + length

    def overrun(self, start: int, length: int) -> tuple[int, str] | None:
        """(offset of the next record, what the claim overran) when the record at `start` claims
        more than it has (warc_framing's test for a plain file), else None."""
        return _plain_overrun(self.file, start, length)

    def skipped(self, start: int, length: int | None) -> tuple[int, bytes]:
        """(decompressed offset in the member, bytes) of what lies between the end of the last
        record judged here and this one at `start` of the window (stripped: blank lines between
        records are fine), also when that end lies in an earlier window (a window of 48 KiB missed
        a record lost after junk: session 11); notes where this one ends (`length` None: a
        Content-Length that is not a number, nothing to judge after it)."""
        lo, at, junk = self.last_end, self.base + start, b""
        with open(self.file, "rb") as f:
            if lo is not None and lo < self.base + start:
                earlier = self._gap[1] if self._gap[0] == lo else b""  # its start, in the window before
                head, frm = (b"", lo - self.base) if lo >= self.base else (earlier, 0)
                f.seek(frm)
                raw = (head + f.read(min(start - frm, 1 << 16)))[: 1 << 16]
                at, junk = lo + len(raw) - len(raw.lstrip()), raw.strip()
            f.seek(start)
            m = HEADER_END.search(f.read(1 << 16))
        self.last_end = None if m is None or length is None else self.base + start + m.end() + length
        return at, junk

    def tail(self) -> tuple[int, bytes]:
        """(decompressed offset in the member, bytes) from the end of the last record judged here
        to the member's end (stripped), when this window holds both; else nothing."""
        lo, hi = self.last_end, self.base + self.size
        if lo is None or not self.whole or not self.base <= lo < hi:
            return hi, b""
        with open(self.file, "rb") as f:
            f.seek(lo - self.base)
            raw = f.read(min(hi - lo, 1 << 16))
        return lo + len(raw) - len(raw.lstrip()), raw.strip()

    def after(self, start: int, length: int) -> tuple[int, int | None] | None:
        """(where the record after the one at `start` starts, where the record after that starts)
        for an honest record at `start`: the first is where a parser failed, the second where
        reading resumes. None when no record follows it in this member."""
        with open(self.file, "rb") as f:
            f.seek(start)
            m = HEADER_END.search(f.read(1 << 16))
        if m is None:
            return None
        claimed_end = start + m.end() + length
        bad = _next_version_line(self.file, max(claimed_end - 2, start + 1))
        if bad is None:
            return None
        return bad, _next_record_start(self.file, bad + 1, self.size)


def where_in(member_pos: int, where: object, base: int = 0) -> str:
    """A record field of a plain read of the member's window from decompressed offset `base`, told
    as a place in the original file."""
    inner = re.sub(r"\boffset (\d+)", lambda m: f"decompressed offset {int(m[1]) + base}", str(where))
    return f"{inner} of the gzip member at offset {member_pos}"


# --------------------------------------------------------------------------- judging a record
# `scan` is warc.py's _Scan: path, layout, in_member, prev, prev_id, k, at, cap, member_at().


def _several(scan, pos: int, length: int) -> bool:
    """The record at `pos` may share its gzip member with others: a record before it did, or its
    claimed length does not fill the member (a lie, or more records after it)."""
    if scan.in_member:
        return True
    m = _member(scan.path, pos, scan.cap)
    return m is not None and m is not TOO_BIG and m[2] is not None and abs(m[1] - m[2] - length) > 64


def lie_in_member(
    scan, pos: int, length: int | None, rid: str | None, too_large: bool, suspect: bool,
    on_error: OnError, stats: Counter[str],
) -> tuple[Member, int] | None:
    """(the member, the decompressed offset of the next record) when the record `rid`, in a gzip
    member holding several, claims a Content-Length that overruns the member or runs into the
    next record of it; None otherwise (then `resync` judges it, as for a member of its own).
    `suspect`: the record came out truncated or holds a record start; one not found in the part of
    its member that was inflated is then said (the records it swallowed cannot be read)."""
    if scan.layout == "members" and rid and _several(scan, pos, length or 0):
        member = scan.member_at(pos)
    elif scan.layout is None and rid and scan.at == 0 and not too_large:  # one stream: one member at 0
        member, pos = scan.member_at(0), 0
    else:
        return None
    at = member.find(rid, scan.k)
    if at is None:
        if suspect and not member.told:
            member.told = True
            on_error(str(scan.path), f"gzip member at offset {pos}", "a record in this gzip member (it "
                     "holds several) ran into the next one or was cut short, and its WARC-Record-ID is "
                     "not found in the member's bytes: not resynchronised; the records after it in this "
                     "member may be lost")
            stats["errors.unchecked_member"] += 1
        return None
    junk_at, junk = member.skipped(at, length)
    if junk:  # fastwarc passed over a record it could not parse (no version line, a short claim)
        first = junk.split(b"\n", 1)[0][:80].decode("utf-8", "replace").strip()
        on_error(str(scan.path), where_in(pos, f"offset {junk_at}"), f"{len(junk)} bytes "
                 "skipped between records: not a valid record (no WARC version line, or a wrong "
                 f"Content-Length); first line: {first!r}")
        stats["errors.skipped_bytes"] += 1
    found = None if length is None else member.overrun(at, length)
    where, bad = where_in(pos, f"offset {at}", member.base), member.base + at
    if found is None:
        claimed = None if length is None else member.claim_end(at, length)
        if claimed is None or claimed <= member.size or not member.more():
            return None
        # the claim runs past the window: the next record start, however far (streamed)
        claimed_at = member.base + claimed
        if member.next_record(at + 1) is None:
            on_error(str(scan.path), where, f"claimed Content-Length {length} overruns its gzip member, "
                     f"and no record follows it there: the member's last {member.base - bad:,} bytes skipped")
            stats["errors.resynchronised"] += 1
            return member, None
        if member.base >= claimed_at:  # an honest record past the window: no lie
            return member, 0
        end, what = 0, "its gzip member"
    else:
        end, what = found
        what = "its gzip member" if what == "the end of the file" else what
    on_error(str(scan.path), where, f"claimed Content-Length {length} overruns {what}: resynchronised at "
             f"the next record (decompressed offset {member.base + end}), {member.base + end - bad} bytes "
             "of this record skipped")
    stats["errors.resynchronised"] += 1
    return member, end


def unreadable_in_member(
    scan, start: int, e: Exception, on_error: OnError, stats: Counter[str]
) -> tuple[Member, int | None] | None:
    """(the member, where the record after the unreadable one starts) when the record the parser
    failed on shares a gzip member with the last good record; None when it is in another member
    (warc.py's `_past_unreadable` finds it) or the layout has no members to inflate."""
    if scan.prev is None or scan.prev[0] < start or scan.layout == "plain":
        return None
    if scan.layout is None and start:  # resumed inside one gzip stream: offsets are decompressed
        return None
    pos = scan.prev[0] if scan.layout == "members" else 0
    member = scan.member_at(pos)
    at = member.find(scan.prev_id, scan.k)
    nxt = None if at is None else member.after(at, scan.prev[1])
    if nxt is None:
        return None
    bad, resume = nxt
    where, bad_at = where_in(pos, f"offset {bad}", member.base), member.base + bad
    if resume is None and member.more():  # the record after it starts past the window: streamed to
        resume = member.next_record(bad + 1)
    skipped = member.base + (member.size if resume is None else resume) - bad_at
    on_error(str(scan.path), where, f"unreadable WARC record ({e}): a record of "
             f"{skipped:,} bytes skipped, reading resumes at the next one")
    stats["errors.unreadable_record"] += 1
    return member, resume
