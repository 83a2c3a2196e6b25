"""Inputs listed from a bucket: what the listing costs, odd keys, objects that change under a job.

A bucket of many small objects (a crawl split per page, a corpus per document) is listed by pages
of 1,000 keys; each request more per object is one round trip more per object on a remote bucket
(30 ms each: 5 minutes for 10,000 objects). The S3 API server is moto's (tests/s3server.py).
"""

from __future__ import annotations

import json

import pytest
from s3server import Requests, s3, wrapped_server  # noqa: F401  (s3: the fixture)
from test_job_s3 import s3_here  # noqa: F401  (the fixture)

from pretrain.cli import main
from pretrain.curate import io

KEYS = ["plain.jsonl", "sp ace/a b.jsonl", "uni/é日本.jsonl", "dots/../escape.jsonl", "q/what?.jsonl"]


def _rows(key: str, n: int = 4) -> bytes:
    return "".join(json.dumps({"id": f"{key}-{i}", "text": f"{key} line {i % 2} " * 30}) + "\n"
                   for i in range(n)).encode()


def _kept_ids(out) -> list[str]:
    return sorted(r["id"] for p in sorted((out / "data").glob("*.jsonl.zst")) for r in io.read_jsonl_zst(p))


def test_a_prefix_is_listed_once_and_no_object_is_asked_its_size(s3_here, tmp_path, capsys):  # noqa: F811
    bucket = s3_here.new_bucket("list")
    fs = s3_here.filesystem()
    fs.pipe({f"{bucket}/in/{k}": _rows(k) for k in KEYS})
    with Requests() as log:
        rc = main(["dedup", f"s3://{bucket}/in", "-o", str(tmp_path / "out"), "--workers", "1", "--quiet"])
    assert rc == 0, capsys.readouterr().err
    listings = [r for r in log.seen if r[0] == "GET" and "list-type=2" in r[2]]
    heads = [r for r in log.seen if r[0] == "HEAD"]
    assert len(listings) == 1, listings  # isdir then find listed the prefix twice: 20 pages for 10k keys
    assert heads == [], heads  # the listing gives each size; a HEAD per object cost 13 s for 10k on moto
    gets = sorted(r[1] for r in log.seen if r[0] == "GET" and "list-type" not in r[2])
    # each object read once, odd keys included; a key with a `..` part is skipped and said (it could
    # name a local path out of the work folder: test_untrusted_files)
    assert len(gets) == len(KEYS) - 1
    assert "skipped 1 object under" in capsys.readouterr().err
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    read = [k for k in KEYS if ".." not in k]
    assert sorted(i["size"] for i in plan["inputs"]) == sorted(len(_rows(k)) for k in read)
    # same documents kept as the same files read from local disk
    for k in read:
        (tmp_path / "in" / k).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "in" / k).write_bytes(_rows(k))
    ref = ["dedup", str(tmp_path / "in"), "-o", str(tmp_path / "ref"), "--workers", "1", "--quiet"]
    assert main(ref) == 0
    assert _kept_ids(tmp_path / "out") == _kept_ids(tmp_path / "ref") != []
    assert not list((tmp_path / "out").glob("**/*escape*")) and not list(tmp_path.glob("escape*"))


def test_each_kind_of_input_url_lists_what_it_names(s3_here, tmp_path):  # noqa: F811
    from pretrain.curate.job import list_any_inputs

    bucket = s3_here.new_bucket("kinds")
    fs = s3_here.filesystem()
    fs.pipe({f"{bucket}/in/{k}": _rows(k) for k in ["a.jsonl", "b.jsonl", "sub/c.jsonl", "skip.png"]})
    fs.pipe(f"{bucket}/input.jsonl", _rows("x"))  # shares the prefix "in" but is not under in/
    for url, want in [(f"s3://{bucket}/in", ["a.jsonl", "b.jsonl", "sub/c.jsonl"]),
                      (f"s3://{bucket}/in/", ["a.jsonl", "b.jsonl", "sub/c.jsonl"]),
                      (f"s3://{bucket}/in/sub/c.jsonl", ["c.jsonl"]),
                      (f"s3://{bucket}/in/*.jsonl", ["a.jsonl", "b.jsonl"])]:
        sizes: dict[str, int] = {}
        got = list_any_inputs([url], sizes=sizes)
        assert [src for _, src in got] == want, url
        assert sizes == {f: fs.size(f) for f, _ in got}


@pytest.mark.parametrize("change", ["rewritten", "removed"])
def test_an_object_rewritten_between_listing_and_reading_is_refused_naming_it(s3_here, tmp_path,  # noqa: F811
                                                                               monkeypatch, capsys, change):
    import pretrain.curate.job as job

    bucket = s3_here.new_bucket("change")
    fs = s3_here.filesystem()
    fs.pipe({f"{bucket}/in/{k}": _rows(k) for k in ["a.jsonl", "b.jsonl"]})
    real = job.identity

    def listed_then_rewritten(*args, **kw):  # another writer replaces b.jsonl once the job has listed it
        ident = real(*args, **kw)
        if change == "removed":
            fs.rm(f"{bucket}/in/b.jsonl")
        else:
            fs.pipe(f"{bucket}/in/b.jsonl", _rows("b.jsonl", n=9))
        return ident

    monkeypatch.setattr(job, "identity", listed_then_rewritten)
    rc = main(["curate", f"s3://{bucket}/in", "-o", str(tmp_path / "out"), "--workers", "1", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert f"s3://{bucket}/in/b.jsonl" in err and ("changed since" in err or "gone since" in err), err
    assert not (tmp_path / "out" / "stats.json").exists()  # no corpus of two versions


def test_a_local_input_rewritten_between_the_stages_of_a_dedup_job_is_refused(tmp_path, monkeypatch, capsys):
    import pretrain.curate.job as job

    (tmp_path / "in").mkdir()
    for k in ["a.jsonl", "b.jsonl"]:
        (tmp_path / "in" / k).write_bytes(_rows(k, n=6))
    real = job._global_dedup

    def signed_then_rewritten(*args, **kw):  # stage C reads a dedup job's local input again
        (tmp_path / "in" / "b.jsonl").write_bytes(_rows("b2", n=6))
        return real(*args, **kw)

    monkeypatch.setattr(job, "_global_dedup", signed_then_rewritten)
    rc = main(["dedup", str(tmp_path / "in"), "-o", str(tmp_path / "out"), "--workers", "1", "--quiet"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "b.jsonl" in err and "changed since" in err, err


def test_two_hosts_claiming_one_bucket_output_at_once_one_is_refused(s3_here, tmp_path, monkeypatch):  # noqa: F811
    """Each host's attempt lock is in its own work folder; OUT/plan.json in the bucket is the one
    thing both see. Host B checks for it before host A's claim lands (the race), then writes."""
    from pretrain.curate import job
    from pretrain.curate.pipeline import CurateConfig
    from pretrain.errors import UserError

    bucket = s3_here.new_bucket("race")
    out = f"s3://{bucket}/out"
    a = job.identity("curate", ["s3://x/a.jsonl"], CurateConfig(), {"s3://x/a.jsonl": 10})
    b = job.identity("curate", ["s3://x/b.jsonl"], CurateConfig(), {"s3://x/b.jsonl": 10})
    job.claim(job.Layout(out, tmp_path / "host-a"), a)
    monkeypatch.setattr(io, "exists", lambda path: False)  # what host B saw a moment before
    with pytest.raises(UserError, match="holds another job"):
        job.claim(job.Layout(out, tmp_path / "host-b"), b)
    assert json.loads(s3_here.filesystem().cat_file(f"{bucket}/out/plan.json"))["hash"] == a["hash"]


def _without_conditional_writes():
    """moto's server answering a PUT with `If-None-Match` as a store without conditional writes
    does (501 NotImplemented, the S3 error document), everything else as moto."""
    body = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>NotImplemented</Code>'
            b"<Message>A header you provided implies functionality that is not implemented</Message></Error>")

    def old_store(app):
        def old(environ, start_response):
            if environ["REQUEST_METHOD"] == "PUT" and "HTTP_IF_NONE_MATCH" in environ:
                start_response("501 Not Implemented", [("Content-Type", "application/xml")])
                return [body]
            return app(environ, start_response)
        return old

    return wrapped_server(old_store)


def test_a_store_without_conditional_writes_still_claims_and_refuses(tmp_path, monkeypatch):
    import s3server

    from pretrain.curate import job
    from pretrain.curate.pipeline import CurateConfig
    from pretrain.errors import UserError

    srv = s3server.S3Server()
    srv.start()
    srv._server.stop()  # the same port, served by the old-store variant
    srv._server = _without_conditional_writes()(ip_address="127.0.0.1", port=srv.port, verbose=False)
    srv._server.start()
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", srv.endpoint)
        s3server._forget_cached_filesystems()
        bucket = srv.new_bucket("old")
        out = f"s3://{bucket}/out"
        a = job.identity("curate", ["s3://x/a.jsonl"], CurateConfig(), {"s3://x/a.jsonl": 10})
        b = job.identity("curate", ["s3://x/b.jsonl"], CurateConfig(), {"s3://x/b.jsonl": 10})
        job.claim(job.Layout(out, tmp_path / "a"), a)  # the conditional PUT refused: written plainly
        job.claim(job.Layout(out, tmp_path / "a"), a)  # the same job resumes
        with pytest.raises(UserError, match="holds another job"):
            job.claim(job.Layout(out, tmp_path / "b"), b)
    finally:
        srv.stop()


def test_a_bad_record_of_an_object_is_named_by_its_url_not_the_local_copy(s3_here, tmp_path, capsys):  # noqa: F811
    # The shard reads a local copy (work/tmp/input_<shard>_NAME) that is gone once it ends: a bad
    # record named by that path points the user at nothing.
    bucket = s3_here.new_bucket("bad")
    s3_here.filesystem().pipe(f"{bucket}/in/b.jsonl", _rows("b.jsonl") + b'{"id": "broken", "te\n')
    rc = main(["dedup", f"s3://{bucket}/in", "-o", str(tmp_path / "out"), "--workers", "1", "--quiet"])
    shown = capsys.readouterr().out
    assert rc == 0
    errors = json.loads((tmp_path / "out" / "stats.json").read_text())["errors"]
    assert errors["count"] == 1 and errors["examples"][0]["file"] == f"s3://{bucket}/in/b.jsonl", errors
    assert f"s3://{bucket}/in/b.jsonl: record line 5" in shown and "input_0" not in shown, shown
