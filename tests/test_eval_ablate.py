"""`pretrain ablate`: twins on the planted corpus raw and through the belt's dedup, tiny settings."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")


def test_ablate_dedups_the_planted_lines_and_resumes(tmp_path, text, capsys, restore_torch_threads,
                                                    monkeypatch):
    from pretrain.cli import main
    from pretrain.eval import ablate

    monkeypatch.setattr(ablate, "PROGRESS_S", 0.001)  # a progress line as often as the twin steps

    cfg = tmp_path / "ablate.toml"
    out = tmp_path / "out"
    cfg.write_text(f'''out = "{out}"
steps = 6
set = ["model.seq_len=32", "data.batch_size=2"]
k = 8
m = 8
random_windows = 4
[planted]
text = "{text}"
lines_from = "{text}"
base_chars = 4000
heldout_chars = 500
lines = 3
copies = 5
[[variants]]
name = "raw"
[[variants]]
name = "dedup"
dedup = true
''')
    assert main(["ablate", str(cfg)]) == 0
    doc = json.loads((out / "results.json").read_text())
    raw, dedup = doc["variants"]["raw"], doc["variants"]["dedup"]
    assert raw["planted_copies"] == [5, 5, 5] and dedup["planted_copies"] == [1, 1, 1]
    assert raw["tokens_trained"] == dedup["tokens_trained"] == 6 * 2 * 32
    assert (out / "ablation.png").stat().st_size > 0
    said = capsys.readouterr().out
    assert "planted_memorized" in said
    # each twin says where it is while it trains, and how long it took (the shipped recipe's
    # minutes were silent): steps counted up to the 6 it trains
    for name in ("raw", "dedup"):
        lines = [x for x in said.splitlines() if x.startswith(f"[{name}] step ")]
        steps = [int(x.split()[2].split("/")[0]) for x in lines]
        assert steps and steps == sorted(steps) and steps[-1] <= 6, said
        assert f"[{name}] trained 6 steps in " in said
    # the dedup twin's corpus is what the belt kept: each planted line once
    corpus = (out / "dedup" / "corpus.txt").read_text()
    assert dedup["paragraphs"] == corpus.count("\n\n") + 1
    # run it twice: finished twins are not trained again
    from pretrain.train.metrics import read_metrics

    steps, _ = read_metrics(out / "raw" / "run" / "metrics.jsonl")
    assert main(["ablate", str(cfg)]) == 0
    assert read_metrics(out / "raw" / "run" / "metrics.jsonl")[0] == steps  # no step trained again
    assert "[raw] trained" not in capsys.readouterr().out  # nothing trained: the trainer says so
    assert json.loads((out / "results.json").read_text())["variants"] == doc["variants"]
    # run it again with other steps: each twin is trained anew, exactly as a fresh ablation would (it
    # used to continue the finished twins, on a schedule no fresh run has: the cosine over 8 steps
    # for steps 7-8, then over 10)
    capsys.readouterr()
    for steps in (8, 10):
        assert main(["ablate", str(cfg), "--set", f"steps={steps}"]) == 0
        said = capsys.readouterr().out  # the twins removed are said (session 11: in silence)
        assert said.count("trained anew: the twin there was trained under other settings") == 2, said
    row = next(line for line in said.splitlines() if line.startswith("raw "))
    assert row.split()[1:4] == ["no", f"{raw['paragraphs']:,}", f"{10 * 2 * 32:,}"], row  # not False, 640
    assert main(["ablate", str(cfg), "--set", "steps=10", "-o", str(tmp_path / "fresh")]) == 0
    again = json.loads((out / "results.json").read_text())["variants"]
    fresh = json.loads((tmp_path / "fresh" / "results.json").read_text())["variants"]
    assert again == fresh and again["raw"]["tokens_trained"] == 10 * 2 * 32


def test_the_shipped_recipe_reads_its_texts_under_pretrain_shared_data(tmp_path, monkeypatch, capsys):
    """recipes/ablate-dedup.toml names `../shared/data/lm/...`, found only from a checkout beside
    ../shared; a clone elsewhere with PRETRAIN_SHARED_DATA set (as `pretrain eval` honours it for
    benchmarks) fell back to CPython's pydoc text. The planted sentences must be Emma's own."""
    from conftest import data_file

    from pretrain.eval.ablate import Planted, planted_corpus

    emma = data_file("lm/gutenberg/nltk-selection/austen-emma.txt").read_text(errors="replace")
    emma = " ".join(emma.split())
    data_file("lm/gutenberg/sherlock.txt")
    monkeypatch.setenv("PRETRAIN_SHARED_DATA", str(data_file(".")))
    monkeypatch.chdir(tmp_path)  # no ../shared from here nor from the config's folder
    paras, lines, _ = planted_corpus(Planted(), tmp_path)
    assert "not found" not in capsys.readouterr().err
    assert len(lines) == Planted().lines and all(line in emma for line in lines)
