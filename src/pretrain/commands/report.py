"""`pretrain report`: one self-contained HTML page from runs of the other commands."""

from __future__ import annotations

import argparse

HELP = "one self-contained HTML page: funnel, dedup clusters, mixture, plan, loss curves, samples"
DESCRIPTION = """\
Build one HTML page (no network needed to view it; plots embedded) from any of:
  a curate output directory     funnel per step, examples of rejects, duplicate clusters
  a token directory             its manifest
  a mixture JSON                the mixture table (`pretrain mix mixture.toml --json > mix.json`)
  a plan JSON                   `pretrain plan ... --json > plan.json`
  a training run directory      loss / learning-rate / grad-norm curves, spike and rollback events,
                                throughput and MFU, in-loop evaluations, samples
  an eval result JSON           `pretrain eval` (RUN/eval/step_N.json): one row per task
Each may be a URL (s3://bucket/corpus, gs://..., any fsspec URL): only the small files the page
needs are read (stats, metrics.jsonl, manifests; rejects streamed up to what the page shows).

Example:
  pretrain report demo-out/corpus demo-out/tokens/web demo-out/mixture.json demo-out/plan.json \\
      demo-out/run -o report.html
  pretrain report s3://corpora/web-en s3://runs/tiny -o report.html
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="curate outputs, token dirs, mixture, plan or eval JSON, runs")
    p.add_argument("-o", "--output", default="report.html", help="HTML file to write (default report.html)")
    p.add_argument("--title", default="pretrain report", help="the page's title (default: pretrain report)")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from pretrain.curate.io import is_url, write_bytes_atomic
    from pretrain.errors import UserError
    from pretrain.report import build_report

    for p in args.paths:
        if not is_url(p) and not Path(p).exists():  # a URL is looked up when its section is built
            raise UserError(f"not found: {p}")
    out = Path(args.output)
    if out.is_dir():
        raise UserError(f"{out} is a folder: give the HTML file to write, e.g. -o {out / 'report.html'}")
    try:
        page = build_report([p if is_url(p) else Path(p) for p in args.paths], args.title)
    except ValueError as e:
        raise UserError(str(e)) from e
    try:
        write_bytes_atomic(out, page.encode("utf-8"))
    except OSError as e:
        raise UserError(f"cannot write {out}: {e.strerror or e}") from e
    print(f"wrote {out}")
    return 0
