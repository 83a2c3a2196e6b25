"""Benchmark: what recording the JSON types of each written record (`card.Shape.add`, for
OUT/README.md) costs beside writing it: `io.dumps_line` (the serialization alone) and
`io.JsonlZstWriter.write` (serialization and compression, what every record of data/ and rejects/
goes through). Records: the cc_net documents of ../shared/data as kept documents (metadata with
17 keys, a list of line ids); records/s and microseconds per record, best of `--repeat`, one process.

Run: .venv/bin/python bench/bench_card.py [--copies 500] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import tempfile
import time
from pathlib import Path

from pretrain.curate import io
from pretrain.curate.card import Shape

SHARED = Path(os.environ.get("PRETRAIN_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def records(copies: int) -> list[dict]:
    out = []
    for f in sorted((SHARED / "warc" / "dolma").glob("cc_en_head-*.jsonl.gz")):
        for line in gzip.open(f, "rt", encoding="utf-8"):
            r = json.loads(line)
            meta = {k: v for k, v in r.items() if k not in ("id", "text")}
            out.append({"id": r["id"], "text": r["text"], "source": f.name,
                        "metadata": {**meta, "language": "en", "language_score": 0.93}})
    return out * copies


def best(fn, recs: list[dict], repeat: int) -> float:
    t_best = 1e9
    for _ in range(repeat):
        t = time.perf_counter()
        fn(recs)
        t_best = min(t_best, time.perf_counter() - t)
    return len(recs) / t_best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--copies", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    recs = records(args.copies)
    if not recs:
        raise SystemExit(f"no cc_net files under {SHARED}/warc/dolma")

    def dump(rs):
        for r in rs:
            io.dumps_line(r)

    def shape(rs):
        s = Shape()
        for r in rs:
            s.add(r)

    def write(rs):
        with tempfile.TemporaryDirectory() as tmp, io.JsonlZstWriter(Path(tmp) / "x.jsonl.zst") as w:
            for r in rs:
                w.write(r)

    d, w, s = (best(f, recs, args.repeat) for f in (dump, write, shape))
    print(f"{len(recs)} records: dumps_line {d:,.0f}/s, JsonlZstWriter.write {w:,.0f}/s "
          f"({1e6 / w:.1f} us each), Shape.add {s:,.0f}/s ({1e6 / s:.1f} us each): "
          f"+{w / s * 100:.0f}% on the writer's time per record")


if __name__ == "__main__":
    main()
