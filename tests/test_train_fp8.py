"""fp8 matmuls (lesson 4d): per-tensor scaling into E4M3 (forward) and E5M2 (gradients).

torch's CPU `_scaled_mm` does the same arithmetic as the GPU kernel (slowly), so the numerics are
tested here; training through `pretrain train` with precision.dtype = "fp8" needs a GPU (marked).
"""

from __future__ import annotations

import pytest
import torch

from pretrain.errors import UserError
from pretrain.train.precision import E4M3, E5M2, Float8Linear, apply_fp8, check_precision, to_fp8


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.float() - b).norm() / b.norm()).item()


def test_scale_puts_amax_on_the_format_max_and_rescues_small_values():
    # E4M3 reaches 448 and E5M2 57,344 (lesson 4d's table); values ~1e-3 sit mostly below E4M3's
    # normal range (2^-6), so an unscaled cast loses about half their size, a scaled one ~2%.
    t = torch.randn(1000, generator=torch.Generator().manual_seed(0)) * 1e-3
    t8, inv = to_fp8(t, E4M3)
    assert t8.float().abs().max().item() == 448.0
    assert to_fp8(t, E5M2)[0].float().abs().max().item() == 57344.0
    assert _rel(t8.float() * inv, t) < 2**-4  # E4M3's unit roundoff (3 mantissa bits)
    assert _rel(t.to(E4M3).float(), t) > 0.3


def test_fp8_linear_matches_fp32_within_the_formats_precision():
    g = torch.Generator().manual_seed(1)
    lin = torch.nn.Linear(64, 48)
    x = torch.randn(128, 64, generator=g, requires_grad=True)
    ref = lin(x)
    grad = torch.randn(ref.shape, generator=g)
    ref.backward(grad)
    gx, gw = x.grad.clone(), lin.weight.grad.clone()
    x.grad = lin.weight.grad = None
    lin.__class__ = Float8Linear
    out = lin(x)
    out.float().backward(grad)
    assert _rel(out, ref) < 2**-4  # E4M3 operands
    assert _rel(x.grad, gx) < 2**-3 and _rel(lin.weight.grad, gw) < 2**-3  # E5M2 gradient (2 bits)
    assert lin.weight.dtype == torch.float32 and lin.weight.grad.dtype == torch.float32  # fp32 master


def test_apply_fp8_switches_block_linears_only_and_keeps_names():
    from pretrain.train.config import ModelConfig
    from pretrain.train.model import build_model, resolve_shape

    m = ModelConfig(preset="tiny-cpu", n_layers=2, d_model=64, n_heads=4, n_kv_heads=2, d_ff=176,
                    vocab_size=257, seq_len=32)
    model = build_model(resolve_shape(m), m, "meta")
    names = [n for n, _ in model.named_parameters()]
    assert apply_fp8(model) == 2 * 7  # wq wk wv wo w1 w2 w3 per block
    assert [n for n, _ in model.named_parameters()] == names
    assert type(model.output) is torch.nn.Linear


def test_fp8_is_refused_without_a_capable_gpu():
    if torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 9):
        pytest.skip("this machine has fp8 matmuls")
    with pytest.raises(UserError, match="compute capability"):
        check_precision("fp8", torch.device("cpu"))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() < (8, 9),
                    reason="needs a CUDA GPU with fp8 matmuls (sm_89+)")
def test_fp8_training_tracks_bf16_on_gpu(tmp_path):
    from pretrain.train.testing import fallback_text, tiny_config
    from pretrain.train.trainer import Trainer

    text = fallback_text(tmp_path / "t.txt")
    common = ("train.device=cuda", "train.steps=60", "model.seq_len=64", "data.batch_size=16")
    bf = Trainer(tiny_config(tmp_path / "bf", text, *common, "precision.dtype=bf16"), quiet=True).fit()
    f8 = Trainer(tiny_config(tmp_path / "f8", text, *common, "precision.dtype=fp8"), quiet=True).fit()
    assert f8[-1]["loss"] < 0.6 * f8[0]["loss"]
    assert abs(f8[-1]["loss"] - bf[-1]["loss"]) < 0.1 * bf[-1]["loss"]


def _scaled_mm_in_fp32(a, b, *, scale_a, scale_b, out_dtype):
    """torch._scaled_mm's arithmetic with fp32 matmuls: the fp8 operands upcast (exact), products
    summed in fp32, then both scales. torch 2.13's CPU `_scaled_mm` took ~0.1 s for one 248x64x176
    product (1000x an fp32 matmul on one thread): 93 s of CPU for the 40 steps below, 5+ minutes of
    the suite on a loaded machine."""
    return ((a.float() @ b.float()) * (scale_a * scale_b)).to(out_dtype)


def test_fp8_linear_with_fp32_matmuls_equals_torchs_scaled_mm(monkeypatch):
    """Forward and backward of a block-sized Float8Linear (the three products: E4M3 x E4M3 to bf16,
    E5M2 x E4M3 to bf16 and to fp32) with torch's `_scaled_mm` and with `_scaled_mm_in_fp32`: the
    same up to the summation order (2^-8 relative: one bf16 rounding), so the learning test below
    trains what torch computes."""
    g = torch.Generator().manual_seed(2)
    x = torch.randn(248, 64, generator=g)
    grad = torch.randn(248, 176, generator=g)
    lin = torch.nn.Linear(64, 176, bias=False)
    lin.__class__ = Float8Linear
    got = []
    for mm in (torch._scaled_mm, _scaled_mm_in_fp32):
        monkeypatch.setattr(torch, "_scaled_mm", mm)
        xi = x.clone().requires_grad_(True)
        lin.weight.grad = None
        out = lin(xi)
        out.float().backward(grad)
        got.append((out.float(), xi.grad.float(), lin.weight.grad.clone()))
    for real, emulated in zip(*got):
        assert _rel(emulated, real) < 2**-8


def test_fp8_blocks_learn_like_fp32_on_cpu_emulation(tmp_path, monkeypatch):
    # The Trainer refuses fp8 on CPU (no speed-up); the same model, switched by apply_fp8 and trained
    # by hand for 40 steps, must learn about as well as the fp32 model on the same batches. The fp8
    # products run as fp32 matmuls of the fp8 values (the test above: torch's CPU kernel's numbers).
    monkeypatch.setattr(torch, "_scaled_mm", _scaled_mm_in_fp32)
    from pretrain.train.config import ModelConfig
    from pretrain.train.data import TextLoader, encode_text
    from pretrain.train.model import build_model, materialize, resolve_shape
    from pretrain.train.testing import fallback_text

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    ids, _ = encode_text(fallback_text(tmp_path / "t.txt").read_text())
    m = ModelConfig(preset="tiny-cpu", n_layers=2, d_model=64, n_heads=4, n_kv_heads=2, d_ff=176,
                    vocab_size=257, seq_len=32)
    finals = {}
    for fp8 in (False, True):
        model = build_model(resolve_shape(m), m, "meta")
        if fp8:
            apply_fp8(model)
        materialize(model, "cpu", 0)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
        loader = TextLoader(ids, 32)
        for _ in range(40):
            b = torch.from_numpy(loader.next_batch(8))
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=fp8):
                logits = model(b[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), b[:, 1:].flatten())
            opt.zero_grad()
            loss.backward()
            opt.step()
        finals[fp8] = loss.item()
    torch.set_num_threads(threads)
    assert finals[True] < 0.7 * 5.55  # ln(257) at the start
    assert abs(finals[True] - finals[False]) < 0.1 * finals[False]
