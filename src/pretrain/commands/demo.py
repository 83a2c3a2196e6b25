"""`pretrain demo`: crawl -> curate -> tokens -> plan -> train -> sample -> report, on shipped data."""

from __future__ import annotations

import argparse

from pretrain.bounds import Number

HELP = ("the whole path on a crawl that ships with pretrain: curate, tokenize, plan, train, sample, "
        "eval, report")
DESCRIPTION = """\
Run every stage of pretrain on a small crawl that ships with the package (325 WARC records written
for it: Python's own documentation and docstrings as web pages, plus navigation pages, spam,
re-crawled and edited copies, pages in six other languages, binary bodies, a revisit record).
Each stage is the real command, printed before it runs, so you can re-run any of them by hand:

  1. pretrain curate       the belt; the funnel shows what each step dropped and why
  2. pretrain tokenizer    byte-level BPE trained on the clean corpus
  3. pretrain tokenize     token shards (+ a held-out split)
  4. pretrain mix          the mixture table (epochs per source)
  5. pretrain plan         what a Llama-3-8B run on 64 H100s would need
  6. pretrain train        a tiny Llama-style model on the CPU; held-out perplexity in the loop
  7. pretrain sample       text from the newest checkpoint
  8. pretrain eval         held-out bits per byte and a smoke multiple-choice task (also run
                           in the loop every few steps: log.eval_tasks), built from held-out
                           documents, so no benchmark files are needed
  9. pretrain report       OUT/report.html: one page to look at

Examples:
  pretrain demo                         # a few minutes on 2 CPU cores
  pretrain demo --short                 # a minute: few steps, every stage still runs
  pretrain demo --data recipes/data     # add inputs to the crawl (folders, WARC, JSONL, text, ...)
  pretrain demo -o /tmp/demo            # another output; a rerun with other --data starts it over
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", default="demo-out", help="output directory (default demo-out)")
    p.add_argument(
        "--data",
        action="append",
        default=[],
        metavar="PATH",
        help="extra inputs for the crawl (files or folders; repeatable)",
    )
    p.add_argument("--steps", type=Number(int, lo=1, hi=10**6, why="training steps of a CPU demo"),
                   default=None, help="training steps (default 300; 30 with --short)")
    p.add_argument("--short", action="store_true",
                   help="30 training steps and a 1,024-token vocabulary, unless --steps or --vocab-size say")
    p.add_argument("--vocab-size", type=Number(int, lo=257, hi=2**20,
                               why="the 256 bytes, the end-of-text token and merges"),
                   default=None, help="tokenizer vocabulary (default 2048; 1024 with --short)")
    p.add_argument("--workers", type=Number(int, lo=1, hi=4096, why="processes, one per core"),
                   default=None, help="processes for curate/tokenize")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from pretrain.demo import DemoSettings, run_demo

    # --short picks the defaults; a value given beside it wins (`--short --steps 100` ran 30 steps)
    steps = args.steps or (30 if args.short else 300)
    vocab = args.vocab_size or (1024 if args.short else 2048)
    run_demo(DemoSettings(Path(args.output), args.data, steps, vocab, args.workers))
    return 0
