"""The `pretrain` command line: one argparse entry that dispatches to subcommands.

Each subcommand lives in `pretrain.commands.<name>` and exposes `HELP` (one line), `DESCRIPTION`
(the teaching text shown by `--help`), `add_arguments(parser)` and `run(args) -> int`. Command
modules keep heavy imports (torch, pyarrow, ...) inside `run`, so `pretrain --help` stays fast.
No logic lives here.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import difflib
import importlib
import os
import re
import sys

from pretrain.errors import DataError, UserError, storage_error
from pretrain.lifeline import Terminated, exit_with_env_parent, exit_with_torchrun, sigterm_raises
from pretrain.untrusted import printable

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

# The config dataclass behind each command that takes `--set`: an unknown `--steps 10` is matched
# against its keys to suggest `--set train.steps=10`. Imported only when such an error happens.
CONFIGS: dict[str, str] = {
    "curate": "pretrain.curate.pipeline:CurateConfig",
    "dedup": "pretrain.curate.pipeline:CurateConfig",
    "decontaminate": "pretrain.curate.pipeline:CurateConfig",
    "train": "pretrain.train.config:RunConfig",
}

EPILOG = """\
Start here: pretrain demo (every stage below on a crawl that ships with the package, a few minutes on
a CPU; it prints each command it runs, and demo-out/report.html shows what came out).

The path of the data:
  pretrain curate crawl/*.warc.gz -o corpus/        clean corpus + rejects with reasons + stats
  pretrain tokenizer train corpus/data -o tok.json  byte-level BPE
  pretrain tokenize corpus/data --tokenizer tok.json -o tokens/
  pretrain plan --model llama-3-8b --gpus 64 --gpu h100 --tokens 1T
  pretrain train recipes/tiny-cpu.toml --set train.steps=200   run directory runs/tiny-cpu
  pretrain tour                                      the lesson's worked numbers, recomputed
Run `pretrain COMMAND --help` for what each one does and its options."""


def _load(name: str):
    return importlib.import_module(f"pretrain.commands.{COMMANDS[name]}")


class _Parser(argparse.ArgumentParser):
    """argparse with a did-you-mean for a mistyped command or choice (Python 3.11 has none)."""

    def error(self, message: str):
        m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if m:
            choices = re.findall(r"'([^']*)'", m.group(2))
            close = difflib.get_close_matches(m.group(1), choices, n=1, cutoff=0.6)
            if close:
                message += f"; did you mean '{close[0]}'?"
        subs = [a for a in self._actions if isinstance(a, argparse._SubParsersAction)]  # noqa: SLF001
        if subs and message.endswith(f"required: {subs[0].metavar}"):
            # `pretrain tokenizer` alone said "required: ACTION" and not which (session 14 sweep)
            names = list(subs[0].choices)
            message += f" (one of: {', '.join(names)}; e.g. `{self.prog} {names[0]} --help`)"
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="pretrain",
        description="From a web crawl to a base model: curate, tokenize, plan, train.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
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


def unknown_hint(command: str, extra: list[str], options: list[str]) -> str:
    """'unrecognized arguments: ...' plus a did-you-mean: a close option, or the --set spelling."""
    msg = f"unrecognized arguments: {' '.join(extra)}"
    flag = next((x for x in extra if x.startswith("-")), None)
    if flag is None:
        return msg
    name, _, value = flag.lstrip("-").partition("=")
    if not value:
        after = extra[extra.index(flag) + 1 : extra.index(flag) + 2]
        value = after[0] if after and not after[0].startswith("-") else "VALUE"
    keys = [k for k in config_keys(command) if k.rsplit(".", 1)[-1] == name.replace("-", "_")]
    if keys:
        return msg + f"; did you mean --set {keys[0]}={value}?"
    close = difflib.get_close_matches("--" + name, options, n=1, cutoff=0.6)
    return msg + (f"; did you mean {close[0]}?" if close else "")


def config_keys(command: str) -> list[str]:
    """Every dotted key of the command's config, e.g. 'train.steps' (empty for commands without one)."""
    if command not in CONFIGS:
        return []
    mod, _, name = CONFIGS[command].partition(":")
    return _keys(getattr(importlib.import_module(mod), name)())


def _keys(cfg, prefix: str = "") -> list[str]:
    out = []
    for f in dataclasses.fields(cfg):
        v = getattr(cfg, f.name)
        out += _keys(v, f"{prefix}{f.name}.") if dataclasses.is_dataclass(v) else [prefix + f.name]
    return out


# Commands whose rerun into the same output skips the finished work (markers, checkpoints).
RESUMABLE = frozenset({"curate", "dedup", "decontaminate", "tokenize", "train", "ablate", "demo"})
RESUME_HINT = "; rerun the same command to resume (finished work is kept)"
# Commands whose SIGTERM is said in one line, as their Ctrl-C is. Not train (it saves a checkpoint on
# SIGTERM itself, restarts.py), eval (torchrun ranks), nor demo and ablate, whose stages stop with them.
SAYS_SIGTERM = frozenset({"curate", "dedup", "decontaminate", "tokenize", "classifier", "tokenizer"})


def main(argv: list[str] | None = None) -> int:
    exit_with_env_parent()  # a stage of `pretrain demo` ends with the demo, even a kill -9'd one
    exit_with_torchrun()  # a rank ends with its torchrun agent, even a kill -9'd one
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # report from the subcommand, whose usage and options are the ones that matter
        sub = _subparser(parser, args.command)
        if sub is None:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        sub.error(unknown_hint(args.command, extra, list(sub._option_string_actions)))  # noqa: SLF001
    if not getattr(args, "_run", None):
        parser.print_help()
        return 0 if args.command is None else 2
    try:
        check_options(parser, args)  # every numeric option's bounds, before any work
        with sigterm_raises() if args.command in SAYS_SIGTERM else contextlib.nullcontext():
            code = int(args._run(args) or 0)
        sys.stdout.flush()  # a closed pipe shows up here for output still in the buffer
        return code
    except KeyboardInterrupt as e:  # workers ignore SIGINT (pretrain.lifeline): this is the only line
        resumable = args.command in RESUMABLE or str(getattr(args, "action", "")).startswith("import-")
        what = "stopped by SIGTERM" if isinstance(e, Terminated) else "interrupted"
        print(f"pretrain {args.command}: {what}{RESUME_HINT if resumable else ''}", file=sys.stderr)
        return 130
    except (UserError, DataError) as e:  # under torchrun every rank raises it: said once (onerank)
        _say(printable(str(e)), args.command, lasting=True)  # names a file: theirs
        return 2
    except BrokenPipeError:  # `pretrain ... | head` closed the pipe: stop quietly, as `cat` would
        return _closed_pipe()
    except SystemExit as e:  # rich's Console.on_broken_pipe exits 1 (curate's "nothing read" code)
        if isinstance(e.__context__, BrokenPipeError):
            return _closed_pipe()
        raise
    except Exception as e:  # an object store's client refused (endpoint, credentials): one line
        line = storage_error(e)
        if line is None:
            raise
        _say(line + (RESUME_HINT if args.command in RESUMABLE else ""), args.command)
        return 2


def _say(line: str, command: str, lasting: bool = False) -> None:
    """The one error line, from the first local rank only when torchrun started this process.
    `lasting`: an error no restart cures (config, input): under `torchrun --max-restarts N`, said
    on the first attempt only, with a line on why it repeats (pretrain.onerank)."""
    from pretrain.onerank import error_line, restart_hint, said_in_this_job

    said = error_line(line)
    if said is None or (lasting and said_in_this_job(said)):
        return
    print(f"pretrain {command}: error: {said}", file=sys.stderr, flush=True)
    hint = restart_hint() if lasting else None
    if hint:
        print(f"pretrain {command}: {hint}", file=sys.stderr, flush=True)


def _closed_pipe() -> int:
    """The reader of stdout left (`| head`): no traceback, no 'Exception ignored' at exit's flush
    (stdout now points at devnull), and the status a shell gives a process SIGPIPE ended.

    Every command writes its files before its summary on stdout, so the work is done and kept."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 141  # 128 + SIGPIPE


def check_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The parsed value of each numeric option (a pretrain.config.Number) within its bounds, for the
    command run and the action under it (`tokens inspect`): one line naming the flag."""
    from pretrain.bounds import Number, check_number

    sub = _subparser(parser, args.command)
    while sub is not None:
        for action in sub._actions:  # noqa: SLF001
            value = getattr(args, action.dest, None)
            if isinstance(action.type, Number) and value is not None:
                for v in value if isinstance(value, list) else [value]:
                    check_number(v, action.type.metadata, action.option_strings[-1] if action.option_strings
                                 else action.dest)
        nested = sub._subparsers._group_actions if sub._subparsers else []  # noqa: SLF001
        sub = next((a.choices.get(getattr(args, a.dest, None)) for a in nested), None)


def _subparser(parser: argparse.ArgumentParser, command: str | None) -> argparse.ArgumentParser | None:
    for action in parser._subparsers._group_actions if parser._subparsers else []:  # noqa: SLF001
        if command in getattr(action, "choices", {}):
            return action.choices[command]
    return None


if __name__ == "__main__":
    raise SystemExit(main())
