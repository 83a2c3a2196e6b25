"""Worker processes end with their parent: kill -9 of the parent leaves no worker writing into OUT,
Ctrl-C stops the workers with one line (no traceback per worker), and a rerun finishes the job.

The truth is the operating system's: /proc says which processes are alive; files say what was written.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import sigint_as_in_a_terminal  # (the pool job imports this module too)

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc (Linux)")

UNIT_S = 30.0  # a unit outlasts GONE_S by far: a worker that survived its parent would write `done-*`
# How long the lifeline may take to end a worker: it polls every 0.2 s and took 0.10-0.26 s at load
# 11 on 2 cores, but a woken thread can wait far longer for the CPU on a busier machine. A worker
# that does not watch its parent is still caught: it runs for UNIT_S, or the job writes its manifest.
GONE_S = 10.0
# A curate-like job: LocalExecutor (the pool of curate, dedup, decontaminate) over slow units.
POOL_JOB = """
import sys
from pretrain.curate.executor import LocalExecutor
from tests.test_lifeline import slow_unit
LocalExecutor(2).map(slow_unit, [sys.argv[1]] * 4)
"""


def slow_unit(folder: str) -> int:
    """A unit of work: says it started, works UNIT_S seconds, then writes its output."""
    Path(folder, f"started-{os.getpid()}-{time.time_ns()}").touch()
    time.sleep(UNIT_S)
    Path(folder, f"done-{os.getpid()}-{time.time_ns()}").touch()
    return 0


def _alive(pid: int) -> bool:
    try:  # a zombie has exited: it only waits to be reaped
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_gone(pids: set[int], within_s: float) -> list[int]:
    deadline = time.monotonic() + within_s
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [p for p in pids if _alive(p)]


def _kill_all(pids) -> None:
    for p in pids:
        if _alive(p):
            os.kill(p, signal.SIGKILL)


def _start_pool_job(folder: Path) -> tuple[subprocess.Popen, set[int]]:
    """The job with its two workers each inside a unit (their pids, from the `started` files)."""
    proc = subprocess.Popen([sys.executable, "-c", POOL_JOB, str(folder)], cwd=ROOT, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=sigint_as_in_a_terminal)
    deadline = time.monotonic() + 60
    while len(started := list(folder.glob("started-*"))) < 2:
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "the pool's workers did not start in 60 s"
        time.sleep(0.05)
    return proc, {int(f.name.split("-")[1]) for f in started}


def test_killed_parent_leaves_no_pool_worker_writing(tmp_path):
    # Seen in `pretrain curate --workers 2`: after kill -9 of the parent, each worker finished its
    # shard, wrote it into OUT (46 files after the parent's death) and only then died.
    proc, workers = _start_pool_job(tmp_path)
    try:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert not _wait_gone(workers, within_s=GONE_S), f"workers outlived their parent by {GONE_S} s"
        assert not list(tmp_path.glob("done-*")), "a worker wrote its output after its parent died"
    finally:
        _kill_all(workers)
        proc.stderr.close()


def test_ctrl_c_stops_pool_workers_without_their_tracebacks(tmp_path):
    # A terminal's Ctrl-C reaches the whole process group; only the parent may react to it.
    proc, workers = _start_pool_job(tmp_path)
    try:
        os.killpg(proc.pid, signal.SIGINT)
        err = proc.stderr.read()
        proc.wait(timeout=30)
        assert not _wait_gone(workers, within_s=GONE_S)
        # The parent's own KeyboardInterrupt (this bare job has no CLI to turn it into a line); a
        # worker's traceback starts in multiprocessing's process bootstrap.
        assert err.count("KeyboardInterrupt") == 1 and "_bootstrap" not in err, err
        assert not list(tmp_path.glob("done-*"))
    finally:
        _kill_all(workers)
        proc.stderr.close()


OWNED = """
import sys, time
from pretrain.lifeline import exit_with_owner
exit_with_owner((int(sys.argv[1]), float(sys.argv[2])))
print("watching", flush=True)
time.sleep(float(sys.argv[3]))
"""


def test_a_process_ends_with_an_owner_that_is_not_its_parent():
    """A Ray worker's parent is the raylet, not the driver that started the local instance: after
    kill -9 of the driver its busy workers finished their units into OUT. `exit_with_owner` watches
    the driver by pid and start time; a later process given the same pid is not the owner."""
    psutil = pytest.importorskip("psutil")
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    born = psutil.Process(owner.pid).create_time()

    def watcher(start_time: float) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", OWNED, str(owner.pid), repr(start_time), str(UNIT_S)],
                                cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
                                stdout=subprocess.PIPE, text=True)

    worker, stranger = watcher(born), watcher(born + 1.0)
    try:
        assert worker.stdout.readline().strip() == "watching"
        assert stranger.wait(timeout=GONE_S) == 1  # the pid's process started at another time
        assert worker.poll() is None and owner.poll() is None
        owner.kill()
        owner.wait()
        assert worker.wait(timeout=GONE_S) == 1  # long before its UNIT_S sleep ends
    finally:
        for p in (owner, worker, stranger):
            if p.poll() is None:
                p.kill()


def _words(rng: random.Random, n: int) -> str:
    syllable = lambda: rng.choice("bdfgklmnprstvz") + rng.choice("aeiou")  # noqa: E731
    return " ".join("".join(syllable() for _ in range(rng.randint(1, 3))) for _ in range(n))


@pytest.fixture(scope="module")
def token_job(tmp_path_factory) -> dict:
    from pretrain.curate.io import write_jsonl_zst
    from pretrain.tokens.tokenizer import train_tokenizer

    root = tmp_path_factory.mktemp("tok")
    rng = random.Random(0)
    train_tokenizer([_words(rng, 60) for _ in range(300)], vocab_size=400).save(str(root / "tok.json"))
    (root / "in").mkdir()
    for k in range(6):
        write_jsonl_zst(root / "in" / f"part_{k}.jsonl.zst", [{"text": _words(rng, 80)} for _ in range(800)])
    return {"in": root / "in", "tok": root / "tok.json"}


def _spawned_children(pid: int) -> set[int]:
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        return {int(c) for c in kids
                if "spawn_main" in Path(f"/proc/{c}/cmdline").read_text(errors="replace")}
    except OSError:
        return set()


def _two_workers_of(proc: subprocess.Popen) -> set[int]:
    """The pids of the pool's two spawned workers, once both started (fewer after 60 s or an exit)."""
    workers: set[int] = set()
    deadline = time.monotonic() + 60
    while len(workers) < 2 and proc.poll() is None and time.monotonic() < deadline:
        workers = _spawned_children(proc.pid)
        time.sleep(0.02)
    return workers


def test_ctrl_c_of_tokenize_stops_now_in_one_line_and_a_rerun_finishes(token_job, tmp_path):
    # Before: Ctrl-C waited for every queued file (the pool's `with` exit) while the workers kept
    # writing shards, then printed "interrupted" without saying how to go on.
    from pretrain.tokens.pipeline import tokenize_corpus

    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "pretrain", "tokenize", str(token_job["in"]), "--tokenizer",
           str(token_job["tok"]), "-o", str(out), "--workers", "2"]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, preexec_fn=sigint_as_in_a_terminal)
    workers = _two_workers_of(proc)
    try:
        assert len(workers) == 2, "the pool's workers did not start in 60 s"
        os.killpg(proc.pid, signal.SIGINT)
        err = proc.stderr.read()
        assert proc.wait(timeout=30) == 130
        assert not _wait_gone(workers, within_s=GONE_S)
        assert err.strip().splitlines() == [
            "pretrain tokenize: interrupted; rerun the same command to resume (finished work is kept)"]
        assert len(list(out.glob("shard_*.done"))) < 6, "the queued files were tokenized after Ctrl-C"
    finally:
        _kill_all(workers)
        proc.stderr.close()
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    ref = tmp_path / "ref"
    tokenize_corpus([str(token_job["in"])], token_job["tok"], ref, workers=1)
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in ref.iterdir())
    for f in ref.glob("shard_*.bin"):
        assert (out / f.name).read_bytes() == f.read_bytes()


def test_sigterm_of_curate_says_it_stopped_and_how_to_resume_and_a_rerun_finishes(tmp_path):
    """`kill PID` (a scheduler's stop, `timeout`) ended curate with status 143 and not a word; it
    is now said in one line, as Ctrl-C is, the workers end with it, and the rerun finishes."""
    from conftest import data_file

    pages = data_file("html/scrapinghub-aeb/html")
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "pretrain", "curate", str(pages), "-o", str(out), "--workers", "2",
           "--quiet", "--set", 'steps=["extract"]',
           "--set", "shards.max_inputs=1"]  # 181 small pages: one shard each, so both workers start
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    workers = _two_workers_of(proc)
    try:
        assert len(workers) == 2, "the pool's workers did not start in 60 s"
        os.kill(proc.pid, signal.SIGTERM)  # the parent alone, as `kill PID` does
        err = proc.stderr.read()
        assert proc.wait(timeout=30) == 130
        assert not _wait_gone(workers, within_s=GONE_S)
        said = "pretrain curate: stopped by SIGTERM; rerun the same command to resume (finished work is kept)"
        assert err.strip().splitlines()[-1] == said, err
        assert "Traceback" not in err, err
        assert not (out / "stats.json").exists()
    finally:
        _kill_all(workers)
        proc.stderr.close()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "read 181 documents" in done.stdout and "over 2 attempts" in done.stdout


# `pretrain demo` runs each stage as the real command, through demo._run.
DEMO_STAGE = """
import sys
from rich.console import Console
from pretrain.demo import _run
_run(Console(file=sys.stderr), "stage", sys.argv[1:])
"""


def test_killed_demo_leaves_no_stage_running(token_job, tmp_path):
    # Before: kill -9 of `pretrain demo` left its running stage (and that stage's workers) going
    # to the end, writing into the demo's output.
    out = tmp_path / "out"
    argv = ["tokenize", str(token_job["in"]), "--tokenizer", str(token_job["tok"]), "-o", str(out),
            "--workers", "2"]
    demo = subprocess.Popen([sys.executable, "-c", DEMO_STAGE, *argv], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stage, workers = None, set()
    deadline = time.monotonic() + 60
    while len(workers) < 2 and demo.poll() is None and time.monotonic() < deadline:
        kids = Path(f"/proc/{demo.pid}/task/{demo.pid}/children").read_text().split()
        stage = int(kids[0]) if kids else None
        workers = _spawned_children(stage) if stage else set()
        time.sleep(0.02)
    try:
        assert len(workers) == 2, "the stage's workers did not start in 60 s"
        os.kill(demo.pid, signal.SIGKILL)
        demo.wait()
        left = _wait_gone({stage, *workers}, within_s=GONE_S)
        assert not left, f"the stage outlived the demo by {GONE_S} s"
        assert not (out / "manifest.json").exists()
    finally:
        _kill_all({stage, *workers})
