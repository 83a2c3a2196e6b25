"""Which version of each input a corpus job read: recorded in OUT/plan.json, checked on every read.

The job's identity (job.identity) holds each input's path and size; a rewrite of the same size
(a re-crawl, a fixed encoding) kept both, so a resumed job mixed shards of the old and the new
version. This module owns the finer stamp, kept in plan.json's `versions` beside the identity,
never inside its hash (the hash of every job already in a bucket stays what it was):

- an object: its ETag, from the listing the job makes anyway (no request per object); where a
  store lists none, its version id (GCS generation), else its last-modified time;
- a local file: `mtime_ns` from the `stat` that gives its size (no file is hashed: a touch of the
  same bytes is taken for a rewrite; the refusal says how to go on).

A rerun compares this attempt's listing with plan.json's stamps before it runs anything; each
shard compares again when it reads its input: a local file by `stat`, an S3 object by the ETag
of the GET that downloads it (the body is not read when it differs). A plan.json written before
stamps were recorded resumes as before, said once, with this attempt's listing as the stamps.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

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


def differs(then: object, now: dict | None) -> bool:
    """A recorded stamp and this attempt's disagree. Compared only when both are of one kind: a
    client that lists ETags now and listed last-modified times before has not seen a change."""
    return isinstance(then, dict) and bool(then) and bool(now) and then.keys() == now.keys() and now != then


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
        if differs(then, now):
            raise changed(path, then, now)
    return {**versions, **{p: v for p, v in recorded.items() if isinstance(v, dict)}}


def check_local(path: str | Path, stamp: dict | None) -> None:
    """Refuse a local input whose mtime differs from the stamp (its size is checked beside)."""
    if not stamp or "mtime_ns" not in stamp:
        return
    now = of_local(Path(path).stat())
    if now["mtime_ns"] != stamp["mtime_ns"]:
        raise changed(str(path), stamp, now)


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
