"""PNG figures of a plan: the memory bill, ZeRO stages against GPU count, the pipeline schedule with
its bubble, and the checkpoint-interval valley. matplotlib is imported here only, inside functions
(Agg backend, no display needed), so the rest of plan/ stays free of it.
"""

from __future__ import annotations

from pathlib import Path

from pretrain.plan import memory, parallel, reliability
from pretrain.plan.search import Job
from pretrain.untrusted import plot_label

PIPELINE_STAGES_DRAWN = 32  # more rows are not legible; the grid grows as stages x (stages + m)
BLUE, GREEN, AMBER, RED, GREY = "#2563eb", "#16a34a", "#d97706", "#dc2626", "#6b7280"


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def memory_figure(job: Job, plan: dict):
    """Bars: one GPU holding everything (three activation policies) and the chosen layout."""
    plt = _plt()
    shape, n = job.shape, job.shape.params()
    state = memory.training_state_bytes(n, job.accounting, job.n_gpus) / 1e9
    bars = {f"1 GPU, {p}": (state, memory.activation_bytes(shape, recompute=r, flash=f) / 1e9)
            for p, r, f in (("naive", "none", False), ("flash", "none", True),
                            ("full recompute", "full", True))}
    lay = plan.get("layout")
    if lay and "memory_gb" in lay:
        g = lay["memory_gb"]
        bars["chosen layout"] = (g["state"], g["activations"] + g["logits"])
    fig, ax = plt.subplots(figsize=(7, 3.8))
    names = list(bars)
    ax.bar(names, [v[0] for v in bars.values()], color=BLUE, label="training state")
    ax.bar(names, [v[1] for v in bars.values()], bottom=[v[0] for v in bars.values()], color=AMBER,
           label="activations (+ logits)")
    ax.axhline(job.gpu.memory_gb, color=RED, ls="--",
               label=f"one {plot_label(job.gpu.name)} ({job.gpu.memory_gb:g} GB)")
    ax.set_ylabel("GB per GPU")
    ax.set_title(f"{plot_label(shape.name)}: memory per GPU")
    ax.legend(frameon=False, fontsize=8)
    ax.tick_params(axis="x", labelsize=8)
    return fig


def zero_figure(job: Job):
    plt = _plt()
    n = job.shape.params()
    counts = [2**i for i in range(0, 15)]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for stage, color in zip(range(4), (GREY, BLUE, GREEN, RED)):
        ax.loglog(counts, [memory.zero_memory_per_gpu(n, stage, g) / 1e9 for g in counts], "o-", ms=3,
                  color=color, label=f"ZeRO stage {stage}")
    ax.axhline(job.gpu.memory_gb, color=GREY, ls="--")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("GPUs sharing the state")
    ax.set_ylabel("training state per GPU (GB)")
    ax.set_title(f"{plot_label(job.shape.name)}: ZeRO stages against GPU count")
    ax.legend(frameon=False, fontsize=8)
    return fig


def pipeline_figure(p: int, m: int):
    """The GPipe grid for p stages and m micro-batches (both capped for legibility and bounded
    memory: a report draws the pp of a plan.json someone else wrote) with its bubble."""
    plt = _plt()
    from matplotlib.colors import ListedColormap

    m = max(1, min(m, 16))
    p = max(1, min(p, PIPELINE_STAGES_DRAWN))  # a plan.json may say any pp: 2,000 took 6 GB
    grid = parallel.pipeline_schedule(p, m)
    kind = [[(v > 0) - (v < 0) + 1 for v in row] for row in grid]  # 0 backward, 1 idle, 2 forward
    fig, ax = plt.subplots(figsize=(8, 0.5 * p + 1.2))
    ax.imshow(kind, cmap=ListedColormap(["#86efac", "#ffffff", "#93c5fd"]), aspect="auto", vmin=0, vmax=2)
    ax.set_yticks(range(p), [f"stage {i + 1}" for i in range(p)])
    ax.set_xlabel("time step (blue forward, green backward, white idle)")
    ax.set_title(f"{p} stages, {m} micro-batches: bubble {parallel.pipeline_bubble(p, m):.1%} of wall time")
    return fig


def checkpoint_figure(mtbf_s: float, checkpoint_s: float):
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 3.4))
    t_star = reliability.young_interval(checkpoint_s, mtbf_s)
    ts = [t_star * 10 ** (k / 50 - 1.5) for k in range(151)]
    for c, color in ((checkpoint_s, BLUE), (checkpoint_s / 6, GREEN)):
        waste = [reliability.waste_fraction(t, c, mtbf_s) for t in ts]
        ax.semilogx(ts, waste, color=color, label=f"save {c:.0f} s")
        best = reliability.young_interval(c, mtbf_s)
        ax.plot(best, reliability.waste_fraction(best, c, mtbf_s), "o", color=color)
    ax.set_ylim(0, 0.5)
    ax.set_xlabel("seconds between checkpoints")
    ax.set_ylabel("share of time wasted")
    ax.set_title(f"Checkpoint interval valley (cluster MTBF {mtbf_s / 3600:.1f} h)")
    ax.legend(frameon=False)
    return fig


def write_figures(plan: dict, job: Job, out_dir: str | Path) -> list[Path]:
    """Draw the four figures for this plan into `out_dir`; return the paths written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    lay = plan.get("layout") or {}
    p = lay.get("layout", {}).get("pp", 1) if lay else 1
    p, m = (p, lay.get("micro_batches") or 8) if p > 1 else (4, 8)  # no pipeline: draw the lesson's 4 × 8
    rel = plan.get("reliability") or {"cluster_mtbf_s": 3 * 3600.0, "checkpoint_s": 60.0}
    figs = {"memory.png": memory_figure(job, plan), "zero.png": zero_figure(job),
            "pipeline.png": pipeline_figure(p, m),
            "checkpoint.png": checkpoint_figure(rel["cluster_mtbf_s"], rel["checkpoint_s"])}
    plt = _plt()
    paths = []
    for name, fig in figs.items():
        path = out / name
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths
