"""`pretrain curate`: the curation belt from raw inputs to a clean corpus."""

from __future__ import annotations

import argparse

from pretrain.bounds import Number

HELP = "the curation belt: inputs -> clean corpus, rejects with reasons, stats"
DESCRIPTION = """\
Run the curation belt over INPUT files or folders and write a clean corpus.

Inputs: WARC/WET/ARC (.warc, .warc.gz, .wet.gz, .arc.gz), HTML files (.html, .html.gz), JSON
Lines or a JSON array (.jsonl, .json, .ndjson; plain, .gz, .zst, .bz2, .xz), Parquet, Arrow
(datasets' save_to_disk), plain text. Folders are searched recursively (hidden and _-prefixed
files and folders, such as Spark's _SUCCESS, are left out; files of other types are counted on
stderr); consecutive files make a shard of up to 64 MiB and 1,000 files ([shards] target_bytes,
max_inputs; a bigger file is a shard alone). docs/readers.md lists what reads how.

The belt, in FineWeb's order (each step can be turned off or re-tuned with --set):
  url_filter -> extract (HTML -> main text; extract.backend = blocks (default, extract.strict = true),
     resiliparse or trafilatura)
  -> language (fastText lid.176, CLD3 where lid.176 is unsure; keep score >= 0.65; a page over
     600 chars is judged on a 150-char sample, then 600, then 2,000 chars, when conclusive:
     language.max_chars, language.reread_chars, language.third_chars, 0 = all)
  -> gopher_repetition -> gopher_quality -> c4_quality (rewrites lines) -> fineweb_quality
  -> classifier (optional) -> decontaminate (optional) -> pii (optional)
  -> exact_dedup -> near_dedup (MinHash 5-grams, 14 bands x 8 rows)
  -> site_lines (off: --set dedup.site_lines=2 removes the lines 3+ pages of one site share)
The list is yours: --set steps='["extract","language","my_pkg.steps:Boilerplate","dedup"]' runs
those, in that order (a "module:callable" is your own Step; dedup, a global stage, comes last).

Output (OUT/):
  data/*.jsonl.zst      kept documents: id, text, url, source, metadata (scores)
  rejects/*.jsonl.zst   dropped documents with step and reason (dedup rejects name the kept twin)
  stats.json            per step: in, kept, dropped by reason; errors; totals; wall time
  config.toml           the resolved config
  plan.json             the job's identity: inputs with sizes, resolved config, their hash
  README.md             dataset card: load_dataset("OUT"), load_dataset("OUT", "rejects") (HF datasets)
  work/                 markers, intermediate shards, temporary files (safe to delete when done)

Rerunning the same command resumes a killed job (finished shards are skipped) and gives the same
bytes as an uninterrupted run, for any --workers; a finished job's rerun says "already complete:
nothing to do" and labels the totals as the job's. Other inputs or config into the same OUT are
refused. Exit status 1 when no document could be read (the first bad records are printed).

Examples:
  pretrain curate crawl/*.warc.gz -o corpus/
  pretrain curate docs.jsonl.zst -o corpus/ --text-field content \\
      --set language.languages='["en","fr"]'
  pretrain curate data/ -o corpus/ --config belt.toml --workers 8
  pretrain curate data/ -o corpus/ --executor ray --address auto
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    from pretrain.commands import TEXT_FIELD_HELP, add_exclude

    p.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="files, folders, globs or URLs (s3://bucket/prefix, ...)")
    p.add_argument("-o", "--output", required=True, metavar="OUT",
                   help="output directory or URL (s3://bucket/prefix, ...)")
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
    p.add_argument("--text-field", default=None, metavar="NAME", help=TEXT_FIELD_HELP)
    add_exclude(p)
    p.add_argument("--workers", type=Number(int, lo=1, hi=4096, why="processes, one per core"),
                   default=None, help="processes (default: all cores)")
    p.add_argument(
        "--executor",
        choices=["local", "ray"],
        default="local",
        help="local process pool (default) or a Ray cluster",
    )
    p.add_argument("--work-dir", metavar="DIR", default=None,
                   help="markers and intermediate shards (default OUT/work; for an s3:// or other URL OUT, "
                   "a folder under ~/.cache/pretrain/work; with Ray on several nodes, a folder all mount). "
                   "It holds the attempt lock: one attempt of a job at a time per work folder, so do not "
                   "run one job from two hosts or two work folders (docs/curation.md)")
    p.add_argument("--address", default=None, help="Ray cluster address (with --executor ray)")
    p.add_argument("--quiet", action="store_true", help="do not echo the changed settings")
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: when stderr is a terminal)",
    )


def run(args: argparse.Namespace) -> int:
    from pretrain.commands import text_field_override
    from pretrain.curate.dedup_job import job_config

    cfg = job_config("curate", args.config, text_field_override(args) + args.overrides)
    return run_belt("curate", args, cfg)


def echo_config(job: str, cfg, out: str) -> str:
    """The settings that differ from the job's defaults; the whole config goes to OUT/config.toml."""
    from pretrain import config
    from pretrain.curate.dedup_job import job_config

    return config.echo(cfg, f"{out.rstrip('/')}/config.toml", base=job_config(job))


def run_belt(job: str, args: argparse.Namespace, cfg) -> int:
    """The one driver of every corpus command: run, print the funnel, exit 1 if nothing was read.

    `--quiet` drops the echo of changed settings; the bar follows `--progress` (default: a terminal).
    """
    from pretrain.curate.executor import build_executor
    from pretrain.curate.pipeline import curate
    from pretrain.curate.report import exit_code, print_funnel
    from pretrain.progress import Progress

    executor = build_executor(args.executor, args.workers, args.address)  # before a bar: one line
    progress = Progress(getattr(args, "progress", None))

    def claimed(used) -> None:  # after OUT is this job's: a refusal is then the first and only line
        # `used`: the config the job runs with (a rerun keeps the [shards] of OUT's plan, session 14)
        if not args.quiet:
            progress.console.print(echo_config(job, used, args.output), markup=False, highlight=False,
                                   soft_wrap=True)
        for warning in (english_rules_warning(used), work_dir_warning(args)):
            if warning:
                progress.console.print(f"[yellow]warning:[/] {warning}", highlight=False)

    try:
        stats = curate(args.inputs, args.output, cfg, executor=executor, progress=progress, job=job,
                       work_dir=args.work_dir, claimed=claimed, exclude=tuple(getattr(args, "exclude", ())))
    finally:
        progress.close()
    print_funnel(stats, args.output)
    return exit_code(stats)


def work_dir_warning(args: argparse.Namespace) -> str | None:
    """Joining a Ray cluster with an object-store OUT and no --work-dir: the work folder is this
    machine's, which the global dedup stage must read from every node's shards."""
    from pretrain.curate.io import is_url

    if args.executor != "ray" or not args.address or not is_url(args.output) or args.work_dir:
        return None
    return ("the work folder (markers, dedup signatures) defaults to this machine's ~/.cache; with worker "
            "nodes, give --work-dir on storage every node mounts")


def english_rules_warning(cfg) -> str | None:
    """The Gopher, C4 and FineWeb rules were written for English (words split on spaces, English
    stop words, terminal punctuation): say so when the belt lets other languages reach them."""
    r, lang = cfg.rules, cfg.language
    families = ("gopher_repetition", "gopher_quality", "c4_quality", "fineweb_quality")
    on = [n for n in families if getattr(r, n)]
    others = [x for x in lang.languages if x != "en"] if lang.enabled and lang.languages else ["any"]
    if not on or not others:
        return None
    which = "every language" if others == ["any"] else ", ".join(others)
    return (f"the belt keeps {which} but {', '.join(on)} are English rules (words split on spaces, "
            f"English stop words): they drop most pages in other languages, e.g. every Japanese one; "
            f"turn them off for those (--set rules.gopher_quality=false ...) or curate each language apart")
