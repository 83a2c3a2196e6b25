"""Reading a finished (or running) run directory: its config, its newest model, its export."""

from __future__ import annotations

from pathlib import Path

import torch

from pretrain import config as cfgmod
from pretrain.errors import UserError
from pretrain.train import checkpoint as ck
from pretrain.train.config import RunConfig
from pretrain.train.model import build_model, materialize, resolve_shape, rope_tables
from pretrain.train.precision import DTYPES


def load_run_model(run: str | Path, step: int | None = None):
    """(model in eval mode on CPU, resolved config, checkpoint step) from a run directory."""
    run = Path(run)
    cfg = cfgmod.load(RunConfig, run / "config.toml")
    root = ck.as_root(cfg.checkpoint.storage or run / "checkpoints")
    if step is None:
        found = ck.latest_complete(root)
        if found is None:
            raise UserError(f"{root}: no complete checkpoint")
        step, path = found
    else:
        path = ck.step_dir(root, step)
        if not ck.is_complete(path):
            raise UserError(f"{path}: not a complete checkpoint")
    model = _allocated(cfg)
    ck.load_model_only(path, model)
    return model.eval(), cfg, step


def _allocated(cfg: RunConfig) -> torch.nn.Module:
    """The run's model with storage and rotary tables but no random init: the checkpoint overwrites
    every parameter, and initializing 1.2 B of them first took a third of an export's time."""
    shape = resolve_shape(cfg.model)
    model = build_model(shape, cfg.model, "meta").to_empty(device="cpu")
    if not shape.learned_pos:
        model.rope_cos, model.rope_sin = rope_tables(shape.d_model // shape.n_heads, shape.seq_len,
                                                     cfg.model.rope_theta, scaling=model.rope_scaling)
    return model


def export_safetensors(run: str | Path, out: str | Path, dtype: str = "fp32",
                       step: int | None = None) -> tuple[Path, int]:
    from safetensors.torch import save_file

    model, cfg, step = load_run_model(run, step)
    tensors = {k: v.detach().to(DTYPES[dtype]).contiguous() for k, v in model.state_dict().items()}
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    save_file(tensors, str(tmp), metadata={"config": cfgmod.dumps(cfg), "step": str(step), "format": "pt"})
    tmp.replace(out)
    return out, sum(t.numel() for t in tensors.values())


def load_exported(path: str | Path, cfg: RunConfig) -> torch.nn.Module:
    """A model filled from an exported safetensors file (the inverse of export_safetensors)."""
    from safetensors.torch import load_file

    model = materialize(build_model(resolve_shape(cfg.model), cfg.model, "meta"), "cpu", 0)
    sd = {k: v.float() for k, v in load_file(str(path)).items()}
    model.load_state_dict(sd)
    return model.eval()
