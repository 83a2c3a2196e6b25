"""train/cpu.py: freed activations are reused instead of being faulted in again (the kernel's count)."""

from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = r"""
import ctypes, resource, sys
# Count 4 KB pages whatever the machine's transparent-huge-page mode: under THP "always" (or
# GLIBC_TUNABLES=glibc.malloc.hugetlb=1) the default path faults a 64 MB block in as 2 MB pages,
# ~540 faults a step instead of 16,385, and the first assertion below failed on such a machine.
ctypes.CDLL(None, use_errno=True).prctl(41, 1, 0, 0, 0)  # PR_SET_THP_DISABLE (Linux 3.15+)
import torch
from pretrain.train.cpu import keep_freed_memory

def faults_per_step(steps):
    # One 64 MB activation allocated, written and freed per step, as a training step does.
    out = []
    for _ in range(steps):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        torch.empty(16 * 2**20).fill_(1.0)
        out.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    return out

if sys.argv[1] == "kept" and not keep_freed_memory():
    print("unsupported")
else:
    print(*faults_per_step(24))
"""


def faults(mode: str) -> list[int] | None:
    cmd = [sys.executable, "-c", SCRIPT, mode]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.split()
    return None if out == ["unsupported"] else [int(x) for x in out]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt: Linux only")
def test_keep_freed_memory_stops_page_faults_in_steady_state():
    """With keep_freed_memory, a freed 64 MB activation is handed back by malloc instead of being
    unmapped and faulted in again: the kernel's own fault count falls from one per page to ~none.
    Huge pages are switched off in the child so that the count is in 4 KB pages on every machine."""
    pages = 64 * 2**20 // 4096
    default = faults("default")
    assert sorted(default[-8:])[4] > pages // 2  # glibc mmaps a block this big afresh: a fault per page
    kept = faults("kept")
    if kept is None:
        pytest.skip("this libc has no mallopt")
    # glibc's tcache holds up to 7 small remainders that stop the first frees from coalescing, so the
    # heap grows for a few steps; then the same memory is handed back every step. The median of the
    # last 8 steps: on a loaded machine one step now and then takes faults of its own (reclaim).
    assert sorted(kept[-8:])[4] < pages // 50
