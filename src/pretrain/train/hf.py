"""Hugging Face transformers <-> our Transformer: config translation, key names, rotary layout.

Four transformers architectures match the model exactly:
- Llama (`LlamaForCausalLM`): RMSNorm, SwiGLU, rotary positions, optional GQA and tied head;
- Qwen2 (`Qwen2ForCausalLM`): Llama plus biases on the q, k and v projections only (`qkv_bias`);
- Qwen3 (`Qwen3ForCausalLM`): Llama plus an RMSNorm over each head's q and k before rotary (`qk_norm`);
- GPT-2 (`GPT2LMHeadModel`): LayerNorm, tanh-GELU ("gelu_new"), learned positions, biases.
Mistral (`MistralForCausalLM`) is read as Llama with its context capped at the attention window (same
tensor names; see `_mistral_fields`). Qwen2 and Qwen3 use Llama's tensor names plus their own.

Rotary layout: our `apply_rope` rotates consecutive pairs (x[2i], x[2i+1]) as Meta's original Llama
code does; transformers' Llama rotates the halves (x[i], x[i + d/2]). The two are the same model up to
a permutation of each head's rows of W_q and W_k, the one transformers' own
`convert_llama_weights_to_hf.py` applies (`permute`); `to_halves` / `to_pairs` are that permutation and
its inverse. GPT-2 stores linear maps as `Conv1D` (x @ W, so W is our weight transposed) and fuses
q, k and v into one `c_attn`.

`hf_names(shape)` lists, for each of our parameters, where it lives in a transformers checkpoint and
how to convert it (`Source`); export and import (train/hf_io.py) both read that one table.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from pretrain.errors import UserError
from pretrain.plan.shapes import ModelShape

ARCHS = ("llama", "mistral", "qwen2", "qwen3", "gpt2")  # what import reads; export writes all but mistral
ROTARY_ARCHS = ("llama", "qwen2", "qwen3")  # Llama's tensor names and rotary layout


class Unsupported(UserError):
    """A valid transformers config this import does not compute (another architecture, activation or
    rotary type): `pretrain eval` hands such a folder to transformers; a broken config it refuses."""


def arch_of(shape: ModelShape) -> str:
    """The transformers architecture that computes exactly what our model with `shape` computes."""
    if shape.mlp == "swiglu" and shape.norm == "rmsnorm" and not shape.learned_pos:
        extra = shape.qkv_bias and not shape.bias, shape.qk_norm
        if extra == (False, False):
            return "llama"
        if extra == (True, False):
            return "qwen2"
        if extra == (False, True) and not shape.bias:
            return "qwen3"
    plain_heads = shape.n_kv_heads == shape.n_heads and not shape.qk_norm and not shape.attn_head_dim
    if shape.mlp == "gelu" and shape.norm == "layernorm" and shape.learned_pos and plain_heads:
        return "gpt2"
    raise UserError(f"model {shape.name!r} (mlp={shape.mlp}, norm={shape.norm}, "
                    f"learned_pos={shape.learned_pos}, n_kv_heads={shape.n_kv_heads}/{shape.n_heads}, "
                    f"qkv_bias={shape.qkv_bias}, qk_norm={shape.qk_norm}, "
                    f"attn_head_dim={shape.attn_head_dim}) matches no transformers architecture: "
                    "export supports Llama-style (swiglu, rmsnorm, rotary; Qwen2 with qkv_bias, Qwen3 "
                    "with qk_norm, not both) and GPT-2-style (gelu, layernorm, learned positions, no "
                    "GQA, no qk_norm or attn_head_dim) models")


# --- config.json -----------------------------------------------------------------------------------

LLAMA3_KEYS = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")


def hf_config(shape: ModelShape, rope_theta: float, norm_eps: float, dtype: str,
              bos_id: int | None, eos_id: int | None, rope_scaling: dict | None = None) -> dict:
    """config.json for `shape`, as transformers' LlamaConfig / GPT2Config would write it."""
    arch = arch_of(shape)
    rope = {"rope_type": "default", "rope_theta": rope_theta}
    if rope_scaling:
        rope = {"rope_type": "llama3", "rope_theta": rope_theta, **{k: rope_scaling[k] for k in LLAMA3_KEYS}}
        rope["original_max_position_embeddings"] = int(rope["original_max_position_embeddings"])
    common = {"vocab_size": shape.vocab_size, "tie_word_embeddings": bool(shape.tied_embeddings),
              "bos_token_id": bos_id, "eos_token_id": eos_id, "dtype": dtype, "use_cache": True}
    if arch in ("qwen2", "qwen3"):
        return _qwen_config(arch, shape, rope, norm_eps, common)
    if arch == "llama":
        return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", **common,
                "hidden_size": shape.d_model, "intermediate_size": shape.d_ff,
                "num_hidden_layers": shape.n_layers, "num_attention_heads": shape.n_heads,
                "num_key_value_heads": shape.n_kv_heads, "head_dim": shape.head_dim,
                "max_position_embeddings": shape.seq_len, "rms_norm_eps": norm_eps,
                "rope_parameters": rope,
                "hidden_act": "silu", "attention_bias": bool(shape.bias), "mlp_bias": bool(shape.bias),
                "attention_dropout": 0.0, "initializer_range": 0.02}
    return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", **common,
            "n_embd": shape.d_model, "n_inner": shape.d_ff, "n_layer": shape.n_layers,
            "n_head": shape.n_heads,
            "n_positions": shape.seq_len, "layer_norm_epsilon": norm_eps, "activation_function": "gelu_new",
            "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0, "scale_attn_weights": True,
            "scale_attn_by_inverse_layer_idx": False, "reorder_and_upcast_attn": False,
            "initializer_range": 0.02}


def _qwen_config(arch: str, shape: ModelShape, rope: dict, norm_eps: float, common: dict) -> dict:
    """Qwen2Config / Qwen3Config fields: Llama's, full attention in every layer (no sliding window,
    as in every released base), Qwen3's head_dim written out (its default, 128, is not d/h)."""
    out = {"architectures": [f"{arch.capitalize()}ForCausalLM"], "model_type": arch, **common,
           "hidden_size": shape.d_model, "intermediate_size": shape.d_ff,
           "num_hidden_layers": shape.n_layers, "num_attention_heads": shape.n_heads,
           "num_key_value_heads": shape.n_kv_heads, "max_position_embeddings": shape.seq_len,
           "rms_norm_eps": norm_eps, "rope_parameters": rope, "hidden_act": "silu",
           "use_sliding_window": False, "sliding_window": None, "max_window_layers": shape.n_layers,
           "layer_types": ["full_attention"] * shape.n_layers,
           "attention_dropout": 0.0, "initializer_range": 0.02}
    if arch == "qwen3":
        out.update(head_dim=shape.head_dim, attention_bias=False)
    return out


def _get(cfg: dict, path: Path, *keys: str):
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k]
    raise UserError(f"{path}: no {' or '.join(keys)}")


def _count(cfg: dict, path: Path, *keys: str, default: int | None = None) -> int:
    """A size (layers, heads, widths): an integer >= 1 as written, never 2.7 read as 2 or true as 1."""
    v = _get(cfg, path, *keys) if default is None or any(cfg.get(k) is not None for k in keys) else default
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise UserError(f"{path}: {keys[0]} {v!r} is not a positive integer")
    return v


def _context(cfg: dict, path: Path, *keys: str) -> int:
    """The context length: >= 2, as train's and plan's own bound (one token predicts nothing)."""
    v = _count(cfg, path, *keys)
    if v < 2:
        key = next(k for k in keys if cfg.get(k) is not None)
        raise UserError(f"{path}: {key} {v} is below 2 (a context of one token predicts nothing)")
    return v


def _flag(cfg: dict, path: Path, key: str, default: bool) -> bool:
    """A switch: true, false or absent/null. The string "false" is not true (a tied head built
    from `"tie_word_embeddings": "false"` would ignore the checkpoint's lm_head without a word)."""
    v = cfg.get(key)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise UserError(f"{path}: {key} {v!r} is not true or false")
    return v


def _first(*values):
    """The first value that is not None (a key written as null takes its default, as in transformers)."""
    return next(v for v in values if v is not None)


def _positive(path: Path, key: str, value) -> float:
    """A finite positive number (rotary base, norm epsilon); "nan" would score NaN without a word."""
    import math

    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or value <= 0:
        raise UserError(f"{path}: {key} {value!r} is not a finite positive number")
    return float(value)


def _heads(path: Path, d: int, h: int, kv: int, names: tuple[str, str, str]) -> None:
    if d % h:
        raise UserError(f"{path}: {names[0]} {d} is not a multiple of {names[1]} {h}")
    if h % kv:
        raise UserError(f"{path}: {names[1]} {h} is not a multiple of {names[2]} {kv}")


def read_hf_model_config(folder: str | Path) -> tuple[dict, float, float, dict]:
    """(our shape fields, rope_theta, norm_eps, rope_scaling) from a transformers folder's config.json."""
    from pretrain.train.hf_files import check_links, read_json_object

    path = Path(folder) / "config.json"
    if not path.is_file():
        raise UserError(f"{folder}: no config.json (not a Hugging Face model folder)")
    check_links(folder)  # before any file of it is read
    cfg = read_json_object(path)
    mtype = cfg.get("model_type")
    if mtype == "llama":
        return _llama_fields(cfg, path)
    if mtype == "mistral":
        return _mistral_fields(cfg, path)
    if mtype == "gpt2":
        return _gpt2_fields(cfg, path)
    if mtype in ("qwen2", "qwen3"):
        return _qwen_fields(cfg, path, mtype)
    raise Unsupported(f"{path}: model_type {mtype!r} is not supported (supported: {', '.join(ARCHS)})")


# config.json's model_type -> the family as its model cards spell it (Qwen2.5 is model_type qwen2:
# the same architecture, so it is named Qwen2 here).
FAMILY_NAMES = {"llama": "Llama", "mistral": "Mistral", "qwen2": "Qwen2", "qwen3": "Qwen3", "gpt2": "GPT-2"}


def family_name(fields: dict, folder: str | Path | None = None) -> str:
    """What train, eval and report call an imported model (they said "custom"): its family from
    the folder's config.json model_type (else, the folder gone, from the shape: Qwen3's q/k norms,
    Qwen2's q/k/v biases, GPT-2's learned positions, else Llama's) and its size from the exact
    parameter count, rounded as model cards round it: `Qwen2-0.5B-like` for Qwen2.5-0.5B (494M)."""
    from pretrain.train.hf_files import read_json_object

    mtype = None
    if folder is not None and (Path(folder) / "config.json").is_file():
        try:
            mtype = read_json_object(Path(folder) / "config.json").get("model_type")
        except (UserError, OSError, ValueError):
            mtype = None  # a name only: whoever builds the model reads the folder and says why
    family = FAMILY_NAMES.get(mtype) if isinstance(mtype, str) else None
    if family is None:
        family = ("Qwen3" if fields.get("qk_norm") else "Qwen2" if fields.get("qkv_bias")
                  else "GPT-2" if fields.get("learned_pos") else "Llama")
    return f"{family}-{size_label(ModelShape(name='imported', **fields).params())}-like"


def size_label(n: int) -> str:
    """0.5B, 1.7B, 8B, 135M, 110K: two significant digits, a tenth of a billion below 1B."""
    if n >= 10**9:
        return f"{n / 1e9:.2g}B"
    if n >= 10**8:
        return f"{n / 1e9:.1f}B"
    return f"{n / 1e6:.3g}M" if n >= 10**6 else f"{n / 1e3:.3g}K"


def _llama_fields(cfg: dict, path: Path) -> tuple[dict, float, float, dict]:
    d, h = _count(cfg, path, "hidden_size"), _count(cfg, path, "num_attention_heads")
    kv = _count(cfg, path, "num_key_value_heads", default=h)
    _heads(path, d, h, kv, ("hidden_size", "num_attention_heads", "num_key_value_heads"))
    # head_dim, when written, sets each head's width (Q is heads x head_dim wide, W_o maps it back
    # to hidden_size), as LlamaAttention and Qwen3Attention read it: Qwen3-0.6B's 128, not 1024/16.
    head_dim = _count(cfg, path, "head_dim") if cfg.get("head_dim") is not None else 0
    if head_dim % 2:
        raise UserError(f"{path}: head_dim {head_dim} is odd (rotary turns pairs of dimensions)")
    head_dim = 0 if head_dim == d // h else head_dim  # 0: the default width, the same shape
    if cfg.get("hidden_act", "silu") != "silu":
        raise Unsupported(f"{path}: hidden_act {cfg['hidden_act']!r}; only 'silu' (SwiGLU) is supported")
    if _flag(cfg, path, "attention_bias", False) != _flag(cfg, path, "mlp_bias", False):
        raise Unsupported(f"{path}: attention_bias and mlp_bias differ; the model has one `bias` switch")
    rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    if not isinstance(rope, dict):
        raise UserError(f"{path}: rope_parameters {rope!r} is not an object")
    kind = rope.get("rope_type", rope.get("type", "default"))
    if kind not in ("default", "llama3"):
        raise Unsupported(f"{path}: rope_type {kind!r} is not supported yet (only 'default' and 'llama3' "
                        "rotary frequencies); the model would compute other positions than transformers")
    scaling = {}
    if kind == "llama3":
        missing = [k for k in LLAMA3_KEYS if rope.get(k) is None]
        if missing:
            raise UserError(f"{path}: rope_type 'llama3' without {', '.join(missing)}")
        scaling = {k: _positive(path, f"rope_parameters.{k}", rope[k]) for k in LLAMA3_KEYS}
    theta = _positive(path, "rope_theta", _first(rope.get("rope_theta"), cfg.get("rope_theta"), 10000.0))
    fields = {"n_layers": _count(cfg, path, "num_hidden_layers"), "d_model": d, "n_heads": h,
              "n_kv_heads": kv, "d_ff": _count(cfg, path, "intermediate_size"),
              "vocab_size": _count(cfg, path, "vocab_size"),
              "seq_len": _context(cfg, path, "max_position_embeddings"), "mlp": "swiglu", "norm": "rmsnorm",
              "tied_embeddings": _flag(cfg, path, "tie_word_embeddings", False),
              "bias": _flag(cfg, path, "attention_bias", False), "learned_pos": False,
              "qkv_bias": False, "qk_norm": False, "attn_head_dim": head_dim}
    return fields, theta, _positive(path, "rms_norm_eps", _first(cfg.get("rms_norm_eps"), 1e-6)), scaling


def _mistral_fields(cfg: dict, path: Path) -> tuple[dict, float, float, dict]:
    """Mistral is Llama's computation plus sliding-window attention (Jiang et al. 2023, "Mistral 7B"):
    a token sees the `sliding_window` tokens before it. Over sequences no longer than the window that is
    full causal attention, so the model is imported with its context capped at the window (training
    longer sequences would compute something Mistral does not); with `sliding_window` null (Mistral
    v0.2 and later) it is Llama exactly. Exported back, it is written as a Llama folder."""
    if cfg.get("attention_bias") or cfg.get("mlp_bias"):
        raise UserError(f"{path}: a Mistral config with biases is not a known Mistral model")
    fields, theta, eps, scaling = _llama_fields(cfg, path)
    window = cfg.get("sliding_window")
    if window is not None:
        if not isinstance(window, int) or isinstance(window, bool) or window < 1:
            raise UserError(f"{path}: sliding_window {window!r} is not a positive integer")
        fields["seq_len"] = min(fields["seq_len"], window)
    return fields, theta, eps, scaling


def _qwen_fields(cfg: dict, path: Path, mtype: str) -> tuple[dict, float, float, dict]:
    """Qwen2 (Yang et al. 2024, "Qwen2 Technical Report"; Qwen2.5 the same architecture) is Llama
    with biases on the q, k and v projections, none on o or the MLP, whatever `attention_bias` says
    (transformers' Qwen2Attention hard-codes them). Qwen3 (Qwen3 Technical Report, 2025) drops the
    biases and adds an RMSNorm over each head's q and k (`q_norm`, `k_norm`) before rotary. Both may
    use sliding-window attention in some layers; no released base does, and such a config is
    refused rather than computed with full attention."""
    if _flag(cfg, path, "use_sliding_window", False):
        raise Unsupported(f"{path}: use_sliding_window true is not supported ({mtype} with full "
                          "attention in every layer is)")
    kinds = cfg.get("layer_types") or []
    if not isinstance(kinds, list):
        raise UserError(f"{path}: layer_types {kinds!r} is not a list (one attention type per layer)")
    if any(k != "full_attention" for k in kinds):
        raise Unsupported(f"{path}: layer_types {kinds!r} is not supported (only 'full_attention')")
    if mtype == "qwen3" and _flag(cfg, path, "attention_bias", False):
        raise Unsupported(f"{path}: attention_bias true is not supported for qwen3 (no released "
                          "base has it)")
    plain = {k: v for k, v in cfg.items() if k not in ("attention_bias", "mlp_bias")}
    fields, theta, eps, scaling = _llama_fields(plain, path)
    fields["qkv_bias"], fields["qk_norm"] = mtype == "qwen2", mtype == "qwen3"
    return fields, theta, eps, scaling


def _gpt2_fields(cfg: dict, path: Path) -> tuple[dict, float, float, dict]:
    act = cfg.get("activation_function", "gelu_new")
    if act not in ("gelu_new", "gelu_pytorch_tanh"):
        raise Unsupported(f"{path}: activation_function {act!r}; only the tanh GELU ('gelu_new') "
                          "is supported")
    if cfg.get("scale_attn_by_inverse_layer_idx") or cfg.get("scale_attn_weights") is False:
        raise Unsupported(f"{path}: non-standard attention scaling is not supported")
    d = _count(cfg, path, "n_embd", "hidden_size")
    fields = {"n_layers": _count(cfg, path, "n_layer", "num_hidden_layers"), "d_model": d,
              "n_heads": _count(cfg, path, "n_head", "num_attention_heads"),
              "d_ff": _count(cfg, path, "n_inner", default=4 * d),
              "vocab_size": _count(cfg, path, "vocab_size"),
              "seq_len": _context(cfg, path, "n_positions", "max_position_embeddings"), "mlp": "gelu",
              "norm": "layernorm", "tied_embeddings": _flag(cfg, path, "tie_word_embeddings", True),
              "bias": True, "learned_pos": True, "qkv_bias": False, "qk_norm": False}
    fields["n_kv_heads"] = fields["n_heads"]
    _heads(path, d, fields["n_heads"], fields["n_heads"], ("n_embd", "n_head", "n_head"))
    eps = _positive(path, "layer_norm_epsilon", _first(cfg.get("layer_norm_epsilon"), 1e-5))
    return fields, 10000.0, eps, {}


# --- the rotary permutation ------------------------------------------------------------------------

def to_halves(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Rows of W_q/W_k (or its bias) from our pair layout to transformers' half layout: within each
    head, row 2i+j moves to j*(d/2)+i (convert_llama_weights_to_hf.py's `permute`)."""
    rest = w.shape[1:]
    hd = w.shape[0] // n_heads
    return w.reshape(n_heads, hd // 2, 2, *rest).transpose(1, 2).reshape(w.shape)


def to_pairs(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """The inverse of `to_halves`: transformers' rows -> ours."""
    rest = w.shape[1:]
    hd = w.shape[0] // n_heads
    return w.reshape(n_heads, 2, hd // 2, *rest).transpose(1, 2).reshape(w.shape)


# --- the name table --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Source:
    """Where our parameter lives in a transformers checkpoint.

    kind: "same" (identical tensor), "rope" (rows permuted per head, `heads` heads), "T" (GPT-2's
    Conv1D: transposed), "qkv" (GPT-2's fused c_attn, transposed; our rows are its columns
    [part*d, (part+1)*d)).
    """

    key: str
    kind: str = "same"
    heads: int = 0
    part: int = 0


def hf_names(shape: ModelShape) -> dict[str, Source]:
    """Our parameter name -> its Source, for every parameter of a model with `shape`."""
    arch = arch_of(shape)
    out: dict[str, Source] = {}
    weights = ("weight", "bias") if shape.bias else ("weight",)
    norm_keys = ("weight", "bias") if shape.norm == "layernorm" else ("weight",)
    for i in range(shape.n_layers):
        ours = f"layers.{i}."
        if arch in ROTARY_ARCHS:
            hf = f"model.layers.{i}."
            for n in norm_keys:
                out[ours + f"attn_norm.{n}"] = Source(hf + f"input_layernorm.{n}")
                out[ours + f"mlp_norm.{n}"] = Source(hf + f"post_attention_layernorm.{n}")
            out.update(_qwen_names(shape, ours, hf))
            for w in weights:
                out[ours + f"attn.wq.{w}"] = Source(hf + f"self_attn.q_proj.{w}", "rope", shape.n_heads)
                out[ours + f"attn.wk.{w}"] = Source(hf + f"self_attn.k_proj.{w}", "rope", shape.n_kv_heads)
                out[ours + f"attn.wv.{w}"] = Source(hf + f"self_attn.v_proj.{w}")
                out[ours + f"attn.wo.{w}"] = Source(hf + f"self_attn.o_proj.{w}")
                for mine, theirs in (("w1", "gate_proj"), ("w3", "up_proj"), ("w2", "down_proj")):
                    out[ours + f"mlp.{mine}.{w}"] = Source(hf + f"mlp.{theirs}.{w}")
        else:
            hf = f"transformer.h.{i}."
            for n in norm_keys:
                out[ours + f"attn_norm.{n}"] = Source(hf + f"ln_1.{n}")
                out[ours + f"mlp_norm.{n}"] = Source(hf + f"ln_2.{n}")
            for w in ("weight", "bias"):
                for part, mine in enumerate(("wq", "wk", "wv")):
                    out[ours + f"attn.{mine}.{w}"] = Source(hf + f"attn.c_attn.{w}", "qkv", part=part)
                kind = "T" if w == "weight" else "same"
                out[ours + f"attn.wo.{w}"] = Source(hf + f"attn.c_proj.{w}", kind)
                out[ours + f"mlp.w1.{w}"] = Source(hf + f"mlp.c_fc.{w}", kind)
                out[ours + f"mlp.w2.{w}"] = Source(hf + f"mlp.c_proj.{w}", kind)
    if arch in ROTARY_ARCHS:
        out["tok_emb.weight"] = Source("model.embed_tokens.weight")
        out["norm.weight"] = Source("model.norm.weight")
    else:
        out["tok_emb.weight"] = Source("transformer.wte.weight")
        out["pos_emb.weight"] = Source("transformer.wpe.weight")
        for n in norm_keys:
            out[f"norm.{n}"] = Source(f"transformer.ln_f.{n}")
    if not shape.tied_embeddings:
        out["output.weight"] = Source("lm_head.weight")
    return out


def _qwen_names(shape: ModelShape, ours: str, hf: str) -> dict[str, Source]:
    """Qwen2's q/k/v biases (rows permuted per head like their weights'), Qwen3's per-head norm gains
    (one head's dims: the same pair/half permutation, so normalizing then rotating commutes)."""
    out = {}
    if shape.qkv_bias and not shape.bias:
        out[ours + "attn.wq.bias"] = Source(hf + "self_attn.q_proj.bias", "rope", shape.n_heads)
        out[ours + "attn.wk.bias"] = Source(hf + "self_attn.k_proj.bias", "rope", shape.n_kv_heads)
        out[ours + "attn.wv.bias"] = Source(hf + "self_attn.v_proj.bias")
    if shape.qk_norm:
        out[ours + "attn.q_norm.weight"] = Source(hf + "self_attn.q_norm.weight", "rope", 1)
        out[ours + "attn.k_norm.weight"] = Source(hf + "self_attn.k_norm.weight", "rope", 1)
    return out


def to_hf_tensors(shape: ModelShape, params: dict[str, torch.Tensor]) -> list[tuple[str, list, object]]:
    """[(transformers key, shape, thunk)] in checkpoint order; each thunk builds that one tensor from
    our `params` when called (so a writer holds one converted tensor at a time, not the model).
    A GPT-2-style model without biases is written with zero biases (GPT-2 always has them)."""
    grouped: dict[str, list[tuple[str, Source]]] = {}
    for ours, src in hf_names(shape).items():
        grouped.setdefault(src.key, []).append((ours, src))

    def get(name: str) -> torch.Tensor:
        if name in params:
            return params[name]
        weight = params[name.removesuffix(".bias") + ".weight"]  # a bias GPT-2 has and we do not
        return torch.zeros(weight.shape[0], dtype=weight.dtype)

    out = []
    for key, members in grouped.items():
        src = members[0][1]
        names = [o for o, _ in members]
        out.append((key, _hf_shape(src, [get(o).shape for o in names]), _thunk(src, names, get)))
    return out


def _hf_shape(src: Source, ours: list) -> list[int]:
    s = [sum(o[0] for o in ours), *ours[0][1:]]
    return s[::-1] if src.kind in ("T", "qkv") and len(s) == 2 else s


def _thunk(src: Source, names: list[str], get):
    def build() -> torch.Tensor:
        t = torch.cat([get(o) for o in names], 0) if src.kind == "qkv" else get(names[0])
        if src.kind == "rope":
            return to_halves(t, src.heads)
        if src.kind in ("T", "qkv") and t.ndim == 2:
            return t.t()
        return t

    return build


# --- a run that starts from a transformers folder --------------------------------------------------

def apply_init_from(cfg):
    """The run config with `model.init_from` (a transformers folder) spelled out: the shape, rotary
    base and norm epsilon from its config.json, and its tokenizer.json as `data.tokenizer` for text
    data when none is set. Shape fields also set in the recipe must agree, except a shorter
    `model.seq_len` for a rotary model (the context trained on; the rotary tables are computed)."""
    import dataclasses

    m = cfg.model
    if not m.init_from:
        return cfg
    folder = Path(m.init_from)
    fields, theta, eps, scaling = read_hf_model_config(folder)
    for k, v in fields.items():
        mine = getattr(m, k)
        if mine is None or mine == v:
            continue
        if k == "seq_len" and not fields["learned_pos"] and 0 < mine <= v:
            fields[k] = mine
            continue
        what = " (the longest context it computes exactly)" if k == "seq_len" else ""
        raise UserError(f"model.{k}={mine} conflicts with {folder / 'config.json'} ({v}{what}); "
                        "unset it (the shape comes from model.init_from)")
    model = dataclasses.replace(m, preset="", rope_theta=theta, norm_eps=eps, rope_scaling=scaling, **fields)
    data = cfg.data
    tok = folder / "tokenizer.json"
    if data.kind == "text" and not data.tokenizer and tok.is_file():
        data = dataclasses.replace(data, tokenizer=str(tok))
    if data.kind == "tokens" and tok.is_file():
        _check_token_dirs(data, tok)
    return dataclasses.replace(cfg, model=model, data=data)


def check_text_tokenizer(cfg) -> None:
    """A weights-only folder (no tokenizer.json) with text data and no data.tokenizer: the text would
    be read as bytes (ids 0-256) by a model trained on another tokenizer's ids, and train on in
    silence (every id fits its larger vocabulary). Refused, unless the folder's vocabulary is the
    byte vocabulary itself (a byte-level model, as this trainer makes)."""
    from pretrain.train.data import BYTE_VOCAB

    m, data = cfg.model, cfg.data
    if not m.init_from or data.kind != "text" or data.tokenizer or m.vocab_size == BYTE_VOCAB:
        return
    raise UserError(f"{m.init_from}: no tokenizer.json, and its vocabulary ({m.vocab_size:,} tokens) is not "
                    f"the byte vocabulary ({BYTE_VOCAB}): data.path would be read as bytes, ids this model "
                    "was not trained on. Put the model's tokenizer.json in the folder, or --set "
                    "data.tokenizer=PATH (or use token shards made with its tokenizer: data.kind=\"tokens\")")


def _check_token_dirs(data, tok_path: Path) -> None:
    """Token shards made with another tokenizer than the checkpoint's would train on wrong ids
    without any error: refuse them (the fingerprint is the one `pretrain tokenize` records)."""
    from pretrain.tokens.tokenizer import load_tokenizer, tokenizer_sha256
    from pretrain.untrusted import load_json

    want = tokenizer_sha256(load_tokenizer(tok_path))
    for name, d in {**data.sources, **data.eval_sources}.items():
        man = Path(d) / "manifest.json"
        try:
            got = load_json(man)["tokenizer"]["sha256"]  # BadFile (nested too deep...) is a ValueError
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a missing or unreadable manifest is reported by the data loader itself
        if got != want:
            raise UserError(f"data source {name!r} ({d}) was tokenized with another tokenizer than "
                            f"model.init_from's {tok_path}; rerun `pretrain tokenize --tokenizer {tok_path}`")
