"""`pretrain tokens inspect`: a token directory's manifest, counts and a decoded sample."""

from __future__ import annotations

import argparse

HELP = "inspect token shards (manifest, counts, a decoded sample) or export them to Megatron-LM"
DESCRIPTION = """\
inspect: open a token directory written by `pretrain tokenize`, check every shard against the manifest
(file sizes, document offsets), and print the counts and the first tokens of a document decoded
back to text with the tokenizer the directory was made with (its saved copy, or --tokenizer,
which must match the manifest's fingerprint). export-megatron: write it as Megatron-LM's
indexed dataset, byte-identical to datatrove's.

Example:
  pretrain tokens inspect tokens/web
  pretrain tokens inspect tokens/web --doc 10 --tokens 200
  pretrain tokens export-megatron tokens/web -o megatron/web_text_document   (PREFIX.bin + .idx)
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    i = sub.add_parser("inspect", help="manifest, counts, a decoded sample", description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    i.add_argument("directory", metavar="TOKENS", help="a directory written by `pretrain tokenize`")
    i.add_argument("--tokenizer", default=None, help="tokenizer.json (default: TOKENS/tokenizer.json)")
    i.add_argument("--doc", type=int, default=0, help="document to decode (default 0)")
    i.add_argument("--tokens", type=int, default=100, help="tokens of it to show (default 100)")
    e = sub.add_parser("export-megatron", help="write Megatron-LM PREFIX.bin + PREFIX.idx",
                       description="Export a token directory to Megatron-LM's indexed dataset format "
                       "(one sequence per document, end-of-text included).\n\nExample:\n"
                       "  pretrain tokens export-megatron tokens/web -o megatron/web_text_document",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    e.add_argument("directory", metavar="TOKENS", help="a directory written by `pretrain tokenize`")
    e.add_argument("-o", "--output", required=True, metavar="PREFIX",
                   help="writes PREFIX.bin and PREFIX.idx (Megatron's --data-path PREFIX)")


def run(args: argparse.Namespace) -> int:
    if args.action == "export-megatron":
        return _export(args)
    return _inspect(args)


def _export(args: argparse.Namespace) -> int:
    from pretrain.errors import DataError, UserError
    from pretrain.tokens.megatron import export_megatron

    try:
        b, i = export_megatron(args.directory, args.output)
    except DataError as e:
        raise UserError(str(e)) from e
    except OSError as e:  # an output folder that cannot be made or written
        raise UserError(f"cannot write {e.filename or args.output}: {e.strerror or e}") from e
    print(f"wrote {b} and {i}")
    return 0


def _inspect(args: argparse.Namespace) -> int:
    from pathlib import Path

    from pretrain.errors import DataError, UserError
    from pretrain.tokens.shards import TokenDir
    from pretrain.tokens.tokenizer import load_tokenizer, tokenizer_sha256

    try:
        d = TokenDir(args.directory)
    except DataError as e:
        raise UserError(str(e)) from e
    m = d.manifest
    print(f"{d.path}: {m['format']} v{m['version']}, dtype {m['dtype']}, vocabulary {m['vocab_size']:,}, "
          f"end-of-text id {m['eot_id']}, tokenizer sha256 {d.tokenizer_sha256[:12]}")
    print(f"{d.num_tokens:,} tokens, {d.num_documents:,} documents, {len(m['shards'])} shards, "
          f"{d.num_tokens / max(1, d.num_documents):,.1f} tokens per document")
    for name, c in m.get("sources", {}).items():
        print(f"  source {name}: {c['tokens']:,} tokens, {c['documents']:,} documents")
    if m.get("skipped"):
        print("  skipped records: " + ", ".join(f"{k}: {v}" for k, v in m["skipped"].items()))
    saved = d.path / m["tokenizer"].get("copy", "tokenizer.json")
    tok_path = Path(args.tokenizer) if args.tokenizer else saved
    if not tok_path.is_file() or d.num_documents == 0:
        return 0
    tok = load_tokenizer(tok_path)
    d.check_tokenizer(tokenizer_sha256(tok), str(tok_path))
    if args.tokens < 0:
        raise UserError(f"--tokens is how many tokens of the document to show (>= 0), got {args.tokens}")
    if not 0 <= args.doc < d.num_documents:
        raise UserError(f"--doc {args.doc} is outside 0..{d.num_documents - 1}")
    ids = d.document(args.doc)[: args.tokens].tolist()
    print(f"document {args.doc}, first {len(ids)} tokens: {ids[:20]}{' ...' if len(ids) > 20 else ''}")
    print(repr(tok.decode(ids, skip_special_tokens=False)))
    return 0
