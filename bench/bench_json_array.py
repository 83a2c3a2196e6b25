"""Benchmark: a JSON-array file (`Dataset.to_json(lines=False)`) read by our streaming reader,
against the same records as JSON Lines through our reader, and the stdlib's `json.load` of the
whole array (what a reader without streaming does), each in a child process: CPU seconds and the
peak resident memory above the imports (VmHWM less the baseline), on the same records.

Run: .venv/bin/python bench/bench_json_array.py [--mb 40]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import json, sys, time
from pathlib import Path
from pretrain.curate.readers import ReaderConfig, read_documents

def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1]) / 1024
base = hwm()
t0 = time.process_time()
if sys.argv[1] == "stdlib":
    n = sum(1 for r in json.load(open(sys.argv[2])) if isinstance(r.get("text"), str))
else:
    n = sum(1 for _ in read_documents(Path(sys.argv[2]), ReaderConfig()))
print(json.dumps({"docs": n, "cpu_s": time.process_time() - t0, "peak_mb": hwm() - base}))
"""


def _records(mb: float):
    size, i = 0, 0
    while size < mb * 1e6:
        text = " ".join(f"word{(i * 7919 + j) % 5003}" for j in range(300))
        rec = {"id": f"d{i}", "text": text, "url": f"https://example.org/{i}", "meta": {"i": i}}
        size += len(text) + 60
        i += 1
        yield rec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=40.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        recs = list(_records(args.mb))
        arr, lines = Path(d, "a.json"), Path(d, "a.jsonl")
        arr.write_text(json.dumps(recs))
        lines.write_text("".join(json.dumps(r) + "\n" for r in recs))
        print(f"{len(recs):,} records, {arr.stat().st_size / 1e6:.1f} MB (machine shared: +-10%)")
        for label, mode, path in (("ours, JSON array (streamed)", "ours", arr),
                                  ("ours, JSON Lines", "ours", lines),
                                  ("stdlib json.load, whole array (peer)", "stdlib", arr)):
            res = subprocess.run([sys.executable, "-c", CHILD, mode, str(path)], capture_output=True,
                                 text=True, check=True)
            r = json.loads(res.stdout)
            mbs = arr.stat().st_size / 1e6 / r["cpu_s"]
            print(f"  {label:38s} {r['docs']:>8,} docs  {r['cpu_s']:6.2f} CPU s  {mbs:6.1f} MB/s  "
                  f"peak +{r['peak_mb']:.0f} MB")


if __name__ == "__main__":
    main()
