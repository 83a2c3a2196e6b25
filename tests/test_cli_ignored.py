"""Options a command accepted and then dropped in silence (newcomer sweep, session 13): each is now
honoured or refused in one line that names it, before any work. In-process, no model; ~2 s."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pretrain.cli import main


def _one_line_naming(capsys, *words: str) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, err
    return err


def test_numerics_scale_without_values_is_refused_and_formats_pick_the_table(capsys):
    """`numerics --table --scale 8` printed the table: the loss scale applies to VALUES only."""
    for args in (["--table", "--scale", "8"], ["--accumulate", "1", "1e-4", "10", "--scale", "8"]):
        assert main(["numerics", *args]) == 2
        _one_line_naming(capsys, "--scale 8")
    assert main(["numerics", "0.1", "--formats", ","]) == 2  # printed nothing, exit 0
    _one_line_naming(capsys, "--formats ','")
    # --formats was ignored by the table: it now lists those formats only
    assert main(["numerics", "--table", "--formats", "e4m3,bf16", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["formats"]
    from pretrain.numerics import get_format

    names = [r["format"] for r in rows]
    assert sorted(names) == sorted([get_format("bf16").name, get_format("e4m3").name])
    assert rows[names.index(get_format("e4m3").name)]["max"] == 448  # the OCP FP8 spec's E4M3 max


@pytest.mark.parametrize("args, steps, vocab", [
    ([], 300, 2048),
    (["--short"], 30, 1024),
    (["--short", "--steps", "100"], 100, 1024),  # ran 30 steps: --short won over the value given
    (["--short", "--vocab-size", "4096"], 30, 4096),  # ran 1,024: min(value, 1024)
    (["--steps", "7", "--vocab-size", "300"], 7, 300),
])
def test_demo_short_sets_defaults_and_a_value_given_wins(tmp_path, monkeypatch, args, steps, vocab):
    import pretrain.demo

    seen = []
    monkeypatch.setattr(pretrain.demo, "run_demo", seen.append)
    assert main(["demo", "-o", str(tmp_path / "d"), *args]) == 0
    assert (seen[0].steps, seen[0].vocab) == (steps, vocab)


def test_export_max_shard_size_is_for_hf_only(tmp_path, capsys):
    """`export RUN -o m.safetensors --max-shard-size 1GB` wrote one file of any size, in silence."""
    out = tmp_path / "m.safetensors"
    assert main(["export", str(tmp_path / "run"), "-o", str(out), "--max-shard-size", "1GB"]) == 2
    _one_line_naming(capsys, "--max-shard-size", "--format hf")
    assert not out.exists()


def test_tokenize_work_dir_with_local_paths_is_refused(tmp_path, capsys):
    """--work-dir stages URL inputs and outputs; with local ones it was never used, nor said."""
    (tmp_path / "c.jsonl").write_text('{"text": "hello"}\n')
    from pretrain.tokens.tokenizer import train_tokenizer

    train_tokenizer(["hello world"] * 10, vocab_size=300).save(str(tmp_path / "tok.json"))
    assert main(["tokenize", str(tmp_path / "c.jsonl"), "--tokenizer", str(tmp_path / "tok.json"),
                 "-o", str(tmp_path / "tokens"), "--work-dir", str(tmp_path / "w")]) == 2
    _one_line_naming(capsys, "--work-dir", "local")
    assert not (tmp_path / "w").exists() and not (tmp_path / "tokens").exists()


@pytest.mark.parametrize("command", ["curate", "dedup"])
def test_an_address_without_the_ray_executor_is_refused(tmp_path, capsys, command):
    """`curate ... --address ray://head:10001` ran on local processes: the cluster was never asked."""
    (tmp_path / "c.jsonl").write_text('{"text": "hello"}\n')
    out = tmp_path / "out"
    assert main([command, str(tmp_path / "c.jsonl"), "-o", str(out), "--address", "ray://head:10001"]) == 2
    _one_line_naming(capsys, "--address ray://head:10001", "--executor ray")
    assert not out.exists()


def test_train_on_tokens_names_data_sources_when_data_path_is_given(tmp_path, capsys):
    """data.kind=tokens with data.path (kind=text's key) said "a mixture needs at least one source"."""
    recipe = Path(__file__).resolve().parents[1] / "recipes" / "tiny-cpu.toml"
    assert main(["train", str(recipe), "--quiet", "--set", "data.kind=tokens", "--set",
                 f"data.path={tmp_path / 'tokens'}", "--set", f"train.out={tmp_path / 'run'}"]) == 2
    _one_line_naming(capsys, "data.sources", f"data.path {tmp_path / 'tokens'}",
                     f"--set data.sources.web={tmp_path / 'tokens'}")


@pytest.mark.parametrize("key", ["sources", "eval_sources"])
def test_token_sources_beside_a_text_recipe_are_refused_not_dropped(tmp_path, capsys, key):
    """`--set data.sources.web=TOKENS` over tiny-cpu.toml (kind text, a data.path) without
    data.kind=tokens trained on the shipped text and ignored the tokens, exit 0 (session 14)."""
    recipe = Path(__file__).resolve().parents[1] / "recipes" / "tiny-cpu.toml"
    assert main(["train", str(recipe), "--quiet", "--set", f"data.{key}.web={tmp_path / 'tokens'}",
                 "--set", f"train.out={tmp_path / 'run'}", "--dry-run"]) == 2
    _one_line_naming(capsys, f"data.{key} (web)", "trains on data.path recipes/data/tinyshakespeare-200k.txt",
                     'set data.kind = "tokens"')


@pytest.mark.parametrize("args, named", [
    (["--tasks", "ppl:TEXT", "--shots", "5"], "--shots 5"),  # printed "shots 0", exit 0
    (["--tasks", "mem:TEXT", "--shots", "2"], "--shots 2"),
    (["--tasks", "copa.jsonl", "--ppl-tokens", "50"], "--ppl-tokens 50"),
    (["--tasks", "ppl:TEXT", "--limit", "3"], "--limit 3"),  # a ppl: text is scored whole
    (["--tasks", "ppl:TEXT", "--checkpoints", "ckpts"], "--checkpoints"),  # a Hugging Face folder's
])
def test_eval_options_no_task_reads_are_refused_before_the_model_loads(tmp_path, capsys, args, named):
    (tmp_path / "t.txt").write_text("some text to score")
    (tmp_path / "copa.jsonl").write_text(json.dumps({"query": "q", "choices": ["a", "b"], "gold": 0}) + "\n")
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text("{}")  # read only after the options are checked
    args = [a.replace("TEXT", str(tmp_path / "t.txt")).replace("copa.jsonl", str(tmp_path / "copa.jsonl"))
            for a in args]
    assert main(["eval", str(tmp_path / "hf"), *args, "--quiet", "-o", str(tmp_path / "e.json")]) == 2
    _one_line_naming(capsys, named)
    assert not (tmp_path / "e.json").exists()
