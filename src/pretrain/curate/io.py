"""Files of the belt: atomic writes, zstd-compressed JSONL shards, done markers.

Every output is written under a temporary name in the same directory and renamed into place, so a
reader never sees half a file and a killed job leaves only `*.tmp*` debris that a rerun replaces.
A done marker (`NAME.done`, JSON) records the config hash of the job that wrote it; a rerun with a
different config refuses to mix outputs.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson
import zstandard

ZSTD_LEVEL = 3


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success fsync and rename it over `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        with open(tmp_path, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_json_atomic(path: str | Path, obj: Any) -> None:
    write_bytes_atomic(path, (json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode())


def dumps_line(obj: Any) -> bytes:
    """One JSONL line: compact separators, UTF-8 unescaped. orjson writes it ~4x faster than the
    stdlib, byte for byte the same except some floats' spelling (1e-7 for 1e-07: the same value) and
    NaN (null); the stdlib takes what orjson refuses (integers beyond 64 bits, non-string keys).
    Reading stays with the stdlib: orjson parses integers beyond 64 bits as floats, silently."""
    try:
        return orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError:
        return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def write_jsonl_zst(path: str | Path, records: Iterable[dict]) -> int:
    """Write records as zstd-compressed JSONL atomically; returns the count.

    The compressor is single-threaded with a fixed level, so the bytes depend only on the records.
    """
    n = 0
    with atomic_path(path) as tmp, open(tmp, "wb") as raw:
        cctx = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=True)
        with cctx.stream_writer(raw, closefd=False) as w:
            for rec in records:
                w.write(dumps_line(rec))
                n += 1
    return n


def read_jsonl_zst(path: str | Path) -> Iterator[dict]:
    """Read a zstd JSONL file written by `write_jsonl_zst`."""
    with open(path, "rb") as raw:
        dctx = zstandard.ZstdDecompressor()
        with dctx.stream_reader(raw) as r:
            for line in io.TextIOWrapper(r, encoding="utf-8"):
                if line.strip():
                    yield json.loads(line)


def done_marker(path: str | Path) -> Path:
    return Path(str(path) + ".done")


def mark_done(path: str | Path, info: dict) -> None:
    write_json_atomic(done_marker(path), info)


def is_done(path: str | Path, config_hash: str) -> bool:
    """True when `path` has a done marker written under the same config hash.

    A marker from another config raises: mixing outputs of two configs is never silent.
    """
    marker = done_marker(path)
    if not marker.exists():
        return False
    try:
        info = json.loads(marker.read_text())
    except (OSError, json.JSONDecodeError):
        return False
    if info.get("config_hash") != config_hash:
        from pretrain.errors import UserError

        raise UserError(
            f"{path} was written by a different config ({info.get('config_hash')} != {config_hash}); "
            "use a new output directory or remove the old one"
        )
    return True
