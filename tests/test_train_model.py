"""The model agrees with the planner's parameter counts and behaves as a causal language model."""

from __future__ import annotations

import pytest
import torch

from pretrain.errors import UserError
from pretrain.train.config import ModelConfig, OptimConfig
from pretrain.train.model import build_model, materialize, resolve_shape
from pretrain.train.trainer import build_optimizer, lr_at

shapes = pytest.importorskip("pretrain.plan.shapes")


@pytest.mark.parametrize("preset", ["tiny-cpu", "gpt2-124m", "llama-124m", "llama-3.2-1b", "llama-3-8b",
                                    "llama-3-405b"])
def test_numel_equals_plan_params(preset):
    # Built on the meta device: no memory, even for 405B parameters.
    shape = resolve_shape(ModelConfig(preset=preset))
    model = build_model(shape, ModelConfig(preset=preset), "meta")
    assert sum(p.numel() for p in model.parameters()) == shape.params() == shapes.get_shape(preset).params()


def test_gpt2_small_is_124_439_808():
    # GPT-2 small's published size (tied head, learned positions, biases, LayerNorm).
    m = ModelConfig(preset="gpt2-124m")
    model = build_model(resolve_shape(m), m, "meta")
    assert sum(p.numel() for p in model.parameters()) == 124_439_808


def _tiny(**over):
    m = ModelConfig(preset="tiny-cpu", n_layers=2, d_model=32, n_heads=4, n_kv_heads=2, d_ff=64,
                    vocab_size=50, seq_len=16, **over)
    return materialize(build_model(resolve_shape(m), m, "meta"), "cpu", 0)


@pytest.mark.parametrize("over", [{}, {"mlp": "gelu", "norm": "layernorm", "learned_pos": True, "bias": True,
                                       "tied_embeddings": True}])
def test_causal_future_tokens_do_not_change_past_logits(over):
    model = _tiny(**over)
    x = torch.randint(0, 50, (2, 16), generator=torch.Generator().manual_seed(1))
    y = x.clone()
    y[:, 10:] = (y[:, 10:] + 7) % 50
    a, b = model(x), model(y)
    torch.testing.assert_close(a[:, :10], b[:, :10])
    assert not torch.allclose(a[:, 10:], b[:, 10:])


def test_initial_loss_is_log_vocab():
    # At init, the next-token distribution is near uniform: loss ~ ln(V) (the usual sanity check).
    model = _tiny()
    x = torch.randint(0, 50, (8, 16), generator=torch.Generator().manual_seed(2))
    loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), x.roll(-1, 1).flatten())
    assert loss.item() == pytest.approx(torch.log(torch.tensor(50.0)).item(), abs=0.1)


def test_same_seed_same_weights_meta_init():
    a, b = _tiny(), _tiny()
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


def test_no_decay_on_norms_biases_embeddings():
    model = _tiny(bias=True, learned_pos=True, norm="layernorm", mlp="gelu")
    opt = build_optimizer(model, OptimConfig(lr=1e-3))
    names = {id(p): n for n, p in model.named_parameters()}
    decayed = {names[id(p)] for p in opt.param_groups[0]["params"]}
    plain = {names[id(p)] for p in opt.param_groups[1]["params"]}
    assert all(n.endswith("weight") and "norm" not in n and "emb" not in n for n in decayed)
    assert {"tok_emb.weight", "pos_emb.weight", "norm.weight", "norm.bias"} <= plain
    assert any(n.endswith("wq.bias") for n in plain)


def test_fused_and_foreach_adamw_take_the_same_step():
    # optim.implementation picks the kernel, not the algorithm: torch's single-tensor AdamW is the truth.
    steps = {}
    for impl in ("fused", "foreach", "single"):
        model = _tiny()
        kernel = "foreach" if impl == "single" else impl
        opt = build_optimizer(model, OptimConfig(lr=1e-2, implementation=kernel))
        assert bool(opt.param_groups[0]["fused"]) is (impl == "fused")
        if impl == "single":
            for group in opt.param_groups:
                group["foreach"] = False
        for i in range(3):
            g = torch.Generator().manual_seed(i)
            for p in model.parameters():
                p.grad = torch.randn(p.shape, generator=g)
            opt.step()
        steps[impl] = torch.cat([p.detach().flatten() for p in model.parameters()])
    torch.testing.assert_close(steps["fused"], steps["single"], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(steps["foreach"], steps["single"], rtol=1e-5, atol=1e-6)
    with pytest.raises(UserError, match="implementation"):
        build_optimizer(_tiny(), OptimConfig(implementation="apex"))


def test_schedule_warmup_cosine_floor_and_wsd():
    s = type("S", (), {"kind": "cosine", "warmup_steps": 10, "min_lr_ratio": 0.1, "decay_fraction": 0.2})()
    assert lr_at(0, 110, 1.0, s) == pytest.approx(0.1)  # ramps linearly from ~0
    assert lr_at(9, 110, 1.0, s) == pytest.approx(1.0)  # peak at the end of warmup
    assert lr_at(60, 110, 1.0, s) == pytest.approx(0.55)  # halfway down the cosine: (peak + floor) / 2
    assert lr_at(110, 110, 1.0, s) == pytest.approx(0.1)  # the floor
    s.kind = "wsd"
    assert lr_at(50, 110, 1.0, s) == 1.0  # stable phase
    assert lr_at(109, 110, 1.0, s) == pytest.approx(0.1)  # linear decay to the floor at the end


def test_explicit_cpu_attention_matches_torch_sdpa():
    # The CPU path writes attention out for speed; torch's fused kernel is the reference.
    from pretrain.train.model import explicit_causal_attention

    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 4, 33, 16, generator=g, requires_grad=True) for _ in range(3))
    ours = explicit_causal_attention(q, k, v)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-6)
    go = torch.autograd.grad(ours.square().sum(), (q, k, v))
    gr = torch.autograd.grad(ref.square().sum(), (q, k, v))
    for a, b in zip(go, gr):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_explicit_cpu_attention_under_bf16_autocast_stays_close_to_fp32_sdpa():
    # The training path: bf16 inputs, scores and probabilities; error of the order of bf16's epsilon.
    from pretrain.train.model import explicit_causal_attention

    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(3, 2, 40, 16, generator=g) for _ in range(3))
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ours = explicit_causal_attention(*(t.bfloat16() for t in (q, k, v)))
    assert ours.dtype == torch.bfloat16
    torch.testing.assert_close(ours.float(), ref, rtol=0, atol=0.03)
