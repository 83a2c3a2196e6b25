"""Every example in README.md runs in a fresh clone, with no ../shared next to it (issue 18).

The clone is the repository's files (tracked, and new files git would add) copied to a folder with
nothing beside it. Each `pretrain ...` line of a bash block runs as written, in order, from the
clone's root (`pretrain` is `python -m pretrain` with the clone's sources); the python block runs
as a script; `make demo ...` lines are checked with `make -n` (the demo itself: test_demo.py); a
`pretrain` command quoted in the text with options runs too, unless it is a synopsis (CAPITALS,
[options], ...); one without options (`pretrain mix`) is a command's name.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
SYNOPSIS = re.compile(r"\b[A-Z][A-Z0-9_]+\b|\[|\.\.\.")  # RUN, HF_DIR, [options], ...


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, re.S)


def bash_lines(prefix: str) -> list[str]:
    lines = [re.sub(r"\s+#.*$", "", x).strip() for b in blocks("bash") for x in b.splitlines()]
    return [x for x in lines if x.startswith(prefix)]


def quoted_commands() -> list[str]:
    spans = re.findall(r"`(pretrain [^`]+)`", README)
    return [c for c in dict.fromkeys(spans)
            if " -" in c and not SYNOPSIS.search(c) and c not in bash_lines("pretrain")]


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    dst = tmp_path_factory.mktemp("fresh") / "pretrain"
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           cwd=ROOT, capture_output=True, check=False)
    if files.returncode != 0:
        pytest.skip("not a git checkout: cannot tell the repository's files")
    for rel in filter(None, files.stdout.decode().split("\0")):
        if (ROOT / rel).is_file():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dst / rel)
    assert not (dst.parent / "shared").exists()
    return dst


def _env(clone: Path) -> dict:
    return {**os.environ, "PYTHONPATH": str(clone / "src"), "COLUMNS": "120"}


def _pretrain(clone: Path, line: str) -> subprocess.CompletedProcess:
    argv = shlex.split(line)
    assert argv[0] == "pretrain"
    return subprocess.run([sys.executable, "-m", "pretrain", *argv[1:]], cwd=clone, env=_env(clone),
                          capture_output=True, text=True, timeout=600)


def test_the_readme_has_examples():
    assert len(bash_lines("pretrain")) >= 8 and blocks("python")
    run = bash_lines("pretrain") + quoted_commands()
    assert "pretrain numerics 0.1 1/3 1e-8 --formats bf16,fp16,e4m3" in run


@pytest.mark.slow
def test_every_readme_command_runs_in_a_fresh_clone(clone):
    for line in bash_lines("pretrain") + quoted_commands():
        out = _pretrain(clone, line)
        assert out.returncode == 0, f"{line}\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}"
    assert (clone / "out" / "report.html").stat().st_size > 50_000
    assert "ROMEO:" in _pretrain(clone, bash_lines("pretrain sample")[0]).stdout
    # run twice: the same command into the same output resumes (nothing redone, nothing changed)
    def outputs():  # wall_seconds and attempts count every attempt, a rerun's included (docs/curation.md)
        stats = json.loads((clone / "out/corpus/stats.json").read_text())
        return {k: v for k, v in stats.items() if k not in ("wall_seconds", "attempts")}, (
            clone / "out/tokens/web/manifest.json").read_bytes(), stats["attempts"]

    *before, attempts = outputs()
    for prefix in ("pretrain curate", "pretrain tokenize", "pretrain train"):
        out = _pretrain(clone, bash_lines(prefix)[0])
        assert out.returncode == 0, f"{prefix} rerun\n{out.stderr[-2000:]}"
    assert outputs() == (*before, attempts + 1)
    assert "nothing to do: the run is already at step 20" in out.stdout


def test_readme_python_example_runs_in_a_fresh_clone(clone):
    """Saved as a file and run, as a newcomer does (`python -c` would hide a missing __main__
    guard: spawned workers cannot re-import a -c script, but they do re-run a file)."""
    (clone / "readme_example.py").write_text("\n".join(blocks("python")))
    out = subprocess.run([sys.executable, "readme_example.py"], cwd=clone, env=_env(clone),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "'kept'" in out.stdout


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_demo_lines_run_the_demo_with_their_out_and_data(clone):
    """`make demo OUT=... DATA="a b"` runs `pretrain demo -o OUT --data a --data b` (dry run: -n;
    the venv's install step is taken as done with -o)."""
    venv = Path(sys.executable).parent.parent
    lines = [x for x in re.findall(r"`(make demo[^`]*)`", README) + bash_lines("make demo")]
    assert any("OUT=" in x and "DATA=" in x for x in lines)
    for line in dict.fromkeys(lines):
        args = shlex.split(line)[2:]
        # under `make test` (CI) the parent's MAKELEVEL/MAKEFLAGS would add "Entering directory" lines
        env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
        out = subprocess.run(["make", "-n", "--no-print-directory", "demo", f"VENV={venv}",
                              "-o", f"{venv}/.installed-core", *args],
                             cwd=clone, capture_output=True, text=True, timeout=60, check=True, env=env)
        cmd = shlex.split(out.stdout.strip().splitlines()[-1])
        assert cmd[:4] == [f"{venv}/bin/python", "-m", "pretrain", "demo"], out.stdout
        given = dict(a.split("=", 1) for a in args)
        want = (["-o", given["OUT"]] if "OUT" in given else []) + [
            x for d in given.get("DATA", "").split() for x in ("--data", d)]
        assert cmd[4:] == want


def doc_commands() -> list[tuple[str, str]]:
    """(page:line, command) of every `pretrain` line in a code block of docs/*.md that needs no
    input file: the planner (but --calibrate, which reads runs), numerics and `dedup --explain`."""
    found = []
    for page in sorted((ROOT / "docs").glob("*.md")):
        text = page.read_text()
        for block in re.finditer(r"```[a-z]*\n(.*?)```", text, re.S):
            first = text.count("\n", 0, block.start(1)) + 1
            lines, i = block.group(1).split("\n"), 0
            while i < len(lines):
                at, line = i, lines[i]
                while line.endswith("\\") and i + 1 < len(lines):  # a continued command
                    i += 1
                    line = line[:-1] + lines[i].strip()
                i += 1
                cmd = re.split(r"\s{2,}|\s#", line.strip())[0]
                selfcontained = re.match(r"pretrain (plan|numerics|dedup --explain)\b", cmd)
                if selfcontained and not re.search(r"\.\.\.|\[|--calibrate", cmd):
                    found.append((f"docs/{page.name}:{first + at}", cmd))
    return found


def test_the_docs_have_input_free_examples():
    pages = {where.split(":")[0] for where, _ in doc_commands()}
    assert {"docs/planner.md", "docs/numerics.md", "docs/dedup.md"} <= pages


@pytest.mark.slow
def test_every_input_free_docs_command_runs_in_a_fresh_clone(clone):
    """The docs' examples that need no data run as written (each ~1-3 s: the planner, numerics,
    the S-curve); the others use the user's own files and are covered by their modules' tests."""
    for where, line in doc_commands():
        out = _pretrain(clone, line)
        assert out.returncode == 0, f"{where}: {line}\n{out.stderr[-2000:]}"
        assert out.stdout.strip(), f"{where}: {line} printed nothing"
