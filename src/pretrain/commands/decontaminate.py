"""`pretrain decontaminate`: remove (or tag) corpus documents that contain evaluation-set text."""

from __future__ import annotations

import argparse

from pretrain.bounds import Number
from pretrain.commands import add_runner_arguments

HELP = "find benchmark text (13-gram overlap) in a corpus; remove or tag those documents"
DESCRIPTION = """\
A model that saw a benchmark's questions during pretraining scores well on it for the wrong
reason. This command indexes the word n-grams (13 by default; lowercased, punctuation stripped)
of evaluation sets and flags every corpus document that shares one with an item (the test of the
GPT-3 paper, appendix C). Items shorter than 13 words are matched whole; items under 8 words
are too generic to check and are counted as too_short.

Benchmarks: JSONL files (.jsonl, .jsonl.gz, .jsonl.zst) or folders of them. The usual text
fields (question, query, context, prompt, choices, answer, canonical_solution, ...) are used, or
name them: `file.jsonl:question` or `file.jsonl:meta.prompt,answer`. Nothing is downloaded:
point it at the sets you evaluate on.

This is the curation belt with steps = ["decontaminate"] (see `pretrain curate --help`): the same
driver, layout, stats, reject records and resume; other inputs or config into OUT are refused.
The benchmark index (seconds) is built only when there is work: a rerun of a finished job, or a
refused one, says so at once.

Output (OUT/):
  data/*.jsonl.zst      kept documents (in --mode tag: all, with metadata.contamination)
  rejects/*.jsonl.zst   removed documents with step, reason and the items they contain (metadata)
  decontam_report.json  per benchmark: items indexed, too short, leaked items -> document ids
  stats.json            documents read, kept, dropped by reason; bad records skipped
  config.toml, plan.json  the resolved config; the job's identity (inputs, sizes, config hash)

Examples:
  pretrain decontaminate corpus/data -o clean/ --benchmarks evals/mmlu evals/gsm8k/test.jsonl
  pretrain decontaminate web.jsonl.zst -o clean/ --benchmarks my_eval.jsonl:prompt --mode tag
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("inputs", nargs="+", metavar="CORPUS",
                   help="corpus files/folders or URLs (JSONL, Parquet, text)")
    p.add_argument("-o", "--output", required=True, metavar="OUT",
                   help="output directory or URL (s3://bucket/prefix, ...)")
    p.add_argument("--benchmarks", nargs="+", required=True, metavar="SPEC",
                   help="evaluation files or folders, optionally FILE:field.path[,field]")
    p.add_argument("--n", type=Number(int, lo=1, hi=1000, why="words per n-gram; published ones are 8 to 50"),
                   default=13, help="n-gram length in words (default 13)")
    p.add_argument("--min-words", type=Number(int, lo=1, hi=1000, why="words; at most --n"),
                   default=8, help="shorter items are not checked (default 8)")
    p.add_argument("--mode", choices=["remove", "tag"], default="remove",
                   help="remove: drop contaminated documents to OUT/rejects (default); "
                   "tag: keep them all, with metadata.contamination")
    p.add_argument("--text-field", default="text", help="JSONL/Parquet field holding the text (default text)")
    p.add_argument("--id-field", default="id", help="JSONL/Parquet field holding the id (default id)")
    p.add_argument("--config", metavar="TOML", help="belt config file (any section of pretrain curate's)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key (repeatable)")
    add_runner_arguments(p)


def run(args: argparse.Namespace) -> int:
    import json

    from pretrain.commands.curate import run_belt
    from pretrain.curate.dedup_job import job_config

    flags = [f"decontam.benchmarks={json.dumps(list(args.benchmarks))}", f"decontam.n={args.n}",
             f"decontam.min_words={args.min_words}", f'decontam.mode="{args.mode}"',
             f"reader.text_field={json.dumps(args.text_field)}",
             f"reader.id_field={json.dumps(args.id_field)}"]
    cfg = job_config("decontaminate", args.config, flags + args.overrides)
    return run_belt("decontaminate", args, cfg)
