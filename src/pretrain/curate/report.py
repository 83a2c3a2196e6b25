"""The funnel: what each step of a corpus job let through, why it dropped the rest, what failed."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pretrain.untrusted import one_line

ERRORS_SHOWN = 5  # first bad-record examples printed under the funnel
TEXT_FIELD_HINT = "the text under another field? --text-field NAME"


def funnel_rows(stats: dict) -> list[tuple[str, int, int, int, str]]:
    """(step, in, kept, dropped, top reasons) for every step, in belt order."""
    rows = []
    for name in stats.get("step_order", list(stats["steps"])):
        s = stats["steps"][name]
        dropped = s.get("dropped", {})
        n_drop = sum(dropped.values())
        if s.get("in", 0) == 0 and n_drop == 0:
            continue
        top = ", ".join(f"{k} {v}" for k, v in sorted(dropped.items(), key=lambda kv: -kv[1])[:3])
        rows.append((name, s["in"], s["kept"] if "kept" in s else s["in"] - n_drop, n_drop, top))
    return rows


def error_lines(stats: dict, shown: int = ERRORS_SHOWN) -> list[str]:
    """'file: record R: reason' for the first few bad records, the first of each file first (one
    garbage file must not hide why another failed)."""
    examples = stats["errors"]["examples"]
    seen: set[str] = set()
    firsts = [e for e in examples if not (e["file"] in seen or seen.add(e["file"]))]
    picked = (firsts + [e for e in examples if e not in firsts])[:shown]
    # record None: the whole file failed (a Parquet/Arrow file without the text column), not a record
    return [one_line(f"{e['file']}: " + ("" if e["record"] is None else f"record {e['record']}: ")
                      + e["reason"]) for e in picked]  # names: theirs


def print_funnel(stats: dict, out: str | Path) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{stats.get('job', 'curation')} funnel", title_justify="left")
    for col, just in (
        ("step", "left"),
        ("in", "right"),
        ("kept", "right"),
        ("dropped", "right"),
        ("top reasons", "left"),
    ):
        table.add_column(col, justify=just)
    for name, n_in, kept, dropped, top in funnel_rows(stats):
        table.add_row(name, f"{n_in:,}", f"{kept:,}", f"{dropped:,}", top)
    console = Console()
    console.print(table)
    d = stats["documents"]
    share = d["kept"] / d["read"] if d["read"] else 0.0
    console.print(
        f"read {d['read']:,} documents, kept {d['kept']:,} ({share:.1%}); "
        f"{stats['errors']['count']:,} bad records skipped; {stats['wall_seconds']:.1f} s"
        + (f" over {stats['attempts']} attempts" if stats.get("attempts", 1) > 1 else ""),
        soft_wrap=True,  # one line in a log too (rich wraps at 80 columns without a terminal)
    )
    if renamed := stats.get("dedup", {}).get("renamed", 0):
        console.print(f"{renamed:,} documents kept under a repeated id were renamed ID#2, ID#3, ... "
                      "(ids are unique in data/)", soft_wrap=True)
    lines = error_lines(stats)
    if lines:
        console.print(f"first {len(lines)} of {stats['errors']['count']:,} bad records:")
        for line in lines:
            console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)
    from pretrain.curate.io import join

    for line in contamination_lines(out) if "decontaminate" in stats["steps"] else []:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    console.print(f"corpus: {join(out, 'data')}   rejects: {join(out, 'rejects')}   "
                  f"stats: {join(out, 'stats.json')}", soft_wrap=True)


def contamination_lines(out: str | Path, shown: int = 10) -> list[str]:
    """Per benchmark, how many of its items leaked into how many documents, and where the full
    list is (OUT/decontam_report.json): decontamination's answer, not only a drop count."""
    import json

    from pretrain.curate import io

    path = io.join(out, "decontam_report.json")
    if not io.exists(path):
        return []
    report = json.loads(io.read_bytes(path))
    lines = []
    for name, b in sorted(report["benchmarks"].items(), key=lambda kv: -kv[1]["items_leaked"])[:shown]:
        docs = len({d for ids in b["leaks"].values() for d in ids})
        lines.append(f"  {name}: {b['items_leaked']:,} of {b['items_indexed']:,} items leaked into "
                     f"{docs:,} documents")
    more = len(report["benchmarks"]) - shown
    return ["contamination (per benchmark):", *lines, *([f"  ... {more} more"] if more > 0 else []),
            f"which items, in which documents: {path}"]


def exit_code(stats: dict) -> int:
    """0, or 1 with one line on stderr when no document could be read (a job that read nothing
    did not succeed: every input was empty, truncated or not what its name says)."""
    if stats["documents"]["read"] > 0:
        return 0
    n = stats["errors"]["count"]
    first = error_lines(stats, 1)
    why = f"; first: {first[0]}" if first else ""
    reasons = stats["errors"].get("by_reason", {})
    if any(r.startswith(("missing text field", "missing text column")) for r in reasons):
        why += f"; {TEXT_FIELD_HINT}"
    print(f"error: no document could be read from the inputs ({n} bad records{why})", file=sys.stderr)
    return 1


def why_none_read(skipped: dict[str, int]) -> str:
    """The most frequent reason records were skipped, with the flag that fixes a missing text field
    (a command that read no document says this instead of a bare count)."""
    if not skipped:
        return "the inputs hold no record"
    why = max(skipped.items(), key=lambda kv: kv[1])[0]
    missing = why.startswith(("missing text field", "missing text column"))
    return f"most often: {why}" + (f"; {TEXT_FIELD_HINT}" if missing else "")


def resuming(tasks: list, lay, job: str, attempt: int) -> str | None:
    """Where a rerun picks up, from the done markers of earlier attempts, in one line: a log has no
    bar, and before this a resumed job said nothing until its funnel ("... over 2 attempts").
    One listing of the markers' folder (OUT is already this job's: no marker of another job)."""
    if attempt < 2 or not tasks:
        return None
    n = len(tasks)
    try:
        names = set(os.listdir(lay.removals_marker.parent))
    except OSError:
        names = set()

    def done(stage: str) -> int:
        return sum(lay.marker(stage, t.shard).name in names for t in tasks)

    parts = [f"{done('filter')} of {n} shard{'s' * (n != 1)} already filtered"]
    if lay.removals_marker.name in names:
        parts.append("dedup done")
    if written := done("write"):
        parts.append(f"{written} of {n} written")
    return f"pretrain {job}: resuming (attempt {attempt}): " + ", ".join(parts)
