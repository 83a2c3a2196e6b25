"""Run it twice: what the second run of a corpus command must do (session 5 review).

Each test runs a real command twice (or kills it and runs it again) and checks the second run
against the first, or against a fresh run of the same inputs: a rerun resumes instead of
refusing itself, and a rerun never mixes results made with other files than the first run's.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import xxhash
from s3server import Requests, s3  # noqa: F401  (s3: the fixture)
from test_job_s3 import s3_here  # noqa: F401  (the fixture)
from test_pipeline import _ids, _prose

from pretrain.cli import main


def _corpus(folder: Path, docs: list[str], files: int = 2) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    per = len(docs) // files
    for f in range(files):
        rows = [{"id": f"f{f}-{i}", "text": t} for i, t in enumerate(docs[f * per:(f + 1) * per])]
        (folder / f"part{f}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def _snapshot(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes()
            for sub in ("data", "rejects") for p in sorted((out / sub).rglob("*")) if p.is_file()}


@pytest.mark.parametrize("job", ["curate", "dedup"])
def test_output_inside_the_input_folder_resumes_on_rerun(tmp_path, capsys, job):
    # `pretrain dedup corpus/ -o corpus/deduped`: the second run must not read its own output as
    # input (and so refuse itself as "another job"); it resumes and gives the same bytes.
    docs = _prose(10, seed=5)
    corpus = _corpus(tmp_path / "corpus", docs + docs[:2])  # two exact copies across files
    out = corpus / "out"
    args = [job, str(corpus), "-o", str(out), "--workers", "1", "--quiet", "--set", 'steps=["dedup"]']
    assert main(args) == 0
    first = _snapshot(out)
    plan = json.loads((out / "plan.json").read_text())
    assert [Path(i["path"]).name for i in plan["inputs"]] == ["part0.jsonl", "part1.jsonl"]
    capsys.readouterr()
    assert main(args) == 0
    assert "corpus job's output" not in capsys.readouterr().err  # its own OUT is no news
    assert _snapshot(out) == first
    assert json.loads((out / "plan.json").read_text()) == plan


def _bench_file(path: Path, questions: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"question": q}) + "\n" for q in questions))
    return path


def test_decontaminate_rerun_after_benchmark_changed_is_refused_not_mixed(tmp_path, capsys):
    # The benchmark files are part of what the job is: a rerun that would decontaminate the
    # remaining shards against another benchmark file (same path, other items) must be refused,
    # as a changed input is; otherwise shard 0 is checked against one set and shard 1 another.
    docs = _prose(8, seed=7)
    q1, q2 = docs[0].split(".")[0] + ".", docs[5].split(".")[0] + "."
    corpus = _corpus(tmp_path / "corpus", docs)
    bench = _bench_file(tmp_path / "evals" / "quiz.jsonl", [q1])
    out = tmp_path / "out"
    args = ["decontaminate", str(corpus), "-o", str(out), "--workers", "1", "--quiet", "--set",
            "shards.max_inputs=1", "--benchmarks", str(bench.parent)]
    assert main(args) == 0
    assert set(_ids(out, "rejects")) == {"f0-0"}
    _bench_file(bench, [q1, q2])  # the benchmark file grows between attempts
    for marker in (out / "work" / "done").glob("*_00001.done"):  # as if killed before shard 1
        marker.unlink()
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "quiz.jsonl" in err and "changed since" in err
    assert set(_ids(out, "rejects")) == {"f0-0"}  # nothing mixed in
    assert main([*args[:3], str(tmp_path / "fresh"), *args[4:]]) == 0
    assert set(_ids(tmp_path / "fresh", "rejects")) == {"f0-0", "f1-1"}
    # Other benchmarks named into the same OUT are another config, not files that "changed since"
    # (session 11: `--benchmarks llm-foundry` after `--benchmarks mmlu` was said as a changed file)
    other = _bench_file(tmp_path / "other" / "quiz2.jsonl", [q2])
    assert main([*args[:-1], str(other.parent)]) == 2
    err = capsys.readouterr().err
    assert "changed since" not in err and "decontam settings differ (decontam.benchmarks: [" in err, err
    assert '/evals"] -> [' in err and '/other"])' in err, err  # the folders' names, not a common head


def test_decontaminate_builds_no_index_for_a_rerun_with_nothing_to_do_nor_for_a_refusal(tmp_path, capsys):
    # Session 10's sweep: a finished job's rerun rebuilt the benchmark index (8.9 s, said as
    # "checked 12 shards in 8.9 s"), and so did a refusal. The index cache (one per process)
    # counts the builds: none now, and the terminal line says so; a killed attempt's rerun and a
    # job whose report is gone still build it, and the report is the one a fresh run writes.
    from pretrain.curate.decontam import _cached_index

    docs = _prose(8, seed=11)
    corpus = _corpus(tmp_path / "corpus", docs)
    bench = _bench_file(tmp_path / "evals" / "quiz.jsonl", [docs[0].split(".")[0] + "."])
    out = tmp_path / "out"
    args = ["decontaminate", str(corpus), "-o", str(out), "--workers", "1", "--quiet", "--set",
            "shards.max_inputs=1", "--benchmarks", str(bench.parent)]
    assert main(args) == 0
    report = (out / "decontam_report.json").read_bytes()
    capsys.readouterr()
    _cached_index.cache_clear()
    assert main(args) == 0
    assert _cached_index.cache_info().misses == 0
    said = capsys.readouterr().out
    assert "already complete: nothing to do (this attempt checked 2 shards in " in said, said
    assert ", the benchmarks not indexed)" in said and "quiz: 1 of 1 item leaked into " in said, said
    assert (out / "decontam_report.json").read_bytes() == report
    other = _bench_file(tmp_path / "other" / "quiz2.jsonl", [docs[5].split(".")[0] + "."])
    assert main([*args[:-1], str(other.parent)]) == 2  # another job into OUT: refused at once
    assert "decontam settings differ" in capsys.readouterr().err
    assert _cached_index.cache_info().misses == 0
    (out / "decontam_report.json").unlink()  # as if killed before the report: written again
    assert main(args) == 0 and _cached_index.cache_info().misses == 1
    assert (out / "decontam_report.json").read_bytes() == report
    assert "the benchmarks not indexed" not in capsys.readouterr().out
    (out / "work" / "done" / "write_00001.done").unlink()  # a shard left: indexed, said as work
    _cached_index.cache_clear()
    assert main(args) == 0 and _cached_index.cache_info().misses == 1
    assert "already complete" not in capsys.readouterr().out


def _train_classifier(tmp_path: Path, good_docs: list[str], name: str, bad_lines: int) -> Path:
    """`pretrain classifier train` on good prose and spam lines; the model's path."""
    good, bad = tmp_path / "good.txt", tmp_path / "bad.txt"
    good.write_text("\n".join(good_docs) + "\n")
    bad.write_text("buy cheap watches now click here best deals\n" * bad_lines)
    model = tmp_path / name
    assert main(["classifier", "train", "--good", str(good), "--bad", str(bad), "-o", str(model)]) == 0
    return model


def test_classifier_model_retrained_in_place_is_refused(tmp_path, capsys):
    docs = _prose(12, seed=9)
    model = _train_classifier(tmp_path, docs[:6], "quality.json", bad_lines=20)
    good, bad = tmp_path / "good.txt", tmp_path / "bad.txt"  # the helper's training files
    corpus = _corpus(tmp_path / "corpus", docs[6:])
    out = tmp_path / "out"
    args = ["curate", str(corpus), "-o", str(out), "--workers", "1", "--quiet",
            "--set", 'steps=["classifier"]', "--set", f"classifier.model={model}"]
    assert main(args) == 0
    bad.write_text("\n".join(docs[6:9]) + "\n")  # another model at the same path
    assert main(["classifier", "train", "--good", str(good), "--bad", str(bad), "-o", str(model)]) == 0
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "quality.json" in err and "changed since" in err


def test_process_isolation_counts_rescued_pages_as_in_process_runs_do():
    # stats.json's extract step says how many pages the rescue gave blocks back; a child process
    # (extract.isolation = "process", the time bound) must report them as the in-process step does.
    from test_extract_rescue import genesis_page, html_doc

    from pretrain.curate.extract import ExtractConfig, build_extract_step

    pages = [genesis_page("content-sidebar-wrap"), genesis_page("content-wrap")]  # lost, whole
    counts = {}
    for isolation in ("inline", "process"):
        step = build_extract_step(ExtractConfig(backend="blocks", isolation=isolation))
        texts = [d.text for d in step([html_doc(p, i) for i, p in enumerate(pages)])]
        step.close()
        counts[isolation] = (texts, step.stats["rescued"])
    assert counts["inline"][1] == 1
    assert counts["process"] == counts["inline"]
    for isolation in ("inline", "process"):  # a page with its main content whole: 0, not no key
        step = build_extract_step(ExtractConfig(backend="blocks", isolation=isolation))
        list(step([html_doc(pages[1])]))
        step.close()
        assert step.stats["rescued"] == 0 and "rescued" in step.stats


def test_dedup_job_from_s3_reads_each_input_object_once(tmp_path, s3_here):  # noqa: F811
    # A dedup-only belt keeps no copy of its survivors and reads the input again in stage C; for
    # an input in a bucket that was a second GET of the whole corpus. Counted by the S3 server.
    from test_job_s3 import _objects
    from test_pipeline import _snapshot, _write_jsonl_corpus

    from pretrain.curate.executor import LocalExecutor
    from pretrain.curate.pipeline import CurateConfig, curate

    _write_jsonl_corpus(tmp_path / "in", files=3, per_file=10)
    cfg = CurateConfig(steps=("dedup",), keep="id")
    curate([str(tmp_path / "in")], tmp_path / "ref", cfg, executor=LocalExecutor(1))
    bucket = s3_here.new_bucket()
    fs = s3_here.filesystem()
    fs.put(str(tmp_path / "in"), f"{bucket}/in", recursive=True)
    names = sorted(p.name for p in (tmp_path / "in").iterdir())
    with Requests() as log:  # in-process units: the server's log is seen here
        curate([f"s3://{bucket}/in"], f"s3://{bucket}/out", cfg, executor=LocalExecutor(1),
               work_dir=tmp_path / "work")
    assert _objects(fs, f"{bucket}/out") == _snapshot(tmp_path / "ref")
    assert [log.lines.count(f"GET in/{n}") for n in names] == [1] * len(names), log.lines
    assert not list((tmp_path / "work" / "tmp").glob("input_*"))


@pytest.mark.parametrize("lost", ["data/shard_00001.jsonl.zst", "rejects/filters_00000.jsonl.zst",
                                  "rejects/dedup_00001.jsonl.zst",
                                  "data/shard_00001.jsonl.zst work/kept/shard_00001.jsonl.zst"])
def test_an_output_file_removed_after_the_run_is_written_again(tmp_path, capsys, lost):
    # The done markers live in OUT/work; the outputs in OUT/data and OUT/rejects. A rerun after
    # one output went missing must write it again, not report a finished job with a hole in it.
    # A short page in part0 gives filters_00000 a reject (a shard with none writes no file there).
    docs = _prose(10, seed=11)
    corpus = _corpus(tmp_path / "corpus", ["Too short to keep."] + docs[:9] + docs[:2])
    out = tmp_path / "out"
    args = ["curate", str(corpus), "-o", str(out), "--workers", "1", "--quiet",
            "--set", 'steps=["rules","dedup"]', "--set", "shards.max_inputs=1"]
    assert main(args) == 0
    first = _snapshot(out)
    stats = json.loads((out / "stats.json").read_text())
    assert lost.split()[0] in first
    for name in lost.split():  # work/ is "safe to delete when done": with a data shard gone too
        (out / name).unlink()
    assert main(args) == 0
    assert _snapshot(out) == first
    again = json.loads((out / "stats.json").read_text())
    assert again["documents"] == stats["documents"] and again["steps"].keys() == stats["steps"].keys()


def test_a_job_output_named_as_input_reads_its_data_only(tmp_path, capsys):
    # `pretrain dedup corpus/ -o deduped/` where corpus/ is a curate OUT: its rejects/ (the dropped
    # documents) and work/ (intermediate copies) are not corpus; only data/ is read, as if the
    # user had named corpus/data. A folder merely holding a planner's plan.json is read whole.
    docs = _prose(10, seed=13)
    src = _corpus(tmp_path / "src", docs + docs[:2])
    first = tmp_path / "corpus"
    assert main(["dedup", str(src), "-o", str(first), "--workers", "1", "--quiet"]) == 0
    assert list((first / "rejects").glob("dedup_*")) and list((first / "work").rglob("*.jsonl.zst"))
    by_root, by_data = tmp_path / "by-root", tmp_path / "by-data"
    capsys.readouterr()
    assert main(["dedup", str(first), "-o", str(by_root), "--workers", "1", "--quiet"]) == 0
    assert f"{first} is a corpus job's output: reading its data/ only" in capsys.readouterr().err
    assert main(["dedup", str(first / "data"), "-o", str(by_data), "--workers", "1", "--quiet"]) == 0
    root_stats = json.loads((by_root / "stats.json").read_text())
    assert root_stats["documents"] == json.loads((by_data / "stats.json").read_text())["documents"]
    assert root_stats["errors"]["count"] == 0
    assert list(_ids(by_root, "data")) == list(_ids(by_data, "data"))
    plain = _corpus(tmp_path / "plain", docs[:4])
    (plain / "plan.json").write_text(json.dumps({"model": "llama-3-8b"}))  # `pretrain plan --json`
    assert main(["dedup", str(plain), "-o", str(tmp_path / "p"), "--workers", "1", "--quiet"]) == 0
    assert json.loads((tmp_path / "p" / "stats.json").read_text())["documents"]["read"] == 4


def test_report_of_an_unfinished_job_says_to_rerun_it(tmp_path, capsys):
    # A job killed before its end has plan.json but no stats.json yet: the report says so and
    # what to do, instead of "not a curate output".
    src = _corpus(tmp_path / "src", _prose(4, seed=17))
    out = tmp_path / "out"
    assert main(["dedup", str(src), "-o", str(out), "--workers", "1", "--quiet"]) == 0
    (out / "stats.json").unlink()  # where a SIGKILL before the last write leaves the job
    capsys.readouterr()
    assert main(["report", str(out), "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "dedup" in err and "not finished" in err and "rerun" in err
    assert not (tmp_path / "r.html").exists()


def test_a_rerun_says_its_seconds_are_over_several_attempts(tmp_path, capsys):
    # wall_seconds adds every attempt's time (work/attempts.json); the terminal and the report
    # say over how many attempts, or a 2 s rerun of a finished job reads "6.7 s" with no why.
    src = _corpus(tmp_path / "src", _prose(4, seed=19))
    out = tmp_path / "out"
    args = ["dedup", str(src), "-o", str(out), "--workers", "1", "--quiet", "--set", "shards.max_inputs=1"]
    assert main(args) == 0
    assert "attempts" not in capsys.readouterr().out
    assert json.loads((out / "stats.json").read_text())["attempts"] == 1
    assert main(args) == 0
    stats = json.loads((out / "stats.json").read_text())
    tried = json.loads((out / "work" / "attempts.json").read_text())["seconds"]
    assert stats["attempts"] == len(tried) == 2
    both = capsys.readouterr()
    said = both.out
    assert f"{stats['wall_seconds']:.1f} s over 2 attempts" in said
    # ...labelled as the job's: this attempt did nothing, and says so first (no "resuming" line)
    assert "resuming" not in both.err, both.err
    assert said.index("already complete: nothing to do (this attempt checked 2 shards in ") < said.index(
        f"the job, all attempts: read 4 documents, kept 4 (100.0%); 0 bad records skipped; "
        f"{stats['wall_seconds']:.1f} s over 2 attempts"), said
    assert "this_attempt" not in stats  # the terminal's, not the job's record
    assert main(["report", str(out), "-o", str(tmp_path / "r.html")]) == 0
    assert "seconds (2 attempts)" in (tmp_path / "r.html").read_text()
    # Where an attempt resumes, in one line even without a terminal (a log shows no bar): here as a
    # SIGKILL after shard 0 was filtered leaves it. Before, a rerun said nothing until its funnel.
    for marker in ["filter_00001", "removals", "write_00000", "write_00001"]:
        (out / "work" / "done" / f"{marker}.done").unlink()
    assert main(args) == 0
    said = capsys.readouterr().err.splitlines()
    assert said == ["pretrain dedup: resuming (attempt 3): 1 of 2 shards already filtered"], said
    next((out / "work" / "done").glob("write_*.done")).unlink()  # as after a kill before its end
    assert main(args) == 0
    said = capsys.readouterr().out
    assert "already complete" not in said and "this attempt: 1 shard written now, 1 already done (" in said
    assert "the job, all attempts: read 4 documents" in said and "over 4 attempts" in said, said


def test_a_job_output_under_a_url_prefix_reads_its_data_only(tmp_path):
    import fsspec

    from pretrain.curate.job import list_any_inputs

    src = _corpus(tmp_path / "src", _prose(6, seed=23))
    out = tmp_path / "corpus"
    assert main(["dedup", str(src), "-o", str(out), "--workers", "1", "--quiet",
                 "--set", "shards.max_inputs=1"]) == 0
    fs = fsspec.filesystem("memory")
    fs.put(str(out), "/rt-w1/corpus", recursive=True)
    try:
        got = [name for _, name in list_any_inputs(["memory://rt-w1"])]
        assert got == ["corpus/data/shard_00000.jsonl.zst", "corpus/data/shard_00001.jsonl.zst"]
    finally:
        fs.rm("/rt-w1", recursive=True)


def test_a_changed_config_is_refused_naming_the_key_and_both_values(tmp_path, capsys):
    src = _corpus(tmp_path / "src", _prose(4, seed=29))
    out = tmp_path / "out"
    args = ["curate", str(src), "-o", str(out), "--workers", "1", "--quiet", "--set", 'steps=["language"]']
    assert main(args) == 0
    capsys.readouterr()
    assert main([*args, "--set", "language.threshold=0.8"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "language.threshold: 0.65 -> 0.8" in err


def test_report_into_a_folder_or_an_unwritable_place_is_one_line(tmp_path, capsys):
    src = _corpus(tmp_path / "src", _prose(4, seed=31))
    out = tmp_path / "out"
    assert main(["dedup", str(src), "-o", str(out), "--workers", "1", "--quiet"]) == 0
    blocked = tmp_path / "file"
    blocked.write_text("")
    for target in (out, blocked / "r.html"):  # a folder; a path under a plain file
        capsys.readouterr()
        assert main(["report", str(out), "-o", str(target)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and str(target) in err, err
    assert not [p for p in tmp_path.rglob(".*.tmp")]


def test_classifier_outputs_into_a_folder_or_an_unwritable_place_are_one_line(tmp_path, capsys):
    good, bad = tmp_path / "good.txt", tmp_path / "bad.txt"
    good.write_text("\n".join(_prose(3, seed=37)) + "\n")
    bad.write_text("buy cheap watches now click here best deals\n" * 5)
    model = tmp_path / "q.json"
    assert main(["classifier", "train", "--good", str(good), "--bad", str(bad), "-o", str(model)]) == 0
    blocked = tmp_path / "file"
    blocked.write_text("")
    for target in (tmp_path, blocked / "x"):
        for argv in (["classifier", "train", "--good", str(good), "--bad", str(bad), "-o", str(target)],
                     ["classifier", "score", "--model", str(model), str(good), "-o", str(target)]):
            capsys.readouterr()
            assert main(argv) == 2
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and str(target) in err, err
    assert not [p for p in tmp_path.rglob(".*.tmp")]


def test_a_second_attempt_while_one_runs_is_refused(tmp_path, capsys):
    # The same command started twice at once (two terminals) ran every unit twice, and the two
    # attempts overwrote each other's time in work/attempts.json. A second one is refused while the
    # first holds OUT/work/attempt.lock (flock: released when its holder dies, SIGKILL included).
    import fcntl
    import os

    src = _corpus(tmp_path / "src", _prose(4, seed=41))
    out = tmp_path / "out"
    args = ["dedup", str(src), "-o", str(out), "--workers", "1", "--quiet"]
    assert main(args) == 0
    fd = os.open(out / "work" / "attempt.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a running attempt holds it
        capsys.readouterr()
        assert main(args) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "another attempt" in err and str(out) in err
    finally:
        os.close(fd)
    assert main(args) == 0  # released: the rerun resumes
    assert len(json.loads((out / "work" / "attempts.json").read_text())["seconds"]) == 2


def test_an_out_written_before_references_were_recorded_is_named_so(tmp_path, capsys):
    docs = _prose(4, seed=43)
    corpus = _corpus(tmp_path / "corpus", docs)
    bench = _bench_file(tmp_path / "evals" / "quiz.jsonl", [docs[0].split(".")[0] + "."])
    out = tmp_path / "out"
    args = ["decontaminate", str(corpus), "-o", str(out), "--workers", "1", "--quiet",
            "--benchmarks", str(bench)]
    assert main(args) == 0
    plan = json.loads((out / "plan.json").read_text())
    assert [Path(r["path"]).name for r in plan.pop("references")] == ["quiz.jsonl"]
    blob = json.dumps({"inputs": plan["inputs"], "config": plan["config"]}, sort_keys=True).encode()
    plan["hash"] = xxhash.xxh3_64_hexdigest(blob)  # as an older pretrain wrote it
    (out / "plan.json").write_text(json.dumps(plan))
    capsys.readouterr()
    assert main(args) == 2
    assert "before pretrain recorded the files its config names" in capsys.readouterr().err


def test_decontaminate_terminal_says_what_leaked_and_where_the_report_is(tmp_path, capsys):
    docs = _prose(8, seed=47)
    corpus = _corpus(tmp_path / "corpus", docs)
    _bench_file(tmp_path / "evals" / "quiz.jsonl", [docs[0].split(".")[0] + ".", docs[5].split(".")[0] + ".",
                                                    "an item of eight words nobody ever wrote anywhere"])
    out = tmp_path / "out"
    assert main(["decontaminate", str(corpus), "-o", str(out), "--workers", "1", "--quiet",
                 "--benchmarks", str(tmp_path / "evals")]) == 0
    printed = capsys.readouterr().out
    report = json.loads((out / "decontam_report.json").read_text())
    quiz = report["benchmarks"]["quiz"]
    assert (quiz["items_indexed"], quiz["items_leaked"]) == (3, 2)
    assert "quiz: 2 of 3 items leaked into 2 documents" in printed
    assert str(out / "decontam_report.json") in printed


def test_one_file_named_twice_is_read_once(tmp_path, capsys, monkeypatch):
    # `pretrain curate corpus/ /abs/path/corpus/part0.jsonl`: the file is one shard, not two (its
    # documents would be read twice and, without dedup, written twice).
    corpus = _corpus(tmp_path / "corpus", _prose(6, seed=53))
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    args = ["curate", "corpus", str(corpus / "part0.jsonl"), "./corpus/part1.jsonl", "-o", str(out),
            "--workers", "1", "--quiet", "--set", 'steps=["rules"]']
    assert main(args) == 0
    plan = json.loads((out / "plan.json").read_text())
    assert [Path(i["path"]).name for i in plan["inputs"]] == ["part0.jsonl", "part1.jsonl"]
    assert json.loads((out / "stats.json").read_text())["documents"]["read"] == 6


def test_classifier_scores_written_inside_the_scored_folder_are_not_scored_on_rerun(tmp_path, capsys):
    docs = _prose(8, seed=59)
    model = _train_classifier(tmp_path, docs[:4], "q.json", bad_lines=5)
    corpus = _corpus(tmp_path / "corpus", docs[4:])
    scores = corpus / "scores.jsonl"
    argv = ["classifier", "score", "--model", str(model), str(corpus), "-o", str(scores)]
    assert main(argv) == 0
    first = scores.read_bytes()
    capsys.readouterr()
    assert main(argv) == 0
    assert scores.read_bytes() == first
    err = capsys.readouterr().err
    assert "scored 4 documents" in err and "0 bad records skipped" in err, err


@pytest.mark.parametrize("workers", ["0", "-3"])
def test_workers_below_one_is_a_usage_error(tmp_path, capsys, workers):
    src = _corpus(tmp_path / "src", _prose(2, seed=61))
    assert main(["dedup", str(src), "-o", str(tmp_path / "out"), "--workers", workers, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--workers" in err
    assert not (tmp_path / "out").exists()


def test_a_rerun_into_another_jobs_out_is_refused_in_one_line_with_both_counts(tmp_path, capsys):
    # The echo "config: all defaults (full config: OUT/config.toml)" came first and pointed at the
    # other job's config; the refusal said "curate of 3 other input files" for a run of 1 file.
    three = _corpus(tmp_path / "three", _prose(6, seed=11), files=3)
    one = _corpus(tmp_path / "one", _prose(2, seed=12), files=1)
    out = tmp_path / "out"
    assert main(["curate", str(three), "-o", str(out), "--workers", "1"]) == 0
    capsys.readouterr()
    assert main(["curate", str(one), "-o", str(out), "--workers", "1"]) == 2
    said = capsys.readouterr()
    lines = (said.out + said.err).splitlines()
    assert len(lines) == 1 and lines[0].startswith("pretrain curate: error:"), lines
    assert "of 3 input files" in lines[0] and "this run has 1 other input file" in lines[0], lines[0]
    # One file added, one removed, one rewritten: "this run has 4 other input files" said none of the
    # three was the same; the line names the file that differs.
    extra = _corpus(tmp_path / "extra", _prose(1, seed=13), files=1) / "part0.jsonl"
    parts = sorted(str(p) for p in three.iterdir())
    for inputs, said_here in [([*parts, str(extra)], f"this run adds 1 ({extra})"),
                              (parts[1:], f"this run lacks 1 ({parts[0]})")]:
        assert main(["curate", *inputs, "-o", str(out), "--workers", "1"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "of 3 input files" in err and said_here in err, err
    # The same files copied to another folder (a teammate's checkout, a moved clone): the line said
    # "1 other input file" and named neither; it names both and says they look the same (session 11).
    shutil.copytree(three, tmp_path / "moved")
    assert main(["curate", str(tmp_path / "moved"), "-o", str(out), "--workers", "1"]) == 2
    err = capsys.readouterr().err.strip()
    moved = tmp_path / "moved" / "part0.jsonl"
    assert len(err.splitlines()) == 1 and f"was {parts[0]}, ..., now {moved}" in err, err
    assert "the same file names and sizes in another folder" in err, err
    assert main(["curate", str(one), "-o", str(out), "--workers", "1"]) == 2
    assert "sizes in another folder" not in capsys.readouterr().err
    Path(parts[2]).write_text(Path(parts[2]).read_text() * 2)
    assert main(["curate", str(three), "-o", str(out), "--workers", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{parts[2]} changed since" in err, err


def test_a_write_probe_left_by_a_killed_attempt_is_gone_after_the_rerun(tmp_path, capsys):
    # SIGKILL between writing OUT's write probe and removing it leaves a 0-byte file. The rerun
    # must remove it, and never write through a probe name someone made a link: a run directory
    # handed over with `.write-probe -> ~/.bashrc` emptied that file on the rerun.
    corpus = _corpus(tmp_path / "in", _prose(4, seed=13), files=2)
    out = tmp_path / "out"
    assert main(["curate", str(corpus), "-o", str(out), "--workers", "1", "--quiet"]) == 0
    theirs = tmp_path / "bashrc"
    theirs.write_text("export PATH=/opt/bin:$PATH\n")
    (out / ".write-probe").write_bytes(b"")  # the probe of a killed attempt
    assert main(["curate", str(corpus), "-o", str(out), "--workers", "1", "--quiet"]) == 0
    assert not (out / ".write-probe").exists()
    (out / ".write-probe").symlink_to(theirs)
    capsys.readouterr()
    assert main(["curate", str(corpus), "-o", str(out), "--workers", "1", "--quiet"]) == 0
    assert theirs.read_text() == "export PATH=/opt/bin:$PATH\n"
    assert not [p.name for p in out.iterdir() if p.name.startswith(".write-probe") and not p.is_symlink()]


def test_a_write_probe_object_left_by_a_killed_attempt_is_gone_after_the_rerun(tmp_path, s3_here):  # noqa: F811
    from pretrain.curate.executor import LocalExecutor
    from pretrain.curate.pipeline import CurateConfig, curate

    corpus = _corpus(tmp_path / "in", _prose(4, seed=13), files=2)
    bucket = s3_here.new_bucket()
    fs = s3_here.filesystem()
    out = f"s3://{bucket}/out"
    cfg = CurateConfig()
    curate([str(corpus)], out, cfg, executor=LocalExecutor(1), work_dir=tmp_path / "work")
    fs.pipe_file(f"{bucket}/out/.write-probe", b"")  # the probe object of a killed attempt
    curate([str(corpus)], out, cfg, executor=LocalExecutor(1), work_dir=tmp_path / "work")
    fs.invalidate_cache()
    assert not fs.exists(f"{bucket}/out/.write-probe")


def test_a_ray_rerun_into_another_jobs_out_is_refused_before_ray_starts(tmp_path, capsys):
    # RayExecutor started a local instance (~6 s, Ray's own log lines first) before OUT was checked:
    # the refusal came last, after a Ray instance that had nothing to run.
    ray = pytest.importorskip("ray")
    out = tmp_path / "out"
    assert main(["curate", str(_corpus(tmp_path / "a", _prose(2, seed=14), files=1)), "-o", str(out),
                 "--workers", "1", "--quiet"]) == 0
    capsys.readouterr()
    other = _corpus(tmp_path / "b", _prose(2, seed=15), files=1)
    assert main(["curate", str(other), "-o", str(out), "--executor", "ray", "--workers", "1"]) == 2
    said = capsys.readouterr()
    assert not ray.is_initialized()
    assert (said.out + said.err).strip().startswith(f"pretrain curate: error: {out} holds another job"), said


def test_the_summary_and_the_settings_echo_are_one_line_each_in_a_narrow_log(tmp_path, capsys, monkeypatch):
    # rich wraps at the console's width (80 without a terminal): "... 4.2 s over 2\nattempts" and
    # "(full config: \nOUT/config.toml)" broke the lines a log is grepped for.
    monkeypatch.setenv("COLUMNS", "40")
    src = _corpus(tmp_path / "src", _prose(4, seed=21))
    out = tmp_path / "out"
    args = ["dedup", str(src), "-o", str(out), "--workers", "1", "--set", "dedup.near=false"]
    assert main(args) == 0 and main(args) == 0
    said = capsys.readouterr()
    summary = [line for line in said.out.splitlines()  # a rerun labels it as the job's totals
               if line.startswith(("read ", "the job, all attempts: read "))][-1]
    assert summary.endswith(" over 2 attempts") and "bad records skipped" in summary, said.out
    echo = [line for line in said.err.splitlines() if line.startswith("config: ")][-1]
    assert echo.endswith(f"(full config: {out}/config.toml)"), said.err


@pytest.mark.parametrize("theirs", ["config.toml", "stats.json", "data/notes.txt"])
def test_an_output_folder_holding_files_of_its_own_is_refused_before_writing(tmp_path, capsys, theirs):
    # `-o .` in a project folder overwrote its config.toml (and stats.json) with the job's, and a
    # data/ holding the user's notes became a corpus folder `load_dataset` no longer reads.
    corpus = _corpus(tmp_path / "in", _prose(2, seed=23), files=1)
    out = tmp_path / "mine"
    (out / theirs).parent.mkdir(parents=True, exist_ok=True)
    (out / theirs).write_text("mine = 1\n")
    before = sorted(p.relative_to(out).as_posix() for p in out.rglob("*"))
    assert main(["curate", str(corpus), "-o", str(out), "--workers", "1", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and theirs in err and "not a pretrain job" in err, err
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == before  # nothing written
    assert (out / theirs).read_text() == "mine = 1\n"


@pytest.mark.parametrize("cannot_be_built", ["classifier.model={}/missing.json",
                                             "language.model_path={}/missing.bin",
                                             'url_filter.domain_files=["{}/missing.txt"]'])
def test_a_belt_that_cannot_be_built_claims_nothing_so_a_fixed_rerun_runs(tmp_path, capsys, cannot_be_built):
    """A config whose step cannot be built (a missing model or list file) once left OUT/plan.json
    behind, and the rerun with the file fixed was refused as "another job" (session 13 sweep)."""
    src = _corpus(tmp_path / "src", _prose(4, seed=37))
    out = tmp_path / "out"
    args = ["curate", str(src), "-o", str(out), "--workers", "1", "--quiet"]
    steps = '["url_filter","language","classifier"]' if "classifier" in cannot_be_built else \
        '["url_filter","language"]'
    assert main([*args, "--set", f"steps={steps}", "--set", cannot_be_built.format(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "missing." in err and err.count("\n") == 1
    assert not (out / "plan.json").exists() and not (out / "config.toml").exists()
    assert main([*args, "--set", 'steps=["url_filter","language"]']) == 0


def test_a_config_naming_a_file_beside_itself_says_where_relative_paths_are_read(tmp_path, capsys,
                                                                                monkeypatch):
    """`model = "quality.json"` in conf/belt.toml beside it, run from elsewhere, said only "not
    found: quality.json": relative paths are read from the working directory, and that is said."""
    from pretrain.curate.classifier import NaiveBayes

    src = _corpus(tmp_path / "src", _prose(4, seed=41))
    conf = tmp_path / "conf"
    conf.mkdir()
    NaiveBayes.train(["good words here"], ["bad words there"]).save(conf / "quality.json")
    (conf / "belt.toml").write_text('steps = ["classifier"]\n[classifier]\nmodel = "quality.json"\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    args = ["curate", str(src), "-o", str(tmp_path / "out"), "--workers", "1", "--quiet"]
    assert main([*args, "--config", str(conf / "belt.toml")]) == 2
    err = capsys.readouterr().err
    assert (f"classifier.model = 'quality.json' is read from the working directory ({elsewhere}), where it "
            f"is missing; it sits beside the config: name it '{conf / 'quality.json'}'") in err, err
    assert main([*args, "--set", 'steps=["classifier"]', "--set", "classifier.model=other.json"]) == 2
    err = capsys.readouterr().err
    assert f"not found: other.json (a relative path, read from the working directory {elsewhere})" in err
    monkeypatch.chdir(conf)
    assert main([*args, "--config", "belt.toml"]) == 0


def test_dedup_of_warc_pages_says_their_markup_was_compared(tmp_path, capsys):
    """`pretrain dedup crawl/` on WARC files hashed the pages' HTML and wrote it to data/ as their
    text, without a word: the funnel now says how many pages went through unextracted, and how to
    extract them; with `extract` in the steps it says nothing."""
    from conftest import data_file

    warc = data_file("warc/dolma/sample-0000.warc.gz")
    assert main(["dedup", str(warc), "-o", str(tmp_path / "raw"), "--workers", "1", "--quiet"]) == 0
    out = capsys.readouterr().out
    pages = json.loads((tmp_path / "raw" / "stats.json").read_text())["records"]["records.response"]
    assert (f"warning: {pages} HTML pages went through without the extract step: their markup was compared "
            """and written as their text; for the main text, --set steps='["extract","dedup"]'""") in out, out
    assert main(["dedup", str(warc), "-o", str(tmp_path / "text"), "--workers", "1", "--quiet",
                 "--set", 'steps=["extract","dedup"]']) == 0
    assert "warning" not in capsys.readouterr().out
    # the report's "What went wrong" says it too; a stats.json whose count is not one says nothing
    assert main(["report", str(tmp_path / "raw"), "-o", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    assert f"<li>Corpus: dedup: {pages} HTML pages went through without the extract step" in page
    stats = json.loads((tmp_path / "raw" / "stats.json").read_text())
    stats["records"]["html_not_extracted"] = "<b>many</b>"
    (tmp_path / "raw" / "stats.json").write_text(json.dumps(stats))
    assert main(["report", str(tmp_path / "raw"), "-o", str(tmp_path / "r.html")]) == 0
    assert "without the extract step" not in (tmp_path / "r.html").read_text()


def test_pages_in_a_jsonl_field_are_extracted_when_the_reader_is_told_and_warned_of_when_not(tmp_path,
                                                                                           capsys):
    """Readability's test pages ship as JSONL with the page under `source_html`: read with
    --text-field, every page was judged as markup (130 read, none kept) without a word. The funnel
    now says so, and `reader.text_is_html` extracts each page as the same page in an .html file is."""
    import gzip

    from conftest import data_file

    from pretrain.curate.io import read_jsonl_zst

    src = data_file("html/mozilla-readability/readability-test-pages.part1.jsonl.gz")
    rows = [json.loads(line) for line in gzip.open(src, "rt").read().splitlines()[:8]]
    (tmp_path / "pages").mkdir()
    (tmp_path / "pages" / "pages.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "files").mkdir()
    for r in rows:
        (tmp_path / "files" / f"{r['name']}.html").write_text(r["source_html"])
    args = ["--workers", "1", "--quiet", "--set", 'steps=["extract"]']
    pages = ["curate", str(tmp_path / "pages"), "--text-field", "source_html"]
    assert main([*pages, "-o", str(tmp_path / "raw"), *args]) == 0
    said = capsys.readouterr().out
    assert ("records hold a whole HTML page as text (<html ...): its markup was judged; --set "
            "reader.text_is_html=true extracts the main text first") in said, said
    assert main([*pages, "-o", str(tmp_path / "text"), "--set", "reader.text_is_html=true", *args]) == 0
    assert main(["curate", str(tmp_path / "files"), "-o", str(tmp_path / "html"), *args]) == 0
    assert "warning" not in capsys.readouterr().out

    def texts(out: str) -> list[str]:
        return sorted(r["text"] for f in sorted((tmp_path / out / "data").glob("*.zst"))
                      for r in read_jsonl_zst(f))

    assert len(texts("html")) == 8 and texts("text") == texts("html")
    assert sum(map(len, texts("text"))) < sum(len(r["source_html"]) for r in rows) / 3  # text, not markup


@pytest.mark.parametrize("job", ["curate", "dedup", "decontaminate"])
def test_a_finished_jobs_rerun_under_ray_starts_no_ray(tmp_path, capsys, monkeypatch, job):
    # Session 14: the rerun of a finished job with --executor ray started a Ray instance (6-28 s
    # on the shared machine) for tasks that only read their done markers, against 0.5 s locally.
    # The driver reads the markers itself: ray.init is never called, and the terminal says what
    # the local executor's rerun says.
    ray = pytest.importorskip("ray")
    docs = _prose(4, seed=31)
    src = _corpus(tmp_path / "src", docs)
    bench = _bench_file(tmp_path / "ev" / "q.jsonl", [docs[0].split(".")[0] + "."])
    extra = ["--benchmarks", str(bench.parent)] if job == "decontaminate" else []
    args = [job, str(src), "-o", str(tmp_path / "out"), "--workers", "1", "--quiet",
            "--set", "shards.max_inputs=1", *extra]
    assert main(args) == 0
    capsys.readouterr()
    assert main(args) == 0
    local = capsys.readouterr().out
    inits: list[dict] = []
    monkeypatch.setattr(ray, "init", lambda **kw: inits.append(kw))
    assert main([*args, "--executor", "ray"]) == 0
    said = capsys.readouterr().out
    assert inits == [] and not ray.is_initialized()
    line = next(x for x in said.splitlines() if x.startswith("already complete: nothing to do"))
    assert line.startswith("already complete: nothing to do (this attempt checked 2 shards in "), said
    assert line.split(" in ")[0] in local  # the local rerun's words, up to its seconds


class _Counting:
    """A LocalExecutor that records the units each map was given."""

    def __init__(self):
        from pretrain.curate.executor import LocalExecutor

        self.inner, self.sent = LocalExecutor(1), []

    def map(self, fn, items, on_result=None):
        items = list(items)
        self.sent.append((fn.__name__, items))
        return self.inner.map(fn, items, on_result)


def test_a_rerun_sends_the_executor_only_the_shards_left(tmp_path):
    # A killed job's rerun: the finished shards are read from their markers by the driver, the
    # executor gets the rest (a Ray cluster no longer runs a task per finished shard), and the
    # output is the uninterrupted run's, byte for byte.
    from pretrain.curate.pipeline import CurateConfig, curate

    src = _corpus(tmp_path / "src", _prose(6, seed=32), files=3)
    cfg = CurateConfig(steps=("dedup",))
    cfg = replace(cfg, shards=replace(cfg.shards, max_inputs=1))
    whole = tmp_path / "whole"
    curate([str(src)], whole, cfg)
    out = tmp_path / "out"
    curate([str(src)], out, cfg)
    for marker in ["filter_00001", "removals", "write_00001", "write_00002"]:  # killed mid-job
        (out / "work" / "done" / f"{marker}.done").unlink()
    ex = _Counting()
    stats = curate([str(src)], out, cfg, executor=ex)
    units = [(fn, [(u[0] if isinstance(u, tuple) else u).shard for u in items]) for fn, items in ex.sent
             if fn in ("run_shard", "write_shard")]
    assert units == [("run_shard", [1]), ("write_shard", [1, 2])], units
    assert stats["this_attempt"]["written"] == 2
    assert _snapshot(out) == _snapshot(whole)
    ex = _Counting()
    curate([str(src)], out, cfg, executor=ex)  # finished: nothing sent at all
    assert ex.sent == []
