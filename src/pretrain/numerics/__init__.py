"""Floating-point formats used in training (fp32, bf16, fp16, fp8), emulated bit for bit in numpy."""

from pretrain.numerics.formats import (
    BF16,
    FORMATS,
    FP8_E4M3,
    FP8_E5M2,
    FP16,
    FP32,
    FloatFormat,
    accumulate_updates,
    bit_fields,
    bit_string,
    decode,
    encode,
    format_table,
    get_format,
    quantize,
    scaled_roundtrip,
)

__all__ = [
    "BF16",
    "FORMATS",
    "FP8_E4M3",
    "FP8_E5M2",
    "FP16",
    "FP32",
    "FloatFormat",
    "accumulate_updates",
    "bit_fields",
    "bit_string",
    "decode",
    "encode",
    "format_table",
    "get_format",
    "quantize",
    "scaled_roundtrip",
]
