"""quantize/encode against torch's own dtypes, bit for bit, over millions of float32 values.

The independent truth is torch's conversion kernels (c10 Float8_e4m3fn / Float8_e5m2 / Half /
BFloat16): every float32 bit pattern in a strided sweep, the whole fp32 subnormal range in a
stride, every representable value of each target format with its rounding midpoints and their
float32 neighbours (where ties-to-even decides), and random bit patterns.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from pretrain.numerics import BF16, FP8_E4M3, FP8_E5M2, FP16, FP32, FloatFormat, decode, encode, quantize

torch = pytest.importorskip("torch")

TORCH = {
    "bf16": (BF16, torch.bfloat16, torch.int16, np.uint16),
    "fp16": (FP16, torch.float16, torch.int16, np.uint16),
    "e4m3": (FP8_E4M3, torch.float8_e4m3fn, torch.uint8, np.uint8),
    "e5m2": (FP8_E5M2, torch.float8_e5m2, torch.uint8, np.uint8),
}


def _format_edges(fmt: FloatFormat) -> np.ndarray:
    """Every value of `fmt`, the midpoints between neighbours, and the float32s just either side."""
    codes = np.arange(2**fmt.bits, dtype=np.uint64)
    vals = np.unique(decode(codes, fmt))
    vals = vals[np.isfinite(vals)]
    mids = (vals[:-1] + vals[1:]) / 2
    top = fmt.max_value + fmt.epsilon * 2.0**fmt.max_exponent / 2  # the overflow midpoint
    with np.errstate(over="ignore"):  # bf16's overflow midpoint is past float32's range: inf
        pts = np.concatenate([vals, mids, [top, 2 * top, 1e30, 3.4e38]]).astype(np.float32)
    up = np.nextafter(pts, np.float32(np.inf))
    down = np.nextafter(pts, np.float32(-np.inf))
    return np.concatenate([pts, up, down, -pts, -up, -down])


@pytest.fixture(scope="module")
def sweep() -> np.ndarray:
    rng = np.random.default_rng(1234)
    strided = np.arange(0, 2**32, 1499, dtype=np.uint64).astype(np.uint32)  # ~2.9M patterns, all exponents
    subnormals = np.arange(0, 2**23, 97, dtype=np.uint32)  # fp32 subnormals, both signs below
    specials = np.array(
        [0x0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F7FFFFF, 0x00800000], dtype=np.uint32
    )
    random = rng.integers(0, 2**32, 1_000_000, dtype=np.uint64).astype(np.uint32)
    bits = np.concatenate([strided, subnormals, subnormals | np.uint32(0x80000000), specials, random])
    edges = np.concatenate([_format_edges(f) for f, *_ in TORCH.values()])
    return np.concatenate([bits.view(np.float32), edges])


@pytest.mark.parametrize("name", list(TORCH))
def test_float32_to_format_bit_for_bit(sweep: np.ndarray, name: str) -> None:
    fmt, dtype, view, np_uint = TORCH[name]
    assert sweep.size > 4_000_000
    theirs = torch.from_numpy(sweep).to(dtype).view(view).numpy().view(np_uint).astype(np.uint64)
    ours = encode(sweep, fmt)
    nan = np.isnan(sweep)
    # NaN payloads are implementation detail; a NaN must stay NaN in both.
    assert np.isnan(decode(theirs[nan], fmt)).all() and np.isnan(decode(ours[nan], fmt)).all()
    bad = np.flatnonzero((ours != theirs) & ~nan)
    assert bad.size == 0, (
        f"{bad.size} mismatches, first: {sweep[bad[:5]]!r} ours={ours[bad[:5]]} torch={theirs[bad[:5]]}"
    )
    # And the values: quantize equals torch's value for every non-NaN input.
    q = quantize(sweep[~nan], fmt)
    t = torch.from_numpy(sweep[~nan]).to(dtype).to(torch.float64).numpy()
    np.testing.assert_array_equal(q, t)


def test_e4m3_saturates_and_e5m2_overflows_like_torch() -> None:
    x = np.array([448, 463.9, 464, 464.1, 470, 480, 1e6, np.inf, -np.inf, -500], dtype=np.float32)
    e4 = torch.from_numpy(x).to(torch.float8_e4m3fn).float().numpy()
    np.testing.assert_array_equal(quantize(x, FP8_E4M3), e4)
    assert list(quantize(x, FP8_E4M3)) == [448] * 8 + [-448, -448]
    y = np.array([57344, 61439, 61440, 65536, 1e9], dtype=np.float32)
    e5 = torch.from_numpy(y).to(torch.float8_e5m2).float().numpy()
    np.testing.assert_array_equal(quantize(y, FP8_E5M2), e5)
    assert np.isinf(quantize(y, FP8_E5M2)[2:]).all()


@pytest.mark.parametrize("name", list(TORCH))
def test_float64_through_fp32_matches_torch(name: str) -> None:
    """torch rounds a float64 tensor to 16/8 bits via float32; through_fp32=True reproduces it."""
    fmt, dtype, *_ = TORCH[name]
    rng = np.random.default_rng(7)
    x = np.concatenate(
        [
            rng.standard_normal(200_000) * 10.0 ** rng.integers(-12, 6, 200_000),
            _format_edges(fmt).astype(np.float64) * (1 + 2.0**-40),
        ]
    )
    theirs = torch.from_numpy(x).to(dtype).to(torch.float64).numpy()
    np.testing.assert_array_equal(quantize(x, fmt, through_fp32=True), theirs)


def test_fp32_format_matches_float64_to_float32_cast() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal(500_000) * 10.0 ** rng.integers(-46, 39, 500_000)
    with np.errstate(over="ignore"):  # numpy's cast overflows to inf, as fp32 must
        expected = x.astype(np.float32).astype(np.float64)
    np.testing.assert_array_equal(quantize(x, FP32), expected)


def _exact_round(x: float, fmt: FloatFormat, values: np.ndarray, codes: np.ndarray) -> float:
    """Round-to-nearest-even by exhaustive comparison in exact rational arithmetic."""
    fx = Fraction(abs(x))
    i = int(np.searchsorted(values, abs(x)))
    lo, hi = values[max(i - 1, 0)], values[min(i, values.size - 1)]
    if fx >= Fraction(hi):
        lo = hi
    dl, dh = fx - Fraction(lo), Fraction(hi) - fx
    if dl < dh or (dl == dh and codes[values == lo][0] % 2 == 0):
        r = lo
    else:
        r = hi
    return float(np.copysign(r, x))


@pytest.mark.parametrize("fmt", [BF16, FP16, FP8_E4M3, FP8_E5M2], ids=lambda f: f.name)
def test_float64_rounds_once_exactly(fmt: FloatFormat) -> None:
    """Without through_fp32, a float64 is rounded once (a value just past a tie goes up; torch's
    double rounding would send it to even)."""
    codes = np.arange(2 ** (fmt.bits - 1), dtype=np.uint64)  # non-negative codes
    vals = decode(codes, fmt)
    keep = np.isfinite(vals)
    codes, vals = codes[keep], vals[keep]
    mids = (vals[:-1] + vals[1:]) / 2
    rng = np.random.default_rng(11)
    pick = rng.choice(mids.size, 300)
    x = np.concatenate([mids[pick] * (1 + 2.0**-40), mids[pick], mids[pick] * (1 - 2.0**-40)])
    x = x[np.abs(x) <= fmt.max_value]
    ours = quantize(x, fmt)
    ref = np.array([_exact_round(v, fmt, vals, codes) for v in x])
    np.testing.assert_array_equal(ours, ref)


@pytest.mark.parametrize("text", ["-0", "-0.0", "-1e-400", "1e400", "-1e400"])
def test_cli_values_past_float64_keep_torch_bits(capsys, text: str) -> None:
    """`pretrain numerics -0` printed sign bit 0 (a Fraction has no -0); `1e400` was an OverflowError
    traceback. Truth: torch's bits for Python's own float(text) (-0.0, -0.0, -inf, inf...)."""
    import json

    from pretrain.cli import main

    assert main(["numerics", text, "--formats", ",".join(TORCH), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["values"]
    for row, (fmt, dtype, view, _) in zip(rows, TORCH.values(), strict=True):
        code = torch.tensor(float(text), dtype=torch.float32).to(dtype).view(view).item() % 2**fmt.bits
        assert row["bits"].replace(" ", "") == format(code, f"0{fmt.bits}b"), (text, fmt.name)
