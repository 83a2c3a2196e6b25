"""Under torchrun, a refusal every rank hits (a config error, a resume under another global batch) is
said once, not once per rank nor once per restart (--max-restarts), and the job still fails:
torchrun's own report names exit code 2.
Two processes, a tiny model; each torchrun start costs ~10 s on the shared 2-core machine."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pretrain import config as cfgmod
from pretrain.train.testing import tiny_config
from pretrain.train.trainer import Trainer

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("restore_torch_threads")


def _torchrun(cfg, tmp_path: Path, *launcher: str) -> subprocess.CompletedProcess:
    path = tmp_path / "run.toml"
    path.write_text(cfgmod.dumps(cfg))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT / "src")}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
           "--rdzv-endpoint", "127.0.0.1:0", *launcher, "-m", "pretrain", "train", str(path)]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=150)


def _said(proc: subprocess.CompletedProcess, what: str) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith(what)]


def test_a_resume_under_another_global_batch_is_refused_once(tmp_path, text):
    # one process saved step 2 with a global batch of 4; two data-parallel ranks of 4 make it 8
    common = ("data.batch_size=4", "train.steps=2", "checkpoint.every=2", "schedule.warmup_steps=1")
    Trainer(tiny_config(tmp_path / "run", text, *common), quiet=True).fit()
    proc = _torchrun(tiny_config(tmp_path / "run", text, *common, "parallel.dp_shard=2",
                                 "train.steps=4"), tmp_path)
    assert proc.returncode != 0
    errors = _said(proc, "pretrain train: error:")
    assert len(errors) == 1 and "another recipe" in errors[0], proc.stderr[-3000:]
    # the way to keep it under two ranks, which the user did not type as a change (session 14)
    assert errors[0].endswith("(global_batch is data.batch_size x 2 data-parallel ranks x "
                              "train.grad_accum=1: --set data.batch_size=2 keeps 4)"), errors[0]
    assert "exitcode: 2" in proc.stderr


def test_under_another_launcher_every_rank_says_its_line_at_once():
    # Only torchrun's agent is known to stop the other ranks when one fails: elsewhere a rank other
    # than the first says the error itself, naming its rank, rather than waiting in silence.
    env = {k: v for k, v in os.environ.items() if k != "TORCHELASTIC_RUN_ID"}
    env.update({"LOCAL_RANK": "1", "RANK": "3", "PYTHONPATH": str(ROOT / "src")})
    cmd = [sys.executable, "-m", "pretrain", "plan", "--model", "gpt2-124m", "--gpus", "0"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    said = proc.stderr.splitlines()
    assert said == ["pretrain plan: error: rank 3: --gpus must be >= 1, got 0 "
                    "(GPUs in the job; Llama 3 405B used 16,384)"], proc.stderr


def test_an_error_only_one_rank_hits_is_still_said_after_the_wait(monkeypatch):
    # Under torchrun a rank other than the first waits for the agent to stop it; when nobody does
    # (rank 0 did not fail: the error was this rank's own), it says the line itself, naming its rank.
    from pretrain import onerank

    monkeypatch.setattr(onerank, "WAIT_S", 0.0)
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "job")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("RANK", "5")
    assert onerank.error_line("run/step_0000002/state_rank5.json: damaged") == \
        "rank 5: run/step_0000002/state_rank5.json: damaged"
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert onerank.error_line("x") == "x"


def test_a_config_error_is_said_once_and_fails_the_job_even_with_restarts(tmp_path, text):
    # torchelastic restarts a failed worker group whatever its exit code: the same config error came
    # back once per attempt (--max-restarts 1: twice). Said once, with a line on why it repeats.
    cfg = tiny_config(tmp_path / "run", text, "parallel.dp_shard=3", "train.steps=2")
    proc = _torchrun(cfg, tmp_path, "--max-restarts", "1")
    assert proc.returncode != 0
    errors = _said(proc, "pretrain train: error:")
    assert len(errors) == 1 and "the world size is 2" in errors[0], proc.stderr[-3000:]
    hints = _said(proc, "pretrain train: torchrun restarts")
    assert len(hints) == 1 and "drop --max-restarts" in hints[0], proc.stderr[-3000:]
    # no settings echo: it comes after the trainer's checks, and a refused run says only why (it said
    # "(full config: RUN/config.toml)" first, a file never written; session 14)
    assert not _said(proc, "config: "), proc.stderr[-3000:]
    assert "exitcode: 2" in proc.stderr


def test_without_restarts_there_is_no_hint_nor_marker(monkeypatch, tmp_path):
    from pretrain import onerank

    monkeypatch.setattr(onerank.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "job")
    monkeypatch.setenv("TORCHELASTIC_MAX_RESTARTS", "0")
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "0")
    assert onerank.restart_hint() is None and not onerank.said_in_this_job("x")
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv("TORCHELASTIC_MAX_RESTARTS", "2")  # attempts 0, 1, 2: said on the first only
    said = []
    for count in range(3):
        monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", str(count))
        said.append(not onerank.said_in_this_job("x"))
    assert said == [True, False, False] and list(tmp_path.iterdir()) == []  # the last one cleans up


def _children(pid: int) -> list[int]:
    """The pids whose parent is `pid` (from /proc: no psutil in the test dependencies)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:  # "pid (comm) state ppid ...": comm may hold spaces, so split after its ")"
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    return out


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
def test_the_ranks_end_with_a_sigkilled_torchrun(tmp_path, text):
    # torchrun starts each rank in a session of its own (start_new_session in torch 2.13's
    # SubprocessHandler), so `kill -9` of torchrun's process group (a job killed from the shell, a
    # scheduler's SIGKILL of the launcher) left the ranks training on, unseen, writing the run
    # directory that the rerun of the same command was writing too. A rank ends with its agent.
    import signal
    import time

    cfg = tiny_config(tmp_path / "run", text, "train.steps=1000000", "checkpoint.every=100000")
    path = tmp_path / "run.toml"
    path.write_text(cfgmod.dumps(cfg))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT / "src")}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
           "--rdzv-endpoint", "127.0.0.1:0", "-m", "pretrain", "train", str(path), "--quiet"]
    agent = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    metrics, ranks = tmp_path / "run" / "metrics.jsonl", []
    try:
        deadline = time.monotonic() + 90
        while not (metrics.is_file() and metrics.stat().st_size) and time.monotonic() < deadline:
            time.sleep(0.1)
        ranks = _children(agent.pid)
        assert ranks and metrics.is_file(), "the run never trained a step"
        os.killpg(agent.pid, signal.SIGKILL)  # the whole group, as `kill -9 -PGID` does
        agent.wait()
        deadline = time.monotonic() + 10
        while any(map(_alive, ranks)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(map(_alive, ranks)), "a rank kept training after torchrun was killed"
    finally:
        for pid in [agent.pid, *ranks]:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
