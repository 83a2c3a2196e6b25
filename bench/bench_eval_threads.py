"""`pretrain eval FOLDER` threads: 1 thread against torch's default, per model size, same run.

    python bench/bench_eval_threads.py [--sizes 128x4,512x8,768x12] [--tokens 8192] [--repeat 2]

For each HIDDENxLAYERS a random transformers LlamaForCausalLM (bench_eval.make_model, vocab 512) is
saved and loaded as `pretrain eval` loads a folder; the perplexity of the first --tokens tokens of
the bench text is scored with 1 thread and with torch's default count (its physical cores), best of
--repeat, alternating. Prints seconds, the ratio default/1 (above 1: one thread is faster) and the
load average, which decides it on a shared machine: the ratio is what `use_threads`'s size rule
(src/pretrain/eval/lm.py, SMALL_MODEL_BYTES) was chosen from.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="128x4,512x8,768x12")
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    import torch
    from bench_eval import make_model

    from pretrain.eval.lm import load_model
    from pretrain.eval.suite import run_tasks
    from pretrain.train.testing import fallback_text

    default = torch.get_num_threads()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(os.environ.get("PRETRAIN_SHARED_DATA") or ROOT.parent / "shared/data")
        shared = data / "lm/tinyshakespeare/input.txt"
        text = shared if shared.is_file() else fallback_text(Path(tmp) / "t.txt")
        for size in args.sizes.split(","):
            hidden, layers = map(int, size.split("x"))
            folder = Path(tmp) / size
            folder.mkdir()  # make_model writes its fallback text there when the shared one is absent
            make_model(folder, hidden, layers, 512)
            model, _ = load_model(folder)
            weights = sum(f.stat().st_size for f in folder.glob("*.safetensors"))
            best = {1: float("inf"), default: float("inf")}
            for _ in range(args.repeat):
                for threads in best:
                    torch.set_num_threads(threads)
                    t0 = time.perf_counter()
                    run_tasks(model, [f"ppl:{text}"], None, ppl_tokens=args.tokens)
                    best[threads] = min(best[threads], time.perf_counter() - t0)
            torch.set_num_threads(default)
            print(f"{size} ({weights / 1e6:.1f} MB of weights): 1 thread {best[1]:.2f} s, {default} threads "
                  f"{best[default]:.2f} s, ratio default/1 = {best[default] / best[1]:.2f}; "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
