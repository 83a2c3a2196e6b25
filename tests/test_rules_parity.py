"""Parity with datatrove 0.10: its own filters and ours give the same verdicts on the same documents.

The peer runs in .venv-peers (datatrove + spaCy + NLTK) through tests/peers/*.py; the documents are
real English text from ../shared/data (WikiText, Gutenberg, lingua sentences, CCNet) cut into
documents, plus generated junk aimed at each rule. Each family is compared on the original text;
the chain in FineWeb's order is compared too. Disagreements are printed (see docs/rules.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from pretrain.curate.document import Document
from pretrain.curate.rules import (
    C4QualityFilter,
    FineWebQualityFilter,
    GopherQualityFilter,
    GopherRepetitionFilter,
    RulesConfig,
    build_rule_steps,
    verdicts,
)
from pretrain.curate.words import spacy_sentence_count, spacy_words, treebank_words

ROOT = Path(__file__).resolve().parents[1]
PEERS = ROOT / ".venv-peers" / "bin" / "python"
sys.path.insert(0, str(ROOT / "tests" / "peers"))

from conftest import SHARED_DATA  # noqa: E402
from rules_corpus import parity_docs  # noqa: E402

FAMILIES = ("gopher_repetition", "gopher_quality", "c4_quality", "fineweb_quality")
pytestmark = [pytest.mark.datatrove, pytest.mark.slow]


def _peers_missing() -> str | None:
    if not PEERS.exists():
        return f"peer environment missing: {PEERS} (make peers)"
    probe = subprocess.run([str(PEERS), "-c", "import datatrove, spacy, nltk"], capture_output=True)
    if probe.returncode != 0:
        return "datatrove/spaCy/NLTK not importable in .venv-peers"
    return None


def _start(script: str, docs: list[dict], tmp: Path) -> subprocess.Popen:
    """The peer's run over `docs`, its output in files (a pipe would stall a run nobody reads yet)."""
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / "docs.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    with open(tmp / "out.jsonl", "wb") as out, open(tmp / "err.txt", "wb") as err:
        proc = subprocess.Popen([str(PEERS), str(ROOT / "tests" / "peers" / script), str(path)],
                                stdout=out, stderr=err)
    proc.tmp = tmp
    return proc


def _finish(proc: subprocess.Popen) -> list[dict]:
    try:
        proc.wait(timeout=600)
    finally:
        proc.kill()
    assert proc.returncode == 0, (proc.tmp / "err.txt").read_text(errors="replace")[-3000:]
    return [json.loads(x) for x in (proc.tmp / "out.jsonl").read_text(encoding="utf-8").splitlines()]


def _word_sample(docs: list[dict]) -> list[dict]:
    return [d for d in docs if not d["id"].startswith("junk")][::8]


EARLY: dict[str, subprocess.Popen] = {}


def start_early(tmp: Path) -> list[subprocess.Popen]:
    """Called by conftest.py as the session starts when a test here is selected: both peer runs
    (~60 s of datatrove and spaCy on a loaded 2-core machine, 17 s on a quiet one) go on beside the
    tests before this module instead of in front of these. Nothing starts without the data or the
    peers; the fixtures then skip as before."""
    if not SHARED_DATA.is_dir() or _peers_missing():
        return []
    docs = parity_docs(SHARED_DATA)
    EARLY["rules"] = _start("datatrove_rules.py", docs, tmp / "rules")
    EARLY["tokens"] = _start("tokens.py", _word_sample(docs), tmp / "tokens")
    return list(EARLY.values())


def _peer(key: str, script: str, docs: list[dict], tmp: Path) -> list[dict]:
    proc = EARLY.pop(key, None)
    if proc is None:  # not started early (the module imported by hand): start it now
        if why := _peers_missing():
            pytest.skip(why)
        proc = _start(script, docs, tmp)
    return _finish(proc)


@pytest.fixture(scope="module")
def docs(shared_data) -> list[dict]:
    return parity_docs(shared_data)


@pytest.fixture(scope="module")
def peer_verdicts(docs, tmp_path_factory) -> list[dict]:
    return _peer("rules", "datatrove_rules.py", docs, tmp_path_factory.mktemp("rules"))


def _ours(text: str, family: str, cfg: RulesConfig) -> tuple[str | None, str]:
    cls = {
        "gopher_repetition": GopherRepetitionFilter,
        "gopher_quality": GopherQualityFilter,
        "c4_quality": C4QualityFilter,
        "fineweb_quality": FineWebQualityFilter,
    }[family]
    doc, step = Document("d", text), cls(cfg)
    v = step.rewrite(doc) if family == "c4_quality" else step.keep(doc)
    return (None if v is True else v), doc.text


def test_verdicts_match_datatrove_per_family(docs, peer_verdicts):
    cfg = RulesConfig(profile="datatrove-0.10")
    assert len(peer_verdicts) == len(docs) > 1000
    disagree: Counter[str] = Counter()
    for d, ref in zip(docs, peer_verdicts):
        for fam in FAMILIES:
            mine, text = _ours(d["text"], fam, cfg)
            if mine != ref[fam] or (fam == "c4_quality" and mine is None and text != ref["c4_text"]):
                disagree[fam] += 1
                print(f"{fam} {d['id']}: ours={mine} datatrove={ref[fam]} text={d['text'][:120]!r}")
    table = {fam: 1 - disagree[fam] / len(docs) for fam in FAMILIES}
    print("agreement per family:", table)
    assert all(v >= 0.995 for v in table.values()), table
    # the documents reach every family's rules, on both sides
    reasons = Counter(r[f] for r in peer_verdicts for f in FAMILIES)
    assert reasons[None] > 0 and len(reasons) >= 15, reasons


def test_chain_matches_datatrove(docs, peer_verdicts):
    steps = build_rule_steps(RulesConfig(profile="datatrove-0.10"))
    mine = verdicts([Document(d["id"], d["text"]) for d in docs], steps)
    same = sum((None if v is None else f"{v[0]}:{v[1]}") == r["chain"] for v, r in zip(mine, peer_verdicts))
    assert same / len(docs) >= 0.995


def test_word_split_matches_spacy_and_treebank(docs, tmp_path_factory):
    sample = _word_sample(docs)
    ref = _peer("tokens", "tokens.py", sample, tmp_path_factory.mktemp("tokens"))
    n = same_docs = same_tb = same_sent = n_lines = 0
    for d, r in zip(sample, ref):
        n += 1
        same_docs += spacy_words(d["text"]) == r["spacy"]
        same_tb += treebank_words(d["text"]) == r["treebank"]
        lines = [x.strip() for x in d["text"].splitlines() if x.strip()]
        n_lines += len(lines)
        same_sent += sum(spacy_sentence_count(x) == c for x, c in zip(lines, r["sentences"]))
    print(
        f"identical token streams: spaCy {same_docs}/{n}, Treebank {same_tb}/{n}; "
        f"sentence counts {same_sent}/{n_lines}"
    )
    assert same_docs / n >= 0.98 and same_tb / n >= 0.98 and same_sent / n_lines >= 0.995
