"""Every example in README.md runs in a fresh clone, with no ../shared next to it (issue 18).

The clone is the repository's files (tracked, and new files git would add) copied to a folder with
nothing beside it. Each `pretrain ...` line of a bash block runs as written, in order, from the
clone's root (`pretrain` is `python -m pretrain` with the clone's sources); the python block runs
as a script; `make demo ...` lines are checked with `make -n` (the demo itself: test_demo.py); a
`pretrain` command quoted in the text with options runs too, unless it is a synopsis (CAPITALS,
[options], ...); one without options (`pretrain mix`) is a command's name.
"""

from __future__ import annotations

import difflib
import functools
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
    said = {}
    for line in bash_lines("pretrain") + quoted_commands():
        out = _pretrain(clone, line)
        assert out.returncode == 0, f"{line}\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}"
        said[line] = out.stdout
    assert (clone / "out" / "report.html").stat().st_size > 50_000
    assert "ROMEO:" in said[bash_lines("pretrain sample")[0]]
    # run twice: the same command into the same output resumes (nothing redone, nothing changed)
    def outputs():  # wall_seconds and attempts count every attempt, a rerun's included (docs/curation.md)
        stats = json.loads((clone / "out/corpus/stats.json").read_text())
        return {k: v for k, v in stats.items() if k not in ("wall_seconds", "attempts")}, (
            clone / "out/tokens/web/manifest.json").read_bytes(), stats["attempts"]

    *before, attempts = outputs()
    for prefix in ("pretrain curate", "pretrain tokenize", "pretrain train"):
        out = _pretrain(clone, bash_lines(prefix + " ")[0])  # "pretrain tokenize ", not "pretrain tokenizer"
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


# --- every command, option, config key, link and path the docs state exists (parsed, not run) ---

PAGES = [ROOT / "README.md"] + [p for p in sorted((ROOT / "docs").glob("*.md")) if p.name != "decisions.md"]
MESSAGE = re.compile(r"^pretrain [a-z-]+:")  # a quoted error or progress line, not a command


def _documented_lines(page: Path) -> list[tuple[str, str]]:
    """(page:line, text) of every `pretrain ...` (or `torchrun ... -m pretrain ...`) in a code block,
    continued lines joined and comments cut, and of every one quoted in the page's text."""
    text = page.read_text()
    found = [(f"{page.relative_to(ROOT)}:{text.count(chr(10), 0, block.start(1)) + 1 + at}", cmd)
             for block in re.finditer(r"```[a-z]*\n(.*?)```", text, re.S)
             for at, cmd in _command_lines(block.group(1))]
    for span in re.finditer(r"`(pretrain [^`]+)`", text):
        found.append((f"{page.relative_to(ROOT)}:{text.count(chr(10), 0, span.start()) + 1}",
                      " ".join(span.group(1).split())))
    return [(w, c) for w, c in found if not MESSAGE.match(c)]


def _command_lines(text: str) -> list[tuple[int, str]]:
    """(line index, command) of each line that starts a `pretrain` command, continuations joined."""
    lines, i, out = text.split("\n"), 0, []
    while i < len(lines):
        at, line = i, lines[i]
        while line.rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            line = line.rstrip()[:-1].rstrip() + " " + lines[i].strip()
        i += 1
        cmd = re.split(r"\s{2,}|\s#", line.strip())[0]
        cmd = re.sub(r"^torchrun .*?-m (pretrain )", r"\1", cmd)
        if cmd.startswith("pretrain "):
            out.append((at, cmd))
    return out


def _help_examples() -> list[tuple[str, str]]:
    """The examples each command's --help gives (its description and epilog), as (where, command)."""
    import argparse

    found, todo = [], [("pretrain", _parser())]
    while todo:
        name, parser = todo.pop()
        for text in (parser.description or "", parser.epilog or ""):
            found += [(f"`{name} --help`", cmd) for _, cmd in _command_lines(text)]
        for action in parser._actions:  # noqa: SLF001
            if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
                todo += [(f"{name} {sub}", p) for sub, p in action.choices.items()]
    # a wrapped line of prose may start with the word pretrain (`--activations pretrain`)
    return [(w, c) for w, c in found if not MESSAGE.match(c) and c.split()[1] in _command_names()]


def _command_names() -> list[str]:
    import argparse

    return [n for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)  # noqa: SLF001
            for n in a.choices]


def _argv(cmd: str) -> list[str]:
    """A synopsis as words: `[--min-count 2]` -> `--min-count 2`, `RUN\\|HF_DIR` and `...` dropped."""
    cmd = cmd.replace("\\|", "|").replace("...", " ").split(" | ")[0]
    cmd = re.sub(r"\](?=\s|$)", " ", re.sub(r"(^|\s)\[(?=[-\w])", r"\1", cmd))  # not a TOML list
    try:
        return shlex.split(cmd)[1:]
    except ValueError:  # a quote the prose leaves open
        return cmd.split()[1:]


def _placeholder(value: str) -> bool:
    """`N`, `HF_DIR`, `<path>`, `{a,b}`, `a|b`: a synopsis' stand-in, not a value to check."""
    return bool(re.fullmatch(r"[A-Z][A-Z0-9_]*", value) or re.search(r"[<>{}|]", value))


@functools.cache
def _parser():
    from pretrain import cli

    return cli.build_parser()


def _subcommand(argv: list[str]):
    import argparse

    parser, names = _parser(), []
    while argv and not argv[0].startswith("-"):
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]  # noqa: SLF001
        if not subs or argv[0] not in subs[0].choices:
            break
        parser = subs[0].choices[argv[0]]
        names.append(argv.pop(0))
    return parser, names


def documented_commands() -> list[tuple[str, str]]:
    return [x for page in PAGES for x in _documented_lines(page)] + _help_examples()


def test_every_documented_option_and_set_key_exists_with_a_valid_value():
    """Each documented command (in the docs and in each command's --help) names a real subcommand;
    its options are the parser's (a choice's value among its choices, a `--tasks` name among eval's);
    each `--set key=value` loads into the command's config (key known, value of the right type and in
    bounds) with the recipe the command names, and a training recipe passes the checks the trainer
    makes before it builds."""
    from pretrain import cli
    from pretrain.config import load
    from pretrain.errors import UserError

    commands = documented_commands()
    assert len(commands) > 100
    for where, cmd in commands:
        argv = _argv(cmd)
        parser, names = _subcommand(argv)
        if not names:
            assert not argv or argv[0] == "|", f"{where}: `{cmd}`: no such command"
            continue
        options = parser._option_string_actions  # noqa: SLF001
        sets = []
        for i, word in enumerate(argv):
            flag = word.split("=", 1)[0]
            if not flag.startswith("-") or re.fullmatch(r"-[\d.]+(e-?\d+)?", flag):
                continue  # a value or a negative number
            assert flag in set(options), f"{where}: `{cmd}`: {' '.join(names)} has no option {flag}"
            action, value = options[flag], argv[i + 1] if i + 1 < len(argv) else None
            if action.choices and value is not None and not _placeholder(value):
                assert value in action.choices, f"{where}: `{cmd}`: {flag} {value} not in {action.choices}"
            if flag == "--set" and value and not any(map(_placeholder, value.split("=", 1))):
                sets.append(value)
            if flag == "--tasks" and value and not _placeholder(value):
                _check_task_names(where, cmd, value)
        if sets and names[0] in cli.CONFIGS:
            mod, _, cls = cli.CONFIGS[names[0]].partition(":")
            recipe = next((a for a in argv if a.endswith(".toml") and (ROOT / a).is_file()), None)
            if names[0] != "train":
                recipe = None  # a curate --config example names the user's own file
            config = getattr(__import__(mod, fromlist=[cls]), cls)
            try:
                cfg = load(config, ROOT / recipe if recipe else None, sets)
                if names[0] == "train" and recipe:
                    _trainer_checks(cfg)
            except UserError as e:
                pytest.fail(f"{where}: `{cmd}`: {e}")


def _check_task_names(where: str, cmd: str, value: str) -> None:
    """A documented task is one `pretrain eval` knows by name (`--tasks hellaswag` would be refused:
    the shipped file is hellaswag_small), or a file: ppl:/mem: or a .jsonl path."""
    from pretrain.eval.tasks import KNOWN

    for spec in filter(None, value.split(",")):
        if spec.startswith(("ppl:", "mem:")) or spec.endswith((".jsonl", ".jsonl.gz")):
            continue
        assert spec in KNOWN, f"{where}: `{cmd}`: no task {spec!r} (known: {', '.join(sorted(KNOWN))})"


def _trainer_checks(cfg) -> None:
    """What `pretrain train` refuses before it starts a process group or builds the model, given
    the processes the layout asks for: numbers, the shape's split, in-loop evaluation, the pipeline."""
    from pretrain.eval.callback import check_layout
    from pretrain.train.config import validate
    from pretrain.train.model import resolve_shape
    from pretrain.train.parallel import dims_from_config
    from pretrain.train.trainer import Trainer

    validate(cfg)
    dims = dims_from_config(cfg.parallel)
    dims.check_shape(resolve_shape(cfg.model), cfg.parallel)
    check_layout(cfg, dims)
    Trainer._check_pp(cfg, dims, None)  # noqa: SLF001


def _toml_blocks() -> list[tuple[str, str]]:
    out = []
    for page in PAGES:
        text = page.read_text()
        for block in re.finditer(r"```toml\n(.*?)```", text, re.S):
            out.append((f"{page.relative_to(ROOT)}:{text.count(chr(10), 0, block.start(1)) + 1}",
                        block.group(1)))
    return out


def test_every_documented_toml_block_loads(tmp_path):
    """A documented config section loads into the belt's or the trainer's config (unknown keys and
    bad values refused, as for the user); the hardware table and the mixture file load with the
    planner's and the mixture's own readers."""
    import tomllib

    from pretrain.config import from_dict
    from pretrain.errors import UserError
    from pretrain.plan.hardware import load_table
    from pretrain.tokens.mixture import load_mixture

    blocks_ = _toml_blocks()
    assert len(blocks_) >= 8
    for where, body in blocks_:
        data, path = tomllib.loads(body), tmp_path / "block.toml"
        path.write_text(body)
        try:
            _load_block(data, path, where, from_dict, load_mixture, load_table)
        except UserError as e:
            pytest.fail(f"{where}: {e}")


def _load_block(data: dict, path: Path, where: str, from_dict, load_mixture, load_table) -> None:
    from dataclasses import fields

    from pretrain.curate.pipeline import CurateConfig
    from pretrain.train.config import RunConfig

    known = []
    for config in (CurateConfig, RunConfig):
        known += [f.name for f in fields(config)]
        if set(data) <= {f.name for f in fields(config)}:
            from_dict(config, data)
            return
    if "sources" in data:
        load_mixture(path)
    elif where.startswith("docs/planner.md"):
        load_table(path)
    else:  # another tool's file (pyproject, ...) passes; a misspelt config section does not
        close = {k: difflib.get_close_matches(k, known, n=1, cutoff=0.75) for k in data if k not in known}
        assert not any(close.values()), f"{where}: unknown config sections {close}"


def test_the_parallel_defaults_table_is_the_configs():
    """docs/parallelism.md's table of `[parallel]` keys and defaults against ParallelConfig."""
    from dataclasses import fields

    from pretrain.train.config import ParallelConfig

    text = (ROOT / "docs" / "parallelism.md").read_text()
    rows = dict(re.findall(r"^\| `(\w+)` \| `?([^|`]+?)`? \|", text, re.M))
    defaults = {f.name: f.default for f in fields(ParallelConfig)}
    assert set(rows) == set(defaults), set(rows) ^ set(defaults)
    for key, shown in rows.items():
        value = shown.split(" ")[0]
        code = str(defaults[key]).lower()
        assert code in (value, value + ".0"), f"{key}: docs {shown}, code {code}"


def test_every_docs_link_and_named_repository_file_exists():
    """Relative links resolve (to a heading when they name one); a path under src/, tests/, bench/,
    recipes/ or docs/, or a module path (`curate/x.py`), names a file of this checkout, except in a
    section about code that was tried and not shipped (that code is not in the repository)."""
    def slug(heading: str) -> str:
        return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")

    package = "|".join(p.name for p in (ROOT / "src/pretrain").iterdir() if p.is_dir())
    for page in PAGES:
        text = page.read_text()
        for link in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", link):
                continue
            file, _, anchor = link.partition("#")
            target = (page.parent / file) if file else page
            assert target.exists(), f"{page.name}: link {link}"
            if anchor:
                assert anchor in map(slug, re.findall(r"^#+ (.*)$", target.read_text(), re.M)), link
        for section in re.split(r"^#+ ", text, flags=re.M):
            if "not shipped" in section.split("\n", 1)[0]:
                continue
            named = rf"`((?:src|tests|bench|recipes|docs)/[\w/.-]+|(?:{package})/\w+\.py)`"
            for rel in re.findall(named, section):
                assert (ROOT / rel).exists() or (ROOT / "src/pretrain" / rel).exists(), f"{page.name}: {rel}"


def test_the_readme_says_where_make_puts_the_pretrain_command():
    """Newcomer sweep (session 13): after `make install`, `pretrain curate ...` said "command not
    found": the command is in the Makefile's venv (VENV), as pyproject's [project.scripts] names
    it, and the README said neither to activate it nor where it is."""
    import tomllib

    venv = re.search(r"^VENV\s*\?=\s*(\S+)", (ROOT / "Makefile").read_text(), re.M).group(1)
    script = next(iter(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]))
    assert script == "pretrain"
    said = " ".join(README.split())
    assert f"source {venv}/bin/activate" in said and f"{venv}/bin/{script}" in said
    assert "make install" in said
    make_help = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True).stdout
    assert f"{venv}/bin/activate" in make_help
