"""Our scorer against lm-evaluation-harness and transformers on the same exported model.

A tiny run with a byte-level BPE trained here is exported with `pretrain export --format hf`
(train/hf_io.py): the harness (HFLM, run as a subprocess, offline) reads that folder and a task given
as local files through a task YAML; our scorer reads the run itself, and the folder imported into our
model. Per-example log-likelihoods agree within 1e-4 and acc/acc_norm exactly; perplexity equals
transformers' own loss on the exported folder within 1e-5.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import data_file

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[1]
N_DOCS = 24
TASKS = {"arc_easy": "llm-foundry/arc_easy.jsonl", "commonsense_qa": "llm-foundry/commonsense_qa.jsonl"}

YAML = """task: pt_{name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: {path}
test_split: test
output_type: multiple_choice
doc_to_text: query
doc_to_choice: choices
doc_to_target: gold
metric_list:
  - metric: acc
  - metric: acc_norm
"""


@pytest.fixture(scope="module")
def run_and_export(tmp_path_factory, text, restore_torch_threads) -> tuple[Path, Path]:
    """(run directory, its Hugging Face export): 12 steps of a 512-token BPE model."""
    from pretrain.tokens.tokenizer import build_bpe
    from pretrain.train.hf_io import export_hf
    from pretrain.train.testing import tiny_config
    from pretrain.train.trainer import Trainer

    d = tmp_path_factory.mktemp("exported")
    body = Path(text).read_text()[:200_000]
    tok, trainer = build_bpe(512)
    tok.train_from_iterator([body[i:i + 2000] for i in range(0, len(body), 2000)], trainer)
    tok.save(str(d / "tok.json"))
    cfg = tiny_config(d / "run", text, "train.steps=12", "model.seq_len=256", "model.vocab_size=512",
                      f"data.tokenizer={d / 'tok.json'}", "optim.lr=1e-2")
    Trainer(cfg, quiet=True).fit()
    export_hf(d / "run", d / "hf")
    return d / "run", d / "hf"


@pytest.fixture(scope="module")
def hf_dir(run_and_export) -> Path:
    return run_and_export[1]


@pytest.fixture(scope="module")
def task_files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("tasks")
    out = {}
    for name, rel in TASKS.items():
        lines = data_file(f"benchmarks/{rel}").read_text().splitlines()[:N_DOCS]
        out[name] = d / f"{name}.jsonl"
        out[name].write_text("\n".join(lines) + "\n")
        (d / f"pt_{name}.yaml").write_text(YAML.format(name=name, path=out[name]))
    return out


@pytest.fixture(scope="module")
def harness(hf_dir, task_files, tmp_path_factory) -> dict:
    pytest.importorskip("lm_eval")
    pytest.importorskip("accelerate")
    env = dict(os.environ, HF_HOME=str(tmp_path_factory.mktemp("hf_home")))
    names = ",".join(f"pt_{n}" for n in task_files)
    task_dir = next(iter(task_files.values())).parent
    proc = subprocess.run([sys.executable, str(ROOT / "tests/peers/lm_eval_scores.py"), str(hf_dir),
                           str(task_dir), names], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("name", list(TASKS))
@pytest.mark.parametrize("load", ["run", "hf_dir"])
def test_scores_equal_lm_eval(name, load, run_and_export, task_files, harness):
    from pretrain.eval.harness import evaluate
    from pretrain.eval.lm import from_hf_dir, from_run
    from pretrain.eval.tasks import load_file

    run, hf = run_and_export
    model = from_run(run)[0] if load == "run" else from_hf_dir(hf)
    ours = evaluate(model, load_file(task_files[name]))
    theirs = harness[f"pt_{name}"]
    assert len(ours["examples"]) == len(theirs["examples"]) == N_DOCS
    for a, b in zip(ours["examples"], theirs["examples"]):
        assert a["lls"] == pytest.approx(b["lls"], abs=1e-4)
        assert (a["acc"], a["acc_norm"]) == (b["acc"], b["acc_norm"])
    assert ours["metrics"]["acc"] == theirs["metrics"]["acc,none"]
    assert ours["metrics"]["acc_norm"] == theirs["metrics"]["acc_norm,none"]


def test_perplexity_equals_transformers(run_and_export, text):
    """One window: our rolling NLL on the run equals transformers' mean cross-entropy with labels
    on the exported folder."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pretrain.eval.lm import from_run
    from pretrain.eval.perplexity import text_perplexity

    run, hf_dir = run_and_export
    model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(hf_dir)
    sample = Path(text).read_text()[5000:5400]
    ids = tok.encode(sample, add_special_tokens=False)
    assert len(ids) < 255  # fits one window with the prefix token
    ours_model, _ = from_run(run)
    assert ours_model.encode(sample) == ids
    ours = text_perplexity(ours_model, sample)
    x = torch.tensor([[ours_model.eot_id, *ids]])
    with torch.no_grad():
        ref = model(x, labels=x).loss.item()  # mean NLL of ids given the prefix
    assert ours["tokens"] == len(ids)
    assert ours["perplexity"] == pytest.approx(math.exp(ref), rel=1e-5)
    nbytes = len(sample.encode())
    assert ours["bits_per_byte"] == pytest.approx(ref * len(ids) / (nbytes * math.log(2)), rel=1e-5)


def test_rolling_windows_cover_every_token_once(hf_dir, text):
    """A text longer than the window: the sum over windows equals the per-window transformers losses."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pretrain.eval.lm import from_transformers
    from pretrain.eval.perplexity import rolling_requests, text_perplexity

    model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(hf_dir)
    sample = Path(text).read_text()[:4000]
    ids = tok.encode(sample, add_special_tokens=False)
    em = from_transformers(model, tok)
    em.max_length = 100
    reqs = rolling_requests(ids, 100, em.eot_id)
    assert [t for _, c in reqs for t in c] == ids and len(reqs) > 3
    total = 0.0
    for ctx, cont in reqs:
        x = torch.tensor([ctx + cont])
        with torch.no_grad():
            total += model(x, labels=x).loss.item() * len(cont)  # ctx is one token: every cont is a label
    assert text_perplexity(em, sample)["nll"] == pytest.approx(total, rel=1e-5)


def test_greedy_generation_equals_transformers_generate(run_and_export, text):
    """GSM8K/TriviaQA decoding: our batched greedy tokens on the run equal transformers' generate
    (do_sample=False) on the exported folder, prompts of different lengths in one batch."""
    from transformers import AutoModelForCausalLM

    from pretrain.eval.lm import from_run
    from pretrain.eval.scoring import greedy_generate

    run, hf_dir = run_and_export
    ours, _ = from_run(run)
    model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32)
    body = Path(text).read_text()
    prompts = [ours.encode(body[s:s + n]) for s, n in ((100, 40), (900, 160), (3000, 90))]
    got = greedy_generate(ours, prompts, 10, batch_size=3)
    for p, g in zip(prompts, got):
        ref = model.generate(torch.tensor([p]), attention_mask=torch.ones(1, len(p), dtype=torch.long),
                             max_new_tokens=10, do_sample=False, pad_token_id=0)[0, len(p):]
        assert g == ref.tolist()


def test_token_directory_perplexity_reads_the_shards(run_and_export, text, tmp_path):
    """ppl:TOKENS on a `pretrain tokenize` directory scores the document's tokens (as transformers'
    tokenizer encodes them) and its end-of-text, the same numbers as those ids scored directly."""
    from transformers import AutoTokenizer

    from pretrain.eval.lm import from_run
    from pretrain.eval.perplexity import tokens_perplexity
    from pretrain.eval.suite import perplexity_task, read_stream
    from pretrain.tokens.pipeline import tokenize_corpus

    run, hf_dir = run_and_export
    doc = tmp_path / "doc.txt"
    doc.write_text(Path(text).read_text()[7000:8500])
    tokenize_corpus([str(doc)], run.parent / "tok.json", tmp_path / "tokens", workers=1)
    model, _ = from_run(run)
    tok = AutoTokenizer.from_pretrained(hf_dir)
    expected = tok.encode(doc.read_text(), add_special_tokens=False) + [model.eot_id]
    assert read_stream(model, str(tmp_path / "tokens"), 10_000) == expected
    got = perplexity_task(model, str(tmp_path / "tokens"), 10_000, 4096)["metrics"]
    ref = tokens_perplexity(model, expected)
    assert got["perplexity"] == pytest.approx(ref["perplexity"], rel=1e-9)
    assert got["tokens"] == len(expected)
    # bits per byte counts the document's bytes (the end-of-text is no text), from a run or from its
    # export: transformers' decode kept "<|endoftext|>" (13 bytes a document, bpb ~5% low here)
    from pretrain.eval.lm import from_hf_dir

    nbytes = len(doc.read_text().encode())
    hf = perplexity_task(from_hf_dir(hf_dir), str(tmp_path / "tokens"), 10_000, 4096)["metrics"]
    assert got["bytes"] == hf["bytes"] == nbytes, (got["bytes"], hf["bytes"], nbytes)
    assert hf["bits_per_byte"] == pytest.approx(got["bits_per_byte"], rel=1e-4)
