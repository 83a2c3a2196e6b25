"""Run it twice: what the second run of a corpus command must do (session 5 review).

Each test runs a real command twice (or kills it and runs it again) and checks the second run
against the first, or against a fresh run of the same inputs: a rerun resumes instead of
refusing itself, and a rerun never mixes results made with other files than the first run's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_pipeline import _prose

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
    assert main(args) == 0, capsys.readouterr().err
    assert _snapshot(out) == first
    assert json.loads((out / "plan.json").read_text()) == plan
