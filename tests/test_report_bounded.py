"""The report reads only what it shows: rejects' texts are cut to an excerpt as they are read.

Issue 20: 300 rejected 6 MB pages took 1.9 GB in `pretrain report` for a 28 KB page. Here 150
rejects of 2 MB each (300 MB of text, a few hundred KB on disk) are summarised by a child process
whose peak RSS must stay far below the text's size; the examples it shows are still right.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from hostile import SRC

from pretrain.curate import io as cio

_CHILD = r"""
import json, sys
from pathlib import Path
from pretrain.report_corpus import _reject_examples, scan_rejects
examples, _ = scan_rejects(Path(sys.argv[1]), {})
html = _reject_examples(examples)
peak = [int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:")][0] / 1024
print(json.dumps({"n": len(examples), "html": html, "peak_mb": peak}))
"""


def test_report_keeps_excerpts_of_rejects_not_their_texts(tmp_path):
    out = tmp_path / "run"
    (out / "rejects").mkdir(parents=True)
    big = "spam " * ((2 << 20) // 5)  # about 2 MB of text per reject
    recs = [{"id": f"r{i}", "url": f"https://x.example/{i}", "step": "rules", "reason": f"reason_{i % 3}",
             "text": f"page {i} " + big} for i in range(150)]
    cio.write_jsonl_zst(out / "rejects" / "part-00000.jsonl.zst", recs)
    assert (out / "rejects" / "part-00000.jsonl.zst").stat().st_size < 2_000_000
    r = subprocess.run([sys.executable, "-c", _CHILD, str(out)], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": SRC})
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout)
    assert got["n"] == 3  # one example per (step, reason)
    for i in range(3):  # one example per reason, the first of each, with the start of its text
        assert f"reason_{i}" in got["html"] and f"https://x.example/{i}" in got["html"]
        assert f"page {i} spam spam" in got["html"]
    assert got["peak_mb"] < 150  # holding the texts: over 300 MB
