"""The lesson's walkthrough (`pretrain tour`): every worked example of sections 1-5, computed by the
project's real modules, as named values and printable tables.

The package owns only the examples' *inputs* (a seven-page crawl written for the project, a small
bigram corpus, the lesson's counts and shapes) and the glue that feeds them to the library. One
module per part of the lesson, each declaring its worked examples (`PARTS`) with the modules they need:

- `cleaning`     1a-1c, 1i: the crawl through the belt (`curate.pipeline`), the Gopher rules, stop
                 words, the naive Bayes classifier (`curate.classifier`)
- `duplicates`   1e-1h: Jaccard, MinHash and LSH (`curate.minhash`), a bigram model reciting a line
- `mixture`      1j-1l: mixture passes (`tokens.mixture`), the Chinchilla budget (`plan.compute`),
                 model collapse
- `memory`       2: training state, activations and ZeRO (`plan.memory`)
- `parallelism`  3: data, tensor and pipeline parallelism (`plan.parallel`)
- `precision`    4: float formats (`numerics`) and the loss scaler (`train.precision`)
- `stability`    5: spikes, clipping (`train.stability`) and the checkpoint interval (`plan.reliability`)
- `parts`        `Section`, `Table` and the runner shared by all of them

This file is the table of contents: `run_all()` returns {section: {name: value}};
`build_sections()` also returns the tables. A part whose module is not installed is left out and
listed in `Section.missing`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pretrain.tour import cleaning, duplicates, memory, mixture, parallelism, precision, stability
from pretrain.tour.cleaning import (
    CRAWL,
    NAV_BAR,
    NB_BAD,
    NB_GOOD,
    NB_SENTENCES,
    belt_verdicts,
    gopher_on_nav_bar,
    rule_failures,
)
from pretrain.tour.duplicates import BOILERPLATE, OTHER_LINES, bigram_verbatim_probability
from pretrain.tour.mixture import refit_spreads
from pretrain.tour.parts import TITLES, Section, Table, build_section, module_available
from pretrain.tour.stability import bad_batch_losses

__all__ = [
    "BOILERPLATE", "CRAWL", "NAV_BAR", "NB_BAD", "NB_GOOD", "NB_SENTENCES", "OTHER_LINES", "SECTIONS",
    "TITLES", "Section", "Table", "bad_batch_losses", "belt_verdicts", "bigram_verbatim_probability",
    "build_sections", "gopher_on_nav_bar", "module_available", "refit_spreads", "rule_failures",
    "run_all", "section_1", "section_2", "section_3", "section_4", "section_5",
]


def section_1() -> Section:
    return build_section("1", cleaning.PARTS + duplicates.PARTS + mixture.PARTS)


def section_2() -> Section:
    return build_section("2", memory.PARTS)


def section_3() -> Section:
    return build_section("3", parallelism.PARTS)


def section_4() -> Section:
    return build_section("4", precision.PARTS)


def section_5() -> Section:
    return build_section("5", stability.PARTS)


SECTIONS: dict[str, Callable[[], Section]] = {
    "1": section_1,
    "2": section_2,
    "3": section_3,
    "4": section_4,
    "5": section_5,
}


def build_sections(only: list[str] | None = None) -> list[Section]:
    """Compute the requested sections (all by default), in the lesson's order."""
    keys = list(SECTIONS) if not only else only
    return [SECTIONS[k]() for k in keys]


def run_all(only: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """{section number: {value name: value}} for every worked example of the lesson."""
    return {s.number: dict(s.values) for s in build_sections(only)}
