"""Benchmark greedy generation with and without the key/value cache (train/decode.py), next to
transformers' own cached and uncached generation of the same weights (the peer).

The model is the `tiny-cpu` preset's shape (4 x 128, GQA 4/2, SwiGLU 352, vocabulary 257, context
128) with random weights, built as a transformers LlamaForCausalLM and imported into ours through a
save_pretrained folder (the `from_hf_dir` path of `pretrain eval`), so both sides hold equal weights.
Two workloads, one process, CPU, torch threads as given (--threads, default 1):

  sample   one prompt of --prompt tokens, --tokens greedy tokens (`pretrain sample --temperature 0`)
  mem      --windows prompts of k=32 tokens, m=32 greedy tokens each, batches of 16 (`eval mem:`)

Each is timed --repeat times, best kept; tokens are checked equal between every pair of paths.

    PYTHONPATH=src .venv/bin/python bench/bench_generate.py --windows 32 --tokens 96
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

import torch


def best(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def hf_model():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=257, hidden_size=128, intermediate_size=352, num_hidden_layers=4,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                      rope_theta=10000.0, rms_norm_eps=1e-5, tie_word_embeddings=False)
    m = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():  # sharper than init's 0.02: fewer near-ties between the paths' argmaxes
        for p in m.parameters():
            p.mul_(5.0 if p.dim() > 1 else 1.0)
    return m


def hf_greedy(m, prompts: list[list[int]], n: int, cache: bool) -> list[list[int]]:
    ids = torch.tensor(prompts)  # same-length prompts: no padding, no attention mask needed
    with torch.no_grad():
        out = m.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n,
                         do_sample=False, use_cache=cache, pad_token_id=0)
    return out[:, ids.shape[1]:].tolist()


def _rows_equal(a, b, task: str) -> str:
    a, b = ([a], [b]) if task == "sample" else (a, b)
    return f"{sum(x == y for x, y in zip(a, b))}/{len(b)}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--windows", type=int, default=32, help="mem: prompts (default 32)")
    ap.add_argument("--tokens", type=int, default=96, help="sample: new tokens (default 96)")
    ap.add_argument("--prompt", type=int, default=16, help="sample: prompt tokens (default 16)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from pretrain.eval.lm import _import_ours, from_module
    from pretrain.eval.scoring import greedy_generate
    from pretrain.train.hf import read_hf_model_config
    from pretrain.train.model import generate

    hf = hf_model()
    with tempfile.TemporaryDirectory() as d:  # our importer, as `pretrain eval HF_DIR` uses it
        hf.save_pretrained(d)
        net = _import_ours(Path(d), read_hf_model_config(d), "cpu")
    ev = from_module(net, list, list, net.shape.seq_len, 0)
    g = torch.Generator().manual_seed(1)
    mem = torch.randint(0, 257, (args.windows, 32), generator=g).tolist()
    prompt = torch.randint(0, 257, (1, args.prompt), generator=g)
    n_sample = min(args.tokens, 128 - args.prompt)  # within the context: every path caches throughout

    plain = dataclasses.replace(ev, start_decoding=None)  # the full forward every step

    def ours_sample(cache):
        return generate(net, prompt, n_sample, 0.0, cache=cache)[0, args.prompt:].tolist()

    def hf_mem(cache):
        return [t for s in range(0, len(mem), 16) for t in hf_greedy(hf, mem[s:s + 16], 32, cache)]

    rows = []
    for name, fn in [
        ("sample ours uncached", lambda: ours_sample(False)),
        ("sample ours cached", lambda: ours_sample(True)),
        ("sample transformers uncached", lambda: hf_greedy(hf, prompt.tolist(), n_sample, False)[0]),
        ("sample transformers cached", lambda: hf_greedy(hf, prompt.tolist(), n_sample, True)[0]),
        ("mem ours uncached", lambda: greedy_generate(plain, mem, 32, batch_size=16)),
        ("mem ours cached", lambda: greedy_generate(ev, mem, 32, batch_size=16)),
        ("mem transformers uncached", lambda: hf_mem(False)),
        ("mem transformers cached", lambda: hf_mem(True)),
    ]:
        sec, out = best(fn, args.repeat)
        rows.append((name, sec, out))
    print(f"tiny-cpu shape, random weights; sample: {args.prompt}+{n_sample} tokens; mem: {args.windows} "
          f"windows of 32+32; threads={args.threads}; best of {args.repeat}")
    for task in ("sample", "mem"):
        r = {n.split(" ", 1)[1]: (s, o) for n, s, o in rows if n.startswith(task)}
        units = n_sample if task == "sample" else args.windows
        for k, (s, _) in r.items():
            per = f"{1000 * s / units:.2f} ms/" + ("token" if task == "sample" else "window")
            print(f"  {task:6s} {k:24s} {s:7.3f} s  {per}")
        ref = r["ours uncached"][1]
        same = ", ".join(f"{k} {_rows_equal(o, ref, task)}" for k, (_, o) in r.items()
                         if k != "ours uncached")
        print(f"  {task:6s} speedup ours {r['ours uncached'][0] / r['ours cached'][0]:.1f}x, transformers "
              f"{r['transformers uncached'][0] / r['transformers cached'][0]:.1f}x; "
              f"ours cached / transformers cached {r['ours cached'][0] / r['transformers cached'][0]:.2f}; "
              f"rows equal to ours uncached: {same}")


if __name__ == "__main__":
    main()
