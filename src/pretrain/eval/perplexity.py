"""Perplexity and bits per byte of a model on a text file or a token directory.

Rolling windows as lm-evaluation-harness's `loglikelihood_rolling` (`get_rolling_token_windows`
with context 1): the first window starts from the prefix token and predicts tokens [0, L); each next
window predicts the next L tokens from the token just before them, so every token is predicted
exactly once. Then, over N tokens, B bytes and W words of the text:
    perplexity = exp(NLL / N),  word_perplexity = exp(NLL / W),  bits_per_byte = NLL / (B ln 2)
(NLL in nats; bits per byte does not depend on the tokenizer, so it compares models with different
vocabularies, Gao et al. 2020, The Pile, sec. 4.)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np

from pretrain.errors import UserError
from pretrain.eval.lm import EvalModel
from pretrain.eval.scoring import loglikelihood_tokens


def rolling_requests(ids: list[int], max_length: int, prefix: int) -> list[tuple[list[int], list[int]]]:
    """(context, continuation) token requests covering ids once; each input is at most max_length."""
    reqs = []
    start = 0
    while start < len(ids):
        end = min(start + max_length, len(ids))
        ctx = [prefix] if start == 0 else [ids[start - 1]]
        reqs.append((ctx, ids[start:end]))
        start = end
    return reqs


def token_nll(model: EvalModel, ids: list[int], batch_tokens: int = 4096,
              tick: Callable[[int], None] | None = None) -> tuple[float, int]:
    """(total negative log-likelihood in nats, tokens predicted) of a token sequence."""
    reqs = rolling_requests(list(ids), model.max_length, model.eot_id)
    scores = loglikelihood_tokens(model, reqs, batch_tokens, tick)
    return -sum(s for s, _ in scores), len(ids)


def text_perplexity(model: EvalModel, text: str, batch_tokens: int = 4096,
                    tick: Callable[[int], None] | None = None) -> dict:
    """Perplexity per token and per word, and bits per byte, of one text."""
    ids = model.encode(text)
    if not ids:
        raise UserError("perplexity of an empty text")
    nll, n = token_nll(model, ids, batch_tokens, tick)
    nbytes, words = len(text.encode("utf-8")), max(1, len(text.split()))
    return {"perplexity": math.exp(nll / n), "word_perplexity": math.exp(nll / words),
            "byte_perplexity": math.exp(nll / nbytes), "bits_per_byte": nll / (nbytes * math.log(2)),
            "nll": nll, "tokens": n, "bytes": nbytes, "words": words}


def tokens_perplexity(model: EvalModel, ids: np.ndarray, batch_tokens: int = 4096,
                      tick: Callable[[int], None] | None = None) -> dict:
    """Perplexity of a token array (bits per byte needs the text: decoded here to count its bytes)."""
    ids = [int(i) for i in ids]
    nll, n = token_nll(model, ids, batch_tokens, tick)
    nbytes = len(model.decode(ids).encode("utf-8"))
    return {"perplexity": math.exp(nll / n), "bits_per_byte": nll / (max(1, nbytes) * math.log(2)),
            "nll": nll, "tokens": n, "bytes": nbytes}


def read_tokens(directory: str | Path, max_tokens: int) -> np.ndarray:
    """The first max_tokens tokens of a `pretrain tokenize` directory (its shards as one stream)."""
    from pretrain.tokens.shards import TokenDir

    d = TokenDir(directory)
    n = min(max_tokens, d.num_tokens)
    if n == 0:
        raise UserError(f"{directory}: no tokens")
    return d.read(0, n)
