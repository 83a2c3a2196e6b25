"""Decontamination against lm-eval's Janitor (the 13-gram overlap of lm-evaluation-harness, after
GPT-3's appendix C) on real text with real GSM8K questions planted whole, edited and halved."""

from __future__ import annotations

import contextlib
import io
import json
import random

import pytest
from conftest import data_file
from test_decontam import light_edit, plant, wiki_paragraphs

from pretrain.curate.decontam import NgramIndex


def test_every_document_lm_evals_janitor_flags_is_flagged():
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        janitor = pytest.importorskip("lm_eval.decontamination.janitor")  # warns: no C++ module
    spec = data_file("benchmarks/gsm8k/test.jsonl")
    questions = [json.loads(line)["question"] for line in spec.read_text().splitlines()]
    jan = janitor.Janitor(ngram_n=13)
    for q in questions:
        jan.register_contaminant_python(q)
    ours = NgramIndex([f"{spec}:question"], n=13, min_words=13)  # plain 13-grams, as the Janitor's
    rng = random.Random(5)
    docs = wiki_paragraphs()[:240]
    for k in range(0, len(docs), 3):
        q = rng.choice(questions)
        q = [q, light_edit(q, rng), " ".join(q.split()[: len(q.split()) // 2])][k % 3]
        docs[k] = plant(docs[k], q, rng)

    def janitor_flags(doc: str) -> bool:
        grams = janitor.word_ngrams(jan.normalize_string(doc), 13)
        return any(g in jan.dirt_ngrams for g in grams)

    theirs = {i for i, d in enumerate(docs) if janitor_flags(d)}
    mine = {i for i, d in enumerate(docs) if ours.lookup(d)}
    # The Janitor deletes ASCII punctuation ("$1,000" -> one word "1000") where we split on it,
    # so each of its words is one or more of ours: whatever it finds, we find.
    assert len(theirs) >= 40 and theirs <= mine
    # and nothing more here: whole, re-cased, re-punctuated and halved copies are found by both,
    # and no clean WikiText paragraph by either
    assert mine == theirs and mine <= set(range(0, len(docs), 3))


def test_same_report_and_outputs_for_1_or_7_files_and_1_or_2_workers(tmp_path):
    from pretrain.cli import main
    from pretrain.curate.io import read_jsonl_zst

    spec = data_file("benchmarks/gsm8k/test.jsonl")
    questions = [json.loads(line)["question"] for line in spec.read_text().splitlines()]
    rng = random.Random(7)
    docs = wiki_paragraphs()[:210]
    for k in range(0, len(docs), 5):
        docs[k] = plant(docs[k], rng.choice(questions), rng)
    lines = [json.dumps({"id": f"w{i:04d}", "text": d}) + "\n" for i, d in enumerate(docs)]
    results = []
    for files, workers in ((1, 1), (7, 2)):
        inp, out = tmp_path / f"in{files}", tmp_path / f"out{files}"
        inp.mkdir()
        size = -(-len(lines) // files)
        for f in range(files):
            (inp / f"p{f}.jsonl").write_text("".join(lines[f * size:(f + 1) * size]))
        assert main(["decontaminate", str(inp), "-o", str(out), "--benchmarks", f"{spec}:question",
                     "--workers", str(workers), "--quiet"]) == 0
        kept = sorted(r["id"] for f in (out / "data").glob("*.zst") for r in read_jsonl_zst(f))
        removed = sorted(r["id"] for f in (out / "rejects").glob("*.zst") for r in read_jsonl_zst(f))
        stats = json.loads((out / "stats.json").read_text())
        assert stats["documents"]["read"] == len(kept) + len(removed) == len(docs)
        results.append((kept, removed, (out / "decontam_report.json").read_bytes()))
    assert results[0] == results[1]
    assert results[0][1] == [f"w{k:04d}" for k in range(0, len(docs), 5)]  # every planted one, no other
