"""Executors: Ray gives the same bytes as the local process pool (Ray started locally by the test)."""

from __future__ import annotations

import importlib.util
import os
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from s3server import s3  # noqa: F401  (the fixture)
from test_pipeline import _snapshot, _write_jsonl_corpus

from pretrain import config
from pretrain.curate.executor import LocalExecutor
from pretrain.curate.pipeline import CurateConfig, curate
from pretrain.curate.step import Step


def _square(x: int) -> int:
    return x * x


def test_local_map_keeps_order():
    assert LocalExecutor(2).map(_square, range(7)) == [x * x for x in range(7)]
    assert LocalExecutor(1).map(_square, range(7)) == [x * x for x in range(7)]


class Slow(Step):
    """Keeps each shard busy (imported by Ray workers); notes in $SLOW_LOG which Ray node started
    which shard. On the node named in $SLOW_LOG/../doomed, the shard waits there until the node is
    removed: the node dies mid-shard whatever the machine's load (with a fixed 0.6 s shard, a test
    process slow to notice the start let the node finish it, and the finished shard was not redone)."""

    name = "slow"

    def process(self, doc):
        if self.stats["in"] == 1 and os.environ.get("SLOW_LOG"):
            import ray

            node = ray.get_runtime_context().get_node_id() if ray.is_initialized() else "local"
            log = Path(os.environ["SLOW_LOG"])
            (log / f"{doc.source}.{node}").touch()
            doomed = log.parent / "doomed"
            if doomed.is_file() and doomed.read_text() == node:
                time.sleep(600)  # ended by the node's removal; the test fails long before this
        time.sleep(0.05)
        return doc


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray not installed")
def test_ray_cluster_node_killed_mid_job_same_bytes_as_local(tmp_path, monkeypatch, s3):  # noqa: F811
    """A real cluster on this machine: a head with no CPU and two worker nodes with their own
    resources; one worker node is removed while its shard runs. Ray retries the lost tasks on the
    other node; every unit writes atomically, so the corpus is byte for byte LocalExecutor's.
    The cluster writes to the S3 server (every node uploads its own shards) with a work folder all
    nodes share: the multi-node layout docs/curation.md describes."""
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    for k, v in s3.env().items():
        if k.startswith("AWS_"):
            monkeypatch.setenv(k, v)  # the nodes inherit the endpoint and credentials
    tests = str(Path(__file__).resolve().parent)
    # worker nodes start from this environment: they import pretrain (and Slow) from here
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(tests).parent / "src"), tests]))
    log = tmp_path / "starts"
    log.mkdir()
    import ray
    from ray.cluster_utils import Cluster

    from pretrain.curate.executor import RayExecutor

    _write_jsonl_corpus(tmp_path / "in", files=4, per_file=12)
    # two shards of two files each: a shard for each node, each of several inputs
    cfg = config.load(CurateConfig, None, ['steps=["test_executor:Slow", "language", "dedup"]',
                                           "shards.max_inputs=2"])
    local = curate([str(tmp_path / "in")], tmp_path / "local", cfg, executor=LocalExecutor(1))
    monkeypatch.setenv("SLOW_LOG", str(log))
    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    try:
        doomed = cluster.add_node(num_cpus=1)
        cluster.add_node(num_cpus=1)
        (tmp_path / "doomed").write_text(doomed.node_id)  # its shard waits for the removal (Slow)
        ex = RayExecutor(address=cluster.address)
        assert ex.workers == 2
        result: dict = {}
        bucket = s3.new_bucket("ray")
        job = threading.Thread(target=lambda: result.update(
            curate([str(tmp_path / "in")], f"s3://{bucket}/corpus", cfg, executor=ex,
                   work_dir=tmp_path / "shared-work")))
        job.start()
        deadline = time.time() + 120
        while not list(log.glob(f"*.{doomed.node_id}")) and time.time() < deadline:
            time.sleep(0.05)
        lost = [p.name.split(".")[0] for p in log.glob(f"*.{doomed.node_id}")]
        cluster.remove_node(doomed)  # in the middle of a shard: Slow holds it there
        job.join(timeout=240)
        assert not job.is_alive()
    finally:
        ray.shutdown()
        cluster.shutdown()
    assert lost, f"the doomed node never started a shard: {sorted(os.listdir(log))}"
    redone = {p.name.split(".")[0] for p in log.iterdir() if not p.name.endswith(doomed.node_id)}
    assert set(lost) <= redone  # its shard was run again on the surviving node
    fs = s3.filesystem()
    got = {p.split("/corpus/", 1)[1]: fs.cat_file(p) for sub in ("data", "rejects")
           for p in sorted(fs.find(f"{bucket}/corpus/{sub}"))}
    assert got == _snapshot(tmp_path / "local") and got
    assert result["documents"] == local["documents"]


def _die_on_two(x: int) -> int:
    if x == 2:  # a worker killed mid-unit: the OOM killer, a segfault in a C library
        os.kill(os.getpid(), 9)
    time.sleep(0.2)
    return x


@pytest.mark.timeout(120)
def test_local_map_raises_when_a_worker_dies():
    """multiprocessing.Pool waited forever for a dead worker's unit; the executor now says so."""
    from pretrain.errors import UserError

    with pytest.raises(UserError, match="a worker process died"):
        LocalExecutor(2).map(_die_on_two, range(6))
    assert LocalExecutor(2).map(_square, range(5)) == [x * x for x in range(5)]  # a fresh pool works


def _refuse_three(x: int) -> int:
    if x == 3:  # what a unit raises for an input gone since the job listed it
        from pretrain.errors import UserError

        raise UserError("in/3.jsonl: gone since this job listed it")
    return x


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray not installed")
def test_ray_map_says_a_failed_unit_as_the_local_pool_does(monkeypatch):
    """Under Ray a unit's UserError reached the user as Ray's remote traceback in terminal colours,
    and a unit that killed its worker each time Ray retried it as a raw WorkerCrashedError."""
    import ray

    from pretrain.curate.executor import RayExecutor
    from pretrain.errors import UserError

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    tests = Path(__file__).resolve().parent
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tests.parent / "src"), str(tests)]))
    if ray.is_initialized():
        ray.shutdown()
    ex = RayExecutor(workers=2)
    try:
        with pytest.raises(UserError) as here:
            LocalExecutor(1).map(_refuse_three, range(5))
        with pytest.raises(UserError) as there:
            ex.map(_refuse_three, range(5))
        assert str(there.value) == str(here.value)
        with pytest.raises(UserError, match="a Ray worker process died .* rerun the same command"):
            ex.map(_die_on_two, range(4))
        assert ex.map(_square, range(5)) == [x * x for x in range(5)]  # the instance still runs units
    finally:
        ray.shutdown()


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray not installed")
def test_a_ray_failure_of_its_own_is_one_line_naming_the_unit():
    """Ray's OutOfMemoryError (its memory monitor killed the worker) and its other RayErrors reached
    the user as raw tracebacks: `_result` is given Ray's real exception classes, raised by `get`
    as they are on a cluster (constructing them needs none), and says each in one line."""
    import ray.exceptions

    from pretrain.curate.executor import _result
    from pretrain.errors import UserError

    def ray_raising(error):
        def get(ref):
            raise error
        return SimpleNamespace(exceptions=ray.exceptions, get=get)

    oom = ray.exceptions.OutOfMemoryError("Task was killed due to the node running low on memory.\n"
                                          "Memory on the node (IP: 10.0.0.1) was 15.2GB / 16GB")
    with pytest.raises(UserError) as e:
        _result(ray_raising(oom), "ref", 2, 5, 3)
    said = str(e.value)
    assert "\n" not in said and "memory monitor killed the worker running unit 4 of 5" in said
    assert "2 finished" in said and "rerun the same command" in said and "fewer --workers" in said
    assert e.value.__cause__ is oom  # Ray's own text stays chained for whoever debugs

    lost = ray.exceptions.NodeDiedError("node 7f3a died (its raylet stopped answering)\nmore")
    with pytest.raises(UserError, match=r"^Ray failed unit 1 of 3 \(0 finished.*rerun the same command"
                       r".*NodeDiedError: node 7f3a died \(its raylet stopped answering\)$"):
        _result(ray_raising(lost), "ref", 0, 3, 0)
    assert _result(SimpleNamespace(exceptions=ray.exceptions, get=lambda ref: 42), "ref", 0, 1) == 42
