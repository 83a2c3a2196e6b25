"""Published training runs with their exact model, layout and measured speed: the planner's time model
is held against them (tests/test_plan_published.py, bench/bench_plan_search.py). Numbers as printed
in ../shared/reference/planner_vectors.md, plus runs outside it (torchtitan's FSDP runs on A100
and H100); each row names its source. Runs added after the model was built, and kept apart from
these, are in plan/heldout.py.

`measured_step_s` is the published iteration time, or the one implied by the published TFLOP/s per
GPU under that paper's own FLOPs formula (so the comparison does not depend on FLOPs conventions).
Llama 3 prints MFU: its step time is implied through our FLOPs per token (6N + 12·L·h·s).
"""

from __future__ import annotations

from dataclasses import dataclass

from pretrain.plan import compute
from pretrain.plan.hardware import get_gpu
from pretrain.plan.layout import Layout, data_parallel
from pretrain.plan.search import Job
from pretrain.plan.shapes import ModelShape, get_shape


@dataclass(frozen=True)
class Run:
    source: str
    job: Job
    layout: Layout
    measured_step_s: float
    zeros: tuple[int, ...] = (0, 1, 2, 3)  # the ZeRO stages the run's software offered
    peak_gib: float | None = None  # the memory per GPU the source printed, where it printed one

    @property
    def family(self) -> tuple[int, bool, bool]:
        return family(self.layout)

    @property
    def measured_mfu(self) -> float:
        tokens = self.job.batch_seqs * self.job.shape.seq_len
        fpt = compute.flops_per_token(self.job.shape)
        return tokens / self.measured_step_s * fpt / (self.job.n_gpus * self.job.gpu.peak_flops)


def family(lay: Layout) -> tuple[int, bool, bool]:
    """What a paper chose, as opposed to how it tuned it: the TP degree, and whether it pipelines
    and splits the context (the exact pp, micro-batch, v and ZeRO stage are tuning)."""
    return lay.tp, lay.pp > 1, lay.cp > 1


# Megatron-LM had no ZeRO sharding until its distributed optimizer (2022): the 2021 and 2022 papers'
# runs replicate the optimizer state over data-parallel ranks.
MEGATRON_ZERO = (0,)


def _megatron_2021(name: str, tp: int, pp: int, gpus: int, batch: int, tflops: float) -> Run:
    # Narayanan et al. 2021, Table 1: A100 80GB (Selene), full recompute, fp32 gradients, no fused
    # attention, micro-batch 1 (the weak-scaling runs), non-interleaved 1F1B; TFLOP/s counted with
    # 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)).
    shape = get_shape(name)
    flops = compute.megatron_flops_per_iteration(batch, shape.seq_len, shape.n_layers, shape.d_model,
                                                 shape.vocab_size, recompute=True)
    job = Job(shape, get_gpu("a100-80gb"), gpus, batch * shape.seq_len, accounting="18B", flash=False)
    lay = data_parallel(gpus // (tp * pp), 0, tp=tp, pp=pp, recompute="full")
    step = flops / (gpus * tflops * 1e12)
    return Run(f"Megatron-LM 2021 Table 1, {shape.params() / 1e9:.1f}B", job, lay, step, MEGATRON_ZERO)


def _korthikanti(name: str, pp: int, gpus: int, mbs: int, full_s: float, sel_s: float) -> list[Run]:
    # Korthikanti et al. 2022, Tables 3 and 5: A100 80GB, TP 8, global batch = GPUs (22B: 4),
    # iteration time with full recompute, and with sequence parallelism + selective recompute.
    shape = get_shape(name)
    batch = 4 if gpus == 8 else gpus
    job = Job(shape, get_gpu("a100-80gb"), gpus, batch * shape.seq_len, accounting="18B", flash=False)
    dp = gpus // (8 * pp)
    full = data_parallel(dp, 0, tp=8, pp=pp, mbs=mbs, recompute="full")
    sel = data_parallel(dp, 0, tp=8, pp=pp, mbs=mbs, recompute="selective", sp=True)
    src = f"Korthikanti 2022 Table 5, {name}"
    return [Run(src + " full recompute", job, full, full_s, MEGATRON_ZERO),
            Run(src + " SP + selective", job, sel, sel_s, MEGATRON_ZERO)]


def _llama3(gpus: int, cp: int, dp: int, seq: int, mfu: float, v: int) -> Run:
    # Dubey et al. 2024 (Llama 3), Table 4: 405B on H100s, TP 8, PP 16, batch 16M tokens, bf16, no
    # recompute, sequence parallel, FSDP sharding optimizer state and gradients but not the weights
    # (zero=2, sec. 3.3.2). The interleaving depth is not printed: v is the only one whose warm-up
    # fits in memory at 8,192 GPUs (1) and the smallest interleaved one at 16,384 (2).
    shape = get_shape("llama-3-405b").with_(seq_len=seq)
    job = Job(shape, get_gpu("h100"), gpus, 16 * 2**20)
    lay = Layout(tp=8, pp=16, cp=cp, dp_shard=dp, zero=2, sp=True, v=v)
    tokens = job.batch_seqs * seq
    step = tokens * compute.flops_per_token(shape) / (mfu * gpus * job.gpu.peak_flops)
    return Run(f"Llama 3 Table 4, {gpus} GPUs, seq {seq}", job, lay, step)


# torchtitan runs eager PyTorch kernels (no torch.compile in these rows: norms, rotary, SwiGLU as
# separate memory-bound passes, as our trainer's "pretrain" profile), FSDP2 with bf16 weights and
# fp32 gradient reduction (its default mixed_precision_reduce), and its "selective" checkpointing is
# the per-op policy (every second matmul and all element-wise ops re-run, attention saved). Its
# saved tensors are bf16 without autocast (memory profile "torchtitan"), not our trainer's fp32
# residual stream and per-linear autocast copies ("pretrain").
TORCHTITAN = dict(activations="torchtitan", kernels="eager", selective="op", reduce_dtype="fp32")


def _torchtitan(label: str, name: str, gpu: str, gpus: int, lay: Layout, wps_per_gpu: float,
                peak_gib: float | None = None) -> Run:
    shape = get_shape(name)
    job = Job(shape, get_gpu(gpu), gpus, lay.dp * lay.mbs * shape.seq_len, **TORCHTITAN)
    step = job.batch_tokens / (gpus * wps_per_gpu)
    return Run(f"torchtitan {label}", job, lay, step, peak_gib=peak_gib)


def _torchtitan_runs() -> list[Run]:
    # docs/performance.md (2024): Llama 3 on 64 A100 80GB, FSDP2 over all 64, local batch 1 of 8,192
    # tokens; 8B with selective op checkpointing, 70B with full. Tokens/s per GPU as printed.
    a100 = [_torchtitan("Llama 3 8B on 64 A100, FSDP, selective op AC", "llama-3-8b", "a100-80gb", 64,
                        Layout(dp_shard=64, zero=3, recompute="selective"), 2973),
            _torchtitan("Llama 3 70B on 64 A100, FSDP, full AC", "llama-3-70b", "a100-80gb", 64,
                        Layout(dp_shard=64, zero=3, recompute="full"), 331)]
    # Elastic-scaling tables (torch and torchtitan of 2024-12): Llama 3.1 8B on Grand Teton H100s
    # (h100-hbm2e), FSDP, local batch 2, selective (op) checkpointing, no torch.compile: Table 1 (8
    # GPUs) and Table 3 (128 GPUs). docs/performance.md: Llama 3.1 405B on 128 of them, FSDP 16 x TP 8
    # (sequence parallel), local batch 2, full checkpointing, no Float8. The elastic-scaling tables
    # also print Memory(GiB) per GPU (82.4 and 67.0), stable over training, as their footnote says.
    h100 = [_torchtitan("Llama 3.1 8B on 8 H100 (500 W), FSDP", "llama-3-8b", "h100-hbm2e", 8,
                        Layout(dp_shard=8, zero=3, mbs=2, recompute="selective"), 5762, 82.4),
            _torchtitan("Llama 3.1 8B on 128 H100 (500 W), FSDP", "llama-3-8b", "h100-hbm2e", 128,
                        Layout(dp_shard=128, zero=3, mbs=2, recompute="selective"), 5605, 67.0),
            _torchtitan("Llama 3.1 405B on 128 H100 (500 W), FSDP x TP 8", "llama-3-405b", "h100-hbm2e",
                        128, Layout(tp=8, dp_shard=16, zero=3, mbs=2, sp=True, recompute="full"), 109)]
    return a100 + h100


def runs() -> list[Run]:
    out = [
        _megatron_2021("megatron-1.7b", 1, 1, 32, 512, 137),
        _megatron_2021("megatron-3.6b", 2, 1, 64, 512, 138),
        _megatron_2021("megatron-7.5b", 4, 1, 128, 512, 142),
        _megatron_2021("megatron-18b", 8, 1, 256, 1024, 135),
        _megatron_2021("megatron-39b", 8, 2, 512, 1536, 138),
        _megatron_2021("megatron-76b", 8, 4, 1024, 1792, 140),
        _megatron_2021("megatron-145b", 8, 8, 1536, 2304, 148),
        _megatron_2021("megatron-310b", 8, 16, 1920, 2160, 155),
        _megatron_2021("megatron-530b", 8, 35, 2520, 2520, 163),
        _megatron_2021("megatron-1t", 8, 64, 3072, 3072, 163),
    ]
    out += _korthikanti("korthikanti-22b", 1, 8, 4, 1.42, 1.10)
    out += _korthikanti("gpt3-175b", 8, 64, 1, 18.13, 13.75)
    out += _korthikanti("megatron-530b", 35, 280, 1, 49.05, 37.83)
    out += _korthikanti("megatron-1t", 64, 512, 1, 94.42, 71.49)
    out += [_llama3(8192, 1, 64, 8192, 0.43, 1), _llama3(16384, 1, 128, 8192, 0.41, 2),
            _llama3(16384, 16, 8, 131072, 0.38, 2)]
    out += _torchtitan_runs()
    return out


def shape_of(run: Run) -> ModelShape:
    return run.job.shape
