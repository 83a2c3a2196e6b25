"""`pretrain report` on real outputs of the commands: the plan's headline and layouts, spike and
rollback markers on the loss curve, the errors table, reject values and thresholds, the mixture's
epochs; and the page rendered in headless Chromium (images decode, no console errors)."""

from __future__ import annotations

import base64
import html
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from browser import chromium, render

from pretrain.report import fmt, plan_headline, section_for, tokens_per_s

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
RED = np.array([0xB3, 0x26, 0x1E])  # the markers' colour


def _cli(*argv: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pretrain", *argv]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def images(page: str) -> list[np.ndarray]:
    from PIL import Image

    return [np.asarray(Image.open(io.BytesIO(base64.b64decode(b))).convert("RGB"))
            for b in re.findall(r'src="data:image/png;base64,([^"]+)"', page)]


def red_pixels(img: np.ndarray) -> int:
    return int((np.abs(img.astype(int) - RED).sum(axis=2) < 40).sum())


PLAN_ARGS = ("plan", "--model", "llama-3-8b", "--gpus", "64", "--gpu", "h100", "--tokens", "1T")


@pytest.fixture(scope="module")
def plan_json(tmp_path_factory) -> Path:
    out = _cli(*PLAN_ARGS, "--json")
    assert out.returncode == 0, out.stderr
    path = tmp_path_factory.mktemp("plan") / "plan.json"
    path.write_text(out.stdout)
    return path


def test_plan_headline_cards_layouts_and_figures(plan_json):
    plan = json.loads(plan_json.read_text())
    sec = section_for(plan_json, 0)
    h = plan_headline(plan)
    assert h["days"] == plan["time"]["calendar_days"] and h["gpu_hours"] == plan["time"]["gpu_hours"]
    for card in (fmt(h["days"]), fmt(h["gpu_hours"]), f"{h['mfu']:.1%}", plan["layout"]["label"]):
        assert f"<b>{card}</b>" in sec.body
    for t in plan["search"]["top"]:  # every layout the search kept, not "[5 items]"
        assert f"<td>{t['label']}</td>" in sec.body
    assert "[5 items]" not in sec.body and "memory_single_replica" not in sec.body
    assert len(images(sec.body)) == 4  # the four figures of `plan --figures`


def _words(text: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", text)).split())


def test_the_plan_section_says_what_the_terminal_said_first(plan_json, tmp_path):
    """An 8B plan on H100s is above every published run of a model <= 14B on them (plan/bestcase.py):
    the terminal's first line says so with the published range; the page says the same words, its
    cards say "best case", and the sentence under the terminal's Time table is on the page too. A
    plan.json of session 13 (no headline.published_note) gets the same line from its `published`."""
    plan = json.loads(plan_json.read_text())
    terminal = _cli(*PLAN_ARGS)
    assert terminal.returncode == 0, terminal.stderr
    first = " ".join(terminal.stdout.split("\nModel\n")[0].split())
    assert first.startswith("Expect: MFU ") and "is a best case" in first, first
    assert f"measured MFU {plan['published']['mfu_low']:.0%}-{plan['published']['mfu_high']:.0%}" in first
    page = _words(section_for(plan_json, 0).body)
    assert first in page
    assert " ".join(plan["time"]["published_check"].split()) in page
    assert "MFU, best case" in page and "days, best case" in page
    del plan["headline"]["published_note"]
    older = tmp_path / "plan13.json"
    older.write_text(json.dumps(plan))
    assert first in _words(section_for(older, 0).body)


def test_a_large_model_plan_has_no_published_line(tmp_path):
    out = _cli("plan", "--model", "llama-3-70b", "--gpus", "64", "--gpu", "h100", "--tokens", "1T", "--json")
    plan = json.loads(out.stdout)
    assert "published" not in plan and "published_note" not in plan["headline"]
    (tmp_path / "plan.json").write_text(out.stdout)
    page = _words(section_for(tmp_path / "plan.json", 0).body)
    assert "Expect:" not in page and "best case" not in page


@pytest.fixture(scope="module")
def spiked_run(tmp_path_factory) -> Path:
    """A real run whose micro-batch 22 is random bytes: spike at step 23, rolled back (test_train_spike)."""
    from test_train_spike import _trainer

    from pretrain.train.testing import fallback_text

    tmp = tmp_path_factory.mktemp("spike")
    text = fallback_text(tmp / "topics.txt")
    _trainer(tmp / "run", text, "train.stop_at=30").fit()
    return tmp / "run"


def test_spikes_and_rollbacks_are_drawn(spiked_run, tmp_path):
    lines = (spiked_run / "metrics.jsonl").read_text().splitlines()
    events = [json.loads(x) for x in lines if '"event"' in x]
    assert {"spike", "rollback"} <= {e["event"] for e in events}
    sec = section_for(spiked_run, 0)
    curves = images(sec.body)[0]
    assert red_pixels(curves) > 100  # the dashed red lines at the spike and the rollback
    assert any(p.startswith("spike at step 23") for p in sec.problems)
    assert "stability.spike_factor = 1.5" in sec.body and "optim.lr = 0.01" in sec.body  # what ran
    assert "model tiny-cpu: " in sec.body  # the model, named as the trainer named it
    calm = tmp_path / "calm"  # the same run with its event lines removed: nothing to mark
    shutil.copytree(spiked_run, calm, ignore=shutil.ignore_patterns("checkpoints", "tensorboard"))
    lines = (spiked_run / "metrics.jsonl").read_text().splitlines()
    (calm / "metrics.jsonl").write_text("\n".join(x for x in lines if '"event"' not in x) + "\n")
    sec = section_for(calm, 0)
    assert red_pixels(images(sec.body)[0]) == 0
    assert sec.problems == []


def test_tokens_per_s_is_the_median_of_the_steps(spiked_run):
    lines = (spiked_run / "metrics.jsonl").read_text().splitlines()
    steps = [json.loads(x) for x in lines if '"event"' not in x]
    assert tokens_per_s(steps) == pytest.approx(float(np.median([r["tokens_per_s"] for r in steps])))


@pytest.fixture(scope="module")
def corpus_with_errors(tmp_path_factory) -> Path:
    """Curate of the shipped crawl plus a JSONL file with a broken line: 1 bad record, skipped."""
    from pretrain.demo import CRAWL

    tmp = tmp_path_factory.mktemp("errs")
    bad = tmp / "in" / "notes.jsonl"
    bad.parent.mkdir()
    bad.write_text('{"id": "a", "text": "fine"}\n{"id": "b", "text": \n')
    out = tmp / "corpus"
    res = _cli("curate", str(CRAWL), str(bad.parent), "-o", str(out), "--workers", "1", "--quiet")
    assert res.returncode == 0, res.stderr
    return out


def test_errors_table_and_reject_values(corpus_with_errors):
    from pretrain.curate.io import read_jsonl_zst

    stats = json.loads((corpus_with_errors / "stats.json").read_text())
    assert stats["errors"]["count"] >= 1
    sec = section_for(corpus_with_errors, 0)
    first = stats["errors"]["examples"][0]  # the broken JSON line, named in the errors table
    assert html.escape(first["file"]) in sec.body and html.escape(first["reason"]) in sec.body
    n = stats["errors"]["count"]
    assert f"{n:,} bad record{'s' * (n != 1)} skipped" in " ".join(sec.problems), sec.problems
    assert "inputs: 2 files" in sec.body and "settings changed from the defaults: none" in sec.body
    files = sorted((corpus_with_errors / "rejects").glob("*.jsonl.zst"))
    rejects = [r for f in files for r in read_jsonl_zst(f)]
    scored = next(r for r in rejects if r["reason"] == "low_language_score")
    row = re.search(r"<td>low_language_score</td><td class=\"n\">([^<]*)</td><td class=\"n\">([^<]*)</td>",
                    sec.body)
    assert row, "the language reject's row"
    assert float(row.group(1)) < float(row.group(2)) == scored["threshold"]
    below = {"gopher_short_doc", "gopher_below_avg_threshold", "gopher_below_alpha_threshold",
             "gopher_enough_stop_words", "line_punct_ratio", "low_language_score"}
    measured = [r for r in rejects
                if isinstance(r.get("value"), (int, float)) and r.get("threshold") is not None]
    steps = {"language", "gopher_quality", "gopher_repetition", "fineweb_quality"}
    assert {r["step"] for r in measured} >= steps
    for r in measured:  # each value is on the side of its threshold that the rule drops
        v, t = r["value"], r["threshold"]
        assert v <= t if r["reason"] in below else v >= t, r["reason"]


def test_mixture_explains_epochs_and_flags_repeats(tmp_path):
    from test_tokens_mixture import make_token_dir

    small = make_token_dir(tmp_path / "wiki", 40, 0)
    big = make_token_dir(tmp_path / "web", 2000, 1)
    n_small = json.loads((small / "manifest.json").read_text())["tokens"]
    (tmp_path / "mixture.toml").write_text(
        f'budget = {n_small * 50}\n[sources.web]\npath = "{big}"\nweight = 0.9\n'
        f'[sources.wiki]\npath = "{small}"\nweight = 0.1\n')
    res = _cli("mix", str(tmp_path / "mixture.toml"), "--json")
    assert res.returncode == 0, res.stderr
    (tmp_path / "mixture.json").write_text(res.stdout)
    sec = section_for(tmp_path / "mixture.json", 0)
    assert "epochs = weight × D / tokens available" in sec.body
    assert sec.problems == ["wiki read more than 4 times"]  # 0.1 x 50 N / N = 5 epochs; web about 1


@pytest.mark.skipif(chromium() is None, reason="chromium not installed (make test installs it)")
def test_report_of_each_output_renders_in_chromium(plan_json, spiked_run, corpus_with_errors, tmp_path):
    ARTIFACTS.mkdir(exist_ok=True)
    page = tmp_path / "report.html"
    res = _cli("report", str(corpus_with_errors), str(plan_json), str(spiked_run), "-o", str(page))
    assert res.returncode == 0, res.stderr
    html = page.read_text()
    for heading in ("Summary", "What ran", "What went wrong", "Corpus: curate", "Errors: bad records",
                    "Examples of rejects", "Duplicate clusters", "Plan: llama-3-8b", "Top layouts",
                    "Why this layout", "Figures", "Training run", "Evaluations", "Events"):
        assert heading in html, heading
    shot = ARTIFACTS / "commands-report.png"
    result = render(page, screenshot=shot)
    assert len(result["images"]) == 1 + 4 + 1 and all(result["images"]), result
    assert result["errors"] == []
    assert shot.stat().st_size > 10_000
    assert "<script src" not in html and "http://" not in html.replace("http://www.w3.org", "")


def test_a_plan_of_a_model_folder_keeps_its_figures(tmp_path):
    """`plan --model DIR` names the model after the folder, which is no preset: the report rebuilt
    the job from the preset table only (UserError, not KeyError) and left the four figures out."""
    cfg = {"model_type": "llama", "hidden_size": 512, "intermediate_size": 1376, "num_hidden_layers": 4,
           "num_attention_heads": 8, "num_key_value_heads": 8, "vocab_size": 32000,
           "max_position_embeddings": 2048, "tie_word_embeddings": False}
    (tmp_path / "my-model").mkdir()
    (tmp_path / "my-model" / "config.json").write_text(json.dumps(cfg))
    out = _cli("plan", "--model", str(tmp_path / "my-model"), "--gpus", "8", "--gpu", "h100",
               "--tokens", "10B", "--json")
    assert out.returncode == 0, out.stderr
    (tmp_path / "plan.json").write_text(out.stdout)
    sec = section_for(tmp_path / "plan.json", 0)
    assert "figures left out" not in sec.body
    assert len(images(sec.body)) == 4


def test_a_plan_that_does_not_fit_says_why(tmp_path):
    out = _cli("plan", "--model", "llama-3-70b", "--gpus", "1", "--gpu", "h100", "--tokens", "1T", "--json")
    assert out.returncode == 1  # the planner's own verdict: nothing fits
    (tmp_path / "plan.json").write_text(out.stdout)
    rejected = json.loads(out.stdout)["search"]["rejected"]
    sec = section_for(tmp_path / "plan.json", 0)
    assert sec.problems == ["no layout fits: " + "; ".join(f"{k} ({v:,})" for k, v in rejected.items())]
    assert "<b>none fits</b>" in sec.body and "Why no layout" in sec.body


def test_eval_table_shows_each_tasks_kind_examples_and_shots(spiked_run, tmp_path):
    """The eval file keeps kind, n and shots under `tasks`, the metrics under `results`: the table
    must read both (it showed '—' for all three, where `pretrain eval` printed ppl / 16 / 0)."""
    from pretrain.cli import main

    run = tmp_path / "run"
    shutil.copytree(spiked_run, run, ignore=shutil.ignore_patterns("tensorboard"))
    text = tmp_path / "held.txt"
    text.write_text((spiked_run.parent / "topics.txt").read_text()[:2000])
    assert main(["eval", str(run), "--tasks", f"ppl:{text}", "--quiet"]) == 0
    doc = json.loads(next((run / "eval").glob("step_*.json")).read_text())
    task = doc["tasks"]["ppl:held.txt"]
    for body in (section_for(run, 0).body, section_for(next((run / "eval").glob("*.json")), 0).body):
        row = re.search(r"<tr><td>ppl:held\.txt</td>(.*?)</tr>", body).group(1)
        cells = [html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td[^>]*>.*?</td>", row)]
        assert cells[:3] == [task["kind"], str(task["n"]), str(task["shots"])], cells
        assert f"bits_per_byte {doc['results']['ppl:held.txt']['bits_per_byte']:.4f}" in cells[3]


def test_a_killed_run_and_its_resume_say_what_went_wrong(tmp_path, restore_torch_threads):
    """A run killed after step 7 of 12 (the trainer's own fault injection, os._exit as a SIGKILL
    would) is not 'nothing went wrong': the page says where it stopped, of how many, and the newest
    checkpoint a rerun resumes from; after that rerun, the restart is stated and the stop is gone."""
    import os

    from pretrain.train.testing import fallback_text

    text = fallback_text(tmp_path / "topics.txt")
    run = tmp_path / "run"
    argv = [sys.executable, "-m", "pretrain", "train", str(ROOT / "recipes" / "tiny-cpu.toml"), "--quiet",
            *[x for kv in (f"train.out={run}", f"data.path={text}", "train.steps=12", "checkpoint.every=5",
                           "checkpoint.async_save=false", "log.eval_every=0", "log.tensorboard=false")
              for x in ("--set", kv)]]
    env = {**os.environ, "PRETRAIN_FAIL_AT": "0:7"}
    env.pop("TORCHELASTIC_RESTART_COUNT", None)
    assert subprocess.run(argv, env=env, capture_output=True, timeout=300).returncode == 17
    sec = section_for(run, 0)
    assert sec.problems == ["stopped at step 7 of 12 (killed, interrupted or still running); newest "
                            "checkpoint: step 5, the same command resumes from it"]
    assert "<b>7 of 12</b>" in sec.body
    assert "checkpoints: every 5 steps; saved at step 5; the longest pause" in sec.body
    from pretrain.cli import main  # the resume and its rerun in this process: no kill to inject

    assert main(argv[3:]) == 0
    assert section_for(run, 0).problems == ["resumed once: at step 5"]
    # run it twice: the finished run's rerun logs a resume at step 12 and trains nothing
    assert main(argv[3:]) == 0
    sec = section_for(run, 0)
    assert sec.problems == ["resumed once: at step 5"]
    assert "<b>12 of 12</b>" in sec.body and "saved at steps 5, 10, 12;" in sec.body
    # continued past its end (train.steps 12 -> 14, as the README's 20 -> 30): planned, no restart
    assert main([*argv[3:], "--set", "train.steps=14"]) == 0
    sec = section_for(run, 0)
    assert sec.problems == ["resumed once: at step 5"] and "<b>14 of 14</b>" in sec.body


def test_a_damaged_input_is_one_line_naming_it(tmp_path, capsys):
    """A JSON argument cut short, or a corpus OUT whose stats.json is: the line names the argument
    (it said only "Expecting value: line 2 column 1 (char 6)")."""
    from pretrain.cli import main

    cut = tmp_path / "plan.json"
    cut.write_text('{"layout":')
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "stats.json").write_text('{"documents": {"read": 3')
    for arg in (cut, corpus):
        assert main(["report", str(arg), "-o", str(tmp_path / "r.html")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"pretrain report: error: {arg}"), err
        assert "not valid JSON" in err[0], err


def test_a_demo_folder_or_an_eval_folder_says_what_to_give(tmp_path, capsys):
    """`pretrain report demo-out` (what a newcomer types after the demo) and `report RUN/eval` were
    "not a curate output, ...": the line now names the demo's page and its parts, or a result file."""
    from pretrain.cli import main

    demo = tmp_path / "demo-out"
    (demo / "run" / "eval").mkdir(parents=True)
    (demo / "demo.json").write_text("{}")
    (demo / "plan.json").write_text("{}")
    for name in ("step_0000005.json", "step_0000010.json"):
        (demo / "run" / "eval" / name).write_text("{}")
    assert main(["report", str(demo), "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(f"it is a `pretrain demo` folder, whose page is {demo / 'report.html'}; its parts "
                        f"are the arguments: pretrain report {demo / 'plan.json'} {demo / 'run'}"), err
    assert main(["report", str(demo / "run" / "eval"), "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(f"give one of its files, e.g. {demo / 'run' / 'eval' / 'step_0000010.json'}"), err
    assert len(err.splitlines()) == 1


def test_tokens_per_document_says_mean_beside_the_median_card(tmp_path):
    """The card shows the median tokens per document, the per-source table the mean: each labelled,
    so 597 (median) and 614 (mean) on the demo's page do not read as a contradiction."""
    from test_tokens_mixture import make_token_dir

    d = make_token_dir(tmp_path / "web", 50, 0)
    m = json.loads((d / "manifest.json").read_text())
    body = section_for(d, 0).body
    assert "median tokens/document" in body and "mean tokens/document" in body
    assert f'<td class="n">{fmt(m["tokens"] / m["documents"])}</td>' in body


def test_skipped_input_records_of_a_token_directory_are_what_went_wrong(tmp_path):
    """Run-it-twice review (S4): a token directory made from 18 records of which 15 were skipped
    (numbers for text, malformed lines) was reported "Nothing went wrong: no bad records"; the
    count sat at the end of a note. The manifest's `skipped` is the truth (written by tokenize)."""
    from pretrain.cli import main as cli_main
    from pretrain.report import summary
    from pretrain.tokens.tokenizer import train_tokenizer

    train_tokenizer(["some words to learn from"] * 20, vocab_size=300).save(str(tmp_path / "tok.json"))
    (tmp_path / "in.jsonl").write_bytes(b'{"text": "kept"}\n{"text": 12}\n{"text": 13}\n{"text": broken\n')
    assert cli_main(["tokenize", str(tmp_path / "in.jsonl"), "--tokenizer", str(tmp_path / "tok.json"),
                     "-o", str(tmp_path / "t"), "--workers", "1"]) == 0
    skipped = json.loads((tmp_path / "t" / "manifest.json").read_text())["skipped"]
    sec = section_for(tmp_path / "t", 0)
    assert len(sec.problems) == 1 and "3 input records skipped" in sec.problems[0], sec.problems
    assert all(kind in sec.problems[0] for kind in skipped), (sec.problems, skipped)
    assert all(html.escape(kind, quote=True) in sec.body for kind in skipped)  # each kind, counted
    assert "Nothing went wrong" not in summary([sec])
    # a manifest from elsewhere whose `skipped` is not counts: no traceback, nothing invented
    m = json.loads((tmp_path / "t" / "manifest.json").read_text())
    (tmp_path / "t" / "manifest.json").write_text(json.dumps({**m, "skipped": {"x": "many", "y": [1]}}))
    assert section_for(tmp_path / "t", 0).problems == []
def test_the_final_eval_loss_card_is_explained(tmp_path):
    """The run's cards showed "final eval loss" with no word on what it is (the demo's summary
    prints it too); the note under the cards says it, with the step it was measured at."""
    from pretrain.report_run import _eval_loss_note, run_section

    run = tmp_path / "run"
    run.mkdir()
    steps = [{"step": s, "loss": 4.0 - s / 10, "lr": 1e-3, "grad_norm": 1.0, "tokens_per_s": 100.0}
             for s in range(1, 11)]
    events = [{"event": "eval", "step": s, "eval_loss": 3.5 - s / 100} for s in (5, 10)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in steps + events))
    body = run_section(run, "s0").body
    assert "final eval loss: the mean cross-entropy per token (nats, as the loss) of the run at step 10" \
        in body
    assert _eval_loss_note([], run) == ""  # no evaluation, no card to explain


def test_events_are_said_in_words_not_raw_json(tmp_path):
    """The Events table printed each event's fields as raw JSON (`{"saved_step": 100, "noticed_at":
    101}`): now in words (the trainer's keys named), every field kept, nested ones too; escaped."""
    from pretrain.report_run import run_section

    run = tmp_path / "run"
    run.mkdir()
    steps = [{"step": s, "loss": 4.0 - s / 10, "lr": 1e-3, "grad_norm": 1.0, "tokens_per_s": 100.0}
             for s in range(1, 4)]
    events = [{"event": "checkpoint_complete", "step": 2, "saved_step": 2, "noticed_at": 3},
              {"event": "config_change", "step": 3, "changes": {"train.steps": [2, 3]}},
              {"event": "odd", "step": 3, "x<y": "<blink>"}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in steps + events))
    body = run_section(run, "s0").body
    assert "saved step: 2; noticed at step: 3" in body, body
    assert "changed: {train.steps: [2, 3]}" in body
    assert "x&lt;y: &lt;blink&gt;" in body and "<blink>" not in body  # an unknown key as written, inert
    assert "&quot;saved_step&quot;" not in body and '"saved_step"' not in body


def test_settings_changed_are_those_the_run_set_not_its_presets_shape(tmp_path):
    """RUN/config.toml spells out the preset's shape; the page listed all of it as "changed from
    the defaults" (13 fields on the demo's page, which set seq_len and vocab_size). Measured against
    the same preset spelled out, only what the recipe set is left."""
    from pretrain import config
    from pretrain.report_run import _settings
    from pretrain.train.config import RunConfig
    from pretrain.train.model import resolve_shape
    from pretrain.train.record import resolved_config, write_config

    cfg = config.load(RunConfig, None, ["model.seq_len=64", "model.n_layers=3", "train.steps=7"])
    write_config(tmp_path, resolved_config(cfg, resolve_shape(cfg.model)))
    said = _settings(tmp_path)
    assert "(RUN/config.toml): train.steps = 7, model.n_layers = 3, model.seq_len = 64</p>" in said, said


_PLAN_CHILD = r"""
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
from pathlib import Path
from pretrain.report import section_for
body = section_for(Path(sys.argv[1]), 0).body
peak = [int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM:")][0] / 1024
print(json.dumps({"body": body, "peak_mb": peak}))
"""


def test_a_plan_written_by_someone_else_draws_bounded_figures(plan_json, tmp_path):
    """Hostile plan.json: `pp` 5,000 (the pipeline grid is stages x (stages + micro-batches) Python
    objects, and the figure 0.5 inch per stage: pp 2,000 took 6 GB and more than 2 minutes) and a
    model name matplotlib would parse as TeX (`$\\frac{$`: the whole plan refused). The figures are
    drawn in a child bounded to 3 GiB of address space, the name as text."""
    from PIL import Image

    plan = json.loads(plan_json.read_text())
    plan["layout"]["layout"]["pp"], plan["layout"]["micro_batches"] = 5000, 16
    model = plan["model"]
    plan["model"] = {**model, "name": "$\\frac{$ " + "x" * 5000}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    r = subprocess.run([sys.executable, "-c", _PLAN_CHILD, str(tmp_path / "plan.json")], capture_output=True,
                       text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout)
    assert "figures left out" not in got["body"]
    pngs = [Image.open(io.BytesIO(base64.b64decode(b)))
            for b in re.findall(r'src="data:image/png;base64,([^"]+)"', got["body"])]
    assert len(pngs) == 4 and max(max(p.size) for p in pngs) < 2000  # a legible page, not 250,000 px
    assert got["peak_mb"] < 1000


def test_task_names_of_a_run_are_plain_bounded_text_on_its_figure(spiked_run, tmp_path):
    """Hostile metrics.jsonl: in-loop task names that matplotlib would parse as TeX (`$\\frac{$`
    stopped the report), one of 5,000 characters (a 200 kB one took 93 s and 1.8 GB: the legend
    is laid out whole), 40 tasks of one metric. The panel is drawn, at a page's width."""
    run = tmp_path / "run"
    shutil.copytree(spiked_run, run, ignore=shutil.ignore_patterns("checkpoints", "tensorboard"))
    tasks = {"$\\frac{$/acc": 0.5, "y" * 5000 + "/acc": 0.25,
             **{f"t{i}/acc": i / 40 for i in range(40)}}
    with open(run / "metrics.jsonl", "a") as f:
        for step in (10, 20):
            f.write(json.dumps({"event": "eval_tasks", "step": step, **tasks}) + "\n")
    sec = section_for(run, 0)
    inloop = images(sec.body)[-1]
    assert inloop.shape[1] < 1500 and inloop.shape[0] < 1000


def test_long_fields_of_a_stats_json_are_shown_cut(corpus_with_errors, tmp_path):
    """A stats.json may hold 64 MiB: a reject reason, file name and record id of 20 MB each made a
    70 MB page. Each cell, card and line of text is cut to 1,000 characters, and says its length."""
    from pretrain.report import build_report

    corpus = tmp_path / "corpus"
    shutil.copytree(corpus_with_errors, corpus)
    stats = json.loads((corpus / "stats.json").read_text())
    base = len(build_report([corpus]))
    long = "<b>" + "A" * 2_000_000
    stats["errors"] = {"count": 3, "by_reason": {long: 3}, "first": {},
                       "examples": [{"file": long, "record": long, "reason": long}]}
    (corpus / "stats.json").write_text(json.dumps(stats))
    page = build_report([corpus])
    assert len(page) < base + 20_000, len(page) - base
    assert page.count("&lt;b&gt;" + "A" * 997 + "… (2,000,003 characters)") >= 4


_HOSTILE = "\"'><script>alert(1)</script><img src=x onerror=alert(2)><a href=javascript:alert(3)>x</a>"
_KEPT = {"step_order", "job", "format", "dtype", "hash", "version", "event", "split"}  # shapes read


def _poisoned(v, keys: bool):
    """Every string of a JSON value with `_HOSTILE` appended, and (`keys`) a hostile key in every object."""
    if isinstance(v, str):
        return v + _HOSTILE
    if isinstance(v, list):
        return [_poisoned(x, keys) for x in v]
    if isinstance(v, dict):
        out = {k: x if k in _KEPT else _poisoned(x, keys) for k, x in v.items()}
        return {**out, _HOSTILE: _HOSTILE} if keys else out
    return v


def _live_markup(page: str) -> list:
    """Every tag, attribute, link or image source in `page` that is not the report's own."""
    from html.parser import HTMLParser

    own_tags = {"html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "h3", "p",
                "main", "section", "span", "nav", "a", "table", "tr", "th", "td", "div", "b", "img", "ul",
                "li", "pre"}
    found = []

    class Scan(HTMLParser):
        def handle_starttag(self, tag, attrs):
            if tag not in own_tags:
                found.append(tag)
            for k, v in attrs:
                if k not in {"href", "src", "alt", "class", "id", "lang", "charset"}:
                    found.append((tag, k, v))
                elif (k == "href" and not v.startswith("#")) or (k == "src"
                                                                  and not v.startswith("data:image/png;")):
                    found.append((tag, k, v))

    Scan().feed(page)
    return found


@pytest.mark.parametrize("keys", [False, True], ids=["values", "keys"])
def test_strings_and_keys_of_others_files_are_inert_text(plan_json, spiked_run, corpus_with_errors, tmp_path,
                                                          keys):
    """Run names, task names, events, plan names, error reasons and files, metadata keys: every
    string of each output (and a key added to every object of the run's) carries a script, an
    attribute breakout and a javascript: link; the page holds none of them as markup, only as text."""
    from pretrain.report import build_report

    copies = []
    for src in (plan_json, spiked_run, corpus_with_errors):
        dst = tmp_path / src.name
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("checkpoints", "tensorboard"))
        else:
            shutil.copy(src, dst)
        copies.append(dst)
    # a key added to the plan's or stats' tables of numbers is one line ("not a well-formed pretrain
    # output"): their strings only
    for f in [copies[0], copies[2] / "stats.json", *sorted((copies[1] / "eval").glob("*.json"))]:
        run_file = f.parent == copies[1] / "eval"
        f.write_text(json.dumps(_poisoned(json.loads(f.read_text()), keys and run_file)))
    metrics = copies[1] / "metrics.jsonl"
    lines = [_poisoned(json.loads(x), keys) for x in metrics.read_text().splitlines()]
    metrics.write_text("".join(json.dumps(x) + "\n" for x in lines))
    page = build_report(copies, title=_HOSTILE)
    assert _live_markup(page) == []
    assert page.count(html.escape(_HOSTILE)) > 20  # shown, as text
