"""`pretrain export`: write a run's model weights as one safetensors file."""

from __future__ import annotations

import argparse

from pretrain.config import at_least

HELP = "export a run's newest checkpoint's weights to safetensors"

DESCRIPTION = """\
Read the newest complete checkpoint of a run and write its model weights, keyed by parameter name,
to a .safetensors file (no pickle: safe to share), with the resolved config in the file's metadata.

  pretrain export runs/tiny -o tiny.safetensors --dtype bf16

Load it back with safetensors.torch.load_file and Transformer.load_state_dict.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="run directory written by `pretrain train`")
    parser.add_argument("-o", "--output", required=True, help="the .safetensors file to write")
    parser.add_argument("--dtype", choices=["fp32", "bf16", "fp16"], default="fp32")
    parser.add_argument("--step", type=at_least(0, int), default=None,
                        help="checkpoint step (default: newest)")


def run(args: argparse.Namespace) -> int:
    from pretrain.train.runs import export_safetensors

    path, n = export_safetensors(args.run, args.output, args.dtype, args.step)
    print(f"wrote {path}: {n:,} parameters ({args.dtype})")
    return 0
