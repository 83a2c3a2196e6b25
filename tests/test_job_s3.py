"""Corpus jobs on object storage: a real S3 API server (moto, started here) and fsspec's memory://.

The S3 round trip is the issue's: curate WARCs from the server into the server, SIGKILL it and
rerun, and the objects are byte-identical to the local run's files.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from s3server import Requests, s3  # noqa: F401  (s3: the fixture)
from test_pipeline import DEMO, _ids, _snapshot, _write_jsonl_corpus

from pretrain.curate import io
from pretrain.curate.executor import LocalExecutor
from pretrain.curate.pipeline import CurateConfig, curate
from pretrain.errors import UserError

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _cli(args: list[str], env: dict, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pretrain", *args, "--quiet"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def _objects(fs, prefix: str) -> dict[str, bytes]:
    prefix = prefix.rstrip("/")
    return {p.lstrip("/")[len(prefix.lstrip("/")) + 1:]: fs.cat_file(p) for sub in ("data", "rejects")
            for p in sorted(fs.find(f"{prefix}/{sub}"))}


@pytest.mark.slow
def test_curate_warcs_s3_to_s3_sigkill_rerun_same_bytes_as_local(tmp_path, s3):  # noqa: F811
    local_in = tmp_path / "in"
    local_in.mkdir()
    for name in ("a", "b"):  # two shards; b re-crawls a: cross-shard duplicates
        shutil.copy(DEMO, local_in / f"{name}.warc.gz")
    env = dict(s3.env(), PYTHONPATH=SRC)
    ref = tmp_path / "ref"
    p = _cli(["curate", str(local_in), "-o", str(ref), "--workers", "2"], env)
    assert p.wait(timeout=300) == 0, p.stderr.read().decode()[-2000:]

    bucket = s3.new_bucket()
    fs = s3.filesystem()
    fs.put(str(local_in), f"{bucket}/crawl", recursive=True)
    job = ["curate", f"s3://{bucket}/crawl", "-o", f"s3://{bucket}/corpus", "--workers", "2",
           "--work-dir", str(tmp_path / "work")]
    rng = random.Random(11)
    for _ in range(2):
        p = _cli(job, env, start_new_session=True)
        time.sleep(rng.uniform(1.0, 4.0))
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    p = _cli(job, env)
    assert p.wait(timeout=300) == 0, p.stderr.read().decode()[-2000:]
    got = _objects(s3.filesystem(), f"{bucket}/corpus")
    assert got == _snapshot(ref) and got
    assert json.loads(fs.cat_file(f"{bucket}/corpus/stats.json"))["documents"] == \
        json.loads((ref / "stats.json").read_text())["documents"]
    assert all(n.endswith(".jsonl.zst") for n in got)  # no markers or temp files beside the data
    # the job's identity lives in the bucket: other inputs into that OUT are refused
    p = _cli(["curate", f"s3://{bucket}/crawl/a.warc.gz", "-o", f"s3://{bucket}/corpus",
              "--work-dir", str(tmp_path / "work2")], env)
    said = p.stderr.read() if p.wait(timeout=120) == 2 else b"exit %d" % p.returncode
    assert b"holds another job" in said and b"lacks 1 (s3://" in said, said  # names b.warc.gz


def test_memory_filesystem_round_trip_equals_local(tmp_path):
    import fsspec

    _write_jsonl_corpus(tmp_path / "in", files=3, per_file=10)
    fs = fsspec.filesystem("memory")
    fs.put(str(tmp_path / "in"), "/src-i13", recursive=True)
    cfg = CurateConfig()
    curate([str(tmp_path / "in")], tmp_path / "ref", cfg, executor=LocalExecutor(1))
    curate(["memory://src-i13"], "memory://out-i13", cfg, executor=LocalExecutor(1),
           work_dir=tmp_path / "work")
    got = _objects(fs, "/out-i13")
    assert got == _snapshot(tmp_path / "ref") and got
    kept = [r["id"] for p in sorted(fs.find("/out-i13/data")) for r in io.read_jsonl_zst(f"memory://{p}")]
    assert kept == list(_ids(tmp_path / "ref", "data"))
    with pytest.raises(UserError, match="input not found"):
        curate(["memory://nothing-here"], "memory://out2-i13", cfg, executor=LocalExecutor(1),
               work_dir=tmp_path / "work2")
    fs.rm("/out-i13", recursive=True)
    fs.rm("/src-i13", recursive=True)


def test_tokenize_from_and_to_memory_urls_same_shards_as_local(tmp_path):
    import fsspec
    from test_pipeline import _prose

    from pretrain.cli import main
    from pretrain.tokens.tokenizer import train_tokenizer

    docs = _prose(40, seed=9)
    (tmp_path / "in").mkdir()
    for f in range(2):
        rows = [{"id": f"{f}-{i}", "text": t} for i, t in enumerate(docs[f * 20:(f + 1) * 20])]
        (tmp_path / "in" / f"part{f}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    tok = tmp_path / "tok.json"
    train_tokenizer(docs, vocab_size=300).save(str(tok))
    assert main(["tokenize", str(tmp_path / "in"), "--tokenizer", str(tok), "-o", str(tmp_path / "local"),
                 "--workers", "1"]) == 0
    fs = fsspec.filesystem("memory")
    fs.put(str(tmp_path / "in"), "/tok-in-i13", recursive=True)
    args = ["tokenize", "memory://tok-in-i13", "--tokenizer", str(tok), "-o", "memory://tok-out-i13",
            "--workers", "1", "--work-dir", str(tmp_path / "work")]
    assert main(args) == 0
    assert main(args) == 0  # a rerun resumes: nothing to redo, the same objects
    fs.put(str(tmp_path / "in" / "part0.jsonl"), "/tok-in-i13-b/part9.jsonl")
    other = ["tokenize", "memory://tok-in-i13-b", "--tokenizer", str(tok), "-o", "memory://tok-out-i13",
             "--workers", "1", "--work-dir", str(tmp_path / "work-b")]  # another staging: refused there
    before = fs.cat_file("/tok-out-i13/manifest.json")
    assert main(other) == 2 and fs.cat_file("/tok-out-i13/manifest.json") == before
    fs.rm("/tok-in-i13-b", recursive=True)
    local = {p.name: p.read_bytes() for p in (tmp_path / "local").iterdir() if p.suffix in (".bin", ".idx")}
    remote = {p.rsplit("/", 1)[-1]: fs.cat_file(p) for p in fs.find("/tok-out-i13")}
    assert local and {k: remote[k] for k in local} == local
    man = json.loads(remote["manifest.json"])
    assert man["tokens"] == json.loads((tmp_path / "local" / "manifest.json").read_text())["tokens"]
    fs.rm("/tok-out-i13", recursive=True)
    fs.rm("/tok-in-i13", recursive=True)


@pytest.fixture
def s3_here(s3, monkeypatch):  # noqa: F811
    """The S3 server for s3:// URLs opened in this process (fsspec caches filesystems: cleared)."""
    import s3fs

    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3.endpoint)
    s3fs.S3FileSystem.clear_instance_cache()
    yield s3
    s3fs.S3FileSystem.clear_instance_cache()


def test_in_process_units_prefetch_next_input_same_bytes_and_resume(tmp_path, s3_here):
    _write_jsonl_corpus(tmp_path / "in", files=3, per_file=10)
    cfg = CurateConfig()
    curate([str(tmp_path / "in")], tmp_path / "ref", cfg, executor=LocalExecutor(1))
    bucket = s3_here.new_bucket()
    fs = s3_here.filesystem()
    fs.put(str(tmp_path / "in"), f"{bucket}/in", recursive=True)
    names = sorted(p.name for p in (tmp_path / "in").iterdir())
    work = tmp_path / "work"
    job = ([f"s3://{bucket}/in"], f"s3://{bucket}/out", cfg)
    with Requests() as log:
        curate(*job, executor=LocalExecutor(1), work_dir=work)
    assert _objects(fs, f"{bucket}/out") == _snapshot(tmp_path / "ref")
    # the next shard's input is fetched while this shard runs: before this shard's rejects go up
    assert log.lines.index(f"GET in/{names[1]}") < log.lines.index("PUT out/rejects/filters_00000.jsonl.zst")
    assert log.lines.count(f"GET in/{names[1]}") == 1
    assert not list((work / "tmp").glob("input_*"))  # no local copy outlives its shard
    # resume: shard 0 runs again and prefetches shard 1, which is done: its copy is dropped
    for stage in ("filter", "write"):
        (work / "done" / f"{stage}_00000.done").unlink()
    curate(*job, executor=LocalExecutor(1), work_dir=work)
    assert _objects(fs, f"{bucket}/out") == _snapshot(tmp_path / "ref")
    assert not list((work / "tmp").glob("input_*"))


def test_uploads_together_appear_at_the_end_whole_or_not_at_all(tmp_path, s3_here):
    bucket = s3_here.new_bucket()
    fs = s3_here.filesystem()
    blobs = {f"{bucket}/t/{i}.bin": os.urandom(200_000 + i) for i in range(3)}
    with Requests() as log, io.uploads_together():
        for key, data in blobs.items():
            io.write_bytes_atomic(f"s3://{key}", data, tmp_path / "tmp")
        assert not fs.exists(f"{bucket}/t/0.bin")  # nothing is visible before the block ends
    assert {k: fs.cat_file(k) for k in blobs} == blobs
    assert sorted(x for x in log.lines if x.startswith("PUT")) == [f"PUT t/{i}.bin" for i in range(3)]
    with pytest.raises(RuntimeError), io.uploads_together():
        io.write_bytes_atomic(f"s3://{bucket}/u/0.bin", b"x", tmp_path / "tmp")
        raise RuntimeError("the unit failed after writing")
    assert not fs.exists(f"{bucket}/u/0.bin")
    assert not list((tmp_path / "tmp").iterdir())  # temporary files removed either way


def test_a_rerun_aborts_the_multipart_uploads_a_killed_attempt_left_in_out(tmp_path, s3_here):
    """s3fs uploads a file over 100 MB (two 50 MiB chunks) in parts; a SIGKILL between its parts
    leaves the upload open, its parts billed until someone aborts it. Made here with the client's
    own calls (a 100 MB shard would make the test slow), as the killed put_file left them."""
    _write_jsonl_corpus(tmp_path / "in", files=2, per_file=5)
    bucket = s3_here.new_bucket()
    fs = s3_here.filesystem()
    job = ([str(tmp_path / "in")], f"s3://{bucket}/out", CurateConfig())
    curate(*job, executor=LocalExecutor(1), work_dir=tmp_path / "work")

    def open_upload(key: str) -> None:
        up = fs.call_s3("create_multipart_upload", Bucket=bucket, Key=key)
        fs.call_s3("upload_part", Bucket=bucket, Key=key, UploadId=up["UploadId"], PartNumber=1,
                   Body=b"x" * 64)

    for key in ("out/data/shard_00001.jsonl.zst", "out/rejects/filters_00000.jsonl.zst",
                "out/notes/theirs.bin", "outside/data/shard_00001.jsonl.zst"):
        open_upload(key)
    (tmp_path / "work" / "done" / "write_00000.done").unlink()  # a job of one shard (2 small files)
    curate(*job, executor=LocalExecutor(1), work_dir=tmp_path / "work")
    left = sorted(u["Key"] for u in fs.call_s3("list_multipart_uploads", Bucket=bucket).get("Uploads", []))
    assert left == ["out/notes/theirs.bin", "outside/data/shard_00001.jsonl.zst"]  # only the job's own
    assert _objects(fs, f"{bucket}/out") == _snapshot(_local_run(tmp_path, job[2]))


def _local_run(tmp_path: Path, cfg: CurateConfig) -> Path:
    curate([str(tmp_path / "in")], tmp_path / "ref", cfg, executor=LocalExecutor(1))
    return tmp_path / "ref"
