"""A list of tasks against one model: what `pretrain eval` and the in-loop evaluation call.

Task specs: a known name (`arc_easy`, `mmlu`, `gsm8k`, ... under the benchmarks folder), a path to a
.jsonl task file, `ppl:PATH` for perplexity and bits per byte of a text file or a token directory, or
`mem:PATH` for extractable memorization of random windows of a training text or token directory.
Examples (and perplexity windows) are split over the data-parallel ranks when a process group is up.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection
from pathlib import Path

from pretrain.errors import UserError
from pretrain.eval import harness
from pretrain.eval.lm import EvalModel
from pretrain.eval.partial import Partial
from pretrain.eval.perplexity import read_tokens, rolling_requests
from pretrain.eval.scoring import loglikelihood_tokens
from pretrain.eval.tasks import benchmark_places, load_task

MAX_TEXT_BYTES = 64 << 20  # perplexity reads at most this much text: evaluation, not a corpus pass


def benchmarks_dir(given: str | None) -> str | None:
    """--benchmarks (as given, even when missing: the caller says so), else the first existing
    folder of `tasks.benchmark_places()`: $PRETRAIN_BENCHMARKS, $PRETRAIN_SHARED_DATA/benchmarks,
    ../shared/data/benchmarks. None when none exists (the task's error names every place)."""
    if given:
        return given
    for _, cand in benchmark_places():
        if cand and Path(cand).is_dir():
            return cand
    return None


def split_specs(specs: str | list[str]) -> list[str]:
    items = specs.split(",") if isinstance(specs, str) else [s for x in specs for s in x.split(",")]
    out = [s.strip() for s in items if s.strip()]
    if not out:
        raise UserError("no task given: --tasks arc_easy,ppl:valid.txt")
    return out


def rank_world() -> tuple[int, int]:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def perplexity_task(model: EvalModel, path: str, max_tokens: int, batch_tokens: int,
                    tick: Callable[[int], None] | None = None, saved: Partial | None = None,
                    force: bool = False) -> dict:
    """Perplexity/bits per byte of a text file or token directory, its windows split over ranks
    (in chunks kept in `saved` as they finish: harness.score_chunks)."""
    p = Path(path)
    if p.is_dir():
        ids = [int(t) for t in read_tokens(p, max_tokens)]
        nbytes, words = len(model.decode(ids).encode("utf-8")), None
    elif p.is_file():
        if p.stat().st_size > MAX_TEXT_BYTES:
            raise UserError(f"{p}: larger than {MAX_TEXT_BYTES >> 20} MiB; evaluate a sample of it")
        text = p.read_bytes().decode("utf-8", errors="replace")
        ids = model.encode(text)[:max_tokens]
        text = model.decode(ids) if len(ids) == max_tokens else text
        nbytes, words = len(text.encode("utf-8")), len(text.split())
    else:
        raise UserError(f"ppl:{path}: no such file or token directory")
    if not ids:
        raise UserError(f"ppl:{path}: no tokens")
    reqs = rolling_requests(ids, model.max_length, model.eot_id)
    rank, world = rank_world()

    def score(mine: list[int]) -> list[dict]:
        scores = loglikelihood_tokens(model, [reqs[i] for i in mine], batch_tokens, tick)
        return [{"i": i, "ll": s} for i, (s, _) in zip(mine, scores)]

    recs = harness.score_chunks(len(reqs), score, rank, world, saved, force, tick)
    nll = -math.fsum(r["ll"] for r in recs)
    m = {"perplexity": math.exp(nll / len(ids)), "bits_per_byte": nll / (max(1, nbytes) * math.log(2)),
         "byte_perplexity": math.exp(nll / max(1, nbytes)), "nll": nll, "tokens": len(ids), "bytes": nbytes}
    if words:
        m["word_perplexity"] = math.exp(nll / words)
    return {"task": f"ppl:{p.name}", "kind": "ppl", "path": str(p), "n": len(reqs), "shots": 0, "seed": 0,
            "skipped": {}, "metrics": m, "examples": []}


def read_stream(model: EvalModel, path: str, max_tokens: int) -> list[int]:
    """Token ids of a text file (encoded by the model's tokenizer) or a token directory."""
    p = Path(path)
    if p.is_dir():
        return [int(t) for t in read_tokens(p, max_tokens)]
    if not p.is_file():
        raise UserError(f"{path}: no such file or token directory")
    with open(p, "rb") as f:  # enough bytes for max_tokens tokens (a token is at least one byte)
        return model.encode(f.read(min(MAX_TEXT_BYTES, 16 * max_tokens)).decode("utf-8", errors="replace"))[
            :max_tokens]


def memorization_task(model: EvalModel, path: str, max_tokens: int, n: int, seed: int,
                      k: int = 32, m: int = 32) -> dict:
    """Share of n random training windows whose next m tokens greedy decoding reproduces from k."""
    import numpy as np

    from pretrain.eval.memorization import probe

    res = probe(model, np.asarray(read_stream(model, path, max_tokens)), k, m, n, seed)
    metrics = {"memorized": res["rate"], **{f"memorized_{b}": v["rate"] for b, v in res["by_count"].items()}}
    return {"task": f"mem:{Path(path).name}", "kind": "mem", "path": path, "n": res["n"], "shots": 0,
            "seed": seed, "skipped": {}, "metrics": metrics, "examples": res["sequences"]}


def run_tasks(model: EvalModel, specs: list[str], benchmarks: str | None = None, shots: int = 0,
              seed: int = 1234, limit: int | None = None, batch_tokens: int = 4096,
              ppl_tokens: int = 200_000, progress: bool = False, skip: Collection[str] = (),
              on_result: Callable[[str, dict, float], None] | None = None,
              partial: Callable[[str], Partial | None] | None = None, force: bool = False,
              ) -> tuple[list[dict], float]:
    """(one result per task not in `skip`, seconds). Every rank returns the same results.
    `on_result(spec, result, seconds so far)` is called as each task finishes (a resumable caller
    writes it down there: `pretrain eval` killed after 5 of 6 tasks keeps 5); `partial(spec)`, on
    rank 0, keeps a task's chunks as they finish (eval/partial.py: killed inside a task, the rerun
    continues there; `force` starts over)."""
    rank, world = rank_world()
    t0 = time.perf_counter()
    out = []
    for i, spec in enumerate(specs):
        if spec in skip:
            continue
        t_task = time.perf_counter()
        _said(f"scoring {spec} (task {i + 1} of {len(specs)})", progress and rank == 0)
        saved = partial(spec) if partial is not None else None
        with _bar(spec, progress and rank == 0) as tick:
            out.append(_one_task(model, spec, benchmarks, shots, seed, limit, batch_tokens, ppl_tokens,
                                 rank, world, tick, saved, force))
        # kept per task in the result file: with the chunks an interrupted run scored (partial.py)
        earlier = saved.earlier if saved is not None else 0.0
        out[-1]["seconds"] = round(time.perf_counter() - t_task + earlier, 3)
        _said(f"  {spec}: n {out[-1]['n']:,} in {out[-1]['seconds']:.1f} s", progress and rank == 0)
        if on_result is not None:
            on_result(spec, out[-1], time.perf_counter() - t0)
        if saved is not None:  # in the result file now
            saved.close()
    return out, time.perf_counter() - t0


def _one_task(model: EvalModel, spec: str, benchmarks: str | None, shots: int, seed: int, limit: int | None,
              batch_tokens: int, ppl_tokens: int, rank: int, world: int, tick, saved: Partial | None,
              force: bool) -> dict:
    if spec.startswith("mem:"):  # 200 windows by default, seconds: not kept inside the task
        return memorization_task(model, spec[4:], ppl_tokens, limit or 200, seed)
    if spec.startswith("ppl:"):
        return perplexity_task(model, spec[4:], ppl_tokens, batch_tokens, tick(None), saved, force)
    task = load_task(spec, benchmarks)
    n = min(len(task.docs), limit) if limit else len(task.docs)
    return harness.evaluate(model, task, shots, seed, limit, rank, world, batch_tokens,
                            tick(len(range(rank, n, world))), saved, force)


def _said(line: str, enabled: bool) -> None:
    """A task's start and end as plain lines on stderr when no terminal draws the bar: an eval in a
    log (nohup, a job scheduler, CI) printed nothing for the minutes of its tasks (session 14 sweep)."""
    import sys

    if enabled and not sys.stderr.isatty():
        print(line, file=sys.stderr, flush=True)


class _bar:
    """A rich progress bar for one task on rank 0 (nothing when disabled or not a terminal)."""

    def __init__(self, name: str, enabled: bool):
        self.name, self.enabled, self.bar = name, enabled, None

    def __enter__(self):
        def make(total):
            if not self.enabled:
                return None
            import sys

            from rich.console import Console
            from rich.progress import Progress

            if not sys.stderr.isatty():
                return None
            self.bar = Progress(console=Console(stderr=True), transient=True)
            self.bar.start()
            tid = self.bar.add_task(self.name, total=total)
            return lambda n: self.bar.update(tid, advance=n)
        return make

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()
        return False
