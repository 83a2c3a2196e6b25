"""Restart hygiene pieces the trainer uses: an old record moved aside on a fresh start, SIGINT and
SIGTERM caught as a flag, the Interrupted exit, the step line's clock, the recipe a checkpoint was
trained with (a resume under another one is refused or said, never silent), and the RNG states a
checkpoint keeps as JSON.

At scale interruptions are the weather (Llama 3: 419 in 54 days, Dubey et al. 2024 sec. 3.3.4): after
any of them the run directory's record must show one value per step, and the operator must be told
whether the run resumed or started fresh.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import random
import shutil
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

# what a run writes that a fresh start moves; eval/ too: RUN/eval/step_N.json scored the old model,
# and `pretrain eval RUN` of the new one at the same step merged its tasks with the old one's
RECORD = ("metrics.jsonl", "tensorboard", "checkpoints", "eval")
COURSE_EVENTS = ("spike", "rollback", "rollback_unavailable", "skip")  # kept in the record by a rollback


class Interrupted(Exception):
    """SIGINT or SIGTERM ended the run after saving (the command exits with 130, as shells expect)."""

    exit_code = 130


def _has_content(path: Path) -> bool:
    if path.is_dir():
        return any(path.iterdir())
    return path.is_file() and path.stat().st_size > 0


def set_aside_history(run_dir: Path, rank: int, not_resumed: int | None = None) -> None:
    """A fresh start in a run dir that has a record: move that record to RUN/previous-N/ (one line
    says so) rather than appending a second history to it or mixing two runs' checkpoints.
    `not_resumed`: the newest checkpoint's step when train.resume=false passed it over; the line
    then says so and how to go on with that run (it said "no checkpoint to resume", sweep session 13)."""
    if rank == 0:  # one rank looks and moves: two ranks looking could disagree
        old = [run_dir / n for n in RECORD if _has_content(run_dir / n)]
        if old:
            n = 1
            while (run_dir / f"previous-{n}").exists():
                n += 1
            dest = run_dir / f"previous-{n}"
            dest.mkdir()
            for path in old:
                shutil.move(str(path), str(dest / path.name))
            if not_resumed is None:
                line = f"{run_dir} held an earlier run with no checkpoint to resume: moved its record to "
                line += str(dest)
            else:
                line = (f"{run_dir} held an earlier run (newest checkpoint: step {not_resumed}), not resumed "
                        f"(train.resume=false): its record moved to {dest}. To continue that run "
                        f"instead: stop this one and train with --set train.out={dest} (without "
                        f"train.resume=false): it resumes there from step {not_resumed}")
            print(line, file=sys.stderr, flush=True)
    if dist.is_initialized():
        dist.barrier()  # the old checkpoints are gone before any rank saves a new one


def catch_signals(note: Callable[[str], None]) -> dict:
    """SIGINT/SIGTERM call `note(name)`, which sets a flag the loop reads between steps (a handler
    must not save: it can run in the middle of a collective); the first signal restores the previous
    handlers, so a second one acts as it would have. Returns what `restore_signals` needs."""
    if threading.current_thread() is not threading.main_thread():
        return {}

    def handler(signum, _frame):
        note(signal.Signals(signum).name)
        restore_signals(old)

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    return old


def restore_signals(old: dict) -> None:
    for s, h in old.items():
        signal.signal(s, h)


def on_any_rank(flag: bool) -> bool:
    """True on every rank when it is on any (a MAX all-reduce); the flag itself on one process."""
    if dist.is_initialized():
        dev = "cuda" if dist.get_backend() == "nccl" else "cpu"
        t = torch.tensor(float(flag), device=dev)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        flag = bool(t.item())
    return flag


def hms(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


# --- one run at a time in a run directory ------------------------------------------------------------

def busy(run_dir: Path) -> str:
    """The refusal when another run holds the run directory (hold_run_dir), the same on every rank."""
    return (f"{run_dir}: another run is training into this directory now; wait for it to end (or stop it), "
            "then run the command again")


def hold_run_dir(run_dir: Path) -> int | None:
    """Lock the run directory for this run (rank 0), or refuse in one line if another run holds it.
    The same command started twice (a second terminal, a scheduler's retry while the first still
    runs) trained twice into one directory: the second's resume rewrote metrics.jsonl under the
    first, which kept appending to the replaced file, and each pruned the other's checkpoints. A
    flock on the directory itself writes nothing, and the kernel drops it with the process, even a
    SIGKILLed one, so a rerun after a kill is never refused. None where flock is not available."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock, as before
        return None
    fd = os.open(run_dir, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        from pretrain.errors import UserError

        raise UserError(busy(run_dir)) from None
    except OSError:  # a file system without locks (some network mounts): no lock, as before
        os.close(fd)
        return None
    return fd


def release_run_dir(fd: int | None) -> None:
    if fd is not None:
        os.close(fd)  # closing the only descriptor of the open file releases its flock


def agreed_interval(steps: int) -> int:
    """Young's save interval, one value for every rank: the largest. Each rank measures its own save
    and step times, so each computed its own interval (seen: 2 steps on rank 0, 1 on rank 1); a save
    is collective, so a rank saving alone waited in it while the others trained on (their collectives
    then paired with its own, or it hung until parallel.timeout_s). The largest, because the slowest
    rank's save is the time every rank waits (C in Young's rule)."""
    if not dist.is_initialized():
        return steps
    t = torch.tensor(int(steps), dtype=torch.int64, device="cuda" if dist.get_backend() == "nccl" else "cpu")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item())


# --- the recipe a checkpoint was trained with --------------------------------------------------------

# Keys a resume may change freely: where and how the run executes, what it logs, how it saves. A
# layout change (parallel.*) reshards; what it does to the data is kept in the global batch below.
OPERATIONAL = ("train.out", "train.resume", "train.stop_at", "train.threads", "train.device",
               "train.keep_freed_memory", "train.deterministic", "train.allow_changes", "log.", "checkpoint.",
               # how many rollbacks before the run stops: raised on a resume after it stopped there
               "stability.max_rollbacks",
               "parallel.", "model.init_from", "model.preset", "data.skip", "data.batch_size",
               "train.grad_accum", "train.loss_chunks",
               # paths: the loaders check what they point at (the fingerprint of the text's tokens, so
               # of the tokenizer too; each source's token count), so the same data reached from
               # another directory (model.init_from's tokenizer.json, say) is not a change
               "data.path", "data.tokenizer", "data.sources", "data.eval_sources")
SAID = ("train.steps",)  # allowed, and said: the schedule is recomputed over the new length


def recipe(cfg, dims, shape_fields: tuple[str, ...]) -> dict:
    """The keys that define what a run computes, flattened ("optim.lr": 0.003), as JSON holds them;
    the model's shape is left to the shape check, the batch is the global one (tokens per step)."""
    flat = {}
    for section, values in dataclasses.asdict(cfg).items():
        for key, value in values.items():
            name = f"{section}.{key}"
            if not name.startswith(OPERATIONAL) and not (section == "model" and key in shape_fields):
                flat[name] = value
    rows = cfg.data.batch_size * dims.dp_replicate * dims.dp_shard
    flat["global_batch"] = rows * cfg.train.grad_accum
    if cfg.data.kind == "text":  # its windows are drawn per micro-batch number: see MICRO_BATCH
        flat[MICRO_BATCH] = rows
    return json.loads(json.dumps(flat))


# A text loader draws micro-batch i's windows from (seed, i) and its size, and its position counts
# micro-batches: the same global batch split otherwise (train.grad_accum 1 -> 2, each rank's
# data.batch_size halved) reads other windows from the same position on, some text twice and some
# never (seen: a resume at step 4 of 16 under grad_accum 2 then trained 0.9% off the run never
# stopped). Token shards count sequences and are not affected.
MICRO_BATCH = "micro_batch_rows"
MICRO_BATCH_WHY = (f"{MICRO_BATCH} is data.batch_size x data-parallel ranks: a text loader draws each "
                   "micro-batch by its number, so the same global batch split another way (train.grad_accum) "
                   "would read other text than a run never stopped would")


def recipe_changes(saved: dict | None, now: dict) -> dict[str, tuple]:
    """{key: (then, now)} where a resume's recipe differs from the checkpoint's (none for a checkpoint
    written before checkpoints kept their recipe)."""
    if not isinstance(saved, dict):
        return {}
    return {k: (saved.get(k), v) for k, v in now.items() if k in saved and saved[k] != v}


def describe(changes: dict[str, tuple]) -> str:
    return ", ".join(f"{k} {a!r} -> {b!r}" for k, (a, b) in changes.items())


# --- a resume whose model.init_from folder is gone -----------------------------------------------------

def model_of_own_run(cfg, complete: Callable[[], bool]):
    """The run config to build when `model.init_from` names a folder without config.json (a Hugging
    Face cache cleaned, a run directory copied to another machine): a resume needs no weights from it
    (its checkpoint has them), and RUN/config.toml spells out the model it was built with, so that
    model is used, said on stderr. None when the folder is there, the run has no complete checkpoint
    to resume, or its config.toml names another folder: then apply_init_from says what is missing."""
    from pretrain import config as cfgmod
    from pretrain.errors import UserError
    from pretrain.train.config import RunConfig
    from pretrain.train.runs import placed

    folder = Path(cfg.model.init_from)
    own = Path(cfg.train.out) / "config.toml"
    if (folder / "config.json").is_file() or not cfg.train.resume or not own.is_file() or not complete():
        return None
    saved = cfgmod.load(RunConfig, own)  # as hostile as the rest of the run directory: one line each
    saved = placed(own.parent, saved)  # its relative paths as `pretrain train RUN/config.toml` read them
    if saved.model.init_from != cfg.model.init_from:
        return None
    data = cfg.data
    if data.kind == "text" and not data.tokenizer and saved.data.tokenizer:
        if not Path(saved.data.tokenizer).is_file():
            raise UserError(f"{folder}: no config.json, and {saved.data.tokenizer} (its tokenizer, which "
                            "this run's text is encoded with) is gone too: restore the folder to resume")
        data = dataclasses.replace(data, tokenizer=saved.data.tokenizer)
    if os.environ.get("RANK", "0") == "0":  # before torch.distributed starts: torchrun's rank
        print(f"{folder}: no config.json; resuming with the model {own} spells out (the checkpoint holds "
              "the weights)", file=sys.stderr, flush=True)
    return dataclasses.replace(cfg, model=saved.model, data=data)


# --- random number generators: what a checkpoint restores so a resumed step draws the same numbers ---

def rng_state() -> dict:
    st = {"torch": base64.b64encode(torch.get_rng_state().numpy().tobytes()).decode(),
          "python": _jsonable(random.getstate())}
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    st["numpy"] = [kind, keys.tolist(), pos, has_gauss, gauss]
    if torch.cuda.is_available():
        st["cuda"] = [base64.b64encode(s.numpy().tobytes()).decode() for s in torch.cuda.get_rng_state_all()]
    return st


def set_rng_state(st: dict) -> None:
    torch.set_rng_state(torch.frombuffer(bytearray(base64.b64decode(st["torch"])), dtype=torch.uint8))
    random.setstate(_tuplify(st["python"]))
    kind, keys, pos, has_gauss, gauss = st["numpy"]
    np.random.set_state((kind, np.array(keys, dtype=np.uint32), pos, has_gauss, gauss))
    if "cuda" in st and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([torch.frombuffer(bytearray(base64.b64decode(s)), dtype=torch.uint8)
                                      for s in st["cuda"]])


def _jsonable(x):
    return [_jsonable(v) for v in x] if isinstance(x, (tuple, list)) else x


def _tuplify(x):
    return tuple(_tuplify(v) for v in x) if isinstance(x, list) else x
