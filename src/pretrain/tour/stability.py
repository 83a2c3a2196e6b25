"""Section 5 of the tour: spike detection and global-norm clipping (`train.stability`), a corrupted
batch with and without clipping, and the checkpoint interval (`plan.reliability`)."""

from __future__ import annotations

import numpy as np

from pretrain.tour.parts import Part, Section, Table


def _spikes(sec: Section) -> None:
    from pretrain.train.stability import detect_spikes

    losses = [3.0, 2.9, 2.8, 2.8, 2.7, 8.5, 4.0, 2.7]
    sec.values["spikes"] = detect_spikes(losses, factor=2.0, window=4)
    flagged = sec.values["spikes"]
    said = (f"step {flagged[0]} is flagged" if len(flagged) == 1
            else f"steps {', '.join(map(str, flagged))} are flagged" if flagged else "no step is flagged")
    sec.notes.append(f"5a. Losses {', '.join(f'{x:.1f}' for x in losses)} at steps 0 to {len(losses) - 1}: "
                     f"{said} (more than twice the median of the 4 before it).")


def _clipping(sec: Section) -> None:
    import torch

    from pretrain.train.stability import clip_grad_norm_

    # Two "GPUs'" shards (1, 2) and (2, 4) of one gradient, as two parameters.
    params = [torch.zeros(2, requires_grad=True), torch.zeros(2, requires_grad=True)]
    for p, g in zip(params, ([1.0, 2.0], [2.0, 4.0])):
        p.grad = torch.tensor(g)
    norm = clip_grad_norm_(params, 1.0)
    sec.values["clip_norm"] = float(norm)
    sec.values["clip_shards_after"] = [[round(float(x), 6) for x in p.grad] for p in params]
    after = " and ".join(f"({', '.join(f'{x:g}' for x in g)})" for g in sec.values["clip_shards_after"])
    sec.notes.append(f"5b. Shards (1, 2) and (2, 4): norm {float(norm):g}; clipped at 1 they become {after}.")


def bad_batch_losses(clip: float | None, steps: int = 60, bad_step: int = 30, lr: float = 0.1) -> list[float]:
    """SGD on y = 3x with one corrupted batch (labels -300x) at `bad_step`, clipped by the trainer's
    `clip_grad_norm_` when `clip` is set; the clean held-out loss after every step.

    Data come from numpy's default_rng(0) in the lesson's order (256 held-out x, then 32 per step),
    so the peak is the lesson's.
    """
    import torch

    from pretrain.train.stability import clip_grad_norm_

    rng = np.random.default_rng(0)
    x_eval = torch.from_numpy(rng.standard_normal(256))
    w = torch.tensor([2.5], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.SGD([w], lr=lr)
    losses = []
    for t in range(steps):
        x = torch.from_numpy(rng.standard_normal(32))
        y = -300 * x if t == bad_step else 3 * x
        opt.zero_grad()
        torch.mean((w * x - y) ** 2).backward()
        if clip is not None:
            clip_grad_norm_([w], clip)
        opt.step()
        with torch.no_grad():
            losses.append(float(torch.mean((w * x_eval - 3 * x_eval) ** 2)))
    return losses


def _bad_batch(sec: Section) -> None:
    free, clipped = bad_batch_losses(None), bad_batch_losses(1.0)
    sec.values["bad_batch_peak_no_clip"] = max(free[30:])
    sec.values["bad_batch_peak_clip_1"] = max(clipped[30:])
    sec.notes.append(
        f"5b. One corrupted batch at step 30: peak held-out loss {max(free[30:]):,.0f} without "
        f"clipping, {max(clipped[30:]):.4f} with the global norm clipped at 1."
    )


def _checkpoint_interval(sec: Section) -> None:
    from pretrain.plan.reliability import waste_fraction, young_interval

    rows = []
    # Each interval is printed at the lesson's own rounding: 18.97 min for a 1-minute save, 7.7 min
    # (not 7.75) for a 10-second one, so a reader holding the lesson sees the same figures.
    for cost, places in ((5.0, 2), (1.0, 2), (1 / 6, 1)):
        t = young_interval(cost, 180.0)
        rows.append((cost, t, waste_fraction(t, cost, 180.0), places))
    sec.values["young_1min_180"] = rows[1][1:3]
    sec.values["young_10s_180"] = rows[2][1:3]
    sec.tables.append(
        Table(
            "5d. Checkpoint every sqrt(2CM), failures every 180 min",
            ["save time (min)", "best interval (min)", "time wasted"],
            [[f"{c:.3g}", f"{t:.{n}f}", f"{w:.1%}"] for c, t, w, n in rows],
        )
    )


PARTS: list[Part] = [
    (("pretrain.train.stability",), _spikes),
    (("pretrain.train.stability",), _clipping),
    (("pretrain.train.stability",), _bad_batch),
    (("pretrain.plan.reliability",), _checkpoint_interval),
]
