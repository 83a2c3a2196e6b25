"""What a section of the tour is made of: `Table`, `Section`, the lesson's section titles, and the
runner that computes one worked example or, when a module it needs is not installed, names it in
`Section.missing` instead."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[Any]]


@dataclass
class Section:
    number: str
    title: str
    values: dict[str, Any] = field(default_factory=dict)
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


# One worked example: the modules it needs, and the function that adds its values, tables and notes.
Part = tuple[tuple[str, ...], Callable[[Section], None]]

TITLES = {
    "1": "Where the data comes from, and how it is cleaned",
    "2": "Why one GPU is not enough: the memory bill",
    "3": "Parallelism: many GPUs, one model",
    "4": "Mixed precision: doing the maths in fewer bits",
    "5": "Stability at scale: spikes, clipping, checkpoints",
}


def module_available(name: str) -> bool:
    """True when `name` (e.g. "pretrain.curate.rules") can be imported in this install."""
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def run_part(sec: Section, part: Part) -> None:
    """Run one worked example; leave it out (and say so) when a module it needs is not built yet."""
    needs, fn = part
    absent = [m for m in needs if not module_available(m)]
    if absent:
        sec.missing.append(f"{fn.__name__.lstrip('_')}: needs {', '.join(absent)}")
        return
    fn(sec)


def build_section(number: str, parts: list[Part]) -> Section:
    """Section `number` of the lesson with each of its worked examples run in order."""
    sec = Section(number, TITLES[number])
    for part in parts:
        run_part(sec, part)
    return sec
