"""Benchmark: the hostile inputs of red team round 4 (session 13), each read by a CLI child process.

Builds each input in a temporary folder, then runs the command on it with the code under `--src`
(default: this checkout's) and, with `--before COMMIT`, with an export of that commit too, in the
same run; prints seconds, peak RSS of the child and its last line, and the ratio before/after.
Children are limited to `--limit-gb` of address space (default 6), so the code before fails with
a MemoryError where it would take more (one 2^31-token document: 16 GB, killed by the kernel).

- dcp-zstd: `pretrain sample` of a run whose tok_emb item is `--zstd-mib` MiB of zeros stored
  through DCP's own `stream.zstd` transform (64 KB for 2 GiB);
- hf-context: `pretrain eval --tasks ppl:TEXT` of a GPT-NeoX folder (transformers scores it)
  claiming 10^9 positions, TEXT the first `--text-kb` kB of Tiny Shakespeare (or pydoc topics);
- hf-layers: the same folder claiming 100,000 layers (`timeout` 120 s);
- tokens-doc: `pretrain tokens inspect` of a token folder whose one document is 2^31 tokens
  (a sparse .bin).

Shared 2-core machine: seconds are indicative.
Run: PYTHONPATH=src .venv/bin/python bench/bench_hostile_round4.py --before 8f0a246 [--zstd-mib 2048]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

from srctree import add_sides, capped, sides  # noqa: E402  (bench/: a revision's src/)

HERE = Path(__file__).resolve().parents[1]


def make_run(root: Path, mib: int) -> Path:
    """A 5-step tiny run whose checkpoint's tok_emb.weight is a zstd bomb (COMPLETE.json resealed)."""
    import zstandard
    from torch.distributed.checkpoint.filesystem import _StorageInfo

    from pretrain import config as cfgmod
    from pretrain.train import checkpoint as ck
    from pretrain.train.testing import tiny_config
    from pretrain.train.trainer import Trainer

    out = root / "run"
    text = _text(root)
    Trainer(tiny_config(out, text, "train.steps=5"), quiet=True).fit()
    (out / "config.toml").write_text(cfgmod.dumps(tiny_config(out, text, "train.steps=5")))
    ckpt = ck.latest_complete(out / "checkpoints")[1]
    md = pickle.loads((ckpt / ".metadata").read_bytes())
    key = next(k for k in md.storage_data if k.fqn.endswith("tok_emb.weight"))
    info = md.storage_data[key]
    w = zstandard.ZstdCompressor(level=19).compressobj()
    blob = b"".join(w.compress(bytes(1 << 24)) for _ in range(mib // 16)) + w.flush()
    data = ckpt / info.relative_path
    offset = data.stat().st_size
    with open(data, "ab") as f:
        f.write(blob)
    md.storage_data[key] = _StorageInfo(info.relative_path, offset, len(blob), ["stream.zstd/1"])
    (ckpt / ".metadata").write_bytes(pickle.dumps(md))
    marker = ckpt / ck.MARKER
    meta = json.loads(marker.read_text())
    meta["files"] = {p.name: p.stat().st_size for p in ckpt.iterdir() if p.is_file() and p.name != ck.MARKER}
    meta[ck.DIGEST] = {n: ck.digest_file(ckpt / n) for n in meta["files"]}
    marker.write_text(json.dumps(meta))
    return out


def _text(root: Path) -> Path:
    from pretrain.train.testing import fallback_text

    shakespeare = Path(os.environ.get("PRETRAIN_SHARED_DATA", HERE.parent / "shared" / "data")) / "lm" / \
        "tinyshakespeare" / "input.txt"
    return shakespeare if shakespeare.is_file() else fallback_text(root / "topics.txt")


def make_neox(root: Path, name: str, **config) -> Path:
    import torch
    import transformers

    from pretrain.tokens.hf_tokenizer import byte_tokenizer

    out = root / name
    torch.manual_seed(0)
    cfg = transformers.GPTNeoXConfig(vocab_size=257, hidden_size=32, intermediate_size=64,
                                     num_hidden_layers=1, num_attention_heads=4, max_position_embeddings=2048)
    transformers.GPTNeoXForCausalLM(cfg).save_pretrained(out)
    transformers.PreTrainedTokenizerFast(tokenizer_object=byte_tokenizer(),
                                         eos_token="<|endoftext|>").save_pretrained(out)
    c = json.loads((out / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**c, **config}))
    return out


def make_tokens(root: Path) -> Path:
    import numpy as np

    from pretrain.curate.io import write_jsonl_zst
    from pretrain.tokens.pipeline import tokenize_corpus
    from pretrain.tokens.tokenizer import train_tokenizer

    texts = [f"document {i}: the river carries sand to the delta." for i in range(20)]
    write_jsonl_zst(root / "a.jsonl.zst", [{"text": t} for t in texts])
    train_tokenizer(texts, vocab_size=300).save(str(root / "tok.json"))
    d = root / "tokens"
    tokenize_corpus([str(root / "a.jsonl.zst")], root / "tok.json", d, workers=1)
    n = 2**31
    with open(d / "big.bin", "wb") as f:
        f.truncate(n * 2)
    with open(d / "big.idx", "wb") as f:
        np.save(f, np.array([0, n], dtype="<u8"), allow_pickle=False)
    m = json.loads((d / "manifest.json").read_text())
    m.update(shards=[{"bin": "big.bin", "idx": "big.idx", "tokens": n, "documents": 1}], tokens=n,
             documents=1, sources={"web": {"tokens": n, "documents": 1}})
    (d / "manifest.json").write_text(json.dumps(m))
    return d


def child(args: list[str], src: str, limit_gb: float, cwd: Path) -> tuple[float, float, int, str]:
    """(seconds, peak RSS in MB, exit status, last line) of `python -m pretrain ARGS` under `src`."""
    return capped(["-m", "pretrain", *args], src, limit_gb, cwd, 120,
                  lambda x: "Warning" in x or "it/s]" in x)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_sides(ap)
    ap.add_argument("--zstd-mib", type=int, default=2048)
    ap.add_argument("--text-kb", type=int, default=256)
    ap.add_argument("--limit-gb", type=float, default=6.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="round4-") as tmp:
        root = Path(tmp)
        srcs = sides(args, root)
        text = root / "text.txt"
        text.write_bytes(_text(root).read_bytes()[:args.text_kb * 1000])
        cases = {
            "dcp-zstd": ["sample", str(make_run(root, args.zstd_mib)), "--tokens", "2"],
            "hf-context": ["eval", str(make_neox(root, "ctx", max_position_embeddings=10**9)),
                           "--tasks", f"ppl:{text}", "-o", str(root / "ctx.json"), "--quiet"],
            "hf-layers": ["eval", str(make_neox(root, "layers", num_hidden_layers=100_000)),
                          "--tasks", f"ppl:{text}", "-o", str(root / "layers.json"), "--quiet"],
            "tokens-doc": ["tokens", "inspect", str(make_tokens(root)), "--tokens", "5"],
        }
        for case, cmd in cases.items():
            seen = {}
            for side, src in srcs.items():  # a fresh child per side: RUSAGE_CHILDREN is a running max
                r = subprocess.run([sys.executable, __file__, "--one", side, src, str(args.limit_gb), tmp,
                                    json.dumps(cmd)], capture_output=True, text=True)
                seen[side] = json.loads(r.stdout.strip().splitlines()[-1])
                s, mb, rc, last = seen[side]
                print(f"{case:11} {side:6}: {s:7.2f} s {mb:8.0f} MB rc {rc:3}  {last}")
            if len(seen) == 2:
                print(f"{case:11} before/after: {seen['before'][0] / seen['after'][0]:.1f}x time, "
                      f"{seen['before'][1] / seen['after'][1]:.1f}x peak memory")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        _, _, side, src, limit, cwd, cmd = sys.argv
        print(json.dumps(child(json.loads(cmd), src, float(limit), Path(cwd))))
    else:
        main()
