"""Shared fixtures: where the real data lives (skip cleanly when it is absent)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
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


# --- slow peer runs started with the session, beside the tests before their module -------------

_EARLY: list[tuple[subprocess.Popen, Path]] = []


def pytest_collection_finish(session) -> None:
    """A selected test module's `start_early(folder)` (a peer's run that needs files, not fixtures)
    starts now: pytest runs one test at a time, so on two cores the run takes the other core while
    the modules before its own run, and its test finds it done instead of waiting for it."""
    if session.config.option.collectonly:
        return
    for mod in dict.fromkeys(getattr(item, "module", None) for item in session.items):
        start = getattr(mod, "start_early", None)
        if start is not None:
            folder = Path(tempfile.mkdtemp(prefix="pretrain-early-"))
            try:
                procs = start(folder)
            except Exception:  # noqa: BLE001 - the module's own fixtures meet it again and report it
                procs = []
            if not procs:
                shutil.rmtree(folder, ignore_errors=True)
            _EARLY.extend((proc, folder) for proc in procs)


def pytest_sessionfinish(session) -> None:
    """Runs a failed or interrupted session never waited for are stopped; their folders removed."""
    for proc, folder in _EARLY:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        shutil.rmtree(folder, ignore_errors=True)
