"""`pretrain numerics`: round numbers to training float formats and show the stored bits."""

from __future__ import annotations

import argparse
import math
import re

from pretrain.bounds import Number

HELP = "round numbers to fp32/bf16/fp16/fp8 and show their bits and the formats' limits"

DESCRIPTION = """\
Shows what a number becomes when it is stored in a training float format, bit for bit as torch
stores it: the rounded value, the relative error, and the stored bits as sign | exponent | fraction.
A float is (-1)^sign * 2^(E - bias) * (1 + F / 2^m): the exponent bits set the range, the fraction
bits the precision. bf16 keeps fp32's 8 exponent bits (its range) with 7 fraction bits; fp16 has
more precision but underflows below 6e-8; fp8 E4M3 (max 448, saturating) and E5M2 (max 57344)
need per-tensor scales.

Examples:
  pretrain numerics 0.1 1/3 1e-8 --formats bf16,fp16,e4m3
      bf16(1/3) = 0.333984375, bits 0 01111101 0101011; fp16(1e-8) = 0 (underflow)
  pretrain numerics --table
      largest value, smallest normal and subnormal, and the gap after 1, for every format
  pretrain numerics 1e-8 --scale 65536 --formats fp16
      loss scaling: store 1e-8 * 65536 in fp16, divide back: 9.9972e-09
  pretrain numerics --accumulate 1.0 1e-4 1000
      add 1e-4 to a weight of 1.0 a thousand times in each format: fp32 reaches 1.1, bf16 stays 1.0

Output: a table (or one JSON object with --json)."""

DEFAULT_FORMATS = "fp32,bf16,fp16,e5m2,e4m3"


# Steps of --accumulate: a Python loop of ~10 us per step and format (1e6 steps: ~1 min CPU).
MAX_STEPS = 1_000_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # argparse takes a leading "-" for an option unless the word looks like a negative number by its
    # own pattern (-448, -.5): widen the pattern so -1e-8, -inf, -nan and -1/3 are values too.
    parser._negative_number_matcher = re.compile(  # noqa: SLF001
        r"^-(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?(/\d+)?$|^-(inf|infinity|nan)$", re.IGNORECASE)
    parser.add_argument("values", nargs="*", help="numbers: 0.1, 1/3, 1e-8, -448, -1e-8, inf, nan")
    parser.add_argument(
        "--formats", default=DEFAULT_FORMATS, help=f"comma-separated formats (default: {DEFAULT_FORMATS})"
    )
    parser.add_argument("--table", action="store_true", help="print the formats' limits")
    parser.add_argument(
        "--scale",
        type=Number(float, gt=0, why="a loss scale such as 65536"),
        default=None,
        help="loss-scale round trip: store value*SCALE in the format, divide by SCALE",
    )
    parser.add_argument(
        "--accumulate",
        nargs=3,
        metavar=("W0", "UPDATE", "STEPS"),
        default=None,
        help="add UPDATE to W0 STEPS times, rounding to each format after every add",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")


def parse_value(text: str) -> float:
    """A number from the command line: decimal, exponent, fraction (1/3), inf or nan."""
    from fractions import Fraction

    from pretrain.errors import UserError

    try:
        exact = Fraction(text.strip())
    except (ValueError, ZeroDivisionError):
        try:
            return float(text)
        except ValueError:
            raise UserError(f"not a number: {text!r} (try 0.1, 1/3, 1e-8, inf)") from None
    try:
        x = float(exact)
    except OverflowError:  # past float64's 1.8e308 (1e400): every format stores it as inf
        return math.inf if exact > 0 else -math.inf
    if x == 0 and text.strip().startswith("-"):
        return -0.0  # a Fraction has no negative zero: "-0", "-1e-400" keep their sign bit, as in torch
    return x


def _check_flags(args: argparse.Namespace) -> None:
    """--scale and --accumulate's STEPS, before any work (STEPS is a loop and an array per format)."""
    import math

    from pretrain.errors import UserError

    if args.scale is not None and not (math.isfinite(args.scale) and args.scale > 0):
        raise UserError(f"--scale must be a finite number > 0 (a loss scale such as 65536), got {args.scale}")
    if args.scale is not None and not args.values:  # the table and --accumulate have no loss scale
        raise UserError(f"--scale {args.scale:g} scales the numbers given (pretrain numerics 1e-8 --scale "
                        "65536 --formats fp16); with --table or --accumulate alone it would do nothing")
    if args.accumulate:
        text = args.accumulate[2]
        if not text.isdigit() or not 1 <= int(text) <= MAX_STEPS:
            raise UserError(f"--accumulate W0 UPDATE STEPS: STEPS must be an integer from 1 to "
                            f"{MAX_STEPS:,}, got {text!r}")
        args.steps = int(text)


def compute(args: argparse.Namespace) -> dict:
    """Everything the command prints, as plain data."""
    import math

    from pretrain.numerics import (
        accumulate_updates,
        bit_string,
        format_table,
        get_format,
        quantize,
        scaled_roundtrip,
    )

    _check_flags(args)
    fmts = [get_format(n) for n in args.formats.split(",") if n.strip()]
    if not fmts:  # `--formats ,` printed nothing and exit 0
        from pretrain.errors import UserError

        raise UserError(f"--formats {args.formats!r} names no format; give some of {DEFAULT_FORMATS}")
    out: dict = {}
    if args.table or not (args.values or args.accumulate):
        names = {f.name for f in fmts}  # --formats picks the table's rows too
        out["formats"] = [r for r in format_table() if r["format"] in names]
    rows = []
    for text in args.values:
        x = parse_value(text)
        for f in fmts:
            q = float(scaled_roundtrip(x, args.scale, f) if args.scale else quantize(x, f))
            rel = abs(q - x) / abs(x) if math.isfinite(x) and x != 0 else None
            rows.append(
                {
                    "value": text,
                    "format": f.name,
                    "stored": q,
                    "rel_error": rel,
                    "bits": bit_string(x * (args.scale or 1.0), f),
                }
            )
    if rows:
        out["values"] = rows
    if args.accumulate:
        w0, upd, steps = parse_value(args.accumulate[0]), parse_value(args.accumulate[1]), args.steps
        out["accumulate"] = [
            {"format": f.name, "final": float(accumulate_updates(w0, upd, steps, f)[-1])} for f in fmts
        ]
    return out


def _print(out: dict, scale: float | None) -> None:
    from rich.console import Console
    from rich.table import Table

    con = Console()
    con = Console(width=max(con.width, 110))  # pipes report 80 columns; the tables need ~110
    if "formats" in out:
        t = Table(title="Float formats (1 sign bit + exponent + fraction)")
        for col in (
            "format",
            "exp",
            "frac",
            "bias",
            "largest",
            "min normal",
            "min subnormal",
            "gap after 1",
            "overflow",
        ):
            t.add_column(col, justify="right", no_wrap=True)
        for r in out["formats"]:
            t.add_row(
                r["format"],
                str(r["exp_bits"]),
                str(r["man_bits"]),
                str(r["bias"]),
                f"{r['max']:.5g}",
                f"{r['min_normal']:.3g}",
                f"{r['min_subnormal']:.3g}",
                f"{r['epsilon']:.3g}",
                "inf" if r["overflow"] == "inf" else "saturate",
            )
        con.print(t)
    if "values" in out:
        title = f"Stored, then divided by the loss scale {scale:g}" if scale else "Stored values"
        t = Table(title=title)
        for col in ("value", "format", "stored", "rel. error", "bits: sign exponent fraction"):
            t.add_column(col, justify="right", no_wrap=True)
        for r in out["values"]:
            rel = "" if r["rel_error"] is None else f"{r['rel_error']:.2e}"
            t.add_row(r["value"], r["format"], f"{r['stored']:.10g}", rel, r["bits"])
        con.print(t)
    if "accumulate" in out:
        title = "Repeated updates, weight stored in each format"
        t = Table(title=title, min_width=len(title))  # the two columns alone wrapped it on 2 lines
        t.add_column("format")
        t.add_column("final weight", justify="right")
        for r in out["accumulate"]:
            t.add_row(r["format"], f"{r['final']:.6g}")
        con.print(t)


def run(args: argparse.Namespace) -> int:
    from pretrain.jsonout import dumps

    out = compute(args)
    if args.json:
        print(dumps(out, indent=2, default=str))
    else:
        _print(out, args.scale)
    return 0
