"""The funnel: what each step of a curate run let through and why it dropped the rest."""

from __future__ import annotations

from pathlib import Path


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


def print_funnel(stats: dict, out: str | Path) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="curation funnel", title_justify="left")
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
    )
    console.print(
        f"corpus: {Path(out) / 'data'}   rejects: {Path(out) / 'rejects'}   stats: {Path(out) / 'stats.json'}"
    )
