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
- Logits (Korthikanti sec. 4.3): the output layer and fp32 cross-entropy keep 4·s·b·h/t·(1 + V/h);
  torchtitan's unfused fp32 loss peaks at 12 bytes per vocabulary entry, not 4, and so does our
  trainer's (14 or 16 on a pipeline's last stage): `loss_bytes_per_vocab`.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass

from pretrain.errors import UserError
from pretrain.plan.shapes import ModelShape

GB = 1e9
GiB = 2**30


def size_text(gb: float) -> str:
    """A size given in GB (1e9 bytes, as the plan's JSON holds it) for a person: one decimal in the
    largest unit it is at least 1 of (GB, MB, kB), so at least two significant figures; a tiny
    model's 20 MB of training state reads "20.2 MB", not "0.0" GB. Every size the planner prints
    (its tables, sentences, the report) goes through here; the JSON keeps GB numbers."""
    b = gb * GB
    if b != b or b in (float("inf"), float("-inf")):
        return f"{gb} GB"
    for unit, scale in (("GB", GB), ("MB", 1e6), ("kB", 1e3)):
        if abs(b) >= scale:
            return f"{b / scale:,.1f} {unit}"
    return f"{b:,.0f} B" if b else "0 GB"

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


def layers_per_gpu(n_layers: int, p: int = 1, v: int = 1) -> int:
    """Layers on the busiest GPU when n_layers split into p·v chunks (uneven splits round up)."""
    return -(-n_layers // (p * v)) * v


# Bytes per vocabulary entry per token that the loss holds at its peak, by activation profile.
# Korthikanti sec. 4.3 counts 4 (fp32 logits, as Megatron's fused vocab-parallel cross-entropy keeps).
# torchtitan (components/loss.py) runs F.cross_entropy(pred.flatten(0, 1).float(), labels) on the
# bf16 logits and its train step deletes `pred` before backward: log_softmax saves its fp32 output
# (4) and, in backward, nll_loss's dense fp32 gradient (4) and log_softmax's fp32 input gradient (4)
# exist beside it: 12 (the forward's bf16 logits + fp32 copy + output is 10). Measured with a live-
# tensor count on the CPU (tests/test_plan_activations_peers.py).
# Our trainer (train/trainer.py) runs F.cross_entropy(logits.float().flatten(0, 1), y) on the head's
# autocast output and drops `logits` before backward, as torchtitan does: 12, in bf16 and in fp32
# (there the logits are their own upcast, freed the same way). Before session 8 it kept them: 14
# (16 in fp32). Measured by counting live tensors of the trainer's own step on the CPU
# (tests/test_config_sweep.py, preflight_counts). On a pipeline's last stage torch.distributed.
# pipelining keeps each micro-batch's stage output (the logits) until that micro-batch's backward
# has run (PipelineStage.fwd_cache): 2 more in bf16, 4 in fp32.
LOSS_BYTES_PER_VOCAB = {"fused": 4, "pretrain": 12, "torchtitan": 12}
PIPELINE_HELD_LOGITS = {"bf16": 2, "fp16": 2, "fp8": 2, "fp32": 4}


def loss_bytes_per_vocab(profile: str, dtype: str = "bf16", pipeline: bool = False) -> float:
    """Bytes per vocabulary entry per token the loss holds at its peak, for a profile, the run's
    precision.dtype and whether it runs on a pipeline's last stage (our trainer's profile only: the
    others' are published for one layout)."""
    held = PIPELINE_HELD_LOGITS.get(dtype, 2) if pipeline and profile == "pretrain" else 0
    return LOSS_BYTES_PER_VOCAB[profile] + held


def logits_bytes(s: int, b: int, h: int, vocab: int, t: int = 1, per_vocab: float = 4,
                 chunks: int = 1) -> float:
    """Output layer + cross-entropy on the last stage: 4·s·b·h/t + per_vocab·s·b·V/t; with the fp32
    loss of Korthikanti sec. 4.3 (per_vocab = 4) that is 4·s·b·h/t·(1 + V/h). A loss over `chunks`
    slices of the tokens, each recomputed in backward (train/loss.py), holds one slice's vocabulary
    term at a time: per_vocab·s·b·V/(t·chunks), measured (tests/test_config_sweep.py)."""
    return s * b * (4 * h + per_vocab * vocab / chunks) / t


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


# --- The activation model the planner uses: saved tensors of the blocks we train, one by one ----------

PROFILES = ("fused", "pretrain", "torchtitan")


def saved_bytes_per_token(shape: ModelShape, t: int = 1, sp: bool = False, recompute: str = "none",
                          flash: bool = True, profile: str = "fused", selective: str = "attention",
                          cp: int = 1, dropout: bool = True) -> float:
    """Bytes one block keeps for backward per token on one TP rank, summed tensor by tensor.

    profile "fused": Megatron-Core / Transformer Engine kernels (what the Megatron papers and Llama 3
    ran): bf16 residual stream; each norm saves its bf16 input and fp32 1/rms; one saved input per
    fused QKV and per fused gate/up matrix (with SP the local 1/t shard, re-gathered in backward:
    Korthikanti 2022 sec. 4.2.2); Q, K, V at their own widths (GQA not expanded); flash attention
    saves its output (also the projection's input) and fp32 log-sum-exp per head; a fused SwiGLU
    saves its two inputs. For a GPT block (LayerNorm, GELU, dropout, unfused attention) this is
    Korthikanti's 34·h + 5·a·s per token exactly. `dropout=False` is a GPT block trained with
    dropout probability 0 (MPT's default, llm-foundry configuration_mpt.py: resid_pdrop = emb_pdrop
    = attn_pdrop = 0.0): PyTorch's dropout returns its input unchanged when p == 0
    (ATen Dropout.cpp), so the two 1-byte residual masks are not saved (32·h + 4·a with flash).

    profile "pretrain": this project's trainer (train/model.py) under bf16 autocast, as counted by
    saved-tensor hooks (tests/test_plan_activations.py): an fp32 residual stream; each RMSNorm
    keeps its fp32 input, fp32 normalized output and fp32 1/rms; autocast casts the normalized input
    once per linear layer (3 copies for Q, K, V; 2 for SwiGLU's w1, w3), always whole (an all-
    gathered input stays saved); K and V are expanded to all heads before attention; SwiGLU keeps
    w1·x, w3·x, silu(w1·x) and the product. Without flash the softmax output (a·s per token)
    replaces the log-sum-exp and the attention output. Under context parallelism (cp ranks, per token
    this rank holds) the trainer all-gathers K and V and expands them: it saves the whole sequence's,
    cp times a token's share (train/context.py; its one (T/cp, T) mask is `cp_mask_bytes`).

    profile "torchtitan": eager PyTorch with bf16 weights and no autocast (torchtitan's FSDP2
    MixedPrecisionPolicy(param_dtype=bf16), its models/llama/model.py and norms.py), counted by
    saved-tensor hooks on a copy of that block (tests/test_plan_activations_peers.py): a bf16 residual
    stream; each RMSNorm keeps the fp32 upcast of its input (pow and mul), the fp32 1/rms and the
    bf16 normalized output (the weight's mul), and its bf16 output is saved once, shared by the
    linears it feeds; Q and the expanded K, V (repeat_kv) as SDPA's inputs; SDPA's output (also
    wo's input: .contiguous() of a flash output is a view) and log-sum-exp; SwiGLU's four f-wide
    tensors. The complex rotary multiply saves only the constant frequencies. 24·h + 8·f + 4·a + 8
    per token without TP, to the byte. (Context parallelism is not modelled for this profile.)

    selective "op" (torchtitan's per-op checkpointing, with recompute="selective"): whatever the
    kernels, only the block's input (at the residual stream's width) and the outputs of the 1st,
    3rd, 5th and 7th matmuls (Q, V, gate, down) and of fused attention (output and log-sum-exp)
    are kept; every element-wise output and the other matmuls are re-run in backward.
    """
    if profile not in PROFILES:
        raise UserError(f"activation profile must be one of {', '.join(PROFILES)}, got {profile!r}")
    if recompute not in RECOMPUTE:
        raise UserError(f"recompute must be one of {', '.join(RECOMPUTE)}, got {recompute!r}")
    h, kv, f, a, s = shape.d_model, shape.kv_dim, shape.d_ff, shape.n_heads, shape.seq_len
    q = shape.q_dim  # all heads' width: d_model unless the heads are wider (Qwen3-0.6B: 2048 > 1024)
    rep = t if sp else 1  # what sequence parallelism splits; replicated over TP ranks without it
    gated = shape.mlp == "swiglu"
    if recompute == "selective" and selective == "op":
        resid = 4.0 if profile == "pretrain" else 2.0
        attn = (2 * q + 4 * a) / t if flash else 2 * a * s / t  # Q and the attention output: q wide
        return resid * h / rep + 2 * (q + kv + (f if gated else 0)) / t + 2 * h / rep + attn
    if profile == "torchtitan" and recompute != "full":
        return _bf16_eager_bytes(shape, t, rep, flash)  # selective is not offered: as none
    if profile == "pretrain":
        resid = 4.0  # the residual stream stays fp32 (embedding output is fp32 under autocast)
        if recompute == "full":
            return resid * h / rep  # checkpointed block: its input only
        # RMSNorm: fp32 input, normalized output and 1/rms; LayerNorm (fp32 under autocast): its
        # input, mean and 1/std
        norm = 2 * ((8 * h + 4) if shape.norm == "rmsnorm" else (4 * h + 8)) / rep
        inputs = (3 + (2 if gated else 1)) * 2 * h
        qkv = (2 * q + 2 * 2 * q * cp) / t  # K, V expanded to n_heads, of the whole (gathered) sequence
        attn = (2 * q + 4 * a) / t if flash else 2 * a * s / t
        proj = 2 * q / t
        mlp = (8 if gated else 4) * f / t
        qk = _qk_norm_bytes(shape, t, 8)  # fp32 input, fp32 normalized, fp32 1/rms (train/model.py)
        return norm + inputs + qkv + attn + proj + mlp + qk  # selective is not offered: as none
    if recompute == "full":
        return 2 * h / rep  # the block's bf16 input (Korthikanti: 2·s·b·h, ÷t with SP)
    norm = 2 * (2 * h + (4 if shape.norm == "rmsnorm" else 8)) / rep
    inputs = 2 * (2 * h) / rep
    qkv = (2 * q + 4 * kv) / t
    if flash:
        attn = 4 * a / t  # log-sum-exp; the output is the projection's input, counted below
    else:
        # softmax out, dropout mask and out; without dropout the softmax output only
        attn = 0.0 if recompute == "selective" else (5 if dropout else 2) * a * s / t
    proj = 2 * q / t
    mlp = (6 * f if gated else 4 * f) / t
    masks = 2 * h / rep if (dropout and not gated) else 0.0  # GPT's two residual dropout masks (1 B each)
    norm = norm if gated else 2 * 2 * h / rep  # Korthikanti counts the LayerNorm inputs only
    qk = _qk_norm_bytes(shape, t, 2)  # a fused norm: its bf16 input and fp32 1/rms per head
    return norm + inputs + qkv + attn + proj + mlp + masks + qk


def _bf16_eager_bytes(shape: ModelShape, t: int, rep: int, flash: bool) -> float:
    """Profile "torchtitan" per token (see saved_bytes_per_token): norms on this rank's tokens, their
    outputs saved whole (an all-gathered input stays saved), the rest split over TP."""
    h, q, f, a, s = shape.d_model, shape.q_dim, shape.d_ff, shape.n_heads, shape.seq_len
    norm = 2 * (4 * h + 4 + 2 * h) / rep  # fp32 upcast, fp32 1/rms, bf16 normalized
    inputs = 2 * 2 * h  # one bf16 norm output per sub-block, shared by Q/K/V and by gate/up
    qkv = 3 * 2 * q / t  # K and V expanded to every head before SDPA
    attn = (2 * q + 4 * a) / t if flash else 2 * a * s / t
    mlp = (8 * f if shape.mlp == "swiglu" else 4 * f) / t
    return norm + inputs + qkv + attn + mlp + _qk_norm_bytes(shape, t, 6)  # the norms' own three


def _qk_norm_bytes(shape: ModelShape, t: int, per_element: int) -> float:
    """Qwen3's per-head RMSNorms on Q and K (over head_dim, before rotary), per token on one TP rank
    (heads split over TP): `per_element` bytes per normalized element plus an fp32 1/rms per head."""
    if not shape.qk_norm:
        return 0.0
    return (per_element * (shape.q_dim + shape.kv_dim) + 4 * (shape.n_heads + shape.n_kv_heads)) / t


@functools.lru_cache(maxsize=4096)
def split_layers(n_layers: int, p: int) -> tuple[int, ...]:
    """Layers per pipeline stage when they do not divide evenly: the first and last stages take one
    fewer (Llama 3, Dubey et al. 2024 sec. 3.3.2: they hold the most activations and the head)."""
    per = -(-n_layers // p)
    out = [per] * p
    short = per * p - n_layers
    order = [0, p - 1] + list(range(1, p - 1)) if p > 1 else [0]
    for i in range(short):
        out[order[i % p]] -= 1
    return tuple(out)


def cp_mask_bytes(seq_len: int, cp: int, dtype_bytes: int = 2) -> float:
    """The trainer's context-parallel attention mask, (T/cp) x T in the activations' dtype: one per
    GPU, shared by every layer and micro-batch (train/context.py; SDPA saves it for backward)."""
    return 0.0 if cp == 1 else seq_len / cp * seq_len * dtype_bytes


def stage_activation_bytes(shape: ModelShape, b: int = 1, t: int = 1, sp: bool = False,
                           recompute: str = "none", flash: bool = True, p: int = 1, v: int = 1,
                           m: int | None = None, cp: int = 1, profile: str = "fused",
                           selective: str = "attention", dropout: bool = True) -> float:
    """Activations on the fullest pipeline stage under 1F1B: stage i holds min(p − i, m) micro-batches
    of its layers. Interleaved (v chunks per GPU), the first GPU runs 2(p−1) + (v−1)·p warm-up chunk
    forwards before its first backward (Megatron-LM's interleaved schedule), at most all m·v."""
    tokens = b * shape.seq_len / cp
    per_layer = tokens * saved_bytes_per_token(shape, t, sp, recompute, flash, profile, selective, cp,
                                               dropout)
    m = p if m is None else m
    if v > 1:
        chunks = min(m * v, 2 * (p - 1) + (v - 1) * p + 1)
        return per_layer * -(-shape.n_layers // (p * v)) * chunks
    return max(n * min(p - i, m) * per_layer for i, n in enumerate(split_layers(shape.n_layers, p)))


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
                   m: int | None = None, accounting: str = "16B", cp: int = 1,
                   profile: str = "fused", selective: str = "attention",
                   dropout: bool = True, dtype: str = "bf16", loss_chunks: int = 1) -> MemoryBreakdown:
    """The whole bill for the busiest GPU: sharded state + activations in flight + logits. With a
    pipeline the first stages hold the most micro-batches and the last the logits: take the larger.
    `dp` is the group the ZeRO stage shards over (data × context ranks); `dtype` the run's precision
    (the loss's bytes: `loss_bytes_per_vocab`), `loss_chunks` the slices our trainer's loss runs in."""
    state = state_bytes_per_gpu(stage_params(shape, tp, pp, v), zero, dp, accounting)
    tokens = mbs * shape.seq_len / cp
    working = 0.0
    if recompute == "full":  # a checkpointed layer re-run for its backward: its full set, briefly
        working = tokens * saved_bytes_per_token(shape, tp, sp, "none", flash, profile, cp=cp,
                                                 dropout=dropout)
    acts = stage_activation_bytes(shape, mbs, tp, sp, recompute, flash, pp, v, m, cp, profile, selective,
                                  dropout)
    working += cp_mask_bytes(shape.seq_len, cp) if profile == "pretrain" else 0.0  # on every stage
    acts += working
    logits = logits_bytes(shape.seq_len // cp, mbs, shape.d_model, shape.vocab_size, tp,
                          loss_bytes_per_vocab(profile, dtype, pp > 1), loss_chunks)
    if pp == 1:
        return MemoryBreakdown(state, acts, logits, state + acts + logits)
    # 1F1B: the last stage runs each micro-batch's backward right after its forward (one in flight)
    last_layers = split_layers(shape.n_layers, pp)[-1] * (v if v > 1 else 1)
    per_layer = tokens * saved_bytes_per_token(shape, tp, sp, recompute, flash, profile, selective, cp,
                                               dropout)
    last_acts = per_layer * last_layers + working
    first = MemoryBreakdown(state, acts, 0.0, state + acts)
    last = MemoryBreakdown(state, last_acts, logits, state + last_acts + logits)
    return max(first, last, key=lambda mb: mb.total)
