"""Small models against what was measured: every published run of a model up to 14B parameters
(plan/published.py and plan/heldout.py) on the planned GPU, its measured MFU beside the one this
time model predicts for it. A plan for a small model prints the measured range and the median
miss (`time.published_check`, `published` in `--json`), so its MFU reads as what it is: a best case
(fused kernels, FlashAttention-2, every collective hidden) that published stacks have not reached.
`first_line` is what the plan says first (and the report, from a plan.json): that MFU against the
published range, and the days the range would take.
docs/planner.md "Small models: the planner against every published row" has the table and what
was found about its cause; bench/bench_plan_small.py prints it.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, fields, replace
from functools import lru_cache

from pretrain.plan.hardware import GPU, GPUS
from pretrain.plan.published import Run

SMALL = 14e9  # the largest "small" model: Llama 2 13B (13.0B) and MPT-13B (12.9B) are in


@dataclass(frozen=True)
class Check:
    """The published runs of small models on one GPU entry with one recompute policy."""

    gpu: str
    recompute: bool  # the runs re-ran activations (full or selective), or saved them all
    rows: int
    mfu_low: float
    mfu_high: float
    median_error: float  # measured step / predicted step - 1: + when the planner is too fast
    sources: tuple[str, ...]

    def as_dict(self) -> dict:
        return {"gpu": self.gpu, "recompute": self.recompute, "rows": self.rows, "mfu_low": self.mfu_low,
                "mfu_high": self.mfu_high, "median_error": self.median_error, "sources": list(self.sources)}

    def sentence(self, predicted_mfu: float) -> str:
        """What the published runs measured and how far this model misses them; "best case" when it
        predicts them too fast (over 5%) or this plan above every one of them."""
        policy = "with activation recompute" if self.recompute else "without activation recompute"
        text = (f"published: {self.rows} runs of models <= 14B on {self.gpu} {policy} measured MFU "
                f"{self.mfu_low:.0%}-{self.mfu_high:.0%} ({', '.join(self.sources)}); this time model "
                f"predicts them a median {self.miss()} (docs/planner.md, bench/bench_plan_small.py)")
        if predicted_mfu > self.mfu_high:
            return text + f": this plan's {predicted_mfu:.0%} is above all of them, a best case"
        if self.median_error > 0.05:
            return text + ": read this plan's MFU as a best case"
        return text

    def miss(self) -> str:
        return f"{abs(self.median_error):.0%} {'fast' if self.median_error > 0 else 'slow'}"

    def best_case(self, predicted_mfu: float) -> bool:
        """The plan's MFU above every published run, or the runs predicted over 5% fast."""
        return predicted_mfu > self.mfu_high or self.median_error > 0.05


def read(plan: dict) -> tuple[Check | None, float, float]:
    """(the plan's published check, its MFU, its days) from a plan's dict (`pretrain plan --json`,
    which may be someone else's file); (None, 0, 0) when it has no check or no fitting layout."""
    pub, head = plan.get("published"), plan.get("headline") or {}
    try:
        check = Check(str(pub["gpu"]), bool(pub["recompute"]), int(pub["rows"]), float(pub["mfu_low"]),
                      float(pub["mfu_high"]), float(pub["median_error"]), tuple(map(str, pub["sources"])))
        mfu, days = float(head["mfu"]), float(head["days"])
    except (TypeError, KeyError, ValueError):  # no check, no layout, or a damaged file
        return None, 0.0, 0.0
    finite = all(map(math.isfinite, (check.mfu_low, check.mfu_high, check.median_error, mfu, days)))
    if not (finite and 0 < check.mfu_low <= check.mfu_high and mfu > 0 and days > 0 and check.rows > 0):
        return None, 0.0, 0.0
    return check, mfu, days


def _software(plan: dict) -> str:
    """What the plan assumed the training code runs, in words: 'fused kernels and FlashAttention-2'."""
    sw = plan.get("software") if isinstance(plan.get("software"), dict) else {}
    kernels = "eager" if sw.get("kernels") == "eager" else "fused"
    attention = ("no flash attention" if sw.get("flash_attention") is False
                 else "FlashAttention-1" if sw.get("attention_kernel") == "flash1" else "FlashAttention-2")
    return f"{kernels} kernels and {attention}"


def first_line(plan: dict) -> str | None:
    """What a plan of a small model says first (the terminal's line under the headline, the report's
    plan section, `headline.published_note` in --json): its MFU against the published runs' range, and the
    days that range would take (time goes as 1/MFU). None without a published check (models over
    14B, GPUs with no such runs, plans written before session 13) or without a fitting layout.
    From the plan's dict alone, so a plan.json of an earlier version is read the same way."""
    check, mfu, days = read(plan)
    if check is None:
        return None
    low, high, rows = check.mfu_low, check.mfu_high, check.rows
    policy = "with" if check.recompute else "without"
    runs = (f"{rows} published runs of models <= 14B on {check.gpu} {policy} activation recompute "
            f"measured MFU {low:.0%}-{high:.0%}")
    at = f"{days * mfu / high:,.1f}-{days * mfu / low:,.1f} days"
    if check.best_case(mfu):
        return (f"MFU {mfu:.1%} is a best case (this time model, with {_software(plan)}, predicts "
                f"those runs a median {check.miss()}): {runs}, "
                f"which would take {at}, not {days:,.1f}")
    return f"MFU {mfu:.1%} ({days:,.1f} days); {runs}, which would take {at}"


def small_runs() -> list[tuple[Run, bool]]:
    """Every published run of a model up to 14B, and whether the time model was built beside it."""
    from pretrain.plan.heldout import held_out
    from pretrain.plan.published import runs

    rows = [(r, True) for r in runs()] + [(r, False) for r in held_out()]
    return [(r, built) for r, built in rows if r.job.shape.params() <= SMALL]


def predicted(run: Run):
    """The run's layout timed by the time model, also where the memory model refuses it (it ran)."""
    from pretrain.plan.search import Estimate, evaluate, time_layout

    est = evaluate(run.job, run.layout)
    if not est.fits:
        est = Estimate(run.layout, None, est.m, est.memory)
        time_layout(run.job, run.layout, est)
    return est


def error(run: Run) -> float:
    """Measured step over predicted step, minus 1: +0.15 is a prediction 15% too fast."""
    return run.measured_step_s / predicted(run).step_s - 1


def source_name(run: Run) -> str:
    return run.source.split(" 20")[0].split()[0]  # "llm-foundry", "torchtitan", "Megatron-LM"


def _as_planned(row_gpu: GPU, planned: GPU) -> GPU:
    """The run's GPU with what the plan changed in its entry (--efficiency, --hardware, --calibrate)
    applied, keeping what the run's source printed of its own cluster (its interconnect)."""
    base = GPUS.get(planned.name, planned)
    changed = {f.name: getattr(planned, f.name) for f in fields(GPU)
               if getattr(planned, f.name) != getattr(base, f.name)}
    return replace(row_gpu, **changed)


@lru_cache(maxsize=32)
def check(gpu: GPU, recompute: bool) -> Check | None:
    """The small published runs on the entry `gpu` is named after with that recompute policy, each
    predicted with `gpu` itself (a --hardware, --efficiency or --calibrate entry, as the plan uses),
    or None when there is none."""
    rows = [replace(r, job=replace(r.job, gpu=_as_planned(r.job.gpu, gpu))) for r, _ in small_runs()
            if r.job.gpu.name == gpu.name and (r.layout.recompute != "none") == recompute]
    if not rows:
        return None
    mfus = [r.measured_mfu for r in rows]
    sources = tuple(dict.fromkeys(source_name(r) for r in rows))
    return Check(gpu.name, recompute, len(rows), min(mfus), max(mfus),
                 statistics.median(error(r) for r in rows), sources)
