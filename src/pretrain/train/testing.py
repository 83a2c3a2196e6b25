"""Small, fast configurations for tests, benchmarks and demos, and a text that always exists.

`tiny_config(out, text_path, *overrides)` is a 2-layer, 64-wide byte-level model that trains a step
in milliseconds on one CPU core; `fallback_text()` writes Python's own pydoc topics (shipped with
every CPython) when the shared Tiny Shakespeare file is absent.

`run_distributed(fn_path, world_size, *args)` runs a worker in spawned processes wired for
torch.distributed (gloo on the CPU); `train_records`, `train_many` and `spike_run` are such workers,
and `calls` runs several of them in one spawn.
"""

from __future__ import annotations

from pathlib import Path

from pretrain import config as cfgmod
from pretrain.train.config import RunConfig

TINY = [
    "model.preset=tiny-cpu", "model.n_layers=2", "model.d_model=64", "model.n_heads=4", "model.n_kv_heads=2",
    "model.d_ff=176", "model.vocab_size=257", "model.seq_len=32",
    "data.batch_size=4", "optim.lr=3e-3", "schedule.warmup_steps=5", "train.steps=40",
    "log.tensorboard=false", "checkpoint.every=5", "checkpoint.keep=10", "precision.dtype=fp32",
    "train.threads=1",  # one thread: much faster than two on a CPU shared with other jobs
]


def tiny_config(out: str | Path, text_path: str | Path, *overrides: str) -> RunConfig:
    return cfgmod.load(RunConfig, None, TINY + [f"train.out={out}", f"data.path={text_path}", *overrides])


def fallback_text(path: str | Path) -> Path:
    """Write CPython's pydoc topics (about 700 KB of English prose and code) to `path`."""
    from pydoc_data.topics import topics

    path = Path(path)
    path.write_text("\n\n".join(topics[k] for k in sorted(topics)))
    return path


# --- many processes on one CPU: gloo, spawned workers, results as JSON --------------------------------

def _worker(fn_path: str, rank: int, world_size: int, port: int, result_dir: str, args: tuple,
            parent: int) -> None:
    import importlib
    import json
    import os

    import torch
    import torch.distributed as dist

    from pretrain.lifeline import exit_with_parent

    exit_with_parent(parent)  # a killed test run must not leave ranks waiting in a collective for good

    # TORCHELASTIC_USE_AGENT_STORE: every rank is a client of the store the parent hosts, as under
    # torchrun, whose agent holds it (env:// rendezvous, torch/distributed/rendezvous.py).
    os.environ.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world_size),
                       "LOCAL_WORLD_SIZE": str(world_size), "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": str(port), "TORCHELASTIC_USE_AGENT_STORE": "True"})
    torch.set_num_threads(1)
    mod, _, name = fn_path.rpartition(".")
    try:
        out = getattr(importlib.import_module(mod), name)(rank, *args)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    Path(result_dir, f"rank{rank}.json").write_text(json.dumps(out))
    # the spawned process ends with the interpreter's shutdown: its collections over torch's objects
    # took seconds per rank on a loaded 2-core machine (pretrain/__main__.py, bench/bench_exit.py)
    import gc

    gc.freeze()


def run_distributed(fn_path: str, world_size: int, *args, timeout: float = 120.0) -> list:
    """Run `fn(rank, *args)` (a dotted path to an importable function) in `world_size` spawned
    processes wired for torch.distributed (env:// rendezvous on a free local port); returns each
    rank's JSON-able result. A worker that fails or a job past `timeout` raises, no process left.

    The rendezvous store is this process's, bound to a port the OS picks (port 0) and held until the
    ranks are done, as torchrun's agent holds its own: a port found free and closed, for rank 0 to
    bind seconds later (after spawn and `import torch`), could be taken meanwhile by any other
    process (the other test worker's Ray or S3 server)."""
    import json
    import multiprocessing as mp
    import os
    import tempfile
    import time

    from torch.distributed import TCPStore

    ctx = mp.get_context("spawn")
    store = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    port = store.port
    with tempfile.TemporaryDirectory() as tmp:
        procs = [ctx.Process(target=_worker, args=(fn_path, r, world_size, port, tmp, args, os.getpid()))
                 for r in range(world_size)]
        for p in procs:
            p.start()
        deadline = time.time() + timeout
        try:
            while time.time() < deadline and any(p.is_alive() for p in procs):
                if any(p.exitcode not in (None, 0) for p in procs):
                    break
                time.sleep(0.05)
        finally:
            for p in procs:
                if p.is_alive():
                    p.kill()
                p.join()
        codes = [p.exitcode for p in procs]
        if any(c != 0 for c in codes):
            raise RuntimeError(f"distributed run of {fn_path} failed: exit codes {codes}")
        return [json.loads(Path(tmp, f"rank{r}.json").read_text()) for r in range(world_size)]


def train_records(rank: int, out: str, text: str, overrides: list) -> list:
    """Worker: train a tiny config under the current process group; (loss, grad norm) per step."""
    from pretrain.train.trainer import Trainer

    recs = Trainer(tiny_config(out, text, *overrides), quiet=True).fit()
    return [[r["loss"], r["grad_norm"]] for r in recs]


def train_many(rank: int, runs: list) -> list:
    """Worker: several (out, text, overrides) runs one after another in one process group (spawning
    and importing torch costs seconds per process on a small CPU, a tiny run less than that)."""
    return [train_records(rank, out, text, over) for out, text, over in runs]


def flip_byte(path: str | Path, at: int | None = None) -> None:
    """One bit of a file inverted in place (at its middle byte by default): bytes that changed on a
    disk or in a copy, with the file's size unchanged."""
    path = Path(path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2 if at is None else at] ^= 0x10
    path.write_bytes(bytes(data))


def train_many_flipping(rank: int, runs: list, flips: list) -> list:
    """Worker: train_many where, before run i, rank 0 flips a byte of the file `flips[i]` (None: no
    flip) and every rank waits for it: a damaged checkpoint met by a resume on every rank."""
    import torch.distributed as dist

    out = []
    for (run_out, text, over), flip in zip(runs, flips):
        if flip and rank == 0:
            flip_byte(flip)
        if flip:  # the group the first run set up (the trainer keeps it)
            dist.barrier()
        out.append(train_records(rank, run_out, text, over))
    return out


def young_intervals(rank: int, out: str, text: str) -> dict:
    """Worker: Young's rule (checkpoint.every=0) with each rank measuring another step time at the
    first save, as ranks of a real run do (rank 1 here 1000x slower); the interval each rank keeps."""
    from pretrain.train import checkpoint as ck
    from pretrain.train.trainer import Trainer

    class Timed(Trainer):
        def maybe_save(self) -> None:
            if self.step == self.cfg.checkpoint.first_at:
                self._step_times = [1e-3 * 1000 ** rank]
            super().maybe_save()

    over = ["checkpoint.every=0", "checkpoint.first_at=2", "checkpoint.mtbf_minutes=0.01",
            "checkpoint.async_save=false", "checkpoint.keep=0", "train.steps=3", "parallel.dp_shard=2",
            "data.batch_size=2"]
    t = Timed(tiny_config(out, text, *over), quiet=True)
    t.fit()
    return {"kept": t.save_interval, "saved": [s for s, _, ok in ck.list_checkpoints(t.ckpt.root) if ok]}


def busy_run_dir(rank: int, out: str, text: str, overrides: list) -> str:
    """Worker: train into a run directory another run holds (rank 0 takes its lock first, as a run
    already training there would); what each rank raised."""
    from pretrain.errors import UserError
    from pretrain.train.restarts import hold_run_dir, release_run_dir
    from pretrain.train.trainer import Trainer

    Path(out).mkdir(parents=True, exist_ok=True)
    held = hold_run_dir(Path(out)) if rank == 0 else None  # flock: a second open file of it is refused
    try:
        Trainer(tiny_config(out, text, *overrides), quiet=True).fit()
        return "trained"
    except UserError as e:
        return str(e)
    finally:
        release_run_dir(held)


def calls(rank: int, todo: list) -> list:
    """Worker: other workers' calls, [(dotted path, args)], one after another in one spawn; the list
    of their results. Tests of one world size share a spawn this way: starting the processes and
    importing torch costs seconds per rank on a small CPU, more than a tiny run."""
    import importlib

    out = []
    for fn_path, args in todo:
        mod, _, name = fn_path.rpartition(".")
        out.append(getattr(importlib.import_module(mod), name)(rank, *args))
    return out


class CorruptOnRank:
    """A loader whose micro-batch `bad` is random bytes on this rank only (a bad shard one rank reads)."""

    def __init__(self, inner, bad: int, corrupt: bool):
        self.inner, self.bad, self.corrupt = inner, bad, corrupt

    def next_batch(self, batch_size: int):
        import numpy as np

        i = self.inner.batches
        out = self.inner.next_batch(batch_size)
        if self.corrupt and i == self.bad:
            out = np.random.default_rng(99).integers(0, 256, size=out.shape)
        return out

    def state_dict(self) -> dict:
        return self.inner.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.inner.load_state_dict(state)


def spike_run(rank: int, out: str, text: str, overrides: list, bad: int, bad_rank: int) -> dict:
    """Worker: train with micro-batch `bad` corrupted on `bad_rank` only (-1: nowhere); the losses by
    step (the surviving timeline), the spike/rollback events this rank logged or saw, and the event
    lines it printed ("said")."""
    import contextlib
    import io

    import torch.distributed as dist

    from pretrain.train.data import TextLoader, encode_text, read_text
    from pretrain.train.metrics import read_metrics
    from pretrain.train.trainer import Trainer

    cfg = tiny_config(out, text, *overrides)
    ids, _ = encode_text(read_text(text))
    par = cfg.parallel  # this rank's data-parallel rank: ranks are ordered tp, cp, dp_shard, dp_replicate, pp
    dp = par.dp_replicate * par.dp_shard
    dp_rank = (rank // (par.tp * par.cp)) % dp
    inner = TextLoader(ids, cfg.model.seq_len, cfg.data.seed, dp_rank, dp)
    loader = CorruptOnRank(inner, bad, rank == bad_rank)
    t = Trainer(cfg, loader=loader, quiet=True)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        t.fit()
    dist.barrier()
    steps, events = read_metrics(Path(out) / "metrics.jsonl")
    return {"losses": {str(r["step"]): r["loss"] for r in steps}, "rollbacks": t.rollbacks,
            "events": [[e["event"], e["step"]] for e in events if e["event"] in ("spike", "rollback")],
            "said": [line.split(" step ")[0] for line in err.getvalue().splitlines() if line.startswith("[")]}


def init_hashes(rank: int, out: str, text: str, overrides: list) -> dict:
    """Worker: build a Trainer under the current process group; sha256 of each parameter's whole
    initial value (DTensors gathered), keyed by its name in the plain model (pipeline ranks: theirs)."""
    import hashlib

    from torch.distributed.tensor import DTensor

    from pretrain.train.parallel import plain_name
    from pretrain.train.trainer import Trainer

    t = Trainer(tiny_config(out, text, *overrides), quiet=True)
    out_hashes = {}
    for name, p in t.model.named_parameters():
        full = p.full_tensor() if isinstance(p, DTensor) else p
        data = full.detach().cpu().contiguous().numpy().tobytes()
        out_hashes[plain_name(name)] = hashlib.sha256(data).hexdigest()
    return out_hashes


def init_hashes_many(rank: int, runs: list) -> list:
    """Worker: init_hashes for several (out, text, overrides) in one process group (spawns are slow)."""
    return [init_hashes(rank, out, text, over) for out, text, over in runs]


def init_peak_rss(rank: int, preset: str, overrides: list) -> dict:
    """Worker: initialize `preset` under the layout in `overrides` (model only: no optimizer, no data);
    this rank's peak RSS growth during initialization, its parameter bytes and the seconds it took."""
    import resource
    import time

    import torch

    from pretrain import config as cfgmod
    from pretrain.train.model import build_model, materialize, resolve_shape
    from pretrain.train.parallel import Layout, dims_from_config, init_distributed, parallelize

    cfg = cfgmod.load(RunConfig, None, [f"model.preset={preset}", "train.device=cpu", *overrides])
    init_distributed(torch.device("cpu"), 120.0)
    dims = dims_from_config(cfg.parallel)
    layout = Layout(dims, torch.device("cpu"))
    model = build_model(resolve_shape(cfg.model), cfg.model, "meta")
    parallelize(model, dims, cfg.parallel, layout, "fp32")
    before = _rss_now()  # the peak below minus the RSS now: conservative (the peak may predate init)
    t0 = time.perf_counter()
    materialize(model, "cpu", 0)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    from torch.distributed.tensor import DTensor

    held = sum((p.to_local() if isinstance(p, DTensor) else p).numel() * 4 for p in model.parameters())
    full = sum(p.numel() * 4 for p in model.parameters())  # DTensor numel is the global size
    return {"peak_growth": peak - before, "held": held, "full": full, "seconds": seconds}


def _rss_now() -> int:
    import os

    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def grads_against_one_process(rank: int, out: str, text: str, overrides: list) -> dict:
    """Worker: one forward and backward of the first global batch under the layout in `overrides`,
    and the same on a plain one-process model built here (same seed: initialization does not depend
    on the layout); the two losses and the largest gradient difference, gathered."""
    import torch
    import torch.nn.functional as F
    from torch.distributed.tensor import DTensor

    from pretrain.train.data import TextLoader
    from pretrain.train.model import build_model, materialize
    from pretrain.train.parallel import average_over_cp, plain_name
    from pretrain.train.trainer import Trainer

    t = Trainer(tiny_config(out, text, *overrides), quiet=True)
    t.model.train()
    loss = t.layout.mean_over_dp(t._forward_backward(1)).item()
    if t.dims.cp > 1 and t.dims.dp_shard == 1:
        average_over_cp(t.params, t.layout)
    grads = {plain_name(n): (p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad)
             for n, p in t.model.named_parameters()}
    inner = t.loader.inner
    whole = TextLoader(inner.tokens, inner.seq_len, inner.seed).batch_at(0, t.cfg.data.batch_size * t.dims.dp)
    ref = materialize(build_model(t.shape, t.cfg.model, "meta"), "cpu", t.cfg.train.seed)
    batch = torch.from_numpy(whole)
    ref_loss = F.cross_entropy(ref(batch[:, :-1]).flatten(0, 1), batch[:, 1:].flatten())
    ref_loss.backward()
    diff = max((grads[n] - p.grad).abs().max().item() for n, p in ref.named_parameters())
    scale = max(p.grad.abs().max().item() for p in ref.parameters())
    return {"loss": loss, "ref_loss": ref_loss.item(), "max_grad_diff": diff, "max_grad": scale}


def cp_suite(rank: int, runs: list) -> list:
    """Worker: for each (out, text, overrides, kind) in `runs`, train_records when kind is "train",
    else grads_against_one_process (one process group for all: spawns are slow)."""
    out = []
    for o, text, over, kind in runs:
        fn = train_records if kind == "train" else grads_against_one_process
        out.append(fn(rank, o, text, over))
    return out


def peer_gone(rank: int, ckpt_root: str) -> str | None:
    """Worker: rank 1 leaves at once; rank 0's all-reduce fails as a killed peer makes it fail, and
    the line `pretrain train` prints for that error is returned."""

    import torch
    import torch.distributed as dist

    from pretrain.commands.train import peer_lost_line

    dist.init_process_group("gloo")
    if rank == 1:  # gone without a word: its connections close under rank 0's collective
        dist.destroy_process_group()
        return None
    try:
        dist.all_reduce(torch.ones(1))
    except RuntimeError as e:
        return peer_lost_line(e, rank, Path(ckpt_root))
    return "the all-reduce did not fail"


def fsdp_tp_warnings(rank: int, sequence_parallel: bool) -> dict:
    """Worker: one forward and backward of the tiny model under TP 2 with FSDP2 over the data-parallel
    mesh (here of size 1: two processes), every warning recorded. Whether the logits are a view
    (what FSDP2's warning checks) and the warnings' texts."""
    import warnings

    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    from pretrain.train.config import RunConfig
    from pretrain.train.model import build_model, resolve_shape, rope_tables
    from pretrain.train.parallel import apply_fsdp, apply_tp

    dist.init_process_group("gloo")
    cfg = cfgmod.load(RunConfig, None, TINY + ["train.out=unused", "data.path=unused"])
    shape = resolve_shape(cfg.model)
    mesh = init_device_mesh("cpu", (1, 2), mesh_dim_names=("dp_shard", "tp"))
    model = build_model(shape, cfg.model, "cpu")
    model.rope_cos, model.rope_sin = rope_tables(shape.head_dim, shape.seq_len,
                                                 cfg.model.rope_theta)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")  # before apply_*: a filter they add must win over it
        apply_tp(model, mesh["tp"], sequence_parallel)
        apply_fsdp(model, mesh["dp_shard"], "fp32")
        torch.manual_seed(0)
        logits = model(torch.randint(0, shape.vocab_size, (2, shape.seq_len)))
        logits.float().flatten(0, 1).sum().backward()
        # the same warning about another module must still be shown: the filter names our root only
        warnings.warn("FSDP2-wrapped module (FSDPBlock) returned a view tensor. (probe)", UserWarning,
                      stacklevel=1)
    return {"view": logits._base is not None, "warnings": [str(w.message) for w in seen]}
