"""Benchmark: hostile tokenizer.json files under the 128 MiB bound, loaded before and after the entry cap.

Builds three files in a temporary folder with `tokenizers` itself (so each is a valid tokenizer):

- gemma: Gemma 3's shape, 262,144 tokens and 514,906 merges (~1.8 M entries): must still load;
- merges: `--merges` merges (default 2.4 M, ~50 MB) over ~0.7 M tokens of up to 6 letters;
- vocab: `--vocab` tokens and no merges (default 5.2 M, ~130 MB).

Each is loaded in a child process (limited to 8 GB of address space) twice: "peer" is what
`load_tokenizer` did before (the bounded read, then `Tokenizer.from_str`), "ours" is
`load_tokenizer` now (the same, with the entry count first). Prints seconds, peak RSS (VmHWM) and
the first 100 characters of what it said. The machine is shared: compare the two in one run.
Run: .venv/bin/python bench/bench_tokenizer_entries.py [--merges 2400000] [--vocab 5200000]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

_CHILD = r"""
import json, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))
t0 = time.perf_counter()
try:
    if sys.argv[2] == "peer":
        from tokenizers import Tokenizer
        from pretrain import untrusted
        from pretrain.tokens.tokenizer import MAX_TOKENIZER_BYTES
        tok = Tokenizer.from_str(untrusted.read_text(sys.argv[1], MAX_TOKENIZER_BYTES))
        said = f"loaded, {tok.get_vocab_size():,} tokens"
    else:
        from pretrain.tokens.tokenizer import load_tokenizer
        said = f"loaded, {load_tokenizer(sys.argv[1]).get_vocab_size():,} tokens"
except Exception as e:
    said = str(e).split(": ", 1)[-1]
hwm = [int(x.split()[1]) // 1024 for x in open("/proc/self/status") if x.startswith("VmHWM")][0]
print(json.dumps({"seconds": round(time.perf_counter() - t0, 2), "peak_mb": hwm, "said": said[:100]}))
"""


def bpe_file(path: Path, n_vocab: int, n_merges: int, letters: str) -> None:
    """A BPE tokenizer.json: the first `n_vocab` strings of 1, 2, ... `letters` in order, and the
    first `n_merges` splits of them (every string shorter is in the vocabulary: each merge valid)."""
    from tokenizers import Tokenizer, models

    words = ("".join(t) for n in range(1, 9) for t in itertools.product(letters, repeat=n))
    vocab = {t: i for i, t in enumerate(itertools.islice(words, n_vocab))}
    splits = ((t[:k], t[k:]) for t in vocab for k in range(1, len(t)))
    merges = list(itertools.islice(splits, n_merges))
    assert len(merges) == n_merges, "too few tokens for that many merges"
    path.write_text(Tokenizer(models.BPE(vocab=vocab, merges=merges)).to_str())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--merges", type=int, default=2_400_000)
    ap.add_argument("--vocab", type=int, default=5_200_000)
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(HERE / "src")}
    with tempfile.TemporaryDirectory() as tmp:
        files = {"gemma": Path(tmp) / "gemma.json", "merges": Path(tmp) / "merges.json",
                 "vocab": Path(tmp) / "vocab.json"}
        bpe_file(files["gemma"], 262_144, 514_906, "abcdefgh")
        bpe_file(files["merges"], 111_110 + args.merges // 4, args.merges, "abcdefghij")
        bpe_file(files["vocab"], args.vocab, 0, "abcdefghijklmnopqrstuvwxyz")
        from pretrain.tokens.tokenizer import MAX_TOKENIZER_ELEMENTS, tokenizer_elements

        print(f"cap {MAX_TOKENIZER_ELEMENTS:,} entries")
        for name, f in files.items():
            n = tokenizer_elements(f, f.read_bytes())
            print(f"{name}: {f.stat().st_size / 1e6:.1f} MB, {n:,} entries counted")
            for who in ("peer", "ours"):
                out = subprocess.run([sys.executable, "-c", _CHILD, str(f), who], env=env,
                                     capture_output=True, text=True, check=False)
                r = json.loads(out.stdout) if out.stdout.strip() else {"error": out.stderr[-200:]}
                print(f"  {who}: {r}")


if __name__ == "__main__":
    main()
