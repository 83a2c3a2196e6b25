"""Readers for JSONL (.gz/.zst), Parquet, text and HTML files: documents out, bad records reported."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from pretrain.curate.document import stable_id
from pretrain.curate.readers import ReaderConfig, list_inputs, read_documents, source_name
from pretrain.errors import UserError


def _read(path: Path, cfg: ReaderConfig | None = None, **kw):
    errors: list[tuple[str, object, str]] = []
    docs = list(
        read_documents(path, cfg or ReaderConfig(), lambda p, r, why: errors.append((p, r, why)), **kw)
    )
    return docs, errors


RECORDS = [{"id": "a", "text": "first", "url": "http://x/1"}, {"text": "second"}, {"id": 7, "text": "third"}]


def _jsonl_bytes(records) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz", ".jsonl.zst"])
def test_jsonl_all_compressions_give_the_same_documents(tmp_path, suffix):
    raw = _jsonl_bytes(RECORDS)
    data = {".jsonl": raw, ".jsonl.gz": gzip.compress(raw), ".jsonl.zst": zstandard.compress(raw)}[suffix]
    p = tmp_path / f"part{suffix}"
    p.write_bytes(data)
    docs, errors = _read(p)
    assert errors == []
    assert [d.text for d in docs] == ["first", "second", "third"]
    # The record's id when it has one, else a hash of source and line number (1-based).
    assert [d.id for d in docs] == ["a", stable_id(p.name, 2), "7"]
    assert docs[0].url == "http://x/1" and docs[1].url is None
    assert {d.source for d in docs} == {p.name}


def test_jsonl_configurable_fields(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_bytes(_jsonl_bytes([{"doc_id": "z1", "content": "hello", "link": "https://e.org"}]))
    docs, errors = _read(p, ReaderConfig(text_field="content", id_field="doc_id", url_field="link"))
    assert errors == [] and (docs[0].id, docs[0].text, docs[0].url) == ("z1", "hello", "https://e.org")


def test_jsonl_bad_records_are_reported_with_line_numbers_and_reading_goes_on(tmp_path):
    p = tmp_path / "bad.jsonl"
    lines = [
        b'{"text": "ok one"}',
        b'{"text": "broken',  # malformed JSON
        b'{"text": "caf\xe9"}',  # invalid UTF-8 (latin-1 byte)
        b'{"body": "no text field"}',
        b"[1, 2, 3]",
        b"",
        b'{"text": "' + b"x" * 5000 + b'"}',  # over the size bound below
        b'{"text": 12}',
        b"\x00\x01\x02\xff\xfe garbage",
        b'{"text": "ok two"}',
    ]
    p.write_bytes(b"\n".join(lines) + b"\n")
    docs, errors = _read(p, ReaderConfig(max_record_bytes=1000))
    assert [d.text for d in docs] == ["ok one", "ok two"]
    by_line = {r: why for _, r, why in errors}
    assert set(by_line) == {"line 2", "line 3", "line 4", "line 5", "line 7", "line 8", "line 9"}
    assert "malformed JSON" in by_line["line 2"]
    assert "invalid UTF-8" in by_line["line 3"]
    assert "missing text field 'text'" in by_line["line 4"]
    assert "max_record_bytes" in by_line["line 7"]
    assert all(path == str(p) for path, _, _ in errors)


def test_truncated_gzip_and_zstd_keep_what_was_read(tmp_path):
    # ~1 MB: several compressed blocks, so the first half decodes to whole lines.
    raw = _jsonl_bytes([{"text": f"doc {i} " + "word " * 50} for i in range(4000)])
    for suffix, comp in ((".jsonl.gz", gzip.compress(raw)), (".jsonl.zst", zstandard.compress(raw))):
        p = tmp_path / f"t{suffix}"
        p.write_bytes(comp[: len(comp) // 2])
        docs, errors = _read(p)
        assert 0 < len(docs) < 4000, suffix
        assert len(errors) == 1 and "truncated" in errors[0][2], suffix


def test_decompression_is_bounded(tmp_path):
    p = tmp_path / "bomb.jsonl.gz"
    p.write_bytes(gzip.compress(_jsonl_bytes([{"text": "a" * 1000}] * 1000)))  # ~1 MB out of a few KB
    docs, errors = _read(p, ReaderConfig(max_file_bytes=100_000))
    assert len(docs) < 100 and "max_file_bytes" in errors[-1][2]


def test_empty_file_is_reported(tmp_path):
    for name in ("e.jsonl", "e.txt", "e.html"):
        (tmp_path / name).write_bytes(b"")
        docs, errors = _read(tmp_path / name)
        assert docs == [] and errors[0][2] == "empty file"


def test_parquet_streams_row_groups(tmp_path):
    p = tmp_path / "d.parquet"
    table = pa.table({"id": ["r0", None, "r2", "r3"], "text": ["a", "b", None, "d"], "other": [1, 2, 3, 4]})
    pq.write_table(table, p, row_group_size=2)
    assert pq.ParquetFile(p).num_row_groups == 2
    docs, errors = _read(p)
    assert [(d.id, d.text) for d in docs] == [("r0", "a"), (stable_id(p.name, 1), "b"), ("r3", "d")]
    assert [(r, why) for _, r, why in errors] == [("row 2", "missing text field 'text'")]


def test_parquet_without_text_column_and_corrupt_parquet(tmp_path):
    p = tmp_path / "n.parquet"
    pq.write_table(pa.table({"body": ["x"]}), p)
    assert "missing text column" in _read(p)[1][0][2]
    q = tmp_path / "corrupt.parquet"
    q.write_bytes(b"PAR1 this is not parquet at all")
    docs, errors = _read(q)
    assert docs == [] and "not a readable Parquet file" in errors[0][2]


def test_text_files(tmp_path):
    (tmp_path / "a.txt").write_text("one document\nover two lines\n", encoding="utf-8")
    docs, errors = _read(tmp_path / "a.txt")
    assert errors == [] and docs[0].text == "one document\nover two lines\n"
    assert docs[0].id == stable_id("a.txt", 0) and not docs[0].cache.get("html")
    (tmp_path / "b.txt").write_bytes("caf\u00e9".encode("latin-1"))
    assert "invalid UTF-8" in _read(tmp_path / "b.txt")[1][0][2]
    (tmp_path / "c.txt").write_bytes(bytes(range(256)) * 10)
    assert "binary" in _read(tmp_path / "c.txt")[1][0][2]
    (tmp_path / "d.txt").write_bytes(b"x" * 2000)
    assert "max_record_bytes" in _read(tmp_path / "d.txt", ReaderConfig(max_record_bytes=1000))[1][0][2]


def test_html_file_is_decoded_with_its_meta_charset(tmp_path):
    phrase = "Съешь же ещё этих мягких французских булок"
    page = f'<html><head><meta charset="windows-1251"></head><body><p>{phrase}</p></body></html>'
    (tmp_path / "p.html").write_bytes(page.encode("cp1251"))
    docs, errors = _read(tmp_path / "p.html")
    assert errors == [] and docs[0].cache["html"] is True and phrase in docs[0].text


def test_list_inputs(tmp_path):
    (tmp_path / "sub").mkdir()
    for name in ("b.jsonl", "a.txt", "sub/c.warc.gz", "sub/notes.md"):
        (tmp_path / name).write_bytes(b"x")
    got = list_inputs([str(tmp_path)])
    assert got == sorted([tmp_path / "a.txt", tmp_path / "b.jsonl", tmp_path / "sub" / "c.warc.gz"])
    assert list_inputs([str(tmp_path / "*.jsonl")]) == [tmp_path / "b.jsonl"]
    assert source_name(tmp_path / "sub" / "c.warc.gz", tmp_path) == "sub/c.warc.gz"
    with pytest.raises(UserError, match="not found"):
        list_inputs([str(tmp_path / "missing.jsonl")])
    with pytest.raises(UserError):
        list_inputs([str(tmp_path / "*.nothing")])
    with pytest.raises(UserError):
        list(read_documents(tmp_path / "missing.jsonl", ReaderConfig(), lambda *a: None))


def test_real_ccnet_jsonl(shared_data):
    p = shared_data / "warc" / "dolma" / "cc_en_head-0091.jsonl.gz"
    with gzip.open(p, "rt", encoding="utf-8") as f:
        truth = [json.loads(line) for line in f if line.strip()]
    docs, errors = _read(p, ReaderConfig(text_field="raw_content" if "raw_content" in truth[0] else "text"))
    assert errors == [] and len(docs) == len(truth) == 10
