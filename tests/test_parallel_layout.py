"""The layout's arithmetic, checked without processes: degrees against the world size (the error names
every factor), what a model must divide by, pipeline stage splits, and the micro-batch checks."""

from __future__ import annotations

import dataclasses

import pytest

from pretrain.errors import UserError
from pretrain.plan.shapes import ModelShape
from pretrain.train.config import ParallelConfig
from pretrain.train.parallel import ParallelDims, rank_stages, stage_layers

SHAPE = ModelShape("t", n_layers=4, d_model=64, n_heads=4, n_kv_heads=2, d_ff=176, vocab_size=257, seq_len=32)


def test_degrees_must_multiply_to_the_world_size_and_the_error_names_each():
    dims = ParallelDims(dp_replicate=1, dp_shard=2, tp=2, pp=2)
    dims.validate(8)
    with pytest.raises(UserError) as e:
        dims.validate(4)
    msg = str(e.value)
    for part in ("pp=2", "dp_replicate=1", "dp_shard=2", "tp=2", "= 8", "world size is 4"):
        assert part in msg


def test_a_degree_below_one_is_refused():
    with pytest.raises(UserError, match="parallel.tp must be >= 1"):
        ParallelDims(tp=0).validate(0)


def test_tp_must_divide_heads_kv_heads_and_ffn():
    ParallelDims(tp=2).check_shape(SHAPE, ParallelConfig())
    with pytest.raises(UserError, match="n_kv_heads=2 is not divisible by parallel.tp=4"):
        ParallelDims(tp=4).check_shape(SHAPE, ParallelConfig())


def test_cp_needs_the_sequence_in_two_chunks_per_rank():
    ParallelDims(cp=2).check_shape(SHAPE, ParallelConfig(cp=2))  # 32 tokens = 4 chunks of 8
    with pytest.raises(UserError, match=r"model.seq_len=32 is not divisible by 64 \(parallel.cp=32"):
        ParallelDims(cp=32).check_shape(SHAPE, ParallelConfig(cp=32))


def test_cp_refusals_name_the_config_keys():
    """The refusals now live in plan/layout.py's trainer rules (the planner's recipe obeys them too)."""
    with pytest.raises(UserError, match=r"^parallel.cp=2 with parallel.pp=2: the trainer"):
        ParallelDims(cp=2, pp=2).check_shape(SHAPE, ParallelConfig(cp=2, pp=2))
    with pytest.raises(UserError, match=r"^parallel.cp=2 with sequence parallelism"):
        ParallelDims(cp=2, tp=2).check_shape(SHAPE, ParallelConfig(cp=2, tp=2, sequence_parallel=True))


def test_pipeline_needs_a_layer_per_stage_and_untied_embeddings():
    interleaved = ParallelConfig(pp=4, pp_schedule="interleaved1f1b")
    with pytest.raises(UserError, match="model.n_layers=4 < pp x v = 8 pipeline stages"):
        ParallelDims(pp=4).check_shape(SHAPE, interleaved)
    tied = dataclasses.replace(SHAPE, tied_embeddings=True)
    with pytest.raises(UserError, match="untied embeddings"):
        ParallelDims(pp=2).check_shape(tied, ParallelConfig(pp=2))
    with pytest.raises(UserError, match="pp_schedule must be one of"):
        ParallelDims(pp=2).check_shape(SHAPE, ParallelConfig(pp=2, pp_schedule="zigzag"))


def test_stage_split_covers_every_layer_once_in_order():
    for n, s in [(4, 2), (5, 2), (7, 4), (12, 8)]:
        ranges = stage_layers(n, s)
        assert [i for r in ranges for i in r] == list(range(n))
        assert max(map(len, ranges)) - min(map(len, ranges)) <= 1


def test_interleaved_ranks_hold_looped_stages():
    # Megatron's interleaved placement (Narayanan et al. 2021): rank r holds chunks r and r + p.
    assert [rank_stages(r, 2, "interleaved1f1b") for r in range(2)] == [[0, 2], [1, 3]]
    assert rank_stages(1, 4, "1f1b") == [1]

