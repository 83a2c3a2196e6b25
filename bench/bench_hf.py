"""Benchmark Hugging Face export and import against transformers' save_pretrained / from_pretrained.

The model is the `llama-3.2-1b` preset's shape (16 x 2048, GQA 32/8, vocabulary 128,256, tied head;
1.24 B parameters, 4.9 GB in fp32) with random weights; `--layers N` keeps its width and vocabulary
but N blocks, for machines that cannot hold two 5 GB processes. Every side runs in its own process,
one after another, and reports its wall time and peak resident memory (ru_maxrss), next to the
process's resident memory before the model existed (interpreter, torch, transformers) and the size
of one fp32 copy of the weights:

  ours export      RUN checkpoint (DCP) -> transformers folder (`pretrain export --format hf`)
  theirs save      LlamaForCausalLM in memory -> save_pretrained
  ours import      transformers folder -> our model (`model.init_from`'s loader)
  theirs load      AutoModelForCausalLM.from_pretrained, then every weight read once (transformers
                   may leave weights on the file's mapping until first use; ours are read on load)

    PYTHONPATH=src .venv/bin/python bench/bench_hf.py --layers 2
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GB = 1e9


def rss_now() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024 / GB
    return 0.0


def peak() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GB


def _shape_overrides(layers: int) -> list[str]:
    return ["model.preset=llama-3.2-1b", f"model.n_layers={layers}", "model.seq_len=2048",
            "precision.dtype=fp32", "train.steps=1", "log.tensorboard=false", "checkpoint.async_save=false"]


def side_prepare(work: Path, layers: int) -> dict:
    """A run directory holding one checkpoint of random weights (not timed)."""
    import torch

    from pretrain import config as cfgmod
    from pretrain.train.checkpoint import CheckpointManager
    from pretrain.train.config import RunConfig
    from pretrain.train.model import build_model, materialize, resolve_shape

    cfg = cfgmod.load(RunConfig, None, [*_shape_overrides(layers), f"train.out={work / 'run'}"])
    model = materialize(build_model(resolve_shape(cfg.model), cfg.model), "cpu", 0)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)  # no state: the checkpoint is the weights
    CheckpointManager(work / "run" / "checkpoints", async_save=False).save(0, model, opt, {"step": 0})
    (work / "run" / "config.toml").write_text(cfgmod.dumps(cfg))
    n = sum(p.numel() for p in model.parameters())
    return {"parameters": n, "weights_gb": 4 * n / GB}


def side_ours_export(work: Path, layers: int) -> dict:
    from pretrain.train.hf_io import export_hf

    base = rss_now()
    t0 = time.perf_counter()
    export_hf(work / "run", work / "ours")
    return {"wall_s": time.perf_counter() - t0, "peak_gb": peak(), "base_gb": base}


def side_theirs_save(work: Path, layers: int) -> dict:
    import torch
    import transformers

    from pretrain import config as cfgmod
    from pretrain.train.config import RunConfig
    from pretrain.train.hf import hf_config
    from pretrain.train.model import resolve_shape

    base = rss_now()
    cfg = cfgmod.load(RunConfig, None, _shape_overrides(layers))
    m = cfg.model
    ours = hf_config(resolve_shape(m), m.rope_theta, m.norm_eps, "float32", None, None)
    config = transformers.LlamaConfig(**{k: v for k, v in ours.items() if k not in ("architectures",
                                                                                     "model_type")})
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(config)
    model = model.to_empty(device="cpu")
    with torch.no_grad():  # real values in every page (untouched pages would not count), not timed
        for p in model.parameters():
            p.uniform_(-0.02, 0.02)
    t0 = time.perf_counter()
    model.save_pretrained(work / "theirs")
    return {"wall_s": time.perf_counter() - t0, "peak_gb": peak(), "base_gb": base}


def side_ours_import(work: Path, layers: int) -> dict:
    from pretrain import config as cfgmod
    from pretrain.train.config import RunConfig
    from pretrain.train.hf import apply_init_from
    from pretrain.train.hf_io import load_hf_weights
    from pretrain.train.model import build_model, resolve_shape

    base = rss_now()
    t0 = time.perf_counter()
    cfg = apply_init_from(cfgmod.load(RunConfig, None, [f"model.init_from={work / 'theirs'}"]))
    model = build_model(resolve_shape(cfg.model), cfg.model)
    load_hf_weights(model, work / "theirs", "cpu")
    return {"wall_s": time.perf_counter() - t0, "peak_gb": peak(), "base_gb": base}


def side_theirs_load(work: Path, layers: int) -> dict:
    import torch
    import transformers

    base = rss_now()
    t0 = time.perf_counter()
    model = transformers.AutoModelForCausalLM.from_pretrained(work / "theirs")
    lazy = time.perf_counter() - t0
    with torch.no_grad():  # from_pretrained may leave weights on the file's mapping, read on first use:
        for p in model.parameters():  # read every one, as a forward pass would (ours are read on load)
            p.sum()
    return {"wall_s": time.perf_counter() - t0, "peak_gb": peak(), "base_gb": base, "lazy_s": lazy}


SIDES = {"prepare": side_prepare, "ours_export": side_ours_export, "theirs_save": side_theirs_save,
         "ours_import": side_ours_import, "theirs_load": side_theirs_load}


def run_side(name: str, work: Path, layers: int) -> dict:
    """One side in a fresh process (its peak memory is its own)."""
    cmd = [sys.executable, __file__, "--side", name, "--work", str(work), "--layers", str(layers)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode:
        raise SystemExit(f"{name} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=16,
                    help="blocks of the llama-3.2-1b shape (16 = the model)")
    ap.add_argument("--only", default="ours_export,theirs_save,ours_import,theirs_load",
                    help="comma-separated sides to run (theirs_save writes the folder both imports read)")
    ap.add_argument("--side", choices=list(SIDES), help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.side:  # one side, in this process
        import torch

        torch.set_num_threads(2)
        print(json.dumps(SIDES[args.side](Path(args.work), args.layers)))
        return
    with tempfile.TemporaryDirectory(prefix="bench_hf_") as tmp:
        work = Path(tmp)
        info = run_side("prepare", work, args.layers)
        w = info["weights_gb"]
        print(f"llama-3.2-1b shape, {args.layers} layers: {info['parameters']:,} parameters, "
              f"one fp32 copy = {w:.2f} GB")
        print(f"{'side':<13} {'wall s':>7} {'peak GB':>8} {'before GB':>9} {'peak/copy':>9} "
              f"{'(peak-before)/copy':>18}")
        wanted = args.only.split(",")
        for side in ("ours_export", "theirs_save", "ours_import", "theirs_load"):
            needed = side == "theirs_save" and ("ours_import" in wanted or "theirs_load" in wanted)
            if side not in wanted and not needed:  # both imports read the folder save_pretrained wrote
                continue
            r = run_side(side, work, args.layers)
            print(f"{side:<13} {r['wall_s']:7.2f} {r['peak_gb']:8.2f} {r['base_gb']:9.2f} "
                  f"{r['peak_gb'] / w:9.2f} {(r['peak_gb'] - r['base_gb']) / w:18.2f}"
                  + (f"   (from_pretrained alone: {r['lazy_s']:.2f} s)" if "lazy_s" in r else ""), flush=True)


if __name__ == "__main__":
    main()
