"""JSON that every reader accepts: `--json` outputs go through `dumps` here.

Python's `json.dumps` writes float infinities and NaN as the bare words `Infinity` and `NaN`,
which are not JSON (RFC 8259 has no such literals): jq, JavaScript's `JSON.parse`, Go and Rust
parsers all reject the whole document. A value that is legitimately infinite or undefined (fp16
overflow, the epochs of an empty source) is written as the string "inf", "-inf" or "nan" instead.
"""

from __future__ import annotations

import json
import math
from typing import Any


def finite(obj: Any) -> Any:
    """`obj` with every non-finite float replaced by "inf", "-inf" or "nan" (containers walked)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite(v) for v in obj]
    return obj


def dumps(obj: Any, **kwargs: Any) -> str:
    """`json.dumps` of `finite(obj)`, refusing (never writing) a bare NaN or Infinity."""
    return json.dumps(finite(obj), allow_nan=False, **kwargs)
