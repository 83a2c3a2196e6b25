"""`pretrain eval` killed inside a task continues there: a real process SIGKILLed once the second
chunk of its multiple-choice task is on disk, then the same command again, compared byte for byte
(but `seconds`) with an uninterrupted run; a perplexity task stopped after its first chunk likewise;
a torn last line, another --limit and --force start from what is sound. Chunks of 2 items (the
test hook `partial.CHUNK`) so that a 9-example task has five.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")
from test_eval_resume import tiny_hf  # noqa: E402  (the same tiny HF folder)

pytestmark = pytest.mark.usefixtures("restore_torch_threads")


# chunks of 2; dies (SIGKILL: nothing flushed or cleaned up) once mc's chunk ending at item 4 is kept
KILL_INSIDE_MC = """
import os, signal, sys
from pretrain.eval import partial
partial.CHUNK = 2
real = partial.Partial.add
def add(self, start, stop, records):
    real(self, start, stop, records)
    if self.task == "mc" and stop == 4:
        os.kill(os.getpid(), signal.SIGKILL)
partial.Partial.add = add
from pretrain.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> tuple[Path, list[str]]:
    d = tmp_path_factory.mktemp("partial")
    tiny_hf(d / "hf", seed=7)
    (d / "a.txt").write_text("To be, or not to be, that is the question. " * 4)  # 6 windows of 32
    rows = [{"query": f"Question {i}: the sky is", "choices": ["blue", "green", "loud"][: 2 + i % 2],
             "gold": i % 2} for i in range(9)]
    (d / "mc.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d, [f"ppl:{d / 'a.txt'},{d / 'mc.jsonl'}", "--shots", "1"]


def _args(d: Path, tasks: list[str], out: Path) -> list[str]:
    return ["eval", str(d / "hf"), "--tasks", *tasks, "--quiet", "--threads", "1", "-o", str(out)]


def _timeless(path: Path) -> str:
    return re.sub(r'^( +)"seconds": [0-9.e-]+(,?)$', r'\1"seconds": -\2', path.read_text(), flags=re.M)


@pytest.fixture(scope="module")
def whole(setup, tmp_path_factory) -> Path:
    """An uninterrupted run's file (chunks of 2)."""
    from pretrain.cli import main
    from pretrain.eval import partial

    d, tasks = setup
    out = tmp_path_factory.mktemp("whole") / "eval.json"
    chunk, partial.CHUNK = partial.CHUNK, 2
    try:
        assert main(_args(d, tasks, out)) == 0
    finally:
        partial.CHUNK = chunk
    assert not out.with_name("eval.partial.jsonl").exists()  # gone with the task's last chunk
    return out


@pytest.fixture
def chunks_of_2(monkeypatch):
    from pretrain.eval import partial

    monkeypatch.setattr(partial, "CHUNK", 2)


def test_eval_killed_inside_a_task_continues_there(setup, whole, tmp_path, capsys, chunks_of_2):
    from pretrain.cli import main

    d, tasks = setup
    out = tmp_path / "eval.json"
    part = tmp_path / "eval.partial.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, "-c", KILL_INSIDE_MC, *_args(d, tasks, out)],
                          capture_output=True, text=True, env=env, timeout=180, cwd=tmp_path)
    assert proc.returncode == -9, proc.stderr[-2000:]
    assert list(json.loads(out.read_text())["results"]) == ["ppl:a.txt"]
    assert [(x["task"], x["start"], x["stop"]) for x in map(json.loads, part.read_text().splitlines())] == [
        ("mc", 0, 2), ("mc", 2, 4)]

    kept = part.read_text()
    part.write_text(kept + '{"task": "mc", "key": "')  # a torn line (a kill mid-append, another writer)
    capsys.readouterr()
    assert main(_args(d, tasks, out)) == 0
    err = capsys.readouterr().err
    assert f"ppl:a.txt: from {out} (same model, same settings)" in err
    assert f"mc: continuing at item 4 of 9 (from {part})" in err
    assert _timeless(out) == _timeless(whole)
    assert not part.exists()
    earlier = sum(json.loads(x)["seconds"] for x in kept.splitlines())  # the killed run's two chunks
    assert earlier > 0 and json.loads(out.read_text())["tasks"]["mc"]["seconds"] > earlier

    # the partial file of another --limit, or with --force: scored from the start, the same numbers
    part.write_text(kept)
    doc = json.loads(out.read_text())
    assert main([*_args(d, tasks, out), "--limit", "8"]) == 0
    err = capsys.readouterr().err
    assert "continuing" not in err and f"mc: {part} holds a partial score of other settings" in err
    assert json.loads(out.read_text())["tasks"]["mc"]["n"] == 8
    part.write_text(kept)
    assert main([*_args(d, tasks, out), "--force"]) == 0
    assert "continuing" not in capsys.readouterr().err and not part.exists()
    assert json.loads(out.read_text())["results"] == doc["results"]


def test_a_perplexity_stopped_after_its_first_chunk_continues_to_the_same_numbers(
        setup, whole, tmp_path, capsys, monkeypatch, chunks_of_2):
    from pretrain.cli import main
    from pretrain.eval import partial

    class Stop(BaseException):
        pass

    def stop_after_first(self, start, stop, records):
        real(self, start, stop, records)
        raise Stop

    d, tasks = setup
    out = tmp_path / "eval.json"
    real = partial.Partial.add
    monkeypatch.setattr(partial.Partial, "add", stop_after_first)
    with pytest.raises(Stop):
        main(_args(d, tasks, out))
    monkeypatch.setattr(partial.Partial, "add", real)
    assert not out.exists()
    line = json.loads(out.with_name("eval.partial.jsonl").read_text())
    assert (line["task"], line["start"], line["stop"], len(line["records"])) == ("ppl:a.txt", 0, 2, 2)
    capsys.readouterr()
    assert main(_args(d, tasks, out)) == 0
    n = json.loads(whole.read_text())["tasks"]["ppl:a.txt"]["n"]  # its windows of 32 tokens
    assert n > 2 and f"ppl:a.txt: continuing at item 2 of {n}" in capsys.readouterr().err
    assert _timeless(out) == _timeless(whole)


def test_records_that_are_not_the_scorers_end_what_is_taken(tmp_path, chunks_of_2):
    """A hand-edited partial file: a record of the wrong index, a metric that is not a number, a
    chunk out of order or of another key is not taken, nor anything after it."""
    from pretrain.eval.partial import Partial

    p = Partial(tmp_path / "x.partial.jsonl", "mc", "k1")
    good = [{"i": 0, "lls": [-1.0, -2.0], "gold": 0, "acc": 1.0},
            {"i": 1, "lls": [-3.0, -2.5], "gold": 1, "acc": 1.0}]
    p.add(0, 2, good)
    p.add(2, 4, [{"i": 2, "acc": 1.0}, {"i": 2, "acc": 1.0}])
    p.add(4, 6, [{"i": 4, "acc": 1.0}, {"i": 5, "acc": 1.0}])
    assert p.resume(9) == good
    assert [json.loads(x)["start"] for x in p.path.read_text().splitlines()] == [0]  # rewritten
    p.add(2, 4, [{"i": 2, "acc": "1.0"}, {"i": 3, "acc": 0.0}])
    assert p.resume(9) == good
    Partial(p.path, "other", "k9").add(0, 2, good)  # another task's lines stay
    assert Partial(p.path, "mc", "k2").resume(9) == []  # another key: from the start
    assert [json.loads(x)["task"] for x in p.path.read_text().splitlines()] == ["other"]
