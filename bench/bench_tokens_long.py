"""Benchmark: memory and time of encoding one long document, whole (HF tokenizers) against in pieces.

Each measurement runs in a child process (peak RSS = VmHWM, minus the child's peak before it
encodes; seconds of the encode only), for documents of each size in `--sizes` of each kind:
- normal: real English text (../shared/data/lm, WikiText-2 and Gutenberg, repeated to the size);
- letters: random a-z with no space or punctuation (one pre-token: base64-like garbage, DNA);
- same: one letter repeated (the worst case for BPE's merge queue);
- cjk: Chinese characters with a "，" or "。" every 5-30 characters and no space.
Seconds are CPU seconds of the child (one Rayon thread): wall time on a shared machine is noise.
"whole" is `Tokenizer.encode_batch_fast([text])`, what every encode path did before; "pieces" is
`pretrain.tokens.pieces.encode_ids` (cut at safe positions, a run over RUN characters cut at
PIECE). The last columns say whether the ids are identical and how many cuts fell inside a run.
The tokenizers (`--tokenizers`): "ours", a byte-level BPE of `--vocab` ids trained here on the same
English text; "llama3", "qwen2", "o200k", "llama2", "mistral": tokenizer.json files shaped like those
families' (tests/tokenizer_families.py: Llama-3's Split regex + ByteLevel and BOS, ...), the same
vocabulary size, trained on the same text; NAME-lower: the same with a Lowercase normalizer. Each
row says which cut rule (tokens/pieces.py) was used.
The machine these numbers come from is shared (2 cores, 8 agents): compare within one run.

Run: .venv/bin/python bench/bench_tokens_long.py [--sizes 65536,1048576,8388608] [--kinds normal,letters]
     [--tokenizers ours,llama3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the children's peak_mb, shared
from hostile import PEAK_MB  # noqa: E402

DATA = Path(os.environ.get("PRETRAIN_SHARED_DATA")
            or Path(__file__).resolve().parents[2] / "shared" / "data") / "lm"

_CHILD = r"""
import json, sys, time
import numpy as np""" + PEAK_MB + r"""from pretrain.tokens import pieces
from pretrain.tokens.tokenizer import load_tokenizer
tok = load_tokenizer(sys.argv[1])
text = open(sys.argv[2], encoding="utf-8").read()
how = sys.argv[3]
base, t0, c0 = peak_mb(), time.perf_counter(), time.process_time()
rule = pieces.cut_rule(tok)
if how == "whole":
    ids = np.asarray(tok.encode_batch_fast([text], add_special_tokens=False)[0].ids, dtype=np.int64)
else:
    ids = pieces.encode_ids(tok, text, rule)
seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
np.save(sys.argv[4], ids)
print(json.dumps({"seconds": seconds, "cpu": cpu, "mb": peak_mb() - base, "tokens": int(ids.size),
                  "rule": rule if isinstance(rule, str) else rule.name,
                  "hard_cuts": pieces.hard_cuts(text, rule=rule) if len(text) > pieces.LONG_DOC
                  and not isinstance(rule, str) else 0}))
"""


def english() -> str:
    files = [DATA / "wikitext-2" / "valid.txt", DATA / "gutenberg" / "sherlock.txt"]
    if all(f.is_file() for f in files):
        return "\n".join(f.read_text(encoding="utf-8") for f in files)
    rng = random.Random(0)
    syll = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"]
    words = ["".join(rng.choice(syll) for _ in range(rng.randint(1, 4))) for _ in range(5000)]
    return " ".join(rng.choice(words) + rng.choice(["", "", "", ",", "."]) for _ in range(400_000))


def make(kind: str, n: int, base: str) -> str:
    rng = random.Random(n)
    if kind == "normal":
        return (base * (n // len(base) + 1))[:n]
    if kind == "letters":
        return "".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=n))
    if kind == "same":
        return "a" * n
    out, size = [], 0
    while size < n:  # cjk: runs of common ideographs, then a comma or a full stop
        k = rng.randint(5, 30)
        out.append("".join(chr(rng.randint(0x4E00, 0x4E00 + 2000)) for _ in range(k)) + rng.choice("，，。"))
        size += k + 1
    return "".join(out)[:n]


def run(tok: Path, text: Path, how: str, ids: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": SRC, "RAYON_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-c", _CHILD, str(tok), str(text), how, str(ids)],
                       capture_output=True, text=True, env=env)
    if r.returncode != 0:
        return {"error": r.stderr.strip().splitlines()[-1:]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="65536,262144,1048576,4194304,8388608")
    ap.add_argument("--kinds", default="normal,letters,same,cjk")
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--tokenizers", default="ours,llama3",
                    help="ours and any of llama3,qwen2,o200k,llama2,mistral; NAME-lower: with Lowercase")
    args = ap.parse_args()
    sys.path.insert(0, SRC)
    import numpy as np
    from tokenizer_families import build

    from pretrain.tokens.tokenizer import train_tokenizer

    base = english()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name in args.tokenizers.split(","):
            family = name.removesuffix("-lower")
            tok = train_tokenizer(base.split("\n\n"), args.vocab) if family == "ours" else \
                build(family, base.split("\n\n"), args.vocab)
            if name.endswith("-lower"):  # the family's tokenizer.json with a Lowercase normalizer
                from tokenizers import normalizers

                tok.normalizer = normalizers.Lowercase()
            tok.save(str(tmp / f"{name}.json"))
        print(f"{'tokenizer':9} {'kind':8} {'chars':>9} | {'whole cpu s':>11} {'whole MB':>9} "
              f"| {'pieces cpu s':>12} {'pieces MB':>9} | {'MB ratio':>8} {'same ids':>8} "
              f"{'hard cuts':>9} rule")
        for name in args.tokenizers.split(","):
            for kind in args.kinds.split(","):
                for n in (int(s) for s in args.sizes.split(",")):
                    (tmp / "t.txt").write_text(make(kind, n, base), encoding="utf-8")
                    w = run(tmp / f"{name}.json", tmp / "t.txt", "whole", tmp / "w.npy")
                    p = run(tmp / f"{name}.json", tmp / "t.txt", "pieces", tmp / "p.npy")
                    if "error" in w or "error" in p:
                        print(f"{name:9} {kind:8} {n:>9,} | {w.get('error', '')} {p.get('error', '')}")
                        continue
                    same = np.array_equal(np.load(tmp / "w.npy"), np.load(tmp / "p.npy"))
                    print(f"{name:9} {kind:8} {n:>9,} | {w['cpu']:11.2f} {w['mb']:9.0f} | {p['cpu']:12.2f} "
                          f"{p['mb']:9.0f} | {w['mb'] / max(p['mb'], 1):8.1f} {str(same):>8} "
                          f"{p['hard_cuts']:>9} {p['rule']}", flush=True)


if __name__ == "__main__":
    main()
