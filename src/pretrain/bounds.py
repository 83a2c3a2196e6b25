"""Bounds of numbers a user gives: config keys (pretrain.config's `bounded`) and command-line options
(`Number`), checked by one function so both refuse alike, in one line naming the key or the flag,
the value, the allowed range and its reason. Kept free of heavy imports: every command's parser
builds with it.
"""

from __future__ import annotations

import math
from typing import Any

from pretrain.errors import UserError

INT64 = 2**63


def check_number(value: int | float, meta: Any, key: str) -> None:
    """A number against bounds metadata (lo, hi, gt, signed, why): one line naming `key`."""
    if isinstance(value, float) and not math.isfinite(value):  # TOML's inf, nan, or 1e400
        raise UserError(f"{key} must be a number, got {value!r} (a finite one; 0 where 'no bound' is meant)")
    if isinstance(value, int) and not -INT64 <= value < INT64:  # torch, numpy and TOML stop at 64 bits
        raise UserError(f"{key} must be a 64-bit integer (below 2**63), got {show(value)}")
    lo = meta.get("lo")
    if lo is None and meta.get("gt") is None and not meta.get("signed"):
        lo = 0
    why = f" ({meta['why']})" if meta.get("why") else ""
    if lo is not None and value < lo:
        raise UserError(f"{key} must be >= {show(lo)}, got {show(value)}{why}")
    if meta.get("gt") is not None and not value > meta["gt"]:
        raise UserError(f"{key} must be > {show(meta['gt'])}, got {show(value)}{why}")
    if meta.get("hi") is not None and value > meta["hi"]:
        raise UserError(f"{key} must be <= {show(meta['hi'])}, got {show(value)}{why}")


def show(x: int | float) -> str:
    """A number as a refusal says it: integers with thousands separators, floats as Python reads them."""
    return f"{x:,}" if isinstance(x, int) and not isinstance(x, bool) else repr(x)


class Number:
    """The argparse `type` of a numeric command-line option, with its bounds and their reason (as
    `bounded` for a config key). It only converts; pretrain.cli checks the parsed value against the
    bounds (`check_number`), so the refusal names the flag: `--workers must be >= 1, got 0 (...)`.
    tests/test_config_bounds.py wants every int or float option to be one."""

    def __init__(self, typ: type, lo: float | None = None, hi: float | None = None,
                 gt: float | None = None, why: str = "", signed: bool = False) -> None:
        self.typ, self.__name__ = typ, typ.__name__  # argparse names the type in "invalid int value"
        self.metadata = {"lo": lo, "hi": hi, "gt": gt, "why": why, "signed": signed}

    def __call__(self, text: str) -> int | float:
        return self.typ(text)

    def __repr__(self) -> str:
        return self.typ.__name__


