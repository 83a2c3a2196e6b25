"""WARC/WET/ARC readers on the real files of ../shared/data/warc (skipped when absent)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from conftest import data_file

from pretrain.curate.readers import ReaderConfig, read_documents


def _read(path: Path, cfg: ReaderConfig | None = None):
    errors: list[tuple[object, str]] = []
    stats: Counter[str] = Counter()
    docs = list(
        read_documents(path, cfg or ReaderConfig(), lambda p, r, why: errors.append((r, why)), stats=stats)
    )
    return docs, errors, stats


def test_every_warc_file_reads_without_a_crash(shared_data):
    files = sorted(
        p
        for p in (shared_data / "warc").rglob("*")
        if p.is_file() and ".warc" in p.name or p.name.endswith((".wet", ".arc.gz"))
    )
    assert len(files) >= 12
    total = Counter()
    for f in files:
        docs, errors, stats = _read(f)
        total.update(stats)
        assert len(docs) == stats["documents"] or f.name.endswith(".arc.gz"), f
        for d in docs:
            assert d.id and d.source == f.name
            assert d.url is None or not d.url.startswith("<"), d.url
    # Responses stated in ../shared/data/README.md: 16 + 29 + 37 + 181, plus one each in the iana,
    # example, whirlwind and ARC files.
    assert total["records.response"] == 16 + 29 + 37 + 181 + 4


def test_response_counts_per_file_match_the_readme(shared_data):
    expect = {"warc/resiliparse/warcfile.warc.gz": 16, "warc/resiliparse/clueweb-quirk.warc.gz": 29}
    for rel, n in expect.items():
        docs, errors, stats = _read(shared_data / rel)
        assert stats["records.response"] == n and errors == [], rel
    dolma = [_read(data_file(f"warc/dolma/sample-000{i}.warc.gz"))[2]["records.response"] for i in (0, 1)]
    assert sum(dolma) == 37
    derived = [_read(p)[0] for p in sorted((shared_data / "warc" / "derived").glob("*.warc.gz"))]
    ids = [d.id for part in derived for d in part]
    assert len(ids) == len(set(ids)) == 181


def test_record_id_and_url_without_angle_brackets(shared_data):
    docs, _, _ = _read(data_file("warc/dolma/sample-0000.warc.gz"))
    raw = data_file("warc/dolma/sample-0000.warc.gz")
    import gzip

    text = gzip.decompress(raw.read_bytes()).decode("utf-8", "replace")
    assert "WARC-Target-URI: <https://" in text  # the quirk is really there
    first = docs[0]
    assert first.id.startswith("<urn:uuid:") and f"WARC-Record-ID: {first.id}" in text
    assert first.url.startswith("https://") and f"WARC-Target-URI: <{first.url}>" in text
    assert all(d.cache.get("html") for d in docs)


def test_malformed_cc_net_wet_gives_a_clear_error_and_the_rest_is_read(shared_data):
    docs, errors, stats = _read(data_file("warc/cc_net/sample.warc.wet"))
    # The warcinfo's Content-Length swallows the next record's version line: that record is reported.
    assert errors, "the bad record must be reported"
    loc, why = errors[0]
    assert "WARC-Type: conversion" in why and "no WARC version line" in why and loc.startswith("offset")
    urls = [d.url for d in docs]
    assert urls == ["http://sample_chinese.zh", "http://sample_russian.ru"]
    assert docs[1].text.startswith("Цитаты знаменитого Марка Твена")
    assert docs[0].text.startswith("馬克·吐溫名言")


def test_euc_jp_clueweb_pages_come_out_as_unicode(shared_data):
    docs, errors, _ = _read(data_file("warc/resiliparse/clueweb-quirk.warc.gz"))
    assert errors == [] and len(docs) == 29
    # The page title, readable in a browser: "Brownie briefcase [Head Porter, Yoshida bags]".
    assert "ブラウニー ブリーフケース【ヘッドポーター HEADPORTER 吉田かばん】" in docs[0].text
    assert all("\ufffd" not in d.text[:2000] for d in docs)


def test_revisit_is_skipped_and_counted(shared_data):
    docs, errors, stats = _read(data_file("warc/warcio/example.warc.gz"))
    assert stats["records.revisit"] == 1 and stats["skipped.revisit"] == 1
    assert [d.url for d in docs] == ["http://example.com/"] and errors == []


def test_chunked_transfer_encoding_matches_warcio(shared_data):
    from warcio.archiveiterator import ArchiveIterator

    path = data_file("warc/warcio/example-iana.org-chunked.warc")
    with open(path, "rb") as f:
        truth = [
            r.content_stream().read().decode("utf-8") for r in ArchiveIterator(f) if r.rec_type == "response"
        ]
    docs, errors, _ = _read(path)
    assert errors == [] and [d.text for d in docs] == truth
    assert "Internet Assigned Numbers Authority" in docs[0].text


def test_chunked_responses_of_real_crawl_match_warcio(shared_data):
    from warcio.archiveiterator import ArchiveIterator

    path = data_file("warc/dolma/sample-0000.warc.gz")
    with open(path, "rb") as f:
        chunked = {
            r.rec_headers.get_header("WARC-Record-ID"): r.content_stream().read()
            for r in ArchiveIterator(f)
            if r.rec_type == "response"
            and "chunked" in (r.http_headers.get_header("Transfer-Encoding") or "")
        }
    assert chunked
    docs = {d.id: d for d in _read(path)[0]}
    for rid, body in chunked.items():
        # Same bytes as warcio's de-chunked payload, so the same start and end of the page.
        text = docs[rid].text
        assert body.decode("utf-8", "replace")[:200] == text[:200]
        assert text.rstrip().endswith(body.decode("utf-8", "replace").rstrip()[-50:])


def test_legacy_arc_via_warcio(shared_data):
    docs, errors, stats = _read(data_file("warc/warcio/example.arc.gz"))
    assert errors == [] and len(docs) == 1
    assert docs[0].url == "http://example.com/" and "<title>Example Domain</title>" in docs[0].text
    assert docs[0].id == _read(data_file("warc/warcio/example.arc.gz"))[0][0].id  # stable across runs


@pytest.mark.parametrize("name", ["whirlwind.warc.wet.gz"])
def test_wet_conversion_record(shared_data, name):
    docs, errors, _ = _read(data_file(f"warc/whirlwind/{name}"))
    assert errors == [] and len(docs) == 1 and not docs[0].cache.get("html")
    assert docs[0].url == "https://an.wikipedia.org/wiki/Escopete" and "Escopete" in docs[0].text


def test_html_responses_and_payloads_match_warcio_on_every_real_warc(shared_data):
    """warcio (an independent parser) picks the same HTML 2xx responses, with the same bytes."""
    from warcio.archiveiterator import ArchiveIterator

    checked = 0
    for f in sorted((shared_data / "warc").glob("*/*.warc.gz")):
        truth = {}
        with open(f, "rb") as fh:
            for r in ArchiveIterator(fh):
                if r.rec_type != "response" or r.http_headers is None:
                    continue
                ctype = (r.http_headers.get_header("Content-Type") or "").split(";")[0].strip().lower()
                if (
                    ctype in ("text/html", "application/xhtml+xml")
                    and r.http_headers.get_statuscode()[0] == "2"
                ):
                    truth[r.rec_headers.get_header("WARC-Record-ID")] = r.content_stream().read()
        ours = {d.id: d.text for d in _read(f)[0]}
        assert set(ours) == set(truth), f.name
        for rid, body in truth.items():
            try:
                expected = body.decode("utf-8").removeprefix("\ufeff")
            except UnicodeDecodeError:
                continue  # other charsets: covered by the EUC-JP test
            assert ours[rid] == expected, (f.name, rid)
            checked += 1
    assert checked >= 200
