"""The pii step: e-mail and public IP addresses replaced exactly as datatrove's PIIFormatter does."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from pretrain.curate.document import Document
from pretrain.curate.pii import EMAIL_RE, PIIConfig, build_pii_step, find_emails

PEERS = Path(__file__).resolve().parents[1] / ".venv-peers" / "bin" / "python"

TEXTS = [
    "Write to john.doe@gmail.com or jane+news@mail.example.co.uk for details.",
    "Our server 8.8.8.8 and the router 192.168.1.1 and loopback 127.0.0.1 and 10.0.0.7.",
    "Two mails a@b.io and c.d@e.fr, three public IPs 1.1.1.1, 93.184.216.34, 151.101.1.69.",
    "Not an address: 999.1.1.1, version 1.2.3, user@localhost, an @ sign alone, 3.14159.",
    "Bracketed literal: admin@[192.168.0.1]; quoted!#$%&'*+/=?^_`{|}~-x@y-z.example.org ok",
    "Mixed 172.16.5.4 (private) 172.32.0.1 (public) 100.64.0.1 (shared) 0.0.0.0 255.255.255.255",
    "Nothing to see here.",
    "Unicode around: café—bob@exämple.com—über 203.0.113.5 (documentation range) 198.51.100.7",
    "Edges: a..b@c.de, .x@y.z, q.@r.s, t@u-.v, w@x.y., z@[1.2.3.4, ok@a--b.c-d.e, é1@f.g, _h@i.j",
]

PEER_SCRIPT = """
import json, sys
from datatrove.pipeline.formatters.pii import PIIFormatter
texts = json.load(sys.stdin)
fresh = [PIIFormatter().format(t) for t in texts]
one = PIIFormatter()
stream = [one.format(t) for t in texts]
json.dump({"fresh": fresh, "stream": stream}, sys.stdout)
"""


@pytest.fixture(scope="module")
def datatrove_out():
    if not PEERS.exists():
        pytest.skip(".venv-peers (datatrove) not installed: run `make peers`")
    r = subprocess.run(
        [str(PEERS), "-c", PEER_SCRIPT], input=json.dumps(TEXTS), capture_output=True, text=True, timeout=120
    )
    if r.returncode != 0:
        pytest.skip(f"datatrove unavailable in .venv-peers: {r.stderr[-300:]}")
    return json.loads(r.stdout)


def run(cfg: PIIConfig, texts: list[str]) -> list[str]:
    step = build_pii_step(cfg)
    return [d.text for d in step(Document(id=str(i), text=t) for i, t in enumerate(texts))]


def test_same_output_as_datatrove_per_document(datatrove_out):
    assert run(PIIConfig(enabled=True), TEXTS) == datatrove_out["fresh"]


def test_same_output_as_datatrove_over_a_stream(datatrove_out):
    assert run(PIIConfig(enabled=True, cycle_per_document=False), TEXTS) == datatrove_out["stream"]


def test_output_of_a_document_does_not_depend_on_its_neighbours():
    alone = run(PIIConfig(enabled=True), [TEXTS[2]])
    after = run(PIIConfig(enabled=True), [TEXTS[0], TEXTS[1], TEXTS[2]])[-1:]
    assert alone == after


def test_private_ips_kept_public_replaced_and_counted():
    step = build_pii_step(PIIConfig(enabled=True))
    out = list(step(iter([Document(id="1", text="at 192.168.1.1 and 8.8.4.4, mail x@y.org")])))[0]
    assert "192.168.1.1" in out.text and "8.8.4.4" not in out.text and "x@y.org" not in out.text
    assert step.stats["replaced.ip"] == 1 and step.stats["replaced.email"] == 1 and step.name == "pii"


def test_disabled_by_default():
    assert build_pii_step(PIIConfig()) is None
    assert build_pii_step(PIIConfig(enabled=True, emails=False, ips=False)) is None


def test_find_emails_finds_what_datatroves_pattern_finds():
    # EMAIL_RE is datatrove's pattern as it is; find_emails must agree with it on every string,
    # here strings of address pieces, half of them with no address (80 ms for 20,000).
    rng = random.Random(0)
    pieces = ["a", "b.c", "@", "x.y", "-", "..", ".", "!", " ", "[1.2.3.4]", "[1.2.3.z9:]", "é", "_", "@d.e"]
    found = 0
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        expected = [m.span() for m in EMAIL_RE.finditer(text)]
        assert list(find_emails(text)) == expected, text
        found += bool(expected)
    assert 2_000 < found < 18_000


HOSTILE = {  # text -> what datatrove's pattern makes of it
    "a!" * 100_000 + "@x.org": "email@example.com",  # every "!" starts a scan to the "@"
    "a!" * 100_000 + "..@x.org": "a!" * 100_000 + "..@x.org",  # ... which fails at the ".."
    "a@" + "a-" * 100_000: "a@" + "a-" * 100_000,  # the label backtracks from every "-"
}
CHILD = """
import json, sys
from pretrain.curate.document import Document
from pretrain.curate.pii import PIIConfig, build_pii_step
step = build_pii_step(PIIConfig(enabled=True))
docs = (Document(id=str(i), text=t) for i, t in enumerate(json.load(sys.stdin)))
print(json.dumps([d.text for d in step(docs)]))
"""


def test_text_built_to_make_the_email_pattern_backtrack_is_read_in_linear_time():
    """datatrove's pattern over a page costs the square of a run of local-part characters: 8 kB
    took 1.6 s, each of these 200 kB pages about 1,000 s (the step has no deadline). In a child
    bounded at 60 s (they take ~0.1 s); the output is what the pattern gives."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    r = subprocess.run([sys.executable, "-c", CHILD], input=json.dumps(list(HOSTILE)), capture_output=True,
                       text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout) == list(HOSTILE.values())
