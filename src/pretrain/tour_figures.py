"""The lesson's twelve figures, drawn from the project's real code (`pretrain tour --figures DIR`).

Each figure is one small function that asks the library for its numbers (MinHash, LSH, the planner,
the float formats, the trainer's clip) and plots them with matplotlib's Agg backend. Figures whose
module is not installed are skipped. `draw_figures` writes NAME.png files and an index.md with
each figure's caption.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np

from pretrain.tour import module_available

BLUE, RED, GREEN, AMBER, GREY = "#2563eb", "#dc2626", "#059669", "#d97706", "#9ca3af"


def _minhash_convergence(ax) -> str:
    from pretrain.curate.minhash import MinHasher, estimate_jaccard

    pool = np.random.default_rng(1).integers(0, 2**63, 1000, dtype=np.int64).astype(np.uint64)
    ks = np.unique(np.logspace(0, np.log10(256), 30).astype(int))
    for j, color in ((0.2, BLUE), (0.5, GREEN), (0.8, RED)):
        shared = int(round(2 * j * 300 / (1 + j)))  # |A| = |B| = 300 sharing `shared`: J = s / (600 - s)
        a, b = pool[:300], pool[300 - shared : 600 - shared]
        true = len(set(a.tolist()) & set(b.tolist())) / len(set(a.tolist()) | set(b.tolist()))
        est = [
            estimate_jaccard(
                MinHasher(int(k), 1, seed=3).signature(a), MinHasher(int(k), 1, seed=3).signature(b)
            )
            for k in ks
        ]
        ax.semilogx(ks, est, "o-", ms=3, color=color, label=f"J = {true:.2f}")
        ax.axhline(true, color=color, ls="--", lw=1)
    ax.set(
        xlabel="hash functions k",
        ylabel="MinHash estimate",
        title="MinHash estimates settle on the true Jaccard",
    )
    ax.legend(frameon=False)
    return (
        "Few hashes give a coarse, jumpy estimate; by k = 128 each pair sits within a few "
        "hundredths of its J."
    )


def _lsh_s_curve(ax) -> str:
    from pretrain.curate.minhash import candidate_probability, threshold

    s = np.linspace(0, 1, 201)
    for (b, r), color in (((20, 5), BLUE), ((14, 8), GREEN), ((9, 13), RED)):
        ax.plot(s, candidate_probability(s, b, r), color=color, label=f"{b} bands x {r} rows")
        ax.axvline(threshold(b, r), color=color, ls="--", lw=1)
    ax.set(xlabel="Jaccard similarity s", ylabel="P(compared)", title="LSH: 1 - (1 - s^r)^b is an S-curve")
    ax.legend(frameon=False)
    return (
        "Pairs left of the cliff are almost never compared, pairs right of it nearly always; "
        "(1/b)^(1/r) marks it."
    )


def _model_collapse(ax) -> str:
    from pretrain.tour import refit_spreads

    for seed, color in zip(range(5), (BLUE, GREEN, AMBER, RED, GREY)):
        ax.semilogy(range(1, 201), refit_spreads(200, 20, seed), color=color, lw=1)
    t = np.arange(1, 201)
    ax.semilogy(t, np.sqrt(0.95**t), "k--", label="average: sqrt(0.95^t)")
    ax.set(
        xlabel="generation",
        ylabel="fitted spread",
        title="Refitting on your own samples: the spread collapses",
    )
    ax.legend(frameon=False)
    return (
        "Each run refits a bell curve on 20 of its own samples; on average the variance shrinks "
        "0.95x per generation."
    )


def _memory_7b(ax) -> str:
    from pretrain.plan.memory import activation_bytes_per_layer, training_state_bytes

    state = training_state_bytes(7e9) / 1e9
    acts = {"naive": {}, "no stored scores": {"flash": True}, "checkpointed": {"recompute": "full"}}
    x = np.arange(len(acts))
    act = [activation_bytes_per_layer(4096, 1, 4096, 32, **kw) * 32 / 1e9 for kw in acts.values()]
    ax.bar(x, [state] * 3, color=BLUE, width=0.55, label="weights, gradients, master, Adam (16 B/param)")
    ax.bar(x, act, bottom=state, color=AMBER, width=0.55, label="activations at 4,096 tokens")
    for xi, a in zip(x, act):
        ax.text(xi, state + a + 3, f"{state + a:.0f} GB", ha="center")
    ax.axhline(80, color=RED, ls="--", label="one 80 GB GPU")
    ax.set_xticks(x, list(acts))
    ax.set(ylabel="GB on one GPU", ylim=(0, 245), title="Training a 7B model on one GPU: it does not fit")
    ax.legend(frameon=False, fontsize=8)
    return "Even with checkpointed activations the 112 GB of training state alone is over one 80 GB GPU."


def _zero_stages(ax) -> str:
    from pretrain.plan.memory import zero_memory_per_gpu

    ns = 2 ** np.arange(0, 11)
    names = [
        "stage 0: data parallel",
        "stage 1: shard optimizer",
        "stage 2: + gradients",
        "stage 3 (FSDP): + weights",
    ]
    for stage, color in zip(range(4), (GREY, BLUE, GREEN, RED)):
        ax.loglog(
            ns,
            [zero_memory_per_gpu(7e9, stage, int(n)) / 1e9 for n in ns],
            "o-",
            ms=3,
            color=color,
            label=names[stage],
        )
    ax.axhline(80, color="#4b5563", ls="--")
    ax.set_xscale("log", base=2)
    ax.set(
        xlabel="GPUs sharing the state",
        ylabel="GB per GPU",
        title="ZeRO: sharding divides the 16 bytes per parameter",
    )
    ax.legend(frameon=False, fontsize=8)
    return "Stages 1 and 2 level off at what they do not shard; only stage 3 keeps falling with more GPUs."


def _pipeline_schedule(ax) -> str:
    from matplotlib.colors import ListedColormap

    from pretrain.plan.parallel import idle_cells, pipeline_bubble, pipeline_schedule

    grid = np.array(pipeline_schedule(4, 8))
    ax.imshow(
        np.sign(grid) + 1,
        cmap=ListedColormap(["#86efac", "#ffffff", "#93c5fd"]),
        aspect="auto",
        vmin=0,
        vmax=2,
    )
    for (row, col), v in np.ndenumerate(grid):
        if v:
            ax.text(col, row, str(abs(v)), ha="center", va="center", fontsize=7)
    ax.set_yticks(range(4), [f"GPU {i + 1}" for i in range(4)])
    ax.set(
        xlabel="time step (blue forward, green backward, white idle)",
        title=f"GPipe, 4 stages x 8 micro-batches: {idle_cells(grid.tolist())} of {grid.size} cells idle "
        f"({pipeline_bubble(4, 8):.0%})",
    )
    return "The white corners are the bubble: the line fills and drains while most stages wait."


def _bubble_fraction(ax) -> str:
    from pretrain.plan.parallel import pipeline_bubble

    ms = np.arange(1, 257)
    for p, color in zip((2, 4, 8, 16), (BLUE, GREEN, AMBER, RED)):
        ax.semilogx(ms, [pipeline_bubble(p, int(m)) for m in ms], color=color, label=f"{p} stages")
    ax.axhline(0.1, color=GREY, ls="--")
    ax.set(
        xlabel="micro-batches",
        ylabel="share of time idle",
        title="The pipeline bubble: (p - 1) / (m + p - 1)",
    )
    ax.legend(frameon=False)
    return "Keeping the bubble under 10% takes about ten times as many micro-batches as stages."


def _float_ranges(ax) -> str:
    from pretrain.numerics import FORMATS

    for i, f in enumerate(FORMATS):
        lo, mid, hi = math.log10(f.min_subnormal), math.log10(f.min_normal), math.log10(f.max_value)
        ax.barh(i, mid - lo, left=lo, color="#bfdbfe", height=0.6)
        ax.barh(i, hi - mid, left=mid, color=BLUE, height=0.6)
    ax.set_yticks(range(len(FORMATS)), [f.name for f in FORMATS])
    ax.invert_yaxis()
    ax.set(
        xlabel="log10 magnitude (light: subnormals, dark: normal range)",
        title="bf16 keeps all of fp32's range",
    )
    return "Exponent bits set the range: bf16 matches fp32, fp16 and fp8 cover a sliver of it."


def _loss_scaling(ax) -> str:
    from pretrain.numerics import FP16, quantize

    grads = np.exp(np.random.default_rng(0).normal(np.log(2.0**-22), 3.0, 200_000))
    lost = float(np.mean(quantize(grads, FP16) == 0))
    lost_scaled = float(np.mean(quantize(grads * 2.0**16, FP16) == 0))
    bins = np.arange(-50, 20, 0.5)
    ax.hist(np.log2(grads), bins=bins, color=GREY, alpha=0.8, label=f"unscaled: {lost:.0%} become 0 in fp16")
    ax.hist(
        np.log2(grads * 2.0**16),
        bins=bins,
        color=BLUE,
        alpha=0.6,
        label=f"x 2^16: {lost_scaled:.2%} become 0",
    )
    ax.axvspan(-50, math.log2(FP16.min_subnormal / 2), color=RED, alpha=0.12)
    ax.axvline(math.log2(FP16.max_value), color=RED, ls="--")
    ax.set(
        xlabel="gradient size, log2", ylabel="count", title="Loss scaling slides gradients into fp16's range"
    )
    ax.legend(frameon=False, fontsize=8)
    return "Multiplying by 2^16 shifts every gradient 16 binades right, clear of fp16's flush-to-zero region."


def _master_weights(ax) -> str:
    from pretrain.numerics import BF16, FP16, FP32, accumulate_updates

    for fmt, color, ls in ((FP32, BLUE, "-"), (BF16, RED, "-"), (FP16, AMBER, ":")):
        ax.plot(
            range(1, 1001), accumulate_updates(1.0, 1e-4, 1000, fmt), color=color, ls=ls, lw=2, label=fmt.name
        )
    ax.set(xlabel="update step (+0.0001 each)", ylabel="weight", title="Tiny updates vanish in 16 bits")
    ax.legend(frameon=False)
    return "fp32 climbs to 1.1; in bf16 and fp16 every update is under half a gap and rounds away."


def _bad_batch(ax) -> str:
    from pretrain.tour import bad_batch_losses

    for clip, color, label in ((None, RED, "no clipping"), (1.0, BLUE, "clip global norm at 1")):
        ax.semilogy(np.maximum(bad_batch_losses(clip), 1e-12), color=color, label=label)
    ax.axvline(30, color=GREY, ls="--")
    ax.set(
        xlabel="training step",
        ylabel="clean held-out loss",
        title="One bad batch: clipping limits the damage",
    )
    ax.legend(frameon=False)
    return (
        "A corrupted batch at step 30 sends the unclipped run past a loss of 6,000; clipped, it "
        "peaks near 0.01."
    )


def _checkpoint_interval(ax) -> str:
    from pretrain.plan.reliability import waste_fraction, young_interval

    T = np.logspace(0, np.log10(300), 200)
    for cost, color, label in ((1.0, BLUE, "1-minute save"), (1 / 6, GREEN, "10-second save")):
        w = np.array([waste_fraction(t, cost, 180.0) for t in T])
        ax.semilogx(T, np.where(w <= 0.5, w, np.nan), color=color, label=label)
        best = young_interval(cost, 180.0)
        ax.plot(best, waste_fraction(best, cost, 180.0), "o", color=color)
        ax.annotate(
            f"{best:.1f} min, {waste_fraction(best, cost, 180.0):.1%}",
            (best, waste_fraction(best, cost, 180.0)),
            textcoords="offset points",
            xytext=(6, -14),
            color=color,
        )
    ax.set(
        xlabel="minutes between checkpoints (failure every 180 min)",
        ylabel="share of time wasted",
        ylim=(0, 0.5),
        title="Checkpoint interval: a valley at sqrt(2 C M)",
    )
    ax.legend(frameon=False)
    return (
        "Saving too often wastes time saving, too rarely wastes work redone; a faster save lowers the valley."
    )


# name -> (modules it needs, drawing function, figure size)
FIGURES: dict[str, tuple[tuple[str, ...], Callable, tuple[float, float]]] = {
    "minhash_convergence": (("pretrain.curate.minhash",), _minhash_convergence, (6, 3.4)),
    "lsh_s_curve": (("pretrain.curate.minhash",), _lsh_s_curve, (6, 3.4)),
    "model_collapse": ((), _model_collapse, (6, 3.4)),
    "memory_7b": (("pretrain.plan.memory",), _memory_7b, (6.4, 3.8)),
    "zero_stages": (("pretrain.plan.memory",), _zero_stages, (6, 3.6)),
    "pipeline_schedule": (("pretrain.plan.parallel",), _pipeline_schedule, (8, 2.8)),
    "bubble_fraction": (("pretrain.plan.parallel",), _bubble_fraction, (6, 3.4)),
    "float_ranges": (("pretrain.numerics",), _float_ranges, (6.4, 3.0)),
    "loss_scaling": (("pretrain.numerics",), _loss_scaling, (6.4, 3.4)),
    "master_weights": (("pretrain.numerics",), _master_weights, (6, 3.2)),
    "bad_batch": (("pretrain.train.stability",), _bad_batch, (6, 3.4)),
    "checkpoint_interval": (("pretrain.plan.reliability",), _checkpoint_interval, (6, 3.4)),
}

# the lesson's section each figure illustrates (`pretrain tour --section N --figures DIR` draws those)
SECTION_OF = {"minhash_convergence": "1", "lsh_s_curve": "1", "model_collapse": "1", "memory_7b": "2",
              "zero_stages": "2", "pipeline_schedule": "3", "bubble_fraction": "3", "float_ranges": "4",
              "loss_scaling": "4", "master_weights": "4", "bad_batch": "5", "checkpoint_interval": "5"}


def figures_of(sections: list[str] | None) -> list[str] | None:
    """The figures of these sections (None: every figure)."""
    return [n for n in FIGURES if SECTION_OF[n] in sections] if sections else None


def draw_figures(out_dir: str | Path, only: list[str] | None = None) -> list[Path]:
    """Write each available figure as OUT/NAME.png, plus OUT/index.md with the captions."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written, index = [], ["# The lesson's figures, drawn by pretrain's modules", ""]
    for name, (needs, draw, size) in FIGURES.items():
        if (only and name not in only) or not all(module_available(m) for m in needs):
            continue
        fig, ax = plt.subplots(figsize=size)
        caption = draw(ax)
        fig.tight_layout()
        path = out / f"{name}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
        index += [f"![{name}]({name}.png)", "", caption, ""]
    (out / "index.md").write_text("\n".join(index))
    return written
