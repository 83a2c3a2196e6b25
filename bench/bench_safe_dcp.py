"""Benchmark: reading a DCP `.metadata` safely (train/dcp_metadata.py `parse`) against stock
`pickle.loads` of the same bytes, the previous allow-list unpickler (C, attributes set by BUILD)
and that allow-list on pickle's pure-Python `_Unpickler` (the fix tried in a lost session: 2-2.6x).

The checkpoint is real: `dcp.save` (single process) of a state shaped like a model of --layers
transformer blocks (9 tensors a block) and its AdamW state (exp_avg, exp_avg_sq, step, and the
param group's values), so the metadata holds what a resume reads. Tensors are tiny: the metadata's
size depends on the number of entries, not their bytes. Best of 5, seconds, and the ratio to
`pickle.loads` measured in the same run (the machine may be shared: ratios are the claim).

Run: PYTHONPATH=src .venv/bin/python bench/bench_safe_dcp.py [--layers 200]
"""

from __future__ import annotations

import argparse
import pickle
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch
import torch.distributed.checkpoint as dcp

from pretrain.train.dcp_metadata import parse

warnings.filterwarnings("ignore")

# the previous allow-list (safe_dcp.py before session 13), for the same-run comparison
_OLD = {
    "torch.distributed.checkpoint.metadata": {
        "Metadata", "MetadataIndex", "StorageMeta", "TensorProperties", "TensorStorageMetadata",
        "ChunkStorageMetadata", "BytesStorageMetadata", "_MEM_FORMAT_ENCODING"},
    "torch.distributed.checkpoint.filesystem": {"_StorageInfo"},
    "torch.serialization": {"_get_layout"}, "torch": {"Size"},
    "pathlib": {"PosixPath", "WindowsPath", "PurePosixPath", "PureWindowsPath", "Path"},
    "collections": {"OrderedDict"},
}


def _allowed(module: str, name: str) -> bool:
    dtype = module == "torch" and isinstance(getattr(torch, name, None), (torch.dtype, torch.memory_format))
    return name in _OLD.get(module, ()) or dtype


class OldC(pickle.Unpickler):
    def find_class(self, module, name):
        if _allowed(module, name):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name}")


class OldPure(pickle._Unpickler):
    def find_class(self, module, name):
        if _allowed(module, name):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name}")


def real_metadata(layers: int, where: Path) -> bytes:
    """A checkpoint written by torch: model + AdamW state, flattened as pretrain saves it."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

    def block():
        mods = {n: torch.nn.Linear(4, 4, bias=False) for n in ("q", "k", "v", "o", "up", "down", "gate")}
        return torch.nn.ModuleDict(mods | {n: torch.nn.LayerNorm(4, bias=False) for n in ("norm1", "norm2")})

    blocks = [block() for _ in range(layers)]
    model = torch.nn.ModuleList(blocks)
    opt = torch.optim.AdamW(model.parameters())
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    msd, osd = get_state_dict(model, opt, options=StateDictOptions(flatten_optimizer_state_dict=True))
    dcp.save({"model": msd, "optim": osd}, checkpoint_id=str(where), no_dist=True)
    return (where / ".metadata").read_bytes()


def best(fn, reps: int = 5) -> float:
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return min(out)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=200)
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        data = real_metadata(a.layers, Path(d) / "ckpt")
    import io

    ref = pickle.loads(data)
    assert parse(data, "bench") == ref
    print(f"metadata: {len(data):,} bytes, {len(ref.storage_data):,} storage items, "
          f"{len(ref.state_dict_metadata):,} entries (torch {torch.__version__})")
    base = best(lambda: pickle.loads(data))
    rows = [("pickle.loads (stock, unsafe)", base),
            ("previous allow-list, C unpickler", best(lambda: OldC(io.BytesIO(data)).load())),
            ("allow-list on pickle._Unpickler (pure Python)", best(lambda: OldPure(io.BytesIO(data)).load())),
            ("dcp_metadata.parse (stand-ins + rebuild)", best(lambda: parse(data, "bench")))]
    for name, t in rows:
        print(f"{name:48s} {t * 1e3:9.1f} ms   x{t / base:.2f} of pickle.loads")


if __name__ == "__main__":
    sys.exit(main())
