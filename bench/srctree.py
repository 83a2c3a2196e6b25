"""What the before/after benches share: a revision's src/ exported beside this checkout's, and a
`pretrain` command run in a child under a memory cap that reports its own peak memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# argv: the pretrain command line. Prints one JSON line: status (or "MemoryError"), seconds, peak RSS
# (VmHWM: the child's own high-water mark, not the parent's rusage of all children).
_CHILD = r"""
import json, resource, sys, time
cap = int(sys.argv[1]) << 20
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
from pretrain.cli import main
t0 = time.perf_counter()
try:
    rc = main(sys.argv[2:])
except SystemExit as e:
    rc = e.code
except MemoryError:
    rc = "MemoryError"
hwm = [int(x.split()[1]) // 1024 for x in open("/proc/self/status") if x.startswith("VmHWM")][0]
print(json.dumps({"rc": rc, "seconds": round(time.perf_counter() - t0, 1), "peak_mb": hwm}))
"""


def export_src(ref: str, dest: Path) -> Path:
    """`ref`'s src/ under dest (git archive | tar: no checkout, no shell string)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "src"], capture_output=True,
                             check=False)
    if archive.returncode != 0:
        raise SystemExit(f"git archive {ref!r} failed: {archive.stderr.decode(errors='replace').strip()}")
    Path(dest).mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return Path(dest) / "src"


def run_cli(argv: list[str], src: str | Path, cap_gb: float) -> dict:
    """`pretrain ARGV` with `src` first on the path, in a child capped at `cap_gb` of address space:
    {"rc", "seconds", "peak_mb", "said": stderr's last line}, with "rc" "failed: <stderr's end>" when
    it printed no result."""
    r = subprocess.run([sys.executable, "-c", _CHILD, str(int(cap_gb * 1024)), *argv], capture_output=True,
                       text=True, env={**os.environ, "PYTHONPATH": str(src)})
    said = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
    try:
        return {**json.loads(r.stdout.strip().splitlines()[-1]), "said": said}
    except (ValueError, IndexError):
        return {"rc": f"failed: {r.stderr.strip()[-200:]}", "seconds": 0, "peak_mb": 0, "said": said}


def capped(argv: list[str], src: str, limit_gb: float, cwd: Path, timeout_s: int,
           noise=lambda line: False) -> tuple[float, float, int, str]:
    """(seconds, peak RSS in MB, exit status, last line not `noise`) of `python ARGV` with `src` first on
    the path, under `limit_gb` of address space and `timeout_s`. The peak is RUSAGE_CHILDREN's running
    maximum: call it from a fresh process per measurement."""
    import resource
    import time

    def limits():
        resource.setrlimit(resource.RLIMIT_AS, (int(limit_gb * 2**30),) * 2)

    t0 = time.perf_counter()
    proc = subprocess.Popen(["timeout", str(timeout_s), sys.executable, *argv], cwd=cwd,
                            env={**os.environ, "PYTHONPATH": src}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, preexec_fn=limits)
    out, _ = proc.communicate()
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    lines = [x for x in out.splitlines() if x.strip() and not noise(x)]
    return seconds, peak, proc.returncode, (lines[-1] if lines else "")[:160]


def add_sides(ap) -> None:
    """--src (the tree measured, this checkout's by default) and --before (a commit measured beside it)."""
    ap.add_argument("--src", default=str(ROOT / "src"), help="the source tree to measure")
    ap.add_argument("--before", help="a commit to export and measure in the same run")


def sides(args, root: Path) -> dict[str, str]:
    """{"before": its exported src/ (with --before), "after": --src}, in the order they are measured."""
    after = {"after": args.src}
    return {"before": str(export_src(args.before, Path(root) / "before")), **after} if args.before else after
