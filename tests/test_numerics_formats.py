"""The lesson's section 4 numbers (4a format table, 4b loss scaling, 4c master weights), recomputed.

Each expected value is the lesson's printed number (pretraining_lesson_rendered.txt, section 4),
at the lesson's printed rounding; the accumulation test also checks against torch's own arithmetic.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from pretrain.cli import main
from pretrain.numerics import (
    BF16,
    FORMATS,
    FP8_E4M3,
    FP8_E5M2,
    FP16,
    FP32,
    accumulate_updates,
    bit_fields,
    decode,
    encode,
    get_format,
    quantize,
    scaled_roundtrip,
)


def test_bf16_one_third_4a() -> None:
    # 4a: sign 0, exponent field 125, fraction 43 -> 0.25 * (1 + 43/128) = 0.333984375
    assert float(quantize(1 / 3, BF16)) == 0.333984375
    assert bit_fields(1 / 3, BF16) == (0, 125, 43)


# 4a's table: largest, smallest normal, gap after 1, with the lesson's printed significant digits.
TABLE = [
    (FP32, 8, 23, "3.4e+38", "1.2e-38", "1.2e-07"),
    (BF16, 8, 7, "3.4e+38", "1.2e-38", "0.0078"),
    (FP16, 5, 10, "6.6e+04", "6.1e-05", "0.00098"),
    (FP8_E5M2, 5, 2, "5.7e+04", "6.1e-05", "0.25"),
    (FP8_E4M3, 4, 3, "4.5e+02", "0.016", "0.12"),
]


@pytest.mark.parametrize("fmt,e,m,largest,normal,gap", TABLE, ids=lambda v: getattr(v, "name", ""))
def test_format_table_4a(fmt, e, m, largest, normal, gap) -> None:
    assert (fmt.exp_bits, fmt.man_bits) == (e, m)
    assert f"{fmt.max_value:.2g}" == largest
    assert f"{fmt.min_normal:.2g}" == normal
    assert f"{fmt.epsilon:.2g}" == gap


def test_exact_limits_from_the_lesson() -> None:
    assert FP16.max_value == 65504 and FP8_E5M2.max_value == 57344 and FP8_E4M3.max_value == 448
    assert BF16.epsilon == 2.0**-7 and FP32.epsilon == 2.0**-23
    assert f"{FP16.min_subnormal:.2e}" == "5.96e-08"  # 4b: "fp16's smallest value (5.96 x 10^-8)"
    assert FP8_E4M3.bias == 7 and FP16.bias == 15 and BF16.bias == 127


def test_loss_scaling_4b() -> None:
    assert float(quantize(1e-8, FP16)) == 0.0  # under half of fp16's smallest subnormal
    assert f"{float(quantize(1e-8 * 65536, FP16)):.4e}" == "6.5517e-04"
    assert f"{float(scaled_roundtrip(1e-8, 65536, FP16)):.4e}" == "9.9972e-09"
    assert f"{float(quantize(1e-8, BF16)):.4e}" == "1.0012e-08"  # bf16 needs no scale


def test_loss_scaling_round_trip_matches_torch() -> None:
    # 4b's recipe done by torch: fp32 gradient times S, stored in fp16, divided by S in fp32.
    torch = pytest.importorskip("torch")
    g = (10.0 ** np.random.default_rng(5).uniform(-12, -2, 100_000)).astype(np.float32)
    for scale in (1.0, 2.0**10, 2.0**16):
        theirs = ((torch.from_numpy(g) * scale).to(torch.float16).float() / scale).double().numpy()
        np.testing.assert_array_equal(scaled_roundtrip(g, scale, FP16), theirs)
    lost = float(np.mean(scaled_roundtrip(g, 1.0, FP16) == 0))
    assert lost > 0.3 and float(np.mean(scaled_roundtrip(g, 2.0**16, FP16) == 0)) < lost / 2


def test_master_weights_4c() -> None:
    assert round(float(accumulate_updates(1.0, 1e-4, 1000, FP32)[-1]), 4) == 1.1
    assert float(accumulate_updates(1.0, 1e-4, 1000, BF16)[-1]) == 1.0
    assert float(accumulate_updates(1.0, 1e-4, 1000, FP16)[-1]) == 1.0


@pytest.mark.parametrize("name", ["bf16", "fp16", "e4m3", "e5m2"])
def test_accumulation_matches_torch(name: str) -> None:
    torch = pytest.importorskip("torch")
    dtype = {
        "bf16": torch.bfloat16,
        "fp16": torch.float16,
        "e4m3": torch.float8_e4m3fn,
        "e5m2": torch.float8_e5m2,
    }[name]
    fmt = get_format(name)
    for w0, upd in ((1.0, 1e-4), (1.0, 3e-3), (0.3, 0.02), (-2.0, 0.07)):
        w, u = torch.tensor(w0).to(dtype), torch.tensor(upd).to(dtype)
        path = []
        for _ in range(300):
            w = (w.float() + u.float()).to(dtype)  # one add, rounded once to the storage format
            path.append(float(w.float()))
        np.testing.assert_array_equal(accumulate_updates(w0, upd, 300, fmt), path)


def test_encode_decode_round_trip_all_codes() -> None:
    for fmt in (BF16, FP16, FP8_E4M3, FP8_E5M2):
        codes = np.arange(2**fmt.bits, dtype=np.uint64)
        vals = decode(codes, fmt)
        finite = ~np.isnan(vals)
        assert (encode(vals[finite], fmt) == codes[finite]).all()
    assert int((~np.isfinite(decode(np.arange(256, dtype=np.uint64), FP8_E4M3))).sum()) == 2  # +-NaN only


def test_underflow_and_subnormals() -> None:
    s = FP16.min_subnormal
    assert float(quantize(s / 2, FP16)) == 0.0  # a tie with 0 goes to the even code, 0
    assert float(quantize(s / 2 * 1.0001, FP16)) == s
    assert float(quantize(3 * s, FP16)) == 3 * s  # subnormals are evenly spaced
    assert np.signbit(quantize(-1e-30, FP16))  # underflow keeps the sign


def test_cli_json(capsys) -> None:
    assert main(["numerics", "1/3", "1e-8", "--formats", "bf16,fp16", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = {(r["value"], r["format"]): r for r in out["values"]}
    assert rows[("1/3", "bf16")]["stored"] == 0.333984375
    assert rows[("1/3", "bf16")]["bits"] == "0 01111101 0101011"
    assert rows[("1e-8", "fp16")]["stored"] == 0.0


def test_cli_table_and_scale(capsys) -> None:
    assert main(["numerics", "--table", "--json"]) == 0
    names = [r["format"] for r in json.loads(capsys.readouterr().out)["formats"]]
    assert names == [f.name for f in FORMATS]
    assert main(["numerics", "1e-8", "--scale", "65536", "--formats", "fp16", "--json"]) == 0
    assert f"{json.loads(capsys.readouterr().out)['values'][0]['stored']:.4e}" == "9.9972e-09"


def test_cli_bad_input(capsys) -> None:
    assert main(["numerics", "abc"]) == 2
    assert "not a number" in capsys.readouterr().err
    assert main(["numerics", "1", "--formats", "fp7"]) == 2
    assert "unknown float format" in capsys.readouterr().err
    assert main(["numerics", "1", "--formats", "bf16,fp8"]) == 2  # the README's word for the two
    err = capsys.readouterr().err
    assert "unknown float format 'fp8' (fp8 is two formats: e4m3, e5m2)" in err, err
    assert main(["numerics", "1", "--formats", "e4m3,e5m2"]) == 0  # and both names it gives are taken


@pytest.mark.parametrize("args, says", [
    (["1e-8", "--scale", "0", "--formats", "fp16"], "--scale"),  # was silently "no scaling"
    (["1e-8", "--scale", "-65536", "--formats", "fp16"], "--scale"),
    (["1e-8", "--scale", "nan", "--formats", "fp16"], "--scale"),
    (["1e-8", "--scale", "inf", "--formats", "fp16"], "--scale"),
    (["--accumulate", "1", "1e-4", "-5"], "STEPS"),  # was a numpy traceback
    (["--accumulate", "1", "1e-4", "0"], "STEPS"),  # was an IndexError
    (["--accumulate", "1", "1e-4", "1000000000"], "STEPS"),  # was an 8 GB array per format, hours
    (["--accumulate", "1", "1e-4", "ten"], "STEPS"),
    (["--accumulate", "one", "1e-4", "10"], "not a number"),
])
def test_cli_refuses_bad_flags_in_one_line(capsys, args, says) -> None:
    assert main(["numerics", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err


def test_cli_reads_negative_numbers_in_every_form(capsys) -> None:
    # argparse took "-1e-8" and "-inf" for options ("unrecognized arguments"); "-448" alone worked.
    assert main(["numerics", "-1e-8", "-inf", "-1/3", "-448", "--formats", "bf16", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["values"]
    assert [r["value"] for r in rows] == ["-1e-8", "-inf", "-1/3", "-448"]
    assert rows[0]["stored"] == pytest.approx(-1.0012e-8, rel=1e-4)  # the lesson's bf16(1e-8), negated
    assert rows[1]["stored"] == "-inf"  # strict JSON has no -Infinity (test_json_is_strict_json...)
    assert rows[2]["stored"] == -0.333984375  # the lesson's bf16(1/3), negated


def test_json_is_strict_json_with_infinities(capsys) -> None:
    # fp16(inf), e4m3(1e40) saturating, nan: Python wrote bare Infinity/NaN, which jq and every
    # strict JSON parser reject (RFC 8259 has no such literals).
    def refuse(word: str) -> None:
        raise ValueError(f"not JSON: {word}")

    assert main(["numerics", "inf", "nan", "1e40", "--formats", "fp16,e4m3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out, parse_constant=refuse)
    stored = {(r["value"], r["format"]): r["stored"] for r in out["values"]}
    assert stored[("inf", "fp16")] == "inf" and stored[("nan", "fp16")] == "nan"
    assert stored[("1e40", "fp16")] == "inf" and stored[("1e40", "fp8 E4M3")] == 448.0
