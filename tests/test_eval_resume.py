"""`pretrain eval` killed between tasks resumes: a real process SIGKILLed right after its first task's
result reached the file, then the same command again, compared byte for byte (but `seconds`, the
timing field) with an uninterrupted run of that command. The model is a folder written by
transformers' own `save_pretrained`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.usefixtures("restore_torch_threads")

SHAPE = dict(vocab_size=257, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)

# dies (SIGKILL, nothing flushed or cleaned up) as soon as the result file was first renamed into place
KILL_AFTER_FIRST_RESULT = """
import os, signal, sys
real, out = os.replace, os.path.abspath(sys.argv[sys.argv.index("-o") + 1])
def replace(src, dst, *a, **k):
    real(src, dst, *a, **k)
    if os.path.abspath(dst) == out:
        os.kill(os.getpid(), signal.SIGKILL)
os.replace = replace
from pretrain.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> tuple[Path, list[str]]:
    from pretrain.tokens.hf_tokenizer import byte_tokenizer

    d = tmp_path_factory.mktemp("resume")
    torch.manual_seed(5)
    transformers.LlamaForCausalLM(transformers.LlamaConfig(**SHAPE)).save_pretrained(d / "hf")
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=byte_tokenizer(), eos_token="<|endoftext|>")
    tok.save_pretrained(d / "hf")
    (d / "a.txt").write_text("To be, or not to be, that is the question. " * 4)
    (d / "b.txt").write_text("Whether 'tis nobler in the mind to suffer the slings. " * 4)
    rows = [{"query": f"Question {i}: the sky is", "choices": ["blue", "green", "loud"], "gold": i % 3}
            for i in range(6)]
    (d / "mc.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d, [f"ppl:{d / 'a.txt'},{d / 'mc.jsonl'},ppl:{d / 'b.txt'}", "--shots", "1", "--limit", "5"]


def _args(d: Path, tasks: list[str], out: Path) -> list[str]:
    return ["eval", str(d / "hf"), "--tasks", *tasks, "--quiet", "--threads", "1", "-o", str(out)]


def _timeless(path: Path) -> str:
    """The file without its timings: the top-level `seconds` is the sum of the tasks' own."""
    text = path.read_text()
    doc = json.loads(text)
    assert doc["seconds"] == pytest.approx(sum(t["seconds"] for t in doc["tasks"].values()), abs=0.002)
    return re.sub(r'^( +)"seconds": [0-9.e-]+(,?)$', r'\1"seconds": -\2', text, flags=re.M)


@pytest.fixture(scope="module")
def killed(setup, tmp_path_factory) -> bytes:
    """The result file a real `pretrain eval` process left when SIGKILLed after its first task."""
    d, tasks = setup
    out = tmp_path_factory.mktemp("killed") / "eval.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, "-c", KILL_AFTER_FIRST_RESULT, *_args(d, tasks, out)],
                          capture_output=True, text=True, env=env, timeout=180, cwd=out.parent)
    assert proc.returncode == -9, proc.stderr[-2000:]
    return out.read_bytes()


def test_eval_killed_after_its_first_task_resumes_to_the_uninterrupted_file(setup, killed, tmp_path, capsys):
    from pretrain.cli import main

    d, tasks = setup
    whole = tmp_path / "whole.json"
    assert main(_args(d, tasks, whole)) == 0
    out = tmp_path / "eval.json"
    out.write_bytes(killed)
    assert list(json.loads(killed)["results"]) == ["ppl:a.txt"]  # the first task survived the kill

    capsys.readouterr()
    assert main(_args(d, tasks, out)) == 0
    assert f"1 of 3 tasks already scored in {out}; scoring 2" in capsys.readouterr().err
    assert _timeless(out) == _timeless(whole)
    assert "resume" not in json.loads(out.read_text())


def test_a_partial_file_of_other_settings_or_inputs_is_not_resumed(setup, killed, tmp_path, capsys):
    """A partial file is taken only for the same model, settings, tasks and task files: --limit 4
    scores every task again; an edited task file is scored again."""
    from pretrain.cli import main

    d, tasks = setup
    out = tmp_path / "eval.json"
    first = json.loads(killed)["results"]["ppl:a.txt"]
    out.write_bytes(killed)
    capsys.readouterr()
    assert main(_args(d, [*tasks[:-1], "4"], out)) == 0
    assert "already scored" not in capsys.readouterr().err
    doc = json.loads(out.read_text())
    assert doc["settings"]["limit"] == 4 and doc["tasks"]["mc"]["n"] == 4 and len(doc["results"]) == 3

    out.write_bytes(killed)  # the same command after a.txt was edited: a.txt is scored again
    saved = {p: (p.read_bytes(), p.stat()) for p in (d / "a.txt", d / "b.txt")}
    try:
        (d / "a.txt").write_text("Something else entirely, said twice. " * 4)
        assert main(_args(d, tasks, out)) == 0
        assert "already scored" not in capsys.readouterr().err
        assert json.loads(out.read_text())["results"]["ppl:a.txt"] != first
        _restore(saved)
        out.write_bytes(killed)  # another task's file edited: ppl:a.txt, unchanged, is still taken
        (d / "b.txt").write_text((d / "b.txt").read_text() + "More.")
        assert main(_args(d, tasks, out)) == 0
        assert "1 of 3 tasks already scored" in capsys.readouterr().err
    finally:
        _restore(saved)  # content and modification time: the other test resumes the same partial file


def _restore(saved: dict) -> None:
    for p, (data, st) in saved.items():
        p.write_bytes(data)
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))


# --- the settings that change a number are part of the merge rule (session-7 leftovers) ------------


def test_another_ppl_tokens_replaces_the_file_and_says_so(setup, tmp_path, capsys):
    """--ppl-tokens cuts a ppl: text: a file must not hold a perplexity over 50 tokens beside one
    over 100 under one `settings` block. Rerun with another value: the earlier task is named as
    replaced, and the file's settings say which value its numbers were computed with."""
    from pretrain.cli import main

    d, _ = setup
    out = tmp_path / "eval.json"
    assert main(_args(d, [f"ppl:{d / 'a.txt'}", "--ppl-tokens", "50"], out)) == 0
    capsys.readouterr()
    assert main(_args(d, [f"ppl:{d / 'b.txt'}", "--ppl-tokens", "100"], out)) == 0
    err = capsys.readouterr().err
    doc = json.loads(out.read_text())
    assert list(doc["results"]) == ["ppl:b.txt"] and doc["settings"]["ppl_tokens"] == 100
    assert "its earlier results (ppl:a.txt) were for another model or other settings" in err
    assert main(_args(d, [f"ppl:{d / 'a.txt'}", "--ppl-tokens", "100"], out)) == 0  # same value: merged
    assert sorted(json.loads(out.read_text())["results"]) == ["ppl:a.txt", "ppl:b.txt"]


def _mmlu_folder(root: Path) -> Path:
    bench = root / "bench"
    (bench / "mmlu").mkdir(parents=True)
    row = {"subject": "astronomy", "question": "Which planet is red?",
           "choices": ["Mars", "Venus", "Io", "Sun"], "answer": "A"}
    for name in ("mmlu-val.jsonl", "mmlu-dev.jsonl"):
        (bench / "mmlu" / name).write_text(json.dumps(row) + "\n")
    return bench


def test_mmlu_dev_split_is_part_of_the_task_files(tmp_path):
    """MMLU's few-shot examples come from its dev split: an edited dev file makes the task's inputs
    differ (a resumed run scores it again), and a missing one is refused before the model loads when
    shots are asked for (it fell back to examples of the scored split, not the harness's prompt)."""
    from pretrain.errors import UserError
    from pretrain.eval.resume import task_inputs
    from pretrain.eval.tasks import check_spec

    bench = _mmlu_folder(tmp_path)
    dev = bench / "mmlu" / "mmlu-dev.jsonl"
    before = task_inputs(["mmlu"], str(bench))["mmlu"]
    dev.write_text(dev.read_text() * 2)
    assert task_inputs(["mmlu"], str(bench))["mmlu"] != before
    check_spec("mmlu", bench, shots=5)
    dev.unlink()
    check_spec("mmlu", bench, shots=0)  # zero-shot never reads it
    with pytest.raises(UserError, match=r"task 'mmlu' with 5 shots: .*mmlu-dev.jsonl: no such file"):
        check_spec("mmlu", bench, shots=5)
