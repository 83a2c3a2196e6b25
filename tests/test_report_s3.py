"""`pretrain report s3://...` against a real S3 API server (moto, tests/s3server.py): a corpus job
curated into the bucket, a real tiny training run and a token directory copied into it. The page
of each URL equals the page of the same folder downloaded to this disk (the same funnel numbers,
reject examples, clusters, curves: byte for byte once the sources are named alike), and the
report fetched only the small files (never a data shard whole, never a checkpoint)."""

from __future__ import annotations

import json
import re

import pytest
from s3server import Requests, s3  # noqa: F401  (s3: the fixture)
from test_pipeline import _write_jsonl_corpus

from pretrain.curate.executor import LocalExecutor
from pretrain.curate.pipeline import CurateConfig, curate
from pretrain.report import build_report

pytestmark = pytest.mark.usefixtures("restore_torch_threads")


@pytest.fixture(scope="module")
def bucket(s3, tmp_path_factory):  # noqa: F811
    """A bucket holding corpus/ (curated into it), run/ (a tiny run, checkpoints included) and
    tokens/; returns (bucket, local copies of the three folders)."""
    import s3fs

    from pretrain.cli import main
    from pretrain.tokens.tokenizer import train_tokenizer
    from pretrain.train.testing import fallback_text, tiny_config
    from pretrain.train.trainer import Trainer

    mp = pytest.MonkeyPatch()
    mp.setenv("AWS_ENDPOINT_URL_S3", s3.endpoint)
    s3fs.S3FileSystem.clear_instance_cache()
    tmp = tmp_path_factory.mktemp("report-s3")
    name, fs = s3.new_bucket(), s3.filesystem()
    _write_jsonl_corpus(tmp / "in", files=2, per_file=20)
    curate([str(tmp / "in")], f"s3://{name}/corpus", CurateConfig(), executor=LocalExecutor(1),
           work_dir=tmp / "work")
    text = fallback_text(tmp / "topics.txt")
    Trainer(tiny_config(tmp / "run", text, "train.steps=6", "checkpoint.every=3"), quiet=True).fit()
    (tmp / "run" / "samples.txt").write_text("The quick brown fox\n")
    fs.put(str(tmp / "run"), f"{name}/run", recursive=True)
    tok = tmp / "tok.json"
    train_tokenizer([text.read_text()[:20000]], vocab_size=300).save(str(tok))
    assert main(["tokenize", str(tmp / "in"), "--tokenizer", str(tok), "-o", str(tmp / "tokens"),
                 "--workers", "1"]) == 0
    fs.put(str(tmp / "tokens"), f"{name}/tokens", recursive=True)
    fs.get(f"{name}/corpus", str(tmp / "corpus"), recursive=True)  # the same folder, here
    yield name, {"corpus": tmp / "corpus", "run": tmp / "run", "tokens": tmp / "tokens"}
    mp.undo()
    s3fs.S3FileSystem.clear_instance_cache()


def _same_names(page: str, names: dict[str, str]) -> str:
    """The page with each source (a URL or a local folder) written as its short name, and the
    time stamp removed: what is left are the numbers and figures."""
    for src, short in names.items():
        page = page.replace(src, short)
    return re.sub(r"generated [^<]* by pretrain", "generated", page)


def _count_fetched_bytes(monkeypatch) -> dict[str, int]:
    """Bytes each object's ranged reads fetched (s3fs's own reads: read-ahead included)."""
    import s3fs

    fetched: dict[str, int] = {}
    real = s3fs.core.S3File._fetch_range

    def counted(self, start, end):
        data = real(self, start, end)
        fetched[self.path] = fetched.get(self.path, 0) + len(data)
        return data

    monkeypatch.setattr(s3fs.core.S3File, "_fetch_range", counted)
    return fetched


def test_report_of_urls_equals_report_of_the_same_folders_here(bucket):
    name, local = bucket
    urls = [f"s3://{name}/{k}" for k in local]
    with Requests() as log:
        remote = build_report(urls)
    here = build_report([str(p) for p in local.values()])
    names = {**{u: k for u, k in zip(urls, local)}, **{str(p): k for k, p in local.items()}}
    assert _same_names(remote, names) == _same_names(here, names)
    stats = json.loads((local["corpus"] / "stats.json").read_text())
    d = stats["documents"]
    assert f"<b>{d['kept']:,}</b><span>kept</span>" in remote and d["dropped"] > 0  # a real funnel
    assert remote.count("data:image/png") == 3  # funnel, curves, lengths: the same PNGs as above
    # only what the page needs: no checkpoint, no TensorBoard file
    gets = [line for line in log.lines if line.startswith("GET")]
    assert "GET run/metrics.jsonl" in gets and not [g for g in gets if "checkpoints/" in g or "tfevents" in g]


def test_missing_and_unknown_urls_are_one_line_naming_them(bucket, tmp_path, capsys):
    import s3fs

    from pretrain.cli import main

    name, _ = bucket
    fs = s3fs.S3FileSystem(skip_instance_cache=True)
    fs.pipe_file(f"{name}/other/readme.txt", b"not a pretrain output")
    fs.pipe_file(f"{name}/cut.json", b'{"sources": [')  # one object, a JSON cut short
    cases = ((f"s3://{name}/nothing-here", "not found"), (f"s3://{name}/other", "not a curate output"),
             (f"s3://{name}/cut.json", "not valid JSON"))
    for url, why in cases:
        capsys.readouterr()
        assert main(["report", url, "-o", str(tmp_path / "r.html")]) == 2
        err = capsys.readouterr().err
        assert url in err and why in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "r.html").exists()


def test_killed_corpus_job_in_the_bucket_is_named_unfinished(bucket, tmp_path):
    """What a curate SIGKILLed before its end leaves in OUT: plan.json and config.toml (and some
    shards), no stats.json. The report says to rerun the job, naming the URL."""
    import s3fs

    name, local = bucket
    fs = s3fs.S3FileSystem(skip_instance_cache=True)
    for f in ("plan.json", "config.toml"):
        fs.put_file(str(local["corpus"] / f), f"{name}/killed/{f}")
    with pytest.raises(ValueError, match=rf"s3://{name}/killed: a pretrain curate job that has not finished"):
        build_report([f"s3://{name}/killed"])


def test_run_still_writing_its_metrics_is_reported_to_its_last_whole_line(bucket):
    """A run directory synced to the bucket while the run writes: metrics.jsonl ends in half a
    line. The page stops at the last whole step and says the run is short of its target."""
    import s3fs

    name, local = bucket
    fs = s3fs.S3FileSystem(skip_instance_cache=True)
    lines = (local["run"] / "metrics.jsonl").read_bytes().splitlines(keepends=True)
    steps = [json.loads(x) for x in lines if b'"loss"' in x and b'"event"' not in x]
    cut = lines.index(next(x for x in lines if json.loads(x).get("step") == steps[3]["step"]
                           and b'"loss"' in x))
    torn = b"".join(lines[:cut]) + lines[cut][: len(lines[cut]) // 2]
    fs.pipe_file(f"{name}/live/metrics.jsonl", torn)
    fs.put_file(str(local["run"] / "config.toml"), f"{name}/live/config.toml")
    page = build_report([f"s3://{name}/live"])
    target = 6
    assert f"<b>{steps[2]['step']} of {target}</b>" in page  # the torn step 4 is not counted
    assert f"stopped at step {steps[2]['step']} of {target}" in page


def test_rejects_are_read_in_small_ranges_not_a_first_50_mib_block(bucket, monkeypatch):
    """s3fs reads ahead 50 MiB by default: the page's first few rejects cost the first 50 MiB of
    each rejects object. Counted at the client's ranged GETs (s3fs's S3File._fetch_range) and in
    the server's log: an 8 MiB rejects object of which the report reads its first records is
    fetched in about 1 MiB (the whole object before)."""
    import os

    import s3fs
    import zstandard

    import pretrain.report_corpus as rc

    name, local = bucket
    fs = s3fs.S3FileSystem(skip_instance_cache=True)
    for f in ("stats.json", "plan.json", "config.toml"):
        fs.put_file(str(local["corpus"] / f), f"{name}/big/{f}")
    rows = b"".join(json.dumps({"id": f"r{i}", "step": "filters", "reason": "too_short",
                                "text": os.urandom(3000).hex()}).encode() + b"\n" for i in range(2800))
    blob = zstandard.ZstdCompressor(level=1).compress(rows)
    assert len(blob) > 8 << 20  # random hex: zstd keeps about half of it
    fs.pipe_file(f"{name}/big/rejects/filters_00000.jsonl.zst", blob)
    monkeypatch.setattr(rc, "MAX_SCANNED", 5)  # the page reads the first records only
    fetched = _count_fetched_bytes(monkeypatch)
    with Requests() as log:
        page = build_report([f"s3://{name}/big"])
    assert "r0" in page  # the first reject is shown
    key = f"{name}/big/rejects/filters_00000.jsonl.zst"
    assert 0 < fetched[key] <= (1 << 20) + (256 << 10), fetched
    assert 1 <= log.lines.count("GET big/rejects/filters_00000.jsonl.zst") <= 2, log.lines


def test_metrics_over_the_limit_are_refused_alike_here_and_in_the_bucket(bucket, tmp_path, monkeypatch,
                                                                         capsys):
    """One bound for metrics.jsonl wherever the run lies: the local report holds every record
    (~830 bytes of Python objects per 146-byte line), so it refuses what the bucket's refuses, in
    the same line. With the bound set just under this run's file: both refuse; a sparse file of
    1 GiB + 1 byte (nothing read) is refused here under the real bound."""
    import shutil

    import pretrain.report_remote as rr
    from pretrain.cli import main

    name, local = bucket
    size = (local["run"] / "metrics.jsonl").stat().st_size
    monkeypatch.setattr(rr, "MAX_LARGE", size - 1)
    lines = []
    for arg in (str(local["run"]), f"s3://{name}/run"):
        capsys.readouterr()
        assert main(["report", arg, "-o", str(tmp_path / "r.html")]) == 2, arg
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"{size:,} bytes, over the {size - 1:,} bytes" in err, err
        lines.append(err.replace(str(local["run"]), "RUN").replace(f"s3://{name}/run", "RUN"))
    assert lines[0] == lines[1]
    monkeypatch.undo()
    big = tmp_path / "big-run"
    shutil.copytree(local["run"], big, ignore=shutil.ignore_patterns("checkpoints", "*tfevents*"))
    with open(big / "metrics.jsonl", "r+b") as f:
        f.truncate((1 << 30) + 1)
    assert main(["report", str(big), "-o", str(tmp_path / "r.html")]) == 2
    assert f"{big / 'metrics.jsonl'}: {(1 << 30) + 1:,} bytes, over the" in capsys.readouterr().err


def test_heads_are_fetched_as_read_not_a_first_50_mib_block(bucket, monkeypatch):
    """The report shows the first 16 KiB of samples.txt: a 4 MiB one costs about that, not the
    min(size, 50 MiB) of s3fs's read-ahead (counted at s3fs's ranged GETs, as above)."""
    import s3fs

    name, local = bucket
    fs = s3fs.S3FileSystem(skip_instance_cache=True)
    for f in ("metrics.jsonl", "config.toml"):
        fs.put_file(str(local["run"] / f), f"{name}/wordy/{f}")
    fs.pipe_file(f"{name}/wordy/samples.txt", b"Once upon a time.\n" * (4 << 16))
    fetched = _count_fetched_bytes(monkeypatch)
    assert "Once upon a time." in build_report([f"s3://{name}/wordy"])
    assert 16_384 <= fetched[f"{name}/wordy/samples.txt"] <= 16_385, fetched
