"""A corpus job's shard that keeps (or drops) nothing leaves no file in data/ or rejects/.

Before, such a shard left a 13-byte zstd frame of nothing, and the next job reading the corpus
(`pretrain dedup corpus/`, `tokenize`, `decontaminate`) counted each one as a bad record ("empty
file"), as every reader reports an empty input. datatrove's JsonlWriter opens a rank's file at its
first document, so a rank with none has no file: the same file set is checked against it here.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from s3server import s3  # noqa: F401  (the fixture)
from test_job_s3 import s3_here  # noqa: F401  (the fixture)
from test_pipeline import _prose

from pretrain.cli import main
from pretrain.curate import io
from pretrain.curate.identity import list_any_inputs

PEERS_PY = Path(__file__).resolve().parents[1] / ".venv-peers" / "bin" / "python"
SHORT = ["Too short to keep.", "Also far too short.", "Three words here."]  # gopher_short_doc


def _inputs(folder: Path) -> Path:
    """part0 and part2: real prose, kept; part1: pages the quality rules drop, every one."""
    folder.mkdir(parents=True)
    prose = _prose(6, seed=21)
    for name, texts in (("part0", prose[:3]), ("part1", SHORT), ("part2", prose[3:])):
        rows = [{"id": f"{name}-{i}", "text": t} for i, t in enumerate(texts)]
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def _files(out: Path, sub: str) -> list[str]:
    return sorted(p.name for p in (out / sub).iterdir())


def _records(path: Path) -> list[dict]:
    return list(io.read_jsonl_zst(path))


def _curate(inputs: Path, out: Path, *more: str) -> int:
    return main(["curate", str(inputs), "-o", str(out), "--workers", "1", "--quiet",
                 "--set", 'steps=["rules","dedup"]', "--set", "shards.max_inputs=1", *more])


def test_a_shard_that_keeps_nothing_writes_no_file_and_reads_back_clean(tmp_path, capsys):
    out = tmp_path / "corpus"
    assert _curate(_inputs(tmp_path / "in"), out) == 0
    # shard 1 kept nothing; no shard had a duplicate; only shard 1 had a rule's reject
    assert _files(out, "data") == ["shard_00000.jsonl.zst", "shard_00002.jsonl.zst"]
    assert _files(out, "rejects") == ["filters_00001.jsonl.zst"]
    assert [r["id"] for r in _records(out / "rejects" / "filters_00001.jsonl.zst")] == \
        ["part1-0", "part1-1", "part1-2"]
    # the next job reads our corpus without one bad record, and the same 6 documents
    assert main(["dedup", str(out), "-o", str(tmp_path / "dd"), "--workers", "1", "--quiet"]) == 0
    stats = json.loads((tmp_path / "dd" / "stats.json").read_text())
    assert stats["errors"]["count"] == 0, stats["errors"]
    assert stats["documents"]["read"] == stats["documents"]["kept"] == 6
    # a rerun finds the job done although shard 1 has no files (its markers say it wrote none)
    capsys.readouterr()
    assert _curate(tmp_path / "in", out) == 0
    assert "already complete" in capsys.readouterr().out


def test_rerun_writes_again_a_lost_file_but_not_an_empty_one(tmp_path, capsys):
    out = tmp_path / "corpus"
    assert _curate(_inputs(tmp_path / "in"), out) == 0
    first = {p: p.read_bytes() for p in sorted(out.glob("*/*.jsonl.zst"))}
    (out / "data" / "shard_00002.jsonl.zst").unlink()
    (out / "rejects" / "filters_00001.jsonl.zst").unlink()
    assert _curate(tmp_path / "in", out) == 0
    assert {p: p.read_bytes() for p in sorted(out.glob("*/*.jsonl.zst"))} == first


def test_datasets_loads_the_folder_by_its_card(tmp_path):
    datasets = pytest.importorskip("datasets")
    out = tmp_path / "corpus"
    assert _curate(_inputs(tmp_path / "in"), out) == 0
    cache = str(tmp_path / "hf-cache")
    kept = datasets.load_dataset(str(out), split="train", cache_dir=cache)
    dropped = datasets.load_dataset(str(out), "rejects", split="train", cache_dir=cache)
    assert sorted(kept["id"]) == [f"part{f}-{i}" for f in (0, 2) for i in range(3)]
    assert sorted(dropped["id"]) == ["part1-0", "part1-1", "part1-2"]


DATATROVE_RANKS = """
import json, sys
from datatrove.data import Document
from datatrove.pipeline.writers import JsonlWriter
for rank, docs in enumerate(json.loads(sys.argv[2])):
    w = JsonlWriter(sys.argv[1])
    for _ in w.run(iter(Document(text=d["text"], id=d["id"]) for d in docs), rank=rank, world_size=3):
        pass
"""


def test_same_files_as_datatrove_writing_each_shard_as_a_rank(tmp_path):
    if not PEERS_PY.exists():
        pytest.skip("datatrove's side needs .venv-peers (make peers)")
    out = tmp_path / "corpus"
    assert _curate(_inputs(tmp_path / "in"), out) == 0
    shard = out / "data" / "shard_{:05d}.jsonl.zst"
    per_rank = [_records(Path(str(shard).format(r))) if Path(str(shard).format(r)).exists() else []
                for r in range(3)]
    res = subprocess.run([str(PEERS_PY), "-c", DATATROVE_RANKS, str(tmp_path / "dt"), json.dumps(per_rank)],
                         capture_output=True, text=True, timeout=120)
    if "No module named" in res.stderr:
        pytest.skip(f"peer venv lacks a module: {res.stderr.strip().splitlines()[-1]}")
    assert res.returncode == 0, res.stderr[-2000:]
    theirs = sorted(int(p.name.split(".")[0]) for p in (tmp_path / "dt").iterdir())
    ours = sorted(int(p.name[len("shard_"):][:5]) for p in (out / "data").iterdir())
    assert ours == theirs == [0, 2]


def test_bucket_output_has_no_empty_objects_and_a_job_keeping_nothing_is_still_a_job(tmp_path, s3_here):  # noqa: F811
    import s3fs

    fs, bucket = s3fs.S3FileSystem(), "empty-shards"
    fs.mkdir(bucket)
    src = _inputs(tmp_path / "in")
    assert main(["curate", str(src), "-o", f"s3://{bucket}/out", "--workers", "1", "--quiet",
                 "--work-dir", str(tmp_path / "work"), "--set", 'steps=["rules","dedup"]',
                 "--set", "shards.max_inputs=1"]) == 0
    objects = {p.split("/out/", 1)[1]: fs.size(p) for p in fs.find(f"{bucket}/out")}
    assert sorted(k for k in objects if k.startswith(("data/", "rejects/"))) == \
        ["data/shard_00000.jsonl.zst", "data/shard_00002.jsonl.zst", "rejects/filters_00001.jsonl.zst"]
    # every page dropped: no object under data/, and the folder still reads as a job's (its
    # rejects are not taken for corpus)
    (src / "part0.jsonl").unlink()
    (src / "part2.jsonl").unlink()
    assert main(["curate", str(src), "-o", f"s3://{bucket}/none", "--workers", "1", "--quiet",
                 "--work-dir", str(tmp_path / "work2"), "--set", 'steps=["rules","dedup"]',
                 "--set", "shards.max_inputs=1"]) == 0
    assert not fs.find(f"{bucket}/none/data")
    assert [src for _, src in list_any_inputs([f"s3://{bucket}/none"])] == []
