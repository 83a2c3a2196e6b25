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
