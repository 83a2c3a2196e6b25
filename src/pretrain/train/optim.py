"""The optimizer and the learning-rate schedule of a training run: AdamW with its parameter groups,
and the warmup + cosine / warmup-stable-decay / constant schedule. Split out of train/trainer.py
(session 7, no behaviour change); trainer.py imports both from here."""

from __future__ import annotations

import math

import torch

from pretrain.errors import UserError


def build_optimizer(model: torch.nn.Module, ocfg) -> torch.optim.AdamW:
    """AdamW (Loshchilov & Hutter 2019). Weight decay only on matrices of the blocks and the output head.

    Norm gains and biases are not decayed (decaying a gain toward 0 fights the normalization), and
    neither are embeddings: a row is only updated when its token appears, so decay would shrink rare
    tokens every step they are absent (as in nanoGPT's and OLMo's default groups).
    """
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        is_emb = "tok_emb" in name or "pos_emb" in name
        (decay if p.ndim >= 2 and not is_emb else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": ocfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    params = decay + no_decay
    impl = ocfg.implementation
    if impl not in ("auto", "fused", "foreach"):
        raise UserError(f"optim.implementation must be 'auto', 'fused' or 'foreach', got {impl!r}")
    if impl == "auto":  # one kernel per step on a GPU; a CPU keeps torch's default (its update is <1%)
        # fused/foreach kernels reject a list mixing DTensors and plain tensors (TP's replicated norms)
        same_kind = len({hasattr(p, "device_mesh") for p in params}) <= 1
        on_gpu = all(p.device.type == "cuda" for p in params)
        impl = "fused" if on_gpu and same_kind else None
    return torch.optim.AdamW(groups, lr=ocfg.lr, betas=(ocfg.beta1, ocfg.beta2), eps=ocfg.eps,
                             fused=True if impl == "fused" else None,
                             foreach=True if impl == "foreach" else None)


def lr_at(step: int, total: int, peak: float, scfg) -> float:
    """Learning rate for the step with 0-based index `step`."""
    warm = scfg.warmup_steps
    if step < warm:  # linear warmup from ~0 (lesson section 5c)
        return peak * (step + 1) / warm
    floor = peak * scfg.min_lr_ratio
    if scfg.kind == "constant":
        return peak
    if scfg.kind == "cosine":  # half a cosine from the peak to the floor (Loshchilov & Hutter 2017)
        progress = min(1.0, (step - warm) / max(1, total - warm))
        return floor + (peak - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))
    if scfg.kind == "wsd":  # warmup-stable-decay: flat, then a linear decay at the end (Hu et al. 2024)
        start = total - int(scfg.decay_fraction * total)
        if step < start:
            return peak
        return peak - (peak - floor) * min(1.0, (step - start + 1) / max(1, total - start))
    raise UserError(f"schedule.kind must be cosine, wsd or constant; got {scfg.kind!r}")
