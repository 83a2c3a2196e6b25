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

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

EVERY_S = 0.2


def exit_with_parent(parent: int | None = None, every_s: float = EVERY_S) -> threading.Thread:
    """End this process (exit status 1) as soon as `parent` is no longer its parent.

    Pass the parent's pid as the parent saw it (`os.getpid()` there): when the parent died before
    this call, `os.getppid()` is already another process and the worker exits at once. Without it
    (a child that cannot be told) the current parent is watched.
    """
    parent = os.getppid() if parent is None else parent
    stop = threading.Event()
    watch = threading.Thread(target=_watch, args=(parent, every_s, stop), name="pretrain-lifeline",
                             daemon=True)
    watch.start()
    # Ended before the interpreter finalizes: a daemon thread still alive then is stopped by
    # pthread_exit when it next wakes, an unwind that can abort a process holding C++ threads
    # (gloo's) with "terminate called without an active exception" (CPython gh-87135); a torchrun
    # rank of `pretrain eval` died that way once at its normal exit.
    atexit.register(_stop, stop, watch)
    return watch


def _stop(stop: threading.Event, watch: threading.Thread) -> None:
    stop.set()
    watch.join(timeout=1.0)


def _watch(parent: int, every_s: float, stop: threading.Event | None = None) -> None:
    stop = stop or threading.Event()
    while os.getppid() == parent:
        if stop.wait(every_s):
            return
    # os._exit, not sys.exit: no cleanup that could block on the dead parent's pipes or locks. A
    # unit cut midway leaves only a temporary file; writes are atomic, a rerun redoes that unit.
    os._exit(1)


class Terminated(KeyboardInterrupt):
    """SIGTERM (`kill`, `timeout`, a scheduler's stop) raised where a Ctrl-C would be: the same
    cleanup runs (the pool stopped, the attempt lock let go) and the command says in one line that
    it stopped and how to resume; it ended with status 143 and not a word (session 13)."""


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """Inside the block SIGTERM raises `Terminated` in the main thread of this process (the parent:
    the workers are spawned, so they keep the default action and their pool's terminate); the
    handler before it is put back after (`main()` called in a test or a notebook)."""
    def raise_terminated(signum, frame) -> None:
        raise Terminated

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old if old is not None else signal.SIG_DFL)


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


# Set in the environment of the Ray processes a driver starts (they inherit it from ray.init's
# children down to the raylet's agents and workers): how the watcher finds them after the driver,
# their common ancestor, is gone and they have been reparented.
RAY_OWNER_ENV = "PRETRAIN_RAY_OWNER"


@contextmanager
def ray_reaped_when_gone() -> Iterator[None]:
    """Start the local Ray instance inside this block: its processes are marked, and a small
    watcher process ends the marked ones still running once this process is gone. A SIGKILLed
    driver takes its raylet and workers with it, but Ray 2.60's DashboardAgent and
    RuntimeEnvAgent log "Raylet is dead! Exiting" and stay (~100 MB each, two more per killed
    run). The watcher is its own session (a Ctrl-C to the terminal does not stop it first) and
    needs psutil, which Ray installs. The mark is set only inside the block."""
    token = f"{os.getpid()}-{time.time_ns()}"
    code = f"from pretrain.lifeline import _reap_marked; _reap_marked({os.getpid()}, {token!r})"
    try:
        subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True,
                         env={**os.environ, "PYTHONPATH": _import_path()})
    except OSError:  # no watcher: the run itself is unaffected
        yield
        return
    old = os.environ.get(RAY_OWNER_ENV)
    os.environ[RAY_OWNER_ENV] = token
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(RAY_OWNER_ENV, None)
        else:
            os.environ[RAY_OWNER_ENV] = old


def _import_path() -> str:
    """PYTHONPATH for a child that imports this very package (a checkout run without install)."""
    here = str(Path(__file__).resolve().parents[1])
    return os.pathsep.join([here, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])


def _reap_marked(owner: int, token: str, every_s: float = EVERY_S, grace_s: float = 2.0) -> None:
    """The watcher: wait for `owner` to end, give Ray's own teardown `grace_s`, then terminate
    its Ray processes still running, and kill what ignores that. Those are the ones whose
    environment carries `token` (gcs, raylet, workers) and the raylet's agents, which rewrite
    their environment with their title: any `ray::` process started after the owner, in its
    session, whose parent is no Ray process (orphaned when the raylet died)."""
    import psutil

    try:
        me = psutil.Process(owner)
        born, session = me.create_time(), os.getsid(owner)
        while me.is_running() and me.status() != psutil.STATUS_ZOMBIE:
            time.sleep(every_s)
    except (psutil.Error, OSError):
        return
    time.sleep(grace_s)
    doomed = [p for p in psutil.process_iter() if p.pid != os.getpid() and _ours(p, token, born, session)]
    for p in doomed:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    _, alive = psutil.wait_procs(doomed, timeout=grace_s)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()


def _ours(p, token: str, born: float, session: int) -> bool:
    import psutil

    try:
        if p.environ().get(RAY_OWNER_ENV) == token:
            return True
        if not p.name().startswith("ray::") or p.create_time() < born or os.getsid(p.pid) != session:
            return False
        parent = p.parent()
        return parent is None or not (parent.name() == "raylet" or parent.name().startswith("ray::"))
    except (psutil.Error, OSError):  # another user's process, or gone meanwhile
        return False


def owner_of_this_process() -> tuple[int, float]:
    """(pid, start time) of this process: what `exit_with_owner` in another process watches."""
    import psutil

    return os.getpid(), psutil.Process().create_time()


_WATCHED_OWNER: tuple[int, float] | None = None


def exit_with_owner(owner: tuple[int, float], every_s: float = EVERY_S) -> None:
    """End this process (exit status 1) once `owner` (`owner_of_this_process()` there) is gone: a
    worker of the local Ray instance a driver started. Its parent is the raylet, not the driver,
    so `exit_with_parent` cannot see the driver go; the raylet goes with a SIGKILLed driver, but
    its busy workers went on and finished their units into OUT (two stage-A markers written 2-8 s
    after the kill, seen in session 14). Called for every unit; the watch starts once a process."""
    global _WATCHED_OWNER
    if _WATCHED_OWNER == tuple(owner):
        return
    _WATCHED_OWNER = tuple(owner)
    stop = threading.Event()
    watch = threading.Thread(target=_watch_owner, args=(*owner, every_s, stop), name="pretrain-owner",
                             daemon=True)
    watch.start()
    atexit.register(_stop, stop, watch)


def _watch_owner(pid: int, born: float, every_s: float, stop: threading.Event) -> None:
    import psutil

    while True:
        try:  # the start time tells the owner from a later process given its pid
            me = psutil.Process(pid)
            if me.create_time() != born or me.status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.Error:
            break
        if stop.wait(every_s):
            return
    os._exit(1)  # as _watch: a unit cut midway leaves only a temporary file


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


def exit_with_torchrun() -> None:
    """A rank started by torchrun (TORCHELASTIC_RUN_ID set) ends with its agent, its parent. torch
    2.13 starts each rank in a session of its own (`start_new_session` in elastic's
    SubprocessHandler), so `kill -9` of torchrun's process group, or a scheduler's SIGKILL of the
    launcher, left the ranks training on unseen (or waiting in the rendezvous for good), writing the
    run directory that the rerun of the same command writes too."""
    if "TORCHELASTIC_RUN_ID" in os.environ:
        exit_with_parent()
