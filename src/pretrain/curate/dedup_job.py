"""The belt configs behind `pretrain dedup` and `pretrain decontaminate`.

There is one driver (`curate.job.run_job`); these commands are belts with other defaults:
- dedup: `steps = ["dedup"]`, `keep = "id"` (each cluster keeps its smallest document id;
  `--set keep=first` keeps the first in input order, file order then position);
- decontaminate: `steps = ["decontaminate"]`, with the benchmarks and n-gram settings of its flags.
A user's `--config`/`--set` apply on top, so `--set steps='["language","dedup"]'` is a dedup
job that filters by language first.
"""

from __future__ import annotations

from pathlib import Path

from pretrain import config
from pretrain.curate.pipeline import CurateConfig, curate

PRESETS: dict[str, list[str]] = {
    "curate": [],
    "dedup": ['steps=["dedup"]', 'keep="id"'],
    "decontaminate": ['steps=["decontaminate"]'],
}


def job_config(job: str, path: str | None = None, overrides: list[str] | None = None) -> CurateConfig:
    """Defaults < the job's preset < TOML file < overrides."""
    return config.load(CurateConfig, path, overrides, base=PRESETS[job])


def run_dedup(inputs: list[str], out: str | Path, cfg: CurateConfig | None = None, executor=None) -> dict:
    """`pretrain dedup` as a function (benchmarks, notebooks)."""
    return curate(inputs, out, cfg or job_config("dedup"), executor=executor, job="dedup")
