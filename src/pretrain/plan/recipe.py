"""A plan as a training config: `pretrain plan ... --emit-recipe FILE` writes the TOML `pretrain train`
reads (train/config.py's RunConfig sections), with the planned layout in `[parallel]`.

The trainer implements a subset of what the planner searches (plan/layout.py, `trainer=True`
rules); `trainer_layout` maps the rest onto the nearest layout it runs and says what it changed:
ZeRO-1 becomes FSDP2 without resharding after forward (ZeRO-2-like: the trainer has no ZeRO-1),
replicated data parallelism under a pipeline becomes sharded (the trainer's pipeline runs with
FSDP only), selective recompute becomes full.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from pathlib import Path

import tomli_w

from pretrain.errors import UserError
from pretrain.plan.layout import Layout, micro_batches, problems
from pretrain.plan.shapes import PRESETS, ModelShape

SHAPE_FIELDS = ("n_layers", "d_model", "n_heads", "n_kv_heads", "d_ff", "vocab_size", "seq_len",
                "mlp", "norm", "tied_embeddings", "bias", "learned_pos", "qkv_bias", "qk_norm",
                "attn_head_dim")


def trainer_layout(lay: Layout) -> tuple[Layout, list[str]]:
    """The nearest layout the trainer runs, and one note per change."""
    notes, new = [], lay
    if lay.recompute == "selective":
        new = dataclasses.replace(new, recompute="full")
        notes.append("selective recompute -> full (the trainer checkpoints whole layers)")
    if new.zero == 1 or (new.pp > 1 and new.dp_replicate > 1) or (new.zero == 0 and new.dp_shard > 1):
        zero = 3 if new.zero == 3 else 2
        notes.append(f"zero={lay.zero} over {lay.dp} data-parallel ranks -> FSDP2 zero={zero} "
                     "(the trainer has no ZeRO-1, and its pipeline runs with FSDP only)")
        new = dataclasses.replace(new, dp_shard=new.dp, dp_replicate=1, zero=zero)
    return new, notes


def check(shape: ModelShape, run: Layout, batch_seqs: int) -> None:
    """Refuse, in one line naming every broken rule, a layout the trainer cannot run."""
    broken = problems(run, n_layers=shape.n_layers, n_heads=shape.n_heads, n_kv_heads=shape.n_kv_heads,
                      d_ff=shape.d_ff, seq_len=shape.seq_len, batch_seqs=batch_seqs,
                      tied_embeddings=shape.tied_embeddings, learned_pos=shape.learned_pos, trainer=True)
    if broken:
        raise UserError(f"--emit-recipe: the trainer cannot run {run.label()}: " + "; ".join(broken))


def recipe(shape: ModelShape, lay: Layout, batch_seqs: int) -> tuple[dict, list[str]]:
    """The config dict (RunConfig's sections) that trains `shape` with `lay`, and the notes."""
    run, notes = trainer_layout(lay)
    check(shape, run, batch_seqs)
    m = micro_batches(run, batch_seqs)
    model = {"preset": shape.name} if PRESETS.get(shape.name) == shape else \
        {"preset": "", **{k: getattr(shape, k) for k in SHAPE_FIELDS}}
    parallel = {"dp_replicate": run.dp_replicate, "dp_shard": run.dp_shard, "tp": run.tp, "pp": run.pp,
                "activation_checkpointing": "full" if run.recompute == "full" else "none",
                "sequence_parallel": run.sp, "reshard_after_forward": run.zero == 3,
                "pp_schedule": "interleaved1f1b" if run.v == 2 else "1f1b"}
    if run.cp > 1:
        from pretrain.train.config import ParallelConfig  # dataclasses only: no torch

        if "cp" not in ParallelConfig.__dataclass_fields__:
            raise UserError(f"--emit-recipe: {run.label()} splits the context (cp={run.cp}) and this "
                            "trainer has no parallel.cp yet; plan with --layout ...,cp=1")
        parallel["cp"] = run.cp
    if run.pp > 1:
        parallel["pp_microbatches"] = m
        data, train = {"batch_size": run.mbs * m}, {"grad_accum": 1}
    else:
        data, train = {"batch_size": run.mbs}, {"grad_accum": m}
    return {"train": train, "model": model, "data": data, "parallel": parallel}, notes


def write_recipe(path: str | Path, config: dict, header: list[str]) -> Path:
    """Write the config atomically, the plan's notes as comments."""
    return write_text(path, "".join(f"# {line}\n" for line in header) + tomli_w.dumps(config))


def write_text(path: str | Path, text: str) -> Path:
    """Write a file atomically: a temporary file in the same directory, then a rename."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.")
    try:
        from pretrain.curate.io import file_mode

        os.fchmod(fd, file_mode())  # mkstemp creates 0600; a recipe gets the mode open() would give it
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return p
