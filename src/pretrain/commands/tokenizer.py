"""`pretrain tokenizer train`: learn a byte-level BPE vocabulary from a corpus."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

from pretrain.bounds import Count, Number
from pretrain.progress import count

HELP = "train a byte-level BPE tokenizer (HF tokenizers) on a corpus"
DESCRIPTION = """\
Learn a byte-level BPE tokenizer from CORPUS files (curate outputs OUT/data/*.jsonl.zst, or any
JSONL(.gz/.zst) with a "text" field, Parquet, plain text; folders are searched recursively).

Byte-level BPE starts from the 256 byte values, so any text can be encoded and decoding gives back
exactly the input; it then merges the most frequent adjacent pairs until the vocabulary has
--vocab-size entries (the byte tokens and the special tokens included). <|endoftext|> is always a
special token: `pretrain tokenize` puts it between documents.

Example:
  pretrain tokenizer train corpus/data -o tokenizer.json --vocab-size 32k   (32,000; 32Ki is 32,768)
  pretrain tokenizer train books.txt wiki.jsonl.zst -o tok.json --vocab-size 8192 --max-mb 100

Output: one tokenizer.json that HF `tokenizers` (and transformers' PreTrainedTokenizerFast) load.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    from pretrain.commands import add_exclude

    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    t = sub.add_parser("train", help="train a byte-level BPE", description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("inputs", nargs="+", metavar="CORPUS", help="files, folders or globs")
    t.add_argument("-o", "--output", required=True, metavar="TOKENIZER.json",
                   help="tokenizer file to write (a tokenizer there is replaced, and said so)")
    t.add_argument("--vocab-size", type=Count(lo=257, hi=2**31 - 1,
                              why="the 256 bytes, the end-of-text token and merges; token ids are 32-bit"),
                   required=True, metavar="N",
                   help="entries in the vocabulary, the 256 bytes and special tokens included: 32000, "
                        "or 32k (k = 1,000: 32,000, Llama's) or 32Ki (Ki = 1,024: 32,768, Mistral v0.3's)")
    t.add_argument("--special", action="append", default=[], metavar="TOKEN",
                   help="extra special token (repeatable); <|endoftext|> is always added")
    t.add_argument("--min-frequency", type=Number(int, lo=1, why="a pair's count"),
                   default=2, help="least count of a pair to merge (default 2)")
    t.add_argument("--max-mb", type=Number(float, gt=0, why="MB of text"),
                   default=None, help="train on at most this many MB of text (default: all of it)")
    t.add_argument("--text-field", default=None, metavar="NAME",
                   help="the JSON/Parquet field holding the text (default text; e.g. content, raw_content); "
                        "refused when no input has fields (.txt, HTML, WARC only)")
    add_exclude(t)
    t.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress on stderr: a bar by bytes read inside each file, then the BPE training "
                        "with its elapsed time (default: when stderr is a terminal)")


def run(args: argparse.Namespace) -> int:
    import math
    import sys
    import time
    from pathlib import Path

    from pretrain.commands.tokenize import bad_records, skipped_kinds
    from pretrain.curate.inputs import text_field_for
    from pretrain.curate.readers import list_inputs
    from pretrain.errors import UserError
    from pretrain.faults import merge_faults
    from pretrain.progress import ShardMeter
    from pretrain.tokens.pipeline import iter_texts, oversize_hint
    from pretrain.tokens.tokenizer import EOT, tokenizer_sha256, train_tokenizer
    from pretrain.untrusted import printable

    if args.min_frequency < 1:
        raise UserError(f"--min-frequency is the least count of a pair to merge (>= 1), "
                        f"got {args.min_frequency}")
    if args.max_mb is not None and not (math.isfinite(args.max_mb) and args.max_mb > 0):
        raise UserError(f"--max-mb must be a positive number of MB, got {args.max_mb}")
    files = list_inputs(args.inputs, exclude=tuple(args.exclude))
    if not files:  # said as tokenize says it (the reason, when one is known, was printed above)
        raise UserError(f"no input files in {', '.join(args.inputs)}; nothing written")
    field = text_field_for(args.text_field, files)  # given for .txt only: refused, not dropped
    before = _replacing(Path(args.output))  # refused here, before the training's minutes
    limit = None if args.max_mb is None else int(args.max_mb * 1e6)
    seen = {"bytes": 0, "docs": 0}
    errors: dict[str, int] = {}
    named: list[str] = []  # per file with bad records: `F: 3 records skipped (line 2: ...; ...)`

    def texts(meters=None, tick=lambda result=None: None, end=lambda: None):
        try:
            yield from _read(meters, tick)
        finally:
            end()

    def _read(meters, tick):
        for i, f in enumerate(files):
            bad: dict[str, int] = {}
            first: dict[str, str] = {}
            docs = iter_texts(f, bad, field, first)
            if meters is not None:  # the bar's position inside this file (progress.ShardMeter)
                docs = ShardMeter(meters / f"{i}.json", f).wrap(docs)
            read, cut = 0, False
            try:
                for text in docs:
                    if limit is not None and seen["bytes"] >= limit:
                        cut = True  # --max-mb: the rest of this file is not read (nor counted whole)
                        return
                    seen["bytes"] += len(text.encode("utf-8"))
                    seen["docs"] += 1
                    read += 1
                    yield text
            finally:  # the file and its first bad record of each kind, as tokenize names them
                if not cut:
                    tick({"shard": i, "read": read})
                merge_faults(errors, bad)
                if bad:
                    said = bad_records({"skipped": bad, "first_skipped": first})[2:]  # minus "; "
                    named.append(f"{printable(str(f))}: {said}")

    t0 = time.perf_counter()
    out = Path(args.output)
    with _shown(args.progress, files, seen, t0, meters_dir(out)) as (meters, tick, end):
        tok = train_tokenizer(texts(meters, tick, end), args.vocab_size, [EOT, *args.special],
                              args.min_frequency)
    seconds = time.perf_counter() - t0
    if seen["docs"] == 0:  # HF would return the 256 byte tokens and call it trained
        from pretrain.curate.report import why_none_read

        raise UserError(f"no text to train on in {', '.join(args.inputs)} "
                        f"({count(sum(errors.values()), 'record')} skipped; "
                        f"{why_none_read(errors)}{oversize_hint(errors)}"
                        f"{'; first: ' + named[0] if named else ''}); nothing written")
    from pretrain.curate.io import write_bytes_atomic

    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(out, tok.to_str(pretty=True).encode())
    except OSError as e:
        raise UserError(f"cannot write {out}: {e.strerror or e}") from e
    docs, sha, vocab = count(seen["docs"], "document"), tokenizer_sha256(tok), tok.get_vocab_size()
    print(f"trained on {docs}, {seen['bytes'] / 1e6:,.1f} MB in {seconds:.1f} s; "
          f"vocabulary {vocab:,}{_short_of(vocab, args)}; {count(sum(errors.values()), 'record')} skipped; "
          f"sha256 {sha[:12]} -> {out}{_replaced(before, sha)}")
    for line in named[:20]:  # after the summary line; bounded: a corpus may have 100,000 files
        print(f"  {line}", file=sys.stderr)
    if len(named) > 20:
        print(f"  ... and {len(named) - 20:,} more files with records skipped", file=sys.stderr)
    if errors:
        print(skipped_kinds(errors), file=sys.stderr)  # no manifest to point to: every kind
    return 0


def meters_dir(out: Path) -> Path:
    """Where --progress keeps the readers' positions: `.NAME.progress/` beside the output `NAME`,
    so that a run into the same -o removes what a killed one left (a temp folder stayed in /tmp
    after SIGKILL), as `pretrain tokenize` does with TOKENS/.progress/."""
    return out.parent / f".{out.name}.progress"


@contextlib.contextmanager
def _shown(enabled: bool | None, files: list, seen: dict, t0: float, meters: Path):
    """(meters folder or None, tick, end) while the texts are read: a bar by bytes inside each file;
    at `end` (HF tokenizers has every text) "training BPE on N MB" with its elapsed time, since its
    merges report nothing. Nothing without a terminal or with --no-progress: the summary says it.
    `meters` is removed first (a killed run's) and last, with or without a bar."""
    import shutil
    import time

    from pretrain.progress import Progress, seconds_text

    shutil.rmtree(meters, ignore_errors=True)
    progress = Progress(enabled)
    if not progress.enabled:
        yield None, lambda result=None: None, lambda: None
        return
    state: dict = {}

    def end() -> None:  # the reader is done (or --max-mb reached): the merges run now
        state["t"] = time.perf_counter()
        state["done"] = progress.pending("training", f"BPE on {seen['bytes'] / 1e6:,.1f} MB, "
                                         f"{count(seen['docs'], 'document')} ...")

    try:
        read = progress.start("reading", len(files), [str(f) for f in files], meters)
        yield meters, read, end
        state.get("done", lambda: None)()
    finally:
        progress.close()
        shutil.rmtree(meters, ignore_errors=True)
    if "t" in state:
        progress.console.print(f"trained BPE in {seconds_text(time.perf_counter() - state['t'])} "
                               f"after {seconds_text(state['t'] - t0)} of reading")


def _short_of(got: int, args: argparse.Namespace) -> str:
    """` of the 100,000 asked (...)` when the corpus ran out of pairs to merge before --vocab-size."""
    if got >= args.vocab_size:
        return ""
    return (f" of the {args.vocab_size:,} asked (no more pair seen --min-frequency {args.min_frequency} "
            "times: more text, or a smaller --vocab-size)")


def _replacing(out) -> tuple[int, str] | None:
    """What -o holds now: None (nothing), or the (vocabulary, sha256) of the tokenizer a rerun
    replaces. Refused: a file that is not a tokenizer (a config.json given as -o by mistake) and
    a token directory's tokenizer copy (its shards would decode with another vocabulary)."""
    import json

    from pretrain.errors import UserError
    from pretrain.tokens.tokenizer import load_tokenizer, tokenizer_sha256

    if not out.exists() or out.is_dir():  # a folder: the write's own one-line refusal
        return None
    manifest = out.parent / "manifest.json"
    try:  # someone else's file: a small JSON object read for one field, never trusted further
        m = json.loads(manifest.read_bytes()[:1 << 20]) if manifest.is_file() else None
        ours = isinstance(m, dict) and m.get("format") == "pretrain-tokens"
        copy = m["tokenizer"]["copy"] if ours else None
    except (OSError, ValueError, KeyError, TypeError):
        copy = None
    if copy == out.name:
        raise UserError(f"{out} is the tokenizer copy of the token directory {out.parent} (its shards "
                        f"were made with it); write the new tokenizer elsewhere")
    try:
        old = load_tokenizer(out)
    except UserError:
        raise UserError(f"{out} exists and is not a tokenizer.json; not replaced (remove it, or choose "
                        f"another -o)") from None
    return old.get_vocab_size(), tokenizer_sha256(old)


def _replaced(before: tuple[int, str] | None, sha: str) -> str:
    if before is None:
        return ""
    if before[1] == sha:
        return " (the same tokenizer as the file it replaced)"
    return f" (replaced a tokenizer of {before[0]:,} ids (sha256 {before[1][:12]}))"
