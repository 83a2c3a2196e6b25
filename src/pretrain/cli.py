"""The `pretrain` command line: one argparse entry that dispatches to subcommands.

Each subcommand lives in `pretrain.commands.<name>` and exposes `HELP` (one line), `DESCRIPTION`
(the teaching text shown by `--help`), `add_arguments(parser)` and `run(args) -> int`. Command
modules keep heavy imports (torch, pyarrow, ...) inside `run`, so `pretrain --help` stays fast.
No logic lives here.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from pretrain.errors import DataError, UserError

# name -> module under pretrain.commands (order is the order `pretrain --help` lists them).
COMMANDS: dict[str, str] = {
    "curate": "curate",
    "dedup": "dedup",
    "decontaminate": "decontaminate",
    "classifier": "classifier",
    "tokenizer": "tokenizer",
    "tokenize": "tokenize",
    "tokens": "tokens",
    "mix": "mix",
    "plan": "plan",
    "train": "train",
    "sample": "sample",
    "export": "export",
    "eval": "eval",
    "ablate": "ablate",
    "numerics": "numerics",
    "report": "report",
    "tour": "tour",
    "demo": "demo",
}

EPILOG = """\
The path of the data:
  pretrain curate crawl/*.warc.gz -o corpus/        clean corpus + rejects with reasons + stats
  pretrain tokenizer train corpus/data -o tok.json  byte-level BPE
  pretrain tokenize corpus/data --tokenizer tok.json -o tokens/
  pretrain plan --model llama-3-8b --gpus 64 --gpu h100 --tokens 1T
  pretrain train recipes/tiny-cpu.toml --set train.steps=200
  pretrain tour                                      the lesson's worked numbers, recomputed
Run `pretrain COMMAND --help` for what each one does and its options."""


def _load(name: str):
    return importlib.import_module(f"pretrain.commands.{COMMANDS[name]}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pretrain",
        description="From a web crawl to a base model: curate, tokenize, plan, train.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            mod = _load(name)
        except ModuleNotFoundError as e:
            if e.name and e.name.startswith("pretrain.commands"):
                continue  # not built yet
            raise
        p = sub.add_parser(
            name,
            help=mod.HELP,
            description=getattr(mod, "DESCRIPTION", mod.HELP),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def _version() -> str:
    from pretrain import __version__

    return f"pretrain {__version__}"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 0 if args.command is None else 2
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (UserError, DataError) as e:
        print(f"pretrain {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
