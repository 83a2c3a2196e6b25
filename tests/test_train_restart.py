"""Restart hygiene: after any kill, resume, rollback or Ctrl-C the run dir's record shows exactly one
value per step, checkpoints land on the steps a never-stopped run uses, and the run says what it did.

The truth for each check is a run that was never stopped (same config, same data) and TensorBoard's
own reader (EventAccumulator) for the event files. Kills inside the test process are an exception
raised from the trainer's fault-injection hook (`_maybe_fail`), after the step's save, as a SIGKILL
there would leave things (synchronous saves, so nothing is half written).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import sigint_as_in_a_terminal

from pretrain import config as cfgmod
from pretrain.cli import main
from pretrain.errors import UserError
from pretrain.train import checkpoint as ck
from pretrain.train import trainer as trainer_mod
from pretrain.train.metrics import read_metrics
from pretrain.train.testing import tiny_config
from pretrain.train.trainer import Interrupted, Trainer

ROOT = Path(__file__).resolve().parents[1]
SCHEDULE = ("checkpoint.every=10", "checkpoint.async_save=false", "log.tensorboard=true")

pytestmark = pytest.mark.usefixtures("restore_torch_threads")


class Killed(Exception):
    pass


FINISH = ck.CheckpointManager._finish  # writes an async save's marker, in the save's thread


def _kill_at(monkeypatch, step: int, cut: int | None = None) -> None:
    """Raise Killed after `step`. `cut`: the async save of that step is cut short by the kill, as a
    real kill cuts it: a raised exception leaves the save's thread running, and since session 14
    that thread writes COMPLETE.json itself, so its marker step waits for the kill and is skipped."""
    import threading

    dead = threading.Event()

    def fail(rank: int, s: int) -> None:
        if s == step:
            dead.set()
            raise Killed(step)

    def finish_unless_cut(self, at: int, path) -> None:
        if at == cut and self.async_save:
            assert dead.wait(60), "the kill never came"
            return  # the process is gone: no marker
        FINISH(self, at, path)

    monkeypatch.setattr(trainer_mod, "_maybe_fail", fail)
    monkeypatch.setattr(ck.CheckpointManager, "_finish", finish_unless_cut if cut is not None else FINISH)


def _saved_steps(run: Path) -> list[int]:
    return [e["step"] for e in read_metrics(run / "metrics.jsonl")[1] if e["event"] == "checkpoint"]


def _tensorboard(run: Path, tag: str = "train/loss") -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run / "tensorboard"))
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)]


@pytest.fixture(scope="module")
def never_stopped(tmp_path_factory, text):
    out = tmp_path_factory.mktemp("clean")
    recs = Trainer(tiny_config(out, text, *SCHEDULE), quiet=True).fit()
    return out, {r["step"]: r["loss"] for r in recs}


def test_two_kills_then_resume_keep_schedule_and_one_value_per_step(tmp_path, text, never_stopped,
                                                                     monkeypatch, capsys):
    clean_dir, clean = never_stopped
    run = tmp_path / "run"
    for kill in (13, 17):  # the second attempt resumes from step 10 and dies again before step 20
        _kill_at(monkeypatch, kill)
        with pytest.raises(Killed):
            Trainer(tiny_config(run, text, *SCHEDULE)).fit()
    monkeypatch.undo()
    t = Trainer(tiny_config(run, text, *SCHEDULE))
    t.fit()
    err = capsys.readouterr().err
    assert "no checkpoint: starting fresh" in err and err.count("resuming from step 10 (") == 2
    assert _saved_steps(run) == _saved_steps(clean_dir) == [10, 20, 30, 40]
    steps, events = read_metrics(run / "metrics.jsonl")
    assert [r["step"] for r in steps] == list(range(1, 41))  # each step once, as first computed
    assert {r["step"]: r["loss"] for r in steps} == clean
    # two attempts from one checkpoint: one event that says so, not two restarts (session 8)
    assert [(e["step"], e["attempts"]) for e in events if e["event"] == "resume"] == [(10, 2)]
    from pretrain.report import section_for

    assert "resumed once: at step 10 (2 attempts)" in section_for(run, 0).problems
    tb = _tensorboard(run)
    assert [s for s, _ in tb] == list(range(1, 41))  # the abandoned steps 11-17 purged
    assert [v for _, v in tb] == pytest.approx([clean[s] for s in range(1, 41)], rel=1e-6)  # float32


def test_a_resume_keeps_the_completion_of_the_async_save_it_resumes_from(tmp_path, text, monkeypatch):
    """An async save of step 10 completes later (logged at step 11 here); a resume to 10 used to drop
    that line with the replayed steps, so the record no longer said its checkpoint had completed."""
    real_poll = ck.CheckpointManager.poll

    def poll_after_write(self):  # the write finishes before the next poll: step 11, not "some step"
        if self.pending:
            self.pending[2].result()
        return real_poll(self)

    monkeypatch.setattr(ck.CheckpointManager, "poll", poll_after_write)
    run, schedule = tmp_path / "run", ("checkpoint.every=10", "checkpoint.async_save=true")
    _kill_at(monkeypatch, 20, cut=20)  # the save of step 20 has started, never finished: not a checkpoint
    with pytest.raises(Killed):
        Trainer(tiny_config(run, text, *schedule), quiet=True).fit()
    from pretrain.report import section_for

    sec = section_for(run, 0)
    said = " ".join(sec.problems)
    assert "newest checkpoint: step 10, the same command resumes from it" in said, said
    # the checkpoints line lists completed saves only (it said "saved at steps 10, 20")
    assert "every 10 steps; saved at step 10; the async save of step 20 never completed;" in sec.body
    _kill_at(monkeypatch, 99)
    t = Trainer(tiny_config(run, text, *schedule, "train.stop_at=11"), quiet=True)
    assert t.step == 10  # the truth the report must tell: what the rerun resumed from
    t.fit()
    done = [e for e in read_metrics(run / "metrics.jsonl")[1] if e["event"] == "checkpoint_complete"]
    assert [e["saved_step"] for e in done] == [10, 11]  # 11: the final save, finished by a wait


def test_an_async_save_finished_by_the_next_save_is_logged_complete(tmp_path, text, monkeypatch):
    """A save still being written when the next one starts is finished by that save's wait: its
    `checkpoint_complete` was never logged, so the report (which counts an async save only once
    complete) called it unfinished and named an older checkpoint, or none, as the one to resume from."""
    monkeypatch.setattr(ck.CheckpointManager, "poll", lambda self: None)  # never noticed between steps
    run = tmp_path / "run"
    _kill_at(monkeypatch, 7, cut=6)  # the save of 6 is in flight
    with pytest.raises(Killed):
        Trainer(tiny_config(run, text, "checkpoint.every=3", "checkpoint.async_save=true"), quiet=True).fit()
    events = read_metrics(run / "metrics.jsonl")[1]
    assert [e["saved_step"] for e in events if e["event"] == "checkpoint_complete"] == [3]
    assert [s for s, _, ok in ck.list_checkpoints(run / "checkpoints") if ok] == [3]  # the truth
    from pretrain.report import section_for

    sec = section_for(run, 0)
    assert "newest checkpoint: step 3, the same command resumes from it" in " ".join(sec.problems)
    assert "saved at step 3; the async save of step 6 never completed;" in sec.body


def test_a_resume_says_the_save_a_kill_cut_short_is_not_used(tmp_path, text, monkeypatch, capsys):
    """A kill while the async save of step 6 is written leaves checkpoints/step_0000006 without its
    marker; the resume from step 3 said only `resuming from step 3`, beside a step 6 folder a
    newcomer can see (session 14's torchrun walk: SIGKILL during the save, FSDP x 2)."""
    monkeypatch.setattr(ck.CheckpointManager, "poll", lambda self: None)  # never noticed between steps
    run = tmp_path / "run"
    _kill_at(monkeypatch, 7, cut=6)  # the save of 6 is in flight
    with pytest.raises(Killed):
        Trainer(tiny_config(run, text, "checkpoint.every=3", "checkpoint.async_save=true"), quiet=True).fit()
    assert [(s, ok) for s, _, ok in ck.list_checkpoints(run / "checkpoints")][-2:] == [(3, True), (6, False)]
    capsys.readouterr()
    t = Trainer(tiny_config(run, text, "checkpoint.every=3", "checkpoint.async_save=true"), quiet=True)
    assert t.step == 3
    said = capsys.readouterr().err
    assert (f"resuming from step 3 ({ck.step_dir(run / 'checkpoints', 3)}); the save of step 6 did not "
            "finish (no COMPLETE.json): not used, later saves replace it") in said, said


def test_youngs_interval_survives_a_kill_before_the_second_save(tmp_path, text, monkeypatch):
    """checkpoint.every=0: the first save (first_at) measures C, but its state file was written before
    the interval was known, so a run killed before its second save measured again on resume (another
    interval, saves at other steps than a run never stopped). The resume keeps the measured one."""
    run = tmp_path / "run"
    young = ("checkpoint.every=0", "checkpoint.first_at=3", "checkpoint.mtbf_minutes=0.05",
             "checkpoint.async_save=false")
    _kill_at(monkeypatch, 3)  # right after the first save, the one that measured
    first = Trainer(tiny_config(run, text, *young), quiet=True)
    with pytest.raises(Killed):
        first.fit()
    assert first.save_interval >= 1
    assert ck.read_state(ck.step_dir(run / "checkpoints", 3))["save_interval"] == 0  # not yet known
    again = Trainer(tiny_config(run, text, *young), quiet=True)
    assert again.step == 3 and again.save_interval == first.save_interval  # not re-measured (was 0)
    k = first.save_interval
    assert again.next_save == (3 // k + 1) * k  # on the never-stopped run's multiples, not step 4
    from pretrain.report import section_for

    assert f"sqrt(2 x save time x MTBF) = {k} steps (save " in section_for(run, 0).body  # what it gave
    (run / "checkpoints" / ck.INTERVAL).write_text('{"save_interval": -1}')
    with pytest.raises(UserError, match="save_interval.json: not a measured save interval"):
        Trainer(tiny_config(run, text, *young), quiet=True)


def test_fresh_start_over_an_old_record_moves_it_aside(tmp_path, text, monkeypatch, capsys):
    run = tmp_path / "run"
    _kill_at(monkeypatch, 4)  # before the first checkpoint (step 10): a record, nothing to resume
    with pytest.raises(Killed):
        Trainer(tiny_config(run, text, *SCHEDULE)).fit()
    monkeypatch.undo()
    t = Trainer(tiny_config(run, text, *SCHEDULE, "train.stop_at=6"))
    assert t.step == 0
    t.fit()
    err = capsys.readouterr().err
    assert err.count("no checkpoint: starting fresh") == 2
    assert f"moved its record to {run / 'previous-1'}" in err
    old, _ = read_metrics(run / "previous-1" / "metrics.jsonl")
    new, _ = read_metrics(run / "metrics.jsonl")
    assert [r["step"] for r in old] == [1, 2, 3, 4] and [r["step"] for r in new] == list(range(1, 7))
    assert [s for s, _ in _tensorboard(run)] == list(range(1, 7))


def test_sigterm_saves_the_current_step_and_stops(tmp_path, text, monkeypatch, capfd):
    def term(rank: int, s: int) -> None:
        if s == 7:
            signal.raise_signal(signal.SIGTERM)  # arrives mid-run; the loop finishes step 7 first

    monkeypatch.setattr(trainer_mod, "_maybe_fail", term)
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Interrupted):
        Trainer(tiny_config(tmp_path, text, *SCHEDULE), quiet=True).fit()
    assert signal.getsignal(signal.SIGTERM) is before  # handlers given back
    err = capfd.readouterr().err  # the signal said when caught (a step can take minutes), then the stop
    assert "SIGTERM caught: stopping when the step in progress ends, with a checkpoint" in err, err
    assert err.index("SIGTERM caught") < err.index("interrupted by SIGTERM at step 7: checkpoint"), err
    assert ck.latest_complete(tmp_path / "checkpoints")[0] == 7
    steps, events = read_metrics(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in steps] == list(range(1, 8))
    assert [e["step"] for e in events if e["event"] == "interrupted"] == [7]


def test_under_torchrun_the_sigterm_line_says_torchruns_grace(monkeypatch):
    """torchrun's agent forwards SIGTERM and SIGKILLs the ranks after its --shutdown-timeout: the line
    says so (a 4-rank walk, session 14); the default is torch's own, read off its agent."""
    import inspect

    from torch.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent

    default = inspect.signature(LocalElasticAgent.__init__).parameters["shutdown_timeout"].default
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)
    assert trainer_mod._torchrun_grace() == ""  # not under torchrun: nobody kills after a grace
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "x")
    monkeypatch.delenv("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", raising=False)
    assert f"torchrun kills the ranks --shutdown-timeout ({default} s by default) after its SIGTERM" in (
        trainer_mod._torchrun_grace())
    monkeypatch.setenv("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "600")
    assert "torchrun kills the ranks 600 s after its SIGTERM" in trainer_mod._torchrun_grace()


def test_ctrl_c_on_the_command_saves_and_exits_130(tmp_path, text):
    """Ctrl-C during `pretrain train` finishes the step, saves it, says so in one line, exits 130."""
    run = tmp_path / "run"
    cfg = tmp_path / "r.toml"
    cfg.write_text(cfgmod.dumps(tiny_config(run, text, *SCHEDULE, "train.steps=100000",
                                            "log.tensorboard=false")))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen([sys.executable, "-m", "pretrain", "train", str(cfg), "--quiet"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=sigint_as_in_a_terminal)
    try:
        # After a step line, not 0.3 s after the file appears: metrics.jsonl is opened before step 1
        # (0.05-0.09 s before its line at load 11 on 2 cores); a machine a few times slower got the
        # signal before step 1, so no checkpoint, and the test failed on a machine, not on the code.
        deadline = time.monotonic() + 120
        while not (run / "metrics.jsonl").is_file() or not read_metrics(run / "metrics.jsonl")[0]:
            assert proc.poll() is None and time.monotonic() < deadline, "no step line in 120 s"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    step = ck.latest_complete(run / "checkpoints")[0]
    assert f"interrupted by SIGINT at step {step}: checkpoint" in err
    steps, _ = read_metrics(run / "metrics.jsonl")
    assert step >= 1 and steps[-1]["step"] == step


def test_step_line_shows_total_elapsed_and_eta(tmp_path, text, capsys):
    Trainer(tiny_config(tmp_path, text, "train.steps=3")).fit()
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("step ")]
    assert [x.split()[1] for x in lines] == ["1/3", "2/3", "3/3"]
    assert all(" elapsed 0:00:" in x and " eta 0:00:" in x for x in lines)
    assert lines[-1].endswith("eta 0:00:00")
    assert " mfu " not in lines[0]  # log.peak_flops = 0: no peak to compare with
    # with a peak, the line shows the MFU metrics.jsonl records (PaLM: tokens/s x FLOPs/token / peak)
    from pretrain.plan.compute import flops_per_token

    t = Trainer(tiny_config(tmp_path / "mfu", text, "train.steps=2", "log.peak_flops=1e9"))
    recs = t.fit()
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("step ")]
    for line, rec in zip(lines, recs, strict=True):
        assert rec["mfu"] == pytest.approx(rec["tokens_per_s"] * flops_per_token(t.shape) / 1e9, rel=1e-3)
        assert f"  mfu {100 * rec['mfu']:.1f}%  elapsed " in line, line


@pytest.mark.parametrize("argv, says", [
    (["train", "{cfg}", "--set", "train.steps=-5", "--dry-run"], "train.steps must be >= 0, got -5"),
    (["train", "{cfg}", "--set", "optim.lr=0", "--dry-run"], "optim.lr must be > 0, got 0.0"),
    (["train", "{cfg}", "--set", "train.stop_at=50", "--dry-run"], "train.stop_at=50 is past train.steps=40"),
    (["sample", "{run}", "--temperature", "-1"], "--temperature must be >= 0, got -1.0"),
    (["sample", "{run}", "--tokens", "-3"], "--tokens must be >= 0, got -3"),
    (["sample", "{run}", "--tokens", "1000001"], "--tokens must be <= 1,000,000, got 1,000,001"),
])
def test_numbers_out_of_range_are_one_line_errors(tmp_path, text, capsys, argv, says):
    cfg = tmp_path / "r.toml"
    cfg.write_text(cfgmod.dumps(tiny_config(tmp_path / "run", text)))
    argv = [a.format(cfg=cfg, run=tmp_path / "run") for a in argv]
    try:
        code = main(argv)
    except SystemExit as e:  # argparse refuses a flag's value itself
        code = e.code
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert says in err[-1] and sum(says in x for x in err) == 1


def test_a_second_run_into_a_run_directory_in_use_is_refused(tmp_path, text):
    # The same command started twice trained twice into one directory (each pruning the other's
    # checkpoints, the second rewriting metrics.jsonl under the first). Another process holds the
    # lock here as a running `pretrain train` would: flock on the directory, dropped when it dies.
    run = tmp_path / "run"
    run.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time\n"
                               f"fd = os.open({str(run)!r}, os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_EX)\n"
                               "print('held', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(UserError, match=r"another run is training into this directory now; wait"):
            Trainer(tiny_config(run, text, "train.steps=2"), quiet=True).fit()
        assert list(run.iterdir()) == []  # refused before writing anything
    finally:
        holder.kill()
        holder.wait()
    assert [r["step"] for r in Trainer(tiny_config(run, text, "train.steps=2"), quiet=True).fit()] == [1, 2]
