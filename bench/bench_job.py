"""Benchmark: the corpus job layer (one driver for curate, dedup, decontaminate).

    .venv/bin/python bench/bench_job.py memory            # peak RSS, 100k and 1M tiny docs, one file
    .venv/bin/python bench/bench_job.py memory --docs 5000000 --jobs dedup   # ~4 min
    .venv/bin/python bench/bench_job.py s3                # curate WARCs from/to a local S3 server vs disk
    .venv/bin/python bench/bench_job.py s3 --copies 16    # the same WARCs 16 times (~20 s locally)
    .venv/bin/python bench/bench_job.py s3 --copies 16 --latency-ms 30   # each request 30 ms later
    .venv/bin/python bench/bench_job.py scaling           # belt pages/s with 1 and 2 workers
    .venv/bin/python bench/bench_job.py smallfiles        # 1,000 and 10,000 one-page files, grouped or not
    .venv/bin/python bench/bench_job.py smallfiles --files 1000 --old-max 1000   # ~5 min on 2 cores

memory: one JSONL file of N tiny documents (a few words each, 1% exact copies) through
`pretrain dedup`, through a curate belt with dedup (`steps = ["pii", "dedup"]`: every document
kept, copied to work/kept, signed) and through a filter-only belt (`steps = ["rules"]`, which
drops most of them: every drop is a reject record). Each run is a child process; its peak RSS is
its own VmHWM. A shard's memory should stay flat in N: documents and rejects stream to their
writers and signing holds one part of `dedup.chunk_docs` documents. What still grows with N is
the global stages' ~50 bytes per document (labels, the key rows of a range), within
`dedup.memory_mb`; dedup runs up to --dedup-max documents.

smallfiles: a folder of N one-page JSONL files (~1 kB each, 2 documents, 1% exact copies across
files) through `pretrain dedup` and `pretrain curate` (the default belt), with inputs grouped into
shards (`[shards]` defaults: curate/grouping.py) and one shard per file (`shards.max_inputs=1`,
the layout before session 13), in the same run, the default workers. The old layout runs up to
--old-max files, each command bounded by --timeout seconds (printed as "> T").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = str(ROOT / "src")


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))


def tiny_corpus(path: Path, n: int) -> None:
    """n documents of 6-11 words from a 20k-word vocabulary (seeded); every 100th an exact copy
    of the one before (so dedup removes 1%)."""
    import random

    rng = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyz"  # no digits: normalization maps every digit to 0
    vocab = ["".join(rng.choices(letters, k=rng.randint(3, 8))) for _ in range(20_000)]
    prev = ""
    with open(path, "w") as f:
        for i in range(n):
            text = prev if i % 100 == 99 else " ".join(rng.choices(vocab, k=rng.randint(6, 11)))
            prev = text
            f.write(json.dumps({"id": f"d{i}", "text": text}) + "\n")


_CHILD = """
import sys, json, time
from pretrain.curate.dedup_job import job_config
from pretrain.curate.pipeline import curate
from pretrain.curate.executor import LocalExecutor
job, inp, out, overrides = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
t0 = time.process_time()
stats = curate([inp], out, job_config(job, None, overrides), executor=LocalExecutor(1), job=job)
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
print(json.dumps({"kb": hwm, "cpu": time.process_time() - t0, "read": stats["documents"]["read"],
                  "kept": stats["documents"]["kept"]}))
"""


def run_child(job: str, inp: Path, out: Path, overrides: list[str]) -> dict:
    res = subprocess.run([sys.executable, "-c", _CHILD, job, str(inp), str(out), json.dumps(overrides)],
                         env=_env(), capture_output=True, text=True, timeout=900)
    if res.returncode:
        raise SystemExit(res.stderr[-3000:])
    return json.loads(res.stdout.strip().splitlines()[-1])


JOBS = [("dedup", "dedup", []), ("curate pii+dedup", "curate", ['steps=["pii","dedup"]']),
        ("filters (rules)", "curate", ['steps=["rules"]'])]


def bench_memory(sizes: list[int], dedup_max: int, extra: list[str], only: str) -> None:
    print("peak RSS of one shard (one file), single process; tiny docs of 6-11 words")
    print(f"{'job':<22}{'docs':>10}{'read':>10}{'kept':>10}{'CPU s':>8}{'peak MB':>9}")
    with tempfile.TemporaryDirectory(prefix="bench-job-") as tmp:
        for n in sizes:
            inp = Path(tmp) / f"tiny{n}.jsonl"
            tiny_corpus(inp, n)
            for j, (job, kind, overrides) in enumerate(JOBS):
                if ("dedup" in job and n > dedup_max) or (only and not job.startswith(only)):
                    continue
                out = Path(tmp) / f"out-{j}-{n}"
                r = run_child(kind, inp, out, overrides + extra)
                shutil.rmtree(out)  # work files: ~0.7 KB per document
                mb = r["kb"] / 1024
                print(f"{job:<22}{n:>10,}{r['read']:>10,}{r['kept']:>10,}{r['cpu']:>8.1f}{mb:>9.0f}")


# PRETRAIN_SHARED_DATA: where ../shared/data is when the checkout sits elsewhere (a git worktree).
SHARED = Path(os.environ.get("PRETRAIN_SHARED_DATA") or ROOT.parent / "shared" / "data")
WARCS = SHARED / "warc" / "derived"


COPIES = 1


def _warcs(tmp: Path) -> tuple[Path, int]:
    """The WARCs of --warcs (default: the real articles of ../shared/data, 181 pages), else 2 copies
    of the demo crawl; --copies N repeats the set N times (one file = one shard), so that a run
    lasts long enough for per-process fixed costs not to decide the comparison."""
    import shutil

    folder = tmp / "warcs"
    folder.mkdir()
    files = sorted(WARCS.glob("*.warc.gz")) or [ROOT / "src/pretrain/data/demo/crawl.warc.gz"] * 2
    for c in range(COPIES):
        for i, f in enumerate(files):
            shutil.copy(f, folder / f"{c:03d}-{i}-{f.name}")
    return folder, sum(f.stat().st_size for f in folder.iterdir())


def _timed_cli(args: list[str], env: dict, timeout: float = 900) -> dict:
    """Wall and CPU seconds (the child's own, all its processes) of one `pretrain` command."""
    before = os.times()
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "pretrain", *args, "--quiet"], env=env,
                         capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - t0
    after = os.times()
    if res.returncode:
        raise SystemExit(res.stderr[-3000:])
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return {"wall": wall, "cpu": cpu}


def _pages(out: Path) -> int:
    return json.loads((out / "stats.json").read_text())["documents"]["read"]


def bench_s3(repeat: int, latency_ms: float = 0.0) -> None:
    """Curate the same WARCs local -> local and S3 -> S3 (moto's server, in this process),
    interleaved; the best wall and the least CPU of each side over the repeats. The server's CPU
    (this process's, which does nothing else meanwhile) is printed apart: a real bucket's is not ours."""
    sys.path.insert(0, str(ROOT / "tests"))
    from s3server import s3_server

    with tempfile.TemporaryDirectory(prefix="bench-job-") as tmp, s3_server(latency_ms / 1000) as srv:
        tmp = Path(tmp)
        folder, size = _warcs(tmp)
        env = dict(srv.env(), PYTHONPATH=SRC)
        fs = srv.filesystem()
        bucket = srv.new_bucket("bench")
        fs.put(str(folder), f"{bucket}/in", recursive=True)
        best: dict[str, dict] = {}
        for r in range(repeat):
            runs = {
                "local -> local": ["curate", str(folder), "-o", str(tmp / f"local{r}"), "--workers", "1"],
                "S3 -> S3": ["curate", f"s3://{bucket}/in", "-o", f"s3://{bucket}/out{r}", "--workers", "1",
                             "--work-dir", str(tmp / f"work{r}")],
            }
            for name, args in runs.items():
                server0 = time.process_time()
                m = _timed_cli(args, env)
                m["server"] = time.process_time() - server0
                b = best.setdefault(name, dict(m))
                for k in ("wall", "cpu", "server"):
                    b[k] = min(b[k], m[k])
                shutil.rmtree(tmp / f"local{r}", ignore_errors=True)  # disk: one run's output at a time
        pages = json.loads(fs.cat_file(f"{bucket}/out0/stats.json"))["documents"]["read"]
        files = len(list(folder.iterdir()))
        print(f"curate {pages} pages ({size / 2**20:.1f} MB of WARC.gz, {files} files), one worker; "
              f"best of {repeat}, interleaved; S3 requests delayed {latency_ms:g} ms")
        print(f"{'where':<16}{'wall s':>8}{'CPU s':>8}{'pages/s':>9}{'pages/CPU s':>13}{'server CPU s':>14}")
        for name, m in best.items():
            server = f"{m['server']:>14.2f}" if name.startswith("S3") else f"{'-':>14}"
            print(f"{name:<16}{m['wall']:>8.2f}{m['cpu']:>8.2f}{pages / m['wall']:>9.1f}"
                  f"{pages / m['cpu']:>13.1f}{server}")
        local, remote = best["local -> local"], best["S3 -> S3"]
        print(f"S3 overhead: wall {remote['wall'] / local['wall'] - 1:+.1%}, "
              f"CPU of the job {remote['cpu'] / local['cpu'] - 1:+.1%} (goal <= 15%)")


def bench_scaling(repeat: int) -> None:
    """Belt pages/s with 1 and 2 local workers on the same WARCs (one file = one shard), per wall
    second and per CPU second (all the job's processes), interleaved; the load average is printed
    because on a shared machine the second worker only helps if a core is free."""
    with tempfile.TemporaryDirectory(prefix="bench-job-") as tmp:
        tmp = Path(tmp)
        folder, _ = _warcs(tmp)
        env = _env()
        best: dict[int, dict] = {}
        loads = [os.getloadavg()[0]]
        for r in range(repeat):
            for w in (1, 2):
                out = tmp / f"w{w}-{r}"
                m = _timed_cli(["curate", str(folder), "-o", str(out), "--workers", str(w)], env)
                b = best.setdefault(w, dict(m))
                b["wall"], b["cpu"] = min(b["wall"], m["wall"]), min(b["cpu"], m["cpu"])
                loads.append(os.getloadavg()[0])
                if r or w > 1:
                    shutil.rmtree(out)
        pages = _pages(tmp / "w1-0")
        files = len(list(folder.iterdir()))
        print(f"curate {pages} pages from {files} files; best of {repeat}, interleaved; "
              f"load average {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores")
        print(f"{'workers':<9}{'wall s':>8}{'CPU s':>8}{'pages/s':>9}{'pages/CPU s':>13}{'speedup':>9}")
        for w, m in best.items():
            print(f"{w:<9}{m['wall']:>8.2f}{m['cpu']:>8.2f}{pages / m['wall']:>9.1f}{pages / m['cpu']:>13.1f}"
                  f"{best[1]['wall'] / m['wall']:>8.2f}x")


def small_files(folder: Path, n: int) -> int:
    """n JSONL files of 2 documents (60-90 words of a 20k-word vocabulary, seeded); every 100th
    file's second document is an exact copy of a document of the file before. Returns the bytes."""
    import random

    rng = random.Random(n)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab = ["".join(rng.choices(letters, k=rng.randint(3, 8))) for _ in range(20_000)]
    folder.mkdir(parents=True)
    prev, total = "", 0
    for i in range(n):
        texts = [" ".join(rng.choices(vocab, k=rng.randint(60, 90))) + "." for _ in range(2)]
        if i % 100 == 99:
            texts[1] = prev
        prev = texts[0]
        body = "".join(json.dumps({"id": f"f{i}-{j}", "text": t}) + "\n" for j, t in enumerate(texts))
        (folder / f"page_{i:06d}.jsonl").write_text(body)
        total += len(body)
    return total


def _wall_or_inf(args: list[str], env: dict, timeout: float) -> float:
    try:
        return _timed_cli(args, env, timeout)["wall"]
    except subprocess.TimeoutExpired:
        return float("inf")


def bench_smallfiles(counts: list[int], jobs: list[str], old_max: int, timeout: float) -> None:
    """Each job over each folder, grouped (new) and one shard per file (old), one after the other."""
    env = _env()
    print(f"{'job':<8}{'files':>8}{'shards':>8}{'old s':>9}{'new s':>8}{'old/new':>9}{'docs read':>11}")
    with tempfile.TemporaryDirectory(prefix="bench-job-") as tmp:
        for n in counts:
            folder = Path(tmp) / f"in{n}"
            small_files(folder, n)
            for job in jobs:
                out = Path(tmp) / f"{job}-new-{n}"
                new = _wall_or_inf([job, str(folder), "-o", str(out)], env, timeout)
                stats = json.loads((out / "stats.json").read_text())
                shutil.rmtree(out)
                old = None
                if n <= old_max:
                    out = Path(tmp) / f"{job}-old-{n}"
                    one_per_file = ["--set", "shards.max_inputs=1"]
                    old = _wall_or_inf([job, str(folder), "-o", str(out), *one_per_file], env, timeout)
                    shutil.rmtree(out, ignore_errors=True)
                over = old == float("inf")
                old_s = "-" if old is None else (f"> {timeout:.0f}" if over else f"{old:.1f}")
                ratio = "-" if old is None else f"{'>' if over else ''}{min(old, timeout) / new:.1f}x"
                print(f"{job:<8}{n:>8,}{stats['shards']:>8,}{old_s:>9}{new:>8.1f}{ratio:>9}"
                      f"{stats['documents']['read']:>11,}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["memory", "s3", "scaling", "smallfiles"])
    ap.add_argument("--docs", default="100000,1000000", help="memory: corpus sizes, comma-separated")
    ap.add_argument("--dedup-max", type=int, default=10**9, help="memory: largest corpus for dedup")
    ap.add_argument("--jobs", default="", help="memory: only the jobs whose name starts so (dedup, curate)")
    ap.add_argument("--set", action="append", default=[], help="memory: a config override for every job")
    ap.add_argument("--repeat", type=int, default=2, help="s3, scaling: runs per setting, the best is kept")
    ap.add_argument("--warcs", type=Path, default=WARCS, help="s3, scaling: a folder of *.warc.gz")
    ap.add_argument("--copies", type=int, default=1, help="s3, scaling: repeat the WARCs N times")
    ap.add_argument("--files", default="1000,10000", help="smallfiles: file counts, comma-separated")
    ap.add_argument("--old-max", type=int, default=10000,
                    help="smallfiles: most files the one-shard-per-file layout runs")
    ap.add_argument("--timeout", type=float, default=900, help="smallfiles: seconds per command")
    ap.add_argument("--latency-ms", type=float, default=0.0,
                    help="s3: delay each request to the server (an emulated remote bucket)")
    args = ap.parse_args()
    globals()["WARCS"] = args.warcs
    globals()["COPIES"] = max(1, args.copies)
    t0 = time.time()
    if args.what == "memory":
        bench_memory([int(x) for x in args.docs.split(",")], args.dedup_max, args.set, args.jobs)
    elif args.what == "s3":
        bench_s3(args.repeat, args.latency_ms)
    elif args.what == "smallfiles":
        jobs = [j for j in ("dedup", "curate") if not args.jobs or j.startswith(args.jobs)]
        bench_smallfiles([int(x) for x in args.files.split(",")], jobs, args.old_max, args.timeout)
    else:
        bench_scaling(args.repeat)
    print(f"({time.time() - t0:.0f} s; the machine is shared, CPU seconds are per process)")


if __name__ == "__main__":
    main()
