"""Robustness leftovers of session 4, each reproduced by a test that failed before its fix:
a SIGKILLed curate leaves no temporary files behind once rerun."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_pipeline import _prose, _snapshot

ROOT = Path(__file__).resolve().parents[1]


def _curate(inp: Path, out: Path, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pretrain", "curate", str(inp), "-o", str(out),
                             "--workers", "1", "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw)


def _debris(out: Path) -> list[str]:
    return sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.name.endswith(".tmp"))


def test_sigkill_midway_then_rerun_leaves_no_tmp_and_same_bytes(tmp_path):
    inp = tmp_path / "in"
    inp.mkdir()
    docs = _prose(2400)
    for f in range(2):  # two shards: the kill lands while the first is still being written
        lines = (json.dumps({"id": f"d{f}-{i}", "text": t}) + "\n" for i, t in enumerate(docs[f::2]))
        (inp / f"part{f}.jsonl").write_text("".join(lines))
    ref = tmp_path / "ref"
    p = _curate(inp, ref)
    assert p.wait() == 0, p.stderr.read().decode()

    out = tmp_path / "out"
    p = _curate(inp, out, start_new_session=True)
    deadline = time.monotonic() + 120
    while not any("/.shard_" in d for d in _debris(out)) and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)  # a shard's temporary file exists now: kill the attempt that writes it
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    left = _debris(out)
    assert any("/.shard_" in d for d in left), f"the attempt ended before writing a shard: {left}"

    mine = [out / "work" / "tmp" / "notes.tmp", out / "work" / "tmp" / ".notes.tmp", out / ".x.ab12cd34.tmp"]
    for f in mine:  # not our writers' names, or outside the work folder: a sweep never touches them
        f.write_text("the user's")
    p = _curate(inp, out)
    assert p.wait() == 0, p.stderr.read().decode()
    assert all(f.read_text() == "the user's" for f in mine)
    for f in mine:
        f.unlink()
    assert _debris(out) == [], f"the rerun left {left}"
    assert _snapshot(out) == _snapshot(ref)


@pytest.mark.usefixtures("restore_torch_threads")
def test_train_quiet_still_says_it_resumes(tmp_path, text, capsys):
    from pretrain import config as cfgmod
    from pretrain.cli import main
    from pretrain.train.testing import tiny_config

    cfg = tmp_path / "tiny.toml"
    cfg.write_text(cfgmod.dumps(tiny_config(tmp_path / "run", text, "train.steps=4", "checkpoint.every=2")))
    assert main(["train", str(cfg), "--quiet", "--set", "train.stop_at=2"]) == 0
    first = capsys.readouterr().err
    assert "resuming" not in first and "step 1 " not in first  # quiet: no per-step lines
    assert main(["train", str(cfg), "--quiet"]) == 0
    said = capsys.readouterr().err.splitlines()
    resumed = [line for line in said if "resuming from step 2" in line]
    assert len(resumed) == 1, said  # one line, even when quiet
    assert (tmp_path / "run" / "checkpoints").is_dir()


def _plain_warc_with_a_lie(shared_data: Path, tmp_path: Path, liar_type: str) -> tuple[Path, Path, dict]:
    """The real CC excerpt decompressed (pristine.warc) and again with its first `liar_type` record
    (after a response) claiming a Content-Length that ends halfway into the next record's block
    (lie.warc). Offsets and ids come from warcio, a peer parser."""
    import gzip

    from warcio.archiveiterator import ArchiveIterator

    data = gzip.decompress((shared_data / "warc" / "resiliparse" / "warcfile.warc.gz").read_bytes())
    pristine = tmp_path / "pristine.warc"
    pristine.write_bytes(data)
    with open(pristine, "rb") as f:
        it = ArchiveIterator(f)
        recs = [(r.rec_type, it.get_record_offset(), int(r.rec_headers.get_header("Content-Length")),
                 r.rec_headers.get_header("WARC-Record-ID")) for r in it]
    k = next(i for i in range(2, len(recs) - 1) if recs[i][0] == liar_type)
    _, pos, length, rid = recs[k]
    nxt = recs[k + 1]
    head_end = data.index(b"\r\n\r\n", pos) + 4
    lie = nxt[1] - head_end + nxt[2] // 2  # the claim ends halfway into the next record's block
    old = b"Content-Length: %d\r\n" % length
    at = data.index(old, pos, head_end)
    lied = data[:at] + b"Content-Length: %d\r\n" % lie + data[at + len(old):]
    shift = len(lied) - len(data)
    liar = tmp_path / "lie.warc"
    liar.write_bytes(lied)
    return pristine, liar, {"offset": pos, "id": rid, "next": nxt[1] + shift}


def _read_warc(path: Path):
    from collections import Counter

    from pretrain.curate.readers import ReaderConfig, read_documents

    errors, stats = [], Counter()
    docs = list(read_documents(path, ReaderConfig(), lambda p, r, why: errors.append((r, why)), stats=stats))
    return docs, errors, stats


@pytest.mark.parametrize("liar_type", ["request", "response"])
def test_plain_warc_content_length_into_the_next_record_is_resynchronised(shared_data, tmp_path, liar_type):
    pristine, liar, truth = _plain_warc_with_a_lie(shared_data, tmp_path, liar_type)
    want, errors, _ = _read_warc(pristine)
    assert errors == [] and len(want) > 8
    got, errors, stats = _read_warc(liar)
    # the lying record alone is lost (a request yields no document); the response it ran into is whole
    expected = [(d.id, d.text) for d in want if d.id != truth["id"]]
    assert [(d.id, d.text) for d in got] == expected
    said = [why for r, why in errors if r == f"offset {truth['offset']}"]
    skipped = truth["next"] - truth["offset"]
    assert len(said) == 1 and f"resynchronised at the next record (offset {truth['next']})" in said[0], errors
    assert f"{skipped} bytes of this record skipped" in said[0]
    assert stats["errors.resynchronised"] == 1
