"""`pretrain plan --calibrate RUN...`: learn the user's cluster from runs it already made.

A run directory (DESIGN.md's contract) holds `config.toml` (the resolved training config) and
`metrics.jsonl` (one line per step with `tokens_per_s`). For each run we rebuild the model shape and
the layout from the config, predict its tokens/s with the time model (plan/timing.py), and compare
with the measured median. One factor k then scales the GPU's compute efficiencies (GEMM, attention,
HBM) so that the predictions match the measurements in the geometric mean; the communication
constants stay as sourced (a few runs on one machine cannot separate them). The result is a GPU
table entry, written in the `--hardware` file format, that the next plan reads.

Pure Python: the config is read with tomllib, the shape resolved from plan presets (no torch).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from pretrain.errors import UserError
from pretrain.plan.hardware import GPU
from pretrain.plan.layout import Layout
from pretrain.plan.recipe import SHAPE_FIELDS
from pretrain.plan.search import Job, evaluate, time_layout
from pretrain.plan.shapes import ModelShape, get_shape
from pretrain.untrusted import check_file, json_line, lines, load_toml

EFFICIENCIES = ("gemm_efficiency", "attention_efficiency", "hbm_efficiency")
# A factor below this is not a GPU running slower than its table: the runs were trained elsewhere
# (`train.device = "auto"` on a machine without a GPU: the docs' tiny-cpu run gave x0.001 of an
# H100). Said, not refused: a CPU described in a --hardware file is calibrated from CPU runs.
IMPLAUSIBLE = 0.02
MAX_METRIC_LINES = 1_000_000  # bounded work per run directory


@dataclass(frozen=True)
class MeasuredRun:
    path: Path
    shape: ModelShape
    layout: Layout
    batch_seqs: int
    tokens_per_s: float
    steps: int  # step lines the median is over
    skipped: int  # unreadable lines


def _shape(model: dict, where: Path) -> ModelShape:
    over = {k: model[k] for k in SHAPE_FIELDS if model.get(k) is not None}
    preset = model.get("preset", "tiny-cpu")
    try:
        if preset:
            return dataclasses.replace(get_shape(preset), **over)
        over.setdefault("n_kv_heads", over.get("n_heads"))
        return ModelShape(name="custom", **over)
    except (TypeError, UserError) as e:
        raise UserError(f"{where}: [model]: {e}") from None


def _layout(cfg: dict) -> tuple[Layout, int]:
    """The layout and the global batch in sequences, as train/ reads the same config."""
    par, data, train = cfg.get("parallel", {}), cfg.get("data", {}), cfg.get("train", {})
    dp_r, dp_s = int(par.get("dp_replicate", 1)), int(par.get("dp_shard", 1))
    tp, pp, cp = int(par.get("tp", 1)), int(par.get("pp", 1)), int(par.get("cp", 1))
    batch = int(data.get("batch_size", 8))
    zero = 0 if dp_s == 1 else (3 if par.get("reshard_after_forward", True) else 2)
    v = 2 if par.get("pp_schedule", "1f1b") == "interleaved1f1b" else 1
    recompute = "full" if par.get("activation_checkpointing", "none") == "full" else "none"
    if pp > 1:
        micro = int(par.get("pp_microbatches", 0)) or 2 * pp
        mbs, seqs = max(1, batch // micro), batch * dp_r * dp_s
    else:
        mbs, seqs = batch, batch * int(train.get("grad_accum", 1)) * dp_r * dp_s
    lay = Layout(tp=tp, pp=pp, cp=cp, dp_shard=dp_s, dp_replicate=dp_r, zero=zero, mbs=mbs,
                 recompute=recompute, sp=bool(par.get("sequence_parallel", False)), v=v)
    return lay, seqs


def _tokens_per_s(path: Path) -> tuple[float, int, int]:
    """Median tokens/s over the step lines since the last resume, after the first (compilation and
    warm-up), bad lines skipped and counted. Checkpoints reshard: the steps before a resume may have
    run under another layout than config.toml's, which the last start wrote."""
    values, skipped = [], 0

    def bad(lineno: int, reason: str) -> None:
        nonlocal skipped
        skipped += 1

    check_file(path)  # not a FIFO or a device
    with path.open("rb") as f:  # lines over 8 MiB are read through, never held
        for i, (_, line) in enumerate(lines(f, on_bad=bad)):
            if i >= MAX_METRIC_LINES:
                break
            try:  # any way a line is bad (nested deep, 5,000 digits, invalid UTF-8) is a ValueError
                rec = json_line(line)
            except ValueError:
                skipped += 1
                continue
            if isinstance(rec, dict) and rec.get("event") == "resume":
                values = []  # the trainer dropped the lines past the restored step: all earlier
                continue
            if not isinstance(rec, dict) or "event" in rec:
                continue
            tps = rec.get("tokens_per_s")
            if isinstance(tps, int | float) and not isinstance(tps, bool) and math.isfinite(tps) and tps > 0:
                values.append((rec.get("step", 0), float(tps)))
    values.sort(key=lambda sv: sv[0] if isinstance(sv[0], int | float) else 0)
    speeds = [v for _, v in values[1:]] or [v for _, v in values]
    if not speeds:
        raise UserError(f"{path}: no step line with a positive tokens_per_s ({skipped} unreadable lines)")
    return statistics.median(speeds), len(speeds), skipped


def load_run(run_dir: str | Path) -> MeasuredRun:
    """A run directory's model, layout, batch and measured tokens/s."""
    d = Path(run_dir)
    cfg_path, metrics = d / "config.toml", d / "metrics.jsonl"
    for p in (cfg_path, metrics):
        if not p.is_file():
            raise UserError(f"--calibrate {d}: no {p.name} (a run directory of pretrain train)")
    cfg = load_toml(cfg_path)
    for section in ("model", "parallel", "data", "train"):
        if not isinstance(cfg.get(section, {}), dict):
            raise UserError(f"{cfg_path}: [{section}] must be a table, got {cfg[section]!r}")
    shape = _shape(cfg.get("model", {}), cfg_path)
    try:
        lay, seqs = _layout(cfg)
    except (TypeError, ValueError) as e:
        raise UserError(f"{cfg_path}: [parallel]/[data]: {e}") from None
    tps, n, skipped = _tokens_per_s(metrics)
    return MeasuredRun(d, shape, lay, seqs, tps, n, skipped)


def predict(run: MeasuredRun, gpu: GPU) -> float:
    """Tokens/s the time model predicts for a measured run's layout on `gpu`."""
    job = Job(run.shape, gpu, run.layout.world_size, run.batch_seqs * run.shape.seq_len,
              activations="pretrain")
    est = evaluate(job, run.layout)
    if est.reason and est.reason != "does not fit in memory":
        raise UserError(f"--calibrate {run.path}: {est.reason}")
    if not est.times:  # it ran, so it fit: time it regardless of the memory model's verdict
        time_layout(job, run.layout, est)
    return est.tokens_per_s


def scaled(gpu: GPU, k: float, launch_us: float | None = None) -> GPU:
    """`gpu` with its compute efficiencies multiplied by k (capped at 1), and a launch overhead."""
    changes = {f: min(1.0, getattr(gpu, f) * k) for f in EFFICIENCIES}
    if launch_us is not None:
        changes["launch_us"] = launch_us
    return dataclasses.replace(gpu, **changes)


def _fit_k(runs: list[MeasuredRun], gpu: GPU, launch_us: float) -> tuple[float, float]:
    """For a given launch overhead, the k with sum log(predicted / measured) = 0 (bisection:
    predictions grow with k); returns k and the squared log errors it leaves."""
    def logs(k: float) -> list[float]:
        g = scaled(gpu, k, launch_us)
        return [math.log(predict(r, g) / r.tokens_per_s) for r in runs]

    lo, hi = 1e-4, 1.0 / min(getattr(gpu, f) for f in EFFICIENCIES)
    if sum(logs(hi)) < 0:
        k = hi  # even at 100% of peak the model is slower: the table's peak is too low
    else:
        for _ in range(50):
            mid = math.sqrt(lo * hi)
            lo, hi = (mid, hi) if sum(logs(mid)) < 0 else (lo, mid)
        k = math.sqrt(lo * hi)
    return k, sum(e * e for e in logs(k))


def fit(runs: list[MeasuredRun], gpu: GPU) -> tuple[GPU, float]:
    """The calibrated GPU and its efficiency factor k. One run fits k alone; two or more (of
    different sizes) also fit the per-kernel launch overhead, by golden-section search on its log
    between 0.1 us and 10 ms, minimizing the squared log errors."""
    if not runs:
        raise UserError("--calibrate needs at least one run directory")
    if len({(r.layout, r.batch_seqs, r.shape) for r in runs}) < 2:
        k, _ = _fit_k(runs, gpu, gpu.launch_us)
        return scaled(gpu, k), k
    lo, hi = math.log(0.1), math.log(1e4)
    ratio = (math.sqrt(5) - 1) / 2
    a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    fa, fb = _fit_k(runs, gpu, math.exp(a))[1], _fit_k(runs, gpu, math.exp(b))[1]
    for _ in range(30):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - ratio * (hi - lo)
            fa = _fit_k(runs, gpu, math.exp(a))[1]
        else:
            lo, a, fa = a, b, fb
            b = lo + ratio * (hi - lo)
            fb = _fit_k(runs, gpu, math.exp(b))[1]
    launch = math.exp((lo + hi) / 2)
    k, _ = _fit_k(runs, gpu, launch)
    return scaled(gpu, k, launch), k


def hardware_toml(gpu: GPU) -> str:
    """The calibrated entry in `--hardware` file format (TOML)."""
    lines = ["# pretrain plan --calibrate: compute efficiencies fitted to measured runs", f"[{gpu.name}]"]
    for f in dataclasses.fields(GPU):
        if f.name != "name":
            lines.append(f"{f.name} = {getattr(gpu, f.name)!r}")
    return "\n".join(lines) + "\n"
