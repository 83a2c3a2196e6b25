"""Benchmark: a huge cell in a Parquet column other than the text, read by a child process (VmHWM
above the imports, seconds), with this checkout's reader and with `--before`'s in the same run.

Four files of 1,000 small rows, built in a temporary folder: `flat`, whose `junk` column holds one
`--mib` MiB cell and whose `url` one of half that; `struct`, whose datatrove-style `metadata`
struct holds `--mib` MiB in `metadata.url`; `list`, whose `tags` list of strings holds `--mib` MiB
in one row (copies of one 1 KiB dictionary entry: a few kB on disk); `deep`, whose string two
structs deep (`metadata.info.note`) holds `--mib` MiB (session 11). Each is read by
`tests/hostile.py`'s child (4 GB of address space) under the code of `--src` (default: this
checkout's) and of `--before` (default: ../../main/src when it exists; or an export,
`git archive COMMIT src | tar -x -C /tmp/old`).

With `--speed`, the cost on normal input instead: `bench_reader_fields.py`'s FineWeb-shaped file
(9 columns, `--rows`), and a nested one (`--rows` rows: a `tags` list of 0-6 words, a `metadata`
struct holding a struct; session 11), read whole by each reader in a child process, best of 3,
the two readers alternating `--rounds` times (the machine is shared: only same-run ratios mean
anything).

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
    del meta
    tags = [["a", "b"] for _ in range(n)]
    tags[500] = ["t" * 1024] * (mib << 10)
    listed = folder / "list.parquet"
    pq.write_table(pa.table({"id": ids, "text": texts, "tags": tags}), listed, compression="zstd")
    del tags
    deep = [{"url": f"http://e/{i}", "info": {"lang": "en", "note": "x"}} for i in range(n)]
    deep[500] = {"url": "http://e/500", "info": {"lang": "en", "note": "n" * (mib << 20)}}
    nested = folder / "deep.parquet"
    pq.write_table(pa.table({"id": ids, "text": texts, "metadata": deep}), nested, compression="zstd")
    return {"flat": flat, "struct": struct, "list": listed, "deep": nested}


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
        files = {"9 columns": bench_reader_fields.write(Path(tmp), rows, True),
                 "nested": nested(Path(tmp), rows)}
        for name, path in files.items():
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
                    print(f"{label:6} {rows:,} rows, {name}: {shown} docs/s")
            if rates["before"]:
                ratio = max(rates["now"]) / max(rates["before"])
                print(f"{name}: now / before, best against best: {ratio:.2f}")


def nested(folder: Path, rows: int) -> Path:
    """A normal file with a list of strings and a struct holding a struct, one row group."""
    import random

    import pyarrow as pa
    import pyarrow.parquet as pq

    rng, words = random.Random(0), ["news", "sport", "science", "travel", "food", "music"]
    path = folder / "nested.parquet"
    pq.write_table(pa.table({
        "id": [f"r{i}" for i in range(rows)],
        "text": [" ".join(rng.choices(words, k=60)) for _ in range(rows)],
        "tags": [rng.sample(words, rng.randint(0, 6)) for _ in range(rows)],
        "metadata": [{"url": f"https://e.org/{i}", "info": {"lang": "en", "note": rng.choice(words)}}
                     for i in range(rows)],
    }), path, compression="zstd", row_group_size=rows)
    return path


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
