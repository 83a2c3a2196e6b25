"""Small structured files from someone else (config.toml, mixture.toml, stats.json, plan.json,
metrics.jsonl, HF config.json, eval task files): each hostile shape ends as one line naming the
file, within seconds and well under 1 GB, never a traceback or a hang.

The attacks are run through the documented commands in a child process with a time limit and an
address-space limit (RLIMIT_AS), so a reader that blocks on a FIFO or grows on /dev/zero fails the
test instead of the machine.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[1] / "src")
DEEP_ARRAY = "[" * 100_000 + "]" * 100_000
MEM = 1 << 30  # 1 GiB of address space for a child that imports no torch


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEM, MEM))


def pretrain(*argv, cwd: Path, timeout: float = 30, mem: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run([sys.executable, "-m", "pretrain", *map(str, argv)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout,
                          preexec_fn=_limit if mem else None)


def one_line(r: subprocess.CompletedProcess, *words: str) -> str:
    """The run failed with exit 2 and one stderr line that holds every one of `words`."""
    err = r.stderr.strip()
    assert r.returncode == 2, (r.returncode, err[-1500:])
    assert "Traceback" not in err and len(err.splitlines()) == 1, err[-1500:]
    for w in words:
        assert w in err, err
    return err


MIXTURES = {
    "bad_utf8": (b'budget = 1e9\n[sources.a]\npath = "\xff"\nweight = 1\n', "invalid UTF-8 at byte 33"),
    "deep": (f"budget = {DEEP_ARRAY}\n".encode(), "nested too deeply"),
    "not_toml": (b"budget = = 1\n", "invalid mixture TOML"),
}


@pytest.mark.parametrize("case", sorted(MIXTURES))
def test_mix_on_a_hostile_toml_is_one_line(tmp_path, case):
    body, why = MIXTURES[case]
    (tmp_path / "mixture.toml").write_bytes(body)
    one_line(pretrain("mix", "mixture.toml", cwd=tmp_path), "mixture.toml", why)


def test_a_fifo_or_a_device_is_refused_not_read(tmp_path):
    """A FIFO blocked `pretrain mix` forever; /dev/zero grew its memory until the kernel stepped in."""
    os.mkfifo(tmp_path / "mixture.toml")
    one_line(pretrain("mix", "mixture.toml", cwd=tmp_path, timeout=20), "mixture.toml", "not a regular file")
    one_line(pretrain("mix", "/dev/zero", cwd=tmp_path, timeout=20), "/dev/zero", "not a regular file")


def test_config_files_share_the_bounds(tmp_path):
    """config.toml (train, curate, sample, export, eval all load it through config.load) and the
    hardware table: invalid UTF-8 was a UnicodeDecodeError traceback."""
    from pretrain import config as cfgmod
    from pretrain.curate.pipeline import CurateConfig
    from pretrain.errors import UserError
    from pretrain.plan.hardware import load_table

    bad = tmp_path / "config.toml"
    bad.write_bytes(b'[reader]\ntext_field = "\xfe"\n')
    with pytest.raises(UserError, match=r"config\.toml: invalid UTF-8 at byte 23"):
        cfgmod.load(CurateConfig, bad)
    big = tmp_path / "big.toml"
    with open(big, "wb") as f:  # sparse: 65 MiB of holes
        f.truncate(65 << 20)
    with pytest.raises(UserError, match=r"big\.toml: 68,157,440 bytes, over"):
        cfgmod.load(CurateConfig, big)
    gpus = tmp_path / "gpus.json"
    gpus.write_text('{"x": ' + DEEP_ARRAY + "}")
    with pytest.raises(UserError, match=r"gpus\.json: not valid hardware table: nested too deeply"):
        load_table(gpus)
