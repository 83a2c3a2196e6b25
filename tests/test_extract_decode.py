"""The structure decoders tried for `blocks` (issue 19, session 6): `region_flags` against a brute
force, `core_flags` against a plain reading of its rule."""

from __future__ import annotations

import numpy as np

from pretrain.curate.extract_blocks import core_flags, region_flags


def brute_force(p: np.ndarray, bias: float, t_in: float, t_out: float) -> np.ndarray:
    """Every contiguous run scored in plain Python; the first of the best (strictly positive) wins."""
    q = [min(max(float(v), 1e-6), 1 - 1e-6) for v in p]
    s = [np.log(v / (1 - v)) - bias for v in q]
    best, run = 0.0, None
    for lo in range(len(s)):
        for hi in range(lo, len(s)):
            total = sum(s[lo : hi + 1])
            if total > best + 1e-9:
                best, run = total, (lo, hi)
    return np.array(
        [v >= (t_in if run and run[0] <= i <= run[1] else t_out) for i, v in enumerate(q)], dtype=bool
    )


def test_region_equals_the_brute_force_maximum_sum_run():
    rng = np.random.default_rng(0)
    for n in [0, 1, 2, 5, 17, 40] * 20:
        p = rng.beta(0.6, 0.6, size=n)
        bias = float(rng.choice([-0.5, 0.0, 0.25, 1.0]))
        got = region_flags(p, bias, 0.45, 0.8)
        assert got.tolist() == brute_force(p, bias, 0.45, 0.8).tolist(), (p, bias)


def test_far_confident_block_needs_the_outside_threshold():
    # an article (high p) with a weak break inside, then a lone teaser far below it
    p = np.array([0.1, 0.95, 0.9, 0.4, 0.97, 0.92, 0.05, 0.1, 0.02, 0.7, 0.1])
    flags = region_flags(p, 0.0, 0.35, 0.8)
    assert flags.tolist() == [False, True, True, True, True, True, False, False, False, False, False]
    assert (region_flags(np.full(4, 0.2), 0.0, 0.5, 0.1) == np.full(4, True)).all()  # no run: t_out


def core_by_hand(p, chars, conf, min_chars, margin, t_in, t_out):
    core = [i for i in range(len(p)) if p[i] >= conf and chars[i] >= min_chars]
    if not core:
        return [bool(v >= t_in) for v in p]
    lo, hi = core[0] - margin, core[-1] + margin
    return [bool(v >= (t_in if lo <= i <= hi else t_out)) for i, v in enumerate(p)]


def test_core_equals_its_rule_read_by_hand():
    rng = np.random.default_rng(1)
    for n in [0, 1, 3, 12, 40] * 20:
        p, chars = rng.beta(0.6, 0.6, size=n), rng.integers(1, 400, size=n)
        m = int(rng.integers(0, 3))
        got = core_flags(p, chars, 0.9, 80, m, 0.3, 0.7).tolist()
        assert got == core_by_hand(p, chars, 0.9, 80, m, 0.3, 0.7)
    # short blocks do not make the core; outside it a doubtful block (0.65) goes, a sure one (0.96) stays
    p = np.array([0.6, 0.97, 0.4, 0.99, 0.65, 0.96])
    chars = np.array([30, 300, 90, 500, 60, 40])
    assert core_flags(p, chars, 0.95, 80, 0, 0.3, 0.7).tolist() == [False, True, True, True, False, True]
    # no core on the page: t_in, or t_none when given
    assert core_flags(p, chars, 0.995, 80, 0, 0.3, 0.7).tolist() == [True] * 6
    assert core_flags(p, chars, 0.995, 80, 0, 0.3, 0.7, t_none=0.5).tolist() == [1, 1, 0, 1, 1, 1]
