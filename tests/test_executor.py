"""Executors: Ray gives the same bytes as the local process pool (Ray started locally by the test)."""

from __future__ import annotations

import importlib.util
import os

import pytest
from test_pipeline import _snapshot, _write_jsonl_corpus

from pretrain.curate.executor import LocalExecutor
from pretrain.curate.pipeline import CurateConfig, curate


def _square(x: int) -> int:
    return x * x


def test_local_map_keeps_order():
    assert LocalExecutor(2).map(_square, range(7)) == [x * x for x in range(7)]
    assert LocalExecutor(1).map(_square, range(7)) == [x * x for x in range(7)]


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray not installed")
def test_ray_executor_same_bytes_as_local(tmp_path):
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    from pretrain.curate.executor import RayExecutor

    _write_jsonl_corpus(tmp_path / "in", files=3, per_file=15)
    local = curate([str(tmp_path / "in")], tmp_path / "local", CurateConfig(), executor=LocalExecutor(2))
    try:
        ex = RayExecutor(workers=2)
        assert ex.map(abs, [-2, 3, -5]) == [2, 3, 5]
        remote = curate([str(tmp_path / "in")], tmp_path / "ray", CurateConfig(), executor=ex)
    finally:
        ray.shutdown()
    assert _snapshot(tmp_path / "local") == _snapshot(tmp_path / "ray")
    assert local["documents"] == remote["documents"]
    drop_time = lambda steps: {k: {f: v for f, v in s.items() if f != "seconds"} for k, s in steps.items()}  # noqa: E731
    assert drop_time(local["steps"]) == drop_time(remote["steps"])
