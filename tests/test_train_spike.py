"""A corrupted batch: detected by the median rule, rolled back and skipped (PaLM's recipe), after
which the loss curve is exactly that of a run that never saw the batch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from pretrain.errors import UserError
from pretrain.train.data import TextLoader, encode_text, read_text
from pretrain.train.metrics import read_metrics
from pretrain.train.testing import fallback_text, tiny_config
from pretrain.train.trainer import Trainer

BAD = 22  # the micro-batch index that arrives corrupted


pytestmark = pytest.mark.usefixtures("restore_torch_threads")


class Corrupting:
    """A TextLoader whose batch BAD is uniformly random bytes (a shard of binary garbage)."""

    def __init__(self, inner: TextLoader, bad: tuple[int, ...] = (BAD,)):
        self.inner, self.bad = inner, bad

    def next_batch(self, batch_size: int) -> np.ndarray:
        i = self.inner.batches
        out = self.inner.next_batch(batch_size)
        if i in self.bad:
            out = np.random.default_rng(99).integers(0, 256, size=out.shape)
        return out

    def state_dict(self) -> dict:
        return self.inner.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.inner.load_state_dict(state)


def _trainer(out: Path, text: Path, *extra: str, bad: tuple[int, ...] = (BAD,), label: str = "") -> Trainer:
    cfg = tiny_config(out, text, "stability.spike_factor=1.5", "optim.lr=1e-2", *extra)
    ids, _ = encode_text(read_text(text))
    return Trainer(cfg, loader=Corrupting(TextLoader(ids, cfg.model.seq_len), bad), quiet=True, label=label)


def test_spike_is_rolled_back_and_skipped(tmp_path):
    text = fallback_text(tmp_path / "topics.txt")
    a = _trainer(tmp_path / "a", text, "log.tensorboard=true")
    a.fit()
    steps, events = read_metrics(tmp_path / "a" / "metrics.jsonl")
    assert [r["step"] for r in steps] == list(range(1, 41))  # steps 21-23 once: the abandoned ones dropped
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tmp_path / "a" / "tensorboard"))
    acc.Reload()
    tb = {e.step: e.value for e in acc.Scalars("train/loss")}
    assert len(acc.Scalars("train/loss")) == 40 and list(tb) == list(range(1, 41))  # purge_step at 21
    spikes = [e for e in events if e["event"] == "spike"]
    rollbacks = [e for e in events if e["event"] == "rollback"]
    assert [e["step"] for e in spikes] == [BAD + 1]  # step 23 trains on micro-batch 22
    assert spikes[0]["loss"] > 1.5 * spikes[0]["median"]
    # kept to 5 significant digits (the step lines keep the loss whole); the report says them so too
    for k in ("loss", "median"):
        assert len(repr(spikes[0][k]).replace(".", "").lstrip("0")) <= 5, spikes[0]
    assert len(rollbacks) == 1
    assert rollbacks[0]["to_step"] == 20 and rollbacks[0]["skip_batches"] == [BAD, BAD]
    after = {r["step"]: r["loss"] for r in steps}

    b = _trainer(tmp_path / "b", text, f"data.skip=[[{BAD}, {BAD}]]")  # never sees the batch
    clean = {r["step"]: r["loss"] for r in b.fit()}
    assert after == clean  # bit for bit, including steps 21-40 after the rollback
    assert list(tb.values()) == pytest.approx([clean[s] for s in range(1, 41)], rel=1e-6)  # float32
    assert a.loader.state_dict() == b.loader.state_dict()
    assert all(torch.equal(p, q) for p, q in zip(a.params, b.params))


def test_without_rollback_the_spike_is_only_flagged(tmp_path, capsys):
    text = fallback_text(tmp_path / "topics.txt")
    t = _trainer(tmp_path / "a", text, "stability.rollback=false", "train.stop_at=25", label="raw")
    t.fit()
    _, events = read_metrics(tmp_path / "a" / "metrics.jsonl")
    assert [e["event"] for e in events if e["event"] in ("spike", "rollback")] == ["spike"]
    # a labelled run's lines say whose they are (pretrain ablate's twins share one terminal)
    said = [x for x in capsys.readouterr().err.splitlines() if "[spike]" in x]
    assert [x.split()[:4] for x in said] == [["[raw]", "[spike]", "step", str(BAD + 1)]], said


def test_persistent_spike_skips_the_window_around_it(tmp_path):
    # Two bad batches in a row, patience 2: the first flagged step is still applied, the second
    # triggers the rollback; skip_before/after widen the skipped window to [21, 24] (PaLM skipped
    # hundreds of batches around each spike).
    text = fallback_text(tmp_path / "topics.txt")
    extra = ("stability.spike_patience=2", "stability.skip_before=1", "stability.skip_after=1")
    a = _trainer(tmp_path / "a", text, *extra, bad=(BAD, BAD + 1))
    a.fit()
    steps, events = read_metrics(tmp_path / "a" / "metrics.jsonl")
    rollbacks = [e for e in events if e["event"] == "rollback"]
    assert [e["step"] for e in events if e["event"] == "spike"] == [BAD + 1, BAD + 2]
    assert len(rollbacks) == 1 and rollbacks[0]["skip_batches"] == [BAD - 1, BAD + 2]
    b = _trainer(tmp_path / "b", text, *extra, f"data.skip=[[{BAD - 1}, {BAD + 2}]]", bad=(BAD, BAD + 1))
    assert {r["step"]: r["loss"] for r in steps} == {r["step"]: r["loss"] for r in b.fit()}


class _Killed(Exception):
    """Stands in for SIGKILL: nothing after it runs (no save, no cleanup of the run directory)."""


class _DyingAt(Corrupting):
    def __init__(self, inner: TextLoader, dies_at: int):
        super().__init__(inner)
        self.dies_at = dies_at

    def next_batch(self, batch_size: int) -> np.ndarray:
        if self.inner.batches == self.dies_at:
            raise _Killed
        return super().next_batch(batch_size)


def test_a_kill_after_the_rollback_keeps_its_skip(tmp_path, capsys):
    # Rollback at step 23 to step 20 (skip [22, 22]), then the process dies at step 24, before any
    # checkpoint holds the skip. The rerun resumes from step 20: batch 22 must stay skipped (not
    # re-read, no second spike or rollback), and the record must still explain the one rollback.
    text = fallback_text(tmp_path / "topics.txt")
    a = _trainer(tmp_path / "a", text)
    a.loader.inner = _DyingAt(a.loader.inner.inner, dies_at=BAD + 2)
    with pytest.raises(_Killed):
        a.fit()
    assert a.rollbacks == 1 and a.step == 23
    capsys.readouterr()
    b = _trainer(tmp_path / "a", text)
    assert b.resumed and b.step == 20 and b.rollbacks == 1  # max_rollbacks counts across restarts
    # and says so: the rollback line was the last the killed run showed of it (session 14)
    root = tmp_path / "a" / "checkpoints"
    assert (f"resuming from step 20 ({root / 'step_0000020'}); micro-batches {BAD} are skipped, as the run's "
            f"1 rollback decided (rollbacks.json in {root})") in capsys.readouterr().err
    resumed = {r["step"]: r["loss"] for r in b.fit()}
    steps, events = read_metrics(tmp_path / "a" / "metrics.jsonl")
    course = [(e["event"], e["step"]) for e in events if e["event"] in ("spike", "rollback")]
    assert course == [("spike", BAD + 1), ("rollback", 20)]  # once each, the spike that explains it kept
    assert [r["step"] for r in steps] == list(range(1, 41))
    clean = _trainer(tmp_path / "c", text, f"data.skip=[[{BAD}, {BAD}]]", "train.stop_at=30")
    never = {r["step"]: r["loss"] for r in clean.fit()}
    assert {s: resumed[s] for s in range(21, 31)} == {s: never[s] for s in range(21, 31)}  # bit for bit
    ledger = tmp_path / "c" / "checkpoints" / "rollbacks.json"  # from someone else: one line naming it
    ledger.write_text('{"skip": [[5, "x"]], "rollbacks": 1}')
    with pytest.raises(UserError, match=r"rollbacks\.json: not a list of skipped micro-batch ranges"):
        _trainer(tmp_path / "c", text)


class Damaging(Corrupting):
    """Corrupting, and when batch `at` is drawn (the step after a save), one bit of that save's largest
    file inverted: bytes that changed on disk after the save (once: the replay saves it again)."""

    def __init__(self, inner: TextLoader, root: Path, at: int):
        super().__init__(inner)
        self.root, self.at = root, at

    def next_batch(self, batch_size: int) -> np.ndarray:
        if self.inner.batches == self.at and self.root is not None:
            from pretrain.train.testing import flip_byte

            flip_byte(max(self.root.glob("step_0000020/*.distcp"), key=lambda p: p.stat().st_size))
            self.root = None
        return super().next_batch(batch_size)


def test_a_rollback_passes_over_a_damaged_checkpoint_and_says_so(tmp_path):
    """The spike at step 23 rolls back past step 20, whose bytes changed after its save, to step 15;
    the steps after equal a run that never saw the batch, and the record names step 20 (session 10:
    stderr said it, the rollback event and the report did not)."""
    from pretrain.report_run import _what

    text = fallback_text(tmp_path / "topics.txt")
    cfg = tiny_config(tmp_path / "a", text, "stability.spike_factor=1.5", "optim.lr=1e-2",
                      "checkpoint.async_save=false")
    ids, _ = encode_text(read_text(text))
    loader = Damaging(TextLoader(ids, cfg.model.seq_len), tmp_path / "a" / "checkpoints", BAD - 1)
    after = {r["step"]: r["loss"] for r in Trainer(cfg, loader=loader, quiet=True).fit()}
    _, events = read_metrics(tmp_path / "a" / "metrics.jsonl")
    rollbacks = [e for e in events if e["event"] == "rollback"]
    assert [(e["to_step"], e["skip_batches"], e.get("passed_over")) for e in rollbacks] == [
        (15, [BAD, BAD], [20])]
    assert _what(rollbacks[0]) == ("rollback from step 23 to 15, skipping batches [22, 22] "
                                   "(step 20 damaged: passed over)")
    clean = _trainer(tmp_path / "b", text, f"data.skip=[[{BAD}, {BAD}]]").fit()
    clean = {r["step"]: r["loss"] for r in clean}
    assert after == clean


def test_max_rollbacks_reached_stops_the_run_and_a_resume_may_raise_it(tmp_path):
    """stability.max_rollbacks=0: the first persistent spike stops the run in one line naming the key
    and where a rerun resumes, with a `rollback_limit` event the report reads as the reason (it said
    "killed, interrupted or still running"); the same run resumed with max_rollbacks=1 (a setting of
    how it runs, not refused as another recipe) rolls back once and ends as a run that never saw the
    batch."""
    from pretrain.report_run import _stopped_early, _what

    text = fallback_text(tmp_path / "topics.txt")
    a = _trainer(tmp_path / "a", text, "stability.max_rollbacks=0")
    with pytest.raises(UserError, match=r"stability\.max_rollbacks=0 reached: a persistent loss spike from "
                                        r"step 23 after 0 rollbacks; .*resumes from the newest checkpoint, "
                                        r"step 20\)"):
        a.fit()
    steps, events = read_metrics(tmp_path / "a" / "metrics.jsonl")
    limit = [e for e in events if e["event"] == "rollback_limit"]
    assert [(e["step"], e["first_flagged"], e["rollbacks"]) for e in limit] == [(BAD + 1, BAD + 1, 0)]
    assert steps[-1]["step"] == BAD and not [e for e in events if e["event"] == "rollback"]
    assert "stopped by stability.max_rollbacks=0" in _stopped_early(BAD, 40, events, tmp_path / "a")[0]
    assert "stability.max_rollbacks reached" in _what(limit[0])
    b = _trainer(tmp_path / "a", text, "stability.max_rollbacks=1")
    assert b.resumed and b.step == 20 and not b.changes
    after = {r["step"]: r["loss"] for r in b.fit()}
    assert b.rollbacks == 1
    clean = _trainer(tmp_path / "c", text, f"data.skip=[[{BAD}, {BAD}]]").fit()
    clean = {r["step"]: r["loss"] for r in clean}
    assert after == {s: clean[s] for s in range(21, 41)}
