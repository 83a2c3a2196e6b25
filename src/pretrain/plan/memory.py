"""Memory per GPU: training state (with its accounting variants), ZeRO/FSDP sharding, activations
(Korthikanti et al. 2022), micro-batches in flight in a pipeline, and the output logits.

All sizes are bytes. Sources:
- Training state, 16 B/param: bf16 weights 2 + bf16 grads 2 + fp32 master 4 + Adam m, v 8
  (Rajbhandari et al. 2019 "ZeRO", sec. 3.1; the Ultra-Scale Playbook). 18 B: fp32 gradients (Megatron,
  Korthikanti 2022 sec. 2). 20 B: 16 B + an fp32 gradient-accumulation buffer (Ultra-Scale Playbook).
  Megatron's distributed optimizer: bf16 weights 2 + fp32 grads 4 kept whole, 12 sharded over DP
  (Megatron-LM docs, "distributed optimizer").
- ZeRO stages with K bytes of optimizer state per parameter: stage 0 (2+2+K)Ψ, 1: 4Ψ + KΨ/N,
  2: 2Ψ + (2+K)Ψ/N, 3: (4+K)Ψ/N (ZeRO, Figure 1 and sec. 5).
- Activations per layer, 2-byte, sequence s, micro-batch b, hidden h, heads a, tensor parallel t
  (Korthikanti et al. 2022, Table 2): none s·b·h·(34 + 5as/h); TP s·b·h·(10 + 24/t + 5as/(ht));
  TP+SP s·b·h·(34/t + 5as/(ht)); selective recompute drops the 5as/h term (so does a FlashAttention-
  style kernel, which never stores the s×s scores); full recompute keeps 2·s·b·h (÷t with SP).
  The constants count a GPT-3 block (MHA, 4h MLP, dropout); we apply them to every shape.
- Pipeline (Korthikanti sec. 4.2.3): with 1F1B the first stage holds L/p layers for p micro-batches,
  i.e. per-layer × L; interleaving with v chunks multiplies by (1 + (p−1)/(p·v)).
- Logits (Korthikanti sec. 4.3): the output layer and fp32 cross-entropy keep 4·s·b·h/t·(1 + V/h).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from pretrain.errors import UserError
from pretrain.plan.shapes import ModelShape

GB = 1e9
GiB = 2**30

# accounting -> (weight bytes, gradient bytes, optimizer bytes K incl. the fp32 master, extra unsharded)
ACCOUNTING: dict[str, tuple[int, int, int]] = {
    "16B": (2, 2, 12),  # the lesson, ZeRO, the Ultra-Scale Playbook
    "18B": (2, 4, 12),  # fp32 gradients (Megatron, Korthikanti)
    "20B": (2, 6, 12),  # bf16 grads + fp32 accumulation buffer (Ultra-Scale Playbook): 2 + 4 for grads
    "megatron-distopt": (2, 4, 12),  # 6 + 12/DP: grads kept whole, master+Adam sharded (ZeRO-1-like)
}
RECOMPUTE = ("none", "selective", "full")


def _accounting(name: str) -> tuple[int, int, int]:
    try:
        return ACCOUNTING[name]
    except KeyError:
        raise UserError(f"unknown memory accounting {name!r}; known: {', '.join(ACCOUNTING)}") from None


def training_state_bytes(params: float, accounting: str = "16B", dp: int = 1) -> float:
    """Bytes of weights + gradients + master + Adam for `params` parameters on one unsharded replica.

    `dp` only matters for "megatron-distopt", whose 12 optimizer bytes are sharded: 6 + 12/dp.
    """
    w, g, k = _accounting(accounting)
    if accounting == "megatron-distopt":
        return params * (w + g + k / dp)
    return params * (w + g + k)


def inference_weight_bytes(params: float, bytes_per_param: float = 2.0) -> float:
    """Serving needs only the weights: 2 bytes each in bf16."""
    return params * bytes_per_param


def zero_memory_per_gpu(params: float, stage: int, n_gpus: int, k: float = 12,
                        weight_bytes: float = 2, grad_bytes: float = 2) -> float:
    """Training state per GPU under ZeRO stage 0-3 (stage 3 = FSDP full sharding), ZeRO Figure 1."""
    if stage not in (0, 1, 2, 3):
        raise UserError(f"ZeRO stage must be 0, 1, 2 or 3, got {stage}")
    if n_gpus < 1:
        raise UserError(f"n_gpus must be >= 1, got {n_gpus}")
    w, g, n = weight_bytes * params, grad_bytes * params, n_gpus
    opt = k * params
    return (w + g + opt, w + g + opt / n, w + (g + opt) / n, (w + g + opt) / n)[stage]


def state_bytes_per_gpu(params: float, stage: int, dp: int, accounting: str = "16B") -> float:
    """ZeRO stage `stage` over `dp` ranks with a named accounting (megatron-distopt is its own stage)."""
    w, g, k = _accounting(accounting)
    if accounting == "megatron-distopt":
        return training_state_bytes(params, accounting, dp) if stage < 2 else zero_memory_per_gpu(
            params, stage, dp, k, w, g)
    return zero_memory_per_gpu(params, stage, dp, k, w, g)


def activation_bytes_per_layer(s: int, b: int, h: int, a: int, t: int = 1, sp: bool = False,
                               recompute: str = "none", flash: bool = False) -> float:
    """Activation bytes one transformer layer keeps for the backward pass (Korthikanti 2022, Table 2)."""
    if recompute not in RECOMPUTE:
        raise UserError(f"recompute must be one of {', '.join(RECOMPUTE)}, got {recompute!r}")
    sbh = s * b * h
    if recompute == "full":
        return 2 * sbh / (t if sp else 1)  # only the layer's input survives
    scores = 0.0 if (recompute == "selective" or flash) else 5 * a * s / (h * t)
    linear = 34 / t if sp else 10 + 24 / t  # without SP the norms and dropouts (10) are replicated
    return sbh * (linear + scores)


def activation_bytes(shape: ModelShape, b: int = 1, t: int = 1, sp: bool = False, recompute: str = "none",
                     flash: bool = False, p: int = 1, v: int = 1, m: int | None = None,
                     seq_len: int | None = None) -> float:
    """Activation bytes on the busiest pipeline stage (the first), all layers it holds, all micro-batches
    in flight under 1F1B (interleaved when v > 1). With p = 1 this is per-layer × L."""
    s = seq_len or shape.seq_len
    per_layer = activation_bytes_per_layer(s, b, shape.d_model, shape.n_heads, t, sp, recompute, flash)
    layers_per_stage = layers_per_gpu(shape.n_layers, p, v)
    in_flight = p if m is None else min(p, m)  # 1F1B: the first stage starts p forwards before a backward
    total = per_layer * layers_per_stage * in_flight
    if p > 1 and v > 1:
        total *= 1 + (p - 1) / (p * v)  # Korthikanti sec. 4.2.3, interleaved schedule
    return total


def recompute_working_bytes(shape: ModelShape, b: int = 1, t: int = 1, sp: bool = False,
                            recompute: str = "none", flash: bool = False) -> float:
    """While a checkpointed layer is re-run for its backward, its full activations exist briefly: one
    layer's worth on top of the stored inputs (0 without full recompute)."""
    if recompute != "full":
        return 0.0
    return activation_bytes_per_layer(shape.seq_len, b, shape.d_model, shape.n_heads, t, sp, "none", flash)


def layers_per_gpu(n_layers: int, p: int = 1, v: int = 1) -> int:
    """Layers on the busiest GPU when n_layers split into p·v chunks (uneven splits round up)."""
    return -(-n_layers // (p * v)) * v


def logits_bytes(s: int, b: int, h: int, vocab: int, t: int = 1) -> float:
    """Output layer + fp32 cross-entropy on the last stage: 4·s·b·h/t·(1 + V/h) (Korthikanti sec. 4.3)."""
    return 4 * s * b * h / t * (1 + vocab / h)


def stage_params(shape: ModelShape, tp: int = 1, pp: int = 1, v: int = 1) -> float:
    """Parameters held by the largest pipeline stage's GPU, split over tp (first stage: embedding;
    last stage: head and final norm). Norms are replicated across TP; we divide them too (a few KB)."""
    layers = layers_per_gpu(shape.n_layers, pp, v) * shape.layer_params()
    vh = shape.vocab_size * shape.d_model
    pos = shape.seq_len * shape.d_model if shape.learned_pos else 0
    if pp == 1:
        return shape.params() / tp
    first = layers + vh + pos
    last = layers + vh + shape.d_model * 2  # head (a copy of a tied matrix, as Megatron keeps) + final norm
    return max(first, last) / tp


@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes on the busiest GPU of a layout."""

    state: float
    activations: float
    logits: float
    total: float

    def as_dict(self) -> dict:
        return asdict(self)


def memory_per_gpu(shape: ModelShape, tp: int = 1, pp: int = 1, dp: int = 1, zero: int = 0, mbs: int = 1,
                   recompute: str = "none", sp: bool = False, flash: bool = True, v: int = 1,
                   m: int | None = None, accounting: str = "16B") -> MemoryBreakdown:
    """The whole bill for the busiest GPU: sharded state + activations in flight + logits. With a
    pipeline the first stage holds the most micro-batches and the last the logits: take the larger."""
    state = state_bytes_per_gpu(stage_params(shape, tp, pp, v), zero, dp, accounting)
    acts = activation_bytes(shape, mbs, tp, sp, recompute, flash, pp, v, m)
    acts += recompute_working_bytes(shape, mbs, tp, sp, recompute, flash)
    logits = logits_bytes(shape.seq_len, mbs, shape.d_model, shape.vocab_size, tp)
    if pp == 1:
        return MemoryBreakdown(state, acts, logits, state + acts + logits)
    # 1F1B: the last stage runs each micro-batch's backward right after its forward (one in flight)
    last_acts = activation_bytes(shape, mbs, tp, sp, recompute, flash, pp, v, m=1)
    last_acts += recompute_working_bytes(shape, mbs, tp, sp, recompute, flash)
    first = MemoryBreakdown(state, acts, 0.0, state + acts)
    last = MemoryBreakdown(state, last_acts, logits, state + last_acts + logits)
    return max(first, last, key=lambda mb: mb.total)
