"""Model shapes: the architecture numbers the planner and the trainer share, and exact parameter counts.

A `ModelShape` describes a decoder-only transformer in the two families that matter here:

- GPT-2 style: LayerNorm with biases, biased linear layers, a GELU MLP (d_ff = 4h usually), learned
  position embeddings, output head tied to the token embedding (Radford et al. 2019).
- Llama style: RMSNorm without bias, no biases anywhere, grouped-query attention (n_kv_heads <
  n_heads), SwiGLU MLP with three matrices, rotary positions (no parameters), untied output head
  (Touvron et al. 2023; Llama 3 herd paper, Table 3).

`params()` counts every parameter of the module it describes, so `pretrain train` can check its
built model against the planner. Presets cover the Llama family, GPT-2 124M and the Megatron-LM
2021 / Korthikanti 2022 configurations. `params_from_text("7B")` and `shape_for_params()` serve
`pretrain plan --params 7B`.

Pure Python: no torch import.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from pretrain.errors import UserError, did_you_mean


@dataclass(frozen=True)
class ModelShape:
    """A decoder-only transformer's shape. `d_ff` is the inner width of the MLP (per matrix)."""

    name: str
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    d_ff: int
    vocab_size: int
    seq_len: int
    mlp: str = "swiglu"  # "swiglu" (3 matrices, Shazeer 2020) | "gelu" (2 matrices)
    tied_embeddings: bool = False
    norm: str = "rmsnorm"  # "rmsnorm" (scale only) | "layernorm" (scale and bias)
    bias: bool = False  # biases on the linear layers
    learned_pos: bool = False  # learned absolute positions (GPT-2) instead of rotary (no params)
    qkv_bias: bool = False  # biases on the Q, K and V projections only (Qwen2; `bias` covers all maps)
    qk_norm: bool = False  # RMSNorm over each head's queries and keys before rotary (Qwen3)
    # Width of one attention head when it is not d_model / n_heads (0: it is). Qwen3-0.6B: 16 heads
    # of 128 over d_model 1024, so Q is 2048 wide and W_o maps 2048 back to 1024.
    attn_head_dim: int = 0

    def __post_init__(self) -> None:
        for f in ("n_layers", "d_model", "n_heads", "n_kv_heads", "d_ff", "vocab_size", "seq_len"):
            if getattr(self, f) <= 0:
                raise UserError(f"model shape {self.name!r}: {f} must be positive, got {getattr(self, f)}")
        if self.attn_head_dim < 0:
            raise UserError(f"model shape {self.name!r}: attn_head_dim must be >= 0, "
                            f"got {self.attn_head_dim}")
        if self.d_model % self.n_heads and not self.attn_head_dim:
            raise UserError(f"model shape {self.name!r}: d_model {self.d_model} not divisible by "
                            f"n_heads {self.n_heads}")
        if self.n_heads % self.n_kv_heads:
            raise UserError(f"model shape {self.name!r}: n_heads {self.n_heads} not divisible by "
                            f"n_kv_heads {self.n_kv_heads}")
        if self.mlp not in ("swiglu", "gelu"):
            raise UserError(f"model shape {self.name!r}: mlp must be 'swiglu' or 'gelu', got {self.mlp!r}")
        if self.norm not in ("rmsnorm", "layernorm"):
            raise UserError(f"model shape {self.name!r}: norm must be 'rmsnorm' or 'layernorm', "
                            f"got {self.norm!r}")

    @property
    def head_dim(self) -> int:
        return self.attn_head_dim or self.d_model // self.n_heads

    @property
    def q_dim(self) -> int:
        """Width of the Q projection (and of W_o's input): n_heads · head_dim, d_model unless
        `attn_head_dim` says otherwise."""
        return self.n_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Width of the K (and of the V) projection: n_kv_heads · head_dim (GQA, Ainslie et al. 2023)."""
        return self.n_kv_heads * self.head_dim

    def _norm_params(self) -> int:
        return self.d_model * (2 if self.norm == "layernorm" else 1)

    def attention_params(self) -> int:
        """Q, K, V and output projections of one layer."""
        h, q, kv = self.d_model, self.q_dim, self.kv_dim
        weights = h * q + 2 * h * kv + q * h
        biases = (q + 2 * kv + h) if self.bias else (q + 2 * kv) if self.qkv_bias else 0
        qk_norms = 2 * self.head_dim if self.qk_norm else 0  # one gain per head dim, shared by heads
        return weights + biases + qk_norms

    def mlp_params(self) -> int:
        """One layer's MLP: SwiGLU has gate, up and down matrices; GELU has up and down."""
        h, f = self.d_model, self.d_ff
        if self.mlp == "swiglu":
            return 3 * h * f + ((2 * f + h) if self.bias else 0)
        return 2 * h * f + ((f + h) if self.bias else 0)

    def layer_params(self) -> int:
        """One transformer block: attention, MLP and its two norms."""
        return self.attention_params() + self.mlp_params() + 2 * self._norm_params()

    def embedding_params(self) -> int:
        """Token embedding, learned positions, and the output head when it is not tied."""
        n = self.vocab_size * self.d_model
        if not self.tied_embeddings:
            n += self.vocab_size * self.d_model
        if self.learned_pos:
            n += self.seq_len * self.d_model
        return n

    def non_embedding_params(self) -> int:
        """Blocks plus the final norm: Kaplan et al. 2020's N."""
        return self.n_layers * self.layer_params() + self._norm_params()

    def params(self) -> int:
        """Exact parameter count of the model this shape describes."""
        return self.non_embedding_params() + self.embedding_params()

    def with_(self, **changes) -> ModelShape:
        """A copy with some fields changed (e.g. a different seq_len)."""
        return dataclasses.replace(self, **changes)


def _llama(name: str, L: int, h: int, a: int, kv: int, f: int, V: int, s: int) -> ModelShape:
    return ModelShape(name, L, h, a, kv, f, V, s, mlp="swiglu", tied_embeddings=False, norm="rmsnorm",
                      bias=False, learned_pos=False)


def _gpt(name: str, L: int, h: int, a: int, V: int, s: int, f: int | None = None) -> ModelShape:
    return ModelShape(name, L, h, a, a, f or 4 * h, V, s, mlp="gelu", tied_embeddings=True, norm="layernorm",
                      bias=True, learned_pos=True)


def _megatron(name: str, L: int, h: int, a: int) -> ModelShape:
    # Megatron-LM 2021 Table 1 and Korthikanti 2022 Table 3: GPT shapes, V = 51,200, s = 2,048.
    return _gpt(name, L, h, a, 51_200, 2048)


PRESETS: dict[str, ModelShape] = {
    s.name: s
    for s in (
        # A model that trains in minutes on one CPU core (the tiny-cpu recipe).
        _llama("tiny-cpu", 4, 128, 4, 2, 352, 2048, 256),
        # GPT-2 small (Radford et al. 2019): 124,439,808 parameters.
        _gpt("gpt2-124m", 12, 768, 12, 50_257, 1024),
        _gpt("gpt2-350m", 24, 1024, 16, 50_257, 1024),
        _gpt("gpt2-774m", 36, 1280, 20, 50_257, 1024),
        _gpt("gpt2-1.5b", 48, 1600, 25, 50_257, 1024),
        # GPT-2 small's width, depth and tied head, built the Llama way (RMSNorm, SwiGLU 8h/3, RoPE,
        # no biases; V padded to 50,304): 123,587,328 parameters.
        dataclasses.replace(_llama("llama-124m", 12, 768, 12, 12, 2048, 50_304, 1024), tied_embeddings=True),
        # Llama 3.2 1B (Meta 2024 model card): 16 x 2048, GQA 32/8, tied embeddings; 1,235,814,400.
        dataclasses.replace(_llama("llama-3.2-1b", 16, 2048, 32, 8, 8192, 128_256, 8192),
                            tied_embeddings=True),
        # Llama 2 (Touvron et al. 2023, Table 1/appendix): MHA at 7B/13B, GQA at 70B.
        _llama("llama-2-7b", 32, 4096, 32, 32, 11_008, 32_000, 4096),
        _llama("llama-2-13b", 40, 5120, 40, 40, 13_824, 32_000, 4096),
        _llama("llama-2-70b", 80, 8192, 64, 8, 28_672, 32_000, 4096),
        # Llama 3 (Dubey et al. 2024, Table 3): GQA with 8 KV heads, V = 128,256, s = 8,192.
        _llama("llama-3-8b", 32, 4096, 32, 8, 14_336, 128_256, 8192),
        _llama("llama-3-70b", 80, 8192, 64, 8, 28_672, 128_256, 8192),
        _llama("llama-3-405b", 126, 16_384, 128, 8, 53_248, 128_256, 8192),
        # Megatron-LM 2021 (Narayanan et al.) Table 1.
        _megatron("megatron-1.7b", 24, 2304, 24),
        _megatron("megatron-3.6b", 30, 3072, 32),
        _megatron("megatron-7.5b", 36, 4096, 32),
        _megatron("megatron-18b", 40, 6144, 48),
        _megatron("megatron-39b", 48, 8192, 64),
        _megatron("megatron-76b", 60, 10_240, 80),
        _megatron("megatron-145b", 80, 12_288, 96),
        _megatron("megatron-310b", 96, 16_384, 128),
        _megatron("megatron-530b", 105, 20_480, 128),
        _megatron("megatron-1t", 128, 25_600, 160),
        # Korthikanti et al. 2022 Table 3 (22B; 175B is GPT-3; 530B and 1T as above).
        _megatron("korthikanti-22b", 48, 6144, 64),
        _megatron("gpt3-175b", 96, 12_288, 96),
    )
}


def get_shape(name: str) -> ModelShape:
    """A preset by name; the error lists the known ones."""
    try:
        return PRESETS[name]
    except KeyError:
        raise UserError(f"unknown model {name!r}{did_you_mean(name, list(PRESETS))}; known: "
                        f"{', '.join(PRESETS)}") from None


_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}


# "1.5", ".5", "15" (not "1."): `[0-9]*\.?[0-9]+` said the same ambiguously, and backtracked in
# time the square of a digit run ("1" * 20,000 + "x": 29 s) before refusing it.
_DECIMAL = r"(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)"


def parse_count(text: str | float | int) -> float:
    """'7B' -> 7e9, '1.5T' -> 1.5e12, '140e9' -> 1.4e11 (parameters or tokens)."""
    if isinstance(text, int | float):
        return float(text)
    m = re.fullmatch(rf"\s*({_DECIMAL}(?:e[+-]?[0-9]+)?)\s*([kmbgt]?)\s*", str(text).lower())
    if not m:
        raise UserError(f"cannot read a count from {text!r}; write e.g. 7B, 1.5T, 140e9")
    return float(m.group(1)) * _SUFFIX[m.group(2)]


def parse_batch_tokens(text: str | float | int) -> int:
    """Batch sizes are quoted in binary units ('4M' = 4·2²⁰ = 4,194,304 tokens; Llama 3's '16M' is
    2,048 sequences of 8,192); a plain number is taken as is."""
    if isinstance(text, int | float):
        return int(text)
    m = re.fullmatch(rf"\s*({_DECIMAL})\s*([kmgt])i?b?\s*", str(text).lower())
    if m:
        return int(float(m.group(1)) * 2 ** (10 * "kmgt".index(m.group(2)) + 10))
    return int(parse_count(text))


MIN_PARAMS, MAX_PARAMS = 1e6, 1e14  # what --params shapes: 1M to 100T parameters


def shape_for_params(params: float, seq_len: int = 4096, vocab_size: int = 32_000) -> ModelShape:
    """A Llama-style shape of `params` parameters within 1% (for `pretrain plan --params 7B`).

    Depth and width follow Llama 2 7B's proportions (head_dim 128, d_model = 128 · n_layers); the
    SwiGLU width d_ff (a multiple of 8: tensor-core aligned, divisible by any tp <= 8) absorbs the
    rest, so 7.5B gives 7.50B, not the nearest grid point. Among the depths within 1% whose d_ff
    stays near Llama's 8h/3 (2.5h..3h), the one closest to the count wins. Below ~20M parameters
    the 32,000-token vocabulary alone is too big: the nearest shape is returned and the CLI says
    which it built."""
    if not MIN_PARAMS <= params <= MAX_PARAMS:
        raise UserError(f"--params must be between {MIN_PARAMS:.0e} and {MAX_PARAMS:.0e}, got {params:g}")
    best: tuple[float, ModelShape] | None = None
    for L in range(1, 2000):
        h = 128 * L
        fixed = L * (4 * h * h + 2 * h) + 2 * vocab_size * h + h
        f = max(8, round((params - fixed) / (3 * h * L) / 8) * 8)
        s = _llama(f"llama-{params / 1e9:g}b", L, h, h // 128, h // 128, f, vocab_size, seq_len)
        miss = abs(s.params() - params) / params
        # prefer Llama-like MLP widths (d_ff within 2.5h..3h), then the closest count
        ratio = f / h
        score = (miss > 0.01, max(0.0, 2.5 - ratio, ratio - 3.0), miss)
        if best is None or score < best[0]:
            best = (score, s)
        if fixed > params * 1.5:
            break
    assert best is not None
    return best[1]
