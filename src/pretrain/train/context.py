"""Context parallelism: each of `cp` ranks holds a slice of every sequence; attention sees the whole
sequence by all-gathering keys and values (Llama 3's choice, Dubey et al. 2024 sec. 3.3.2).

Load balance: causal attention gives late tokens more work, so the sequence is cut into 2·cp chunks
and rank r holds chunks r and 2·cp-1-r (Llama 3 sec. 3.3.2; Megatron-LM's context parallelism).
Every token keeps its global position: rotary angles are looked up at it, and the causal mask
compares query and key positions (keys are gathered in rank order, not sequence order; attention
does not care about the order of its keys once the mask is right).

The all-gather's backward is a reduce-scatter: each rank's attention contributes gradient to every
key and value, and a rank's own K/V gradient is the sum of those contributions (NCCL's
reduce_scatter; gloo has none, so an all-reduce and a slice there).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
import torch.distributed as dist


def positions(seq_len: int, cp: int, rank: int) -> np.ndarray:
    """Global positions of the tokens `rank` holds: chunks rank and 2·cp-1-rank of 2·cp."""
    if seq_len % (2 * cp):
        raise ValueError(f"seq_len={seq_len} is not divisible by 2 x cp = {2 * cp}")
    c = seq_len // (2 * cp)
    return np.concatenate([np.arange(rank * c, (rank + 1) * c),
                           np.arange((2 * cp - 1 - rank) * c, (2 * cp - rank) * c)])


class _GatherSequence(torch.autograd.Function):
    """All-gather along dim `dim` over `group` (rank order); backward: reduce-scatter of the gradient."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group, dim: int) -> torch.Tensor:
        ctx.group, ctx.dim = group, dim
        parts = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]
        dist.all_gather(parts, x.contiguous(), group=group)
        return torch.cat(parts, dim=dim)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        n, r = dist.get_world_size(ctx.group), dist.get_rank(ctx.group)
        chunks = [c.contiguous() for c in grad.chunk(n, dim=ctx.dim)]
        if dist.get_backend(ctx.group) == "nccl":
            out = torch.empty_like(chunks[r])
            dist.reduce_scatter(out, chunks, group=ctx.group)
            return out, None, None
        whole = grad.contiguous()
        dist.all_reduce(whole, group=ctx.group)
        return whole.chunk(n, dim=ctx.dim)[r].contiguous(), None, None


@dataclass
class ContextParallel:
    """What an attention layer needs under context parallelism (the same for every layer)."""

    group: object
    q_pos: torch.Tensor  # (T/cp,) global positions of this rank's tokens
    k_pos: torch.Tensor  # (T,) global positions of the gathered keys, in rank order
    _masks: dict = field(default_factory=dict, repr=False)  # (dtype, device) -> the mask

    def gather(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, H, T/cp, D) keys and values -> the whole sequence's, one collective for both."""
        kv = _GatherSequence.apply(torch.stack((k, v)), self.group, 3)
        return kv[0], kv[1]

    def mask(self, dtype: torch.dtype, device) -> torch.Tensor:
        """(T/cp, T) additive causal mask: -inf where the key comes after the query. Built once and
        shared by every layer and step: SDPA saves its mask for backward, so a mask per layer kept
        L copies of T²/cp values (at 128k tokens and cp 16, 2.1 GB in bf16 each)."""
        key = (dtype, torch.device(device))
        cached = self._masks.get(key)
        if cached is None:
            later = self.k_pos.to(device)[None, :] > self.q_pos.to(device)[:, None]
            cached = torch.zeros(later.shape, dtype=dtype, device=device).masked_fill(later, float("-inf"))
            self._masks[key] = cached
        return cached


def apply_cp(model, layout) -> None:
    """Give the model (and each attention layer) this rank's slice of the sequence."""
    from pretrain.train.model import Attention

    cp, rank, seq_len = layout.dims.cp, layout.cp_rank, model.shape.seq_len
    ctx = ContextParallel(layout.group("cp"), torch.as_tensor(positions(seq_len, cp, rank)),
                          torch.as_tensor(np.concatenate([positions(seq_len, cp, r) for r in range(cp)])))
    model.cp = ctx
    for m in model.modules():
        if isinstance(m, Attention):
            m.cp = ctx
