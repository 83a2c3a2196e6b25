"""Greedy generation of a model computed by transformers (a Qwen2ForCausalLM, as for a folder we do
not import), as `pretrain eval HF_DIR --tasks mem:...,gsm8k` runs one: through `from_transformers`
with and without its key/value cache (`eval/lm.py` HFDecoder), next to transformers' own
`generate` with and without its cache on the same weights (the peer).

The model is the tiny-cpu shape (4 x 128, GQA 4/2, MLP 352, vocabulary 257, context 128) as a
Qwen2ForCausalLM with random weights (scaled x5, as bench_generate.py: fewer near-ties). Workload:
--windows prompts of 32 tokens, 32 greedy tokens each, batches of 16 (`eval mem:`). One process,
CPU, --threads (default 1); each path timed --repeat times, best kept; rows checked equal.

    PYTHONPATH=src .venv/bin/python bench/bench_generate_hf.py --windows 32
"""

from __future__ import annotations

import argparse
import dataclasses

import torch
from bench_generate import best, hf_greedy


def qwen2():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=257, hidden_size=128, intermediate_size=352, num_hidden_layers=4,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                      tie_word_embeddings=False)
    m = Qwen2ForCausalLM(cfg).eval()
    with torch.no_grad():
        for p in m.parameters():
            p.mul_(5.0 if p.dim() > 1 else 1.0)
    return m


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--windows", type=int, default=32, help="prompts (default 32)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from transformers import PreTrainedTokenizerFast

    from pretrain.eval.lm import from_transformers
    from pretrain.eval.scoring import greedy_generate
    from pretrain.tokens.hf_tokenizer import byte_tokenizer

    hf = qwen2()
    tok = PreTrainedTokenizerFast(tokenizer_object=byte_tokenizer(), eos_token="<|endoftext|>")
    ev = from_transformers(hf, tok)
    plain = dataclasses.replace(ev, start_decoding=None)
    mem = torch.randint(0, 257, (args.windows, 32), generator=torch.Generator().manual_seed(1)).tolist()

    def theirs(cache):
        return [t for s in range(0, len(mem), 16) for t in hf_greedy(hf, mem[s:s + 16], 32, cache)]

    rows = {}
    for name, fn in [("ours uncached", lambda: greedy_generate(plain, mem, 32, batch_size=16)),
                     ("ours cached", lambda: greedy_generate(ev, mem, 32, batch_size=16)),
                     ("transformers uncached", lambda: theirs(False)),
                     ("transformers cached", lambda: theirs(True))]:
        rows[name] = best(fn, args.repeat)
    print(f"Qwen2 tiny-cpu shape, random weights; {args.windows} windows of 32+32; threads={args.threads}; "
          f"best of {args.repeat}")
    ref = rows["ours uncached"][1]
    for k, (s, out) in rows.items():
        same = sum(a == b for a, b in zip(out, ref))
        print(f"  {k:22s} {s:7.3f} s  {1000 * s / args.windows:6.2f} ms/window  rows equal to ours "
              f"uncached {same}/{len(ref)}")
    print(f"  speedup ours {rows['ours uncached'][0] / rows['ours cached'][0]:.1f}x, transformers "
          f"{rows['transformers uncached'][0] / rows['transformers cached'][0]:.1f}x; ours cached / "
          f"transformers cached {rows['ours cached'][0] / rows['transformers cached'][0]:.2f}")


if __name__ == "__main__":
    main()
