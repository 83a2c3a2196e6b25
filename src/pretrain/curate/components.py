"""Connected components of a graph too large to hold its edges in memory (stage 3 of `dedup.py`).

The edges are (2, m) int64 `.npy` files read by memory map, `chunk` edges at a time; only the label
array (8 bytes per node) stays in memory. Min-label propagation: each edge hooks the roots of its
two ends to the smaller, then pointer jumping until every node points at a root (Shiloach and
Vishkin 1982); passes repeat until no edge joins two labels.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _hook_and_jump(labels: np.ndarray, u: np.ndarray, v: np.ndarray) -> bool:
    """One round over a chunk of edges; True when some edge joined two different labels."""
    lu, lv = labels[u], labels[v]
    diff = lu != lv
    if not diff.any():
        return False
    lu, lv = lu[diff], lv[diff]
    m = np.minimum(lu, lv)
    np.minimum.at(labels, lu, m)  # labels are roots here (fully jumped): hook each to the smaller
    np.minimum.at(labels, lv, m)
    while True:  # pointer jumping until every node points at a root
        nxt = labels[labels]
        if np.array_equal(nxt, labels):
            return True
        labels[:] = nxt


def components(edge_files: list[Path], n: int, chunk: int) -> np.ndarray:
    """labels[i] = the smallest node index in i's component, streaming the edge files."""
    labels = np.arange(n, dtype=np.int64)
    changed = True
    while changed:
        changed = False
        for path in edge_files:
            edges = np.load(path, mmap_mode="r")
            for s in range(0, edges.shape[1], chunk):
                part = np.asarray(edges[:, s : s + chunk])
                changed |= _hook_and_jump(labels, part[0], part[1])
    return labels
