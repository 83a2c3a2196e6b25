"""Decontamination: planted benchmark items (whole, edited) are found in real text; clean text is not."""

from __future__ import annotations

import gzip
import json
import random
import re

import pytest
from conftest import data_file

from pretrain.cli import main
from pretrain.curate.decontam import (
    REASON,
    DecontamConfig,
    NgramIndex,
    build_decontam_step,
    item_text,
    load_index,
    words,
)
from pretrain.curate.document import Document
from pretrain.curate.io import read_jsonl_zst
from pretrain.errors import UserError


@pytest.fixture(scope="module")
def bench_dir():
    return data_file("benchmarks")


@pytest.fixture(scope="module")
def index(bench_dir):
    # Every evaluation set under ../shared/data/benchmarks (~60k items, ~2M 13-grams).
    return load_index((str(bench_dir),), 13, 8)


def jsonl(path, n=None):
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return rows if n is None else rows[:n]


def wiki_paragraphs() -> list[str]:
    text = data_file("lm/wikitext-2/test.txt").read_text(encoding="utf-8")
    return [p.strip() for p in text.split("\n") if len(p.split()) >= 60]


def shakespeare_docs() -> list[str]:
    text = data_file("lm/tinyshakespeare/input.txt").read_text(encoding="utf-8")
    chunks, cur = [], ""
    for block in re.split(r"\n\s*\n", text):
        cur += block + "\n\n"
        if len(cur) > 3000:
            chunks.append(cur)
            cur = ""
    return chunks + [cur]


def plant(host: str, item: str, rng: random.Random) -> str:
    """Insert `item` between two sentences of `host`."""
    cut = [m.end() for m in re.finditer(r"\. ", host)] or [len(host)]
    at = rng.choice(cut)
    return host[:at] + item + " " + host[at:]


def light_edit(text: str, rng: random.Random) -> str:
    """What a scraper or a forum copy does: two words changed, case and punctuation touched."""
    ws = text.split()
    for i in rng.sample(range(len(ws)), 2):
        ws[i] = "something"
    return " ".join(ws).upper().replace(",", " ,").replace("?", " ?!")


def test_clean_real_text_has_no_hits(index):
    docs = wiki_paragraphs() + shakespeare_docs()
    hits = [d[:80] for d in docs if index.lookup(d)]
    assert len(docs) > 1000 and hits == []


def test_planted_items_whole_and_edited_are_found(index, bench_dir):
    rng = random.Random(0)
    hosts = wiki_paragraphs()
    # Questions alone (without their choices or answers), and HumanEval's prompts.
    gsm, mmlu = jsonl(bench_dir / "gsm8k/test.jsonl"), jsonl(bench_dir / "mmlu/mmlu-test.jsonl.gz")
    humaneval = jsonl(bench_dir / "humaneval/HumanEval.jsonl.gz")
    planted = {
        "gsm8k/test": [(f"line {i + 1}", r["question"]) for i, r in enumerate(gsm)],
        "mmlu/mmlu-test": [(f"line {i + 1}", r["question"]) for i, r in enumerate(mmlu)],
        "humaneval/HumanEval": [(r["task_id"], r["prompt"]) for r in humaneval],
    }
    found_whole = found_edited = total = total_edited = 0
    for bench, items in planted.items():
        for label, text in rng.sample(items, 10):
            n_words = len(words(text))
            if n_words < 8:
                continue
            total += 1
            doc = plant(rng.choice(hosts), text, rng)
            hit = {index.describe(i) for i in index.lookup(doc)}
            found_whole += (bench, label) in hit
            if n_words >= 40:  # long enough that two edits leave 13-grams intact
                total_edited += 1
                edited = plant(rng.choice(hosts), light_edit(text, rng), rng)
                found_edited += (bench, label) in {index.describe(i) for i in index.lookup(edited)}
    assert total >= 25 and found_whole == total
    assert total_edited >= 10 and found_edited == total_edited


def test_short_item_rule(tmp_path, capsys):
    # 10-word item (< n=13): indexed whole, found when the document has all ten words in order.
    # 5-word item (< min_words=8): not indexed, counted as too short.
    bench = tmp_path / "tiny.jsonl"
    bench.write_text(json.dumps({"question": "Which river flows through the old town of Zell?"}) + "\n"
                     + json.dumps({"question": "Name the capital city."}) + "\n" + "{broken\n")
    idx = NgramIndex([str(bench)], n=13, min_words=8)
    b = idx.benchmarks[0]
    assert (len(b.items), b.too_short, b.bad_records) == (1, 1, 1)
    assert idx.lookup("Today we ask: which river flows through the old town of Zell? Nobody knew.")
    assert not idx.lookup("Which river flows through the old town of Ulm? Nobody knew.")
    assert not idx.lookup("name the capital city")
    # the command says both, beside the count of items checked (session 11: "0 of 1 items leaked")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"id": "d0", "text": "Nothing from any benchmark here at all."}) + "\n")
    assert main(["decontaminate", str(corpus), "-o", str(tmp_path / "out"), "--benchmarks", str(bench),
                 "--no-progress"]) == 0
    assert "tiny: 0 of 1 item leaked into 0 documents (1 item too short to check, 1 bad record)" in \
        capsys.readouterr().out
    # on a terminal, the seconds of indexing are said while they pass (they were silent) and the
    # line is gone after: a refusal that follows still comes first and alone
    import io

    from rich.console import Console

    from pretrain.curate.executor import LocalExecutor
    from pretrain.curate.pipeline import CurateConfig, curate
    from pretrain.progress import Progress

    progress = Progress(enabled=True)
    progress.console = Console(file=io.StringIO(), force_terminal=True, width=100)
    cfg = CurateConfig(steps=("decontaminate",))
    cfg.decontam.benchmarks = [str(bench)]
    curate([str(corpus)], tmp_path / "lib", cfg, executor=LocalExecutor(1), progress=progress)
    progress.close()
    assert "indexing the benchmarks' 13-grams ..." in progress.console.file.getvalue()
    card = (tmp_path / "out" / "README.md").read_text()  # the folder's card names the report it holds
    assert "`decontam_report.json` which benchmark items leaked" in card
    assert (tmp_path / "out" / "decontam_report.json").is_file()


def test_oversized_lines_are_skipped_not_held(tmp_path, monkeypatch):
    import pretrain.curate.decontam as dc

    monkeypatch.setattr(dc, "MAX_LINE_BYTES", 200)
    good = json.dumps({"question": "one two three four five six seven eight nine ten eleven twelve thirteen"})
    huge = json.dumps({"question": "word " * 500})
    path = tmp_path / "b.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.write("\n".join([good, huge, good, huge]) + "\n")
    idx = NgramIndex([str(path)])
    assert idx.benchmarks[0].items == ["line 1", "line 3"] and idx.benchmarks[0].bad_records == 2
    monkeypatch.setattr(dc, "MAX_BENCHMARK_BYTES", 500)
    with pytest.raises(UserError, match="decompressed"):
        NgramIndex([str(path)])


def test_field_paths_and_clear_errors(tmp_path):
    bench = tmp_path / "custom.jsonl"
    rec = {"meta": {"prompt": "one two three four five six seven eight nine ten eleven twelve thirteen"},
           "question": "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu"}
    bench.write_text(json.dumps(rec) + "\n")
    assert item_text(rec, ("meta.prompt",)).startswith("one two")
    only_meta = NgramIndex([f"{bench}:meta.prompt"])
    assert only_meta.lookup(rec["meta"]["prompt"]) and not only_meta.lookup(rec["question"])
    with pytest.raises(UserError, match="not found"):
        NgramIndex([str(tmp_path / "missing.jsonl")])
    # a field no record has is refused naming the file, the field and what the records hold; with
    # another that exists beside it, it was silently indexed without (session 13)
    for spec in (f"{bench}:nosuchfield", f"{bench}:question,nosuchfield"):
        with pytest.raises(UserError) as e:
            NgramIndex([spec])
        assert str(e.value) == (f"{bench}: no record has the field 'nosuchfield' named in --benchmarks "
                                "(its records' fields: meta, question)")
    other = tmp_path / "other.jsonl"  # no default text field: the questions were all "too short"
    other.write_text(json.dumps({"body": rec["question"]}) + "\n")
    with pytest.raises(UserError, match=f"{other}: no record has a field read by default .*; its records' "
                                        f"fields: body: name the text's, as --benchmarks {other}:FIELD"):
        NgramIndex([str(bench), str(other)])
    assert NgramIndex([f"{other}:body"]).lookup(rec["question"])


def test_step_remove_and_tag_modes_and_report(bench_dir):
    gsm = jsonl(bench_dir / "gsm8k/test.jsonl", 3)
    hosts = wiki_paragraphs()[:3]
    leak = plant(hosts[1], gsm[2]["question"], random.Random(1))
    docs = [Document("clean", hosts[0]), Document("leak", leak)]
    spec = str(bench_dir / "gsm8k/test.jsonl")
    step = build_decontam_step(DecontamConfig(benchmarks=(spec,), mode="remove"))
    rejects = []
    step.on_reject = lambda d, name, reason: rejects.append((d.id, name, reason))
    assert [d.id for d in step(iter(docs))] == ["clean"]
    assert rejects == [("leak", "decontaminate", REASON)]
    report = step.report()
    assert report["benchmarks"]["gsm8k/test"]["leaks"] == {"line 3": ["leak"]}
    assert report["documents"] == {"in": 2, "contaminated": 1}
    tag = build_decontam_step(DecontamConfig(benchmarks=(spec,), mode="tag"))
    kept = list(tag(iter([Document("leak", docs[1].text)])))
    assert kept[0].metadata["contamination"][0]["item"] == "line 3"
    assert build_decontam_step(DecontamConfig()) is None
    assert build_decontam_step(DecontamConfig(benchmarks=(spec,), enabled=False)) is None


def test_decontaminate_command(tmp_path, bench_dir, monkeypatch):
    import time

    from pretrain.curate import job

    built = job._preflight  # the benchmark index is built before the job's first shard: held 1 s here

    def slow_preflight(cfg, progress=None, index=True):
        built(cfg, progress, index)
        time.sleep(1.0)

    monkeypatch.setattr(job, "_preflight", slow_preflight)
    gsm = jsonl(bench_dir / "gsm8k/test.jsonl", 5)
    hosts = wiki_paragraphs()[:4]
    corpus = tmp_path / "corpus.jsonl"
    rows = [{"id": f"d{i}", "text": h} for i, h in enumerate(hosts)]
    rows[2]["text"] = plant(rows[2]["text"], gsm[4]["question"], random.Random(2))
    corpus.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = tmp_path / "out"
    assert main(["decontaminate", str(corpus), "--output", str(out),
                 "--benchmarks", f"{bench_dir / 'gsm8k/test.jsonl'}:question"]) == 0
    kept = [r["id"] for f in sorted((out / "data").glob("*.jsonl.zst")) for r in read_jsonl_zst(f)]
    rejected = [r for f in sorted((out / "rejects").glob("*.jsonl.zst")) for r in read_jsonl_zst(f)]
    assert kept == ["d0", "d1", "d3"]
    assert [(r["id"], r["reason"]) for r in rejected] == [("d2", REASON)]
    report = json.loads((out / "decontam_report.json").read_text())
    assert report["benchmarks"]["gsm8k/test"]["leaks"] == {"line 5": ["d2"]}
    # the job's seconds count the index's building (all benchmarks: 14 s, said as 0.4 s)
    assert json.loads((out / "stats.json").read_text())["wall_seconds"] >= 1.0
    # A missing benchmark: one clear line, exit code 2, no output written.
    assert main(["decontaminate", str(corpus), "--output", str(tmp_path / "o2"),
                 "--benchmarks", str(tmp_path / "nope.jsonl")]) == 2
    assert not (tmp_path / "o2").exists()


def test_hashed_index_equals_exact_ngram_sets(bench_dir):
    # Single-process reference: Python sets of 13-word tuples, no hashing. With min_words = n the
    # short-item rule is off, so both sides must flag exactly the same (document, item) pairs.
    spec = bench_dir / "gsm8k/test.jsonl"
    items = jsonl(spec)
    idx = NgramIndex([f"{spec}:question"], n=13, min_words=13)
    ref: dict[tuple[str, ...], set[str]] = {}
    for i, r in enumerate(items):
        ws = words(r["question"])
        for j in range(len(ws) - 12):
            ref.setdefault(tuple(ws[j:j + 13]), set()).add(f"line {i + 1}")
    rng = random.Random(3)
    docs = wiki_paragraphs()[:200]
    for k in range(0, 200, 4):  # plant whole, edited and half questions into every 4th document
        q = rng.choice(items)["question"]
        half = " ".join(q.split()[: len(q.split()) // 2])
        q = [q, light_edit(q, rng), half][k % 3]
        docs[k] = plant(docs[k], q, rng)
    flagged = 0
    for d in docs:
        ws = words(d)
        expect = set().union(*(ref.get(tuple(ws[j:j + 13]), set()) for j in range(len(ws) - 12)))
        got = {idx.describe(i)[1] for i in idx.lookup(d)}
        assert got == expect
        flagged += bool(got)
    assert flagged >= 25


def test_benchmarks_named_by_their_folder_when_the_file_names_a_split(tmp_path):
    """gsm8k/test.jsonl is GSM8K's test split, not a benchmark called "test" (issue 18)."""
    from pretrain.curate.decontam import benchmark_files

    for rel in ("gsm8k/test.jsonl", "mmlu/mmlu-dev.jsonl", "suite/arc_easy.jsonl"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text('{"question": "q"}\n')
    gsm = tmp_path / "gsm8k" / "test.jsonl"
    assert benchmark_files(gsm) == [("gsm8k/test", gsm)]
    assert [n for n, _ in benchmark_files(tmp_path / "gsm8k")] == ["gsm8k/test"]
    assert [n for n, _ in benchmark_files(tmp_path)] == ["gsm8k/test", "mmlu/mmlu-dev", "suite/arc_easy"]
    assert [n for n, _ in benchmark_files(tmp_path / "suite")] == ["arc_easy"]


def test_benchmark_folders_are_walked_as_corpus_folders_are(tmp_path):
    # The same walker as a corpus folder (readers.walk_folder): hidden and bookkeeping names below
    # the folder (`.`, `_`), macOS AppleDouble twins and a link out of it are not benchmarks.
    from pretrain.curate.decontam import benchmark_files

    (tmp_path / "b" / "_tmp").mkdir(parents=True)
    (tmp_path / "b" / ".cache").mkdir()
    (tmp_path / "b" / "arc.jsonl").write_text('{"question": "q"}\n')
    (tmp_path / "b" / "._arc.jsonl").write_bytes(b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        ")
    (tmp_path / "b" / "_tmp" / "half.jsonl").write_text('{"question": "half')
    (tmp_path / "b" / ".cache" / "old.jsonl").write_text('{"question": "stale"}\n')
    (tmp_path / "secret.jsonl").write_text('{"question": "not a benchmark"}\n')
    (tmp_path / "b" / "link.jsonl").symlink_to(tmp_path / "secret.jsonl")
    assert [n for n, _ in benchmark_files(tmp_path / "b")] == ["arc"]


def test_a_benchmark_file_name_prints_no_escape_sequence(tmp_path, bench_dir, capsys):
    """A benchmarks folder is someone's: its file names are the benchmark names the summary prints
    (`ESC ] 0 ; ... BEL` retitled the terminal); printed with their control characters escaped."""
    gsm = jsonl(bench_dir / "gsm8k/test.jsonl", 2)
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "evil\x1b]0;owned\x07.jsonl").write_text("".join(json.dumps(r) + "\n" for r in gsm))
    corpus = tmp_path / "corpus.jsonl"
    text = plant(wiki_paragraphs()[0], gsm[1]["question"], random.Random(1))
    corpus.write_text(json.dumps({"id": "d0", "text": text}) + "\n")
    assert main(["decontaminate", str(corpus), "--output", str(tmp_path / "out"),
                 "--benchmarks", f"{bench}:question", "--no-progress"]) == 0
    out = capsys.readouterr()
    assert "\x1b" not in out.out + out.err and "\x07" not in out.out + out.err
    assert "evil\\x1b]0;owned\\x07: 1 of 2 items leaked into 1 document" in out.out


def test_benchmarks_of_more_grams_than_max_grams_are_refused_in_one_line(tmp_path):
    """Hostile benchmark: one 60-word item repeated, 64 MiB in a 293 KB .gz, indexed 8.8 M n-grams
    (each item's own copy): 661 MB, 44 s, and a folder may hold any number of such files. Past
    decontam.max_grams the index is refused naming the file and line; 0 lifts the bound. The
    default holds every benchmark of ../shared/data 9x over (2.05 M n-grams), and resuming a job
    written before the key existed is not refused (its value is neutral in the job's identity)."""
    from pretrain.curate.decontam import DecontamConfig
    from pretrain.curate.identity import NEUTRAL_SINCE

    item = json.dumps({"question": " ".join(f"w{i}" for i in range(60))}) + "\n"  # 48 13-grams
    bench = tmp_path / "rep.jsonl.gz"
    bench.write_bytes(gzip.compress((item * 30).encode()))
    with pytest.raises(UserError, match=r"rep.jsonl.gz: line 21: .*more than decontam.max_grams=1,000"):
        NgramIndex([str(bench)], max_grams=1000)
    assert len(NgramIndex([str(bench)], max_grams=0)) == 30 * 48
    assert DecontamConfig().max_grams >= 9 * 2_049_121
    assert NEUTRAL_SINCE["decontam.max_grams"] == DecontamConfig().max_grams
