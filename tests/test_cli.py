"""The CLI: every subcommand has a --help that parses and teaches."""

import subprocess
import sys

import pytest

from pretrain import cli


def test_top_level_help_lists_commands():
    out = subprocess.run([sys.executable, "-m", "pretrain", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    assert "curate" in out.stdout or "COMMAND" in out.stdout


@pytest.mark.parametrize("name", list(cli.COMMANDS))
def test_each_command_help(name, capsys):
    parser = cli.build_parser()
    choices = parser._subparsers._group_actions[0].choices  # noqa: SLF001
    if name not in choices:
        pytest.skip(f"{name} not built yet")
    with pytest.raises(SystemExit) as e:
        parser.parse_args([name, "--help"])
    assert e.value.code == 0
    assert len(capsys.readouterr().out) > 80


def _run(*argv, **kw):
    return subprocess.run([sys.executable, "-m", "pretrain", *argv], capture_output=True, text=True, **kw)


def test_config_echo_is_the_overrides_and_reads_back():
    """The echo lists exactly the changed settings; applied as --set they rebuild the same config."""
    from pretrain import config
    from pretrain.curate.pipeline import CurateConfig

    sets = ["rules.profile=fineweb-2024", 'language.languages=["en","fr"]', "dedup.bands=20"]
    cfg = config.load(CurateConfig, None, sets)
    lines = config.echo(cfg, "OUT/config.toml").splitlines()
    assert lines[0].startswith("config: 3 setting(s) differ") and "OUT/config.toml" in lines[0]
    again = config.load(CurateConfig, None, [x.strip().replace(" = ", "=", 1) for x in lines[1:]])
    assert again == cfg
    assert config.echo(CurateConfig()).startswith("config: all defaults")
