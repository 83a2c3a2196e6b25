"""Benchmark: near-duplicate removal end to end, ours vs datasketch vs datatrove, in one run.

    .venv/bin/python bench/bench_dedup.py                 # 20k documents of ~3 KB
    .venv/bin/python bench/bench_dedup.py --docs 100000   # the issue's size

One seeded corpus (JSONL, 4 files): random-word documents of ~500 words (~3 KB), 10% of them with a
planted twin at Jaccard 0.9 and 2% with an exact copy (case changed). Every system runs in its own
single-process child (so docs/s is per core) on the same files with word 5-grams, 14 bands x 8
rows; peak RSS is the child's own high-water mark (VmHWM). Recall = share of planted twins and copies removed.

- ours: `pretrain dedup` (read, sign, global stages, write the corpus), one worker.
- datasketch: read, our normalization and shingles, MinHash(112).update_batch, MinHashLSH((14, 8))
  insertion session, a query per document, union-find (it holds every signature in memory).
- datatrove: its four MinHash stages (signature, buckets, cluster, filter) with JsonlReader and
  JsonlWriter, in ../.venv-peers; skipped when that venv is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PEERS_PY = ROOT / ".venv-peers" / "bin" / "python"


# ----------------------------------------------------------------------------- corpus


def make_corpus(folder: Path, n_docs: int, seed: int = 0, files: int = 4) -> dict[str, str]:
    """Write the corpus; returns planted duplicate id -> its original's id."""
    from pretrain.curate.dedup_synth import Generator

    gen = Generator(seed)
    docs, planted = [], {}
    while len(docs) < n_docs:
        i = len(docs)
        ws = gen.words(gen.rng.randint(420, 560))
        docs.append((f"d{i:08d}", " ".join(ws)))
        r = gen.rng.random()
        if r < 0.10 and len(docs) < n_docs:
            twin, _ = gen.twin(ws, 0.9)
            docs.append((f"t{i:08d}", twin))
            planted[f"t{i:08d}"] = f"d{i:08d}"
        elif r < 0.12 and len(docs) < n_docs:
            docs.append((f"x{i:08d}", " ".join(ws).upper()))
            planted[f"x{i:08d}"] = f"d{i:08d}"
    folder.mkdir(parents=True, exist_ok=True)
    per = -(-len(docs) // files)
    for f in range(files):
        with open(folder / f"part-{f}.jsonl", "w") as fh:
            for doc_id, text in docs[f * per : (f + 1) * per]:
                fh.write(json.dumps({"id": doc_id, "text": text}) + "\n")
    return planted


# ----------------------------------------------------------------------------- children


def child_ours(inp: Path, out: Path, workers: int) -> list[str]:
    from pretrain.curate.dedup import load_removals
    from pretrain.curate.dedup_job import run_dedup
    from pretrain.curate.executor import LocalExecutor

    run_dedup([str(inp)], out, executor=LocalExecutor(workers))
    return list(load_removals(out / "work" / "dedup" / "removals.jsonl.zst"))


def child_datasketch(inp: Path, out: Path, workers: int) -> list[str]:
    from datasketch import MinHash, MinHashLSH

    from pretrain.curate.minhash import shingles

    lsh = MinHashLSH(num_perm=112, params=(14, 8))
    sigs: list[tuple[str, MinHash]] = []
    with lsh.insertion_session() as session:
        for f in sorted(inp.glob("*.jsonl")):
            for line in open(f):
                rec = json.loads(line)
                m = MinHash(num_perm=112, seed=1)
                m.update_batch([s.encode() for s in shingles(rec["text"], 5)])
                session.insert(rec["id"], m)
                sigs.append((rec["id"], m))
    parent = {doc_id: doc_id for doc_id, _ in sigs}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for doc_id, m in sigs:
        for other in lsh.query(m):
            a, b = find(doc_id), find(other)
            if a != b:
                parent[max(a, b)] = min(a, b)
    return [d for d in parent if find(d) != d]


def _shim_huggingface_hub() -> None:
    """datatrove 0.10 imports hub helpers that an older huggingface_hub in the peer venv lacks;
    the MinHash stages never call them, so placeholders let the import through."""
    try:
        import huggingface_hub
    except ImportError:
        return
    for name in ("batch_bucket_files", "create_bucket", "list_bucket_tree", "preupload_lfs_files"):
        if not hasattr(huggingface_hub, name):
            setattr(huggingface_hub, name, None)


def child_datatrove(inp: Path, out: Path, workers: int) -> list[str]:
    _shim_huggingface_hub()
    from datatrove.data import Document
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup.minhash import (
        MinhashConfig,
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
        MinhashDedupSignature,
    )
    from datatrove.utils.hashing import HashConfig
    from loguru import logger

    logger.remove()
    cfg = MinhashConfig(n_grams=5, num_buckets=14, hashes_per_bucket=8, hash_config=HashConfig(precision=64))
    logs, kept = str(out / "logs"), []

    def read(data, rank: int = 0, world_size: int = 1):
        # datatrove's JsonlReader needs orjson, which `make peers` does not install: read with json.
        for f in sorted(inp.glob("*.jsonl")):
            for line in open(f):
                rec = json.loads(line)
                yield Document(text=rec["text"], id=rec["id"])

    def collect(data, rank: int = 0, world_size: int = 1):
        for doc in data:
            kept.append(doc.id)
        return iter(())

    def run(pipeline, tasks, name):
        LocalPipelineExecutor(pipeline=pipeline, tasks=tasks, workers=1,
                              logging_dir=f"{logs}/{name}").run()

    run([read, MinhashDedupSignature(output_folder=str(out / "sigs"), config=cfg)], 1, "s1")
    run([MinhashDedupBuckets(input_folder=str(out / "sigs"), output_folder=str(out / "buckets"),
                             config=cfg)], cfg.num_buckets, "s2")
    run([MinhashDedupCluster(input_folder=str(out / "buckets"), output_folder=str(out / "remove"),
                             config=cfg)], 1, "s3")
    run([read, MinhashDedupFilter(input_folder=str(out / "remove")), collect], 1, "s4")
    keep = set(kept)
    return [doc.id for doc in read(None) if doc.id not in keep]


CHILDREN = {"ours": child_ours, "datasketch": child_datasketch, "datatrove": child_datatrove}


def run_child(system: str, inp: Path, out: Path, workers: int) -> dict:
    """Run one system in a fresh process; its wall time, peak RSS and removed ids."""
    python = str(PEERS_PY) if system == "datatrove" else sys.executable
    out.mkdir(parents=True, exist_ok=True)
    result = out / "result.json"
    cmd = [python, __file__, "--child", system, str(inp), str(out), str(workers), str(result)]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    err = proc.stderr.read().decode(errors="replace")[-2000:]
    if status != 0 or not result.exists():
        return {"system": system, "error": err}
    out_json = json.loads(result.read_text())
    out_json["cpu_s"] = usage.ru_utime + usage.ru_stime
    out_json["disk_mb"] = sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) / 2**20
    return out_json


def child_main(system: str, inp: str, out: str, workers: str, result: str) -> None:
    t0 = time.perf_counter()
    removed = CHILDREN[system](Path(inp), Path(out), int(workers))
    seconds = time.perf_counter() - t0
    Path(result).write_text(json.dumps({"system": system, "seconds": seconds, "removed": removed,
                                        "peak_rss_mb": _peak_rss_mb()}))


def _peak_rss_mb() -> float:
    """This process's peak RSS since exec (VmHWM). wait4's ru_maxrss would also count the pages
    the child shared with the parent between fork and exec: the parent holds the corpus."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ----------------------------------------------------------------------------- report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=20_000)
    ap.add_argument("--systems", default="ours,datasketch,datatrove")
    ap.add_argument("--workers", type=int, default=1, help="processes for ours (per-core figures use 1)")
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child_main(*args.child)
        return
    with tempfile.TemporaryDirectory(prefix="bench_dedup_") as tmp:
        inp = Path(tmp) / "corpus"
        t0 = time.perf_counter()
        planted = make_corpus(inp, args.docs)
        size = sum(f.stat().st_size for f in inp.glob("*.jsonl"))
        print(f"corpus: {args.docs} documents, {size / args.docs / 1000:.1f} KB each, "
              f"{len(planted)} planted duplicates (made in {time.perf_counter() - t0:.0f} s)")
        rows = []
        for system in args.systems.split(","):
            if system == "datatrove" and not PEERS_PY.exists():
                print(f"datatrove: skipped ({PEERS_PY} missing; run `make peers`)")
                continue
            res = run_child(system, inp, Path(tmp) / system, args.workers if system == "ours" else 1)
            if "error" in res:
                print(f"{system}: failed: {res['error']}")
                continue
            removed = set(res["removed"])
            res["recall"] = sum(1 for d in planted if d in removed) / max(1, len(planted))
            res["false"] = len(removed - set(planted))
            res["docs_s"] = args.docs / res["seconds"]
            rows.append(res)
        _report(rows, args.docs)
        if args.workers > 1:
            print(f"(ours ran with {args.workers} worker processes: its docs/s is the total, not per core, "
                  "and its peak RSS is the parent's; each worker holds one shard at a time)")


def _report(rows: list[dict], n: int) -> None:
    ours = next((r for r in rows if r["system"] == "ours"), None)
    print(f"\n{'system':<11} {'seconds':>8} {'docs/s/core':>12} {'ours is x':>10} {'peak MB':>8} "
          f"{'KB/doc':>7} {'disk MB':>8} {'recall':>7} {'other removed':>13}")
    for r in rows:
        ratio = ours["docs_s"] / r["docs_s"] if ours else float("nan")
        kb_doc, disk = r["peak_rss_mb"] * 1024 / n, r["disk_mb"]
        print(f"{r['system']:<11} {r['seconds']:8.1f} {r['docs_s']:12.0f} {ratio:10.1f} "
              f"{r['peak_rss_mb']:8.0f} {kb_doc:7.2f} {disk:8.0f} {r['recall']:7.4f} {r['false']:13d}")


if __name__ == "__main__":
    main()
