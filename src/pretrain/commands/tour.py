"""`pretrain tour`: the lesson's worked examples, recomputed by the project's real modules."""

from __future__ import annotations

import argparse

HELP = "walk through the lesson's worked numbers, computed by the real curation, planner and trainer code"

DESCRIPTION = """\
Recomputes every worked example of the lesson "Pretraining at scale" (sections 1-5) with the
modules this project ships, and prints the lesson's tables:

  1  the belt on a seven-page crawl (language ID, quality rules, exact and near duplicates),
     naive Bayes votes, Jaccard and MinHash, the LSH S-curve, why duplicates get memorized,
     mixture epochs, the Chinchilla budget and model collapse
  2  the memory bill of a 7B model: 16 bytes per parameter, activations, ZeRO stages
  3  ring all-reduce traffic, tensor-parallel splits, the pipeline bubble
  4  float formats bit by bit, loss scaling, why master weights stay in fp32
  5  spike detection, global-norm clipping through a corrupted batch, the checkpoint interval

Examples:
  pretrain tour                       all sections
  pretrain tour --section 4           one section
  pretrain tour --figures figs/       also draw the lesson's figures as PNG files
  pretrain tour --json                every value as one JSON object

A part whose module is not installed is left out and named at the end of its section."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--section", action="append", choices=["1", "2", "3", "4", "5"], help="only this section (repeatable)"
    )
    parser.add_argument(
        "--figures", metavar="DIR", default=None, help="write the lesson's figures as PNG here"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")


def _print(sections) -> None:
    from rich.console import Console
    from rich.table import Table

    con = Console()
    # a pipe reports 80 columns: tables at 120; a note longer than that is one line, not cut
    # mid-sentence ("... clipped at" / "1."): a terminal wraps it at its own width
    con = Console(width=max(con.width, 120), soft_wrap=not con.is_terminal)
    for sec in sections:
        con.rule(f"[bold]{sec.number}. {sec.title}")
        for tab in sec.tables:
            con.print(f"[bold]{tab.title}[/]", highlight=False)
            t = Table()
            for i, col in enumerate(tab.columns):
                t.add_column(col, justify="left" if i == 0 or isinstance(tab.rows[0][i], str) else "right")
            for row in tab.rows:
                t.add_row(*(str(v) for v in row))
            con.print(t)
        for note in sec.notes:
            con.print(f"  {note}", highlight=False)
        for gap in sec.missing:
            con.print(f"  [yellow]left out[/] {gap}", highlight=False)
        con.print()


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from pretrain import tour
    from pretrain.errors import UserError
    from pretrain.jsonout import dumps

    if args.figures:  # before the sections' seconds of work: an unwritable folder stops at once
        try:
            Path(args.figures).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UserError(f"cannot write {e.filename or args.figures}: {e.strerror or e}") from e
    sections = tour.build_sections(args.section)
    if args.figures:
        from pretrain.tour_figures import draw_figures, figures_of

        try:  # --section picks the figures too: `--section 4 --figures f/` drew all twelve
            written = draw_figures(args.figures, figures_of(args.section))
        except OSError as e:
            raise UserError(f"cannot write {e.filename or args.figures}: {e.strerror or e}") from e
    if args.json:
        out = {s.number: {"title": s.title, "values": s.values, "missing": s.missing} for s in sections}
        if args.figures:
            out["figures"] = [str(p) for p in written]
        print(dumps(out, indent=2, default=str))
        return 0
    _print(sections)
    if args.figures:
        print(f"{len(written)} figures written to {args.figures}")
    return 0
