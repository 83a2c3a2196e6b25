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


def test_jsonl_lines_are_the_stdlib_bytes():
    # The stdlib is the truth: orjson is a faster route to the same bytes.
    import json
    import random

    from pretrain.curate.io import dumps_line

    def stdlib(obj):
        return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")

    rng = random.Random(0)
    chars = "aZ0 \"\\/\n\t\x00\x1f\x7f\u00e9\u2028\u4e2d\U0001f600"
    records = [{"id": f"d{i}", "text": "".join(rng.choice(chars) for _ in range(rng.randint(0, 30))),
                "metadata": {"n": rng.randint(-2**63, 2**63 - 1), "ok": rng.random() < 0.5, "x": None,
                             "tags": ["a", "\u00fc"], "f": rng.choice([0.1, 1.5, -2.0, 123.456])}}
               for i in range(500)]
    records += [{"big": 2**70}, {"k": {"1": [1, 2, {"z": []}]}}, {1: "non-string key"}]
    for rec in records:
        assert dumps_line(rec) == stdlib(rec)
    assert json.loads(dumps_line({"f": 1e-7})) == {"f": 1e-7}  # spelled 1e-7, not 1e-07: same value
