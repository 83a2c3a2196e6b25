"""One hostile record must not stop, stall or blow up a reader: the good records around it survive.

Every file here holds a good record, the attack, and another good record; it is read in a child
process with a memory limit (RLIMIT_AS) and a time limit (tests/hostile.py). Each attack was a crash,
a stall or a multi-GB peak before (issue 20); the regression ones (bombs) held and must keep holding.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from hostile import read_in_child

from pretrain.curate.classifier import NaiveBayes
from pretrain.errors import UserError

GOOD_BEFORE = json.dumps({"id": "before", "text": "a good record before"}).encode() + b"\n"
GOOD_AFTER = json.dumps({"id": "after", "text": "a good record after"}).encode() + b"\n"


def _errors_mentioning(result: dict, words: str) -> list:
    return [e for e in result["errors"] if words in e[1]]


@pytest.mark.parametrize("attack,reason", [
    (b'{"text": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n", "nested too deeply"),
    (b'{"text": "x", "n": ' + b"9" * 100_000 + b"}\n", "digits"),  # int() past Python's digit limit
])
def test_jsonl_nested_or_huge_number_skips_one_line(tmp_path, attack, reason):
    p = tmp_path / "deep.jsonl"
    p.write_bytes(GOOD_BEFORE + attack + GOOD_AFTER)
    r = read_in_child(p, timeout=30, mem_mb=1024)
    assert r["ids"] == ["before", "after"]
    assert [e[0] for e in _errors_mentioning(r, reason)] == ["line 2"]


def test_jsonl_lone_surrogate_skips_one_line_and_the_job_finishes(tmp_path):
    """`"\\ud800"` parses to a str no UTF-8 writer can encode: it stopped `pretrain dedup` (and
    tokenizer train, tokenize) with UnicodeEncodeError. An escaped emoji (a pair) is text and stays."""
    import subprocess
    import sys

    from hostile import SRC

    emoji = b'{"id": "emoji", "text": "a pair \\ud83d\\ude00 is one character"}\n'
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_bytes(
        GOOD_BEFORE + b'{"id": "lone", "text": "half \\ud800 of a pair"}\n' + emoji + GOOD_AFTER)
    r = subprocess.run([sys.executable, "-m", "pretrain", "dedup", "in", "-o", "out", "--workers", "1"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": SRC})
    assert r.returncode == 0, r.stderr[-1500:]
    assert "line 2: lone surrogate \\ud800" in r.stdout + r.stderr
    kept = [json.loads(x) for f in sorted((tmp_path / "out" / "data").glob("*.jsonl.zst"))
            for x in zstandard.ZstdDecompressor().decompressobj().decompress(f.read_bytes()).splitlines()]
    assert sorted(d["id"] for d in kept) == ["after", "before", "emoji"]
    assert "\U0001f600" in next(d["text"] for d in kept if d["id"] == "emoji")


PUNY = ("a\u00fc" * 2000).encode("punycode")  # valid punycode: decoding it is quadratic in its length


@pytest.mark.parametrize("charset,body", [("uu", b"\\ud800 end"), ("zlib", b"\\ud800 end"),
                                          ("raw_unicode_escape", b"\\ud800 end"), ("punycode", PUNY)])
def test_a_page_naming_a_codec_no_browser_has_is_decoded_as_text(tmp_path, charset, body):
    """`<meta charset>` is the page's word: "uu" or "zlib" raised LookupError out of the reader (one
    page stopped `pretrain curate`), "raw_unicode_escape" made a lone surrogate that no writer can
    encode, and "punycode" decodes in quadratic time (a 5 MB page: about half an hour). Only web
    encodings are honoured; the page's bytes are decoded as detected instead."""
    from pretrain.curate.readers import ReaderConfig, read_documents

    page = tmp_path / "page.html"
    head = f'<html><head><meta charset="{charset}"></head><body><p>'.encode()
    page.write_bytes(head + body + b"</p></body></html>")
    errors = []
    docs = list(read_documents(page, ReaderConfig(), lambda *e: errors.append(e)))
    assert len(docs) == 1 and not errors
    assert body.decode("ascii") in docs[0].text  # the bytes as they are, not run through the codec
    docs[0].text.encode("utf-8")  # no lone surrogate
    page.write_bytes(b'<meta charset="windows-1252"><p>caf\xe9</p>')  # a web encoding still counts
    assert "caf\u00e9" in next(read_documents(page, ReaderConfig())).text


def test_classifier_model_nested_deep_is_a_user_error(tmp_path):
    p = tmp_path / "model.json"
    p.write_text('{"format": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(UserError, match="nested too deeply"):
        NaiveBayes.load(p)
    p.write_text('{"format": "x", "good": {"w": ' + "9" * 5000 + "}}")
    with pytest.raises(UserError, match="not a classifier model"):
        NaiveBayes.load(p)


def _zst_with_big_line(path: Path, mib: int) -> None:
    """good, then one line of `mib` MiB of 'a' (compresses to a few KB), then good."""
    c = zstandard.ZstdCompressor(level=3).compressobj()
    parts = [c.compress(GOOD_BEFORE + b'{"text": "')]
    block = b"a" * (1 << 20)
    parts += [c.compress(block) for _ in range(mib)]
    parts += [c.compress(b'"}\n' + GOOD_AFTER), c.flush()]
    path.write_bytes(b"".join(parts))


def test_zstd_reading_is_linear(tmp_path):
    """A 9 KB .jsonl.zst expanding to 256 MiB took 146 s (the pending buffer was copied on each read)."""
    p = tmp_path / "big.jsonl.zst"
    _zst_with_big_line(p, 256)
    assert p.stat().st_size < 64_000
    r = read_in_child(p, timeout=40, mem_mb=1024, max_ratio=0)
    assert r["ids"] == ["before", "after"] and r["seconds"] < 20
    assert r["peak_mb"] < 160  # 4 KB input pieces let one call inflate 128 MiB: 307 MB
    assert [e[0] for e in _errors_mentioning(r, "max_record_bytes")] == ["line 2"]


def test_zstd_bomb_stops_at_the_ratio_bound(tmp_path):
    p = tmp_path / "bomb.jsonl.zst"
    _zst_with_big_line(p, 256)
    r = read_in_child(p, timeout=30, mem_mb=1024)
    assert r["ids"] == ["before"]  # the rest of a bomb is not read
    assert _errors_mentioning(r, "max_ratio=1000") and r["seconds"] < 5


def test_gzip_bomb_stops_at_max_file_bytes(tmp_path):
    """Held before issue 20 (regression): a gzip of 200 MiB of zeros in one line, bounded by bytes."""
    p = tmp_path / "bomb.jsonl.gz"
    with gzip.open(p, "wb", compresslevel=9) as f:
        f.write(GOOD_BEFORE + b'{"text": "')
        for _ in range(200):
            f.write(b"\0" * (1 << 20))
        f.write(b'"}\n' + GOOD_AFTER)
    r = read_in_child(p, timeout=30, mem_mb=1024, max_file_bytes=64 << 20, max_ratio=0)
    assert r["ids"] == ["before"]
    assert _errors_mentioning(r, "max_file_bytes=67108864")


CELL_MB = 64


def _huge_parquet(path: Path, **write) -> None:
    big = "a" * (CELL_MB << 20)
    table = pa.table({"id": ["before", "huge", "after"], "text": ["a good record", big, "another good one"]})
    pq.write_table(table, path, compression="zstd", **write)


def test_parquet_huge_cell_is_measured_before_it_becomes_a_str(tmp_path):
    """A 64 MiB cell between good rows of one row group: skipped, the neighbours kept, memory bounded.

    Before: the whole row group became Python objects, then the text was encoded again to measure it
    (5.3 GB for a 1 GiB cell); now its length is taken in Arrow, on the decoded page only.
    """
    p = tmp_path / "huge.parquet"
    _huge_parquet(p)
    assert p.stat().st_size < 100_000
    r = read_in_child(p, timeout=60, mem_mb=4096, max_record_bytes=1 << 20)  # Arrow reserves ~1.5 GB
    assert r["ids"] == ["before", "after"]
    assert [e[0] for e in _errors_mentioning(r, "max_record_bytes")] == ["row 1"]
    assert r["peak_mb"] < 150 + 3.5 * CELL_MB  # the interpreter, the compressed and decoded page, the array


@pytest.mark.parametrize("column", ["text", "id"])
def test_parquet_cell_of_invalid_utf8_skips_its_row_not_its_row_group(tmp_path, column):
    """Parquet writers need not check UTF-8 (pyarrow's from_buffers does not): one such cell made
    `to_pylist` raise and the whole row group (here four rows, in practice up to a million) was lost."""
    cells = {"id": [b"before", b"cesu", b"byte", b"after"],
             "text": [b"a good record", b"a surrogate \xed\xa0\x80 as CESU-8", b"a \xff byte", b"another"]}
    cells[column][1:3] = [b"\xed\xa0\x80", b"\xff"] if column == "id" else cells[column][1:3]
    arrays = {}
    for name, values in cells.items():
        b = pa.array(values, pa.binary())
        arrays[name] = pa.Array.from_buffers(pa.string(), len(b), b.buffers())  # no UTF-8 check
    p = tmp_path / "bad.parquet"
    pq.write_table(pa.table(arrays), p)
    from pretrain.curate.readers import ReaderConfig, read_documents

    errors = []
    docs = read_documents(p, ReaderConfig(), lambda path, where, why: errors.append((where, why)))
    assert [d.id for d in docs] == ["before", "after"]  # in-process: nothing here is big
    assert [w for w, why in errors if "invalid UTF-8" in why] == ["row 1", "row 2"]


def test_parquet_bad_utf8_in_a_metadata_column_costs_that_field_not_the_row(tmp_path):
    """A column read only into the metadata (FineWeb's `dump`) with an invalid UTF-8 cell: the row
    keeps its text and loses that field; the same cell in the id column costs the row."""
    from pretrain.curate.readers import ReaderConfig, read_documents

    def column(values):
        b = pa.array(values, pa.binary())
        return pa.Array.from_buffers(pa.string(), len(b), b.buffers())  # no UTF-8 check

    p = tmp_path / "bad_extra.parquet"
    pq.write_table(pa.table({"id": column([b"a", b"b", b"c"]), "text": column([b"x", b"y", b"z"]),
                             "dump": column([b"CC", b"\xff", b"CC"])}), p)
    errors = []
    docs = list(read_documents(p, ReaderConfig(), lambda path, where, why: errors.append((where, why))))
    assert errors == [] and [(d.id, d.text, d.metadata) for d in docs] == [
        ("a", "x", {"dump": "CC"}), ("b", "y", {}), ("c", "z", {"dump": "CC"})]


def test_parquet_read_by_pages_measures_the_other_columns_too(tmp_path):
    """A row group whose text column is read page by page (a page over max_record_bytes): the id,
    url and metadata cells and the other columns (read into the metadata) count against the bound
    as they do through pyarrow; before, a 5 KB url or metadata passed a 1,000-byte bound there."""
    from pretrain.curate.readers import ReaderConfig, read_documents

    rows = [{"id": "before", "text": "good", "url": "u", "metadata": {"k": "v"}, "dump": "d"},
            {"id": "big text", "text": "t" * 5000, "url": "u", "metadata": {"k": "v"}, "dump": "d"},
            {"id": "big url", "text": "good", "url": "u" * 5000, "metadata": {"k": "v"}, "dump": "d"},
            {"id": "big meta", "text": "good", "url": "u", "metadata": {"k": "v" * 5000}, "dump": "d"},
            {"id": "big dump", "text": "good", "url": "u", "metadata": {"k": "v"}, "dump": "d" * 5000},
            {"id": "after", "text": "good", "url": "u", "metadata": {"k": "v"}, "dump": "d"}]
    p = tmp_path / "paged.parquet"
    pq.write_table(pa.Table.from_pylist(rows), p)
    errors = []
    docs = list(read_documents(p, ReaderConfig(max_record_bytes=1000),
                               lambda path, where, why: errors.append((where, why))))
    assert [d.id for d in docs] == ["before", "after"], errors
    assert [w for w, why in errors if "max_record_bytes" in why] == ["row 1", "row 2", "row 3", "row 4"]


def test_parquet_row_group_over_the_footer_bound_is_not_decoded(tmp_path):
    p = tmp_path / "huge.parquet"
    _huge_parquet(p, row_group_size=1)  # before | huge | after, one row group each
    r = read_in_child(p, timeout=60, mem_mb=4096, max_row_group_bytes=16 << 20)
    assert r["ids"] == ["before", "after"]
    assert [e[0] for e in _errors_mentioning(r, "max_row_group_bytes")] == ["row group 1"]
    assert r["peak_mb"] < 150 + CELL_MB / 2  # the cell was never decoded


def test_parquet_big_row_group_is_read_in_small_batches(tmp_path):
    """300k tiny rows in one row group: Python objects for 64 rows at a time, not for all of them;
    a group over max_row_group_bytes whose rows are all small is read, not skipped."""
    n = 300_000
    table = pa.table({"id": [f"r{i}" for i in range(n)], "text": ["tiny doc"] * n})
    p = tmp_path / "rows.parquet"
    pq.write_table(table, p, row_group_size=n)
    del table
    r = read_in_child(p, timeout=60, mem_mb=4096, max_row_group_bytes=1 << 20)
    assert r["n"] == n and r["ids"][0] == "r0" and r["last"] == f"r{n - 1}" and not r["errors"]
    # what reading added above the imports: ~72 MB in batches; the whole group through to_pylist ~140
    assert r["peak_mb"] - r["base_mb"] < 110


def _page(body: str) -> str:
    return f"<html><body><article><h1>Title</h1><p>{body}</p></article></body></html>"


def test_deeply_nested_page_is_extracted_in_linear_time(tmp_path):
    """100,000 nested <div> (1.1 MB, under the size cap): resiliparse's main-content pass never
    ended in 300 s; the depth check sends it to whole-page extraction. The neighbours keep their text."""
    deep = "<html><body><p>deep page</p>" + "<div>" * 100_000 + "x" + "</div>" * 100_000 + "</body></html>"
    p = tmp_path / "pages.jsonl"
    p.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in (
        ("before", _page("A good page before the deep one, with enough words to be its main text.")),
        ("deep", deep),
        ("after", _page("A good page after the deep one, with enough words to be its main text.")))))
    r = read_in_child(p, timeout=30, mem_mb=2048, extract={"backend": "resiliparse"})
    assert r["ids"] == ["before", "deep", "after"] and r["seconds"] < 10


def _warc_records(lie: int) -> list[bytes]:
    from test_warc_bad import page, record

    return [record(0, page("a")), record(1, page("b"), length=lie), record(2, page("c")),
            record(3, page("d"))]


@pytest.mark.parametrize("layout", ["gzip", "plain", "whole"])
@pytest.mark.parametrize("gaps", ["uncompressed", "all"])
def test_warc_content_length_that_overruns_is_resynchronised(tmp_path, layout, gaps):
    """Record 1 claims 4 GiB: the parser swallowed records 2 and 3 without a word; now it restarts
    there (gzip per record, plain, and one gzip stream for the whole file), and the record is
    reported once, not also as `truncated record` (one bad record counted twice in stats.json)."""
    recs = _warc_records(1 << 32)
    p = tmp_path / ("w.warc" if layout == "plain" else "w.warc.gz")
    data = {"gzip": b"".join(gzip.compress(r, mtime=0) for r in recs), "plain": b"".join(recs),
            "whole": gzip.compress(b"".join(recs), mtime=0)}[layout]
    p.write_bytes(data)
    r = read_in_child(p, timeout=30, mem_mb=2048, warc_check_gaps=gaps)
    assert [int(i.strip("<>")[-12:]) for i in r["ids"]] == [0, 2, 3]
    (resync,) = _errors_mentioning(r, "resynchronised at the next record")
    assert "claimed Content-Length 4294967296 overruns" in resync[1]
    assert "bytes of this record skipped" in resync[1]
    # one lying record, one report: its payload also came out truncated, which said so a second time
    assert [e[0] for e in r["errors"]] == [resync[0]], r["errors"]


def test_warc_check_all_inflates_members_in_bounded_pieces(tmp_path):
    """With gaps="all" the claimed length was the inflation limit: a lie of 4 GiB before a 100 MiB
    member of zeros (100 KB on disk) inflated it whole. Now streamed: memory stays flat."""
    from test_warc_bad import record

    recs = _warc_records(1 << 32)
    bomb = gzip.compress(record(9, b"\0" * (100 << 20), ctype="application/octet-stream"), compresslevel=1)
    members = [gzip.compress(r, mtime=0) for r in recs]
    p = tmp_path / "bomb.warc.gz"
    p.write_bytes(members[0] + members[1] + bomb + members[2] + members[3])
    r = read_in_child(p, timeout=60, mem_mb=2048, warc_check_gaps="all")
    assert [int(i.strip("<>")[-12:]) for i in r["ids"]] == [0, 2, 3]
    assert r["peak_mb"] < 80  # inflating the member whole: over 130 MB


def test_content_encoding_bomb_is_skipped(tmp_path):
    """Held before issue 20 (regression): `Content-Encoding: gzip`, 250 KB inflating to 256 MiB."""
    from test_warc_bad import page, record

    z = zlib.compressobj(1, zlib.DEFLATED, 31)
    spaces = b" " * (1 << 20)
    body = z.compress(b"<html><body>") + b"".join(z.compress(spaces) for _ in range(256)) + z.flush()
    bomb = record(1, body, extra_http="Content-Encoding: gzip\r\n")
    recs = [record(0, page("a")), bomb, record(2, page("c"))]
    p = tmp_path / "ce.warc.gz"
    p.write_bytes(b"".join(gzip.compress(r, mtime=0) for r in recs))
    r = read_in_child(p, timeout=30, mem_mb=1024)
    assert [int(i.strip("<>")[-12:]) for i in r["ids"]] == [0, 2]
    assert _errors_mentioning(r, "larger than max_record_bytes after decompression")
    assert r["peak_mb"] < 200


def test_record_fields_cannot_reach_outside_the_output(tmp_path):
    """Held before issue 20 (regression): ids, urls and sources that look like paths stay data."""
    import subprocess
    import sys

    from hostile import SRC

    evil = tmp_path / "evil"
    records = [{"id": "../../evil/x", "url": "file:///etc/passwd", "text": "word " * 80},
               {"id": str(evil / "y"), "source": "../../evil", "text": "other " * 80},
               {"id": "ok", "text": "A normal document with enough words to pass the rules. " * 10}]
    inp = tmp_path / "in" / "a.jsonl"
    inp.parent.mkdir()
    inp.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "deep" / "er" / "out"
    r = subprocess.run([sys.executable, "-m", "pretrain", "curate", str(inp), "-o", str(out)],
                       capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": SRC})
    assert r.returncode == 0, r.stderr
    assert not evil.exists() and not (tmp_path / "deep" / "evil").exists()
    outside = {p for p in tmp_path.rglob("*") if not (p.is_relative_to(out) or p.is_relative_to(inp.parent))}
    assert outside == {tmp_path / "deep", tmp_path / "deep" / "er"}


def test_symlinks_out_of_an_input_folder_are_not_read(tmp_path, capsys):
    """A folder from someone else: `notes.txt -> ~/secret` must not put the secret in a corpus, and
    a symlink loop must not list one file forty times (glob's `**` follows symlinked folders)."""
    from pretrain.curate.readers import list_inputs

    secret = tmp_path / "home" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("the user's private key")
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "sub" / "good.jsonl").write_bytes(GOOD_BEFORE)
    (data / "sub" / "notes.txt").symlink_to(secret)
    (data / "sub" / "loop").symlink_to(data)
    (data / "same.jsonl").symlink_to(data / "sub" / "good.jsonl")  # inside: kept, once
    for inputs in ([str(data)], [f"{data}/**/*.jsonl", f"{data}/**/*.txt"]):
        assert list_inputs(inputs) == [data / "sub" / "good.jsonl"]  # once, by its own path
    assert "pretrain: skipped 1 file in" in capsys.readouterr().err  # was "1 file(s)"
    assert list_inputs([str(data / "sub" / "notes.txt")]) == [data / "sub" / "notes.txt"]  # named: read


@pytest.mark.parametrize("kind", ["parquet", "arrow"])
def test_thousands_of_columns_cost_each_schema_lookup_once(tmp_path, monkeypatch, kind):
    """A file of N metadata columns: 8,000 took 85 s to read (Parquet: the Arrow schema converted
    twice per column, a struct's leaves found by scanning every leaf, `list.count` per column;
    Arrow IPC: `in` a list per column). Counted, not timed: the schema conversions per file stay
    the same for 300 and 1,200 columns, and so do the scans of the list of columns read.
    Truth for the values: pyarrow's own `to_pylist` of the file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pretrain.curate.readers import ReaderConfig, read_documents

    conversions = {"schema_arrow": 0}
    real = pq.ParquetFile.schema_arrow

    def counted(self):
        conversions["schema_arrow"] += 1
        return real.fget(self)

    monkeypatch.setattr(pq.ParquetFile, "schema_arrow", property(counted))
    from pretrain.curate import parquet

    class Columns(list):  # the columns read: `name in` it scans the list
        def __contains__(self, name):
            conversions["scans"] += 1
            return super().__contains__(name)

    columns = parquet.read_columns
    monkeypatch.setattr(parquet, "read_columns", lambda *a: (Columns(columns(*a)[0]), columns(*a)[1]))
    seen = []
    for n in (300, 1200):
        cols = {"text": pa.array(["a b c"] * 3), "id": pa.array(["x", "y", "z"])}
        cols |= {f"c{j}": pa.array([f"v{j}-{r}" for r in range(3)]) for j in range(n)}
        cols["s"] = pa.array([{"k": "deep"}] * 3)  # a struct: its leaves are looked up by its name
        table, path = pa.table(cols), tmp_path / f"c{n}.{kind}"
        if kind == "parquet":
            pq.write_table(table, path)
        else:
            with pa.ipc.new_file(path, table.schema) as w:
                w.write_table(table)
        conversions.update(schema_arrow=0, scans=0)
        docs = list(read_documents(path, ReaderConfig(), lambda *a: pytest.fail(str(a))))
        rows = table.to_pylist()
        assert [d.id for d in docs] == ["x", "y", "z"]
        assert all(d.metadata == {k: v for k, v in r.items() if k not in ("text", "id")}
                   for d, r in zip(docs, rows))
        seen.append((conversions["schema_arrow"], conversions["scans"]))
    assert seen[0] == seen[1] and seen[0][0] <= 3 and seen[0][1] <= 10, seen
