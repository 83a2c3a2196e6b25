"""The process entry (`python -m pretrain`, the `pretrain` script): main's exit status, and the
objects frozen before the interpreter's shutdown collections (bench/bench_exit.py: 4x less time
between a command's last line and its exit)."""

from __future__ import annotations

import gc

import pretrain.__main__ as entry_mod


def test_entry_returns_mains_status_and_freezes_the_heap_for_exit(monkeypatch):
    monkeypatch.setattr(entry_mod, "main", lambda: 3)
    before = gc.get_freeze_count()
    try:
        assert entry_mod.entry() == 3
        assert gc.get_freeze_count() > before
    finally:
        gc.unfreeze()  # the test process keeps collecting


def test_the_script_runs_the_entry():
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    assert project["project"]["scripts"]["pretrain"] == "pretrain.__main__:entry"
