"""OUT/rejects, in the shape the curate contract promises, read by the ecosystem's own readers.

A curate run with filter, dedup and decontamination rejects (several files, each leaving out or
nulling fields another fills) is loaded by HF `datasets.load_dataset("json", data_dir=...,
features=hf_features())` and by datatrove's `JsonlReader`: every reject comes back with the values
the files hold (read here with `zstandard` and `json`, line by line).
"""

from __future__ import annotations

import io as pyio
import json
import subprocess
from pathlib import Path

import pytest
import zstandard
from test_job import PEERS_PY, _bench
from test_pipeline import _prose, _write_jsonl_corpus

from pretrain import config
from pretrain.curate.executor import LocalExecutor
from pretrain.curate.pipeline import CurateConfig, curate
from pretrain.curate.rejects import FLOAT_FIELDS, INT_FIELDS, JSON_FIELDS, hf_features


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


def _files(folder: Path) -> dict[str, dict]:
    """Every record of every .jsonl.zst file, by id, decoded without the project's own reader."""
    out: dict[str, dict] = {}
    for p in sorted(folder.glob("*.jsonl.zst")):
        with zstandard.ZstdDecompressor().stream_reader(p.open("rb")) as raw:
            for line in pyio.TextIOWrapper(raw, encoding="utf-8"):
                rec = json.loads(line)
                out[rec["id"]] = rec
    return out


def _no_nulls(obj):
    """An object without its null members: `datasets` writes a nested object as the JSON of the
    Arrow struct its block inferred, so a key only other records have comes back as null."""
    if isinstance(obj, dict):
        return {k: _no_nulls(v) for k, v in obj.items() if v is not None}
    return [_no_nulls(v) for v in obj] if isinstance(obj, list) else obj


def test_rejects_load_in_datasets_and_datatrove(tmp_path):
    out = _mixed_run(tmp_path)
    truth = _files(out / "rejects")
    steps = {r["step"] for r in truth.values()}
    assert {"exact_dedup", "near_dedup", "decontaminate"} <= steps and len(steps) >= 4, steps
    # the contract's shape: value/threshold top-level where measured, kept_id on duplicates only
    assert any(r.get("value") is not None for r in truth.values())
    assert all(r.get("kept_id") for r in truth.values() if r["step"].endswith("dedup"))
    assert isinstance(truth["leak"]["metadata"]["contamination"], list) and "kept_id" not in truth["leak"]
    datasets = pytest.importorskip("datasets")
    features = hf_features()
    assert set().union(*truth.values()) <= set(features), "a field the writer adds is not in hf_features()"
    ds = datasets.load_dataset("json", data_dir=str(out / "rejects"), features=features, split="train",
                               cache_dir=str(tmp_path / "hf"))
    assert sorted(ds["id"]) == sorted(truth)
    for row in ds:  # what the rows say is what the files say
        rec = truth[row["id"]]
        for k, v in row.items():
            if k in JSON_FIELDS:
                assert _no_nulls(json.loads(v)) == _no_nulls(rec[k]), (k, rec["id"])
            elif k in FLOAT_FIELDS and rec.get(k) is not None:
                assert v == pytest.approx(rec[k]), (k, rec["id"])
            elif k in INT_FIELDS:
                assert v == rec[k]
            else:
                assert v == rec.get(k), (k, rec["id"])
    if not PEERS_PY.exists():
        pytest.skip("datatrove's side needs .venv-peers (make peers)")
    code = ("import json,sys\nfrom datatrove.pipeline.readers import JsonlReader\n"
            "print(json.dumps([[d.id, d.metadata] for d in JsonlReader(sys.argv[1])()]))")
    res = subprocess.run([str(PEERS_PY), "-c", code, str(out / "rejects")], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    got = dict(json.loads(res.stdout))
    assert got.keys() == truth.keys()
    for i, meta in got.items():  # the record's own metadata, its other fields beside it
        rec = truth[i]
        assert meta["step"] == rec["step"] and meta.get("value") == rec.get("value")
        assert meta.get("contamination") == rec["metadata"].get("contamination")
