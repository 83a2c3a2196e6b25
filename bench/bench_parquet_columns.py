"""Benchmark: reading a Parquet or Arrow IPC file of thousands of columns (`readers.read_documents`),
this checkout against another source tree measured in the same run, to show the time per column is
flat (linear in columns) rather than growing with them (quadratic).

Each file: a `text` and an `id` column and N short string columns (every one a metadata field a
row carries), 8 rows, written by pyarrow. Each read runs in a child process with PYTHONPATH set to
the tree (`--src`, this checkout's `src` by default; `--before`, an older one:
`git archive COMMIT src | tar -x -C /tmp/old` then `--before /tmp/old/src`); CPU seconds of the
read alone (imports excluded), and microseconds per column. One run each; a machine shared by other
jobs moves the absolute numbers, not the shape.

Run: PYTHONPATH=src .venv/bin/python bench/bench_parquet_columns.py [--columns 1000 4000 8000] [--before DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
_CHILD = """
import sys, time
from collections import Counter
from pathlib import Path
from pretrain.curate.readers import ReaderConfig, read_documents
t = time.process_time()
docs = list(read_documents(Path(sys.argv[1]), ReaderConfig(), lambda *a: None, stats=Counter()))
assert len(docs) == 8 and len(docs[0].metadata) == int(sys.argv[2]), (len(docs), len(docs[0].metadata))
print(time.process_time() - t)
"""


def write(kind: str, n: int, where: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    cols = {"text": pa.array(["hello world"] * 8), "id": pa.array([str(i) for i in range(8)])}
    cols |= {f"c{j}": pa.array([f"v{j}"] * 8) for j in range(n)}
    table, path = pa.table(cols), where / f"c{n}.{kind}"
    if kind == "parquet":
        pq.write_table(table, path)
    else:
        with pa.ipc.new_file(path, table.schema) as w:
            w.write_table(table)
    return path


def measure(src: str, path: Path, n: int, timeout: float) -> float | None:
    env = {**os.environ, "PYTHONPATH": src}
    try:
        r = subprocess.run([sys.executable, "-c", _CHILD, str(path), str(n)], capture_output=True, text=True,
                           env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    if r.returncode:
        raise SystemExit(r.stderr)
    return float(r.stdout)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--columns", type=int, nargs="+", default=[1000, 2000, 4000, 8000])
    ap.add_argument("--src", default=str(HERE / "src"))
    ap.add_argument("--before", default=None, help="another source tree, measured the same way")
    ap.add_argument("--timeout", type=float, default=300, help="seconds a read may take (then: >)")
    a = ap.parse_args(argv)
    trees = [("now", a.src)] + ([("before", a.before)] if a.before else [])
    with tempfile.TemporaryDirectory() as d:
        for kind in ("parquet", "arrow"):
            for n in a.columns:
                path = write(kind, n, Path(d))
                cells = []
                for name, src in trees:
                    t = measure(src, path, n, a.timeout)
                    cells.append(f"{name} >{a.timeout:.0f} s" if t is None else
                                 f"{name} {t:7.2f} s ({t / n * 1e6:6.0f} us/column)")
                print(f"{kind:8s} {n:6,} columns  " + "   ".join(cells), flush=True)


if __name__ == "__main__":
    sys.exit(main())
