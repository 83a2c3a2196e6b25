"""The step-time model, built from parts; every constant comes from the GPU table (plan/hardware.py)
with its source, and every part is returned so a plan can be argued with term by term.

One micro-batch on one GPU, per transformer layer (T = mbs·s/cp tokens on this rank, t = tp):
- GEMMs: each matrix multiply of the block, forward (X·W) and backward (dX = dY·Wᵀ, dW = Xᵀ·dY),
  timed as max(FLOPs / (peak · gemm_efficiency · wave), bytes / HBM). `wave` is the share of the
  last wave of 128×256 output tiles that is busy (tile and wave quantization, NVIDIA's "Matrix
  Multiplication Background" guide): a small or oddly shaped GEMM loses what its tiles leave idle,
  nothing more. There is no other small-GEMM penalty.
- attention core: a fused (flash) kernel does 4·T·s·h/t FLOPs forward, halved for causal masking,
  and 2.5× that backward (FlashAttention-2, Dao 2023, sec. 3), at attention_efficiency. Without a
  fused kernel the scores are two batched GEMMs over the full s×s (masked, not skipped) plus the
  element-wise passes over b·a·s² scores (scale-mask-softmax, dropout: 13 bytes each forward).
- element-wise: norms, residual adds, activation function, rotary embedding, dropout, as bytes
  read + written at HBM speed; replicated over TP ranks unless sequence parallel. Backward moves
  twice the forward bytes.
- recompute: full re-runs the layer's forward (GEMMs, attention, element-wise, its TP collectives)
  inside the backward; selective re-runs what the training code's policy leaves unsaved:
  "attention" (Megatron, Korthikanti 2022 sec. 5) the attention core; "op" (torchtitan's per-op
  policy, activation_checkpoint.py: save every matmul output except every second one, and the
  attention output) every second weight GEMM of the block (K, O and up projections) and every
  element-wise op, but not attention.
- tensor parallel: 2 collectives of T·h bf16 values forward and 2 backward (Megatron-LM sec. 3; as
  reduce-scatter + all-gather pairs with SP, the same time), each latency + ring bytes /
  (NVLink · nvlink_efficiency); `tp_overlap` of them hidden (0: Megatron-LM 2021/2022 run them
  on the critical path).
- context parallel: K and V all-gathered forward, their gradients reduce-scattered backward over
  the cp ranks (Llama 3 sec. 3.3.2), exposed.
- pipeline: a stage sends its T·h/t output forward and receives its gradient backward per micro-
  batch and chunk (Megatron-LM 2021 sec. 4.1's scatter/gather: each TP rank sends its slice over
  its own NIC), exposed. The step is (m + (p−1)/v) micro-batch times of the busiest stage
  (Megatron-LM 2021 sec. 2.2): the bubble is (p−1)/v of them.
- data parallel: gradients reduced hierarchically (reduce-scatter inside the node, all-reduce of
  the 1/k shard across nodes, all-gather inside), overlapped with the last micro-batch's backward
  when `dp_overlap`; ZeRO-2 reduce-scatters every micro-batch; ZeRO-3 (FSDP) also all-gathers the
  weights forward and backward every micro-batch, hidden only behind that micro-batch's compute.
- optimizer: the local state read and written once at HBM speed.
- launch overhead: the host time to issue each block's kernels (a few microseconds each), which
  only matters for small models; `pretrain plan --calibrate` fits it with the efficiencies.
Collectives across nodes add a latency per tree level (NCCL's trees, log2 of the nodes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pretrain.plan.hardware import GPU
from pretrain.plan.layout import Layout
from pretrain.plan.shapes import ModelShape

TILE_M, TILE_N = 128, 256  # the largest bf16 tensor-core tile cuBLAS/CUTLASS pick on A100/H100
KERNELS_PER_LAYER = 60  # kernels one block launches per micro-batch, forward + backward (eager)
ACT = 2  # bytes per activation value (bf16)
# Speed of a fused attention kernel relative to FlashAttention-2, whose figures the GPU table holds.
# Dao 2023 (FlashAttention-2, abstract and sec. 4.1): FlashAttention(-1) reaches 25-40% of A100
# peak, FlashAttention-2 ~2x that (50-73%); the Triton port of FlashAttention-1 is "overall slightly
# slower" forward + backward than its CUDA kernels (flash_attn_triton.py's docstring), taken as equal.
FLASH_SPEED = {"flash2": 1.0, "flash1": 0.5}


@dataclass(frozen=True)
class Software:
    """What the training code overlaps (a property of the code, not the chip)."""

    tp_overlap: float = 0.0  # share of TP collectives hidden behind GEMMs (async TP); Megatron 2021/22: 0
    dp_overlap: bool = True  # gradient reduction bucketed into the backward (PyTorch DDP/FSDP, Megatron)
    flash: bool = True  # fused attention (no s×s scores in memory)
    grad_bytes: int = 2  # bytes per gradient value communicated (4: fp32 all-reduce)
    eager: bool = False  # unfused element-wise kernels (our trainer as written), not fused ones
    selective: str = "attention"  # what recompute=selective re-runs: "attention" or "op" (torchtitan)
    attention: str = "flash2"  # fused attention kernel: flash2 (FlashAttention-2, the GPU table's) | flash1


def gemm_seconds(gpu: GPU, m: float, n: float, k: float) -> float:
    """One (m×k)·(k×n) bf16 GEMM: compute at the large-GEMM rate scaled by wave occupancy, or HBM."""
    if m <= 0 or n <= 0 or k <= 0:
        return 0.0
    tiles = math.ceil(m / TILE_M) * math.ceil(n / TILE_N)
    wave = tiles / (math.ceil(tiles / gpu.sms) * gpu.sms)
    compute = 2 * m * n * k / (gpu.peak_flops * gpu.gemm_efficiency * wave)
    memory = ACT * (m * k + k * n + m * n) / (gpu.hbm_tbps * 1e12 * gpu.hbm_efficiency)
    return max(compute, memory)


def linear_seconds(gpu: GPU, tokens: float, k: float, n: float) -> tuple[float, float]:
    """Forward and backward of a linear layer X(tokens×k)·W(k×n): Y = XW; dX = dY·Wᵀ; dW = Xᵀ·dY."""
    fwd = gemm_seconds(gpu, tokens, n, k)
    bwd = gemm_seconds(gpu, tokens, k, n) + gemm_seconds(gpu, k, n, tokens)
    return fwd, bwd


def layer_gemms(gpu: GPU, shape: ModelShape, tokens: float, t: int) -> tuple[float, float]:
    """Forward and backward seconds of one block's weight GEMMs on one TP rank."""
    h, kv, f = shape.d_model, shape.kv_dim, shape.d_ff
    inner = 2 * f if shape.mlp == "swiglu" else f
    parts = [(h, (h + 2 * kv) / t), (h / t, h), (h, inner / t), (f / t, h)]
    fwd = bwd = 0.0
    for k, n in parts:
        a, b = linear_seconds(gpu, tokens, k, n)
        fwd, bwd = fwd + a, bwd + b
    return fwd, bwd


def every_second_gemm_fwd(gpu: GPU, shape: ModelShape, tokens: float, t: int) -> float:
    """Forward seconds of the block's 2nd, 4th and 6th weight matmuls in call order (q, k, v, o,
    gate, up, down): the ones torchtitan's per-op checkpointing policy re-runs."""
    h, kv, f = shape.d_model, shape.kv_dim, shape.d_ff
    parts = [(h, kv / t), (h / t, h)] + ([(h, f / t)] if shape.mlp == "swiglu" else [])
    return sum(gemm_seconds(gpu, tokens, n, k) for k, n in parts)


def attention_seconds(gpu: GPU, shape: ModelShape, lay: Layout, sw: Software) -> tuple[float, float]:
    """Forward and backward seconds of one layer's attention core (scores and values) on one rank."""
    s, h, t = shape.seq_len, shape.d_model, lay.tp
    q_tokens = lay.mbs * s / lay.cp
    flops = 4 * q_tokens * s * h / t  # QKᵀ and AV over all keys
    if sw.flash:
        eff = gpu.attention_efficiency * FLASH_SPEED[sw.attention]
        fwd = flops / 2 / (gpu.peak_flops * eff)  # causal: masked blocks skipped
        return fwd, 2.5 * fwd
    gemm = flops / (gpu.peak_flops * gpu.gemm_efficiency)
    scores = lay.mbs * shape.n_heads / t * (s / lay.cp) * s
    elem = 13 * scores / _hbm(gpu)
    return gemm + elem, 2 * (gemm + elem)


def _hbm(gpu: GPU) -> float:
    return gpu.hbm_tbps * 1e12 * gpu.hbm_efficiency


def elementwise_bytes_per_token(shape: ModelShape, lay: Layout, flash: bool, eager: bool = False) -> float:
    """Forward bytes read + written per token by one block's element-wise kernels on one TP rank
    (bf16 values: reading and writing an h-vector moves 4h bytes).

    Fused kernels (Megatron-Core / TE, or torch.compile) read and write each tensor once. Eager
    PyTorch as our trainer writes it (train/model.py) runs each op as its own kernel, in fp32 where
    the code upcasts: an RMSNorm is pow, mean, multiply, multiply over fp32 (24h per norm); autocast
    casts the normalized input once per Linear (6h each); rotary upcasts q and k and runs six
    strided products and a stack (56 bytes per value); GQA repeats K and V; the attention output is
    transposed (4h); the fp32 residual adds read 6h and write 4h; SwiGLU is silu then a multiply
    (10f)."""
    h, kv, f, t = shape.d_model, shape.kv_dim, shape.d_ff, lay.tp
    rep = t if lay.sp else 1  # without SP the norms and residuals run on every TP rank in full
    gated = shape.mlp == "swiglu"
    if eager:
        linears = 3 + (2 if gated else 1)
        per = (2 * 24 * h + 2 * 10 * h) / rep + linears * 6 * h
        per += (56 * (h + kv) + 4 * (kv + h) + 4 * h) / t
        return per + (10 if gated else 8) * f / t
    if shape.norm == "rmsnorm" and not shape.bias:
        # 2 norms (read 2h, write 2h) + 2 residual adds (read 4h, write 2h); rotary on q and k
        per = 20 * h / rep + 4 * (h + kv) / t
    else:
        # 2 layernorms + 2 fused bias-dropout-add (read 4h, write 2h, 1-byte mask h)
        per = 22 * h / rep
    per += (6 if gated else 4) * f / t  # SiLU(gate)·up reads 2f writes f; bias-GELU
    return per


def collective_seconds(gpu: GPU, nbytes: float, g: int, span: int, kind: str = "allreduce") -> float:
    """One collective of an `nbytes` buffer over `g` ranks whose ranks lie `span` apart at most:
    latency + bytes each rank sends / (link · efficiency). Inside a node over NVLink; across nodes
    over the NIC, where an all-reduce runs as NCCL's tree (one latency per level, log2 g) but an
    all-gather or reduce-scatter only as a ring: g − 1 steps, each paying the latency."""
    if g <= 1 or nbytes <= 0:
        return 0.0
    share = (2 if kind == "allreduce" else 1) * (g - 1) / g * nbytes
    if span <= gpu.gpus_per_node:
        return gpu.intra_latency_us * 1e-6 + share / (gpu.intra_node_bw * gpu.nvlink_efficiency)
    steps = 2 * math.ceil(math.log2(g)) if kind == "allreduce" else g - 1
    return steps * gpu.inter_latency_us * 1e-6 + share / (gpu.inter_node_bw * gpu.nic_efficiency)


def overlapped(gpu: GPU, comm: float, window: float) -> float:
    """Seconds a collective of `comm` seconds adds when launched beside `window` seconds of compute:
    what sticks out, plus the compute slowed while they share the GPU (a collective's kernels hold
    `overlap_sm_share` of the SMs and HBM bandwidth)."""
    return max(0.0, comm - window) + gpu.overlap_sm_share * min(comm, window)


def hierarchical_seconds(gpu: GPU, nbytes: float, g: int, local: int, kind: str = "allreduce") -> float:
    """A collective over `g` ranks, `local` of them in each node: inside the node first (NVLink), then
    the 1/local shard across nodes, each GPU over its own NIC (rail-optimized clusters)."""
    if g <= 1:
        return 0.0
    local = max(1, min(local, g))
    intra = collective_seconds(gpu, nbytes, local, 1, kind)
    return intra + collective_seconds(gpu, nbytes / local, g // local, gpu.gpus_per_node + 1, kind)


@dataclass
class LayerTimes:
    """Seconds of one layer, one micro-batch, one GPU."""

    gemm_fwd: float
    gemm_bwd: float
    attn_fwd: float
    attn_bwd: float
    elem_fwd: float
    tp_fwd: float  # exposed TP collective time, forward (backward has as many)
    cp_fwd: float  # context-parallel all-gather, forward (backward reduce-scatters as much)
    launch: float = 0.0  # host overhead of launching the block's kernels, forward + backward
    gemm_fwd_op: float = 0.0  # forward of the GEMMs a per-op policy re-runs (every_second_gemm_fwd)
    selective: str = "attention"  # what selective recompute re-runs (Software.selective)

    def fwd(self) -> float:
        return self.gemm_fwd + self.attn_fwd + self.elem_fwd + self.tp_fwd + self.cp_fwd

    def recompute(self, kind: str) -> float:
        if kind == "full":
            return self.fwd()
        if kind == "selective":
            return self.gemm_fwd_op + self.elem_fwd if self.selective == "op" else self.attn_fwd
        return 0.0

    def total(self, recompute: str) -> float:
        bwd = self.gemm_bwd + self.attn_bwd + 2 * self.elem_fwd + self.tp_fwd + self.cp_fwd
        return self.fwd() + bwd + self.recompute(recompute) + self.launch


def layer_times(gpu: GPU, shape: ModelShape, lay: Layout, sw: Software) -> LayerTimes:
    tokens = lay.mbs * shape.seq_len / lay.cp
    gf, gb = layer_gemms(gpu, shape, tokens, lay.tp)
    af, ab = attention_seconds(gpu, shape, lay, sw)
    elem = tokens * elementwise_bytes_per_token(shape, lay, sw.flash, sw.eager) / _hbm(gpu)
    msg = tokens * shape.d_model * ACT
    tp = 2 * collective_seconds(gpu, msg, lay.tp, lay.tp) * (1 - sw.tp_overlap)
    kv = lay.mbs * shape.seq_len * 2 * shape.kv_dim / lay.tp * ACT  # whole K and V, this rank's heads
    cp = collective_seconds(gpu, kv, lay.cp, lay.tp * lay.cp, "allgather")
    launch = KERNELS_PER_LAYER * gpu.launch_us * 1e-6
    op = every_second_gemm_fwd(gpu, shape, tokens, lay.tp) if sw.selective == "op" else 0.0
    return LayerTimes(gf, gb, af, ab, elem, tp, cp, launch, op, sw.selective)


def head_seconds(gpu: GPU, shape: ModelShape, lay: Layout) -> float:
    """Output projection (vocabulary split over TP) forward + backward, and the fp32 loss pass."""
    tokens = lay.mbs * shape.seq_len / lay.cp
    fwd, bwd = linear_seconds(gpu, tokens, shape.d_model, shape.vocab_size / lay.tp)
    loss = tokens * shape.vocab_size / lay.tp * 4 * 3 / _hbm(gpu)  # fp32 logits: write, read, grad
    return fwd + bwd + loss


def p2p_seconds(gpu: GPU, shape: ModelShape, lay: Layout) -> float:
    """A stage boundary per micro-batch and chunk: activations forward, gradients backward."""
    if lay.pp == 1:
        return 0.0
    nbytes = lay.mbs * shape.seq_len / lay.cp * shape.d_model * ACT / lay.tp
    one = gpu.inter_latency_us * 1e-6 + nbytes / (gpu.inter_node_bw * gpu.nic_efficiency)
    return 2 * one


def stage_layers(n_layers: int, pp: int, v: int) -> tuple[int, int]:
    """Layers on the busiest GPU, and on the last GPU (which also runs the head): an even split of
    n_layers over pp·v chunks, the extra layers on the earlier chunks."""
    chunks = pp * v
    base, extra = divmod(n_layers, chunks)
    busiest = sum(base + (c < extra) for c in range(0, chunks, pp))
    last = sum(base + (c < extra) for c in range(pp - 1, chunks, pp))
    return busiest, last
