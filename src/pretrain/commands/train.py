"""`pretrain train`: train a decoder-only transformer from a recipe, on one process or under torchrun."""

from __future__ import annotations

import argparse
import sys

HELP = "train a model from a recipe: mixed precision, clipping, spike rollback, exact-resume checkpoints"

DESCRIPTION = """\
Train a decoder-only transformer on token shards (data.kind = "tokens") or a raw text file read
as bytes (data.kind = "text"). Settings come from a TOML recipe, overridden with --set.

  pretrain train recipes/tiny-cpu.toml --set train.steps=200 --set train.out=runs/tiny

Many processes (gloo on CPU, NCCL on GPU): the degrees dp_replicate x dp_shard x tp x pp must
multiply to the world size (checked before anything is built):
  torchrun --nproc-per-node 4 -m pretrain train recipes/tiny-cpu.toml --set parallel.dp_shard=2 \\
      --set parallel.tp=2                          # FSDP2 x tensor parallel
  torchrun --nproc-per-node 2 -m pretrain train recipes/tiny-cpu.toml --set parallel.pp=2 \\
      --set parallel.pp_schedule=1f1b --set log.eval_every=0   # pipeline parallel (no eval yet)
  torchrun --nproc-per-node 2 --max-restarts 3 -m pretrain train ...   # restarts resume exactly
torchrun restarts a failed job whatever its exit code, a config error too: it is said once (later
attempts stay silent); drop --max-restarts while fixing one.
Checkpoints reshard: resume a run saved with one layout under another. See docs/parallelism.md.

What comes out, in the run directory (train.out):
  config.toml        the resolved config (model shape spelled out)
  metrics.jsonl      one line per step: step, loss, lr, grad_norm, tokens_per_s, loss_scale, mfu;
                     events (spike, rollback, skip, checkpoint, eval) as lines with an "event" field
  checkpoints/step_NNNNNNN/   DCP checkpoints with everything needed to continue bit for bit
  tensorboard/       TensorBoard event files

Running the same command again resumes from the newest complete checkpoint ("resuming from step N";
a finished run says "already complete ... nothing is trained" and stops there, with no model summary,
then "nothing to do" on stdout); the record keeps one value per step (later lines of metrics.jsonl
and TensorBoard points are dropped).
`pretrain train RUN/config.toml` resumes RUN from any directory: a saved train.out that RUN's path
ends with (runs/x) names it, and the run's relative data paths are read from where it was trained.
A resume under another recipe (learning rate, schedule, global batch, data, precision) is refused in one
line; --set train.allow_changes=true continues with the change and logs it. More train.steps is allowed
(continuing a finished run: raise train.steps, with train.allow_changes=true for another rate or
schedule; the rate's jump at the resume is said). A resume on another number of processes reshards.
Where there is none ("no checkpoint: starting fresh"), an earlier record in the run directory is moved
to RUN/previous-N/. Ctrl-C (SIGINT) or SIGTERM: the current step finishes, a checkpoint is saved, exit
status 130. Step lines show step/total, elapsed time and ETA. The echo of changed settings, the
summary and the step lines go to stderr; stdout gets only the last line ("done: ..."), so
`pretrain train ... | head` does not cut the run short (`2>&1 | tee train.log` keeps it all).
A persistent loss spike (loss > f x median of the last w steps) rolls the run back and skips the
batches around it; one past stability.max_rollbacks (5) stops the run, in a line saying how to go on.
Continued pretraining from a Hugging Face folder (Llama/SmolLM, Mistral, Qwen2/2.5, Qwen3 or GPT-2;
shape, weights and tokenizer from it): --set model.init_from=DIR, or recipes/continue-hf.toml
(docs/training.md).
Then: `pretrain sample RUN --prompt "..."`, `pretrain export RUN --format hf -o DIR` (transformers).
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="recipe TOML (e.g. recipes/tiny-cpu.toml)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                        help="override a config key, e.g. --set train.steps=100 (repeatable)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the whole resolved config, check the run can be built, then stop")
    parser.add_argument("--quiet", action="store_true",
                        help="no echo of the changed settings, no per-step lines on stderr (a resume, a "
                             "spike or a rollback is still said, in one line)")


def run(args: argparse.Namespace) -> int:
    from pretrain import config as cfgmod
    from pretrain.onerank import global_rank
    from pretrain.train.config import RunConfig
    from pretrain.train.parallel import end_distributed
    from pretrain.train.runs import check_saved_paths
    from pretrain.train.trainer import Interrupted, Trainer

    cfg = cfgmod.load(RunConfig, args.config, args.overrides)
    cfg = check_saved_paths(args.config, cfg, args.overrides)  # RUN/config.toml: not where we write
    # Logs (the echo, the summary, step lines) on stderr, results on stdout: `train ... | head`
    # must not stop the training when the reader leaves before the run ends.
    if args.dry_run:  # the config first: a run that cannot be built still shows what it would be
        print(cfgmod.dumps(_spelled_out(cfg)), flush=True)
    trainer = Trainer(cfg, quiet=args.quiet)
    # the echo after the checks the trainer makes: a refused run said "(full config: RUN/config.toml)"
    # first, a file it never wrote (or another run's), as curate's did before session 13
    if not args.dry_run and not args.quiet and global_rank() == 0:  # under torchrun: once
        print(_echo(cfg, trainer), file=sys.stderr, flush=True)
    # under torchrun: once, not once per rank. A finished run's rerun said "already complete" and
    # stops: a summary of the training it will not do read as a run about to start (session 11)
    if trainer.rank == 0 and (args.dry_run or not trainer.complete):
        print(trainer.summary(), file=sys.stderr, flush=True)
    if args.dry_run:
        return 0
    try:
        records = trainer.fit()
    except Interrupted:  # already said, with the checkpoint it saved
        return Interrupted.exit_code
    except RuntimeError as e:
        line = peer_lost_line(e, trainer.rank, trainer.ckpt.root)
        if line is None:
            raise
        print(line, file=sys.stderr, flush=True)
        return 1
    end_distributed()  # every rank got here: leave the process group together
    if records and trainer.rank == 0:
        last = records[-1]
        more = ""
        if cfg.train.stop_at and last["step"] == cfg.train.stop_at < cfg.train.steps:
            more = (f" (train.stop_at={cfg.train.stop_at} of train.steps={cfg.train.steps}: the same command "
                    "with a later train.stop_at, or without it, goes on)")
        print(f"done: step {last['step']}, loss {last['loss']:.4f}{more}; run directory {trainer.run_dir}")
    elif trainer.rank == 0 and cfg.train.steps == 0 and not trainer.resumed:  # what steps=0 is for
        from pretrain.train import checkpoint as ck

        source = " from model.init_from" if cfg.model.init_from else ""
        saved = ck.step_dir(trainer.ckpt.root, 0)
        print(f"done: train.steps=0: the model is built{source} and saved, untrained, as {saved} "
              "(for `pretrain sample`, "
              f"`eval` or `export`); raise train.steps to train it; run directory {trainer.run_dir}")
    elif trainer.rank == 0:  # a rerun of a finished run: say why nothing happened, in one line
        end = f"train.stop_at={cfg.train.stop_at}" if cfg.train.stop_at else f"train.steps={cfg.train.steps}"
        past = ""
        if trainer.step > (cfg.train.stop_at or cfg.train.steps):  # fewer steps than the checkpoint's
            past = ("; it is past that and a run is not rewound (its directory is left as it was): for "
                    "the shorter run, train into another train.out")
        key = end.split("=")[0]  # "it" was read as the train.out just named (run-it-twice, session 14)
        go_on = f"; raise {key} past {trainer.step} to go on" if past else f"; raise {key} to go on"
        print(f"nothing to do: the run is already at step {trainer.step} ({end}){past}{go_on}; "
              f"run directory {trainer.run_dir}")
    return 0


def peer_lost_line(e: BaseException, rank: int, ckpt_root) -> str | None:
    """One line for a collective that failed because another rank is gone (killed, out of memory):
    what the surviving ranks see, instead of a gloo traceback each; None for any other error.
    gloo raises a plain RuntimeError ("Connection reset by peer", "Connection closed by peer"),
    NCCL and the c10d store a DistError."""
    import torch.distributed as dist

    text = str(e)
    if not (isinstance(e, dist.DistError) or "reset by peer" in text or "closed by peer" in text):
        return None
    from pretrain.train import checkpoint as ck

    found = ck.latest_complete(ckpt_root)
    where = f"the newest complete checkpoint is step {found[0]}" if found else "no complete checkpoint yet"
    reason = text.strip().splitlines()[0] if text.strip() else type(e).__name__
    reason = reason.split("] ", 1)[-1].split(". ", 1)[0][:120]  # gloo prefixes its source file
    return (f"pretrain train: rank {rank}: another rank stopped mid-step ({reason}); {where}; "
            "rerun the same command to resume (torchrun --max-restarts N does it by itself)")


def _echo(cfg, trainer) -> str:
    """The settings echo: the settings that differ from the defaults, or, on a resume under the
    config its run directory already holds (RUN/config.toml, written by the command before), one
    line: each resume reprinted the whole block, the same lines each time, above the resume line
    (session 14). A resume under another config still prints the block, with what changed in it."""
    from pretrain import config as cfgmod
    from pretrain.train.record import config_text, resolved_config

    where = f"{cfg.train.out}/config.toml"
    if trainer.resumed:
        path = trainer.run_dir / "config.toml"
        try:  # the run's own file, one the last command wrote: bounded all the same (a hand-edited one)
            same = path.stat().st_size < 1 << 20 and path.read_text(encoding="utf-8") == config_text(
                trainer.run_dir, resolved_config(cfg, trainer.shape))
        except (OSError, UnicodeDecodeError):  # unreadable: the block, as before
            same = False
        if same:
            return (f"config: as the run's last command had it, resumed at step {trainer.step} "
                    f"(full config: {where})")
    return cfgmod.echo(cfg, where, base=echo_base(cfg))


def echo_base(cfg):
    """The defaults the echo compares with. RUN/config.toml spells the preset's shape out (every
    model shape field set): against plain defaults a resume echoed n_layers, d_ff, mlp... as changed
    (25 settings where the recipe had 12, session 10's end-to-end walk), so such a config is compared
    with the defaults spelled out by the same preset, as `pretrain report` does. A recipe that sets
    some fields (model.seq_len = 128) is compared with the plain defaults, as before."""
    import dataclasses

    from pretrain.train.config import RunConfig
    from pretrain.train.model import SHAPE_FIELDS, resolve_shape

    if any(getattr(cfg.model, k) is None for k in SHAPE_FIELDS):
        return None
    base = RunConfig()
    if cfg.model.init_from:  # what the folder's config.json set (shape, rotary base, norm eps, preset "")
        from pretrain.train.hf import apply_init_from

        try:  # its model section only (for text data it also names the folder's tokenizer)
            model = apply_init_from(dataclasses.replace(base, model=dataclasses.replace(
                base.model, init_from=cfg.model.init_from))).model
        except Exception:  # noqa: BLE001 - a folder gone or broken: the trainer says so, in its words
            return None
        return dataclasses.replace(base, model=dataclasses.replace(model, init_from=""))
    if not cfg.model.preset:
        return None
    shape = resolve_shape(dataclasses.replace(base.model, preset=cfg.model.preset))
    return dataclasses.replace(base, model=dataclasses.replace(
        base.model, **{k: getattr(shape, k) for k in SHAPE_FIELDS}))


def _spelled_out(cfg):
    """The config with the model preset's shape written out (what RUN/config.toml will hold)."""
    import dataclasses

    from pretrain.train.model import SHAPE_FIELDS, resolve_shape

    shape = resolve_shape(cfg.model)
    return dataclasses.replace(cfg, model=dataclasses.replace(
        cfg.model, **{k: getattr(shape, k) for k in SHAPE_FIELDS}))
