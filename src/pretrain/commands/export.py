"""`pretrain export`: a run's model as a Hugging Face folder, or as one safetensors file."""

from __future__ import annotations

import argparse

from pretrain.bounds import Number, Size

HELP = "export a run's newest checkpoint for transformers (--format hf) or as one safetensors file"

DESCRIPTION = """\
Read the newest complete checkpoint of a run (or --step N) and write its model.

--format hf: a folder that transformers loads as is, no conversion code:
  config.json             LlamaConfig (rmsnorm, swiglu, rotary presets), Qwen2Config (+ q/k/v
                          biases), Qwen3Config (+ per-head q/k norms) or GPT2Config (layernorm,
                          gelu, learned positions); tied or untied head, grouped-query attention
  model.safetensors       transformers' key names and rotary layout; past --max-shard-size, numbered
                          shards + model.safetensors.index.json (written one tensor at a time)
  generation_config.json  eos (and bos) ids
  tokenizer.json, tokenizer_config.json, special_tokens_map.json
                          the run's tokenizer (a byte-level run gets an equivalent one); text that
                          quotes a special token is encoded as plain text, as in training

  pretrain export runs/tiny --format hf -o hf/tiny --dtype bf16
  python -c "from transformers import AutoModelForCausalLM as M; M.from_pretrained('hf/tiny')"

--format safetensors (default): one file keyed by our parameter names, the resolved config in its
metadata; load it back with pretrain.train.runs.load_exported.

A rerun into the same folder replaces the export (stale shards removed); files appear only when
complete; a folder inside a run directory is refused. To continue pretraining from a Hugging Face
folder, see model.init_from in docs/training.md.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="run directory written by `pretrain train`")
    parser.add_argument("-o", "--output", required=True,
                        help="--format hf: the folder to write; safetensors: the .safetensors file")
    parser.add_argument("--format", choices=["safetensors", "hf"], default="safetensors",
                        help="hf: a transformers folder; safetensors: one file, our names (default)")
    parser.add_argument("--dtype", choices=["fp32", "bf16", "fp16"], default="fp32",
                        help="weights' dtype (hf: fp32 or bf16)")
    parser.add_argument("--checkpoints", default=None, metavar="DIR_OR_URL",
                        help="read the run's checkpoints here (a folder or s3://...): needed when the run's "
                             "config.toml puts checkpoint.storage outside the run directory")
    parser.add_argument("--step", type=Number(int, hi=2**63 - 1, why="a checkpoint's step"), default=None,
                        help="checkpoint step (default: newest)")
    shard = Size(why="bytes of one shard file; a tensor larger than it gets a file of its own")
    parser.add_argument("--max-shard-size", type=shard, default=None, metavar="SIZE",
                        help="hf: split model.safetensors into shards of at most SIZE (default 5GB; "
                        "--format safetensors writes one file)")


def _check_output(args: argparse.Namespace) -> None:
    """The path must be of the kind the format writes, said before the checkpoint is read."""
    from pathlib import Path

    from pretrain.errors import UserError

    out = Path(args.output)
    if args.format == "hf" and out.exists() and not out.is_dir():
        raise UserError(f"-o {out}: a file exists there; --format hf writes a folder")
    if args.format == "hf":
        run, where = Path(args.run).resolve(), out.resolve()
        inside = where == run or run in where.parents
        if inside or (out / "config.toml").is_file():
            # config.json beside config.toml: a folder eval and model.init_from read as either
            raise UserError(f"-o {out}: inside a run directory ({args.run if inside else out}); "
                            "a Hugging Face folder goes elsewhere, e.g. -o hf/NAME")
    if args.format == "safetensors" and args.max_shard_size is not None:  # it was dropped in silence
        raise UserError(f"--max-shard-size splits a --format hf export; --format safetensors writes one "
                        f"file ({out}): drop --max-shard-size, or add --format hf")
    if args.format == "safetensors" and out.is_dir():
        raise UserError(f"-o {out}: a folder; --format safetensors writes one file "
                        f"(e.g. {out / 'model.safetensors'}), --format hf a folder")


def run(args: argparse.Namespace) -> int:
    _check_output(args)
    if args.format == "hf":
        from pretrain.train.hf_io import export_hf

        res = export_hf(args.run, args.output, args.dtype, args.step, args.max_shard_size or 5 * 10**9,
                        args.checkpoints)
        shards = sum(f.endswith(".safetensors") for f in res["files"])
        files = "1 safetensors file" if shards == 1 else f"{shards} safetensors files"
        print(f"wrote {res['out']}/ ({res['arch']}, step {res['step']}): {res['parameters']:,} parameters "
              f"({args.dtype}) in {files}, config.json, tokenizer files")
        return 0
    from pretrain.train.runs import export_safetensors

    path, n = export_safetensors(args.run, args.output, args.dtype, args.step, args.checkpoints)
    print(f"wrote {path}: {n:,} parameters ({args.dtype})")
    return 0
