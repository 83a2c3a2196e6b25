"""gzip members that hold several WARC records: where reading resumes after a bad one (for warc.py).

The standard puts one record in each gzip member, but some crawlers write several, and fastwarc
reads them (warcio refuses them). fastwarc gives every record of such a member the member's
offset, so a resynchronisation that jumps to the next member lost the good records after the bad
one. Here the member is inflated once to a temporary plain file (at most `warc_max_skip_bytes`
of it, 1 MiB at a time), the bad record is found in it by its WARC-Record-ID (or as the record
after the last good one), and warc.py reads the rest of the member from there as a plain WARC,
with every check a plain file gets. A whole-file gzip is one such member, at offset 0.
"""

from __future__ import annotations

import mmap
import os
import re
import tempfile
import zlib
from collections import Counter
from pathlib import Path

from pretrain.curate.readers import OnError
from pretrain.curate.warc_framing import (
    HEADER_END,
    TOO_BIG,
    _member,
    _next_record_start,
    _next_version_line,
    _plain_overrun,
)

MAX_MISSES = 4


class Member:
    """One gzip member of `path` at compressed offset `pos`, inflated to a temporary file.

    `end`: the compressed offset after it (the next member); `whole`: False when it was cut at
    `limit` bytes or its compressed bytes were truncated or corrupt (the rest of it is unread).
    """

    def __init__(self, path: Path, pos: int, limit: int):
        self.pos, self.limit = pos, limit
        fd, name = tempfile.mkstemp(prefix="pretrain-warc-member-", suffix=".warc")
        self.file, self.fd = Path(name), None
        self.size, self.end, self.whole, self.cursor = 0, pos, False, 0
        self.last_end: int | None = None  # where the last record judged here ended (its claim)
        self.misses = 0  # records not found in it (past `limit`, or an id written otherwise)
        self.told = False  # a suspect record past `limit` was reported (once per member)
        self.last: tuple[str | None, int] = (None, 0)  # the last record found: (its id, its offset)
        try:
            with os.fdopen(fd, "wb") as out, open(path, "rb") as f:
                self._inflate(f, out)
            self._unlink_now()
        except BaseException:
            self.close()
            raise

    def _unlink_now(self) -> None:
        """Where the system allows (Linux), the file is read through an open descriptor and its
        name removed at once: a SIGKILL then leaves nothing in the temp folder (a name would
        stay there for good, up to `limit` bytes)."""
        if os.path.isdir("/proc/self/fd"):
            self.fd = os.open(self.file, os.O_RDONLY)
            self.file.unlink()
            self.file = Path(f"/proc/self/fd/{self.fd}")

    def _inflate(self, f, out) -> None:
        d = zlib.decompressobj(31)
        f.seek(self.pos)
        while not d.eof:
            data = f.read(1 << 20)
            if not data:
                break  # a truncated member: what came out is kept
            self.end += len(data)
            while data and not d.eof:
                try:
                    part = d.decompress(data, 1 << 20)
                except zlib.error:
                    return
                part = part[: self.limit - self.size]
                out.write(part)
                self.size += len(part)
                if self.size >= self.limit:
                    return
                data = d.unconsumed_tail
        self.end -= len(d.unused_data)
        self.whole = d.eof

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        else:
            self.file.unlink(missing_ok=True)

    def find(self, rid: str | None) -> int | None:
        """Decompressed offset of the record whose WARC-Record-ID is `rid`, searched from where
        the last one was found (records come in order, so a member is scanned once). After
        `MAX_MISSES` records not found, None at once: each miss scans the rest of the member."""
        if rid is not None and rid == self.last[0]:  # asked again (the record after it failed)
            return self.last[1]
        if not rid or not self.size or self.misses >= MAX_MISSES:
            return None
        pat = re.compile(rb"(?im)^WARC-Record-ID:[ \t]*" + re.escape(rid.encode()) + rb"[ \t]*\r?$")
        with open(self.file, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            m = pat.search(mm, self.cursor)
            if m is None:
                self.misses += 1
                return None
            start = mm.rfind(b"\nWARC/", 0, m.start()) + 1  # 0 when the member starts with it
        self.cursor, self.last = m.end(), (rid, start)
        return start

    def overrun(self, start: int, length: int) -> tuple[int, str] | None:
        """(offset of the next record, what the claim overran) when the record at `start` claims
        more than it has (warc_framing's test for a plain file), else None."""
        return _plain_overrun(self.file, start, length)

    def skipped(self, start: int, length: int | None) -> tuple[int, bytes]:
        """(offset, bytes) of what lies between the end of the last record judged here and this
        one at `start` (stripped: blank lines between records are fine); notes where this one
        ends (`length` None: a Content-Length that is not a number, nothing to judge after it)."""
        at, junk = start, b""
        with open(self.file, "rb") as f:
            if self.last_end is not None and self.last_end < start:
                f.seek(self.last_end)
                raw = f.read(min(start - self.last_end, 1 << 16))
                at, junk = self.last_end + len(raw) - len(raw.lstrip()), raw.strip()
            f.seek(start)
            m = HEADER_END.search(f.read(1 << 16))
        self.last_end = None if m is None or length is None else start + m.end() + length
        return at, junk

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


def where_in(member_pos: int, where: object) -> str:
    """A record field of a plain read of the member, told as a place in the original file."""
    inner = re.sub(r"\boffset (\d+)", r"decompressed offset \1", str(where))
    return f"{inner} of the gzip member at offset {member_pos}"


# --------------------------------------------------------------------------- judging a record
# `scan` is warc.py's _Scan: path, layout, in_member, prev, prev_id, at, cap, member_at().


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
    at = member.find(rid)
    if at is None:
        if suspect and not member.whole and not member.told:
            member.told = True
            on_error(str(scan.path), f"gzip member at offset {pos}", f"a record in this gzip member (it "
                     "holds several) ran into the next one or was cut short, past the part of the member "
                     f"inflated to look (warc_max_skip_bytes={member.limit}): not resynchronised; the "
                     "records after it in this member may be lost")
            stats["errors.unchecked_member"] += 1
        return None
    junk_at, junk = member.skipped(at, length)
    if junk:  # fastwarc passed over a record it could not parse (no version line, a short claim)
        first = junk.split(b"\n", 1)[0][:80].decode("utf-8", "replace").strip()
        on_error(str(scan.path), where_in(pos, f"offset {junk_at}"), f"{len(junk)} bytes skipped between "
                 f"records: not a valid record (no WARC version line, or a wrong Content-Length); first "
                 f"line: {first!r}")
        stats["errors.skipped_bytes"] += 1
    found = None if length is None else member.overrun(at, length)
    if found is None:
        return None
    end, what = found
    what = "its gzip member" if what == "the end of the file" else what
    on_error(str(scan.path), where_in(pos, f"offset {at}"), f"claimed Content-Length {length} overruns "
             f"{what}: resynchronised at the next record (decompressed offset {end}), {end - at} bytes "
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
    at = member.find(scan.prev_id)
    nxt = None if at is None else member.after(at, scan.prev[1])
    if nxt is None:
        return None
    bad, resume = nxt
    skipped = (resume or member.size) - bad
    on_error(str(scan.path), where_in(pos, f"offset {bad}"), f"unreadable WARC record ({e}): a record of "
             f"{skipped:,} bytes skipped, reading resumes at the next one")
    stats["errors.unreadable_record"] += 1
    return member, resume
