"""The demo path end to end (short mode: every stage runs), and its report in headless Chromium."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from browser import chromium, render

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("demo") / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "pretrain", "demo", "--short", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
        # no COLUMNS: the demo itself keeps lines whole without a terminal (rich's 80 columns broke them)
        env={k: v for k, v in os.environ.items() if k != "COLUMNS"},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (out.parent / "stdout.txt").write_text(proc.stdout)
    (out.parent / "stderr.txt").write_text(proc.stderr)
    return out


def test_the_terminal_shows_the_plan_headline_and_training_progress(demo):
    from pretrain.report import headline_text, plan_headline

    said = (demo.parent / "stdout.txt").read_text()
    plan = json.loads((demo / "plan.json").read_text())
    assert headline_text(plan_headline(plan)) in said  # days, GPU-hours, MFU, layout of plan.json
    # an 8B model on H100s: above every published run of a model <= 14B there, said as `plan` says it
    assert f"Expect: {plan['headline']['published_note']}" in said and "is a best case" in said
    # the mixture as `pretrain mix` prints it (epochs to 2 decimals), not the JSON the report reads
    mix = json.loads((demo / "mixture.json").read_text())
    web = mix["sources"][0]
    assert f"budget D = {mix['budget']:,.0f} tokens" in said and '"weights_sum"' not in said
    assert f"{web['available']:>18,}{web['weight']:>9.3f}{web['drawn']:>20,.0f}{web['epochs']:>9.2f}" in said
    # the commands shown say --json and the terminal shows tables: said which (session 11)
    toml, js = demo / "mixture.toml", demo / "mixture.json"
    assert f"(the table `pretrain mix {toml}` prints; --json wrote {js} for the report)" in said, said
    assert f"without --json `pretrain plan` prints the whole plan; --json wrote {demo / 'plan.json'}" in said
    # each stage's output, then its "done in" (a captured stage's came after it, session 11)
    for title, shown in (("4. the mixture", "budget D = "), ("5. plan", "its headline;"),
                         ("8. evaluate", "bits_per_byte")):
        stage = said[said.index(title):]
        assert stage.index(shown) < stage.index("done in"), stage[:600]
    lines = (demo / "run" / "metrics.jsonl").read_text().splitlines()
    train = [json.loads(x) for x in lines if '"event"' not in x]
    assert f"step 30/30  loss {train[-1]['loss']:.3f}" in said
    # the summary's numbers as the report shows them: 92,716 tokens (it said 92716), 9,369 tokens/s
    # (it said 9,369.300)
    from pretrain.report import tokens_per_s

    tokens = json.loads((demo / "tokens" / "web" / "manifest.json").read_text())["tokens"]
    assert f"tokens: {tokens:,}\n" in said and f"tokens_per_s: {tokens_per_s(train):,.0f}\n" in said
    assert said.rstrip().splitlines()[-1].startswith(f"next: open {demo / 'report.html'} in a browser")


def test_every_stage_left_its_output(demo):
    s = json.loads((demo / "summary.json").read_text())
    crawl = json.loads((demo / "corpus" / "stats.json").read_text())
    # the shipped crawl: every response is a document but the 2 binary bodies; the revisit is not
    rec = crawl["records"]
    assert rec["skipped.non_html"] == 2 and rec["skipped.revisit"] == 1
    assert 0 < s["documents_kept"] < s["documents_read"] == rec["records.response"] - 2
    manifest = json.loads((demo / "tokens" / "web" / "manifest.json").read_text())
    assert manifest["tokens"] == s["tokens"] > 10_000
    plan = json.loads((demo / "plan.json").read_text())
    assert plan["model"]["name"] == "llama-3-8b"
    assert s["final_loss"] < s["first_loss"] - 0.5  # the tiny model learned something in 30 steps
    assert list((demo / "run" / "checkpoints").glob("step_*"))
    assert (demo / "run" / "samples.txt").read_text().startswith("The")


@pytest.mark.skipif(chromium() is None, reason="chromium not installed (make test installs it)")
def test_report_renders_in_chromium(demo):
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "demo-report.png"
    result = render(demo / "report.html", screenshot=shot)
    assert result["images"] and all(result["images"]), result
    assert result["errors"] == []
    assert shot.stat().st_size > 10_000
    html = (demo / "report.html").read_text()
    for heading in ("Summary", "What ran", "Corpus: curate", "Examples of rejects", "Duplicate clusters",
                    "Tokens per source", "Mixture", "Plan: llama-3-8b", "Top layouts", "Why this layout",
                    "Training run", "Evaluations", "Samples"):
        assert heading in html, heading
    # funnel, document lengths, 4 plan figures, training curves, in-loop evaluation curves
    assert len(result["images"]) == 1 + 1 + 4 + 1 + 1
    assert 'alt="in-loop evaluations"' in html
    evals = html[html.index("<h3>Evaluations</h3>"):]
    assert "step_0000030.json" in evals and "<td>next_words</td>" in evals and "acc 0." in evals
    assert "http://" not in html.replace("http://www.w3.org", "") and "<script src" not in html


def test_the_run_evaluates_in_the_loop_and_at_the_end(demo):
    """No ../shared needed: the smoke task is built from held-out documents (each query + its gold
    choice is a held-out line's text); log.eval_tasks logged it every 5 steps, and the final
    `pretrain eval` (fp32) of the step-30 checkpoint agrees with the in-loop numbers (bf16 autocast)."""
    from pretrain.curate.io import read_jsonl_zst

    held = [d["text"] for d in read_jsonl_zst(demo / "split" / "heldout.jsonl.zst")]
    train = "\n".join(d["text"] for d in read_jsonl_zst(demo / "split" / "train.jsonl.zst"))
    items = [json.loads(x) for x in (demo / "eval" / "next_words.jsonl").read_text().splitlines()]
    assert len(items) == 48
    for it in items:
        line = it["query"] + " " + it["choices"][it["gold"]]
        assert any(line in " ".join(t.split()) for t in held)
        assert len(set(it["choices"])) == 4
    assert (demo / "eval" / "heldout.txt").read_text()[:200] not in train
    events = [json.loads(x) for x in (demo / "run" / "metrics.jsonl").read_text().splitlines()]
    inloop = [e for e in events if e.get("event") == "eval_tasks"]
    assert [e["step"] for e in inloop] == [5, 10, 15, 20, 25, 30]
    assert inloop[-1]["ppl:heldout.txt/bits_per_byte"] < inloop[0]["ppl:heldout.txt/bits_per_byte"]
    final = json.loads((demo / "run" / "eval" / "step_0000030.json").read_text())
    assert final["model"]["step"] == 30 and final["tasks"]["next_words"]["n"] == 48
    bpb = final["results"]["ppl:heldout.txt"]["bits_per_byte"]
    assert bpb == pytest.approx(inloop[-1]["ppl:heldout.txt/bits_per_byte"], rel=0.02)
    lls = [e["lls"] for e in final["examples"]["next_words"]]
    acc = sum(max(range(4), key=ll.__getitem__) == it["gold"] for ll, it in zip(lls, items)) / 48
    assert final["results"]["next_words"]["acc"] == pytest.approx(acc)
    # the final eval names the in-loop scores of step 30 it replaces (not "scored again": the demo
    # ran `pretrain eval` once), with both numbers
    said = (demo.parent / "stderr.txt").read_text()
    assert "replaced the in-loop scores of step 30" in said and "scored again" not in said
    before = inloop[-1]["ppl:heldout.txt/bits_per_byte"]
    assert f"ppl:heldout.txt bits_per_byte {before:.4f} -> {bpb:.4f}" in said


def _settings(out: Path, data: list[str] | None = None):
    from pretrain.demo import DemoSettings

    return DemoSettings(out, data or [], 30, 512, None)


def test_rerun_with_other_inputs_starts_over_and_same_inputs_resume(tmp_path):
    """`make demo` then `make demo DATA=...` into the same OUT: the second clears the first's outputs
    (curate would refuse them); the same settings again keep them (each stage resumes)."""
    from rich.console import Console

    from pretrain.demo import OUTPUTS, prepare_out

    out, console = tmp_path / "demo-out", Console(file=open(os.devnull, "w"))  # noqa: SIM115
    prepare_out(_settings(out), console)
    for name in ("corpus", "run"):
        (out / name).mkdir()
        (out / name / "x").write_text("kept")
    prepare_out(_settings(out), console)
    assert (out / "corpus" / "x").exists() and (out / "run" / "x").exists()
    said = io.StringIO()
    prepare_out(_settings(out, [str(ROOT / "recipes" / "data")]), Console(file=said, width=400))
    assert not any((out / n).exists() for n in OUTPUTS)
    mine = json.loads((out / "demo.json").read_text())
    assert mine["inputs"][-1] == str((ROOT / "recipes" / "data").resolve())
    # which setting differs is said (session 11: a clone moved elsewhere started over with no word why)
    assert f"(new input {mine['inputs'][-1]}): starting it over" in said.getvalue(), said.getvalue()
    prepare_out(_settings(out), Console(file=said, width=400))
    assert f"(no input {mine['inputs'][-1]}): starting it over" in said.getvalue(), said.getvalue()


def test_a_demo_made_under_the_old_default_extractor_starts_over_and_says_why(tmp_path):
    """A demo written before 2026-12-03 (its demo.json has no "extract": the belt extracted with
    resiliparse) holds a corpus that `pretrain curate` now refuses as another job (the default
    extractor changed): the rerun clears it and names the change, rather than failing at stage 1."""
    from rich.console import Console

    from pretrain.curate.extract import ExtractConfig
    from pretrain.demo import OUTPUTS, prepare_out

    out, said = tmp_path / "demo-out", io.StringIO()
    prepare_out(_settings(out), Console(file=open(os.devnull, "w")))  # noqa: SIM115
    mine = json.loads((out / "demo.json").read_text())
    assert ExtractConfig().backend == "blocks" and mine["extract"] == "blocks strict"
    (out / "demo.json").write_text(json.dumps({k: v for k, v in mine.items() if k != "extract"}))
    (out / "corpus").mkdir()
    prepare_out(_settings(out), Console(file=said, width=400))
    assert not any((out / n).exists() for n in OUTPUTS)
    why = "default extractor resiliparse -> blocks strict): starting it over"
    assert why in said.getvalue(), said.getvalue()
    prepare_out(_settings(out), Console(file=said, width=400))  # recorded now: the next rerun resumes
    assert said.getvalue().count("starting it over") == 1


def test_the_demo_from_another_checkout_into_the_same_out_resumes(tmp_path, monkeypatch, capsys):
    """Session 14: the demo recorded the shipped crawl by its absolute path and curate read it
    there, so `make demo` from a clone elsewhere (or a moved checkout) into the same OUT started
    over (~10 min). A clone-like copy of the crawl in another folder (same bytes, a new mtime):
    the demo keeps its outputs and stage 1, the demo's own curate command, has nothing to do."""
    import shutil
    import time

    from rich.console import Console
    from test_pipeline import _prose

    import pretrain.demo as demo
    from pretrain.cli import main

    clones = [tmp_path / "a" / "src" / "pretrain" / "data" / "demo", tmp_path / "b" / "checkout"]
    clones[0].mkdir(parents=True)
    crawl = clones[0] / "crawl.jsonl"  # a small crawl keeps curate to a second
    rows = [{"id": f"d{i}", "text": t} for i, t in enumerate(_prose(6, 9))]
    crawl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out, said = tmp_path / "demo-out", io.StringIO()

    def stage1(checkout: Path) -> str:
        monkeypatch.setattr(demo, "CRAWL", checkout / "crawl.jsonl")
        demo.prepare_out(_settings(out), Console(file=said, width=400))
        capsys.readouterr()
        assert main(["curate", str(demo.shipped_crawl(out)), "-o", str(out / "corpus"), "--quiet"]) == 0
        return capsys.readouterr().out

    assert "already complete" not in stage1(clones[0])
    corpus = {p.name: p.read_bytes() for p in (out / "corpus" / "data").iterdir()}
    time.sleep(0.01)
    clones[1].mkdir(parents=True)
    shutil.copy(crawl, clones[1] / crawl.name)  # a clone: same bytes, another folder, a new mtime
    assert "already complete: nothing to do" in stage1(clones[1])
    assert "starting it over" not in said.getvalue(), said.getvalue()
    assert {p.name: p.read_bytes() for p in (out / "corpus" / "data").iterdir()} == corpus
    # the crawl's bytes are the demo's identity: other bytes start it over, and say why
    (clones[1] / crawl.name).write_text(crawl.read_text()[: len(crawl.read_text()) // 2])
    assert "already complete" not in stage1(clones[1])
    assert "(the shipped crawl differs (another pretrain version)): starting it over" in said.getvalue()
    # a demo.json of sessions 11-13 (the crawl's path) starts over once, saying why
    (out / "demo.json").write_text(json.dumps({"inputs": [str(crawl)], "steps": 30, "vocab": 512}))
    stage1(clones[1])
    assert "written by an older pretrain, which read the shipped crawl from its checkout" in said.getvalue()


def test_a_folder_that_is_not_a_demo_is_refused(tmp_path):
    from rich.console import Console

    from pretrain.demo import prepare_out
    from pretrain.errors import UserError

    (tmp_path / "thesis.tex").write_text("precious")
    with pytest.raises(UserError, match="not written by `pretrain demo`"):
        prepare_out(_settings(tmp_path), Console(file=open(os.devnull, "w")))  # noqa: SIM115
    assert (tmp_path / "thesis.tex").read_text() == "precious"


def test_bytes_per_token_is_the_corpus_bytes_over_its_tokens(demo):
    """The report's bytes per token, from decoding the shards, equals the UTF-8 bytes of the
    training documents the shards were made from over the shards' tokens (end-of-text left out)."""
    from pretrain.curate.io import read_jsonl_zst
    from pretrain.report_corpus import bytes_per_token
    from pretrain.tokens.shards import TokenDir

    tdir = TokenDir(demo / "tokens" / "web")
    docs = list(read_jsonl_zst(demo / "split" / "train.jsonl.zst"))
    assert len(docs) == tdir.num_documents <= 200  # the report's sample covers every document
    truth = sum(len(d["text"].encode("utf-8")) for d in docs) / (tdir.num_tokens - tdir.num_documents)
    assert bytes_per_token(tdir) == pytest.approx(truth, rel=1e-12)


@pytest.mark.skipif(chromium() is None, reason="chromium not installed (make test installs it)")
def test_reports_of_dedup_and_decontaminate_outputs_render(demo, tmp_path):
    from pretrain.curate.io import read_jsonl_zst

    text = next(read_jsonl_zst(demo / "split" / "heldout.jsonl.zst"))["text"]
    bench = tmp_path / "quiz" / "test.jsonl"  # a benchmark whose one item is a held-out document
    bench.parent.mkdir()
    bench.write_text(json.dumps({"question": text}) + "\n")
    runs = [["dedup", str(demo / "corpus" / "data"), "-o", str(tmp_path / "dedup")],
            ["decontaminate", str(demo / "split"), "-o", str(tmp_path / "decontam"),
             "--benchmarks", str(bench)]]
    for argv in runs:
        cmd = [sys.executable, "-m", "pretrain", *argv, "--quiet"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-2000:]
    page = tmp_path / "report.html"
    proc = subprocess.run([sys.executable, "-m", "pretrain", "report", str(tmp_path / "dedup"),
                           str(tmp_path / "decontam"), "-o", str(page)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    html = page.read_text()
    assert "Corpus: dedup" in html and "Corpus: decontaminate" in html
    row = '<td>quiz/test</td><td class="n">1</td><td class="n">1</td>'  # 1 item indexed, 1 leaked
    assert "<h3>Contamination</h3>" in html and row in html
    result = render(page, screenshot=ARTIFACTS / "dedup-decontam-report.png")
    assert len(result["images"]) == 2 and all(result["images"]) and result["errors"] == []


def test_a_watched_stage_prints_its_stdout_after_its_last_progress_line():
    """train's "done:" line went straight to the terminal while the demo printed the last progress
    line after the stage ended: "done:" came first (run-it-twice review, session 9)."""
    import io

    from rich.console import Console

    from pretrain import __version__
    from pretrain.demo import _run

    buf = io.StringIO()
    console = Console(file=buf, width=200)
    _run(console, "a stage", ["--version"], watch=lambda: "step 3/3  loss 1.000")
    said = buf.getvalue()
    assert said.index("step 3/3  loss 1.000") < said.index(f"pretrain {__version__}") < said.index("done in ")


def test_piped_the_demo_keeps_lines_whole_and_its_stages_draw_as_wide(monkeypatch):
    """Newcomer sweep (session 13): `pretrain demo > log` (or CI, no terminal at all) printed at
    rich's 80 columns: `$ pretrain ...` lines broken mid-path and the stages' tables squeezed."""
    import pretrain.demo
    from pretrain.demo import PIPED_WIDTH, demo_console, stage_env

    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(pretrain.demo, "_terminal_attached", lambda: False)
    buf = io.StringIO()  # not a terminal, as a pipe
    con = demo_console(buf)
    line = "$ pretrain tokenize " + "/a/long/path" * 20
    con.print(line, highlight=False)
    assert buf.getvalue() == line + "\n"
    con.rule("stage")
    assert len(buf.getvalue().splitlines()[-1]) >= PIPED_WIDTH
    assert stage_env(con)["COLUMNS"] == str(con.width)
    # `demo | tee log` from an 80-column terminal: its width kept (the stages' bars on stderr find
    # the terminal themselves), long lines still whole
    from rich.console import Console

    monkeypatch.setattr(pretrain.demo, "_terminal_attached", lambda: True)
    buf = io.StringIO()
    con = demo_console(buf)
    con.print(line, highlight=False)
    assert con.width == Console(file=io.StringIO()).width  # what rich found, not widened
    assert buf.getvalue() == line + "\n" and "COLUMNS" not in stage_env(con)
    monkeypatch.setenv("COLUMNS", "90")  # the user's own width is theirs
    con = demo_console(io.StringIO())
    assert con.is_terminal is False and con._width == 90  # noqa: SLF001
