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
(batch, length, vocabulary). With a model that takes a mask (`EvalModel.tree_logits`), requests
that share a long enough context also share one row (`tree_rows` says which).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from pretrain.eval.lm import EvalModel

TokenRequest = tuple[list[int], list[int]]  # (context ids, continuation ids)


# A context longer than this (characters) is encoded in two parts when the model can cut it exactly
# (`EvalModel.cut`): its last TAIL characters with each continuation, the rest once, and of that
# only the last max_length + 1 tokens. A task file someone sent can hold a 4 MB query with 1,000
# choices (or five 8 MiB shots before each example): encoded whole twice per choice and held, that
# was 66 s to a MemoryError at 7.6 GB for one example.
LONG_CONTEXT = 1 << 14
TAIL = 1 << 10  # a cut's validity reads the two characters beside it; the rest is margin

# A packed row (`tree_rows`) is at most this many model windows (max_length + 1) wide: its mask and
# its dense attention grow with the width squared, so a row at most 2 windows wide costs at most
# 4 windows' attention for the 2 or more plain rows it replaces.
ROW_WIDTH = 2


def encode_pair(model: EvalModel, context: str, continuation: str, memo: dict | None = None) -> TokenRequest:
    """Token ids of (context, continuation) as the harness splits them, each kept to its last
    max_length + 1 ids: the model reads (ctx + cont)[-(max_length + 1):][:-1], so nothing it reads,
    and no request's grouping (`loglikelihood_tokens`), depends on the ids before those. `memo`
    holds a context's encoding for the next continuation of the same example."""
    need = model.max_length + 1
    if context == "":
        cont = model.encode(continuation)
        if cont and cont[0] == model.eot_id:
            return cont[:1], cont[1:][-need:]
        return [model.eot_id], cont[-need:]
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces:  # "Answer: " + "B" is tokenized as "Answer:" + " B" (word-boundary tokens)
        continuation = context[-n_spaces:] + continuation
        context = context[:-n_spaces]
    memo = {} if memo is None else memo
    if len(context) > LONG_CONTEXT and model.cut is not None and model.encode_after is not None:
        if (got := _cut_pair(model, context, continuation, need, memo)) is not None:
            return got
    if context not in memo:
        ids = model.encode(context)
        memo[context] = (len(ids), ids[-need:])
    n_ctx, ctx = memo[context]
    return ctx, model.encode(context + continuation)[n_ctx:][-need:]


def _cut_pair(model: EvalModel, context: str, continuation: str, need: int,
              memo: dict) -> TokenRequest | None:
    """encode_pair's ids through a cut c at least TAIL characters before the context's end, or None
    when there is none: encode(ctx) = encode(ctx[:c]) + after(ctx[c:]) and the same with the
    continuation appended (the cut's neighbours are the context's), so the continuation's ids are
    after(ctx[c:] + cont) past after(ctx[c:]), and the context's last ids come from ctx[:c]'s."""
    key = ("cut", context)
    if key not in memo:
        c = model.cut(context, len(context) - TAIL)
        memo[key] = None if c is None else (c, last_ids(model, context[:c], need),
                                            model.encode_after(context[c:]))
    if memo[key] is None:
        return None
    c, head, tail = memo[key]
    return (head + tail)[-need:], model.encode_after(context[c:] + continuation)[len(tail):][-need:]


def last_ids(model: EvalModel, text: str, n: int) -> list[int]:
    """encode(text)[-n:], read from a suffix that starts at a cut and holds at least n ids (4n
    characters first, then 4x more each time): the cost of the window, not of the text."""
    k = 4 * n
    while model.cut is not None and model.encode_after is not None and len(text) > k:
        c = model.cut(text, len(text) - k)
        if c is None:
            break
        ids = model.encode_after(text[c:])
        if len(ids) >= n:
            return ids[-n:]
        k *= 4
    return model.encode(text)[-n:]


def loglikelihoods(model: EvalModel, pairs: Sequence[tuple[str, str]], batch_tokens: int = 4096,
                   tick: Callable[[int], None] | None = None) -> list[tuple[float, bool]]:
    """(sum of log p(continuation | context), greedy?) for each (context, continuation) string pair."""
    memo: dict = {}
    return loglikelihood_tokens(model, [encode_pair(model, c, x, memo) for c, x in pairs], batch_tokens, tick)


def _model_input(req: TokenRequest, max_length: int) -> tuple[int, ...]:
    ctx, cont = req
    if not cont:
        raise ValueError("empty continuation: nothing to score")
    return tuple((ctx + cont)[-(max_length + 1):][:-1])


def loglikelihood_tokens(model: EvalModel, reqs: Sequence[TokenRequest], batch_tokens: int = 4096,
                         tick: Callable[[int], None] | None = None) -> list[tuple[float, bool]]:
    """Score token requests: through packed prefix trees when the model takes them (requests that
    share a context and fit the window), the rest with identical inputs run once, in padded batches."""
    out: list[tuple[float, bool]] = [(0.0, False)] * len(reqs)
    rest = list(range(len(reqs)))
    if model.tree_logits is not None:
        trees: dict[tuple[int, ...], list[int]] = {}
        for i, (ctx, cont) in enumerate(reqs):
            if ctx and cont and len(ctx) + len(cont) <= model.max_length + 1:
                trees.setdefault(tuple(ctx), []).append(i)
        rows = [(c, row) for c, ix in trees.items()
                for row in tree_rows(len(c), [len(reqs[i][1]) for i in ix], ix, model.max_length)]
        done = {i for _, row in rows for i in row}
        _score_trees(model, reqs, rows, batch_tokens, tick, out)
        rest = [i for i in rest if i not in done]
    _score_plain(model, reqs, rest, batch_tokens, tick, out)
    return out


def tree_rows(n_ctx: int, n_conts: list[int], ix: list[int], max_length: int) -> list[list[int]]:
    """The packed rows (each a list of `ix` entries, in their order) of requests sharing a context
    of n_ctx tokens, with continuations of n_conts tokens; the requests in no row are scored plain.

    A row's width is n_ctx + sum(n_cont - 1): each branch after the first saves n_ctx tokens, but
    the row's attention is dense in its width squared (an explicit mask) where a plain row's is
    causal in its own width. So a context packs only when it is at least half as long as each
    branch (a multiple-choice question and its answers: measured no slower than packing all,
    bench/bench_eval_pack.py), and a row closes before it outgrows ROW_WIDTH windows (an example
    of many long choices). `ppl:` rolling windows share a one-token context: before session 14 a
    text's windows after the same token made one row hundreds of windows wide, 3.7x slower than
    plain rows (docs/decisions.md). A pure function of the requests: a chunk scores the same
    every time (eval/partial.py)."""
    if len(ix) < 2 or max(n_conts) < 2 or 2 * n_ctx < max(n_conts) - 1:
        return []
    cap = ROW_WIDTH * (max_length + 1)
    rows: list[list[int]] = []
    width = cap + 1
    for i, n in zip(ix, n_conts):
        if width + n - 1 > cap:
            rows.append([])
            width = n_ctx
        rows[-1].append(i)
        width += n - 1
    return [r for r in rows if len(r) > 1]


def _score_plain(model, reqs, which, batch_tokens, tick, out) -> None:
    inputs: dict[tuple[int, ...], list[int]] = {}  # model input -> indices of the requests reading it
    for i in which:
        inputs.setdefault(_model_input(reqs[i], model.max_length), []).append(i)
    order = sorted(inputs, key=len, reverse=True)  # longest first: padding stays small, OOM shows early
    for batch in _batches([len(x) for x in order], batch_tokens):
        rows = [order[b] for b in batch]
        width = len(rows[0])
        ids = torch.zeros((len(rows), width), dtype=torch.long)
        reads = {}
        for b, inp in enumerate(rows):
            ids[b, :len(inp)] = torch.tensor(inp, dtype=torch.long)
            for i in inputs[inp]:
                k = min(len(reqs[i][1]), len(inp))
                reads[i] = (b, list(range(len(inp) - k, len(inp))))
        keep = sorted({p for _, r in reads.values() for p in r})
        col = {p: c for c, p in enumerate(keep)}
        logits = model.logits(ids.to(model.device), torch.tensor(keep))  # (B, len(keep), V)
        for i, (b, r) in reads.items():
            out[i] = _score_positions(logits[b], [col[p] for p in r], reqs[i][1][-len(r):])
        if tick is not None:
            tick(len(reads))


def _batches(lengths: list[int], batch_tokens: int, slack: float = 0.9) -> list[list[int]]:
    """Consecutive indices of rows sorted longest first, cut so that a batch holds at most
    batch_tokens padded tokens and no row is shorter than `slack` x the batch's width: on a CPU
    a padded token costs as much as a real one, and bigger batches buy little."""
    out: list[list[int]] = []
    for i, n in enumerate(lengths):
        if out:
            first = lengths[out[-1][0]]
            if (len(out[-1]) + 1) * first <= batch_tokens and n >= slack * first:
                out[-1].append(i)
                continue
        out.append([i])
    return out


def _pack(ctx: tuple[int, ...], conts: list[list[int]]) -> tuple[list, list, list, list[list[int]]]:
    """One row for a context and its continuations: ctx, then each cont[:-1] as its own branch.

    Returns (ids, positions, branch of each token (0 = the shared context), and for each
    continuation the row indices whose logits predict its tokens)."""
    ids, pos, branch = list(ctx), list(range(len(ctx))), [0] * len(ctx)
    reads = []
    for j, cont in enumerate(conts, start=1):
        start = len(ids)
        ids += cont[:-1]
        pos += range(len(ctx), len(ctx) + len(cont) - 1)
        branch += [j] * (len(cont) - 1)
        reads.append([len(ctx) - 1] + list(range(start, start + len(cont) - 1)))
    return ids, pos, branch, reads


def _score_trees(model, reqs, groups, batch_tokens, tick, out) -> None:
    """A context and all its continuations in one row: each branch attends to the context and to
    itself (causally), with the positions it would have alone, so its logits are the plain ones."""
    rows = []
    for ctx, ix in groups:
        ids, pos, branch, reads = _pack(ctx, [reqs[i][1] for i in ix])
        rows.append((ids, pos, branch, list(zip(ix, reads))))
    rows.sort(key=lambda r: -len(r[0]))
    for which in _batches([len(r[0]) for r in rows], batch_tokens):
        batch = [rows[b] for b in which]
        width = len(batch[0][0])
        ids = torch.zeros((len(batch), width), dtype=torch.long)
        pos = torch.zeros((len(batch), width), dtype=torch.long)
        mask = torch.eye(width, dtype=torch.bool).repeat(len(batch), 1, 1)  # padding sees itself only
        causal = torch.ones((width, width), dtype=torch.bool).tril()
        for b, (r_ids, r_pos, r_branch, _) in enumerate(batch):
            n = len(r_ids)
            ids[b, :n], pos[b, :n] = torch.tensor(r_ids), torch.tensor(r_pos)
            br = torch.tensor(r_branch)
            mask[b, :n, :n] = causal[:n, :n] & ((br[None, :] == 0) | (br[None, :] == br[:, None]))
        keep = sorted({p for r in batch for _, read in r[3] for p in read})
        col = {p: c for c, p in enumerate(keep)}
        logits = model.tree_logits(ids, pos, mask, torch.tensor(keep))  # (B, len(keep), V)
        for b, (_, _, _, members) in enumerate(batch):
            for i, read in members:
                out[i] = _score_positions(logits[b], [col[p] for p in read], reqs[i][1])
        if tick is not None:
            tick(sum(len(r[3]) for r in batch))


def _score_positions(logits: torch.Tensor, read: list[int], cont: list[int]) -> tuple[float, bool]:
    rows = logits[torch.tensor(read, device=logits.device)].float().log_softmax(-1)  # (k, V)
    target = torch.tensor(cont, dtype=torch.long, device=rows.device)
    return rows.gather(1, target[:, None]).sum().item(), bool((rows.argmax(-1) == target).all())


@torch.no_grad()
def greedy_generate(model: EvalModel, prompts: Sequence[list[int]], max_new_tokens: int,
                    stop: Callable[[list[int]], bool] | None = None, batch_size: int = 8,
                    tick: Callable[[int], None] | None = None) -> list[list[int]]:
    """Greedy continuation ids of each prompt (at most max_new_tokens, ending early when `stop`
    says so). Rows of different lengths share a batch: each reads its own last position, right
    padding is never seen by a causal model, and each row keeps its last max_length tokens.
    With `model.start_decoding` the prompts run once and each step feeds one token per row against
    a key/value cache (train/decode.py), until a row outgrows max_length: then the full forward."""
    outs: list[list[int]] = [[] for _ in prompts]
    order = sorted(range(len(prompts)), key=lambda i: -len(prompts[i]))
    L = model.max_length
    for s in range(0, len(order), batch_size):
        idx = order[s:s + batch_size]
        rows = [list(prompts[i]) or [model.eot_id] for i in idx]
        live = list(range(len(rows)))
        dec = None
        if model.start_decoding is not None and max(len(r) for r in rows) <= L:
            dec = model.start_decoding(rows)
        for _ in range(max_new_tokens):
            if not live:
                break
            if dec is not None and any(len(rows[b]) > L for b in live):
                dec = None  # the window slides from here: every position shifts, the cache is void
            nxt = (dec.logits() if dec is not None else _window_logits(model, [rows[b] for b in live]))
            nxt = nxt.argmax(-1).tolist()
            for b, t in zip(live, nxt):
                rows[b].append(int(t))
                outs[idx[b]].append(int(t))
            going = [j for j, b in enumerate(live) if not (stop and stop(outs[idx[b]]))]
            if dec is not None:
                dec.push(nxt)
                if len(going) < len(live):
                    dec.retain(going)
            live = [live[j] for j in going]
        if tick is not None:
            tick(len(idx))
    return outs


def _window_logits(model: EvalModel, rows: list[list[int]]) -> torch.Tensor:
    """Logits (B, V) at each row's last token, over its last max_length tokens (the full forward)."""
    windows = [r[-model.max_length:] for r in rows]
    ids = torch.zeros((len(windows), max(len(w) for w in windows)), dtype=torch.long)
    for j, w in enumerate(windows):
        ids[j, :len(w)] = torch.tensor(w)
    last = [len(w) - 1 for w in windows]
    keep = sorted(set(last))
    col = torch.tensor([keep.index(p) for p in last])
    logits = model.logits(ids.to(model.device), torch.tensor(keep))  # (B, len(keep), V)
    return logits[torch.arange(len(rows)), col.to(logits.device)]
