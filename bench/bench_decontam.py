"""Benchmark: the decontamination index vs a plain Python set of 13-gram strings, same benchmarks and text.

    .venv/bin/python bench/bench_decontam.py [--docs 1500]

The peer is the usual script approach (a `set` of " ".join(13 words) over every item, then every
document window looked up): it finds the same long-item overlaps, without the short-item rule.
Prints build time, resident memory the index adds (Linux /proc), and lookup docs/s on ~3 KB
WikiText/Shakespeare documents, for both, and their ratios. Times are CPU seconds of this
process (one core), so other jobs on a shared machine do not skew them.
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from pathlib import Path

from pretrain.curate.decontam import TEXT_FIELDS, NgramIndex, benchmark_files, item_text, read_records, words

SHARED = Path(os.environ.get("PRETRAIN_SHARED_DATA")
        or Path(__file__).resolve().parents[2] / "shared" / "data")


def corpus(n: int) -> list[str]:
    text = "".join((SHARED / p).read_text(encoding="utf-8") for p in
                   ("lm/wikitext-2/test.txt", "lm/wikitext-2/valid.txt", "lm/tinyshakespeare/input.txt"))
    return [text[i:i + 3000] for i in range(0, len(text), 3000)][:n]


def peer_build(root: Path) -> set[str]:
    from pretrain.curate.decontam import Benchmark

    grams: set[str] = set()
    for name, f in benchmark_files(root):
        for _, obj in read_records(f, Benchmark(name)):
            ws = words(item_text(obj, TEXT_FIELDS))
            grams.update(" ".join(ws[i:i + 13]) for i in range(len(ws) - 12))
    return grams


def peer_lookup(grams: set[str], text: str) -> bool:
    ws = words(text)
    return any(" ".join(ws[i:i + 13]) in grams for i in range(len(ws) - 12))


def rss() -> int:
    """Resident memory of this process now (Linux)."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure(build):
    """(object, seconds, resident bytes it added); gc first so the figures do not mix."""
    gc.collect()
    before, t = rss(), time.process_time()
    obj = build()
    seconds = time.process_time() - t
    gc.collect()
    return obj, seconds, rss() - before


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=1500)
    args = ap.parse_args()
    root = SHARED / "benchmarks"
    if not root.is_dir():
        raise SystemExit(f"needs {root} (../shared/data)")
    docs = corpus(args.docs)
    words("warm up")
    index, t_ours, m_ours = measure(lambda: NgramIndex([str(root)]))
    grams, t_peer, m_peer = measure(lambda: peer_build(root))
    t = time.process_time()
    hits_ours = sum(bool(index.lookup(d)) for d in docs)
    r_ours = len(docs) / (time.process_time() - t)
    t = time.process_time()
    hits_peer = sum(peer_lookup(grams, d) for d in docs)
    r_peer = len(docs) / (time.process_time() - t)
    print(f"benchmarks: {sum(len(b.items) for b in index.benchmarks):,} items; "
          f"ours {len(index):,} grams (13-grams + short-item grams), peer {len(grams):,} 13-grams")
    print(f"{'':24}{'ours':>12}{'python set':>14}{'ratio':>9}")
    print(f"{'build (s)':24}{t_ours:12.2f}{t_peer:14.2f}{t_peer / t_ours:9.2f}")
    print(f"{'index memory (MB)':24}{m_ours / 1e6:12.1f}{m_peer / 1e6:14.1f}{m_peer / m_ours:9.2f}")
    print(f"{'lookup (docs/s, 3 KB)':24}{r_ours:12,.0f}{r_peer:14,.0f}{r_ours / r_peer:9.2f}")
    print(f"{'documents flagged':24}{hits_ours:12d}{hits_peer:14d}   (clean text: both should be 0)")


if __name__ == "__main__":
    main()
