"""Reading DCP checkpoints from a run directory that may come from someone else, without running code.

torch.distributed.checkpoint (DCP) stores two pickles an attacker can edit: the `.metadata` file,
which `FileSystemReader.read_metadata` opens with a plain `pickle.load`, and every non-tensor value
(the optimizer's param_groups: lr, betas, params...), which `DefaultLoadPlanner.load_bytes` opens with
`torch.load(weights_only=False)`. Either one runs whatever a `__reduce__` names (torch 2.13.0).

This module owns the replacements used by every load (resume, rollback, sample, export), from a
local directory (`SafeReader`) or object storage through fsspec (`SafeFsspecReader`):

- `read_metadata`: `.metadata` rebuilt by `dcp_metadata.parse` (only DCP's metadata dataclasses,
  `torch.Size`, dtypes, layouts, memory formats and paths, each made fresh from checked fields) and
  then checked against the directory: every storage item a plain file name inside the checkpoint
  directory whose byte range lies inside that file (no `../`, no `/dev/zero` of a terabyte), and
  stored as written, without DCP's stream transforms (`stream.zstd`: a 64 KB item inflated to 2 GiB).
- `SafePlanner`: non-tensor values through `torch.load(weights_only=True)`, PyTorch's own restricted
  unpickler (tensors, numbers, strings, lists, tuples, dicts).

Anything else refuses the checkpoint with `UnsafeCheckpoint`, one line naming the file and the reason.
Tensors themselves were already read with `weights_only=True` by DCP.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import torch
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
from torch.distributed.checkpoint.metadata import Metadata

from pretrain.errors import UserError
from pretrain.train.dcp_metadata import UnsafeCheckpoint, parse

__all__ = ["UnsafeCheckpoint", "parse", "read_metadata", "safe_load", "SafePlanner"]

METADATA = ".metadata"
# A model of 10k tensors, each sharded on 64 ranks, has ~640k entries of ~200 bytes: 128 MiB is far.
MAX_METADATA_BYTES = 256 << 20

def _is_url(path) -> bool:
    return "://" in str(path)


def _join(root, name: str):
    return f"{str(root).rstrip('/')}/{name}" if _is_url(root) else Path(root) / name


def _sizes(root) -> dict[str, int]:
    """{name: size} of the plain files directly inside a checkpoint directory (local or fsspec URL)."""
    if _is_url(root):
        from fsspec.core import url_to_fs

        fs, p = url_to_fs(str(root))
        return {e["name"].rstrip("/").rsplit("/", 1)[-1]: int(e["size"])
                for e in fs.ls(p, detail=True) if e["type"] == "file"}
    root = Path(root)
    return {f.name: f.stat().st_size for f in root.iterdir() if f.is_file()} if root.is_dir() else {}


def checkpoint_bytes(root) -> int:
    """Bytes of the files in a checkpoint directory: what any tensor read from it can add up to."""
    return sum(_sizes(root).values())


def _read_bytes(path, size: int) -> bytes:
    if _is_url(path):
        from fsspec.core import url_to_fs

        fs, p = url_to_fs(str(path))
        return fs.cat_file(p)
    with open(path, "rb") as f:
        return f.read(size + 1)


def read_metadata(path) -> Metadata:
    """DCP's `.metadata` at `path` (a local path or an fsspec URL), unpickled with only DCP's own
    classes, then checked against the files beside it."""
    root = str(path).rstrip("/").rsplit("/", 1)[0] if _is_url(path) else Path(path).parent
    sizes = _sizes(root)
    name = str(path).rstrip("/").rsplit("/", 1)[-1]
    if name not in sizes:
        raise UserError(f"{path}: cannot read checkpoint metadata (no such file)")
    if sizes[name] > MAX_METADATA_BYTES:
        raise UnsafeCheckpoint(f"{path}: refused, {sizes[name]:,} bytes of metadata "
                               f"(limit {MAX_METADATA_BYTES:,})")
    data = _read_bytes(path, sizes[name])
    md = parse(data, path)
    _check_storage(md.storage_data, path, sizes)
    return md


def _check_storage(storage: dict, path, sizes: dict[str, int]) -> None:
    """Every item names a file directly inside the checkpoint directory, at a range within its size."""
    for key, info in storage.items():
        rel, off, n = (getattr(info, a, None) for a in ("relative_path", "offset", "length"))
        if not isinstance(rel, str) or rel in ("", ".", "..") or "/" in rel or "\\" in rel or "\0" in rel:
            raise UnsafeCheckpoint(f"{path}: refused, item {getattr(key, 'fqn', key)} points at {rel!r}, "
                                   "outside the checkpoint directory")
        if getattr(info, "transform_descriptors", None):
            # DCP inflates a transformed item whole before torch.load sees it (`read(-1)`): 64 KB of
            # its own `stream.zstd` was 2 GiB held twice, and chained transforms square the ratio.
            # pretrain's writer (and DCP's default) stores none, so none is read.
            named = [str(t)[:40] for t in list(info.transform_descriptors)[:4]]
            raise UnsafeCheckpoint(f"{path}: refused, item {getattr(key, 'fqn', key)} is stored through "
                                   f"{named!r}; pretrain writes no transforms, and a compressed item "
                                   "inflates without bound")
        have = sizes.get(rel, -1)
        ints = isinstance(off, int) and isinstance(n, int)
        if not (ints and off >= 0 and n >= 0 and off + n <= have):
            raise UnsafeCheckpoint(f"{path}: refused, item {getattr(key, 'fqn', key)} claims bytes "
                                   f"[{off}, {off}+{n}) of {rel}, which has {max(have, 0):,}")


class _GivenMetadata:
    """A DCP storage reader that hands over metadata already read by `read_metadata` above.

    The metadata is read before `dcp.load` starts: DCP catches a failing `read_metadata`, logs its
    traceback, retries with a rank-local file and raises a merged AssertionError, which would bury
    the one-line refusal.
    """

    def __init__(self, path, metadata: Metadata):
        super().__init__(path)
        self._metadata = metadata

    def read_metadata(self, *args, **kwargs) -> Metadata:
        from torch.distributed.checkpoint.metadata import StorageMeta

        md = self._metadata
        if getattr(md, "storage_meta", None) is None:
            md.storage_meta = StorageMeta()
        md.storage_meta.load_id = self.load_id
        return md


class SafeReader(_GivenMetadata, FileSystemReader):
    """FileSystemReader (a local directory) with checked metadata."""


def _safe_fsspec_reader():
    from torch.distributed.checkpoint._fsspec_filesystem import FsspecReader

    class SafeFsspecReader(_GivenMetadata, FsspecReader):
        """FsspecReader (object storage: s3://, gs://, ...) with checked metadata."""

    return SafeFsspecReader


class SafePlanner(DefaultLoadPlanner):
    """DefaultLoadPlanner whose non-tensor values come from `torch.load(weights_only=True)`."""

    def __init__(self, where: str | Path, **kwargs):
        super().__init__(**kwargs)
        self.where = where

    def load_bytes(self, read_item, value: io.BytesIO) -> None:
        fqn = read_item.dest_index.fqn
        try:
            obj = torch.load(value, map_location="cpu", weights_only=True)
        except Exception as e:  # torch's message is a page of advice; keep the global it refused
            found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", str(e))
            why = f"it calls {found.group(1)}" if found else type(e).__name__
            raise UnsafeCheckpoint(f"{self.where}: refused, value {fqn} is not plain data ({why}); "
                                   "nothing was run") from None
        if self.flatten_state_dict:
            from torch.distributed.checkpoint._traverse import set_element

            set_element(self.original_state_dict, self.mappings[fqn], obj)
        else:
            self.state_dict[fqn] = obj


def safe_load(state: dict, path, no_dist: bool) -> None:
    """dcp.load of the checkpoint at `path` (a local directory or an fsspec URL such as
    s3://bucket/run/checkpoints/step_0000100) through a checked reader and `SafePlanner`; our own
    refusal is raised unwrapped."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException

    reader_class = _safe_fsspec_reader() if _is_url(path) else SafeReader
    reader = reader_class(str(path), read_metadata(_join(path, METADATA)))
    try:
        dcp.load(state, storage_reader=reader, planner=SafePlanner(path), no_dist=no_dist)
    except CheckpointException as e:  # DCP wraps each rank's exception; surface ours as one line
        for exc, _trace in e.failures.values():
            if isinstance(exc, UserError):
                raise exc from None
        # anything else is a data file that does not read back (bytes overwritten in a copy, a disk
        # error): one line naming the checkpoint and its data files, not DCP's per-rank traceback
        exc = next(iter(e.failures.values()))[0]
        text = str(exc).split("WeightsUnpickler error:")[-1]  # torch's page of advice: keep its cause
        first = next((x.strip() for x in text.splitlines() if x.strip()), "")[:200]
        raise UserError(f"{path}: a data file of this checkpoint ({_data_files(path)}) does not read: "
                        f"{type(exc).__name__}: {first}; the checkpoint is damaged") from None


def _data_files(path) -> str:
    """The checkpoint's .distcp names, for an error (a local folder; a URL: the pattern)."""
    if _is_url(path):
        return "*.distcp"
    names = sorted(p.name for p in Path(path).glob("*.distcp"))
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
