"""Context parallelism against one process: each rank holds half of every sequence (two load-balanced
chunks), attention all-gathers keys and values, and the loss and every gradient equal those of one
process on the whole sequence (fp32, 1e-6 of the largest gradient); training steps match; a run
saved under cp=2 resumes on one process.

The one-process truth is computed in the same worker from a plain model with the same seed
(initialization is layout-independent: tests/test_parallel_init.py).
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

from pretrain.train.context import positions
from pretrain.train.testing import run_distributed, tiny_config
from pretrain.train.trainer import Trainer

SLOW = pytest.mark.skipif(not os.environ.get("PRETRAIN_SLOW_TESTS"),
                          reason="4 spawned processes; set PRETRAIN_SLOW_TESTS=1")
LONG = ["model.seq_len=1024", "data.batch_size=2", "train.resume=false", "schedule.warmup_steps=2",
        "checkpoint.every=0", "checkpoint.first_at=1000", "train.steps=4"]

pytestmark = pytest.mark.usefixtures("restore_torch_threads")


def test_positions_are_two_balanced_chunks_covering_the_sequence():
    got = [positions(16, 2, r) for r in range(2)]
    assert got[0].tolist() == [0, 1, 2, 3, 12, 13, 14, 15] and got[1].tolist() == [4, 5, 6, 7, 8, 9, 10, 11]
    assert sorted(np.concatenate([positions(24, 3, r) for r in range(3)]).tolist()) == list(range(24))
    # balanced: every rank's causal work (sum of its query positions + 1) is the same
    assert len({int((positions(32, 4, r) + 1).sum()) for r in range(4)}) == 1


def test_cp_layout_is_validated_like_the_others(tmp_path, text):
    from pretrain.errors import UserError

    with pytest.raises(UserError, match="parallel.cp must be >= 1, got 0"):
        Trainer(tiny_config(tmp_path, text, "parallel.cp=0"), quiet=True)
    with pytest.raises(UserError, match="cp=2 x tp=1 = 2, but the world size is 1"):
        Trainer(tiny_config(tmp_path, text, "parallel.cp=2"), quiet=True)


def _check(res: dict) -> None:
    assert math.isclose(res["loss"], res["ref_loss"], rel_tol=1e-6), res
    assert res["max_grad_diff"] <= 1e-6 * res["max_grad"], res


def test_cp2_equals_one_process_and_resumes_on_one(tmp_path, text):
    runs = [(str(tmp_path / "grads"), str(text), [*LONG, "parallel.cp=2"], "grads"),
            (str(tmp_path / "train"), str(text), [*LONG, "parallel.cp=2"], "train"),
            (str(tmp_path / "half"), str(text), [*LONG, "parallel.cp=2", "train.stop_at=2"], "train"),
            # the loss over 3 slices of each rank's tokens (train.loss_chunks) against the whole one
            (str(tmp_path / "chunks"), str(text), [*LONG, "parallel.cp=2", "train.loss_chunks=3"], "grads")]
    res = run_distributed("pretrain.train.testing.cp_suite", 2, runs, timeout=300)
    assert res[0] == res[1]  # every rank agrees
    _check(res[0][0])
    _check(res[0][3])
    one = Trainer(tiny_config(tmp_path / "one", text, *LONG), quiet=True).fit()
    for (loss, norm), r in zip(res[0][1], one):
        assert math.isclose(loss, r["loss"], rel_tol=1e-5), (loss, r)
        assert math.isclose(norm, r["grad_norm"], rel_tol=1e-4), (norm, r)
    # resume across a change of degree: saved under cp=2 at step 2, continued on one process
    t = Trainer(tiny_config(tmp_path / "half", text, *[x for x in LONG if x != "train.resume=false"]),
                quiet=True)
    assert t.step == 2
    rest = t.fit()
    assert [r["step"] for r in rest] == [3, 4]
    for r, ref in zip(rest, one[2:]):
        assert math.isclose(r["loss"], ref["loss"], rel_tol=1e-5), (r, ref)


@pytest.mark.parametrize("layout", [("parallel.cp=2", "parallel.dp_shard=2"),
                                    ("parallel.cp=2", "parallel.tp=2")], ids=["cp_x_fsdp", "cp_x_tp"])
@SLOW
def test_cp_composes_with_fsdp_and_tp_on_4_ranks(tmp_path, text, layout):
    runs = [(str(tmp_path / "grads"), str(text), [*LONG, *layout], "grads")]
    res = run_distributed("pretrain.train.testing.cp_suite", 4, runs, timeout=400)
    _check(res[0][0])
