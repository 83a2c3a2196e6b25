"""DCP's `.metadata` pickle turned into `Metadata` without trusting a single object in it.

A `.metadata` file is a pickle (torch.distributed.checkpoint writes it with `pickle.dump`), and a
restricted `find_class` is not enough on its own: pickle's BUILD opcode sets any attribute of any
object the file can name (a `PosixPath` whose `_str` says `/etc/passwd` while its parts say
`step_5`), NEWOBJ and REDUCE call what they are handed with arguments of the file's choosing, and a
field typed `torch.Size` may arrive as a string. So the globals a real checkpoint references are
answered with stand-ins that hold data and do nothing:

- DCP's dataclasses (`Metadata`, `MetadataIndex`, `_StorageInfo`, ...) become `_Record`s: their
  state is kept as given, never set as attributes;
- `torch.Size`, `torch.serialization._get_layout`, `_MEM_FORMAT_ENCODING` and the `pathlib` classes
  become functions (fresh for each file) that accept exactly the arguments torch writes and return
  an immutable value (a `Size`, a layout, an int, a `_Path` record);
- dtypes and memory formats are torch's own immutable singletons.

`rebuild` then walks the records along DCP's schema (torch 2.13, `checkpoint/metadata.py` and
`filesystem._StorageInfo`) and constructs fresh, real dataclasses from checked fields; anything
else is `UnsafeCheckpoint`, one line naming the file and the field. The C unpickler does the
parsing, so the cost stays near `pickle.load`'s (bench/bench_safe_dcp.py).
"""

from __future__ import annotations

import pickle
from pathlib import Path

import torch
from torch.distributed.checkpoint.filesystem import _StorageInfo
from torch.distributed.checkpoint.metadata import (
    BytesStorageMetadata,
    ChunkStorageMetadata,
    Metadata,
    MetadataIndex,
    StorageMeta,
    TensorProperties,
    TensorStorageMetadata,
)

from pretrain.errors import UserError

_MD = "torch.distributed.checkpoint.metadata"
_RECORDS = {(_MD, n) for n in ("Metadata", "MetadataIndex", "StorageMeta", "TensorProperties",
                               "TensorStorageMetadata", "ChunkStorageMetadata", "BytesStorageMetadata")}
_RECORDS.add(("torch.distributed.checkpoint.filesystem", "_StorageInfo"))
_PATHS = {"PosixPath", "WindowsPath", "PurePosixPath", "PureWindowsPath", "Path"}
_LAYOUTS = {f"torch.{n}": getattr(torch, n) for n in dir(torch)
            if isinstance(getattr(torch, n), torch.layout)}
# TensorProperties.__getstate__'s encoding of the memory format (torch's _MEM_FORMAT_ENCODING)
_MEMORY_FORMATS = (torch.contiguous_format, torch.channels_last, torch.preserve_format)
_PLAIN = (str, int, float, bool, type(None), bytes)
_MAX_PLAIN_DEPTH = 32  # planner_data: DefaultSavePlanner writes {fqn: (key, key, ...)}, depth 2


class UnsafeCheckpoint(UserError):
    """A checkpoint file holds something a DCP checkpoint never does; nothing in it was run."""


class _Record:
    """What the pickle builds in place of one of DCP's dataclasses: the state BUILD hands over is
    kept as it is (`self.state`); nothing is set on the object and nothing runs."""

    kind = ""

    def __setstate__(self, state) -> None:
        self.state = state


class _Path:
    """A pathlib path the pickle asked for: its parts, to be checked before a real path is made."""

    def __init__(self, parts: tuple):
        self.parts = parts
        self.state = None

    def __setstate__(self, state) -> None:  # BUILD on a path: torch never writes one (refused)
        self.state = state


def _record_class(name: str) -> type:
    return type(name, (_Record,), {"kind": name})


class MetadataUnpickler(pickle.Unpickler):
    """The C unpickler, answering each global with a stand-in (see the module's docstring)."""

    def __init__(self, f, path):
        super().__init__(f)
        self.path = path
        self.records = {name: _record_class(name) for _, name in _RECORDS}
        self.stand_ins = self._stand_ins()

    def _stand_ins(self) -> dict:
        def size(seq=()):  # torch.Size((4, 3))
            if type(seq) not in (tuple, list) or any(type(i) is not int for i in seq):
                raise UnsafeCheckpoint(f"{self.path}: refused, a torch.Size of {type(seq).__name__} "
                                       "that is not a sequence of integers")
            return torch.Size(seq)

        def layout(name):  # torch.serialization._get_layout("torch.strided")
            if type(name) is not str or name not in _LAYOUTS:
                raise UnsafeCheckpoint(f"{self.path}: refused, layout {str(name)[:60]!r} is not a "
                                       "tensor layout a checkpoint holds")
            return _LAYOUTS[name]

        def memory_format(code):  # _MEM_FORMAT_ENCODING(0)
            if type(code) is not int or not 0 <= code < len(_MEMORY_FORMATS):
                raise UnsafeCheckpoint(f"{self.path}: refused, memory format code {str(code)[:60]!r}")
            return code

        return {("torch", "Size"): size, ("torch.serialization", "_get_layout"): layout,
                (_MD, "_MEM_FORMAT_ENCODING"): memory_format, ("collections", "OrderedDict"): dict,
                **{("pathlib", n): lambda *parts: _Path(parts) for n in _PATHS}}

    def find_class(self, module: str, name: str):
        if (module, name) in _RECORDS:
            return self.records[name]
        if (module, name) in self.stand_ins:
            return self.stand_ins[(module, name)]
        if module == "torch" and isinstance(getattr(torch, name, None), (torch.dtype, torch.memory_format)):
            return getattr(torch, name)  # immutable singletons: nothing can be set on them
        raise UnsafeCheckpoint(f"{self.path}: refused, its pickle calls {module}.{name}, which a DCP "
                               "checkpoint never holds (a code payload?); nothing was run")

    def persistent_load(self, pid):
        raise UnsafeCheckpoint(f"{self.path}: refused, its pickle holds a persistent id; nothing was run")


def parse(data: bytes, path) -> Metadata:
    """The `Metadata` that `data` (the bytes of `path`, a `.metadata` file) describes, rebuilt from
    checked fields; `UnsafeCheckpoint` naming `path` for anything a real checkpoint never holds."""
    import io

    try:
        top = MetadataUnpickler(io.BytesIO(data), path).load()
    except UnsafeCheckpoint:
        raise
    except Exception as e:  # truncated or garbled: any of pickle's many exception types
        why = f"{type(e).__name__}: {e}"[:200]
        raise UnsafeCheckpoint(f"{path}: not a readable DCP metadata pickle ({why})") from None
    return _Rebuild(path).metadata(top)


class _Rebuild:
    """Real DCP dataclasses from the records, field by field along DCP's schema. Records and lists
    the pickle shares (its memo) are rebuilt once (`done`), so a file cannot multiply the work."""

    def __init__(self, path):
        self.path = path
        self.done: dict[int, object] = {}

    def refuse(self, where: str, why: str):
        raise UnsafeCheckpoint(f"{self.path}: refused, {where} {why}; not DCP metadata")

    def fields(self, rec, kind: str, names: tuple, where: str) -> dict:
        if not isinstance(rec, _Record) or rec.kind != kind:
            self.refuse(where, f"is a {type(rec).__name__}, not {kind}")
        state = getattr(rec, "state", None)
        state = {} if state is None else state
        if type(state) is not dict or not set(state) <= set(names):
            extra = sorted(map(str, set(state) - set(names))) if type(state) is dict else type(state).__name__
            self.refuse(where, f"({kind}) holds {str(extra)[:80]}")
        return state

    def metadata(self, rec) -> Metadata:
        names = ("state_dict_metadata", "planner_data", "storage_data", "storage_meta", "version")
        f = self.fields(rec, "Metadata", names, "the file")
        sdm, storage = f.get("state_dict_metadata"), f.get("storage_data")
        if type(sdm) is not dict or type(storage) is not dict:
            self.refuse("the file", "has no state_dict_metadata or storage_data dict")
        items = {}
        for k, v in storage.items():
            key = self.index(k)
            if key in items:
                self.refuse(f"storage item {key.fqn[:100]!r}", "is listed twice")
            items[key] = self.storage_info(v, key.fqn)
        return Metadata({self.text(k, "a state_dict key"): self.entry(v, k) for k, v in sdm.items()},
                        self.plain(f.get("planner_data"), "planner_data", 0), items,
                        self.storage_meta(f.get("storage_meta")),
                        self.optional_text(f.get("version"), "version"))

    def text(self, s, where: str) -> str:
        if type(s) is not str:
            self.refuse(where, f"is a {type(s).__name__}, not a string")
        return s

    def optional_text(self, s, where: str) -> str | None:
        return None if s is None else self.text(s, where)

    def integer(self, n, where: str, optional: bool = False) -> int | None:
        if not (type(n) is int or (optional and n is None)):
            self.refuse(where, f"is a {type(n).__name__}, not an integer")
        return n

    def size(self, s, where: str, optional: bool = False) -> torch.Size | None:
        if not (type(s) is torch.Size or (optional and s is None)):
            self.refuse(where, f"is a {type(s).__name__}, not a torch.Size")
        return s

    def index(self, rec) -> MetadataIndex:
        f = self.fields(rec, "MetadataIndex", ("fqn", "offset", "index"), "a storage key")
        fqn = self.text(f.get("fqn"), "a storage key's fqn")
        where = f"storage key {fqn[:100]!r}"
        return MetadataIndex(fqn, self.size(f.get("offset"), f"{where}'s offset", True),
                             self.integer(f.get("index"), f"{where}'s index", True))

    def storage_info(self, rec, fqn: str) -> _StorageInfo:
        where = f"storage item {fqn[:100]!r}"
        names = ("relative_path", "offset", "length", "transform_descriptors")
        f = self.fields(rec, "_StorageInfo", names, where)
        td = f.get("transform_descriptors")
        if td is not None:
            if type(td) not in (list, tuple):
                self.refuse(f"{where}'s transform_descriptors", f"is a {type(td).__name__}")
            td = [self.text(t, f"{where}'s transform descriptor") for t in td]
        return _StorageInfo(self.text(f.get("relative_path"), f"{where}'s file"),
                            self.integer(f.get("offset"), f"{where}'s offset"),
                            self.integer(f.get("length"), f"{where}'s length"), td)

    def entry(self, rec, key):
        where = f"state_dict entry {str(key)[:100]!r}"
        if isinstance(rec, _Record) and rec.kind == "BytesStorageMetadata":
            self.fields(rec, "BytesStorageMetadata", (), where)
            return BytesStorageMetadata()
        if id(rec) in self.done:
            return self.done[id(rec)]
        f = self.fields(rec, "TensorStorageMetadata", ("properties", "size", "chunks"), where)
        chunks = f.get("chunks")
        if type(chunks) is not list:
            self.refuse(f"{where}'s chunks", f"is a {type(chunks).__name__}, not a list")
        if id(chunks) not in self.done:
            self.done[id(chunks)] = [self.chunk(c, where) for c in chunks]
        out = TensorStorageMetadata(self.properties(f.get("properties"), where),
                                    self.size(f.get("size"), f"{where}'s size"), self.done[id(chunks)])
        self.done[id(rec)] = out
        return out

    def chunk(self, rec, where: str) -> ChunkStorageMetadata:
        f = self.fields(rec, "ChunkStorageMetadata", ("offsets", "sizes"), f"a chunk of {where}")
        return ChunkStorageMetadata(self.size(f.get("offsets"), f"a chunk's offsets in {where}"),
                                    self.size(f.get("sizes"), f"a chunk's sizes in {where}"))

    def properties(self, rec, where: str) -> TensorProperties:
        where = f"{where}'s properties"
        if not isinstance(rec, _Record) or rec.kind != "TensorProperties":
            self.refuse(where, f"is a {type(rec).__name__}, not TensorProperties")
        s = getattr(rec, "state", None)  # TensorProperties.__getstate__: a tuple of five
        if type(s) is not tuple or len(s) != 5:
            self.refuse(where, "are not the five values torch writes")
        dtype, layout, grad, fmt, pin = s
        ok = (type(dtype) is torch.dtype and type(layout) is torch.layout and type(grad) is bool
              and type(fmt) is int and 0 <= fmt < len(_MEMORY_FORMATS) and type(pin) is bool)
        if not ok:
            self.refuse(where, f"hold {str(s)[:100]}")
        return TensorProperties(dtype, layout, grad, _MEMORY_FORMATS[fmt], pin)

    def storage_meta(self, rec) -> StorageMeta | None:
        if rec is None:
            return None
        names = ("checkpoint_id", "save_id", "load_id", "modules")
        f = self.fields(rec, "StorageMeta", names, "storage_meta")
        cid = f.get("checkpoint_id")
        if isinstance(cid, _Path):
            if cid.state is not None:
                self.refuse("storage_meta's checkpoint_id", f"sets {str(cid.state)[:80]} on a path")
            cid = Path(*(self.text(p, "storage_meta's checkpoint_id part") for p in cid.parts))
        elif cid is not None:
            cid = self.text(cid, "storage_meta's checkpoint_id")
        modules = f.get("modules", [])
        if type(modules) is not list:
            self.refuse("storage_meta's modules", f"is a {type(modules).__name__}")
        return StorageMeta(cid, self.optional_text(f.get("save_id"), "storage_meta's save_id"),
                           self.optional_text(f.get("load_id"), "storage_meta's load_id"),
                           [self.text(m, "a storage_meta module") for m in modules])

    def plain(self, x, where: str, depth: int):
        """planner_data: nested dicts, lists and tuples of plain values (checked, kept as they are;
        each container once, so shared ones cost nothing more)."""
        if isinstance(x, _PLAIN) and type(x) in _PLAIN:
            return x
        if type(x) not in (dict, list, tuple):
            self.refuse(where, f"holds a {type(x).__name__}")
        if depth > _MAX_PLAIN_DEPTH:
            self.refuse(where, f"is nested deeper than {_MAX_PLAIN_DEPTH}")
        if id(x) not in self.done:
            self.done[id(x)] = x
            for v in (x.items() if type(x) is dict else x):
                for e in (v if type(x) is dict else (v,)):
                    self.plain(e, where, depth + 1)
        return x
