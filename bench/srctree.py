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
