"""Object storage that refuses: an endpoint nobody answers on, no credentials, a wrong key.

Each is what a user meets first on a new cluster; each must be one line naming what to check,
never botocore's traceback, and never a hang. The S3 API server is moto's (tests/s3server.py); a
wrong key is refused by that same server with its authentication turned on (moto checks keys only
when `settings.INITIAL_NO_AUTH_ACTION_COUNT` allows no anonymous action).
"""

from __future__ import annotations

import json
import socket

import pytest
from s3server import CREDENTIALS, _forget_cached_filesystems, s3  # noqa: F401  (the fixture)

from pretrain.cli import main


@pytest.fixture(scope="module")
def filled(s3):  # noqa: F811
    """A bucket holding `in/part.jsonl` (3 documents)."""
    name = s3.new_bucket("err")
    rows = [{"id": str(i), "text": f"document number {i} " * 20} for i in range(3)]
    s3.filesystem().pipe(f"{name}/in/part.jsonl", "".join(json.dumps(r) + "\n" for r in rows).encode())
    return name


@pytest.fixture
def bucket(s3, filled, monkeypatch):  # noqa: F811
    """`filled`, the environment aimed at the server, botocore's retries cut to one try (s3fs
    still retries a few times, under 2 s)."""
    name = filled
    for k, v in {**CREDENTIALS, "AWS_ENDPOINT_URL_S3": s3.endpoint, "AWS_ENDPOINT_URL": s3.endpoint,
                 "AWS_MAX_ATTEMPTS": "1", "AWS_EC2_METADATA_DISABLED": "true"}.items():
        monkeypatch.setenv(k, v)
    _forget_cached_filesystems()  # io.url_fs builds its client from the environment
    yield name
    _forget_cached_filesystems()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: nobody listens there


def _one_line(capsys, rc: int) -> str:
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize("job", ["curate", "dedup"])
def test_an_endpoint_nobody_answers_on_is_one_line(bucket, tmp_path, monkeypatch, capsys, job):
    url = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", url)
    monkeypatch.setenv("AWS_ENDPOINT_URL", url)
    rc = main([job, f"s3://{bucket}/in", "-o", str(tmp_path / "out"), "--workers", "1", "--quiet"])
    err = _one_line(capsys, rc)
    assert f"s3://{bucket}/in" in err and url in err and "list-type" not in err, err


def test_no_credentials_is_one_line_saying_what_to_set(bucket, tmp_path, monkeypatch, capsys):
    for k in CREDENTIALS:
        monkeypatch.delenv(k)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    rc = main(["curate", f"s3://{bucket}/in", "-o", str(tmp_path / "out"), "--workers", "1", "--quiet"])
    err = _one_line(capsys, rc)
    assert "credentials" in err and "AWS_ACCESS_KEY_ID" in err, err


def test_a_key_the_server_does_not_know_is_one_line(bucket, tmp_path, monkeypatch, capsys):
    import moto.settings

    monkeypatch.setattr(moto.settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)  # the server checks keys now
    rc = main(["curate", f"s3://{bucket}/in", "-o", str(tmp_path / "out"), "--workers", "1", "--quiet"])
    err = _one_line(capsys, rc)
    assert f"s3://{bucket}/in" in err and "Access Key Id" in err, err


@pytest.mark.parametrize("spec", ["s3://bench/gsm8k/test.jsonl", "s3://bench/gsm8k/test.jsonl:question"])
def test_a_benchmark_url_is_refused_naming_it_not_cut_at_its_colon(tmp_path, capsys, spec):
    (tmp_path / "in.jsonl").write_text(json.dumps({"id": "1", "text": "a b c d e f g h i j k l m n"}) + "\n")
    rc = main(["decontaminate", str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "out"),
               "--benchmarks", spec, "--quiet"])
    err = _one_line(capsys, rc)
    assert spec.split(":question")[0] in err and "local" in err, err  # was "benchmark not found: s3"


def test_report_of_a_bucket_nobody_answers_for_is_one_line_naming_it(bucket, tmp_path, monkeypatch, capsys):
    """The report reads a bucket (tests/test_report_s3.py); an endpoint down is the store's line
    naming the URL (it said "not found" before the report read buckets at all)."""
    url = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", url)
    monkeypatch.setenv("AWS_ENDPOINT_URL", url)
    rc = main(["report", f"s3://{bucket}/corpus", "-o", str(tmp_path / "r.html")])
    err = _one_line(capsys, rc)
    assert f"cannot read s3://{bucket}/corpus" in err and url in err and "not found" not in err, err
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("key", ["classifier.model", "language.model_path", "url_filter.domain_files"])
def test_a_model_or_list_url_is_refused_naming_it_whole(tmp_path, capsys, key):
    """Path() folded `s3://models/m.json` into `s3:/models/m.json` and said "not found" of it."""
    (tmp_path / "in.jsonl").write_text(json.dumps({"id": "1", "text": "a b c d e f g h i j k l m n"}) + "\n")
    url = "s3://models/m.json"
    value = json.dumps([url] if key.endswith("files") else url)
    rc = main(["curate", str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "out"), "--quiet",
               "--set", 'steps=["url_filter","language","classifier"]', "--set", f"{key}={value}"])
    err = _one_line(capsys, rc)
    assert f"{url}: a URL, and only a local file is read here" in err and "not found" not in err, err
    assert not (tmp_path / "out").exists()
