"""Subcommands of the `pretrain` CLI: argument parsing and calls into the library, no logic."""

from __future__ import annotations

import argparse

from pretrain.bounds import Number


def add_exclude(p: argparse.ArgumentParser) -> None:
    """`--exclude GLOB` (repeatable), for every command that walks input folders (inputs.excluded)."""
    p.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                   help="leave out the files of a folder, glob or bucket prefix that match: a name "
                        "(LICENSE*, README.txt) or, with a /, a path below it (docs/*); repeatable. "
                        "Files read that look like a licence or readme are named on stderr")


def add_runner_arguments(p: argparse.ArgumentParser) -> None:
    """The options every corpus job (dedup, decontaminate) shares: where it runs and what it shows."""
    add_exclude(p)
    p.add_argument("--workers", type=Number(int, lo=1, hi=4096, why="processes, one per core"),
                   default=None, help="processes (default: all cores)")
    p.add_argument("--executor", choices=["local", "ray"], default="local",
                   help="local process pool (default) or a Ray cluster")
    p.add_argument("--work-dir", metavar="DIR", default=None,
                   help="markers and intermediate shards (default OUT/work; for an s3:// or other URL OUT, "
                   "a folder under ~/.cache/pretrain/work; with Ray on several nodes, a folder all mount). "
                   "It holds the attempt lock: one attempt of a job at a time per work folder, so do not "
                   "run one job from two hosts or two work folders (docs/curation.md)")
    p.add_argument("--address", default=None, help="Ray cluster address (with --executor ray)")
    p.add_argument("--quiet", action="store_true", help="do not echo the changed settings")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: when stderr is a terminal)")


TEXT_FIELD_HELP = ("the JSON/Parquet field holding the text (default text; The Stack and starcoder data: "
                   "content, RedPajama-V2: raw_content); the same as --set reader.text_field=NAME")


def text_field_override(args: argparse.Namespace) -> list[str]:
    """`--text-field NAME` as the config override it stands for (before the user's own --set)."""
    import json

    return [f"reader.text_field={json.dumps(args.text_field)}"] if args.text_field else []
