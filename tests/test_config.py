"""Config: defaults < TOML < --set overrides, unknown keys rejected, round trip through TOML."""

from dataclasses import dataclass, field

import pytest

from pretrain import config
from pretrain.errors import UserError


@dataclass
class Inner:
    rate: float = 0.1
    langs: tuple[str, ...] = ("en",)


@dataclass
class Outer:
    name: str = "x"
    steps: int = 10
    inner: Inner = field(default_factory=Inner)


def test_precedence(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('steps = 20\n[inner]\nrate = 0.5\n')
    cfg = config.load(Outer, f, ["inner.rate=0.25", 'inner.langs=["en","fr"]', "name=hello"])
    assert cfg.steps == 20 and cfg.inner.rate == 0.25 and cfg.inner.langs == ("en", "fr")
    assert cfg.name == "hello"


def test_unknown_key_named():
    with pytest.raises(UserError, match="inner.bogus"):
        config.load(Outer, None, ["inner.bogus=1"])


@pytest.mark.parametrize("override, says", [
    ("inner.rte=1", "unknown config key 'inner.rte' (did you mean 'inner.rate'?)"),  # a near spelling
    ("rate=1", "unknown config key 'rate' (did you mean 'inner.rate'?)"),  # the key of another section
    ("innr.rate=1", "unknown config key 'innr' (did you mean 'inner'?)"),
    ("inner.zzz=1", "unknown config key 'inner.zzz'; known: langs, rate"),  # nothing near: no guess
])
def test_an_unknown_key_names_the_key_meant(override, says):
    with pytest.raises(UserError) as e:
        config.load(Outer, None, [override])
    assert str(e.value).startswith(says), str(e.value)


def test_a_misspelt_section_in_a_set_is_not_blamed_on_the_file(tmp_path):
    """`--set trian.steps=3` beside a good recipe was said as `recipe.toml: unknown config key
    'trian'`: the newcomer looked for a typo in the file. A typo in the file is still the file's."""
    good, bad = tmp_path / "good.toml", tmp_path / "bad.toml"
    good.write_text("steps = 20\n[inner]\nrate = 0.5\n")
    bad.write_text("[innr]\nrate = 0.5\n")
    with pytest.raises(UserError) as e:
        config.load(Outer, good, ["innr.rate=1"])
    assert str(e.value).startswith("unknown config key 'innr'"), str(e.value)
    with pytest.raises(UserError) as e:  # the file's: its "did you mean 'inner'" names a --set section
        config.load(Outer, bad, ["inner.rate=1"])
    assert str(e.value).startswith(f"{bad}: unknown config key 'innr'"), str(e.value)


def test_a_recipe_not_found_names_the_near_one(tmp_path, monkeypatch):
    """`pretrain train recipe/tiny-cpu.toml` (or `recipes/tiny-cpu`, `recipes/tiny_cpu.toml`) said
    only "config file not found"; the file meant is named when one is near, and nothing is guessed
    for a name near nothing."""
    (tmp_path / "recipes").mkdir()
    for name in ("tiny-cpu.toml", "gpt2-124m.toml", "continue-hf.toml"):
        (tmp_path / "recipes" / name).write_text("steps = 1\n")
    monkeypatch.chdir(tmp_path)
    for given, meant in (("recipe/tiny-cpu.toml", "recipes/tiny-cpu.toml"),
                         ("recipes/tiny-cpu", "recipes/tiny-cpu.toml"),
                         ("recipes/tiny_cpu.toml", "recipes/tiny-cpu.toml"),
                         ("recipes/gpt2-124.toml", "recipes/gpt2-124m.toml"),
                         ("recipes/nothing.toml", None), ("elsewhere/x.toml", None)):
        with pytest.raises(UserError) as e:
            config.load(Outer, given)
        hint = f" (did you mean {meant}?)" if meant else ""
        assert str(e.value) == f"config file not found: {given}{hint}"
        if meant:
            assert config.load(Outer, meant).steps == 1  # the file named is one that loads


def test_type_checked():
    with pytest.raises(UserError, match="steps"):
        config.load(Outer, None, ["steps=abc"])


def test_round_trip(tmp_path):
    cfg = config.load(Outer, None, ["inner.rate=2"])
    f = tmp_path / "r.toml"
    f.write_text(config.dumps(cfg))
    assert config.load(Outer, f) == cfg
    assert config.config_hash(cfg) == config.config_hash(config.load(Outer, f))
    assert config.config_hash(cfg) != config.config_hash(Outer())


# --- values validated when loaded (issue 20): one line naming the key, the value and what is allowed


@pytest.mark.parametrize("override,message", [
    ("extract.backend=x;y", "extract.backend must be one of resiliparse, trafilatura"),
    ("reader=1", "config key 'reader' is a section ([reader]), not 1"),
    ("reader.max_record_bytes=-1", "reader.max_record_bytes must be >= 1, got -1"),
    ("extract.timeout_s=-5", "extract.timeout_s must be > 0, got -5.0"),
    ("reader.warc_check_gaps=sometimes", "must be one of off, uncompressed, all, got 'sometimes'"),
    ("reader.max_ratio=nan", "reader.max_ratio must be a number, got nan"),
    ("extract.timeout_s=inf", "extract.timeout_s must be a number, got inf"),  # 31 keys took inf
    ("dedup.threshold=1e400", "dedup.threshold must be a number, got inf"),
    ("extract.max_depth=true", "config key 'extract.max_depth' wants int, got True"),
    ("rules.min_doc_words=-3", "rules.min_doc_words must be >= 0, got -3"),
    ("url_filter.domains=3", "config key 'url_filter.domains' wants a list, got 3"),
])
def test_curate_config_refuses_bad_values(override, message):
    from pretrain.curate.pipeline import CurateConfig

    with pytest.raises(UserError) as e:
        config.load(CurateConfig, None, [override])
    assert message in str(e.value) and "\n" not in str(e.value)


def test_signed_and_optional_fields_still_take_what_they_mean():
    from pretrain.curate.pipeline import CurateConfig
    from pretrain.train.config import RunConfig

    assert config.load(CurateConfig, None, ["classifier.threshold=-0.5"]).classifier.threshold == -0.5
    run = config.load(RunConfig, None, ["model.mlp=gelu", "model.n_layers=4", "optim.lr=1e-3"])
    assert (run.model.mlp, run.model.n_layers, run.model.norm) == ("gelu", 4, None)
    for bad, key in (("train.steps=-5", "train.steps"), ("train.grad_accum=0", "train.grad_accum"),
                     ("model.norm=batchnorm", "model.norm"), ("model.n_layers=-2", "model.n_layers"),
                     ("schedule.kind=linear", "schedule.kind"),
                     ("data.eval_fraction=1.5", "data.eval_fraction")):
        with pytest.raises(UserError, match=key):
            config.load(RunConfig, None, [bad])


def test_every_recipe_and_default_still_loads():
    from pathlib import Path

    from pretrain.curate.dedup_job import PRESETS, job_config
    from pretrain.train.config import RunConfig

    for job in PRESETS:  # curate, dedup, decontaminate: their presets pass the checks
        job_config(job)
    from pretrain.eval.ablate import load_config as load_ablation

    for recipe in sorted((Path(__file__).resolve().parents[1] / "recipes").glob("*.toml")):
        if recipe.name.startswith("ablate"):  # `pretrain ablate` configs: twins of training runs
            load_ablation(recipe)
        else:
            config.load(RunConfig, recipe)


def test_cli_bad_values_are_one_line(tmp_path):
    import subprocess
    import sys

    (tmp_path / "a.jsonl").write_text('{"text": "x"}\n')
    curate = ["curate", str(tmp_path / "a.jsonl"), "-o", str(tmp_path / "o"), "--set", "extract.backend=x;y"]
    r = subprocess.run([sys.executable, "-m", "pretrain", *curate], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith("pretrain curate: error: extract.backend must be one of resiliparse")
    assert not (tmp_path / "o").exists()
