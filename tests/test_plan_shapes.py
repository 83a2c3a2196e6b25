"""ModelShape.params() against published parameter counts and against torch modules of the same shape."""

from __future__ import annotations

import pytest

from pretrain.errors import UserError
from pretrain.plan.shapes import (
    PRESETS,
    ModelShape,
    get_shape,
    parse_batch_tokens,
    parse_count,
    shape_for_params,
)

# Published totals: GPT-2 small (HF gpt2, 124,439,808); Llama 2 and Llama 3 safetensors index
# "total_size" in bf16 / 2 (e.g. Llama 3 8B: 16,060,522,496 bytes).
PUBLISHED = {
    "gpt2-124m": 124_439_808,
    "llama-2-7b": 6_738_415_616,
    "llama-2-13b": 13_015_864_320,
    "llama-2-70b": 68_976_648_192,
    "llama-3.2-1b": 1_235_814_400,  # tied head: total_size 2,471,628,800 bytes
    "llama-3-8b": 8_030_261_248,
    "llama-3-70b": 70_553_706_496,
    "llama-3-405b": 405_853_388_800,
}


@pytest.mark.parametrize("name,count", PUBLISHED.items())
def test_published_counts(name, count):
    assert get_shape(name).params() == count


def _torch_count(shape: ModelShape) -> int:
    """Build the architecture from torch.nn pieces and count its parameters (an independent reference)."""
    torch = pytest.importorskip("torch")
    nn = torch.nn
    h, kv, f = shape.d_model, shape.n_kv_heads * shape.head_dim, shape.d_ff

    def norm():
        return nn.LayerNorm(h) if shape.norm == "layernorm" else nn.RMSNorm(h)

    def block():
        mods = [norm(), norm(), nn.Linear(h, h, shape.bias), nn.Linear(h, kv, shape.bias),
                nn.Linear(h, kv, shape.bias), nn.Linear(h, h, shape.bias), nn.Linear(h, f, shape.bias),
                nn.Linear(f, h, shape.bias)]
        if shape.mlp == "swiglu":
            mods.append(nn.Linear(h, f, shape.bias))
        return nn.ModuleList(mods)

    with torch.device("meta"):
        parts = [nn.Embedding(shape.vocab_size, h), norm()] + [block() for _ in range(shape.n_layers)]
        if shape.learned_pos:
            parts.append(nn.Embedding(shape.seq_len, h))
        if not shape.tied_embeddings:
            parts.append(nn.Linear(h, shape.vocab_size, bias=False))
        model = nn.ModuleList(parts)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("shape", [
    PRESETS["tiny-cpu"], PRESETS["llama-124m"], PRESETS["gpt2-124m"],
    ModelShape("gqa-bias", 3, 256, 8, 2, 700, 1000, 64, mlp="swiglu", bias=True),
    ModelShape("gelu-untied", 2, 192, 6, 3, 768, 500, 32, mlp="gelu", norm="layernorm", learned_pos=True),
], ids=lambda s: s.name)
def test_params_match_torch_modules(shape):
    assert shape.params() == _torch_count(shape)


def test_embedding_split():
    s = get_shape("llama-2-7b")
    assert s.params() - s.non_embedding_params() == 2 * 32_000 * 4096
    g = get_shape("gpt2-124m")  # tied head, learned positions
    assert g.params() - g.non_embedding_params() == (50_257 + 1024) * 768


def test_params_flag_gives_a_close_llama_shape():
    s = shape_for_params(7e9)
    assert (s.n_layers, s.d_model) == (32, 4096)
    for n in (2e7, 1.24e8, 1e9, 7.5e9, 13e9, 70e9, 405e9, 1e12, 1e14):  # within 1% (issue 16)
        s = shape_for_params(n)
        assert s.params() == pytest.approx(n, rel=0.01)
        assert s.d_ff % 8 == 0 and s.d_model % 128 == 0
    with pytest.raises(UserError, match="between"):
        shape_for_params(1e30)


def test_parsers_and_errors():
    assert parse_count("7B") == 7e9 and parse_count("1.5T") == 1.5e12 and parse_count("140e9") == 140e9
    assert parse_batch_tokens("16M") == 2048 * 8192  # Llama 3's 16M-token batch
    with pytest.raises(UserError, match="cannot read"):
        parse_count("seven")
    with pytest.raises(UserError, match="known"):
        get_shape("llama-9")
    with pytest.raises(UserError, match="not divisible"):
        ModelShape("bad", 2, 100, 3, 3, 10, 10, 10)


def test_a_count_of_forty_thousand_digits_is_refused_at_once():
    """`[0-9]*\\.?[0-9]+` backtracked in time the square of a digit run: "1" * 20,000 + "x" took
    29 s in parse_count and 45 s in parse_batch_tokens. In a child bounded at 60 s (it takes ms)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = ("from pretrain.errors import UserError\nfrom pretrain.plan.shapes import parse_batch_tokens\n"
            "try:\n    parse_batch_tokens('1' * 40_000 + 'x')\n"
            "except UserError as e:\n    print(str(e)[:24])\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert r.stdout.strip() == "cannot read a count from", r.stderr[-2000:]
    assert parse_batch_tokens("4M") == 4 << 20 and parse_count(".5T") == 5e11
    assert parse_count("1.5e3k") == 1.5e6
