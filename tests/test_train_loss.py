"""The trainer's loss (Trainer._loss, train/loss.py) against the loss as it was written before
session 8, `F.cross_entropy(model(x).float().flatten(0, 1), y)` with the logits kept through
backward, run here on a twin trainer (same seed, same batch): the whole loss bitwise equal, the
loss over train.loss_chunks slices equal to fp32 rounding, tied and untied heads."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from pretrain.errors import UserError

SMALL = ("log.tensorboard=false", "checkpoint.every=0", "model.n_layers=2", "model.d_model=32",
         "model.d_ff=64", "model.n_heads=2", "model.n_kv_heads=1", "model.seq_len=32",
         "model.vocab_size=512", "data.batch_size=3")


def _step(tmp_path, text, name: str, *over: str, reference: bool = False):
    """(loss, gradients) of one micro-batch: Trainer._forward_backward, or the pre-session-8 code."""
    from pretrain.train.precision import autocast
    from pretrain.train.testing import tiny_config
    from pretrain.train.trainer import Trainer

    cfg = tiny_config(tmp_path / name, text, *SMALL, *over)
    tr = Trainer(cfg, quiet=True)
    if reference:
        x, y = tr._inputs(tr.loader.next_batch(cfg.data.batch_size))  # noqa: SLF001
        with autocast(cfg.precision.dtype, tr.device):
            logits = tr.model(x)
        loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten())
        loss.backward()
    else:
        loss = tr._forward_backward(1)  # noqa: SLF001
    return loss.detach(), [p.grad.clone() for p in tr.params]


@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_whole_loss_and_gradients_are_bitwise_the_old_ones(tmp_path, text, dtype):
    ref_loss, ref_grads = _step(tmp_path, text, "ref", f"precision.dtype={dtype}", reference=True)
    loss, grads = _step(tmp_path, text, "new", f"precision.dtype={dtype}")
    assert torch.equal(loss, ref_loss)
    assert all(torch.equal(a, b) for a, b in zip(grads, ref_grads, strict=True))


@pytest.mark.parametrize("tied", ["false", "true"])
def test_chunked_loss_equals_the_whole_one_to_fp32_rounding(tmp_path, text, tied):
    """5 slices of 96 tokens (uneven: 20 and 19), fp32, the head's own matrix or the embedding's."""
    over = ("precision.dtype=fp32", f"model.tied_embeddings={tied}")
    ref_loss, ref_grads = _step(tmp_path, text, "ref", *over, reference=True)
    loss, grads = _step(tmp_path, text, "chunked", *over, "train.loss_chunks=5")
    assert loss.item() == pytest.approx(ref_loss.item(), rel=1e-6)
    for a, b in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("dim", ["tp", "pp"])
def test_chunked_loss_is_refused_where_the_head_is_not_plain(tmp_path, text, dim):
    """Tensor parallelism splits the head over the vocabulary and gathers its logits in the module's
    hooks; a pipeline's schedule owns the last stage's loss: one line, before anything is built.
    (DDP, FSDP2 and context parallelism run it: tests/test_parallel_train.py, two-rank layouts.)"""
    from pretrain.train.fits import preflight
    from pretrain.train.testing import tiny_config

    cfg = tiny_config(tmp_path / dim, text, *SMALL, "train.loss_chunks=4", f"parallel.{dim}=2")
    with pytest.raises(UserError, match=rf"train.loss_chunks=4 needs parallel.{dim}=1"):
        preflight(cfg, 2, torch.device("cpu"))
