"""`pretrain eval` run again takes what its result file holds: a real process SIGKILLed right after
its first task's result reached the file, then the same command again, compared byte for byte (but
`seconds`, the timing field) with an uninterrupted run of that command; a finished evaluation run
again scores nothing, and its numbers equal a fresh score's; an edited task file (same size, same
modification time) is scored again. The model is a folder written by transformers' own
`save_pretrained`.
"""

from __future__ import annotations

import json
import math
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


def tiny_hf(folder: Path, seed: int) -> None:
    """A one-layer Llama of SHAPE with a byte-level tokenizer, saved as an HF folder."""
    from pretrain.tokens.hf_tokenizer import byte_tokenizer

    torch.manual_seed(seed)
    transformers.LlamaForCausalLM(transformers.LlamaConfig(**SHAPE)).save_pretrained(folder)
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=byte_tokenizer(), eos_token="<|endoftext|>")
    tok.save_pretrained(folder)


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> tuple[Path, list[str]]:
    d = tmp_path_factory.mktemp("resume")
    tiny_hf(d / "hf", seed=5)
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
    err = capsys.readouterr().err
    assert f"ppl:a.txt: from {out} (same model, same settings); --force to score again" in err
    assert "scoring 2 of 3: mc, ppl:b.txt" in err
    assert _timeless(out) == _timeless(whole)


def test_a_partial_file_of_other_settings_or_inputs_is_not_resumed(setup, killed, tmp_path, capsys):
    """A recorded task is taken only for the same model, the settings it reads and its task file's
    bytes: --limit 4 takes ppl:a.txt (a text is read whole: --limit does not change it) and scores
    the benchmark at 4; --limit 5 again scores only the benchmark again, saying why; an edited task
    file is scored again."""
    from pretrain.cli import main

    d, tasks = setup
    out = tmp_path / "eval.json"
    first = json.loads(killed)["results"]["ppl:a.txt"]
    out.write_bytes(killed)
    capsys.readouterr()
    assert main(_args(d, [*tasks[:-1], "4"], out)) == 0
    err = capsys.readouterr().err
    assert f"ppl:a.txt: from {out} (same model, same settings)" in err and "replaced" not in err
    doc = json.loads(out.read_text())
    assert doc["settings"]["limit"] == 4 and doc["tasks"]["mc"]["n"] == 4 and len(doc["results"]) == 3
    assert doc["tasks"]["mc"]["settings"] == {"limit": 4, "seed": 1234, "shots": 1}
    assert doc["tasks"]["ppl:a.txt"]["settings"] == {"ppl_tokens": 200_000}
    assert main(_args(d, tasks, out)) == 0
    err = capsys.readouterr().err
    assert f"ppl:a.txt, ppl:b.txt: from {out}" in err
    assert f"mc: in {out}, scored again (other settings (limit 4 -> 5))" in err
    assert json.loads(out.read_text())["tasks"]["mc"]["n"] == 5

    out.write_bytes(killed)  # the same command after a.txt was edited: a.txt is scored again
    saved = {p: (p.read_bytes(), p.stat()) for p in (d / "a.txt", d / "b.txt")}
    try:
        (d / "a.txt").write_text("Something else entirely, said twice. " * 4)
        assert main(_args(d, tasks, out)) == 0
        assert f"ppl:a.txt: in {out}, scored again (its task file changed since)" in capsys.readouterr().err
        assert json.loads(out.read_text())["results"]["ppl:a.txt"] != first
        _restore(saved)
        out.write_bytes(killed)  # another task's file edited: ppl:a.txt, unchanged, is still taken
        (d / "b.txt").write_text((d / "b.txt").read_text() + "More.")
        assert main(_args(d, tasks, out)) == 0
        assert "ppl:a.txt: from" in capsys.readouterr().err
    finally:
        _restore(saved)  # content and modification time: the other test resumes the same partial file


def test_a_finished_evaluation_run_again_is_taken_from_its_file(setup, tmp_path, capsys, monkeypatch):
    """The same command after it finished scores nothing and loads no model; its numbers are a fresh
    score's (another file, same model); --force scores again; a task file whose bytes changed
    while its size and modification time did not is scored again (its content is the key)."""
    import pretrain.eval.lm as lm
    from pretrain.cli import main

    d, tasks = setup
    out, fresh = tmp_path / "eval.json", tmp_path / "fresh.json"
    assert main(_args(d, tasks, out)) == 0
    scored = out.read_bytes()
    real = lm.load_model
    monkeypatch.setattr(lm, "load_model", lambda *a, **k: pytest.fail("loaded the model"))
    capsys.readouterr()
    assert main(_args(d, tasks, out)) == 0
    said = capsys.readouterr()
    assert (f"ppl:a.txt, mc, ppl:b.txt: from {out} (same model, same settings); --force to score "
            "again") in said.err
    assert f"nothing scored: {out} holds all 3 tasks" in said.out and "bits_per_byte" in said.out
    assert out.read_bytes() == scored  # not rewritten
    monkeypatch.setattr(lm, "load_model", real)
    assert main(_args(d, tasks, fresh)) == 0
    assert _timeless(fresh) == _timeless(out).replace(str(out), str(fresh))
    capsys.readouterr()
    assert main([*_args(d, tasks, out), "--force"]) == 0
    assert f"ppl:a.txt, mc, ppl:b.txt: in {out}, scored again (--force)" in capsys.readouterr().err
    assert _timeless(out) == _timeless(fresh)
    # a ppl: task alone (--shots and --limit, which it does not read, are refused with it) is taken,
    # and the file keeps the benchmark scored with them
    before = out.read_bytes()
    assert main(_args(d, [f"ppl:{d / 'a.txt'}"], out)) == 0
    assert f"ppl:a.txt: from {out}" in capsys.readouterr().err and out.read_bytes() == before

    rows = (d / "mc.jsonl").read_text()
    saved = {d / "mc.jsonl": ((d / "mc.jsonl").read_bytes(), (d / "mc.jsonl").stat())}
    try:  # gold 0 -> 1 in the first row: same size, modification time put back
        (d / "mc.jsonl").write_text(rows.replace('"gold": 0', '"gold": 1', 1))
        _restore({d / "mc.jsonl": ((d / "mc.jsonl").read_bytes(), saved[d / "mc.jsonl"][1])})
        assert main(_args(d, tasks, out)) == 0
        err = capsys.readouterr().err
        assert f"ppl:a.txt, ppl:b.txt: from {out}" in err and "mc: in" in err and "scoring 1 of 3: mc" in err
        assert json.loads(out.read_text())["examples"]["mc"][0]["gold"] == 1
    finally:
        _restore(saved)


def test_a_folder_saved_again_with_the_same_bytes_is_the_same_model(setup, tmp_path, capsys):
    """A Hugging Face folder is named by its files' bytes: copied (new inodes and times) it is the
    same model and its scores are taken; with other weights its file is replaced, naming the
    tasks scored again for it and those dropped."""
    import shutil

    from pretrain.cli import main

    d, _ = setup
    model = tmp_path / "hf"
    shutil.copytree(d / "hf", model, ignore=shutil.ignore_patterns("eval"))
    out = tmp_path / "eval.json"
    a, b = f"ppl:{d / 'a.txt'}", f"ppl:{d / 'b.txt'}"
    args = ["eval", str(model), "--quiet", "--threads", "1", "-o", str(out), "--tasks"]
    assert main([*args, f"{a},{b}"]) == 0
    scored = json.loads(out.read_text())
    shutil.copytree(d / "hf", tmp_path / "copy", ignore=shutil.ignore_patterns("eval"),
                    copy_function=shutil.copy)  # new inodes and modification times
    shutil.rmtree(model)
    (tmp_path / "copy").rename(model)
    capsys.readouterr()
    assert main([*args, a]) == 0
    assert f"ppl:a.txt: from {out} (same model, same settings)" in capsys.readouterr().err
    again = json.loads(out.read_text())
    assert again["results"] == scored["results"] and again["model"]["files"] != scored["model"]["files"]

    torch.manual_seed(6)  # other weights, same shapes and file names
    transformers.LlamaForCausalLM(transformers.LlamaConfig(**SHAPE)).save_pretrained(model)
    assert main([*args, a]) == 0
    err = capsys.readouterr().err
    assert (f"replaced {out}: its earlier results were for another model (the folder's files differ: "
            "exported or saved again): ppl:a.txt scored again for this one; ppl:b.txt dropped") in err
    assert list(json.loads(out.read_text())["results"]) == ["ppl:a.txt"]


def _restore(saved: dict) -> None:
    for p, (data, st) in saved.items():
        p.write_bytes(data)
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))


# --- the settings that change a number are part of the merge rule (session-7 leftovers) ------------


def test_another_ppl_tokens_is_kept_per_task(setup, tmp_path, capsys):
    """--ppl-tokens cuts a ppl: text, so it is part of each ppl: task's key: a perplexity over 50
    tokens and one over 100 stay side by side, each with its own `settings` (until session 14 the
    second replaced the first: one `settings` block for the file); the same text at another value
    is scored again, said."""
    from pretrain.cli import main

    d, _ = setup
    out = tmp_path / "eval.json"
    assert main(_args(d, [f"ppl:{d / 'a.txt'}", "--ppl-tokens", "50"], out)) == 0
    assert main(_args(d, [f"ppl:{d / 'b.txt'}", "--ppl-tokens", "100"], out)) == 0
    doc = json.loads(out.read_text())
    assert {t: v["settings"] for t, v in doc["tasks"].items()} == {
        "ppl:a.txt": {"ppl_tokens": 50}, "ppl:b.txt": {"ppl_tokens": 100}}
    assert doc["results"]["ppl:a.txt"]["tokens"] == 50 and doc["results"]["ppl:b.txt"]["tokens"] == 100
    capsys.readouterr()
    assert main(_args(d, [f"ppl:{d / 'a.txt'}", "--ppl-tokens", "100"], out)) == 0
    err = capsys.readouterr().err
    assert f"ppl:a.txt: in {out}, scored again (other settings (ppl_tokens 50 -> 100))" in err
    doc = json.loads(out.read_text())
    assert doc["results"]["ppl:a.txt"]["tokens"] == 100 and doc["tasks"]["ppl:a.txt"]["settings"] == {
        "ppl_tokens": 100}


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
    from pretrain.eval.identity import task_inputs
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


def test_a_recorded_task_is_taken_only_when_model_settings_and_inputs_match_and_it_reads():
    """`resume.plan` against hand-made files: the same everything is taken; another step, another
    ppl_tokens, other code, another input digest, --force, an in-loop score or a metric that is not a
    number is not; a setting the task does not read (limit for ppl:) does not count."""
    from pretrain.eval.identity import SCORING, code_version
    from pretrain.eval.resume import plan

    model = {"path": "/r", "kind": "run", "step": 20, "checkpoint": "c1"}
    settings = {"shots": 0, "seed": 1234, "limit": None, "ppl_tokens": 200_000, "world_size": 1}
    task = {"kind": "ppl", "n": 3, "shots": 0, "seed": 0, "path": "v.txt", "skipped": {}, "inputs": "d1",
            "settings": {"ppl_tokens": 200_000}, "code": code_version()}
    # 3 nats over 2 tokens of 10 bytes
    ppl = {"perplexity": math.exp(1.5), "bits_per_byte": 3 / (10 * math.log(2)), "nll": 3.0, "tokens": 2,
           "bytes": 10}

    def old(**changes) -> dict:
        t = {**task, **changes.pop("task", {})}
        doc = {"model": model, "settings": settings, "results": {"ppl:v.txt": dict(ppl)},
               "tasks": {"ppl:v.txt": t}, "examples": {"ppl:v.txt": []}}
        return {**doc, **changes}

    me = {"model": model, "settings": {**settings, "world_size": 2}}
    specs, inputs = ["ppl:/data/v.txt"], {"ppl:/data/v.txt": "d1"}
    assert plan(old(), me, specs, inputs, False).taken["ppl:/data/v.txt"]["metrics"] == ppl
    assert not plan(old(model={**model, "step": 10}), me, specs, inputs, False).taken
    assert not plan(old(model={**model, "checkpoint": "c2"}), me, specs, inputs, False).taken
    assert plan(old(settings={**settings, "limit": 5}), me, specs, inputs, False).taken  # not read by ppl:
    assert plan(old(task={"settings": {"ppl_tokens": 50}}), me, specs, inputs, False).again == {
        "ppl:/data/v.txt": "other settings (ppl_tokens 50 -> 200000)"}
    assert plan(old(task={"code": {**code_version(), "scoring": 0}}), me, specs, inputs, False).again == {
        "ppl:/data/v.txt": f"scored by other code (pretrain {code_version()['pretrain']}, scoring 0; "
                           f"this is pretrain {code_version()['pretrain']}, scoring {SCORING})"}
    assert "predates the code version" in plan(old(task={"code": None}), me, specs, inputs, False).again[
        "ppl:/data/v.txt"]
    assert plan(old(), me, specs, {"ppl:/data/v.txt": "d2"}, False).again == {
        "ppl:/data/v.txt": "its task file changed since"}
    assert plan(old(), me, specs, inputs, True).again == {"ppl:/data/v.txt": "--force"}
    assert not plan(old(task={"in_loop": {"precision": "bf16"}}), me, specs, inputs, False).taken
    hostile = old(results={"ppl:v.txt": {"perplexity": "\x1b[2J0.1"}})
    assert plan(hostile, me, specs, inputs, False) == plan(None, me, specs, inputs, False)
    # the trainer's in-loop file has no checkpoint digest: the same model, compared on what it records
    inloop = old(model={k: v for k, v in model.items() if k != "checkpoint"})
    assert plan(inloop, me, specs, inputs, False).taken
    edited = old(results={"ppl:v.txt": {**ppl, "perplexity": 1.5}})  # not exp(nll / tokens)
    assert plan(edited, me, specs, inputs, False).again == {
        "ppl:/data/v.txt": "its metrics are not what its examples give: edited?"}


def test_a_recorded_score_edited_apart_from_its_records_is_scored_again():
    """acc is the mean of the records' acc, each the argmax of its log-likelihoods being gold (two
    examples: one right, one wrong: 0.5 +- 0.5, sample std / sqrt(n)); a file whose acc says 0.9,
    or whose wrong record says right with the mean made to agree, is not taken."""
    from pretrain.eval.identity import code_version
    from pretrain.eval.resume import plan

    model = {"path": "/r", "kind": "run", "step": 20, "checkpoint": "c1"}
    settings = {"shots": 0, "seed": 1234, "limit": None, "ppl_tokens": 200_000, "world_size": 1}
    rec = [{"i": 0, "lls": [-1.0, -2.0], "gold": 0, "acc": 1.0, "acc_norm": 1.0, "acc_bytes": 1.0},
           {"i": 1, "lls": [-1.0, -2.0], "gold": 1, "acc": 0.0, "acc_norm": 0.0, "acc_bytes": 0.0}]
    metrics = {f"{k}{e}": 0.5 for k in ("acc", "acc_norm", "acc_bytes") for e in ("", "_stderr")}
    task = {"kind": "mc", "n": 2, "shots": 0, "seed": 1234, "path": "mc.jsonl", "skipped": {}, "inputs": "d",
            "settings": {"shots": 0, "seed": 1234, "limit": None}, "code": code_version()}

    def taken(metrics: dict, records: list[dict]) -> bool:
        old = {"model": model, "settings": settings, "results": {"mc": metrics}, "tasks": {"mc": task},
               "examples": {"mc": records}}
        return bool(plan(old, {"model": model, "settings": settings}, ["mc.jsonl"], {"mc.jsonl": "d"},
                         False).taken)

    assert taken(metrics, rec)
    assert not taken({**metrics, "acc": 0.9}, rec)
    right = [rec[0], {**rec[1], "acc": 1.0}]
    assert not taken({**metrics, "acc": 1.0, "acc_stderr": 0.0}, right)


def test_the_report_says_where_scores_come_from(setup, tmp_path, capsys):
    """A table of taken scores says so (stdout, what gets pasted), and the report names the file,
    the code that scored each task and, for a file written for another path (a run directory copied
    or handed over), that its scores were not measured here."""
    from pretrain.cli import main
    from pretrain.eval.identity import code_version
    from pretrain.report_run import eval_table

    d, _ = setup
    out = tmp_path / "eval.json"
    a, b = f"ppl:{d / 'a.txt'}", f"ppl:{d / 'b.txt'}"
    assert main(_args(d, [a], out)) == 0
    capsys.readouterr()
    assert main(_args(d, [f"{a},{b}"], out)) == 0
    assert f"not scored by this command: ppl:a.txt, as recorded in {out}" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    here = eval_table(doc, out, d / "hf")
    assert f"scores as recorded in {out}" in here and "written for" not in here
    assert f"scored by pretrain {code_version()['pretrain']}, scoring {code_version()['scoring']}" in here
    elsewhere = eval_table(doc, out, tmp_path)  # the same file read as another directory's
    assert f"this file was written for {(d / 'hf').resolve()}, not {tmp_path.resolve()}" in elsewhere


def test_another_limit_over_the_tasks_examples_reads_the_same_examples():
    """A benchmark of 3 examples (2 scored, 1 skipped as empty) scored under no limit is the same
    under --limit 3 or 500, not under --limit 2; one scored under --limit 3 may have been cut there
    (the file's count is unknown), so no limit scores it again; a mem: probe reads --limit windows."""
    from pretrain.eval.identity import code_version
    from pretrain.eval.resume import plan

    model = {"path": "/r", "kind": "run", "step": 20, "checkpoint": "c1"}
    rec = [{"i": 0, "lls": [-1.0, -2.0], "gold": 0, "acc": 1.0, "acc_norm": 1.0, "acc_bytes": 1.0},
           {"i": 2, "lls": [-1.0, -2.0], "gold": 1, "acc": 0.0, "acc_norm": 0.0, "acc_bytes": 0.0}]
    metrics = {f"{k}{e}": 0.5 for k in ("acc", "acc_norm", "acc_bytes") for e in ("", "_stderr")}

    def taken(recorded: int | None, asked: int | None, kind: str = "mc") -> bool:
        settings = {"shots": 0, "seed": 1234, "limit": asked, "ppl_tokens": 200_000, "world_size": 1}
        task = {"kind": kind, "n": 2, "shots": 0, "seed": 1234, "path": "t.jsonl", "inputs": "d",
                "skipped": {"empty_continuation": 1}, "code": code_version(),
                "settings": {"shots": 0, "seed": 1234, "limit": recorded}}
        old = {"model": model, "settings": settings, "results": {"t": metrics}, "tasks": {"t": task},
               "examples": {"t": rec}}
        return bool(plan(old, {"model": model, "settings": settings}, ["t.jsonl"], {"t.jsonl": "d"},
                         False).taken)

    assert taken(None, None) and taken(None, 3) and taken(None, 500) and taken(500, None)
    assert not taken(None, 2) and not taken(3, None) and not taken(3, 500)
    assert not taken(None, 500, kind="mem")
