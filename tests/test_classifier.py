"""Naive Bayes quality classifier: the lesson's votes, a real train/score round trip, the CLI, bad models."""

from __future__ import annotations

import json
import math
import re

import pytest
from conftest import data_file
from s3server import s3  # noqa: F401  (the fixture)
from test_job_s3 import s3_here  # noqa: F401  (the fixture)

from pretrain.cli import main
from pretrain.curate.classifier import (
    REASON,
    ClassifierConfig,
    NaiveBayes,
    build_classifier_steps,
)
from pretrain.curate.document import Document
from pretrain.errors import UserError


def lesson_texts() -> tuple[str, str]:
    """Training text with the lesson's counts (section 1c): N_good=77, N_bad=45, V=80.

    "river" appears 3 times in good and never in bad; "click" 4 times in bad and never in good.
    The other words fill the totals: good has river x3 + 36 words twice + 2 words once (77 words),
    bad has click x4 + 1 word twice + 39 words once (45 words); 1 + 38 + 1 + 40 = 80 distinct.
    """
    good = ["river"] * 3 + [f"good{i}" for i in range(36)] * 2 + ["good36", "good37"]
    bad = ["click"] * 4 + ["bad0"] * 2 + [f"bad{i}" for i in range(1, 40)]
    return " ".join(good), " ".join(bad)


def test_lesson_votes_from_trained_counts(tmp_path):
    good, bad = lesson_texts()
    (tmp_path / "good.txt").write_text(good)
    (tmp_path / "bad.txt").write_text(bad)
    model_path = tmp_path / "m.json"
    assert main(["classifier", "train", "--good", str(tmp_path / "good.txt"), "--bad",
                 str(tmp_path / "bad.txt"), "-o", str(model_path)]) == 0
    m = NaiveBayes.load(model_path)
    assert (m.n_good, m.n_bad, m.vocab_size) == (77, 45, 80)
    # P(river|good) = 4/157, P(river|bad) = 1/125: ratio 3.185, vote +1.158.
    assert m.vote("river") == pytest.approx(math.log((4 / 157) / (1 / 125)))
    assert round(m.vote("river"), 3) == 1.158
    assert round(m.vote("click"), 3) == -1.837
    # A document's score is the sum of its known words' votes; unseen words do not vote.
    river, click = math.log(4 / 157 * 125), math.log(1 / 157 / (5 / 125))
    assert m.score("river click river unseen") == pytest.approx(2 * river + click)


def wikitext_paragraphs(name: str) -> list[str]:
    text = data_file(f"lm/wikitext-2/{name}.txt").read_text(encoding="utf-8")
    return [p.strip() for p in text.split("\n") if len(p.split()) >= 40 and not p.strip().startswith("=")]


def shakespeare_speeches() -> list[str]:
    text = data_file("lm/tinyshakespeare/input.txt").read_text(encoding="utf-8")
    chunks = [c.strip() for c in re.split(r"\n\s*\n", text)]
    return [c for c in chunks if len(c.split()) >= 40]


def test_real_train_score_round_trip(tmp_path):
    # Good: encyclopedic prose (WikiText-2 valid); bad: stage verse (first half of Tiny Shakespeare).
    # Held out: WikiText-2 test vs the second half of Tiny Shakespeare.
    wiki_train, wiki_test = wikitext_paragraphs("valid"), wikitext_paragraphs("test")
    speeches = shakespeare_speeches()
    half = len(speeches) // 2
    model = NaiveBayes.train(wiki_train, speeches[:half])
    path = tmp_path / "model.json"
    model.save(path)
    loaded = NaiveBayes.load(path)
    probe = wiki_test[:20] + speeches[half:half + 20]
    assert [loaded.score(t) for t in probe] == [model.score(t) for t in probe]
    right_good = sum(loaded.score(t) > 0 for t in wiki_test) / len(wiki_test)
    right_bad = sum(loaded.score(t) < 0 for t in speeches[half:]) / len(speeches[half:])
    print(f"\nheld-out accuracy: wiki {right_good:.3f} ({len(wiki_test)}), "
          f"shakespeare {right_bad:.3f} ({len(speeches) - half})")
    assert right_good >= 0.95 and right_bad >= 0.95


def test_steps_tag_and_filter(tmp_path):
    good, bad = lesson_texts()
    path = tmp_path / "m.json"
    NaiveBayes.train([good], [bad]).save(path)
    steps = build_classifier_steps(ClassifierConfig(model=str(path), threshold=0.0))
    assert [s.name for s in steps] == ["classifier", "classifier_filter"]
    docs = [Document("g", "River river, and more river."), Document("b", "Click! CLICK now."),
            Document("n", "nothing known here")]
    out = docs
    for s in steps:
        out = list(s(out))
    assert [d.id for d in out] == ["g", "n"]  # a score of exactly 0 sits on the threshold: kept
    river = math.log(4 / 157 * 125)
    assert docs[0].metadata["quality_score"] == pytest.approx(3 * river, abs=1e-4)
    assert docs[0].metadata["quality_score_per_word"] == pytest.approx(river, abs=1e-4)
    assert steps[1].stats[f"dropped.{REASON}"] == 1
    assert build_classifier_steps(ClassifierConfig()) == []
    tag_only = build_classifier_steps(ClassifierConfig(model=str(path), filter=False))
    assert [s.name for s in tag_only] == ["classifier"]


def test_score_command_writes_jsonl(tmp_path):
    good, bad = lesson_texts()
    path = tmp_path / "m.json"
    NaiveBayes.train([good], [bad]).save(path)
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "1", "text": "river river"}\n{not json\n{"id": "2", "text": "click"}\n')
    out = tmp_path / "scores.jsonl"
    assert main(["classifier", "score", "--model", str(path), str(corpus), "-o", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == ["1", "2"]
    assert rows[0]["quality_score"] > 0 > rows[1]["quality_score"]


@pytest.mark.parametrize("content, match", [
    ("not json at all", "invalid JSON"),
    ('{"format": "something else"}', "format"),
    ('{"format": "pretrain.naive_bayes", "version": 1, "good": {"a": -1}, "bad": {"b": 1}}', "positive"),
    ('{"format": "pretrain.naive_bayes", "version": 1, "n_good": 5, "n_bad": 1, "vocab_size": 2,'
     ' "good": {"a": 1}, "bad": {"b": 1}}', "damaged"),
    # JSON true is no version 1 nor a count, 2.0 words no total (Python: True == 1 == 1.0)
    ('{"format": "pretrain.naive_bayes", "version": true, "n_good": 1, "n_bad": 1, "vocab_size": 2,'
     ' "good": {"a": 1}, "bad": {"b": 1}}', "version true"),
    ('{"format": "pretrain.naive_bayes", "version": 1, "n_good": 1, "n_bad": 1, "vocab_size": 2,'
     ' "good": {"a": true}, "bad": {"b": 1}}', "positive"),
    ('{"format": "pretrain.naive_bayes", "version": 1, "n_good": 1.0, "n_bad": 1, "vocab_size": 2,'
     ' "good": {"a": 1}, "bad": {"b": 1}}', "damaged"),
])
def test_bad_model_files_are_clear_errors(tmp_path, content, match):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(UserError, match=match):
        NaiveBayes.load(path)
    with pytest.raises(UserError, match="not found"):
        NaiveBayes.load(tmp_path / "missing.json")


def test_a_training_set_of_one_class_is_one_line_naming_the_empty_class(tmp_path, capsys):
    (tmp_path / "g.txt").write_text("good words about rivers\n")
    (tmp_path / "empty.txt").write_text("... !!! ---\n")  # a document, but not one word
    args = ["classifier", "train", "--good", str(tmp_path / "g.txt"), "--bad", str(tmp_path / "empty.txt"),
            "-o", str(tmp_path / "m.json")]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "the bad training text has no words" in err
    assert not (tmp_path / "m.json").exists()


def test_a_model_written_into_the_training_folder_is_not_trained_on_when_rerun(tmp_path, capsys):
    (tmp_path / "good").mkdir()
    (tmp_path / "good" / "g.txt").write_text("good words about rivers\n")
    (tmp_path / "b.txt").write_text("click here buy now\n")
    model = tmp_path / "good" / "model.jsonl"  # a name the readers take for a corpus file
    args = ["classifier", "train", "--good", str(tmp_path / "good"), "--bad", str(tmp_path / "b.txt"),
            "-o", str(model)]
    assert main(args) == 0
    first = model.read_bytes()
    assert main(args) == 0
    assert model.read_bytes() == first
    assert capsys.readouterr().out.count("; 0 bad records skipped") == 2  # not read as a bad record


def test_a_min_count_that_empties_a_class_says_so(tmp_path, capsys):
    (tmp_path / "g.txt").write_text("good good words\n")
    (tmp_path / "b.txt").write_text("click here\n")
    args = ["classifier", "train", "--good", str(tmp_path / "g.txt"), "--bad", str(tmp_path / "b.txt"),
            "-o", str(tmp_path / "m.json"), "--min-count", "3"]
    assert main(args) == 2
    assert "min_count=3 drops every word of a class (the most frequent word is seen 2 times)" in \
        capsys.readouterr().err


def test_scores_carry_the_document_id_even_when_its_metadata_has_an_id(tmp_path):
    good, bad = lesson_texts()
    NaiveBayes.train([good], [bad]).save(tmp_path / "m.json")
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "doc1", "text": "river", "metadata": {"id": "other", "lang": "en"}}\n')
    out = tmp_path / "scores.jsonl"
    model = str(tmp_path / "m.json")
    assert main(["classifier", "score", "--model", model, str(corpus), "-o", str(out)]) == 0
    row = json.loads(out.read_text())
    assert row["id"] == "doc1" and row["lang"] == "en" and row["quality_score"] > 0


def _model_file(path, good: dict, bad: dict):
    obj = {"format": "pretrain.naive_bayes", "version": 1, "n_good": sum(good.values()),
           "n_bad": sum(bad.values()), "vocab_size": len(good.keys() | bad.keys()), "good": good, "bad": bad}
    path.write_text(json.dumps(obj))
    return path


@pytest.mark.parametrize("good, bad, said", [
    ({"a": 1, "b": 2}, {"a": 10**4000, "c": 1}, "'bad' counts 'a' a 4,001-digit number times"),
    ({"a": 10**30, "b": 1}, {"c": 1}, "'good' counts 'a' a 31-digit number times"),
    ({"a": 2**62, "b": 2**62}, {"c": 1}, "'good' counts add up to 9,223,372,036,854,775,808"),
])
def test_a_model_of_counts_past_any_training_text_is_one_line(tmp_path, capsys, good, bad, said):
    """A count past 2**63 (JSON allows 4,300 digits) made P(w|c) underflow to 0.0: ZeroDivisionError
    or "math domain error" out of `classifier score` and `curate`, a traceback."""
    path = _model_file(tmp_path / "m.json", good, bad)
    with pytest.raises(UserError, match=re.escape(said)) as e:
        NaiveBayes.load(path)
    assert str(e.value).startswith(f"{path}: damaged classifier model")
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "1", "text": "a b c"}\n')
    out = str(tmp_path / "s.jsonl")
    assert main(["classifier", "score", "--model", str(path), str(corpus), "-o", out]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err


def test_a_model_at_the_count_bound_votes_as_the_formula_says(tmp_path):
    """The bound refuses nothing a real model holds: 2**63-1 words of a class still load, and each
    vote is the lesson's log((c_good+1)/(N_good+V) / ((c_bad+1)/(N_bad+V))), computed exactly."""
    from fractions import Fraction

    good, bad = {"a": 2**63 - 2, "b": 1}, {"a": 3, "c": 4}
    model = NaiveBayes.load(_model_file(tmp_path / "m.json", good, bad))
    for w in ("a", "b", "c"):
        p_good = Fraction(good.get(w, 0) + 1, 2**63 - 1 + 3)
        p_bad = Fraction(bad.get(w, 0) + 1, 7 + 3)
        assert model.votes[w] == pytest.approx(math.log(p_good / p_bad), rel=1e-12)


def _scores(path) -> dict[str, float]:
    return {r["id"]: r["quality_score"] for r in map(json.loads, path.read_text().splitlines())}


def test_score_of_a_warc_page_is_of_its_main_text_as_the_belt_extracts_it(tmp_path, capsys):
    """`classifier score` on a WARC scored the raw markup (tags and scripts as words: a real page
    at -26,411, session 13): its score is now the model's score of the text `pretrain curate`'s
    extract step gives the same page, and `train` on the WARC counts those words."""
    from pretrain.curate.io import read_jsonl_zst

    warc = data_file("warc/dolma/sample-0000.warc.gz")
    good, bad = lesson_texts()
    model = tmp_path / "m.json"
    NaiveBayes.train([good + " wikipedia the of and"], [bad]).save(model)
    out = tmp_path / "scores.jsonl"
    assert main(["classifier", "score", "--model", str(model), str(warc), "-o", str(out)]) == 0
    corpus = tmp_path / "corpus"
    assert main(["curate", str(warc), "-o", str(corpus), "--workers", "1", "--quiet",
                 "--set", 'steps=["extract"]']) == 0
    loaded = NaiveBayes.load(model)
    extracted = {r["id"]: r["text"] for f in sorted((corpus / "data").glob("*.jsonl.zst"))
                 for r in read_jsonl_zst(f)}
    assert len(extracted) >= 10 and not any("<div" in t for t in extracted.values())
    assert _scores(out) == {i: round(loaded.score(t), 4) for i, t in extracted.items()}
    capsys.readouterr()
    model2 = tmp_path / "m2.json"
    assert main(["classifier", "train", "--good", str(warc), "--bad", str(tmp_path / "bad.txt*"),
                 "-o", str(model2)]) == 2  # the glob matches nothing: said, nothing written
    (tmp_path / "bad.txt").write_text(bad)
    assert main(["classifier", "train", "--good", str(warc), "--bad", str(tmp_path / "bad.txt"),
                 "-o", str(model2)]) == 0
    assert NaiveBayes.load(model2).n_good == NaiveBayes.train(extracted.values(), [bad]).n_good


def test_every_missing_input_and_a_url_model_are_named_in_one_error(tmp_path, capsys):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "1", "text": "river"}\n')
    args = ["classifier", "score", "--model", "s3://models/m.json", str(corpus), str(tmp_path / "gone1"),
            str(tmp_path / "gone*.jsonl")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"input not found: {tmp_path / 'gone1'}; no input matches '{tmp_path / 'gone*.jsonl'}'" in err
    assert "--model s3://models/m.json: a URL, and only a local file is read here" in err  # not s3:/models
    assert main(["classifier", "train", "--good", str(tmp_path / "g"), "--bad", str(tmp_path / "b"),
                 "-o", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err
    assert f"--good input not found: {tmp_path / 'g'}; --bad input not found: {tmp_path / 'b'}" in err
    (tmp_path / "empty").mkdir()
    good, bad = lesson_texts()
    NaiveBayes.train([good], [bad]).save(tmp_path / "m.json")
    assert main(["classifier", "score", "--model", str(tmp_path / "m.json"), str(tmp_path / "empty")]) == 2
    assert f"no input files found in {tmp_path / 'empty'}" in capsys.readouterr().err


def test_score_reads_a_bucket_prefix_as_its_local_copy(tmp_path, s3_here):  # noqa: F811
    good, bad = lesson_texts()
    model = tmp_path / "m.json"
    NaiveBayes.train([good], [bad]).save(model)
    local = tmp_path / "in"
    (local / "sub").mkdir(parents=True)
    (local / "a.jsonl").write_text('{"text": "river river click"}\n{"text": "click click"}\n')
    (local / "sub" / "b.txt").write_text("good1 good2 river")
    bucket = s3_here.new_bucket()
    s3_here.filesystem().put(str(local), f"{bucket}/in", recursive=True)
    out_local, out_s3 = tmp_path / "local.jsonl", tmp_path / "s3.jsonl"
    assert main(["classifier", "score", "--model", str(model), str(local), "-o", str(out_local)]) == 0
    assert main(["classifier", "score", "--model", str(model), f"s3://{bucket}/in", "-o", str(out_s3)]) == 0
    assert len(_scores(out_local)) == 3 and _scores(out_s3) == _scores(out_local)


def test_bad_records_are_said_by_kind_every_kind_with_its_first(tmp_path, capsys):
    """Five bad records were printed, all of the first file's kind: 130 records without the text
    field hid the malformed WET file's. Now one line per kind, its count and its first record."""
    wet = data_file("warc/cc_net/sample.warc.wet")
    good, bad = lesson_texts()
    model = tmp_path / "m.json"
    NaiveBayes.train([good], [bad]).save(model)
    other = tmp_path / "other.jsonl"
    other.write_text("".join(json.dumps({"id": i, "body": "river"}) + "\n" for i in range(7)))
    assert main(["classifier", "score", "--model", str(model), str(other), str(wet), "-o",
                 str(tmp_path / "s.jsonl")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0].endswith("; 10 bad records skipped"), err
    assert err[1] == (f"  7 missing text field 'text'; first: {other}: record line 1: missing text field "
                      "'text'; its fields: 'id', 'body'; the text under another field? --text-field NAME")
    assert err[2].startswith("  3 bytes skipped between records: not a valid record") and str(wet) in err[2]
    assert len(err) == 3, err


def test_text_is_html_scores_pages_in_a_jsonl_field_as_their_html_files(tmp_path):
    """--text-is-html: pages under a JSONL field score as the same pages in .html files (ids
    differ: a file's is of its name), and not as their markup does."""
    import gzip

    src = data_file("html/mozilla-readability/readability-test-pages.part1.jsonl.gz")
    rows = [json.loads(line) for line in gzip.open(src, "rt").read().splitlines()[:6]]
    pages = tmp_path / "pages.jsonl"
    pages.write_text("".join(json.dumps({"id": r["name"], "html": r["source_html"]}) + "\n" for r in rows))
    (tmp_path / "files").mkdir()
    for r in rows:
        (tmp_path / "files" / f"{r['name']}.html").write_text(r["source_html"])
    good, bad = lesson_texts()
    model = tmp_path / "m.json"
    NaiveBayes.train([good + " the of and to"], [bad]).save(model)
    score = ["classifier", "score", "--model", str(model)]
    field = [str(pages), "--text-field", "html"]
    assert main([*score, *field, "--text-is-html", "-o", str(tmp_path / "a")]) == 0
    assert main([*score, str(tmp_path / "files"), "-o", str(tmp_path / "b")]) == 0
    assert main([*score, *field, "-o", str(tmp_path / "c")]) == 0
    a = sorted(_scores(tmp_path / "a").values())
    assert len(a) == 6 and a == sorted(_scores(tmp_path / "b").values())
    assert a != sorted(_scores(tmp_path / "c").values())  # the markup scored otherwise


def test_exclude_leaves_a_folders_licence_out_of_training_and_scoring(tmp_path, capsys):
    """--exclude GLOB, as curate and tokenize read it: the model trained on a --good folder less its
    LICENSE is the model trained on its data file named alone; score leaves it out as well."""
    good = tmp_path / "good"
    good.mkdir()
    (good / "g.txt").write_text("good words about rivers and lakes\n")
    (good / "LICENSE.txt").write_text("permission is hereby granted free of charge\n")
    (tmp_path / "b.txt").write_text("click here buy now\n")
    bad = ["--bad", str(tmp_path / "b.txt")]
    train = ["classifier", "train", *bad, "--good"]
    assert main([*train, str(good / "g.txt"), "-o", str(tmp_path / "alone.json")]) == 0
    assert main([*train, str(good), "-o", str(tmp_path / "all.json")]) == 0
    assert "--exclude 'LICENSE.txt' leaves it out" in capsys.readouterr().err  # named, not skipped
    assert main([*train, str(good), "-o", str(tmp_path / "ex.json"), "--exclude", "LICENSE*"]) == 0
    assert "LICENSE" not in capsys.readouterr().err
    alone, every = NaiveBayes.load(tmp_path / "alone.json"), NaiveBayes.load(tmp_path / "all.json")
    ex = NaiveBayes.load(tmp_path / "ex.json")
    assert (ex.n_good, ex.vocab_size) == (alone.n_good, alone.vocab_size) != (every.n_good, every.vocab_size)
    score = ["classifier", "score", "--model", str(tmp_path / "ex.json")]
    assert main([*score, str(good), "-o", str(tmp_path / "ex.jsonl"), "--exclude", "LICENSE*"]) == 0
    assert main([*score, str(good / "g.txt"), "-o", str(tmp_path / "alone.jsonl")]) == 0
    assert (tmp_path / "ex.jsonl").read_text() == (tmp_path / "alone.jsonl").read_text() != ""
