"""Printing a plan (the dict from `report.build_plan`) as readable rich tables."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from pretrain.plan.memory import size_text


def _fmt(v: object) -> str:
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if v == 0:
            return "0"
        if abs(v) >= 1e12 or abs(v) < 1e-3:
            return f"{v:.3e}"
        return f"{v:,.4g}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


def _size(v: object) -> str:
    return size_text(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else _fmt(v)


# Shares of a whole: shown as percentages (the top-layouts table prints MFU so; the --json keeps
# the fractions).
SHARES = {"efficiency", "mfu", "hfu", "hfu_causal", "wall", "ideal", "waste_fraction", "goodput"}
NOTES = {"flops_convention", "published_check"}  # long sentences: printed under their table, not in it


def _is_size(key: str) -> bool:
    """A JSON key holding GB (memory_gb_per_gpu, training_state_gb, ...): printed by size_text."""
    return "gb" in key.split("_")


def _label(key: str) -> str:
    return " ".join(w for w in key.split("_") if w != "gb")  # the unit is in the value


def _section(console: Console, title: str, rows: dict, sizes: bool = False) -> None:
    """One table of `rows`; `sizes`: every number is in GB (as are the rows `_is_size` names)."""
    console.print(f"[bold]{title}[/bold]")
    t = Table(show_header=False, pad_edge=False, min_width=40)
    t.add_column("what", style="cyan")
    t.add_column("value", justify="right")
    for k, v in rows.items():
        if k in NOTES:
            continue
        fmt = _size if sizes or _is_size(k) else _fmt
        if isinstance(v, dict):
            v = ", ".join(f"{kk} {fmt(vv)}" for kk, vv in v.items())
        elif k in SHARES and isinstance(v, float):
            v = f"{v:.1%}"
        elif fmt is _size:
            v = _size(v)
        t.add_row(_label(k), _fmt(v))
    console.print(t)
    for k in rows:  # in the dict's order: a set's would change between runs
        if k in NOTES:
            console.print(rows[k])


def print_plan(plan: dict, console: Console | None = None) -> None:
    console = console or Console(width=max(Console().width, 120))
    if plan["headline"].get("published_note"):  # first, not only under the Time table (session 14)
        console.print(f"[bold]Expect:[/bold] {plan['headline']['published_note']}", highlight=False)
    _section(console, "Model", plan["model"])
    _section(console, "Cluster", plan["cluster"])
    _section(console, "Budget", plan["budget"])
    _section(console, "Training state of one unsharded replica", plan["memory_single_replica"], sizes=True)
    lay = plan["layout"]
    if lay is None:
        console.print("[red]no layout fits[/red]")
    else:
        status = "fits" if lay["fits"] else f"[red]dropped: {lay['reason']}[/red]"
        m = lay["micro_batches"]
        console.print(f"\n[bold]Layout[/bold] {lay['label']}  ({status}, {m} micro-batches)")
        if lay.get("headroom_note"):
            console.print(lay["headroom_note"])
        if "memory_gb" in lay:
            _section(console, "Memory per GPU, busiest GPU", lay["memory_gb"], sizes=True)
            _activations_note(console, plan.get("software", {}))
        if "times_s" in lay:
            _section(console, "Step time (s) by term", lay["times_s"])
    for key, title in (("time", "Time"), ("communication_gb_per_step", "Communication per GPU per step"),
                       ("bubble", "Pipeline bubble"), ("reliability", "Failures and checkpoints")):
        if key in plan:
            _section(console, title, plan[key], sizes=key == "communication_gb_per_step")
    _print_search(console, plan["search"])


COUNTED = {"pretrain": "this project's trainer saves them (--activations pretrain)",
           "torchtitan": "torchtitan saves them (bf16, no autocast; --activations torchtitan)",
           "fused": "fused kernels save them (Megatron-Core/TE)"}


def _activations_note(console: Console, sw: dict) -> None:
    # The default counts fused kernels (Megatron-Core/TE): say so, and what `pretrain train` needs.
    counted = COUNTED.get(sw.get("activations"), COUNTED["fused"])
    if sw.get("pretrain_trainer_refuses"):
        near = sw.get("pretrain_trainer_nearest")
        instead = (f"--emit-recipe writes {near['label']} ({size_text(near['gb'])} with its saved tensors)"
                   if near else "--emit-recipe writes nothing for it")
        console.print(f"activations as {counted}; this project's trainer (`pretrain train`) [red]cannot "
                      f"run this layout[/red] ({'; '.join(sw['pretrain_trainer_refuses'])}): {instead}")
    elif "pretrain_trainer_gb" in sw:
        verdict = "fits" if sw["pretrain_trainer_fits"] else "[red]does not fit[/red]"
        console.print(f"activations as {counted}; this project's "
                      f"trainer (`pretrain train`) would need {size_text(sw['pretrain_trainer_gb'])} "
                      f"in all ({verdict}): plan its runs with --activations pretrain")
    elif sw.get("activations") == "pretrain":
        console.print("activations as this project's trainer saves them (--activations pretrain)")
    if sw.get("dropout_masks") is False:
        console.print("no dropout masks counted: blocks trained at dropout 0 (--no-dropout)")
    if sw.get("attention_kernel") == "flash1":
        console.print("attention at FlashAttention-1's speed, half FlashAttention-2's (--attention flash1)")


def _print_search(console: Console, s: dict) -> None:
    console.print(f"[bold]Top layouts ({s['feasible']:,} of {s['evaluated']:,} fit)[/bold]")
    t = Table()
    for col in ("layout", "tokens/s", "MFU", "step s", "memory/GPU"):
        t.add_column(col, justify="right" if col != "layout" else "left", no_wrap=True)
    for e in s["top"]:
        t.add_row(e["label"], f"{e['tokens_per_s']:,.0f}", f"{e['mfu']:.1%}", f"{e['step_s']:.3g}",
                  size_text(e["memory_gb"]["total"]))
    console.print(t)
    if any(e["mfu"] > 1 for e in s["top"]):
        console.print("MFU above 100%: attention counted with no causal halving (PaLM convention), timed as "
                      "the causal kernel runs it (half); see hfu_causal")
    if s["rejected"]:
        console.print("dropped: " + "; ".join(f"{k}: {v:,}" for k, v in s["rejected"].items()))
    console.print("[bold]Why this layout[/bold]")
    for line in s["explanation"]:
        console.print(f"  {line}")
