"""`pretrain dedup`: exact and near-duplicate removal over a JSONL/Parquet corpus."""

from __future__ import annotations

import argparse

from pretrain.commands import TEXT_FIELD_HELP, add_runner_arguments, text_field_override

HELP = "remove exact and near duplicates (MinHash + LSH) from a corpus, with bounded memory"
DESCRIPTION = """\
Remove duplicate documents from CORPUS (JSON Lines or a JSON array, plain, .gz, .zst, .bz2 or .xz;
Parquet; Arrow from datasets' save_to_disk; text; folders are searched recursively, hidden and
_-prefixed names left out; small files are grouped into shards of up to 64 MiB, see [shards];
--text-field content for The Stack's layout)
and write the rest to OUT.

Exact duplicates: equal text after lowercasing and collapsing whitespace (and, with
--set dedup.url=true, equal URLs). Near duplicates: MinHash over word 5-grams of the normalized
text (lowercase, digits -> 0, punctuation -> space, accents stripped), 14 bands x 8 rows. Two
documents become a candidate pair when all 8 values of one band agree, which happens with
probability 1 - (1 - s^8)^14 for a pair with Jaccard similarity s (see --explain); a candidate
is kept when at least 70% of its 112 MinHash values agree (dedup.threshold; dedup.verify=none
skips the check, as datatrove does). Pairs join into clusters; each cluster keeps one document
(the smallest id, or the first in input order with --set keep=first). Documents with fewer than
5 words only take part in exact dedup.

Memory stays bounded: a shard is signed in parts of dedup.chunk_docs documents (50,000, about
30 MB), each written sorted; keys are grouped per key range within dedup.memory_mb; clusters are
found by streaming edge files (8 bytes per document stay in memory). One file of 1M tiny
documents peaks at about 150 MB, as 100k does. A killed run resumes where it stopped and gives
the same result, for any --workers and any chunk size. Other inputs or config into the same OUT
are refused.

This is the curation belt with steps = ["dedup"] (see `pretrain curate --help`): the same driver,
layout, stats and reject records; --set steps='["language","dedup"]' filters first.

Output (OUT/):
  data/*.jsonl.zst      kept documents: id, text, url, source, metadata
  rejects/*.jsonl.zst   removed documents: id, url, source, step (exact_dedup | near_dedup),
                        reason, kept_id (the twin that was kept), text excerpt
  stats.json            documents read, kept, removed by step and reason, errors, wall time
  config.toml, plan.json  the resolved config; the job's identity (inputs, sizes, config hash)

Examples:
  pretrain dedup corpus/*.jsonl.zst --output deduped/
  pretrain dedup data/ -o out/ --set dedup.bands=20 --set dedup.rows=5 --workers 8
  pretrain dedup --explain --set dedup.bands=20 --set dedup.rows=5
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("inputs", nargs="*", metavar="CORPUS",
                   help="files, folders, globs or URLs (s3://bucket/prefix, ...)")
    p.add_argument("-o", "--output", metavar="OUT",
                   help="output directory or URL (s3://bucket/prefix, ...)")
    p.add_argument("--config", metavar="TOML",
                   help="belt config file (sections: reader, dedup; keys: keep, steps)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key, e.g. --set dedup.bands=20 (repeatable)")
    p.add_argument("--text-field", default=None, metavar="NAME", help=TEXT_FIELD_HELP)
    p.add_argument("--explain", action="store_true",
                   help="print the S-curve 1-(1-s^r)^b of the chosen bands and rows, and exit")
    add_runner_arguments(p)


def explain(bands: int, rows: int) -> str:
    """The S-curve table for `--explain`."""
    from pretrain.curate.minhash import s_curve_table, threshold

    lines = [f"LSH with b = {bands} bands x r = {rows} rows ({bands * rows} hashes per document)",
             "P(a pair with Jaccard s becomes a candidate) = 1 - (1 - s^r)^b",
             f"steepest near s = (1/b)^(1/r) = {threshold(bands, rows):.3f}", "",
             "   s    P(candidate)"]
    for s, p in s_curve_table(bands, rows):
        bar = "#" * round(p * 40)
        lines.append(f"  {s:4.2f}  {p:10.4f}  {bar}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from pretrain.commands.curate import run_belt
    from pretrain.curate.dedup_job import job_config
    from pretrain.errors import UserError

    cfg = job_config("dedup", args.config, text_field_override(args) + args.overrides)
    if args.explain:
        print(explain(cfg.dedup.bands, cfg.dedup.rows))
        return 0
    if not args.inputs or not args.output:
        raise UserError("give CORPUS files and --output OUT (or --explain)")
    return run_belt("dedup", args, cfg)
