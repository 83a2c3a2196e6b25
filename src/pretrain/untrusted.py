"""Reading the small structured files other people hand us: TOML configs and JSON sidecars.

Owns one promise for every config.toml, mixture.toml, hardware table, stats.json, plan.json,
manifest, HF config.json or index a user did not write themselves (a run directory from a
colleague, a corpus folder downloaded): reading it ends within a bounded time and memory, and
any way it can be wrong is one `BadFile` line naming the file and the reason, never a traceback.

- Only a regular file is read: a FIFO (blocks forever), `/dev/zero` (grows without end) or a
  folder named where a file belongs is refused before it is opened.
- At most `limit` bytes (default 64 MiB; these files are kilobytes) are read, counted while
  reading, so a file that grows while it is read cannot run past the bound either.
- Invalid UTF-8 names the byte offset; a parse error names the line; nesting thousands deep
  (Python's `json` and `tomllib` parsers recurse, RecursionError) is one line too.

`BadFile` is a `UserError` (the CLI prints one line) and a `ValueError` (callers that already
treat a malformed file as `ValueError`, e.g. to fall back to a default, keep doing so).
"""

from __future__ import annotations

import json
import stat
import tomllib
from pathlib import Path
from typing import Any

from pretrain.errors import UserError

MAX_SMALL_FILE = 64 * 1024 * 1024


class BadFile(UserError, ValueError):
    """A small structured file that cannot be read as what it should be (one line, names the file)."""


def read_bytes(path: str | Path, limit: int = MAX_SMALL_FILE) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, else `BadFile`."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError as e:
        raise BadFile(f"{p}: cannot read: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        raise BadFile(f"{p}: not a regular file (a folder, pipe or device); refusing to read it")
    if st.st_size > limit:
        raise BadFile(f"{p}: {st.st_size:,} bytes, over the {limit:,} bytes such a file may hold")
    try:
        with open(p, "rb") as f:
            data = f.read(limit + 1)  # a file that grew since stat() stops here, not at the disk's end
    except OSError as e:
        raise BadFile(f"{p}: cannot read: {e.strerror or e}") from None
    if len(data) > limit:
        raise BadFile(f"{p}: grew past the {limit:,} bytes such a file may hold while it was read")
    return data


def read_text(path: str | Path, limit: int = MAX_SMALL_FILE) -> str:
    """`read_bytes` decoded as UTF-8; invalid bytes are `BadFile` naming their offset."""
    data = read_bytes(path, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadFile(f"{path}: invalid UTF-8 at byte {e.start}") from None


def load_json(path: str | Path, limit: int = MAX_SMALL_FILE, what: str = "JSON") -> Any:
    """The JSON value in `path` (any type: callers check the shape they need)."""
    text = read_text(path, limit)
    try:
        return json.loads(text)
    except RecursionError:  # `[[[[...` 100,000 deep: json's C scanner recurses per level
        raise BadFile(f"{path}: not valid {what}: nested too deeply") from None
    except ValueError as e:
        raise BadFile(f"{path}: not valid {what}: {e}") from None


def load_json_object(path: str | Path, limit: int = MAX_SMALL_FILE, what: str = "JSON") -> dict:
    """`load_json` that must hold an object."""
    data = load_json(path, limit, what)
    if not isinstance(data, dict):
        raise BadFile(f"{path}: not valid {what}: expected an object, found {type(data).__name__}")
    return data


def load_toml(path: str | Path, limit: int = MAX_SMALL_FILE, what: str = "TOML") -> dict:
    """The table in a TOML file."""
    text = read_text(path, limit)
    try:
        return tomllib.loads(text)
    except RecursionError:  # tomllib recurses per nested array or inline table
        raise BadFile(f"{path}: invalid {what}: nested too deeply") from None
    except tomllib.TOMLDecodeError as e:
        raise BadFile(f"{path}: invalid {what}: {e}") from None


def json_line(line: str | bytes) -> Any:
    """One JSON value from one line; every way it is bad (nesting included) is a `ValueError`."""
    try:
        return json.loads(line)
    except RecursionError:
        raise ValueError("nested too deeply") from None
