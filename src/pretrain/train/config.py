"""The training run's configuration: nested dataclasses, one per concern, loaded from TOML.

`pretrain train RECIPE.toml --set train.steps=100` resolves defaults < recipe < overrides with
`pretrain.config.load(RunConfig, ...)`; the resolved config is printed and saved as RUN/config.toml.
Every key below is documented in docs/training.md; names are stable identifiers. Choices and
bounds are field metadata (`choice`, `bounded`), checked when the config is loaded; numbers are
>= 0 unless a field says otherwise (pretrain.config).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from pretrain.config import bounded, choice

RANKS = "ranks along this dimension of the mesh"


@dataclass
class ModelConfig:
    # A shape preset from pretrain.plan.shapes; any field set below overrides the preset's value.
    preset: str = "tiny-cpu"
    n_layers: int | None = bounded(None, lo=1, why="transformer blocks")
    d_model: int | None = bounded(None, lo=1, why="width of the residual stream")
    n_heads: int | None = bounded(None, lo=1, why="attention heads")
    n_kv_heads: int | None = bounded(None, lo=1, why="key and value heads (GQA)")
    d_ff: int | None = bounded(None, lo=1, why="width of the MLP")
    vocab_size: int | None = bounded(None, lo=1, why="tokens in the vocabulary")
    seq_len: int | None = bounded(None, lo=2, why="tokens of context; one position attends to nothing")
    mlp: str | None = choice(None, (None, "swiglu", "gelu"))
    norm: str | None = choice(None, (None, "rmsnorm", "layernorm"))
    tied_embeddings: bool | None = None
    bias: bool | None = None
    learned_pos: bool | None = None
    qkv_bias: bool | None = None  # biases on Q, K and V only (Qwen2), when `bias` is off
    qk_norm: bool | None = None  # per-head RMSNorm on queries and keys before rotary (Qwen3)
    # one head's width when not d_model / n_heads (Qwen3-0.6B: 128)
    attn_head_dim: int | None = bounded(None, why="0: d_model / n_heads")
    rope_theta: float = bounded(10000.0, gt=0, why="RoPE's base (Llama 3: 500,000)")
    norm_eps: float = bounded(1e-5, gt=0, hi=1, why="added to the mean square; small by what it is")
    init_std: float = bounded(0.02, gt=0, hi=1, why="std of the initial weights (GPT-2: 0.02)")
    # Llama 3.1+ rotary frequency scaling, set by model.init_from from a "llama3" config.json: factor,
    # low_freq_factor, high_freq_factor, original_max_position_embeddings. Empty: plain RoPE.
    rope_scaling: dict[str, float] = field(default_factory=dict)
    # A Hugging Face folder (config.json + safetensors: Llama, Mistral, Qwen2, Qwen3 or GPT-2) to
    # start from: the shape, the weights and (for text data) the tokenizer come from it; see
    # docs/training.md.
    init_from: str = ""


@dataclass
class DataConfig:
    # "text": a raw text file tokenized on the fly; "tokens": token shards + mixture
    kind: str = choice("text", ("text", "tokens"))
    path: str = ""  # kind=text: the file
    tokenizer: str = ""  # kind=text: "" = bytes as tokens (vocab 257), else a tokenizer.json
    sources: dict[str, str] = field(default_factory=dict)  # kind=tokens: name -> token directory
    weights: dict[str, float] = field(default_factory=dict)  # kind=tokens: name -> mixture weight
    eval_sources: dict[str, str] = field(default_factory=dict)  # kind=tokens: held-out token dirs
    # sequences per micro-batch (per rank)
    batch_size: int = bounded(8, lo=1, why="sequences per micro-batch")
    # kind=text: the file's tail kept out of training
    eval_fraction: float = bounded(0.05, lo=0, hi=1, why="a share of the file")
    seed: int = bounded(0, why="a seed")
    skip: list = field(default_factory=list)  # [[first, last], ...] micro-batch indices never trained on


@dataclass
class OptimConfig:
    lr: float = bounded(3e-4, gt=0, hi=1, why="Adam moves each weight by about lr per step")
    # torch's AdamW raises at beta = 1 (no average at all)
    beta1: float = bounded(0.9, lt=1, why="an average's decay, below 1")
    beta2: float = bounded(0.95, lt=1, why="an average's decay, below 1")
    eps: float = bounded(1e-8, gt=0, hi=1, why="added to Adam's denominator")
    weight_decay: float = bounded(0.1, why="decoupled decay; lr x weight_decay below 1")
    implementation: str = choice("auto", ("auto", "fused", "foreach"))  # AdamW kernel; auto: fused on CUDA


@dataclass
class ScheduleConfig:
    kind: str = choice("cosine", ("cosine", "wsd", "constant"))
    warmup_steps: int = bounded(100, why="steps")
    # the floor, as a fraction of the peak
    min_lr_ratio: float = bounded(0.1, lo=0, hi=1, why="a share of the peak")
    # wsd: share of the run spent decaying at the end
    decay_fraction: float = bounded(0.2, lo=0, hi=1, why="a share of the run")


@dataclass
class PrecisionConfig:
    dtype: str = choice("bf16", ("fp32", "bf16", "fp16", "fp8"))  # fp8: GPU only
    init_scale: float = bounded(65536.0, gt=0, why="the fp16 loss scale")  # fp16 dynamic loss scaler
    growth_interval: int = bounded(2000, lo=1, why="clean steps before the scale grows")
    backoff_factor: float = bounded(0.5, gt=0, hi=1, why="the scale's factor after an overflow")
    growth_factor: float = bounded(2.0, gt=1, why="the scale's factor after growth_interval clean steps")


@dataclass
class StabilityConfig:
    clip: float = bounded(1.0, why="a gradient norm")  # global-norm threshold c; 0 disables clipping
    # f in "loss > f * median of the last w" (lesson section 5a)
    spike_factor: float = bounded(2.0, gt=1, why="a multiple of the median loss")
    spike_window: int = bounded(4, lo=1, why="steps")  # w
    # consecutive flagged steps that make a spike "persistent"
    spike_patience: int = bounded(1, lo=1, why="steps")
    rollback: bool = True  # on a persistent spike, roll back to the last good checkpoint
    # micro-batches before the first flagged one to skip after a rollback
    skip_before: int = bounded(0, why="micro-batches")
    skip_after: int = bounded(0, why="micro-batches")  # ... and after the last flagged one
    max_rollbacks: int = bounded(5, why="rollbacks in a run")


@dataclass
class CheckpointConfig:
    # steps between saves; 0 = Young's rule sqrt(2*C*M) with C measured
    every: int = bounded(0, why="steps; 0 = Young's rule")
    keep: int = bounded(3, why="checkpoints kept")
    async_save: bool = True
    mtbf_minutes: float = bounded(180.0, gt=0, why="minutes between failures")  # M for Young's rule
    first_at: int = bounded(20, lo=1, why="a step")  # with every=0: the save that measures C
    # "" = RUN/checkpoints; a folder; an fsspec URL (s3://bucket/prefix) = object storage. Relative:
    # to the working directory in a recipe or --set, to the run directory in RUN/config.toml
    storage: str = ""


def storage_in_run(run: str | Path, storage: str) -> str:
    """checkpoint.storage as RUN/config.toml holds it -> as this process opens it. A relative folder
    there is relative to the run directory (the trainer saves it so: `storage_to_save`), so the run
    means the same checkpoints from any working directory; "", an absolute folder, a URL: as is."""
    if not storage or "://" in storage or Path(storage).is_absolute():
        return storage
    return str(Path(run) / storage)


def storage_to_save(run: str | Path, storage: str) -> str:
    """checkpoint.storage as this process uses it (a relative folder: from the working directory) ->
    as RUN/config.toml keeps it: a folder inside the run as its path from the run (`ckpts`), one
    outside as an absolute path (it does not move with the run); "" and a URL as is."""
    if not storage or "://" in storage:
        return storage
    where, home = Path(os.path.abspath(storage)), Path(os.path.abspath(run))
    return os.path.relpath(where, home) if where.is_relative_to(home) else str(where)


@dataclass
class LogConfig:
    every: int = bounded(1, lo=1, why="steps between log lines")
    tensorboard: bool = True
    eval_every: int = bounded(0, why="steps")  # 0 = no evaluation
    eval_batches: int = bounded(4, lo=1, why="batches per evaluation")
    # Downstream tasks during training (pretrain.eval.callback), as `pretrain eval --tasks`:
    eval_tasks: str = ""  # comma-separated names, .jsonl paths or ppl:PATH; "" = none
    eval_tasks_every: int = bounded(0, why="steps")  # steps between task evaluations; 0 = eval_every
    eval_tasks_limit: int = bounded(200, why="examples per task")  # first N examples of each task (0 = all)
    eval_tasks_shots: int = bounded(0, hi=1000, why="few-shot examples per prompt (ARC: 25)")
    eval_benchmarks: str = ""  # folder the task names resolve in ("" = as `pretrain eval --help` says)
    peak_flops: float = bounded(0.0, why="FLOP/s of one device")  # per device, for MFU; 0 = unknown (no MFU)


@dataclass
class ParallelConfig:
    dp_replicate: int = bounded(1, lo=1, why=RANKS)
    dp_shard: int = bounded(1, lo=1, why=RANKS)
    tp: int = bounded(1, lo=1, why=RANKS)
    pp: int = bounded(1, lo=1, why=RANKS)
    # context parallel: each rank holds 1/cp of every sequence (two chunks, load-balanced)
    cp: int = bounded(1, lo=1, why=RANKS)
    compile: bool = False
    activation_checkpointing: str = choice("none", ("none", "full"))
    sequence_parallel: bool = False  # with tp > 1: norms and residual split along the sequence
    reshard_after_forward: bool = True  # FSDP2: False keeps gathered parameters until backward (ZeRO-2-like)
    pp_schedule: str = choice("1f1b", ("gpipe", "1f1b", "interleaved1f1b"))
    # micro-batches per step through the pipeline; 0 = 2 * pp
    pp_microbatches: int = bounded(0, why="micro-batches; 0 = 2 x pp")
    # collective timeout: a dead rank fails the job after at most this (a timedelta: at most ~116 days)
    timeout_s: float = bounded(300.0, gt=0, hi=10_000_000, why="seconds (a timedelta)")


@dataclass
class TrainSection:
    # 0: build (or import) the model and save it, no step
    steps: int = bounded(200, lo=0, why="optimizer steps")
    grad_accum: int = bounded(1, lo=1, why="micro-batches per step")
    seed: int = bounded(0, why="a seed")
    device: str = choice("auto", ("auto", "cpu", "cuda"))
    # torch intra-op threads on CPU; 0 = torch's default (a C int)
    threads: int = bounded(0, lo=0, hi=1024, why="torch's threads; 0 = its default")
    keep_freed_memory: bool = True  # CPU: reuse freed activations instead of new pages (train/cpu.py)
    out: str = "runs/tiny"
    resume: bool = True
    # stop (with a checkpoint) at this step without changing the schedule; 0 = steps
    stop_at: int = bounded(0, why="a step; 0 = train.steps")
    deterministic: bool = False
    # the loss over this many slices of each micro-batch's tokens, each recomputed in backward: the
    # vocabulary-sized memory term divided by it, the head run twice (train/loss.py); 1 = whole
    loss_chunks: int = bounded(1, lo=1, hi=4096, why="slices of a micro-batch's tokens; 1 = the whole loss")
    # Resume even though the recipe changed since the checkpoint (optim.lr, schedule, data, precision...):
    # the changes are said and logged as a config_change event. False: such a resume is refused.
    allow_changes: bool = False


@dataclass
class RunConfig:
    train: TrainSection = field(default_factory=TrainSection)
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    precision: PrecisionConfig = field(default_factory=PrecisionConfig)
    stability: StabilityConfig = field(default_factory=StabilityConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    log: LogConfig = field(default_factory=LogConfig)
    parallel: ParallelConfig = field(default_factory=ParallelConfig)


# --- numbers validated again before a run is built: one line naming the key ------------------------

MAX_SEQUENCES_PER_STEP = 2**24


def _numbers(cfg: RunConfig):
    """(dotted key, field, its type without None, value) of every bounded field: the fields' own
    metadata is the one table of bounds, read by `pretrain.config.load` and by `validate`."""
    import dataclasses
    import typing

    for section in dataclasses.fields(cfg):
        part = getattr(cfg, section.name)
        hints = typing.get_type_hints(type(part))
        for f in dataclasses.fields(part):
            if "why" in f.metadata and "choices" not in f.metadata:
                typ = [a for a in typing.get_args(hints[f.name]) or (hints[f.name],) if a is not type(None)]
                yield f"{section.name}.{f.name}", f, typ[0], getattr(part, f.name)


def validate(cfg: RunConfig) -> None:
    """Refuse a number out of its range (train.steps=-5, optim.lr=0, ...) with one line naming it: the
    bounds `load` checked, again for a config built in code (tests, `dataclasses.replace`), and the
    limits that join two keys."""
    from pretrain.bounds import check_number
    from pretrain.errors import UserError

    for key, f, typ, v in _numbers(cfg):
        if v is None and f.default is None:  # unset: the preset's value
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise UserError(f"{key} must be a number, got {v!r}")
        if typ is int and not isinstance(v, int):
            raise UserError(f"{key} must be an integer, got {v!r}")
        check_number(v, f.metadata, key)
    per_step = cfg.data.batch_size * cfg.train.grad_accum  # sequences one process runs per step
    if per_step > MAX_SEQUENCES_PER_STEP:  # 2**62 micro-batches: a first step that never ends
        raise UserError(f"data.batch_size x train.grad_accum = {cfg.data.batch_size} x "
                        f"{cfg.train.grad_accum} sequences per step and process; at most "
                        f"{MAX_SEQUENCES_PER_STEP:,} (Llama 3 405B's whole global batch was 16,384)")
    if cfg.optim.lr * cfg.optim.weight_decay >= 1:  # AdamW scales each weight by 1 - lr x wd per step
        raise UserError(f"optim.weight_decay x optim.lr must be < 1 (each step scales the weights by "
                        f"1 - lr x wd), got {cfg.optim.weight_decay} x {cfg.optim.lr}")
    if cfg.train.stop_at > cfg.train.steps:
        raise UserError(f"train.stop_at={cfg.train.stop_at} is past train.steps={cfg.train.steps}")
