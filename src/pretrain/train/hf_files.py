"""The files of a Hugging Face folder someone else wrote, read as hostile input.

Owns the checks every reader of such a folder (`model.init_from`, `pretrain eval HF_DIR`) makes
before trusting a byte of it: no symbolic link out of the folder (or out of its repository in
huggingface_hub's cache, whose snapshots link to `../../blobs/`), JSON files that are one bounded
object, and safetensors files whose header safetensors itself accepts (its errors, e.g. an offset
past the end of the file or a 100 MB header, become one line naming the file) holding floating-point
tensors only (int32 weights have the size of float32 ones and would be read as numbers).

`SafetensorsFile` is how a file is read: its header is checked by safetensors and parsed once, and
each tensor's slice is then read through a mapping made for that read alone (see its docstring).
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from pretrain.errors import UserError

MAX_JSON_BYTES = 64 * 2**20  # config.json is ~1 KB, an index ~100 KB for a 400B model
FLOAT_DTYPES = ("F64", "F32", "F16", "BF16")
# Little-endian storage as numpy reads it; bf16 (no numpy type) as its raw 16 bits.
_NP = {"F64": ("<f8", None), "F32": ("<f4", None), "F16": ("<f2", None), "BF16": ("<u2", torch.bfloat16)}


def _roots(folder: Path) -> list[Path]:
    """Where the folder's files may really live: itself, and for a huggingface_hub snapshot
    (`models--ORG--NAME/snapshots/REV`) the repository's `blobs/`, which its links point into."""
    real = folder.resolve()
    roots = [real]
    if real.parent.name == "snapshots":
        roots.append(real.parent.parent / "blobs")
    return roots


def check_links(folder: str | Path) -> None:
    """Refuse a folder whose entries are symbolic links to files outside it: reading one would read
    whatever file on this machine the folder's author named (a key, another model, /etc/passwd)."""
    folder = Path(folder)
    if not folder.is_dir():
        return  # the caller says what is missing
    roots = _roots(folder)
    for entry in folder.iterdir():
        if entry.is_symlink() and not any(entry.resolve().is_relative_to(r) for r in roots):
            raise UserError(f"{entry}: a symbolic link to {entry.resolve()}, outside the folder; "
                            "copy the file in (links out of a model folder are not followed)")


def read_json_object(path: Path) -> dict:
    """A JSON file that must be one object (config.json, an index): the project's reader of small
    files from elsewhere (a regular file, bounded in size and depth, one line on any fault)."""
    from pretrain.untrusted import load_json_object

    return load_json_object(path, MAX_JSON_BYTES, what=path.name)


@contextmanager
def open_safetensors(path: Path):
    """`safe_open` with safetensors' own header checks reported as one line naming the file."""
    from safetensors import SafetensorError, safe_open

    try:
        handle = safe_open(str(path), framework="pt")
    except (SafetensorError, OSError) as e:
        raise UserError(f"{path}: not a readable safetensors file ({e})") from None
    with handle as f:
        yield f


def check_float(path: Path, key: str, dtype: str) -> None:
    """Weights are floating point; other dtypes of the same width would be read as numbers."""
    if dtype not in FLOAT_DTYPES:
        raise UserError(f"{path}: tensor {key!r} is stored as {dtype}, not a floating-point type "
                        f"({', '.join(FLOAT_DTYPES)})")


class SafetensorsFile:
    """One safetensors file whose header is parsed once, its tensors read by slices.

    safetensors' `safe_open` parses the whole header on every open (47 ms for 20,000 tensors), and a
    handle kept open would keep every page read through its mapping as this process's memory until
    the import ends. So the header is checked by `safe_open` once (its own offset, size and overlap
    checks, `open_safetensors`), parsed here once, and each read (`TensorSlice`) copies out only the
    slice asked for, with no handle or mapping left open after it.
    """

    def __init__(self, path: Path, keep: set[str] | None = None):
        self.path = Path(path)
        with open_safetensors(self.path):
            pass  # safetensors' header checks, once
        with open(self.path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(n))
        self.data_start = 8 + n
        self.data_bytes = self.path.stat().st_size - self.data_start
        # Only the entries asked for are kept: an index names at most what it holds.
        self.entries = {k: (v["dtype"], tuple(v["shape"]), tuple(v["data_offsets"]))
                        for k, v in header.items() if k != "__metadata__" and (keep is None or k in keep)}

    def keys(self) -> list[str]:
        return list(self.entries)

    def get_slice(self, key: str) -> TensorSlice:
        if key not in self.entries:
            raise UserError(f"{self.path}: tensor {key!r} not in the file's header")
        return TensorSlice(self, key, *self.entries[key])


class TensorSlice:
    """`safe_open(...).get_slice`'s interface (get_dtype, get_shape, [rows, cols]): whole rows are read
    with one file read, a block of columns through a mapping made for that read (the pages read count
    as memory only until the copy returns)."""

    def __init__(self, file: SafetensorsFile, key: str, dtype: str, shape: tuple, offsets: tuple):
        self.file, self.key, self.dtype, self.shape, self.offsets = file, key, dtype, shape, offsets

    def get_dtype(self) -> str:
        return self.dtype

    def get_shape(self) -> list[int]:
        return list(self.shape)

    def __getitem__(self, idx) -> torch.Tensor:
        check_float(self.file.path, self.key, self.dtype)
        np_dtype, view = _NP[self.dtype]
        begin, end = self.offsets
        numel = int(np.prod(self.shape, dtype=object))
        # safetensors checked this at open; a mapping past the file must be impossible whatever
        size = numel * np.dtype(np_dtype).itemsize
        if end - begin != size or not 0 <= begin <= end <= self.file.data_bytes:
            raise UserError(f"{self.file.path}: tensor {self.key!r} has offsets {list(self.offsets)} "
                            f"that do not hold its shape {list(self.shape)}")
        rows = idx[0] if isinstance(idx, tuple) and len(idx) == 1 else idx
        if numel == 0:  # an empty mapping is refused by mmap
            out = np.empty(self.shape, np_dtype)[idx].copy()
        elif isinstance(rows, slice) and rows.step in (None, 1) and self.shape:
            # Whole rows are one byte range: one read, no mapping to hold the pages
            r0, r1, _ = rows.indices(self.shape[0])
            row = size // self.shape[0]
            out = np.empty((max(r1 - r0, 0), *self.shape[1:]), np_dtype)
            with open(self.file.path, "rb") as f:
                f.seek(self.file.data_start + begin + r0 * row)
                if out.nbytes and f.readinto(out.reshape(-1).view(np.uint8)) != out.nbytes:
                    raise UserError(f"{self.file.path}: tensor {self.key!r} ends past the file")
        else:
            mm = np.memmap(self.file.path, np_dtype, "r", self.file.data_start + begin, self.shape)
            out = np.array(mm[idx], copy=True)  # a copy: the mapping is closed when mm goes
            del mm
        t = torch.from_numpy(out)
        return t.view(view) if view is not None else t
