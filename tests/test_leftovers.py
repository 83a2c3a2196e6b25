"""Robustness leftovers of session 4, each reproduced by a test that failed before its fix: a
SIGKILLed curate leaves no temporary files once rerun; `train --quiet` still says it resumes; a plain
WARC whose Content-Length runs into the next record resynchronises there; a huge Parquet cell
among small rows is skipped without being decoded."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from s3server import s3  # noqa: F401  (the fixture)
from test_pipeline import _prose, _snapshot

ROOT = Path(__file__).resolve().parents[1]


def _curate(inp: Path | str, out: Path | str, *extra: str, env: dict | None = None, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pretrain", "curate", str(inp), "-o", str(out),
                             "--workers", "1", "--quiet", "--set", "shards.max_inputs=1", *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, **kw)


def _debris(out: Path) -> list[str]:
    return sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.name.endswith(".tmp"))


def _two_shards(inp: Path) -> None:
    inp.mkdir()
    docs = _prose(2400)
    for f in range(2):  # two shards (max_inputs=1): the kill lands while the first is still being written
        lines = (json.dumps({"id": f"d{f}-{i}", "text": t}) + "\n" for i, t in enumerate(docs[f::2]))
        (inp / f"part{f}.jsonl").write_text("".join(lines))


def _kill_while_writing_a_shard(p: subprocess.Popen, work: Path) -> list[str]:
    deadline = time.monotonic() + 120
    while (not any("/.shard_" in d for d in _debris(work)) and p.poll() is None
           and time.monotonic() < deadline):
        time.sleep(0.005)  # a shard's temporary file exists now: kill the attempt that writes it
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    return _debris(work)


def test_sigkill_midway_then_rerun_leaves_no_tmp_and_same_bytes(tmp_path):
    inp = tmp_path / "in"
    _two_shards(inp)
    ref = tmp_path / "ref"
    p = _curate(inp, ref)
    assert p.wait() == 0, p.stderr.read().decode()

    out = tmp_path / "out"
    left = _kill_while_writing_a_shard(_curate(inp, out, start_new_session=True), out)
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



def test_sigkill_midway_s3_in_and_out_rerun_leaves_no_local_debris_nor_stray_objects(tmp_path, s3):  # noqa: F811
    """The same for inputs and OUT in a bucket (a real S3 API server): the temporary files, and the
    local copy of the input being read, are in the local work folder; the bucket gets no temporary
    object, and the rerun's objects are the local run's bytes."""
    inp = tmp_path / "in"
    _two_shards(inp)
    ref = tmp_path / "ref"
    p = _curate(inp, ref)
    assert p.wait() == 0, p.stderr.read().decode()
    bucket, fs = s3.new_bucket(), s3.filesystem()
    fs.put(str(inp), f"{bucket}/crawl", recursive=True)
    env, work = dict(s3.env(), PYTHONPATH=str(ROOT / "src")), tmp_path / "work"
    job = (f"s3://{bucket}/crawl", f"s3://{bucket}/corpus", "--work-dir", str(work))
    left = _kill_while_writing_a_shard(_curate(*job, env=env, start_new_session=True), work)
    assert any("/.shard_" in d for d in left) and list((work / "tmp").glob("input_*")), left
    p = _curate(*job, env=env)
    assert p.wait() == 0, p.stderr.read().decode()
    assert _debris(work) == [] and list((work / "tmp").iterdir()) == []
    keys = sorted(k.split("/corpus/", 1)[1] for k in fs.find(f"{bucket}/corpus"))
    assert keys == sorted(["plan.json", "config.toml", "stats.json", "README.md", *_snapshot(ref)])
    assert {k: fs.cat_file(f"{bucket}/corpus/{k}") for k in _snapshot(ref)} == _snapshot(ref)
    assert fs.cat_file(f"{bucket}/corpus/README.md") == (ref / "README.md").read_bytes()  # the card too


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
    assert main(["train", str(cfg), "--quiet"]) == 0  # a finished run, rerun: says so, trains nothing
    out = capsys.readouterr().out
    assert "nothing to do: the run is already at step 4 (train.steps=4)" in out, out
    assert "done:" not in out
    assert main(["train", str(cfg), "--quiet", "--set", "train.stop_at=2"]) == 0
    assert "nothing to do: the run is already at step 4 (train.stop_at=2)" in capsys.readouterr().out


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


def test_parquet_200mb_cell_among_small_rows_is_skipped_unread(tmp_path):
    """One 200 MB cell in a row group of 1,000 small rows: pyarrow decoded it (820 MB above the
    imports) before its length could be measured; the page headers now say which page can hold it
    and that page's value lengths are read as a stream, the cell skipped without being held."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from hostile import read_in_child

    n, huge = 1000, 500
    texts = [f"a small document, number {i}" for i in range(n)]
    texts[huge] = "a" * (200 << 20)
    p = tmp_path / "huge.parquet"
    pq.write_table(pa.table({"id": [f"r{i}" for i in range(n)], "text": texts}), p, compression="zstd")
    del texts
    r = read_in_child(p, timeout=60, mem_mb=4096)
    assert r["n"] == n - 1 and r["ids"][:3] == ["r0", "r1", "r2"] and r["last"] == f"r{n - 1}"
    assert [e[0] for e in r["errors"]] == [f"row {huge}"] and "max_record_bytes" in r["errors"][0][1]
    assert r["peak_mb"] - r["base_mb"] < 64  # decoding the cell alone would hold 200 MB


def test_parquet_huge_cell_in_a_column_other_than_text_is_skipped_unread(tmp_path):
    """A 128 MB cell in a `junk` column, a 64 MB one in `url` and one in datatrove's `metadata`
    struct, among 1,000 small rows: pyarrow decoded each whole before its length could be measured
    (a 256 MB `junk` cell plus a 128 MB `url` one: 1,129 MB above the imports, 9 s; 256 MB in
    `metadata.url`: 1,093 MB); every string column read (a struct's string fields too) is now
    measured from its page headers and a page that can hold an oversized cell is read as a stream,
    the cell skipped unread, the reason naming its column and row group."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from hostile import read_in_child

    n = 1000
    junk, urls = ["x"] * n, [f"http://example.org/{i}" for i in range(n)]
    meta = [{"source": "cc", "n": i} for i in range(n)]
    junk[500], urls[250] = "j" * (128 << 20), "http://example.org/" + "u" * (64 << 20)
    meta[750] = {"source": "s" * (64 << 20), "n": 750}
    p = tmp_path / "junk.parquet"
    pq.write_table(pa.table({"id": [f"r{i}" for i in range(n)], "text": [f"doc {i}" for i in range(n)],
                             "url": urls, "junk": junk, "metadata": meta}), p, compression="zstd")
    del junk, urls, meta
    r = read_in_child(p, timeout=60, mem_mb=4096)
    assert r["n"] == n - 3 and r["ids"][:3] == ["r0", "r1", "r2"] and r["last"] == f"r{n - 1}"
    assert [e[0] for e in r["errors"]] == ["row 250", "row 500", "row 750"]
    assert [why.split("column ")[1].split(" holds")[0] for _, why in r["errors"]] == [
        "'url'", "'junk'", "'metadata.source'"]
    assert all("row group 0" in why and "skipped unread" in why for _, why in r["errors"])
    assert r["peak_mb"] - r["base_mb"] < 64  # decoding the cells would hold 256 MB and more


def _page_variants(table, tmp_path, compression: str, **kw):
    """`table` written with data pages v1 and v2, dictionary and plain: each file and pyarrow's rows."""
    import pyarrow.parquet as pq

    for version in ("1.0", "2.0"):
        for dictionary in (True, False):
            p = tmp_path / f"{version}{dictionary}.parquet"
            pq.write_table(table, p, compression=compression, data_page_version=version,
                           use_dictionary=dictionary, **kw)
            yield p, pq.read_table(p).to_pylist()


@pytest.mark.parametrize("compression", ["snappy", "zstd"])
def test_parquet_other_columns_read_by_pages_give_what_pyarrow_gives(tmp_path, compression):
    """Big cells in `url` and in metadata-bound columns (`dump`, `junk`), nulls, non-ASCII, several
    row groups, pages v1 and v2, dictionary and plain: the documents are pyarrow's rows (text, id,
    url and the extra columns as metadata) less exactly the rows holding a cell over the bound."""
    import random
    from collections import Counter

    import pyarrow as pa

    from pretrain.curate.readers import ReaderConfig, read_documents

    rng, n, bound = random.Random(1), 900, 4000
    words = ["alpha", "βeta", "日本語", "delta"]

    def col(p_null: float) -> list:
        return [None if rng.random() < p_null else " ".join(rng.choices(words, k=rng.randint(1, 30)))
                for _ in range(n)]

    text, dump, junk = col(0.0), col(0.2), col(0.3)
    url = [f"http://example.org/{i}" for i in range(n)]
    for i in (3, 401, 402):
        junk[i] = "é" * 2100
    for i in (150, 899):
        url[i] = "http://example.org/" + "u" * 5000
    dump[600] = "z" * 5000
    lang, note = col(0.2), col(0.1)
    lang[700], note[42] = "ł" * 3000, "n" * 4500
    meta = [None if k % 17 == 0 else {"lang": lang[k], "n": k} for k in range(n)]
    info = [None if k % 13 == 0 else {"note": note[k]} for k in range(n)]  # one field: nulls by levels
    table = pa.table({"id": [f"r{i}" for i in range(n)], "text": text, "url": url, "dump": dump,
                      "junk": junk, "score": [float(i) for i in range(n)], "metadata": meta, "info": info})
    for p, truth in _page_variants(table, tmp_path, compression, row_group_size=300, data_page_size=4096):
        over = [k for k, r in enumerate(truth)
                if any(isinstance(v, str) and len(v.encode()) > bound for v in r.values())
                or any(isinstance(v, str) and len(v.encode()) > bound
                       for m in (r["metadata"], r["info"]) if m for v in m.values())]
        assert over == [3, 42, 150, 401, 402, 600, 700, 899]
        want = [(r["id"], r["text"], r["url"], r["dump"], r["junk"], r["score"], r["metadata"] or {},
                 r["info"]) for k, r in enumerate(truth) if k not in over]
        errors: list = []
        docs = read_documents(p, ReaderConfig(max_record_bytes=bound),
                              lambda f, r, why, errors=errors: errors.append((r, why)), stats=Counter())
        got = [(d.id, d.text, d.url, d.metadata.get("dump"), d.metadata.get("junk"),
                d.metadata.get("score"), {k: d.metadata[k] for k in ("lang", "n") if k in d.metadata},
                d.metadata.get("info")) for d in docs]
        assert got == want
        assert [r for r, _ in errors] == [f"row {k}" for k in over]
        assert all("skipped unread" in why for _, why in errors)


def _strings_bytes(v) -> int:
    if isinstance(v, str):
        return len(v.encode())
    if isinstance(v, dict):
        return sum(_strings_bytes(x) for x in v.values())
    if isinstance(v, list):
        return sum(_strings_bytes(x) for x in v)
    return 0


@pytest.mark.parametrize("compression", ["snappy", "zstd"])
def test_parquet_lists_and_nested_structs_read_by_pages_give_what_pyarrow_gives(tmp_path, compression):
    """A top-level list of strings (nulls, empty lists, null elements, a row's list spread over many
    pages) and a string two structs deep (nulls at each level): the documents are pyarrow's rows
    less exactly the rows over the bound, pages v1 and v2, dictionary and plain (session 11)."""
    import random
    from collections import Counter

    import pyarrow as pa

    from pretrain.curate.readers import ReaderConfig, read_documents

    rng, n, bound = random.Random(2), 600, 4000
    words = ["alpha", "βeta", "日本語", "delta"]

    def tags(k: int):
        r = rng.random()
        if r < 0.1:
            return None
        if r < 0.2:
            return []
        return [None if rng.random() < 0.1 else rng.choice(words) * rng.randint(1, 5)
                for _ in range(rng.randint(1, 12))]

    def deep(k: int):
        if k % 11 == 0:
            return None
        info = None if k % 7 == 0 else {"note": None if k % 5 == 0 else f"note {k}", "lang": "en"}
        return {"src": f"s{k}", "info": info}

    rows_tags, rows_deep = [tags(k) for k in range(n)], [deep(k) for k in range(n)]
    rows_tags[100] = ["t" * 100 + str(i) for i in range(2000)]  # 200 kB over 2,000 elements, many pages
    rows_tags[101] = ["u" * 1000] * 300  # one dictionary entry, 300 times
    rows_deep[250] = {"src": "s", "info": {"note": "n" * 5000, "lang": "en"}}
    table = pa.table({"id": [f"r{i}" for i in range(n)], "text": [f"doc {i}" for i in range(n)],
                      "tags": rows_tags, "deep": rows_deep})
    for p, truth in _page_variants(table, tmp_path, compression, row_group_size=200, data_page_size=2048):
        over = [k for k, r in enumerate(truth) if _strings_bytes(r) > bound]
        assert over == [100, 101, 250]
        want = [(r["id"], r["text"], r["tags"], r["deep"]) for k, r in enumerate(truth) if k not in over]
        errors: list = []
        docs = read_documents(p, ReaderConfig(max_record_bytes=bound),
                              lambda f, r, why, errors=errors: errors.append((r, why)), stats=Counter())
        got = [(d.id, d.text, d.metadata.get("tags"), d.metadata.get("deep")) for d in docs]
        assert got == want
        assert [r for r, _ in errors] == [f"row {k}" for k in over]
        assert [why.split("column ")[1].split(" holds")[0] for _, why in errors] == [
            "'tags'", "'tags'", "'deep.info.note'"]


def test_parquet_huge_list_or_deep_struct_cell_is_skipped_unread(tmp_path):
    """128 MB in one row's list of strings (131,072 copies of a 1 KiB dictionary entry: a few kB on
    disk) or two structs deep: pyarrow decoded them whole (256 MB: 473 MB and 837 MB above the
    imports, session 11); now measured from the pages and skipped unread."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from hostile import read_in_child

    n = 1000
    ids, texts = [f"r{i}" for i in range(n)], [f"doc {i}" for i in range(n)]
    tags = [["a", "b"] for _ in range(n)]
    tags[500] = ["t" * 1024] * (128 * 1024)
    deep = [{"url": f"http://e/{i}", "info": {"lang": "en", "note": "x"}} for i in range(n)]
    deep[700] = {"url": "http://e/700", "info": {"lang": "en", "note": "n" * (128 << 20)}}
    p = tmp_path / "nested.parquet"
    pq.write_table(pa.table({"id": ids, "text": texts, "tags": tags, "metadata": deep}), p,
                   compression="zstd")
    del tags, deep
    r = read_in_child(p, timeout=60, mem_mb=4096)
    assert r["n"] == n - 2 and r["last"] == f"r{n - 1}"
    assert [e[0] for e in r["errors"]] == ["row 500", "row 700"]
    assert [why.split("column ")[1].split(" holds")[0] for _, why in r["errors"]] == [
        "'tags'", "'metadata.info.note'"]
    assert r["peak_mb"] - r["base_mb"] < 100


@pytest.mark.parametrize("compression", ["snappy", "zstd", "gzip", "none", "lz4", "brotli"])
def test_parquet_read_by_pages_gives_what_pyarrow_gives(tmp_path, monkeypatch, compression):
    """The page reader against pyarrow's own reading of the same file: every codec, data pages v1
    and v2, dictionary and plain, nulls, several row groups, UTF-8 beyond ASCII; the cells over the
    bound (repeated ones too, so in the dictionary) are the only rows missing."""
    import random
    from collections import Counter

    import pyarrow as pa
    import pyarrow.parquet as pq

    import pretrain.curate.parquet_pages as pp
    from pretrain.curate.readers import ReaderConfig, read_documents

    rng, n, bound = random.Random(0), 1500, 4000
    words = ["alpha", "βeta", "gamma", "日本語", "delta"]
    texts = [None if rng.random() < 0.1 else " ".join(rng.choices(words, k=rng.randint(1, 40)))
             for _ in range(n)]
    for i in (7, 100, 101, 750, n - 1):
        texts[i] = "z" * 5000 if i in (100, 101) else "é" * 2500 + str(i)
    table = pa.table({"id": [f"r{i}" for i in range(n)], "text": texts,
                      "url": [f"http://example.org/{i}" for i in range(n)]})
    used = Counter()
    real = pp.group_rows
    monkeypatch.setattr(pp, "group_rows", lambda *a: used.update([real(*a) is not None]) or real(*a))
    for version in ("1.0", "2.0"):
        for dictionary in (True, False):
            p = tmp_path / f"{version}{dictionary}.parquet"
            pq.write_table(table, p, compression=compression, data_page_version=version,
                           use_dictionary=dictionary, row_group_size=400, data_page_size=4096)
            truth = pq.read_table(p).to_pylist()  # the peer's reading of the file
            want = [(r["id"], r["text"], r["url"]) for r in truth
                    if r["text"] is not None and len(r["text"].encode()) <= bound]
            too_big = [f"row {k}" for k, r in enumerate(truth)
                       if r["text"] and len(r["text"].encode()) > bound]
            errors: list = []
            docs = read_documents(p, ReaderConfig(max_record_bytes=bound),
                                  lambda f, r, why, errors=errors: errors.append((r, why)), stats=Counter())
            assert [(d.id, d.text, d.url) for d in docs] == want
            assert [r for r, why in errors if "max_record_bytes" in why] == too_big
    assert used[True] > 0 and used[False] == 0  # every group went by pages (each holds a page over 4000)


@pytest.mark.parametrize("where", ["header", "values"])
def test_parquet_corrupt_page_loses_its_row_group_only(tmp_path, where):
    """Garbage over a page (its header, or its first values) of the middle row group, read by pages:
    that group (or the rows hit) is reported, the groups around it are read."""
    from collections import Counter

    import pyarrow as pa
    import pyarrow.parquet as pq

    from pretrain.curate.readers import ReaderConfig, read_documents

    n = 300
    texts = ["z" * 5000 if i % 100 == 50 else f"document {i} " * 5 for i in range(n)]
    p = tmp_path / "c.parquet"
    pq.write_table(pa.table({"id": [f"r{i}" for i in range(n)], "text": texts}), p,
                   compression="none", use_dictionary=False, row_group_size=100, data_page_size=2048)
    chunk = pq.ParquetFile(p).metadata.row_group(1).column(1)
    at = chunk.data_page_offset + (0 if where == "header" else 100)
    data = bytearray(p.read_bytes())
    data[at:at + 64] = b"\xff" * 64
    p.write_bytes(bytes(data))
    errors: list = []
    docs = list(read_documents(p, ReaderConfig(max_record_bytes=4000),
                               lambda f, r, why: errors.append((r, why)), stats=Counter()))
    ids = {d.id for d in docs}
    assert {f"r{i}" for i in range(n) if i < 100 or i >= 200} - {"r50", "r250"} <= ids
    hit = [r for r, why in errors if r == "row group 1" or (r.startswith("row 1") and r != "row 150")]
    assert hit and "r50" not in ids and "r250" not in ids, errors
