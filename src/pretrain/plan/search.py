"""Layout search: every TP × PP × DP × ZeRO stage × micro-batch × recompute × sequence-parallel (× pipeline
interleaving) combination for a model on a cluster; drop what is invalid or does not fit; predict a step
time for the rest; rank by tokens/s; explain the winner against its neighbours.

The time model is plan/timing.py's, from parts: GEMMs by shape, fused attention, element-wise
traffic, recomputation, TP / CP / pipeline / data-parallel collectives (latency + bytes / (link ·
efficiency), ring or tree, inside or across nodes), what overlaps with what, the bubble and the
optimizer step. Every part is kept in `Estimate.times` (seconds per step) so it can be argued with.
Ranks are ordered TP innermost, then CP, then DP, then PP (torchtitan, Megatron): a group that
crosses nodes runs at the NIC's bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from pretrain.errors import UserError
from pretrain.plan import compute, memory, timing
from pretrain.plan.hardware import GPU
from pretrain.plan.layout import Layout, data_parallel, problems
from pretrain.plan.layout import micro_batches as n_micro
from pretrain.plan.shapes import ModelShape

# Share of each GPU's HBM a plan leaves to what the memory model does not count (`--headroom`):
# - the CUDA context and loaded kernels: 781 MB in nvidia-smi before any tensor (pytorch/pytorch
#   issue 34323);
# - NCCL's buffers, per communicator: 544 MB for a 2-GPU group, 688 MB for a larger one on A100s
#   with NVLink (NVIDIA/nccl issue 964), 1.6 GB for one communicator with all-reduce, ~6 GB with
#   three (issue 864); linear in channels, more for more communicators (the maintainer, issue 986).
#   A TP x DP x PP layout keeps three or more;
# - the caching allocator's fragmentation: free blocks split across segments it cannot merge
#   (PyTorch devlog "When does fragmentation occur in the CUDA caching allocator?", 2026-06).
# About 2-4 GB of an 80 GiB GPU are fixed costs before any fragmentation: 10% (8 GiB) is their
# sum with room for the cache. An upper bound from runs that ran: torchtitan's printed per-GPU
# peaks (reserved memory, its elastic-scaling tables) reach 84.5 of 96 GiB (88%): 10% refuses none.
HEADROOM = 0.10


@dataclass(frozen=True)
class Job:
    """What is being planned: a model on n GPUs with a global batch of `batch_tokens`."""

    shape: ModelShape
    gpu: GPU
    n_gpus: int
    batch_tokens: int = 2**22
    accounting: str = "16B"
    flash: bool = True
    efficiency: float | None = None  # overrides the GPU's gemm_efficiency (share of dense peak)
    activations: str = "fused"  # saved tensors (memory.saved_bytes_per_token): fused | pretrain | torchtitan
    tp_overlap: float = 0.0  # share of TP collectives hidden behind compute (timing.Software)
    dp_overlap: bool = True
    kernels: str = ""  # element-wise kernels: fused | eager ("": eager with the pretrain/torchtitan profiles)
    selective: str = "attention"  # what recompute=selective re-runs: attention (Megatron) | op (torchtitan)
    reduce_dtype: str = ""  # gradient reduction: bf16 | fp32 ("": fp32 iff the accounting keeps fp32 grads)
    attention: str = "flash2"  # fused attention kernel (timing.FLASH_SPEED): flash2 | flash1
    dropout: bool = True  # GPT blocks save dropout masks; False when trained with p = 0 (MPT)
    trainer: bool = False  # only layouts our trainer runs (layout.py trainer rules): --emit-recipe
    headroom: float = HEADROOM  # share of HBM kept free (CUDA context, NCCL buffers, fragmentation)
    loss_chunks: int = 1  # our trainer's train.loss_chunks: its loss's vocabulary term per slice


    def __post_init__(self) -> None:
        if not 0 <= self.headroom < 1:  # also refuses NaN
            raise UserError(f"--headroom is the share of GPU memory kept free, in [0, 1); "
                            f"got {self.headroom}")
        if self.attention not in timing.FLASH_SPEED:
            raise UserError(f"attention kernel must be one of {', '.join(timing.FLASH_SPEED)}, "
                            f"got {self.attention!r}")
        if self.loss_chunks > 1 and self.activations != "pretrain":
            raise UserError(f"--loss-chunks {self.loss_chunks} counts this trainer's chunked loss "
                            "(train.loss_chunks): plan it with --activations pretrain")
        if self.efficiency is not None:
            object.__setattr__(self, "gpu", replace(self.gpu, gemm_efficiency=self.efficiency))

    @property
    def software(self) -> timing.Software:
        fp32 = self.reduce_dtype == "fp32" or (
            not self.reduce_dtype and self.accounting in ("18B", "megatron-distopt"))
        unfused = self.activations in ("pretrain", "torchtitan")
        eager = self.kernels == "eager" or (not self.kernels and unfused)
        return timing.Software(self.tp_overlap, self.dp_overlap, self.flash, 4 if fp32 else 2,
                               eager=eager, selective=self.selective, attention=self.attention)

    def as_trained(self, trainer: bool = True) -> Job:
        """This job as `pretrain train` runs it: its saved tensors (activations "pretrain"), and
        with `trainer` only the layouts it implements. The trainer has no Megatron distributed
        optimizer: its FSDP2 keeps 16 bytes a parameter (fp32 weights 4, fp32 grads 4, Adam 8),
        sharded as ZeRO-2/3, reducing in fp32; megatron-distopt's 6 + 12/DP (gradients whole, only
        the optimizer sharded) would size a replicated layout for this trainer 2.7x too small."""
        job = replace(self, activations="pretrain", trainer=trainer)
        if self.accounting == "megatron-distopt":
            job = replace(job, accounting="16B", reduce_dtype=self.reduce_dtype or "fp32")
        return job

    @property
    def batch_seqs(self) -> int:
        return self.batch_tokens // self.shape.seq_len

    @property
    def usable_bytes(self) -> float:
        return self.gpu.memory_bytes * (1 - self.headroom)

    def refused_by_headroom(self, mem: memory.MemoryBreakdown | None) -> bool:
        """True when `mem` exceeds the usable share but would fit the whole HBM."""
        return mem is not None and self.usable_bytes < mem.total <= self.gpu.memory_bytes


@dataclass
class Estimate:
    layout: Layout
    reason: str | None = None  # why it is dropped; None when it fits
    m: int = 0  # micro-batches per step per pipeline
    memory: memory.MemoryBreakdown | None = None
    times: dict[str, float] = field(default_factory=dict)
    step_s: float = 0.0
    tokens_per_s: float = 0.0
    mfu: float = 0.0
    hfu: float = 0.0
    hfu_causal: float = 0.0  # executed FLOPs (causal attention halved) over peak: at most 1

    @property
    def fits(self) -> bool:
        return self.reason is None

    def as_dict(self) -> dict:
        d = {"layout": self.layout.as_dict(), "label": self.layout.label(), "fits": self.fits,
             "reason": self.reason, "micro_batches": self.m}
        if self.memory:
            d["memory_gb"] = {k: v / 1e9 for k, v in self.memory.as_dict().items()}
        if self.times:
            d.update(times_s=self.times, step_s=self.step_s, tokens_per_s=self.tokens_per_s, mfu=self.mfu,
                     hfu=self.hfu, hfu_causal=self.hfu_causal)
        return d


def structural_reason(job: Job, lay: Layout) -> str | None:
    """Why a layout cannot run at all (before memory), or None: the shared validity rules
    (plan/layout.py), then what the planner will not consider."""
    shape = job.shape
    if job.batch_seqs % (lay.dp * lay.mbs):  # the commonest reason, checked first (search speed)
        return f"a batch of {job.batch_seqs} sequences does not divide into dp x mbs = {lay.dp * lay.mbs}"
    broken = problems(lay, world_size=job.n_gpus, n_layers=shape.n_layers, n_heads=shape.n_heads,
                      n_kv_heads=shape.n_kv_heads, seq_len=shape.seq_len, batch_seqs=job.batch_seqs,
                      **(_trainer_kwargs(shape) if job.trainer else {}))
    if broken:
        return broken[0]
    if lay.tp > job.gpu.gpus_per_node:
        return "tp spans nodes"
    if job.loss_chunks > 1 and (lay.tp > 1 or lay.pp > 1):  # train/loss.py check_layout
        return "the trainer's chunked loss (--loss-chunks) needs tp=1 and pp=1"
    return None


def _trainer_kwargs(shape) -> dict:
    return {"trainer": True, "d_ff": shape.d_ff, "tied_embeddings": shape.tied_embeddings,
            "learned_pos": shape.learned_pos}


def shard_group(lay: Layout) -> int:
    """Ranks the ZeRO-sharded (or distributed-optimizer) state is split over."""
    return lay.shard_group if lay.dp_shard > 1 else lay.dp * lay.cp


def evaluate(job: Job, lay: Layout) -> Estimate:
    """Memory, feasibility and predicted step time of one layout."""
    reason = structural_reason(job, lay)
    if reason:
        return Estimate(lay, reason)
    m = n_micro(lay, job.batch_seqs)
    mem = memory.memory_per_gpu(job.shape, lay.tp, lay.pp, shard_group(lay), lay.zero, lay.mbs, lay.recompute,
                                lay.sp, job.flash, lay.v, m, job.accounting, lay.cp, job.activations,
                                job.selective, job.dropout, loss_chunks=job.loss_chunks)
    if mem.total > job.usable_bytes:
        return Estimate(lay, "does not fit in memory", m, mem)
    est = Estimate(lay, None, m, mem)
    time_layout(job, lay, est)
    return est


def time_layout(job: Job, lay: Layout, est: Estimate) -> None:
    """Step time from parts (plan/timing.py): the busiest stage's micro-batch time × (m + (p−1)/v),
    plus what data parallelism and the optimizer leave exposed."""
    shape, gpu, sw, m = job.shape, job.gpu, job.software, est.m
    lt = timing.layer_times(gpu, shape, lay, sw)
    per_layer = lt.total(lay.recompute)
    busiest, last = timing.stage_layers(shape.n_layers, lay.pp, lay.v)
    head = timing.head_seconds(gpu, shape, lay)
    stage = max(busiest * per_layer, last * per_layer + head) if lay.pp > 1 else busiest * per_layer + head
    p2p = timing.p2p_seconds(gpu, shape, lay) * lay.v
    micro = stage + p2p
    zero3 = _zero3_exposed(job, lay, lt, busiest, micro)
    dp = _dp_exposed(job, lay, lt, busiest, m)
    state = est.memory.state if est.memory else 0.0
    scale = busiest  # the parts below, summed over the busiest stage's layers and the whole step
    steps = m + (lay.pp - 1) / lay.v
    parts = {
        "gemm": (lt.gemm_fwd + lt.gemm_bwd) * scale * m,
        "attention": (lt.attn_fwd + lt.attn_bwd) * scale * m,
        "elementwise": 3 * lt.elem_fwd * scale * m,
        "recompute": lt.recompute(lay.recompute) * scale * m,
        "tp_comm": 2 * lt.tp_fwd * scale * m,
        "cp_comm": 2 * lt.cp_fwd * scale * m,
        "launch": lt.launch * scale * m,
        "head": (stage - busiest * per_layer) * m if lay.pp > 1 else head * m,
        "pp_comm": p2p * m,
        "bubble": micro * (lay.pp - 1) / lay.v,
        "zero3_exposed": zero3 * m,
        "dp_comm_exposed": dp,
        "optimizer": 2 * state / (gpu.hbm_tbps * 1e12 * gpu.hbm_efficiency),
    }
    est.times = parts
    est.step_s = micro * steps + zero3 * m + dp + parts["optimizer"]
    tokens = job.batch_seqs * shape.seq_len
    est.tokens_per_s = tokens / est.step_s
    model_fpt = compute.flops_per_token(shape)
    hw_fpt = model_fpt + compute.recompute_flops_per_token(shape, lay.recompute, selective=job.selective)
    peak = job.n_gpus * gpu.peak_flops
    est.mfu = compute.mfu(est.tokens_per_s, model_fpt, peak)
    est.hfu = compute.mfu(est.tokens_per_s, hw_fpt, peak)
    run_fpt = compute.executed_flops_per_token(shape, lay.recompute, selective=job.selective,
                                               causal_kernel=job.flash)
    est.hfu_causal = compute.mfu(est.tokens_per_s, run_fpt, peak)


def _dp_local(job: Job, lay: Layout) -> int:
    """Data-parallel ranks sharing a node (TP and CP ranks fill it first)."""
    return max(1, job.gpu.gpus_per_node // (lay.tp * lay.cp))


def _dp_exposed(job: Job, lay: Layout, lt: timing.LayerTimes, layers: int, m: int) -> float:
    """Gradient reduction (and ZeRO-1/2's weight all-gather) left after the backward that hides it."""
    g = lay.dp * lay.cp  # gradients are averaged over data and context ranks
    if g == 1 or lay.zero == 3:
        return 0.0
    grads = memory.stage_params(job.shape, lay.tp, lay.pp, lay.v) * job.software.grad_bytes
    local = _dp_local(job, lay)
    if lay.zero == 2:  # reduce-scattered inside every micro-batch's backward; weights gathered once
        rs = timing.hierarchical_seconds(job.gpu, grads, g, local, "allgather")
        bwd = (lt.gemm_bwd + lt.attn_bwd) * layers
        return timing.overlapped(job.gpu, rs, bwd) * m + rs
    comm = timing.hierarchical_seconds(job.gpu, grads, g, local)
    if lay.zero == 1:  # reduce-scatter the gradients, all-gather the updated weights: same volume
        comm = 2 * timing.hierarchical_seconds(job.gpu, grads, g, local, "allgather")
    window = (lt.gemm_bwd + lt.attn_bwd) * layers if job.software.dp_overlap else 0.0
    return timing.overlapped(job.gpu, comm, window)


def _zero3_exposed(job: Job, lay: Layout, lt: timing.LayerTimes, layers: int, micro: float) -> float:
    """FSDP per micro-batch: weights all-gathered forward and again backward, gradients reduce-
    scattered (at the reduction dtype: torchtitan reduces in fp32); one collective per layer each.
    FSDP prefetches one layer ahead, so the first all-gather has no compute to hide behind and the
    last reduce-scatter runs after the last backward kernel (PyTorch FSDP paper, Zhao et al. 2023,
    sec. 3.3): both exposed; the rest hidden behind that micro-batch's compute, slowing it."""
    g = lay.dp * lay.cp
    if lay.zero != 3 or g == 1:
        return 0.0
    params = memory.stage_params(job.shape, lay.tp, lay.pp, lay.v) / max(layers, 1)
    local = _dp_local(job, lay)
    gather = timing.hierarchical_seconds(job.gpu, params * 2.0, g, local, "allgather")
    scatter = timing.hierarchical_seconds(job.gpu, params * job.software.grad_bytes, g, local, "allgather")
    fwd = lt.fwd() * layers
    rest = (layers - 1) * gather
    return (gather + timing.overlapped(job.gpu, rest, fwd) + scatter
            + timing.overlapped(job.gpu, rest + gather + (layers - 1) * scatter, micro - fwd))


LONG_SEQUENCE = 16_384  # context parallelism is searched from here on (Llama 3 used it at 128k only)


def context_degrees(seq_len: int) -> list[int]:
    """CP degrees worth trying: none below LONG_SEQUENCE (it only adds traffic), else powers of two
    that leave each rank at least 4,096 tokens and split the sequence into 2·cp equal chunks."""
    if seq_len < LONG_SEQUENCE:
        return [1]
    return [c for c in (1, 2, 4, 8, 16, 32) if seq_len % (2 * c) == 0 and seq_len // c >= 4096]


def candidate_layouts(job: Job, micro_batches: tuple[int, ...] = (1, 2, 4, 8),
                      interleave: tuple[int, ...] = (1, 2, 4),
                      zeros: tuple[int, ...] = (0, 1, 2, 3)) -> list[Layout]:
    """All layouts worth evaluating: tp a power of two within a node, cp for long sequences, pp any
    divisor of the rest, the rest data parallel."""
    out: list[Layout] = []
    n, shape = job.n_gpus, job.shape
    gpn = job.gpu.gpus_per_node
    tps = [t for t in (1, 2, 4, 8, 16) if n % t == 0 and t <= gpn and shape.n_heads % t == 0]
    for tp, cp in ((t, c) for t in tps for c in context_degrees(shape.seq_len) if n % (t * c) == 0):
        rest = n // (tp * cp)
        for pp in (d for d in range(1, min(rest, shape.n_layers) + 1) if rest % d == 0):
            dp = rest // pp
            for v, zero, mbs, rc in ((v, z, b, r) for v in (interleave if pp > 1 else (1,)) for z in zeros
                                     for b in micro_batches for r in memory.RECOMPUTE):
                for sp in (False, True) if tp > 1 else (False,):
                    out.append(data_parallel(dp, zero, tp=tp, pp=pp, cp=cp, mbs=mbs, recompute=rc, sp=sp,
                                             v=v))
    return out


@dataclass
class SearchResult:
    job: Job
    ranked: list[Estimate]  # feasible, best first
    rejected: dict[str, int]  # reason -> count
    evaluated: int
    all: dict[Layout, Estimate]

    @property
    def best(self) -> Estimate | None:
        return self.ranked[0] if self.ranked else None


def search(job: Job, **kwargs) -> SearchResult:
    """Evaluate every candidate layout; rank the feasible ones by predicted tokens/s."""
    if job.n_gpus < 1:
        raise UserError(f"--gpus must be >= 1, got {job.n_gpus}")
    if job.batch_seqs < 1:
        raise UserError(f"batch of {job.batch_tokens} tokens holds no sequence of {job.shape.seq_len}")
    results = {lay: evaluate(job, lay) for lay in candidate_layouts(job, **kwargs)}
    rejected: dict[str, int] = {}
    for est in results.values():
        if est.reason:
            key = reason_category(est.reason)
            rejected[key] = rejected.get(key, 0) + 1
    ranked = sorted((e for e in results.values() if e.fits),
                    key=lambda e: (-e.tokens_per_s, e.memory.total if e.memory else 0.0))
    return SearchResult(job, ranked, rejected, len(results), results)


CATEGORIES = (("does not divide into dp x mbs", "batch does not divide into dp*mbs"),
              ("GPUs", "degrees do not multiply to the GPUs"),
              ("divisible by tp", "heads not divisible by tp"),
              ("pipeline stages", "fewer layers than pp*v stages"),
              ("seq_len", "sequence does not split into the cp chunks"),
              ("interleaving", "interleaving needs micro-batches divisible by pp"))


def reason_category(reason: str) -> str:
    """A rejection reason without its numbers, to count rejections by rule."""
    return next((name for needle, name in CATEGORIES if needle in reason), reason)


def variant(lay: Layout, dp: int | None = None, **changes) -> Layout:
    """`lay` with some knobs changed, its data-parallel ranks placed as the search places them."""
    fields = {k: getattr(lay, k) for k in lay.__dataclass_fields__ if k not in ("dp_shard", "dp_replicate")}
    fields.update(changes)
    return data_parallel(lay.dp if dp is None else dp, **fields)


def headroom_note(job: Job) -> str:
    """One line for a layout the headroom alone refuses."""
    return (f"it fits the whole {memory.size_text(job.gpu.memory_bytes / 1e9)} of HBM: only the "
            f"{job.headroom:.0%} "
            "headroom refuses it (--headroom; kept for the CUDA context, NCCL buffers and the allocator's "
            "fragmentation)")


def explain(result: SearchResult, est: Estimate | None = None) -> list[str]:
    """Why `est` (the winner by default) beats its neighbours: change one knob, say what happens."""
    est = est or result.best
    if est is None:
        lines = ["no layout fits: " + ", ".join(f"{k} ({v})" for k, v in result.rejected.items())]
        if "batch does not divide into dp*mbs" in result.rejected:
            lines.append(f"the batch holds {result.job.batch_seqs} sequences: a batch divisible by more "
                         "GPU counts (--batch-tokens) or another --gpus opens more layouts")
        sized = [e for e in result.all.values() if e.memory is not None]
        if sized:  # by how much: the layout that needs the least memory per GPU
            lean = min(sized, key=lambda e: e.memory.total)
            mem, usable, gb = lean.memory, result.job.usable_bytes / 1e9, memory.size_text
            lines.append(f"the leanest layout, {lean.layout.label()}, needs {gb(mem.total / 1e9)} "
                         f"per GPU of {gb(usable)} usable (training state {gb(mem.state / 1e9)})")
            if result.job.refused_by_headroom(mem):
                lines.append(headroom_note(result.job))
        if "does not fit in memory" in result.rejected:
            lines.append("more GPUs, a GPU with more memory, or a shorter --seq-len reduce memory per GPU")
        return lines
    job, lay = result.job, est.layout
    mem = est.memory
    lines = [f"{lay.label()}: {est.tokens_per_s:,.0f} tokens/s, MFU {est.mfu:.1%}; uses "
             f"{memory.size_text(mem.total / 1e9)} of {memory.size_text(job.usable_bytes / 1e9)} usable"
             if mem else lay.label()]
    for knob, values in (("tp", (1, 2, 4, 8)), ("cp", (1, 2, 4, 8, 16, 32)), ("zero", (0, 1, 2, 3)),
                         ("mbs", (1, 2, 4, 8)), ("recompute", memory.RECOMPUTE), ("sp", (False, True)),
                         ("v", (1, 2, 4))):
        for value in values:
            if getattr(lay, knob) == value:
                continue
            changes = {knob: value}
            if knob in ("tp", "cp"):  # the data-parallel degree takes up the difference
                model = lay.tp * lay.pp * lay.cp // getattr(lay, knob) * value
                changes["dp"] = job.n_gpus // model if job.n_gpus % model == 0 else 0
            other = result.all.get(variant(lay, **changes))
            if other is None:
                continue
            if other.fits:
                lines.append(f"{knob}={value}: {other.tokens_per_s / est.tokens_per_s:.2f}x the tokens/s")
            elif other.memory is not None:
                only = ", only by the --headroom" if job.refused_by_headroom(other.memory) else ""
                need = memory.size_text(other.memory.total / 1e9)
                lines.append(f"{knob}={value}: does not fit ({need}{only})")
    for pp in sorted({e.layout.pp for e in result.ranked} - {lay.pp})[:4]:
        alt = next(e for e in result.ranked if e.layout.pp == pp)
        lines.append(f"best with pp={pp}: {alt.layout.label()} at {alt.tokens_per_s / est.tokens_per_s:.2f}x")
    return lines
