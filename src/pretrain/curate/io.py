"""Files of the belt: atomic writes, zstd-compressed JSONL shards, done markers.

Every output is written under a temporary name and renamed into place, so a reader never sees half
a file and a killed job leaves only `*.tmp` debris that a rerun replaces. The temporary file lives
beside its target, or in `tmp_dir` (same filesystem) so that a corpus folder never holds anything
but its data files. Files get the mode a plain `open()` would give (0666 less the umask), not
mkstemp's 0600, so a teammate's job or a web server can read what a run wrote.
A done marker (`NAME.done`, JSON, or any path given as `marker`) records the hash of the job that
wrote it; a rerun with a different job refuses to mix outputs.

A target may also be an fsspec URL (`s3://bucket/key`, `gs://...`, `memory://...`). Object stores
have no rename, but they do have whole-object writes: an object becomes visible only when its
upload completes (a PUT, or a multipart upload's completion), never half written. So a URL target
is written to a local temporary file first and uploaded whole on success; the job writes its done
marker only after that, so a killed upload is simply redone. Inside `uploads_together()` the
uploads of one unit wait for the block's end and then go out concurrently: one round trip's wait
for all of them instead of one each, the marker still after the last; `collect_uploads` hands
them to the caller, who may upload them (then write the marker) in the background.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson
import zstandard

ZSTD_LEVEL = 3


def is_url(path: str | Path) -> bool:
    """True for an fsspec URL (`s3://...`, `memory://...`); `file://` counts as local."""
    text = str(path)
    return "://" in text and not text.startswith("file://")


def local_only(path: str | Path, what: str) -> None:
    """Refuse a URL where only a local file is read, naming it (Path() would fold `s3://b/m` into
    `s3:/b/m`, and the error said "not found" of a path that exists)."""
    from pretrain.errors import UserError

    if is_url(path):
        raise UserError(f"{what} {path}: a URL, and only a local file is read here; copy it first "
                        f"(e.g. `aws s3 cp {path} .` or `fsspec`), then name the copy")


def join(base: str | Path, *parts: str) -> str:
    """`base/part/...` for a local path or a URL (Path() would fold a URL's `//`)."""
    if is_url(base):
        return "/".join([str(base).rstrip("/"), *parts])
    return str(Path(base, *parts))


def url_fs(url: str):
    """(filesystem, path inside it) for a URL; credentials come from the environment as usual."""
    import fsspec

    return fsspec.core.url_to_fs(url)


def exists(path: str | Path) -> bool:
    if is_url(path):
        fs, p = url_fs(str(path))
        return fs.exists(p)
    return Path(path).exists()


def remove(path: str | Path) -> None:
    """Remove a file or object if it is there."""
    if is_url(path):
        fs, p = url_fs(str(path))
        try:
            fs.rm_file(p)
        except FileNotFoundError:
            pass
        return
    Path(path).unlink(missing_ok=True)


def read_bytes(path: str | Path) -> bytes:
    if is_url(path):
        fs, p = url_fs(str(path))
        return fs.cat_file(p)
    return Path(path).read_bytes()


_umask_lock = threading.Lock()
_umask: int | None = None


def file_mode() -> int:
    """0666 less the process umask: the mode `open(path, "w")` would have given."""
    global _umask
    if _umask is None:
        with _umask_lock:  # os.umask can only be read by setting it: do it once, under a lock
            old = os.umask(0o022)
            os.umask(old)
            _umask = old
    return 0o666 & ~_umask


@contextlib.contextmanager
def atomic_path(path: str | Path, tmp_dir: str | Path | None = None) -> Iterator[Path]:
    """Yield a temporary path (beside `path`, or in `tmp_dir` on the same filesystem); on success
    fsync it, give it the umask's mode and rename it over `path`. For a URL, upload it whole."""
    if is_url(path):
        with _upload_path(str(path), tmp_dir) as tmp:
            yield tmp
        return
    path = Path(path)
    fd, tmp = _temp_beside(path, Path(tmp_dir) if tmp_dir is not None else path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        with open(tmp_path, "rb") as f:
            os.fsync(f.fileno())
        os.chmod(tmp_path, file_mode())  # mkstemp makes 0600 whatever the umask
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def _temp_beside(path: Path, where: Path) -> tuple[int, str]:
    """A temporary file in `where` for `path`; a `path` that is a folder, or a place that cannot be
    written, is the user's error in one line (`pretrain ... -o DIR` for a file), not a traceback."""
    from pretrain.errors import UserError

    if path.is_dir():
        raise UserError(f"{path} is a folder: give the file to write")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        where.mkdir(parents=True, exist_ok=True)
        return tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=where)
    except OSError as e:
        raise UserError(f"cannot write {path}: {e.strerror or e}") from e


_batch = threading.local()  # the pending uploads of `uploads_together`, per thread


@contextlib.contextmanager
def _upload_path(url: str, tmp_dir: str | Path | None) -> Iterator[Path]:
    if tmp_dir is not None:
        Path(tmp_dir).mkdir(parents=True, exist_ok=True)
    name = url.rstrip("/").rsplit("/", 1)[-1]
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=tmp_dir)
    os.close(fd)
    tmp_path = Path(tmp)
    pending = getattr(_batch, "pending", None)
    try:
        yield tmp_path
        if pending is not None:  # uploaded at the end of the block, with the unit's others
            pending.append((tmp_path, url))
            tmp_path = None
            return
        fs, p = url_fs(url)
        fs.put_file(str(tmp_path), p)  # one whole object: visible complete or not at all
    finally:
        if tmp_path is not None:
            tmp_path.unlink(missing_ok=True)


@contextlib.contextmanager
def uploads_together() -> Iterator[None]:
    """URL targets committed inside the block are uploaded when it ends without an error, all at
    once (fsspec's `put` of a list runs them concurrently on an async filesystem such as s3fs).
    Each still becomes visible whole, so a caller writes its done marker after the block; on an
    error nothing is uploaded. Local targets are renamed into place as usual."""
    with collect_uploads() as pending:
        yield
    upload_pending(pending)


@contextlib.contextmanager
def collect_uploads() -> Iterator[list[tuple[Path, str]]]:
    """Like `uploads_together`, but the block's uploads are left to the caller: pass the list to
    `upload_pending` (now, or from another thread), then write the marker. On an error inside
    the block the temporary files are removed and nothing is uploaded."""
    if getattr(_batch, "pending", None) is not None:  # nested: the outermost block collects
        yield []
        return
    _batch.pending = pending = []
    try:
        yield pending
    except BaseException:
        discard_pending(pending)
        raise
    finally:
        _batch.pending = None


def upload_pending(pending: list[tuple[Path, str]]) -> None:
    """Upload collected (temporary file, URL) pairs, concurrently per filesystem; the temporary
    files are removed whatever happens."""
    try:
        by_fs: dict[int, tuple[Any, list[str], list[str]]] = {}
        for tmp, url in pending:
            fs, p = url_fs(url)
            entry = by_fs.setdefault(id(fs), (fs, [], []))
            entry[1].append(str(tmp))
            entry[2].append(p)
        for fs, local, remote in by_fs.values():
            fs.put(local, remote)
    finally:
        discard_pending(pending)


def discard_pending(pending: list[tuple[Path, str]]) -> None:
    for tmp, _ in pending:
        tmp.unlink(missing_ok=True)


def write_bytes_atomic(path: str | Path, data: bytes, tmp_dir: str | Path | None = None) -> None:
    with atomic_path(path, tmp_dir) as tmp:
        tmp.write_bytes(data)


def write_json_atomic(path: str | Path, obj: Any, tmp_dir: str | Path | None = None) -> None:
    data = (json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()
    write_bytes_atomic(path, data, tmp_dir)


def create_json(path: str | Path, obj: Any, tmp_dir: str | Path | None = None) -> bool:
    """Write `obj` at `path` only if nothing is there; False when something is. On an object store
    the PUT carries `If-None-Match: *` (S3's conditional write), so of two hosts that both saw no
    object, one wins and the other is told, where a check then a write would let the second
    replace the first. A store whose client cannot do it, or a local path, is written as before
    (locally, the attempt lock in the work folder already orders the writers of one host)."""
    if not is_url(path):
        write_json_atomic(path, obj, tmp_dir)
        return True
    data = (json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()
    fs, p = url_fs(str(path))
    try:
        fs.pipe_file(p, data, mode="create")
    except FileExistsError:
        return False
    except Exception:
        # No conditional write here: a client without `mode` (TypeError) or too old a botocore
        # for the header (its ParamValidationError), a store answering 501 or 400 (s3fs: OSError)
        # or a 412 that does not name the condition. Decide by looking, as before this existed
        # (a store that is down fails the look too, and that error is the one the user sees).
        if fs.exists(p):
            return False
        write_bytes_atomic(path, data, tmp_dir)
    return True


def dumps_line(obj: Any) -> bytes:
    """One JSONL line: compact separators, UTF-8 unescaped. orjson writes it ~4x faster than the
    stdlib, byte for byte the same except some floats' spelling (1e-7 for 1e-07: the same value) and
    NaN (null); the stdlib takes what orjson refuses (integers beyond 64 bits, non-string keys).
    Reading stays with the stdlib: orjson parses integers beyond 64 bits as floats, silently."""
    try:
        return orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError:
        return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


class _NothingWritten(Exception):
    """Thrown into `atomic_path` to drop the temporary file of a writer that got no record."""


class JsonlZstWriter:
    """`write(record)` one at a time; the file appears whole at `path` when the `with` block ends
    without an error (nothing appears otherwise). Memory stays at the compressor's window.

    `keep_empty=False`: a writer that got no record leaves no file (and removes one an earlier run
    left at `path`), as datatrove's writers open a rank's file at its first document. A corpus
    folder then holds no 13-byte zstd frame of nothing, which every reader, ours included, would
    report as an empty file (docs/decisions.md, 2026-12-02)."""

    def __init__(self, path: str | Path, tmp_dir: str | Path | None = None, keep_empty: bool = True):
        self.path, self.tmp_dir, self.keep_empty, self.count = path, tmp_dir, keep_empty, 0

    def __enter__(self) -> JsonlZstWriter:
        self._atomic = atomic_path(self.path, self.tmp_dir)
        tmp = self._atomic.__enter__()
        self._raw = open(tmp, "wb")
        cctx = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=True)
        self._w = cctx.stream_writer(self._raw, closefd=False)
        return self

    def write(self, rec: dict) -> None:
        self._w.write(dumps_line(rec))
        self.count += 1

    def __exit__(self, *exc) -> None:
        try:
            self._w.close()
            self._raw.close()
        except BaseException as e:  # a failed flush must not commit a short file
            self._atomic.__exit__(type(e), e, e.__traceback__)
            raise
        if exc[0] is None and self.count == 0 and not self.keep_empty:
            self._atomic.__exit__(_NothingWritten, _NothingWritten(), None)  # the temporary goes
            remove(self.path)
            return
        self._atomic.__exit__(*exc)


def write_jsonl_zst(path: str | Path, records: Iterable[dict], tmp_dir: str | Path | None = None) -> int:
    """Write records as zstd-compressed JSONL atomically; returns the count.

    The compressor is single-threaded with a fixed level, so the bytes depend only on the records.
    """
    with JsonlZstWriter(path, tmp_dir) as w:
        for rec in records:
            w.write(rec)
    return w.count


def _open_rb(path: str | Path, block_size: int | None = None):
    """`block_size`: bytes an object's reads fetch ahead (s3fs's default, 50 MiB, is the first GET
    of a reader that may want only the first records; None keeps the store's default)."""
    if is_url(path):
        if block_size:
            fs, inner = url_fs(str(path))
            return fs.open(inner, "rb", block_size=block_size)
        import fsspec

        return fsspec.open(str(path), "rb").open()
    return open(path, "rb")


def read_jsonl_zst(path: str | Path, max_line: int | None = None, on_bad=None,
                   max_bytes: int | None = None, block_size: int | None = None) -> Iterator[dict]:
    """Read a zstd JSONL file written by `write_jsonl_zst` (a local path or a URL).

    With `max_line` (a file someone else wrote: a corpus folder handed to `pretrain report`), lines
    are read one bounded line at a time and a bad one (over `max_line`, not JSON, nested too deep,
    not an object) goes to `on_bad(line number, reason)` and is skipped; reading stops after
    `max_bytes` decompressed bytes. Without it, our own file: any bad line raises. `block_size`:
    see `_open_rb`."""
    if max_line is not None:
        from pretrain import untrusted

        with _open_rb(path, block_size) as raw, zstandard.ZstdDecompressor().stream_reader(raw) as r:
            yield from untrusted.jsonl_objects(untrusted.buffered(r), max_line,
                                               on_bad or untrusted.ignore_bad_line, max_bytes)
        return
    with _open_rb(path) as raw:
        dctx = zstandard.ZstdDecompressor()
        with dctx.stream_reader(raw) as r:
            for line in io.TextIOWrapper(r, encoding="utf-8"):
                if line.strip():
                    yield json.loads(line)


def done_marker(path: str | Path) -> Path:
    return Path(str(path) + ".done")


def mark_done(path: str | Path, info: dict, marker: str | Path | None = None) -> None:
    write_json_atomic(marker or done_marker(path), info)


def is_done(path: str | Path, config_hash: str, marker: str | Path | None = None,
            settings: dict | None = None) -> bool:
    """True when `path` has a done marker (`marker`, default `PATH.done`) written under the same hash.

    A marker from another config raises: mixing outputs of two configs is never silent. The
    refusal names the settings that changed (old -> new) when the marker recorded its `settings`
    and the caller gives this run's; else (an older marker) the two hashes.
    """
    return done_info(path, config_hash, marker, settings) is not None


def done_info(path: str | Path, config_hash: str, marker: str | Path | None = None,
              settings: dict | None = None) -> dict | None:
    """What the done marker of `path` recorded when `is_done` (read once: a caller that wants its
    counts too need not read it again); None when not done (no marker, or an unreadable one)."""
    marker = Path(marker or done_marker(path))
    try:
        info = json.loads(marker.read_text())  # no exists() first: one read, and no race with a delete
    except (OSError, json.JSONDecodeError):  # missing, or cut short: not done, the work runs again
        return None
    if not isinstance(info, dict):
        return None
    then = info.get("job_hash", info.get("config_hash"))
    if then != config_hash:
        from pretrain.config import describe_changes
        from pretrain.errors import UserError

        shown = describe_changes(info["settings"], settings) if isinstance(info.get("settings"), dict) and \
            settings is not None else ""
        what = f"a different job ({shown or f'{then} != {config_hash}'})"
        raise UserError(f"{path} was written by {what}; use a new output directory or remove the old one")
    return info
