"""Which version of each input a corpus job read: recorded in OUT/plan.json, checked on every read.

The job's identity (identity.identity) holds each input's path and size; a rewrite of the same size
(a re-crawl, a fixed encoding) kept both, so a resumed job mixed shards of the old and the new
version. This module owns the finer stamp, kept in plan.json's `versions` beside the identity,
never inside its hash (the hash of every job already in a bucket stays what it was):

- an object: its ETag, from the listing the job makes anyway (no request per object); where a
  store lists none, its version id (GCS generation), else its last-modified time;
- a local file: `mtime_ns` from the `stat` that gives its size in plan.json; and, in the done
  marker of the unit that read it, its size, mtime and content hash (`xxh3_128` of its bytes,
  taken just before the unit reads it). A rerun trusts a file whose size and mtime are the
  marker's (no read); a new mtime at the same size is hashed: the same bytes (a `touch`, `cp`,
  `make`, a pipeline that writes its inputs anew) take the new mtime into the marker silently,
  other bytes are refused in one line. A unit not yet done has read nothing: nothing to check.
  A marker without a hash (an older pretrain) resumes: one note when its mtime moved, then the
  file is hashed and the marker upgraded (`settle`).

A rerun compares this attempt's listing with plan.json's stamps (an object's) and each finished
unit's marker (a local file's) before it runs anything; an object is compared again by the ETag
of the GET that downloads it (the body is not read when it differs). A plan.json written before
stamps were recorded resumes as before, said once, with this attempt's listing as the stamps.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import xxhash

from pretrain.errors import UserError

# (key in an fsspec listing entry, what plan.json calls it), first found wins: s3fs gives ETag
# (and LastModified), gcsfs etag and generation, memory:// only its creation time.
_STAMPS = (("ETag", "etag"), ("etag", "etag"), ("VersionId", "version_id"), ("generation", "version_id"),
           ("LastModified", "last_modified"), ("updated", "last_modified"), ("mtime", "last_modified"),
           ("created", "last_modified"))


def of_listing(info: dict) -> dict | None:
    """The stamp of one object from its listing entry, or None when the store gives none."""
    for key, name in _STAMPS:
        value = info.get(key)
        if value not in (None, ""):
            return {name: str(value)}
    return None


def of_local(st: os.stat_result) -> dict:
    return {"mtime_ns": st.st_mtime_ns}


def describe(stamp: dict | None) -> str:
    if not stamp:
        return "none"
    return ", ".join(f"{name} {value}" for name, value in stamp.items())


def changed(path: str, then: dict, now: dict | None) -> UserError:
    return UserError(f"{path}: changed since this job listed it ({describe(then)} then, {describe(now)} "
                     "now); restore it, or run the new version into a new --output")


_TOUCHED: set[str] = set()
HASH_BLOCK = 8 << 20  # bytes per read while hashing: measured in docs/decisions.md (session 8)


def differs(then: object, now: dict | None, path: str = "") -> bool:
    """A recorded stamp and this attempt's disagree. Compared only when both are of one kind: a
    client that lists ETags now and listed last-modified times before has not seen a change. A
    local file's new mtime alone is not a difference: its unit's marker decides (`settle`)."""
    if not (isinstance(then, dict) and then and now and then.keys() == now.keys() and now != then):
        return False
    return set(then) != {"mtime_ns"}


def touched(path: str) -> None:
    """Say once per file and process that an input whose unit's marker holds no content hash (an
    older pretrain) has a new mtime at the same size: it is taken as the same bytes, once."""
    if path and path not in _TOUCHED:
        _TOUCHED.add(path)
        print(f"pretrain: note: {path} was modified since this job read it (same size) and its marker, "
              "written by an older pretrain, holds no content hash: taken as the same bytes, hash "
              "recorded now; if its content changed, run it into a new output", file=sys.stderr)


def content(path: str | Path) -> str:
    """xxh3_128 of a file's bytes (hex)."""
    h = xxhash.xxh3_128()
    with open(path, "rb") as f:
        while block := f.read(HASH_BLOCK):
            h.update(block)
    return h.hexdigest()


def of_read(path: str | Path) -> dict:
    """The stamp a unit records for the local file it is about to read: size, mtime, content hash.
    A file rewritten while it was hashed is refused (its stat moved)."""
    before = Path(path).stat()
    digest = content(path)
    now = Path(path).stat()
    if (now.st_size, now.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
        raise UserError(f"{path}: rewritten while this job read it; rerun once it is written")
    return {"size": now.st_size, "mtime_ns": now.st_mtime_ns, "xxh3_128": digest}


def unchanged(path: str | Path, stamp: dict) -> None:
    """Refuse a local file whose size or mtime moved since `stamp` (of_read) was taken: it was
    rewritten while its unit read it, so the recorded hash is not of the bytes read."""
    st = Path(path).stat()
    if (st.st_size, st.st_mtime_ns) != (stamp["size"], stamp["mtime_ns"]):
        raise UserError(f"{path}: rewritten while this job read it; rerun once it is written")


def settle(path: str | Path, then: dict | None, way: str = "run the new version into a new --output") -> dict:
    """The stamp a finished unit's marker should hold for the local file it read (`then`, its
    recorded stamp): `then` itself when size and mtime agree (nothing read), with the new mtime
    when the bytes hash the same, a fresh of_read for a marker without a hash (an older pretrain:
    said once when its mtime moved). Other bytes, or another size, are refused naming `way` on."""
    st = Path(path).stat()
    then = then if isinstance(then, dict) else {}
    if "xxh3_128" not in then:
        if "mtime_ns" in then and then["mtime_ns"] != st.st_mtime_ns:
            touched(str(path))
        return of_read(path)
    if st.st_size != then.get("size"):
        raise UserError(f"{path}: changed since this job read it ({then.get('size'):,} bytes then, "
                        f"{st.st_size:,} now); restore it, or {way}")
    if st.st_mtime_ns == then.get("mtime_ns"):
        return then
    now = of_read(path)
    if now["xxh3_128"] != then["xxh3_128"]:
        raise UserError(f"{path}: its bytes changed since this job read it (same size, xxh3_128 "
                        f"{then['xxh3_128'][:16]} then, {now['xxh3_128'][:16]} now); restore it, or {way}")
    return {**then, "mtime_ns": now["mtime_ns"]}


def check_rerun(old_plan: dict, versions: dict[str, dict]) -> dict[str, dict]:
    """The stamps shards check against: plan.json's, after refusing any input whose stamp in this
    attempt's listing differs; this listing's for a plan.json that recorded none (said once)."""
    recorded = old_plan.get("versions")
    if not isinstance(recorded, dict):
        print("pretrain: this job's plan.json records no input versions (written by an older pretrain): "
              "a same-size rewrite of an input before this attempt is not detected; resuming",
              file=sys.stderr)
        return versions
    for path, now in versions.items():
        then = recorded.get(path)
        if differs(then, now, path):
            raise changed(path, then, now)
    return {**versions, **{p: v for p, v in recorded.items() if isinstance(v, dict)}}


def check_local(path: str | Path, stamp: dict | None,
                way: str = "run the new version into a new --output") -> None:
    """Refuse a local input whose bytes are no longer those a unit recorded (`settle`): a unit
    reading it again (stage C of a dedup job) would mix two versions."""
    if stamp and "mtime_ns" in stamp:
        settle(path, stamp, way)


def download(fs, path: str, local: Path, url: str, stamp: dict | None) -> None:
    """Copy one object to `local`; an S3 object whose GET answers another ETag than `stamp` is
    refused before its body is read (the ETag comes with the GET: no other request)."""
    if not stamp or "etag" not in stamp or not _is_s3(fs):
        fs.get_file(path, str(local))
        return
    from fsspec.asyn import sync

    for attempt in range(3):  # s3fs's get_file retries a body cut mid-way; so does this
        try:
            got = sync(fs.loop, _get_if_same, fs, path, local, stamp["etag"])
            break
        except _transient():
            if attempt == 2:
                raise
    if got != stamp["etag"]:
        local.unlink(missing_ok=True)
        raise changed(url, stamp, {"etag": got})


def _transient() -> tuple[type[BaseException], ...]:
    """A connection dropped while the body streamed (the client's own retries cover the request)."""
    try:
        from aiohttp import ClientConnectionError, ClientPayloadError
    except ImportError:
        return (TimeoutError, ConnectionResetError)
    return (TimeoutError, ConnectionResetError, ClientPayloadError, ClientConnectionError)


def _is_s3(fs) -> bool:
    return type(fs).__module__.split(".")[0] == "s3fs" and hasattr(fs, "_call_s3")


async def _get_if_same(fs, path: str, local: Path, etag: str) -> str | None:
    """The object's bytes into `local` when its ETag is `etag`; returns the ETag it answered."""
    bucket, key, version = fs.split_path(path)
    kw = {"VersionId": version} if version else {}
    resp = await fs._call_s3("get_object", Bucket=bucket, Key=key, **kw, **fs.req_kw)
    body = resp["Body"]
    try:
        if resp.get("ETag") != etag:
            return resp.get("ETag")
        with open(local, "wb") as f:
            while chunk := await body.read(1 << 20):
                f.write(chunk)
    finally:
        body.close()
    return etag
