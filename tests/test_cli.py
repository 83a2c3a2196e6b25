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
