"""Section 3 of the tour: data-parallel gradients by torch autograd, ring all-reduce traffic and the
pipeline bubble (`plan.parallel`), and the two exact tensor-parallel splits of a matrix product."""

from __future__ import annotations

import numpy as np

from pretrain.tour.parts import Part, Section, Table


def _mse_grad(xs: list[float], ys: list[float], w: float = 1.0) -> float:
    """d/dw of mean((w x - y)^2), by torch autograd."""
    import torch

    wt = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    x, y = torch.tensor(xs, dtype=torch.float64), torch.tensor(ys, dtype=torch.float64)
    torch.mean((wt * x - y) ** 2).backward()
    return float(wt.grad)


def _data_parallel(sec: Section) -> None:
    # 3a: the gradient of the whole batch equals the average of equal shards' gradients, which is
    # why data parallelism only needs an all-reduce (a mean) of the gradients.
    full = _mse_grad([1, 2, 3, 4], [2, 4, 6, 8])
    shards = (_mse_grad([1, 2], [2, 4]), _mse_grad([3, 4], [6, 8]))
    sec.values["dp_grad_full"] = full
    sec.values["dp_grad_shards"] = shards
    sec.values["dp_grad_shard_mean"] = sum(shards) / 2
    sec.notes.append(
        f"3a. Shard gradients {shards[0]:g} and {shards[1]:g} average to {sum(shards) / 2:g}, "
        f"the full batch's {full:g}."
    )


def _allreduce(sec: Section) -> None:
    from pretrain.plan.parallel import ring_allreduce_bytes

    sec.values["allreduce_4gpus_x"] = ring_allreduce_bytes(1.0, 4)
    sec.values["allreduce_14gb_8gpus_gb"] = ring_allreduce_bytes(14e9, 8) / 1e9
    sec.values["allreduce_14gb_1000gpus_gb"] = ring_allreduce_bytes(14e9, 1000) / 1e9
    sec.tables.append(
        Table(
            "3a. Ring all-reduce: each GPU sends 2(G-1)/G of the gradient",
            ["GPUs", "gradient", "sent per GPU"],
            [
                [4, "1 x", f"{sec.values['allreduce_4gpus_x']:.2f} x"],
                [8, "14 GB", f"{sec.values['allreduce_14gb_8gpus_gb']:.2f} GB"],
                [1000, "14 GB", f"{sec.values['allreduce_14gb_1000gpus_gb']:.2f} GB"],
            ],
        )
    )


def _tensor_parallel(sec: Section) -> None:
    # 3c: the two exact splits of X @ W. A sum of integer products: numpy is the reference here;
    # the trainer's TP (torch DTensor) is tested against a single process in tests/test_train_*.
    X, W = np.array([[1, 2]]), np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    by_cols = np.concatenate([X @ W[:, :2], X @ W[:, 2:]], axis=1)
    by_rows = X[:, :1] @ W[:1] + X[:, 1:] @ W[1:]
    sec.values["tp_full"] = (X @ W)[0].tolist()
    sec.values["tp_by_columns"] = by_cols[0].tolist()
    sec.values["tp_by_rows"] = by_rows[0].tolist()
    cols, rows = (X @ W[:, :2])[0].tolist(), (X @ W[:, 2:])[0].tolist()
    sec.notes.append(f"3c. X·W = {sec.values['tp_full']}: by columns {cols} next to {rows}; by rows "
                     f"{(X[:, :1] @ W[:1])[0].tolist()} + {(X[:, 1:] @ W[1:])[0].tolist()}: the same.")


def _pipeline(sec: Section) -> None:
    from pretrain.plan.parallel import idle_cells, pipeline_bubble, pipeline_schedule

    sec.values["bubble_4_stages"] = {m: pipeline_bubble(4, m) for m in (1, 8, 32)}
    grid = pipeline_schedule(4, 8)
    sec.values["schedule_4x8_idle_cells"] = (idle_cells(grid), len(grid) * len(grid[0]))
    sec.tables.append(
        Table(
            "3d. Pipeline bubble (p-1)/(m+p-1), 4 stages",
            ["micro-batches", "bubble"],
            [[m, f"{v:.3f}"] for m, v in sec.values["bubble_4_stages"].items()],
        )
    )
    idle, cells = sec.values["schedule_4x8_idle_cells"]
    sec.notes.append(f"3d. GPipe schedule, 4 stages x 8 micro-batches: {idle} of {cells} cells idle.")


PARTS: list[Part] = [
    (("torch",), _data_parallel),
    (("pretrain.plan.parallel",), _allreduce),
    ((), _tensor_parallel),
    (("pretrain.plan.parallel",), _pipeline),
]
