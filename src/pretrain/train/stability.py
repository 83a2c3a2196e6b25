"""What keeps a run alive: global-norm clipping (correct when gradients are sharded), the loss-spike
detector, and the rollback-and-skip policy's bookkeeping.

Clipping (lesson section 5b): ||g|| = sqrt(sum over shards of each shard's sum of squares), then every
gradient is multiplied by min(1, c / ||g||). With FSDP or TP no rank holds the whole gradient, so each
sums its own squares, one all-reduce adds them, and every rank applies the same factor. Plain tensors
and DTensors are summed separately: a foreach norm over a mixed list fails (torch 2.13), and
replicated DTensors must not be counted once per rank.

Spikes (lesson section 5a): step t is flagged when L_t > f * median(L_{t-w}, ..., L_{t-1}); the window
holds every recent loss, the spike's included, so one outlier does not raise the bar. A spike that
persists for `patience` steps triggers a rollback (PaLM, Chowdhery et al. 2022, sec. 5.1).
"""

from __future__ import annotations

import statistics
from collections import deque

import torch
import torch.distributed as dist


def _sharded_mesh_dims(t) -> tuple[int, ...]:
    """Mesh dimensions over which a DTensor's local values are disjoint pieces: Shard, and FSDP2's
    _StridedShard over TP (whose is_shard() is False in torch 2.13), i.e. neither Replicate nor Partial."""
    return tuple(i for i, p in enumerate(t.placements) if not (p.is_replicate() or p.is_partial()))


def _without_partial(t):
    """A Partial gradient (e.g. a sequence-parallel norm's) summed into a Replicate one: squares of
    partial pieces do not add up to the square of their sum."""
    if not any(p.is_partial() for p in t.placements):
        return t
    from torch.distributed.tensor import Replicate

    return t.redistribute(t.device_mesh, [Replicate() if p.is_partial() else p for p in t.placements])


@torch.no_grad()
def global_grad_norm(params: list[torch.Tensor], extra_groups: tuple = ()) -> torch.Tensor:
    """||g|| over all gradients (fp32 scalar), every rank agreeing.

    Plain tensors are whole on every rank (replicated or already all-reduced by DDP). A DTensor adds
    its local sum of squares to a bucket per (mesh, sharded dims); each bucket is all-reduced once over
    those mesh dims. `extra_groups` (e.g. the pipeline group, where each stage holds different
    parameters) get one more all-reduce of the total.
    """
    grads = [p.grad for p in params if p.grad is not None]
    device = grads[0].device if grads else torch.device("cpu")
    total = torch.zeros((), dtype=torch.float32, device=device)
    buckets: dict[tuple, list] = {}  # (mesh id, sharded dims) -> [mesh, dims, sum of squares]
    for g in grads:
        if hasattr(g, "to_local"):  # DTensor
            g = _without_partial(g)
            dims = _sharded_mesh_dims(g)
            key = (id(g.device_mesh), dims)
            entry = buckets.setdefault(key, [g.device_mesh, dims, torch.zeros_like(total)])
            entry[2] += g.to_local().float().pow(2).sum()
        else:
            total += g.float().pow(2).sum()
    for mesh, dims, sq in buckets.values():
        for d in dims:  # sum the pieces over each mesh dim the tensor is sharded on
            dist.all_reduce(sq, group=mesh.get_group(d))
        total += sq
    for group in extra_groups:
        dist.all_reduce(total, group=group)
    return total.sqrt()


@torch.no_grad()
def clip_grad_norm_(params: list[torch.Tensor], max_norm: float, extra_groups: tuple = ()) -> torch.Tensor:
    """Scale all gradients by min(1, c/||g||) in place; return ||g|| before clipping.

    The factor is exactly c/||g|| (no epsilon): it is only applied when ||g|| > c > 0. A non-finite
    norm leaves the gradients alone; the caller skips that step.
    """
    norm = global_grad_norm(params, extra_groups)
    if max_norm > 0 and torch.isfinite(norm) and norm > max_norm:
        factor = (max_norm / norm).item()
        for p in params:
            if p.grad is not None:
                p.grad.mul_(factor)
    return norm


class SpikeDetector:
    """Flags L_t > f * median(last w losses); persistent after `patience` flagged steps in a row."""

    def __init__(self, factor: float = 2.0, window: int = 4, patience: int = 1):
        self.factor, self.window, self.patience = factor, window, patience
        self.history: deque[float] = deque(maxlen=window)
        self.consecutive = 0
        self.last_median = float("nan")  # the median the last observed loss was compared with

    def observe(self, loss: float) -> bool:
        """Record a step's (all-reduced) loss; True when it is a spike under the median rule."""
        full = len(self.history) == self.window
        self.last_median = statistics.median(self.history) if full else float("nan")
        flagged = full and loss > self.factor * self.last_median
        self.history.append(loss)
        self.consecutive = self.consecutive + 1 if flagged else 0
        return flagged

    @property
    def persistent(self) -> bool:
        return self.consecutive >= self.patience

    def state_dict(self) -> dict:
        return {"history": list(self.history), "consecutive": self.consecutive}

    def load_state_dict(self, state: dict) -> None:
        self.history = deque((float(x) for x in state["history"]), maxlen=self.window)
        self.consecutive = int(state["consecutive"])


def detect_spikes(losses: list[float], factor: float = 2.0, window: int = 4) -> list[int]:
    """Indices of the steps a SpikeDetector flags over a whole loss history."""
    det = SpikeDetector(factor, window)
    return [t for t, loss in enumerate(losses) if det.observe(loss)]
