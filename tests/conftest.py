"""Shared fixtures: where the real data lives (skip cleanly when it is absent)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# PRETRAIN_SHARED_DATA points elsewhere (a git worktree sits one level deeper than the checkout).
SHARED_DATA = Path(os.environ.get("PRETRAIN_SHARED_DATA") or ROOT.parent / "shared" / "data")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """`../shared/data` from the project root; tests that use it skip when it is missing."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data not found at {SHARED_DATA} (a fresh clone has none)")
    return SHARED_DATA


def sigint_as_in_a_terminal() -> None:
    """`preexec_fn` of a child a test will Ctrl-C: SIGINT at its default action and unblocked, as in
    a terminal's foreground job. A suite started as a background job (`make test &`, nohup, a CI
    runner's script) runs with SIGINT ignored, which every child inherits across exec: it never
    saw the test's Ctrl-C, ran to its end, and the test failed on how it was started."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def data_file(rel: str) -> Path:
    """A path under ../shared/data, or skip the calling test."""
    p = SHARED_DATA / rel
    if not p.exists():
        pytest.skip(f"missing {p}")
    return p


@pytest.fixture(scope="module")
def restore_torch_threads():
    """Training tests run on one thread (fast on a shared CPU); leave the process as we found it."""
    import torch

    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def text(tmp_path_factory) -> Path:
    """Tiny Shakespeare from ../shared/data, else text every Python carries (pydoc topics)."""
    from pretrain.train.testing import fallback_text

    shakespeare = SHARED_DATA / "lm" / "tinyshakespeare" / "input.txt"
    if shakespeare.is_file():
        return shakespeare
    return fallback_text(tmp_path_factory.mktemp("text") / "topics.txt")
