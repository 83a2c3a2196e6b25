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
from dataclasses import dataclass, field

from pretrain.curate.document import Document
from pretrain.curate.step import Step

EMAIL_RE = re.compile(
    r"\b[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@(?:(?:[A-Za-z0-9](?:["
    r"A-Za-z0-9-]*[A-Za-z0-9])?\.)+[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?|\[(?:(?:25[0-5]|2[0-4][0-9]|["
    r"01]?[0-9][0-9]?)\.){3}(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?|[A-Za-z0-9-]*[A-Za-z0-9]:)])"
)
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
    """Replace regex matches that pass `valid`, cycling through `replacements`."""

    def __init__(self, regex: re.Pattern, replacements: list[str], valid=None):
        self.regex, self.replacements, self.valid, self.i = regex, list(replacements) or [""], valid, 0

    def __call__(self, text: str) -> tuple[str, int]:
        n = 0

        def sub(m: re.Match) -> str:
            nonlocal n
            if self.valid is not None and not self.valid(m.group(0)):
                return m.group(0)
            out = self.replacements[self.i]
            self.i = (self.i + 1) % len(self.replacements)
            n += 1
            return out

        return self.regex.sub(sub, text), n


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
        self.email = _Replacer(EMAIL_RE, cfg.email_replacements)
        self.ip = _Replacer(IPV4_RE, cfg.ip_replacements, lambda s: _is_public_ip(s, cfg.only_public_ips))

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
