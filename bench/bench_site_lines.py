"""Cost of the site-lines pass (curate/site_lines.py) per line: counting (step 1) and stripping
(stage C), beside the floor of hashing each line alone (xxh3_64 of site + line), in the same run.

Synthetic shard: 5,000 documents on 50 sites, each 10 menu lines its site repeats and 30 lines of
its own. CPU seconds of this process (steadier than wall time on a shared machine).

Run: .venv/bin/python bench/bench_site_lines.py  (seconds)
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
import time
from pathlib import Path

import xxhash

from pretrain.curate import site_lines as S


def corpus(n: int = 5000) -> list[dict]:
    rng = random.Random(0)
    words = "river delta sand water boat harbour village market bread tide storm lantern".split()
    menu = [f"menu item {i} | shop | about" for i in range(10)]
    return [{"id": str(d), "url": f"https://site{d % 50}.example/{d}",
             "text": "\n".join(menu + [" ".join(rng.choice(words) for _ in range(12)) for _ in range(30)])}
            for d in range(n)]


def main() -> int:
    docs = corpus()
    n = sum(d["text"].count("\n") + 1 for d in docs)
    tmp = Path(tempfile.mkdtemp())
    t = time.process_time()
    for d in docs:
        prefix = S.site(d["url"]).encode() + b"\0"
        for line in d["text"].split("\n"):
            xxhash.xxh3_64_intdigest(prefix + line.encode())
    floor = time.process_time() - t
    t = time.process_time()
    S.count_shard(iter(docs), tmp / "s.npy", tmp)
    count = time.process_time() - t
    strip = S.Stripper(S.boilerplate([tmp / "s.npy"], 2, 1024))
    t = time.process_time()
    for d in docs:
        strip(d)
    stripping = time.process_time() - t
    load = os.getloadavg()[0]
    print(f"{len(docs)} documents, {n} lines (load {load:.1f}), CPU µs per line:")
    us = [x / n * 1e6 for x in (floor, count, stripping)]
    print(f"  hash alone {us[0]:.2f}   count {us[1]:.2f}   strip {us[2]:.2f}")
    print(f"  boilerplate keys {len(strip.keys)}, lines removed {sum(c[0] for c in strip.removed.values())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
