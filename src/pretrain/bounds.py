"""Bounds of numbers a user gives: config keys (pretrain.config's `bounded`) and command-line options
(`Number`), checked by one function so both refuse alike, in one line naming the key or the flag,
the value, the allowed range and its reason. Kept free of heavy imports: every command's parser
builds with it.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from pretrain.errors import UserError

INT64 = 2**63


def check_number(value: int | float, meta: Any, key: str) -> None:
    """A number against bounds metadata (lo, hi, gt, lt, off, signed, why): one line naming `key`.
    `off`: a value outside [lo, hi] that turns the limit off (reader.max_ratio's 0)."""
    if isinstance(value, float) and not math.isfinite(value):  # TOML's inf, nan, or 1e400
        hint = "; 0 where 'no bound' is meant" if zero_unbounds(meta) else ""
        raise UserError(f"{key} must be a number, got {value!r} (a finite one{hint})")
    if isinstance(value, int) and not -INT64 <= value < INT64:  # torch, numpy and TOML stop at 64 bits
        raise UserError(f"{key} must be a 64-bit integer (below 2**63), got {show(value)}")
    if meta.get("off") is not None and value == meta["off"]:
        return
    lo = meta.get("lo")
    if lo is None and meta.get("gt") is None and not meta.get("signed"):
        lo = 0
    why = f" ({meta['why']})" if meta.get("why") else ""
    if lo is not None and value < lo:
        raise UserError(f"{key} must be >= {show(lo)}{_or_off(meta)}, got {show(value)}{why}")
    if meta.get("gt") is not None and not value > meta["gt"]:
        raise UserError(f"{key} must be > {show(meta['gt'])}, got {show(value)}{why}")
    if meta.get("hi") is not None and value > meta["hi"]:
        raise UserError(f"{key} must be <= {show(meta['hi'])}, got {show(value)}{why}")
    if meta.get("lt") is not None and not value < meta["lt"]:
        raise UserError(f"{key} must be < {show(meta['lt'])}, got {show(value)}{why}")


def zero_unbounds(meta: Any) -> bool:
    """Does 0 mean "no limit" for this number (its reason says so, or 0 is its `off` value)? Only
    then does a refusal of inf suggest 0: for --warn-epochs or a learning rate, 0 is refused."""
    why = meta.get("why") or ""
    return meta.get("off") == 0 or "0 = no bound" in why or "0 = all" in why


def _or_off(meta: Any) -> str:
    return f" (or {show(meta['off'])})" if meta.get("off") is not None else ""


def show(x: int | float) -> str:
    """A number as a refusal says it: integers with thousands separators, floats as Python reads them."""
    return f"{x:,}" if isinstance(x, int) and not isinstance(x, bool) else repr(x)


class Number:
    """The argparse `type` of a numeric command-line option, with its bounds and their reason (as
    `bounded` for a config key). It only converts; pretrain.cli checks the parsed value against the
    bounds (`check_number`), so the refusal names the flag: `--workers must be >= 1, got 0 (...)`.
    tests/test_config_bounds.py wants every int or float option to be one."""

    def __init__(self, typ: type, lo: float | None = None, hi: float | None = None,
                 gt: float | None = None, why: str = "", signed: bool = False, lt: float | None = None,
                 off: float | None = None) -> None:
        self.typ, self.__name__ = typ, typ.__name__  # argparse names the type in "invalid int value"
        self.metadata = {"lo": lo, "hi": hi, "gt": gt, "why": why, "signed": signed, "lt": lt, "off": off}

    def __call__(self, text: str) -> int | float:
        return self.typ(text)

    def __repr__(self) -> str:
        return self.typ.__name__


class Count(Number):
    """A whole count given as 32000, 32k or 32Ki (tokenizer train --vocab-size): k/K is 1,000, as
    `plan --tokens 1T` reads its suffixes (plan/shapes.py parse_count) and as "32k vocabulary" is
    Llama's 32,000; Ki is 1,024 (32Ki = 32,768, Mistral v0.3's), as Size reads KiB. M is 1,000,000.
    Forms a count could be read two ways from ("32kb": bytes or a count? "1.0001k": not whole) are
    refused with the forms it reads, rather than rounded."""

    UNITS = {"KI": 2**10, "K": 10**3, "M": 10**6}

    def __init__(self, lo: int | None = None, hi: int | None = None, why: str = "") -> None:
        super().__init__(int, lo=lo, hi=hi, why=why)
        self.__name__ = "count"  # argparse: "invalid count value: '32kb'"

    def __call__(self, text: str) -> int:
        t = text.strip().upper().replace("_", "")
        if t.startswith("-") and t[1:2].isdigit():  # refused by its bound, in the same words as any other
            return -self(t[1:])
        unit = next((u for u in self.UNITS if t.endswith(u)), "")
        whole, _, frac = t.removesuffix(unit).partition(".")
        mult = self.UNITS.get(unit, 1)
        if whole.isdigit() and (not frac or frac.isdigit()) and len(t) < 24:
            scaled = int(frac or "0") * mult  # the fraction's share, whole only for 32.5k, not 1.0001k
            if scaled % 10 ** len(frac) == 0:
                return int(whole) * mult + scaled // 10 ** len(frac)
        raise argparse.ArgumentTypeError(f"{text!r}: a whole count such as 32000, 32k (= 32,000) or "
                                         "32Ki (= 32,768)")


class Size(Number):
    """A byte count given as 5GB, 500MB, 2GiB or 1000000 (export --max-shard-size): parsed here,
    bounded like any other Number (check_number, in pretrain.cli)."""

    UNITS = {"KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "KB": 10**3, "MB": 10**6, "GB": 10**9, "B": 1}

    def __init__(self, lo: int = 1, why: str = "bytes") -> None:
        super().__init__(int, lo=lo, why=why)
        self.__name__ = "size"  # argparse: "invalid size value: '5XB'"

    def __call__(self, text: str) -> int:
        t = text.strip().upper()
        for unit, mult in self.UNITS.items():
            number = t[:-len(unit)].strip()
            if t.endswith(unit) and number.replace(".", "", 1).isdigit():
                return int(float(number) * mult) if "." in number else int(number) * mult
        if t.isdigit():
            return int(t)
        raise argparse.ArgumentTypeError(f"{text!r}: a size such as 5GB, 500MB or 1000000")


