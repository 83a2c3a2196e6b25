"""A minimal nanoGPT-style training loop: the peer that bench_train.py measures `pretrain train` against.

Written here from nanoGPT's design (Karpathy, github.com/karpathy/nanoGPT, model.py and train.py): a GPT
with a fused QKV projection, LayerNorm, GELU MLP, learned positions and a tied head; AdamW with
weight decay on matrices only; bf16 autocast with fp32 weights; random windows of a byte array.
No checkpoints, no clipping bookkeeping beyond torch's clip_grad_norm_, nothing else.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, d: int, h: int):
        super().__init__()
        self.h = h
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.h, C // self.h).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, d: int, h: int):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(d), CausalSelfAttention(d, h)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc, self.c_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab: int, ctx: int, n_layer: int, d: int, h: int):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.h = nn.ModuleList(Block(d, h) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d)
        self.apply(self._init)
        for n, p in self.named_parameters():
            if n.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * n_layer))

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, 0.0, 0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for b in self.h:
            x = b(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))


def run(data: np.ndarray, steps: int, warmup: int, batch: int = 64, ctx: int = 256, n_layer: int = 6,
        d: int = 384, h: int = 6, vocab: int = 257, lr: float = 1e-3) -> dict:
    """Train `warmup + steps` steps; tokens/s over the timed `steps`."""
    torch.manual_seed(0)
    model = GPT(vocab, ctx, n_layer, d, h)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.99))
    rng = np.random.default_rng(0)
    losses, t0 = [], 0.0
    for it in range(warmup + steps):
        if it == warmup:
            t0 = time.perf_counter()
        ix = rng.integers(0, len(data) - ctx - 1, batch)
        xy = torch.from_numpy(np.stack([data[i:i + ctx + 1] for i in ix]).astype(np.int64))
        x, y = xy[:, :-1].contiguous(), xy[:, 1:].contiguous()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    dt = time.perf_counter() - t0
    return {"tokens_per_s": steps * batch * ctx / dt, "losses": losses,
            "params": sum(p.numel() for p in model.parameters())}
