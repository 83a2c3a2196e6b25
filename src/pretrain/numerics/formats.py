"""Binary floating-point formats, emulated in numpy: fp32, bf16, fp16, fp8 E4M3 (fn) and fp8 E5M2.

This module owns `FloatFormat` (a format described by its bit fields and the limits that follow from
them), `quantize` (round any value to the nearest value a format can hold, exactly as the hardware
converts a float32), `encode` / `decode` (the bit pattern of a stored value) and the two small
experiments of the lesson's section 4 built on them: the loss-scaling round trip and the
accumulation of many small updates in one format.

Rounding is IEEE 754 round-to-nearest, ties-to-even, with subnormals (gradual underflow) and
underflow to a signed zero. Overflow follows what torch 2.13 does for each dtype (checked bit for
bit in tests/test_numerics_torch.py):

- fp32, bf16, fp16, E5M2 have infinities: a value that rounds above the largest finite value
  becomes +-inf (torch's `float8_e5m2` sends everything >= 61440, the midpoint past 57344, to inf).
- E4M3 "fn" (finite, NaN-only top code; Micikevicius et al. 2022, "FP8 Formats for Deep Learning")
  has no inf. Its exponent field 1111 holds normal numbers, and only S.1111.111 is NaN, so its
  largest value is 1.75 * 2^8 = 448 rather than the 240 an IEEE-style layout would give.
  torch's float32 -> `float8_e4m3fn` conversion *saturates*: finite overflow and +-inf become
  +-448, NaN stays NaN. We do the same (`overflow="saturate"`).

Inputs are rounded once, from their exact float64 value. torch converts a float64 tensor to a
16- or 8-bit dtype through float32 (two roundings); `quantize(..., through_fp32=True)` reproduces
that when you need torch's exact result for float64 inputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pretrain.errors import UserError


@dataclass(frozen=True)
class FloatFormat:
    """A binary float: 1 sign bit, `exp_bits` exponent bits, `man_bits` stored fraction bits.

    `has_inf`: the all-ones exponent with a zero fraction is infinity (IEEE style).
    `nan_codes`: "ieee" (all-ones exponent, any nonzero fraction is NaN) or "top" (only the single
    all-ones code S.1..1.1..1 is NaN; the rest of the top binade holds finite numbers, as in E4M3fn).
    `overflow`: what a value past the largest finite one becomes: "inf" or "saturate" (+-max).
    """

    name: str
    exp_bits: int
    man_bits: int
    has_inf: bool = True
    nan_codes: str = "ieee"
    overflow: str = "inf"

    @property
    def bias(self) -> int:
        # 2^(e-1) - 1 so that negative exponents can be stored in an unsigned field.
        return 2 ** (self.exp_bits - 1) - 1

    @property
    def bits(self) -> int:
        return 1 + self.exp_bits + self.man_bits

    @property
    def max_exponent(self) -> int:
        """Unbiased exponent of the top binade that holds finite numbers."""
        top_field = 2**self.exp_bits - 1
        return (top_field - 1 if self.nan_codes == "ieee" else top_field) - self.bias

    @property
    def max_value(self) -> float:
        # IEEE: the whole all-ones fraction is usable below the reserved exponent.
        # "top" NaN code: the all-ones fraction of the top binade is NaN, so one step less.
        frac_steps = 2**self.man_bits - (1 if self.nan_codes == "ieee" else 2)
        return float(np.ldexp(1.0 + frac_steps / 2**self.man_bits, self.max_exponent))

    @property
    def min_exponent(self) -> int:
        return 1 - self.bias

    @property
    def min_normal(self) -> float:
        return float(np.ldexp(1.0, self.min_exponent))

    @property
    def min_subnormal(self) -> float:
        return float(np.ldexp(1.0, self.min_exponent - self.man_bits))

    @property
    def epsilon(self) -> float:
        """The gap between 1 and the next larger representable number: 2^-man_bits."""
        return float(np.ldexp(1.0, -self.man_bits))


FP32 = FloatFormat("fp32", 8, 23)
BF16 = FloatFormat("bf16", 8, 7)
FP16 = FloatFormat("fp16", 5, 10)
FP8_E5M2 = FloatFormat("fp8 E5M2", 5, 2)
FP8_E4M3 = FloatFormat("fp8 E4M3", 4, 3, has_inf=False, nan_codes="top", overflow="saturate")

FORMATS: tuple[FloatFormat, ...] = (FP32, BF16, FP16, FP8_E5M2, FP8_E4M3)

_ALIASES: dict[str, FloatFormat] = {
    "fp32": FP32,
    "float32": FP32,
    "f32": FP32,
    "bf16": BF16,
    "bfloat16": BF16,
    "fp16": FP16,
    "float16": FP16,
    "half": FP16,
    "f16": FP16,
    "e5m2": FP8_E5M2,
    "fp8_e5m2": FP8_E5M2,
    "float8_e5m2": FP8_E5M2,
    "e4m3": FP8_E4M3,
    "e4m3fn": FP8_E4M3,
    "fp8_e4m3": FP8_E4M3,
    "float8_e4m3fn": FP8_E4M3,
}


def get_format(name: str) -> FloatFormat:
    """Look a format up by a short name (fp32, bf16, fp16, e5m2, e4m3, or torch's dtype names)."""
    key = name.strip().lower().replace(" ", "_").replace("-", "_")
    if key not in _ALIASES:
        fp8 = " (fp8 is two formats: e4m3, e5m2)" if key in ("fp8", "float8") else ""  # the README says fp8
        raise UserError(f"unknown float format {name!r}{fp8}; choose from fp32, bf16, fp16, e5m2, e4m3")
    return _ALIASES[key]


def quantize(x: np.ndarray | float, fmt: FloatFormat, *, through_fp32: bool = False) -> np.ndarray:
    """Round every element of `x` to the nearest value `fmt` can hold; returns float64.

    Within the binade [2^e, 2^(e+1)) a format has 2^man_bits evenly spaced values, 2^(e - man_bits)
    apart. Below the smallest normal number the spacing stays at its smallest (subnormals), so
    anything under half the smallest subnormal rounds to zero. Dividing by the spacing is exact (a
    power of two), and np.rint rounds half to even, which is IEEE's default rounding.
    """
    with np.errstate(invalid="ignore", over="ignore"):  # signalling NaNs and overflow are expected
        x = np.asarray(x, dtype=np.float64)
        if through_fp32:
            x = x.astype(np.float32).astype(np.float64)
        mag = np.abs(x)
        _, e = np.frexp(mag)  # mag = f * 2^e with f in [0.5, 1), so the binade is 2^(e-1)
        spacing = np.ldexp(1.0, np.maximum(e - 1, fmt.min_exponent) - fmt.man_bits)
        q = np.rint(mag / spacing) * spacing
        over = q > fmt.max_value  # also true for inf; false for NaN
        q = np.where(over, np.inf if fmt.overflow == "inf" else fmt.max_value, q)
    return np.copysign(q, x)


def encode(x: np.ndarray | float, fmt: FloatFormat) -> np.ndarray:
    """The bit pattern (as unsigned integers) of each element of `x` once stored in `fmt`.

    NaN is encoded as the format's canonical quiet NaN (IEEE: top fraction bit set; E4M3fn: the
    single all-ones code), with the input's sign.
    """
    q = quantize(x, fmt)
    mag = np.abs(q)
    sign = np.signbit(q).astype(np.uint64)
    finite = np.isfinite(mag)
    with np.errstate(invalid="ignore"):
        _, e = np.frexp(np.where(finite, mag, 1.0))
        normal = finite & (mag >= fmt.min_normal)
        exp_field = np.where(normal, e - 1 + fmt.bias, 0)
        frac = np.where(normal, np.ldexp(mag, -(e - 1)) - 1.0, mag / fmt.min_subnormal / 2**fmt.man_bits)
        frac_field = np.rint(np.where(finite, frac, 0.0) * 2**fmt.man_bits)
    all_ones = 2**fmt.exp_bits - 1
    nan = np.isnan(mag)
    exp_field = np.where(np.isinf(mag) | nan, all_ones, exp_field)
    nan_frac = 2 ** (fmt.man_bits - 1) if fmt.nan_codes == "ieee" else 2**fmt.man_bits - 1
    frac_field = np.where(nan, nan_frac, frac_field)
    body = (exp_field.astype(np.uint64) << np.uint64(fmt.man_bits)) | frac_field.astype(np.uint64)
    return (sign << np.uint64(fmt.exp_bits + fmt.man_bits)) | body


def decode(bits: np.ndarray | int, fmt: FloatFormat) -> np.ndarray:
    """The value (float64) of each bit pattern in `fmt`: the inverse of `encode`."""
    b = np.asarray(bits, dtype=np.uint64)
    m = fmt.man_bits
    frac = (b & np.uint64(2**m - 1)).astype(np.float64)
    exp_field = ((b >> np.uint64(m)) & np.uint64(2**fmt.exp_bits - 1)).astype(np.int64)
    negative = ((b >> np.uint64(fmt.exp_bits + m)) & np.uint64(1)).astype(bool)
    # (-1)^sign * 2^(E - bias) * (1 + F / 2^m); subnormals (E = 0): 2^(1 - bias) * F / 2^m.
    val = np.where(
        exp_field == 0,
        np.ldexp(frac / 2**m, fmt.min_exponent),
        np.ldexp(1.0 + frac / 2**m, exp_field - fmt.bias),
    )
    top = exp_field == 2**fmt.exp_bits - 1
    if fmt.nan_codes == "ieee":
        val = np.where(top, np.where(frac == 0, np.inf, np.nan), val)
    else:
        val = np.where(top & (frac == 2**m - 1), np.nan, val)
    return np.where(negative, -val, val)


def bit_fields(value: float, fmt: FloatFormat) -> tuple[int, int, int]:
    """(sign, exponent field, fraction field) of one value stored in `fmt`."""
    code = int(encode(value, fmt))
    m, e = fmt.man_bits, fmt.exp_bits
    return code >> (e + m), (code >> m) & (2**e - 1), code & (2**m - 1)


def bit_string(value: float, fmt: FloatFormat) -> str:
    """The stored bits as 'sign exponent fraction', e.g. bf16(1/3) -> '0 01111101 0101011'."""
    s, e, f = bit_fields(value, fmt)
    return f"{s} {e:0{fmt.exp_bits}b} {f:0{fmt.man_bits}b}"


def scaled_roundtrip(grad: np.ndarray | float, scale: float, fmt: FloatFormat) -> np.ndarray:
    """Loss scaling (Micikevicius et al. 2017, sec. 3.2): store S*g in `fmt`, divide by S in fp32.

    With S a power of two the multiply and the divide are exact, so all the error is the one
    rounding to `fmt` (plus underflow of the result below fp32's range, which does not happen for
    gradients scaled back from fp16).
    """
    return quantize(quantize(np.asarray(grad, dtype=np.float64) * scale, fmt) / scale, FP32)


def accumulate_updates(w0: float, update: float, steps: int, fmt: FloatFormat) -> np.ndarray:
    """Add `update` to a weight `steps` times, the weight and the update both stored in `fmt`.

    Returns the weight after every step (length `steps`). Each add is one correctly rounded
    operation: for formats of at most 24 significant bits, rounding the exact float64 sum to the
    format equals the format's own IEEE add (float64 has >= 2p + 2 bits; Figueroa 1995).
    """
    w = float(quantize(w0, fmt))
    u = float(quantize(update, fmt))
    path = np.empty(steps, dtype=np.float64)
    for i in range(steps):
        w = float(quantize(w + u, fmt))
        path[i] = w
    return path


def format_table() -> list[dict[str, object]]:
    """One row per format: bit counts, bias and the limits that follow from them."""
    return [
        {
            "format": f.name,
            "exp_bits": f.exp_bits,
            "man_bits": f.man_bits,
            "bias": f.bias,
            "max": f.max_value,
            "min_normal": f.min_normal,
            "min_subnormal": f.min_subnormal,
            "epsilon": f.epsilon,
            "inf": f.has_inf,
            "overflow": f.overflow,
        }
        for f in FORMATS
    ]
