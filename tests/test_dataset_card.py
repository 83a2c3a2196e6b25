"""OUT/README.md, the dataset card: HF `datasets` loads a job's folder, corpus and rejects, as written.

Truth: the files themselves, decoded with `zstandard` and `json`. The premise, checked too: a plain
`load_dataset("json", data_dir="OUT/data")` of a corpus whose inputs differ (a url on some
documents, other metadata keys per input) fails, as datasets infers one schema from the first file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_pipeline import _prose, _write_jsonl_corpus
from test_rejects_schema import _files, _no_nulls

from pretrain.curate import card
from pretrain.curate.executor import LocalExecutor
from pretrain.curate.grouping import ShardsConfig
from pretrain.curate.pipeline import CurateConfig, curate


def _load(datasets, *args, cache: Path, **kw):
    return datasets.load_dataset(*args, split="train", cache_dir=str(cache), **kw)


def _same(rows, truth: dict[str, dict]) -> None:
    """Every row is its record: the same fields with the same values (a key the record lacks is
    null in the row, as datasets fills a struct; a JSON-text column is compared decoded)."""
    assert sorted(r["id"] for r in rows) == sorted(truth)
    for row in rows:
        rec = truth[row["id"]]
        for k, v in row.items():
            if isinstance(v, str) and isinstance(rec.get(k), dict):
                v = json.loads(v)
            assert _no_nulls(v) == _no_nulls(rec.get(k)), (k, rec["id"])


def test_job_folder_loads_in_datasets_with_its_card(tmp_path):
    datasets = pytest.importorskip("datasets")
    _write_jsonl_corpus(tmp_path / "in", files=2, per_file=6)  # planted twins: dedup rejects
    for n, meta in enumerate([{"dump": "CC-MAIN-2020-16", "n": 1}, {"tags": ["a", "b"], "n": 2.5}]):
        f = tmp_path / "in" / f"part{n}.jsonl"
        recs = [json.loads(line) for line in f.read_text().splitlines()]
        for r in recs:  # the first input has urls, the second other metadata keys and a float
            r["metadata"] = meta
            if n == 0:
                r["url"] = f"https://example.com/{r['id']}"
        f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    junk = [{"id": "short", "text": "Buy now."}, {"id": "spam", "text": "cheap pills " * 300},
            {"id": "ok", "text": _prose(1, seed=9)[0], "metadata": {"n": 3}}]
    (tmp_path / "in" / "part9.jsonl").write_text("".join(json.dumps(r) + "\n" for r in junk))
    out = tmp_path / "out"
    # each input its own data file: files of different types (what datatrove's ranks write too)
    cfg = CurateConfig(shards=ShardsConfig(max_inputs=1))
    curate([str(tmp_path / "in")], out, cfg, executor=LocalExecutor(1))
    data, rejects = _files(out / "data"), _files(out / "rejects")
    assert any("url" in r for r in data.values()) and any("url" not in r for r in data.values())
    assert {r["step"] for r in rejects.values()} >= {"exact_dedup", "near_dedup"}
    assert any(r.get("value") is not None for r in rejects.values())
    with pytest.raises(datasets.exceptions.DatasetGenerationError):  # the premise
        _load(datasets, "json", data_dir=str(out / "data"), cache=tmp_path / "hf0")
    _same(_load(datasets, str(out), cache=tmp_path / "hf1"), data)
    _same(_load(datasets, str(out), "rejects", cache=tmp_path / "hf2"), rejects)


def test_a_key_of_two_kinds_is_loaded_as_json_text(tmp_path):
    """`kind` a number in one file and a string in another: no Arrow type holds both, so the card
    gives `metadata` as a string, which datasets fills with each object's JSON."""
    datasets = pytest.importorskip("datasets")
    files = {"data/a.jsonl": [{"id": "a", "text": "x", "metadata": {"kind": 3, "l": [1]}}],
             "data/b.jsonl": [{"id": "b", "text": "y", "metadata": {"kind": "three", "l": [2.5]}}]}
    shape = card.Shape()
    for name, recs in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("".join(json.dumps(shape.add(r)) + "\n" for r in recs))
    assert dict(shape.tree["struct"])["metadata"]["struct"] == [["kind", "mixed"], ["l", {"list": "float"}]]
    text = card.card(shape.tree, None, "curate").replace("*.jsonl.zst", "*.jsonl")
    (tmp_path / "README.md").write_text(text)
    rows = _load(datasets, str(tmp_path), cache=tmp_path / "hf")
    assert rows.features["metadata"] == datasets.Value("string")
    _same(rows, {r["id"]: r for recs in files.values() for r in recs})


def test_shape_folds_records_as_the_plain_merge_does():
    """The fast fold (a record like the last one costs a type check per field) gives the tree that
    merging each record's own type gives, for records that repeat, widen, nest and conflict."""
    import random

    rng = random.Random(7)
    values = [None, True, 3, 2.5, "s", [1, 2], [1, 2.5], [], [{"a": 1}], [{"b": "x"}], {"a": 1},
              {"a": None, "c": [True]}, {"a": "one"}]
    recs = []
    for _ in range(300):
        keys = rng.sample(["k1", "k2", "k3", "k4"], rng.randint(1, 4))
        rec = {"id": "x", "metadata": {k: rng.choice(values) for k in keys}}
        recs += [rec] * rng.randint(1, 3)  # runs of one shape: the fast path
    shape, reference = card.Shape(), "null"
    for i, r in enumerate(recs):
        shape.add(r)
        reference = card.merge(reference, card.type_of(r))
        if i % 50 == 0 or i == len(recs) - 1:
            assert shape.tree == reference, i


def test_a_folder_with_its_own_readme_is_not_taken_as_out(tmp_path):
    """The job writes OUT/README.md: `-o .` in a project folder would overwrite the project's."""
    from pretrain.errors import UserError

    _write_jsonl_corpus(tmp_path / "in", files=1, per_file=2)
    project = tmp_path / "project"
    project.mkdir()
    (project / "README.md").write_text("# my project\n")
    with pytest.raises(UserError, match="README.md"):
        curate([str(tmp_path / "in")], project, CurateConfig(), executor=LocalExecutor(1))
    assert (project / "README.md").read_text() == "# my project\n"
    assert sorted(p.name for p in project.iterdir()) == ["README.md"]


def test_metadata_keys_chosen_by_records_do_not_grow_the_card():
    """Hostile input: every record brings 500 metadata keys of its own. The types recorded (and
    README.md) stayed one field per key ever seen (2,000 such records: a 56 MB card, a 91 MB done
    marker, 627 MB); past card.MAX_FIELDS the struct is "mixed", a JSON string column, and the
    record's own fields (a url first seen after that) are still typed."""
    shape = card.Shape()
    for i in range(3 * card.MAX_FIELDS // 500):
        shape.add({"id": str(i), "text": "x", "metadata": {f"k{i}_{j}": j for j in range(500)}})
    shape.add({"id": "u", "text": "x", "url": "https://example.com/", "metadata": {"n": {"deep": 1}}})
    tree = dict(shape.tree["struct"])
    assert tree["metadata"] == "mixed" and tree["url"] == "string"
    feats = {f["name"]: f for f in card.features(shape.tree)}
    assert feats["metadata"] == {"name": "metadata", "dtype": "string"}
    assert len(card.card(shape.tree, None, "curate")) < 2000
    # shards each under the bound, their union over it: the merged type is bounded too
    parts = [card.type_of({"metadata": {f"s{s}_{j}": 1 for j in range(card.MAX_FIELDS // 2)}})
             for s in range(3)]
    assert dict(card.merged(parts)["struct"])["metadata"] == "mixed"
    assert dict(card.merged(parts[:1])["struct"])["metadata"] == parts[0]["struct"][0][1]


def test_blocks_titles_on_some_shards_load_in_every_reader(tmp_path):
    """`extract.backend = "blocks"` puts a page's headline in `metadata["title"]`; a shard of
    untitled pages only, written first, then one with titles: datasets (the card's configs and a
    plain JSON load of the files), pandas, pyarrow and datatrove's JsonlReader each read every
    document with its title. Before, the untitled shard had no `title` key and the plain
    `load_dataset("json", ...)` of a WARC-only corpus stopped ("Couldn't cast"): every extracted
    document now carries one ("" when the page had none)."""
    import shutil
    import subprocess

    datasets = pytest.importorskip("datasets")
    import pandas as pd
    import pyarrow as pa
    import pyarrow.json as pj
    import zstandard
    from conftest import data_file
    from test_readers_ecosystem import DATATROVE_READ, PEERS_PY

    from pretrain.curate.extract import ExtractConfig

    (tmp_path / "in").mkdir()  # shards in name order: a (one untitled page kept), b (titled ones)
    shutil.copy(data_file("warc/resiliparse/warcfile.warc.gz"), tmp_path / "in" / "a.warc.gz")
    shutil.copy(data_file("warc/dolma/sample-0000.warc.gz"), tmp_path / "in" / "b.warc.gz")
    out = tmp_path / "out"
    cfg = CurateConfig(extract=ExtractConfig(backend="blocks"), shards=ShardsConfig(max_inputs=1))  # 2 files
    curate([str(tmp_path / "in")], out, cfg, executor=LocalExecutor(1))
    files = sorted((out / "data").glob("*.jsonl.zst"))
    data = _files(out / "data")
    first = [json.loads(line) for line in zstandard.ZstdDecompressor().decompress(
        files[0].read_bytes(), max_output_size=1 << 26).decode().splitlines()]
    assert len(files) == 2 and not any(r["metadata"].get("title") for r in first)  # the premise
    titles = {i: r["metadata"].get("title") for i, r in data.items()}
    assert sum(bool(t) for t in titles.values()) >= 5
    # datasets' JSON builder lets pyarrow infer a timestamp from `warc_date`'s ISO text and then
    # casts it to the card's string: "2020-08-08 18:34:24" for "2020-08-08T18:34:24Z", the same
    # instant (datasets 5.2; any WARC corpus, titled or not): compared as instants, the rest as is
    rows = [dict(r, metadata=dict(r["metadata"])) for r in _load(datasets, str(out), cache=tmp_path / "hf1")]
    for r in rows:
        date = r["metadata"].pop("warc_date")
        assert date.replace(" ", "T") + "Z" == data[r["id"]]["metadata"]["warc_date"]
    _same(rows, {i: dict(r, metadata={k: v for k, v in r["metadata"].items() if k != "warc_date"})
                 for i, r in data.items()})
    plain = _load(datasets, "json", data_files=[str(f) for f in files], cache=tmp_path / "hf0")
    assert dict(zip(plain["id"], (m["title"] for m in plain["metadata"]))) == titles
    frame = pd.concat([pd.read_json(f, lines=True, compression="zstd") for f in files])
    assert {r["id"]: r["metadata"]["title"] for _, r in frame.iterrows()} == titles
    table = pa.concat_tables([pj.read_json(pa.BufferReader(zstandard.ZstdDecompressor().decompress(
        f.read_bytes(), max_output_size=1 << 26))) for f in files])  # one schema: no promotion
    assert dict(zip(table["id"].to_pylist(), (m["title"] for m in table["metadata"].to_pylist()))) == titles
    if PEERS_PY.exists():
        r = subprocess.run([str(PEERS_PY), "-c", DATATROVE_READ, str(out / "data")],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
        assert {i: m["title"] for i, _, m in json.loads(r.stdout)} == titles
    assert all(isinstance(t, str) for t in titles.values())  # one schema: "" when untitled
