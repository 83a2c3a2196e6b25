"""`pretrain decontaminate`: remove (or tag) corpus documents that contain evaluation-set text."""

from __future__ import annotations

import argparse
import sys

HELP = "find benchmark text (13-gram overlap) in a corpus; remove or tag those documents"
DESCRIPTION = """\
A model that saw a benchmark's questions during pretraining scores well on it for the wrong
reason. This command indexes the word n-grams (13 by default; lowercased, punctuation stripped)
of evaluation sets and flags every corpus document that shares one with an item (the test of the
GPT-3 paper, appendix C). Items shorter than 13 words are matched whole; items under 8 words
are too generic to check and are counted as too_short.

Benchmarks: JSONL files (.jsonl, .jsonl.gz, .jsonl.zst) or folders of them. The usual text
fields (question, query, context, prompt, choices, answer, canonical_solution, ...) are used, or
name them: `file.jsonl:question` or `file.jsonl:meta.prompt,answer`. Nothing is downloaded:
point it at the sets you evaluate on.

Output (OUT/):
  data/*.jsonl.zst      kept documents (in --mode tag: all, with metadata.contamination)
  rejects/*.jsonl.zst   removed documents with step, reason and the items they contain
  report.json           per benchmark: items indexed, too short, leaked items -> document ids
  stats.json            documents in, kept, contaminated; bad records skipped

Examples:
  pretrain decontaminate corpus/data -o clean/ --benchmarks evals/mmlu evals/gsm8k/test.jsonl
  pretrain decontaminate web.jsonl.zst -o clean/ --benchmarks my_eval.jsonl:prompt --mode tag
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("inputs", nargs="+", metavar="CORPUS", help="corpus files/folders (JSONL, Parquet, text)")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="output directory")
    p.add_argument("--benchmarks", nargs="+", required=True, metavar="SPEC",
                   help="evaluation files or folders, optionally FILE:field.path[,field]")
    p.add_argument("--n", type=int, default=13, help="n-gram length in words (default 13)")
    p.add_argument("--min-words", type=int, default=8, help="shorter items are not checked (default 8)")
    p.add_argument("--mode", choices=["remove", "tag"], default="remove")
    p.add_argument("--text-field", default="text", help="JSONL/Parquet field holding the text")
    p.add_argument("--id-field", default="id", help="JSONL/Parquet field holding the id")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from pretrain.curate import io
    from pretrain.curate.decontam import DecontamStep, NgramIndex
    from pretrain.curate.readers import ReaderConfig, list_inputs, read_documents, source_name

    files = list_inputs(args.inputs)
    index = NgramIndex(args.benchmarks, args.n, args.min_words)
    print(f"indexed {len(index):,} grams from {sum(len(b.items) for b in index.benchmarks):,} items "
          f"of {len(index.benchmarks)} benchmark files", file=sys.stderr)
    out = Path(args.output)
    step = DecontamStep(index, args.mode)
    cfg = ReaderConfig(text_field=args.text_field, id_field=args.id_field)
    errors: list[str] = []
    rejects: list[dict] = []
    step.on_reject = lambda doc, name, reason: rejects.append(
        {"id": doc.id, "url": doc.url, "source": doc.source, "step": name, "reason": reason,
         "contamination": doc.metadata.get("contamination", [])})
    for shard, path in enumerate(files):
        rejects.clear()
        root = next((a for a in args.inputs if Path(path).is_relative_to(Path(a))), None)
        docs = read_documents(path, cfg, lambda f, rec, why: errors.append(f"{f}: {rec}: {why}"),
                              source=source_name(path, root))
        io.write_jsonl_zst(out / "data" / f"shard_{shard:05d}.jsonl.zst", (d.to_json() for d in step(docs)))
        io.write_jsonl_zst(out / "rejects" / f"shard_{shard:05d}.jsonl.zst", rejects)
    report = step.report()
    io.write_json_atomic(out / "report.json", report)
    stats = {"documents": dict(step.stats), "errors": {"count": len(errors), "examples": errors[:100]}}
    io.write_json_atomic(out / "stats.json", stats)
    _print_summary(report, len(errors))
    return 0


def _print_summary(report: dict, n_errors: int) -> None:
    docs = report["documents"]
    print(f"{docs['in']:,} documents, {docs['contaminated']:,} contaminated; {n_errors} bad records skipped")
    for name, b in report["benchmarks"].items():
        if b["items_leaked"]:
            print(f"  {name}: {b['items_leaked']} of {b['items_indexed']} items leaked")
