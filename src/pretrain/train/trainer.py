"""The training loop, on one process or many (torchrun): build_* helpers in the design's order, then
Trainer.fit(). The parallel layout itself lives in train/parallel.py; what the run says about
itself (summary, step line, RUN/config.toml, the record's opening events) in train/record.py.

Build order (torchtitan's): parallel dims -> process group and mesh -> model on the
meta device -> parallelize -> init weights -> optimizer -> data -> restore the newest complete
checkpoint. fit() stays short: evaluation and checkpointing run after each step as callbacks.
"""

from __future__ import annotations

import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from pretrain import config as cfgmod
from pretrain.errors import UserError
from pretrain.eval import callback as eval_callback
from pretrain.train import checkpoint as ck
from pretrain.train import record
from pretrain.train.config import RunConfig, validate
from pretrain.train.cpu import keep_freed_memory
from pretrain.train.data import SkippingLoader, build_loaders, eval_batches
from pretrain.train.fits import preflight
from pretrain.train.hf import apply_init_from, check_text_tokenizer
from pretrain.train.hf_io import HFCheckpoint, load_hf_weights
from pretrain.train.metrics import Metrics, flops_per_token, mfu, significant
from pretrain.train.model import SHAPE_FIELDS, build_model, materialize, resolve_shape
from pretrain.train.optim import build_optimizer, lr_at
from pretrain.train.parallel import (
    MESH_ORDER,
    Layout,
    apply_ddp,
    average_over_cp,
    build_schedule,
    describe_layout,
    env_world_size,
    init_distributed,
    layout_of,
    parallelize,
    rank_stages,
    reduce_partial_grads,
    split_for_pp,
    stages_per_rank,
)
from pretrain.train.precision import DynamicLossScaler, apply_fp8, autocast, check_precision
from pretrain.train.restarts import (
    COURSE_EVENTS,
    MICRO_BATCH,
    MICRO_BATCH_WHY,
    SAID,
    Interrupted,
    agreed_interval,
    busy,
    catch_signals,
    describe,
    hold_run_dir,
    model_of_own_run,
    on_any_rank,
    recipe,
    recipe_changes,
    release_run_dir,
    restore_signals,
    rng_state,
    set_aside_history,
    set_rng_state,
)
from pretrain.train.stability import SpikeDetector, clip_grad_norm_


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise UserError("train.device='cuda' but no CUDA device is available")
    return torch.device(name)


class Trainer:
    """One run: owns the model, optimizer, data, scaler, spike detector, checkpoints and metrics."""

    def __init__(self, cfg: RunConfig, run_dir: str | Path | None = None, loader=None, eval_loader=None,
                 quiet: bool = False, label: str = ""):
        """`label`: said before each of its lines (`[raw] [spike] step 23 ...`) where several runs share
        one terminal: `pretrain ablate`'s twins' spike lines did not say whose they were (session 14)."""
        own = cfg.model.init_from and model_of_own_run(cfg, lambda: ck.latest_complete(
            cfg.checkpoint.storage or Path(cfg.train.out) / "checkpoints") is not None)
        cfg = own or apply_init_from(cfg)  # model.init_from: shape and tokenizer from a Hugging Face folder
        if not own:  # a resume of its own run reads the tokenizer it trained with (or bytes, as it did)
            check_text_tokenizer(cfg)
        validate(cfg)  # numbers out of range: one line, before anything is built
        self.cfg, self.quiet, self.tag = cfg, quiet, f"[{label}] " if label else ""
        self.run_dir = Path(run_dir or cfg.train.out)
        self.device = pick_device(cfg.train.device)
        check_precision(cfg.precision.dtype, self.device)
        if cfg.train.threads:
            torch.set_num_threads(cfg.train.threads)
        if self.device.type == "cpu" and cfg.train.keep_freed_memory:
            keep_freed_memory()
        if cfg.train.deterministic:
            torch.use_deterministic_algorithms(True)
        torch.manual_seed(cfg.train.seed)
        # Every check of the config before the process group: a refusal is then one line at once on
        # every rank, not a wait in the rendezvous for a peer (another node, a rank slow to start)
        # that will refuse the same config, nor an NCCL setup for nothing (sweep, session 13).
        world = dist.get_world_size() if dist.is_initialized() else env_world_size()  # torchrun's
        if self.device.type == "cuda" and world > 1:  # the memory check reads this rank's GPU
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        if cfg.model.init_from and not self._resumes():  # before building: config.json may claim anything
            HFCheckpoint(cfg.model.init_from).check_holds(resolve_shape(cfg.model))  # its own words first
        dims, self.shape = preflight(cfg, world, self.device)  # layout, shape, memory: before building
        self.dims = dims
        eval_callback.check_layout(cfg, dims)
        eval_callback.check_tasks(cfg)
        self._check_pp(cfg, dims, loader)
        init_distributed(self.device, cfg.parallel.timeout_s)  # torchrun's environment, if any
        self.rank = dist.get_rank() if dist.is_initialized() else 0
        self.layout = Layout(dims, self.device)
        self.model = build_model(self.shape, cfg.model, "meta")
        if cfg.precision.dtype == "fp8":
            apply_fp8(self.model)
        if dims.pp > 1:
            n_stages = dims.pp * stages_per_rank(cfg.parallel.pp_schedule)
            split_for_pp(self.model, rank_stages(self.layout.pp_rank, dims.pp, cfg.parallel.pp_schedule),
                         n_stages)
        parallelize(self.model, dims, cfg.parallel, self.layout, cfg.precision.dtype)
        if cfg.model.init_from:
            self._init_from_hf()
        else:
            self.init_weights()
        self.cp_pos = None  # the global positions this rank holds of each sequence (context parallel)
        if dims.cp > 1:
            from pretrain.train.context import positions

            self.cp_pos = torch.as_tensor(positions(self.shape.seq_len, dims.cp, self.layout.cp_rank))
        if dims.dp_replicate > 1 and dims.dp_shard == 1:
            apply_ddp(self.model, self.layout.sub("dp_replicate"))
        self.schedule = None
        if dims.pp > 1:
            n_micro = cfg.parallel.pp_microbatches or 2 * dims.pp
            self.schedule, self.stages = build_schedule(self.model, self.layout, cfg.parallel, self.device,
                                                        n_micro, self._pp_loss)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = build_optimizer(self.model, cfg.optim)
        if loader is None:
            self.loader, self.eval_loader, vocab = build_loaders(cfg.data, self.shape.seq_len,
                                                                 self.layout.dp_rank, dims.dp)
        else:  # a caller's loader (tests, custom data): still resumable and skippable
            self.loader, self.eval_loader, vocab = SkippingLoader(loader, cfg.data.skip), eval_loader, 0
        if vocab > self.shape.vocab_size:
            raise UserError(f"the data's vocabulary ({vocab}) is larger than model.vocab_size "
                            f"({self.shape.vocab_size}): --set model.vocab_size={vocab} (or more) fits it")
        p = cfg.precision
        self.scaler = DynamicLossScaler(p.dtype == "fp16", p.init_scale, p.growth_interval,
                                        p.backoff_factor, p.growth_factor)
        s = cfg.stability
        self.spikes = SpikeDetector(s.spike_factor, s.spike_window, s.spike_patience)
        self.ckpt = ck.CheckpointManager(cfg.checkpoint.storage or self.run_dir / "checkpoints",
                                         cfg.checkpoint.keep, cfg.checkpoint.async_save)
        self.metrics: Metrics | None = None
        self.step, self.tokens_seen, self.rollbacks = 0, 0, 0
        # the run's training time before this command (its checkpoint's), and when this command's
        # training began: step lines and metrics.jsonl say the run's time, not this command's
        self.elapsed_before, self._t_start = 0.0, None
        self.save_interval = cfg.checkpoint.every  # 0 until Young's rule has measured a save
        self.next_save = self._save_after(0)
        self.resumed, self.changes = False, {}
        self.unapplied: dict[str, tuple] = {}  # recipe changes a finished run's rerun does not train under
        self.saved_layout: dict[str, int] | None = None  # the layout the restored checkpoint was saved in
        self.skips_ahead: list[list[int]] = []  # rollbacks' skipped micro-batches still ahead of a resume
        # newer checkpoints not used, damaged, in the order met: (step, the file that no longer matched
        # its digest, or "" for files cut short against the marker); rank 0's record says them
        self.passed_over: list[tuple[int, str]] = []
        self._interrupt: str | None = None  # the name of a caught SIGINT/SIGTERM
        self._spike_first: tuple[int, int] | None = None  # (step, micro-batch index) of a spike's start
        self._step_times: list[float] = []
        self.fpt = flops_per_token(self.shape)
        found = ck.latest_complete(self.ckpt.root) if cfg.train.resume else None
        if cfg.train.resume:
            self._say_damaged(found[0] if found else -1)
        found = self._restore_verified(found)
        if found:
            self.resumed = True
            if self.rank == 0:  # even with --quiet: a user resuming must know the run did not start over
                print(self.tag + self._resume_line(found[1]), file=sys.stderr, flush=True)
        else:
            self._refuse_kept_history()  # before "starting fresh" is said, and before fit() moves anything
            self._say(f"no checkpoint: starting fresh{self._unfinished_note(-1)}" if cfg.train.resume
                      else "train.resume=false: starting fresh")

    def _restore_verified(self, found):
        """Restore the newest complete checkpoint whose files match their digests: one that does not
        (bytes changed after the save) is said and passed over for the one before it, as a save cut
        short is (Levanter tries each candidate newest first; torchtitan and Megatron stop, and a
        person deletes the directory: an automatic restart under torchrun would stop every time).
        Checkpoints there, none readable: refused, never a fresh start over them."""
        while found:
            try:
                self.restore(found[1])
                return found
            except ck.IntegrityError as e:
                self.ckpt.damaged.add(found[0])
                self.passed_over.append((found[0], e.name))  # in metrics.jsonl: stderr scrolls away
                older = ck.latest_complete(self.ckpt.root, before=found[0])
                if older is None:
                    raise UserError(f"{e}; no older complete checkpoint to fall back to: copy the checkpoint "
                                    "again from its source, or train into another train.out") from None
                if self.rank == 0:
                    # its directory stays until a save replaces it (a save at that step) or prunes it
                    # (the first complete save after it): not every step is a save step
                    print(f"{e}; not used: resuming from step {older[0]} instead (step {found[0]} is "
                          f"replaced if the run saves at it again, else deleted by the first save after it)",
                          file=sys.stderr, flush=True)
                found = older
        return None

    @property
    def complete(self) -> bool:
        """Resumed at (or past) train.stop_at/train.steps: fit() trains nothing."""
        return self.resumed and self.step >= (self.cfg.train.stop_at or self.cfg.train.steps)

    def _resume_line(self, path: Path) -> str:
        """What a rerun does, said first: resume, or nothing at all when the checkpoint is already at
        (or past) the end; a finished run's rerun must not read as one that starts training."""
        stop = self.cfg.train.stop_at or self.cfg.train.steps
        if self.step < stop:
            notes = self._unfinished_note(self.step) + self._skip_note() + self._reshard_note()
            return f"resuming from step {self.step} ({path}){notes}"
        end = f"train.stop_at={stop}" if self.cfg.train.stop_at else f"train.steps={stop}"
        line = (f"already complete: the newest checkpoint is step {self.step} and {end}; nothing is "
                f"trained ({path})")
        if self.unapplied:  # the recipe changed, but no step runs under it: say so, and how it would
            how = "" if self.cfg.train.allow_changes else " and add --set train.allow_changes=true"
            line += (f"; {describe(self.unapplied)} is not applied (no step is trained): to continue this "
                     f"run under it, raise {end.split('=')[0]}{how}")
        return line

    def _unfinished_note(self, used: int) -> str:
        """Newer checkpoint folders whose save never finished (no COMPLETE.json: a kill during an async
        save), said, since the folder is there to see: a newcomer reading `resuming from step 3` beside
        checkpoints/step_0000006 could not tell why (session 14's walk). Damaged ones (a marker their
        files do not match) are said by _say_damaged."""
        if not self.cfg.train.resume:
            return ""
        cut = [s for s, p, ok in ck.list_checkpoints(self.ckpt.root)
               if s > used and not ok and ck.marker_text(p) is None]
        if not cut:
            return ""
        steps = ", ".join(map(str, cut))
        then = ", later saves replace it" if used >= 0 else ""  # a fresh start moves the record aside
        return f"; the save of step {steps} did not finish (no {ck.MARKER}): not used{then}"

    def _skip_note(self) -> str:
        """A resume after a rollback: the micro-batches it skips are still skipped (the rollback's
        ledger), said, since the rollback line was the last a killed run's user saw of it."""
        if not self.skips_ahead:
            return ""
        said = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in self.skips_ahead[:5])
        more = f" and {len(self.skips_ahead) - 5} more ranges" if len(self.skips_ahead) > 5 else ""
        n = f"{self.rollbacks} rollback{'s' if self.rollbacks != 1 else ''}"
        return (f"; micro-batches {said}{more} are skipped, as the run's {n} decided "
                f"({ck.LEDGER} in {self.ckpt.root})")

    @property
    def resharded(self) -> str:
        """"dp_shard=2 -> dp_shard=4" when the restored checkpoint was saved under another layout."""
        now = layout_of(self.dims)
        if self.saved_layout is None or self.saved_layout == now:
            return ""
        return f"{describe_layout(self.saved_layout)} -> {describe_layout(now)}"

    def _reshard_note(self) -> str:
        """A resume under another layout, said: DCP reshards the weights and the optimizer state, and the
        data goes on from its global position (the global batch is the same, or the recipe check
        refused it). Until session 14 the line was the same as for the same layout."""
        if not self.resharded:
            return ""
        def on(layout: dict[str, int]) -> str:
            n = math.prod(layout.values())
            return f"{n} processes ({describe_layout(layout)})" if n > 1 else "one process"

        rows = self.cfg.data.batch_size * self.cfg.train.grad_accum * self.dims.dp
        return (f"; saved on {on(self.saved_layout)}, now on {on(layout_of(self.dims))}: weights and "
                f"optimizer state resharded; the data goes on from sequence "
                f"{self.tokens_seen // self.shape.seq_len:,}, {rows} a step as before")

    def _say_damaged(self, used: int) -> None:
        """Newer checkpoints with a marker that their files do not match (a shard lost or cut in a
        copy) are passed over like a save cut short, but said: the run goes back further than its
        newest save, and the rerun will overwrite that directory."""
        if self.rank != 0:
            return
        for step, path, ok in ck.list_checkpoints(self.ckpt.root):
            if step > used and not ok and (why := ck.damage(path)):
                self.passed_over.append((step, ""))
                print(f"{path}: not used: {why}", file=sys.stderr, flush=True)

    def init_weights(self) -> None:
        """Each rank allocates and fills only what it holds, the values one process would (train/init.py)."""
        materialize(self.model, self.device, self.cfg.train.seed)

    def _init_from_hf(self) -> None:
        """Weights from model.init_from, each rank reading only its pieces (train/hf_io.py); a run
        that will resume from its own checkpoint skips reading them."""
        load_hf_weights(self.model, self.cfg.model.init_from, self.device, weights=not self._resumes())

    def _resumes(self) -> bool:
        """Whether a checkpoint will be restored: looked for where the run keeps them (checkpoint.storage,
        a bucket or a folder elsewhere, else RUN/checkpoints), as the restore itself looks."""
        root = self.cfg.checkpoint.storage or self.run_dir / "checkpoints"
        return self.cfg.train.resume and ck.latest_complete(root) is not None

    @staticmethod
    def _check_pp(cfg: RunConfig, dims, loader) -> None:
        if dims.pp == 1:
            return
        n_micro = cfg.parallel.pp_microbatches or 2 * dims.pp
        if cfg.data.batch_size % n_micro:
            raise UserError(f"data.batch_size={cfg.data.batch_size} is not divisible by "
                            f"parallel.pp_microbatches={n_micro}")
        if cfg.train.grad_accum != 1:
            raise UserError("parallel.pp > 1: set train.grad_accum=1 (the pipeline's micro-batches "
                            "already accumulate; raise parallel.pp_microbatches instead)")
        if cfg.log.eval_every:
            raise UserError("parallel.pp > 1: evaluation is not supported yet; set log.eval_every=0")

    # --- state ------------------------------------------------------------------------------

    def state(self) -> dict:
        return {"step": self.step, "tokens_seen": self.tokens_seen, "elapsed_s": round(self.elapsed(), 3),
                "loader": self.loader.state_dict(),
                "scaler": self.scaler.state_dict(), "spikes": self.spikes.state_dict(), "rng": rng_state(),
                "save_interval": self.save_interval, "config_hash": cfgmod.config_hash(self.cfg),
                "recipe": self._recipe(), "layout": layout_of(self.dims),
                "shape": self._shape_dict()}

    def _shape_dict(self) -> dict:
        return {k: getattr(self.shape, k) for k in SHAPE_FIELDS}

    def _recipe(self) -> dict:
        return recipe(self.cfg, self.dims, SHAPE_FIELDS)

    def _check_recipe(self, path: Path, saved: dict) -> None:
        """A resume under another recipe is refused in one line, unless train.allow_changes (then said)."""
        changes = recipe_changes(saved, self._recipe())
        if "global_batch" in changes:  # the split is said only when it is all that changed
            changes.pop(MICRO_BATCH, None)
        refused = {k: v for k, v in changes.items() if k not in SAID}
        step = ck.dir_step(path)
        if step >= (self.cfg.train.stop_at or self.cfg.train.steps):
            # a finished run trains nothing: no step would run under the change, so it is not refused
            # (session 13 left it refused as "another recipe"); the resume line says it is unapplied
            # and how to apply it (Megatron: --override-opt_param-scheduler and more iterations)
            self.unapplied = refused
            return
        if refused and not self.cfg.train.allow_changes:
            why = f" ({MICRO_BATCH_WHY})" if MICRO_BATCH in refused else self._batch_hint(refused)
            raise UserError(f"{path} was trained with another recipe ({describe(refused)}): to continue "
                            f"this run under the change from step {step}, add --set train.allow_changes=true "
                            "(logged as a config_change event); to resume it as it was, drop the change; to "
                            f"start a new run with it, use another train.out{why}")
        self.changes = changes

    def _batch_hint(self, refused: dict) -> str:
        """How to keep the checkpoint's global batch under this layout. data.batch_size is per
        data-parallel rank, so the same command on more processes changes the global batch and was
        refused with "drop the change" for a change the user never typed (session 14's walk: FSDP x 2
        resumed under FSDP x 4)."""
        then = refused.get("global_batch", (None,))[0]
        if type(then) is not int:
            return ""
        dp, accum = self.dims.dp, self.cfg.train.grad_accum
        ranks = f"{dp} data-parallel rank{'s' if dp > 1 else ''}"
        what = f"global_batch is data.batch_size x {ranks} x train.grad_accum={accum}"
        if then % (dp * accum):
            return f" ({what}: no data.batch_size gives {then} here)"
        return f" ({what}: --set data.batch_size={then // (dp * accum)} keeps {then})"

    def restore(self, path: Path) -> None:
        state = ck.read_state(path)
        self._check_recipe(path, state.get("recipe"))
        saved = state.get("shape", {})
        diff = {k: (v, saved[k]) for k, v in self._shape_dict().items() if k in saved and saved[k] != v}
        if diff:
            what = ", ".join(f"{k}: {b} there, {a} here" for k, (a, b) in diff.items())
            raise UserError(f"{path} holds another model shape ({what}); "
                            "use another train.out or set train.resume=false")
        st = self.ckpt.load(path, self.model, self.optimizer)
        part = "step"
        try:  # the JSON state of a run directory from elsewhere is as hostile as its pickles
            step = st["step"]
            if type(step) is not int or step != ck.dir_step(path):
                raise ValueError(f"{step!r} is not the step its directory is named for")
            self.step, part = step, "layout"
            self.saved_layout = read_layout(st.get("layout"))
            part = "tokens_seen"
            self.tokens_seen, part = int(st["tokens_seen"]), "elapsed_s"
            if self._t_start is None:  # a resume; a rollback's time goes on (that wall time was spent)
                self.elapsed_before = _seconds(st.get("elapsed_s", 0.0))  # absent: saved before session 14
            part = "loader"
            # allowed changes of the mixture (weights, sources) continue as a new phase of the sampler
            changed = self.cfg.train.allow_changes and self.cfg.data.kind == "tokens"
            self.loader.load_state_dict(st["loader"], **({"reweight": True} if changed else {}))
            grown = getattr(getattr(self.loader, "inner", None), "changed_tokens", {})
            self.changes.update({f"data.tokens.{k}": v for k, v in grown.items()})  # said and logged
            part = "scaler"
            self.scaler.load_state_dict(st["scaler"])
            part = "spikes"
            self.spikes.load_state_dict(st["spikes"])
            part = "save_interval"
            if self.cfg.checkpoint.every == 0:  # Young's interval, as measured by the run that saved
                self.save_interval = self._measured_interval(int(st.get("save_interval", 0)))
            part = "rng"
            set_rng_state(st["rng"])
        except UserError:
            raise
        except (KeyError, TypeError, ValueError, IndexError, RuntimeError, AttributeError,
                OverflowError) as e:
            raise UserError(f"{path}/{ck.state_name(path, self.rank)}: its {part} does not read "
                            f"({type(e).__name__}: {e}); the file was edited or damaged") from None
        ranges, rollbacks = ck.read_ledger(self.ckpt.root)  # a rollback's skips no checkpoint holds yet
        for first, last in ranges:
            self.loader.add_skip(first, last)
        self.skips_ahead = [[a, b] for a, b in ranges if b >= self.loader.index]
        self.rollbacks = max(self.rollbacks, rollbacks)
        self.next_save = self._save_after(self.step)

    def save(self) -> None:
        blocked = self.ckpt.save(self.step, self.model, self.optimizer, self.state())
        self._completed(self.ckpt.finished)  # the previous async save, finished first: else unlogged
        path = ck.step_dir(self.ckpt.root, self.step)
        extra = {"async": True} if self.ckpt.async_save else {}  # complete at its checkpoint_complete
        self._event("checkpoint", blocking_s=round(blocked, 4), path=str(path), **extra)

    # --- the step ---------------------------------------------------------------------------

    def _pp_loss(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Per micro-batch loss on the last stage (the schedule averages the gradients over them)."""
        return self.scaler.scale_loss(F.cross_entropy(logits.float().flatten(0, 1), y.flatten()))

    def _pipeline_step(self) -> torch.Tensor:
        """Forward and backward of one batch through the pipeline; the loss, known to every stage."""
        batch = torch.from_numpy(self.loader.next_batch(self.cfg.data.batch_size)).to(self.device)
        x, y = batch[:, :-1], batch[:, 1:]
        first = self.layout.pp_rank == 0
        last = self.layout.pp_rank == self.dims.pp - 1
        losses: list[torch.Tensor] = []
        with autocast(self.cfg.precision.dtype, self.device):
            args = (x,) if first else ()
            if last:  # the logits are the loss's alone: not kept for all micro-batches, then merged
                self.schedule.step(*args, target=y, losses=losses, return_outputs=False)
            else:
                self.schedule.step(*args)
        total = torch.zeros((), device=self.device)
        if last:
            total += torch.stack([v.detach().float() for v in losses]).mean() / self.scaler.scale
        dist.all_reduce(total, group=self.layout.group("pp"))  # only the last stage contributes
        return total

    def _forward_backward(self, accum: int) -> torch.Tensor:
        if self.schedule is not None:
            return self._pipeline_step()
        total = torch.zeros((), device=self.device)
        for _ in range(accum):
            x, y = self._inputs(self.loader.next_batch(self.cfg.data.batch_size))
            loss = self._loss(x, y) / accum
            self.scaler.scale_loss(loss).backward()
            total += loss.detach()
        return total

    def _loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy of one micro-batch. The logits are this frame's alone: autograd saves
        log_softmax's fp32 output, not its input, so the head's output (bf16, or fp32 as its own
        upcast) is freed when the loss exists, before backward allocates its two fp32 gradients:
        12 bytes per vocabulary entry per token, not 14 (plan/memory.py, LOSS_BYTES_PER_VOCAB).
        With train.loss_chunks > 1, a slice of tokens at a time (train/loss.py): 12 / chunks."""
        chunks = self.cfg.train.loss_chunks
        with autocast(self.cfg.precision.dtype, self.device):
            if chunks > 1:
                return self.model(x, targets=y, loss_chunks=chunks)
            logits = self.model(x)  # (B, T, V)
        return F.cross_entropy(logits.float().flatten(0, 1), y.flatten())

    def _inputs(self, batch) -> tuple[torch.Tensor, torch.Tensor]:
        """Inputs and targets of a (B, T+1) batch: predict token t+1 from tokens <= t; under context
        parallelism, only the positions this rank holds (the same slice of every sequence)."""
        batch = torch.from_numpy(batch).to(self.device)
        x, y = batch[:, :-1], batch[:, 1:]
        if self.cp_pos is not None:
            pos = self.cp_pos.to(self.device)
            x, y = x[:, pos], y[:, pos]
        return x, y

    def train_step(self) -> dict | None:
        """One optimizer step; returns its record, or None when it ended in a rollback."""
        t0 = time.perf_counter()
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        first_batch = self.loader.index
        # Every decision below (skip, spike, rollback) is taken on values all ranks agree on: the loss
        # averaged over the data-parallel ranks, the norm all-reduced over every shard.
        loss = self.layout.mean_over_dp(self._forward_backward(self.cfg.train.grad_accum)).item()
        last_batch = self.loader.index - 1
        if self.cfg.parallel.sequence_parallel or (self.dims.tp > 1 and self.shape.qk_norm):
            reduce_partial_grads(self.params)  # SP's norms; under TP, Qwen3's q/k norm gains too
        if self.dims.cp > 1 and self.dims.dp_shard == 1:  # FSDP, when present, averages over cp too
            average_over_cp(self.params, self.layout)
        self.scaler.unscale_(self.params)
        norm = clip_grad_norm_(self.params, self.cfg.stability.clip, self.layout.extra_norm_groups()).item()
        finite = math.isfinite(norm) and math.isfinite(loss)
        lr = lr_at(self.step, self.cfg.train.steps, self.cfg.optim.lr, self.cfg.schedule)
        flagged = finite and self.spikes.observe(loss)
        if flagged and self.spikes.consecutive == 1:
            self._spike_first = (self.step + 1, first_batch)
        if flagged:
            self._event("spike", step=self.step + 1, loss=loss, median=self.spikes.last_median)
        if flagged and self.spikes.persistent and self.cfg.stability.rollback:
            if self.rollback(last_batch):
                return None
        if self.scaler.update(finite):
            for g in self.optimizer.param_groups:
                g["lr"] = lr
            self.ckpt.fence()  # an async save must have its snapshot before the weights change
            self.optimizer.step()
        else:
            self._event("skip", step=self.step + 1, reason="nonfinite", loss_scale=self.scaler.scale)
        self.step += 1
        ntok = (last_batch - first_batch + 1) * self.cfg.data.batch_size * self.shape.seq_len * self.dims.dp
        self.tokens_seen += ntok
        dt = time.perf_counter() - t0
        self._step_times = (self._step_times + [dt])[-20:]
        tps = ntok / dt
        per_device = tps / self.dims.world_size
        return {"step": self.step, "loss": loss, "lr": lr, "grad_norm": norm, "tokens_per_s": round(tps, 1),
                "loss_scale": self.scaler.scale, "mfu": mfu(per_device, self.fpt, self.cfg.log.peak_flops)}

    def rollback(self, last_batch: int) -> bool:
        """Back to the newest complete checkpoint before the spike, skipping its batches (PaLM)."""
        first_step, first_batch = self._spike_first
        self._finish_save()  # an in-flight save may be the good checkpoint we need
        found = ck.latest_complete(self.ckpt.root, before=first_step)
        if found is None:
            self._event("rollback_unavailable", step=self.step + 1, reason="no checkpoint before the spike")
            return False
        s = self.cfg.stability
        if self.rollbacks >= s.max_rollbacks:
            self._rollback_limit(first_step)
        self.rollbacks += 1
        skip = [max(0, first_batch - s.skip_before), last_batch + s.skip_after]
        from_step = self.step + 1
        damaged = len(self.passed_over)
        found = self._restore_verified(found)  # one whose bytes changed is passed over here too
        new = [step for step, _ in self.passed_over[damaged:]]
        passed = {"passed_over": new} if new else {}
        self.ckpt.delete_after(found[0])
        if self.metrics is not None:  # the abandoned steps leave the record; why we came back stays
            self.metrics.rewind(self.step, keep_events=COURSE_EVENTS)
        self.loader.add_skip(*skip)
        if self.rank == 0:  # before the next step: a kill from here on must not re-read the batches
            ck.write_ledger(self.ckpt.root, self.loader.ranges, self.rollbacks)
        self._spike_first = None
        self._event("rollback", from_step=from_step, to_step=self.step, skip_batches=skip, **passed)
        return True

    def _rollback_limit(self, first_step: int) -> None:
        """A persistent spike once stability.max_rollbacks rollbacks are spent: the run stops, with a
        `rollback_limit` event and one line (docs/training.md, Stability). Training on through the
        spike would keep what the rollbacks were there to keep out; rolling back again would loop on
        a run that keeps spiking (PaLM restarted by hand with other data or settings, sec. 5.1). The
        count is the run's (checkpoints/rollbacks.json), so a rerun under the same settings stops at
        the next persistent spike; max_rollbacks may be raised on a resume, as optim.lr may be changed
        with train.allow_changes."""
        s, newest = self.cfg.stability, ck.latest_complete(self.ckpt.root)
        self._event("rollback_limit", step=self.step + 1, first_flagged=first_step, rollbacks=self.rollbacks,
                    max_rollbacks=s.max_rollbacks)
        where = f"the newest checkpoint, step {newest[0]}" if newest else "no checkpoint"
        n = f"{self.rollbacks} rollback{'s' if self.rollbacks != 1 else ''}"
        raise UserError(f"stability.max_rollbacks={s.max_rollbacks} reached: a persistent loss spike from "
                        f"step {first_step} after {n}; the run stops here, nothing saved (rerunning resumes "
                        f"from {where}). Lower optim.lr (with --set train.allow_changes=true) or raise "
                        "stability.max_rollbacks, or set stability.rollback=false to train through spikes")

    # --- callbacks --------------------------------------------------------------------------

    def maybe_eval(self) -> None:
        every = self.cfg.log.eval_every
        if not every or self.eval_loader is None or self.step % every:
            return
        self.model.eval()
        losses = []
        with torch.no_grad():
            for b in eval_batches(self.eval_loader, self.cfg.log.eval_batches, self.cfg.data.batch_size):
                x, y = self._inputs(b)
                with autocast(self.cfg.precision.dtype, self.device):
                    logits = self.model(x)
                losses.append(F.cross_entropy(logits.float().flatten(0, 1), y.flatten()))
        self._event("eval", eval_loss=self.layout.mean_over_dp(torch.stack(losses).mean()).item())

    def maybe_eval_tasks(self) -> None:
        """Downstream tasks (log.eval_tasks) every log.eval_tasks_every steps: pretrain.eval.callback."""
        every = self.cfg.log.eval_tasks_every or self.cfg.log.eval_every
        if self.cfg.log.eval_tasks and every and self.step % every == 0:
            self._event("eval_tasks", **eval_callback.eval_tasks_event(self))

    def maybe_save(self) -> None:
        self._completed(self.ckpt.poll())
        if self.step < self.next_save:
            return
        self.save()
        if not self.save_interval:  # Young's rule, C measured by this first save, then kept fixed
            save_s = float(np.mean(self.ckpt.save_seconds))
            step_s = float(np.mean(self._step_times)) if self._step_times else 1.0
            interval = ck.young_interval_s(max(save_s, 1e-3), self.cfg.checkpoint.mtbf_minutes * 60.0)
            self.save_interval = agreed_interval(max(1, round(interval / step_s)))
            if self.rank == 0:  # the first checkpoint's state was written before it was known
                ck.write_interval(self.ckpt.root, self.save_interval, save_s, step_s, self.step)
        self.next_save = self._save_after(self.step)

    def _measured_interval(self, saved: int) -> int:
        """Young's interval at a restore: the checkpoint's, else the one its first save measured
        (RUN/checkpoints/save_interval.json: the first checkpoint's state predates the measurement),
        else the one this process measured (a rollback to that first checkpoint). Without it a run
        killed before its second save measured again and saved at other steps."""
        if not saved:
            saved = ck.read_interval(self.ckpt.root) or self.save_interval
        return agreed_interval(saved)

    def _save_after(self, step: int) -> int:
        """The first save step after `step`: a function of the step alone, so a run killed and resumed
        any number of times saves at the same steps as one never stopped (multiples of the interval)."""
        first = self.cfg.checkpoint.first_at
        if not self.save_interval:
            return first if step < first else step + 1  # Young's C still unmeasured: measure next step
        k = self.save_interval
        if not self.cfg.checkpoint.every and step < first:
            return first
        return (step // k + 1) * k

    def _newest(self) -> int | None:
        """The step of the newest complete checkpoint in RUN/checkpoints (None: none)."""
        found = ck.latest_complete(self.run_dir / "checkpoints")
        return found[0] if found else None

    def _refuse_kept_history(self) -> None:
        """Only RUN/checkpoints is moved aside (to RUN/previous-N) by a fresh start. Checkpoints kept
        elsewhere (checkpoint.storage: object storage, or a folder) stay where they are: a fresh start
        over an earlier run's would mix two runs (a local folder did until session 13: the new run's
        step 6 beside the old run's step 12, which the next rerun resumed), so it stops with one line
        instead, before anything is moved."""
        root, own = self.ckpt.root, self.run_dir / "checkpoints"
        if not isinstance(root, ck.RemotePath) and Path(root).resolve() == own.resolve():
            return
        found = ck.latest_complete(root)
        if found is not None:
            raise UserError(f"{root} holds checkpoints of an earlier run (newest: step {found[0]}) and this "
                            "one starts fresh (train.resume=false): point checkpoint.storage elsewhere or "
                            "delete them, or run without train.resume=false to resume that run")

    # --- the loop ---------------------------------------------------------------------------

    def fit(self) -> list[dict]:
        """Train to train.steps (or train.stop_at); returns the step records of this call.

        SIGINT/SIGTERM end the run after the current step with a checkpoint of it (Interrupted, exit
        status 130); the record (metrics.jsonl, TensorBoard) keeps one value per step across resumes.
        """
        stop = self.cfg.train.stop_at or self.cfg.train.steps
        if self.complete:  # nothing to train, nothing to write: past the end
            # (config.toml said the shorter run, metrics a config_change, for a longer model) or at it
            # (run-it-twice review, session 9: each rerun of a finished run added an empty TensorBoard
            # event file and a `resume` event the report showed as a restart at the last step)
            return []
        self.run_dir.mkdir(parents=True, exist_ok=True)
        lock, refused = None, False
        if self.rank == 0:  # one run at a time writes here
            try:
                lock = hold_run_dir(self.run_dir)
            except UserError:
                refused = True
        # every rank stops, with rank 0's line: the others went on into the run and stopped on the
        # first collective with "another rank stopped mid-step ... rerun to resume" (sweep, session 13)
        if on_any_rank(refused):
            raise UserError(busy(self.run_dir))
        try:
            return self._fit(stop)
        finally:
            release_run_dir(lock)

    def _fit(self, stop: int) -> list[dict]:
        if not self.resumed:
            set_aside_history(self.run_dir, self.rank, None if self.cfg.train.resume else self._newest())
        if self.rank == 0:  # one writer of the run directory's config and metrics
            self.metrics = record.open_record(self)
        records = []
        self.elapsed_before = self.elapsed()  # a second fit() of this trainer goes on from the first's
        self._t_start = time.perf_counter()
        handlers = catch_signals(self._note_signal)
        try:
            while self.step < stop:
                if self._interrupted():
                    self._stop_interrupted()
                rec = self.train_step()
                if rec is None:
                    continue
                records.append(rec)
                rec["elapsed_s"] = round(self.elapsed(), 3)  # the run's, summed over its commands
                if (self.step % self.cfg.log.every == 0 or self.step == stop) and self.metrics is not None:
                    self.metrics.step(rec)
                    self._say(self._step_line(rec, stop, rec["elapsed_s"]))
                self.maybe_eval()
                self.maybe_eval_tasks()
                self.maybe_save()
                _maybe_fail(self.rank, self.step)
            self._save_final()
            if self.metrics is not None and stop < self.cfg.train.steps:  # a planned stop, not a crash:
                # the resume that continues from it is no restart (report_run._resumes)
                self.metrics.event("stop_at", self.step, steps=self.cfg.train.steps)
        finally:
            restore_signals(handlers)
            if self.metrics is not None:
                self.metrics.close()
        return records

    def elapsed(self) -> float:
        """Seconds of training of the run to this step: its checkpoint's time when resumed, plus this
        command's. The time from a resumed checkpoint to the kill is not counted: the steps trained in it
        were dropped too, so step N's time is that of the steps the record keeps up to N (a rollback's
        abandoned steps stay counted: the command spent them)."""
        now = 0.0 if self._t_start is None else time.perf_counter() - self._t_start
        return self.elapsed_before + now

    def _step_line(self, rec: dict, stop: int, elapsed: float) -> str:
        return record.step_line(rec, stop, elapsed, self.step, self._step_times)

    def _finish_save(self) -> None:
        self._completed(self.ckpt.wait())  # an in-flight async save, finished

    def _completed(self, done: int | None) -> None:
        """Log an async save's completion (the report counts it as a checkpoint only then) at the
        save's step: logged at the step that noticed it, a resume to that save dropped it."""
        if done is not None:
            self._event("checkpoint_complete", step=done, saved_step=done, noticed_at=self.step)

    def _save_final(self) -> None:
        self._finish_save()
        last = ck.latest_complete(self.ckpt.root)
        wanted = self.step > 0 or self.cfg.train.steps == 0  # steps=0: the built/imported model itself
        if wanted and (last is None or last[0] != self.step or last[0] in self.ckpt.damaged):
            self.save()  # the final state is always on disk, for resume, sample and export
        self._finish_save()

    # --- restarts: the run dir's record, signals ----------------------------------------------

    def _note_signal(self, name: str) -> None:
        self._interrupt = name
        if self.rank == 0:  # a step can take minutes (4M tokens on a CPU: 5.6): said now, not at its end
            # os.write, not print: a handler may run inside a write to sys.stderr (a reentrant call)
            os.write(2, f"\n{name} caught: stopping when the step in progress ends, with a checkpoint "
                        f"(another {name} stops at once, unsaved){_torchrun_grace()}\n".encode())

    def _interrupted(self) -> bool:
        """Did any rank catch a signal? Agreed by all ranks (the save that follows is collective)."""
        return on_any_rank(self._interrupt is not None)

    def _stop_interrupted(self) -> None:
        name = self._interrupt or "a signal on another rank"
        self._save_final()
        found = ck.latest_complete(self.ckpt.root)
        if self.step == 0 or found is None:
            msg = f"interrupted by {name} before the first step: no checkpoint to save"
        else:
            msg = (f"interrupted by {name} at step {self.step}: checkpoint {found[1]} saved; "
                   "the same command resumes")
        if self.metrics is not None:
            self.metrics.event("interrupted", self.step, signal=name)
        if self.rank == 0:
            print(msg, file=sys.stderr, flush=True)
        raise Interrupted(msg)

    def resolved_config(self) -> RunConfig:
        """The config with the model shape spelled out (RUN/config.toml stands alone)."""
        return record.resolved_config(self.cfg, self.shape)

    def write_config(self) -> None:
        record.write_config(self.run_dir, self.resolved_config())

    def _event(self, name: str, step: int | None = None, **fields) -> None:
        step = self.step if step is None else step
        if name not in ("eval", "eval_tasks"):  # measurements stay whole, as the step lines do
            fields = significant(fields)  # `median=5.123400000001` said and kept as 5.1234
        if self.metrics is not None:
            self.metrics.event(name, step, **fields)
        # said as the other events are, 5 significant digits (`eval_loss=5.0908050537109375` on a 4-rank
        # walk, session 14); the record keeps the measurement whole
        msg = _event_line(name, step, significant(fields))
        if name in (*COURSE_EVENTS, "rollback_limit"):
            if self.rank == 0:  # every rank takes the same decision: said once, not once per rank
                # shown even with --quiet: the run changed course
                print(self.tag + msg, file=sys.stderr, flush=True)
        else:
            self._say(msg)

    def _say(self, msg: str) -> None:
        if not self.quiet and self.rank == 0:
            print(self.tag + msg, file=sys.stderr, flush=True)

    def summary(self) -> str:
        """Model, global batch, data passes and device, printed before training (train/record.py)."""
        return record.summary(self)


def read_layout(saved) -> dict[str, int] | None:
    """A checkpoint's layout, None when absent (saved before session 14) or not degrees: it only
    informs the resume line, so a hostile value is ignored rather than trusted."""
    if not isinstance(saved, dict) or set(saved) != set(MESH_ORDER):
        return None
    if not all(type(v) is int and 1 <= v <= 1 << 20 for v in saved.values()):
        return None
    return {k: saved[k] for k in MESH_ORDER}


def _torchrun_grace() -> str:
    """Under torchrun the ranks' SIGTERM comes from its agent, which SIGKILLs them after its
    --shutdown-timeout (torch/distributed/run.py: TORCH_ELASTIC_SHUTDOWN_TIMEOUT, else 30 s): a step
    and save longer than that are lost, and the rerun resumes from the save before (session 14)."""
    if not os.environ.get("TORCHELASTIC_RUN_ID"):
        return ""
    env = os.environ.get("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "")  # the flag itself is not passed to the ranks
    grace = f"{env} s" if env.isdigit() else "--shutdown-timeout (30 s by default)"
    return f"; torchrun kills the ranks {grace} after its SIGTERM: a step and save longer than that are lost"


def _seconds(v) -> float:
    """A checkpoint's elapsed_s: a finite number of seconds >= 0, else ValueError (a hostile state file)."""
    if type(v) not in (int, float) or not math.isfinite(v) or v < 0:
        raise ValueError(f"{v!r} is not a number of seconds")
    return float(v)


def _maybe_fail(rank: int, step: int) -> None:
    """Fault injection for the restart tests: PRETRAIN_FAIL_AT="RANK:STEP" kills that rank after that
    step, on torchrun's first attempt only (so `--max-restarts` gets a run that can finish)."""
    spec = os.environ.get("PRETRAIN_FAIL_AT")
    if not spec or os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0":
        return
    r, s = (int(v) for v in spec.split(":"))
    if (r, s) == (rank, step):
        os._exit(17)


def _event_line(name: str, step: int, fields: dict) -> str:
    """An event as the terminal says it: the checkpoint lines in words (`blocking_s=0.027 ...
    async=True`, `saved_step=20 noticed_at=20` read as debug output); the rest as key=value."""
    if name == "checkpoint":
        behind = "; written in the background" if fields.get("async") else ""
        paused = f"training paused {fields['blocking_s']:.2f} s{behind}"
        return f"[checkpoint] step {step} -> {fields['path']} ({paused})"
    if name == "checkpoint_complete":
        return f"[checkpoint] step {step} written in full"
    return f"[{name}] step {step} " + " ".join(f"{k}={v}" for k, v in fields.items())
