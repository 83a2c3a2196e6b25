"""`pretrain eval` on a tiny trained run: the JSON and table, batching against a one-request
reference, reruns, empty continuations, the task readers on the real benchmark files, and
`torchrun --nproc-per-node 2 -m pretrain eval` against one process (in-loop sharding:
tests/test_eval_inloop.py)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from tests.conftest import SHARED_DATA, data_file

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, text, restore_torch_threads) -> Path:
    from pretrain.train.testing import tiny_config
    from pretrain.train.trainer import Trainer

    out = tmp_path_factory.mktemp("run")
    Trainer(tiny_config(out, text, "train.steps=10", "model.seq_len=64"), quiet=True).fit()
    return out


@pytest.fixture(scope="module")
def sample_text(tmp_path_factory, text) -> Path:
    p = tmp_path_factory.mktemp("ppl") / "sample.txt"
    p.write_text(Path(text).read_text()[:3000])
    return p


def _bench() -> Path:
    return data_file("benchmarks")


def test_cli_writes_json_and_table(tiny_run, sample_text, capsys):
    from pretrain.cli import main

    specs = f"copa,winogrande,ppl:{sample_text}"
    assert main(["eval", str(tiny_run), "--tasks", specs, "--limit", "6", "--quiet",
                 "--benchmarks", str(_bench())]) == 0
    shown = capsys.readouterr().out
    out = tiny_run / "eval" / "step_0000010.json"
    doc = json.loads(out.read_text())
    assert doc["schema"] == "pretrain.eval/1" and doc["model"]["step"] == 10
    assert set(doc["results"]) == {"copa", "winogrande", f"ppl:{sample_text.name}"}
    assert doc["tasks"]["copa"]["n"] == 6 and len(doc["examples"]["copa"]) == 6
    assert "acc_norm" in doc["results"]["copa"] and doc["tasks"]["copa"]["kind"] == "mc"
    assert "copa" in shown and "bits_per_byte" in shown
    # run it twice: the same checkpoint, settings and task files: taken from the file, said so
    assert main(["eval", str(tiny_run), "--tasks", specs, "--limit", "6", "--quiet",
                 "--benchmarks", str(_bench())]) == 0
    again = json.loads(out.read_text())
    assert again == doc and doc["model"]["checkpoint"]
    assert (f"copa, winogrande, ppl:sample.txt: from {out} (same model, same settings); --force to score "
            "again") in capsys.readouterr().err
    # other tasks into the same file: added beside the earlier ones, which are kept as they were
    assert main(["eval", str(tiny_run), "--tasks", "piqa", "--limit", "6", "--quiet",
                 "--benchmarks", str(_bench())]) == 0
    merged = json.loads(out.read_text())
    said = capsys.readouterr()
    assert "scored again" not in said.err
    assert set(merged["results"]) == set(merged["tasks"]) == set(doc["results"]) | {"piqa"}
    assert merged["results"]["copa"] == doc["results"]["copa"]
    # the time behind every result: each task keeps its own seconds (the run that scored it), and
    # `seconds` sums them, not only the piqa run's (which the terminal says apart)
    kept = {k: again["tasks"][k]["seconds"] for k in again["tasks"]}
    assert {k: merged["tasks"][k]["seconds"] for k in kept} == kept
    total = sum(kept.values()) + merged["tasks"]["piqa"]["seconds"]
    assert merged["seconds"] == pytest.approx(total, abs=0.002)
    assert f"its 4 tasks took {merged['seconds']:.1f} s in all, earlier runs' included" in said.out
    # what `pretrain report` shows: a table of the result file
    from pretrain.report_run import eval_table

    assert "acc_norm" in eval_table(merged) and "piqa" in eval_table(merged)


def test_an_eval_without_a_terminal_says_each_task_as_it_goes(tiny_run, sample_text, tmp_path, capsys):
    """In a log (no terminal, no bar) each task's start and its n and seconds are lines on stderr,
    in order, with the numbers the result file holds; they said nothing for the minutes of a task."""
    from pretrain.cli import main

    out = tmp_path / "e.json"
    specs = ["copa", f"ppl:{sample_text}"]
    assert main(["eval", str(tiny_run), "--tasks", ",".join(specs), "--limit", "4", "-o", str(out),
                 "--benchmarks", str(_bench())]) == 0
    doc = json.loads(out.read_text())
    said = [x for x in capsys.readouterr().err.splitlines() if x.startswith(("scoring ", "  "))]
    names = ["copa", f"ppl:{sample_text.name}"]
    task = doc["tasks"]
    assert said == [line for i, (spec, name) in enumerate(zip(specs, names))
                    for line in (f"scoring {spec} (task {i + 1} of 2)",
                                 f"  {spec}: n {task[name]['n']:,} in {task[name]['seconds']:.1f} s")]
    assert main(["eval", str(tiny_run), "--tasks", "copa", "--limit", "4", "-o", str(tmp_path / "q.json"),
                 "--quiet", "--benchmarks", str(_bench())]) == 0
    assert "scoring copa" not in capsys.readouterr().err  # --quiet: no progress of any kind


def test_one_run_named_two_ways_or_limit_0_adds_to_the_file(tiny_run, sample_text, tmp_path, capsys,
                                                            monkeypatch):
    """`runs/tiny/` (a shell's completion) and `/abs/runs/tiny` are one run, and `--limit 0` is no
    limit: the second evaluation adds its task. They replaced the first one's, with a warning the demo
    printed on its own first run (its in-loop file said limit 0, `pretrain eval` no limit)."""
    from pretrain.cli import main

    other = tmp_path / "other.txt"
    other.write_text(sample_text.read_text()[1000:])
    out = tmp_path / "e.json"
    monkeypatch.chdir(tiny_run.parent)
    assert main(["eval", f"{tiny_run.name}/", "--tasks", f"ppl:{sample_text}", "--limit", "0",
                 "-o", str(out), "--quiet"]) == 0
    assert main(["eval", str(tiny_run), "--tasks", f"ppl:{other}", "-o", str(out), "--quiet"]) == 0
    assert "replaced" not in capsys.readouterr().err
    doc = json.loads(out.read_text())
    assert set(doc["results"]) == {f"ppl:{sample_text.name}", "ppl:other.txt"}
    assert doc["model"]["path"] == str(tiny_run.resolve())


def test_batched_scores_equal_one_request_at_a_time(tiny_run):
    """Dedup of shared inputs, sorting and padding change nothing: each request scored alone,
    by the plain definition (sum of log_softmax over the continuation's positions)."""
    from pretrain.eval.harness import requests_of
    from pretrain.eval.lm import from_run
    from pretrain.eval.scoring import encode_pair, loglikelihoods
    from pretrain.eval.tasks import load_task

    model, _ = from_run(tiny_run)
    task = load_task("mmlu", _bench())  # one-byte choices: inputs shared by all four
    pairs = [p for i in range(3) for p in requests_of(task, i, 1, 7)]
    pairs += [p for i in range(3) for p in requests_of(load_task("piqa", _bench()), i, 0, 0)]
    got = loglikelihoods(model, pairs, batch_tokens=256)
    for (ctx, cont), (ll, greedy) in zip(pairs, got):
        c, x = encode_pair(model, ctx, cont)
        seq = torch.tensor([(c + x)[-(model.max_length + 1):]])
        logp = model.logits(seq[:, :-1])[0].float().log_softmax(-1)
        tgt = seq[0, 1:]
        ref = logp[torch.arange(tgt.numel()), tgt][-len(x):]
        assert ll == pytest.approx(ref.sum().item(), abs=1e-4)
        assert greedy == bool((logp.argmax(-1)[-len(x):] == tgt[-len(x):]).all())


def test_every_benchmark_file_reads(shared_data):
    """Each known task parses every line of its real file (a kind per format, none skipped)."""
    from pretrain.eval.tasks import KNOWN, load_task

    bench = shared_data / "benchmarks"
    kinds = {}
    for name, rel in KNOWN.items():
        if rel.endswith(".gz"):
            continue
        task = load_task(name, bench)
        lines = sum(1 for line in (bench / rel).read_text().split("\n") if line.strip())
        assert len(task.docs) == lines and not task.skipped, name
        kinds[name] = task.kind
    assert kinds["arc_easy"] == "mc" and kinds["winogrande"] == "schema" and kinds["mmlu"] == "mmlu"
    assert kinds["lambada_openai"] == "lm" and kinds["gsm8k"] == "gsm8k" and kinds["triviaqa"] == "qa"


def test_bad_records_are_skipped_and_counted(tmp_path):
    from pretrain.errors import UserError
    from pretrain.eval.tasks import load_file

    p = tmp_path / "t.jsonl"
    p.write_text('{"query": "q", "choices": ["a", "b"], "gold": 1}\nnot json\n'
                 '{"query": "q", "choices": ["a"], "gold": 5}\n{"query": "q"}\n')
    task = load_file(p)
    assert len(task.docs) == 1 and task.skipped == {"bad_json": 1, "bad_value": 1, "missing_key": 1}
    p.write_text("[1, 2]\n")
    with pytest.raises(UserError, match="no readable example"):
        load_file(p)


def test_an_example_of_a_million_choices_is_skipped_not_scored(tmp_path):
    """Hostile task file: each choice is a forward pass, and an 8 MiB line holds 2 million; 16 such
    lines are a 117 KB .jsonl.gz. An example over MAX_CHOICES (the harness's tasks: 2-5) is skipped
    and counted by its reason; a real one beside it is kept."""
    import gzip

    from pretrain.errors import UserError
    from pretrain.eval.tasks import MAX_CHOICES, load_file

    p = tmp_path / "t.jsonl.gz"
    lines = [{"query": "q", "choices": ["a"] * 1_000_000, "gold": 0},
             {"query": "q", "choices": [str(i) for i in range(MAX_CHOICES)], "gold": 3},
             {"context_options": ["x"] * (MAX_CHOICES + 1), "continuation": "c", "gold": 0}]
    p.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in lines).encode()))
    task = load_file(p, kind="mc")
    assert [len(d["choices"]) for d in task.docs] == [MAX_CHOICES]
    assert task.skipped == {"too_many_choices": 1, "missing_key": 1}
    with pytest.raises(UserError, match="1 too many choices"):  # none left: one line, with why
        load_file(p, kind="schema")


def test_a_task_file_of_more_examples_than_any_benchmark_is_refused(tmp_path, monkeypatch):
    """Hostile task file: 45-byte examples cost ~900 bytes each as Python objects, and 1 GiB of them
    compresses to ~3 MB (64 MiB: 1.35 GB, 42 s). Past MAX_TASK_EXAMPLES (500,000; MMLU test holds
    14,079) the file is refused in one line, before the rest is read; here the bound is lowered so
    the file stays small, and the real bound is checked against the largest shared benchmark."""
    import gzip

    from pretrain.errors import UserError
    from pretrain.eval import tasks

    assert tasks.MAX_TASK_EXAMPLES >= 30 * 14_079
    monkeypatch.setattr(tasks, "MAX_TASK_EXAMPLES", 1000)
    line = b'{"query":"q","choices":["ab","cd"],"gold":0}\n'
    p = tmp_path / "t.jsonl.gz"
    p.write_bytes(gzip.compress(line * 1000))
    assert len(tasks.load_file(p).docs) == 1000
    p.write_bytes(gzip.compress(line * 1001))
    with pytest.raises(UserError, match="more than 1,000 examples"):
        tasks.load_file(p)


def test_fewshot_prompts_are_fixed_by_the_seed():
    from pretrain.eval.tasks import Task, fewshot_prefix

    docs = [{"query": f"q{i}", "choices": ["x", "y"], "gold": i % 2} for i in range(20)]
    task = Task("t", "mc", "-", docs)
    a = fewshot_prefix(task, 3, 5, seed=1)
    assert a == fewshot_prefix(task, 3, 5, seed=1) != fewshot_prefix(task, 3, 5, seed=2)
    assert a.count("\n\n") == 5 and "q3 " not in a  # five shots, never the example itself
    assert "q0 x" in a or "q1 y" in a or a.count(" y") + a.count(" x") == 5


def test_gsm8k_answer_extraction():
    from pretrain.eval.tasks import gsm8k_answer

    assert gsm8k_answer("She makes 9 * 2 = $18.\n#### 18") == "18"
    assert gsm8k_answer("so the total is 1,234 dollars.") == "1234"
    assert gsm8k_answer("no number") == ""


def test_missing_benchmarks_folder_is_one_clear_error(tiny_run, tmp_path, capsys):
    from pretrain.cli import main

    assert SHARED_DATA  # the default is only a fallback
    rc = main(["eval", str(tiny_run), "--tasks", "copa", "--benchmarks", str(tmp_path / "none"), "--quiet"])
    assert rc == 2 and "--benchmarks" in capsys.readouterr().err


def test_batched_greedy_generation_equals_one_prompt_at_a_time(tiny_run):
    """Rows of different lengths in one batch give the tokens `pretrain sample`'s greedy loop gives."""
    from pretrain.eval.lm import from_run
    from pretrain.eval.scoring import greedy_generate
    from pretrain.train.model import generate
    from pretrain.train.runs import load_run_model

    model, _ = from_run(tiny_run)
    net, _, _ = load_run_model(tiny_run)
    prompts = [model.encode(p) for p in ("ROMEO:", "To be, or not to be", "a" * 70)]  # 70 > seq_len
    got = greedy_generate(model, prompts, 6, batch_size=3)
    for p, g in zip(prompts, got):
        ref = generate(net, torch.tensor([p]), 6, temperature=0, cache=False)[0, len(p):].tolist()
        assert g == ref


def test_sample_past_the_context_sees_only_the_last_seq_len_tokens():
    """What `pretrain sample --help` says: past model.seq_len (16 here) the window slides. Prompts
    that differ only before their last 16 tokens continue alike for 30 greedy tokens; differing
    within the window (the last 8 shared), they do not. A fresh model: 10 training steps leave one
    that prints the same letter whatever it is given."""
    from pretrain.train.model import build_model, generate, materialize, resolve_shape
    from pretrain.train.testing import tiny_config

    cfg = tiny_config("unused", "unused", "model.seq_len=16")
    model = materialize(build_model(resolve_shape(cfg.model), cfg.model), "cpu", seed=0).eval()
    shared = torch.randint(0, 256, (1, 40), generator=torch.Generator().manual_seed(1))

    def continuations(last: int) -> list[list[int]]:
        heads = ([1, 2, 3], [200, 100])
        prompts = [torch.cat([torch.tensor([h]), shared[:, -last:]], 1) for h in heads]
        return [generate(model, p, 30, temperature=0)[0, p.shape[1]:].tolist() for p in prompts]

    a, b = continuations(16)
    assert a == b
    a, b = continuations(8)
    assert a != b


def test_an_empty_continuation_is_skipped_and_counted(tiny_run, tmp_path):
    """A real BPE tokenizer (tokenizers, no pre-tokenizer) learns "ab cd" as one token, so the
    request ("ab", " cd") tokenizes to a continuation of nothing (lm-evaluation-harness asserts and
    stops there). That example is skipped and counted; the others are scored as if it were absent."""
    import dataclasses

    from tokenizers import Tokenizer, models, trainers

    from pretrain.eval.harness import evaluate
    from pretrain.eval.lm import from_run
    from pretrain.eval.scoring import encode_pair, loglikelihood_tokens
    from pretrain.eval.tasks import load_file

    tok = Tokenizer(models.BPE())
    tok.train_from_iterator(["ab cd"] * 50 + ["a b c d x y"],
                            trainers.BpeTrainer(vocab_size=40, initial_alphabet=list("abcdxy "),
                                                show_progress=False))
    # the whole is no longer than the context: nothing is left for the continuation
    assert tok.encode("ab cd").tokens == ["ab cd"] and tok.encode("ab").tokens == ["a", "b"]
    model, _ = from_run(tiny_run)
    model = dataclasses.replace(model, encode=lambda t: tok.encode(t).ids, decode=tok.decode)
    items = [{"query": "ab", "choices": ["xy", "b"], "gold": 0},
             {"query": "ab", "choices": ["cd", "xy"], "gold": 0},
             {"query": "xy", "choices": ["ab", "d"], "gold": 1}]
    path = tmp_path / "merge.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in items))
    res = evaluate(model, load_file(path))
    assert res["skipped"] == {"empty_continuation": 1} and res["n"] == 2
    assert [e["i"] for e in res["examples"]] == [0, 2]
    for e in res["examples"]:
        it = items[e["i"]]
        reqs = [encode_pair(model, it["query"], " " + c) for c in it["choices"]]
        assert e["lls"] == pytest.approx([ll for ll, _ in loglikelihood_tokens(model, reqs)], abs=1e-5)


@pytest.mark.slow
def test_torchrun_two_ranks_equal_one_process(tiny_run, sample_text, tmp_path):
    """`torchrun --nproc-per-node 2 -m pretrain eval` (gloo, examples i % 2 per rank, perplexity
    windows likewise) writes the one-process result: the same per-example log-likelihoods and
    metrics. The task file is built here from the text, so no ../shared is needed."""
    import os
    import subprocess
    import sys

    lines = [x.split() for x in sample_text.read_text().splitlines() if len(x.split()) >= 6]
    items = [{"query": " ".join(w[:-2]), "gold": 0,
              "choices": [" ".join(v[-2:]) for v in lines[j:j + 3]]}  # gold: the line's own end
             for j, w in enumerate(lines[:15])]  # 15, odd: rank 0 scores one more example than rank 1
    task = tmp_path / "lines.jsonl"
    task.write_text("".join(json.dumps(x) + "\n" for x in items))
    src = str(Path(__file__).resolve().parents[1] / "src")  # this checkout's code in every rank
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": src}
    args = ["-m", "pretrain", "eval", str(tiny_run), "--tasks", f"{task},ppl:{sample_text}", "--quiet"]
    one, two = tmp_path / "one.json", tmp_path / "two.json"
    # Port 0: torchrun's agent binds a port the OS picks (a port found free here, then closed,
    # could be taken by another process before torchrun binds it).
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                "--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:0"]
    for cmd, out in (([sys.executable], one), (torchrun, two)):
        proc = subprocess.run([*cmd, *args, "-o", str(out)], env=env, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr[-3000:]
    a, b = json.loads(one.read_text()), json.loads(two.read_text())
    assert (a["settings"]["world_size"], b["settings"]["world_size"]) == (1, 2)
    assert a["tasks"]["lines"]["n"] == b["tasks"]["lines"]["n"] == 15
    for name, metrics in a["results"].items():
        assert b["results"][name] == pytest.approx(metrics, rel=1e-6), name
    ea, eb = a["examples"]["lines"], b["examples"]["lines"]
    assert [e["i"] for e in eb] == list(range(15))
    assert [x for e in eb for x in e["lls"]] == pytest.approx([x for e in ea for x in e["lls"]], abs=1e-5)
    # the one-process file run again under torchrun: every task is there (the world size does not
    # count), so every rank stops before loading the model and the file is left as it was
    before = one.read_bytes()
    proc = subprocess.run([*torchrun, *args, "-o", str(one)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"lines, ppl:sample.txt: from {one} (same model, same settings)" in proc.stderr
    assert f"nothing scored: {one} holds all 2 tasks" in proc.stdout and one.read_bytes() == before


def test_scored_positions_only_equal_the_full_forward(tiny_run):
    """The last block and the head run only at the kept positions (causal and packed-tree masks):
    the logits equal the training forward's (Transformer.forward) at those positions."""
    from pretrain.eval.lm import from_run, tree_forward
    from pretrain.train.runs import load_run_model

    net, _, _ = load_run_model(tiny_run)
    model, _ = from_run(tiny_run)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 256, (3, 40), generator=g)
    keep = torch.tensor([0, 17, 38, 39])
    with torch.no_grad():
        full = net(ids)
        pos = torch.arange(40).expand(3, -1)
        causal = torch.ones(40, 40, dtype=torch.bool).tril().expand(3, -1, -1)
        tree = tree_forward(net, ids, pos, causal, keep)
    torch.testing.assert_close(model.logits(ids, keep), full[:, keep], atol=1e-4, rtol=0)
    torch.testing.assert_close(tree, full[:, keep], atol=1e-4, rtol=0)
    assert full[:, keep].abs().max() > 0.1  # not a comparison of zeros


@pytest.mark.parametrize("spec, said", [("copa", "--benchmarks"), ("ppl:missing.txt", "missing.txt"),
                                        ("mem:missing.txt", "missing.txt"), ("no_such_task", "unknown task"),
                                        ("hellaswag", "did you mean hellaswag_small"),
                                        ("ppl:", "ppl:PATH"), ("mem:", "mem:PATH")])
def test_a_task_that_cannot_run_fails_before_the_model_loads(tmp_path, capsys, spec, said):
    """`pretrain eval RUN --tasks ppl:valid.txt,arc_easy` without benchmarks: one line at once, not
    after loading the model and scoring the tasks before it (their results would be lost)."""
    from pretrain.cli import main

    rc = main(["eval", str(tmp_path / "no-run"), "--tasks", f"ppl:{__file__},{spec}", "--quiet",
               "--benchmarks", str(tmp_path / "none")])
    err = capsys.readouterr().err
    assert rc == 2 and said in err and "no-run" not in err, err


def test_a_task_files_typo_names_the_nearest_file(tmp_path, capsys):
    """`--tasks demo-out/eval/next_word.jsonl` (the file is next_words.jsonl) named the missing path
    only; a task name's typo already got the nearest name. A name near nothing gets no guess."""
    from pretrain.cli import main

    (tmp_path / "next_words.jsonl").write_text("{}\n")
    (tmp_path / "heldout.txt").write_text("text")
    for spec, near in ((tmp_path / "next_word.jsonl", "next_words.jsonl"),
                       (f"ppl:{tmp_path / 'heldout.tx'}", "heldout.txt"), (tmp_path / "zzz.jsonl", None)):
        assert main(["eval", str(tmp_path / "no-run"), "--tasks", str(spec), "--quiet"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.endswith(f"no such file or directory (did you mean {tmp_path / near}?)" if near
                            else "no such file or directory"), err


def test_an_output_that_cannot_be_written_is_one_line_before_the_model_loads(tmp_path, capsys):
    """`-o a-file/eval.json` (or a read-only place) failed only when the first task was written,
    after loading the model and scoring it."""
    from pretrain.cli import main

    (tmp_path / "a-file").write_text("")
    rc = main(["eval", str(tmp_path / "no-run"), "--tasks", f"ppl:{__file__}", "--quiet",
               "-o", str(tmp_path / "a-file" / "eval.json")])
    err = capsys.readouterr().err
    assert rc == 2 and "a-file" in err and "no-run" not in err and len(err.strip().splitlines()) == 1, err


def test_a_device_that_is_not_there_is_one_line_before_the_model_loads(tmp_path, capsys):
    """`--device cuda` without a GPU ended in torch's "Torch not compiled with CUDA enabled"
    traceback, `--device tpu` in a RuntimeError listing torch's device types."""
    from pretrain.cli import main

    with pytest.raises(SystemExit) as e:  # argparse: not one of cpu, cuda
        main(["eval", str(tmp_path / "no-run"), "--tasks", f"ppl:{__file__}", "--device", "tpu"])
    assert e.value.code == 2 and "--device" in capsys.readouterr().err
    if torch.cuda.is_available():
        return
    rc = main(["eval", str(tmp_path / "no-run"), "--tasks", f"ppl:{__file__}", "--device", "cuda"])
    err = capsys.readouterr().err
    assert rc == 2 and "--device cuda" in err and "no-run" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("flag, value", [("--limit", "-3"), ("--batch-tokens", "0"), ("--batch-tokens", "-1"),
                                         ("--ppl-tokens", "-5"), ("--ppl-tokens", "0")])
def test_a_number_out_of_range_is_one_line_before_the_model_loads(tmp_path, capsys, flag, value):
    """`--limit -3` printed a task row with n 0 and no metric (exit 0); `--ppl-tokens -5` scored a
    text cut 5 tokens short of its end (Python's negative slice) as if it were the limit."""
    from pretrain.cli import main

    rc = main(["eval", str(tmp_path / "no-run"), "--tasks", f"ppl:{__file__}", "--quiet", flag, value])
    err = capsys.readouterr().err
    assert rc == 2 and flag in err and "no-run" not in err, err


def test_a_damaged_checkpoint_is_said_or_one_line_naming_it(tiny_run, sample_text, tmp_path, capsys):
    """A newer checkpoint cut short in a copy (its marker survived) is passed over as the trainer
    passes it over, and said: eval scored step 5 without a word. One whose data file has the right
    size but other bytes is one line naming it, not DCP's per-rank traceback."""
    import shutil

    from pretrain.cli import main
    from pretrain.train import checkpoint as ck

    # first, folders that are no run: said as what they are (a corpus job's OUT read as a training
    # config: "unknown config key 'steps'"; a missing one: "config file not found: DIR/config.toml")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name in ("config.toml", "plan.json", "stats.json"):
        (corpus / name).write_text("steps = []\n" if name == "config.toml" else "{}")
    for folder, said in ((corpus, "the output of a corpus job (plan.json, stats.json), not a training run"),
                         (tmp_path / "nothere", "no such run directory")):
        assert main(["sample", str(folder), "--tokens", "2"]) == 2
        assert f"pretrain sample: error: {folder}: {said}" in capsys.readouterr().err
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run, ignore=shutil.ignore_patterns("eval"))
    newest = ck.step_dir(run / "checkpoints", 10)
    data = max(newest.glob("*.distcp"), key=lambda p: p.stat().st_size)
    good, size = data.read_bytes(), data.stat().st_size
    argv = ["eval", str(run), "--tasks", f"ppl:{sample_text}", "--quiet"]
    data.write_bytes(good[: size // 2])
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert (f"{newest}: not used: {ck.MARKER} lists {data.name} of {size:,} bytes, it has {size // 2:,}; "
            "using step 5") in err
    assert (run / "eval" / "step_0000005.json").is_file()
    data.write_bytes(bytes(b ^ 0xFF for b in good))  # same size, other bytes: the digest says so
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"pretrain eval: error: {newest}: damaged: {data.name} does not match the digest "
                          "recorded when it was saved") and err.endswith("--step 5 uses the complete "
                                                                         "checkpoint before it"), err
    assert "Traceback" not in err and len(err.splitlines()) == 1
    # a checkpoint saved before digests: warned, then DCP's failure is still one line
    marker = json.loads((newest / ck.MARKER).read_text())
    del marker[ck.DIGEST]
    (newest / ck.MARKER).write_text(json.dumps(marker))
    assert main(argv) == 2
    warned, err = capsys.readouterr().err.strip().splitlines()
    assert warned.startswith(f"{newest}: warning: saved without digests")
    assert err.startswith(f"pretrain eval: error: {newest}: a data file of this checkpoint ({data.name}) "
                          "does not read: UnpicklingError") and err.endswith("the checkpoint is damaged")


def test_a_run_folder_that_cannot_take_the_results_is_one_line_first(tiny_run, sample_text, tmp_path, capsys):
    """A teammate's run folder we cannot write into (here RUN/eval is a file, which root cannot write
    through either) failed at the first task's write, after scoring it; now before the model loads,
    saying -o."""
    import shutil

    from pretrain.cli import main

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run, ignore=shutil.ignore_patterns("eval"))
    (run / "eval").write_text("not a folder")
    assert main(["eval", str(run), "--tasks", f"ppl:{sample_text}", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"pretrain eval: error: cannot write the results into {run / 'eval'}/ ({run / 'eval'} is "
                   "not a writable folder); -o PATH writes them elsewhere (e.g. -o run-eval.json)")
    elsewhere = ["-o", str(tmp_path / "r.json")]
    assert main(["eval", str(run), "--tasks", f"ppl:{sample_text}", "--quiet", *elsewhere]) == 0
def test_a_corpus_job_into_a_run_folder_is_refused(tiny_run, tmp_path, capsys):
    # W2 (session 9): `pretrain curate IN -o RUN` said RUN "holds files that are not a pretrain
    # job's (config.toml, ...)"; it names what RUN is, in one line, and writes nothing into it.
    from pretrain.cli import main

    (tmp_path / "in.jsonl").write_text(json.dumps({"text": "one line of text"}) + "\n")
    before = sorted(p.name for p in tiny_run.iterdir())
    assert main(["curate", str(tmp_path / "in.jsonl"), "--output", str(tiny_run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{tiny_run} is a training run's folder" in err[0], err
    assert sorted(p.name for p in tiny_run.iterdir()) == before


def test_benchmarks_are_found_under_pretrain_shared_data(tmp_path, monkeypatch):
    # W2 (session 9): every other part of the project reads PRETRAIN_SHARED_DATA; eval looked only
    # in $PRETRAIN_BENCHMARKS and ../shared/data/benchmarks, so from a worktree `--tasks arc_easy`
    # found nothing. The real folder is found through it, and `--benchmarks` still wins.
    from pretrain.eval.suite import benchmarks_dir
    from pretrain.eval.tasks import check_spec

    if not (SHARED_DATA / "benchmarks" / "llm-foundry" / "arc_easy.jsonl").is_file():
        pytest.skip("needs ../shared/data/benchmarks")
    monkeypatch.chdir(tmp_path)  # no ../shared/data beside it
    monkeypatch.delenv("PRETRAIN_BENCHMARKS", raising=False)
    monkeypatch.setenv("PRETRAIN_SHARED_DATA", str(SHARED_DATA))
    assert Path(benchmarks_dir(None)) == SHARED_DATA / "benchmarks"
    check_spec("arc_easy", benchmarks_dir(None))  # passes: the file is there
    assert benchmarks_dir("elsewhere") == "elsewhere"  # as given: the caller says it is missing
    monkeypatch.setenv("PRETRAIN_BENCHMARKS", str(tmp_path))  # an existing folder comes first
    assert benchmarks_dir(None) == str(tmp_path)


def test_no_benchmarks_folder_names_every_place_looked(tmp_path, monkeypatch):
    from pretrain.errors import UserError
    from pretrain.eval.suite import benchmarks_dir
    from pretrain.eval.tasks import check_spec

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PRETRAIN_BENCHMARKS", str(tmp_path / "b"))
    monkeypatch.delenv("PRETRAIN_SHARED_DATA", raising=False)
    assert benchmarks_dir(None) is None
    with pytest.raises(UserError) as e:
        check_spec("arc_easy", benchmarks_dir(None))
    for place in (f"$PRETRAIN_BENCHMARKS = {tmp_path / 'b'} (no such folder)",
                  "$PRETRAIN_SHARED_DATA/benchmarks (unset)", "../shared/data/benchmarks (no such folder)"):
        assert place in str(e.value), str(e.value)


def test_sample_says_how_many_tokens_did_not_decode(tiny_run, capsys):
    # W2 (session 9): a barely trained byte model sampled hot emits bytes that form no character;
    # they print as U+FFFD and one stderr line counts the tokens (at least one per mark).
    from pretrain.cli import main

    assert main(["sample", str(tiny_run), "--tokens", "60", "--temperature", "50", "--top-k", "0"]) == 0
    out, err = capsys.readouterr()
    marks = out.count("\N{REPLACEMENT CHARACTER}")
    lines = [x for x in err.splitlines() if "did not decode to valid UTF-8" in x]
    assert marks > 0 and len(lines) == 1, (out, err)
    assert marks <= int(lines[0].split("pretrain sample: ")[1].split(" of ")[0]) <= 61, lines


def test_a_run_killed_before_its_first_save_says_so(tiny_run, tmp_path, capsys):
    """A run stopped before its first checkpoint (SIGKILL, a timeout) said only "no complete
    checkpoint" to sample/eval/export: now the step its metrics reached and when it saves."""
    import shutil

    from pretrain.cli import main

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run, ignore=shutil.ignore_patterns("checkpoints", "eval"))
    last = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if '"event"' not in x][-1]
    every = tomllib.loads((run / "config.toml").read_text())["checkpoint"]["every"]
    for argv in (["sample", str(run), "--tokens", "2"], ["export", str(run), "-o", str(tmp_path / "m.st")]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert f"no complete checkpoint; it trained to step {last['step']:,} and saves " in err, err
        assert (f"every {every:,} steps" if every else "saves first at step") in err, err


def test_a_step_without_a_checkpoint_is_said_with_the_steps_there_are(tiny_run, tmp_path, capsys):
    """`sample RUN --step 7` of a run saving every 100 steps said "step_0000007 is not a complete
    checkpoint; the newest complete one is step 300" (session 11): it does not exist; the steps that
    do are listed (truth: the folders holding a COMPLETE.json marker)."""
    import shutil

    from pretrain.cli import main

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    done = sorted(int(p.name.split("_")[1]) for p in (run / "checkpoints").glob("step_*")
                  if (p / "COMPLETE.json").is_file())
    (run / "checkpoints" / "step_0000007").mkdir()  # a save killed before its marker
    for step, what in ((3, "does not exist"), (7, "is not a complete checkpoint")):
        assert main(["sample", str(run), "--step", str(step), "--tokens", "1"]) == 2
        err = capsys.readouterr().err
        steps = f"step{'s' * (len(done) > 1)} {', '.join(map(str, done))}"
        assert f"step_{step:07d} {what}; the complete ones: {steps}" in err, err


def test_a_task_file_with_nothing_readable_says_why_in_words(tmp_path):
    """The error printed the skip counts as a Python dict ({'bad_value': 1, ...}) to the user."""
    from pretrain.errors import UserError
    from pretrain.eval.tasks import load_file

    p = tmp_path / "t.jsonl"
    p.write_text('not json\n{"query": "q", "choices": ["a"], "gold": 5}\n{"query": "q"}\n')
    with pytest.raises(UserError) as e:
        load_file(p)
    assert str(e.value).endswith("(3 skipped: 1 bad json, 1 bad value, 1 missing key)"), e.value


@pytest.mark.parametrize("spec, shots, rel", [("arc_easy", 0, "llm-foundry/arc_easy.jsonl"),
                                              ("gsm8k", 0, "gsm8k/test.jsonl"),
                                              ("mmlu", 5, "mmlu/mmlu-dev.jsonl")])
def test_a_missing_benchmark_file_is_named_with_where_it_comes_from(tmp_path, capsys, monkeypatch, spec,
                                                                   shots, rel):
    """Newcomer sweep (session 13): `--benchmarks B --tasks arc_easy` without the file said
    "B/llm-foundry/arc_easy.jsonl: no such file" and nothing on how to get it (nothing is
    downloaded). The origin named is the repository path the shared data's MANIFEST.tsv records."""
    import csv

    from pretrain.cli import main

    manifest = data_file("MANIFEST.tsv")
    origin = {r[0]: r for r in csv.reader(manifest.open(), delimiter="\t") if r}[f"benchmarks/{rel}"]
    bench = tmp_path / "bench"
    for sub in ("llm-foundry", "gsm8k", "mmlu"):
        (bench / sub).mkdir(parents=True)
    (bench / "mmlu" / "mmlu-val.jsonl").write_text("{}\n")  # mmlu itself there, its dev split not
    assert main(["eval", str(tmp_path / "no-run"), "--tasks", spec, "--shots", str(shots), "--quiet",
                 "--benchmarks", str(bench)]) == 2
    err = capsys.readouterr().err.strip()
    assert f"{bench / rel}: no such file" in err and len(err.splitlines()) == 1, err
    assert origin[2] in err  # the repository
    path = origin[3] if "{" not in origin[3] else origin[3].split("/{")[0]  # MMLU: data/{dev,val,test}
    assert path in err, err
    if shots:
        return
    # no benchmarks folder anywhere (a fresh clone): the file it must hold, and where that comes from
    monkeypatch.delenv("PRETRAIN_BENCHMARKS", raising=False)
    monkeypatch.setenv("PRETRAIN_SHARED_DATA", str(tmp_path / "none"))
    monkeypatch.chdir(tmp_path)
    assert main(["eval", str(tmp_path / "no-run"), "--tasks", spec, "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert f"--benchmarks DIR holding {rel}" in err and origin[2] in err and path in err, err


def test_fewshot_draws_equal_sampling_from_the_copied_list_without_the_copy():
    """Shots came from `rng.sample(docs[:i] + docs[i + 1:], k)`: a copy of every example per
    example, quadratic (500,000 examples, a task file's bound: ~11 ms each, ~1.6 h before any
    forward pass). The truth is that expression, on the same seeds; the copy is gone (a list that
    refuses slicing would raise), and the draws are the same for every i, k and length tried."""
    import random

    from pretrain.eval.tasks import DELIM, SHOT_SEP, Task, fewshot_prefix, solved

    class NoSlices(list):
        def __getitem__(self, key):
            assert not isinstance(key, slice), "the examples were copied"
            return super().__getitem__(key)

    for n in (1, 2, 3, 7, 50):
        docs = [{"context": f"c{i}", "continuation": f"d{i}"} for i in range(n)]
        task = Task("t", "lm", "-", NoSlices(docs))
        for i in range(n):
            for k in (1, 2, 5, 60):
                rng = random.Random(f"1234:{i}")
                pool = docs[:i] + docs[i + 1:]
                want = [solved(task, d) for d in rng.sample(pool, min(k, len(pool)))]
                got = fewshot_prefix(task, i, k, 1234)
                assert got == (SHOT_SEP.join(want) + SHOT_SEP if want else SHOT_SEP), (n, i, k)
    assert DELIM in got


def test_mmlu_shots_by_subject_equal_the_filtered_pool():
    """MMLU shots come from the dev split's examples of the same subject (else any): that pool was
    filtered again for every example (a dev file of 500,000 lines: quadratic). The truth is the
    filter itself, with the same seeds; the pool is now grouped once."""
    import random

    from pretrain.eval.tasks import SHOT_SEP, Task, fewshot_prefix, solved

    def ex(subject, i):
        return {"subject": subject, "question": f"{subject} q{i}", "options": ["a", "b", "c", "d"],
                "choices": ["A", "B", "C", "D"], "gold": i % 4}

    dev = [ex(s, i) for i in range(12) for s in ("law", "math", "art")]
    docs = [ex("law", 100), ex("math", 101), ex("geology", 102)]  # geology: no dev examples
    task = Task("mmlu", "mmlu", "-", docs, shots_pool=dev)
    for i, doc in enumerate(docs):
        pool = [d for d in dev if d.get("subject") == doc["subject"]] or dev
        want = random.Random(f"7:{i}").sample(pool, 5)
        got = fewshot_prefix(task, i, 5, 7)
        assert got.endswith(SHOT_SEP.join(solved(task, d) for d in want) + SHOT_SEP), i
