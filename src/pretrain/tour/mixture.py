"""Section 1j-1l of the tour: passes over each source of a mixture (`tokens.mixture`), the Chinchilla
budget of a 7B model (`plan.compute`), and model collapse when a Gaussian is refit on its own samples."""

from __future__ import annotations

import math

import numpy as np

from pretrain.tour.parts import Part, Section, Table


def _mixture_and_budget(sec: Section) -> None:
    from pretrain.plan.compute import chinchilla_tokens, gpu_hours, training_flops
    from pretrain.tokens.mixture import epochs_per_source

    weights = {"web": 0.80, "wiki": 0.05, "code": 0.15}
    epochs = epochs_per_source(weights, {"web": 900e9, "wiki": 20e9, "code": 150e9}, 1000e9)
    sec.values["mixture_epochs"] = epochs
    sec.tables.append(
        Table(
            "1j. Mixture over a 1,000B-token budget",
            ["source", "weight", "passes"],
            [[k, w, f"{epochs[k]:.2f}"] for k, w in weights.items()],
        )
    )
    d = chinchilla_tokens(7e9)
    c = training_flops(7e9, d)
    sec.values["chinchilla_tokens_7b"] = d
    sec.values["training_flops_7b"] = c
    sec.values["gpu_hours_7b_400tflops"] = gpu_hours(c, 400e12)
    sec.notes.append(
        f"1k. 7B: {d / 1e9:.0f}B tokens, {c:.3g} FLOPs, "
        f"{sec.values['gpu_hours_7b_400tflops']:,.0f} GPU-hours at 400 TFLOP/s."
    )


def refit_spreads(generations: int = 200, n: int = 20, seed: int = 0) -> list[float]:
    """Model collapse in miniature: fit a Gaussian by maximum likelihood, sample n from the fit, repeat."""
    rng = np.random.default_rng(seed)
    mu, sigma, out = 0.0, 1.0, []
    for _ in range(generations):
        x = rng.normal(mu, sigma, n)
        mu, sigma = float(x.mean()), float(x.std())  # ML variance divides by n: E = (n-1)/n * sigma^2
        out.append(sigma)
    return out


def _collapse(sec: Section) -> None:
    n, gens = 20, 200
    shrink = (n - 1) / n
    sec.values["collapse_shrink_per_generation"] = shrink
    sec.values["collapse_variance_after_200"] = shrink**gens
    sec.values["collapse_spread_after_200"] = math.sqrt(shrink**gens)
    runs = [refit_spreads(gens, n, seed)[-1] for seed in range(5)]
    sec.values["collapse_simulated_spreads"] = runs
    sec.notes.append(
        f"1l. Refit on 20 samples: variance x{shrink:.2f} per generation, "
        f"{shrink**gens:.4%} of it after 200 (spread {math.sqrt(shrink**gens):.4f}); "
        f"five simulated runs end at spreads {', '.join(f'{r:.1e}' for r in runs)}."
    )


PARTS: list[Part] = [
    (("pretrain.tokens.mixture", "pretrain.plan.compute"), _mixture_and_budget),
    ((), _collapse),
]
