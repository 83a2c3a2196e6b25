"""`pretrain tokens inspect`: a token directory's manifest, counts and a decoded sample."""

from __future__ import annotations

import argparse

from pretrain.bounds import Number
from pretrain.progress import count

HELP = ("inspect token shards (manifest, counts, a decoded sample), export them to Megatron-LM, "
        "or import Megatron-LM / datatrove token files")
DESCRIPTION = """\
inspect: open a token directory written by `pretrain tokenize`, check every shard against the manifest
(file sizes, document offsets), and print the counts and the first tokens of a document decoded
back to text with the tokenizer the directory was made with (its saved copy, or --tokenizer,
which must match the manifest's fingerprint). export-megatron: write it as Megatron-LM's
indexed dataset, byte-identical to datatrove's. import-megatron / import-datatrove: turn token
files another tool wrote into a token directory `pretrain train` reads (no re-tokenizing).

Example:
  pretrain tokens inspect tokens/web
  pretrain tokens inspect tokens/web --doc 10 --tokens 200
  pretrain tokens export-megatron tokens/web -o megatron/web_text_document   (PREFIX.bin + .idx)
  pretrain tokens import-megatron megatron/web_text_document -o tokens/web --tokenizer tokenizer.json
  pretrain tokens import-datatrove dt_out/ -o tokens/fw --tokenizer hf_model_dir/
"""

INSPECT_HELP = """\
Open a token directory written by `pretrain tokenize` (or an import), check every shard against
its manifest.json (file sizes, document offsets), and print to stdout: the format, dtype,
vocabulary and tokenizer fingerprint; tokens and documents in all and per source; then the first
--tokens tokens of document --doc (their first 20 ids, and the text they decode to) with the
tokenizer the directory was made with (its saved TOKENS/tokenizer.json, or --tokenizer, which must match the
manifest's fingerprint). Nothing is written. A shard that disagrees with the manifest is refused
in one line naming the file.

Example:
  pretrain tokens inspect tokens/web
  pretrain tokens inspect tokens/web --doc 10 --tokens 200
"""

IMPORT_HELP = """\
Import token files another tool wrote, without re-tokenizing: each input becomes one shard of a
token directory (`pretrain train` data.kind="tokens", `pretrain mix`, `pretrain tokens inspect`).

Every header field, count, pointer and document boundary is checked against the file sizes before
a token is copied; a bad or truncated file is refused in one line naming the file and the field.
Each token id must be an id of --tokenizer's vocabulary (the tokenizer that made the files: a
tokenizer.json, or a Hugging Face model folder holding one). Documents keep their boundaries: when
every document already ends with the end-of-text id (Megatron's --append-eod, datatrove's
eos_token) the tokens are copied unchanged, else that id is appended to each document (the
manifest's "imported.eot" says which). Rerunning the same command resumes (finished shards are
kept); other inputs or another tokenizer into the same directory are refused.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    i = sub.add_parser("inspect", help="manifest, counts, a decoded sample", description=INSPECT_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    i.add_argument("directory", metavar="TOKENS", help="a directory written by `pretrain tokenize`")
    i.add_argument("--tokenizer", default=None, help="tokenizer.json (default: TOKENS/tokenizer.json)")
    i.add_argument("--doc", type=Number(int, why="a document's index"),
                   default=None, help="document to decode (default 0)")
    i.add_argument("--tokens", type=Number(int, why="tokens shown"),
                   default=None, help="tokens of it to show (default 100)")
    e = sub.add_parser("export-megatron", help="write Megatron-LM PREFIX.bin + PREFIX.idx",
                       description="Export a token directory to Megatron-LM's indexed dataset format "
                       "(one sequence per document, end-of-text included).\n\nExample:\n"
                       "  pretrain tokens export-megatron tokens/web -o megatron/web_text_document",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    e.add_argument("directory", metavar="TOKENS", help="a directory written by `pretrain tokenize`")
    e.add_argument("-o", "--output", required=True, metavar="PREFIX",
                   help="writes PREFIX.bin and PREFIX.idx (Megatron's --data-path PREFIX); "
                   "an s3://bucket/key prefix uploads each file whole")


    m = sub.add_parser("import-megatron", help="Megatron-LM PREFIX.bin + PREFIX.idx -> a token directory",
                       description=IMPORT_HELP + "\nExample (from Megatron's tools/preprocess_data.py):\n"
                       "  pretrain tokens import-megatron data/web_text_document -o tokens/web "
                       "--tokenizer tokenizer.json",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    m.add_argument("prefixes", nargs="+", metavar="PREFIX", help="Megatron --data-path prefix (PREFIX.bin, "
                   "PREFIX.idx); several make several shards, in the order given")
    d = sub.add_parser("import-datatrove", help="datatrove NAME.ds + NAME.ds.index -> a token directory",
                       description=IMPORT_HELP + "\nExample (files from datatrove's DocumentTokenizer):\n"
                       "  pretrain tokens import-datatrove dt_tokens/ -o tokens/fw "
                       "--tokenizer tokenizer.json",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    d.add_argument("paths", nargs="+", metavar="DS", help="NAME.ds files, or folders of them (sorted)")
    d.add_argument("--token-size", type=int, choices=(2, 4), default=None,
                   help="bytes per token (default: from NAME.ds.metadata, as datatrove writes it)")
    for q in (m, d):
        q.add_argument("-o", "--output", required=True, metavar="TOKENS", help="token directory to write")
        q.add_argument("--tokenizer", required=True, metavar="TOKENIZER",
                       help="tokenizer.json (or a folder holding one) that made these tokens")
        q.add_argument("--source", default=None, help="source name in the manifest (default: TOKENS's name)")


def run(args: argparse.Namespace) -> int:
    if args.action == "export-megatron":
        return _export(args)
    if args.action in ("import-megatron", "import-datatrove"):
        return _import(args)
    return _inspect(args)


def _export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from pretrain.curate.io import is_url
    from pretrain.errors import DataError, UserError
    from pretrain.tokens.megatron import export_megatron

    there = not is_url(args.output) and any(Path(f"{args.output}{x}").exists() for x in (".bin", ".idx"))
    try:
        b, i = export_megatron(args.directory, args.output)
    except DataError as e:
        raise UserError(str(e)) from e
    except OSError as e:  # an output folder that cannot be made or written
        raise UserError(f"cannot write {e.filename or args.output}: {e.strerror or e}") from e
    # a rerun into the same prefix replaced the pair: said, as `tokenizer train` says a replaced file
    print(f"wrote {b} and {i}" + (" (replaced the files there)" if there else ""))
    return 0


def _import(args: argparse.Namespace) -> int:
    from pathlib import Path

    from pretrain.errors import DataError, UserError
    from pretrain.tokens.imports import import_tokens

    if args.action == "import-megatron":
        kind, inputs = "megatron", [p[:-4] if p.endswith((".bin", ".idx")) else p for p in args.prefixes]
    else:
        kind, inputs = "datatrove", []
        for p in map(Path, args.paths):
            inputs += sorted(str(f) for f in p.glob("*.ds")) if p.is_dir() else [str(p)]
        if not inputs:
            raise UserError(f"no .ds files in {', '.join(args.paths)}")
    written: list[dict] = []
    try:
        man = import_tokens(kind, inputs, args.tokenizer, args.output, args.source,
                            getattr(args, "token_size", None), written.append)
    except DataError as e:
        raise UserError(str(e)) from e
    except OSError as e:
        raise UserError(f"cannot read or write {e.filename or args.output}: {e.strerror or e}") from e
    from pretrain.commands.tokenize import resumed

    eot, n = man["imported"]["eot"], len(man["shards"])
    print(f"{'wrote' if written else 'kept'} {args.output}: {man['tokens']:,} tokens, "
          f"{count(man['documents'], 'document')}, {n} shard{'s' * (n != 1)}; end-of-text id {man['eot_id']} "
          f"{'already ended every document' if eot == 'present' else 'appended to documents'}"
          f"{resumed(len(written), n, 'imported')}")
    masked = sum(sh.get("loss_masked", 0) for sh in man["shards"])
    if masked:
        print(f"note: {masked:,} tokens that datatrove's .ds.loss masks from the loss are trained on "
              "(pretraining has no loss mask)")
    return 0


SHOWN_SOURCES, SHOWN_KINDS = 50, 20  # a manifest's listing printed by `tokens inspect`


def _inspect(args: argparse.Namespace) -> int:
    from pretrain.errors import DataError, UserError
    from pretrain.tokens.shards import TokenDir
    from pretrain.tokens.tokenizer import load_tokenizer, tokenizer_sha256
    from pretrain.untrusted import one_line

    try:
        d = TokenDir(args.directory)
    except DataError as e:
        raise UserError(str(e)) from e
    m = d.manifest
    saved = d.path / m["tokenizer"].get("copy", "tokenizer.json")
    doc, n_tokens, tok_path = _sample_options(args, d, saved)  # refused before anything is printed
    print(f"{d.path}: {m['format']} v{m['version']}, dtype {m['dtype']}, vocabulary {m['vocab_size']:,}, "
          f"end-of-text id {m['eot_id']}, tokenizer sha256 {d.tokenizer_sha256[:12]}")
    n = len(m["shards"])
    print(f"{d.num_tokens:,} tokens, {d.num_documents:,} documents, {n} shard{'s' if n != 1 else ''}, "
          f"{d.num_tokens / max(1, d.num_documents):,.1f} tokens per document")
    sources = m.get("sources", {})  # checked counts (shards.py); `skipped` as the report keeps it
    from pretrain.report_corpus import _skipped_kinds

    skipped = _skipped_kinds(m, limit=None)
    for name, c in list(sources.items())[:SHOWN_SOURCES]:  # someone's names: no escape sequences
        print(f"  source {one_line(name)}: {c['tokens']:,} tokens, {count(c['documents'], 'document')}")
    if len(sources) > SHOWN_SOURCES:  # 100,000 sources were 100,000 lines
        print(f"  ... and {len(sources) - SHOWN_SOURCES:,} more sources")
    if skipped:  # 10^6 kinds were one line of 16 MB
        more = f", and {len(skipped) - SHOWN_KINDS:,} more kinds" if len(skipped) > SHOWN_KINDS else ""
        print("  skipped records: " + ", ".join(f"{one_line(k[:200])}: {v}" for k, v in
                                                list(skipped.items())[:SHOWN_KINDS]) + more)
    if tok_path is None:
        if d.num_documents:
            print(f"(no sample: {d.path} has no {saved.name}; --tokenizer FILE decodes one)")
        return 0
    tok = load_tokenizer(tok_path)
    d.check_tokenizer(tokenizer_sha256(tok), str(tok_path))
    length, ids = d.document_length(doc), d.document(doc, limit=n_tokens).tolist()
    shown = ids[:20]  # the ids of the first 20: the text below is decoded from all `ids`
    print(f"document {doc} ({length:,} tokens): ids {shown}{' ...' if len(ids) > 20 else ''} "
          f"(first {len(shown)} of the {len(ids):,} decoded below)")
    print(repr(tok.decode(ids, skip_special_tokens=False)))
    return 0


def _sample_options(args: argparse.Namespace, d, saved) -> tuple[int, int, object]:
    """(document, tokens, tokenizer path or None when there is no sample to show). The options are
    checked whether or not a sample can be shown: they were dropped in silence when the folder had
    no tokenizer copy, or a --tokenizer path did not exist (session 13)."""
    from pathlib import Path

    from pretrain.errors import UserError

    doc, n_tokens = args.doc if args.doc is not None else 0, args.tokens if args.tokens is not None else 100
    if n_tokens < 0:
        raise UserError(f"--tokens is how many tokens of the document to show (>= 0), got {n_tokens}")
    asked = [f for f, v in (("--doc", args.doc), ("--tokens", args.tokens)) if v is not None]
    if d.num_documents == 0:
        if asked:
            raise UserError(f"{d.path} holds no document: {' and '.join(asked)} have nothing to show")
        return doc, n_tokens, None
    if not 0 <= doc < d.num_documents:
        raise UserError(f"--doc {doc} is outside 0..{d.num_documents - 1}")
    tok_path = Path(args.tokenizer) if args.tokenizer else saved
    if args.tokenizer and not tok_path.is_file():
        raise UserError(f"--tokenizer {args.tokenizer}: no such file (the tokenizer.json that made {d.path})")
    if not tok_path.is_file():
        if asked:
            raise UserError(f"{d.path} has no {saved.name} to decode {' and '.join(asked)} with: give "
                            "--tokenizer FILE (the tokenizer that made it)")
        return doc, n_tokens, None
    if tok_path == saved:  # the folder's own copy: a link out of it (~/.ssh/id_rsa) is not read
        from pretrain import untrusted

        try:
            untrusted.check_file(saved, within=d.path)
        except untrusted.BadFile as e:
            raise UserError(str(e)) from None
    return doc, n_tokens, tok_path
