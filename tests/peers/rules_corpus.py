"""Documents for the rules' parity test and benchmark: real English text cut into documents, plus
generated junk aimed at every rule. Deterministic (fixed seed). Reads ../shared/data; callers skip
when it is absent."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path


def _chunks(paragraphs: list[str], size: int, sep: str = "\n\n") -> list[str]:
    out, cur = [], []
    for p in paragraphs:
        cur.append(p)
        if sum(map(len, cur)) >= size:
            out.append(sep.join(cur))
            cur = []
    return out


def real_docs(data: Path, size: int = 2000) -> dict[str, list[str]]:
    """Real English documents of about `size` characters, by source."""
    wiki = (data / "lm/wikitext-2/test.txt").read_text(encoding="utf-8")
    sherlock = (data / "lm/gutenberg/sherlock.txt").read_text(encoding="utf-8")
    alice = (data / "lm/gutenberg/nltk-selection/carroll-alice.txt").read_text(encoding="utf-8")
    lingua = [
        line.split("\t", 1)[1].strip()
        for line in gzip.open(
            data / "langid/lingua/lingua-sentences-75lang-full.tsv.gz", "rt", encoding="utf-8"
        )
        if line.startswith("en\t")
    ]
    ccnet = []
    for f in sorted((data / "warc/dolma").glob("cc_en_head-*.jsonl.gz")):
        ccnet += [json.loads(line)["text"] for line in gzip.open(f, "rt", encoding="utf-8")]
    rng = random.Random(0)
    lingua_docs = []
    for i in range(0, len(lingua) - 12, 12):
        sep = rng.choice([" ", "\n", "\n\n"])
        lingua_docs.append(sep.join(lingua[i : i + rng.randint(3, 12)]))
    return {
        "wikitext": _chunks([p for p in wiki.split("\n") if p.strip()], size, "\n"),
        "gutenberg": _chunks(sherlock.split("\n\n"), size) + _chunks(alice.split("\n"), size, "\n"),
        "lingua": lingua_docs,
        "ccnet": ccnet,
    }


_WORDS = (
    "the of and to in is was for that with on as by at from it this be are have had data web model "
    "page click here home news contact login share price buy free best new"
).split()


def junk_docs(n: int = 300, seed: int = 0) -> list[str]:
    """Generated junk aimed at each rule, with random sizes so verdicts fall on both sides."""
    rng = random.Random(seed)

    def sentence(k: int) -> str:
        return " ".join(rng.choice(_WORDS) for _ in range(k)).capitalize() + rng.choice(
            [".", "!", "?", "", ","]
        )

    makers = [
        lambda: "\n".join(sentence(rng.randint(2, 12)) for _ in range(rng.randint(3, 40))),
        lambda: "\n".join(
            [sentence(8)] * rng.randint(1, 6) + [sentence(8) for _ in range(rng.randint(1, 8))]
        ),
        lambda: "\n\n".join(
            [sentence(20)] * rng.randint(1, 4) + [sentence(20) for _ in range(rng.randint(1, 6))]
        ),
        lambda: " ".join(
            f"#{rng.choice(_WORDS)}" if rng.random() < 0.3 else rng.choice(_WORDS)
            for _ in range(rng.randint(30, 200))
        ),
        lambda: "\n".join(
            f"{rng.choice(['-', '•', '*', ''])} {sentence(rng.randint(2, 9))}"
            for _ in range(rng.randint(3, 30))
        ),
        lambda: "\n".join(
            sentence(rng.randint(3, 10))[:-1] + rng.choice(["...", "…", "."])
            for _ in range(rng.randint(3, 30))
        ),
        lambda: " ".join(
            str(rng.randint(0, 10 ** rng.randint(1, 6))) if rng.random() < 0.3 else rng.choice(_WORDS)
            for _ in range(rng.randint(40, 300))
        ),
        lambda: " ".join([sentence(rng.randint(3, 6))] * rng.randint(2, 30)),
        lambda: "\n".join(
            sentence(rng.randint(4, 14))
            + rng.choice(
                [
                    "",
                    " Lorem ipsum dolor.",
                    " Enable javascript to view.",
                    " See our privacy policy.",
                    " {x}",
                    " [1]",
                    " [edit]",
                ]
            )
            for _ in range(rng.randint(3, 15))
        ),
        lambda: "\n".join(rng.choice(_WORDS).title() for _ in range(rng.randint(5, 60))),
        lambda: "".join(rng.choice("abcdefghij klmnop.,;!?-'\"\n") for _ in range(rng.randint(100, 3000))),
        lambda: " ".join(
            "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(1, 16)))
            for _ in range(rng.randint(40, 120))
        ),
    ]
    return [makers[i % len(makers)]() for i in range(n)]


def parity_docs(data: Path, per_source: int = 300) -> list[dict]:
    """About 1,500 documents: up to `per_source` from each real source, and generated junk."""
    docs = []
    for source, texts in real_docs(data).items():
        rng = random.Random(source)
        picked = texts if len(texts) <= per_source else rng.sample(texts, per_source)
        docs += [{"id": f"{source}-{i}", "text": t} for i, t in enumerate(picked)]
    docs += [{"id": f"junk-{i}", "text": t} for i, t in enumerate(junk_docs())]
    return docs
