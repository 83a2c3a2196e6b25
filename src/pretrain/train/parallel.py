"""Parallel layout: the degrees (dp_replicate x dp_shard x tp x pp = world size), validated before
anything is built, and the small apply_* functions that transform the meta-device model.

This issue ships the single-process path plus activation checkpointing and torch.compile; DDP,
FSDP2, TP and PP arrive as apply_ddp / apply_fsdp / apply_tp / apply_pp in the next issue, called by
`parallelize()` in the order mesh -> tp -> ac -> compile -> fsdp/ddp (torchtitan's order).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from pretrain.errors import UserError


@dataclass(frozen=True)
class ParallelDims:
    dp_replicate: int = 1
    dp_shard: int = 1
    tp: int = 1
    pp: int = 1

    @property
    def world_size(self) -> int:
        return self.dp_replicate * self.dp_shard * self.tp * self.pp

    def validate(self, world_size: int) -> None:
        """Refuse a layout whose degrees do not multiply to the number of processes."""
        for k in ("dp_replicate", "dp_shard", "tp", "pp"):
            if getattr(self, k) < 1:
                raise UserError(f"parallel.{k} must be >= 1, got {getattr(self, k)}")
        if self.world_size != world_size:
            raise UserError(
                f"parallel degrees dp_replicate={self.dp_replicate} x dp_shard={self.dp_shard} "
                f"x tp={self.tp} x pp={self.pp} = {self.world_size}, but the world size is {world_size}")


def dims_from_config(pcfg) -> ParallelDims:
    return ParallelDims(pcfg.dp_replicate, pcfg.dp_shard, pcfg.tp, pcfg.pp)


def apply_ac(model: nn.Module) -> None:
    """Full activation checkpointing per block: recompute each block's activations in backward."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

    for name, block in list(model.layers.named_children()):
        model.layers.register_module(name, checkpoint_wrapper(block))


def apply_compile(model: nn.Module) -> None:
    """torch.compile each block separately (repeated structure: one compiled graph reused)."""
    for name, block in list(model.layers.named_children()):
        model.layers.register_module(name, torch.compile(block))


def parallelize(model: nn.Module, dims: ParallelDims, pcfg) -> nn.Module:
    """Apply the configured transformations to a meta-device model, in place."""
    if dims.world_size > 1:
        raise UserError(f"parallel layout {dims} needs the multi-process trainer (next issue); "
                        "this build trains on one process")
    if pcfg.activation_checkpointing == "full":
        apply_ac(model)
    elif pcfg.activation_checkpointing != "none":
        raise UserError(f"parallel.activation_checkpointing must be 'none' or 'full', "
                        f"got {pcfg.activation_checkpointing!r}")
    if pcfg.compile:
        apply_compile(model)
    return model
