"""OUT/rejects read by the ecosystem without options: one record shape, one type per field.

A curate run with filter, dedup and decontamination rejects (three steps, three files, fields a
file may leave empty that the next fills) is loaded by HF `datasets.load_dataset("json",
data_dir=...)` and by datatrove's `JsonlReader`: every reject comes back, with the types the docs
promise. The truth is our own reader of the same files (`io.read_jsonl_zst`, line by line).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from test_job import PEERS_PY, _bench
from test_pipeline import DEMO, _ids, _prose, _write_jsonl_corpus

from pretrain import config
from pretrain.curate.executor import LocalExecutor
from pretrain.curate.pipeline import CurateConfig, curate
from pretrain.curate.rejects import FIELDS, read_reject


def _mixed_run(tmp_path: Path) -> Path:
    """Two input files with planted twins, junk the filters drop, one benchmark leak."""
    _write_jsonl_corpus(tmp_path / "in", files=2, per_file=6)
    junk = [{"id": "short", "text": "Buy now."},
            {"id": "spam", "text": "cheap pills " * 300},
            {"id": "leak", "text": _prose(1, seed=5)[0] + " " + _prose(8)[3]}]
    (tmp_path / "in" / "part9.jsonl").write_text("".join(json.dumps(r) + "\n" for r in junk))
    bench = _bench(tmp_path / "bench", _prose(8)[3])
    cfg = config.load(CurateConfig, None, [f'decontam.benchmarks=["{bench}"]'])
    curate([str(tmp_path / "in")], tmp_path / "out", cfg, executor=LocalExecutor(1))
    return tmp_path / "out"


def test_rejects_load_in_datasets_and_datatrove(tmp_path):
    out = _mixed_run(tmp_path)
    truth = _ids(out, "rejects")
    steps = {r["step"] for r in truth.values()}
    assert {"exact_dedup", "near_dedup", "decontaminate"} <= steps and len(steps) >= 4, steps
    for r in truth.values():  # one shape: every field, one JSON type each
        assert list(r) == list(FIELDS), r
        assert all(isinstance(r[k], t) for k, t in FIELDS.items()), r
    datasets = pytest.importorskip("datasets")
    ds = datasets.load_dataset("json", data_dir=str(out / "rejects"), split="train",
                               cache_dir=str(tmp_path / "hf"))
    assert sorted(ds["id"]) == sorted(truth)
    assert {k: v.dtype for k, v in ds.features.items()} == {
        "id": "string", "text": "string", "step": "string", "reason": "string", "url": "string",
        "source": "string", "kept_id": "string", "measured": "string", "metadata": "string",
        "text_chars": "int64"}
    for row in ds:  # what the rows say is what the files say
        assert read_reject(row) == read_reject(truth[row["id"]])
    leak = read_reject(truth["leak"])
    assert leak["metadata"]["contamination"][0]["benchmark"] and leak["kept_id"] is None
    if not PEERS_PY.exists():
        pytest.skip("datatrove's side needs .venv-peers (make peers)")
    code = ("import json,sys\nfrom datatrove.pipeline.readers import JsonlReader\n"
            "print(json.dumps([[d.id, d.metadata['step'], d.metadata.get('contamination')]"
            " for d in JsonlReader(sys.argv[1])()]))")
    res = subprocess.run([str(PEERS_PY), "-c", code, str(out / "rejects")], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    got = {i: (step, c) for i, step, c in json.loads(res.stdout)}
    assert got.keys() == truth.keys()
    for i, (step, contamination) in got.items():  # metadata arrives parsed, as a dict
        assert step == truth[i]["step"]
        assert contamination == read_reject(truth[i])["metadata"].get("contamination")


FORMAT1 = Path(__file__).parent / "data" / "rejects_format1"  # the demo crawl's rejects, written by
# `pretrain curate src/pretrain/data/demo/crawl.warc.gz` at commit 8092dd1 (before this format)


def test_old_and_new_rejects_read_the_same(tmp_path):
    from pretrain.curate import io
    from pretrain.report_corpus import scan_rejects

    stats = curate([str(DEMO)], tmp_path / "out", CurateConfig(), executor=LocalExecutor(1))
    new = {i: read_reject(r) for i, r in _ids(tmp_path / "out", "rejects").items()}
    old = {r["id"]: read_reject(r) for p in sorted(FORMAT1.glob("*.jsonl.zst")) for r in io.read_jsonl_zst(p)}
    assert "measured" not in next(io.read_jsonl_zst(next(FORMAT1.glob("filters_*"))))  # truly format 1
    assert new == old and any(r["value"] is not None for r in new.values())
    (tmp_path / "old" / "rejects").mkdir(parents=True)
    for p in FORMAT1.glob("*.jsonl.zst"):
        (tmp_path / "old" / "rejects" / p.name).write_bytes(p.read_bytes())
    assert scan_rejects(tmp_path / "old", stats) == scan_rejects(tmp_path / "out", stats)  # the report
