"""Exact resume: a stopped, killed or truncated run continues bit for bit like one that never stopped."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from pretrain.errors import UserError
from pretrain.train import checkpoint as ck
from pretrain.train.metrics import read_metrics
from pretrain.train.testing import tiny_config
from pretrain.train.trainer import Trainer

ROOT = Path(__file__).resolve().parents[1]


pytestmark = pytest.mark.usefixtures("restore_torch_threads")


@pytest.fixture(scope="module")
def reference(tmp_path_factory, text):
    """40 uninterrupted steps: (losses by step, final data position, final weights)."""
    out = tmp_path_factory.mktemp("ref")
    t = Trainer(tiny_config(out, text), quiet=True)
    recs = t.fit()
    return {r["step"]: r["loss"] for r in recs}, t.loader.state_dict(), [p.detach().clone() for p in t.params]


def _last_losses(run: Path) -> dict[int, float]:
    steps, _ = read_metrics(run / "metrics.jsonl")
    return {r["step"]: r["loss"] for r in steps}  # a step logged twice (killed, resumed): the later wins


def test_stop_at_20_then_resume_to_40_is_bitwise(tmp_path, text, reference):
    ref_losses, ref_pos, ref_params = reference
    first = Trainer(tiny_config(tmp_path, text, "train.stop_at=20"), quiet=True).fit()
    assert [r["step"] for r in first] == list(range(1, 21))
    t = Trainer(tiny_config(tmp_path, text), quiet=True)
    assert t.step == 20
    second = t.fit()
    losses = {r["step"]: r["loss"] for r in first + second}
    assert losses == ref_losses  # == on floats: bit for bit
    assert t.loader.state_dict() == ref_pos
    assert all(torch.equal(a, b) for a, b in zip(t.params, ref_params))
    # the run's training time goes on across the resume (it restarted at 0 in each command): the
    # second command starts from the time its checkpoint saved, which is past the first's last step
    saved = ck.read_state(ck.step_dir(tmp_path / "checkpoints", 20))["elapsed_s"]
    assert first[-1]["elapsed_s"] <= saved < second[0]["elapsed_s"]
    times = [r["elapsed_s"] for r in read_metrics(tmp_path / "metrics.jsonl")[0]]
    assert len(times) == 40 and times == sorted(times) and times[0] > 0
    for _, path, ok in ck.list_checkpoints(tmp_path / "checkpoints"):  # async saves: digests of the bytes
        assert ok and set(json.loads((path / ck.MARKER).read_text())[ck.DIGEST]) == {
            p.name for p in path.iterdir() if p.name != ck.MARKER}
        ck.verify(path)  # read back from disk now, digested by the save's thread then
    # the same command over a shorter text (data.path is free to move; its tokens are checked): one
    # line saying what differs and what to do, not the loader's two state dicts to compare by eye
    short = tmp_path / "short.txt"
    short.write_bytes(Path(text).read_bytes()[:100_000])
    with pytest.raises(UserError) as e:
        Trainer(tiny_config(tmp_path, text, f"data.path={short}", "train.steps=50"), quiet=True)
    said = str(e.value)
    assert said.startswith(f"{short}: the checkpoint was trained on other data (") and "\n" not in said
    assert "then); point data.path back at that text, or train into another train.out" in said, said


def test_a_checkpoint_with_the_optimizer_keyed_by_group_index_still_resumes(tmp_path, text, reference,
                                                                          monkeypatch):
    """Checkpoints are saved with the optimizer state flattened (keyed by parameter name: a pipeline
    stage's param_groups were overwritten by another's, tests/test_parallel_train.py). Those written
    before, param_groups keyed by index, still resume bit for bit."""
    ref_losses, _, ref_params = reference
    monkeypatch.setattr(ck, "FLAT", None)  # save as the code before session 6 did
    first = Trainer(tiny_config(tmp_path, text, "train.stop_at=20"), quiet=True).fit()
    monkeypatch.undo()
    assert not ck.flat_optimizer(ck.step_dir(tmp_path / "checkpoints", 20))
    t = Trainer(tiny_config(tmp_path, text), quiet=True)
    second = t.fit()
    assert {r["step"]: r["loss"] for r in first + second} == ref_losses
    assert all(torch.equal(a, b) for a, b in zip(t.params, ref_params))
    assert ck.flat_optimizer(ck.step_dir(tmp_path / "checkpoints", 40))


def test_sigkill_at_a_random_moment_then_resume(tmp_path, text, reference):
    ref_losses, ref_pos, _ = reference
    run = tmp_path / "run"
    cfg_path = tmp_path / "cfg.toml"
    from pretrain import config as cfgmod

    cfg_path.write_text(cfgmod.dumps(tiny_config(run, text, "checkpoint.every=3")))
    kill_after = random.Random().randint(2, 30)  # a step count, so the kill lands mid-run
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pretrain", "train", str(cfg_path), "--quiet"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 120
    try:
        while time.time() < deadline and proc.poll() is None:
            m = run / "metrics.jsonl"
            if m.exists() and len(_last_losses(run)) >= kill_after:
                time.sleep(random.Random().uniform(0, 0.02))  # anywhere inside the next step or save
                break
            time.sleep(0.01)
        assert proc.poll() is None, "the run finished before it could be killed"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    t = Trainer(tiny_config(run, text, "checkpoint.every=3"), quiet=True)
    assert t.step <= kill_after + 1
    t.fit()
    assert _last_losses(run) == ref_losses
    assert t.loader.state_dict() == ref_pos
    for _, path, ok in ck.list_checkpoints(run / "checkpoints"):  # a kill mid-save left no marker behind
        if ok:
            ck.verify(path)


def test_truncated_checkpoint_is_ignored_and_the_previous_used(tmp_path, text, reference, capsys):
    ref_losses, _, _ = reference
    cfg = tiny_config(tmp_path, text, "train.stop_at=10", "checkpoint.async_save=false")
    Trainer(cfg, quiet=True).fit()
    root = tmp_path / "checkpoints"
    assert [s for s, _, ok in ck.list_checkpoints(root) if ok] == [5, 10]
    newest = ck.step_dir(root, 10)
    data = max(newest.glob("*.distcp"), key=lambda p: p.stat().st_size)
    size = data.stat().st_size
    with open(data, "r+b") as f:  # a write cut short, but its completion marker survived
        f.truncate(data.stat().st_size // 2)
    assert not ck.is_complete(newest)
    assert ck.latest_complete(root)[0] == 5
    (ck.step_dir(root, 5) / ck.MARKER).rename(ck.step_dir(root, 5) / "x")  # no marker: also ignored
    assert ck.latest_complete(root) is None
    (ck.step_dir(root, 5) / "x").rename(ck.step_dir(root, 5) / ck.MARKER)
    capsys.readouterr()
    t = Trainer(tiny_config(tmp_path, text, "train.stop_at=15"), quiet=True)
    assert t.step == 5
    # a checkpoint with its marker that does not match it is damage, not a save cut short: said (even
    # with --quiet, like the resuming line), naming the directory, the file and the sizes
    said = capsys.readouterr().err.splitlines()
    why = f"{ck.MARKER} lists {data.name} of {size:,} bytes, it has {size // 2:,}"
    assert said[0] == f"{newest}: not used: {why}", said
    assert said[1].startswith("resuming from step 5 (")
    recs = t.fit()
    assert {r["step"]: r["loss"] for r in recs} == {s: ref_losses[s] for s in range(6, 16)}
    resumes = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()
               if '"resume"' in line]
    assert [(e["step"], e.get("passed_over")) for e in resumes] == [(5, [10])]  # said in the record too


def test_a_flipped_bit_in_a_shard_is_refused_and_a_resume_falls_back(tmp_path, text, reference, capsys):
    """Bytes changed after the save, the size unchanged (a disk or a copy): DCP loads such a file
    without a word (shown first), so the digests in COMPLETE.json catch it. Sample/export refuse it
    naming the checkpoint, the file and the --step before it; a resume falls back to that step, says
    so, and continues bit for bit; a checkpoint saved before digests existed loads with a warning."""
    from pretrain.train.runs import load_run_model
    from pretrain.train.safe_dcp import read_metadata, safe_load
    from pretrain.train.testing import flip_byte

    ref_losses, _, _ = reference
    Trainer(tiny_config(tmp_path, text, "train.stop_at=10", "checkpoint.async_save=false"), quiet=True).fit()
    root = tmp_path / "checkpoints"
    newest, older = ck.step_dir(root, 10), ck.step_dir(root, 5)
    model, _, _ = load_run_model(tmp_path)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    items = read_metadata(newest / ".metadata").storage_data  # in the middle of the largest weight's bytes
    weight = max((v for k, v in items.items() if k.fqn.startswith("model.")), key=lambda v: v.length)
    data = newest / weight.relative_path
    flip_byte(data, weight.offset + weight.length // 2)
    assert ck.is_complete(newest)  # the sizes still match
    state = {"model": {k: torch.empty_like(v) for k, v in before.items()}}
    safe_load(state, newest, no_dist=True)  # DCP alone reads it back, one weight changed
    assert not all(torch.equal(state["model"][k], v) for k, v in before.items())
    with pytest.raises(ck.IntegrityError) as e:
        load_run_model(tmp_path)
    said = str(e.value)
    assert said.startswith(f"{newest}: damaged: {data.name} does not match the digest recorded when it "
                           "was saved (xxh3_128 ") and "\n" not in said, said
    assert said.endswith("copy it again from its source, or: --step 5 uses the complete checkpoint before it")
    marker = json.loads((older / ck.MARKER).read_text())
    del marker[ck.DIGEST]  # as saved before session 10
    (older / ck.MARKER).write_text(json.dumps(marker))
    capsys.readouterr()
    # stopped at step 8 with checkpoint.keep=1: pruning counts the damaged step 10 as no checkpoint
    # (it kept 10 and deleted each good save after the fallback, leaving nothing to resume from)
    t = Trainer(tiny_config(tmp_path, text, "train.stop_at=8", "checkpoint.every=2", "checkpoint.keep=1"),
                quiet=True)
    assert t.step == 5
    said = capsys.readouterr().err.splitlines()
    assert said[0].startswith(f"{newest}: damaged: {data.name} does not match") and said[0].endswith(
        "; not used: resuming from step 5 instead (step 10 is replaced if the run saves at it again, else "
        "deleted by the first save after it)"), said
    assert said[1].startswith(f"{older}: warning: saved without digests"), said
    assert said[2].startswith("resuming from step 5 (")
    recs = t.fit()
    # the record keeps why the run went back past its newest save (the stderr line scrolls away),
    # and the report says it under "What went wrong"
    from pretrain.report_run import run_section

    events = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [e for e in events if e.get("event") == "checkpoint_damaged"] == [
        {"event": "checkpoint_damaged", "step": 5, "damaged_step": 10, "file": data.name}]
    assert (f"checkpoint of step 10 damaged ({data.name} changed after its save): resumed from step 5 "
            "instead") in run_section(tmp_path, "run").problems
    assert [s for s, _, ok in ck.list_checkpoints(root) if ok] == [8, 10]
    t = Trainer(tiny_config(tmp_path, text, "train.stop_at=15"), quiet=True)  # falls back to 8 again
    assert t.step == 8
    recs += t.fit()
    assert {r["step"]: r["loss"] for r in recs} == {s: ref_losses[s] for s in range(6, 16)}
    ck.verify(newest)  # saved again, whole
    # a file listed without its digest: the marker changed, not the file (it was said as "its bytes
    # changed after the save")
    marker = json.loads((newest / ck.MARKER).read_text())
    whole = json.dumps(marker)
    del marker[ck.DIGEST][data.name]
    (newest / ck.MARKER).write_text(json.dumps(marker))
    with pytest.raises(ck.IntegrityError) as e:
        ck.verify(newest)
    assert str(e.value) == (f"{newest}: damaged: {ck.MARKER} lists {data.name} without its digest in "
                            f"{ck.DIGEST}; the marker was edited or damaged after the save"), e.value
    (newest / ck.MARKER).write_text(whole)
    # the record keeps what stderr said (session 10's end-to-end walk): the report named only the
    # steps resumed from, as if step 10 had never been saved
    from pretrain.report_run import _resumes

    events = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [(e["step"], e.get("passed_over")) for e in events if e.get("event") == "resume"] == [
        (5, [10]), (8, [10])]
    assert _resumes(events, 15) == ["resumed 2 times: at steps 5 (step 10 damaged: passed over), "
                                    "8 (step 10 damaged: passed over)"]
    # no older checkpoint to fall back to: refused, never a fresh start over the run's checkpoints
    for s in (8, 10):
        shutil.rmtree(ck.step_dir(root, s))
    flip_byte(next(ck.step_dir(root, 15).glob("*.distcp")))
    with pytest.raises(UserError, match="no older complete checkpoint to fall back to"):
        Trainer(tiny_config(tmp_path, text, "train.stop_at=20"), quiet=True)


def test_async_save_snapshots_state_before_training_continues(tmp_path):
    m = torch.nn.Linear(32, 32)
    opt = torch.optim.AdamW(m.parameters())
    m(torch.randn(4, 32)).sum().backward()
    opt.step()
    want = m.weight.detach().clone()
    mgr = ck.CheckpointManager(tmp_path, keep=2, async_save=True)
    mgr.save(1, m, opt, {"step": 1})
    mgr.fence()  # what the trainer does before its next optimizer step
    with torch.no_grad():
        m.weight.add_(1.0)  # training goes on while the background thread writes
    mgr.wait()
    m2 = torch.nn.Linear(32, 32)
    opt2 = torch.optim.AdamW(m2.parameters())
    assert mgr.load(ck.latest_complete(tmp_path)[1], m2, opt2) == {"step": 1}
    assert torch.equal(m2.weight, want)


KILL_WHEN_SAVED = """
import os, signal, sys
from pathlib import Path
from pretrain.train.testing import tiny_config
from pretrain.train.trainer import Trainer

t = Trainer(tiny_config(Path(sys.argv[1]), sys.argv[2], "checkpoint.every=5"), quiet=True)
save = t.maybe_save
def maybe_save():
    save()
    if t.step == 10:  # the save of step 10 is in flight: let its own thread finish, then die at once,
        t.ckpt.pending[2].result()  # before the loop's next step could notice it (ckpt.poll)
        os.kill(os.getpid(), signal.SIGKILL)
t.maybe_save = maybe_save
t.fit()
"""


def test_a_kill_after_an_async_save_finished_resumes_from_it(tmp_path, text, reference):
    """An async save is a checkpoint once its write ends, not once the loop notices: killed between
    the two (a step at most), the run resumed from the save before it (session 14)."""
    ref_losses, ref_pos, _ = reference
    run = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run([sys.executable, "-c", KILL_WHEN_SAVED, str(run), str(text)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    events = read_metrics(run / "metrics.jsonl")[1]
    assert not [e for e in events if e.get("event") == "checkpoint_complete" and e["step"] == 10]  # unnoticed
    from pretrain.report import section_for

    said = " ".join(section_for(run, 0).problems)  # the report names the checkpoint the rerun uses
    assert "newest checkpoint: step 10, the same command resumes from it" in said, said
    t = Trainer(tiny_config(run, text, "checkpoint.every=5"), quiet=True)
    assert t.step == 10  # was 5: the marker waited for the loop
    ck.verify(ck.step_dir(run / "checkpoints", 10))
    t.fit()
    assert _last_losses(run) == ref_losses and t.loader.state_dict() == ref_pos


def test_keep_last_k(tmp_path, text):
    Trainer(tiny_config(tmp_path, text, "train.stop_at=20", "checkpoint.keep=2"), quiet=True).fit()
    assert [s for s, _, _ in ck.list_checkpoints(tmp_path / "checkpoints")] == [15, 20]


def test_resuming_with_another_shape_is_a_clear_error(tmp_path, text):
    from pretrain.errors import UserError

    Trainer(tiny_config(tmp_path, text, "train.stop_at=5"), quiet=True).fit()
    with pytest.raises(UserError, match="d_model: 64 there, 32 here"):
        Trainer(tiny_config(tmp_path, text, "model.d_model=32"), quiet=True)
