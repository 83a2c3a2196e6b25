"""Bad records counted by kind: the one helper `pretrain curate` and `pretrain tokenize` share.

A reader's reason carries where in the record it failed ("at byte 14", "at column 10") and a
parser's own words; counted under the whole reason, a hostile file made one key per bad record
(stats.json, manifest.json: unbounded), and cut at its first colon it came out mangled
(`missing text column 'text' (columns`). A kind is the reason without positions and sizes, every
JSON parse error one kind; at most `MAX_FAULT_KINDS` kinds are kept, the rest counted under
`OTHER_KINDS`. The first record of each kind keeps its full reason, file and record, which is
what the summary names.
"""

from __future__ import annotations

import re
from typing import Any

_WHERE = re.compile(r" at (?:byte|column|line|char|offset|position) \d+| of [\d,]+ bytes")
# the WARC reader's framing lines (curate/warc*.py) carry claimed lengths, offsets, byte counts
# and a quoted first line: without them, one kind per way a record can be bad
_WARC = re.compile(r"(?<=Content-Length) \d+| \((?:decompressed )?offset \d+\)| \(\d+ bytes of content\)"
                   r"|, \d+ bytes of this record skipped|^\d+ (?=bytes skipped between records)"
                   r"|; (?:first line|it reads|its fields): .*$"  # (its fields: a JSON record's keys)
                   r"|(?<=truncated record): \d+ of \d+(?: payload)? bytes")
MAX_FAULT_KINDS = 32
OTHER_KINDS = "other kinds"


def fault_kind(reason: str) -> str:
    """`invalid UTF-8 at byte 14` -> `invalid UTF-8`, `malformed JSON: Expecting value at column 10`
    -> `malformed JSON`: a count's key without the record's position or the parser's detail."""
    if reason.startswith("malformed JSON"):
        return "malformed JSON"
    return _WHERE.sub("", _WARC.sub("", reason))[:200]


def _slot(counts: dict[str, int], kind: str) -> str:
    # a kind not seen yet, once the table is full, goes to the one overflow key
    return kind if kind in counts or len(counts) < MAX_FAULT_KINDS else OTHER_KINDS


def count_fault(counts: dict[str, int], reason: str, n: int = 1) -> str:
    """Add `n` records of `reason` to `counts` under their kind; returns the key they went to."""
    key = _slot(counts, fault_kind(reason))
    counts[key] = counts.get(key, 0) + n
    return key


def merge_faults(total: dict[str, int], part: dict[str, int], first: dict[str, Any] | None = None,
                 part_first: dict[str, Any] | None = None) -> None:
    """Add a shard's counts (already by kind) into `total`, bounded the same way; `first` takes the
    first record of each kind from `part_first` where it has none yet (shards in order)."""
    for kind, n in part.items():  # re-kinded: a shard's stats written before kinds kept positions
        key = _slot(total, fault_kind(kind))
        total[key] = total.get(key, 0) + n
        if first is not None and part_first and key not in first:
            found = part_first.get(kind) or part_first.get(key)
            if found:
                first[key] = found


def first_of_kinds(examples: list[dict]) -> dict[str, dict]:
    """The first example (`{"file", "record", "reason"}`) of each kind in a list of examples."""
    out: dict[str, dict] = {}
    for e in examples:
        out.setdefault(fault_kind(str(e.get("reason", ""))), e)
    return out
