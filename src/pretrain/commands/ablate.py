"""`pretrain ablate`: train small twin models on variants of the data and compare them."""

from __future__ import annotations

import argparse

HELP = "train small twin models on data variants at the same token budget and compare them"

DESCRIPTION = """\
Train one small model per data variant (same recipe, same steps, so the same number of tokens),
evaluate each, and print one table and one plot. A variant is the planted corpus or a text file,
optionally passed through the belt's deduplication (exact + MinHash near duplicates).

  pretrain ablate recipes/ablate-dedup.toml           # a few minutes on a CPU
  pretrain ablate recipes/ablate-dedup.toml --set copies=64 --set steps=600

The shipped experiment plants real sentences many times into a real book and measures, for the raw
and the deduplicated corpus, the share of planted sentences whose next 32 tokens the model
reproduces greedily from their first 32 (Carlini et al. 2022). Writes OUT/results.json
(schema pretrain.ablate/1), OUT/ablation.png, and each twin's corpus and run under OUT/NAME/.
Rerunning resumes: finished twins are not trained again; a twin whose corpus or settings (steps,
set) changed is trained anew, so the numbers are those of a fresh ablation.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="ablation TOML (e.g. recipes/ablate-dedup.toml)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                        help="override a top-level or planted key: steps=600, out=DIR, copies=64")
    parser.add_argument("-o", "--output", default=None, help="output folder (default: the config's out)")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from pretrain.config import parse_override
    from pretrain.errors import UserError
    from pretrain.eval.ablate import Planted, load_config, run_ablation, table

    top, planted = {}, {}
    for text in args.overrides:
        path, value = parse_override(text)
        key = path[-1]
        if path[0] == "planted" or (len(path) == 1 and key in Planted.__dataclass_fields__):
            planted[key] = value
        elif len(path) == 1:
            top[key] = value
        else:
            raise UserError(f"--set {text}: not a key of the ablation config")
    if args.output:
        top["out"] = args.output
    cfg = load_config(args.config, top)
    for k, v in planted.items():
        setattr(cfg.planted, k, v)
    doc = run_ablation(cfg, Path(args.config).resolve().parent)
    print(table(doc))
    print(f"wrote {Path(cfg.out) / 'results.json'} and {Path(cfg.out) / 'ablation.png'}")
    return 0
