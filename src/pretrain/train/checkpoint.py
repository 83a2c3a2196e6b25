"""Checkpoints: torch.distributed.checkpoint (DCP) save/load of everything a run needs to continue.

RUN/checkpoints/step_NNNNNNN/ holds DCP's files (model and optimizer, keyed by parameter name, so a
later run may load them under another parallel layout), `state_rank{r}.json` (step, schedule, data
position, RNG states, loss scaler, spike detector: plain JSON, no pickle) and, written last,
`COMPLETE.json` listing every file's size and the xxh3-128 digest of its bytes. A directory without
the marker, or whose files do not match its sizes (a truncated write), is ignored and the previous
checkpoint is used. The digests are checked at every load (`verify`): a file whose bytes changed
after the save (a disk or copy error) refuses the checkpoint in one line naming the file; an
automatic resume then falls back to the previous complete checkpoint that verifies (the trainer).
Each rank digests the files it wrote (its `__{rank}_N.distcp`, its state file; rank 0 DCP's
`.metadata`) after its write finished, in the save's background thread for an async save; rank 0
gathers them into the marker, written last, in that same thread: an async save is usable from the
moment its write ends on every rank, not from when the training loop next notices it. A checkpoint
saved before digests existed loads with a warning.

Async saves copy the state and write it in a background thread; the trainer only waits for the copy
before its next optimizer step (`fence()`), so the copy overlaps forward and backward. Under
torch.distributed they use their own gloo group, because sharing the training group aborts with a
gloo collective mismatch (reference/torch_distributed_on_cpu.md).
DCP's `.metadata` and non-tensor values are pickles (PyTorch's format); loads read them through
`safe_dcp`, which admits only DCP's own classes and plain data, so a run directory handed over by
someone else cannot run code when resumed, sampled or exported.

Object storage: a root given as an fsspec URL (`checkpoint.storage = "s3://bucket/run"`) is written
and read through DCP's FsspecWriter/FsspecReader, and the JSON files, the marker, listing and
pruning go through the same fsspec filesystem (credentials and endpoint from the environment, as
botocore reads them). An object PUT is atomic, so the marker written last keeps its meaning.

How often: Young (1974), T* = sqrt(2 C M), with C the measured blocking save time and M the MTBF.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import xxhash
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict

from pretrain.errors import UserError

MARKER = "COMPLETE.json"
# The skips a rollback decided live only in memory until the next checkpoint saves them with the
# loader's state; a kill in between made the rerun re-read the bad batches and roll back again.
# This file in the checkpoint root holds them (and the count max_rollbacks caps) from the moment of
# the rollback; a resume adds them to what the checkpoint restores.
LEDGER = "rollbacks.json"
MAX_LEDGER_RANGES = 100_000
# Young's interval is measured by the first save, after that save's state file is written: the first
# checkpoint holds no interval, so a run killed before its second save measured again on resume (and
# saved at other steps than a run never stopped). Rank 0 writes the measured interval here as soon as
# it is known; a resume from a checkpoint without one reads it.
INTERVAL = "save_interval.json"
# DCP warns on every save/load without a process group, even when told no_dist=True; on one process
# that is the intent. The filter names that one message (the background thread's saves warn too, so
# a per-call catch_warnings, which is not thread-safe, would not do).
warnings.filterwarnings("ignore", message="torch.distributed is disabled, unavailable or uninitialized")
STEP_DIR = re.compile(r"^step_(\d{7,})$")
# The marker's table {file name: hex digest} of every file it lists (xxh3-128: ~10 GB/s of hashing on
# one core, so the read-back, not the hash, is the cost; bench/bench_checkpoint_digest.py).
DIGEST = "xxh3_128"
_HEX = re.compile(r"^[0-9a-f]{32}$")
_CHUNK = 8 << 20
_warned: set[str] = set()


class IntegrityError(UserError):
    """A checkpoint file's bytes differ from the digest recorded when it was saved."""

    def __init__(self, message: str, path, name: str):
        super().__init__(message)
        self.path, self.name = path, name


class RemotePath(str):
    """A checkpoint path in object storage ("s3://bucket/key"): `/` joins, `.name` is the last part."""

    def __truediv__(self, other) -> RemotePath:
        return RemotePath(self.rstrip("/") + "/" + str(other))

    @property
    def name(self) -> str:
        return self.rstrip("/").rsplit("/", 1)[-1]


def as_root(root) -> Path | RemotePath:
    """A local Path, or a RemotePath for an fsspec URL (anything with "://")."""
    if isinstance(root, RemotePath) or "://" in str(root):
        return RemotePath(str(root).rstrip("/"))
    return Path(root)


def _fs(path: RemotePath):
    import fsspec

    return fsspec.core.url_to_fs(str(path), use_listings_cache=False)[0]


def _files(path) -> dict[str, int]:
    """{name: size} of the plain files directly inside a checkpoint directory."""
    if isinstance(path, RemotePath):
        fs = _fs(path)
        if not fs.isdir(path):
            return {}
        return {RemotePath(e["name"]).name: int(e["size"]) for e in fs.ls(path, detail=True)
                if e["type"] == "file"}
    if not path.is_dir():
        return {}
    refuse_links_out(path)
    return {p.name: p.stat().st_size for p in path.iterdir() if p.is_file()}


def refuse_links_out(path: Path) -> None:
    """A checkpoint directory of a run from someone else (docs/security.md: hostile) is read only
    where it is: `step_X -> elsewhere`, or a shard or marker inside it linking out, would have train,
    eval, sample and export read files the run does not hold. One line naming the link
    (run-it-twice review, session 9); links that stay inside the checkpoints folder are kept, and
    so is a checkpoints folder that is itself a link (a run's checkpoints on another disk)."""
    real = path.resolve()
    if real.parent != path.parent.resolve():
        raise UserError(f"{path}: links outside {path.parent} (to {real}); refusing to read it")
    for p in path.iterdir():
        if p.is_symlink() and not p.resolve().is_relative_to(real):
            raise UserError(f"{p}: links outside {path} (to {p.resolve()}); refusing to read the checkpoint")


def _read_text(path) -> str | None:
    """A small JSON file of a checkpoint (the marker, a state), None when absent. A checkpoint
    travels with its run directory: invalid UTF-8 (a UnicodeDecodeError traceback out of `sample`,
    `export` and a resume) becomes U+FFFD, which no JSON reader below accepts; a FIFO or a 10 GB
    file there is refused in one line (untrusted.read_bytes)."""
    from pretrain.untrusted import read_bytes

    if isinstance(path, RemotePath):
        fs = _fs(path)
        return fs.cat_file(path).decode("utf-8", errors="replace") if fs.isfile(path) else None
    if not path.exists():
        return None
    if STEP_DIR.match(path.parent.name):  # a marker or state in a step directory: not read through a link out
        refuse_links_out(path.parent)
    return read_bytes(path, within=path.parent).decode("utf-8", errors="replace")


def _rmtree(path) -> None:
    if isinstance(path, RemotePath):
        fs = _fs(path)
        if fs.exists(path):
            fs.rm(path, recursive=True)
    else:
        shutil.rmtree(path, ignore_errors=True)


def digest_file(path) -> str:
    """The xxh3-128 hex digest of a file's bytes (local or fsspec), read in 8 MiB pieces."""
    h = xxhash.xxh3_128()
    opened = _fs(path).open(path, "rb") if isinstance(path, RemotePath) else open(path, "rb")
    with opened as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def own_digests(path, rank: int) -> dict[str, str]:
    """{name: digest} of the files `rank` wrote into a checkpoint: DCP's data files it names with its
    prefix (`__{rank}_N.distcp`), its state file and, on rank 0, DCP's `.metadata` (the coordinator
    writes it). Called once the write has finished, so the digest is of the bytes on disk."""
    names = _files(path)
    mine = [n for n in names if n.startswith(f"__{rank}_") and n.endswith(".distcp")]
    mine += [f"state_rank{rank}.json"] + ([".metadata"] if rank == 0 else [])
    return {n: digest_file(path / n) for n in mine if n in names}


def _marker_tables(path) -> tuple[dict, dict | None]:
    """(sizes, digests or None) of a complete checkpoint's marker; a digest table of another shape
    (edited, damaged) is an IntegrityError."""
    marker = json.loads(_read_text(path / MARKER) or "{}")
    files, digests = marker.get("files", {}), marker.get(DIGEST)
    if digests is None:
        return files, None
    hexes = digests.values() if isinstance(digests, dict) else [None]
    if not all(isinstance(v, str) and _HEX.match(v) for v in hexes):
        raise IntegrityError(f"{path}/{MARKER}: its {DIGEST} table is not {{file: digest}}; the marker was "
                             "edited or damaged", path, MARKER)
    return files, digests


def verify(path, group=None) -> None:
    """Every file the marker lists has the digest recorded at the save, else IntegrityError naming
    the checkpoint and the first file that differs. With a process group (`group`, gloo), each rank
    reads its share of the files (file i on rank i mod world) and the verdicts are all-gathered, so
    every rank refuses or loads together and the checkpoint is read once, not once per rank. A
    checkpoint saved before digests were recorded loads with a warning (once per directory)."""
    files, digests = _marker_tables(path)
    if digests is None:
        if _rank() == 0 and str(path) not in _warned:
            _warned.add(str(path))
            import sys

            print(f"{path}: warning: saved without digests (before 2026-12, or by another tool); its bytes "
                  "are not checked against the save", file=sys.stderr, flush=True)
        return
    names = sorted(files)
    bad: list[tuple[str, str, str]] = [(n, "none recorded", "") for n in names if n not in digests]
    share = names
    split = group is not None and dist.is_available() and dist.is_initialized()
    if split:
        share = names[dist.get_rank(group):: dist.get_world_size(group)]
    for n in share:
        if n in digests and (got := digest_file(path / n)) != digests[n]:
            bad.append((n, got, digests[n]))
    if split:
        every: list = [None] * dist.get_world_size(group)
        dist.all_gather_object(every, bad, group=group)
        bad = sorted({tuple(b) for part in every for b in part})
    if bad:
        name, got, want = bad[0]
        more = f" (and {len(bad) - 1} more file{'s' * (len(bad) > 2)})" if len(bad) > 1 else ""
        if not want:  # the marker lists the file without its digest: the marker, not the file, changed
            raise IntegrityError(f"{path}: damaged: {MARKER} lists {name} without its digest in "
                                 f"{DIGEST}{more}; the marker was edited or damaged after the save",
                                 path, MARKER)
        raise IntegrityError(f"{path}: damaged: {name} does not match the digest recorded when it was saved "
                             f"({DIGEST} {got[:12]}..., the save recorded {want[:12]}...){more}; its bytes "
                             "changed after the save (a disk or copy error, or an edit)", path, name)


def _no_dist() -> bool:
    """One process without a process group: say so to DCP (it would otherwise warn on every call)."""
    return not (dist.is_available() and dist.is_initialized())


def _load(state: dict, path: Path, group=None) -> None:
    """Every load (resume, rollback, sample, export) checks the files' digests (`verify`), then goes
    through safe_dcp: no pickle runs code; from object storage through DCP's FsspecReader with the
    same checks (`_safe_remote_load`)."""
    verify(path, group)
    if isinstance(path, RemotePath):
        _safe_remote_load(state, path)
        return
    from pretrain.train.safe_dcp import safe_load

    safe_load(state, path, no_dist=_no_dist())


def _safe_remote_load(state: dict, path: RemotePath) -> None:
    """dcp.load through an FsspecReader whose metadata is unpickled by safe_dcp's restricted
    unpickler and checked against the objects' sizes, and safe_dcp's weights-only planner."""

    from torch.distributed.checkpoint._fsspec_filesystem import FsspecReader
    from torch.distributed.checkpoint.metadata import Metadata, StorageMeta

    from pretrain.train.safe_dcp import MAX_METADATA_BYTES, METADATA, SafePlanner, UnsafeCheckpoint, parse

    where = path / METADATA
    sizes = _files(path)
    if sizes.get(METADATA, 0) > MAX_METADATA_BYTES:
        raise UnsafeCheckpoint(f"{where}: refused, {sizes[METADATA]:,} bytes of metadata")
    md = parse(_fs(path).cat_file(where), where)
    for key, info in md.storage_data.items():
        rel, off, n = (getattr(info, a, None) for a in ("relative_path", "offset", "length"))
        ok = isinstance(rel, str) and rel in sizes and isinstance(off, int) and isinstance(n, int)
        if not (ok and off >= 0 and n >= 0 and off + n <= sizes[rel]):
            raise UnsafeCheckpoint(f"{where}: refused, item {getattr(key, 'fqn', key)} points at {rel!r} "
                                   f"[{off}, +{n}), not inside the checkpoint's objects")

    class Reader(FsspecReader):
        def read_metadata(self, *args, **kwargs) -> Metadata:
            if getattr(md, "storage_meta", None) is None:
                md.storage_meta = StorageMeta()
            md.storage_meta.load_id = self.load_id
            return md

    dcp.load(state, storage_reader=Reader(str(path)), planner=SafePlanner(str(path)), no_dist=_no_dist())


def _save(state: dict, path, group=None) -> None:
    if isinstance(path, RemotePath):
        from torch.distributed.checkpoint._fsspec_filesystem import FsspecWriter

        dcp.save(state, storage_writer=FsspecWriter(str(path)), process_group=group, no_dist=_no_dist())
    else:
        dcp.save(state, checkpoint_id=str(path), process_group=group, no_dist=_no_dist())


def step_dir(root: Path, step: int) -> Path:
    return root / f"step_{step:07d}"


def dir_step(path) -> int | None:
    """The step a checkpoint directory is named for (step_NNNNNNN), None for another name."""
    m = STEP_DIR.match(path.name)
    return int(m.group(1)) if m else None


def state_name(path, rank: int = 0) -> str:
    """The state file `read_state(path, rank)` reads: this rank's, else rank 0's."""
    name = f"state_rank{rank}.json"
    return name if rank == 0 or _read_text(path / name) is not None else "state_rank0.json"


def _rank() -> int:
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def _write_json_atomic(path: Path, obj: dict) -> None:
    if isinstance(path, RemotePath):  # one PUT: an object appears whole or not at all
        _fs(path).pipe_file(path, json.dumps(obj).encode())
        return
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_ledger(root, ranges: list, rollbacks: int) -> None:
    """Rank 0, at a rollback: every skipped range so far and the number of rollbacks, atomically."""
    _write_json_atomic(as_root(root) / LEDGER, {"skip": [[int(a), int(b)] for a, b in ranges],
                                                "rollbacks": int(rollbacks)})


def write_interval(root, steps: int, save_s: float, step_s: float, at_step: int) -> None:
    """Rank 0, once Young's rule has measured: the interval in steps and what it was computed from."""
    _write_json_atomic(as_root(root) / INTERVAL, {"save_interval": int(steps), "save_s": float(save_s),
                                                  "step_s": float(step_s), "measured_at": int(at_step)})


def read_interval(root) -> int:
    """The interval Young's rule measured for this run (0: not measured yet). A hand-edited or
    damaged file is one line naming it."""
    path = as_root(root) / INTERVAL
    text = _read_text(path)
    if text is None:
        return 0
    try:
        steps = json.loads(text)["save_interval"]
    except (ValueError, KeyError, TypeError, RecursionError):
        steps = None
    if type(steps) is not int or not 1 <= steps <= 2**62:
        raise UserError(f"{path}: not a measured save interval (a positive step count); the file was "
                        "edited or damaged (delete it to measure the interval again)")
    return steps


def _is_range(r) -> bool:
    return isinstance(r, list) and len(r) == 2 and all(type(v) is int and v >= 0 for v in r) and r[0] <= r[1]


def read_ledger(root) -> tuple[list[list[int]], int]:
    """(skipped ranges, rollbacks) recorded by the run's rollbacks; ([], 0) without the file. The
    file travels with a run directory from elsewhere: anything but that shape is one line naming it."""
    path = as_root(root) / LEDGER
    text = _read_text(path)
    if text is None:
        return [], 0
    try:
        obj = json.loads(text)
        ranges, count = obj["skip"], obj["rollbacks"]
        ok = (type(count) is int and count >= 0 and isinstance(ranges, list)
              and len(ranges) <= MAX_LEDGER_RANGES and all(_is_range(r) for r in ranges))
    except (ValueError, KeyError, TypeError, RecursionError):
        ok = False
    if not ok:
        raise UserError(f"{path}: not a list of skipped micro-batch ranges and a rollback count; the file "
                        "was edited or damaged (delete it to forget the batches a rollback skipped)")
    return ranges, count


def _clone_tree(obj):
    """A private copy of a nested state dict: tensors cloned (DTensors stay DTensors), the rest kept."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().clone()
    if isinstance(obj, dict):
        return {k: _clone_tree(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_clone_tree(v) for v in obj)
    return obj


def marker_text(path) -> str | None:
    """The text of checkpoint `path`'s marker (each file's size and digest), None without one."""
    return _read_text((path if isinstance(path, RemotePath) else Path(path)) / MARKER)


def is_complete(path: Path) -> bool:
    """The marker exists and every file it lists has the recorded size."""
    text = _read_text(path / MARKER)
    if text is None:
        return False
    try:
        files = json.loads(text)["files"]
    except (ValueError, KeyError, TypeError, RecursionError):  # garbled or hostile: not complete
        return False
    if not isinstance(files, dict) or not all(isinstance(n, int) for n in files.values()):
        return False
    present = _files(path)
    for name, size in files.items():
        if "/" in name or name.startswith(".."):  # never follow a path out of the directory
            return False
        if present.get(name) != size:
            return False
    return True


def damage(path) -> str:
    """Why a checkpoint directory with a marker is not complete ("" when it is, or has no marker: a
    save cut short is normal after a kill): the first file whose size differs from the marker's."""
    text = _read_text(path / MARKER)
    if text is None or is_complete(path):
        return ""
    try:
        files = dict(json.loads(text)["files"])
    except (ValueError, KeyError, TypeError, RecursionError):
        return f"{MARKER} does not read"
    present = _files(path)
    for name, size in files.items():
        if present.get(name) != size:
            has = "it is missing" if name not in present else f"it has {present[name]:,}"
            return f"{MARKER} lists {str(name)[:100]} of {size:,} bytes, {has}" if isinstance(size, int) \
                else f"{MARKER} lists {str(name)[:100]} without a size"
    return f"{MARKER} does not match its files"


def list_checkpoints(root: Path) -> list[tuple[int, Path, bool]]:
    """(step, path, complete) for every step_* directory, oldest first."""
    root, out = as_root(root), []
    if isinstance(root, RemotePath):
        fs = _fs(root)
        entries = fs.ls(root, detail=True) if fs.isdir(root) else []
        dirs = [root / RemotePath(e["name"]).name for e in entries if e["type"] == "directory"]
    else:
        dirs = [p for p in root.iterdir() if p.is_dir()] if root.is_dir() else []
    for p in dirs:
        m = STEP_DIR.match(p.name)
        if m and isinstance(p, Path):
            refuse_links_out(p)
        if m:
            out.append((int(m.group(1)), p, is_complete(p)))
    return sorted(out)


def latest_complete(root: Path, before: int | None = None) -> tuple[int, Path] | None:
    """The newest complete checkpoint (with step < before when given)."""
    for step, path, ok in reversed(list_checkpoints(root)):
        if ok and (before is None or step < before):
            return step, path
    return None


def young_interval_s(save_s: float, mtbf_s: float) -> float:
    """T* = sqrt(2 C M) (Young 1974; lesson section 5d: C = 1 min, M = 180 min -> 18.97 min)."""
    try:
        from pretrain.plan.reliability import young_interval

        return float(young_interval(save_s, mtbf_s))
    except ImportError:
        return math.sqrt(2.0 * save_s * mtbf_s)


class CheckpointManager:
    """Saves, finds, loads and prunes one run's checkpoints."""

    def __init__(self, root: str | Path, keep: int = 3, async_save: bool = True):
        self.root = as_root(root)
        self.keep, self.async_save = keep, async_save
        self.pending: tuple[int, Path, object] | None = None  # (step, path, future)
        self.group = None
        if dist.is_available() and dist.is_initialized():
            # its own gloo group: async saves (see the module docstring), the digests' gather and the
            # load's shared verification (objects over gloo, whatever the training backend)
            self.group = dist.new_group(backend="gloo")
        self._digests: dict[str, str] = {}  # this rank's, of the save in flight
        # steps whose files failed their digests at a load: not counted as complete by prune (which
        # would keep them and delete the good ones after a fallback), replaced by the next save there
        self.damaged: set[int] = set()
        self.save_seconds: list[float] = []  # blocking time of each save (Young's C)
        self.finished: int | None = None  # the step of the async save the last save() waited for
        self._staged: threading.Event | None = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="checkpoint")

    def save(self, step: int, model: torch.nn.Module, optimizer, extra: dict) -> float:
        """Save a checkpoint of `step`; returns the seconds training was blocked so far.

        Async: the copy to a private CPU snapshot runs in the background thread too, overlapping the
        next forward and backward passes, which only read the parameters; `fence()` (called before the
        next optimizer step) waits for the copy and adds that wait to this save's blocking time.
        """
        t0 = time.perf_counter()
        self.finished = self.wait()  # one save in flight at a time: the caller logs its completion
        path = step_dir(self.root, step)
        self.damaged.discard(step)  # replaced below
        if _rank() == 0:
            _rmtree(path)  # an incomplete leftover of the same step
        if dist.is_available() and dist.is_initialized():
            dist.barrier(group=self.group)  # the leftover is gone before any rank writes into the directory
        if not isinstance(path, RemotePath):  # object storage has no directories to make
            path.mkdir(parents=True, exist_ok=True)
        _write_json_atomic(path / f"state_rank{_rank()}.json", extra)
        msd, osd = get_state_dict(model, optimizer, options=FLAT)
        state = {"model": msd, "optim": osd}
        if self.async_save:
            self._staged = threading.Event()
            fut = self._pool.submit(self._stage_and_write, state, path, self._staged, step)
            self.pending = (step, path, fut)
        else:
            _save(state, path)
            self._digests = own_digests(path, _rank())
            self._finish(step, path)
        blocked = time.perf_counter() - t0
        self.save_seconds.append(blocked)
        return blocked

    def _stage_and_write(self, state: dict, path: Path, staged: threading.Event, step: int) -> None:
        try:
            snapshot = _clone_tree(state)
        finally:
            staged.set()
        _save(snapshot, path, self.group)
        self._digests = own_digests(path, _rank())  # off the training thread, of the bytes written
        # The marker from the save's own thread, as soon as every rank's write is done (the gather
        # in _finish waits for all), not when the loop next polls: a kill in between (up to a step
        # later) restarted from the save before (session 14). Safe because while a save is pending
        # only this thread uses self.group (the main thread's save, load, delete_after and rollback
        # all wait() first), so every rank issues the same collectives on it in the same order.
        self._finish(step, path)

    def fence(self) -> None:
        """Block until an in-flight save has its snapshot: call before parameters or moments change."""
        if self._staged is None:
            return
        t0 = time.perf_counter()
        self._staged.wait()
        self._staged = None
        if self.save_seconds:
            self.save_seconds[-1] += time.perf_counter() - t0

    def poll(self) -> int | None:
        """Take in an async save that has completed (its marker is written by then); returns its
        step, else None.

        Under torch.distributed "completed" must be agreed, so that every rank drops `pending` at the
        same step and the next save's barrier, or a decision read off the directory, finds them alike
        (until session 14 the marker's barrier ran here, and a rank that finished alone waited there
        while the others went on into the next step's collectives: a deadlock seen in 1 of 3 runs of
        the spike test). One all-reduce (MIN) of the local flag on the training group, from the main
        thread, decides for all.
        """
        if not self.pending:
            return None
        done = self.pending[2].done()
        if dist.is_available() and dist.is_initialized():
            dev = "cuda" if dist.get_backend() == "nccl" else "cpu"
            flag = torch.tensor(float(done), device=dev)
            dist.all_reduce(flag, op=dist.ReduceOp.MIN)
            done = bool(flag.item())
        return self.wait() if done else None

    def wait(self) -> int | None:
        """Block until the in-flight save (if any) is on disk and marked complete (its thread writes
        the marker, `_stage_and_write`); returns its step."""
        if not self.pending:
            return None
        step, _, fut = self.pending
        self.pending = None
        fut.result()
        self._staged = None
        return step

    def _finish(self, step: int, path: Path) -> None:
        digests, self._digests = dict(self._digests), {}
        if dist.is_available() and dist.is_initialized():
            # every rank's files are written (and digested) before the marker: the gather waits for all
            every: list = [None] * dist.get_world_size(self.group)
            dist.all_gather_object(every, digests, group=self.group)
            for part in every:
                digests.update(part)
        if _rank() == 0:
            files = {k: v for k, v in _files(path).items() if k != MARKER}
            for name in files.keys() - digests.keys():  # a file no rank claimed: digested here
                digests[name] = digest_file(path / name)
            _write_json_atomic(path / MARKER, {"step": step, "files": files, DIGEST: digests,
                                               "time": time.time()})
            self.prune()
        if dist.is_available() and dist.is_initialized():
            # ... and every rank sees the marker before it returns: decisions read off the directory
            # (is the final state saved? which checkpoint to roll back to?) must agree across ranks.
            dist.barrier(group=self.group)

    def prune(self) -> None:
        """Keep the newest `keep` complete checkpoints; remove older ones and stale incomplete ones."""
        ckpts = [(s, p, ok and s not in self.damaged) for s, p, ok in list_checkpoints(self.root)]
        complete = [s for s, _, ok in ckpts if ok]
        keep = set(complete[-self.keep:]) if self.keep > 0 else set(complete)
        newest = complete[-1] if complete else -1
        pending = self.pending[0] if self.pending else None
        for s, p, ok in ckpts:
            if s in keep or s == pending or (not ok and s > newest):
                continue
            _rmtree(p)

    def delete_after(self, step: int) -> None:
        """Remove checkpoints newer than `step` (a rollback abandons that timeline)."""
        self.wait()
        if _rank() == 0:
            for s, p, _ in list_checkpoints(self.root):
                if s > step:
                    _rmtree(p)

    def load(self, path: Path, model: torch.nn.Module, optimizer) -> dict:
        """Load model and optimizer in place; return this rank's JSON state."""
        self.wait()
        options = FLAT if flat_optimizer(path) else None
        stateless = not _has_optimizer_moments(path)
        if stateless:  # saved before any applied step (fp16 overflows): load it as it was saved
            _as_before_the_first_step(optimizer)
        msd, osd = get_state_dict(model, optimizer, options=options)
        state = {"model": msd, "optim": osd}
        _load(state, path, self.group)
        set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"],
                       options=options)
        if stateless:
            optimizer.zero_grad(set_to_none=True)
        return read_state(path, _rank())


# The optimizer state keyed by parameter name throughout, its param_groups' settings too
# ("param_groups.<name>.lr"), as torchtitan saves it. Unflattened, the groups are keyed by index
# ("param_groups.0.params": a list of names) on every rank, and DCP keeps one rank's value of a key:
# under a pipeline each stage has other parameters in its groups, and a resumed stage got another's
# (its groups came back without lr or betas: KeyError in the first step).
FLAT = StateDictOptions(flatten_optimizer_state_dict=True)
_INDEXED_GROUPS = re.compile(r"optim\.param_groups\.\d+\.params")


def flat_optimizer(path) -> bool:
    """Whether the checkpoint at `path` holds the flattened optimizer state (False: written before
    session 6, its param_groups keyed by index; still loaded as it was written)."""
    from pretrain.train.safe_dcp import METADATA, read_metadata

    keys = read_metadata(path / METADATA).state_dict_metadata
    return not any(_INDEXED_GROUPS.fullmatch(k) for k in keys)


def _has_optimizer_moments(path) -> bool:
    """Whether the checkpoint holds any optimizer state (AdamW's moments and step). A run saved before
    its first applied step has none: torch's get_state_dict creates moments only for an optimizer
    without gradients, and fp16 overflow steps leave their (non-finite) gradients in place, so the
    save wrote none while a fresh process's load asked for them ("Missing key in checkpoint
    state_dict: optim.state....step")."""
    from pretrain.train.safe_dcp import METADATA, read_metadata

    return any(k.startswith("optim.state.") for k in read_metadata(path / METADATA).state_dict_metadata)


def _as_before_the_first_step(optimizer) -> None:
    """An optimizer with no moments and gradients in place, as a run is at a save before its first
    applied step: get_state_dict then asks for no moments. (On an optimizer without gradients it
    first runs a zero-gradient step to create them, and the load asks for keys the file lacks.)"""
    optimizer.state.clear()
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.requires_grad and p.grad is None:
                p.grad = torch.zeros_like(p)


def read_state(path, rank: int = 0) -> dict:
    """A checkpoint's JSON state for `rank` (rank 0's when resumed on more ranks than saved: step,
    data position and scaler are global); a damaged or hostile file is one line naming it."""
    name = f"state_rank{rank}.json"
    text = _read_text(path / name)
    if text is None:
        name, text = "state_rank0.json", _read_text(path / "state_rank0.json")
    if text is None:
        raise FileNotFoundError(f"{path}: no state_rank0.json")
    try:
        state = json.loads(text)
    except (ValueError, RecursionError) as e:
        why = "nested too deeply" if isinstance(e, RecursionError) else str(e)
        raise UserError(f"{path}/{name}: not a checkpoint state file ({why})") from None
    if not isinstance(state, dict):
        raise UserError(f"{path}/{name}: not a checkpoint state file (a JSON {type(state).__name__})")
    return state


def load_model_only(path: Path, model: torch.nn.Module) -> None:
    """Fill `model` from a checkpoint's model weights (for sampling and export)."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict

    msd = get_model_state_dict(model)
    state = {"model": msd}
    _load(state, path)
    set_model_state_dict(model, state["model"])
