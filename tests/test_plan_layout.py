"""The one layout type: its validity rules name every broken rule, and a plan becomes a training
config the trainer's own loader and validation accept."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pretrain.plan.layout import Layout, problems
from pretrain.plan.shapes import get_shape

ROOT = Path(__file__).resolve().parents[1]


def _problems(lay, shape="llama-3-405b", **kw):
    s = get_shape(shape)
    return problems(lay, n_layers=s.n_layers, n_heads=s.n_heads, n_kv_heads=s.n_kv_heads, seq_len=s.seq_len,
                    **kw)


def test_llama3_layouts_are_valid():
    # Llama 3 (Dubey et al. 2024, Table 4): TP8 PP16 DP128 at 8k; TP8 CP16 PP16 DP8 at 128k
    assert _problems(Layout(tp=8, pp=16, dp_shard=128, zero=1, sp=True), world_size=16384,
                     batch_seqs=2048) == []
    long = Layout(tp=8, pp=16, cp=16, dp_shard=8, zero=1, sp=True)
    s = get_shape("llama-3-405b")
    assert problems(long, world_size=16384, n_layers=s.n_layers, n_heads=s.n_heads, seq_len=131072,
                    batch_seqs=128) == []


def test_every_broken_rule_is_named():
    lay = Layout(tp=3, pp=64, v=4, cp=5, dp_replicate=2, zero=1, sp=False, recompute="some")
    found = _problems(lay, world_size=1000, batch_seqs=7)
    text = " | ".join(found)
    for needle in ("not the 1000 GPUs", "n_heads=128 is not divisible by tp=3", "n_kv_heads=8",
                   "n_layers=126 < pp x v = 256", "seq_len=8192 is not divisible by 10",
                   "zero=1 needs sharded",
                   "recompute must be one of", "does not divide into dp x mbs"):
        assert needle in text, (needle, found)
    assert problems(Layout(sp=True)) == ["sequence parallelism needs tp > 1"]
    assert problems(Layout(v=2)) == ["v=2 virtual stages need pp > 1"]
    assert problems(Layout(tp=0)) == ["tp must be >= 1, got 0"]


def test_interleaving_needs_micro_batches_divisible_by_pp():
    lay = Layout(pp=4, v=2, dp_shard=2, zero=1)
    assert problems(lay, batch_seqs=16) == []  # 8 micro-batches
    assert problems(lay, batch_seqs=12) == ["interleaving needs micro-batches (6) divisible by pp=4"]


def _plan(tmp_path, *args):
    out = tmp_path / "recipe.toml"
    r = subprocess.run([sys.executable, "-m", "pretrain", "plan", *args, "--emit-recipe", str(out), "--json"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    return r, out


@pytest.mark.parametrize("args,world", [
    (("--model", "llama-3-8b", "--gpus", "16", "--gpu", "h100"), 16),
    (("--model", "llama-2-7b", "--gpus", "8", "--gpu", "a100-80gb", "--layout",
      "tp=2,pp=2,zero=1,recompute=selective,sp=1"), 8),
    (("--model", "llama-2-13b", "--gpus", "32", "--layout", "tp=4,pp=4,v=2,zero=0"), 32),
    # run-it-twice review: the search picked tp=4,cp=8 with sequence parallelism, which the trainer refuses
    (("--model", "llama-3-8b", "--seq-len", "131072", "--gpus", "64", "--batch-tokens", "4M"), 64),
])
def test_emitted_recipe_passes_the_trainers_validation(tmp_path, args, world):
    from pretrain import config
    from pretrain.train.config import RunConfig
    from pretrain.train.model import resolve_shape
    from pretrain.train.parallel import dims_from_config

    r, path = _plan(tmp_path, *args)
    assert r.returncode == 0, r.stderr
    cfg = config.load(RunConfig, path)
    dims = dims_from_config(cfg.parallel)
    dims.validate(world)
    dims.check_shape(resolve_shape(cfg.model), cfg.parallel)
    shape = resolve_shape(cfg.model)
    tokens = cfg.data.batch_size * cfg.train.grad_accum * dims.dp * shape.seq_len
    assert tokens == 4 * 2**20  # the plan's global batch (--batch-tokens 4M default)
    if cfg.parallel.pp > 1:
        assert cfg.data.batch_size % cfg.parallel.pp_microbatches == 0
    # the header's "set data.path (or data.kind/sources)" with sources only: the error said
    # "data.path is required for data.kind='text'", not the kind it meant
    from pretrain.errors import UserError
    from pretrain.train.data import build_loaders

    with pytest.raises(UserError, match=r'data.sources \(web\).*set data.kind = "tokens"'):
        build_loaders(config.load(RunConfig, path, ["data.sources.web=tokens/web"]).data, shape.seq_len)


def test_emitted_recipe_is_planned_for_this_trainers_activations(tmp_path):
    """The default (fused) plan's choice does not fit `pretrain train`'s saved tensors (checked by
    planning that layout with --activations pretrain); the recipe holds what a plan with
    --activations pretrain picks, and its header says so."""
    import json

    base = ("--model", "llama-3-8b", "--gpus", "16", "--gpu", "h100")
    r, path = _plan(tmp_path, *base)
    assert r.returncode == 0, r.stderr
    fused = json.loads(r.stdout)["layout"]["label"]
    ours = subprocess.run([sys.executable, "-m", "pretrain", "plan", *base, "--activations", "pretrain",
                           "--json"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    ours = json.loads(ours.stdout)["layout"]["label"]
    header = [line for line in path.read_text().splitlines() if line.startswith("#")]
    assert header[0].endswith(f"{ours} on 16 h100") and "--activations pretrain" in header[1]
    assert fused != ours and any(fused in line for line in header)
    path.unlink()
    r, path = _plan(tmp_path, *base, "--layout", fused.replace(",dp=16", ""))  # the fused choice, given
    assert r.returncode == 1 and not path.exists()
    assert r.stderr.strip().splitlines()[-1].startswith(f"--emit-recipe: {fused} needs ")


def test_emit_recipe_refuses_what_the_trainer_cannot_run(tmp_path):
    r, path = _plan(tmp_path, "--model", "gpt2-124m", "--gpus", "8", "--layout", "tp=1,pp=2,zero=0")
    assert r.returncode == 2 and "untied embeddings" in r.stderr and not path.exists()


def _trainer_accepts(path, world):
    from pretrain import config
    from pretrain.train.config import RunConfig
    from pretrain.train.model import resolve_shape
    from pretrain.train.parallel import dims_from_config

    cfg = config.load(RunConfig, path)
    dims = dims_from_config(cfg.parallel)
    dims.validate(world)
    dims.check_shape(resolve_shape(cfg.model), cfg.parallel)
    return cfg


def test_emit_recipe_with_context_parallelism(tmp_path):
    args = ("--model", "llama-3-8b", "--seq-len", "32768", "--gpus", "16", "--batch-tokens", "1M",
            "--layout", "tp=8,cp=2,zero=3,recompute=full")
    r, path = _plan(tmp_path, *args)
    assert r.returncode == 0, r.stderr
    assert _trainer_accepts(path, 16).parallel.cp == 2  # the trainer's own validation, not only the loader


@pytest.mark.parametrize("args,status", [
    (("--model", "llama-3-70b", "--gpus", "1", "--gpu", "h100"), 1),  # no layout fits
    (("--model", "gpt2-124m", "--gpus", "8", "--layout", "tp=1,pp=2,zero=0"), 2),  # trainer cannot run it
])
def test_a_refused_recipe_says_an_earlier_file_is_still_there(tmp_path, args, status):
    """Run it twice: a second `--emit-recipe FILE` that is refused leaves the first one's FILE as it
    was; the line must say so, or `pretrain train FILE` runs an earlier plan believing it the new one."""
    out = tmp_path / "recipe.toml"
    out.write_text("# pretrain plan: an earlier recipe\n")
    r, path = _plan(tmp_path, *args)
    assert r.returncode == status
    assert f"{path} still holds an earlier file, left as it was" in r.stderr.strip().splitlines()[-1]
    assert path.read_text() == "# pretrain plan: an earlier recipe\n"

@pytest.mark.parametrize("layout,refusal", [
    ("tp=2,cp=2,pp=2,sp=1", "cp=2 with pp=2"),  # run-it-twice review: it was written, the trainer refused it
    ("tp=2,cp=2,pp=2", "cp=2 with pp=2"),
    ("tp=4,cp=2,sp=1", "cp=2 with sequence parallelism"),
])
def test_emit_recipe_refuses_context_parallel_layouts_the_trainer_refuses(tmp_path, layout, refusal):
    """CP with PP, SP or HSDP is a known refusal of the trainer: the planner's trainer rules hold it
    too, so --emit-recipe writes nothing and says why in one line (it used to write a recipe that
    `pretrain train` then refused)."""
    r, path = _plan(tmp_path, "--model", "llama-3-8b", "--gpus", "8", "--batch-tokens", "1M",
                    "--layout", layout)
    assert r.returncode == 2 and not path.exists(), (r.returncode, r.stderr)
    last = r.stderr.strip().splitlines()[-1]
    assert "--emit-recipe" in last and refusal in last, last


def test_trainer_rules_hold_the_context_parallel_refusals():
    lay = Layout(cp=2, dp_shard=2, dp_replicate=2, zero=3)
    assert problems(lay) == []  # the planner models HSDP x CP
    assert any("HSDP" in p for p in problems(lay, trainer=True))
    assert any("rotary" in p for p in problems(Layout(cp=2), learned_pos=True, trainer=True))
