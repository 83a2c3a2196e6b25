"""What a corpus job's output looks like from the input side: which listed files are outputs.

A job's OUT (see job.py) holds `plan.json` (its identity: job, inputs, hash), `data/` (the corpus),
`rejects/` (the documents it dropped) and `work/` (markers, intermediate copies). When inputs are
listed, two kinds of file must not be read as corpus:
- **this job's own outputs**, when OUT lies inside an input folder (`pretrain dedup corpus/ -o
  corpus/deduped`): read back, they would make the rerun another job, refused;
- **another job's rejects and work files**, when its OUT is named as an input folder (`pretrain
  dedup corpus/` after `pretrain curate -o corpus/`): the dropped documents would come back in.
  Only its `data/` is corpus, as if the user had named `corpus/data`.
The same names tell which open multipart uploads under an s3:// OUT a killed attempt left
(`abort_open_uploads`). `check_writable` probes OUT before any work, and removes the probe a
killed attempt left.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from pathlib import Path

from pretrain.curate import io
from pretrain.errors import UserError, storage_error
from pretrain.progress import count

# plan.json's own bound (every other small JSON keeps untrusted.MAX_SMALL_FILE, 64 MiB): a job
# identity holds a path, a size and a version per input, ~380 bytes each for Common Crawl's WARC
# URLs (measured, tests/test_s3_versions.py), so 64 MiB was ~176k inputs; 1 GiB is ~2.8 M (a
# 1M-file crawl prefix: 384 MB). Past it a file is not taken for a job's identity.
MAX_PLAN_BYTES = 1 << 30
_OWN_OUTPUT = re.compile(r"(data/shard|rejects/(filters|dedup))_\d{5,}\.jsonl\.zst")  # f"{shard:05d}"


def abort_open_uploads(out: str) -> int:
    """Abort the multipart uploads left open under an s3:// OUT to this job's own output names
    (a SIGKILL between the parts of a file over s3fs's 2 x 50 MiB leaves one, billed until
    aborted); returns how many. Other stores and other keys are left alone. Called by the next
    attempt of the same job under its attempt lock, before it uploads anything; best effort: a
    policy without ListBucketMultipartUploads skips it."""
    fs, path = io.url_fs(out)
    if not hasattr(fs, "call_s3"):
        return 0
    bucket, _, prefix = path.rstrip("/").partition("/")
    prefix = f"{prefix}/" if prefix else ""
    aborted, marker = 0, {}
    try:
        while True:
            page = fs.call_s3("list_multipart_uploads", Bucket=bucket, Prefix=prefix, **marker)
            for up in page.get("Uploads", []):
                if _OWN_OUTPUT.fullmatch(up["Key"][len(prefix):]):
                    fs.call_s3("abort_multipart_upload", Bucket=bucket, Key=up["Key"],
                               UploadId=up["UploadId"])
                    aborted += 1
            if not page.get("IsTruncated"):
                return aborted
            marker = {"KeyMarker": page["NextKeyMarker"], "UploadIdMarker": page["NextUploadIdMarker"]}
    except Exception:  # cleanup only: the job's own uploads do not depend on it
        return aborted


def is_job_identity(raw: bytes) -> bool:
    """Whether a plan.json's bytes are a corpus job's identity (OUT/plan.json, see job.py); a
    planner's `plan --json` output is not one."""
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return False
    return isinstance(obj, dict) and {"job", "hash", "inputs"} <= obj.keys()


def is_own_output(f: str, out: str, work: Path) -> bool:
    """A file this job writes (OUT/data/shard_*, OUT/rejects/*, anything in the work folder)."""
    if io.is_url(f) or io.is_url(out):
        prefix = out.rstrip("/") + "/"
        return f.startswith(prefix) and bool(_OWN_OUTPUT.fullmatch(f[len(prefix):]))
    path = Path(f).resolve()
    if work.resolve() in path.parents:
        return True
    root = Path(out).resolve()
    return root in path.parents and bool(_OWN_OUTPUT.fullmatch(path.relative_to(root).as_posix()))


def job_data_only(plans: list[Path], files: list[Path], own_out: str | None = None) -> list[Path]:
    """`files` of a folder less the rejects/ and work/ of every job OUT in it (`plans`: the
    plan.json files found in the same walk); one line on stderr when another job's were left out."""
    outs = [plan.parent for plan in plans if _is_job_plan(plan)]
    kept = [f for f in files if not any(o in f.parents and o / "data" not in f.parents for o in outs)]
    own = Path(own_out).resolve() if own_out else None
    if len(kept) < len(files) and any(o.resolve() != own for o in outs):  # the job's own OUT: no news
        print(f"pretrain: {outs[0]} is a corpus job's output: reading its data/ only "
              f"({count(len(files) - len(kept), 'file')} of rejects/ and work/ skipped)", file=sys.stderr)
    return kept


def is_job_plan_file(plan: Path) -> bool:
    """Whether a local plan.json (someone's folder among the inputs, or -o) is a corpus job's
    identity: read through `untrusted.load_json`, its values counted from disk before it is read
    (up to MAX_PLAN_BYTES: 60 MB of `"inputs": [0,0,...]` took ~360 MB read and parsed whole)."""
    from pretrain import untrusted

    try:
        obj = untrusted.load_json(plan, MAX_PLAN_BYTES)
    except ValueError:  # BadFile: missing, not a file, too big, too many values, not JSON
        return False
    return isinstance(obj, dict) and {"job", "hash", "inputs"} <= obj.keys()


def _is_url_job_plan(fs, path: str, chunk: int = 1 << 20) -> bool:
    """`is_job_plan_file` of an object: its values counted a `chunk` at a time (ranged GETs: one
    for a plan of our own size) before it is read whole."""
    from pretrain import untrusted

    size, most = fs.size(path), MAX_PLAN_BYTES // untrusted.BYTES_PER_VALUE
    if size >= MAX_PLAN_BYTES:
        return False
    if size > chunk and sum(untrusted.json_elements(fs.cat_file(path, start=at, end=min(at + chunk, size)))
                            - 1 for at in range(0, size, chunk)) + 1 > most:
        return False
    raw = fs.cat_file(path)
    return untrusted.json_elements(raw) <= most and is_job_identity(raw)


def _is_job_plan(plan: Path) -> bool:
    return is_job_plan_file(plan) and (plan.parent / "data").is_dir()


def url_job_data_only(fs, hits: list[str], every: list[str]) -> list[str]:
    """`job_data_only` for the objects under a URL prefix (`every`: all of them, `hits`: the
    readable ones). A job whose shards all kept nothing has no object under data/ (no empty
    shards are written): its rejects/ or stats.json mark it too."""
    outs = [p[: -len("/plan.json")] for p in every if p.endswith("/plan.json")]
    outs = [o for o in outs if any(h.startswith((f"{o}/data/", f"{o}/rejects/")) or h == f"{o}/stats.json"
                                   for h in every)
            and _is_url_job_plan(fs, f"{o}/plan.json")]
    return [h for h in hits
            if not any(h.startswith(f"{o}/") and not h.startswith(f"{o}/data/") for o in outs)]


# what a job writes at OUT's top
JOB_FILES = ("config.toml", "stats.json", "decontam_report.json", "README.md")


def refuse_foreign(out: str) -> None:
    """A local OUT without a job's plan.json must not hold what a job writes: its config.toml or
    stats.json would be overwritten, and files of its own in data/ or rejects/ would sit among the
    corpus shards (`load_dataset("json", data_dir=...)` then fails on them). Checked before anything
    is written. A bucket OUT is not listed for this (a request per job start)."""
    if io.is_url(out) or (Path(out) / "plan.json").exists() or not Path(out).is_dir():
        return
    root = Path(out)
    kind = _other_kind(root)
    if kind:
        raise UserError(f"{out} is {kind}, not a corpus job's output: use a new or empty --output")
    found = [name for name in JOB_FILES if (root / name).exists()]
    for sub in ("data", "rejects"):
        try:
            found += [f"{sub}/{n}" for n in sorted(os.listdir(root / sub))]
        except NotADirectoryError:
            found.append(sub)
        except OSError:
            pass
    if found:
        shown = ", ".join(found[:3]) + (", ..." if len(found) > 3 else "")
        raise UserError(f"{out} holds files that are not a pretrain job's ({shown}); a job would overwrite "
                        "or mix with them: use a new or empty --output")


def _other_kind(root: Path) -> str:
    """What another command made `root` ("" when none): a token directory (`pretrain tokenize`:
    manifest.json) or a training run (`pretrain train`: metrics.jsonl or checkpoints/). Said by name,
    as `pretrain tokenize` says it of a corpus OUT, since "holds files that are not a pretrain job's"
    read as if the folder were a stranger's."""
    if _is_token_manifest(root / "manifest.json") or any(root.glob("shard_*.idx")):  # (or a killed one)
        return "a token directory (made by `pretrain tokenize`: manifest.json, shards)"
    if (root / "metrics.jsonl").is_file() or (root / "checkpoints").is_dir():
        return "a training run's folder (made by `pretrain train`: metrics.jsonl, checkpoints/)"
    return ""


def _is_token_manifest(path: Path) -> bool:
    from pretrain.tokens.shards import FORMAT  # (a light module: numpy and json)

    try:
        raw = path.read_bytes() if path.stat().st_size < MAX_PLAN_BYTES else b""
        return json.loads(raw).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        return False


PROBE = ".write-probe"
_PROBE_NAME = re.compile(r"\.write-probe(\.[A-Za-z0-9_]+)?")


def _sweep_probes(out: Path) -> None:
    """Remove the write probes a SIGKILLed attempt left in OUT (0-byte files); regular files only."""
    for p in out.glob(PROBE + "*"):
        if _PROBE_NAME.fullmatch(p.name) and p.is_file() and not p.is_symlink():
            p.unlink(missing_ok=True)  # missing: an attempt starting alongside removed it first


def check_writable(out: str, work: Path) -> None:
    """Fail in one line before any work when OUT (or the work folder) cannot be written. On an
    object store the probe is one fixed key (no links there): a killed attempt's is overwritten and
    removed by the next one."""
    probe = io.join(out, PROBE)
    try:
        work.mkdir(parents=True, exist_ok=True)
        if io.is_url(out):
            fs, path = io.url_fs(probe)
            fs.pipe_file(path, b"")
            fs.rm_file(path)
            return
        Path(out).mkdir(parents=True, exist_ok=True)
        _sweep_probes(Path(out))
        # mkstemp opens with O_EXCL: never through a link someone named .write-probe (a run
        # directory handed over with `.write-probe -> ~/.bashrc` had that file emptied), and a
        # name of its own, so two attempts starting together do not remove each other's probe
        fd, tmp = tempfile.mkstemp(dir=out, prefix=PROBE + ".")
        os.close(fd)
        os.unlink(tmp)
    except Exception as e:  # OSError locally; the object store's client raises its own kinds
        why = storage_error(e) or (getattr(e, "strerror", None) or str(e).splitlines()[0] if str(e)
                                   else type(e).__name__)
        raise UserError(f"cannot write to output directory {out}: {why}") from e
