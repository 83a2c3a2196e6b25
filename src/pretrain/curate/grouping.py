"""Inputs grouped into shards: the unit of work of a corpus job (`[shards]` in the config).

One shard per input file made a folder of 10,000 one-page JSONL files 10,000 units, each with its
markers, stats, rejects and dedup parts (dedup of 10,000 files did not finish in 900 s, session
12). Consecutive inputs, in the job's sorted order, are packed into one shard until it would pass
`target_bytes` or hold `max_inputs` files; a file of `target_bytes` or more is a shard of its own.
The grouping depends on the sorted list of (file, size) alone, never on the number of workers or
the executor (datatrove's readers give rank r the files r, r + W, ...: its output files follow
the worker count W), so the output is the same bytes for any of them.

The grouping is part of the plan, not of the job's identity: OUT/plan.json records it (`shards`:
the settings and each shard's input count) and a rerun uses the recorded one whatever `[shards]`
it is given, since the shard numbers name the done markers and the outputs already written. A
plan written before shards were grouped records none: it ran, and resumes, one input per shard.
"""

from __future__ import annotations

from dataclasses import dataclass

from pretrain import config as cfgmod

MiB = 1 << 20


@dataclass
class ShardsConfig:
    """How inputs are packed into shards (the unit a worker runs, resumes and names outputs by)."""

    # a shard's inputs add up to at most this many bytes (a bigger file is a shard alone) ...
    target_bytes: int = cfgmod.bounded(64 * MiB, lo=1,
                                       why="bytes of a shard's inputs; a bigger file is a shard alone")
    # ... and number at most this (1: one shard per file, as before session 13)
    max_inputs: int = cfgmod.bounded(1000, lo=1, why="input files per shard; 1 = one shard per file")


def group(sizes: list[int], cfg: ShardsConfig) -> list[int]:
    """Each shard's number of inputs, for inputs of `sizes` bytes in job order (consecutive runs)."""
    counts: list[int] = []
    n = total = 0
    for size in sizes:
        if n and (n >= cfg.max_inputs or total + size > cfg.target_bytes):
            counts.append(n)
            n = total = 0
        n, total = n + 1, total + size
    if n:
        counts.append(n)
    return counts


def spans(counts: list[int]) -> list[range]:
    """Each shard's positions in the job's input list."""
    out, start = [], 0
    for n in counts:
        out.append(range(start, start + n))
        start += n
    return out


def recorded(plan: dict, n_inputs: int) -> tuple[ShardsConfig, list[int]]:
    """The settings and grouping an existing plan ran with: its `shards` record, or one input per
    shard for a plan written before grouping (its outputs are named so)."""
    rec = plan.get("shards")
    if not isinstance(rec, dict):
        return ShardsConfig(max_inputs=1), [1] * n_inputs
    counts = rec.get("counts")
    if not (isinstance(counts, list) and all(isinstance(c, int) and c > 0 for c in counts)
            and sum(counts) == n_inputs):
        raise ValueError(f"its shards record does not cover its {n_inputs:,} inputs")
    return ShardsConfig(int(rec["target_bytes"]), int(rec["max_inputs"])), counts


def record(cfg: ShardsConfig, counts: list[int]) -> dict:
    """What plan.json keeps: the settings and each shard's input count."""
    return {"target_bytes": cfg.target_bytes, "max_inputs": cfg.max_inputs, "counts": counts}


def describe(cfg: ShardsConfig) -> str:
    return f"target_bytes = {cfg.target_bytes:,}, max_inputs = {cfg.max_inputs:,}"
