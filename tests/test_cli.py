"""The CLI: every subcommand has a --help that parses and teaches."""

import argparse
import json
import re
import shlex
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
    assert lines[0].startswith("config: 3 settings differ") and "OUT/config.toml" in lines[0]
    again = config.load(CurateConfig, None, [x.strip().replace(" = ", "=", 1) for x in lines[1:]])
    assert again == cfg
    assert config.echo(CurateConfig()).startswith("config: all defaults")


@pytest.mark.parametrize("sets", [["model.vocab_size=1024", "model.seq_len=128", "train.steps=7"],
                                  ["model.preset=gpt2-124m", "model.n_layers=2"]])
def test_a_run_directorys_config_echoes_what_its_recipe_echoed(sets, tmp_path):
    """RUN/config.toml spells the preset's shape out: `train RUN/config.toml` echoed every shape
    field as changed (25 settings for a recipe's 12, session 10's end-to-end walk)."""
    from pretrain import config
    from pretrain.commands.train import _spelled_out, echo_base
    from pretrain.train.config import RunConfig

    recipe = config.load(RunConfig, None, sets)
    (tmp_path / "config.toml").write_text(config.dumps(_spelled_out(recipe)))
    saved = config.load(RunConfig, tmp_path / "config.toml")  # as a resume reads it back
    assert saved != recipe and echo_base(recipe) is None
    assert config.echo(saved, base=echo_base(saved)) == config.echo(recipe)



def test_a_continued_runs_config_echoes_what_its_recipe_echoed(tmp_path):
    """The same for model.init_from: the shape spelled out is the folder's config.json's (written
    here by transformers itself)."""
    transformers = pytest.importorskip("transformers")
    from pretrain import config
    from pretrain.commands.train import _spelled_out, echo_base
    from pretrain.train.config import RunConfig
    from pretrain.train.hf import apply_init_from

    transformers.LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2,
                             max_position_embeddings=256).save_pretrained(tmp_path / "hf")
    recipe = config.load(RunConfig, None, [f'model.init_from="{tmp_path / "hf"}"', "train.steps=3"])
    (tmp_path / "config.toml").write_text(config.dumps(_spelled_out(apply_init_from(recipe))))
    saved = config.load(RunConfig, tmp_path / "config.toml")
    assert saved.model.n_layers == 2 and echo_base(recipe) is None
    assert config.echo(saved, base=echo_base(saved)) == config.echo(recipe)


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        (["train", "x.toml", "--steps", "10"], "did you mean --set train.steps=10?"),
        (["train", "x.toml", "--steps=10"], "did you mean --set train.steps=10?"),
        (["curate", "in", "-o", "out", "--bands", "9"], "did you mean --set dedup.bands=9?"),
        (["train", "x.toml", "--quite"], "did you mean --quiet?"),
    ],
)
def test_unknown_option_is_reported_by_the_subcommand_with_a_hint(argv, hint):
    out = _run(*argv)
    assert out.returncode == 2
    usage, error = out.stderr.strip().splitlines()[0], out.stderr.strip().splitlines()[-1]
    assert usage.startswith(f"usage: pretrain {argv[0]} ")  # the subcommand's usage, not the top level's
    assert error.startswith(f"pretrain {argv[0]}: error: unrecognized arguments") and error.endswith(hint)


def test_the_set_hint_names_a_real_key():
    """The suggested key is one the config accepts: applying it changes exactly that setting."""
    from pretrain import config
    from pretrain.train.config import RunConfig

    cfg = config.load(RunConfig, None, ["train.steps=10"])
    assert config.changed(cfg) == {"train.steps": 10}


def test_mistyped_command_gets_a_did_you_mean():
    out = _run("curat", "x")
    assert out.returncode == 2 and out.stderr.strip().endswith("did you mean 'curate'?")


def test_a_command_group_without_its_action_names_the_actions():
    """`pretrain tokenizer` alone said "required: ACTION" and not that the action is `train`; the
    actions named are those the parser has (each one's --help runs)."""
    for group in ("tokenizer", "tokens", "classifier"):
        out = _run(group)
        said = out.stderr.strip().splitlines()[-1]
        m = re.search(r"required: ACTION \(one of: (.*); e\.g\. `pretrain (\S+) (\S+) --help`\)$", said)
        assert out.returncode == 2 and m and m.group(2) == group, said
        for action in m.group(1).split(", "):
            assert _run(group, action, "--help").returncode == 0, (group, action)


def _pipe_to_head(argv: list[str], lines: int) -> tuple[int, str]:
    """`pretrain ARGV | head -LINES` with a real pipe: read LINES lines, close, return (status, stderr).

    The pipe holds one page (F_SETPIPE_SZ) and lines are read a byte at a time, so a command that
    prints more than a page is still writing when the reader leaves: the close is never too late."""
    import fcntl

    proc = subprocess.Popen([sys.executable, "-m", "pretrain", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, bufsize=0)
    fcntl.fcntl(proc.stdout.fileno(), fcntl.F_SETPIPE_SZ, 4096)
    for _ in range(lines):
        assert proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    return proc.wait(timeout=120), err


@pytest.mark.parametrize(
    "argv",
    [["tour"],  # rich tables, ~15 kB (rich's own handler would exit 1); then plain print(), ~11 kB
     ["plan", "--model", "llama-3-8b", "--gpus", "64", "--gpu", "h100", "--tokens", "1T", "--json"]],
)
def test_closed_pipe_ends_like_a_unix_tool(argv):
    """`pretrain ... | head -1`: status 141 (128 + SIGPIPE, what `yes | head -1` gives), nothing on stderr."""
    status, err = _pipe_to_head(argv, 1)
    assert (status, err) == (141, "")


def test_curate_whose_reader_left_still_finishes_its_corpus(tmp_path):
    """`pretrain curate ... | head -0`: the funnel on stdout comes after the outputs are committed, so
    the run ends with 141 and a corpus identical to one whose stdout stayed open."""
    from test_pipeline import _prose

    corpus = tmp_path / "in.jsonl"
    corpus.write_text("".join(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in enumerate(_prose(6))))
    args = ["curate", str(corpus), "--workers", "1", "--quiet", "--set", 'steps=["rules"]']
    proc = subprocess.Popen([sys.executable, "-m", "pretrain", *args, "-o", str(tmp_path / "piped")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert (proc.wait(timeout=120), err) == (141, "")
    assert cli.main([*args, "-o", str(tmp_path / "open")]) == 0
    for name in ("data", "rejects"):
        piped = sorted((tmp_path / "piped" / name).rglob("*"))
        assert piped and [p.read_bytes() for p in piped if p.is_file()] == [
            p.read_bytes() for p in sorted((tmp_path / "open" / name).rglob("*")) if p.is_file()]


def test_train_whose_reader_left_still_trains(tmp_path):
    """`pretrain train ... | head -3`: the echo and summary are logs (stderr), so a reader that leaves
    at once does not stop the run: every step is in metrics.jsonl; only the final 'done' line, the
    result, meets the closed pipe (exit 141). Before, the echo on stdout met it and nothing trained."""
    from pathlib import Path

    recipe = Path(__file__).resolve().parents[1] / "recipes" / "tiny-cpu.toml"
    run = tmp_path / "run"
    argv = ["train", str(recipe), "--set", "train.steps=3", "--set", f"train.out={run}",
            "--set", "checkpoint.every=0", "--set", "log.eval_every=0"]
    proc = subprocess.Popen([sys.executable, "-m", "pretrain", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=recipe.parents[1])
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err[-2000:]
    steps = [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()
             if "event" not in json.loads(x)]
    assert steps == [1, 2, 3]
    assert "tokens/step" in err and "train.steps = 3" in err  # the summary and echo, on stderr


def test_mix_refuses_sources_of_different_tokenizers_as_train_does(tmp_path, capsys):
    from test_tokens_mixture import make_token_dir

    from pretrain.errors import UserError
    from pretrain.tokens.mixture import MixtureSampler

    a = make_token_dir(tmp_path / "web", 50, 0, sha="a" * 64)
    b = make_token_dir(tmp_path / "code", 50, 1, sha="b" * 64)
    (tmp_path / "mixture.toml").write_text(
        f'budget = 1e4\n[sources.web]\npath = "{a}"\nweight = 0.5\n'
        f'[sources.code]\npath = "{b}"\nweight = 0.5\n')
    assert cli.main(["mix", str(tmp_path / "mixture.toml")]) == 2
    err = capsys.readouterr().err.strip()
    with pytest.raises(UserError) as train_says:  # what the trainer's sampler says about the same sources
        MixtureSampler({"web": a, "code": b}, {"web": 0.5, "code": 0.5}, 8)
    assert err == f"pretrain mix: error: {train_says.value}"


@pytest.mark.parametrize(
    ("sets", "warned"),
    [([], False), (['language.languages=["en","ja"]'], True), (["language.languages=[]"], True),
     (['language.languages=["en","ja"]', "rules.gopher_quality=false", "rules.gopher_repetition=false",
       "rules.c4_quality=false", "rules.fineweb_quality=false"], False)],
)
def test_english_only_rules_warn_when_other_languages_get_through(tmp_path, sets, warned):
    # said once the job has OUT (a refusal before that is the only line): a one-document input
    (tmp_path / "in.jsonl").write_text(json.dumps({"id": "a", "text": "A short line of text."}) + "\n")
    argv = ["curate", str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "out"), "--workers", "1"]
    out = _run(*argv, *[x for s in sets for x in ("--set", s)])
    assert out.returncode in (0, 1), out.stderr
    assert ("are English rules" in out.stderr) == warned, out.stderr
    missing = _run("curate", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "out2"),
                   *[x for s in sets for x in ("--set", s)])
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1, missing.stderr


@pytest.mark.parametrize(("flags", "echo", "bar"),
                         [([], True, False), (["--quiet", "--progress"], False, True)])
def test_quiet_drops_the_echo_and_progress_the_bar_independently(tmp_path, flags, echo, bar):
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"id": str(i), "text": f"document {i}"}) + "\n" for i in range(3)))
    out = _run("curate", str(docs), "-o", str(tmp_path / "out"), "--set", "language.enabled=false", *flags)
    assert out.returncode == 0, out.stderr
    assert out.stderr.startswith("config: 1 setting differs from the defaults") == echo
    assert ("language.enabled = false" in out.stderr) == echo
    assert ("0/1 file" in out.stderr or "1/1 file" in out.stderr) == bar  # the bar's file counter


def test_dry_run_prints_the_config_before_anything_can_fail():
    """gpt2-124m names no token shards: the run cannot be built, yet the whole config comes first."""
    import tomllib
    from pathlib import Path

    recipe = Path(__file__).resolve().parents[1] / "recipes" / "gpt2-124m.toml"
    out = _run("train", str(recipe), "--dry-run")
    assert out.returncode == 2 and out.stderr.strip().startswith("pretrain train: error:")
    cfg = tomllib.loads(out.stdout)
    m = cfg["model"]
    assert (m["n_layers"], m["d_model"], m["n_heads"]) == (12, 768, 12)  # GPT-2 small (Radford et al. 2019)
    assert cfg["train"]["steps"] == 19073


def _leaves(parser, path=()):
    """Every command's parser, nested actions (`tokens inspect`) included, with its words."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]  # noqa: SLF001
    if not subs:
        yield path, parser
    for sub in subs:
        for name, child in sub.choices.items():
            yield from _leaves(child, (*path, name))


def test_every_command_help_teaches_an_example_and_each_option():
    """A newcomer's `pretrain X --help`: what it does, a runnable example line, a word on every
    option and argument (what it is, its default), not just its name."""
    gaps = []
    for path, p in _leaves(cli.build_parser()):
        if not path:
            continue
        if f"pretrain {' '.join(path)} " not in (p.description or "") + (p.epilog or ""):
            gaps.append(f"{' '.join(path)}: no example")
        gaps += [f"{' '.join(path)}: {a.dest} has no help" for a in p._actions  # noqa: SLF001
                 if a.help is None and not isinstance(a, argparse._HelpAction)]  # noqa: SLF001
        # a paragraph broken mid-sentence (the text is printed as written): `mix --help` read
        # "refuses it. Sources tokenized" on a short line of its own
        lines = ((p.description or "") + "\n" + (p.epilog or "")).splitlines()
        gaps += [f"{' '.join(path)}: a line broken mid-sentence: {a!r}" for a, b in zip(lines, lines[1:])
                 if 0 < len(a) < 60 and not a.startswith(" ") and not a.rstrip().endswith((".", ":", ")"))
                 and b[:1].islower()]
    assert not gaps, "\n".join(gaps)


def test_every_help_example_parses():
    """The example lines of every --help use options the parser knows (a renamed option would
    otherwise leave a newcomer's first copy-paste failing)."""
    parser, names = cli.build_parser(), set(cli.COMMANDS)
    examples = []
    for path, p in _leaves(parser):
        text = ((p.description or "") + "\n" + (p.epilog or "")).replace("\\\n", " ")
        for m in re.finditer(r"^ {2,}(pretrain (\S+).*)$", text, re.M):
            if m.group(2) in names:  # not prose that starts with the word
                examples.append((path, re.split(r"\s{2,}|\s#", m.group(1))[0]))
    assert len(examples) >= 30
    for path, line in examples:
        try:
            parser.parse_args(shlex.split(line)[1:])
        except SystemExit:
            pytest.fail(f"{' '.join(path)} --help: {line}")


def test_tokenize_whose_reader_left_still_writes_its_manifest(tmp_path):
    """`pretrain tokenize MANY_FILES | head -1`: one line per finished file is a log (stderr), so
    the pipe's buffer never fills with them and the job ends with its manifest; before, ~80 files of
    such lines on stdout met the closed pipe and the job stopped before writing manifest.json."""
    from pretrain.curate.io import write_jsonl_zst
    from pretrain.tokens.tokenizer import train_tokenizer

    texts = [f"document {i} about rivers and deltas, line {i}" for i in range(120)]
    train_tokenizer(texts, vocab_size=300).save(str(tmp_path / "tok.json"))
    corpus = tmp_path / "corpus-with-a-long-folder-name-so-each-line-is-long"
    for i in range(120):
        write_jsonl_zst(corpus / f"part_{i:05d}.jsonl.zst", [{"text": texts[i]}])
    out = tmp_path / "tokens"
    proc = subprocess.Popen([sys.executable, "-m", "pretrain", "tokenize", str(corpus), "--tokenizer",
                             str(tmp_path / "tok.json"), "-o", str(out), "--workers", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err[-2000:]
    assert json.loads((out / "manifest.json").read_text())["documents"] == 120
    assert err.count("tokens, 1 document <- ") == 120  # the per-file lines, on stderr
