"""Benchmark: what keeping every top-level field costs the Parquet reader. A FineWeb-shaped file
(text, id, url and six more columns) and a 3-column one, read by our reader (the extra columns go
into `Document.metadata`), against pyarrow's own `iter_batches(...).to_pylist()` of the same file
(the floor: rows as dicts, nothing checked) and, when `.venv-peers` has it, datatrove's
ParquetReader, which keeps the same fields. Docs/s, best of `--repeat`, in this process (datatrove
in a child process, timed inside it).

Run: .venv/bin/python bench/bench_reader_fields.py [--rows 50000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PEERS_PY = Path(__file__).resolve().parents[1] / ".venv-peers" / "bin" / "python"

DATATROVE = """
import sys, time
from datatrove.pipeline.readers import ParquetReader
best = 1e9
for _ in range(int(sys.argv[2])):
    t = time.perf_counter()
    n = sum(1 for _ in ParquetReader(sys.argv[1])())
    best = min(best, time.perf_counter() - t)
print(n / best)
"""


def write(folder: Path, rows: int, wide: bool) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    cols = {"text": [f"page {i} " + "words about tides and moraines " * 60 for i in range(rows)],
            "id": [f"<urn:uuid:{i}>" for i in range(rows)],
            "url": [f"http://ex.org/{i}" for i in range(rows)]}
    if wide:
        cols |= {"dump": ["CC-MAIN-2024-10"] * rows, "date": ["2024-02-21T07:13:02Z"] * rows,
                 "file_path": ["s3://commoncrawl/crawl-data/x.warc.gz"] * rows, "language": ["en"] * rows,
                 "language_score": [0.93] * rows, "token_count": [400] * rows}
    path = folder / ("wide" if wide else "narrow") / "part.parquet"
    path.parent.mkdir()
    pq.write_table(pa.table(cols), path, row_group_size=10_000)
    return path


def best_rate(fn, repeat: int) -> float:
    best, n = 1e9, 0
    for _ in range(repeat):
        t = time.perf_counter()
        n = fn()
        best = min(best, time.perf_counter() - t)
    return n / best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    import pyarrow.parquet as pq

    from pretrain.curate.readers import ReaderConfig, read_documents

    with tempfile.TemporaryDirectory() as tmp:
        for wide in (True, False):
            path = write(Path(tmp), args.rows, wide)
            ours = best_rate(lambda p=path: sum(1 for _ in read_documents(p, ReaderConfig())), args.repeat)
            floor = best_rate(lambda p=path: sum(b.num_rows for b in pq.ParquetFile(p).iter_batches(64)
                                                 if b.to_pylist()), args.repeat)
            line = f"{'9' if wide else '3'} columns: ours {ours:,.0f} docs/s, pyarrow to_pylist {floor:,.0f}"
            if PEERS_PY.exists():
                res = subprocess.run([str(PEERS_PY), "-c", DATATROVE, str(path.parent), str(args.repeat)],
                                     capture_output=True, text=True, timeout=300)
                ok = res.returncode == 0
                peer = f"{float(res.stdout):,.0f}" if ok else "n/a (" + res.stderr[-80:] + ")"
                line += f", datatrove ParquetReader {peer}"
            print(line, flush=True)
    print(f"(best of {args.repeat}, {args.rows:,} rows; one machine, shared: figures vary)", file=sys.stderr)


if __name__ == "__main__":
    main()
