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
    cfg = config.load(CurateConfig, path, overrides, base=PRESETS[job])
    if path:
        beside_config(cfg, Path(path))
    return cfg


def file_keys(cfg: CurateConfig) -> list[tuple[str, str]]:
    """(key, path) of every file a config names: models, URL lists, benchmarks (less `:fields`)."""
    u, named = cfg.url_filter, [("classifier.model", cfg.classifier.model),
                                 ("language.model_path", cfg.language.model_path)]
    named += [(f"url_filter.{k}", p) for k in ("domain_files", "url_files", "banned_word_files")
              for p in getattr(u, k)]
    named += [("decontam.benchmarks", b if Path(b).exists() or ":" not in b else b.rsplit(":", 1)[0])
              for b in cfg.decontam.benchmarks]
    return [(k, p) for k, p in named if p]


def beside_config(cfg: CurateConfig, config_file: Path) -> None:
    """A relative path is read from the working directory, not the config's folder: a config
    naming `quality.json` beside itself, run from elsewhere, said only "not found". When the file
    is missing here but sits beside the config, say both and how to name it."""
    from pretrain.curate.io import is_url
    from pretrain.errors import UserError

    for key, p in file_keys(cfg):
        there = config_file.parent / p
        if not is_url(p) and not Path(p).is_absolute() and not Path(p).exists() and there.exists():
            raise UserError(f"{config_file}: {key} = {p!r} is read from the working directory "
                            f"({Path.cwd()}), where it is missing; it sits beside the config: name it "
                            f"{str(there)!r} or by an absolute path")


def run_dedup(inputs: list[str], out: str | Path, cfg: CurateConfig | None = None, executor=None) -> dict:
    """`pretrain dedup` as a function (benchmarks, notebooks)."""
    return curate(inputs, out, cfg or job_config("dedup"), executor=executor, job="dedup")
