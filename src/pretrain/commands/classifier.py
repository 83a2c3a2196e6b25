"""`pretrain classifier`: train and apply the naive Bayes quality classifier."""

from __future__ import annotations

import argparse
import sys
from collections import Counter

from pretrain.bounds import Number
from pretrain.progress import count

HELP = "naive Bayes quality classifier: train on good/bad text, score documents"
DESCRIPTION = """\
A quality classifier scores how much a page looks like text you want ("good": encyclopedia
articles, books, pages trusted sites link to) rather than raw crawl ("bad"). Naive Bayes is the
simplest one: every word casts a vote log P(w|good)/P(w|bad), with add-one smoothing
P(w|c) = (count_c(w) + 1) / (N_c + V), and a document's score is the sum of its words' votes.
Above 0 leans good, below 0 leans bad. Beware: it keeps whatever resembles the good set, blind
spots included (dialects, forums, whole topics).

  train   count words in --good and --bad files -> a JSON model (counts; never pickle)
  score   score documents with a model -> JSONL lines {id, quality_score, quality_score_per_word}

Inputs: files, folders, globs or URLs (s3://bucket/prefix, ...) of what `pretrain curate` reads:
plain text (.txt), JSON Lines or a JSON array (.jsonl, .json; .gz, .zst, .bz2, .xz; --text-field),
Parquet, Arrow (datasets' save_to_disk), HTML (.html, .html.gz) and WARC/WET/ARC. HTML pages are
scored on their main text, extracted as the belt's extract step does (default backend), not on
their markup. Bad records are skipped and counted; the model is a local file.

Examples:
  pretrain classifier train --good wiki.jsonl.zst --bad crawl.jsonl.zst -o quality.json
  pretrain classifier score --model quality.json corpus/data/ -o scores.jsonl
  pretrain curate crawl/ -o corpus/ --set classifier.model=quality.json --set classifier.threshold=0.1
"""
TRAIN = """\
Count the words of the --good and the --bad text and write them as a JSON model (never pickle):
a word's vote is log P(w|good)/P(w|bad) with add-one smoothing, so the model is just the counts.
Prints N_good, N_bad (words) and V (distinct words kept) and the bad records skipped.

Example:
  pretrain classifier train --good wiki.jsonl.zst --bad crawl.jsonl.zst -o quality.json --min-count 2
"""
SCORE = """\
Score every document of INPUT with a model from `pretrain classifier train`: one JSONL line per
document, its id and metadata plus quality_score (the sum of its words' votes; above 0 leans good)
and quality_score_per_word, to -o or stdout; the count that leans good goes to stderr.

Example:
  pretrain classifier score --model quality.json corpus/data/ -o scores.jsonl
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    from pretrain.commands import add_exclude

    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    t = sub.add_parser("train", help="train a model from good and bad text files", description=TRAIN,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    t.add_argument("--good", nargs="+", required=True, metavar="FILE",
                   help="reference text (files, folders, globs, URLs)")
    t.add_argument("--bad", nargs="+", required=True, metavar="FILE",
                   help="text to score against (files, folders, globs, URLs)")
    t.add_argument("-o", "--output", required=True, metavar="MODEL", help="model file to write (JSON)")
    t.add_argument("--min-count", type=Number(int, lo=1, why="occurrences of a word; 1 keeps every word"),
                   default=1,
                   help="drop words seen fewer times in all (default 1)")
    t.add_argument("--text-field", default="text", help="JSONL/Parquet field holding the text (default text)")
    t.add_argument("--text-is-html", action="store_true",
                   help="the text field holds whole HTML pages: extract their main text first")
    add_exclude(t)  # --good/--bad folders hold a LICENSE or README as often as curate's inputs do
    s = sub.add_parser("score", help="score documents with a model", description=SCORE,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="files, folders, globs or URLs (s3://...) to score")
    s.add_argument("--model", required=True, help="model file from `pretrain classifier train`")
    s.add_argument("-o", "--output", default="-", help="JSONL of scores (default: stdout)")
    s.add_argument("--text-field", default="text", help="JSONL/Parquet field holding the text (default text)")
    s.add_argument("--text-is-html", action="store_true",
                   help="the text field holds whole HTML pages: extract their main text first")
    s.add_argument("--id-field", default="id", help="JSONL/Parquet field holding the id (default id)")
    s.add_argument("--max-model-bytes", type=Number(int, lo=1, why="bytes of the model file"),
                   default=32 * 1024**2, metavar="N",
                   help="refuse a model file larger than this, unread (a model holds ~16x its size "
                        "in memory; default 32 MiB, ~2.4 M words; classifier.max_model_bytes in curate)")
    add_exclude(s)


def run(args: argparse.Namespace) -> int:
    return _train(args) if args.action == "train" else _score(args)


def _train(args: argparse.Namespace) -> int:
    from pretrain.curate.classifier import NaiveBayes
    from pretrain.curate.classifier_inputs import Skipped, check_inputs, documents, listed

    check_inputs({"--good": args.good, "--bad": args.bad})
    # the model being written is never training text (a rerun into the --good folder met it)
    exclude = tuple(args.exclude)
    good_files = listed(args.good, "--good", args.output, exclude)
    bad_files = listed(args.bad, "--bad", args.output, exclude)
    errors = Skipped()
    stats: Counter[str] = Counter()
    good = (d.text for d in documents(good_files, _reader(args), errors, stats))
    bad = (d.text for d in documents(bad_files, _reader(args), errors, stats))
    model = NaiveBayes.train(good, bad, min_count=args.min_count)
    model.save(args.output)
    print(f"wrote {args.output}: N_good={model.n_good:,} words, N_bad={model.n_bad:,} words, "
          f"V={model.vocab_size:,} distinct; {count(len(errors), 'bad record')} skipped{_no_text(stats)}")
    _print_errors(errors)
    return 0


def _score(args: argparse.Namespace) -> int:
    from pretrain.curate.classifier import ClassifierTagger, NaiveBayes
    from pretrain.curate.classifier_inputs import Skipped, check_inputs, documents, listed
    from pretrain.curate.io import atomic_path, dumps_line

    check_inputs({"": args.inputs}, args.model)
    tagger = ClassifierTagger(NaiveBayes.load(args.model, args.max_model_bytes))
    files = listed(args.inputs, skip=args.output, exclude=tuple(args.exclude))
    errors = Skipped()
    stats: Counter[str] = Counter()
    n = good = 0

    def lines():
        nonlocal n, good
        for doc in tagger(documents(files, _reader(args), errors, stats)):
            n += 1
            good += doc.metadata["quality_score"] > 0
            # the document's id last wins: an input's metadata may carry an "id" of its own
            yield dumps_line({"id": doc.id, **doc.metadata} | {"id": doc.id})

    if args.output == "-":
        for line in lines():
            sys.stdout.buffer.write(line)
    else:
        with atomic_path(args.output) as tmp, open(tmp, "wb") as f:
            f.writelines(lines())
    print(f"scored {count(n, 'document')}: {good:,} lean good (score > 0); "
          f"{count(len(errors), 'bad record')} skipped{_no_text(stats)}",
          file=sys.stderr)
    _print_errors(errors)
    return 0


def _reader(args: argparse.Namespace):
    from pretrain.curate.readers import ReaderConfig

    return ReaderConfig(text_field=args.text_field, id_field=getattr(args, "id_field", "id"),
                        text_is_html=args.text_is_html)


def _no_text(stats: Counter[str]) -> str:
    n = stats["no_main_text"]
    return f"; {count(n, 'HTML page')} with no main text left out" if n else ""


def _print_errors(errors) -> None:
    for line in errors.lines():
        print(f"  {line}", file=sys.stderr)
