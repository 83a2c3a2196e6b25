"""Benchmark: a huge cell in a Parquet column other than the text, read by a child process (VmHWM
above the imports, seconds), with this checkout's reader and with `--before`'s in the same run.

Two files of 1,000 small rows, built in a temporary folder: `flat`, whose `junk` column holds one
`--mib` MiB cell and whose `url` one of half that; `struct`, whose datatrove-style `metadata`
struct holds `--mib` MiB in `metadata.url`. Each is read by `tests/hostile.py`'s child (4 GB of
address space) under the code of `--src` (default: this checkout's) and of `--before` (default:
../../main/src when it exists; or an export, `git archive COMMIT src | tar -x -C /tmp/old`).

With `--speed`, the cost on normal input instead: `bench_reader_fields.py`'s FineWeb-shaped file
(9 columns, `--rows`), read whole by each reader in a child process, best of 3, the two readers
alternating `--rounds` times (the machine is shared: only same-run ratios mean anything).

Run: .venv/bin/python bench/bench_parquet_cells.py [--mib 256] [--before /tmp/old/src] [--speed]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE / "tests"))


def build(folder: Path, mib: int) -> dict[str, Path]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    n, ids, texts = 1000, [f"r{i}" for i in range(1000)], [f"doc {i}" for i in range(1000)]
    junk, urls = ["x"] * n, [f"http://example.org/{i}" for i in range(n)]
    junk[500], urls[250] = "j" * (mib << 20), "http://u/" + "u" * (mib << 19)
    flat = folder / "flat.parquet"
    pq.write_table(pa.table({"id": ids, "text": texts, "url": urls, "junk": junk}), flat, compression="zstd")
    del junk, urls
    meta = [{"url": f"http://e.org/{i}"} for i in range(n)]
    meta[500] = {"url": "u" * (mib << 20)}
    struct = folder / "struct.parquet"
    pq.write_table(pa.table({"id": ids, "text": texts, "metadata": meta}), struct, compression="zstd")
    return {"flat": flat, "struct": struct}


SPEED = """
import sys, time
from collections import Counter
from pretrain.curate.readers import ReaderConfig, read_documents
best = 1e9
for _ in range(3):
    t = time.perf_counter()
    n = sum(1 for _ in read_documents(sys.argv[1], ReaderConfig(), lambda *a: None, stats=Counter()))
    best = min(best, time.perf_counter() - t)
print(n / best)
"""


def speed(before: str | None, now: str, rows: int, rounds: int) -> None:
    sys.path.insert(0, str(HERE / "bench"))
    import bench_reader_fields

    with tempfile.TemporaryDirectory() as tmp:
        path = bench_reader_fields.write(Path(tmp), rows, True)
        rates: dict[str, list[float]] = {"before": [], "now": []}
        for _ in range(rounds):
            for label, src in (("before", before), ("now", now)):
                if src is not None:
                    env = {**os.environ, "PYTHONPATH": src}
                    r = subprocess.run([sys.executable, "-c", SPEED, str(path)], capture_output=True,
                                       text=True, env=env, check=True)
                    rates[label].append(float(r.stdout.strip()))
        for label, got in rates.items():
            if got:
                shown = ", ".join(f"{x:,.0f}" for x in got)
                print(f"{label:6} {rows:,} rows, 9 columns: {shown} docs/s")
        if rates["before"]:
            print(f"now / before, best against best: {max(rates['now']) / max(rates['before']):.2f}")


def main() -> None:
    import hostile

    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--src", default=str(HERE / "src"))
    main_src = HERE.parent.parent / "main" / "src"
    ap.add_argument("--before", default=str(main_src) if main_src.is_dir() else None)
    ap.add_argument("--speed", action="store_true", help="normal input's read rate instead")
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if args.speed:
        speed(args.before, args.src, args.rows, args.rounds)
        return
    with tempfile.TemporaryDirectory() as tmp:
        files = build(Path(tmp), args.mib)
        for name, path in files.items():
            for label, src in (("before", args.before), ("now", args.src)):
                if src is None:
                    continue
                hostile.SRC = src
                r = hostile.read_in_child(path, timeout=300, mem_mb=4096)
                print(f"{name:6} {label:6} {path.stat().st_size:>7,} B file: {r['n']} docs, "
                      f"{r['peak_mb'] - r['base_mb']:,.0f} MB above the imports, {r['seconds']:.2f} s; "
                      f"{[why[:90] for _, why in r['errors']]}")


if __name__ == "__main__":
    main()
