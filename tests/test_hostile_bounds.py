"""Hostile sizes that were measured but unbounded (run-it-twice review, session 7): each bounded or
refused in one line, measured here by what is kept, what is said and the memory it costs.

Files are generated at a size that still shows the defect: a gzip member of N MiB of spaces is
built from one compressed MiB repeated (a full flush makes the pieces identical), so a 1 GiB record
costs a 1 MB file and no 1 GiB buffer.
"""

from __future__ import annotations

import gzip
import struct

import pytest
from hostile import read_in_child, spaces_member
from test_warc_bad import page, record

MiB = 1 << 20


def _big_record_head(n: int, mib: int) -> bytes:
    http = f"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {mib * MiB}\r\n\r\n".encode()
    return (f"WARC/1.0\r\nWARC-Type: response\r\n"
            f"WARC-Record-ID: <urn:uuid:00000000-0000-0000-0000-{n:012d}>\r\n"
            f"WARC-Target-URI: http://example.org/{n}\r\nContent-Type: application/http; msgtype=response\r\n"
            f"Content-Length: {len(http) + mib * MiB}\r\n\r\n").encode() + http


def _ids(r: dict) -> list[int]:
    return [int(i.strip("<>")[-12:]) for i in r["ids"]]


def test_warc_member_of_one_huge_record_is_not_inflated_to_reach_the_next(tmp_path):
    """A 1 GiB record alone in its gzip member (1 MB on disk) between two good ones: the parser
    inflated all of it to find the next record (4 GiB: 42 s), and the overrun check once more before
    it. Now at most max_record_bytes + 1 MiB of it is inflated and reading resumes at the next
    member, found in the compressed bytes: milliseconds, so the bound below has a wide margin."""
    good = [gzip.compress(record(i, page(str(i))), mtime=0) for i in (0, 2)]
    p = tmp_path / "big.warc.gz"
    p.write_bytes(good[0] + spaces_member(_big_record_head(1, 1024), 1024, b"\r\n\r\n") + good[1])
    assert p.stat().st_size < 1_200_000
    for gaps in ("uncompressed", "all"):
        r = read_in_child(p, timeout=120, mem_mb=1024, warc_check_gaps=gaps)
        assert _ids(r) == [0, 2]
        (err,) = r["errors"]  # one line for the record, no second one for the bytes passed over
        assert err[1].endswith("bytes is larger than max_record_bytes=8388608")
        assert r["seconds"] < 3  # inflating 1 GiB once takes 4 s here; what is left takes ~0.05 s
        assert r["peak_mb"] < 120


def _whole(mib: int) -> bytes:
    """good 0, a record of `mib` MiB, good 2: one gzip stream for the whole file."""
    return spaces_member(record(0, page("0")) + _big_record_head(1, mib), mib,
                              b"\r\n\r\n" + record(2, page("2")))


def test_warc_in_one_gzip_stream_stops_at_a_record_over_warc_max_skip_bytes(tmp_path):
    """In one gzip stream the records after a big one are reached only by inflating it: up to
    warc_max_skip_bytes that is done (the record skipped, the next read); past it the rest of the
    file is skipped in one line, after inflating at most max_record_bytes + 1 MiB of it."""
    p = tmp_path / "whole.warc.gz"
    p.write_bytes(_whole(64))
    r = read_in_child(p, timeout=60, mem_mb=1024)  # 64 MiB < the default 256 MiB: read through
    assert _ids(r) == [0, 2] and len(r["errors"]) == 1
    r = read_in_child(p, timeout=60, mem_mb=1024, warc_max_skip_bytes=32 * MiB)
    assert _ids(r) == [0]
    (stop,) = [e for e in r["errors"] if "warc_max_skip_bytes" in e[1]]
    assert stop[0] == "record <urn:uuid:00000000-0000-0000-0000-000000000001>"
    assert "the records after it are not read" in stop[1] and "warc_max_skip_bytes=33554432" in stop[1]


def _wide_parquet(path, n_cols: int, row_groups: int = 1) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    cols = {"id": [f"r{i}" for i in range(row_groups)], "text": [f"text {i}" for i in range(row_groups)]}
    cols.update({f"c{i}": pa.array([1] * row_groups, pa.int8()) for i in range(n_cols)})
    pq.write_table(pa.table(cols), path, row_group_size=1)


def test_parquet_footer_over_max_footer_bytes_is_refused_unread(tmp_path):
    """pyarrow parses a footer whole (every column of every row group) at ~16x its size: 20,000
    columns in a 3.7 MB footer took 60 MB before a row was read. Past max_footer_bytes, one line."""

    p = tmp_path / "wide.parquet"
    _wide_parquet(p, 2000)
    raw = p.read_bytes()
    footer = struct.unpack("<I", raw[-8:-4])[0]  # the format's own framing: length, "PAR1"
    assert raw[-4:] == b"PAR1" and footer > 300_000
    r = read_in_child(p, timeout=60, mem_mb=2048, max_footer_bytes=footer - 1)
    assert r["ids"] == [] and len(r["errors"]) == 1
    assert f"Parquet footer of {footer:,} bytes is over max_footer_bytes={footer - 1}" in r["errors"][0][1]
    r = read_in_child(p, timeout=60, mem_mb=2048, max_footer_bytes=footer)
    assert r["ids"] == ["r0"] and not r["errors"]


def test_parquet_of_many_columns_and_row_groups_reads_only_its_own_columns(tmp_path):
    """2,000 columns x 10 row groups: each row group's metadata is asked only for the columns read
    (it built 2,000 column objects per row group, twice); the rows are those pyarrow reads."""
    import pyarrow.parquet as pq

    p = tmp_path / "wide.parquet"
    _wide_parquet(p, 2000, row_groups=10)
    from pretrain.curate.readers import ReaderConfig, read_documents

    docs = list(read_documents(p, ReaderConfig()))
    truth = pq.read_table(p, columns=["id", "text"]).to_pylist()
    assert [(d.id, d.text) for d in docs] == [(t["id"], t["text"]) for t in truth]


def test_classifier_model_over_its_limit_or_not_a_file_is_refused_unread(tmp_path):
    """A model was parsed whole up to 2 GiB (~40 GB of Python objects at ~16x). Now a documented
    limit (classifier.max_model_bytes, 32 MiB) is checked before reading, and only a regular file
    is read: a FIFO named as the model blocked `pretrain curate` forever."""
    import os
    from collections import Counter

    import pytest

    from pretrain.curate.classifier import MAX_MODEL_BYTES, NaiveBayes
    from pretrain.errors import UserError

    assert MAX_MODEL_BYTES == 32 << 20
    p = tmp_path / "model.json"
    NaiveBayes(Counter({"good": 3, "words": 2}), Counter({"bad": 4})).save(p)
    size = p.stat().st_size
    assert NaiveBayes.load(p, limit=size).votes.keys() == {"good", "words", "bad"}
    with pytest.raises(UserError, match=f"{size:,} bytes is over the {size - 1:,} a classifier model"):
        NaiveBayes.load(p, limit=size - 1)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match="not a regular file"):
        NaiveBayes.load(fifo)  # returns at once: nothing opens the pipe


def _jsonl_with_long_line(path, mib: int, end: bytes) -> None:
    """good 0, a line of `mib` MiB of "a" inside a JSON string, then `end` (compressed, ~1000x)."""
    good = b'{"id": "g0", "text": "good"}\n'
    with gzip.open(path, "wb", compresslevel=9) if path.suffix == ".gz" else open(path, "wb") as f:
        f.write(good + b'{"id": "big", "text": "')
        for _ in range(mib):
            f.write(b"a" * MiB)
        f.write(end)


def test_jsonl_line_of_100_mib_without_a_newline_is_skipped_in_pieces(tmp_path):
    """Checked, already bounded: the line is read through max_record_bytes at a time and skipped."""
    p = tmp_path / "long.jsonl.gz"
    _jsonl_with_long_line(p, 100, b"")  # the file ends inside the line: no newline ever comes
    r = read_in_child(p, timeout=60, mem_mb=1024, max_ratio=0)
    assert r["ids"] == ["g0"]
    assert r["errors"] == [["line 2", "record larger than max_record_bytes=8388608"]]
    assert r["peak_mb"] - r["base_mb"] < 60  # a few 8 MiB pieces, never the line


def test_jsonl_bomb_inside_a_long_line_names_that_line(tmp_path):
    """A 1 GiB JSON string in a 1 MB .jsonl.zst: the ratio bound stops the file while the line is
    skipped; the error named the line after it ("line 3")."""
    import zstandard

    c = zstandard.ZstdCompressor(level=3).compressobj()
    parts = [c.compress(b'{"id": "g0", "text": "good"}\n{"id": "big", "text": "')]
    parts += [c.compress(b"a" * MiB) for _ in range(1024)]
    parts += [c.compress(b'"}\n{"id": "g2", "text": "good"}\n'), c.flush()]
    p = tmp_path / "bomb.jsonl.zst"
    p.write_bytes(b"".join(parts))
    r = read_in_child(p, timeout=60, mem_mb=1024)
    assert r["ids"] == ["g0"]
    (err,) = r["errors"]
    assert err[0] == "line 2" and "max_ratio=1000" in err[1]


def _pages(*pairs: tuple[int, str]) -> bytes:
    return b"".join(gzip.compress(record(n, page(title, f"The page about {title} and nothing else.")),
                                  mtime=0) for n, title in pairs)


def test_a_repeated_warc_record_id_stays_once_in_the_output_for_any_workers(tmp_path):
    """Two documents with one WARC-Record-ID (a record id repeated inside a file, and across files)
    were both written under that id: a join by id (scores, rejects) then met two documents. Now
    every copy after the first that stays is renamed ID#2, ID#3 in input order (none is dropped:
    another text under a reused id is another document); an exact copy is still a duplicate_text.
    Same bytes with 1 and 3 workers."""
    from pretrain.cli import main
    from pretrain.curate import io

    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "a.warc.gz").write_bytes(_pages((1, "rivers"), (2, "mountains"), (1, "forests")))
    (inp / "b.warc.gz").write_bytes(_pages((1, "deserts"), (3, "rivers")))  # 3 is 1's exact copy
    outs = []
    for workers in ("1", "3"):
        out = tmp_path / f"out{workers}"
        assert main(["dedup", str(inp), "-o", str(out), "--workers", workers, "--quiet"]) == 0
        outs.append(out)
    data = [[f.read_bytes() for f in sorted((o / "data").glob("*.jsonl.zst"))] for o in outs]
    assert data[0] == data[1]
    kept = [r for f in sorted((outs[0] / "data").glob("*.jsonl.zst")) for r in io.read_jsonl_zst(f)]
    uid = "<urn:uuid:00000000-0000-0000-0000-{:012d}>".format
    got = {r["id"]: next(t for t in ("rivers", "mountains", "forests", "deserts") if t in r["text"])
           for r in kept}
    assert len(got) == len(kept) == 4  # unique ids, every distinct text kept once
    assert got == {uid(1): "rivers", uid(2): "mountains", uid(1) + "#2": "forests", uid(1) + "#3": "deserts"}
    rejects = [r for f in sorted((outs[0] / "rejects").glob("*.jsonl.zst")) for r in io.read_jsonl_zst(f)]
    assert [(r["id"], r["reason"], r["kept_id"]) for r in rejects] == [(uid(3), "duplicate_text", uid(1))]
    stats = __import__("json").loads((outs[0] / "stats.json").read_text())
    assert stats["dedup"]["renamed"] == 2 and stats["dedup"]["removed"] == 1


def test_dedup_of_one_text_repeated_holds_no_python_record_per_removal(tmp_path):
    """200k copies of one text took `pretrain dedup` to 305 MB: at the default dedup.memory_mb the
    peak is the candidate check's chunk of signatures (numpy, bounded by the budget); after it,
    the removal list was a Python dict per removed document, sorted through a tuple per member,
    then held whole (182 MB at 200k), and stage C loaded its shard's removals into a dict (+67 MB).
    Now keepers take one entry per cluster and records stream. Traced, exact keys only (the
    near-duplicate check's numpy chunk is the budget's)."""
    import tracemalloc

    from pretrain.curate.dedup import DedupConfig, find_duplicates, sign_shard
    from pretrain.curate.document import Document

    n = 20_000
    cfg = DedupConfig(near=False)
    sign_shard(((Document(id=f"d{i:05d}", text="one text, repeated"), 0) for i in range(n)), 0, tmp_path, cfg)
    tracemalloc.start()
    try:
        path = find_duplicates(tmp_path, 1, cfg)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    from pretrain.curate import io

    records = list(io.read_jsonl_zst(path))
    assert len(records) == n - 1 and {r["kept"] for r in records} == {"d00000"}
    assert peak < 400 * n, f"{peak / n:.0f} bytes per document"  # 548 before, 248 now


def test_warc_check_all_reports_junk_past_the_bound_inside_a_small_records_member(tmp_path):
    """With gaps="all", a small record whose member holds 20 MiB more (spaces) was reported as
    skipped bytes; once members stop inflating at max_record_bytes + 1 MiB it still is, in one
    line naming the bound, and the next member's record is read."""
    rec = record(1, page("1"))
    junk = spaces_member(rec, 20, b"")
    good = [gzip.compress(record(i, page(str(i))), mtime=0) for i in (0, 2)]
    p = tmp_path / "junk.warc.gz"
    p.write_bytes(good[0] + junk + good[1])
    r = read_in_child(p, timeout=60, mem_mb=1024, warc_check_gaps="all", max_record_bytes=4 * MiB)
    assert _ids(r) == [0, 1, 2]
    (err,) = r["errors"]
    assert err[0] == f"gzip member at offset {len(good[0])}"
    assert err[1].startswith(f"more than {5 * MiB} bytes in the gzip member of a record of ")


def test_parquet_text_column_is_found_by_path_not_by_a_nested_leaf_of_the_same_name(tmp_path):
    """Leaf columns are looked up by path (`metadata.text`), never by leaf name (`text`): a
    struct with a field named like the text column must not stand in for it, on the page reader
    (a page over max_record_bytes) or through pyarrow."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pretrain.curate.readers import ReaderConfig, read_documents

    p = tmp_path / "nested.parquet"
    pq.write_table(pa.table({"id": ["a", "b"], "text": ["the real text", "the second text"],
                             "metadata": [{"text": "z" * 5000}, {"text": "nested two"}]}), p)
    for limit, want in ((1000, [("b", "the second text")]),  # row 0's metadata is over the limit
                        (8 * MiB, [("a", "the real text"), ("b", "the second text")])):
        docs = list(read_documents(p, ReaderConfig(max_record_bytes=limit)))
        assert [(d.id, d.text) for d in docs] == want  # by leaf name: ("b", "nested two")


def test_warc_search_for_the_next_member_gives_up_on_a_file_of_fake_gzip_headers(tmp_path):
    """The next member after a too-large record is found by gzip headers in the compressed bytes:
    each candidate costs an inflate attempt, and a file made of nothing but `1f 8b 08` took 2.5 s
    per MB. Past 4,096 candidates that are not a WARC member, the rest of the file goes, said."""
    from pretrain.curate.warc_framing import MAX_CANDIDATES

    big = spaces_member(_big_record_head(1, 64), 64, b"\r\n\r\n")
    good = [gzip.compress(record(i, page(str(i))), mtime=0) for i in (0, 2)]
    for fakes, want in ((100, [0, 2]), (MAX_CANDIDATES + 1, [0])):
        p = tmp_path / f"fakes{fakes}.warc.gz"
        p.write_bytes(good[0] + big + b"\x1f\x8b\x08\x00" * fakes + good[1])
        r = read_in_child(p, timeout=60, mem_mb=1024, max_record_bytes=MiB)
        assert _ids(r) == want
        gave_up = [e for e in r["errors"] if "gzip headers that were not one" in e[1]]
        assert len(gave_up) == (want == [0])


def _repeated_cell_file(path, rows: int, cell: int) -> None:
    """A columnar file whose `rows` text cells all point at one stored `cell`-byte string."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    text = pa.DictionaryArray.from_arrays(pa.array([0] * rows, type=pa.int32()), pa.array(["x" * cell]))
    table = pa.table({"text": text})
    if path.suffix == ".parquet":
        pq.write_table(table, path, row_group_size=rows, compression="zstd")
    else:
        with pa.ipc.new_stream(path, table.schema, options=pa.ipc.IpcWriteOptions(compression="zstd")) as w:
            w.write_table(table)


@pytest.mark.parametrize("suffix", [".parquet", ".arrow"])
def test_cells_repeating_one_stored_string_are_bounded_like_a_compression_bomb(tmp_path, suffix):
    """A 531-byte Parquet file (one 1 MiB string in its dictionary, 20,000 indices to it) read as
    20 GiB of text, every row within max_record_bytes: the text a file yields is held to max_ratio
    times its size (+ 16 MiB) and to max_file_bytes, as a compressed JSONL stream is."""
    from pretrain.curate.readers import ReaderConfig, read_documents

    p = tmp_path / f"bomb{suffix}"
    _repeated_cell_file(p, 1000, 64 * 1024)  # 64 MiB of text from a file of a few kB
    size = p.stat().st_size
    assert size < 20_000
    by_ratio = (1000 * size + 16 * MiB) // (64 * 1024)  # whole records within 1,000 x size + 16 MiB
    for cfg, n, says in [(ReaderConfig(), by_ratio, "expands more than max_ratio=1000 times"),
                         (ReaderConfig(max_file_bytes=MiB), 16, "more than max_file_bytes=1048576"),
                         (ReaderConfig(max_ratio=0), 1000, None)]:  # 0: no ratio bound, as for JSONL
        errors: list = []
        docs = list(read_documents(p, cfg, lambda *e, out=errors: out.append(e)))
        assert len(docs) == n and all(len(d.text) == 64 * 1024 for d in docs)
        if says is None:
            assert errors == []
        else:
            assert len(errors) == 1 and errors[0][0] == str(p)
            assert errors[0][2].startswith(says) and errors[0][2].endswith("the rest of the file skipped")


def test_minhash_normalizes_a_long_run_of_combining_marks_in_linear_time():
    """Hostile text: 100,000 acute accents then 100,000 grave-below (and Tibetan vowel signs that
    decompose into marks). CPython's NFD puts a run of marks in canonical order by insertion: 40,000
    of each took 36 s, these ~4 minutes, 8 MiB hours. With UAX #15's stream-safe joiner after every
    30 marks (a mark itself, dropped with the accents) it is linear; the words are what plain NFD
    gives, checked on runs short enough for it (n = 200)."""
    import os
    import subprocess
    import sys
    import unicodedata

    from hostile import SRC

    from pretrain.curate import minhash

    def text(n: int) -> str:
        return "Wörd café " + "a" + "\u0301" * n + "\u0316" * n + " b" + "\u0f73" * n + " Ende"

    punct, accents, _ = minhash._tables()
    plain = accents.sub("", unicodedata.normalize("NFD", punct.sub(" ", text(200).lower())))
    assert minhash.normalize(text(200)) == " ".join(plain.split()) == "word cafe a b ende"
    child = "import sys; from pretrain.curate import minhash; print(minhash.normalize(sys.stdin.read()))"
    r = subprocess.run([sys.executable, "-c", child], input=text(100_000), capture_output=True, text=True,
                       timeout=60, env={**os.environ, "PYTHONPATH": SRC, "PYTHONIOENCODING": "utf-8"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "word cafe a b ende"
