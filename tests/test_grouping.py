"""Inputs grouped into shards (curate/grouping.py): the rules, and a corpus job over many small
files giving the documents a job of one input per shard gives, for any number of workers, after
a SIGKILL, from an older plan and with a changed `[shards]` on a rerun."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

from test_pipeline import _snapshot

from pretrain.curate import io
from pretrain.curate.dedup_job import job_config
from pretrain.curate.executor import LocalExecutor
from pretrain.curate.grouping import ShardsConfig, group, spans
from pretrain.curate.pipeline import curate
from pretrain.curate.step import Step

ROOT = Path(__file__).resolve().parents[1]
FILES = 30


def test_grouping_rules():
    cfg = ShardsConfig(target_bytes=250, max_inputs=1000)
    assert group([100] * 5, cfg) == [2, 2, 1]  # 300 bytes would pass 250
    assert group([10, 500, 10, 10], ShardsConfig(target_bytes=100)) == [1, 1, 2]  # a big file alone
    assert group([100, 100], ShardsConfig(target_bytes=100)) == [1, 1]  # a file of target_bytes alone
    assert group([1] * 5, ShardsConfig(max_inputs=2)) == [2, 2, 1]
    assert group([1] * 4, ShardsConfig(max_inputs=1)) == [1, 1, 1, 1]  # the old layout
    assert group([], cfg) == []
    assert [list(r) for r in spans([2, 1, 3])] == [[0, 1], [2], [3, 4, 5]]
    rng = random.Random(0)
    for _ in range(200):  # the rules as properties: consecutive, within bounds, none could take more
        sizes = [rng.choice([0, 1, 50, 99, 100, 300]) for _ in range(rng.randint(0, 40))]
        cfg = ShardsConfig(target_bytes=rng.choice([1, 100, 250]), max_inputs=rng.choice([1, 2, 7, 1000]))
        counts = group(sizes, cfg)
        assert sum(counts) == len(sizes) and all(c >= 1 for c in counts)
        parts = [sizes[r.start:r.stop] for r in spans(counts)]
        for i, part in enumerate(parts):
            assert len(part) <= cfg.max_inputs and (len(part) == 1 or sum(part) <= cfg.target_bytes)
            if i + 1 < len(parts):  # the next file did not fit
                assert len(part) == cfg.max_inputs or sum(part) + parts[i + 1][0] > cfg.target_bytes


def _pages(folder: Path) -> list[Path]:
    """FILES one-page-ish JSONL files (~300 bytes each) with exact copies across files and one bad
    record in the middle of file 17."""
    rng = random.Random(3)
    words = ["".join(rng.choices("abcdefghij", k=rng.randint(3, 7))) for _ in range(300)]
    folder.mkdir(parents=True)
    texts = []
    paths = []
    for f in range(FILES):
        lines = []
        for i in range(2):
            text = texts[f * 2 - 7] if f > 4 and i == 1 else " ".join(rng.choices(words, k=30))  # a copy
            texts.append(text)
            url = f"https://site{f % 3}.example/{f}/{i}"
            lines.append(json.dumps({"id": f"p{f}-{i}", "text": text, "url": url}))
        if f == 17:
            lines.insert(1, "{not json")
        path = folder / f"page_{f:03d}.jsonl"
        path.write_text("\n".join(lines) + "\n")
        paths.append(path)
    return paths


def _cfg(*extra: str):
    return job_config("curate", None, ['steps=["pii", "dedup"]', "shards.target_bytes=2000", *extra])


def _docs(out: Path) -> list[dict]:
    return [r for p in sorted((out / "data").glob("*.jsonl.zst")) for r in io.read_jsonl_zst(p)]


def test_many_small_files_match_one_input_per_shard_for_any_workers(tmp_path):
    files = _pages(tmp_path / "in")
    inputs = [str(tmp_path / "in")]
    one = curate(inputs, tmp_path / "one", _cfg("shards.max_inputs=1"), executor=LocalExecutor(2))
    w1 = curate(inputs, tmp_path / "w1", _cfg(), executor=LocalExecutor(1))
    curate(inputs, tmp_path / "w2", _cfg(), executor=LocalExecutor(2))
    assert one["shards"] == FILES and 1 < w1["shards"] < FILES
    plan = json.loads((tmp_path / "w1" / "plan.json").read_text())
    assert sum(plan["shards"]["counts"]) == FILES and len(plan["shards"]["counts"]) == w1["shards"]
    assert _snapshot(tmp_path / "w1") == _snapshot(tmp_path / "w2")  # byte for byte, 1 or 2 workers
    # the same documents in the same order (input order) as one shard per input, the same drops
    assert _docs(tmp_path / "w1") == _docs(tmp_path / "one")
    assert w1["documents"] == one["documents"] and w1["steps"] == one["steps"]
    assert w1["steps"]["exact_dedup"]["dropped"]["duplicate_text"] == FILES - 5
    # a record still names its own file: the bad line's, and each document's source
    assert [e["file"] for e in w1["errors"]["examples"]] == [str(files[17])]
    docs = _docs(tmp_path / "w1")
    assert {d["source"] for d in docs} == {p.name for p in files}
    assert all(d["source"] == f"page_{int(d['id'][1:].split('-')[0]):03d}.jsonl" for d in docs)


class DieAt(Step):
    """Passes documents on; SIGKILLs its whole process group at the document named by
    PRETRAIN_TEST_DIE_AT (a job killed mid-shard, its workers with it)."""

    name = "die_at"

    def process(self, doc):
        if doc.id == os.environ.get("PRETRAIN_TEST_DIE_AT"):
            os.killpg(os.getpgid(0), signal.SIGKILL)
        return doc


def _cli(inputs: Path, out: Path, *args: str, env: dict | None = None,
         quiet: bool = True) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pretrain", "curate", str(inputs), "-o", str(out), "--workers", "2",
           *(["--quiet"] if quiet else []), "--set", 'steps=["test_grouping:DieAt", "pii", "dedup"]',
           "--set", "shards.target_bytes=2000", *args]
    path = os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, start_new_session=True,
                          env={**os.environ, "PYTHONPATH": path, **(env or {})})


def test_resume_after_a_kill_mid_job(tmp_path):
    _pages(tmp_path / "in")
    ref = _cli(tmp_path / "in", tmp_path / "ref")
    assert ref.returncode == 0, ref.stderr
    killed = _cli(tmp_path / "in", tmp_path / "out", env={"PRETRAIN_TEST_DIE_AT": f"p{FILES - 1}-0"})
    assert killed.returncode == -signal.SIGKILL
    done = sorted(p.name for p in (tmp_path / "out" / "work" / "done").glob("filter_*.done"))
    shards = len(json.loads((tmp_path / "out" / "plan.json").read_text())["shards"]["counts"])
    assert 0 < len(done) < shards  # killed in the middle of stage A
    again = _cli(tmp_path / "in", tmp_path / "out")
    assert again.returncode == 0, again.stderr
    assert _snapshot(tmp_path / "out") == _snapshot(tmp_path / "ref")


def _undo_writes(out: Path) -> None:
    """What a kill in stage C leaves: no stats.json, no write marker, no data."""
    (out / "stats.json").unlink()
    for p in (out / "work" / "done").glob("write_*.done"):
        p.unlink()
    for p in (out / "data").glob("*"):
        p.unlink()


def test_a_plan_written_before_grouping_resumes_one_input_per_shard(tmp_path, capsys):
    _pages(tmp_path / "in")
    out = tmp_path / "out"
    curate([str(tmp_path / "in")], out, _cfg("shards.max_inputs=1"), executor=LocalExecutor(1))
    before = _snapshot(out)
    plan = json.loads((out / "plan.json").read_text())
    del plan["shards"]  # as an older pretrain wrote it (its config had no [shards] either)
    assert "shards" not in plan["config"]
    (out / "plan.json").write_text(json.dumps(plan))
    _undo_writes(out)
    filtered = {p: p.stat().st_mtime_ns for p in (out / "work" / "done").glob("filter_*.done")}
    stats = curate([str(tmp_path / "in")], out, _cfg(), executor=LocalExecutor(2))  # the default [shards]
    assert stats["shards"] == FILES and _snapshot(out) == before
    assert {p: p.stat().st_mtime_ns for p in filtered} == filtered  # stage A was not run again
    assert "keeps that grouping" in capsys.readouterr().err
    assert "max_inputs = 1\n" in (out / "config.toml").read_text()  # what the job ran with


def test_a_rerun_with_other_shards_keeps_the_plans_grouping_and_says_so(tmp_path):
    _pages(tmp_path / "in")
    out = tmp_path / "out"
    first = _cli(tmp_path / "in", out)
    assert first.returncode == 0, first.stderr
    before, config = _snapshot(out), (out / "config.toml").read_text()
    counts = json.loads((out / "plan.json").read_text())["shards"]["counts"]
    _undo_writes(out)
    again = _cli(tmp_path / "in", out, "--set", "shards.max_inputs=1", "--set", "shards.target_bytes=99",
                 quiet=False)
    assert again.returncode == 0, again.stderr
    said = [line for line in again.stderr.splitlines() if "keeps that grouping" in line]
    assert len(said) == 1 and f"({len(counts)} shards)" in said[0] and "max_inputs = 1 " in said[0]
    # the settings echo shows the grouping the job runs with (the plan's 2000), not the rerun's 99
    echo = [line.strip() for line in again.stderr.splitlines() if line.strip().startswith("shards.")]
    assert echo == ["shards.target_bytes = 2000"], again.stderr
    assert _snapshot(out) == before
    assert json.loads((out / "plan.json").read_text())["shards"]["counts"] == counts
    assert (out / "config.toml").read_text() == config  # the grouping the job used, not the rerun's
