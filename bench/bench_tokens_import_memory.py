"""Benchmark: peak memory of `pretrain tokens import-datatrove` on a big index, this checkout against
another git revision (default: main), same run.

Writes a synthetic datatrove file of many short documents (`NAME.ds`: uint16 ids, `NAME.ds.index`:
uint64 document ends, the worst case for the index: 8 bytes of index per 2-5 tokens) with no
end-of-text (one is appended to every document, the path that inserts ids), then imports it in a
fresh process per side, whose `pretrain` package comes from this checkout or from the revision's
`src/` (`git archive`). Each child prints its peak resident memory (VmHWM) above what it held
before the import, and the time; both sides' shards must be byte-identical.

VmHWM counts the pages of memory-mapped files read too: the `.ds` is mapped by both sides (its
size, in the table), so the difference between the sides is the index and what was derived from it.

Run: .venv/bin/python bench/bench_tokens_import_memory.py [--mdocs 20] [--base main]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from srctree import export_src  # noqa: E402  (bench/: a revision's src/)

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
def peak_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
from pretrain.tokens.imports import import_tokens
import numpy, tokenizers  # noqa: F401  (imported before the base line: not the import's memory)
ds, tok, out = sys.argv[1:4]
base, t0 = peak_mb(), time.perf_counter()
man = import_tokens("datatrove", [ds], tok, out)
print(json.dumps({"peak_mb": peak_mb() - base, "s": time.perf_counter() - t0, "tokens": man["tokens"],
                  "documents": man["documents"]}))
"""


def write_datatrove(ds: Path, docs: int, seed: int = 0) -> int:
    """`docs` documents of 2-5 random ids in 1..255, no end-of-text; written a million at a time."""
    rng = np.random.default_rng(seed)
    end = 0
    with open(ds, "wb") as fd, open(f"{ds}.index", "wb") as fi:
        for lo in range(0, docs, 1 << 20):
            n = min(1 << 20, docs - lo)
            lengths = rng.integers(2, 6, size=n)
            fd.write(rng.integers(1, 256, size=int(lengths.sum())).astype("<u2").tobytes())
            fi.write((end + np.cumsum(lengths)).astype("<u8").tobytes())
            end += int(lengths.sum())
    Path(f"{ds}.metadata").write_text("synthetic|2\n")
    return end


def one_side(src: Path, ds: Path, tok: Path, out: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, str(ds), str(tok), str(out)], capture_output=True,
                          text=True, env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"})
    if proc.returncode != 0:
        raise SystemExit(f"import with {src} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def digest(folder: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(folder.glob("shard_*")):
        if f.suffix in (".bin", ".idx"):
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mdocs", type=float, default=20, help="millions of documents (default 20)")
    ap.add_argument("--base", default="main", help="the git revision to compare with (default: main)")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    from pretrain.tokens.tokenizer import train_tokenizer

    with tempfile.TemporaryDirectory(prefix="bench-dt-mem-") as tmp:
        tmp = Path(tmp)
        tok = tmp / "tok.json"
        train_tokenizer(["the quick brown fox jumps over the lazy dog " * 50], vocab_size=300).save(str(tok))
        ds = tmp / "web.ds"
        tokens = write_datatrove(ds, int(args.mdocs * 1e6))
        index_mb = Path(f"{ds}.index").stat().st_size / 2**20
        print(f"datatrove input: {int(args.mdocs * 1e6):,} documents, {tokens:,} tokens; .ds "
              f"{ds.stat().st_size / 2**20:,.0f} MB, .ds.index {index_mb:,.0f} MB")
        (tmp / "base").mkdir()
        sides = {args.base: export_src(args.base, tmp / "base"), "this checkout": ROOT / "src"}
        rows = {}
        for name, src in sides.items():
            out = tmp / f"out-{len(rows)}"
            rows[name] = {**one_side(src, ds, tok, out), "digest": digest(out)}
        print(f"{'side':<16}{'peak MB above start':>22}{'per index MB':>14}{'seconds':>10}  shards sha256")
        for name, r in rows.items():
            per = r["peak_mb"] / index_mb
            print(f"{name:<16}{r['peak_mb']:>22,.0f}{per:>14.2f}{r['s']:>10.1f}  {r['digest']}")
        old, new = rows[args.base], rows["this checkout"]
        same = old["digest"] == new["digest"] and old["tokens"] == new["tokens"]
        print(f"peak memory: {new['peak_mb'] / old['peak_mb']:.2f}x of {args.base}'s; time "
              f"{new['s'] / old['s']:.2f}x; shards {'byte-identical' if same else 'DIFFER'}")
        return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
