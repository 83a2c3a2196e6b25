"""Small, fast configurations for tests, benchmarks and demos, and a text that always exists.

`tiny_config(out, text_path, *overrides)` is a 2-layer, 64-wide byte-level model that trains a step
in milliseconds on one CPU core; `fallback_text()` writes Python's own pydoc topics (shipped with
every CPython) when the shared Tiny Shakespeare file is absent.
"""

from __future__ import annotations

from pathlib import Path

from pretrain import config as cfgmod
from pretrain.train.config import RunConfig

TINY = [
    "model.preset=tiny-cpu", "model.n_layers=2", "model.d_model=64", "model.n_heads=4", "model.n_kv_heads=2",
    "model.d_ff=176", "model.vocab_size=257", "model.seq_len=32",
    "data.batch_size=4", "optim.lr=3e-3", "schedule.warmup_steps=5", "train.steps=40",
    "log.tensorboard=false", "checkpoint.every=5", "checkpoint.keep=10", "precision.dtype=fp32",
    "train.threads=1",  # one thread: much faster than two on a CPU shared with other jobs
]


def tiny_config(out: str | Path, text_path: str | Path, *overrides: str) -> RunConfig:
    return cfgmod.load(RunConfig, None, TINY + [f"train.out={out}", f"data.path={text_path}", *overrides])


def fallback_text(path: str | Path) -> Path:
    """Write CPython's pydoc topics (about 700 KB of English prose and code) to `path`."""
    from pydoc_data.topics import topics

    path = Path(path)
    path.write_text("\n\n".join(topics[k] for k in sorted(topics)))
    return path
