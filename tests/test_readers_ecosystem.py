"""Files written by other tools (datatrove, HF `datasets`, pandas, Spark's layout, the stdlib's
codecs) read as the same documents, or refused in one line naming the file and the reason.

Every input here is made in tmp_path by the real writer; the truth is what that writer was given.
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from s3server import s3  # noqa: F401  (the fixture)
from test_job_s3 import s3_here  # noqa: F401  (the fixture)

from pretrain.curate.readers import ReaderConfig, list_inputs, read_documents, source_name
from pretrain.errors import UserError

RECORDS = [{"id": f"r{i}", "text": f"document {i}: some words", "url": f"http://ex.org/{i}"}
           for i in range(5)]


def _read(path: Path, cfg: ReaderConfig | None = None, root: Path | None = None):
    errors: list[tuple[str, object, str]] = []
    docs = list(read_documents(path, cfg or ReaderConfig(), lambda p, r, why: errors.append((p, r, why)),
                               source=source_name(path, root) if root else None))
    return docs, errors


def _texts_ids(docs) -> list[tuple[str, str]]:
    return [(d.id, d.text) for d in docs]


TRUTH = [(r["id"], r["text"]) for r in RECORDS]
PEERS_PY = Path(__file__).resolve().parents[1] / ".venv-peers" / "bin" / "python"


# --------------------------------------------------------------------------- text encodings


def test_utf8_bom_keeps_the_first_record(tmp_path):
    # Notepad, PowerShell's Out-File and Python's "utf-8-sig" codec start the file with a BOM.
    p = tmp_path / "bom.jsonl"
    with open(p, "w", encoding="utf-8-sig", newline="\r\n") as f:  # CRLF too, as on Windows
        for r in RECORDS:
            f.write(json.dumps(r) + "\n")
    docs, errors = _read(p)
    assert errors == [] and _texts_ids(docs) == TRUTH


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-16-be", "utf-32"])
def test_utf16_file_is_refused_in_one_line(tmp_path, codec):
    p = tmp_path / "wide.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding=codec)
    docs, errors = _read(p)
    assert docs == [] and len(errors) == 1
    path, where, why = errors[0]
    assert path == str(p) and where is None and codec[:6].upper() in why and "UTF-8" in why


# --------------------------------------------------------------------------- HF datasets, pandas: JSON


def _dataset():
    datasets = pytest.importorskip("datasets")
    rows = [{**r, "meta": {"n": i, "tags": ["a", "b"]}} for i, r in enumerate(RECORDS)]
    return datasets.Dataset.from_list(rows)


@pytest.mark.parametrize("name, kw", [("part.jsonl", {}), ("part.json", {}),
                                      ("array.json", {"lines": False})])
def test_datasets_to_json_reads_back(tmp_path, name, kw):
    _dataset().to_json(tmp_path / name, **kw)
    docs, errors = _read(tmp_path / name)
    assert errors == [] and _texts_ids(docs) == TRUTH
    assert [d.url for d in docs] == [r["url"] for r in RECORDS]


def test_pandas_records_array_and_pretty_printed_object(tmp_path):
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(RECORDS)
    df.to_json(tmp_path / "records.json", orient="records")  # one line: [{...},{...}]
    df.to_json(tmp_path / "indented.json", orient="records", indent=2)
    for name in ("records.json", "indented.json"):
        docs, errors = _read(tmp_path / name)
        assert errors == [] and _texts_ids(docs) == TRUTH, name
    # A whole-file object (pandas' default orient, a config) is refused in one line, not per line.
    (tmp_path / "info.json").write_text(json.dumps({"features": {"text": "string"}}, indent=2))
    docs, errors = _read(tmp_path / "info.json")
    assert docs == [] and len(errors) == 1 and "pretty-printed" in errors[0][2]


def test_json_array_bounded_truncated_and_malformed(tmp_path):
    big = [{"id": f"b{i}", "text": "w " * 40_000} for i in range(40)]  # 3.2 MB on one line
    p = tmp_path / "big.json"
    p.write_text(json.dumps(big))
    docs, errors = _read(p, ReaderConfig(max_record_bytes=100_000))
    assert errors == [] and [d.id for d in docs] == [r["id"] for r in big]
    docs, errors = _read(p, ReaderConfig(max_record_bytes=50_000))  # each element is 80 KB: all skipped
    assert docs == [] and errors == [(str(p), f"element {i}", "record larger than max_record_bytes=50000")
                                     for i in range(40)]
    huge = tmp_path / "huge.json"  # longer than the lookahead and the bound: stepped over unparsed
    tricky = 'w "quoted" {braces} [brackets] \\ back\\slash ' * 100_000
    huge.write_text(json.dumps([{"id": "h", "text": tricky, "x": [{"y": "]}"}]}, *big[:3]]))
    docs, errors = _read(huge, ReaderConfig(max_record_bytes=1_500_000))
    assert [d.id for d in docs] == ["b0", "b1", "b2"]
    assert errors == [(str(huge), "element 0", "record larger than max_record_bytes=1500000")]
    p.write_text(json.dumps(big)[:2_000_000])  # cut inside element 24
    docs, errors = _read(p)
    assert len(docs) == 24 and len(errors) == 1 and errors[0][:2] == (str(p), "element 24")
    p.write_text('[{"id": "a", "text": "x"}, 3, {"id": "b", "text": "y"} {"id": "c", "text": "z"}]')
    docs, errors = _read(p)
    assert [d.id for d in docs] == ["a", "b"] and [e[1] for e in errors] == ["element 1", "element 3"]
    assert "expected a JSON object" in errors[0][2] and "expected ','" in errors[1][2]
    p.write_text('[{"id": "a", "text": "x"}]\n[{"id": "b", "text": "y"}]\n')  # lines of arrays
    docs, errors = _read(p)
    assert [d.id for d in docs] == ["a"] and errors == [(str(p), "element 1", "data after the JSON "
                                                         "array's closing ']': skipped")]


# --------------------------------------------------------------------------- compressions


@pytest.mark.parametrize("suffix", [".jsonl.gz", ".json.gz", ".jsonl.bz2", ".json.bz2", ".jsonl.xz",
                                    ".json.xz", ".jsonl.zst"])
def test_every_compression_and_its_truncation(tmp_path, suffix):
    import bz2
    import lzma

    import zstandard

    raw = "".join(json.dumps({"id": f"t{i}", "text": " ".join(str(i * j) for j in range(600))}) + "\n"
                  for i in range(120))
    codec = {".gz": gzip.compress, ".bz2": lambda b: bz2.compress(b, 1),  # 100 KB blocks
             ".xz": lzma.compress, ".zst": zstandard.compress}
    data = codec[suffix[suffix.rindex("."):]](raw.encode())
    p = tmp_path / f"part{suffix}"
    p.write_bytes(data)
    docs, errors = _read(p)
    assert errors == [] and [d.id for d in docs] == [f"t{i}" for i in range(120)]
    p.write_bytes(data[: len(data) * 2 // 3])  # cut mid-stream: the records before it, one error
    docs, errors = _read(p)
    assert 0 < len(docs) < 120 and [d.id for d in docs] == [f"t{i}" for i in range(len(docs))]
    assert len(errors) == 1 and errors[0][0] == str(p) and "truncated" in errors[0][2]


def test_json_array_in_tiny_chunks_matches_json_loads(tmp_path, monkeypatch):
    # Chunk edges fall inside strings, escapes, \\u sequences and multi-byte UTF-8: the stdlib's
    # json.loads of the whole file is the truth, for parsed and for stepped-over elements.
    from pretrain.curate import json_array

    records = [{"id": f"e{i}", "text": f"é\\\"{{[ \\u00e9 \u4e2d {i} " + "\\\\" * i, "n": [i, {"k": "]"}]}
               for i in range(30)]
    p = tmp_path / "a.json"
    p.write_text(json.dumps(records, ensure_ascii=False))
    truth = json.loads(p.read_text())
    for chunk in (1, 2, 3, 5, 7, 64):
        monkeypatch.setattr(json_array, "CHUNK", chunk)
        docs, errors = _read(p, ReaderConfig(max_record_bytes=60))
        kept = [r for r in truth if len(json.dumps(r, ensure_ascii=False)) <= 60]
        assert [(d.id, d.text) for d in docs] == [(r["id"], r["text"]) for r in kept], chunk
        assert len(errors) == len(truth) - len(kept) > 5 and all("larger" in e[2] for e in errors)


# --------------------------------------------------------------------------- folders


def test_mixed_folder_skips_hidden_and_bookkeeping_files(tmp_path):
    # A Spark/Hadoop output (part files, _SUCCESS, .crc checksums, a _temporary/ left by a killed
    # task), macOS litter (.DS_Store, ._ AppleDouble files), a README, a symlink to a file inside.
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path / "corpus"
    (root / "_temporary" / "0").mkdir(parents=True)
    part = root / "part-00000-5f1c.snappy.parquet"
    pq.write_table(pa.Table.from_pylist(RECORDS[:3]), part, compression="snappy")
    (root / ".part-00000-5f1c.snappy.parquet.crc").write_bytes(b"crc\x00\x01\x02\x03")
    (root / "_SUCCESS").write_bytes(b"")
    (root / "_temporary" / "0" / "part-00001-5f1c.snappy.parquet").write_bytes(b"PAR1 half written")
    (root / "notes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS[3:]))
    (root / "._notes.jsonl").write_bytes(b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        ")
    (root / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1")
    (root / ".cache").mkdir()
    (root / ".cache" / "old.jsonl").write_text(json.dumps({"id": "stale", "text": "stale"}) + "\n")
    (root / "README.md").write_text("# my corpus\n")
    (root / "alias.jsonl").symlink_to(root / "notes.jsonl")
    files = list_inputs([str(root)])
    assert [f.name for f in files] == ["notes.jsonl", "part-00000-5f1c.snappy.parquet"]
    docs, errors = [], []
    for f in files:
        d, e = _read(f, root=root)
        docs += d
        errors += e
    assert errors == [] and sorted(_texts_ids(docs)) == sorted(TRUTH)
    # A hidden file named on the command line is read: only a folder walk leaves them out.
    assert list_inputs([str(root / "_temporary" / "0" / "part-00001-5f1c.snappy.parquet")])
    # A glob follows the same rule below its fixed part (`_temporary/` is still a killed task's),
    # and matches only known extensions; a hidden folder it names is its root, so it is read.
    assert [f.name for f in list_inputs([str(root / "**" / "*")])] == [f.name for f in files]
    assert [f.name for f in list_inputs([str(root / "_temporary" / "*" / "*.parquet")])] == [
        "part-00001-5f1c.snappy.parquet"]


def test_folder_walk_leaves_plain_json_to_globs(tmp_path, capsys):
    # tokenizer.json, config.json, datasets' state.json share the extension with JSON records:
    # a folder walk leaves plain .json out (and says how to read them), a glob or a name reads them.
    _dataset().to_json(tmp_path / "train.json")
    (tmp_path / "tokenizer.json").write_text(json.dumps({"version": "1.0", "model": {}}, indent=2))
    assert list_inputs([str(tmp_path)]) == []
    assert "2 .json files and nothing else to read" in capsys.readouterr().err
    # files of a type not read beside them (a folder of .html.gz pages, session 11): which, and what is
    (tmp_path / "sub").mkdir()
    for i in range(3):
        (tmp_path / "sub" / f"page{i}.pdf.gz").write_bytes(gzip.compress(b"%PDF-1.4"))
    assert list_inputs([str(tmp_path)]) == []
    said = capsys.readouterr().err
    assert f"{tmp_path} holds 5 files, none of a type read here (.pdf.gz 3, .json 2); read: " in said, said
    assert ".html/.htm" in said and "**/*.json" in said and said.count("\n") == 1, said
    shutil.rmtree(tmp_path / "sub")
    _dataset().to_json(tmp_path / "train.json.gz", compression="gzip")  # compressed: data, walked
    assert [f.name for f in list_inputs([str(tmp_path)])] == ["train.json.gz"]
    assert _texts_ids(_read(tmp_path / "train.json.gz")[0]) == TRUTH
    assert [f.name for f in list_inputs([str(tmp_path / "*.json")])] == ["tokenizer.json", "train.json"]


def test_bucket_prefix_skips_the_same_hidden_objects(s3_here):  # noqa: F811
    from pretrain.curate.job import list_any_inputs

    bucket = s3_here.new_bucket("hidden")
    line = json.dumps(RECORDS[0]) + "\n"
    keys = ["part-00000.jsonl", "_SUCCESS", "_temporary/0/part-00001.jsonl", ".part-00000.jsonl.crc",
            "._part-00000.jsonl", "sub/.cache/old.jsonl", "sub/_delta_log/00000.json", "sub/b.jsonl"]
    s3_here.filesystem().pipe({f"{bucket}/in/{k}": line.encode() for k in keys})
    listed = list_any_inputs([f"s3://{bucket}/in"])
    assert [src for _, src in listed] == ["part-00000.jsonl", "sub/b.jsonl"]
    # a bucket glob: the same rule as a local one (known extensions, nothing hidden below its root)
    listed = list_any_inputs([f"s3://{bucket}/in/**"])
    assert [src for _, src in listed] == ["part-00000.jsonl", "sub/b.jsonl"]


# --------------------------------------------------------------------------- datatrove

DATATROVE_WRITE = """
import json, sys
from datatrove.data import Document
from datatrove.pipeline.writers import JsonlWriter, ParquetWriter
docs = [Document(text=r["text"], id=r["id"], metadata={"url": r["url"], "dump": "CC-MAIN-2024-10",
                 "language_score": 0.5 + i / 10}) for i, r in enumerate(json.loads(sys.argv[2]))]
for writer in (JsonlWriter(sys.argv[1] + "/jsonl"), ParquetWriter(sys.argv[1] + "/parquet")):
    for _ in writer.run(iter(docs), rank=0, world_size=1):
        pass
"""


def _peer(code: str, *args: str) -> subprocess.CompletedProcess:
    if not PEERS_PY.exists():
        pytest.skip("datatrove's side needs .venv-peers (make peers)")
    res = subprocess.run([str(PEERS_PY), "-c", code, *args], capture_output=True, text=True, timeout=120)
    if "No module named" in res.stderr:
        pytest.skip(f"peer venv lacks a module: {res.stderr.strip().splitlines()[-1]}")
    assert res.returncode == 0, res.stderr[-2000:]
    return res


def test_datatrove_writers_output_reads_as_the_same_documents(tmp_path):
    _peer(DATATROVE_WRITE, str(tmp_path), json.dumps(RECORDS))
    files = list_inputs([str(tmp_path)])
    assert [f.relative_to(tmp_path).as_posix() for f in files] == ["jsonl/00000.jsonl.gz",
                                                                   "parquet/000_00000.parquet"]
    for f in files:
        docs, errors = _read(f)
        assert errors == [] and _texts_ids(docs) == TRUTH, f
        # datatrove keeps the url in metadata (its readers move every non-text field there)
        assert [d.url for d in docs] == [r["url"] for r in RECORDS], f
        assert [d.metadata["dump"] for d in docs] == ["CC-MAIN-2024-10"] * 5, f
        assert [d.metadata["language_score"] for d in docs] == [0.5 + i / 10 for i in range(5)], f


# --------------------------------------------------------------------------- HF datasets: Parquet


def test_datasets_parquet_nested_large_and_dictionary_columns(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    ds = _dataset()
    p = tmp_path / "nested.parquet"
    ds.to_parquet(p, batch_size=2)  # row groups of 2 rows; `meta` a struct holding a list
    assert pq.ParquetFile(p).metadata.num_row_groups == 3
    docs, errors = _read(p, ReaderConfig(metadata_field="meta"))
    assert errors == [] and _texts_ids(docs) == TRUTH
    assert [d.metadata for d in docs] == [{"n": i, "tags": ["a", "b"]} for i in range(5)]
    # large_string text, dictionary-encoded ids (pyarrow keeps the dictionary in the file), an id
    # column of integers, a struct metadata whose strings count against max_record_bytes
    table = pa.table({"text": pa.array([r["text"] for r in RECORDS], pa.large_string()),
                      "id": pa.array([r["id"] for r in RECORDS]).dictionary_encode(),
                      "metadata": pa.array([{"note": "n" * (10 if i != 3 else 5000)} for i in range(5)])})
    pq.write_table(table, tmp_path / "arrow.parquet", row_group_size=2)
    docs, errors = _read(tmp_path / "arrow.parquet", ReaderConfig(max_record_bytes=1000))
    assert [(d.id, d.text) for d in docs] == [t for i, t in enumerate(TRUTH) if i != 3]
    why = ("record larger than max_record_bytes=1000: column 'metadata.note' holds 5,000 bytes "
           "(row group 1, row 1 of the group), skipped unread")  # the struct's field read by pages
    assert errors == [(str(tmp_path / "arrow.parquet"), "row 3", why)]
    pq.write_table(pa.table({"text": table["text"], "id": pa.array(range(5))}), tmp_path / "ints.parquet")
    docs, errors = _read(tmp_path / "ints.parquet")
    assert errors == [] and [d.id for d in docs] == ["0", "1", "2", "3", "4"]


def test_datasets_hub_layout(tmp_path):
    ds = _dataset()
    data = tmp_path / "repo" / "data"
    data.mkdir(parents=True)
    ds.select(range(3)).to_parquet(data / "train-00000-of-00002.parquet")
    ds.select(range(3, 5)).to_parquet(data / "train-00001-of-00002.parquet")
    (tmp_path / "repo" / "README.md").write_text("---\nconfigs: [...]\n---\n")
    (tmp_path / "repo" / ".gitattributes").write_text("*.parquet filter=lfs\n")
    root = tmp_path / "repo"
    files = list_inputs([str(root)])
    docs = [d for f in files for d in _read(f, root=root)[0]]
    assert _texts_ids(docs) == TRUTH
    assert {d.source for d in docs} == {f"data/train-0000{i}-of-00002.parquet" for i in (0, 1)}


def test_datasets_save_to_disk_folder(tmp_path):
    datasets = pytest.importorskip("datasets")
    ds = _dataset()
    ds.save_to_disk(str(tmp_path / "saved"), num_shards=2)
    datasets.DatasetDict({"train": ds, "test": ds.select(range(2))}).save_to_disk(str(tmp_path / "dd"))
    files = list_inputs([str(tmp_path / "saved")])  # its state.json and dataset_info.json are not data
    assert [f.name for f in files] == ["data-00000-of-00002.arrow", "data-00001-of-00002.arrow"]
    docs, errors = [], []
    for f in files:
        d, e = _read(f, ReaderConfig(metadata_field="meta"))
        docs += d
        errors += e
    assert errors == [] and _texts_ids(docs) == TRUTH
    assert [d.url for d in docs] == [r["url"] for r in RECORDS]
    assert docs[4].metadata == {"n": 4, "tags": ["a", "b"]}
    files = list_inputs([str(tmp_path / "dd")])
    assert [f.relative_to(tmp_path / "dd").as_posix() for f in files] == ["test/data-00000-of-00001.arrow",
                                                                          "train/data-00000-of-00001.arrow"]
    # Not an Arrow file (or a broken one): one line, naming the file, with the way out.
    bad = tmp_path / "saved" / "data-00000-of-00002.arrow"
    bad.write_bytes(bad.read_bytes()[:300])
    docs, errors = _read(bad)
    assert docs == [] and len(errors) == 1 and errors[0][0] == str(bad) and "to_parquet" in errors[0][2]


# --------------------------------------------------------------------------- the text field


def test_text_field_flag_reads_stack_and_redpajama_layouts(tmp_path, capsys):
    # The Stack keeps the text under "content", RedPajama-V2 under "raw_content" (its id under
    # "doc_id" in "meta"): every command that reads documents takes --text-field.
    from pretrain.cli import main
    from pretrain.tokens.shards import read_manifest

    stack = tmp_path / "stack.jsonl"
    letters = str.maketrans("0123456789", "abcdefghij")  # dedup's shingles fold digits: words differ
    stack.write_text("".join(json.dumps({"content": " ".join(str(i * 1000 + 7 * j).translate(letters)
                                                             for j in range(40)), "id": r["id"]}) + "\n"
                             for i, r in enumerate(RECORDS)))
    rp = tmp_path / "rp.json.gz"
    rp.write_bytes(gzip.compress("".join(json.dumps({"raw_content": r["text"], "meta": {"url": r["url"]}})
                                         + "\n" for r in RECORDS).encode()))
    assert main(["dedup", str(stack), "-o", str(tmp_path / "d"), "--text-field", "content", "--workers", "1",
                 "--quiet"]) == 0
    from pretrain.curate.io import read_jsonl_zst

    kept = [r for f in sorted((tmp_path / "d" / "data").iterdir()) for r in read_jsonl_zst(f)]
    assert sorted(r["id"] for r in kept) == [r["id"] for r in RECORDS]
    assert main(["dedup", str(stack), "-o", str(tmp_path / "e"), "--workers", "1", "--quiet"]) == 1
    seen = capsys.readouterr()
    assert "missing text field 'text'" in seen.out + seen.err
    assert "its fields: 'content', 'id'" in seen.out + seen.err  # where the text is: the record's keys
    # A Parquet file without the column is a whole-file error: named as the file, not "record None"
    pq = tmp_path / "stack.parquet"
    pa, papq = pytest.importorskip("pyarrow"), pytest.importorskip("pyarrow.parquet")
    papq.write_table(pa.Table.from_pylist([{"content": "one document", "id": "a"}]), pq)
    assert main(["dedup", str(pq), "-o", str(tmp_path / "f"), "--workers", "1", "--quiet"]) == 1
    seen = capsys.readouterr()
    assert f"{pq}: missing text column 'text'" in seen.err and "record None" not in seen.err, seen.err
    assert "--text-field" in seen.err.splitlines()[-1], seen.err  # the way out, on the error line
    # beside a file that reads, the file without the field was counted with no way out (session 11)
    assert main(["dedup", str(stack), str(rp), "-o", str(tmp_path / "h"), "--text-field", "content",
                 "--workers", "1"]) == 0
    seen = capsys.readouterr()
    said = [line for line in seen.out.splitlines() if "missing text field 'content'" in line]
    assert said and said[0].endswith("--text-field NAME"), seen.out
    assert "its fields: 'raw_content', 'meta'" in said[0], said  # the first record's keys...
    by_reason = json.loads((tmp_path / "h" / "stats.json").read_text())["errors"]["by_reason"]
    assert by_reason["missing text field 'content'"] == len(RECORDS), by_reason  # ...one kind for all
    tok = tmp_path / "tok.json"
    assert main(["tokenizer", "train", str(rp), "-o", str(tok), "--vocab-size", "300",
                 "--text-field", "raw_content"]) == 0
    assert main(["tokenize", str(rp), "--tokenizer", str(tok), "-o", str(tmp_path / "t"), "--workers", "1",
                 "--text-field", "raw_content"]) == 0
    assert read_manifest(tmp_path / "t")["documents"] == 5
    # a rerun into the same output reading another field: refused naming the setting, old -> new
    capsys.readouterr()
    assert main(["tokenize", str(rp), "--tokenizer", str(tok), "-o", str(tmp_path / "t"), "--workers", "1",
                 "--text-field", "text"]) == 2
    said = capsys.readouterr().err.strip()
    assert len(said.splitlines()) == 1 and 'text_field: "raw_content" -> "text"' in said, said
    # the same file tokenized without the flag read nothing: said, with the flag to use, not exit 0
    capsys.readouterr()
    assert main(["tokenize", str(rp), "--tokenizer", str(tok), "-o", str(tmp_path / "u"),
                 "--workers", "1"]) == 1
    said = capsys.readouterr().err
    assert "no document could be read" in said and "missing text field 'text'" in said, said
    assert "--text-field" in said, said
    assert main(["tokenizer", "train", str(rp), "-o", str(tmp_path / "tok2.json"), "--vocab-size",
                 "300"]) == 2
    said = capsys.readouterr().err  # the reason, not only "5 records skipped"
    assert "missing text field 'text'" in said and "--text-field" in said, said
    (tmp_path / "cfg").mkdir()  # nothing readable: said as tokenize says it, not "0 records skipped"
    assert main(["tokenizer", "train", str(tmp_path / "cfg"), "-o", str(tmp_path / "tok3.json"),
                 "--vocab-size", "300"]) == 2
    assert "no input files in" in capsys.readouterr().err
    assert main(["tokenize", str(tmp_path / "cfg"), "--tokenizer", str(tok), "-o", str(tmp_path / "w")]) == 2
    assert f"no input files in {tmp_path / 'cfg'}\n" in capsys.readouterr().err  # not a Python list
    assert main(["curate", str(tmp_path / "cfg"), "-o", str(tmp_path / "x")]) == 2
    assert f"no input files found in {tmp_path / 'cfg'}\n" in capsys.readouterr().err


# --------------------------------------------------------------------------- ids and text values


def test_ids_from_pandas_float_columns_missing_and_repeated(tmp_path):
    # pandas turns an integer column with a gap into float64: to_json writes 1.0, to_parquet a
    # double. The ids are still 1 and 2 (not a derived id that changes with the row's position).
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"id": [1, 2, None, 2], "text": ["one", "two", "three", "two again"]})
    df.to_json(tmp_path / "f.jsonl", orient="records", lines=True)
    df.to_parquet(tmp_path / "f.parquet")
    for name in ("f.jsonl", "f.parquet"):
        docs, errors = _read(tmp_path / name)
        assert errors == [] and [d.text for d in docs] == list(df["text"]), name
        ids = [d.id for d in docs]
        # the missing id is derived from the file and position (stable across reruns); a repeated
        # id is kept as written, as datatrove keeps it (dedup works by position, not by id)
        assert ids[:2] == ["1", "2"] and ids[3] == "2" and len(ids[2]) == 16, (name, ids)
        assert [d.id for d in _read(tmp_path / name)[0]] == ids


def test_text_values_that_are_not_strings_and_nul_bytes(tmp_path):
    p = tmp_path / "t.jsonl"
    rows = [{"id": "a", "text": None}, {"id": "b", "text": 3}, {"id": "c", "text": ["x"]},
            {"id": "d", "text": "nul\u0000inside"}, {"id": "e"}]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    docs, errors = _read(p)
    assert [(d.id, d.text) for d in docs] == [("d", "nul\x00inside")]  # NUL is a character: kept as is
    assert [(e[1], e[2]) for e in errors] == [("line 1", "missing text field 'text'"),
                                              ("line 2", "text field 'text' is int, not a string"),
                                              ("line 3", "text field 'text' is list, not a string"),
                                              ("line 5", "missing text field 'text'; its fields: 'id'")]


DATATROVE_READ = """
import json, sys
from datatrove.pipeline.readers import JsonlReader
print(json.dumps([[d.id, d.text, d.metadata] for d in JsonlReader(sys.argv[1])()]))
"""

# Top-level fields as FineWeb (Parquet columns), Dolma (JSON lines beside a `metadata` object) and
# a `datasets` Arrow shard carry them: every field that is not text, id, url or metadata.
FINEWEB = [{"text": f"fineweb page {i} about tides", "id": f"<urn:uuid:{i}>", "dump": "CC-MAIN-2024-10",
            "url": f"http://fw.org/{i}", "date": "2024-02-21T07:13:02Z", "language": "en",
            "language_score": 0.9 + i / 100, "token_count": 100 + i} for i in range(3)]
DOLMA = [{"text": f"dolma doc {i} on glaciers", "id": f"d{i}", "source": "common-crawl",
          "added": "2023-05-30", "created": "2019-01-01", "metadata": {"url": f"http://dl.org/{i}"}}
         for i in range(2)]
ARROWED = [{"text": f"arrow row {i} on moraines", "id": f"a{i}", "lang": "en", "n_words": [4, i],
            "extra": {"k": i}} for i in range(2)]


def _write_top_level_inputs(folder: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(FINEWEB), folder / "fineweb.parquet")
    with gzip.open(folder / "dolma.jsonl.gz", "wt") as f:
        f.writelines(json.dumps(r) + "\n" for r in DOLMA)
    table = pa.Table.from_pylist(ARROWED)
    with pa.OSFile(str(folder / "shard.arrow"), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)


def _expected_metadata(rec: dict) -> dict:
    """What datatrove's own adapter makes of a record: metadata object, then every other field
    except text and id (url and all)."""
    rest = {k: v for k, v in rec.items() if k not in ("text", "id", "metadata")}
    return {**rec.get("metadata", {}), **rest}


def test_datatrove_round_trip_through_dedup(tmp_path):
    # datatrove's Parquet -> `pretrain dedup` -> our .jsonl.zst -> datatrove's JsonlReader: the same
    # documents, ids, urls and metadata (datatrove merges our metadata and top-level url into its own).
    from pretrain.cli import main

    _peer(DATATROVE_WRITE, str(tmp_path / "dt"), json.dumps(RECORDS))
    if subprocess.run([str(PEERS_PY), "-c", "import zstandard"], capture_output=True).returncode:
        pytest.skip("datatrove reads .jsonl.zst through fsspec, which needs zstandard in .venv-peers")
    _write_top_level_inputs(tmp_path / "top")
    assert main(["dedup", str(tmp_path / "dt" / "parquet"), str(tmp_path / "top"), "-o",
                 str(tmp_path / "out"), "--workers", "1", "--quiet", "--set", "dedup.near=false"]) == 0
    read_back = json.loads(_peer(DATATROVE_READ, str(tmp_path / "out" / "data")).stdout)
    back = {i: (text, meta) for i, text, meta in read_back}
    for i, r in enumerate(RECORDS):
        text, meta = back[r["id"]]
        assert text == r["text"] and (meta["url"], meta["dump"]) == (r["url"], "CC-MAIN-2024-10")
        assert meta["language_score"] == 0.5 + i / 10
    for name, records in (("fineweb.parquet", FINEWEB), ("dolma.jsonl.gz", DOLMA), ("shard.arrow", ARROWED)):
        for r in records:
            text, meta = back[r["id"]]
            want = _expected_metadata(r)
            # our top-level `source` is the input file, and datatrove's rule (a top-level field wins)
            # puts it over Dolma's `source`; that one is in our metadata, read back below
            want["source"] = name
            assert text == r["text"] and {k: meta.get(k) for k in want} == want, (name, meta)
    ours = [d for f in list_inputs([str(tmp_path / "out")]) for d in _read(f)[0]]
    assert {d.id: d.metadata["source"] for d in ours if d.id in ("d0", "d1")} == {"d0": "common-crawl",
                                                                               "d1": "common-crawl"}


def test_empty_outputs_of_datasets_are_one_error_each(tmp_path):
    datasets = pytest.importorskip("datasets")
    empty = datasets.Dataset.from_dict({"text": [], "id": []})
    empty.to_json(tmp_path / "e.jsonl")
    empty.to_parquet(tmp_path / "e.parquet")
    empty.save_to_disk(str(tmp_path / "saved"))
    for f in [tmp_path / "e.jsonl", tmp_path / "e.parquet", *sorted((tmp_path / "saved").glob("*.arrow"))]:
        docs, errors = _read(f)
        assert docs == [] and errors == [(str(f), None, "empty file")], f


@pytest.mark.parametrize("framing", ["file", "stream"])
def test_arrow_ipc_file_and_stream_with_compressed_buffers(tmp_path, framing):
    import pyarrow as pa

    table = pa.Table.from_pylist(RECORDS)
    p = tmp_path / f"{framing}.arrow"
    opts = pa.ipc.IpcWriteOptions(compression="zstd")
    new = pa.ipc.new_file if framing == "file" else pa.ipc.new_stream
    with pa.OSFile(str(p), "wb") as sink, new(sink, table.schema, options=opts) as w:
        for batch in table.to_batches(max_chunksize=2):
            w.write_batch(batch)
    docs, errors = _read(p)
    assert errors == [] and _texts_ids(docs) == TRUTH and [d.url for d in docs] == [r["url"] for r in RECORDS]


def test_arrow_columns_not_read_are_not_decoded(tmp_path):
    # A column JSON cannot hold (images, audio: binary) is not read into the metadata. A string
    # column (read into it) holding invalid UTF-8 is left out of its batch and counted; the
    # documents come whole otherwise, and are not reported as bad records.
    from collections import Counter

    import numpy as np
    import pyarrow as pa

    broken = pa.array([b"\x89PNG\x00" * 3] * 5, pa.binary())
    bad = pa.Array.from_buffers(pa.string(), 5, [None, pa.py_buffer(np.arange(6, dtype=np.int32) * 2),
                                                 pa.py_buffer(b"\xff\xfe" * 5)])
    with pytest.raises(pa.ArrowInvalid):
        bad.validate(full=True)
    table = pa.Table.from_pylist(RECORDS).append_column("image", broken)
    p = tmp_path / "wide.arrow"
    with pa.OSFile(str(p), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    docs, errors = _read(p)
    assert errors == [] and _texts_ids(docs) == TRUTH and all("image" not in d.metadata for d in docs)
    table = table.append_column("blob", bad)
    with pa.OSFile(str(p), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    errors, stats = [], Counter()
    docs = list(read_documents(p, ReaderConfig(), lambda *e: errors.append(e), stats=stats))
    assert errors == [] and _texts_ids(docs) == TRUTH and all("blob" not in d.metadata for d in docs)
    assert stats["skipped.unreadable_column"] == 1


@pytest.mark.parametrize("framing", ["file", "stream"])
def test_arrow_compressed_batch_over_the_bound_is_not_decompressed(tmp_path, framing):
    # A zstd batch inflating to 4 MB (from a few KB) against max_row_group_bytes=1 MiB: its size is
    # read from the buffers' own length prefixes, before anything is inflated. A file steps over it
    # (random access); a stream cannot reach the batches after it without inflating it.
    import pyarrow as pa

    rows = [RECORDS[0], {"id": "bomb", "text": "a" * (4 << 20), "url": "u"}, RECORDS[1]]
    p = tmp_path / f"{framing}.arrow"
    new = pa.ipc.new_file if framing == "file" else pa.ipc.new_stream
    table = pa.Table.from_pylist(rows)
    with pa.OSFile(str(p), "wb") as sink, new(sink, table.schema,
                                              options=pa.ipc.IpcWriteOptions(compression="zstd")) as w:
        for batch in table.to_batches(max_chunksize=1):
            w.write_batch(batch)
    assert p.stat().st_size < 100_000
    docs, errors = _read(p, ReaderConfig(max_row_group_bytes=1 << 20))
    assert [d.id for d in docs] == (["r0", "r1"] if framing == "file" else ["r0"])
    assert [(e[1], "over max_row_group_bytes" in e[2]) for e in errors] == [("record batch 1", True)]
    docs, errors = _read(p)  # the default bound (1 GiB) reads it
    assert errors == [] and [d.id for d in docs] == ["r0", "bomb", "r1"]


def test_json_array_with_malformed_elements_keeps_the_others(tmp_path):
    """One bad element of a JSON array (a trailing comma, a bare word, a 5,000-digit number, 100,000
    levels of nesting) lost every element after it ("the rest of the file is skipped"). Now each is
    skipped and counted with its index, the rest kept. The truth: json.loads of each element alone."""
    elements = ['{"id": "a", "text": "first"}', '{"id": "b", "text": "trailing comma",}',
                '{"id": "c", "text": "third"}', '{"id": "d", "text": nope}',
                '{"id": "e", "n": ' + "9" * 5000 + "}",
                '{"id": "f", "x": ' + "[" * 100_000 + "]" * 100_000 + "}", '{"id": "g", "text": "last"}']
    p = tmp_path / "bad.json"
    p.write_text("[" + ", ".join(elements) + "]")

    def loads(e):
        try:
            return json.loads(e)
        except (ValueError, RecursionError):
            return None

    truth = [(i, loads(e)) for i, e in enumerate(elements)]
    docs, errors = _read(p)
    assert [d.id for d in docs] == [o["id"] for _, o in truth if o is not None] == ["a", "c", "g"]
    bad = [i for i, o in truth if o is None]
    assert [e[1] for e in errors] == [f"element {i}" for i in bad]
    assert all(e[2].startswith(f"malformed JSON in element {i}: ")
               and e[2].endswith("that element is skipped") for i, e in zip(bad, errors))
    p.write_text('[{"id": "a", "text": "x"}, {"id": "b", "text": "y"]]  , {"id": "c", "text": "z"}]')
    docs, errors = _read(p)  # brackets that do not balance: where the next element starts is unknown
    assert [d.id for d in docs] == ["a"] and len(errors) == 1 and errors[0][1] == "element 1"
    assert errors[0][2].endswith("the rest of the file is skipped")


def test_a_folder_of_hidden_files_only_says_so(tmp_path, capsys):
    # a killed Spark job's folder: its only parts under _temporary/ said "no input files found"
    (tmp_path / "_temporary" / "0").mkdir(parents=True)
    (tmp_path / "_temporary" / "0" / "part-0.jsonl").write_text(json.dumps(RECORDS[0]) + "\n")
    (tmp_path / "_SUCCESS").write_text("")
    assert list_inputs([str(tmp_path)]) == []
    said = capsys.readouterr().err
    assert said == (f"pretrain: {tmp_path} holds only hidden files (1 file of a type read, e.g. "
                    "_temporary/0/part-0.jsonl): names starting with . or _ are left out (a killed Spark "
                    "task's _temporary/, macOS ._ files); name a file to read it\n"), said


def test_a_folder_read_in_part_names_the_types_it_left_out(tmp_path, capsys):
    # a folder of .jsonl records and .pdf files read the .jsonl alone, without a word (session 13)
    (tmp_path / "part.jsonl").write_text(json.dumps(RECORDS[0]) + "\n")
    for i in range(3):
        (tmp_path / f"scan{i}.pdf").write_bytes(b"%PDF-1.4")
    (tmp_path / "README.md").write_text("# about\n")
    (tmp_path / "LICENSE").write_text("CC-BY\n")
    assert [f.name for f in list_inputs([str(tmp_path)])] == ["part.jsonl"]
    said = capsys.readouterr().err
    assert f"{tmp_path}: 3 files of a type not read here left out (.pdf 3), 1 read" in said, said
    assert said.count("\n") == 1 and "README" not in said and ".md" not in said, said
    assert [f.name for f in list_inputs([str(tmp_path / "*")])] == ["part.jsonl"]  # a glob, the same
    said, glob = capsys.readouterr().err, str(tmp_path / "*")
    assert said == f"pretrain: {glob!r}: 3 files of a type not read here left out (.pdf 3), 1 read\n"


def test_a_licence_or_readme_read_as_a_document_is_named_and_exclude_leaves_it_out(tmp_path, capsys):
    # LICENSE.txt and README.txt in a data folder were read as documents without a word (session 14).
    # Named now, one line, and --exclude GLOB (a name, or a path below the folder with a /) leaves
    # them out, in a folder walk and a glob alike; a file named itself is read.
    (tmp_path / "sub").mkdir()
    for name in ("a.jsonl", "LICENSE.txt", "sub/README.txt", "sub/b.txt", "NOTES.txt"):
        (tmp_path / name).write_text(json.dumps(RECORDS[0]) + "\n")
    names = [f.relative_to(tmp_path).as_posix() for f in list_inputs([str(tmp_path)])]
    assert names == ["LICENSE.txt", "NOTES.txt", "a.jsonl", "sub/README.txt", "sub/b.txt"]
    said = capsys.readouterr().err
    assert said == (f"pretrain: {tmp_path}: 2 files read as documents look like a licence or readme, not "
                    "data (LICENSE.txt, sub/README.txt); --exclude 'LICENSE.txt' leaves one out\n"), said
    for exclude, left in ((("LICENSE*", "README.txt"), ["NOTES.txt", "a.jsonl", "sub/b.txt"]),
                          (("sub/*",), ["LICENSE.txt", "NOTES.txt", "a.jsonl"]),
                          (("**/*.txt",), ["LICENSE.txt", "NOTES.txt", "a.jsonl"]),  # a / : below the root
                          (("*.txt",), ["a.jsonl"])):
        for given in (str(tmp_path), str(tmp_path / "**" / "*")):
            got = [f.relative_to(tmp_path).as_posix() for f in list_inputs([given], exclude=exclude)]
            assert got == left, (exclude, given)
            said = capsys.readouterr().err
            assert ("not data" in said) == ("LICENSE.txt" in left), (exclude, said)
    assert list_inputs([str(tmp_path / "LICENSE.txt")], exclude=("LICENSE*",)) == [tmp_path / "LICENSE.txt"]
    assert capsys.readouterr().err == ""  # named itself: meant


def test_gzipped_html_pages_read_as_their_plain_html(tmp_path, shared_data):
    """The article-extraction benchmark ships its 181 real pages as .html.gz: each reads as the
    same page inflated by Python's gzip into an .html file; a page inflating past max_record_bytes
    or a truncated one is a bad record naming the file."""
    folder = shared_data / "html" / "scrapinghub-aeb" / "html"
    pages = sorted(folder.glob("*.html.gz"))[:5]
    assert [f.name for f in list_inputs([str(folder)])][:5] == [p.name for p in pages]
    for page in pages:
        plain = tmp_path / page.name.removesuffix(".gz")
        plain.write_bytes(gzip.decompress(page.read_bytes()))
        (gz_doc,), errors = _read(page)
        (doc,), _ = _read(plain)
        assert not errors and gz_doc.cache["html"] and gz_doc.text == doc.text
        assert gz_doc.source == page.name  # the id is of the file as named: stable_id(source, 0)
    big = tmp_path / "big.html.gz"
    big.write_bytes(gzip.compress(b"<p>spam</p>" * 100_000))
    docs, errors = _read(big, ReaderConfig(max_record_bytes=1_000_000))
    assert docs == [] and errors == [(str(big), None, "file inflates past max_record_bytes=1000000")]
    cut = tmp_path / "cut.html.gz"
    cut.write_bytes(pages[0].read_bytes()[:-40])
    docs, errors = _read(cut)
    assert docs == [] and errors[0][0] == str(cut) and errors[0][2].startswith("unreadable gzip"), errors


def test_a_bucket_prefix_read_in_part_names_the_types_it_left_out(s3_here, capsys):  # noqa: F811
    from pretrain.curate.job import list_any_inputs

    bucket = s3_here.new_bucket("mixed")
    fs = s3_here.filesystem()
    fs.pipe({f"{bucket}/in/part.jsonl": (json.dumps(RECORDS[0]) + "\n").encode(),
             f"{bucket}/in/scan0.pdf": b"%PDF-1.4", f"{bucket}/in/sub/scan1.pdf": b"%PDF-1.4",
             f"{bucket}/in/README.md": b"# about", f"{bucket}/pdfs/scan.pdf": b"%PDF-1.4"})
    assert [src for _, src in list_any_inputs([f"s3://{bucket}/in/"])] == ["part.jsonl"]
    said = capsys.readouterr().err
    assert said == f"pretrain: s3://{bucket}/in: 2 files of a type not read here left out (.pdf 2), 1 read\n"
    assert list_any_inputs([f"s3://{bucket}/pdfs"]) == []
    assert f"s3://{bucket}/pdfs holds 1 file, none of a type read here (.pdf 1)" in capsys.readouterr().err
    with pytest.raises(UserError, match=f"not found: s3://{bucket}/none \\(no object there nor under it"):
        list_any_inputs([f"s3://{bucket}/none"])
    # a licence in a bucket prefix: named, and --exclude leaves it out as in a folder
    fs.pipe({f"{bucket}/in/LICENSE.txt": b"CC-BY"})
    assert [src for _, src in list_any_inputs([f"s3://{bucket}/in/"])] == ["LICENSE.txt", "part.jsonl"]
    assert "(LICENSE.txt); --exclude 'LICENSE.txt' leaves it out" in capsys.readouterr().err
    kept = list_any_inputs([f"s3://{bucket}/in/"], exclude=("LICENSE*",))
    assert [src for _, src in kept] == ["part.jsonl"]
    assert "LICENSE" not in capsys.readouterr().err
