"""Layout search: every TP × PP × DP × ZeRO stage × micro-batch × recompute × sequence-parallel (× pipeline
interleaving) combination for a model on a cluster; drop what is invalid or does not fit; predict a step
time for the rest; rank by tokens/s; explain the winner against its neighbours.

The time model (a model, not a measurement; every term is printed so it can be argued with):
- compute: hardware FLOPs per GPU (model FLOPs + recomputation) / (peak × efficiency × g), where g =
  x/(x + 2²²) with x = mbs·s·h/tp is a heuristic for small GEMMs running below the large-GEMM rate;
  an uneven layer split scales it by the busiest GPU's layers over L/p;
- bubble: compute × (p−1)/(v·m) (Megatron-LM 2021 sec. 2.2);
- tensor parallel: 4 all-reduces of s·b·h per layer per micro-batch (6 with full recompute), exposed;
- pipeline: activations and their gradients at each boundary per micro-batch, exposed;
- data parallel: ZeRO 0/1 all-reduce once per step, overlapped with the last micro-batch's backward;
  ZeRO-2 reduce-scatters every micro-batch, overlapped with all backwards; ZeRO-3 gathers weights
  forward and backward and reduce-scatters every micro-batch, overlapped with all compute;
- optimizer step: reading and writing the local state once at HBM speed.
Ranks are ordered TP innermost, then DP, then PP (torchtitan, Megatron): TP stays in a node, a group
crossing nodes runs at the NIC's bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pretrain.errors import UserError
from pretrain.plan import compute, memory, parallel
from pretrain.plan.hardware import GPU
from pretrain.plan.layout import Layout, data_parallel, problems
from pretrain.plan.layout import micro_batches as n_micro
from pretrain.plan.shapes import ModelShape

USABLE_FRACTION = 0.9  # of HBM: CUDA context, NCCL buffers and allocator fragmentation take the rest
GEMM_HALF_SIZE = 2**22  # mbs·s·h/tp at which the small-GEMM factor is 1/2 (heuristic)


@dataclass(frozen=True)
class Job:
    """What is being planned: a model on n GPUs with a global batch of `batch_tokens`."""

    shape: ModelShape
    gpu: GPU
    n_gpus: int
    batch_tokens: int = 2**22
    accounting: str = "16B"
    flash: bool = True
    efficiency: float = 0.6  # fraction of dense peak the large GEMMs sustain

    @property
    def batch_seqs(self) -> int:
        return self.batch_tokens // self.shape.seq_len

    @property
    def usable_bytes(self) -> float:
        return self.gpu.memory_bytes * USABLE_FRACTION


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
                     hfu=self.hfu)
        return d


def structural_reason(job: Job, lay: Layout) -> str | None:
    """Why a layout cannot run at all (before memory), or None: the shared validity rules
    (plan/layout.py), then what the planner will not consider."""
    shape = job.shape
    broken = problems(lay, world_size=job.n_gpus, n_layers=shape.n_layers, n_heads=shape.n_heads,
                      n_kv_heads=shape.n_kv_heads, seq_len=shape.seq_len, batch_seqs=job.batch_seqs)
    if broken:
        return broken[0]
    if lay.tp > job.gpu.gpus_per_node:
        return "tp spans nodes"
    if lay.zero >= 2 and lay.pp > 1:
        return "zero 2/3 with pipeline re-sends gradients every micro-batch"
    return None


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
                                lay.sp, job.flash, lay.v, m, job.accounting)
    if mem.total > job.usable_bytes:
        return Estimate(lay, "does not fit in memory", m, mem)
    est = Estimate(lay, None, m, mem)
    _time(job, lay, est)
    return est


def _bandwidth(job: Job, span: int) -> float:
    """Per-GPU bandwidth of a group whose members sit `span` ranks apart at most."""
    return job.gpu.intra_node_bw if span <= job.gpu.gpus_per_node else job.gpu.inter_node_bw


def _time(job: Job, lay: Layout, est: Estimate) -> None:
    shape, s, m = job.shape, job.shape.seq_len, est.m
    tokens = job.batch_seqs * s
    model_fpt = compute.flops_per_token(shape)
    hw_fpt = model_fpt + compute.recompute_flops_per_token(shape, lay.recompute)
    x = lay.mbs * s * shape.d_model / lay.tp
    rate = job.gpu.peak_flops * job.efficiency * x / (x + GEMM_HALF_SIZE)
    layers = memory.layers_per_gpu(shape.n_layers, lay.pp, lay.v)
    # the stage with the most layers sets the pace of an uneven split
    compute_s = hw_fpt * tokens / job.n_gpus / rate * layers * lay.pp / shape.n_layers
    bubble_s = compute_s * (lay.pp - 1) / (lay.v * m)
    tp_bytes = parallel.tp_bytes_per_layer(s, lay.mbs, shape.d_model, lay.tp) * layers * m
    tp_bytes *= 1.5 if lay.recompute == "full" else 1.0  # the recomputed forward repeats its 2 all-reduces
    tp_s = tp_bytes / _bandwidth(job, lay.tp)
    pp_bytes = parallel.pp_bytes_per_microbatch(s, lay.mbs, shape.d_model, lay.tp, lay.sp) * m * lay.v
    pp_s = 0.0 if lay.pp == 1 else pp_bytes / _bandwidth(job, lay.tp * lay.dp * lay.pp)
    dp_s = _dp_exposed(job, lay, compute_s, m)
    state = est.memory.state if est.memory else 0.0
    opt_s = 2 * state / (job.gpu.hbm_tbps * 1e12)
    est.times = {"compute": compute_s, "bubble": bubble_s, "tp_comm": tp_s, "pp_comm": pp_s,
                 "dp_comm_exposed": dp_s, "optimizer": opt_s}
    est.step_s = sum(est.times.values())
    est.tokens_per_s = tokens / est.step_s
    peak = job.n_gpus * job.gpu.peak_flops
    est.mfu = compute.mfu(est.tokens_per_s, model_fpt, peak)
    est.hfu = compute.mfu(est.tokens_per_s, hw_fpt, peak)


def _dp_exposed(job: Job, lay: Layout, compute_s: float, m: int) -> float:
    if lay.dp == 1:
        return 0.0
    msg = memory.stage_params(job.shape, lay.tp, lay.pp, lay.v) * 2.0  # bf16 gradients / weights
    bw = _bandwidth(job, lay.tp * lay.dp)
    if lay.zero <= 1:
        comm, window = parallel.ring_allreduce_bytes(msg, lay.dp), compute_s * 2 / 3 / m
    elif lay.zero == 2:
        comm = parallel.reduce_scatter_bytes(msg, lay.dp) * m + parallel.all_gather_bytes(msg, lay.dp)
        window = compute_s * 2 / 3
    else:
        comm, window = 3 * parallel.reduce_scatter_bytes(msg, lay.dp) * m, compute_s
    return max(0.0, comm / bw - window)


def candidate_layouts(job: Job, micro_batches: tuple[int, ...] = (1, 2, 4, 8),
                      interleave: tuple[int, ...] = (1, 2, 4)) -> list[Layout]:
    """All layouts worth evaluating: tp a power of two within a node, pp any divisor of the rest."""
    out: list[Layout] = []
    n, shape = job.n_gpus, job.shape
    gpn = job.gpu.gpus_per_node
    tps = [t for t in (1, 2, 4, 8, 16) if n % t == 0 and t <= gpn and shape.n_heads % t == 0]
    for tp in tps:
        rest = n // tp
        for pp in (d for d in range(1, min(rest, shape.n_layers) + 1) if rest % d == 0):
            dp = rest // pp
            for v in interleave if pp > 1 else (1,):
                for zero in (0, 1, 2, 3) if pp == 1 else (0, 1):
                    for mbs in micro_batches:
                        for rc in memory.RECOMPUTE:
                            for sp in (False, True) if tp > 1 else (False,):
                                out.append(data_parallel(dp, zero, tp=tp, pp=pp, mbs=mbs, recompute=rc,
                                                         sp=sp, v=v))
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
            rejected[est.reason] = rejected.get(est.reason, 0) + 1
    ranked = sorted((e for e in results.values() if e.fits),
                    key=lambda e: (-e.tokens_per_s, e.memory.total if e.memory else 0.0))
    return SearchResult(job, ranked, rejected, len(results), results)


def variant(lay: Layout, dp: int | None = None, **changes) -> Layout:
    """`lay` with some knobs changed, its data-parallel ranks placed as the search places them."""
    fields = {k: getattr(lay, k) for k in lay.__dataclass_fields__ if k not in ("dp_shard", "dp_replicate")}
    fields.update(changes)
    return data_parallel(lay.dp if dp is None else dp, **fields)


def explain(result: SearchResult, est: Estimate | None = None) -> list[str]:
    """Why `est` (the winner by default) beats its neighbours: change one knob, say what happens."""
    est = est or result.best
    if est is None:
        lines = ["no layout fits: " + ", ".join(f"{k} ({v})" for k, v in result.rejected.items())]
        if "batch does not divide into dp*mbs" in result.rejected:
            lines.append(f"the batch holds {result.job.batch_seqs} sequences: a batch divisible by more "
                         "GPU counts (--batch-tokens) or another --gpus opens more layouts")
        if "does not fit in memory" in result.rejected:
            lines.append("more GPUs, a GPU with more memory, or a shorter --seq-len reduce memory per GPU")
        return lines
    job, lay = result.job, est.layout
    mem = est.memory
    lines = [f"{lay.label()}: {est.tokens_per_s:,.0f} tokens/s, MFU {est.mfu:.1%}; uses "
             f"{mem.total / 1e9:.1f} of {job.usable_bytes / 1e9:.1f} GB usable" if mem else lay.label()]
    for knob, values in (("tp", (1, 2, 4, 8)), ("zero", (0, 1, 2, 3)), ("mbs", (1, 2, 4, 8)),
                         ("recompute", memory.RECOMPUTE), ("sp", (False, True)), ("v", (1, 2, 4))):
        for value in values:
            if getattr(lay, knob) == value:
                continue
            changes = {knob: value}
            if knob == "tp":
                changes["dp"] = job.n_gpus // (value * lay.pp) if job.n_gpus % (value * lay.pp) == 0 else 0
            other = result.all.get(variant(lay, **changes))
            if other is None:
                continue
            if other.fits:
                lines.append(f"{knob}={value}: {other.tokens_per_s / est.tokens_per_s:.2f}x the tokens/s")
            elif other.memory is not None:
                lines.append(f"{knob}={value}: does not fit ({other.memory.total / 1e9:.1f} GB)")
    for pp in sorted({e.layout.pp for e in result.ranked} - {lay.pp})[:4]:
        alt = next(e for e in result.ranked if e.layout.pp == pp)
        lines.append(f"best with pp={pp}: {alt.layout.label()} at {alt.tokens_per_s / est.tokens_per_s:.2f}x")
    return lines
