"""The bases users continue training: Qwen2 / Qwen2.5, Qwen3 and SmolLM-style tied Llama, made by
transformers' own classes, imported, trained, exported and loaded back by transformers.

The independent truth is transformers: its logits and greedy generation on the same ids, its class
for the exported folder (`AutoModelForCausalLM`), its parameter count for the planner's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from pretrain import config as cfgmod
from pretrain.errors import UserError
from pretrain.train.config import RunConfig
from pretrain.train.testing import TINY

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.usefixtures("restore_torch_threads")

# The tiny training shape (so tiny_config's distributed workers apply), as each family writes it.
SHAPE = dict(vocab_size=257, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
             rms_norm_eps=1e-6, initializer_range=0.1)
ROPE = {"rope_type": "default", "rope_theta": 1_000_000.0}  # Qwen2.5's and Qwen3's base
FAMILIES = {
    "qwen2": ("Qwen2", dict(SHAPE, rope_parameters=ROPE)),  # Qwen2.5-7B: untied
    "qwen2-tied": ("Qwen2", dict(SHAPE, rope_parameters=ROPE, tie_word_embeddings=True)),  # 0.5B-3B
    "qwen3": ("Qwen3", dict(SHAPE, rope_parameters=ROPE, head_dim=16, tie_word_embeddings=True)),
    # Qwen3-0.6B / 4B: heads wider than hidden/heads (128 vs 64 / 80), so Q is wider than hidden
    "qwen3-wide": ("Qwen3", dict(SHAPE, rope_parameters=ROPE, head_dim=32, tie_word_embeddings=True)),
    # SmolLM-135M: a Llama with a tied head and 3 query heads per KV head (9/3), theta 1e4
    "smollm": ("Llama", dict(SHAPE, num_attention_heads=6, num_key_value_heads=2, hidden_size=48,
                             intermediate_size=128, tie_word_embeddings=True)),
}
NOT_SHAPE = [o for o in TINY if not o.startswith("model.")]


def save_family(kind: str, folder: Path) -> Path:
    """transformers' own model of `kind`, random, every 1-D tensor (norm gains, biases) moved off its
    initial 1 or 0 so that a mix-up of them shows; `save_pretrained` sharded as on the Hub."""
    arch, cfg = FAMILIES[kind]
    torch.manual_seed(3)
    model = getattr(transformers, f"{arch}ForCausalLM")(getattr(transformers, f"{arch}Config")(**cfg))
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim == 1:
                p.add_(torch.randn_like(p) * 0.2)
    model.save_pretrained(folder, max_shard_size="100KB")
    return folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("families")
    return {k: save_family(k, root / k) for k in FAMILIES}


def _config(folder: Path, out: Path, text, *extra: str) -> RunConfig:
    return cfgmod.load(RunConfig, None, [*NOT_SHAPE, f"model.init_from={folder}", f"train.out={out}",
                                         f"data.path={text}", *extra])


@pytest.mark.parametrize("kind", FAMILIES)
def test_import_train_export_and_transformers_agrees_at_both_ends(folders, kind, text, tmp_path):
    """Import: logits equal transformers' on the folder (fp32, < 1e-4). Train 4 steps, export: the
    folder is the family's own class, every tensor moved, logits and greedy tokens equal ours."""
    from pretrain.train.hf_io import export_hf
    from pretrain.train.model import generate
    from pretrain.train.runs import load_run_model
    from pretrain.train.trainer import Trainer

    folder = folders[kind]
    base = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    ids = torch.randint(0, 257, (2, 32), generator=torch.Generator().manual_seed(0))
    t = Trainer(_config(folder, tmp_path / "run", text, "train.steps=4", "schedule.warmup_steps=1"),
                quiet=True)
    assert sum(p.numel() for p in t.model.parameters()) == base.num_parameters() == t.shape.params()
    with torch.no_grad():
        assert (t.model(ids) - base(ids).logits).abs().max().item() < 1e-4
    t.fit()
    export_hf(tmp_path / "run", tmp_path / "hf")
    back = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    assert type(back).__name__ == type(base).__name__
    moved = [n for n, p in back.named_parameters() if not torch.equal(p, base.get_parameter(n))]
    assert len(moved) == len(list(base.parameters()))  # biases and q/k norms trained and written too
    ours, _, _ = load_run_model(tmp_path / "run")
    with torch.no_grad():
        diff = (ours(ids) - back(ids).logits).abs().max().item()
    assert diff < 1e-4, f"{kind}: logits differ by {diff}"
    prompt = ids[:1, :8]
    theirs = back.generate(prompt, max_new_tokens=20, do_sample=False, eos_token_id=None, pad_token_id=0)
    assert theirs.tolist() == generate(ours, prompt, 20, temperature=0).tolist()


@pytest.mark.parametrize("kind", ["qwen2", "qwen3-wide"])
def test_eval_of_a_qwen_folder_runs_our_import_with_transformers_numbers(folders, kind, tmp_path):
    """`pretrain eval HF_DIR` imports Qwen2/Qwen3 as `model.init_from` does (before: transformers
    computed them): logits and greedy tokens equal transformers' on the same folder."""
    import shutil

    from pretrain.eval.lm import from_hf_dir, from_transformers
    from pretrain.eval.scoring import greedy_generate
    from pretrain.tokens.hf_tokenizer import byte_tokenizer

    folder = tmp_path / kind
    shutil.copytree(folders[kind], folder)
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=byte_tokenizer(), eos_token="<|endoftext|>")
    tok.save_pretrained(folder)
    ours = from_hf_dir(folder)
    assert type(ours.start_decoding([[1, 2]])).__name__ == "Decoder"  # train/decode.py: our model
    theirs = from_transformers(transformers.AutoModelForCausalLM.from_pretrained(folder).eval(), tok)
    ids = torch.randint(0, 257, (2, 32), generator=torch.Generator().manual_seed(0))
    assert (ours.logits(ids) - theirs.logits(ids)).abs().max().item() < 1e-4
    # the packed scorer (eval/lm.py tree_forward: its own attention code); row 2 packs two texts
    pos = torch.stack([torch.arange(32), torch.arange(32) % 16])
    causal = torch.ones(32, 32, dtype=torch.bool).tril()
    same_text = (torch.arange(32)[:, None] // 16) == (torch.arange(32)[None, :] // 16)
    mask = torch.stack([causal, causal & same_text])
    keep = torch.tensor([5, 20, 31])
    diff = (ours.tree_logits(ids, pos, mask, keep) - theirs.tree_logits(ids, pos, mask, keep)).abs().max()
    assert diff.item() < 1e-4
    prompts = [[72, 101, 108], list(range(40, 52))]
    assert greedy_generate(ours, prompts, 12) == greedy_generate(theirs, prompts, 12)


@pytest.mark.slow  # 2 spawned gloo processes, two runs each: 15 s idle, ~50 s on loaded shared cores
def test_qwen2_and_qwen3_under_tensor_parallel_equal_one_process(folders, text, tmp_path):
    """tp=2 on gloo: Qwen2's q/k/v biases are column-sharded with their rows (each rank reads its rows
    of the checkpoint's biases); Qwen3's q/k norm gains, replicated, see each rank's heads and get
    their gradients summed over the ranks. Losses and gradient norms match one process."""
    from pretrain.train.testing import run_distributed, tiny_config
    from pretrain.train.trainer import Trainer

    runs, refs = [], []
    for kind in ("qwen2", "qwen3"):
        common = [f"model.init_from={folders[kind]}", "train.steps=3", "schedule.warmup_steps=1",
                  "checkpoint.every=0", "checkpoint.first_at=1000", "train.resume=false"]
        refs.append(Trainer(tiny_config(tmp_path / f"{kind}-one", text, *common), quiet=True).fit())
        runs.append([str(tmp_path / f"{kind}-two"), str(text), ["parallel.tp=2", *common]])
    got = run_distributed("pretrain.train.testing.train_many", 2, runs, timeout=300)
    assert got[0] == got[1]
    for kind, mine, ref in zip(("qwen2", "qwen3"), got[0], refs, strict=True):
        for step, ((loss, norm), r) in enumerate(zip(mine, ref, strict=True), 1):
            assert loss == pytest.approx(r["loss"], rel=1e-5), (kind, step)
            assert norm == pytest.approx(r["grad_norm"], rel=1e-4), (kind, step)


# --- what is refused -------------------------------------------------------------------------------

@pytest.mark.parametrize("over", [
    ["model.qkv_bias=true", "model.qk_norm=true"],  # Qwen2's biases and Qwen3's norms: no such class
    ["model.mlp=gelu", "model.norm=layernorm", "model.learned_pos=true", "model.bias=true",
     "model.n_kv_heads=4", "model.qk_norm=true"],  # GPT-2 has no q/k norms: they would be dropped
])
def test_export_refuses_a_mix_no_transformers_class_computes(text, tmp_path, over):
    from pretrain.train.hf_io import export_hf
    from pretrain.train.testing import tiny_config
    from pretrain.train.trainer import Trainer

    Trainer(tiny_config(tmp_path / "run", text, "train.steps=1", *over), quiet=True).fit()
    with pytest.raises(UserError, match="qk_norm=True.*matches no transformers architecture"):
        export_hf(tmp_path / "run", tmp_path / "hf")
    assert not (tmp_path / "hf" / "config.json").exists()


def _write(folder: Path, cfg) -> Path:
    folder.mkdir()
    (folder / "config.json").write_text(cfg.to_json_string())
    return folder


OTHERS = {  # families a user may try, as transformers' own config classes write them
    "gemma": lambda: transformers.GemmaConfig(num_hidden_layers=1),
    "phi3": lambda: transformers.Phi3Config(num_hidden_layers=1),
    "olmo2": lambda: transformers.Olmo2Config(num_hidden_layers=1),
    "gpt_neox": lambda: transformers.GPTNeoXConfig(num_hidden_layers=1),
}


@pytest.mark.parametrize("mtype", OTHERS)
def test_other_families_are_refused_naming_the_type_and_what_is_supported(mtype, tmp_path):
    from pretrain.train.hf import Unsupported, read_hf_model_config

    folder = _write(tmp_path / mtype, OTHERS[mtype]())
    with pytest.raises(Unsupported) as e:
        read_hf_model_config(folder)
    msg = str(e.value)
    assert f"model_type {mtype!r}" in msg and "llama, mistral, qwen2, qwen3, gpt2" in msg and "\n" not in msg


@pytest.mark.parametrize("change,said", [
    ({"use_sliding_window": True, "sliding_window": 16}, "use_sliding_window"),
    ({"layer_types": ["full_attention", "sliding_attention"]}, "layer_types"),
    ({"layer_types": "full_attention"}, "layer_types 'full_attention' is not a list"),
    ({"head_dim": "16"}, "head_dim '16' is not a positive integer"),
    # a one-token context: plan --model planned it (its --seq-len 1 is refused) and train blamed
    # "model.seq_len", a key the user never set
    ({"max_position_embeddings": 1}, "max_position_embeddings 1 is below 2"),
])
def test_qwen2_with_sliding_window_layers_or_a_broken_field_is_refused(folders, tmp_path, change, said):
    from pretrain.train.hf import read_hf_model_config

    cfg = json.loads((folders["qwen2"] / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, **change}))
    with pytest.raises(UserError, match=said):
        read_hf_model_config(tmp_path)


def test_an_odd_head_dim_is_refused_naming_it(tmp_path):
    """Rotary turns pairs of dimensions: an odd head_dim is a broken config, not a shape."""
    from pretrain.train.hf import read_hf_model_config

    cfg = transformers.Qwen3Config(**SHAPE, head_dim=16).to_dict()
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "head_dim": 15}))  # transformers refuses it too
    with pytest.raises(UserError, match="head_dim 15 is odd"):
        read_hf_model_config(tmp_path)


# --- the planner reads the same folders ------------------------------------------------------------

BASES = {  # the published shapes (config.json on the Hub), written by transformers' config classes
    "qwen2.5-0.5b": lambda: transformers.Qwen2Config(
        vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
        num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
        tie_word_embeddings=True),
    "qwen3-0.6b": lambda: transformers.Qwen3Config(  # 16 heads of 128 over hidden 1024
        vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
        num_attention_heads=16, num_key_value_heads=8, head_dim=128,
        max_position_embeddings=40960, tie_word_embeddings=True),
    "qwen3-1.7b": lambda: transformers.Qwen3Config(
        vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_hidden_layers=28,
        num_attention_heads=16, num_key_value_heads=8, head_dim=128,
        max_position_embeddings=40960, tie_word_embeddings=True),
}


@pytest.mark.parametrize("name", BASES)
def test_plan_of_a_hf_folder_counts_what_transformers_builds(name, tmp_path, capsys):
    """`pretrain plan --model DIR`: the parameter count (Qwen2's q/k/v biases, Qwen3's q/k norms)
    equals transformers' own model built from the same config.json (on the meta device)."""
    from pretrain.cli import main

    cfg = BASES[name]()
    folder = _write(tmp_path / name, cfg)
    with torch.device("meta"):
        truth = transformers.AutoModelForCausalLM.from_config(cfg).num_parameters()
    capsys.readouterr()
    assert main(["plan", "--model", str(folder), "--gpus", "8", "--tokens", "10B", "--seq-len", "4096",
                 "--json"]) == 0
    model = json.loads(capsys.readouterr().out)["model"]
    assert (model["name"], model["params"], model["seq_len"]) == (name, truth, 4096)
    # what train/eval/report call it: the family and the size its model card gives, not "custom"
    from pretrain.train.hf import apply_init_from
    from pretrain.train.model import resolve_shape

    card = {"qwen2.5-0.5b": "Qwen2-0.5B-like", "qwen3-0.6b": "Qwen3-0.6B-like",
            "qwen3-1.7b": "Qwen3-1.7B-like"}
    run = apply_init_from(cfgmod.load(RunConfig, None, [f"model.init_from={folder}"]))
    assert resolve_shape(run.model).name == card[name]
    (folder / "config.json").unlink()  # the folder gone (a run reported elsewhere): named from its shape
    assert resolve_shape(run.model).name == card[name]


def test_a_recipe_planned_from_a_folder_continues_training_it(tmp_path, capsys):
    """`plan --model DIR --emit-recipe`: the recipe starts from the folder (model.init_from), its shape
    agrees with it at the planned context, and the rotary base is the folder's (Qwen's 1e6)."""
    from pretrain.cli import main
    from pretrain.train.hf import apply_init_from

    cfg = BASES["qwen2.5-0.5b"]()
    cfg.rope_parameters = ROPE
    folder = _write(tmp_path / "qwen2.5-0.5b", cfg)
    assert main(["plan", "--model", str(folder), "--gpus", "8", "--tokens", "10B", "--seq-len", "4096",
                 "--emit-recipe", str(tmp_path / "run.toml")]) == 0
    m = apply_init_from(cfgmod.load(RunConfig, str(tmp_path / "run.toml"), [])).model
    assert (Path(m.init_from), m.seq_len, m.rope_theta, m.qkv_bias) == (folder.resolve(), 4096, 1e6, True)
