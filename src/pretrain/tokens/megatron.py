"""Export a token directory to Megatron-LM's indexed dataset (`PREFIX.bin` + `PREFIX.idx`).

Megatron's `.idx` (megatron/core/datasets/indexed_dataset.py, index version 1): the 9-byte magic
`MMIDIDX\\0\\0`, `<Q` version 1, `<B` dtype code (8 = uint16, 4 = int32), `<Q` sequence count,
`<Q` document-index count, then the int32 length of every sequence, the int64 byte offset of every
sequence in the `.bin`, and the int64 document indices `[0, 1, ..., n]`. Each of our documents
(its end-of-text token included, as Megatron's `--append-eod` writes them) is one sequence and one
document. The `.bin` is the concatenation of our shards (uint32 ids become int32: Megatron has no
uint32 code).
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from pretrain.curate.io import atomic_path
from pretrain.errors import UserError
from pretrain.tokens.shards import TokenDir

MAGIC = b"MMIDIDX\x00\x00"
DTYPE_CODES = {np.dtype("<u2"): 8, np.dtype("<i4"): 4}


def export_megatron(directory: str | Path, prefix: str | Path) -> tuple[Path, Path]:
    """Write PREFIX.bin and PREFIX.idx from a token directory; returns their paths."""
    d = TokenDir(directory)
    out_dtype = np.dtype("<u2") if d.dtype.itemsize == 2 else np.dtype("<i4")
    prefix = Path(prefix)
    bin_path, idx_path = Path(f"{prefix}.bin"), Path(f"{prefix}.idx")
    ours = {(d.path / sh[k]).resolve() for sh in d.manifest["shards"] for k in ("bin", "idx")}
    for p in (bin_path, idx_path):
        if p.resolve() in ours:  # the rename would replace a shard this export is reading
            raise UserError(f"{p} is a shard of {d.path}: choose another output prefix")
    with atomic_path(bin_path) as tmp, open(tmp, "wb") as f:
        for b in d.bins:
            for lo in range(0, b.size, 1 << 24):  # bounded memory: 16M tokens at a time
                f.write(np.asarray(b[lo:lo + (1 << 24)]).astype(out_dtype).tobytes())
    lengths = np.concatenate([np.zeros(0, np.int64)] + [np.diff(i.astype(np.int64)) for i in d.idxs])
    pointers = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64) * out_dtype.itemsize
    doc_idx = np.arange(lengths.size + 1, dtype=np.int64)
    with atomic_path(idx_path) as tmp, open(tmp, "wb") as f:
        f.write(MAGIC + struct.pack("<Q", 1) + struct.pack("<B", DTYPE_CODES[out_dtype]))
        f.write(struct.pack("<Q", lengths.size) + struct.pack("<Q", doc_idx.size))
        f.write(lengths.astype("<i4").tobytes())
        f.write(pointers[: lengths.size].astype("<i8").tobytes())
        f.write(doc_idx.astype("<i8").tobytes())
    return bin_path, idx_path
