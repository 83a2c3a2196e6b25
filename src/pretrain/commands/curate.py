"""`pretrain curate`: the curation belt from raw inputs to a clean corpus."""

from __future__ import annotations

import argparse

HELP = "the curation belt: inputs -> clean corpus, rejects with reasons, stats"
DESCRIPTION = """\
Run the curation belt over INPUT files or folders and write a clean corpus.

Inputs: WARC/WET/ARC (.warc, .warc.gz, .wet.gz, .arc.gz), HTML files, JSONL (.jsonl, .jsonl.gz,
.jsonl.zst), Parquet, plain text. Folders are searched recursively; each file is one shard.

The belt, in FineWeb's order (each step can be turned off or re-tuned with --set):
  url_filter -> extract (HTML -> main text; extract.backend = resiliparse, blocks or trafilatura)
  -> language (fastText lid.176, CLD3 where lid.176 is unsure; keep score >= 0.65)
  -> gopher_repetition -> gopher_quality -> c4_quality (rewrites lines) -> fineweb_quality
  -> classifier (optional) -> decontaminate (optional) -> pii (optional)
  -> exact_dedup -> near_dedup (MinHash 5-grams, 14 bands x 8 rows)

Output (OUT/):
  data/*.jsonl.zst      kept documents: id, text, url, source, metadata (scores)
  rejects/*.jsonl.zst   dropped documents with step and reason (dedup rejects name the kept twin)
  stats.json            per step: in, kept, dropped by reason; errors; totals; wall time
  config.toml           the resolved config

Rerunning the same command resumes a killed job (finished shards are skipped) and gives the same
bytes as an uninterrupted run, for any --workers. A different config in the same OUT is refused.

Examples:
  pretrain curate crawl/*.warc.gz -o corpus/
  pretrain curate docs.jsonl.zst -o corpus/ --set reader.text_field=content \\
      --set language.languages='["en","fr"]'
  pretrain curate data/ -o corpus/ --config belt.toml --workers 8
  pretrain curate data/ -o corpus/ --executor ray --address auto
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="files, folders or globs")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="output directory")
    p.add_argument(
        "--config",
        metavar="TOML",
        help="belt config file (sections: reader, url_filter, "
        "extract, language, rules, classifier, decontam, pii, dedup)",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, e.g. --set rules.profile=fineweb-2024 (repeatable)",
    )
    p.add_argument("--workers", type=int, default=None, help="processes (default: all cores)")
    p.add_argument(
        "--executor",
        choices=["local", "ray"],
        default="local",
        help="local process pool (default) or a Ray cluster",
    )
    p.add_argument("--address", default=None, help="Ray cluster address (with --executor ray)")
    p.add_argument("--quiet", action="store_true", help="no config echo, no progress bar")


def run(args: argparse.Namespace) -> int:
    from pretrain import config
    from pretrain.curate.executor import build_executor
    from pretrain.curate.pipeline import CurateConfig, curate
    from pretrain.curate.report import print_funnel
    from pretrain.progress import Progress

    cfg = config.load(CurateConfig, args.config, args.overrides)
    progress = None if args.quiet else Progress()
    if not args.quiet:
        progress.console.rule("resolved config")
        progress.console.print(config.dumps(cfg), markup=False, highlight=False)
    executor = build_executor(args.executor, args.workers, args.address)
    try:
        stats = curate(args.inputs, args.output, cfg, executor=executor, progress=progress)
    finally:
        if progress:
            progress.close()
    print_funnel(stats, args.output)
    return 0
