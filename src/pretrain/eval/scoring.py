"""Scoring text with a causal LM: continuation log-likelihoods (batched) and greedy generation.

The rules are lm-evaluation-harness's (`lm_eval.api.model`, `models.huggingface.HFLM`), so the same
request gives the same number in both:
- a pair (context, continuation) is tokenized as a whole and split where the context's own tokens
  end; trailing spaces of the context move to the continuation; an empty context starts from the
  model's prefix token;
- the model reads (context + continuation)[-(max_length + 1):][:-1] and the continuation's
  log-probability is the sum over its tokens of log_softmax at the positions that predict them;
  "greedy" means every continuation token is the argmax there.

Two things make it faster than the harness on the same model: requests whose model input is the
same (a multiple-choice question with one-token answers " A"/" B"/...: the input is the context
alone) share one forward pass, and log_softmax runs only on the continuation's positions, not on
(batch, length, vocabulary).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from pretrain.eval.lm import EvalModel

TokenRequest = tuple[list[int], list[int]]  # (context ids, continuation ids)


def encode_pair(model: EvalModel, context: str, continuation: str) -> TokenRequest:
    """Token ids of (context, continuation) as the harness splits them."""
    if context == "":
        cont = model.encode(continuation)
        if cont and cont[0] == model.eot_id:
            return cont[:1], cont[1:]
        return [model.eot_id], cont
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces:  # "Answer: " + "B" is tokenized as "Answer:" + " B" (word-boundary tokens)
        continuation = context[-n_spaces:] + continuation
        context = context[:-n_spaces]
    whole = model.encode(context + continuation)
    ctx = model.encode(context)
    return ctx, whole[len(ctx):]


def loglikelihoods(model: EvalModel, pairs: Sequence[tuple[str, str]], batch_tokens: int = 4096,
                   tick: Callable[[int], None] | None = None) -> list[tuple[float, bool]]:
    """(sum of log p(continuation | context), greedy?) for each (context, continuation) string pair."""
    return loglikelihood_tokens(model, [encode_pair(model, c, x) for c, x in pairs], batch_tokens, tick)


def _model_input(req: TokenRequest, max_length: int) -> tuple[int, ...]:
    ctx, cont = req
    if not cont:
        raise ValueError("empty continuation: nothing to score")
    return tuple((ctx + cont)[-(max_length + 1):][:-1])


def loglikelihood_tokens(model: EvalModel, reqs: Sequence[TokenRequest], batch_tokens: int = 4096,
                         tick: Callable[[int], None] | None = None) -> list[tuple[float, bool]]:
    """Score token requests; identical model inputs are run once, longest first, in padded batches."""
    inputs: dict[tuple[int, ...], list[int]] = {}  # model input -> indices of the requests reading it
    for i, req in enumerate(reqs):
        inputs.setdefault(_model_input(req, model.max_length), []).append(i)
    order = sorted(inputs, key=len, reverse=True)  # longest first: padding stays small, OOM shows early
    out: list[tuple[float, bool]] = [(0.0, False)] * len(reqs)
    start = 0
    while start < len(order):
        width = len(order[start])
        n = max(1, batch_tokens // max(1, width))
        batch = order[start:start + n]
        ids = torch.zeros((len(batch), width), dtype=torch.long)
        for b, inp in enumerate(batch):
            ids[b, :len(inp)] = torch.tensor(inp, dtype=torch.long)
        logits = model.logits(ids.to(model.device))  # (B, T, V); right padding never reaches real positions
        for b, inp in enumerate(batch):
            for i in inputs[inp]:
                out[i] = _score_row(logits[b], len(inp), reqs[i][1])
        if tick is not None:
            tick(sum(len(inputs[inp]) for inp in batch))
        start += n
    return out


def _score_row(logits: torch.Tensor, n: int, cont: list[int]) -> tuple[float, bool]:
    """Sum of the continuation's log-probabilities read from one row of logits (T, V)."""
    cont = cont[-n:] if len(cont) > n else cont  # a continuation longer than the window: its tail
    k = len(cont)
    rows = logits[n - k:n].float().log_softmax(-1)  # (k, V): the positions that predict cont
    target = torch.tensor(cont, dtype=torch.long, device=rows.device)
    ll = rows.gather(1, target[:, None]).sum().item()
    greedy = bool((rows.argmax(-1) == target).all())
    return ll, greedy


@torch.no_grad()
def greedy_generate(model: EvalModel, prompts: Sequence[list[int]], max_new_tokens: int,
                    stop: Callable[[list[int]], bool] | None = None, batch_size: int = 8,
                    tick: Callable[[int], None] | None = None) -> list[list[int]]:
    """Greedy continuation ids of each prompt (at most max_new_tokens, ending early when `stop`
    says so). Rows of different lengths share a batch: each reads its own last position, right
    padding is never seen by a causal model, and each row keeps its last max_length tokens."""
    outs: list[list[int]] = [[] for _ in prompts]
    order = sorted(range(len(prompts)), key=lambda i: -len(prompts[i]))
    L = model.max_length
    for s in range(0, len(order), batch_size):
        idx = order[s:s + batch_size]
        rows = [list(prompts[i]) or [model.eot_id] for i in idx]
        live = list(range(len(rows)))
        for _ in range(max_new_tokens):
            if not live:
                break
            windows = [rows[b][-L:] for b in live]
            ids = torch.zeros((len(live), max(len(w) for w in windows)), dtype=torch.long)
            for j, w in enumerate(windows):
                ids[j, :len(w)] = torch.tensor(w)
            logits = model.logits(ids.to(model.device))
            last = torch.tensor([len(w) - 1 for w in windows], device=logits.device)
            nxt = logits[torch.arange(len(live), device=logits.device), last].argmax(-1).tolist()
            for b, t in zip(live, nxt):
                rows[b].append(int(t))
                outs[idx[b]].append(int(t))
            live = [b for b in live if not (stop and stop(outs[idx[b]]))]
        if tick is not None:
            tick(len(idx))
    return outs
