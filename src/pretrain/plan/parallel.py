"""Parallelism math: collective traffic (ring all-reduce, reduce-scatter, all-gather, ZeRO's volumes),
tensor- and pipeline-parallel traffic, transfer times, the pipeline bubble in both conventions, the
GPipe schedule grid, and the global gradient norm over shards.

Sources:
- Ring all-reduce sends 2(G−1)/G·S per GPU: a reduce-scatter then an all-gather, (G−1)/G·S each
  (Patarasuk & Yuan 2009; the lesson sec. 3a).
- ZeRO (Rajbhandari et al. 2019, sec. 7): DP and ZeRO-1/2 move 2Ψ elements per step per GPU; ZeRO-3
  adds an all-gather of the weights in the backward pass too: 3Ψ, i.e. 1.5×.
- Tensor parallel (Megatron-LM, Shoeybi et al. 2019): per layer 2 all-reduces forward and 2 backward of
  the s·b·h activations; with sequence parallelism each becomes a reduce-scatter + all-gather of the
  same total volume (Korthikanti 2022 sec. 4.2.2). The embedding's all-reduce, the head's input
  gradient and the logits' all-gather come on top (tp_bytes_ends); PyTorch's unfused per-Linear
  tensor parallelism issues 6-7 all-reduces per layer, not 4 (tp_allreduces_per_layer).
- Pipeline bubble: (p−1)/(m+p−1) of wall time (GPipe; the lesson sec. 3d); Megatron-LM 2021 quotes
  bubble time over ideal time, (p−1)/m, and (p−1)/(v·m) for the interleaved schedule with v chunks.
"""

from __future__ import annotations

import math

from pretrain.errors import UserError


def ring_allreduce_bytes(size: float, g: int) -> float:
    """Bytes each GPU sends in a ring all-reduce of `size` bytes over `g` GPUs: 2(g−1)/g·size."""
    _check_group(g)
    return 2 * (g - 1) / g * size


def reduce_scatter_bytes(size: float, g: int) -> float:
    """Bytes each GPU sends in a ring reduce-scatter (or all-gather) of a `size`-byte buffer."""
    _check_group(g)
    return (g - 1) / g * size


all_gather_bytes = reduce_scatter_bytes


def _check_group(g: int) -> None:
    if g < 1:
        raise UserError(f"a communication group needs at least 1 GPU, got {g}")


def dp_bytes_per_step(params: float, dp: int, zero: int, grad_bytes: float = 2.0) -> float:
    """Data-parallel bytes sent per GPU per step. Stages 0-2: one all-reduce of the gradients (as
    reduce-scatter + all-gather: 2Ψ elements). Stage 3: + an all-gather of weights for the backward:
    3Ψ elements, 1.5× (ZeRO sec. 7)."""
    base = ring_allreduce_bytes(params * grad_bytes, dp)
    return base * 1.5 if zero == 3 else base


def tp_bytes_per_layer(s: int, b: int, h: int, t: int, act_bytes: float = 2.0,
                       allreduces: int = 4) -> float:
    """Bytes each GPU sends per transformer layer per micro-batch for tensor parallelism: 4 all-reduces
    (2 forward, 2 backward) of the s·b·h activations (Megatron-LM sec. 3). `allreduces` counts an
    implementation that issues more (`tp_allreduces_per_layer`)."""
    if t == 1:
        return 0.0
    return allreduces * ring_allreduce_bytes(s * b * h * act_bytes, t)


def tp_allreduces_per_layer(fused: bool = True, gated_mlp: bool = True,
                            sequence_parallel: bool = False) -> int:
    """All-reduces of s·b·h per layer per micro-batch (forward + backward) under tensor parallelism.

    Megatron-LM (sec. 3) fuses Q/K/V into one column-parallel matrix and the MLP's input matrices into
    one: its f operator all-reduces the input gradient once per sub-block in backward, and g once per
    sub-block in forward: 4. PyTorch's per-module ColwiseParallel (our trainer, train/parallel.py)
    turns the input into a DTensor in each Linear separately, so each column-parallel Linear
    all-reduces its own input gradient: 3 (q, k, v) + 2 (SwiGLU's w1, w3) or 1 (GELU's w1), plus the
    2 forward ones: 7 or 6. With sequence parallelism the sub-block's input is gathered once
    (PrepareModuleInput) and the q/k/v gradients sum before its single reduce-scatter: 4 pairs of
    reduce-scatter + all-gather, each pair the volume of one all-reduce (Korthikanti 2022 sec. 4.2.2).
    """
    if fused or sequence_parallel:
        return 4
    return 2 + 3 + (2 if gated_mlp else 1)


def tp_bytes_ends(s: int, b: int, h: int, vocab: int, t: int, act_bytes: float = 2.0,
                  tied: bool = False) -> float:
    """Bytes each GPU sends per micro-batch outside the layers under tensor parallelism.

    Vocabulary-parallel embedding (rows split over the vocabulary): one all-reduce of its s·b·h output
    forward; the input is token ids, so nothing backward (Megatron-LM sec. 3). Column-parallel output
    head: its s·b·h input gradient is all-reduced backward, and the s·b·V logits are all-gathered
    forward so the loss sees whole rows ((t−1)/t·s·b·V each; Megatron instead computes a
    vocab-parallel cross-entropy from 3 all-reduces of s·b numbers, negligible). With tied
    embeddings our trainer leaves embedding and head replicated: nothing. With sequence parallelism
    the same volumes move as pairs: the embedding reduce-scatters forward and all-gathers its output
    gradient backward (DTensor returns it to Partial through Replicate), the head all-gathers its
    input forward and reduce-scatters the gradient backward."""
    if t == 1 or tied:
        return 0.0
    act = s * b * h * act_bytes
    return 2 * ring_allreduce_bytes(act, t) + all_gather_bytes(s * b * vocab * act_bytes, t)


def tp_bytes_per_step(s: int, b: int, h: int, layers: int, vocab: int, t: int, act_bytes: float = 2.0,
                      allreduces: int = 4, tied: bool = False) -> float:
    """Tensor-parallel bytes each GPU sends per micro-batch: the layers plus the embedding and head."""
    return (layers * tp_bytes_per_layer(s, b, h, t, act_bytes, allreduces)
            + tp_bytes_ends(s, b, h, vocab, t, act_bytes, tied))


def pp_bytes_per_microbatch(s: int, b: int, h: int, t: int = 1, sp: bool = False,
                            act_bytes: float = 2.0) -> float:
    """Bytes a stage boundary sends per micro-batch: activations forward plus their gradients back.
    With SP each TP rank sends only its 1/t slice (Megatron's scatter-gather optimization does the
    same without SP; we only credit it with SP)."""
    return 2 * s * b * h * act_bytes / (t if sp else 1)


def transfer_seconds(nbytes: float, bandwidth: float, latency: float = 0.0) -> float:
    """Time to push `nbytes` at `bandwidth` bytes/s per GPU."""
    return latency + nbytes / bandwidth if nbytes else 0.0


def pipeline_bubble(p: int, m: int, v: int = 1, convention: str = "wall") -> float:
    """Pipeline bubble for p stages, m micro-batches, v chunks per GPU (interleaved when v > 1).

    convention="wall": share of the step's wall time idle, (p−1)/(v·m + p−1) (GPipe; the lesson).
    convention="ideal": bubble time over ideal time, (p−1)/(v·m) (Megatron-LM 2021, sec. 2.2).
    """
    if p < 1 or m < 1 or v < 1:
        raise UserError(f"pipeline needs p, m, v >= 1, got p={p} m={m} v={v}")
    if convention == "wall":
        return (p - 1) / (v * m + p - 1)
    if convention == "ideal":
        return (p - 1) / (v * m)
    raise UserError(f"bubble convention must be 'wall' or 'ideal', got {convention!r}")


def pipeline_schedule(p: int, m: int) -> list[list[int]]:
    """GPipe's schedule as a p × 2(m+p−1) grid: +k forward of micro-batch k, −k its backward, 0 idle.

    Stage i runs forward k at time i + k − 1; backwards run in reverse, the last stage first, right
    after the last forward leaves it."""
    steps = m + p - 1
    grid = [[0] * (2 * steps) for _ in range(p)]
    for i in range(p):
        for k in range(1, m + 1):
            grid[i][i + k - 1] = k
            grid[i][steps + (p - 1 - i) + (k - 1)] = -(m + 1 - k)
    return grid


def idle_cells(grid: list[list[int]]) -> int:
    return sum(1 for row in grid for v in row if v == 0)


def global_grad_norm(shard_sums_of_squares: list[float]) -> float:
    """The global L2 norm from each shard's local sum of squares: all-reduce the sums, then sqrt."""
    return math.sqrt(sum(shard_sums_of_squares))


def clip_shards(shards: list[list[float]], max_norm: float) -> list[list[float]]:
    """Clip sharded gradients by their global norm: every shard scales by the same min(1, c/‖g‖)."""
    norm = global_grad_norm([sum(x * x for x in s) for s in shards])
    scale = min(1.0, max_norm / norm) if norm > 0 else 1.0
    return [[x * scale for x in s] for s in shards]
