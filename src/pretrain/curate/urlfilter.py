"""The `url_filter` step: drop documents by their URL, before anything expensive runs.

FineWeb runs it first on the belt (datatrove's URLFilter). A document is dropped when
- its host or any parent domain of it is in a domain blocklist      -> `url_blocked_domain`
- its URL (normalized: lower-case scheme and host, no `www.`, no fragment, no trailing `/`)
  is in a URL blocklist                                              -> `url_blocked_url`
- a banned word is one of the URL's words (split on non-alphanumerics) -> `url_banned_word`
- at least `soft_word_threshold` soft-banned words are URL words    -> `url_soft_banned_words`
- a banned sub-word occurs in the URL with non-alphanumerics removed -> `url_banned_subword`

Lists come from the user's files (one entry per line, `#` starts a comment) or inline in the
config. We ship no default list: the lists FineWeb used (UT1's blacklists) are CC BY-SA and
their content (adult, gambling, ...) is a policy choice a user should make knowingly.
Documents without a URL are kept. Differences from datatrove: words are matched case-insensitively
(datatrove splits the URL without lower-casing it), and every parent domain is checked, so a
listed `a.example.com` also blocks `x.a.example.com` (datatrove checks the registered domain
and the full host only).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from pretrain.config import bounded
from pretrain.curate.document import Document
from pretrain.curate.step import Filter, Step
from pretrain.errors import not_found

_NON_ALNUM = re.compile(r"[^a-z0-9]+")


@dataclass
class URLFilterConfig:
    """URL blocklists and banned words (TOML section `[url_filter]`)."""

    domain_files: list[str] = field(default_factory=list)
    url_files: list[str] = field(default_factory=list)
    banned_word_files: list[str] = field(default_factory=list)
    domains: list[str] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)
    banned_words: list[str] = field(default_factory=list)
    soft_banned_words: list[str] = field(default_factory=list)
    soft_word_threshold: int = bounded(2, lo=1, why="soft-banned words in a URL; 0 would drop every page")
    banned_subwords: list[str] = field(default_factory=list)

    def is_empty(self) -> bool:
        return not any(
            (
                self.domain_files,
                self.url_files,
                self.banned_word_files,
                self.domains,
                self.urls,
                self.banned_words,
                self.soft_banned_words,
                self.banned_subwords,
            )
        )


def read_list(path: str) -> list[str]:
    """Entries of a list file: one per line, blank lines and `#` comments skipped."""
    from pretrain.curate.io import local_only

    local_only(path, "url_filter: list file")
    p = Path(path)
    if not p.is_file():
        raise not_found("url_filter: list file", path)
    out = []
    for line in p.read_text(encoding="utf-8", errors="replace").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            out.append(line)
    return out


def normalize_host(host: str) -> str:
    host = host.strip().lower().rstrip(".")
    return host[4:] if host.startswith("www.") else host


def normalize_url(url: str) -> str:
    """Lower-case scheme and host, no `www.`, no fragment, no trailing slash (for list lookups)."""
    url = url.strip()
    try:
        parts = urlsplit(url if "://" in url else "http://" + url)
    except ValueError:
        return url.lower()
    host = normalize_host(parts.hostname or "")
    port = f":{parts.port}" if _safe_port(parts) else ""
    path = parts.path.rstrip("/")
    query = f"?{parts.query}" if parts.query else ""
    return f"{host}{port}{path}{query}"


def _safe_port(parts) -> int | None:
    try:
        return parts.port
    except ValueError:
        return None


def _words(text: str) -> set[str]:
    return {w for w in _NON_ALNUM.split(text.lower()) if w}


class URLFilter(Filter):
    name = "url_filter"

    def __init__(self, cfg: URLFilterConfig):
        super().__init__()
        self.domains = {normalize_host(d) for d in cfg.domains + _files(cfg.domain_files)}
        self.urls = {normalize_url(u) for u in cfg.urls + _files(cfg.url_files)}
        self.banned = {w for x in cfg.banned_words + _files(cfg.banned_word_files) for w in _words(x)}
        self.soft = {w for x in cfg.soft_banned_words for w in _words(x)}
        self.threshold = cfg.soft_word_threshold
        subwords = {_NON_ALNUM.sub("", s.lower()) for s in cfg.banned_subwords} - {""}
        # One alternation regex: re compiles it to a trie-like automaton, no extra dependency.
        self.subwords = (
            re.compile("|".join(sorted(map(re.escape, subwords), key=len, reverse=True)))
            if subwords
            else None
        )

    def keep(self, doc: Document) -> bool | str:
        if not doc.url:
            return True
        url = doc.url
        try:
            host = normalize_host(urlsplit(url if "://" in url else "http://" + url).hostname or "")
        except ValueError:
            host = ""
        labels = host.split(".")
        if self.domains and any(".".join(labels[i:]) in self.domains for i in range(len(labels))):
            return "url_blocked_domain"
        if self.urls and normalize_url(url) in self.urls:
            return "url_blocked_url"
        words = _words(url)
        if self.banned and not words.isdisjoint(self.banned):
            return "url_banned_word"
        if self.soft and len(words & self.soft) >= self.threshold:
            return "url_soft_banned_words"
        if self.subwords is not None and self.subwords.search(_NON_ALNUM.sub("", url.lower())):
            return "url_banned_subword"
        return True


def _files(paths: list[str]) -> list[str]:
    return [entry for p in paths for entry in read_list(p)]


def build_url_filter(cfg: URLFilterConfig) -> Step | None:
    """The `url_filter` step, or None when no list is configured."""
    return None if cfg.is_empty() else URLFilter(cfg)
