"""The planner's activation profiles against what torch's autograd really saves for the blocks
other frameworks train, rebuilt here from their code (counted once per storage with
torch.autograd.graph.saved_tensors_hooks, weights excluded, per layer = (3 layers - 1 layer) / 2):

- an MPT block as llm-foundry builds it (the held-out llm-foundry rows, plan/heldout.py): bf16
  weights (Composer FSDP's param_dtype) under bf16 autocast, llm-foundry's low-precision LayerNorm
  (F.layer_norm run in bf16), one fused Wqkv with bias, flash attention
  (F.scaled_dot_product_attention: its output and the fp32 log-sum-exp, never the s x s scores), a
  GELU MLP of 4h, and nn.Dropout(p) on both residual branches. MPTConfig's dropout probabilities
  default to 0.0 and the benchmark's yamls set none, so the blocks that ran saved no masks.
- a torchtitan Llama block (models/llama/model.py and models/norms.py "rmsnorm", the torchtitan
  rows of plan/published.py and plan/heldout.py): bf16 weights and no autocast (FSDP2's
  MixedPrecisionPolicy casts the parameters), RMSNorm upcasting to fp32, complex rotary, repeat_kv,
  SDPA, SwiGLU.
"""

from __future__ import annotations

import weakref

import pytest

torch = pytest.importorskip("torch")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils._pytree import tree_flatten  # noqa: E402

from pretrain.plan import memory  # noqa: E402
from pretrain.plan.heldout import held_out  # noqa: E402
from pretrain.plan.search import evaluate  # noqa: E402
from pretrain.plan.shapes import ModelShape, _gpt  # noqa: E402

nn, F = torch.nn, torch.nn.functional


class _LowPrecisionLayerNorm(nn.LayerNorm):
    """llm-foundry's LPLayerNorm: input, weight and bias cast to the autocast dtype, autocast off."""

    def forward(self, x):
        dt = torch.get_autocast_dtype("cpu")
        with torch.autocast("cpu", enabled=False):
            w, b = self.weight.to(dt), self.bias.to(dt)
            return F.layer_norm(x.to(dt), self.normalized_shape, w, b, self.eps)


class _MPTBlock(nn.Module):
    def __init__(self, h: int, heads: int, p: float) -> None:
        super().__init__()
        self.heads = heads
        self.norm_1, self.norm_2 = _LowPrecisionLayerNorm(h), _LowPrecisionLayerNorm(h)
        self.wqkv, self.out_proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
        self.up, self.down = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)
        self.drop_attn, self.drop_mlp = nn.Dropout(p), nn.Dropout(p)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = (t.view(b, s, self.heads, h // self.heads).transpose(1, 2)
                   for t in self.wqkv(self.norm_1(x)).chunk(3, dim=2))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, h)
        x = x + self.drop_attn(self.out_proj(o))
        return x + self.drop_mlp(self.down(F.gelu(self.up(self.norm_2(x)))))


def _saved(layers: int, h: int, heads: int, seq: int, batch: int, p: float) -> int:
    torch.manual_seed(0)
    net = nn.Sequential(*[_MPTBlock(h, heads, p) for _ in range(layers)]).to(torch.bfloat16).train()
    weights = {w.untyped_storage().data_ptr() for w in net.parameters()}
    seen: dict[int, int] = {}

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in weights and t.dtype.is_floating_point:
            seen.setdefault(ptr, t.untyped_storage().nbytes())
        return t

    x = torch.randn(batch, seq, h, dtype=torch.bfloat16, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), \
            torch.autocast("cpu", dtype=torch.bfloat16):
        net(x)
    return sum(seen.values())


def _per_token(h: int, heads: int, seq: int, batch: int, p: float) -> float:
    args = (h, heads, seq, batch, p)
    return (_saved(3, *args) - _saved(1, *args)) / 2 / (batch * seq)


@pytest.mark.parametrize("h,heads,seq,batch", [(256, 4, 128, 2), (192, 3, 64, 3)])
def test_mpt_block_without_dropout_saves_what_the_fused_profile_counts(h, heads, seq, batch):
    shape = _gpt("mpt-like", 1, h, heads, 50_368, seq)
    model = memory.saved_bytes_per_token(shape, flash=True, profile="fused", dropout=False)
    measured = _per_token(h, heads, seq, batch, 0.0)
    # 32·h + 4·a: the LayerNorm statistics (a few bytes per token) are the only thing not counted
    assert measured == pytest.approx(model, rel=0.01), (measured, model)


def test_dropout_is_the_only_difference_and_p_zero_saves_no_mask():
    h, heads, seq, batch = 256, 4, 128, 2
    shape = _gpt("mpt-like", 1, h, heads, 50_368, seq)
    without, with_p = _per_token(h, heads, seq, batch, 0.0), _per_token(h, heads, seq, batch, 0.1)
    # p > 0 saves one mask per residual branch: on the CPU a bf16 scale tensor (2 bytes an element),
    # on CUDA native_dropout's 1-byte mask, which is what the profile (and Korthikanti's 34) counts
    assert with_p - without == pytest.approx(2 * h * 2, abs=1)
    profile_gap = (memory.saved_bytes_per_token(shape, profile="fused", dropout=True)
                   - memory.saved_bytes_per_token(shape, profile="fused", dropout=False))
    assert profile_gap == 2 * h  # two 1-byte masks


def test_llm_foundry_runs_without_checkpointing_fit_once_no_masks_are_counted():
    # the 9 llm-foundry rows that ran with large micro-batches and no checkpointing: refused as
    # "does not fit" while the profile counted dropout masks MPT never saves; all fit without them
    from dataclasses import replace

    rows = [r for r in held_out() if r.source.startswith("llm-foundry")]
    assert rows and all(not r.job.dropout for r in rows)
    refused_before = [r.source for r in rows if not evaluate(replace(r.job, dropout=True), r.layout).fits]
    assert len(refused_before) == 9, refused_before
    assert all(evaluate(r.job, r.layout).fits for r in rows)


# --- torchtitan's Llama block -------------------------------------------------------------------


class _TitanRMSNorm(nn.Module):
    """torchtitan's "rmsnorm": normalize the fp32 upcast, cast back, scale by the weight."""

    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


def _rotary(xq, xk, freqs):
    q = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    k = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    f = freqs.view(1, xq.shape[1], 1, q.shape[-1])
    return torch.view_as_real(q * f).flatten(3).type_as(xq), torch.view_as_real(k * f).flatten(3).type_as(xk)


def _repeat_kv(x, n: int):
    if n == 1:
        return x
    b, s, k, d = x.shape
    return x.unsqueeze(3).expand(b, s, k, n, d).reshape(b, s, k * n, d)


class _TitanBlock(nn.Module):
    def __init__(self, h: int, heads: int, kv_heads: int, f: int) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, h // heads
        self.attention_norm, self.ffn_norm = _TitanRMSNorm(h), _TitanRMSNorm(h)
        self.wq, self.wo = nn.Linear(h, h, bias=False), nn.Linear(h, h, bias=False)
        self.wk = nn.Linear(h, kv_heads * self.hd, bias=False)
        self.wv = nn.Linear(h, kv_heads * self.hd, bias=False)
        self.w1, self.w3 = nn.Linear(h, f, bias=False), nn.Linear(h, f, bias=False)
        self.w2 = nn.Linear(f, h, bias=False)

    def _attention(self, x, freqs):
        b, s, _ = x.shape
        q, k, v = (w(x).view(b, s, -1, self.hd) for w in (self.wq, self.wk, self.wv))
        q, k = _rotary(q, k, freqs)
        k, v = (_repeat_kv(t, self.heads // self.kv_heads) for t in (k, v))
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(o.transpose(1, 2).contiguous().view(b, s, -1))

    def forward(self, x, freqs):
        h = x + self._attention(self.attention_norm(x), freqs)
        z = self.ffn_norm(h)
        return h + self.w2(F.silu(self.w1(z)) * self.w3(z))


def _titan_saved(layers: int, shape, batch: int) -> int:
    torch.manual_seed(0)
    blocks = nn.ModuleList([_TitanBlock(shape.d_model, shape.n_heads, shape.n_kv_heads, shape.d_ff)
                            for _ in range(layers)]).to(torch.bfloat16)
    hd, s = shape.head_dim, shape.seq_len
    inv = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
    freqs = torch.polar(torch.ones(s, hd // 2), torch.outer(torch.arange(s).float(), inv))
    skip = {w.untyped_storage().data_ptr() for w in [*blocks.parameters(), freqs]}
    seen: dict[int, int] = {}

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in skip and (t.dtype.is_floating_point or t.dtype.is_complex):
            seen.setdefault(ptr, t.untyped_storage().nbytes())
        return t

    x = torch.randn(batch, s, shape.d_model, dtype=torch.bfloat16, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        for block in blocks:
            x = block(x, freqs)
    return sum(seen.values())


TITAN_SHAPES = [ModelShape("mha", 1, 256, 4, 4, 688, 512, 128),
                ModelShape("gqa", 1, 256, 8, 2, 688, 512, 128),
                ModelShape("gqa-odd", 1, 192, 6, 3, 512, 512, 96)]


@pytest.mark.parametrize("shape", TITAN_SHAPES, ids=[s.name for s in TITAN_SHAPES])
def test_torchtitan_block_saves_what_its_profile_counts(shape):
    batch = 2
    measured = (_titan_saved(3, shape, batch) - _titan_saved(1, shape, batch)) / 2 / (batch * shape.seq_len)
    assert measured == memory.saved_bytes_per_token(shape, profile="torchtitan")  # to the byte
    # and well under our trainer's profile (fp32 residual, autocast's per-linear copies)
    assert measured < 0.85 * memory.saved_bytes_per_token(shape, profile="pretrain")


def test_torchtitan_llama2_13b_without_checkpointing_is_no_longer_counted_at_94_gib():
    # the row that ran on 80 GB A100s: our trainer's profile counted 94 GiB; torchtitan's own saved
    # tensors give ~75.5 GiB, within the GPU's 80 GiB but still above the planner's 90% margin
    from dataclasses import replace

    run = next(r for r in held_out() if r.source.startswith("torchtitan Llama 2 13B, no AC"))
    assert run.job.activations == "torchtitan"
    gib = 2**30
    before = evaluate(replace(run.job, activations="pretrain"), run.layout).memory.total / gib
    after = evaluate(run.job, run.layout).memory.total / gib
    assert before > 90 and after < run.job.gpu.memory_bytes / gib, (before, after)


class _LiveBytes(TorchDispatchMode):
    """Bytes of every storage an op creates while the mode is on (backward included), freed when its
    last tensor dies: the CPU has no allocator statistics, so count live tensors by storage."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: dict[int, int] = {}
        self.sizes: dict[int, int] = {}
        self.live = self.peak = 0

    def _drop(self, ptr: int) -> None:
        self.refs[ptr] -= 1
        if not self.refs[ptr]:
            del self.refs[ptr]
            self.live -= self.sizes.pop(ptr)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                st = t.untyped_storage()
                ptr = st.data_ptr()
                if ptr not in self.refs:
                    self.refs[ptr], self.sizes[ptr] = 0, st.nbytes()
                    self.live += st.nbytes()
                    self.peak = max(self.peak, self.live)
                self.refs[ptr] += 1
                weakref.finalize(t, self._drop, ptr)
        return out


def test_torchtitan_fp32_loss_peaks_at_what_the_planner_counts():
    """torchtitan's loss (components/loss.py: F.cross_entropy(pred.flatten(0, 1).float(), labels))
    on bf16 logits from a bf16 head, with its train step's `del pred` before backward. What autograd
    saves is log_softmax's fp32 output (4 bytes per vocabulary entry, Korthikanti's count); what
    the loss holds at its peak, in backward, is three fp32 copies: 12."""
    tokens, h, vocab = 256, 64, 4096
    torch.manual_seed(0)
    head = torch.randn(vocab, h, dtype=torch.bfloat16, requires_grad=True)
    x = torch.randn(1, tokens, h, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, vocab, (1, tokens))
    saved: dict[int, int] = {}

    def pack(t):
        if t.dtype.is_floating_point and t.untyped_storage().data_ptr() != head.untyped_storage().data_ptr():
            saved.setdefault(t.untyped_storage().data_ptr(), t.untyped_storage().nbytes())
        return t

    live = _LiveBytes()
    with live, torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        pred = F.linear(x, head)
        loss = F.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))
        del pred
        loss.backward()
    entries = tokens * vocab
    assert sum(saved.values()) == pytest.approx(4 * entries + 2 * tokens * h, rel=1e-3)
    # the peak beside the head's weight-sized buffers (h·V·2 bytes here, not per token)
    assert (live.peak - 2 * h * vocab) / entries == pytest.approx(
        memory.LOSS_BYTES_PER_VOCAB["torchtitan"], rel=0.02)
    model = memory.logits_bytes(tokens, 1, h, vocab, per_vocab=memory.LOSS_BYTES_PER_VOCAB["torchtitan"])
    assert model == pytest.approx(live.peak, rel=0.05)
