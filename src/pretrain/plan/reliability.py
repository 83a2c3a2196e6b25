"""Reliability: failures from an MTBF, the checkpoint interval (Young 1974, Daly 2006), the share of
time wasted, and goodput. Every function is unit-agnostic: pass C, M, T in the same unit.

- A cluster of n independent GPUs, each failing every M_gpu on average, fails every M_gpu/n.
- Young (1974): the interval between checkpoints that minimizes waste is T* = √(2·C·M), with C the time
  to write one checkpoint and M the cluster's MTBF.
- Daly (2006), higher-order: τ = √(2CM)·[1 + (1/3)·√(C/(2M)) + (1/9)·C/(2M)] − C for C < 2M, else M.
- Waste (first order, the lesson sec. 5d): C/T for saving plus T/(2M) redone per failure, plus R/M when
  each failure also costs a restart of R. Goodput = 1 − waste.
"""

from __future__ import annotations

import math

from pretrain.errors import UserError


def cluster_mtbf(mtbf_per_gpu: float, n_gpus: int) -> float:
    """Mean time between failures of the whole cluster: the per-GPU MTBF divided by the GPU count."""
    if n_gpus < 1 or mtbf_per_gpu <= 0:
        raise UserError(f"need n_gpus >= 1 and a positive MTBF, got {n_gpus}, {mtbf_per_gpu}")
    return mtbf_per_gpu / n_gpus


def mtbf_from_failures(duration: float, failures: int) -> float:
    """Observed MTBF: run length over the number of failures (Llama 3: 54 days, 419 → 11,135 s)."""
    if failures <= 0:
        raise UserError(f"need at least one failure to estimate an MTBF, got {failures}")
    return duration / failures


def expected_failures(duration: float, mtbf: float) -> float:
    return duration / mtbf


def young_interval(C: float, M: float) -> float:
    """T* = √(2·C·M) (Young 1974)."""
    _check(C, M)
    return math.sqrt(2 * C * M)


def daly_interval(C: float, M: float) -> float:
    """Daly 2006's higher-order optimum: √(2CM)·[1 + ⅓√(C/2M) + (1/9)(C/2M)] − C, or M when C ≥ 2M."""
    _check(C, M)
    if C >= 2 * M:
        return M
    r = C / (2 * M)
    return math.sqrt(2 * C * M) * (1 + math.sqrt(r) / 3 + r / 9) - C


def waste_fraction(T: float, C: float, M: float, restart: float = 0.0) -> float:
    """Share of time lost with a checkpoint every T: C/T + T/(2M) + restart/M (first order)."""
    _check(C, M)
    if T <= 0:
        raise UserError(f"checkpoint interval must be positive, got {T}")
    return C / T + T / (2 * M) + restart / M


def goodput(T: float, C: float, M: float, restart: float = 0.0) -> float:
    """Share of wall time that advances training (never below 0)."""
    return max(0.0, 1.0 - waste_fraction(T, C, M, restart))


def _check(C: float, M: float) -> None:
    if C <= 0 or M <= 0:
        raise UserError(f"checkpoint cost and MTBF must be positive, got C={C}, M={M}")
