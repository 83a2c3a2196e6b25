"""`pretrain tokenize`: corpus files -> memory-mappable token shards, on all cores, resumable."""

from __future__ import annotations

import argparse

HELP = "tokenize a corpus into token shards (.bin + .idx + manifest.json)"
DESCRIPTION = """\
Encode every document of CORPUS with a tokenizer.json and write token shards to TOKENS/.

Each input file becomes one shard: shard_NNNNN.bin holds the token ids (uint16 when the vocabulary
has at most 65,536 entries, else uint32) with <|endoftext|> after every document; shard_NNNNN.idx
(a .npy array) holds the document offsets; manifest.json records the tokenizer's fingerprint,
dtype, token and document counts and the inputs. See docs/tokens.md for the format.

Files are encoded in parallel (one process per file, all cores by default). The output is the
same for any number of workers. A killed run resumes: rerun the same command and finished shards
are skipped. An output directory made with another tokenizer is refused.

Example:
  pretrain tokenize corpus/data --tokenizer tokenizer.json -o tokens/web --source web
  pretrain tokens inspect tokens/web

Output: TOKENS/shard_*.bin, shard_*.idx, manifest.json, tokenizer.json (a copy of the tokenizer).
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("inputs", nargs="+", metavar="CORPUS", help="files, folders or globs")
    p.add_argument("--tokenizer", required=True, metavar="T", help="tokenizer.json")
    p.add_argument("-o", "--output", required=True, metavar="TOKENS", help="output directory")
    p.add_argument("--source", default=None, help="source name in the manifest (default: directory name)")
    p.add_argument("--workers", type=int, default=None, help="processes (default: all cores)")


def run(args: argparse.Namespace) -> int:
    import time

    from pretrain.errors import DataError, UserError
    from pretrain.tokens.pipeline import tokenize_corpus

    t0 = time.perf_counter()

    def report(e: dict) -> None:
        print(f"  {e['bin']}: {e['tokens']:,} tokens, {e['documents']:,} documents <- {e['input']}")

    try:
        man = tokenize_corpus(args.inputs, args.tokenizer, args.output, args.source, args.workers, report)
    except DataError as e:
        raise UserError(str(e)) from e
    sec = time.perf_counter() - t0
    skipped = sum(man["skipped"].values())
    print(f"{man['tokens']:,} tokens, {man['documents']:,} documents, {len(man['shards'])} shards "
          f"({man['dtype']}) in {sec:.1f} s; {skipped:,} records skipped -> {args.output}")
    return 0
