"""Our scorer against lm-evaluation-harness and transformers on the same small random Llama.

The model is a transformers LlamaForCausalLM with random weights and a byte-level BPE trained here,
saved with save_pretrained: the harness (HFLM, run as a subprocess, offline) reads a task given as
local files through a task YAML; our scorer reads the same files. Per-example log-likelihoods must
agree within 1e-4 and acc/acc_norm exactly; perplexity equals transformers' own loss within 1e-5.
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


def make_hf_model(out: Path, text: str, vocab: int = 512, seed: int = 0) -> Path:
    """A random LlamaForCausalLM and a BPE tokenizer, written with save_pretrained."""
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from pretrain.tokens.tokenizer import EOT, build_bpe

    tok, trainer = build_bpe(vocab)
    tok.train_from_iterator([text[i:i + 2000] for i in range(0, len(text), 2000)], trainer)
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOT, bos_token=EOT).save_pretrained(out)
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      initializer_range=0.1, bos_token_id=0, eos_token_id=0, tie_word_embeddings=False)
    LlamaForCausalLM(cfg).save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory, text) -> Path:
    return make_hf_model(tmp_path_factory.mktemp("hf"), Path(text).read_text()[:200_000])


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
def test_scores_equal_lm_eval(name, hf_dir, task_files, harness):
    from pretrain.eval.harness import evaluate
    from pretrain.eval.lm import from_hf_dir
    from pretrain.eval.tasks import load_file

    ours = evaluate(from_hf_dir(hf_dir), load_file(task_files[name]))
    theirs = harness[f"pt_{name}"]
    assert len(ours["examples"]) == len(theirs["examples"]) == N_DOCS
    for a, b in zip(ours["examples"], theirs["examples"]):
        assert a["lls"] == pytest.approx(b["lls"], abs=1e-4)
        assert (a["acc"], a["acc_norm"]) == (b["acc"], b["acc_norm"])
    assert ours["metrics"]["acc"] == theirs["metrics"]["acc,none"]
    assert ours["metrics"]["acc_norm"] == theirs["metrics"]["acc_norm,none"]


def test_perplexity_equals_transformers(hf_dir, text):
    """One window: our rolling NLL equals transformers' mean cross-entropy with labels."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pretrain.eval.lm import from_transformers
    from pretrain.eval.perplexity import text_perplexity

    model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(hf_dir)
    sample = Path(text).read_text()[5000:5400]
    ids = tok.encode(sample, add_special_tokens=False)
    assert len(ids) < 255  # fits one window with the prefix token
    ours = text_perplexity(from_transformers(model, tok), sample)
    x = torch.tensor([[tok.bos_token_id, *ids]])
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
    sample = Path(text).read_text()[:3000]
    ids = tok.encode(sample, add_special_tokens=False)
    em = from_transformers(model, tok)
    em.max_length = 100
    reqs = rolling_requests(ids, 100, tok.bos_token_id)
    assert [t for _, c in reqs for t in c] == ids and len(reqs) > 3
    total = 0.0
    for ctx, cont in reqs:
        x = torch.tensor([ctx + cont])
        with torch.no_grad():
            total += model(x, labels=x).loss.item() * len(cont)  # ctx is one token: every cont is a label
    assert text_perplexity(em, sample)["nll"] == pytest.approx(total, rel=1e-5)
