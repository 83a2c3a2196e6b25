"""The url_filter step: domain and URL blocklists from user files, banned words in URLs."""

from __future__ import annotations

import pytest

from pretrain.curate.document import Document
from pretrain.curate.urlfilter import URLFilterConfig, build_url_filter, normalize_url
from pretrain.errors import UserError


def verdicts(cfg: URLFilterConfig, urls: list[str | None]) -> list[str | bool]:
    step = build_url_filter(cfg)
    return [step.keep(Document(id=str(i), text="x", url=u)) for i, u in enumerate(urls)]


def test_no_lists_no_step():
    assert build_url_filter(URLFilterConfig()) is None


def test_domain_blocklist_from_a_file_blocks_subdomains(tmp_path):
    f = tmp_path / "domains.txt"
    f.write_text("# blocked\nbad.example\n\nspam.test   # trailing comment\n")
    got = verdicts(
        URLFilterConfig(domain_files=[str(f)]),
        [
            "https://bad.example/page",
            "http://www.bad.example",
            "https://cdn.img.bad.example/x.html",
            "https://notbad.example/",
            "https://spam.test.good.org/",
            "HTTPS://SPAM.TEST:8080/a",
            None,
        ],
    )
    assert got == ["url_blocked_domain"] * 3 + [True, True, "url_blocked_domain", True]


def test_url_blocklist_is_normalized(tmp_path):
    f = tmp_path / "urls.txt"
    f.write_text("http://www.Example.org/a/page/\n")
    got = verdicts(
        URLFilterConfig(url_files=[str(f)]),
        [
            "https://example.org/a/page",
            "http://EXAMPLE.org/a/page#section",
            "http://example.org/a/page?x=1",
            "http://example.org/a/Page",
        ],
    )
    assert got == ["url_blocked_url", "url_blocked_url", True, True]
    assert normalize_url("HTTP://www.A.com/b/") == "a.com/b"


def test_banned_soft_and_sub_words():
    cfg = URLFilterConfig(
        banned_words=["casino"], soft_banned_words=["free", "bonus", "win"], banned_subwords=["xxx-shop"]
    )
    got = verdicts(
        cfg,
        [
            "https://site.org/online-CASINO/today",  # a whole URL word, any case
            "https://casinoroyale-fan.org/film",  # 'casinoroyale' is not the word 'casino'
            "https://site.org/free/stuff",  # one soft word: kept
            "https://site.org/free-bonus/stuff",  # two soft words: dropped
            "https://shop.org/best_xxx_shop_items",  # sub-word after removing non-alphanumerics
        ],
    )
    assert got == ["url_banned_word", True, True, "url_soft_banned_words", "url_banned_subword"]


def test_missing_list_file_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="not found"):
        build_url_filter(URLFilterConfig(domain_files=[str(tmp_path / "nope.txt")]))


def test_step_counts_and_routes_rejects():
    step = build_url_filter(URLFilterConfig(domains=["bad.example"]))
    rejects = []
    step.on_reject = lambda doc, name, why: rejects.append((doc.id, name, why))
    docs = [
        Document(id="1", text="a", url="http://bad.example/"),
        Document(id="2", text="b", url="http://ok.org"),
    ]
    assert [d.id for d in step(iter(docs))] == ["2"]
    assert rejects == [("1", "url_filter", "url_blocked_domain")]
