"""Record three real runs of our trainer for tests/test_plan_calibrate.py's held-out check.

The check (fit the time model on two runs, predict the third) needs runs measured without
another process competing for the cores; a test suite running on two workers is not that, so the
runs are measured once, on a quiet machine, and kept as data. Run it again to re-measure:

    python scripts/record_calibration_runs.py [--steps 30] [--out tests/data/calibrate]

Each run keeps its config.toml (what `plan --calibrate` reads of the model, layout and batch) and
metrics.jsonl (the step lines, tokens/s measured by the trainer); checkpoints are not kept.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def record(out: Path, steps: int, text: Path) -> None:
    from pretrain.cli import main

    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for batch in (4, 8, 16):
            run = Path(tmp) / f"b{batch}"
            sets = [f"train.steps={steps}", f"train.out={run}", f"data.path={text}",
                    f"data.batch_size={batch}", "checkpoint.every=100000", "log.tensorboard=false",
                    "train.threads=1"]
            main(["train", str(ROOT / "recipes" / "tiny-cpu.toml"), *[a for s in sets for a in ("--set", s)]])
            dest = out / f"b{batch}"
            dest.mkdir(exist_ok=True)
            shutil.copyfile(run / "metrics.jsonl", dest / "metrics.jsonl")
            # the paths of the machine that measured mean nothing to a reader of the copy
            cfg = (run / "config.toml").read_text(encoding="utf-8")
            cfg = cfg.replace(str(run), f"runs/b{batch}").replace(str(text), text.name)
            (dest / "config.toml").write_text(cfg, encoding="utf-8")
            print(f"recorded {dest} ({os.getloadavg()[0]:.2f} load)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "calibrate")
    shakespeare = ROOT.parent / "shared" / "data" / "lm" / "tinyshakespeare" / "input.txt"
    ap.add_argument("--text", type=Path, default=shakespeare)
    a = ap.parse_args()
    record(a.out, a.steps, a.text)
