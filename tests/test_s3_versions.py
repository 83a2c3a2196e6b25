"""An input rewritten with the same size under a corpus job (curate/versions.py), against a real S3
API server (moto, tests/s3server.py) and local files: between two attempts the rerun refuses it
naming the object, its ETag then and now; between the listing and the read, the shard's GET does;
a plan.json written before versions were recorded resumes as before, said once."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from s3server import s3  # noqa: F401  (the fixture)
from test_job_s3 import s3_here  # noqa: F401  (the fixture)
from test_s3_inputs import _kept_ids, _rows

from pretrain.cli import main


def _same_size_other_bytes(data: bytes) -> bytes:
    other = data.replace(b"line 0", b"line 7")
    assert other != data and len(other) == len(data)
    return other


def _job(src: str, out, work) -> list[str]:
    # each input its own shard: the tests read an input's stamp in its shard's marker
    return ["dedup", src, "-o", str(out), "--workers", "1", "--quiet", "--work-dir", str(work),
            "--set", "shards.max_inputs=1"]


def test_object_rewritten_same_size_between_attempts_is_refused(s3_here, tmp_path, capsys):  # noqa: F811
    bucket = s3_here.new_bucket("etag")
    fs = s3_here.filesystem()
    fs.pipe({f"{bucket}/in/{k}": _rows(k, n=6) for k in ["a.jsonl", "b.jsonl"]})
    out = f"s3://{bucket}/out"
    assert main(_job(f"s3://{bucket}/in", out, tmp_path / "work")) == 0
    plan = json.loads(fs.cat_file(f"{bucket}/out/plan.json"))
    old = plan["versions"][f"s3://{bucket}/in/b.jsonl"]["etag"]
    assert old == fs.info(f"{bucket}/in/b.jsonl")["ETag"]  # the store's own ETag, from the listing
    fs.pipe(f"{bucket}/in/b.jsonl", _same_size_other_bytes(_rows("b.jsonl", n=6)))
    new = fs.info(f"{bucket}/in/b.jsonl")["ETag"]
    capsys.readouterr()
    assert main(_job(f"s3://{bucket}/in", out, tmp_path / "work")) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"s3://{bucket}/in/b.jsonl: changed since" in err and old in err and new in err, err
    # the identity is unchanged (same paths, same sizes): only the version says it changed
    assert json.loads(fs.cat_file(f"{bucket}/out/plan.json"))["hash"] == plan["hash"]


def test_object_rewritten_same_size_after_the_listing_is_refused_by_its_get(s3_here, tmp_path,  # noqa: F811
                                                                            monkeypatch, capsys):
    import pretrain.curate.job as job

    bucket = s3_here.new_bucket("etag-get")
    fs = s3_here.filesystem()
    fs.pipe({f"{bucket}/in/{k}": _rows(k, n=6) for k in ["a.jsonl", "b.jsonl"]})
    real = job.identity

    def listed_then_rewritten(*args, **kw):  # another writer replaces b.jsonl once the job listed it
        ident = real(*args, **kw)
        fs.pipe(f"{bucket}/in/b.jsonl", _same_size_other_bytes(_rows("b.jsonl", n=6)))
        return ident

    monkeypatch.setattr(job, "identity", listed_then_rewritten)
    assert main(_job(f"s3://{bucket}/in", tmp_path / "out", tmp_path / "work")) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"s3://{bucket}/in/b.jsonl: changed since" in err, err
    assert not (tmp_path / "out" / "stats.json").exists()  # no corpus of two versions


def test_plan_without_versions_resumes_as_before_and_says_so_once(s3_here, tmp_path, capsys):  # noqa: F811
    """plan.json as a pretrain before versions wrote it (the same object without `versions`): its
    hash is this one's, so the job resumes; the rerun says once that it cannot see such rewrites."""
    bucket = s3_here.new_bucket("old-plan")
    fs = s3_here.filesystem()
    fs.pipe({f"{bucket}/in/{k}": _rows(k, n=6) for k in ["a.jsonl", "b.jsonl"]})
    local = tmp_path / "out"
    job = _job(f"s3://{bucket}/in", local, local / "work")
    assert main(job) == 0
    kept = _kept_ids(local)
    plan = json.loads((local / "plan.json").read_text())
    del plan["versions"]
    (local / "plan.json").write_text(json.dumps(plan, indent=2, sort_keys=True))
    for stage in ("filter", "write"):  # the second shard is redone: a resume, not a no-op
        (local / "work" / "done" / f"{stage}_00001.done").unlink()
    capsys.readouterr()
    assert main(job) == 0
    err = capsys.readouterr().err
    assert err.count("records no input versions") == 1, err
    assert _kept_ids(local) == kept != []


def _bump(path: Path, data: bytes) -> None:
    """Write `data` at `path` with a later mtime (a coarse clock could give the same one)."""
    before = path.stat().st_mtime_ns
    path.write_bytes(data)
    os.utime(path, ns=(before + 10**9, before + 10**9))


def test_local_file_rewritten_same_size_is_refused_and_a_touch_is_silent(tmp_path, capsys):
    """The finished shard's marker holds its input's xxh3_128: a new mtime at the same size is
    hashed. The same bytes (a touch, a regenerated copy) resume silently, the new mtime taken into
    the marker (so the second rerun does not hash again); other bytes of that size are refused in
    one line; a marker without a hash (an older pretrain) resumes with one note, then is upgraded."""
    (tmp_path / "in").mkdir()
    for k in ["a.jsonl", "b.jsonl"]:
        (tmp_path / "in" / k).write_bytes(_rows(k, n=6))
    job = _job(str(tmp_path / "in"), tmp_path / "out", tmp_path / "out" / "work")
    assert main(job) == 0
    kept = _kept_ids(tmp_path / "out")
    b, marker = tmp_path / "in" / "b.jsonl", tmp_path / "out" / "work" / "done" / "filter_00001.done"
    import xxhash

    assert json.loads(marker.read_text())["input"]["xxh3_128"] == xxhash.xxh3_128_hexdigest(b.read_bytes())
    for _ in range(2):  # a touch, twice: no note either time
        _bump(b, b.read_bytes())
        capsys.readouterr()
        assert main(job) == 0
        assert capsys.readouterr().err == ""
        assert json.loads(marker.read_text())["input"]["mtime_ns"] == b.stat().st_mtime_ns
    assert _kept_ids(tmp_path / "out") == kept != []
    original = b.read_bytes()
    _bump(b, _same_size_other_bytes(original))
    assert main(job) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{b}: its bytes changed since this job read it" in err, err
    _bump(b, original)  # put back: resumes
    info = json.loads(marker.read_text())
    marker.write_text(json.dumps({"job_hash": info["job_hash"]}))  # as an older pretrain wrote it
    _bump(b, original)
    for notes in (1, 0):  # one note, then upgraded
        assert main(job) == 0
        assert capsys.readouterr().err.count(f"{b} was modified since this job read it") == notes
    assert "xxh3_128" in json.loads(marker.read_text())["input"]
    b.write_bytes(original + b"\n")  # another size: refused as before
    assert main(job) == 2


# ----------------------------------------------------------------------------- pretrain tokenize


def _tokenizer(tmp_path):
    from pretrain.tokens.tokenizer import train_tokenizer

    path = tmp_path / "tok.json"
    train_tokenizer([_rows(k, n=6).decode() for k in "ab"], vocab_size=300).save(str(path))
    return path


def _tokenize(src: str, out, tok, work) -> list[str]:
    # --work-dir stages URLs: with local paths only it is refused (nothing would go there)
    staged = ["--work-dir", str(work)] if "://" in src + str(out) else []
    return ["tokenize", src, "--tokenizer", str(tok), "-o", str(out), "--workers", "1", *staged]


def test_tokenize_object_rewritten_same_size_between_attempts_is_refused(s3_here, tmp_path, capsys):  # noqa: F811
    """The staged copy records the ETag its GET answered, the shard's marker the listing's: a rerun
    whose listing gives another ETag is refused (by the copy's record; without it, by the finished
    shard's marker once the new version is fetched), naming the object and both ETags."""
    bucket = s3_here.new_bucket("tok-etag")
    fs = s3_here.filesystem()
    fs.pipe({f"{bucket}/in/{k}": _rows(k, n=6) for k in ["a.jsonl", "b.jsonl"]})
    tok, out = _tokenizer(tmp_path), tmp_path / "tokens"
    job = _tokenize(f"s3://{bucket}/in", out, tok, tmp_path / "work")
    assert main(job) == 0
    assert main(job) == 0  # untouched: resumes, nothing to redo
    old = fs.info(f"{bucket}/in/b.jsonl")["ETag"]
    marker = json.loads((out / "shard_00001.done").read_text())
    assert marker["versions"] == {f"s3://{bucket}/in/b.jsonl": {"etag": old}}
    fs.pipe(f"{bucket}/in/b.jsonl", _same_size_other_bytes(_rows("b.jsonl", n=6)))
    new = fs.info(f"{bucket}/in/b.jsonl")["ETag"]
    for attempt in ("the copy's record", "the shard's marker"):
        capsys.readouterr()
        assert main(job) == 2, attempt
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, err
        assert f"s3://{bucket}/in/b.jsonl: changed since" in err and old in err and new in err, err
        shutil.rmtree(tmp_path / "work" / "versions")  # next: a copy without record, fetched again


def test_tokenize_url_output_of_other_inputs_from_another_staging_is_refused(s3_here, tmp_path, capsys):  # noqa: F811
    """A tokens OUT in a bucket, finished from one staging folder, then given other inputs from
    another (a teammate's machine, a cleared cache): the new job was uploaded over it, its manifest
    said 1 shard and the earlier job's shards 1 and 2 stayed beside it. Refused now, naming the
    objects; the same inputs from a third staging folder still run."""
    bucket = s3_here.new_bucket("tok-other")
    fs = s3_here.filesystem()
    fs.pipe({f"{bucket}/{k}": _rows(k, n=6) for k in ["in/a.jsonl", "in/b.jsonl", "other/c.jsonl"]})
    tok, out = _tokenizer(tmp_path), f"s3://{bucket}/tokens"
    assert main(_tokenize(f"s3://{bucket}/in", out, tok, tmp_path / "w1")) == 0
    before = fs.cat(f"{bucket}/tokens/manifest.json")
    said = capsys.readouterr().err  # each shard's input by its URL, not the staged copy's cache path
    assert f"documents <- s3://{bucket}/in/a.jsonl\n" in said and str(tmp_path / "w1") not in said, said
    assert main(_tokenize(f"s3://{bucket}/other", out, tok, tmp_path / "w2")) == 2
    err = capsys.readouterr().err
    assert f"{out} holds 2 shards made from other inputs" in err, err
    assert f"s3://{bucket}/in/a.jsonl no longer given" in err and f"s3://{bucket}/other/c.jsonl new" in err
    assert fs.cat(f"{bucket}/tokens/manifest.json") == before
    # the first staging folder, other inputs: its earlier copies were counted as inputs ("3 now")
    assert main(_tokenize(f"s3://{bucket}/other", out, tok, tmp_path / "w1")) == 2
    said = capsys.readouterr().err  # said of the URLs, not of the staging folder's copies
    assert f"{out} holds 2 shards" in said and f"s3://{bucket}/other/c.jsonl new" in said, said
    assert "(2 input files then, 1 now" in said and str(tmp_path) not in said, said
    assert main(_tokenize(f"s3://{bucket}/in", out, tok, tmp_path / "w3")) == 0
    assert fs.cat(f"{bucket}/tokens/manifest.json") != b"" and \
        json.loads(fs.cat(f"{bucket}/tokens/manifest.json"))["tokens"] == json.loads(before)["tokens"]


def test_tokenize_local_file_rewritten_same_size_is_refused_and_old_markers_resume(tmp_path, capsys):
    """As curate's (above): a touch resumes silently, for good; other bytes of the same size are
    refused in one line; markers without stamps resume, said once, then upgraded."""
    (tmp_path / "in").mkdir()
    for k in ["a.jsonl", "b.jsonl"]:
        (tmp_path / "in" / k).write_bytes(_rows(k, n=6))
    tok, out = _tokenizer(tmp_path), tmp_path / "tokens"
    job = _tokenize(str(tmp_path / "in"), out, tok, tmp_path / "work")
    assert main(job) == 0
    first = (out / "shard_00001.bin").read_bytes()
    b = tmp_path / "in" / "b.jsonl"
    for _ in range(2):  # a touch, twice: silent, the new mtime recorded
        _bump(b, b.read_bytes())
        capsys.readouterr()
        assert main(job) == 0
        said = capsys.readouterr()
        assert "note" not in said.err and "(already tokenized, nothing to do)" in said.out, said
        stamp = json.loads((out / "shard_00001.done").read_text())["versions"][str(b.resolve())]
        assert stamp["mtime_ns"] == b.stat().st_mtime_ns
    original = b.read_bytes()
    _bump(b, _same_size_other_bytes(original))
    assert main(job) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{b.resolve()}: its bytes changed since" in err, err
    assert (out / "shard_00001.bin").read_bytes() == first  # the finished shard is kept
    _bump(b, original)
    # markers as a pretrain before versions wrote them: the rerun resumes, said once, then upgraded
    for m in out.glob("shard_*.done"):
        info = json.loads(m.read_text())
        del info["versions"]
        m.write_text(json.dumps(info))
    for notes in (1, 0):
        capsys.readouterr()
        assert main(job) == 0
        assert capsys.readouterr().err.count("record no input versions") == notes
    m = out / "shard_00001.done"  # as session 7 wrote it (mtime only), then the file touched
    m.write_text(json.dumps({**json.loads(m.read_text()), "versions": {str(b.resolve()): {"mtime_ns": 1}}}))
    for notes in (1, 0):  # said once, then upgraded with its hash
        capsys.readouterr()
        assert main(job) == 0
        assert capsys.readouterr().err.count(f"{b.resolve()} was modified since this job read it") == notes
    (out / "shard_00000.done").unlink()  # as a run killed before that marker: one shard redone
    assert main(job) == 0
    assert "(1 shard written now, 1 already tokenized)" in capsys.readouterr().out


# ----------------------------------------------------------------------------- a 1M-input plan.json


CRAWL_INPUTS = 200_000  # 77 MB of plan.json, past the old 64 MiB; 1M inputs (384 MB) took ~10 s and 1.7 GB


def _crawl_plan(n: int) -> bytes:
    """plan.json of a curate job over `n` Common Crawl WARCs (125-character URLs, ETags), the bytes
    io.create_json writes for job.identity (indent 2, sorted keys: checked on 3 inputs), built
    from strings (json's indenting encoder is pure Python: 20 s for 1M inputs)."""
    from pretrain.curate.job import identity
    from pretrain.curate.pipeline import CurateConfig

    def url(i: int) -> str:
        return (f"s3://commoncrawl/crawl-data/CC-MAIN-2024-10/segments/1707947473347.{i % 100}/warc/"
                f"CC-MAIN-20240220211055-20240221001055-{i:06d}.warc.gz")

    def plan(k: int, ident: dict) -> str:
        head = json.dumps({**ident, "inputs": [], "versions": {}}, indent=2, sort_keys=True)
        urls = [url(i) for i in range(k)]
        inputs = ",\n".join([f'    {{\n      "path": "{u}",\n      "size": {1_100_000_000 + i}\n    }}'
                             for i, u in enumerate(urls)])
        stamps = ",\n".join([f'    "{u}": {{\n      "etag": "\\"{i:032x}-133\\""\n    }}'
                             for i, u in enumerate(urls)])
        return (head.replace('"inputs": []', f'"inputs": [\n{inputs}\n  ]')
                .replace('"versions": {}', f'"versions": {{\n{stamps}\n  }}') + "\n")

    urls = [url(i) for i in range(3)]
    ident = identity("curate", urls, CurateConfig(), {u: 1_100_000_000 + i for i, u in enumerate(urls)},
                     {u: {"etag": f'"{i:032x}-133"'} for i, u in enumerate(urls)})
    assert plan(3, ident) == json.dumps(ident, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    return plan(n, ident).encode()


def test_a_crawl_sized_plan_is_still_a_job_identity(tmp_path):
    """A crawl prefix of 200k files (1M measured once, not in the suite: ~10 s, 1.7 GB)
    (Common Crawl: 90k WARCs a dump; FineWeb: 25k+ Parquet files)
    gives a plan.json of ~380 bytes per input, over the 64 MiB that made a larger plan.json "not
    a job": its rejects/ were then read as input by a job over the folder (the report, which
    reads it under the same bound, could not say what ran; not rechecked here: each read of the
    384 MB is ~5 s)."""
    from pretrain.curate import outputs
    from pretrain.curate.readers import list_inputs

    out = tmp_path / "crawl" / "job"
    for sub in ("data", "rejects"):
        (out / sub).mkdir(parents=True)
    (out / "data" / "shard_00000.jsonl.zst").write_bytes(b"")
    (out / "rejects" / "filters_00000.jsonl.zst").write_bytes(b"")
    raw = _crawl_plan(CRAWL_INPUTS)
    assert 64 << 20 < len(raw) <= outputs.MAX_PLAN_BYTES, len(raw)
    (out / "plan.json").write_bytes(raw)
    del raw
    assert [p.relative_to(out) for p in list_inputs([str(tmp_path / "crawl")])] == [
        Path("data/shard_00000.jsonl.zst")]


def test_tokenize_url_output_emptied_is_made_again_not_trusted_to_its_markers(s3_here, tmp_path, capsys):  # noqa: F811
    """A tokens OUT in a bucket whose objects were all removed (a bucket emptied, a lifecycle rule)
    after a finished run: the rerun from the same staging folder, whose local markers say every
    shard is done, must make and upload the shards again, not say "nothing to do" over nothing.
    The truth: the first run's objects, byte for byte."""
    bucket = s3_here.new_bucket("tok-emptied")
    fs = s3_here.filesystem()
    fs.pipe({f"{bucket}/in/{k}": _rows(k, n=6) for k in ["a.jsonl", "b.jsonl"]})
    tok, out = _tokenizer(tmp_path), f"s3://{bucket}/tokens"
    job = _tokenize(f"s3://{bucket}/in", out, tok, tmp_path / "w1")
    assert main(job) == 0
    first = {k: fs.cat_file(k) for k in fs.find(f"{bucket}/tokens")}
    assert any(k.endswith("manifest.json") for k in first) and any(k.endswith(".bin") for k in first)
    fs.rm(list(first))
    assert fs.find(f"{bucket}/tokens") == []
    capsys.readouterr()
    assert main(job) == 0
    said = capsys.readouterr()
    again = {k: fs.cat_file(k) for k in fs.find(f"{bucket}/tokens")}
    assert again == first, (sorted(again), said)
    # said as what happened: the shards were made here before, the bucket's copies uploaded again
    n = len(first)
    assert f"{out}: {n} of {n} files missing there (removed since?), uploaded again" in said.err, said.err
    assert "nothing to do" not in said.out and f"{n} files uploaded again" in said.out, said.out
    assert main(job) == 0  # and now it has nothing to do
    said = capsys.readouterr()
    assert "missing there" not in said.err and "(already tokenized, nothing to do)" in said.out, said
    assert {k: fs.cat_file(k) for k in fs.find(f"{bucket}/tokens")} == first


def test_a_job_output_inside_a_url_input_is_told_by_its_plan_counted_as_streamed(s3_here, tmp_path):  # noqa: F811
    """`dedup s3://b/in` where in/job/ is a corpus job's OUT: its rejects/ are left out (its
    plan.json a job's identity). A plan.json there of too many values for its bound (here 1 MiB:
    65,536 values) is not one, counted a range at a time, not read whole first."""
    from pretrain.curate import outputs

    bucket = s3_here.new_bucket("job-in-url")
    fs = s3_here.filesystem()
    fs.pipe({f"{bucket}/src/s.jsonl": _rows("s", n=6), f"{bucket}/in/a.jsonl": _rows("a", n=6)})
    assert main(_job(f"s3://{bucket}/src", f"s3://{bucket}/in/job", tmp_path / "w0")) == 0
    fs.pipe(f"{bucket}/in/job/rejects/extra.jsonl", _rows("rejected", n=6))  # what a job OUT may hold
    assert main(_job(f"s3://{bucket}/in", tmp_path / "o1", tmp_path / "w1")) == 0
    kept = _kept_ids(tmp_path / "o1")
    assert any(i.startswith("a-") for i in kept) and not any(i.startswith("rejected") for i in kept), kept
    plan = json.loads(fs.cat_file(f"{bucket}/in/job/plan.json"))
    fs.pipe(f"{bucket}/in/job/plan.json", json.dumps({**plan, "pad": [0] * 70_000}).encode())
    old = outputs.MAX_PLAN_BYTES
    try:
        outputs.MAX_PLAN_BYTES = 1 << 20
        assert main(_job(f"s3://{bucket}/in", tmp_path / "o2", tmp_path / "w2")) == 0
    finally:
        outputs.MAX_PLAN_BYTES = old
    assert any(i.startswith("rejected") for i in _kept_ids(tmp_path / "o2"))  # not a job's: read
