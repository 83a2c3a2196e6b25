"""`python -m pretrain` is the `pretrain` command (also what torchrun launches): the process entry."""

import gc

from pretrain.cli import main


def entry() -> int:
    """Run the command, then exit without the finalizing collections walking torch's objects.

    Interpreter shutdown runs full garbage collections over every object the imports made (torch,
    sympy, ...): 3.8-4.4 s of a 2-core machine at load 9 after the command had said its last line
    (bench/bench_exit.py). Frozen objects are skipped by those collections; everything else at exit
    still runs (threads joined, atexit handlers, modules torn down). Only on the way out of the
    process: `main()` called in-process (the tests) keeps its collector as it was."""
    code = main()
    gc.freeze()
    return code


if __name__ == "__main__":
    raise SystemExit(entry())
