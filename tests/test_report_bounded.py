"""The report reads only what it shows: rejects' texts are cut to an excerpt as they are read.

Issue 20: 300 rejected 6 MB pages took 1.9 GB in `pretrain report` for a 28 KB page. Here 150
rejects of 2 MB each (300 MB of text, a few hundred KB on disk) are summarised by a child process
whose peak RSS must stay far below the text's size; the examples it shows are still right.
"""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys

from hostile import PEAK_MB, SRC

from pretrain.curate import io as cio

_CHILD = r"""
import json, sys
from pathlib import Path
from pretrain.report_corpus import _reject_examples, scan_rejects
examples, _ = scan_rejects(Path(sys.argv[1]), {})
html = _reject_examples(examples)
peak = [int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:")][0] / 1024
print(json.dumps({"n": len(examples), "html": html, "peak_mb": peak}))
"""


def test_report_keeps_excerpts_of_rejects_not_their_texts(tmp_path):
    out = tmp_path / "run"
    (out / "rejects").mkdir(parents=True)
    big = "spam " * ((2 << 20) // 5)  # about 2 MB of text per reject
    recs = [{"id": f"r{i}", "url": f"https://x.example/{i}", "step": "rules", "reason": f"reason_{i % 3}",
             "text": f"page {i} " + big} for i in range(150)]
    cio.write_jsonl_zst(out / "rejects" / "part-00000.jsonl.zst", recs)
    assert (out / "rejects" / "part-00000.jsonl.zst").stat().st_size < 2_000_000
    r = subprocess.run([sys.executable, "-c", _CHILD, str(out)], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": SRC})
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout)
    assert got["n"] == 3  # one example per (step, reason)
    for i in range(3):  # one example per reason, the first of each, with the start of its text
        assert f"reason_{i}" in got["html"] and f"https://x.example/{i}" in got["html"]
        assert f"page {i} spam spam" in got["html"]
    assert got["peak_mb"] < 150  # holding the texts: over 300 MB


XSS = "<script>console.error('injected script ran')</script><img src=x onerror=\"console.error('img')\">"


def test_report_escapes_record_fields_in_chromium(tmp_path):
    """Held before issue 20 (regression): ids, urls and texts of rejects are shown as text, in a
    real browser: no injected script runs, no injected image exists."""
    import pytest
    from browser import chromium, render

    if not chromium():
        pytest.skip("chromium not installed")
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps({"id": f"{XSS}{i}", "url": f"https://x.example/{XSS}", "text": XSS * 3})
                           + "\n" for i in range(3)))
    env = {**os.environ, "PYTHONPATH": SRC}
    for args in (["curate", str(inp), "-o", str(tmp_path / "out")],
                 ["report", str(tmp_path / "out"), "-o", str(tmp_path / "r.html")]):
        r = subprocess.run([sys.executable, "-m", "pretrain", *args], capture_output=True, text=True,
                           timeout=180, env=env)
        assert r.returncode == 0, r.stderr[-2000:]
    page = (tmp_path / "r.html").read_text()
    assert "&lt;script&gt;console.error" in page  # the reject is shown, as text
    result = render(tmp_path / "r.html")
    assert result["errors"] == []
    assert all(result["images"])  # the report's own figures load; an injected <img src=x> would not


def test_report_keeps_a_bounded_excerpt_of_every_field_of_a_reject(tmp_path):
    """Hostile rejects: id, url, reason, value and metadata of 1 MB each (a zstd file of a few
    KB). Only the text was cut: 256 such records (89 KB) made a 537 MB page and took 3.2 GB. Every
    field is held to report_corpus.MAX_SHOWN (1,000) characters, and the examples are still one per
    reason."""
    out = tmp_path / "run"
    (out / "rejects").mkdir(parents=True)
    big = "x" * (1 << 20)
    recs = [{"id": f"r{i}" + big, "url": f"https://x.example/{i}/" + big, "step": "rules",
             "reason": f"reason_{i}_" + big, "value": big, "metadata": {"language": big, "k": big},
             "kept_id": f"k{i % 2}" + big, "text": "t"} for i in range(40)]
    cio.write_jsonl_zst(out / "rejects" / "part-00000.jsonl.zst", recs)
    r = subprocess.run([sys.executable, "-c", _CHILD, str(out)], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": SRC})
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout)
    assert got["n"] == 40 and "https://x.example/39/xxx" in got["html"]
    assert len(got["html"]) < 2_000_000  # five fields of 40 examples, cut; whole: 200 MB
    assert got["peak_mb"] < 200  # held whole: over 500 MB


def test_a_json_file_of_empty_objects_is_refused_before_parsing(tmp_path):
    """6.3 MB of `[{},{},...]` in stats.json, ~150 MB once parsed (a 64 MiB one held 1.6 GB):
    2.1 M objects counted twice each (by `{` and `,`, an upper bound), over the 4 M values a
    64 MiB file may hold; refused by counting, one line naming the file."""
    import pytest

    from pretrain.report import section_for
    from pretrain.untrusted import BYTES_PER_VALUE, MAX_SMALL_FILE

    n = MAX_SMALL_FILE // BYTES_PER_VALUE // 2 + 1_000
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "stats.json").write_text("[" + "{}," * n + "{}]")
    counted = f"{2 * n + 3:,} commas and brackets, over the 4,194,304 values"  # n+1 `{`, n `,`, one `[`
    with pytest.raises(ValueError, match=rf"stats\.json: not valid JSON: {counted}"):
        section_for(corpus, 0)


def test_metrics_of_dense_hostile_lines_are_refused_where_trainer_lines_pass(tmp_path, monkeypatch):
    """Under a 1 MiB bound (1 GiB in use): 900 KB of trainer-shaped lines is read, 900 KB of lines
    padded with `{},{},...` (24x their size in Python objects: 99 MB held 2.3 GB) is refused at the
    line that passes one value per 16 bytes of the bound: 3,000 `{}` a line count 6,010 (each by
    `{` and `,`, plus the record's own), so the 11th line passes 65,536."""
    import pytest

    from pretrain import report_remote, report_run
    from pretrain.untrusted import BadFile

    monkeypatch.setattr(report_remote, "MAX_LARGE", 1 << 20)
    run = tmp_path / "run"
    run.mkdir()
    line = {"step": 0, "loss": 7.6479811668396, "lr": 0.0001, "grad_norm": 1.2824246883392334,
            "tokens_per_s": 5421.1, "loss_scale": 1.0, "mfu": None}
    with open(run / "metrics.jsonl", "w") as f:
        for i in range(6_000):  # 146 bytes a line, as the trainer writes them
            f.write(json.dumps({**line, "step": i + 1}) + "\n")
    assert 800_000 < (run / "metrics.jsonl").stat().st_size < 1 << 20
    train, _, _ = report_run.read_metrics(run)
    assert [r["step"] for r in train] == list(range(1, 6_001))
    pad = ",".join(["{}"] * 3_000)
    with open(run / "metrics.jsonl", "w") as f:
        for i in range(100):
            f.write(json.dumps({**line, "step": i + 1})[:-1] + f', "x": [{pad}]}}\n')
    with pytest.raises(BadFile, match=r"metrics\.jsonl: line 11: over 65,536 JSON values"):
        report_run.read_metrics(run)


# A child that measures what one read adds to its memory: VmHWM after the call over VmRSS before.
_HELD = PEAK_MB + r"""
import json, sys
from pathlib import Path
def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
from pretrain import report_remote, report_run, untrusted
report_remote.MAX_LARGE = int(sys.argv[3])
before = rss_mb()
try:
    if sys.argv[1] == "json":
        untrusted.load_json(sys.argv[2])
    elif sys.argv[1] == "jobplan":  # a folder of inputs holding someone's OUT: is it a job's?
        from pretrain.curate import outputs
        outputs.MAX_PLAN_BYTES = int(sys.argv[3])
        plan = Path(sys.argv[2])
        said = str([str(p) for p in outputs.job_data_only([plan], [plan.parent / "rejects" / "r.jsonl"])])
    else:
        report_run.read_metrics(Path(sys.argv[2]))
    said = said if sys.argv[1] == "jobplan" else ""
except untrusted.BadFile as e:
    said = str(e)
print(json.dumps({"said": said, "added_mb": peak_mb() - before}))
"""


def _held(kind: str, path, bound: int = 1 << 30) -> dict:
    r = subprocess.run([sys.executable, "-c", _HELD, kind, str(path), str(bound)], capture_output=True,
                       text=True, timeout=120, env={**os.environ, "PYTHONPATH": SRC})
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def test_a_json_file_of_too_many_values_is_refused_from_disk_not_read_whole(tmp_path):
    """50 MB of `[0,0,...]` (25 M values, over the 4 M a 64 MiB file may hold) is refused by
    counting while its bytes are scanned from disk: the file is never held (held, its bytes and
    its text took over 100 MB before the count refused it). A file of our own's size passes."""
    hostile = tmp_path / "stats.json"
    hostile.write_bytes(b"[" + b"0," * (25 << 20) + b"0]")
    got = _held("json", hostile)
    assert "stats.json: not valid JSON: 26,214,402 commas and brackets, over the 4,194,304 values" \
        in got["said"]
    assert got["added_mb"] < 25, got  # read whole first: ~100 MB
    honest = tmp_path / "plan.json"
    honest.write_text(json.dumps({"inputs": [{"path": f"/data/part-{i:05d}.jsonl", "size": i}
                                             for i in range(200_000)]}))
    assert _held("json", honest)["said"] == ""


def test_dense_metrics_are_refused_before_any_record_is_held(tmp_path):
    """Under a 64 MiB bound (4 M values): lines padded with `{}` pass it 14 MB into the file. The
    count is a first pass over the file, so nothing is held when it refuses (read and counted in
    one pass, the 2 M `{}` before the refusal took ~200 MB); trainer-shaped lines pass both."""
    run = tmp_path / "run"
    run.mkdir()
    pad = ",".join(["{}"] * 10_000)
    with open(run / "metrics.jsonl", "w") as f:
        for i in range(500):
            f.write(json.dumps({"step": i + 1, "loss": 2.5})[:-1] + f', "x": [{pad}]}}\n')
    got = _held("metrics", run, 64 << 20)
    assert "metrics.jsonl: line 210: over 4,194,304 JSON values" in got["said"], got
    assert got["added_mb"] < 25, got


def test_the_report_reads_a_plan_json_for_its_inputs_only_up_to_its_bound(tmp_path, monkeypatch):
    """OUT/plan.json may hold 1 GiB (a job of millions of inputs); the report shows three names
    and a count, so it reads the file for them only up to report_corpus.MAX_INPUTS (64 MiB; here
    100 KB) and otherwise says why there is no list. The file's own size is the truth."""
    from pretrain import report_corpus

    monkeypatch.setattr(report_corpus, "MAX_INPUTS", 100_000)
    out = tmp_path / "out"
    out.mkdir()
    inputs = [{"path": f"/data/part-{i:05d}.jsonl", "size": 1_000_000} for i in range(1_000)]
    (out / "plan.json").write_text(json.dumps({"job": "curate", "hash": "x", "inputs": inputs}))
    shown = report_corpus._what_ran(out, "curate")
    assert "inputs: 1,000 files, 1,000.0 MB: /data/part-00000.jsonl" in shown
    inputs *= 3
    (out / "plan.json").write_text(json.dumps({"job": "curate", "hash": "x", "inputs": inputs}))
    size = (out / "plan.json").stat().st_size
    shown = report_corpus._what_ran(out, "curate")
    assert f"inputs: not listed (plan.json holds {size:,} bytes, over the 100,000 read for them)" in shown
    # under the bound in bytes but refused for its count of values (20,000 zeros in 60 KB): said, not dropped
    (out / "plan.json").write_text(json.dumps({"job": "curate", "inputs": [0] * 20_000}))
    shown = report_corpus._what_ran(out, "curate")
    assert "inputs: not listed (" in shown and "plan.json" in shown, shown
    (out / "plan.json").unlink()  # no plan.json (an output of an older pretrain): no line at all
    assert "inputs" not in report_corpus._what_ran(out, "curate")


def test_a_plan_json_in_an_input_folder_is_counted_before_it_is_parsed(tmp_path):
    """`curate DIR` leaves out the rejects/ of a job OUT inside DIR (its plan.json a job's identity).
    DIR is someone else's: its plan.json, up to curate.outputs.MAX_PLAN_BYTES (1 GiB; here 64 MiB),
    was read and parsed whole: 60 MB of `"inputs": [0,0,...]` took ~300 MB (1 GiB: ~5 GB). Counted
    from disk first now, it is not a job's identity (30 M values, over the 4 M of its bound), and
    nothing is held; a real one of our own still is."""
    out = tmp_path / "someone" / "out"
    (out / "data").mkdir(parents=True)
    head = b'{"job": "curate", "hash": "x", "inputs": [0'
    (out / "plan.json").write_bytes(head + b",0" * (30 << 20) + b"]}")
    got = _held("jobplan", out / "plan.json", 64 << 20)
    assert got["said"] == str([str(out / "rejects" / "r.jsonl")]), got  # not a job's: its files are read
    assert got["added_mb"] < 25, got
    ours = {"job": "curate", "hash": "x", "inputs": [{"path": "a", "size": 1}]}
    (out / "plan.json").write_text(json.dumps(ours))
    assert _held("jobplan", out / "plan.json", 64 << 20)["said"] == "[]"  # a job's: its rejects/ left out


def _string_events(run, n: int) -> list[dict]:
    """100 trainer steps, `n` events of 70 ten-character string fields (session 13's hostile case:
    ~8.8x the file held), then a rollback and a checkpoint the page counts. The records written."""
    run.mkdir()
    step = {"loss": 7.6, "lr": 0.0001, "grad_norm": 1.28, "tokens_per_s": 5421.1, "loss_scale": 1.0,
            "mfu": None}
    recs = [{"step": i, **step} for i in range(1, 101)]
    recs += [{"event": "note", "step": 100, **{f"f{j:02d}": f"{i:06d}{j:04d}" for j in range(70)}}
             for i in range(n)]
    recs += [{"event": "rollback", "step": 100, "from_step": 100, "to_step": 90, "skip_batches": [91, 100]},
             {"event": "checkpoint", "step": 90}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return recs


def test_a_run_of_many_string_events_holds_what_the_page_shows(tmp_path):
    """Session 14: of each record the report holds what its page uses (report_metrics.Slim). 5,000
    events of 70 ten-character strings (7.6 MB) held ~8.8x their size whole; now the first 60 (the
    Events table's rows) keep every field, the rest what the page counts from. The table says what
    the file says (json.loads of its lines), and the rollback after them is still found."""
    from pretrain.report import section_for
    from pretrain.report_run import _detail

    run = tmp_path / "run"
    recs = _string_events(run, 5_000)
    mb = (run / "metrics.jsonl").stat().st_size / 1e6
    got = _held("metrics", run)
    assert got["said"] == "" and got["added_mb"] < mb, (got, mb)  # whole: ~65 MB
    sec = section_for(run, 0)
    events = [r for r in recs if "event" in r]
    for e in events[:60]:  # the Events table's rows, each field as the file has it
        detail = _detail({k: v for k, v in e.items() if k not in ("step", "event")})
        assert html.escape(detail) in sec.body
    assert html.escape(_detail({k: v for k, v in events[60].items() if k not in ("step", "event")})) \
        not in sec.body
    assert any("rollback from step 100 to 90" in p for p in sec.problems), sec.problems
