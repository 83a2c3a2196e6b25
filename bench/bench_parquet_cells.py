"""Benchmark: a huge cell in a Parquet column other than the text, read by a child process (VmHWM
above the imports, seconds), with this checkout's reader and with `--before`'s in the same run.

Two files of 1,000 small rows, built in a temporary folder: `flat`, whose `junk` column holds one
`--mib` MiB cell and whose `url` one of half that; `struct`, whose datatrove-style `metadata`
struct holds `--mib` MiB in `metadata.url`. Each is read by `tests/hostile.py`'s child (4 GB of
address space) under the code of `--src` (default: this checkout's) and of `--before` (default:
../../main/src when it exists; or an export, `git archive COMMIT src | tar -x -C /tmp/old`).

Run: .venv/bin/python bench/bench_parquet_cells.py [--mib 256] [--before /tmp/old/src]
"""

from __future__ import annotations

import argparse
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


def main() -> None:
    import hostile

    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--src", default=str(HERE / "src"))
    main_src = HERE.parent.parent / "main" / "src"
    ap.add_argument("--before", default=str(main_src) if main_src.is_dir() else None)
    args = ap.parse_args()
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
