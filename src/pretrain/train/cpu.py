"""Process-wide settings that make training steps faster on a CPU: how freed memory is handled.

A training step allocates and frees the same large activations every step (a (64, 256, 1536) bf16
tensor is 50 MB). glibc serves every request above its mmap threshold (at most 32 MB) with a fresh
mmap and returns it to the kernel on free, so each step touches hundreds of MB of new pages and pays
a page fault per 4 KB (~13 ms per 50 MB here). Keeping freed memory in the process, as PyTorch's CUDA
caching allocator does on GPUs, removes that cost: ~10% more tokens/s for nanoGPT's shakespeare-char
shape on this CPU (docs/decisions.md). The price: resident memory stays at the run's peak.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

M_TRIM_THRESHOLD = -1  # glibc malloc.h: bytes free at the heap's top before it is given back
M_MMAP_MAX = -4  # glibc malloc.h: how many allocations may be served by mmap


def keep_freed_memory() -> bool:
    """Serve every allocation from the heap and never trim it (glibc `mallopt`); False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and other libcs have no mallopt
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(M_MMAP_MAX, 0)) and bool(mallopt(M_TRIM_THRESHOLD, 2**31 - 1))
