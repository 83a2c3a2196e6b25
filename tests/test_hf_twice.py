"""Run it twice, Hugging Face side: `pretrain eval` of a folder that was exported again, and an
export interrupted while it replaces an earlier one.

The folders are written by transformers' own `save_pretrained`; the numbers compared are computed
by `pretrain eval` on each model alone, in a file of its own.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.usefixtures("restore_torch_threads")

SHAPE = dict(vocab_size=257, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)


def _save(folder: Path, seed: int) -> Path:
    from pretrain.tokens.hf_tokenizer import byte_tokenizer

    torch.manual_seed(seed)
    transformers.LlamaForCausalLM(transformers.LlamaConfig(**SHAPE)).save_pretrained(folder)
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=byte_tokenizer(), eos_token="<|endoftext|>")
    tok.save_pretrained(folder)
    return folder


def _eval(model: Path, task: Path, out: Path, *extra: str) -> dict:
    from pretrain.cli import main

    assert main(["eval", str(model), "--tasks", f"ppl:{task}", "--quiet", "--threads", "1",
                 "-o", str(out), *extra]) == 0
    return json.loads(out.read_text())


def test_eval_after_a_new_export_into_the_same_folder_keeps_no_result_of_the_old_model(tmp_path, capsys):
    """eval FOLDER --tasks a; export another model into FOLDER; eval FOLDER --tasks b: the file
    (and the table) must not show task a's score of the first model beside task b's of the second."""
    (tmp_path / "a.txt").write_text("To be, or not to be, that is the question. " * 4)
    (tmp_path / "b.txt").write_text("Whether 'tis nobler in the mind to suffer the slings. " * 4)
    first, second = _save(tmp_path / "first", 1), _save(tmp_path / "second", 2)
    truth_a = _eval(second, tmp_path / "a.txt", tmp_path / "alone.json")["results"]["ppl:a.txt"]

    folder, out = tmp_path / "hf", tmp_path / "eval.json"
    shutil.copytree(first, folder)
    old_a = _eval(folder, tmp_path / "a.txt", out)["results"]["ppl:a.txt"]
    assert old_a != truth_a  # two different models
    shutil.rmtree(folder)
    shutil.copytree(second, folder)  # the folder now holds another model (a re-export)
    capsys.readouterr()
    doc = _eval(folder, tmp_path / "b.txt", out)
    assert set(doc["results"]) == {"ppl:b.txt"}, "a result of the earlier model was kept"
    shown = capsys.readouterr()
    assert "ppl:a.txt" not in shown.out
    assert "replaced" in shown.err and "ppl:a.txt" in shown.err  # said, not silent
    # the same model again: its tasks do add up in one file, as documented
    doc = _eval(folder, tmp_path / "a.txt", out)
    assert set(doc["results"]) == {"ppl:a.txt", "ppl:b.txt"}
    assert doc["results"]["ppl:a.txt"] == truth_a
    assert "replaced" not in capsys.readouterr().err
    # another setting that a.txt reads: a.txt scored again, said; b.txt keeps its own (session 14: the
    # settings are per task; --limit with only ppl: tasks, which read their text whole, is refused)
    doc = _eval(folder, tmp_path / "a.txt", out, "--ppl-tokens", "1000")
    assert set(doc["results"]) == {"ppl:a.txt", "ppl:b.txt"}
    assert doc["tasks"]["ppl:b.txt"]["settings"] == {"ppl_tokens": 200_000}
    assert doc["tasks"]["ppl:a.txt"]["settings"] == {"ppl_tokens": 1000}
    assert "ppl:a.txt: in" in capsys.readouterr().err


def test_eval_of_a_folder_writes_beside_it_from_any_directory(tmp_path, capsys, monkeypatch):
    """`pretrain eval FOLDER` without -o wrote ./eval/NAME.json: two exports named `hf` replaced each
    other's results, and the file followed the working directory. Now FOLDER/eval/results.json, said
    on stderr; a folder one cannot write to is refused before the model loads, naming -o; the file at
    the place of before is named when it holds this folder's results."""
    from pretrain.cli import main

    (tmp_path / "a.txt").write_text("To be, or not to be, that is the question. " * 4)
    first, second = _save(tmp_path / "one" / "hf", 1), _save(tmp_path / "two" / "hf", 2)
    monkeypatch.chdir(tmp_path)
    scores = []
    for folder in (first, second):
        capsys.readouterr()
        assert main(["eval", str(folder), "--tasks", "ppl:a.txt", "--quiet", "--threads", "1"]) == 0
        out = folder / "eval" / "results.json"
        assert f"results go to {out}" in capsys.readouterr().err
        doc = json.loads(out.read_text())
        assert doc["model"]["path"] == str(folder.resolve())
        scores.append(doc["results"]["ppl:a.txt"])
    assert scores[0] != scores[1] and not (tmp_path / "eval").exists()  # each its own, none in the cwd
    # the place of before (./eval/hf.json) holding the first folder's results: named, not read
    (tmp_path / "eval").mkdir()
    shutil.move(first / "eval" / "results.json", tmp_path / "eval" / "hf.json")
    assert main(["eval", str(first), "--tasks", "ppl:a.txt", "--quiet", "--threads", "1"]) == 0
    assert f"eval/hf.json holds earlier results of {first}" in capsys.readouterr().err
    shutil.rmtree(second / "eval")
    (second / "eval").write_text("")  # no folder can be made there (as root too, unlike a chmod)
    assert main(["eval", str(second), "--tasks", "ppl:a.txt", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "cannot write the results into" in err and "-o PATH writes them elsewhere" in err, err
    assert "results go to" not in err  # refused before the model loads
    cached = shutil.copytree(second, tmp_path / "models--a--b" / "snapshots" / "0123abc")
    assert main(["eval", str(cached), "--tasks", "ppl:a.txt", "--quiet"]) == 2  # a download stays as it came
    assert "in the Hugging Face cache" in capsys.readouterr().err and not (cached / "eval").is_dir()


def test_a_llama31_folder_is_scored_by_our_model_with_its_cache(tmp_path):
    """`pretrain eval HF_DIR` on a Llama 3.1 folder (rotary scaling "llama3") goes through our import,
    as `model.init_from` does, so greedy generation runs on the KV cache; before, such folders fell
    back to transformers without one. Logits and greedy tokens equal transformers' on the folder."""
    from pretrain.eval.lm import from_hf_dir, from_transformers
    from pretrain.eval.scoring import greedy_generate
    from pretrain.tokens.hf_tokenizer import byte_tokenizer

    rope = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 16}
    torch.manual_seed(3)
    hf = transformers.LlamaForCausalLM(transformers.LlamaConfig(**SHAPE, rope_parameters=rope,
                                                                initializer_range=0.2)).eval()
    folder = tmp_path / "llama31"
    hf.save_pretrained(folder)
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=byte_tokenizer(), eos_token="<|endoftext|>")
    tok.save_pretrained(folder)
    ours = from_hf_dir(folder)
    assert ours.start_decoding is not None  # our Transformer, not the transformers fallback
    theirs = from_transformers(hf, tok)
    ids = torch.randint(0, 257, (2, 32), generator=torch.Generator().manual_seed(0))
    assert (ours.logits(ids) - theirs.logits(ids)).abs().max().item() < 1e-5
    prompts = [[72, 101, 108], list(range(40, 60))]
    assert greedy_generate(ours, prompts, 10) == greedy_generate(theirs, prompts, 10)


def test_a_folder_only_transformers_computes_decodes_with_its_cache(tmp_path):
    """A Llama folder with "linear" rotary scaling (refused by our import: scored by transformers)
    decodes one token per
    step against transformers' own cache (was: every row's whole window again, 10x slower in
    bench/bench_generate_hf.py). Greedy tokens equal transformers' `generate` run on each prompt
    alone (no padding), and the full-forward path, also with rows stopping at different steps."""
    import dataclasses

    from pretrain.eval.lm import from_hf_dir
    from pretrain.eval.scoring import greedy_generate
    from pretrain.tokens.hf_tokenizer import byte_tokenizer

    torch.manual_seed(4)
    rope = {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}
    cfg = transformers.LlamaConfig(**SHAPE, rope_parameters=rope, initializer_range=0.2)
    hf = transformers.LlamaForCausalLM(cfg).eval()
    folder = tmp_path / "llama-linear"
    hf.save_pretrained(folder)
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=byte_tokenizer(), eos_token="<|endoftext|>")
    tok.save_pretrained(folder)
    ours = from_hf_dir(folder)
    assert ours.start_decoding is not None
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(0, 256, (n,), generator=g).tolist() for n in (3, 20, 9, 1, 14)]
    with torch.no_grad():
        truth = [hf.generate(torch.tensor([p]), attention_mask=torch.ones(1, len(p), dtype=torch.long),
                             max_new_tokens=10, min_new_tokens=10, do_sample=False,
                             pad_token_id=0)[0, len(p):].tolist() for p in prompts]
    assert greedy_generate(ours, prompts, 10) == truth
    plain = dataclasses.replace(ours, start_decoding=None)
    stop = lambda out: len(out) >= 2 and out[-1] % 3 == 0  # noqa: E731 - rows end at different steps
    assert greedy_generate(ours, prompts, 10, stop=stop) == greedy_generate(plain, prompts, 10, stop=stop)


KILL_AFTER_FIRST_WEIGHTS = """
import os, signal, sys
real = os.replace
def replace(src, dst, *a, **k):
    real(src, dst, *a, **k)
    if str(dst).endswith(".safetensors"):  # the first new weight file is in place: die here
        os.kill(os.getpid(), signal.SIGKILL)
os.replace = replace
from pretrain.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_export_killed_while_replacing_an_earlier_one_leaves_no_mixed_folder(tmp_path, text):
    """Export run B over run A's export, SIGKILLed after B's weights replaced A's: the folder must not
    offer A's config.json beside B's weights (transformers would load the mix, or fail on it); a
    rerun then writes B whole."""
    import os
    import subprocess
    import sys

    from pretrain.train.hf_io import export_hf
    from pretrain.train.testing import tiny_config
    from pretrain.train.trainer import Trainer

    runs = {}
    for name, layers in (("a", 2), ("b", 1)):
        cfg = tiny_config(tmp_path / name, text, "train.steps=1", f"model.n_layers={layers}")
        Trainer(cfg, quiet=True).fit()
        runs[name] = tmp_path / name
    out = tmp_path / "hf"
    export_hf(runs["a"], out)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    cmd = [sys.executable, "-c", KILL_AFTER_FIRST_WEIGHTS, "export", str(runs["b"]), "--format", "hf",
           "-o", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == -9, proc.stderr[-2000:]
    if (out / "config.json").exists():  # whatever is offered as a model must be one model
        _, info = transformers.AutoModelForCausalLM.from_pretrained(out, output_loading_info=True)
        assert not info["missing_keys"], "A's config.json beside B's weights (loaded half random)"
    export_hf(runs["b"], out)  # the rerun
    model = transformers.AutoModelForCausalLM.from_pretrained(out)
    assert model.config.num_hidden_layers == 1
    assert not (out / ".export-partial").exists()


def test_eval_of_a_folder_prints_no_tokenizer_length_warning(tmp_path):
    """A ppl: text longer than the context is scored in windows, so transformers' "Token indices
    sequence length is longer than the specified maximum ... will result in indexing errors" on
    stderr was a false alarm for every long text (tokenizer_config's model_max_length is seq_len)."""
    folder = _save(tmp_path / "hf", 1)
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {**json.loads((folder / "tokenizer_config.json").read_text()), "model_max_length": 32}))
    (tmp_path / "long.txt").write_text("A text longer than the context of the model. " * 8)
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, "-m", "pretrain", "eval", str(folder), "--tasks",
                           f"ppl:{tmp_path / 'long.txt'}", "--quiet", "--threads", "1", "-o",
                           str(tmp_path / "out.json")], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0 and "ppl:long.txt" in proc.stdout, proc.stderr[-2000:]
    assert "indexing errors" not in proc.stderr


@pytest.mark.parametrize("command", [["sample", "--tokens", "3", "--step", "5"],
                                     ["export", "--format", "hf", "-o", "OUT"]])
def test_a_hf_folder_given_where_a_run_is_read_says_so(tmp_path, capsys, command):
    """`pretrain export hf/x` said "config file not found: hf/x/config.toml"; a newcomer holding an
    export learns nothing from it. `sample` reads a folder, but --step (a run's checkpoint) is
    refused there rather than ignored."""
    from pretrain.cli import main

    folder = _save(tmp_path / "hf", 1)
    args = [a.replace("OUT", str(tmp_path / "out")) for a in command]
    assert main([args[0], str(folder), *args[1:]]) == 2
    err = capsys.readouterr().err
    assert "Hugging Face folder" in err and ("pretrain eval" in err or "--step" in err), err


@pytest.mark.parametrize("flag, value", [("--step", "5"), ("--tokenizer", "other.json")])
def test_run_only_flags_on_a_folder_are_refused_not_ignored(tmp_path, capsys, flag, value):
    """`--step` and `--tokenizer` pick a run's checkpoint and tokenizer; on a folder they were
    silently ignored (and the result file then named a tokenizer that was never used)."""
    from pretrain.cli import main

    folder = _save(tmp_path / "hf", 1)
    (tmp_path / "t.txt").write_text("some text to score")
    rc = main(["eval", str(folder), "--tasks", f"ppl:{tmp_path / 't.txt'}", "--quiet", flag, value,
               "-o", str(tmp_path / "out.json")])
    err = capsys.readouterr().err
    assert rc == 2 and flag in err and not (tmp_path / "out.json").exists(), err


def test_export_beside_a_training_run_survives_checkpoint_rotation(tmp_path, text, monkeypatch):
    """`export` while `pretrain train` writes the same run: the trainer's checkpoint.keep rotation can
    delete the newest checkpoint between export choosing and reading it. That read as "config.toml
    ... more than step_N's files hold (0 bytes); it is not this run's config"; the export now takes
    the newest complete checkpoint again. The deletion is made at that moment, on the real files."""
    from pretrain.train import checkpoint as ck
    from pretrain.train.hf_io import export_hf
    from pretrain.train.testing import tiny_config
    from pretrain.train.trainer import Trainer

    run = tmp_path / "run"
    Trainer(tiny_config(run, text, "train.steps=4", "checkpoint.every=2"), quiet=True).fit()
    choose, chosen = ck.latest_complete, []

    def rotated_right_after(root, before=None):
        found = choose(root, before)
        if not chosen:
            shutil.rmtree(found[1])  # what the trainer's rotation does, at the worst moment
        chosen.append(found[0])
        return found

    monkeypatch.setattr(ck, "latest_complete", rotated_right_after)
    res = export_hf(run, tmp_path / "hf")
    assert chosen == [4, 2] and res["step"] == 2
    transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf")


def test_sample_of_an_export_is_what_transformers_generates_and_what_the_run_samples(tmp_path, text, capsys):
    """`pretrain sample hf/x` was refused ("a Hugging Face folder, not a run directory"), so the
    export a user had just made could not be tried with the command that tries a run. Greedy text
    from the folder must equal transformers' own generate() on it, and `pretrain sample RUN`'s;
    a sampled text (a seed) must equal the run's too."""
    from pretrain.cli import main
    from pretrain.train.hf_io import export_hf
    from pretrain.train.testing import tiny_config
    from pretrain.train.trainer import Trainer
    from pretrain.untrusted import printable

    run, folder = tmp_path / "run", tmp_path / "hf"
    Trainer(tiny_config(run, text, "train.steps=4"), quiet=True).fit()
    export_hf(run, folder)

    def sample(where: Path, *extra: str) -> str:
        assert main(["sample", str(where), "--prompt", "ROMEO:", "--tokens", "24", "--threads", "1",
                     *extra]) == 0
        return capsys.readouterr().out

    model = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    model.generation_config.eos_token_id = None  # sample does not stop at end-of-text
    ids = tok("ROMEO:", return_tensors="pt").input_ids
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=24, do_sample=False, pad_token_id=0)
    truth = printable(tok.decode(out[0], skip_special_tokens=True))
    greedy = sample(folder, "--temperature", "0")
    assert greedy == truth + "\n"
    assert greedy == sample(run, "--temperature", "0")
    assert sample(folder, "--seed", "7") == sample(run, "--seed", "7")


def test_a_run_whose_init_from_folder_is_gone_names_it(tmp_path, text, capsys):
    """A run started from a Hugging Face folder encodes its text with the folder's tokenizer.json;
    with the folder gone (a cleaned cache) export, sample and eval said only "tokenizer not found:
    hf/tokenizer.json". Now one line says whose file it was; sample with --tokenizer still works."""
    from pretrain.cli import main

    folder = _save(tmp_path / "hf", 1)
    run = tmp_path / "run"
    (tmp_path / "run.toml").write_text(f'[model]\ninit_from = "{folder}"\n[train]\nout = "{run}"\nsteps = 1\n'
                                       f'threads = 1\n[data]\npath = "{text}"\nbatch_size = 2\n'
                                       '[log]\ntensorboard = false\n')
    assert main(["train", str(tmp_path / "run.toml"), "--quiet"]) == 0
    # an export over the base it started from would replace the user's base model: refused, untouched
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert main(["export", str(run), "--format", "hf", "-o", str(folder)]) == 2
    assert "the folder this run was initialised from" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    kept = tmp_path / "tokenizer.json"
    shutil.copyfile(folder / "tokenizer.json", kept)
    shutil.rmtree(folder)
    capsys.readouterr()
    for args in (["export", str(run), "--format", "hf", "-o", str(tmp_path / "out")],
                 ["sample", str(run), "--tokens", "2"],
                 ["eval", str(run), "--tasks", f"ppl:{kept}", "--quiet", "-o", str(tmp_path / "e.json")]):
        assert main(args) == 2
        err = capsys.readouterr().err
        assert f"{folder / 'tokenizer.json'}: not found" in err, err
        assert "model.init_from's folder, which is gone" in err, err
    assert main(["sample", str(run), "--tokens", "2", "--tokenizer", str(kept)]) == 0
