"""The fp16 loss scaler against the lesson's table (section 4b), inside real training steps."""

from __future__ import annotations

import pytest
import torch

from pretrain.train.precision import DynamicLossScaler
from pretrain.train.testing import fallback_text, tiny_config
from pretrain.train.trainer import Trainer

pytestmark = pytest.mark.usefixtures("restore_torch_threads")


def test_scaler_lesson_table():
    # Lesson 4b's table: S = 65,536, growth every 3 clean steps, gradients clean, clean, overflow,
    # clean, clean, clean -> applied, applied, skipped, applied x3; S after: 65536, 65536, 32768,
    # 32768, 32768, 65536.
    s = DynamicLossScaler(True, 65536.0, growth_interval=3)
    rows = [(s.update(ok), s.scale) for ok in [True, True, False, True, True, True]]
    assert rows == [(True, 65536), (True, 65536), (False, 32768), (True, 32768), (True, 32768), (True, 65536)]


@pytest.fixture
def text(tmp_path):
    return fallback_text(tmp_path / "topics.txt")


def test_injected_inf_gradients_skip_the_step_and_halve_then_regrow(tmp_path, text):
    # fp16 is ~1 GFLOP/s on these CPUs: a toy model. Inf is injected into one gradient at step 3.
    cfg = tiny_config(
        tmp_path / "run",
        text,
        "precision.dtype=fp16",
        "precision.growth_interval=3",
        "model.d_model=16",
        "model.d_ff=32",
        "model.seq_len=16",
        "data.batch_size=2",
    )
    t = Trainer(cfg, quiet=True)
    inject = {"now": False}
    w = t.model.tok_emb.weight
    w.register_hook(lambda g: g * float("inf") if inject["now"] else g)
    scales, applied = [], []
    for ok in [True, True, False, True, True, True]:
        inject["now"] = not ok
        before = [p.detach().clone() for p in t.params]
        adam_steps = t.optimizer.state[w]["step"].item() if w in t.optimizer.state else 0
        rec = t.train_step()
        changed = any(not torch.equal(a, p) for a, p in zip(before, t.params))
        applied.append(changed)
        scales.append(rec["loss_scale"])
        if not ok:
            assert t.optimizer.state[w]["step"].item() == adam_steps  # Adam's state untouched too
    assert applied == [True, True, False, True, True, True]
    assert scales == [65536, 65536, 32768, 32768, 32768, 65536]
    assert all(p.dtype == torch.float32 for p in t.params)  # fp32 master weights


def test_bf16_keeps_fp32_master_weights_and_tiny_updates(tmp_path, text):
    # Lesson 4c: an update of 1e-4 to a weight of 1.0 survives in fp32 and vanishes in bf16.
    assert torch.tensor(1.0, dtype=torch.bfloat16) + 1e-4 == 1.0
    cfg = tiny_config(tmp_path / "run", text, "precision.dtype=bf16")
    t = Trainer(cfg, quiet=True)
    t.train_step()
    assert all(p.dtype == torch.float32 for p in t.params)
    assert all(
        v.dtype == torch.float32
        for s in t.optimizer.state.values()
        for v in s.values()
        if torch.is_tensor(v) and v.ndim
    )


def test_fp16_resume_keeps_the_loss_scaler_even_before_the_first_applied_step(tmp_path, text):
    """Dynamic loss scaling across two restarts: one at step 2, while every step so far overflowed
    (no optimizer step applied yet: that checkpoint could not be loaded, "Missing key in checkpoint
    state_dict: optim.state..."), one at step 4, inside a growth interval. The truth: the same run
    never stopped, its losses and scales step by step, bit for bit."""
    from pretrain.train import checkpoint as ck
    from pretrain.train.metrics import read_metrics

    fp16 = ("precision.dtype=fp16", "precision.init_scale=1e6", "precision.growth_interval=2",
            "model.d_model=16", "model.d_ff=32", "model.seq_len=16", "data.batch_size=2", "train.steps=8",
            "checkpoint.every=100", "checkpoint.async_save=false")
    never = {r["step"]: (r["loss"], r["loss_scale"]) for r in
             Trainer(tiny_config(tmp_path / "a", text, *fp16), quiet=True).fit()}
    assert never[1][1] < 1e6 and max(s for _, s in never.values()) > min(s for _, s in never.values())
    run = tmp_path / "r"
    for stop in (2, 4, 8):  # 2: steps 1-3 overflow; 4: one clean step of the 2 before growth
        t = Trainer(tiny_config(run, text, *fp16, f"train.stop_at={stop}"), quiet=True)
        if t.step:  # the scaler as saved: scale, clean steps towards the next growth, skips
            assert t.scaler.state_dict() == ck.read_state(ck.step_dir(run / "checkpoints", t.step))["scaler"]
        t.fit()
    steps, _ = read_metrics(run / "metrics.jsonl")
    assert {r["step"]: (r["loss"], r["loss_scale"]) for r in steps} == never
