"""One readable decoder-only transformer, and how its shape is resolved from pretrain.plan presets.

Llama-style by default (RMSNorm, rotary positions, SwiGLU MLP, optional grouped-query attention),
GPT-2-style when the shape asks for it (LayerNorm, learned positions, GELU MLP, biases), so one class
covers every preset the planner knows and `numel == shape.params()` ties the two together.
The model is built on the meta device and given real storage only after parallelization; then
`materialize()` fills it (torchtitan's order: parallelize before allocating; train/init.py).
"""

from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn.functional as F
from torch import nn

from pretrain.errors import UserError
from pretrain.plan.shapes import ModelShape, get_shape
from pretrain.train.loss import chunked_cross_entropy

SHAPE_FIELDS = ("n_layers", "d_model", "n_heads", "n_kv_heads", "d_ff", "vocab_size", "seq_len",
                "mlp", "norm", "tied_embeddings", "bias", "learned_pos", "qkv_bias", "qk_norm",
                "attn_head_dim")


def resolve_shape(mcfg) -> ModelShape:
    """The model's shape: the plan preset `mcfg.preset` with every field set in `mcfg` overriding it."""
    over = {k: getattr(mcfg, k) for k in SHAPE_FIELDS if getattr(mcfg, k) is not None}
    if mcfg.preset:
        try:
            base = get_shape(mcfg.preset)
        except (KeyError, ValueError) as e:
            raise UserError(f"model.preset {mcfg.preset!r}: {e}") from e
        return dataclasses.replace(base, **over)
    required = ("n_layers", "d_model", "n_heads", "d_ff", "vocab_size", "seq_len")
    missing = [k for k in required if k not in over]
    if missing:
        raise UserError(f"model: no preset given; set model.{', model.'.join(missing)}")
    over.setdefault("n_kv_heads", over["n_heads"])
    name = mcfg.preset or "custom"
    if getattr(mcfg, "init_from", ""):
        from pretrain.train.hf import family_name  # a folder's family and size, not "custom"

        name = family_name(over, mcfg.init_from)
    return ModelShape(name=name, **over)


class RMSNorm(nn.Module):
    """x / rms(x) * g (Zhang & Sennrich 2019); statistics in fp32 even under autocast."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.empty(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        out = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (out * self.weight.float()).type_as(x)

    def reset_parameters(self) -> None:
        nn.init.ones_(self.weight)


def make_norm(shape, eps: float) -> nn.Module:
    if shape.norm == "rmsnorm":
        return RMSNorm(shape.d_model, eps)
    if shape.norm == "layernorm":
        return nn.LayerNorm(shape.d_model, eps=eps)  # scale and bias, as plan.shapes counts it
    raise UserError(f"model.norm must be 'rmsnorm' or 'layernorm', got {shape.norm!r}")


def rope_tables(head_dim: int, seq_len: int, theta: float, device=None,
                scaling: dict | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin of position * theta^(-2i/d) (RoFormer, Su et al. 2021, eq. 15): (T, head_dim/2) each.
    `scaling` (model.rope_scaling): Llama 3.1's frequency scaling, for imported checkpoints."""
    inv = 1.0 / theta ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim)
    if scaling:
        inv = llama3_frequencies(inv, scaling)
    ang = torch.outer(torch.arange(seq_len, device=device, dtype=torch.float32), inv)
    return ang.cos(), ang.sin()


def llama3_frequencies(inv: torch.Tensor, sc: dict) -> torch.Tensor:
    """Llama 3.1's rotary frequencies (Meta's reference `apply_scaling`; transformers' rope_type
    "llama3"): wavelengths longer than L/low_freq_factor are divided by `factor`, shorter than
    L/high_freq_factor kept, and the band between interpolated (L: original_max_position_embeddings)."""
    factor, lo, hi = float(sc["factor"]), float(sc["low_freq_factor"]), float(sc["high_freq_factor"])
    old = float(sc["original_max_position_embeddings"])
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > old / lo, inv / factor, inv)
    smooth = (old / wavelen - lo) / (hi - lo)
    medium = (wavelen >= old / hi) & (wavelen <= old / lo)
    return torch.where(medium, (1 - smooth) * scaled / factor + smooth * scaled, scaled)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate consecutive pairs (x0, x1) of x (B, H, T, D) by the position's angle."""
    T = x.shape[-2]
    x0, x1 = x.float()[..., 0::2], x.float()[..., 1::2]
    c, s = cos[:T], sin[:T]
    out = torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).flatten(-2)
    return out.type_as(x)


def explicit_causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q k^T / sqrt(d) + causal mask) v, spelled out (Vaswani et al. 2017, eq. 1).

    One `baddbmm` adds the mask and applies the scale inside the score GEMM: nothing to undo in the
    backward (an in-place masked_fill costs a copy and a fill of the (B, H, T, T) gradient). On CPU at
    training lengths (T ~ 256) this is ~3x faster than torch's fused flash kernel in bf16
    (docs/decisions.md); GPUs use F.scaled_dot_product_attention.
    """
    B, H, T, D = q.shape
    mask = torch.full((T, T), float("-inf"), dtype=q.dtype, device=q.device).triu(1)
    att = torch.baddbmm(mask, q.reshape(B * H, T, D), k.reshape(B * H, T, D).transpose(1, 2),
                        alpha=1.0 / math.sqrt(D))  # (B*H, T, T)
    # Softmax in the scores' own dtype: torch's CPU kernel accumulates in fp32 and rounds the
    # probabilities once, as autocast's fp32 softmax followed by the cast back to bf16 would,
    # without materializing a (B, H, T, T) fp32 copy.
    with torch.autocast(q.device.type, enabled=False):
        att = att.softmax(-1)
    return (att @ v.reshape(B * H, T, D)).view(B, H, T, D)


def masked_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """softmax(q k^T / sqrt(d) + mask) v for Tq queries over Tk keys (context parallelism: the keys
    of the whole sequence, the queries of this rank's slice; `mask` (Tq, Tk) is additive)."""
    if q.device.type != "cpu":
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask.to(q.dtype))
    B, H, Tq, D = q.shape
    Tk = k.shape[-2]
    att = torch.baddbmm(mask.to(q.dtype), q.reshape(B * H, Tq, D), k.reshape(B * H, Tk, D).transpose(1, 2),
                        alpha=1.0 / math.sqrt(D))
    with torch.autocast(q.device.type, enabled=False):
        att = att.softmax(-1)
    return (att @ v.reshape(B * H, Tk, D)).view(B, H, Tq, D)


class Attention(nn.Module):
    def __init__(self, shape, eps: float = 1e-5):
        super().__init__()
        self.n_heads, self.n_kv = shape.n_heads, shape.n_kv_heads
        self.head_dim = shape.head_dim  # d_model / n_heads unless attn_head_dim (Qwen3-0.6B, 4B)
        d, q, kv = shape.d_model, shape.q_dim, shape.kv_dim
        qkv_bias = shape.bias or shape.qkv_bias  # Qwen2: biases on q, k, v only
        self.wq = nn.Linear(d, q, bias=qkv_bias)
        self.wk = nn.Linear(d, kv, bias=qkv_bias)
        self.wv = nn.Linear(d, kv, bias=qkv_bias)
        self.wo = nn.Linear(q, d, bias=shape.bias)
        # Qwen3 (and OLMo 2 / Gemma 3 in other forms): RMSNorm over each head's dims, one gain vector
        # shared by all heads, on q and k before rotary; bounds the attention logits.
        qk_norm = shape.qk_norm
        self.q_norm = RMSNorm(self.head_dim, eps) if qk_norm else None
        self.k_norm = RMSNorm(self.head_dim, eps) if qk_norm else None
        self.cp = None  # a train.context.ContextParallel when the sequence is split over ranks

    def heads(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q (B, H, T, D), k and v (B, Hkv, T, D) of x (B, T, d); training and cached decoding share it."""
        B, T, _ = x.shape
        q = self.wq(x).view(B, T, -1, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(B, T, -1, self.head_dim).transpose(1, 2)
        q, k = self.normed(q, k)
        return q, k, self.wv(x).view(B, T, -1, self.head_dim).transpose(1, 2)

    def normed(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """q and k (B, H, T, D) through the per-head norms, when the model has them (Qwen3)."""
        if self.q_norm is None:
            return q, k
        return self.q_norm(q), self.k_norm(k)

    def forward(self, x: torch.Tensor, rope: tuple | None) -> torch.Tensor:
        B, T, _ = x.shape
        q, k, v = self.heads(x)
        if rope is not None:
            q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        if self.cp is not None:  # the keys and values of the whole sequence, before GQA repeats them
            k, v = self.cp.gather(k, v)
        if self.n_kv != self.n_heads:  # grouped-query attention (Ainslie et al. 2023): share K/V heads
            rep = self.n_heads // self.n_kv
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        if self.cp is not None:
            y = masked_attention(q, k, v, self.cp.mask(q.dtype, q.device))
        elif q.device.type == "cpu":
            y = explicit_causal_attention(q, k, v)
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(y.transpose(1, 2).reshape(B, T, -1))


class MLP(nn.Module):
    """SwiGLU: w2(silu(w1 x) * w3 x) (Shazeer 2020); or GPT-2's w2(gelu(w1 x))."""

    def __init__(self, shape):
        super().__init__()
        self.gated = shape.mlp == "swiglu"
        if shape.mlp not in ("swiglu", "gelu"):
            raise UserError(f"model.mlp must be 'swiglu' or 'gelu', got {shape.mlp!r}")
        self.w1 = nn.Linear(shape.d_model, shape.d_ff, bias=shape.bias)
        self.w3 = nn.Linear(shape.d_model, shape.d_ff, bias=shape.bias) if self.gated else None
        self.w2 = nn.Linear(shape.d_ff, shape.d_model, bias=shape.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gated:
            return self.w2(F.silu(self.w1(x)) * self.w3(x))
        return self.w2(F.gelu(self.w1(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, shape, eps: float):
        super().__init__()
        self.attn_norm, self.attn = make_norm(shape, eps), Attention(shape, eps)
        self.mlp_norm, self.mlp = make_norm(shape, eps), MLP(shape)

    def forward(self, x: torch.Tensor, rope: tuple | None) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), rope)  # pre-norm residual (GPT-2, Radford et al. 2019)
        return x + self.mlp(self.mlp_norm(x))


class Transformer(nn.Module):
    def __init__(self, shape, rope_theta: float = 10000.0, norm_eps: float = 1e-5, init_std: float = 0.02,
                 rope_scaling: dict | None = None):
        super().__init__()
        self.rope_scaling = dict(rope_scaling or {})
        if (shape.d_model % shape.n_heads and not shape.attn_head_dim) or shape.n_heads % shape.n_kv_heads:
            raise UserError(f"model: d_model {shape.d_model} / n_heads {shape.n_heads} / n_kv_heads "
                            f"{shape.n_kv_heads} must divide evenly")
        self.shape, self.rope_theta, self.init_std = shape, rope_theta, init_std
        self.tok_emb = nn.Embedding(shape.vocab_size, shape.d_model)
        self.pos_emb = nn.Embedding(shape.seq_len, shape.d_model) if shape.learned_pos else None
        # A ModuleDict keyed "0".."L-1" keeps parameter names stable when pipeline stages drop layers.
        self.layers = nn.ModuleDict({str(i): Block(shape, norm_eps) for i in range(shape.n_layers)})
        self.norm = make_norm(shape, norm_eps)
        # Tied embeddings reuse tok_emb.weight in forward() instead of sharing a Parameter object,
        # which to_empty() on the meta device would silently untie.
        self.output = None
        if not shape.tied_embeddings:
            self.output = nn.Linear(shape.d_model, shape.vocab_size, bias=False)
        self.register_buffer("rope_cos", torch.empty(0), persistent=False)
        self.register_buffer("rope_sin", torch.empty(0), persistent=False)
        self.cp = None  # context parallelism: this rank's slice of each sequence (train/context.py)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None,
                loss_chunks: int = 1) -> torch.Tensor:
        """idx (B, T) token ids -> logits (B, T, vocab); given targets (B, T), the mean cross-entropy
        over `loss_chunks` slices of the tokens instead, no (B, T, vocab) tensor kept (train/loss.py).
        In forward, so that FSDP2's and DDP's hooks on the model run around it."""
        x = self.hidden(idx)
        if targets is not None:
            return chunked_cross_entropy(x, self.head_weight(), targets, loss_chunks)
        if self.output is None:
            return F.linear(x, self.tok_emb.weight)
        return self.output(x)  # the module: tensor parallelism's hooks gather its logits

    def head_weight(self) -> torch.Tensor:
        """The output head's (vocab, d_model) matrix: the embedding's when tied."""
        return self.tok_emb.weight if self.output is None else self.output.weight

    def hidden(self, idx: torch.Tensor) -> torch.Tensor:
        """idx (B, T) token ids -> the final norm's output (B, T, d_model), what the head projects."""
        T = idx.shape[1]
        x = self.tok_emb(idx)  # (B, T, C)
        if self.pos_emb is not None:
            x = x + self.pos_emb(torch.arange(T, device=idx.device))
        rope = None if self.pos_emb is not None else (self.rope_cos, self.rope_sin)
        if self.cp is not None:  # rotary angles at the tokens' global positions
            pos = self.cp.q_pos.to(idx.device)
            rope = (self.rope_cos[pos], self.rope_sin[pos])
        for block in self.layers.values():
            x = block(x, rope)
        return self.norm(x)


def build_model(shape, mcfg, device: torch.device | str = "meta") -> Transformer:
    """The model on `device` (meta by default: no storage until the caller allocates)."""
    with torch.device(device):
        return Transformer(shape, mcfg.rope_theta, mcfg.norm_eps, mcfg.init_std,
                           getattr(mcfg, "rope_scaling", None))


def materialize(model: Transformer, device: torch.device | str, seed: int) -> Transformer:
    """Give a meta-device model (parallelized or not) real storage on `device`, this rank's pieces
    only, and initialize it: the same values for any layout (train/init.py)."""
    from pretrain.train.init import init_model

    return init_model(model, device, seed)


@torch.no_grad()
def generate(model: Transformer, idx: torch.Tensor, new_tokens: int, temperature: float = 1.0,
             top_k: int = 0, generator: torch.Generator | None = None, cache: bool = True) -> torch.Tensor:
    """Append `new_tokens` sampled tokens to idx (1, T); the context is cropped to the model's seq_len.

    With `cache` (train/decode.py) the prompt runs once and each new token attends to cached keys and
    values; once the text outgrows seq_len every step re-runs the cropped window, as without it."""
    from pretrain.train.decode import Decoder

    S = model.shape.seq_len
    dec = Decoder(model, idx.tolist(), idx.device) if cache and 0 < idx.shape[1] <= S else None
    for _ in range(new_tokens):
        if dec is not None and idx.shape[1] > S:
            dec = None  # past the context: positions shift every step, the cache no longer applies
        logits = dec.logits() if dec is not None else model(idx[:, -S:])[:, -1, :].float()
        if temperature <= 0:
            nxt = logits.argmax(-1, keepdim=True)
        else:
            logits = logits / temperature
            if top_k:
                kth = torch.topk(logits, min(top_k, logits.shape[-1])).values[:, -1:]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            nxt = torch.multinomial(torch.softmax(logits, -1), 1, generator=generator)
        idx = torch.cat([idx, nxt], dim=1)
        if dec is not None:
            dec.push(nxt[:, 0])
    return idx
