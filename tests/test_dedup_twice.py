"""`pretrain dedup` on inputs a second run meets: repeated ids, odd documents, files split apart.

The truth each test checks against is a plain Python set of normalized texts (exact duplicates).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pretrain.cli import main
from pretrain.curate import io


def _read_all(folder: Path) -> list[dict]:
    return [r for f in sorted(folder.glob("*.jsonl.zst")) for r in io.read_jsonl_zst(f)]


def _dedup(inp: Path, out: Path, *extra: str) -> tuple[list[dict], list[dict], dict]:
    assert main(["dedup", str(inp), "-o", str(out), "--workers", "1", "--quiet", *extra]) == 0
    stats = json.loads((out / "stats.json").read_text())
    return _read_all(out / "data"), _read_all(out / "rejects"), stats


def _distinct(texts: list[str]) -> int:
    return len({" ".join(t.lower().split()) for t in texts})


def test_a_repeated_id_never_removes_a_unique_document(tmp_path):
    # ids are not always unique (two dumps concatenated, per-file counters): a removal meant for
    # one "b" must not take the other, unique, "b" with it
    docs = [("a", "the quick brown fox jumps over the lazy dog again and again"),
            ("b", "the quick brown fox jumps over the lazy dog again and again"),
            ("b", "something completely different about rivers and mountains in the north"),
            ("c", "a third text about the sea and its ships sailing home at dusk")]
    (tmp_path / "in").mkdir()
    lines = [json.dumps({"id": i, "text": t}) + "\n" for i, t in docs]
    (tmp_path / "in" / "x.jsonl").write_text("".join(lines))
    kept, rejects, stats = _dedup(tmp_path / "in", tmp_path / "out")
    assert sorted(r["text"] for r in kept) == sorted({t for _, t in docs})
    assert len(kept) == _distinct([t for _, t in docs])
    assert stats["documents"]["read"] == len(kept) + len(rejects) == len(docs)
    assert stats["dedup"]["removed"] == stats["documents"]["dropped"] == len(rejects) == 1


def test_a_threshold_given_as_a_percent_is_refused_not_a_silent_no_op(tmp_path, capsys):
    # the check compares a share of slots (0..1) with it: 70 never passes, so nothing was removed
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "x.jsonl").write_text('{"text": "one two three four five six"}\n')
    args = ["dedup", str(tmp_path / "in"), "-o", str(tmp_path / "out"), "--quiet"]
    assert main(args + ["--set", "dedup.threshold=70"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "dedup.threshold" in err and "70" in err
    assert main(args + ["--set", "dedup.threshold=1"]) == 0
    # 10^7 hashes per document was not refused: the signing buffers alone took the memory
    # (each factor within its own bound, 10,000: the product is what the buffers hold)
    assert main(args + ["--set", "dedup.bands=5000", "--set", "dedup.rows=100"]) == 2
    assert "500,000 hashes; at most 10,000" in capsys.readouterr().err


def test_exact_dedup_on_real_multilingual_text_equals_a_python_set(tmp_path):
    # 7,500 real sentences in 75 languages, plus copies re-cased and re-spaced (Unicode spaces
    # included), split over 3 files, 2 workers: the removed documents are exactly those a set of
    # normalized texts (the documented rule: lowercase, whitespace collapsed) calls repeats, and
    # each group keeps its smallest id
    from conftest import data_file

    rows = data_file("langid/lingua/lingua-sentences-75lang-100each.tsv").read_text().splitlines()
    texts = [r.split("\t", 1)[1] for r in rows if "\t" in r]
    copies = [t.upper() if i % 2 else "\u3000" + t.replace(" ", " \u00a0\n ")
              for i, t in enumerate(texts[::7])]
    docs = [(f"d{i:05d}", t) for i, t in enumerate(texts + copies)]
    docs = docs[1::2] + docs[::2]  # input order is not id order
    (tmp_path / "in").mkdir()
    for part in range(3):
        lines = [json.dumps({"id": i, "text": t}) + "\n" for i, t in docs[part::3]]
        (tmp_path / "in" / f"p{part}.jsonl").write_text("".join(lines))
    out = tmp_path / "out"
    assert main(["dedup", str(tmp_path / "in"), "-o", str(out), "--workers", "2", "--quiet",
                 "--set", "dedup.near=false"]) == 0
    groups: dict[str, list[str]] = {}
    for i, t in docs:
        groups.setdefault(" ".join(t.lower().split()), []).append(i)
    want_kept = {min(ids) for ids in groups.values()}
    kept, rejects = _read_all(out / "data"), _read_all(out / "rejects")
    assert {r["id"] for r in kept} == want_kept and len(kept) == len(want_kept)
    assert len(rejects) == len(docs) - len(want_kept) > len(copies) * 0.9
    assert {r["step"] for r in rejects} == {"exact_dedup"}


@pytest.mark.parametrize("keep_mtime", [False, True])
def test_an_input_changed_between_signing_and_writing_is_a_clear_error(tmp_path, monkeypatch, capsys,
                                                                       keep_mtime):
    # a dedup job reads a local input twice (signing, then writing); rows are matched by
    # position, so a file rewritten in between must stop the job, not remove the wrong documents
    from pretrain.curate import job

    fox = "the quick brown fox jumps over the lazy dog again"
    docs = [("a", fox), ("b", fox), ("c", "rivers and mountains of the far north in winter")]
    src = tmp_path / "in" / "x.jsonl"
    src.parent.mkdir()
    src.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in docs))
    split = job.split_removals

    def split_then_rewrite(*args, **kwargs):
        split(*args, **kwargs)
        before = src.stat()
        src.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in docs[1:] + docs[:1]))
        if keep_mtime:  # same size, and its mtime put back (`rsync -t`, `cp -p`): only the ids tell
            os.utime(src, ns=(before.st_atime_ns, before.st_mtime_ns))

    monkeypatch.setattr(job, "split_removals", split_then_rewrite)
    assert main(["dedup", str(src.parent), "-o", str(tmp_path / "out"), "--workers", "1", "--quiet"]) == 2
    err = capsys.readouterr().err
    if keep_mtime:  # size and mtime as stage A recorded them: trusted unread, the ids tell
        assert "x.jsonl: document 2 is 'c', signed as 'b'" in err
        assert "the input changed during the job" in err
    else:  # a new mtime: hashed against stage A's marker before the second read
        assert "x.jsonl: its bytes changed since this job read it (same size" in err, err


def test_a_lone_surrogate_escape_is_a_bad_record_not_a_crash(tmp_path):
    # "\ud800" is valid JSON (a split emoji in a crawl) but no UTF-8 string: the job skips and
    # counts the record (text or id), keeps a proper pair (an emoji), and dedups the rest
    lines = ['{"id": "s1", "text": "a split \\ud83d emoji in a crawled page"}',
             '{"id": "s2\\udc80", "text": "another page of words"}',
             '{"id": "e1", "text": "a whole \\ud83d\\ude00 emoji in a crawled page"}',
             '{"id": "e2", "text": "A WHOLE \\ud83d\\ude00 EMOJI in a crawled page"}']
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "x.jsonl").write_text("\n".join(lines) + "\n")
    kept, rejects, stats = _dedup(tmp_path / "in", tmp_path / "out")
    assert [r["id"] for r in kept] == ["e1"] and [r["id"] for r in rejects] == ["e2"]
    assert kept[0]["text"] == "a whole \U0001F600 emoji in a crawled page"
    assert stats["errors"]["count"] == 2 and stats["documents"]["read"] == 2
    assert [e["record"] for e in stats["errors"]["examples"]] == ["line 1", "line 2"]
    assert "surrogate" in stats["errors"]["examples"][0]["reason"]


def test_one_file_or_seven_and_one_worker_or_two_remove_the_same_documents(tmp_path):
    # real bill titles, full of natural near duplicates ("X Act" / "X Act of 2015"), in shuffled
    # id order; for keep = id and keep = first the same documents go, for the same reasons
    import random

    from conftest import data_file

    titles = data_file("lm/misc/senate-bills.txt").read_text().splitlines()[:1200]
    docs = [{"id": f"b{i:04d}", "text": f"{t} {titles[(i * 7) % len(titles)]}"} for i, t in enumerate(titles)]
    docs += [{"id": f"c{i:03d}", "text": d["text"].upper()} for i, d in enumerate(docs[::40])]
    random.Random(1).shuffle(docs)
    lines = [json.dumps(d) + "\n" for d in docs]
    for keep in ("id", "first"):
        seen = []
        for files, workers in ((1, 1), (7, 2)):
            inp = tmp_path / f"{keep}{files}"
            inp.mkdir()
            size = -(-len(lines) // files)
            for f in range(files):
                (inp / f"p{f}.jsonl").write_text("".join(lines[f * size:(f + 1) * size]))
            out = tmp_path / f"out-{keep}{files}"
            assert main(["dedup", str(inp), "-o", str(out), "--workers", str(workers), "--quiet",
                         "--set", f"keep={keep}"]) == 0
            kept, rejects = _read_all(out / "data"), _read_all(out / "rejects")
            assert len(kept) + len(rejects) == len(docs)
            seen.append((sorted(r["id"] for r in kept),
                         sorted((r["id"], r["step"], r["reason"], r["kept_id"]) for r in rejects)))
        assert seen[0] == seen[1] and len(seen[0][1]) > 30


def test_the_candidate_check_holds_one_chunk_of_signatures_not_two(tmp_path):
    # an all-duplicate shard: every band key equal, so every document is a candidate of the first;
    # checking a chunk of c edges needs its 2c signature rows (2c x 112 x 4 bytes), and gathering
    # them from the stored signatures must not add a second copy (it did: RSS 2x the budget)
    import tracemalloc

    import numpy as np

    from pretrain.curate import dedup
    from pretrain.curate.document import Document

    cfg = dedup.DedupConfig()
    docs = (Document(f"d{i}", "the very same words in every one of these documents") for i in range(6000))
    dedup.sign_shard(((d, 0) for d in docs), 0, tmp_path, cfg)
    edges = np.stack([np.zeros(5999, np.int64), np.arange(1, 6000, dtype=np.int64)])
    chunk = 6000
    rows_bytes = 2 * chunk * cfg.bands * cfg.rows * 4
    tracemalloc.start()
    kept = dedup._verified(tmp_path, [(0, 0)], [0, 6000], edges, cfg.threshold, chunk)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert kept.shape == (2, 5999)
    assert peak < 1.4 * rows_bytes, (peak, rows_bytes)
