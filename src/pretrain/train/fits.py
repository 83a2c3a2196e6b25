"""Whether a run fits in memory, said before anything is allocated.

A model or batch that cannot fit (model.n_layers=2**40, data.batch_size=10**12: typos, or a recipe
for a cluster run on a laptop) used to reach torch's allocator: an OverflowError, a "Maximum allowed
dimension exceeded", or minutes of swapping before the kernel's OOM killer. The planner's estimate
of the busiest process (pretrain.plan.memory.memory_per_gpu with this trainer's activation profile:
AdamW state sharded as the layout shards it, activations and the loss of one micro-batch) is
compared with what the device has; above it, one line names the shape, the batch and the numbers.
The estimate is the planner's, so it is approximate: the check refuses only what exceeds the whole
device, never a run that is merely tight.
"""

from __future__ import annotations

import os

from pretrain.errors import UserError

GB = 1e9


def device_bytes(device) -> tuple[float, str]:
    """(bytes one process may use, what they are): a GPU's memory, or the machine's RAM shared by
    the processes torchrun started on this node."""
    import torch

    if device.type == "cuda":
        return float(torch.cuda.get_device_properties(device).total_memory), f"{device} has"
    total = float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    local = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1))
    return total / local, "this machine has" if local == 1 else f"each of {local} processes here has"


def preflight(cfg, world: int, device):
    """Every check of a resolved config that needs no model, in the trainer's order: numbers in range,
    the layout against the world size, the shape against the layout, memory. Returns (dims, shape).
    tests/test_config_sweep.py runs it over every numeric key, so a check added here is swept."""
    from pretrain.train.config import validate
    from pretrain.train.loss import check_layout
    from pretrain.train.model import resolve_shape
    from pretrain.train.parallel import dims_from_config

    validate(cfg)
    dims = dims_from_config(cfg.parallel)
    dims.validate(world)
    check_layout(cfg.train.loss_chunks, dims)
    shape = resolve_shape(cfg.model)
    dims.check_shape(shape, cfg.parallel)
    check_fits(cfg, shape, dims, device)
    return dims, shape


def estimate(cfg, shape, dims):
    """The planner's bill for the busiest process of this run (pretrain.plan.memory.MemoryBreakdown):
    the same function `pretrain plan --activations pretrain` uses, with the run's precision and
    train.loss_chunks for the loss (12 bytes per vocabulary entry per token, in bf16 and fp32,
    divided by the chunks: measured)."""
    from pretrain.plan.memory import memory_per_gpu

    p = cfg.parallel
    zero = 3 if dims.dp_shard > 1 else 0  # FSDP2 shards weights, gradients and AdamW state
    return memory_per_gpu(shape, tp=dims.tp, pp=dims.pp, dp=dims.dp_shard * dims.cp, zero=zero,
                          mbs=cfg.data.batch_size, recompute=p.activation_checkpointing,
                          sp=p.sequence_parallel, flash=True, cp=dims.cp, profile="pretrain",
                          dtype=cfg.precision.dtype, loss_chunks=cfg.train.loss_chunks)


def check_fits(cfg, shape, dims, device) -> None:
    """Refuse, in one line, a run whose estimated memory per process exceeds the device's."""
    need = estimate(cfg, shape, dims)
    have, where = device_bytes(device)
    if need.total <= have:
        return
    keys = ", ".join(f"model.{k}={getattr(shape, k)}" for k in
                     ("n_layers", "d_model", "n_heads", "d_ff", "vocab_size", "seq_len", "attn_head_dim")
                     if k != "attn_head_dim" or getattr(shape, k, None))  # only when set (Qwen3)
    raise UserError(
        f"the run needs about {need.total / GB:,.1f} GB per process and {where} {have / GB:,.1f} GB "
        f"(the planner's estimate: {need.state / GB:,.1f} GB of weights, gradients and AdamW state for "
        f"{shape.params():,} parameters, {(need.activations + need.logits) / GB:,.1f} GB of activations "
        f"for data.batch_size={cfg.data.batch_size}; {keys}): shrink the model or the batch, or shard "
        "it (parallel.dp_shard, tp, pp); `pretrain plan` sizes layouts")
