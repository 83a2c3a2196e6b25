"""Incremental decoding with a key/value cache (inference only): `pretrain sample` and the eval
generators run the prompt once, then one token per step against the cached keys and values of every
earlier position, instead of re-running the whole prefix for each new token.

Same modules, same order as Transformer.forward (training's forward is untouched): rotary angles and
learned positions are read at each token's own position (the cache length for a new token), keys and
values are cached before grouped-query attention repeats them (Ainslie et al. 2023), and rows of
different lengths share a batch right-padded, with padding keys never attended.
A row longer than the model's context is the caller's business: today's generation re-runs its last
seq_len tokens at positions 0..seq_len-1, which a cache cannot reproduce (every position shifts), so
callers go back to the full forward once a row outgrows the context (Mistral's sliding window is
already its imported context: train/hf.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext

import torch
import torch.nn.functional as F


def rope_at(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """model.apply_rope with per-token angles (B, 1, T, D/2) instead of the first T rows."""
    x0, x1 = x.float()[..., 0::2], x.float()[..., 1::2]
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2).type_as(x)


class KVCache:
    """Keys and values (B, Hkv, T, D) per layer, and which of the T cached positions are real (B, T)."""

    def __init__(self, n_layers: int):
        self.k: list[torch.Tensor | None] = [None] * n_layers
        self.v: list[torch.Tensor | None] = [None] * n_layers
        self.valid: torch.Tensor | None = None

    def __len__(self) -> int:
        return 0 if self.valid is None else self.valid.shape[1]

    def extend(self, n: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append layer n's new keys/values; return all of them."""
        if self.k[n] is not None:
            k, v = torch.cat([self.k[n], k], dim=2), torch.cat([self.v[n], v], dim=2)
        self.k[n], self.v[n] = k, v
        return k, v

    def retain(self, rows: torch.Tensor) -> None:
        """Keep these batch rows only (finished rows stop costing compute)."""
        self.k = [None if t is None else t[rows] for t in self.k]
        self.v = [None if t is None else t[rows] for t in self.v]
        self.valid = None if self.valid is None else self.valid[rows]


def forward_cached(model, ids: torch.Tensor, pos: torch.Tensor, real: torch.Tensor,
                   cache: KVCache) -> torch.Tensor:
    """Hidden states (B, Tn, C) after the final norm for new tokens ids (B, Tn) at positions pos (B, Tn);
    `real` (B, Tn) marks which of them are not padding. The cache grows by Tn positions."""
    past = len(cache)
    cache.valid = real if cache.valid is None else torch.cat([cache.valid, real], dim=1)
    Tn, Tk = ids.shape[1], len(cache)
    ar = torch.arange(max(Tk, Tn), device=ids.device)
    causal = ar[None, :Tk] <= (past + ar[:Tn])[:, None]  # new token i sits at cache index past + i
    mask = (causal[None] & cache.valid[:, None, :])[:, None]  # (B, 1, Tn, Tk), True = may attend
    x = model.tok_emb(ids)
    if model.pos_emb is not None:
        x = x + model.pos_emb(pos)
    rope = None if model.pos_emb is not None else (model.rope_cos[pos][:, None], model.rope_sin[pos][:, None])
    for n, block in enumerate(model.layers.values()):
        x = _block(block, x, rope, mask, cache, n)
    return model.norm(x)


def _block(block, x: torch.Tensor, rope, mask: torch.Tensor, cache: KVCache, n: int) -> torch.Tensor:
    a = block.attn
    h = block.attn_norm(x)
    B, T, _ = h.shape
    q, k, v = a.heads(h)
    if rope is not None:
        q, k = rope_at(q, *rope), rope_at(k, *rope)
    k, v = cache.extend(n, k, v)
    if a.n_kv != a.n_heads:
        k, v = k.repeat_interleave(a.n_heads // a.n_kv, 1), v.repeat_interleave(a.n_heads // a.n_kv, 1)
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    x = x + a.wo(y.transpose(1, 2).reshape(B, T, -1))
    return x + block.mlp(block.mlp_norm(x))


def head(model, x: torch.Tensor) -> torch.Tensor:
    return F.linear(x, model.tok_emb.weight) if model.output is None else model.output(x)


class Decoder:
    """A batch of token rows being continued: `logits()` (B, V) of each row's next token, `push`
    the chosen tokens, `retain` the rows still going. Every row must fit the model's context."""

    def __init__(self, model, rows: Sequence[Sequence[int]], device: torch.device | str = "cpu",
                 amp: Callable[[], AbstractContextManager] = nullcontext):
        self.model, self.device, self.amp = model, torch.device(device), amp
        self.cache = KVCache(len(model.layers))
        lens = [len(r) for r in rows]
        if min(lens) < 1 or max(lens) > model.shape.seq_len:
            raise ValueError(f"rows of {min(lens)}..{max(lens)} tokens; need 1..{model.shape.seq_len}")
        ids = torch.zeros((len(rows), max(lens)), dtype=torch.long)
        for b, r in enumerate(rows):
            ids[b, :len(r)] = torch.as_tensor(list(r), dtype=torch.long)
        self.lens = torch.tensor(lens, device=self.device)
        self.pending: torch.Tensor | None = ids.to(self.device)

    @torch.no_grad()
    def logits(self) -> torch.Tensor:
        """Float logits (B, V) at each row's last token (runs the pushed tokens, or the prompts)."""
        ids, self.pending = self.pending, None
        B, T = ids.shape
        first = len(self.cache) == 0
        start = torch.zeros_like(self.lens) if first else self.lens
        pos = (start[:, None] + torch.arange(T, device=self.device)[None, :])
        real = torch.ones_like(ids, dtype=torch.bool)
        if first:
            real = pos < self.lens[:, None]
            pos = pos.clamp(max=self.model.shape.seq_len - 1)  # padding rows' positions: any in range
        with self.amp():
            x = forward_cached(self.model, ids, pos, real, self.cache)
            last = (self.lens - 1) if first else torch.full_like(self.lens, T - 1)
            out = head(self.model, x[torch.arange(B, device=self.device), last]).float()
        if not first:
            self.lens = self.lens + T
        return out

    def push(self, tokens: torch.Tensor | Sequence[int]) -> None:
        """The next token of every row (in the batch's current order)."""
        self.pending = torch.as_tensor(tokens, dtype=torch.long, device=self.device).reshape(-1, 1)

    def retain(self, rows: Sequence[int]) -> None:
        """Keep these rows (indices into the current batch), in this order."""
        sel = torch.as_tensor(list(rows), dtype=torch.long, device=self.device)
        self.cache.retain(sel)
        self.lens = self.lens[sel]
        if self.pending is not None:
            self.pending = self.pending[sel]
