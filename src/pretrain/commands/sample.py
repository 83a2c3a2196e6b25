"""`pretrain sample`: generate text from a run's newest complete checkpoint, or from a Hugging Face
folder (an export) of a family the project imports."""

from __future__ import annotations

import argparse

from pretrain.bounds import Number

HELP = "generate text from a training run's newest checkpoint (or a Hugging Face folder)"

DESCRIPTION = """\
Load RUN/config.toml and the newest complete checkpoint under RUN/checkpoints, then continue a
prompt token by token (temperature and top-k sampling; --temperature 0 is greedy).

  pretrain sample runs/tiny --prompt "ROMEO:" --tokens 200
  pretrain sample hf/tiny --prompt "ROMEO:" --temperature 0    # an export: the same text as its run

RUN may also be a Hugging Face folder (config.json + safetensors weights + tokenizer.json, read
offline) of a family the project imports (Llama, Mistral, Qwen2, Qwen3, GPT-2; the same import as
`pretrain eval` and model.init_from): its tokenizer.json encodes the prompt as a run's text is
encoded (with the file's own template: one that prepends a BOS, as Llama 3's, keeps it, as in
transformers), and --step / --checkpoints, which pick a run's checkpoint, are refused.

Prints the prompt followed by the generated continuation. Bytes that form no valid UTF-8
character (usual early in training) are printed as U+FFFD, as Hugging Face's decode does, and a
line on stderr says how many tokens did not decode.

Past the model's context (model.seq_len tokens) the window slides: each new token is predicted
from the last seq_len tokens only (a longer prompt is cut the same way), so text can go on past
the context but forgets what slid out. Within the context a KV cache makes each new token one
small step; past it each token costs one forward pass over seq_len tokens (identical output either
way). --tokens is at most 1,000,000.
"""

# Beyond this, sampling is a job (past the context each token is a full forward pass), not a command.
MAX_TOKENS = 1_000_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="run directory written by `pretrain train`, or a Hugging Face folder")
    parser.add_argument("--prompt", default="\n", help="text to continue (default: a newline)")
    parser.add_argument("--tokens", type=Number(int, hi=MAX_TOKENS, why="one forward pass per token"),
                        default=200,
                        help=f"tokens to generate, at most {MAX_TOKENS:,}; past the model's context the "
                        "window slides (default 200)")
    parser.add_argument("--temperature", type=Number(float, hi=1e6, why="divides the logits; 0 = greedy"),
                        default=0.8,
                        help="0 is greedy; higher flattens the distribution (default 0.8)")
    parser.add_argument("--top-k", type=Number(int, why="0 = all"), default=50,
                        help="sample among the k likeliest tokens; 0 = all (default 50)")
    parser.add_argument("--seed", type=Number(int, hi=2**63 - 1, why="a seed: a 64-bit integer"), default=0,
                        help="random seed of the sampling: the same seed, the same text (default 0)")
    parser.add_argument("--tokenizer", default=None,
                        help="tokenizer.json (default: the run's data.tokenizer, bytes when it has none; "
                             "a folder's own tokenizer.json)")
    parser.add_argument("--checkpoints", default=None, metavar="DIR_OR_URL",
                        help="read the run's checkpoints here (a folder or s3://...): needed when the run's "
                             "config.toml puts checkpoint.storage outside the run directory")
    parser.add_argument("--step", type=Number(int, hi=2**63 - 1, why="a checkpoint's step"), default=None,
                        help="checkpoint step (default: newest)")
    parser.add_argument("--threads", type=Number(int, lo=1, hi=1024, why="torch's CPU threads"), default=None,
                        help="CPU threads (default: the run's train.threads, else torch's default; "
                             "1 is fastest for a tiny model on a busy machine)")


def run(args: argparse.Namespace) -> int:
    import torch

    from pretrain.errors import UserError
    from pretrain.eval.lm import use_threads
    from pretrain.train.data import decode_tokens, encode_text
    from pretrain.train.model import generate
    from pretrain.untrusted import printable

    numbers = (("--tokens", args.tokens), ("--temperature", args.temperature), ("--top-k", args.top_k))
    for flag, value in numbers:
        if not value >= 0:  # also NaN
            raise UserError(f"{flag} must be >= 0, got {value}")
    if args.tokens > MAX_TOKENS:
        raise UserError(f"--tokens must be <= {MAX_TOKENS:,}, got {args.tokens:,} (one forward pass per "
                        "token; the window slides past the context, see --help)")
    use_threads(args.run, args.threads)
    model, tokenizer = _hf_folder(args) if _is_hf_folder(args.run) else _run_model(args)
    ids, _ = encode_text(args.prompt, tokenizer)
    idx = torch.as_tensor(ids if ids.size else [0], dtype=torch.long)[None, :]  # empty prompt: start at id 0
    gen = torch.Generator().manual_seed(args.seed)
    out = generate(model, idx, args.tokens, args.temperature, args.top_k, gen)
    # A run may be anyone's: its model and tokenizer choose these characters (OSC 52 writes the
    # clipboard on some terminals). Control characters and bidi overrides are printed escaped.
    print(printable(decode_tokens(out[0].tolist(), tokenizer)))
    _say_undecodable(out[0].tolist(), tokenizer)
    return 0


def _run_model(args: argparse.Namespace) -> tuple:
    """A run's model at --step (default newest) and the tokenizer its text was encoded with."""
    from pretrain.errors import UserError
    from pretrain.train.runs import load_run_model

    model, cfg, _ = load_run_model(args.run, args.step, args.checkpoints)
    if args.tokenizer is None and cfg.data.kind == "text":
        from pretrain.tokens.hf_tokenizer import check_run_tokenizer

        check_run_tokenizer(cfg, ", or pass --tokenizer PATH (the same file)")
    tokenizer = args.tokenizer if args.tokenizer is not None else cfg.data.tokenizer
    if cfg.data.kind == "tokens" and not tokenizer:
        tokenizer = _tokenizer_of_shards(cfg.data.sources)
    if cfg.data.kind == "tokens" and not tokenizer:
        raise UserError("this run trained on token shards: pass the tokenizer.json they were made with, "
                        f"--tokenizer PATH{_sources_not_here(cfg.data.sources)}")
    return model, tokenizer


def _is_hf_folder(path: str) -> bool:
    from pathlib import Path

    return not (Path(path) / "config.toml").is_file() and (Path(path) / "config.json").is_file()


def _hf_folder(args: argparse.Namespace) -> tuple:
    """Our model filled from a Hugging Face folder, and its tokenizer.json (or --tokenizer). A folder
    holds one model: --step and --checkpoints would be ignored, so they are refused."""
    from pathlib import Path

    from pretrain.errors import UserError
    from pretrain.eval.lm import _check_tokenizer_files, _check_vocab, hf_transformer
    from pretrain.tokens.tokenizer import load_tokenizer
    from pretrain.train.hf import Unsupported

    folder = Path(args.run)
    for flag, value in (("--step", args.step), ("--checkpoints", args.checkpoints)):
        if value is not None:
            raise UserError(f"{flag} picks a run's checkpoint; {folder} is a Hugging Face folder (one model)")
    tokenizer = args.tokenizer if args.tokenizer is not None else str(folder / "tokenizer.json")
    if args.tokenizer is None:
        if not (folder / "tokenizer.json").is_file():
            raise UserError(f"{folder}: no tokenizer.json (a folder with only vocab.json/merges.txt or a "
                            "SentencePiece model); pass --tokenizer PATH to a tokenizer.json")
        _check_tokenizer_files(folder)  # someone else's folder: bounded before it is parsed
    try:
        model = hf_transformer(folder)
    except Unsupported as e:
        raise UserError(f"{e}; `pretrain sample` generates with the families it imports, transformers' "
                        "generate() with any other") from None
    _check_vocab(tokenizer, load_tokenizer(tokenizer).get_vocab_size(), model.shape.vocab_size)
    return model, tokenizer


def _say_undecodable(ids: list[int], tokenizer: str) -> None:
    """Once, on stderr: the tokens shown as U+FFFD, so that a newcomer reading replacement marks
    after a short training knows they are the model's, not a broken terminal or file."""
    import sys

    from pretrain.train.data import undecodable_tokens

    bad = undecodable_tokens(ids, tokenizer)
    if bad:
        print(f"pretrain sample: {bad:,} of {len(ids):,} tokens (prompt and continuation) did not decode "
              "to valid UTF-8 text, shown as \N{REPLACEMENT CHARACTER} (U+FFFD): byte pieces that form no "
              "character, usual for a model early in training", file=sys.stderr)


def _sources_not_here(sources: dict, way: str = "; run from there, or pass --tokenizer") -> str:
    """Why the tokenizer beside the shards was not found, when it is that the run's relative token
    folders do not exist from this working directory (a run trained from the repository root, read
    from elsewhere): "" when every folder is here."""
    import os
    from pathlib import Path

    missing = [str(d) for d in sources.values() if not Path(d).is_absolute() and not Path(d).is_dir()]
    if not missing:
        return ""
    one = len(missing) == 1
    return (f" (its token folder{'' if one else 's'} {', '.join(missing)} {'is' if one else 'are'} not found "
            f"from {os.getcwd()}: a run's data paths are relative to the directory it was trained from{way})")


def _tokenizer_of_shards(sources: dict) -> str:
    """The tokenizer.json copy that `pretrain tokenize` keeps beside its shards, if present."""
    from pathlib import Path

    from pretrain.errors import DataError, UserError
    from pretrain.tokens.shards import read_manifest

    for directory in sources.values():
        if (Path(directory) / "manifest.json").exists():
            try:  # validated: its copy is a plain file name, not "../../x" or "/dev/zero"
                copy = read_manifest(directory)["tokenizer"].get("copy", "tokenizer.json")
            except (DataError, UserError):
                continue
            if (Path(directory) / copy).is_file():
                from pretrain import untrusted

                try:  # a copy linking out of its folder (~/.ssh/id_rsa) is not read
                    untrusted.check_file(Path(directory) / copy, within=directory)
                except untrusted.BadFile as e:
                    raise UserError(f"{e}; pass --tokenizer PATH (the tokenizer.json that made it)") from None
                return str(Path(directory) / copy)
    return ""
