"""Hugging Face folders on disk: streaming safetensors writes (export) and sliced reads (import).

Export writes `model.safetensors`, or `model-0000k-of-0000n.safetensors` shards with
`model.safetensors.index.json` past `max_shard_bytes`, in safetensors' own format (an 8-byte header
length, a JSON header, raw little-endian bytes): every header is computed from the tensors' shapes
before any data, and each tensor is converted and written one at a time, so the writer holds one
converted tensor beside the model, never a second copy of it.

Import reads a folder written by transformers' `save_pretrained` (sharded or not) through
`hf_files.SafetensorsFile`, each file's header checked and parsed once, each slice read through a
mapping of its own that reads only the bytes asked for: under FSDP/TP each rank reads the rows or
columns it holds of each tensor, never the whole model.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import torch

from pretrain.errors import UserError
from pretrain.train.hf import Source, hf_names, to_pairs
from pretrain.train.hf_files import SafetensorsFile, check_float, check_links, read_json_object

ST_DTYPES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16"}
INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
SHARD_NAME = re.compile(r"model-\d{5}-of-\d{5}\.safetensors")


# --- writing ---------------------------------------------------------------------------------------

def _nbytes(shape: list[int], dtype: torch.dtype) -> int:
    n = 1
    for s in shape:
        n *= s
    return n * torch.empty((), dtype=dtype).element_size()


def plan_shards(items: list, dtype: torch.dtype, max_shard_bytes: int) -> list[list]:
    """Consecutive items grouped so each group's data stays under `max_shard_bytes` (a tensor larger
    than that gets a shard of its own, as transformers does)."""
    shards, cur, size = [], [], 0
    for it in items:
        n = _nbytes(it[1], dtype)
        if cur and size + n > max_shard_bytes:
            shards.append(cur)
            cur, size = [], 0
        cur.append(it)
        size += n
    if cur:
        shards.append(cur)
    return shards


def write_safetensors(path: Path, items: list, dtype: torch.dtype, metadata: dict | None = None) -> int:
    """Write [(key, shape, thunk)] to one .safetensors file, one converted tensor at a time; data bytes."""
    header: dict = {"__metadata__": metadata or {"format": "pt"}}
    off = 0
    for key, shape, _ in items:
        n = _nbytes(shape, dtype)
        header[key] = {"dtype": ST_DTYPES[dtype], "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # data starts 8-byte aligned, as safetensors writes it
    with open(path, "wb") as f:
        f.write(len(raw).to_bytes(8, "little"))
        f.write(raw)
        for key, shape, thunk in items:
            t = thunk().detach().to("cpu", dtype).contiguous()
            if list(t.shape) != list(shape):
                raise RuntimeError(f"{key}: built {list(t.shape)}, header says {list(shape)}")
            f.write(t.reshape(-1).view(torch.uint8).numpy().data)
            del t
        f.flush()
        os.fsync(f.fileno())
    return off


def write_weights(folder: Path, items: list, dtype: torch.dtype, max_shard_bytes: int) -> list[str]:
    """model.safetensors (one shard) or numbered shards + index; returns the file names written."""
    shards = plan_shards(items, dtype, max_shard_bytes)
    if len(shards) == 1:
        write_safetensors(folder / SINGLE, shards[0], dtype)
        return [SINGLE]
    names, weight_map, total = [], {}, 0
    for k, group in enumerate(shards, 1):
        name = f"model-{k:05d}-of-{len(shards):05d}.safetensors"
        total += write_safetensors(folder / name, group, dtype)
        names.append(name)
        weight_map.update({key: name for key, _, _ in group})
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (folder / INDEX).write_text(json.dumps(index, indent=2) + "\n")
    return [*names, INDEX]


def publish(staging: Path, out: Path, written: list[str]) -> None:
    """Move the staged files into `out`, config.json last, and drop weight files of an earlier export
    that this one does not have (a rerun with fewer shards must not leave stale ones indexed).

    An earlier export's config.json goes first: the files are replaced one by one, and a kill
    between two moves must not leave the old config.json beside the new weights (transformers loads
    such a mix, the missing layers at random). Until the new config.json lands the folder is not a
    model, which every loader says."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").unlink(missing_ok=True)
    ours = set(written)
    for old in out.iterdir():  # only names this writer gives: a user's model_best.safetensors stays
        if old.name not in ours and (old.name in (SINGLE, INDEX) or SHARD_NAME.fullmatch(old.name)):
            old.unlink()
    for name in sorted(written, key=lambda n: n == "config.json"):
        os.replace(staging / name, out / name)
    shutil.rmtree(staging, ignore_errors=True)


# --- reading ---------------------------------------------------------------------------------------

class HFCheckpoint:
    """The safetensors files of a transformers folder; tensors read by slices."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.files: dict[str, SafetensorsFile] = {}  # name -> its parsed header, one parse per file
        self._by_file: dict[str, set[str]] | None = None  # name -> its keys, grouped on first read
        self.where = self._weight_map()
        # Older GPT-2 checkpoints on the Hub name keys without the "transformer." prefix.
        self.strip = "transformer." if not any(k.startswith("transformer.") for k in self.where) else ""

    def _weight_map(self) -> dict[str, str]:
        check_links(self.folder)  # a shard linked out of the folder is another file on this machine
        index = self.folder / INDEX
        if index.is_file():
            wm = read_json_object(index).get("weight_map")
            if not isinstance(wm, dict) or not all(isinstance(v, str) for v in wm.values()):
                raise UserError(f"{index}: not a safetensors index (no weight_map of tensor names to files)")
            for name in set(wm.values()):  # a hostile index must not point outside the folder
                if Path(name).name != name or not (self.folder / name).is_file():
                    raise UserError(f"{index}: shard {name!r} is missing or outside the folder")
            return dict(wm)
        single = self.folder / SINGLE
        if not single.is_file():
            raise UserError(f"{self.folder}: no {SINGLE} or {INDEX} (only safetensors weights are read: "
                            "pickled .bin checkpoints are refused)")
        self.files[SINGLE] = SafetensorsFile(single)
        return {k: SINGLE for k in self.files[SINGLE].keys()}

    def _open(self, name: str) -> SafetensorsFile:
        """The file's parsed header, kept: a file's header is parsed once, however many reads."""
        if name not in self.files:
            if self._by_file is None:  # grouped once: an index may name 20,000 files
                self._by_file = {}
                for k, v in self.where.items():
                    self._by_file.setdefault(v, set()).add(k)
            self.files[name] = SafetensorsFile(self.folder / name, keep=self._by_file[name])
        return self.files[name]

    def _bytes(self) -> int:
        return sum((self.folder / name).stat().st_size for name in set(self.where.values()))

    def check_size(self, numel: int) -> None:
        """Refuse a config.json that describes more parameters than the weight files can hold (at
        one byte each), before any memory is allocated for them: a hostile or mismatched config."""
        have = self._bytes()
        if numel > have:
            raise UserError(f"{self.folder}: config.json describes {numel:,} parameters, but the weight "
                            f"files hold {have:,} bytes")

    def check_holds(self, shape) -> None:
        """`check_size` before the model exists: config.json is input like any other, and 200,000
        layers in it ran for minutes building modules on the meta device before a weight was read."""
        self.check_size(shape.params())
        # The rotary tables are not weights but are allocated from config.json's context: a
        # max_position_embeddings of 10^9 asked for 32 GB of cos/sin before anything else failed.
        # Counted like the weights, one byte per number (Llama 3.1 8B: 16.8M numbers, 16 GB files).
        numbers = 0 if shape.learned_pos else shape.seq_len * shape.head_dim
        if numbers > self._bytes():
            raise UserError(f"{self.folder}: a context of {shape.seq_len:,} positions (config.json's "
                            f"max_position_embeddings) needs rotary tables of {numbers:,} numbers, more "
                            f"than the weight files hold in bytes ({self._bytes():,}); "
                            "set a shorter model.seq_len")

    def _file(self, key: str) -> tuple[str, str]:
        stored = key.removeprefix(self.strip) if self.strip else key
        name = self.where.get(stored)
        if name is None:
            raise UserError(f"{self.folder}: tensor {key!r} not found in the checkpoint")
        return stored, name

    def read(self, src: Source, gshape: tuple, box: list[tuple[int, int]] | None = None) -> torch.Tensor:
        """Our tensor (global shape `gshape`), or only its `box` [(start, stop)] per dim, from `src`.

        The file's header is parsed on its first read only; the data is mapped for this one read:
        pages read through a mapping count as this process's memory until it is unmapped, so a
        mapping kept open would grow the import's footprint to the model plus the whole file.
        """
        stored, name = self._file(src.key)
        sl = self._open(name).get_slice(stored)
        check_float(self.folder / name, stored, sl.get_dtype())
        return self._read(sl, name, src, gshape, box)

    def _read(self, sl, fname: str, src: Source, gshape: tuple, box: list | None) -> torch.Tensor:
        box = box or [(0, s) for s in gshape]
        want = list(gshape)
        if src.kind == "qkv":
            want[0] *= 3
        if src.kind in ("T", "qkv") and len(want) == 2:
            want = want[::-1]
        if list(sl.get_shape()) != want:
            raise UserError(f"{self.folder / fname}: {src.key} has shape {list(sl.get_shape())}, "
                            f"the config implies {want}")
        rows = slice(*box[0])
        cols = slice(*box[1]) if len(box) == 2 else None
        if src.kind == "rope":
            hd = gshape[0] // src.heads
            h0, h1 = box[0][0] // hd, -(-box[0][1] // hd)  # whole heads around the rows asked for
            block = sl[h0 * hd:h1 * hd, cols] if cols else sl[h0 * hd:h1 * hd]
            return to_pairs(block, h1 - h0)[box[0][0] - h0 * hd:box[0][1] - h0 * hd]
        if src.kind == "qkv":
            off = src.part * gshape[0]
            rows = slice(off + box[0][0], off + box[0][1])
        if src.kind in ("T", "qkv") and cols is not None:
            return sl[cols, rows].t()
        return sl[rows, cols] if cols is not None else sl[rows]


def local_box(t) -> list[tuple[int, int]] | None:
    """The block [(start, stop)] per dim of the global tensor that a DTensor's local shard holds, or
    None when it is not one contiguous block (the caller then reads the whole tensor).

    Placements are asked about one dim at a time: the global indices 0..n-1 along that dim are
    distributed with the placements that split it (others replicated), which also covers FSDP's
    `_StridedShard` over TP (the rows of a TP chunk, split again over the data-parallel ranks).
    """
    from torch.distributed.tensor import Replicate, distribute_tensor

    box = []
    for d, n in enumerate(t.shape):
        pl = [_retarget(p) if getattr(p, "dim", None) == d else Replicate() for p in t.placements]
        if all(isinstance(p, Replicate) for p in pl):
            box.append((0, n))
            continue
        try:
            idx = distribute_tensor(torch.arange(n), t.device_mesh, pl, src_data_rank=None).to_local()
        except Exception:  # a placement this reasoning does not know: read the tensor whole
            return None
        if idx.numel() == 0 or not torch.equal(idx, torch.arange(int(idx[0]), int(idx[0]) + idx.numel())):
            return None
        box.append((int(idx[0]), int(idx[0]) + idx.numel()))
    return box


def _retarget(p):
    """The same placement, splitting dim 0 (of the 1-D index tensor) instead of its own dim."""
    split = getattr(p, "split_factor", None)
    return type(p)(0) if split is None else type(p)(0, split_factor=split)


@torch.no_grad()
def load_hf_weights(model: torch.nn.Module, folder: str | Path, device: torch.device | str,
                    weights: bool = True) -> None:
    """Allocate a (possibly parallelized, meta-device) model on `device` and fill it from a
    transformers folder; each rank reads only its own pieces. Rotary tables are computed.
    `weights=False` only allocates (a resumed run's checkpoint is about to overwrite them)."""
    from torch.distributed.tensor import DTensor, distribute_tensor

    from pretrain.train.model import rope_tables
    from pretrain.train.parallel import _set_buffer, plain_name

    shape = model.shape
    table = hf_names(shape)
    ckpt = HFCheckpoint(folder) if weights else None
    if ckpt is not None:
        ckpt.check_size(sum(p.numel() for p in model.parameters()))
    model.to_empty(device=device)
    for name, p in model.named_parameters() if ckpt is not None else ():
        src = table.get(plain_name(name))
        if src is None:
            raise UserError(f"{folder}: the model's {plain_name(name)} has no counterpart in transformers")
        if isinstance(p, DTensor):
            box = local_box(p)
            if box is None:  # not one contiguous block: read this one tensor whole, keep the piece
                full = ckpt.read(src, tuple(p.shape)).to(device, p.dtype)
                local = distribute_tensor(full, p.device_mesh, p.placements, src_data_rank=None).to_local()
            else:
                local = ckpt.read(src, tuple(p.shape), box)
            p.to_local().copy_(local)
        else:
            p.copy_(ckpt.read(src, tuple(p.shape)))
    if not shape.learned_pos:
        cos, sin = rope_tables(shape.head_dim, shape.seq_len, model.rope_theta, device=device,
                               scaling=model.rope_scaling)
        _set_buffer(model, "rope_cos", cos)
        _set_buffer(model, "rope_sin", sin)


# --- export of a run -------------------------------------------------------------------------------

def export_hf(run: str | Path, out: str | Path, dtype: str = "fp32", step: int | None = None,
              max_shard_bytes: int = 5 * 1024**3, storage: str | None = None) -> dict:
    """Write a run's newest (or `step`) checkpoint as a folder transformers loads as is; a summary."""
    from pretrain.train.hf import arch_of, hf_config, to_hf_tensors
    from pretrain.train.precision import DTYPES
    from pretrain.train.runs import load_run_model

    if dtype not in ("fp32", "bf16"):
        raise UserError(f"--dtype {dtype!r}: a Hugging Face export is fp32 or bf16")
    model, cfg, step = load_run_model(run, step, storage)  # the project's checkpoint reader, not dcp directly
    arch_of(model.shape)  # refuse a shape transformers has no class for before writing anything
    out = Path(out)
    base = cfg.model.init_from
    if base and "://" not in base and Path(base).resolve() == out.resolve():
        # the base model a user downloaded would be replaced by the export, files and all
        raise UserError(f"-o {out}: the folder this run was initialised from (model.init_from); "
                        "an export there would replace the base model: choose another folder")
    staging = out / ".export-partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    tok = export_tokenizer_files(cfg, model.shape, staging)
    items = to_hf_tensors(model.shape, model.state_dict())
    written = write_weights(staging, items, DTYPES[dtype], max_shard_bytes)
    config = hf_config(model.shape, cfg.model.rope_theta, cfg.model.norm_eps,
                       {"fp32": "float32", "bf16": "bfloat16"}[dtype], tok["bos_id"], tok["eos_id"],
                       model.rope_scaling)
    gen = {"bos_token_id": tok["bos_id"], "eos_token_id": tok["eos_id"], "_from_model_config": True}
    for name, obj in (("generation_config.json", gen), ("config.json", config)):
        (staging / name).write_text(json.dumps(obj, indent=2) + "\n")
    written += [*tok["files"], "generation_config.json", "config.json"]
    publish(staging, out, written)
    n = sum(t.numel() for t in model.state_dict().values())
    return {"out": out, "step": step, "parameters": n, "files": written, "arch": config["model_type"]}


def export_tokenizer_files(cfg, shape, folder: Path) -> dict:
    """The run's tokenizer as transformers files in `folder`; {bos_id, eos_id, files}."""
    from pretrain.tokens.hf_tokenizer import write_hf_tokenizer

    return write_hf_tokenizer(cfg, shape.seq_len, folder)
