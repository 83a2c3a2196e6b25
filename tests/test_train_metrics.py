"""train/metrics.py: after a rollback TensorBoard shows one value per step, whatever the writer count.

TensorBoard reads a folder's event files in name order, `events.out.tfevents.<s>.<host>.<pid>.<n>`
with n a process-wide counter: in the same second, writer 10 sorts before writer 9 as text, its
purge record is read first and purges nothing (seen in the full suite: 42 points for 40 steps).
"""

from __future__ import annotations

import pytest

pytest.importorskip("tensorboard")


def _next_uid() -> int:
    from tensorboard.summary.writer import event_file_writer

    return event_file_writer._global_uid._value


def test_rollback_purges_even_when_the_writer_counter_gains_a_digit(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from torch.utils.tensorboard import SummaryWriter

    from pretrain.train.metrics import Metrics

    crossing = 10 ** len(str(_next_uid() + 1)) - 1  # the rollback's writer gets 10**k
    while _next_uid() < crossing:
        SummaryWriter(log_dir=str(tmp_path / "filler")).close()
    m = Metrics(tmp_path / "run", tensorboard=True)
    for step in range(1, 6):
        m.step({"step": step, "loss": float(step)})
    m.rewind(2)  # steps 3-5 abandoned
    for step in range(3, 6):
        m.step({"step": step, "loss": 10.0 + step})
    m.close()
    acc = EventAccumulator(str(tmp_path / "run" / "tensorboard"))
    acc.Reload()
    got = [(e.step, e.value) for e in acc.Scalars("train/loss")]
    assert got == [(1, 1.0), (2, 2.0), (3, 13.0), (4, 14.0), (5, 15.0)]


def test_event_values_are_kept_to_five_significant_digits():
    """What events record and the terminal and report say: 5 significant digits (the trainer wrote
    `median=5.4321987654321`); whole numbers (an fp16 loss scale) and non-finite values as they are."""
    from pretrain.train.metrics import significant

    got = significant({"median": 5.4321987654321, "skip": [1, 2], "tiny": [1.23456789e-7],
                       "scale": 131072.0, "bad": float("inf"), "name": "x"})
    assert got == {"median": 5.4322, "skip": [1, 2], "tiny": [1.2346e-7], "scale": 131072.0,
                   "bad": float("inf"), "name": "x"}


def test_the_eval_line_says_five_significant_digits_and_the_record_keeps_the_loss_whole(tmp_path, text,
                                                                                       capsys):
    """A 4-rank walk (session 14) read `[eval] step 3 eval_loss=5.0908050537109375`: the terminal
    says it as the other events are said; metrics.jsonl keeps the measured value whole."""
    from pretrain.train.metrics import read_metrics
    from pretrain.train.testing import tiny_config
    from pretrain.train.trainer import Trainer

    Trainer(tiny_config(tmp_path / "run", text, "train.steps=2", "log.eval_every=2")).fit()
    events = read_metrics(tmp_path / "run" / "metrics.jsonl")[1]
    kept = [e["eval_loss"] for e in events if e["event"] == "eval"]
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("[eval]")]
    assert len(kept) == 1 and said == [f"[eval] step 2 eval_loss={float(f'{kept[0]:.5g}')}"]
    assert kept[0] != float(f"{kept[0]:.5g}")  # measured to more digits than said
