"""Running a task: prompts -> requests -> scores per example -> metrics, optionally sharded over ranks.

Metrics are lm-evaluation-harness's definitions (`lm_eval.api.task.ConfigurableTask.process_results`):
- acc: the choice with the highest log-likelihood is the gold one (ties go to the first);
- acc_norm: the same after dividing each log-likelihood by its choice's length in characters
  (the harness's `len(choice)`); acc_bytes divides by the length in UTF-8 bytes instead;
- lm tasks (LAMBADA): acc = every continuation token is the greedy one, perplexity = exp(-mean ll);
- generation tasks: exact match of the extracted answer (GSM8K's number, TriviaQA's normalized alias).
Each metric comes with its standard error (sample standard deviation / sqrt(n), as the harness).

Examples are scored in fixed chunks of `partial.CHUNK`, kept as each finishes so that a killed run
continues inside the task (eval/partial.py). Under torch.distributed each rank scores the examples
i with i % world == rank of each chunk and the ranks gather them, so the result equals one
process's regardless of the world size. An example with a
continuation that tokenizes to nothing is skipped and counted (`skipped["empty_continuation"]`), and
so is one a tokenizer without an exact cut would encode past WHOLE_BUDGET characters
(`skipped["too_long_to_encode_whole"]`); `n` counts the examples scored.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from pretrain.eval import partial as kept
from pretrain.eval import tasks as T
from pretrain.eval.lm import EvalModel
from pretrain.eval.partial import Partial
from pretrain.eval.scoring import encode_pair, greedy_generate, last_ids, loglikelihood_tokens

GEN_STOP = {"gsm8k": ("Question:", "\n\n\n"), "qa": ("\n",)}
GEN_TOKENS = {"gsm8k": 256, "qa": 32}
EMPTY = "empty_continuation"  # the reason an example with nothing to score is skipped
# A tokenizer without an exact cut (a Hugging Face folder's, a tokenizer.json without a `pieces`
# rule) encodes (context + choice) whole for each choice, as lm-evaluation-harness does: one 4 MB
# query with 1,000 choices is 4 G characters, ~55 min at the 1.3 M characters/s a byte-level BPE
# encodes here. Past this many characters for one example (16 MiB: ~13 s; a 5-shot MMLU example
# is ~20 KB, a long-document task's ~1 MB) the example is skipped and counted, not encoded.
WHOLE_BUDGET = 1 << 24
TOO_LONG = "too_long_to_encode_whole"
SKIPS = (EMPTY, TOO_LONG)  # the reasons an example of the file is read and not scored


def requests_of(task: T.Task, i: int, shots: int, seed: int) -> list[tuple[str, str]]:
    """The (context, continuation) pairs example i asks the model to score."""
    doc, prefix = task.docs[i], T.fewshot_prefix(task, i, shots, seed)
    if task.kind in ("mc", "mmlu"):
        ctx = prefix + T.context_of(task, doc)
        return [(ctx, T.DELIM + c) for c in doc["choices"]]
    if task.kind == "schema":
        return [(prefix + c, T.DELIM + doc["continuation"]) for c in doc["contexts"]]
    if task.kind == "lm":
        return [(prefix + doc["context"], T.DELIM + doc["continuation"])]
    raise ValueError(f"{task.kind} is a generation task")


def score_examples(model: EvalModel, task: T.Task, idx: list[int], shots: int = 0, seed: int = 1234,
                   batch_tokens: int = 4096, tick: Callable[[int], None] | None = None) -> list[dict]:
    """Per-example records (index, log-likelihoods or generation, correctness) for examples `idx`."""
    if task.kind in GEN_STOP:
        return _generate_examples(model, task, idx, shots, seed, tick)
    reqs, out = [], []
    exact = model.cut is not None and model.encode_after is not None
    for i in idx:
        texts = requests_of(task, i, shots, seed)
        if not exact and sum(len(c) + len(x) for c, x in texts) > WHOLE_BUDGET:
            out.append({"i": i, "skipped": TOO_LONG})
            continue
        memo: dict = {}  # the example's context, encoded once for all its choices
        pairs = [encode_pair(model, c, x, memo) for c, x in texts]
        # A continuation can tokenize to nothing (a merge across the context's end swallows it, or
        # the tokenizer drops its characters): there is nothing to score, so the example is skipped
        # and counted. lm-evaluation-harness asserts len(continuation_enc) > 0 and stops the run.
        if any(not cont for _, cont in pairs):
            out.append({"i": i, "skipped": EMPTY})
        else:
            reqs.append((i, pairs))
    flat = [p for _, pairs in reqs for p in pairs]
    # the bar counts examples; the scorer ticks once per request: divide by requests per example
    per = max(1, len(flat) // max(1, len(reqs)))
    scores = loglikelihood_tokens(model, flat, batch_tokens, (lambda n: tick(n / per)) if tick else None)
    k = 0
    for i, pairs in reqs:
        got = scores[k:k + len(pairs)]
        k += len(pairs)
        out.append(_record(task, i, [s for s, _ in got], [g for _, g in got]))
    return sorted(out, key=lambda r: r["i"])


def _record(task: T.Task, i: int, lls: list[float], greedy: list[bool]) -> dict:
    doc = task.docs[i]
    rec: dict = {"i": i, "lls": lls}
    if task.kind == "lm":
        rec.update(acc=float(greedy[0]))
        return rec
    gold = doc["gold"]
    rec.update(gold=gold, acc=float(int(np.argmax(lls)) == gold))
    if task.kind in ("mc", "mmlu"):
        chars = np.array([float(len(c)) for c in doc["choices"]])
        nbytes = np.array([float(len(c.encode("utf-8"))) for c in doc["choices"]])
        rec["acc_norm"] = float(int(np.argmax(np.array(lls) / chars)) == gold)
        rec["acc_bytes"] = float(int(np.argmax(np.array(lls) / nbytes)) == gold)
    return rec


def _generate_examples(model, task, idx, shots, seed, tick) -> list[dict]:
    stops = GEN_STOP[task.kind]
    # each prompt's last max_length + 1 ids: longer, the model reads its last max_length either way
    prompts = [last_ids(model, T.fewshot_prefix(task, i, shots, seed) + T.gen_prompt(task.docs[i]),
                        model.max_length + 1) for i in idx]

    def stop(ids: list[int]) -> bool:
        text = model.decode(ids)
        return any(s in text for s in stops)

    gens = greedy_generate(model, prompts, GEN_TOKENS[task.kind], stop, tick=tick)
    out = []
    for i, ids in zip(idx, gens):
        text = model.decode(ids)
        for s in stops:
            text = text.split(s)[0]
        doc = task.docs[i]
        if task.kind == "gsm8k":
            pred = T.gsm8k_answer(text)
            ok = pred == doc["answers"][0]
        else:
            pred = T.normalize_answer(text)
            ok = bool(pred) and pred in {T.normalize_answer(a) for a in doc["answers"]}  # "" never matches
        out.append({"i": i, "generation": text, "pred": pred, "exact_match": float(ok)})
    return out


def aggregate(task: T.Task, records: list[dict]) -> dict:
    """Mean and standard error of each per-example metric; perplexity for lm tasks."""
    keys = [k for k in ("acc", "acc_norm", "acc_bytes", "exact_match") if records and k in records[0]]
    metrics: dict = {}
    for k in keys:
        v = np.array([r[k] for r in records], dtype=np.float64)
        metrics[k] = float(v.mean())
        metrics[f"{k}_stderr"] = float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else 0.0
    if task.kind == "lm":
        metrics["perplexity"] = float(math.exp(-np.mean([r["lls"][0] for r in records])))
    return metrics


def gather(records: list[dict]) -> list[dict]:
    """All ranks' records in example order (on every rank); a no-op without a process group."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        parts: list = [None] * dist.get_world_size()
        dist.all_gather_object(parts, records)
        records = [r for part in parts for r in part]
    return sorted(records, key=lambda r: r["i"])


def score_chunks(n: int, score: Callable[[list[int]], list[dict]], rank: int = 0, world: int = 1,
                 saved: Partial | None = None, force: bool = False,
                 tick: Callable[[int], None] | None = None) -> list[dict]:
    """The records of items 0..n-1 (on every rank), scored `partial.CHUNK` at a time in index
    order, each rank its items i % world == rank; rank 0's `saved` keeps each chunk as it finishes
    and gives back those an interrupted run finished (eval/partial.py: an uninterrupted run scores
    the same chunks, so the numbers are the same)."""
    import torch.distributed as dist

    records = saved.resume(n, force) if saved is not None else []
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        box = [records]  # rank 0's parsed and checked records (numbers), to our own ranks
        dist.broadcast_object_list(box, src=0)
        records = box[0]
    if tick is not None and records:
        tick(len(range(rank, len(records), world)))
    for start in range(len(records), n, kept.CHUNK):
        stop = min(start + kept.CHUNK, n)
        got = gather(score([i for i in range(start, stop) if i % world == rank]))
        if saved is not None:
            saved.add(start, stop, got)
        records += got
    return records


def evaluate(model: EvalModel, task: T.Task, shots: int = 0, seed: int = 1234, limit: int | None = None,
             rank: int = 0, world: int = 1, batch_tokens: int = 4096,
             tick: Callable[[int], None] | None = None, saved: Partial | None = None,
             force: bool = False) -> dict:
    """One task's result: {"task", "kind", "n", "shots", "seed", "metrics", "examples"}."""
    n = min(len(task.docs), limit) if limit else len(task.docs)

    def score(idx: list[int]) -> list[dict]:
        return score_examples(model, task, idx, shots, seed, batch_tokens, tick)

    records = score_chunks(n, score, rank, world, saved, force, tick)
    skipped = dict(task.skipped)
    for r in records:
        if "skipped" in r:
            skipped[r["skipped"]] = skipped.get(r["skipped"], 0) + 1
    records = [r for r in records if "skipped" not in r]
    return {"task": task.name, "kind": task.kind, "path": task.path, "n": len(records), "shots": shots,
            "seed": seed, "skipped": skipped, "metrics": aggregate(task, records), "examples": records}
