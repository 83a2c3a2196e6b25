"""Benchmark of `pretrain tokenize` against HF tokenizers' `encode_batch` on the same text, same run.

Prints, on one core (RAYON_NUM_THREADS=1, one worker, CPU time of the process):
- raw `Tokenizer.encode_batch` and `encode_batch_fast` over the documents already in memory;
- `pretrain tokenize` end to end: read the .jsonl.zst corpus, encode, write .bin/.idx, manifest;
- the ratio of the two (goal: within 10% of the raw tokenizer);
- byte-level BPE training time on the corpus, and the linear extrapolation to 100 MB;
- `MixtureSampler.next_batch` throughput on the result.

Corpus: the real English text in ../shared/data/lm (WikiText-2, Gutenberg, Tiny Shakespeare), split
into paragraphs and repeated to --mb megabytes, else generated pseudo-words when that is absent.

Run: .venv/bin/python bench/bench_tokens.py [--mb 20] [--vocab 32000]
"""

from __future__ import annotations

import os

os.environ["RAYON_NUM_THREADS"] = "1"  # per core: must be set before tokenizers starts its pool

import argparse  # noqa: E402
import random  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

DATA = Path(os.environ.get("PRETRAIN_SHARED_DATA")
        or Path(__file__).resolve().parents[2] / "shared" / "data") / "lm"


def corpus_docs(mb: float) -> tuple[list[str], str]:
    files = sorted(DATA.rglob("*.txt")) if DATA.is_dir() else []
    lines = (f.read_text(encoding="utf-8", errors="replace").split("\n") for f in files)
    paras = [p for ls in lines for p in ls if p.strip()]
    origin = f"{len(files)} files of ../shared/data/lm"
    if not paras:
        rng = random.Random(0)
        syll = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"]
        words = ["".join(rng.choice(syll) for _ in range(rng.randint(1, 4))) for _ in range(20000)]
        paras = [" ".join(rng.choice(words) for _ in range(rng.randint(20, 200))) for _ in range(20000)]
        origin = "generated pseudo-words (../shared/data absent)"
    # Group lines into documents of ~2 KB, then repeat to the requested size.
    docs, cur, n = [], [], 0
    for p in paras:
        cur.append(p)
        n += len(p)
        if n > 2000:
            docs.append("\n".join(cur))
            cur, n = [], 0
    out, size = [], 0
    while size < mb * 1e6:
        for d in docs:
            out.append(d)
            size += len(d.encode())
            if size >= mb * 1e6:
                break
    return out, origin


def timed(fn):
    """(result, CPU seconds of this process): with one thread, CPU time is time on one core, and
    unlike wall time it does not count the moments other jobs on a shared machine held the core."""
    t0 = time.process_time()
    result = fn()
    return result, time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=20.0, help="corpus size for tokenize (MB)")
    ap.add_argument("--train-mb", type=float, default=10.0, help="text for tokenizer training (MB)")
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--repeats", type=int, default=3, help="rounds; each method's best time is kept")
    args = ap.parse_args()

    from pretrain.curate.io import write_jsonl_zst
    from pretrain.tokens.mixture import MixtureSampler
    from pretrain.tokens.pipeline import tokenize_corpus
    from pretrain.tokens.tokenizer import load_tokenizer, train_tokenizer

    docs, origin = corpus_docs(max(args.mb, args.train_mb))
    nbytes = sum(len(d.encode()) for d in docs)
    print(f"corpus: {len(docs):,} documents, {nbytes / 1e6:.1f} MB from {origin}")
    tmp = Path(tempfile.mkdtemp(prefix="bench_tokens_"))

    train_docs, train_bytes = [], 0
    for d in docs:
        if train_bytes >= args.train_mb * 1e6:
            break
        train_docs.append(d)
        train_bytes += len(d.encode())
    os.environ["RAYON_NUM_THREADS"] = "1"
    tok, sec = timed(lambda: train_tokenizer(train_docs, args.vocab))
    print(f"tokenizer training: vocab {args.vocab:,} on {train_bytes / 1e6:.1f} MB in {sec:.1f} CPU s "
          f"-> about {sec * 100e6 / train_bytes:.0f} s for 100 MB (linear extrapolation, estimated)")
    tok.save(str(tmp / "tok.json"))

    # Four input files, so `pretrain tokenize` works as it would on curate output.
    for k in range(4):
        write_jsonl_zst(tmp / "in" / f"part_{k}.jsonl.zst", ({"text": t} for t in docs[k::4]))
    # Each timing starts from a freshly loaded tokenizer (a cold BPE word cache, as a worker has).
    # The methods alternate within each round, so a busy neighbour on the machine hits all of them.
    def raw():
        return [e.ids for e in load_tokenizer(tmp / "tok.json").encode_batch(docs, add_special_tokens=False)]

    def fast():
        return load_tokenizer(tmp / "tok.json").encode_batch_fast(docs, add_special_tokens=False)

    def ours():
        shutil.rmtree(tmp / "out", ignore_errors=True)
        return tokenize_corpus([str(tmp / "in")], tmp / "tok.json", tmp / "out", workers=1)

    best = {"raw": float("inf"), "fast": float("inf"), "ours": float("inf")}
    for _ in range(args.repeats):
        for name, fn in (("raw", raw), ("fast", fast), ("ours", ours)):
            result, sec = timed(fn)
            best[name] = min(best[name], sec)
            if name == "raw":
                n_tok = sum(map(len, result)) + len(docs)  # + one end-of-text per document
            if name == "ours":
                man = result
    sec_raw, sec_fast, sec_ours = best["raw"], best["fast"], best["ours"]
    assert man["tokens"] == n_tok, (man["tokens"], n_tok)
    print(f"HF encode_batch (1 core):           {n_tok / sec_raw:12,.0f} tokens/s")
    print(f"HF encode_batch_fast (1 core):      {n_tok / sec_fast:12,.0f} tokens/s")
    print(f"pretrain tokenize, 1 worker (1 core): {n_tok / sec_ours:10,.0f} tokens/s  "
          f"(read .jsonl.zst + encode + write shards)")
    print(f"ratio pretrain tokenize / encode_batch: {sec_raw / sec_ours:.2f}  (goal >= 0.90)")

    s = MixtureSampler({"all": tmp / "out"}, {"all": 1.0}, seq_len=2048, seed=0)
    _, sec = timed(lambda: [s.next_batch(32) for _ in range(200)])
    print(f"MixtureSampler.next_batch(32) at seq_len 2048: {200 * 32 * 2049 / sec:,.0f} tokens/s "
          f"({sec / 200 * 1e3:.2f} ms per batch)")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
