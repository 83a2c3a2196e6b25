"""The life of the worker processes the project starts: they end when the process that started them ends.

A parent killed by SIGKILL, the OOM killer or a vanished terminal cannot stop its children, and a
worker that outlives it keeps writing queued units into the output directory a rerun is writing
too, then idles for good (seen in `pretrain tokenize` and `pretrain curate`, session 5). Every
process pool and child the project starts calls `exit_with_parent` (pools through
`init_worker`): a daemon thread polls `os.getppid()` and ends the process once its parent is gone.

Why polling and not `prctl(PR_SET_PDEATHSIG)`: the death signal fires when the *thread* that forked
the child exits (a pool may start workers from a helper thread), it is Linux-only, and a child
started after its parent already died never gets it. A parent that is gone is seen within
`every_s`; the cost is one syscall per 0.2 s.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

EVERY_S = 0.2


def exit_with_parent(parent: int | None = None, every_s: float = EVERY_S) -> threading.Thread:
    """End this process (exit status 1) as soon as `parent` is no longer its parent.

    Pass the parent's pid as the parent saw it (`os.getpid()` there): when the parent died before
    this call, `os.getppid()` is already another process and the worker exits at once. Without it
    (a child that cannot be told) the current parent is watched.
    """
    parent = os.getppid() if parent is None else parent
    watch = threading.Thread(target=_watch, args=(parent, every_s), name="pretrain-lifeline", daemon=True)
    watch.start()
    return watch


def _watch(parent: int, every_s: float) -> None:
    while os.getppid() == parent:
        time.sleep(every_s)
    # os._exit, not sys.exit: no cleanup that could block on the dead parent's pipes or locks. A
    # unit cut midway leaves only a temporary file; writes are atomic, a rerun redoes that unit.
    os._exit(1)


def init_worker(parent: int) -> None:
    """Initializer of a process pool's workers (`initargs=(os.getpid(),)`).

    Ctrl-C sends SIGINT to the whole foreground process group: the parent gets it and stops the pool;
    workers ignore it, so that each does not print its own KeyboardInterrupt traceback.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    exit_with_parent(parent)


@contextmanager
def sigint_held() -> Iterator[None]:
    """Start workers inside this block: a Ctrl-C that lands while they boot (before `init_worker`
    ignores it) killed them mid-import, each printing "Fatal Python error" and a stack. SIGINT is
    blocked here, so workers are born with it blocked (the mask survives exec), and the parent gets
    it as a KeyboardInterrupt when the block ends: held, never lost."""
    if not hasattr(signal, "pthread_sigmask"):  # pragma: no cover - Windows
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def stop_pool(pool) -> None:
    """Stop a `concurrent.futures.ProcessPoolExecutor` now: queued units are cancelled, running
    workers terminated. Its `with` block waits for every queued unit instead, so a Ctrl-C of
    `pretrain tokenize` took as long as the rest of the job while the workers kept writing shards."""
    if hasattr(pool, "terminate_workers"):  # Python 3.14+
        pool.terminate_workers()
        return
    procs = list((getattr(pool, "_processes", None) or {}).values())  # no public handle before 3.14
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        if proc.is_alive():
            proc.terminate()


# A `pretrain` command run as a stage of another (`pretrain demo`) is not a pool worker: it learns
# its parent from the environment and watches it like one.
PARENT_ENV = "PRETRAIN_PARENT_PID"


def child_env() -> dict[str, str]:
    """The environment for a `pretrain` command this process starts: the command exits with us."""
    return {**os.environ, PARENT_ENV: str(os.getpid())}


def exit_with_env_parent() -> None:
    """In a command started with `child_env()`: exit with that parent. The variable is consumed, so a
    process this command starts in turn watches this command, not its grandparent."""
    pid = os.environ.pop(PARENT_ENV, "")
    if pid.isdigit():
        exit_with_parent(int(pid))
