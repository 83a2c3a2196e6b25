"""What a run says about itself, apart from training: the summary printed before the first step
(model, global batch, passes over each data source, an eval source that is not held out), the step
line, RUN/config.toml with the model shape spelled out, and the events that open metrics.jsonl
(`data`, `resume`, `config_change`). Split from train/trainer.py (session 8) so that the loop's
module holds the loop; each function reads the trainer it is given and changes nothing in it but
its `metrics`.
"""

from __future__ import annotations

import dataclasses
import sys

from pretrain import config as cfgmod
from pretrain.train.config import storage_to_save
from pretrain.train.metrics import Metrics
from pretrain.train.model import SHAPE_FIELDS
from pretrain.train.parallel import describe_layout, layout_of
from pretrain.train.restarts import COURSE_EVENTS, describe, hms
from pretrain.untrusted import one_line


def open_record(t) -> Metrics:
    """Rank 0's record of a run: config.toml, then metrics.jsonl rewound to a resumed step, with the
    data's passes (a fresh start, or a resume under changed settings) and the resume said."""
    write_config(t.run_dir, resolved_config(t.cfg, t.shape))
    metrics = Metrics(t.run_dir, t.cfg.log.tensorboard, rewind_to=t.step if t.resumed else None,
                      explained=COURSE_EVENTS)
    table = getattr(getattr(t.loader, "inner", None), "epochs_table", None)
    if callable(table) and (not t.resumed or t.changes):  # what the report says of the data
        b = t.cfg.data.batch_size * t.cfg.train.grad_accum * t.dims.dp
        metrics.event("data", t.step, sources=table(t.cfg.train.steps * b))
    if t.resumed:
        # the newer checkpoints passed over (damaged) go in the record too: stderr is gone by the
        # time someone reads the report (session 10's end-to-end walk)
        extra = {"passed_over": sorted(s for s, _ in t.passed_over)} if t.passed_over else {}
        if t.resharded:  # saved under another parallel layout: which, for the report's reader
            extra["resharded"] = t.resharded
        metrics.resumed(t.step, **extra)
        for step, name in sorted((s, n) for s, n in t.passed_over if n):  # which file, for What went wrong
            metrics.event("checkpoint_damaged", t.step, damaged_step=step, file=name)
        if t.changes:  # even with --quiet: the run continues under another recipe
            metrics.event("config_change", t.step, changes=t.changes)
            print(f"changed since step {t.step}: {describe(t.changes)}{lr_jump(t)}", file=sys.stderr,
                  flush=True)
            if retok := [k.removeprefix("data.tokens.") for k in t.changes if k.startswith("data.tokens.")]:
                print(f"{', '.join(retok)}: other tokens than the checkpoint's, so other windows: its draws "
                      "go on at a new epoch over all its windows, in a new order (documents added are drawn "
                      "from now on; its last epoch's unread windows come back in that one); the other "
                      "sources resume exactly (docs/tokens.md)", file=sys.stderr, flush=True)
    return metrics


def lr_jump(t) -> str:
    """The learning rate's jump at a resume under another schedule: a finished cosine run continued
    with more train.steps decays over the new length, so its lr goes back up (6.9e-04 at its last
    step, 2.4e-03 at the next: a warm restart, SGDR, Loshchilov & Hutter 2017) where a newcomer expects
    it to carry on from the floor; said so the jump in the loss curve that follows is explained. The
    rate the checkpoint's last step trained at comes from the recipe it was trained under."""
    from pretrain.train.optim import lr_at

    keys = [k for k in t.changes if k == "train.steps" or k.startswith(("optim.lr", "schedule."))]
    if not keys or t.step == 0:
        return ""
    then = {k: t.changes[k][0] for k in keys}
    sched = dataclasses.replace(t.cfg.schedule, **{k.split(".", 1)[1]: v for k, v in then.items()
                                                 if k.startswith("schedule.")})
    try:
        before = lr_at(t.step - 1, then.get("train.steps", t.cfg.train.steps),
                       then.get("optim.lr", t.cfg.optim.lr), sched)
    except Exception:  # noqa: BLE001 - a hand-edited checkpoint's recipe: the jump is not said, no more
        return ""
    after = lr_at(t.step, t.cfg.train.steps, t.cfg.optim.lr, t.cfg.schedule)
    if f"{before:.2e}" == f"{after:.2e}":
        return ""
    return f" (lr {before:.2e} at step {t.step}, {after:.2e} at step {t.step + 1} under the new schedule)"


def resolved_config(cfg, shape):
    """The config with the model shape spelled out (RUN/config.toml stands alone)."""
    model = dataclasses.replace(cfg.model, **{k: getattr(shape, k) for k in SHAPE_FIELDS})
    return dataclasses.replace(cfg, model=model)


def write_config(run_dir, cfg) -> None:
    """RUN/config.toml, atomically (a kill mid-write leaves the old one). checkpoint.storage is kept
    as the run directory sees it (train/config.py `storage_to_save`): a relative folder given from
    the working directory would otherwise name another place from any other directory; train.out and
    the data paths as the run's own file had them when a resume only read them from elsewhere
    (train/runs.py `as_saved`)."""
    path = run_dir / "config.toml"
    tmp = path.with_name("config.toml.tmp")
    tmp.write_text(config_text(run_dir, cfg))
    tmp.replace(path)


def config_text(run_dir, cfg) -> str:
    """What write_config writes for `cfg` (the shape spelled out): equal to RUN/config.toml's text
    when a resume runs under the config its run directory already holds."""
    from pretrain.train.runs import as_saved  # train.out and the data paths as the run saved them

    saved = storage_to_save(run_dir, cfg.checkpoint.storage)
    cfg = dataclasses.replace(as_saved(run_dir, cfg),
                              checkpoint=dataclasses.replace(cfg.checkpoint, storage=saved))
    return cfgmod.dumps(cfg)


def step_line(rec: dict, stop: int, elapsed: float, step: int, step_times: list[float]) -> str:
    """step/total, the numbers, elapsed time and the ETA from the recent mean step time."""
    recent = step_times[-10:]
    eta = (stop - step) * sum(recent) / max(1, len(recent))
    return (f"step {rec['step']}/{stop}  loss {rec['loss']:.4f}  lr {rec['lr']:.2e}  "
            f"norm {rec['grad_norm']:.3f}  tok/s {rec['tokens_per_s']:,.0f}  "
            + ("" if rec.get("mfu") is None else f"mfu {100 * rec['mfu']:.1f}%  ")  # log.peak_flops set
            + f"elapsed {hms(elapsed)}  eta {hms(eta)}")


def summary(t) -> str:
    """The lines printed before training. The whole model and the global batch: under pp a rank holds
    one stage's parameters, under data parallelism data.batch_size is one rank's share."""
    n, c, dp = t.shape.params(), t.cfg, t.dims.dp
    mine = c.data.batch_size * c.train.grad_accum
    b, per_rank = mine * dp, f" ({mine} per data-parallel rank x {dp})" if dp > 1 else ""
    # The passes over each source this run makes (run-it-twice review: only `pretrain mix`
    # said them, from a budget the user had to keep equal to steps x batch x seq_len by hand).
    passes = getattr(getattr(t.loader, "inner", None), "describe", None)
    data = f"\n{passes(c.train.steps * b)}" if callable(passes) else ""
    data += not_held_out(t.loader, t.eval_loader) + no_eval_data(c, t.eval_loader)
    return (f"model {t.shape.name}: {n:,} parameters, {t.fpt:.3g} FLOPs/token\n"
            f"batch {b}{per_rank} x {t.shape.seq_len} = {b * t.shape.seq_len:,} tokens/step, "
            f"{c.train.steps} steps = {c.train.steps * b * t.shape.seq_len:,} tokens{data}\n"
            f"precision {c.precision.dtype}, device {t.device}{processes(t.dims)}, run dir {t.run_dir}")


def processes(dims) -> str:
    """How many processes train and how they split the work, and that the step lines' tok/s counts
    them all (run-it-twice, session 14: a 4-process run's summary named one `device cpu`, no layout,
    and its tok/s read as one process's); mfu is per device (train/metrics.py)."""
    n = dims.world_size
    if n == 1:
        return ""
    return f" x {n} processes ({describe_layout(layout_of(dims))}; tok/s: all {n} together, mfu: per process)"


def no_eval_data(c, eval_loader) -> str:
    """A warning line when log.eval_every asks for a held-out loss the data cannot give (session 10's
    end-to-end walk: token sources without data.eval_sources ran every step and no `eval` event, in
    silence; a text file whose eval_fraction leaves under one sequence the same)."""
    if not c.log.eval_every or eval_loader is not None:
        return ""
    if c.data.kind == "tokens":
        why = 'data.eval_sources is empty (held-out token directories: data.eval_sources = {held = "DIR"})'
    else:
        why = (f"data.eval_fraction = {c.data.eval_fraction:g} leaves under one sequence of "
               f"{one_line(str(c.data.path))}")
    return f"\nWARNING: log.eval_every = {c.log.eval_every} but {why}: no eval loss is measured"


def not_held_out(loader, eval_loader) -> str:
    """A warning line when an eval source is a training source's directory: its "held-out" loss
    would be measured on tokens the model trains on (run-it-twice review)."""
    train = getattr(getattr(loader, "inner", None), "dirs", None)
    held = getattr(eval_loader, "dirs", None)
    if not train or not held:
        return ""
    mine = {d.path.resolve(): n for n, d in zip(loader.inner.names, train)}
    same = [f"{n} = {mine[d.path.resolve()]}" for n, d in zip(eval_loader.names, held)
            if d.path.resolve() in mine]
    return (f"\nWARNING: eval source is a training source ({', '.join(same)}): its eval loss is not "
            f"held-out" if same else "")
