"""Executors: run the belt's units (one shard, one dedup partition) locally or on a Ray cluster.

An executor has one method, `map(fn, items)`, returning `fn(item)` for every item in input order.
`fn` is a top-level function and items are picklable, so the same unit runs in a local process
pool or as a Ray task. Units write their own outputs atomically and return small summaries, so
the result never depends on the executor or the number of workers.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from pretrain.errors import UserError
from pretrain.lifeline import (
    exit_with_owner,
    init_worker,
    owner_of_this_process,
    ray_reaped_when_gone,
    sigint_held,
)


def default_workers() -> int:
    """All cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS
        return os.cpu_count() or 1


class LocalExecutor:
    """A process pool (spawn start method: no state leaks from the parent, safe with threads).

    `workers=1` runs in the calling process, which keeps tracebacks and debuggers simple.
    """

    def __init__(self, workers: int | None = None):
        self.workers = max(1, workers or default_workers())

    def in_process(self, n_items: int) -> bool:
        """True when `map` over n items runs them one after another in this process."""
        return self.workers == 1 or n_items <= 1

    def map(
        self, fn: Callable[[Any], Any], items: Iterable[Any], on_result: Callable[[Any], None] | None = None
    ) -> list[Any]:
        items = list(items)
        if self.workers == 1 or len(items) <= 1:
            out = []
            for item in items:
                out.append(fn(item))
                if on_result:
                    on_result(out[-1])
            return out
        ctx = mp.get_context("spawn")
        # init_worker: a killed parent's workers exit instead of writing the rest of their shard
        # into OUT; Ctrl-C is the parent's to handle. concurrent.futures rather than
        # multiprocessing.Pool: a worker that dies mid-unit (OOM killer, a crash in a C library on a
        # hostile page, a script without the __main__ guard) breaks the pool and raises here, where
        # Pool would wait for its lost task forever.
        pool = ProcessPoolExecutor(
            min(self.workers, len(items)), mp_context=ctx, initializer=init_worker, initargs=(os.getpid(),)
        )
        out: list[Any] = []
        finished = False
        try:
            with sigint_held():  # the workers are spawned as the units are submitted
                # submit, not pool.map: map's iterator cancels the futures it has not reached when it
                # is closed, and Python 3.11's pool then fails setting BrokenProcessPool on them
                # (InvalidStateError from its manager thread) once we terminate the workers
                futures = [pool.submit(fn, item) for item in items]
            for fut in futures:
                out.append(fut.result())
                if on_result:
                    on_result(out[-1])
            finished = True
            return out
        except BrokenProcessPool as e:
            raise UserError(
                f"a worker process died after {len(out)} of {len(items)} units (killed by the system,"
                " out of memory, or a crash in a C library); finished units are kept: rerun the same"
                " command to resume, or use --workers 1 to see the failing unit"
            ) from e
        finally:
            if not finished:  # an error or Ctrl-C: stop the running units as Pool.terminate() did
                for proc in list((getattr(pool, "_processes", None) or {}).values()):
                    proc.terminate()  # (3.14 has terminate_workers(); 3.11 does not)
            pool.shutdown(wait=True)

    def __repr__(self) -> str:
        return f"LocalExecutor(workers={self.workers})"


class RayExecutor:
    """Each item becomes one Ray task; results are gathered in input order.

    `address=None` starts (or joins) a local Ray instance; "auto" or "ray://host:port" joins a
    cluster. `workers` caps the tasks in flight (default: the cluster's CPUs).
    """

    def __init__(self, address: str | None = None, workers: int | None = None):
        import importlib.util

        # found now, imported at `start`: `import ray` alone takes ~1.6 s here, most of a finished
        # job's rerun under --executor ray, which reads its markers and starts no Ray (job.map_left)
        if importlib.util.find_spec("ray") is None:  # pragma: no cover - depends on the install
            raise UserError("--executor ray needs Ray: pip install 'pretrain[ray]'")
        self._ray: Any = None
        if address and address != "auto":
            _check_reachable(address)
        self._address, self._asked, self._workers = address, workers, 0
        self._owner: tuple[int, float] | None = None  # this process, when it started the instance

    def start(self) -> RayExecutor:
        """Start (or join) Ray, once. At the first `map`, not when built: a job refused before it
        runs (another job's OUT, a missing input) starts no instance (~6 s) nor prints Ray's log."""
        if self._workers:
            return self
        if self._ray is None:
            import ray

            self._ray = ray
        ray, address = self._ray, self._address
        if not ray.is_initialized():
            # Ray's INFO lines ("Connecting to existing Ray cluster at address: ...", "Connected to
            # Ray cluster.") printed before the job's own lines: warnings and errors still show
            kwargs: dict[str, Any] = {"ignore_reinit_error": True, "log_to_driver": False,
                                      "logging_level": logging.WARNING}
            if address:
                kwargs["address"] = address
            else:
                kwargs["num_cpus"] = self._asked or default_workers()
                kwargs["include_dashboard"] = False
            # a local instance is ours: a SIGKILLed driver must not leave part of it running
            owned = contextlib.nullcontext() if address else ray_reaped_when_gone()
            try:
                with _command_keeps_sigterm(), owned:
                    ray.init(**kwargs)
                if not address:  # its workers are on this machine and end with this process
                    self._owner = owner_of_this_process()
            except ConnectionError as e:  # "auto" with no cluster running, a cluster that went away
                first = str(e).split(". ")[0]
                raise UserError(f"--address {address}: {first} (start one with `ray start --head`)") from e
        self._workers = self._asked or int(ray.cluster_resources().get("CPU", 1))
        return self

    @property
    def workers(self) -> int:
        return self.start()._workers

    def map(
        self, fn: Callable[[Any], Any], items: Iterable[Any], on_result: Callable[[Any], None] | None = None
    ) -> list[Any]:
        items = list(items)
        if not items:  # nothing to run starts no instance (job.map_left sends only what is left)
            return []
        ray = self.start()._ray
        remote = ray.remote(num_cpus=1)(_apply)
        refs = [remote.remote(fn, item, self._owner) for item in items]
        index = {ref: i for i, ref in enumerate(refs)}
        out: list[Any] = [None] * len(refs)
        pending, got = list(refs), 0
        try:
            while pending:  # gather as tasks finish, so progress moves; results keep input order
                done, pending = ray.wait(pending, num_returns=1)
                for ref in done:
                    out[index[ref]] = _result(ray, ref, got, len(refs), index[ref])
                    got += 1
                    if on_result:
                        on_result(out[index[ref]])
        except BaseException:
            # an error or Ctrl-C: stop the running units, as LocalExecutor does. A driver that exits
            # takes its tasks with it, but a caller that goes on (a notebook, a test) left them
            # writing into OUT while a rerun wrote there too
            for ref in pending:
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
            raise
        return out

    def __repr__(self) -> str:
        return f"RayExecutor(workers={self._workers or self._asked})"


@contextlib.contextmanager
def _command_keeps_sigterm() -> Iterator[None]:
    """Around `ray.init`: the command's SIGTERM handler (`lifeline.sigterm_raises`: one line on how
    to resume) is the one in place after it, and a SIGTERM during it reaches that handler too.

    ray.init puts in its own handler first, `sys.exit(15)`, for the whole start (~7 s for a local
    instance here): a `kill` then ended the command with status 15 and not a word. Its last step,
    the core worker, puts in Abseil's failure handler (a stack dump, then the previous handler),
    for the ~2 ms before ray.init returns. Nothing later puts either back (checked with sigaction
    after `cluster_resources`, a task and 3 s of waiting, Ray 2.60), so once is enough: session 13's
    second restore after the first round trip answered a CI flake that was the test's own race.
    """
    sigterm = signal.getsignal(signal.SIGTERM)
    if not callable(sigterm) or threading.current_thread() is not threading.main_thread():
        yield  # no handler of the command's to keep (a library caller, a thread)
        return
    try:
        yield
    except SystemExit as e:
        if e.code != signal.SIGTERM:
            raise
        signal.signal(signal.SIGTERM, sigterm)
        sigterm(signal.SIGTERM, None)  # what the signal would have done had Ray not been there
        raise  # a handler that only notes the signal: ray.init was cut short all the same
    finally:
        signal.signal(signal.SIGTERM, sigterm)


CONNECT_TIMEOUT_S = 5.0


def _check_reachable(address: str) -> None:
    """One TCP connect to a cluster address before Ray is asked: ray.init retries an address
    nobody listens on for minutes, printing each retry; a user wants one line now."""
    hostport = address.split("://", 1)[-1].rstrip("/")
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        raise UserError(f"--address {address!r}: want host:port, ray://host:port or auto")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S) as sock:
            answer = _first_frame(sock)
    except OSError as e:
        why = e.strerror or e
        raise UserError(f"no Ray cluster at {address}: {why} (start one with `ray start --head`)") from e
    if answer is not None and not _is_http2_settings(answer):
        raise UserError(f"no Ray cluster at {address}: something else listens there (it does not speak "
                        f"gRPC, as Ray's head does: {_said(answer)}); give the head's address "
                        "(`ray status` on it prints it)")


_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])  # + empty SETTINGS


def _first_frame(sock: socket.socket) -> bytes | None:
    """What a listener answers to an HTTP/2 client preface within CONNECT_TIMEOUT_S: Ray's head (GCS)
    and its client server (ray://) are gRPC servers, which answer with a SETTINGS frame. Without
    this, an open port that is not Ray's (an S3 server's, a web server's) kept ray.init retrying
    for over 90 s. None where the probe cannot say (TLS clusters, RAY_USE_TLS: the preface is plain)."""
    if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
        return None
    try:
        sock.sendall(_H2_PREFACE)
        got = b""
        while len(got) < 9:
            chunk = sock.recv(64)  # a frame header is 9 bytes; more says what else answered
            if not chunk:
                break
            got += chunk
        return got
    except TimeoutError:
        return b""  # silent: not a gRPC server, which speaks first


def _is_http2_settings(frame: bytes) -> bool:
    return len(frame) >= 9 and frame[3] == 0x04 and frame[4] & 0x01 == 0  # a SETTINGS frame, not an ACK


def _said(answer: bytes) -> str:
    if not answer:
        return f"no answer in {CONNECT_TIMEOUT_S:g} s"
    return "it answered " + repr((answer.decode("latin-1").splitlines() or [""])[0][:40])


def _apply(fn: Callable[[Any], Any], item: Any, owner: tuple[int, float] | None = None) -> Any:
    if owner:
        exit_with_owner(owner)
    return fn(item)


def _result(ray, ref, got: int, total: int, at: int = 0) -> Any:
    """`ray.get(ref)`, with a unit's failure said as LocalExecutor says it: one line, what happened,
    which unit (`at`, its place in the job's list), and that a rerun resumes."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as e:
        # a unit's own UserError (an input gone since the job listed it) is the command's one
        # line: Ray's wrapper made that line its remote traceback, in terminal colours
        if isinstance(e.cause, UserError):
            raise e.cause from None
        raise  # a bug in the unit's own code: its traceback is what to read
    except ray.exceptions.WorkerCrashedError as e:  # Ray ran the unit again, 3 times, and gave up
        raise UserError(
            f"a Ray worker process died running a unit, each time Ray retried it, after {got} of"
            f" {total} units (killed by the system, out of memory, or a crash in a C library);"
            " finished units are kept: rerun the same command to resume, or use --executor local"
            " --workers 1 to see the failing unit"
        ) from e
    except ray.exceptions.RayError as e:  # Ray's own failures: OOM kill, node lost, object lost, ...
        raise UserError(_ray_failure(e, got, total, at)) from e


def _ray_failure(e: Exception, got: int, total: int, at: int) -> str:
    """The one line for a Ray failure that is not the unit's own error. Ray's messages run to many
    lines (OutOfMemoryError's: ~20, with the node's top memory users and a link to Ray's docs):
    their first line is kept."""
    where = f"unit {at + 1} of {total} ({got} finished; they are kept: rerun the same command to resume)"
    if type(e).__name__ == "OutOfMemoryError":
        # Ray's memory monitor kills a task's worker when the node passes its memory threshold
        # (RAY_memory_usage_threshold, 0.95 by default) and raises this once it stops retrying it
        return (f"Ray's memory monitor killed the worker running {where}: the node ran out of memory;"
                " use fewer --workers or a machine with more memory")
    first = next((line.strip() for line in str(e).splitlines() if line.strip()), "")
    said = f": {first[:200]}" if first else ""
    return f"Ray failed {where}: {type(e).__name__}{said}"


def build_executor(kind: str = "local", workers: int | None = None, address: str | None = None):
    if workers is not None and workers < 1:
        raise UserError(f"--workers {workers}: give 1 or more processes (leave it out for all cores)")
    if kind == "local" and address:  # it was dropped in silence: the job ran here, not on the cluster
        raise UserError(f"--address {address} names a Ray cluster: add --executor ray to run there "
                        "(the default, --executor local, runs on this machine's processes)")
    if kind == "local":
        return LocalExecutor(workers)
    if kind == "ray":
        return RayExecutor(address, workers)
    raise UserError(f"unknown executor {kind!r}; choose local or ray")
