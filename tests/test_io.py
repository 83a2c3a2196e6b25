"""Atomic zstd JSONL shards and done markers."""

import pytest

from pretrain.curate import io
from pretrain.errors import UserError


def test_jsonl_zst_round_trip_and_determinism(tmp_path):
    recs = [{"id": str(i), "text": "héllo " * i} for i in range(100)]
    a, b = tmp_path / "a.jsonl.zst", tmp_path / "b.jsonl.zst"
    assert io.write_jsonl_zst(a, recs) == 100
    io.write_jsonl_zst(b, iter(recs))
    assert list(io.read_jsonl_zst(a)) == recs
    assert a.read_bytes() == b.read_bytes()
    assert not list(tmp_path.glob("*.tmp"))


def test_failed_write_leaves_nothing(tmp_path):
    def boom():
        yield {"a": 1}
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        io.write_jsonl_zst(tmp_path / "x.jsonl.zst", boom())
    assert list(tmp_path.iterdir()) == []


def test_done_marker_refuses_other_config(tmp_path):
    p = tmp_path / "shard"
    assert not io.is_done(p, "abc")
    io.mark_done(p, {"config_hash": "abc"})
    assert io.is_done(p, "abc")
    with pytest.raises(UserError):
        io.is_done(p, "def")
