"""Clipping, spike detection and Young's interval against the lesson's worked numbers (section 5)."""

from __future__ import annotations

import math

import pytest
import torch

from pretrain.train.checkpoint import young_interval_s
from pretrain.train.stability import SpikeDetector, clip_grad_norm_, detect_spikes


def _params_with_grads(*grads):
    ps = []
    for g in grads:
        p = torch.nn.Parameter(torch.zeros(len(g)))
        p.grad = torch.tensor(g)
        ps.append(p)
    return ps


def test_clip_lesson_example_norm_5_then_scaled_by_one_fifth():
    # Lesson 5b: shards (1, 2) and (2, 4): 5 + 20 = 25, norm 5; c = 1 -> (0.2, 0.4), (0.4, 0.8).
    ps = _params_with_grads([1.0, 2.0], [2.0, 4.0])
    norm = clip_grad_norm_(ps, 1.0)
    assert norm.item() == 5.0
    assert ps[0].grad.tolist() == pytest.approx([0.2, 0.4], abs=1e-7)
    assert ps[1].grad.tolist() == pytest.approx([0.4, 0.8], abs=1e-7)


def test_clip_never_scales_up_and_matches_torch():
    ps = _params_with_grads([0.1, 0.2], [0.2, 0.4])
    norm = clip_grad_norm_(ps, 1.0)
    assert norm.item() == pytest.approx(0.5)
    assert ps[0].grad.tolist() == pytest.approx([0.1, 0.2])
    g = torch.Generator().manual_seed(0)
    a = [torch.randn(7, 3, generator=g) * 5 for _ in range(4)]
    mine, ref = _params_with_grads(*[t.flatten().tolist() for t in a]), _params_with_grads(
        *[t.flatten().tolist() for t in a])
    n1 = clip_grad_norm_(mine, 2.0)
    n2 = torch.nn.utils.clip_grad_norm_(ref, 2.0)
    assert n1.item() == pytest.approx(n2.item(), rel=1e-6)
    for x, y in zip(mine, ref):
        torch.testing.assert_close(x.grad, y.grad, rtol=1e-5, atol=1e-7)


def test_nonfinite_norm_leaves_grads_alone():
    ps = _params_with_grads([1.0, float("inf")], [2.0, 4.0])
    norm = clip_grad_norm_(ps, 1.0)
    assert not math.isfinite(norm.item())
    assert ps[1].grad.tolist() == [2.0, 4.0]


def test_spike_rule_lesson_example():
    # Lesson 5a: w = 4, f = 2: step 5 (8.5 > 2 x 2.8) is flagged, step 6 (4.0 < 5.6) is not.
    losses = [3.0, 2.9, 2.8, 2.8, 2.7, 8.5, 4.0, 2.7]
    assert detect_spikes(losses, factor=2.0, window=4) == [5]


def test_spike_persistence_and_state_round_trip():
    det = SpikeDetector(factor=2.0, window=4, patience=2)
    for x in [3.0, 2.9, 2.8, 2.8, 2.7]:
        det.observe(x)
    assert det.observe(9.0) and not det.persistent
    saved = det.state_dict()
    assert det.observe(9.5) and det.persistent  # median(2.8, 2.8, 2.7, 9.0) = 2.8: still a spike
    other = SpikeDetector(2.0, 4, 2)
    other.load_state_dict(saved)
    assert other.observe(9.5) and other.persistent


def test_young_interval_lesson_numbers():
    # Lesson 5d: C = 1 min, M = 180 min -> 18.97 min; C = 10 s -> 7.7 min.
    assert young_interval_s(60.0, 180 * 60.0) / 60 == pytest.approx(18.97, abs=0.005)
    assert young_interval_s(10.0, 180 * 60.0) / 60 == pytest.approx(7.7, abs=0.05)


def _sharded_worker(rank: int, world: int, store: str, out) -> None:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    # A file store in the test's own folder: no port to find free and lose to another process.
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    try:
        mesh = init_device_mesh("cpu", (world,))
        full = torch.tensor([1.0, 2.0, 2.0, 4.0])  # GPU 1 holds (1, 2), GPU 2 holds (2, 4)
        p = torch.nn.Parameter(distribute_tensor(torch.zeros(4), mesh, [Shard(0)]))
        p.grad = distribute_tensor(full, mesh, [Shard(0)])
        q = torch.nn.Parameter(torch.zeros(1))  # a plain replicated tensor mixed in
        q.grad = torch.tensor([0.0])
        norm = clip_grad_norm_([p, q], 1.0)
        out.put((rank, norm.item(), p.grad.to_local().tolist()))
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_clip_sharded_dtensor_over_two_processes(tmp_path):
    # The same lesson example with the gradient really split over two gloo ranks, plus a plain tensor.
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    store = tmp_path / "store"
    procs = [ctx.Process(target=_sharded_worker, args=(r, 2, str(store), q)) for r in range(2)]
    for p in procs:
        p.start()
    results = sorted(q.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    assert [r[1] for r in results] == [5.0, 5.0]
    assert results[0][2] == pytest.approx([0.2, 0.4]) and results[1][2] == pytest.approx([0.4, 0.8])
