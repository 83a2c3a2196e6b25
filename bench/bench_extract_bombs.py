"""The extract step's depth check, old (git rev, default 9dcc55c) vs new (the working tree).

1. The 990 real pages (../shared/data/html: AEB, trafilatura-eval full, Readability): the same
   text from the step, page by page, and its pages/s, old vs new, in one run; with each page's
   lexbor depth against `depth_bound` (the bound must never be below it).
2. Bomb pages (under the 5 MB size cap), one child process each, old vs new, under `timeout` and
   `ulimit -v`: seconds, peak RSS, the drop reason or the text's length and its language.

    PRETRAIN_SHARED_DATA=/work/shared/data PYTHONPATH=src:. .venv/bin/python bench/bench_extract_bombs.py
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_blocks_speed import ROOT, all_pages  # noqa: E402

from pretrain.curate import extract as new  # noqa: E402
from pretrain.curate.document import Document  # noqa: E402

BOMBS = {
    "br x 980k": lambda: "<html><body>" + "<br>\n" * 980_000,
    "div x 500k flat": lambda: "<div></div>" * 450_000,
    "span nested 100k": lambda: "<span>" * 100_000 + "text",
    "p unclosed 500k": lambda: "<p>x" * 500_000,
    "1e6 attributes": lambda: "<div " + "a " * 1_000_000 + ">text</div>",  # duplicates: parsed, then dropped
}


def old_module(rev: str):
    src = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:src/pretrain/curate/extract.py"],
                         capture_output=True, text=True, check=True).stdout
    tmp = Path(tempfile.mkdtemp(prefix="old_extract_")) / "old_extract.py"
    tmp.write_text(src, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("old_extract", tmp)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def run_step(mod, backend: str, pages: list[str]) -> tuple[list, float]:
    step = mod.build_extract_step(mod.ExtractConfig(backend=backend))
    docs = [Document(id=str(i), text=h, cache={"html": True}) for i, h in enumerate(pages)]
    t = time.perf_counter()
    out = {d.id: d.text for d in step(iter(docs))}
    return [out.get(str(i)) for i in range(len(pages))], time.perf_counter() - t


def real(rev: str) -> None:
    old = old_module(rev)
    pages = [h for v in all_pages().values() for _, h in v]
    worst = 0.0
    for h in pages:
        if h.count("<") > new.DEPTH_SCAN_FROM:
            d, b = new.tree_depth(h, 10**9), new.depth_bound(h)
            assert d <= b, (d, b)
            worst = max(worst, d / b)
    print(f"{len(pages)} real pages; lexbor depth / depth_bound at most {worst:.3f} (pages of >3000 tags)")
    check = {"old": 1e9, "new": 1e9}
    for name, mod in (("old", old), ("new", new)) * 3:
        t = time.perf_counter()
        verdicts = [mod.too_deep(h, 1000) for h in pages]
        check[name] = min(check[name], time.perf_counter() - t)
        if name == "old":
            ref_v = verdicts
    print(f"  the depth check alone: same verdict on {sum(a == b for a, b in zip(ref_v, verdicts))} pages, "
          f"{check['old']:.3f} s old, {check['new']:.3f} s new for all (best of 3)")
    for backend in ("resiliparse", "blocks"):
        best = {}
        for name, mod in (("old", old), ("new", new), ("old", old), ("new", new)):
            texts, s = run_step(mod, backend, pages)
            best[name] = min(best.get(name, 1e9), s)
            if name == "old":
                ref = texts
            else:
                same = sum(a == b for a, b in zip(ref, texts))
        n = len(pages)
        print(f"  {backend}: same text on {same}/{n} pages; pages/s old {n / best['old']:.0f}, "
              f"new {n / best['new']:.0f} (new/old {best['old'] / best['new']:.2f}x, best of 2)")


CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {path!r})
from bench_extract_bombs import BOMBS, old_module
from pretrain.curate import extract as new
from pretrain.curate.document import Document
mod = old_module({rev!r}) if {which!r} == "old" else new
html = BOMBS[{bomb!r}]()
step = mod.build_extract_step(mod.ExtractConfig(backend={backend!r}))
t = time.perf_counter()
out = list(step(iter([Document(id="b", text=html, cache={{"html": True}})])))
s = time.perf_counter() - t
lang = ""
if out:
    from pretrain.curate.language import LanguageConfig, build_language_step
    lid = build_language_step(LanguageConfig(languages=()))
    got = list(lid(iter(out)))
    lang = got[0].metadata.get("language", "") if got else "dropped:" + ",".join(
        k for k in lid.stats if k.startswith("dropped"))
print(json.dumps({{"s": s, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                   "stats": {{k: v for k, v in step.stats.items() if k != "seconds" and v}},
                   "chars": len(out[0].text) if out else 0, "lang": lang}}))
"""


def bombs(rev: str, limit_s: int, mem_gb: int) -> None:
    for bomb in BOMBS:
        for backend in ("resiliparse", "blocks"):
            row = []
            for which in ("old", "new"):
                code = CHILD.format(path=str(Path(__file__).resolve().parent), rev=rev, which=which,
                                    bomb=bomb, backend=backend)
                p = subprocess.run(["bash", "-c", f'ulimit -v {mem_gb << 20}; exec timeout {limit_s} '
                                    f'"{sys.executable}" -c "$0"', code], capture_output=True, text=True,
                                   env={**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}"})
                if p.returncode:
                    row.append(f"{which}: rc {p.returncode} {p.stderr.strip()[-120:]}")
                    continue
                r = json.loads(p.stdout.strip().splitlines()[-1])
                row.append(f"{which} {r['s']:.2f} s {r['rss_mb']:.0f} MB {r['stats']} chars={r['chars']} "
                           f"lang={r['lang']}")
            print(f"{bomb:18} {backend:11} | " + " | ".join(row), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rev", default="9dcc55c", help="the old code (git rev)")
    ap.add_argument("--only", choices=("real", "bombs"))
    ap.add_argument("--timeout", type=int, default=120, help="seconds per bomb run")
    ap.add_argument("--mem-gb", type=int, default=8, help="ulimit -v per bomb run")
    a = ap.parse_args()
    if a.only != "bombs":
        real(a.rev)
    if a.only != "real":
        bombs(a.rev, a.timeout, a.mem_gb)


if __name__ == "__main__":
    main()
