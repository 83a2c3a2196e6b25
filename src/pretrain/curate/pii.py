"""The `pii` step: e-mail addresses and public IP addresses replaced, as FineWeb did.

Same patterns and replacements as datatrove's PIIFormatter (the formatter FineWeb ran):
- e-mail: an RFC 5322-style local part `@` a dotted domain (or a bracketed IP literal), replaced
  in turn by `email@example.com` and `firstname.lastname@example.org` (reserved example domains);
- IPv4: four dotted octets 0-255, replaced only when the address is globally routable
  (`ipaddress.ip_address(x).is_global`; private, loopback and reserved ranges stay) by six
  addresses that answered no ping when datatrove chose them.

One difference on purpose: datatrove cycles through the replacements with a counter that lives
as long as the formatter, so a document's output depends on which documents the same worker saw
before it. Here the counter restarts with each document, so the output of a document depends on
that document alone and is the same for any number of workers (`cycle_per_document = False`
restores datatrove's behaviour).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from pretrain.curate.document import Document
from pretrain.curate.step import Step

# datatrove's e-mail pattern (kept for reference and for the test that checks `find_emails`
# against it): an RFC 5322-style local part, "@", a dotted domain or a bracketed IP literal.
EMAIL_RE = re.compile(
    r"\b[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@(?:(?:[A-Za-z0-9](?:["
    r"A-Za-z0-9-]*[A-Za-z0-9])?\.)+[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?|\[(?:(?:25[0-5]|2[0-4][0-9]|["
    r"01]?[0-9][0-9]?)\.){3}(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?|[A-Za-z0-9-]*[A-Za-z0-9]:)])"
)
# Hostile text: run over a page, EMAIL_RE's time grows with the square of a run of local-part
# characters ("a!" * 4,000 and one "@": 1.6 s; a 1 MB page: hours), because every word boundary
# in the run starts a scan to its end, and again after an "@" ("a@" + "a-" * 4,000: 1.3 s; the
# label's `[A-Za-z0-9-]*[A-Za-z0-9]` backtracks). `find_emails` finds the same matches in linear
# time: it starts only from an "@", takes the local part from the run of local-part characters
# just before it (after its last "..", which no match crosses) and the domain from just after it,
# with possessive quantifiers where the pattern is unambiguous ('.' and '@' are in no class).
_LOCAL_CLASS = "A-Za-z0-9!#$%&'*+/=?^_`{|}~-"
_LOCAL_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!#$%&'*+/=?^_`{|}~-.")
_LOCAL_AT = re.compile(rf"\b[{_LOCAL_CLASS}]++(?:\.[{_LOCAL_CLASS}]++)*+@")
_LABEL = r"[A-Za-z0-9]++(?:-++[A-Za-z0-9]++)*+"  # = [A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?
_DOMAIN = re.compile(
    rf"(?:{_LABEL}\.)+{_LABEL}|\[(?:(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\.){{3}}"
    r"(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?|[A-Za-z0-9-]*[A-Za-z0-9]:)]"
)


def find_emails(text: str) -> Iterator[tuple[int, int]]:
    """The spans `EMAIL_RE.finditer(text)` finds, in time linear in the text."""
    pos = 0
    at = text.find("@")
    while at >= 0:
        start = at  # the run of local-part characters (and dots) just before this "@"
        while start > pos and text[start - 1] in _LOCAL_CHARS:
            start -= 1
        dots = text.rfind("..", start, at)
        if dots >= 0:
            start = dots + 2  # no match starts before a ".."
        local = _LOCAL_AT.search(text, start, at + 1)
        domain = _DOMAIN.match(text, at + 1) if local else None
        if domain:
            yield local.start(), domain.end()
            pos = domain.end()
            at = text.find("@", pos)
        else:
            at = text.find("@", at + 1)


IPV4_RE = re.compile(
    r"(?:(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\.){3}(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)"
)


@dataclass
class PIIConfig:
    """PII replacement (TOML section `[pii]`); off unless `enabled`."""

    enabled: bool = False
    emails: bool = True
    ips: bool = True
    only_public_ips: bool = True
    email_replacements: list[str] = field(
        default_factory=lambda: ["email@example.com", "firstname.lastname@example.org"]
    )
    ip_replacements: list[str] = field(
        default_factory=lambda: [
            "22.214.171.124",
            "126.96.36.199",
            "188.8.131.52",
            "184.108.40.206",
            "220.127.116.11",
            "18.104.22.168",
        ]
    )
    cycle_per_document: bool = True


class _Replacer:
    """Replace the spans `find` yields that pass `valid`, cycling through `replacements`."""

    def __init__(self, find, replacements: list[str], valid=None):
        self.find, self.replacements, self.valid, self.i = find, list(replacements) or [""], valid, 0

    def __call__(self, text: str) -> tuple[str, int]:
        parts, last, n = [], 0, 0
        for a, b in self.find(text):
            if self.valid is not None and not self.valid(text[a:b]):
                continue
            parts += (text[last:a], self.replacements[self.i])
            self.i = (self.i + 1) % len(self.replacements)
            last, n = b, n + 1
        return "".join(parts) + text[last:], n


def _regex_spans(regex: re.Pattern):
    return lambda text: (m.span() for m in regex.finditer(text))


def _is_public_ip(s: str, public_only: bool) -> bool:
    try:
        ip = ipaddress.ip_address(s)
    except ValueError:
        return False
    return ip.is_global or not public_only


class PIIStep(Step):
    name = "pii"

    def __init__(self, cfg: PIIConfig):
        super().__init__()
        self.cfg = cfg
        self.email = _Replacer(find_emails, cfg.email_replacements)
        public = lambda s: _is_public_ip(s, cfg.only_public_ips)  # noqa: E731
        self.ip = _Replacer(_regex_spans(IPV4_RE), cfg.ip_replacements, public)

    def process(self, doc: Document) -> Document | None:
        if self.cfg.cycle_per_document:
            self.email.i = self.ip.i = 0
        text, n_email, n_ip = doc.text, 0, 0
        # Cheap pre-checks: most documents hold no '@' and no dotted quad.
        if self.cfg.emails and "@" in text:
            text, n_email = self.email(text)
        if self.cfg.ips and "." in text:
            text, n_ip = self.ip(text)
        if n_email or n_ip:
            doc.text = text
            doc.cache.clear()
            self.stats["replaced.email"] += n_email
            self.stats["replaced.ip"] += n_ip
        return doc


def build_pii_step(cfg: PIIConfig) -> Step | None:
    """The `pii` step, or None when it is disabled."""
    if not cfg.enabled or not (cfg.emails or cfg.ips):
        return None
    return PIIStep(cfg)
