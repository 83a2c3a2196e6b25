"""Hostile WARC input, generated here: every bad record is skipped with a reason, reading goes on."""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path

import pytest

from pretrain.curate.document import Document
from pretrain.curate.extract import ExtractConfig, build_extract_step
from pretrain.curate.readers import ReaderConfig, read_documents


def page(title: str, body: str = "Some text of the page.") -> bytes:
    return (
        f"<!doctype html><html><head><title>{title}</title></head><body><p>{body}</p></body></html>".encode()
    )


def record(
    n: int,
    payload: bytes,
    ctype: str = "text/html; charset=utf-8",
    length: int | None = None,
    extra_http: str = "",
) -> bytes:
    http = f"HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\n{extra_http}Content-Length: {len(payload)}\r\n\r\n"
    block = http.encode() + payload
    head = (
        f"WARC/1.0\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:00000000-0000-0000-0000-{n:012d}>\r\n"
        f"WARC-Target-URI: http://example.org/{n}\r\nWARC-Date: 2024-01-01T00:00:00Z\r\n"
        f"Content-Type: application/http; msgtype=response\r\nContent-Length: {length or len(block)}\r\n\r\n"
    )
    return head.encode() + block + b"\r\n\r\n"


def read(path: Path, cfg: ReaderConfig | None = None):
    errors: list[tuple[object, str]] = []
    stats: Counter[str] = Counter()
    docs = list(
        read_documents(path, cfg or ReaderConfig(), lambda p, r, why: errors.append((r, why)), stats=stats)
    )
    return docs, errors, stats


def write_gz(path: Path, records: list[bytes]) -> Path:
    path.write_bytes(b"".join(gzip.compress(r, mtime=0) for r in records))
    return path


def ids(docs: list[Document]) -> list[int]:
    return [int(d.id.strip("<>").rsplit("-", 1)[1]) for d in docs]


def test_good_file_plain_and_gzip_per_record(tmp_path):
    recs = [record(i, page(f"page {i}")) for i in range(3)]
    (tmp_path / "a.warc").write_bytes(b"".join(recs))
    for p in (tmp_path / "a.warc", write_gz(tmp_path / "a.warc.gz", recs)):
        docs, errors, stats = read(p)
        assert errors == [] and ids(docs) == [0, 1, 2] and stats["records.response"] == 3
        assert docs[1].url == "http://example.org/1" and "page 1" in docs[1].text


def test_whole_file_gzip(tmp_path):
    p = tmp_path / "w.warc.gz"
    p.write_bytes(gzip.compress(b"".join(record(i, page(f"p{i}")) for i in range(3))))
    docs, errors, _ = read(p)
    assert errors == [] and ids(docs) == [0, 1, 2]


def test_truncated_gzip_member(tmp_path):
    members = [gzip.compress(record(i, page(f"p{i}", "word " * 2000)), mtime=0) for i in range(3)]
    p = tmp_path / "t.warc.gz"
    p.write_bytes(members[0] + members[1] + members[2][: len(members[2]) // 2])
    docs, errors, _ = read(p)
    assert ids(docs)[:2] == [0, 1] and 2 not in ids(docs)
    assert errors and "truncated" in errors[-1][1]


def test_content_length_that_lies_short(tmp_path):
    recs = [record(0, page("a")), record(1, page("b"), length=40), record(2, page("c"))]
    for p in (tmp_path / "s.warc", tmp_path / "s.warc.gz"):
        if p.suffix == ".gz":
            write_gz(p, recs)
        else:
            p.write_bytes(b"".join(recs))
        docs, errors, _ = read(p, ReaderConfig(warc_check_gaps="all"))
        assert 0 in ids(docs) and 2 in ids(docs), p
        assert any("skipped between records" in why for _, why in errors), p


def test_content_length_that_lies_long(tmp_path):
    recs = [record(0, page("a")), record(1, page("b"), length=100_000), record(2, page("c"))]
    p = tmp_path / "l.warc"
    p.write_bytes(b"".join(recs))
    docs, errors, _ = read(p)  # record 1 swallows record 2 and runs past the end of the file
    assert 0 in ids(docs) and errors


def test_binary_body_labelled_html(tmp_path):
    junk = bytes(range(256)) * 64
    p = write_gz(tmp_path / "b.warc.gz", [record(0, page("a")), record(1, junk), record(2, page("c"))])
    docs, errors, stats = read(p)
    assert ids(docs) == [0, 2]
    assert len(errors) == 1 and "binary body" in errors[0][1] and stats["skipped.binary"] == 1


def test_utf16_page_with_bom_is_text_not_binary(tmp_path):
    body = "<html><body><p>Grüße aus Köln</p></body></html>".encode("utf-16")  # BOM + NUL bytes
    docs, errors, _ = read(write_gz(tmp_path / "u.warc.gz", [record(0, body, ctype="text/html")]))
    assert errors == [] and "Grüße aus Köln" in docs[0].text


def test_non_html_is_skipped_and_counted(tmp_path):
    pdf = b"%PDF-1.4\n" + b"0" * 500
    p = write_gz(tmp_path / "n.warc.gz", [record(0, pdf, ctype="application/pdf"), record(1, page("b"))])
    docs, errors, stats = read(p)
    assert ids(docs) == [1] and errors == [] and stats["skipped.non_html"] == 1


def test_oversized_page_is_skipped_with_a_reason(tmp_path):
    big = page("big", "word " * 60_000)  # ~300 KB, over the 100 KB bound of this test
    p = write_gz(tmp_path / "big.warc.gz", [record(0, page("a")), record(1, big), record(2, page("c"))])
    docs, errors, stats = read(p, ReaderConfig(max_record_bytes=100_000))
    assert ids(docs) == [0, 2] and "max_record_bytes" in errors[0][1] and stats["skipped.too_large"] == 1


def test_100_mb_page_with_default_bounds(tmp_path):
    big = b"<html><body>" + b"<p>" + b"spam " * 20_000_000 + b"</p></body></html>"  # 100 MB
    recs = [record(0, page("a")), record(1, big), record(2, page("c"))]
    p = tmp_path / "huge.warc.gz"
    p.write_bytes(b"".join(gzip.compress(r, compresslevel=1, mtime=0) for r in recs))
    del big, recs
    docs, errors, _ = read(p)
    assert ids(docs) == [0, 2] and "larger than max_record_bytes" in errors[0][1]


def test_gzip_content_encoding_really_compressed_and_not(tmp_path):
    body = page("zipped", "compressed body")
    recs = [
        record(0, gzip.compress(body), extra_http="Content-Encoding: gzip\r\n"),
        record(1, body, extra_http="Content-Encoding: gzip\r\n"),
    ]  # ClueWeb: header says gzip, bytes plain
    docs, errors, _ = read(write_gz(tmp_path / "ce.warc.gz", recs))
    assert errors == [] and all("<title>zipped</title>" in d.text for d in docs) and len(docs) == 2


def test_not_a_warc(tmp_path):
    for name, data in (
        ("x.warc", b"this is a plain text file, not a WARC\n" * 20),
        ("y.warc.gz", gzip.compress(b"<html>hello</html>" * 50)),
        ("z.warc.gz", bytes(range(256)) * 10),
        ("e.warc.gz", b""),
    ):
        (tmp_path / name).write_bytes(data)
        docs, errors, _ = read(tmp_path / name)
        assert docs == [] and len(errors) >= 1, name


def test_html_nested_10000_deep(tmp_path):
    deep = b"<html><body>" + b"<div>" * 10_000 + b"deep text here" + b"</div>" * 10_000 + b"</body></html>"
    p = write_gz(tmp_path / "deep.warc.gz", [record(0, deep), record(1, page("after"))])
    docs, errors, _ = read(p)
    assert errors == [] and ids(docs) == [0, 1]
    for backend in ("resiliparse", "trafilatura"):
        step = build_extract_step(ExtractConfig(backend=backend, timeout_s=20))
        fresh = read(p)[0]
        out = list(step(iter(fresh)))
        step.close()
        assert step.stats["in"] == 2 and "Some text of the page." in out[-1].text, backend


@pytest.mark.parametrize("layout", ["members", "plain"])
@pytest.mark.parametrize("where", ["http", "warc"])
def test_a_record_with_headers_over_the_parsers_bound_loses_only_itself(tmp_path, layout, where):
    """fastwarc refuses a header block over 32 KiB ("Maximum header length exceeded", an OSError
    out of its iterator): one such record, 40 kB, ended the file there, losing every record after
    it (a Common Crawl file holds ~40,000). It is skipped with its offset; the next one is read."""
    big = "X-Pad: y\r\n" * 4000  # 40,000 bytes of headers
    bad = record(2, page("two"), extra_http=big if where == "http" else "")
    if where == "warc":
        bad = bad.replace(b"WARC-Date:", big.encode() + b"WARC-Date:", 1)
    records = [record(1, page("one")), bad, record(3, page("three"))]
    p = tmp_path / f"x.warc{'.gz' if layout == 'members' else ''}"
    if layout == "members":
        write_gz(p, records)
    else:
        p.write_bytes(b"".join(records))
    docs, errors, stats = read(p)
    assert [d.url for d in docs] == ["http://example.org/1", "http://example.org/3"]
    assert len(errors) == 1 and "Maximum header length exceeded" in errors[0][1]
    starts = [0, len(records[0])] if layout == "plain" else [0, len(gzip.compress(records[0], mtime=0))]
    assert errors[0][0] == f"offset {starts[1]}" and stats["errors.unreadable_record"] == 1


@pytest.mark.parametrize("bad", ["length", "headers"])
def test_a_bad_record_inside_a_member_of_three_loses_only_itself(tmp_path, bad):
    """Generated records (tests/test_warc_members.py does it on real ones, with a peer): a member
    holding records 1-3 (some crawlers write that), record 2 bad; 1 and 3 are read, and 4 after."""
    two = record(2, page("two"))
    if bad == "length":
        two = two.replace(b"Content-Length: ", b"Content-Length: 9", 1)  # ten times what it has
    else:
        two = two.replace(b"WARC-Date:", b"X-Pad: y\r\n" * 4000 + b"WARC-Date:", 1)  # over 32 KiB
    first = gzip.compress(record(0, page("zero")), mtime=0)
    p = tmp_path / "m.warc.gz"
    three = record(1, page("one")) + two + record(3, page("three"))
    p.write_bytes(first + gzip.compress(three, mtime=0) + gzip.compress(record(4, page("four")), mtime=0))
    docs, errors, _ = read(p)
    assert ids(docs) == [0, 1, 3, 4]
    assert [e[0] for e in errors] == [f"decompressed offset {len(record(1, page('one')))} of the gzip member "
                                      f"at offset {len(first)}"]


def test_binary_verdict_counts_control_bytes_of_the_first_4_kb():
    """Without a NUL byte, a body is binary when over 10% of its first 4 KB are control bytes
    (0-8 and 14-31; tab, newline, vertical tab, form feed and carriage return are text)."""
    from pretrain.curate.readers import _looks_binary

    for ctrl in (b"\x01", b"\x08", b"\x0e", b"\x1f"):
        assert _looks_binary(ctrl * 410 + b"a" * 3686)  # 410 of 4,096: over 10%
        assert not _looks_binary(ctrl * 409 + b"a" * 3687)  # 409: not
        assert not _looks_binary(b"a" * 4096 + ctrl * 4096)  # past the first 4 KB: not looked at
    assert not _looks_binary(b"\t\n\x0b\x0c\r" * 1000)
    assert _looks_binary(b"a\x00b")


@pytest.mark.parametrize("binary", [False, True])
def test_gzip_bodies_inside_gzip_members_hold_the_files_ratio(tmp_path, binary):
    """A member inflates ~1030x at most, but a `Content-Encoding: gzip` body inside it multiplies
    the two layers: 40 records of an 8 MiB page in a 17 KB file read as 320 MiB of HTML (~19,000x;
    1 MB of them ~19 GB). The payloads a file hands on, across both layers, are held to max_ratio
    times the file (+16 MiB), bodies that then turn out binary included (inflated all the same)."""
    from pretrain.curate.readers import RATIO_SLACK

    inner = (b"\x00\x01" * (4 << 20)) if binary else page("bomb", "a" * ((8 << 20) - 200))
    zipped = gzip.compress(inner, 9, mtime=0)
    path = write_gz(tmp_path / "bomb.warc.gz",
                    [record(i, zipped, extra_http="Content-Encoding: gzip\r\n") for i in range(40)])
    docs, errors, stats = read(path)
    bound = 1000 * path.stat().st_size + RATIO_SLACK
    read_in = stats["records.response"] * len(inner)
    assert sum(len(d.text) for d in docs) <= bound and read_in <= bound + 2 * len(inner)
    assert stats["records.response"] < 40 and stats["errors.expands"] == 1
    (where, why), = [e for e in errors if "max_ratio" in e[1]]
    assert why.startswith("payloads expand more than max_ratio=1000 times the file") and "skipped" in why
    assert len(docs) == (0 if binary else stats["records.response"] - 1)
