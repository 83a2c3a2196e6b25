"""Robustness leftovers of session 4, each reproduced by a test that failed before its fix:
a SIGKILLed curate leaves no temporary files behind once rerun."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_pipeline import _prose, _snapshot

ROOT = Path(__file__).resolve().parents[1]


def _curate(inp: Path, out: Path, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pretrain", "curate", str(inp), "-o", str(out),
                             "--workers", "1", "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw)


def _debris(out: Path) -> list[str]:
    return sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.name.endswith(".tmp"))


def test_sigkill_midway_then_rerun_leaves_no_tmp_and_same_bytes(tmp_path):
    inp = tmp_path / "in"
    inp.mkdir()
    docs = _prose(2400)
    for f in range(2):  # two shards: the kill lands while the first is still being written
        lines = (json.dumps({"id": f"d{f}-{i}", "text": t}) + "\n" for i, t in enumerate(docs[f::2]))
        (inp / f"part{f}.jsonl").write_text("".join(lines))
    ref = tmp_path / "ref"
    p = _curate(inp, ref)
    assert p.wait() == 0, p.stderr.read().decode()

    out = tmp_path / "out"
    p = _curate(inp, out, start_new_session=True)
    deadline = time.monotonic() + 120
    while not any("/.shard_" in d for d in _debris(out)) and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)  # a shard's temporary file exists now: kill the attempt that writes it
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    left = _debris(out)
    assert any("/.shard_" in d for d in left), f"the attempt ended before writing a shard: {left}"

    mine = [out / "work" / "tmp" / "notes.tmp", out / "work" / "tmp" / ".notes.tmp", out / ".x.ab12cd34.tmp"]
    for f in mine:  # not our writers' names, or outside the work folder: a sweep never touches them
        f.write_text("the user's")
    p = _curate(inp, out)
    assert p.wait() == 0, p.stderr.read().decode()
    assert all(f.read_text() == "the user's" for f in mine)
    for f in mine:
        f.unlink()
    assert _debris(out) == [], f"the rerun left {left}"
    assert _snapshot(out) == _snapshot(ref)


@pytest.mark.usefixtures("restore_torch_threads")
def test_train_quiet_still_says_it_resumes(tmp_path, text, capsys):
    from pretrain import config as cfgmod
    from pretrain.cli import main
    from pretrain.train.testing import tiny_config

    cfg = tmp_path / "tiny.toml"
    cfg.write_text(cfgmod.dumps(tiny_config(tmp_path / "run", text, "train.steps=4", "checkpoint.every=2")))
    assert main(["train", str(cfg), "--quiet", "--set", "train.stop_at=2"]) == 0
    first = capsys.readouterr().err
    assert "resuming" not in first and "step 1 " not in first  # quiet: no per-step lines
    assert main(["train", str(cfg), "--quiet"]) == 0
    said = capsys.readouterr().err.splitlines()
    resumed = [line for line in said if "resuming from step 2" in line]
    assert len(resumed) == 1, said  # one line, even when quiet
    assert (tmp_path / "run" / "checkpoints").is_dir()
