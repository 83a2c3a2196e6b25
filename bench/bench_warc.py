"""Benchmark: reading WARC files, and the read -> extract path, on real crawl data.

Prints the inventory of every file under ../shared/data/warc (records by type, documents out,
errors with reasons), then, in one run, per core (CPU seconds of this process and its children,
so that other work on a shared machine does not distort the figures):
- WARC records/s, fastwarc vs warcio, iterating every record and reading its payload;
- our reader (`read_documents`: HTTP parsing, charset, checks, gap check) in documents/s and MB/s;
- read + extract pages/s per backend on the same pages.

Files: ../shared/data/warc/derived/*.warc.gz (181 article pages) and the Common Crawl excerpt
../shared/data/warc/resiliparse/warcfile.warc.gz. `--repeat N` loops over them N times.

Run: .venv/bin/python bench/bench_warc.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from pretrain.curate.extract import ExtractConfig, build_extract_step
from pretrain.curate.readers import ReaderConfig, read_documents

WARC = Path(os.environ.get("PRETRAIN_SHARED_DATA")
        or Path(__file__).resolve().parents[2] / "shared" / "data") / "warc"


def fastwarc_records(files: list[Path]) -> int:
    from fastwarc.warc import ArchiveIterator

    n = 0
    for f in files:
        for rec in ArchiveIterator(str(f), fsspec_args=False, quirks_mode=True):
            rec.reader.read()
            n += 1
    return n


def warcio_records(files: list[Path]) -> int:
    from warcio.archiveiterator import ArchiveIterator

    n = 0
    for f in files:
        with open(f, "rb") as fh:
            for rec in ArchiveIterator(fh):
                rec.content_stream().read()
                n += 1
    return n


def cpu() -> float:
    """CPU seconds of this process and its finished children: per-core figures that do not
    depend on what else the (shared) machine runs."""
    import resource

    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + c.ru_utime + c.ru_stime


def timed(fn, *args) -> tuple[int, float]:
    t = cpu()
    n = fn(*args)
    return n, cpu() - t


def read_all(files: list[Path], cfg: ReaderConfig) -> list:
    return [d for f in files for d in read_documents(f, cfg)]


def inventory() -> None:
    """Every file under ../shared/data/warc: records by type, documents out, errors with reasons."""
    from collections import Counter

    for f in sorted(
        p for p in WARC.rglob("*") if p.is_file() and p.suffix != ".py" and "jsonl" not in p.name
    ):
        stats: Counter[str] = Counter()
        errors: list[str] = []
        docs = sum(
            1
            for _ in read_documents(
                f, ReaderConfig(), lambda p, r, why, errors=errors: errors.append(f"{r}: {why}"), stats=stats
            )
        )
        types = ", ".join(f"{k[8:]} {v}" for k, v in sorted(stats.items()) if k.startswith("records."))
        skipped = ", ".join(f"{k[8:]} {v}" for k, v in sorted(stats.items()) if k.startswith("skipped."))
        print(
            f"  {f.relative_to(WARC)}: {types}; documents {docs}"
            + (f"; skipped: {skipped}" if skipped else "")
        )
        for e in errors:
            print(f"      error {e[:150]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    base = sorted((WARC / "derived").glob("*.warc.gz")) + [WARC / "resiliparse" / "warcfile.warc.gz"]
    if not all(f.exists() for f in base):
        print(f"no data under {WARC}; nothing to measure")
        return 0
    print("inventory (default ReaderConfig):")
    inventory()
    files = base * args.repeat
    mb = sum(f.stat().st_size for f in files) / 1e6
    n_fw, t_fw = timed(fastwarc_records, files)
    n_wi, t_wi = timed(warcio_records, files)
    print(f"files: {len(base)} x {args.repeat}, {mb:.1f} MB compressed")
    print(
        f"fastwarc: {n_fw / t_fw:10.0f} records/s   warcio: {n_wi / t_wi:8.0f} records/s   "
        f"ratio {t_wi / t_fw * n_fw / n_wi:.1f}x"
    )
    for check in ("all", "uncompressed"):
        cfg = ReaderConfig(warc_check_gaps=check)
        t = cpu()
        docs = read_all(files, cfg)
        dt = cpu() - t
        html_mb = sum(len(d.text) for d in docs) / 1e6
        print(
            f"read_documents (warc_check_gaps={check:<12}): {len(docs) / dt:8.0f} docs/s  "
            f"{html_mb / dt:6.1f} MB/s of HTML"
        )
    pages = read_all(base, ReaderConfig())
    html_mb = sum(len(d.text.encode()) for d in pages) / 1e6
    for backend in ("resiliparse", "trafilatura"):
        step = build_extract_step(ExtractConfig(backend=backend))
        t = cpu()
        out = list(step(read_all(base, ReaderConfig())))
        step.close()
        dt = cpu() - t
        print(
            f"read + extract [{backend:<11}]: {len(pages) / dt:7.1f} pages/s per core "
            f"{html_mb / dt:6.2f} MB/s "
            f"({len(out)} of {len(pages)} pages kept, {dict(step.stats)})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
