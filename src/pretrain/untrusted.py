"""Reading the small structured files other people hand us: TOML configs and JSON sidecars.

Owns one promise for every config.toml, mixture.toml, hardware table, stats.json, plan.json,
manifest, HF config.json or index a user did not write themselves (a run directory from a
colleague, a corpus folder downloaded): reading it ends within a bounded time and memory, and
any way it can be wrong is one `BadFile` line naming the file and the reason, never a traceback.

- Only a regular file is read: a FIFO (blocks forever), `/dev/zero` (grows without end) or a
  folder named where a file belongs is refused before it is opened.
- At most `limit` bytes (default 64 MiB; these files are kilobytes) are read, counted while
  reading, so a file that grows while it is read cannot run past the bound either.
- A JSON file holds at most one value per `BYTES_PER_VALUE` bytes of its bound, counted from
  disk in 1 MiB chunks before it is read whole (`scan_values`), so a refused one is never held.
- Invalid UTF-8 names the byte offset; a parse error names the line; nesting thousands deep
  (Python's `json` and `tomllib` parsers recurse, RecursionError) is one line too.
- `within=FOLDER`: the file must resolve inside FOLDER, so a run directory's `samples.txt ->
  ~/.ssh/id_rsa` is not copied into a report the user then shares.
- JSONL read line by line (`jsonl_objects`, `lines`): a line over `max_line` bytes is skipped
  without being held (a 65 KB zstd file inflating to one 2 GiB line took 4.3 GB in `pretrain
  report`), and bad lines are skipped and reported, not fatal.

`BadFile` is a `UserError` (the CLI prints one line) and a `ValueError` (callers that already
treat a malformed file as `ValueError`, e.g. to fall back to a default, keep doing so).
"""

from __future__ import annotations

import io
import json
import re
import stat
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from pretrain.errors import UserError

MAX_SMALL_FILE = 64 * 1024 * 1024
MAX_LINE = 8 * 1024 * 1024  # one JSONL record we only summarise (a metrics line, a reject)
# A JSON file (or a JSONL file read whole) may hold one value per BYTES_PER_VALUE bytes of its size
# bound. Python holds a value in 24-72 bytes (`{}` is 64 plus its 8-byte slot), so `[{},{},...]`
# costs ~24x its size: a 64 MiB stats.json of it held 1.6 GB, a 1 GiB plan.json or
# decontam_report.json (their bound) would hold ~25 GB. Counted before reading (`scan_values`) and
# parsing (`json_elements`, which can only overcount); a file of our own has ~20-40 bytes a value,
# so at most ~4.5 bytes of Python objects per byte of the bound are held (64 MiB: ~300 MB; 1 GiB:
# ~4.8 GB).
BYTES_PER_VALUE = 16


class BadFile(UserError, ValueError):
    """A small structured file that cannot be read as what it should be (one line, names the file)."""


def check_file(path: str | Path, within: str | Path | None = None) -> int:
    """The size of `path`, a regular file (inside `within` once links are followed), else `BadFile`."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError as e:
        raise BadFile(f"{p}: cannot read: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        raise BadFile(f"{p}: not a regular file (a folder, pipe or device); refusing to read it")
    if within is not None and not p.resolve().is_relative_to(Path(within).resolve()):
        raise BadFile(f"{p}: links outside {within} (to {p.resolve()}); refusing to read it")
    return st.st_size


def read_bytes(path: str | Path, limit: int = MAX_SMALL_FILE, within: str | Path | None = None) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, else `BadFile`."""
    p = Path(path)
    size = check_file(p, within)
    if size > limit:
        raise BadFile(f"{p}: {size:,} bytes, over the {limit:,} bytes such a file may hold")
    try:
        with open(p, "rb") as f:
            data = f.read(limit + 1)  # a file that grew since stat() stops here, not at the disk's end
    except OSError as e:
        raise BadFile(f"{p}: cannot read: {e.strerror or e}") from None
    if len(data) > limit:
        raise BadFile(f"{p}: grew past the {limit:,} bytes such a file may hold while it was read")
    return data


def read_head(path: str | Path, n: int, within: str | Path | None = None) -> str:
    """The first `n` bytes of a regular file as text (invalid UTF-8 replaced): what a page shows."""
    check_file(path, within)
    with open(path, "rb") as f:
        return f.read(n).decode("utf-8", errors="replace")


def read_text(path: str | Path, limit: int = MAX_SMALL_FILE, within: str | Path | None = None) -> str:
    """`read_bytes` decoded as UTF-8; invalid bytes are `BadFile` naming their offset."""
    data = read_bytes(path, limit, within)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadFile(f"{path}: invalid UTF-8 at byte {e.start}") from None


def load_json(path: str | Path, limit: int = MAX_SMALL_FILE, what: str = "JSON",
              within: str | Path | None = None) -> Any:
    """The JSON value in `path` (any type: callers check the shape they need), of at most one value
    per `BYTES_PER_VALUE` bytes of `limit`."""
    most = limit // BYTES_PER_VALUE
    if most < check_file(path, within) <= limit:  # counted from disk first: a refused file is never held
        _refuse_values(path, what, limit, scan_values(path, limit))
    text = read_text(path, limit, within)
    if len(text) > most:  # again on what was read: the file may have changed since it was counted
        _refuse_values(path, what, limit, json_elements(text))
    try:
        return json.loads(text)
    except RecursionError:  # `[[[[...` 100,000 deep: json's C scanner recurses per level
        raise BadFile(f"{path}: not valid {what}: nested too deeply") from None
    except ValueError as e:
        raise BadFile(f"{path}: not valid {what}: {e}") from None


def _refuse_values(path: str | Path, what: str, limit: int, n: int) -> None:
    if n > limit // BYTES_PER_VALUE:
        raise BadFile(f"{path}: not valid {what}: {n:,} commas and brackets, over the "
                      f"{limit // BYTES_PER_VALUE:,} values such a file may hold (one per "
                      f"{BYTES_PER_VALUE} bytes of its {limit:,}-byte bound); refusing to parse it")


def scan_values(path: str | Path, limit: int = MAX_SMALL_FILE, chunk: int = 1 << 20) -> int:
    """`json_elements` of the file's first `limit` + 1 bytes, read a `chunk` at a time: the count
    without holding the file (`,`, `[` and `{` are one byte in UTF-8 and in no other character's
    bytes, so the bytes' count is the text's). Held whole, a 1 GiB file was ~2.2 GB (its bytes and
    its text) before the count could refuse it."""
    n, left = 1, limit + 1
    try:
        with open(path, "rb") as f:
            while left > 0 and (data := f.read(min(chunk, left))):
                n, left = n + json_elements(data) - 1, left - len(data)
    except OSError as e:
        raise BadFile(f"{path}: cannot read: {e.strerror or e}") from None
    return n


def load_json_object(path: str | Path, limit: int = MAX_SMALL_FILE, what: str = "JSON",
                     within: str | Path | None = None) -> dict:
    """`load_json` that must hold an object."""
    data = load_json(path, limit, what, within)
    if not isinstance(data, dict):
        raise BadFile(f"{path}: not valid {what}: expected an object, found {type(data).__name__}")
    return data


def json_elements(text: str | bytes) -> int:
    """An upper bound on the values in JSON `text`, from its characters alone, nothing parsed: each
    value after the first in an array or object follows a `,`, and each array or object opens with
    `[` or `{`. Those characters inside strings count too, so it can only overcount. Three `count`
    calls: ~0.1 s for 128 MiB, where building the Python object costs ~100 bytes per value."""
    sep = (",", "[", "{") if isinstance(text, str) else (b",", b"[", b"{")
    return sum(text.count(c) for c in sep) + 1  # type: ignore[arg-type]


# tomllib keeps every prefix of a dotted key (`a.b.c = 1`: (a,), (a, b)) as its own tuple, so a key
# of n parts costs n^2/2 references: 10,000 parts (20 kB) 396 MB, 200,000 (400 kB) past 23 GB; a
# table header of 200,000 parts, 76 s. Our deepest key has 3 parts.
MAX_KEY_PARTS = 64
# More than MAX_KEY_PARTS bare or quoted key parts joined by dots, anywhere (a header, a key, an
# inline table); starting only where no bare-key character precedes, so a long run of letters is
# tried once, not from each of its characters. A value's "a.b.c..." of 64 words is refused too.
_KEY_PART = r"""(?:[A-Za-z0-9_-]++|"[^"\n]*+"|'[^'\n]*+')[ \t]*+\.[ \t]*+"""
_DOTTED = re.compile(rf"(?<![A-Za-z0-9_-])(?:{_KEY_PART}){{{MAX_KEY_PARTS}}}")  # 65+ parts


def load_toml(path: str | Path, limit: int = MAX_SMALL_FILE, what: str = "TOML") -> dict:
    """The table in a TOML file."""
    text = read_text(path, limit)
    if text.count(".") >= MAX_KEY_PARTS and (m := _DOTTED.search(text)):
        line = text.count("\n", 0, m.start()) + 1
        raise BadFile(f"{path}: invalid {what}: line {line}: a dotted key of more than {MAX_KEY_PARTS} "
                      "parts (tomllib's cost grows with its square)")
    try:
        return tomllib.loads(text)
    except RecursionError:  # tomllib recurses per nested array or inline table
        raise BadFile(f"{path}: invalid {what}: nested too deeply") from None
    except tomllib.TOMLDecodeError as e:
        raise BadFile(f"{path}: invalid {what}: {e}") from None


def json_line(line: str | bytes) -> Any:
    """One JSON value from one line; every way it is bad (nesting, a lone surrogate included) is a
    `ValueError`."""
    try:
        obj = json.loads(line)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if (why := lone_surrogate(line, obj)) is not None:
        raise ValueError(why)
    return obj


def lone_surrogate(line: str | bytes, obj: Any) -> str | None:
    """Why `obj`, parsed from `line`, is not Unicode text, or None. JSON's `\\ud800` escape parses
    to a lone surrogate, which no UTF-8 writer can encode and the tokenizer refuses (TypeError): one
    such record stopped `dedup`, `tokenize`, `tokenizer train` and `eval`. Checked only when the
    line holds such an escape (an escaped emoji is a pair and passes): one `find` otherwise."""
    esc = ("\\ud", "\\uD") if isinstance(line, str) else (b"\\ud", b"\\uD")
    if esc[0] not in line and esc[1] not in line:
        return None
    try:
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as e:
        return f"lone surrogate \\u{ord(e.object[e.start]):04x} in a string: not Unicode text"
    return None


OnBadLine = Callable[[int, str], None]


def ignore_bad_line(lineno: int, reason: str) -> None:
    pass


def lines(stream: IO[bytes], max_line: int = MAX_LINE, on_bad: OnBadLine = ignore_bad_line,
          max_bytes: int | None = None) -> Iterator[tuple[int, bytes]]:
    """(line number, line) for the non-blank lines of a binary stream, each at most `max_line`
    bytes: a longer one is read through in `max_line` pieces and dropped (reported), so memory
    holds one line at a time. Past `max_bytes` read (a bomb of blank lines), reading stops, said."""
    lineno = total = 0
    while True:
        line = stream.readline(max_line + 1)
        if not line:
            return
        lineno, total = lineno + 1, total + len(line)
        if len(line) > max_line and not line.endswith(b"\n"):
            while (part := stream.readline(max_line)) and not part.endswith(b"\n"):
                total += len(part)
            total += len(part)
            on_bad(lineno, f"line over {max_line:,} bytes, skipped")
        elif line.strip():
            yield lineno, line
        if max_bytes is not None and total > max_bytes:
            on_bad(lineno, f"stopped after {max_bytes:,} bytes")
            return


def jsonl_objects(stream: IO[bytes], max_line: int = MAX_LINE, on_bad: OnBadLine = ignore_bad_line,
                  max_bytes: int | None = None) -> Iterator[dict]:
    """The JSON objects of a JSONL stream; a line that is not one (bad UTF-8, bad JSON, nested too
    deep, a list, over `max_line`) is reported to `on_bad(line number, reason)` and skipped."""
    for lineno, line in lines(stream, max_line, on_bad, max_bytes):
        try:
            obj = json_line(line)
        except ValueError as e:  # UnicodeDecodeError included
            on_bad(lineno, f"not JSON ({str(e)[:80]})")
            continue
        if isinstance(obj, dict):
            yield obj
        else:
            on_bad(lineno, f"not a JSON object ({type(obj).__name__})")


def buffered(raw: IO[bytes]) -> IO[bytes]:
    """A stream with a fast `readline(size)` (a decompressor's own reads a byte at a time)."""
    return io.BufferedReader(raw, 1 << 16)  # type: ignore[arg-type]


# C0 and C1 controls (ESC starts a terminal escape sequence: colours, the window title, OSC 52
# clipboard writes) and the bidirectional overrides and isolates (Trojan Source, CVE-2021-42574),
# which make a name read differently on screen than it is.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """`text` safe to print on a terminal: a file name, record id or URL from someone else, with
    every control character and bidi override written as its escape (`\\x1b`, `\\u202e`)."""
    return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def one_line(text: str) -> str:
    """`printable`, with newlines and tabs escaped too: a line that names someone else's file (an
    object key may hold a newline) stays one line, and cannot print a line of the name's choosing."""
    return printable(text).replace("\n", "\\n").replace("\t", "\\t")


def plot_label(text: Any, n: int = 60) -> str:
    """Someone else's name (a metric, a step, a model) as matplotlib text: at most `n` characters,
    one line, `$` escaped. A name between two `$` is parsed as TeX (`$\\frac{$` stopped `pretrain
    report`), and a 200 kB metric name took the page 93 s and 1.8 GB to lay out."""
    t = one_line(str(text))
    t = t[:n] + ("…" if len(t) > n else "")
    return t.replace("$", r"\$")
