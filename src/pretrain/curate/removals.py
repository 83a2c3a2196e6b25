"""The removal list of the global dedup stage (`dedup.py`): who stays in each cluster, new names
for repeated ids, and the list read back (whole, per shard in row order, its summary).

A record is `{"id", "step", "reason", "kept", "shard", "row"}`: `step` is `exact_dedup` or
`near_dedup` for a removed document (`kept`: the id of the twin that stayed), or `rename` for a
later copy of an id that stays (`reason` `duplicate_id`, `kept`: its new id). Records are ordered
by input position (shard, then row), so each shard's are in row order.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from pretrain.curate import io
from pretrain.errors import UserError


def keepers(lab: list[int], prio: list[int], ids: list[str]) -> dict[int, int]:
    """Component label -> position of its keeper: lowest priority, then smallest id, then input
    position (members are in input order). One pass, one entry per component: sorting a tuple per
    member held ~150 bytes each (200k copies of one text: 80 MB)."""
    keeper: dict[int, int] = {}
    for j, label in enumerate(lab):
        k = keeper.get(label)
        if k is None or (prio[j], ids[j]) < (prio[k], ids[k]):
            keeper[label] = j
    return keeper


def renames(members: np.ndarray, same_id: np.ndarray, removed: np.ndarray, ids: list[str]) -> dict[int, str]:
    """Position in `members` -> new id, for every copy of an id that stays after its first staying
    copy (input order): `ID#2`, `ID#3`, ... Any number of workers gives the same names: they
    follow the dense index (shard, then row), never the order units finished."""
    pos = np.searchsorted(members, same_id)
    copies: dict[int, list[int]] = {}
    for first, other in zip(pos[0].tolist(), pos[1].tolist()):
        copies.setdefault(first, [first]).append(other)
    out: dict[int, str] = {}
    for group in copies.values():
        staying = sorted(j for j in group if not removed[j])  # members are sorted: input order
        for n, j in enumerate(staying[1:], start=2):
            out[j] = f"{ids[j]}#{n}"
    return out


def load_removals(path: Path) -> dict[str, tuple[str, str, str]]:
    """removed document id -> (step, reason, id of the kept twin); renames are not removals."""
    path = Path(path)
    out: dict[str, tuple[str, str, str]] = {}
    for rec in io.read_jsonl_zst(path):
        if rec["step"] != "rename":
            out[rec["id"]] = (rec["step"], rec["reason"], rec["kept"])
    return out


def shard_removals(path: Path) -> Iterator[tuple[int, tuple[str, str, str, str]]]:
    """One shard's removals (`job.split_removals`), streamed in row order: (row of the document in
    its shard's stage-A survivors, (step, reason, id of the kept twin, id of the removed
    document)). Streamed, not a dict: 200k removals of one shard held 67 MB in stage C."""
    last = -1
    for rec in io.read_jsonl_zst(Path(path)):
        if "row" not in rec:
            # a UserError: this runs in stage C's workers, and a DataError does not unpickle
            raise UserError(f"{path}: removal list of an older version: remove OUT/work/dedup/removals* "
                            "and OUT/work/done/removals.done, then run again")
        if int(rec["row"]) <= last:
            raise UserError(f"{path}: removals out of row order at row {rec['row']}: remove "
                            "OUT/work/dedup/removals* and OUT/work/done/removals.done, then run again")
        last = int(rec["row"])
        yield last, (rec["step"], rec["reason"], rec["kept"], rec["id"])


def removal_summary(path: Path) -> dict[str, Any]:
    """The numbers `find_duplicates` recorded in the removal list's done marker."""
    info = json.loads(io.done_marker(Path(path)).read_text())
    return {k: info[k] for k in ("documents", "removed", "renamed", "edges", "parts", "seconds")
            if k in info}
