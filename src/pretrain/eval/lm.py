"""The model as evaluation sees it: text -> token ids, ids -> text, token ids (B, T) -> logits (B, T, V).

`from_run` wraps a `pretrain train` run (its newest checkpoint and its tokenizer, or bytes);
`from_hf_dir` wraps a folder that transformers' AutoModelForCausalLM and AutoTokenizer load;
`from_transformers` wraps objects already in memory. Nothing here downloads anything.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from pretrain.errors import UserError


@dataclass
class EvalModel:
    """A causal LM for scoring: `logits(ids)` must be causal (position t sees only ids[:, :t+1])."""

    encode: Callable[[str], list[int]]
    decode: Callable[[list[int]], str]
    logits: Callable[[torch.Tensor], torch.Tensor]
    max_length: int  # longest input the model takes
    eot_id: int  # the token an empty context starts from (lm-eval's prefix_token_id)
    device: torch.device = torch.device("cpu")
    name: str = "model"


def from_run(run: str | Path, step: int | None = None, tokenizer: str = "",
             device: str = "cpu") -> tuple[EvalModel, int]:
    """(model, checkpoint step) from a run directory; bytes as tokens when the run used none."""
    from pretrain.train.runs import load_run_model

    model, cfg, step = load_run_model(run, step)
    model.to(device)
    tok_path = tokenizer or cfg.data.tokenizer
    if cfg.data.kind == "tokens" and not tok_path:
        from pretrain.commands.sample import _tokenizer_of_shards

        tok_path = _tokenizer_of_shards(cfg.data.sources)
        if not tok_path:
            raise UserError(f"{run}: trained on token shards; pass --tokenizer TOKENIZER.json")
    encode, decode, eot = _tokenizer_functions(tok_path)
    return from_module(model, encode, decode, model.shape.seq_len, eot, f"{Path(run).name}@{step}"), step


def from_module(model: torch.nn.Module, encode, decode, max_length: int, eot_id: int,
                name: str = "model") -> EvalModel:
    """Wrap one of our Transformers (forward(ids) -> logits)."""
    device = next(model.parameters()).device

    @torch.no_grad()
    def logits(ids: torch.Tensor) -> torch.Tensor:
        return model(ids.to(device))

    return EvalModel(encode, decode, logits, max_length, eot_id, device, name)


def _tokenizer_functions(path: str):
    """encode/decode/eot for a tokenizer.json, or UTF-8 bytes (id 256 ends a document) when empty."""
    if not path:
        def encode(text: str) -> list[int]:
            return list(text.encode("utf-8"))

        def decode(ids: list[int]) -> str:
            return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")

        return encode, decode, 256
    from pretrain.tokens.tokenizer import eot_id, load_tokenizer

    tok = load_tokenizer(path)
    return (lambda text: tok.encode(text).ids), tok.decode, eot_id(tok)


def from_transformers(model, tokenizer, name: str = "hf") -> EvalModel:
    """Wrap a transformers causal LM and its tokenizer (no special tokens added, as lm-eval's HFLM)."""
    model.eval()
    device = next(model.parameters()).device

    @torch.no_grad()
    def logits(ids: torch.Tensor) -> torch.Tensor:
        return model(ids.to(device)).logits

    def encode(text: str) -> list[int]:
        return tokenizer.encode(text, add_special_tokens=False)

    def decode(ids: list[int]) -> str:
        return tokenizer.decode(ids)

    cfg = model.config
    max_length = int(getattr(cfg, "max_position_embeddings", 0) or getattr(cfg, "n_positions", 0) or 2048)
    eot = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    return EvalModel(encode, decode, logits, max_length, int(eot if eot is not None else 0), device, name)


def from_hf_dir(path: str | Path, device: str = "cpu") -> EvalModel:
    """A folder written by save_pretrained (or `pretrain export --format hf`), loaded offline."""
    path = Path(path)
    if not (path / "config.json").is_file():
        raise UserError(f"{path}: not a Hugging Face model folder (no config.json)")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(str(path), local_files_only=True, dtype=torch.float32)
    return from_transformers(model.to(device), tok, name=path.name)


def load_model(target: str | Path, step: int | None = None, tokenizer: str = "",
               device: str = "cpu") -> tuple[EvalModel, int | None]:
    """A run directory (has config.toml) or a Hugging Face folder (has config.json)."""
    p = Path(target)
    if (p / "config.toml").is_file():
        return from_run(p, step, tokenizer, device)
    if (p / "config.json").is_file():
        return from_hf_dir(p, device), None
    raise UserError(f"{p}: neither a run directory (config.toml) nor a Hugging Face folder (config.json)")
