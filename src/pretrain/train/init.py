"""Initial weights that do not depend on the parallel layout, written where they live.

Every matrix is cut into fixed row blocks (BLOCK_ELEMS values each, a function of its global shape
only); block b of parameter `name` is drawn from its own generator, seeded by a hash of (run seed,
name, b). A rank allocates only its shard of each parameter (FSDP2 rows, tensor-parallel rows or
columns, pipeline stages: whatever DTensor placements say) and draws only the blocks that intersect
its rows, keeping the part it holds. So any layout (DDP, FSDP, TP, PP, CP and their combinations)
starts from the same numbers as one process, and a rank's peak memory while initializing is its
share of the model plus one block, where materializing the whole model first costs 4 bytes per
parameter on every rank (torchtitan too initializes sharded parameters in place; its values depend
on the device's RNG, ours are the same on any device and any layout).

Distributions: N(0, std) for matrices and embeddings, residual outputs (attention wo, MLP w2) scaled
by 1/sqrt(2L) (GPT-2, Radford et al. 2019, sec. 2.3); norm gains one, biases zero.
"""

from __future__ import annotations

import hashlib
import math

import torch
from torch import nn

BLOCK_ELEMS = 1 << 20  # values drawn per generator: 4 MiB of fp32, the most one rank holds beyond its share
RESIDUAL_OUTPUTS = ("wo.weight", "w2.weight")


def block_seed(seed: int, name: str, block: int) -> int:
    """A 63-bit generator seed for one block of one parameter (stable across processes and versions)."""
    digest = hashlib.blake2b(f"{seed}/{name}/{block}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def std_of(name: str, std: float, n_layers: int) -> float:
    return std / math.sqrt(2 * n_layers) if name.endswith(RESIDUAL_OUTPUTS) else std


def rows_per_block(shape: torch.Size) -> int:
    cols = math.prod(shape[1:])
    return max(1, BLOCK_ELEMS // max(1, cols))


def local_indices(t: torch.Tensor) -> list[torch.Tensor | None]:
    """For each dimension of `t` (a DTensor or a plain tensor), the global indices its local part
    holds, in local order; None where the dimension is whole. Shard and _StridedShard placements
    (FSDP2 over tensor parallelism) both give a product of per-dimension index sets."""
    from torch.distributed.tensor import DTensor

    idx: list[torch.Tensor | None] = [None] * t.ndim
    if not isinstance(t, DTensor):
        return idx
    from torch.distributed.tensor._utils import _get_shard_size_and_offsets
    from torch.distributed.tensor.placement_types import Shard, _StridedShard

    mesh, size = t.device_mesh, list(t.shape)
    coord = mesh.get_coordinate()
    for mesh_dim, pl in enumerate(t.placements):
        if not isinstance(pl, (Shard, _StridedShard)):
            continue
        d = pl.dim
        n, offsets = _get_shard_size_and_offsets(size[d], mesh.size(mesh_dim), coord[mesh_dim], pl,
                                                 idx[d], t.shape[d], False)
        size[d] = n
        idx[d] = offsets[:n] if n else torch.zeros(0, dtype=torch.long)
    return idx


@torch.no_grad()
def fill_normal(t: torch.Tensor, name: str, seed: int, std: float) -> None:
    """Write into `t` (its local part) the values one process draws for the whole parameter."""
    from torch.distributed.tensor import DTensor

    local = t.to_local() if isinstance(t, DTensor) else t
    if local.numel() == 0:
        return
    idx = local_indices(t)
    rows, rest = idx[0], idx[1:]
    n_rows, per = t.shape[0], rows_per_block(t.shape)
    wanted = torch.arange(n_rows) if rows is None else rows
    for b in torch.unique(wanted // per).tolist():
        lo, hi = b * per, min(n_rows, (b + 1) * per)
        gen = torch.Generator().manual_seed(block_seed(seed, name, b))
        block = torch.empty((hi - lo, *t.shape[1:])).normal_(0.0, std, generator=gen)
        for d, ix in enumerate(rest, start=1):
            if ix is not None:
                block = block.index_select(d, ix)
        here = ((wanted >= lo) & (wanted < hi)).nonzero().flatten()  # local rows inside this block
        local[here] = block[wanted[here] - lo].to(local.device, local.dtype)


@torch.no_grad()
def init_model(model: nn.Module, device: torch.device | str, seed: int) -> nn.Module:
    """Allocate a (possibly parallelized) meta-device Transformer on `device`, this rank's pieces
    only, and fill it; rotary tables are computed whole (a few KB)."""
    from pretrain.train.model import rope_tables
    from pretrain.train.parallel import plain_name

    model.to_empty(device=device)
    shape = model.shape
    for full_name, p in model.named_parameters():
        name = plain_name(full_name)
        if p.ndim >= 2:
            fill_normal(p, name, seed, std_of(name, model.init_std, shape.n_layers))
        elif name.endswith("bias"):
            _local(p).zero_()
        else:
            _local(p).fill_(1.0)  # norm gains
    if not shape.learned_pos:
        cos, sin = rope_tables(shape.head_dim, shape.seq_len, model.rope_theta,
                               device=device, scaling=model.rope_scaling)
        model.rope_cos, model.rope_sin = cos, sin
    return model


def _local(t: torch.Tensor) -> torch.Tensor:
    from torch.distributed.tensor import DTensor

    return t.to_local() if isinstance(t, DTensor) else t
