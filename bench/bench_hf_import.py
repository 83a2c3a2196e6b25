"""Benchmark reading a Hugging Face folder's safetensors (`model.init_from`, `pretrain eval HF_DIR`):
the code before session 13's fix (commit dda6fe2: `safe_open` per tensor read, so the whole header
parsed per read) against the current one (header parsed once per file, a mapping per read).

Two folders, each side in its own process (wall time, peak resident memory over the process's
memory before the read):

  thin    one model.safetensors of `--tensors` F32 tensors of 4 numbers (a crafted file; the old
          side reads only `--old-reads` of them, its total is extrapolated per read)
  model   a LlamaForCausalLM built by transformers (hidden 512, 8 layers, vocabulary 32,000,
          ~58 M parameters, ~230 MB fp32) saved with save_pretrained, imported into our model

    PYTHONPATH=src .venv/bin/python bench/bench_hf_import.py [--tensors 20000 --old-reads 300]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MB = 2**20
OLD_COMMIT = "dda6fe2"


def _status(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def rss_mb() -> float:
    """Resident memory now, and the peak restarted from here (ru_maxrss would keep the parent's,
    which survives exec on Linux)."""
    Path("/proc/self/clear_refs").write_text("5")
    return _status("VmRSS")


def peak_mb() -> float:
    return _status("VmHWM")


def use_old(work: Path) -> None:
    """Install hf_io.py as of OLD_COMMIT as `pretrain.train.hf_io` (hf_files keeps what it used)."""
    src = subprocess.run(["git", "show", f"{OLD_COMMIT}:src/pretrain/train/hf_io.py"], check=True,
                         capture_output=True, text=True).stdout
    path = work / "hf_io_old.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("pretrain.train.hf_io", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["pretrain.train.hf_io"] = mod
    spec.loader.exec_module(mod)


def prepare(work: Path, tensors: int) -> None:
    import torch
    import transformers

    from pretrain.train.hf_io import write_safetensors

    (work / "thin").mkdir()
    items = [(f"t.{i}", [4], lambda: torch.ones(4)) for i in range(tensors)]
    write_safetensors(work / "thin" / "model.safetensors", items, torch.float32)
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=32000, hidden_size=512, intermediate_size=1376,
                                   num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=4,
                                   max_position_embeddings=512)
    transformers.LlamaForCausalLM(cfg).save_pretrained(work / "model")


def side(work: Path, which: str, case: str, reads: int) -> dict:
    import torch  # noqa: F401  (imported before the baseline, as in a real import)

    if which == "old":
        use_old(work)
    from pretrain.train.hf import Source, read_hf_model_config
    from pretrain.train.hf_io import HFCheckpoint

    base = rss_mb()
    t0 = time.perf_counter()
    if case == "thin":
        ckpt = HFCheckpoint(work / "thin")
        keys = list(ckpt.where)
        n = min(reads, len(keys)) if reads else len(keys)
        for k in keys[:n]:
            ckpt.read(Source(k), (4,))
        wall = time.perf_counter() - t0
        return {"wall_s": wall, "reads": n, "all_s": wall / n * len(keys), "peak_mb": peak_mb() - base}
    from pretrain.eval.lm import _import_ours

    model = _import_ours(work / "model", read_hf_model_config(work / "model"), "cpu")
    n = sum(p.numel() for p in model.parameters())
    return {"wall_s": time.perf_counter() - t0, "params": n, "weights_mb": 4 * n / MB,
            "peak_mb": peak_mb() - base}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tensors", type=int, default=20000)
    ap.add_argument("--old-reads", type=int, default=300)
    ap.add_argument("--side", nargs=4, help=argparse.SUPPRESS)  # WORK which case reads
    a = ap.parse_args()
    if a.side:
        print(json.dumps(side(Path(a.side[0]), a.side[1], a.side[2], int(a.side[3]))))
        return
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        prepare(work, a.tensors)
        res = {}
        for case in ("thin", "model"):
            for which in ("old", "new"):
                reads = a.old_reads if (case, which) == ("thin", "old") else 0
                out = subprocess.run([sys.executable, __file__, "--side", str(work), which, case, str(reads)],
                                     check=True, capture_output=True, text=True).stdout
                res[case, which] = json.loads(out.strip().splitlines()[-1])
                print(case, which, res[case, which], flush=True)
        o, n = res["thin", "old"], res["thin", "new"]
        print(f"thin ({a.tensors:,} tensors): old {o['all_s']:.1f} s for all (measured {o['reads']} reads, "
              f"{1000 * o['wall_s'] / o['reads']:.2f} ms a read), new {n['all_s']:.2f} s "
              f"({1000 * n['wall_s'] / n['reads']:.3f} ms a read): {o['all_s'] / n['all_s']:.0f}x; "
              f"peak above base: old {o['peak_mb']:.0f} MB, new {n['peak_mb']:.0f} MB")
        o, n = res["model", "old"], res["model", "new"]
        print(f"model ({o['params'] / 1e6:.1f} M parameters, {o['weights_mb']:.0f} MB fp32): old "
              f"{o['wall_s']:.2f} s, new {n['wall_s']:.2f} s ({o['wall_s'] / n['wall_s']:.2f}x); peak above "
              f"base: old {o['peak_mb']:.0f} MB, new {n['peak_mb']:.0f} MB")


if __name__ == "__main__":
    main()
