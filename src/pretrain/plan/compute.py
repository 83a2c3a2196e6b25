"""Compute: FLOPs per token, training FLOPs, Chinchilla tokens, GPU-hours, calendar time, MFU and HFU,
and the Megatron-LM 2021 closed forms. This module is the project's single source of FLOPs numbers:
the trainer's MFU and `pretrain tour` import it.

Conventions (the reference vectors decide them):
- N is the *total* parameter count, embeddings and the untied head included (the lesson's 6·N·D with
  N = 7e9, and the 7B vector 6N = 4.043e10 with N = 6,738,415,616). Kaplan et al. 2020 count
  non-embedding N instead; the input embedding is a table lookup, not a matmul, so our 6N overstates a
  7B Llama by 6·V·h (2%) and GPT-2 124M by about 30%. `ModelShape.non_embedding_params()` gives
  Kaplan's N for callers who want it.
- Attention adds 12·L·h·s FLOPs per token for the score and value matmuls, forward and backward, with
  no causal halving (PaLM, Chowdhery et al. 2022, appendix B; MosaicML's MFU uses the same).
- MFU counts model FLOPs only; HFU also counts the recomputed forward work (PaLM appendix B). Both
  keep the un-halved attention, while a causal flash kernel executes half of it (and the planner
  times it so): `executed_flops_per_token` is what runs, and its utilization never exceeds 1.
"""

from __future__ import annotations

from pretrain.errors import UserError
from pretrain.plan.shapes import ModelShape

SECONDS_PER_DAY = 86_400.0


def flops_per_token(shape: ModelShape, seq_len: int | None = None, attention: bool = True) -> float:
    """Training FLOPs per token: 6N, plus 12·L·h·s for attention when `attention` (PaLM appendix B)."""
    s = seq_len or shape.seq_len
    flops = 6.0 * shape.params()
    if attention:
        flops += 12.0 * shape.n_layers * shape.q_dim * s  # q_dim: d_model unless heads are wider
    return flops


def recompute_flops_per_token(shape: ModelShape, recompute: str, seq_len: int | None = None,
                              selective: str = "attention") -> float:
    """Extra FLOPs per token spent re-running forward work: full recompute repeats the whole forward
    pass (2N + 4·L·h·s); selective recompute repeats the attention scores and values (4·L·h·s,
    Korthikanti 2022 sec. 5), or under torchtitan's per-op policy (`selective="op"`) the K, O and up
    projections, 2·L·h·(kv + h + f); none adds nothing."""
    s = seq_len or shape.seq_len
    attn_fwd = 4.0 * shape.n_layers * shape.q_dim * s
    if recompute == "full":
        return 2.0 * shape.params() + attn_fwd
    if recompute == "selective" and selective == "op":
        up = shape.d_ff if shape.mlp == "swiglu" else 0
        return 2.0 * shape.n_layers * shape.d_model * (shape.kv_dim + shape.q_dim + up)
    if recompute == "selective":
        return attn_fwd
    if recompute == "none":
        return 0.0
    raise UserError(f"recompute must be none, selective or full, got {recompute!r}")


def executed_flops_per_token(shape: ModelShape, recompute: str = "none", seq_len: int | None = None,
                             selective: str = "attention", causal_kernel: bool = True) -> float:
    """FLOPs per token a causal kernel really executes: the model's and the recomputed FLOPs with the
    attention core halved, since a flash-style kernel skips the blocks the causal mask zeroes (Dao
    2023, FlashAttention-2 sec. 3.1.1). MFU and HFU keep the PaLM convention (no halving), so at long
    sequences they can exceed what the GPU can do; this one cannot (the time model never runs a
    kernel above its peak). Without a causal kernel (explicit attention) nothing is skipped."""
    s = seq_len or shape.seq_len
    total = flops_per_token(shape, s) + recompute_flops_per_token(shape, recompute, s, selective)
    if not causal_kernel:
        return total
    attn = 12.0 * shape.n_layers * shape.q_dim * s  # counted in flops_per_token
    if recompute == "full" or (recompute == "selective" and selective == "attention"):
        attn += 4.0 * shape.n_layers * shape.q_dim * s  # the re-run forward of the attention core
    return total - attn / 2


def mfu(tokens_per_s: float, flops_per_token: float, peak_flops: float) -> float:
    """Model FLOPs utilization: achieved model FLOP/s over peak. Pass tokens/s and peak for the same
    set of GPUs (one GPU's tokens/s with one GPU's peak, or the cluster's with n × peak)."""
    if peak_flops <= 0:
        raise UserError(f"peak FLOP/s must be positive, got {peak_flops}")
    return tokens_per_s * flops_per_token / peak_flops


def hfu(tokens_per_s: float, flops_per_token: float, recompute_flops: float, peak_flops: float) -> float:
    """Hardware FLOPs utilization: like MFU, with the recomputed FLOPs counted as work done."""
    return mfu(tokens_per_s, flops_per_token + recompute_flops, peak_flops)


def chinchilla_tokens(params: float, tokens_per_param: float = 20.0) -> float:
    """Compute-optimal training tokens, about 20 per parameter (Hoffmann et al. 2022, Table 3)."""
    return tokens_per_param * params


def training_flops(params: float, tokens: float) -> float:
    """C ≈ 6·N·D (Kaplan et al. 2020; Hoffmann et al. 2022)."""
    return 6.0 * params * tokens


def gpu_hours(flops: float, flops_per_gpu: float) -> float:
    """GPU-hours at a sustained `flops_per_gpu` FLOP/s each."""
    return flops / flops_per_gpu / 3600.0


def calendar_days(flops: float, n_gpus: int, flops_per_gpu: float, goodput: float = 1.0) -> float:
    """Wall-clock days on `n_gpus` GPUs sustaining `flops_per_gpu`, of which `goodput` is useful."""
    return flops / (n_gpus * flops_per_gpu * goodput) / SECONDS_PER_DAY


# --- Megatron-LM 2021 (Narayanan et al.), sec. 5.1 and appendix: GPT shapes, V vocab, s sequence ---


def megatron_params(l: int, h: int, V: int, s: int) -> float:
    """P = 12·l·h²·(1 + 13/(12h) + (V+s)/(12·l·h))."""
    return 12 * l * h**2 * (1 + 13 / (12 * h) + (V + s) / (12 * l * h))


def megatron_flops_per_iteration(B: int, s: int, l: int, h: int, V: int, recompute: bool = True) -> float:
    """FLOPs of one iteration of batch B: 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) with full activation
    recomputation; 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)) without (the model FLOPs)."""
    if recompute:
        return 96 * B * s * l * h**2 * (1 + s / (6 * h) + V / (16 * l * h))
    return 72 * B * s * l * h**2 * (1 + s / (6 * h) + V / (12 * l * h))


def megatron_training_seconds(tokens: float, params: float, n_gpus: int, flops_per_gpu: float) -> float:
    """End-to-end time ≈ 8·T·P/(n·X): 6TP model FLOPs plus 2TP recomputed forward (Megatron-LM eq. 4)."""
    return 8 * tokens * params / (n_gpus * flops_per_gpu)
