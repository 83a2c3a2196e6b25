"""What a run under FSDP2 x TP prints: not FSDP2's "returned a view tensor" warning once per rank for
our logits (a view from the TP head's to_local, read only out of place by the loss), while the
same warning about any other module still shows. Two spawned ranks, TP 2, ~10 s."""

from __future__ import annotations

import pytest

from pretrain.train.testing import run_distributed

pytestmark = pytest.mark.usefixtures("restore_torch_threads")


def test_fsdp_x_tp_logits_view_warning_is_filtered_and_nothing_else():
    # with sequence parallelism (without it the head's output is the same replicated to_local view)
    for rank in run_distributed("pretrain.train.testing.fsdp_tp_warnings", 2, True, timeout=150):
        assert rank["view"]  # the condition FSDP2 warns about holds: the filter, not luck, is tested
        views = [w for w in rank["warnings"] if "returned a view tensor" in w]
        assert views == ["FSDP2-wrapped module (FSDPBlock) returned a view tensor. (probe)"], rank
