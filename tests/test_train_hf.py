"""Hugging Face out: transformers loads `pretrain export --format hf` as is and computes what we compute.

The independent truth is transformers itself (LlamaForCausalLM, GPT2LMHeadModel, AutoTokenizer):
logits of the exported folder against our model's on the same ids, greedy generation token for
token, and the tokenizer's ids against the ones training used.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from pretrain.errors import UserError
from pretrain.train.model import generate
from pretrain.train.runs import load_run_model
from pretrain.train.testing import tiny_config
from pretrain.train.trainer import Trainer

transformers = pytest.importorskip("transformers")
ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("restore_torch_threads")

GPT2 = ["model.mlp=gelu", "model.norm=layernorm", "model.learned_pos=true", "model.bias=true",
        "model.n_kv_heads=4"]
VARIANTS = {
    "llama-gqa-untied": [],  # tiny config: 4 query heads over 2 KV heads, separate output head
    "llama-tied": ["model.tied_embeddings=true"],
    "gpt2-tied": [*GPT2, "model.tied_embeddings=true"],
}


def _train(out: Path, text: Path, *over: str) -> Path:
    # 10 steps at lr 3e-3: the weights are far from their initialization (a permutation error shows)
    Trainer(tiny_config(out, text, "train.steps=10", "train.resume=false", *over), quiet=True).fit()
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory, text) -> dict:
    root = tmp_path_factory.mktemp("hf_runs")
    return {name: _train(root / name, text, *over) for name, over in VARIANTS.items()}


def _export(run: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pretrain", "export", str(run), "--format", "hf", "-o", str(out), *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("variant", VARIANTS)
def test_transformers_loads_export_with_same_logits_and_generation(runs, variant, tmp_path):
    from pretrain.train.hf_io import export_hf

    out = tmp_path / "hf"
    export_hf(runs[variant], out, max_shard_bytes=100_000)
    index = json.loads((out / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 1  # sharded past the size, with an index
    hf = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    assert type(hf).__name__ == ("GPT2LMHeadModel" if variant.startswith("gpt2") else "LlamaForCausalLM")
    ours, _, _ = load_run_model(runs[variant])
    ids = torch.randint(0, 257, (2, 32), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        diff = (ours(ids) - hf(ids).logits).abs().max().item()
    assert diff < 1e-5, f"{variant}: logits differ by {diff}"
    prompt = ids[:1, :8]
    theirs = hf.generate(prompt, max_new_tokens=24, do_sample=False, eos_token_id=None, pad_token_id=0)
    assert theirs.tolist() == generate(ours, prompt, 24, temperature=0).tolist()


def test_bf16_single_file_export_and_rerun_replaces_shards(runs, tmp_path):
    from pretrain.train.hf_io import export_hf

    out = tmp_path / "hf"
    export_hf(runs["llama-tied"], out, max_shard_bytes=100_000)
    export_hf(runs["llama-tied"], out, "bf16")  # rerun into the same folder (the CLI: end-to-end test)
    assert sorted(p.name for p in out.glob("model*")) == ["model.safetensors"]  # stale shards gone
    hf = transformers.AutoModelForCausalLM.from_pretrained(out, dtype=torch.bfloat16)
    ours, _, _ = load_run_model(runs["llama-tied"])
    for name, p in ours.named_parameters():
        if name == "tok_emb.weight":
            assert torch.equal(hf.model.embed_tokens.weight, p.detach().bfloat16())
    assert json.loads((out / "config.json").read_text())["dtype"] == "bfloat16"


def test_export_refuses_a_shape_transformers_has_no_class_for(text, tmp_path):
    from pretrain.train.hf_io import export_hf

    run = _train(tmp_path / "run", text, "model.mlp=gelu", "train.steps=1")  # gelu MLP + rotary: no class
    with pytest.raises(UserError, match="matches no transformers architecture"):
        export_hf(run, tmp_path / "hf")
    assert not (tmp_path / "hf" / "config.json").exists()


# --- the tokenizer ---------------------------------------------------------------------------------

TEXTS = [
    "Hello, world! The quick brown fox.",
    "A page that quotes <|endoftext|> in its text, mid-sentence.",  # must stay text, as in training
    "  leading spaces, tabs\tand a newline\nthen unicode: café, 東京, 🙂",
    "<|endoftext|>",
]


def test_autotokenizer_encodes_like_pretrain_tokenize(text, tmp_path):
    from pretrain.tokens.shards import TokenDir
    from pretrain.tokens.tokenizer import EOT, train_tokenizer
    from pretrain.train.hf_io import export_hf

    prose = Path(text).read_text()[:200_000]
    bpe = train_tokenizer([prose[i:i + 2000] for i in range(0, len(prose), 2000)], 400)
    bpe.save(str(tmp_path / "tok.json"))
    corpus = tmp_path / "corpus.jsonl"
    docs = [*TEXTS, *(prose[i:i + 3000] for i in range(0, 60_000, 3000))]
    corpus.write_text("".join(json.dumps({"text": t}) + "\n" for t in docs))
    from pretrain.tokens.pipeline import tokenize_corpus  # `pretrain tokenize`'s engine, in this process

    tokenize_corpus([str(corpus)], str(tmp_path / "tok.json"), str(tmp_path / "tokens"), "web", 1)
    tokens = TokenDir(tmp_path / "tokens")
    run = _train(tmp_path / "run", text, "data.kind=tokens", f"data.sources.web={tmp_path / 'tokens'}",
                 "data.weights.web=1.0", "model.vocab_size=400", "train.steps=1")
    export_hf(run, tmp_path / "hf")
    tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    assert tok.eos_token == EOT and tok.eos_token_id == tokens.manifest["eot_id"]
    for i, t in enumerate(TEXTS):
        assert tok(t)["input_ids"] + [tok.eos_token_id] == tokens.document(i).tolist(), t  # EOT ends a doc
        assert tok.decode(tok(t)["input_ids"]) == t


def test_byte_level_run_gets_an_equivalent_tokenizer(runs, tmp_path):
    from pretrain.train.hf_io import export_hf

    export_hf(runs["llama-tied"], tmp_path / "hf")  # a byte-level run: ids are UTF-8 bytes, 256 ends a text
    tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    assert (tok.eos_token, tok.eos_token_id) == ("<|endoftext|>", 256)
    for t in TEXTS:
        assert tok(t)["input_ids"] == list(t.encode("utf-8")), t
        assert tok.decode(tok(t)["input_ids"]) == t


# --- import: a run that starts from a transformers folder ------------------------------------------

# The tiny training config's shape, so the distributed helpers' configs apply unchanged; weights 5x
# transformers' default scale, so that logits are far from uniform and a layout error shows.
TINY_LLAMA = dict(vocab_size=257, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                  rms_norm_eps=1e-5, tie_word_embeddings=False, rope_theta=10000.0, initializer_range=0.1)
TINY_GPT2 = dict(vocab_size=257, n_embd=64, n_inner=176, n_layer=2, n_head=4, n_positions=32,
                 resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, tie_word_embeddings=True,
                 initializer_range=0.1)


def _save_random(kind: str, folder: Path) -> Path:
    torch.manual_seed(1)
    if kind == "llama":
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**TINY_LLAMA))
    elif kind == "llama3":  # Llama 3.1's rotary scaling, with an original context short enough to matter
        rope = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 16}
        cfg = {k: v for k, v in TINY_LLAMA.items() if k != "rope_theta"}
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**cfg, rope_parameters=rope))
    elif kind.startswith("qwen2"):  # q/k/v biases; "qwen2-tied": the small Qwen2.5 bases' tied head
        cfg = {**TINY_LLAMA, "tie_word_embeddings": kind == "qwen2-tied"}
        model = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**cfg))
    elif kind == "qwen3":  # per-head q/k norms; head_dim written out (Qwen3Config's default is 128)
        model = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**TINY_LLAMA, head_dim=16))
    elif kind.startswith("mistral"):  # "mistral": window wider than the context; "mistral16": 16 tokens
        window = 16 if kind == "mistral16" else 4096
        cfg = transformers.MistralConfig(**TINY_LLAMA, sliding_window=window)
        model = transformers.MistralForCausalLM(cfg)
    else:
        model = transformers.GPT2LMHeadModel(transformers.GPT2Config(**TINY_GPT2))
    with torch.no_grad():  # norms away from 1 and biases away from 0: a mix-up of them must show
        for p in model.parameters():
            if p.ndim == 1:
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(folder, max_shard_size="100KB")
    if kind == "llama":  # a tokenizer beside it, as on the Hub: ids 0-255 are bytes, 256 ends a text
        from pretrain.tokens.hf_tokenizer import byte_tokenizer

        byte_tokenizer().save(str(folder / "tokenizer.json"))
    return folder


@pytest.fixture(scope="module")
def hf_folders(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("hf_in")
    kinds = ("llama", "llama3", "mistral", "mistral16", "gpt2", "qwen2", "qwen2-tied", "qwen3")
    return {k: _save_random(k, root / k) for k in kinds}


def _tensors(folder: Path) -> dict:
    from safetensors.torch import load_file

    return {k: v for f in sorted(folder.glob("*.safetensors")) for k, v in load_file(str(f)).items()}


@pytest.mark.parametrize("kind", ["llama", "llama3", "mistral", "gpt2", "qwen2", "qwen2-tied", "qwen3"])
def test_import_computes_transformers_loss_and_exports_back_bit_identical(hf_folders, kind, tmp_path):
    import torch.nn.functional as F

    from pretrain import config as cfgmod
    from pretrain.train.config import RunConfig
    from pretrain.train.hf_io import export_hf

    folder = hf_folders[kind]
    assert len(list(folder.glob("*.safetensors"))) > 1  # sharded by save_pretrained, with an index
    cfg = cfgmod.load(RunConfig, None, [f"model.init_from={folder}", f"train.out={tmp_path / 'run'}",
                                        "train.steps=1", "precision.dtype=fp32", "log.tensorboard=false",
                                        "data.path=unused"])
    ids = torch.randint(0, 257, (4, 32), generator=torch.Generator().manual_seed(0))
    theirs = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    with torch.no_grad():
        out = theirs(ids, labels=ids)
    t = Trainer(cfg, loader=_FixedLoader(ids), quiet=True)
    with torch.no_grad():
        logits = t.model(ids)
    got = F.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten()).item()
    assert abs(got - out.loss.item()) < 1e-5, (got, out.loss.item())
    assert (logits - out.logits).abs().max().item() < 1e-4
    t.run_dir.mkdir(parents=True, exist_ok=True)
    t.write_config()  # no training step: the imported weights saved as the run's step-0 checkpoint
    t.save()
    t.ckpt.wait()
    export_hf(tmp_path / "run", tmp_path / "back")
    before, after = _tensors(folder), _tensors(tmp_path / "back")
    tied = theirs.config.tie_word_embeddings
    assert sorted(after) == sorted(k for k in before if k != "lm_head.weight" or not tied)
    for k, v in after.items():
        assert torch.equal(v, before[k]), k
    rope = json.loads((folder / "config.json").read_text()).get("rope_parameters")
    assert json.loads((tmp_path / "back" / "config.json").read_text()).get("rope_parameters") == rope


def test_mistral_sliding_window_caps_the_context(hf_folders, tmp_path):
    """Mistral's sliding window (16 here) equals full attention over at most 16 tokens: the import caps
    the context there and computes transformers' logits exactly; a longer context is refused."""
    from pretrain import config as cfgmod
    from pretrain.train.config import RunConfig
    from pretrain.train.hf import apply_init_from

    folder = hf_folders["mistral16"]
    args = [f"model.init_from={folder}", f"train.out={tmp_path / 'run'}", "train.steps=1",
            "precision.dtype=fp32", "log.tensorboard=false", "data.path=unused"]
    cfg = cfgmod.load(RunConfig, None, args)
    assert apply_init_from(cfg).model.seq_len == 16
    theirs = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    ids = torch.randint(0, 257, (4, 32), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        long_theirs = theirs(ids).logits  # 32 tokens: the window bites after token 16
        as_llama = transformers.LlamaForCausalLM.from_pretrained(folder).eval()(ids).logits  # no window
        t = Trainer(cfg, loader=_FixedLoader(ids[:, :16]), quiet=True)
        mine = t.model(ids[:, :16])
    assert (mine - long_theirs[:, :16]).abs().max().item() < 1e-4
    assert (as_llama[:, :16] - long_theirs[:, :16]).abs().max().item() < 1e-4
    assert (as_llama[:, 17:] - long_theirs[:, 17:]).abs().max().item() > 1e-3  # why the context is capped
    with pytest.raises(UserError, match="seq_len=32"):
        apply_init_from(cfgmod.load(RunConfig, None, [*args, "model.seq_len=32"]))


class _FixedLoader:
    """One fixed batch forever (the import test never trains)."""

    def __init__(self, ids):
        self.ids = ids.numpy()

    def next_batch(self, batch_size: int):
        return self.ids[:batch_size]

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


@pytest.mark.slow  # 4 spawned gloo processes: ~45 s on 2 shared cores
def test_continued_training_from_import_under_fsdp_tp_equals_one_process(hf_folders, text, tmp_path):
    """dp_shard=2 x tp=2 on gloo: each rank reads its slices of the transformers checkpoint, and the
    run's losses and gradient norms match one process on the whole global batch."""
    from pretrain.train.testing import run_distributed

    common = [f"model.init_from={hf_folders['llama']}", "train.steps=3", "schedule.warmup_steps=1",
              "checkpoint.every=0", "checkpoint.first_at=1000", "train.resume=false"]
    ref = Trainer(tiny_config(tmp_path / "one", text, "data.batch_size=8", *common), quiet=True).fit()
    over = ["parallel.dp_shard=2", "parallel.tp=2", "data.batch_size=4", *common]
    got = run_distributed("pretrain.train.testing.train_records", 4, str(tmp_path / "four"), str(text), over,
                          timeout=300)  # 4 processes on a loaded 2-core CI machine
    assert all(r == got[0] for r in got)
    for step, ((loss, norm), r) in enumerate(zip(got[0], ref, strict=True), 1):
        assert loss == pytest.approx(r["loss"], rel=1e-5), step
        assert norm == pytest.approx(r["grad_norm"], rel=1e-4), step


@pytest.mark.slow  # two CLI processes (train, export): ~20 s on 2 shared cores
def test_continue_hf_recipe_end_to_end(hf_folders, text, tmp_path):
    """The docs' flow with the shipped recipe: tokenize with the imported tokenizer, continue
    training from the folder, export, and transformers loads the result as is."""
    from pretrain.tokens.pipeline import tokenize_corpus

    base = hf_folders["llama"]
    prose = Path(text).read_text()[:120_000]
    for name, part in (("domain", prose[:60_000]), ("general", prose[60_000:])):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps({"text": part[i:i + 1000]}) + "\n"
                                                        for i in range(0, len(part), 1000)))
        tokenize_corpus([str(tmp_path / f"{name}.jsonl")], str(base / "tokenizer.json"), str(tmp_path / name),
                        name, 1)
    over = [f"model.init_from={base}", "model.seq_len=32", f"train.out={tmp_path / 'run'}", "train.steps=3",
            "schedule.warmup_steps=1", "precision.dtype=fp32", "log.tensorboard=false", "train.threads=1",
            f"data.sources.domain={tmp_path / 'domain'}", f"data.sources.general={tmp_path / 'general'}"]
    cmd = [sys.executable, "-m", "pretrain", "train", str(ROOT / "recipes" / "continue-hf.toml"), "--quiet"]
    res = subprocess.run([*cmd, *(a for o in over for a in ("--set", o))], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    res = _export(tmp_path / "run", tmp_path / "continued")
    assert res.returncode == 0, res.stderr
    assert " in 1 safetensors file, config.json, tokenizer files" in res.stdout, res.stdout  # was "file(s)"
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "continued")
    tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "continued")
    assert tok.eos_token == "<|endoftext|>" and model.config.eos_token_id == 256
    before = transformers.AutoModelForCausalLM.from_pretrained(base)
    changed = [n for n, p in model.named_parameters() if not torch.equal(p, before.get_parameter(n))]
    assert len(changed) == len(list(model.parameters()))  # every tensor trained, none lost on the way


def test_init_from_refuses_tokens_made_with_another_tokenizer(hf_folders, text, tmp_path):
    from pretrain import config as cfgmod
    from pretrain.tokens.pipeline import tokenize_corpus
    from pretrain.tokens.tokenizer import train_tokenizer
    from pretrain.train.config import RunConfig
    from pretrain.train.hf import apply_init_from

    other = tmp_path / "other.json"
    train_tokenizer([Path(text).read_text()[:20_000]], 300).save(str(other))
    (tmp_path / "c.jsonl").write_text(json.dumps({"text": "some domain text"}) + "\n")
    tokenize_corpus([str(tmp_path / "c.jsonl")], str(other), str(tmp_path / "tokens"), "web", 1)
    cfg = cfgmod.load(RunConfig, None, [f"model.init_from={hf_folders['llama']}", "data.kind=tokens",
                                        f"data.sources.web={tmp_path / 'tokens'}"])
    with pytest.raises(UserError, match="another tokenizer"):
        apply_init_from(cfg)


def test_import_refuses_hostile_or_mismatched_folders(hf_folders, tmp_path):
    """An index naming a file outside the folder, a config larger than its weights, pickled weights."""
    import shutil

    from pretrain.train.hf_io import HFCheckpoint, load_hf_weights

    bad = tmp_path / "escape"
    shutil.copytree(hf_folders["llama"], bad)
    index = json.loads((bad / "model.safetensors.index.json").read_text())
    index["weight_map"]["lm_head.weight"] = "../../etc/passwd"
    (bad / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(UserError, match="outside the folder"):
        HFCheckpoint(bad)
    big = tmp_path / "big"
    shutil.copytree(hf_folders["llama"], big)
    cfg = json.loads((big / "config.json").read_text())
    (big / "config.json").write_text(json.dumps({**cfg, "vocab_size": 10**9}))
    from pretrain import config as cfgmod
    from pretrain.train.config import RunConfig
    from pretrain.train.hf import apply_init_from
    from pretrain.train.model import build_model, resolve_shape

    m = apply_init_from(cfgmod.load(RunConfig, None, [f"model.init_from={big}"])).model
    with pytest.raises(UserError, match="describes .* parameters"):
        load_hf_weights(build_model(resolve_shape(m), m), big, "cpu")
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    shutil.copy(hf_folders["llama"] / "config.json", pickled)
    (pickled / "pytorch_model.bin").write_bytes(b"not read")
    with pytest.raises(UserError, match="pickled"):
        HFCheckpoint(pickled)


def test_a_tokenizer_that_prepends_bos_keeps_it_and_names_it(text, tmp_path):
    """Llama-style tokenizer.json (a TemplateProcessing that prepends <|begin_of_text|>): transformers
    keeps prepending it, as that model family expects, and tokenizer_config names it."""
    from tokenizers import AddedToken, processors

    from pretrain.tokens.hf_tokenizer import byte_tokenizer
    from pretrain.train.hf_io import export_hf

    tok = byte_tokenizer()
    tok.add_special_tokens([AddedToken("<|begin_of_text|>", special=True, normalized=False)])
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                                       special_tokens=[("<|begin_of_text|>", bos)])
    tok.save(str(tmp_path / "tokenizer.json"))
    run = _train(tmp_path / "run", text, f"data.tokenizer={tmp_path / 'tokenizer.json'}",
                 "model.vocab_size=258", "train.steps=1")
    export_hf(run, tmp_path / "hf")
    hf = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    assert (hf.bos_token, hf.eos_token) == ("<|begin_of_text|>", "<|endoftext|>")
    assert hf(TEXTS[1])["input_ids"] == [bos, *TEXTS[1].encode()]
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["bos_token_id"] == bos


def test_resumed_run_reads_its_checkpoint_not_the_folder(hf_folders, text, tmp_path):
    """A run started from a folder resumes from its own checkpoint: the folder's weights are not read
    again (here they are gone; only config.json, which gives the shape, is left). The run keeps its
    checkpoints outside RUN (checkpoint.storage, as a bucket would): whether it resumes was decided
    by looking under RUN/checkpoints, so it read the weights again and stopped on the missing file
    (test_a_resume_after_the_init_from_folder_is_gone_... covers RUN/checkpoints)."""
    import shutil

    folder = tmp_path / "base"
    shutil.copytree(hf_folders["llama"], folder)
    over = [f"model.init_from={folder}", "checkpoint.every=2", "train.resume=true", "train.steps=4"]
    ref = Trainer(tiny_config(tmp_path / "ref", text, *over), quiet=True).fit()
    over.append(f"checkpoint.storage={tmp_path / 'store'}")
    Trainer(tiny_config(tmp_path / "run", text, "train.stop_at=2", *over), quiet=True).fit()
    assert not (tmp_path / "run" / "checkpoints").exists()
    for f in folder.glob("model*.safetensors*"):
        f.unlink()
    again = Trainer(tiny_config(tmp_path / "run", text, *over), quiet=True)
    assert again.step == 2
    assert again.fit()[-1]["loss"] == ref[-1]["loss"]


def test_continued_qwen2_exports_what_transformers_computes(hf_folders, text, tmp_path):
    """In and out again: a Qwen2-shaped folder (q/k/v biases, whose rotary permutation must follow
    the weights') trained 3 steps here, exported; transformers' logits on the same ids equal ours
    to 1e-5 and its greedy continuation is ours, token for token. (The import test checks the way
    back bit for bit, but only for weights never trained.)"""
    from pretrain.train.hf_io import export_hf

    over = [f"model.init_from={hf_folders['qwen2']}", "train.steps=3", "schedule.warmup_steps=1",
            "checkpoint.every=100"]
    Trainer(tiny_config(tmp_path / "run", text, *over), quiet=True).fit()
    export_hf(tmp_path / "run", tmp_path / "out")
    theirs = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "out").eval()
    assert type(theirs).__name__ == "Qwen2ForCausalLM"
    ours, _, _ = load_run_model(tmp_path / "run")
    before = transformers.AutoModelForCausalLM.from_pretrained(hf_folders["qwen2"])
    bias = "model.layers.0.self_attn.q_proj.bias"  # trained: a permutation error would now show
    assert not torch.equal(theirs.get_parameter(bias), before.get_parameter(bias))
    ids = torch.randint(0, 257, (2, 32), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert (ours(ids) - theirs(ids).logits).abs().max().item() < 1e-5
        want = theirs.generate(ids[:1, :8], max_new_tokens=8, do_sample=False)[0, 8:].tolist()
    assert generate(ours, ids[:1, :8], 8, temperature=0.0)[0, 8:].tolist() == want


def _swap_ids(tok: Path, a: str, b: str, indent: int | None = None) -> None:
    d = json.loads(tok.read_text())
    vocab = d["model"]["vocab"]
    vocab[a], vocab[b] = vocab[b], vocab[a]
    tok.write_text(json.dumps(d, indent=indent))


@pytest.mark.parametrize("how,said", [("missing", "tokenizer.json is missing (the text is now read as UTF-8"),
                                      ("size", "tokenizer.json changed size ("),
                                      ("content", "tokenizer.json changed content (same size")])
def test_a_resume_whose_init_from_tokenizer_changed_names_it(hf_folders, text, tmp_path, how, said):
    """A run started from a folder, then its tokenizer.json removed or edited: the data's token ids
    differ, and the resume was refused as "loader state was saved for {... 'fingerprint': ...}",
    which does not say the tokenizer is why. The folder's tokenizer here maps "e" and "t" to each
    other's ids, so plain bytes (the file removed) or the original ids (edited back) differ."""
    import shutil

    folder = tmp_path / "base"
    shutil.copytree(hf_folders["llama"], folder)
    tok = folder / "tokenizer.json"
    _swap_ids(tok, "e", "t")
    over = [f"model.init_from={folder}", "checkpoint.every=2", "train.resume=true", "train.steps=4"]
    Trainer(tiny_config(tmp_path / "run", text, "train.stop_at=2", *over), quiet=True).fit()
    if how == "missing":
        tok.unlink()
    else:  # the ids back as they were: same length of JSON, or a longer one
        _swap_ids(tok, "e", "t", indent=1 if how == "size" else None)
    with pytest.raises(UserError) as e:
        Trainer(tiny_config(tmp_path / "run", text, *over), quiet=True)
    assert said in str(e.value) and str(tok.resolve()) in str(e.value) and "\n" not in str(e.value), e.value


def test_a_resume_after_the_init_from_folder_is_gone_uses_the_run_s_own_model(hf_folders, text, tmp_path,
                                                                                capsys):
    """The base folder deleted (a Hugging Face cache cleaned) or not copied with the run directory:
    the resume needs none of its weights, and RUN/config.toml spells out the model; it was refused as
    "FOLDER: no config.json". Steps 3-4 equal the run that never stopped, bit for bit."""
    import shutil

    folder = tmp_path / "base"
    shutil.copytree(hf_folders["llama"], folder)
    tok = shutil.copy(folder / "tokenizer.json", tmp_path / "tokenizer.json")
    over = [f"model.init_from={folder}", f"data.tokenizer={tok}", "checkpoint.every=2", "train.steps=4"]
    ref = Trainer(tiny_config(tmp_path / "ref", text, *over), quiet=True)
    never = {r["step"]: r["loss"] for r in ref.fit()}
    Trainer(tiny_config(tmp_path / "run", text, "train.stop_at=2", *over), quiet=True).fit()
    shutil.rmtree(folder)
    capsys.readouterr()
    t = Trainer(tiny_config(tmp_path / "run", text, *over), quiet=True)
    assert t.step == 2
    assert f"{folder}: no config.json; resuming with the model" in capsys.readouterr().err
    assert {r["step"]: r["loss"] for r in t.fit()} == {3: never[3], 4: never[4]}
    with pytest.raises(UserError, match="no config.json"):  # no checkpoint to resume: still refused
        Trainer(tiny_config(tmp_path / "fresh", text, *over), quiet=True)
