"""Progress inside one input file: the worker's meter and the driver's bar, on the shipped crawl."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from pretrain import progress as prog
from pretrain.curate.readers import ReaderConfig, read_documents
from pretrain.demo import CRAWL


@pytest.fixture
def every_read(monkeypatch):
    monkeypatch.setattr(prog, "EVERY_S", 0.0)  # write the position after every document


def test_meter_follows_the_reader_through_one_gzip_warc(tmp_path, every_read):
    """Positions written while reading one 2.5 MB WARC climb through the file and end at its size.

    The WARC is the shipped crawl 5 times over (gzip members concatenate); fastwarc reads 1 MiB
    blocks, so the position moves at each block: a 1 GB WARC moves the bar a thousand times."""
    big = tmp_path / "big.warc.gz"
    big.write_bytes(CRAWL.read_bytes() * 5)
    meter_file = tmp_path / "m" / "0.json"
    meter = prog.ShardMeter(meter_file, big)
    seen = []
    for _ in meter.wrap(read_documents(big, ReaderConfig(), lambda *a: None, source="demo")):
        seen.append(json.loads(meter_file.read_text()))
    size = big.stat().st_size
    positions = [s["bytes"] for s in seen[1:]]  # the first line is written before a position exists
    assert positions == sorted(positions)
    assert len({p for p in positions if 0 < p < size}) >= 2  # the bar moves inside the single file
    assert json.loads(meter_file.read_text()) == {"docs": len(seen), "bytes": size, "size": size}
    with gzip.open(big, "rb") as f:  # the position is in the file on disk (compressed), not in the text
        assert len(f.read()) > size


def test_bar_counts_bytes_docs_and_finished_files(tmp_path):
    files = [tmp_path / "a", tmp_path / "b"]
    files[0].write_bytes(b"x" * 1000)
    files[1].write_bytes(b"y" * 3000)
    meters = tmp_path / "meters"
    meters.mkdir()
    (meters / "0.json").write_text("stale from an earlier run")
    p = prog.Progress(enabled=False)
    tick = p.start("filter", 2, [str(f) for f in files], meters)
    assert not (meters / "0.json").exists()
    (meters / "1.json").write_text(json.dumps({"docs": 7, "bytes": 1500, "size": 3000}))
    p.stop("filter")
    task = p._bar.tasks[0]  # noqa: SLF001
    assert (task.completed, task.total) == (1500, 4000)
    assert task.fields["info"] == "7 docs, 0/2 files"
    tick({"shard": 0, "read": 5})  # shard 0 finished: counted whole, its documents from its stats
    task = p._bar.tasks[0]  # noqa: SLF001
    assert task.completed == 2500 and task.fields["info"] == "12 docs, 1/2 files"
    p.close()


def test_meter_never_fails_the_job(tmp_path, every_read):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    meter = prog.ShardMeter(blocked / "0.json", Path(tmp_path / "missing"))
    assert list(meter.wrap(iter(range(3)))) == [0, 1, 2]


def test_bar_says_one_doc_and_one_file_in_the_singular(tmp_path):
    """A one-document input read '1 docs, 0/1 files' on the curate bar."""
    f = tmp_path / "a"
    f.write_bytes(b"x" * 10)
    p = prog.Progress(enabled=False)
    p.start("filter", 1, [str(f)], tmp_path / "meters")
    (tmp_path / "meters").mkdir()
    (tmp_path / "meters" / "0.json").write_text(json.dumps({"docs": 1, "bytes": 5, "size": 10}))
    p.stop("filter")
    assert p._bar.tasks[0].fields["info"] == "1 doc, 0/1 file"  # noqa: SLF001
    tick = p.start("dedup", 3)
    tick({"read": 1})
    assert p._bar.tasks[1].fields["info"] == "1 doc"  # noqa: SLF001
    p.close()


def test_curate_summary_says_one_document_and_one_bad_record(capsys):
    """The summary read 'read 1 documents ...; 1 bad records skipped' on a one-document input."""
    from pretrain.curate.report import exit_code, totals_line

    stats = {"documents": {"read": 1, "kept": 1}, "wall_seconds": 1.0,
             "errors": {"count": 1, "by_reason": {"malformed JSON": 1}, "examples": []}}
    assert totals_line(stats).startswith("read 1 document, kept 1 (100.0%); 1 bad record skipped; ")
    stats["documents"] = {"read": 0, "kept": 0}
    assert exit_code(stats) == 1
    assert "inputs (1 bad record" in capsys.readouterr().err
