"""The report's model sections: a plan (headline cards, the top layouts, why this layout, the
planner's figures), a training run (loss / learning rate / gradient norm with spikes and rollbacks
marked, throughput, MFU, evaluations, samples) and an evaluation result file. A run's
metrics.jsonl is read whole, holding of each record only what the page uses (`Slim`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pretrain import untrusted
from pretrain.report import (
    Section,
    clip,
    esc,
    fig_to_img,
    fmt,
    headline_text,
    kpis,
    note,
    plan_headline,
    plt,
    table,
    tokens_per_s,
)
from pretrain.report_metrics import EVENTS_SHOWN, Slim, say_value
from pretrain.train.metrics import read_metrics as read_run_metrics

# events drawn on the loss curve
MARKED = ("spike", "rollback", "skip", "rollback_unavailable", "rollback_limit")
# the metrics `pretrain eval` prints (lm-evaluation-harness's names); nll, tokens, bytes stay in the JSON
TASKS_DRAWN = 10  # lines per in-loop panel: a run's metrics.jsonl may name any number of tasks
HEADLINE_METRICS = ("acc", "acc_norm", "exact_match", "perplexity", "bits_per_byte", "memorized")


# ----------------------------------------------------------------------------- plan


def plan_section(path: Path, plan: dict, sid: str) -> Section:
    from pretrain.plan import bestcase

    h = plan_headline(plan)
    fits = bool(plan.get("layout") and plan["layout"].get("fits", True))
    # a small model's MFU against the published runs: the line `pretrain plan` prints first (session 14)
    check, mfu, _ = bestcase.read(plan)
    best = check is not None and check.best_case(mfu)
    label = ", best case" if best else ""
    cards = [("days" + label, h.get("days")), ("GPU-hours", h.get("gpu_hours")),
             ("MFU" + label, f"{h['mfu']:.1%}" if h.get("mfu") is not None else None),
             ("layout", h.get("layout") if fits else "none fits")]
    parts = [kpis(cards, bad=set() if fits else {"layout"}), note(headline_text(h))]
    expect = bestcase.first_line(plan)
    if expect:
        parts.append(f"<p class='note'><b>Expect:</b> {esc(clip(expect))}</p>")  # a plan.json travels
    parts.append(_plan_inputs(plan))
    parts.append(_top_layouts(plan))
    why = (plan.get("search") or {}).get("explanation") or []
    if why:
        title = "<h3>Why this layout</h3>" if fits else "<h3>Why no layout</h3>"
        heads = ["alternative", "compared with the chosen layout"]
        parts.append(title + table(heads, [_why_row(x) for x in why]))
    parts.append(_plan_figures(plan))
    rejected = (plan.get("search") or {}).get("rejected") or {}
    searched = "; ".join(f"{k} ({v:,})" for k, v in rejected.items())
    reason = (plan.get("layout") or {}).get("reason") or searched
    problems = [] if fits else [f"no layout fits: {reason or 'see the plan'}"]
    return Section(sid, f"Plan: {h.get('model')} on {h.get('gpus')} {h.get('gpu')}", "plan", str(path),
                   "".join(parts), [cards[0], cards[1], cards[2], ("layout", h.get("layout"))], problems)


def _plan_inputs(plan: dict) -> str:
    m, c, b = plan.get("model") or {}, plan.get("cluster") or {}, plan.get("budget") or {}
    rows = [["model", f"{m.get('name')}: {fmt(m.get('params'))} parameters, {m.get('n_layers')} layers × "
                      f"{m.get('d_model')}, sequence {fmt(m.get('seq_len'))}"],
            ["cluster", f"{c.get('n_gpus')} × {c.get('gpu')} ({c.get('peak_tflops_per_gpu')} TFLOP/s peak, "
                        f"{fmt(c.get('usable_gb_per_gpu'))} of {c.get('memory_gb_per_gpu')} GB usable)"],
            ["budget", f"{fmt(b.get('tokens'))} tokens ({fmt(b.get('training_flops'))} FLOPs); "
                       f"Chinchilla-optimal {fmt(b.get('chinchilla_tokens'))}; "
                       f"batch {fmt(b.get('batch_tokens'))} tokens"]]
    rel = plan.get("reliability") or {}
    if rel:
        rows.append(["failures", f"{fmt(rel.get('expected_failures'))} expected; checkpoint every "
                                 f"{fmt((rel.get('young_interval_s') or 0) / 60)} min (Young); goodput "
                                 f"{fmt(rel.get('goodput'))}"])
    said = (plan.get("time") or {}).get("published_check")
    if isinstance(said, str):  # the sentence the terminal prints under its Time table
        rows.append(["published runs", said])
    return "<h3>What was planned</h3>" + table(["", ""], rows)


def _top_layouts(plan: dict) -> str:
    top = (plan.get("search") or {}).get("top") or []
    if not top:
        return note("the search kept no layouts (a --layout was given, or nothing fits)")
    rows = []
    for i, t in enumerate(top, 1):
        mem = t.get("memory_gb") or {}
        rows.append([i, t.get("label"), t.get("tokens_per_s"), f"{t['mfu']:.1%}" if t.get("mfu") else None,
                     t.get("step_s"), mem.get("total"), t.get("micro_batches")])
    return ("<h3>Top layouts</h3>"
            + table(["rank", "layout", "tokens/s", "MFU", "step s", "GB per GPU", "micro-batches"], rows,
                    {0, 2, 3, 4, 5, 6}))


def _why_row(text: Any) -> list[str]:
    text = str(text)
    head, sep, tail = text.partition(": ")
    return [head, tail] if sep else [text, ""]


def _plan_figures(plan: dict) -> str:
    """The figures `pretrain plan --figures` draws, for this plan (the job is rebuilt from it)."""
    try:
        from pretrain.plan import figures

        job = _job_of(plan)
        lay = plan.get("layout") or {}
        pp = (lay.get("layout") or {}).get("pp", 1)
        p, m = (pp, lay.get("micro_batches") or 8) if pp > 1 else (4, 8)
        rel = plan.get("reliability") or {"cluster_mtbf_s": 3 * 3600.0, "checkpoint_s": 60.0}
        figs = [(figures.memory_figure(job, plan), "memory per GPU"),
                (figures.zero_figure(job), "ZeRO stages"),
                (figures.pipeline_figure(p, m), "pipeline schedule"),
                (figures.checkpoint_figure(rel["cluster_mtbf_s"], rel["checkpoint_s"]),
                 "checkpoint interval")]
    except Exception as e:  # noqa: BLE001 - a plan from another version: the tables still stand
        return note(f"figures left out: this plan cannot be redrawn ({type(e).__name__}: {e})")
    imgs = []
    for fig, alt in figs:
        fig.tight_layout()
        imgs.append(fig_to_img(fig, alt))
    return "<h3>Figures</h3><div class='figs'>" + "".join(imgs) + "</div>"


def _job_of(plan: dict):
    import dataclasses

    from pretrain.errors import UserError
    from pretrain.plan import hardware, shapes
    from pretrain.plan.search import Job

    m, c, b = plan["model"], plan["cluster"], plan.get("budget") or {}
    try:
        shape = shapes.get_shape(m["name"])
        shape = dataclasses.replace(shape, **{k: m[k] for k in ("seq_len", "vocab_size") if k in m})
    except (KeyError, ValueError, UserError):  # no preset (`plan --model DIR`): the shape is in the plan
        names = {f.name for f in dataclasses.fields(shapes.ModelShape)}
        shape = shapes.ModelShape(**{k: v for k, v in m.items() if k in names})
    kw = {"batch_tokens": int(b["batch_tokens"])} if b.get("batch_tokens") else {}
    return Job(shape, hardware.get_gpu(c["gpu"]), int(c["n_gpus"]), efficiency=c.get("efficiency"), **kw)


# ----------------------------------------------------------------------------- training run


def read_metrics(run: Path) -> tuple[list[dict], list[dict], list[dict]]:
    """(per-step records, eval records, other events) of RUN/metrics.jsonl. Every record is read
    (the curves start at step 0; restarts and rollbacks are counted over the whole run), and of
    each only what the page uses is held (`Slim`): a file over report_remote.MAX_LARGE (1 GiB) is
    refused, as the same file in a bucket is."""
    from pretrain import report_remote

    path, limit = run / "metrics.jsonl", report_remote.MAX_LARGE
    size = untrusted.check_file(path, within=run)
    if size > limit:
        raise untrusted.BadFile(report_remote.too_big(str(path), size, limit))
    slim = Slim()
    steps, events = read_run_metrics(run / "metrics.jsonl", within=run,  # torn or hostile lines skipped
                                     max_values=limit // untrusted.BYTES_PER_VALUE, keep=slim)
    if slim.data is not None:
        events.append(slim.data)
    train = [r for r in steps if "loss" in r and r.get("split", "train") == "train"]
    # "eval": held-out loss; "eval_tasks": {"TASK/METRIC": value} from log.eval_tasks (docs/evaluation.md)
    evals = [r for r in steps + events if "eval_loss" in r or r.get("event") in ("eval", "eval_tasks")]
    return train, evals, [e for e in events if e.get("event") not in ("eval", "eval_tasks")]


def run_section(run: Path, sid: str) -> Section:
    train, evals, events = read_metrics(run)
    marked = [e for e in events if e.get("event") in MARKED]
    tps = tokens_per_s(train)
    mfu = [r["mfu"] for r in train if _number(r.get("mfu"))]  # a hostile "x" is not an MFU
    mfu_text = f"{sorted(mfu)[len(mfu) // 2]:.1%}" if mfu else "n/a"
    last = train[-1] if train else {}
    evl = [r for r in evals if r.get("eval_loss") is not None]
    target = _target_steps(run)
    steps = f"{last.get('step')} of {target}" if target and last else last.get("step")
    problems = (_stopped_early(last.get("step", 0), target, events, run) + _resumes(events, target)
                + _damaged(events))
    trained = _trained(last, events)
    when = [("trained", trained)] if trained else []  # absent from runs logged before session 14
    parts = [kpis([("steps", steps), *when, ("final loss", last.get("loss")),
                   ("final eval loss", evl[-1]["eval_loss"] if evl else None),
                   ("tokens/s", tps), ("MFU", mfu_text), ("spikes / rollbacks", len(marked))],
                  bad=({"spikes / rollbacks"} if marked else set()) | ({"steps"} if problems else set()))]
    parts.append(note("tokens/s: the median over logged steps of tokens in the step / the step's wall "
                      "time (the demo summary uses the same). "
                      + ("" if mfu else "MFU n/a: it needs the device's peak FLOP/s, which the GPU table "
                                        "has and a CPU does not. ")
                      + _eval_loss_note(evl, run)))
    parts.append(_checkpoints(run, events))
    parts.append(_model(run))
    data, over = _data(events)
    parts.append(data)
    problems += over
    parts.append(_settings(run))
    if train:
        parts.append(_curves(train, evl, marked))
    parts.append(_evaluations(run, evals))
    events = [e for e in events if e.get("event") not in ("eval_tasks", "data")]  # drawn above
    if events:
        rows = [[e.get("step", e.get("from_step", "")), e["event"],
                 _detail({k: v for k, v in e.items() if k not in ("step", "event")})]
                for e in events[:EVENTS_SHOWN]]
        parts.append("<h3>Events</h3>" + table(["step", "event", "detail"], rows))
    samples = run / "samples.txt"
    if samples.exists():
        try:  # a link to ~/.ssh/id_rsa would put the key into a page the user shares: refused
            text = untrusted.read_head(samples, 16_384, within=run)[:4000]
            parts.append(f"<h3>Samples</h3><pre>{esc(text)}</pre>")
        except ValueError as e:
            parts.append("<h3>Samples</h3>" + note(str(e)))
    problems = (problems + [_what(e) for e in marked])[:10]
    facts = [("final loss", last.get("loss")), ("tokens/s", tps), ("steps", steps), *when]
    return Section(sid, "Training run", "train", str(run), "".join(parts), facts, problems)


# the keys the trainer writes, in the words the Events table says them (others: the key as written)
_EVENT_KEYS = {
    "saved_step": "saved step", "noticed_at": "noticed at step", "blocking_s": "training paused (s)",
    "path": "to", "async": "written in the background", "loss": "loss", "median": "recent median loss",
    "reason": "why", "loss_scale": "loss scale", "from_step": "from step", "to_step": "back to step",
    "skip_batches": "batches skipped", "attempts": "attempt", "damaged_step": "damaged step",
    "file": "file", "changes": "changed", "signal": "signal", "first_flagged": "spike from step",
    "rollbacks": "rollbacks so far", "max_rollbacks": "stability.max_rollbacks", "steps": "train.steps",
}


def _detail(fields: dict, limit: int = 400) -> str:
    """An event's fields in words (`saved step: 100; noticed at step: 101`), not as raw JSON: every
    field kept (nested values as `key: value` too), the whole bounded at LIMIT characters with "…"
    (someone else's log may hold anything). The page escapes it like every other cell."""
    text = "; ".join(f"{_EVENT_KEYS.get(k, k)}: {say_value(v)}" for k, v in fields.items())
    return text if len(text) <= limit else text[:limit - 1] + "…"



def _data(events: list[dict]) -> tuple[str, list[str]]:
    """The token sources the run drew from, as its log said them (the newest `data` event: weight,
    tokens, epochs per source), and a problem per source read more than EPOCHS_WARN times."""
    from pretrain.report_corpus import EPOCHS_WARN
    from pretrain.tokens.mixture import describe_epochs

    said = [e.get("sources") for e in events if e.get("event") == "data"]
    table = said[-1] if said else None
    try:  # someone else's run directory: a malformed event is left out, not a traceback
        rows = {str(k): {"weight": float(r["weight"]), "tokens": int(r["tokens"]),
                         "epochs": float(r["epochs"])} for k, r in table.items()}
    except (AttributeError, KeyError, TypeError, ValueError):
        return "", []
    over = [f"{k}: {r['epochs']:.2f} epochs of its data in this run (over {EPOCHS_WARN:g}: repeated "
            f"tokens lose value, Muennighoff et al. 2023)"
            for k, r in rows.items() if r["epochs"] > EPOCHS_WARN]
    return note(describe_epochs(rows, EPOCHS_WARN)), over


def _run_config(run: Path):
    """RUN/config.toml as the trainer reads it, or None (no config, or one of another version)."""
    try:
        from pretrain import config
        from pretrain.train.config import RunConfig

        return config.load(RunConfig, run / "config.toml")
    except Exception:  # noqa: BLE001 - an older run: the curves still stand
        return None


def _target_steps(run: Path) -> int | None:
    """Where the run was told to stop (train.stop_at, else train.steps), as the trainer reads it."""
    cfg = _run_config(run)
    return None if cfg is None else cfg.train.stop_at or cfg.train.steps


def _checkpoints(run: Path, events: list[dict]) -> str:
    """When the run saved (checkpoint events), at what interval, and the longest pause a save caused."""
    cfg = _run_config(run)
    every = ("" if cfg is None else f"every {cfg.checkpoint.every} steps; " if cfg.checkpoint.every
             else f"interval by Young's rule sqrt(2 x save time x MTBF){_young(run, cfg)}; ")
    started = [e for e in events if e.get("event") == "checkpoint" and isinstance(e.get("step"), int)]
    saved = _complete_saves(events, run)  # an async save killed before its completion is no checkpoint
    unfinished = sorted({e["step"] for e in started} - set(saved))
    many = len(unfinished) > 1
    cut = (f"; the async save{'s' if many else ''} of step{'s' if many else ''} "
           f"{', '.join(map(str, unfinished))} never completed" if unfinished else "")
    if not saved:
        return note(f"checkpoints: {every}none saved{cut}")
    steps = ", ".join(str(s) for s in saved[-12:])
    pause = max((e.get("blocking_s") or 0 for e in started), default=0)
    return note(f"checkpoints: {every}saved at step{'s' if len(saved) > 1 else ''} "
                f"{'..., ' if len(saved) > 12 else ''}{steps}{cut}; "
                f"the longest pause for a save {pause:.2f} s")


def _young(run: Path, cfg) -> str:
    """What Young's rule gave, from save_interval.json where the run keeps its checkpoints
    (checkpoint.storage: RUN/checkpoints, or a folder inside the run, relative to it); the trainer writes
    it once the first save has measured C: ' = 11 steps (save 0.13 s, step 0.049 s)', or '' without a
    readable one. Storage outside the run (a bucket, another folder) is not read: the report reads the
    run directory alone."""
    from pretrain.train.config import storage_in_run

    where = storage_in_run(run, cfg.checkpoint.storage) or run / "checkpoints"
    try:
        if "://" in str(where) or not Path(where).resolve().is_relative_to(run.resolve()):
            return ""
        m = untrusted.load_json_object(Path(where) / "save_interval.json", within=run)
        k, save_s, step_s = m["save_interval"], float(m["save_s"]), float(m["step_s"])
    except (OSError, untrusted.BadFile, KeyError, TypeError, ValueError):
        return ""
    if type(k) is not int or k < 1:
        return ""
    return f" = {k} steps (save {save_s:.2g} s, step {step_s:.2g} s)"


def _stopped_early(step: int, target: int | None, events: list[dict], run: Path) -> list[str]:
    """A run short of its target was killed, interrupted or is still running: say so, and what a
    rerun of the same command would resume from (the newest checkpoint event)."""
    if not target or step >= target:
        return []
    saved = _complete_saves(events, run)
    why = "killed, interrupted or still running"
    limit = [e for e in events if e.get("event") == "rollback_limit" and e.get("step") == step + 1]
    if limit:  # the trainer's own stop: said as such, not as a kill
        why = f"stopped by stability.max_rollbacks={limit[-1].get('max_rollbacks')}: the loss kept spiking"
    then = (f"newest checkpoint: step {max(saved)}, the same command resumes from it" if saved
            else "no checkpoint yet: the same command starts it over")
    return [f"stopped at step {step} of {target} ({why}); {then}"]


def _complete_saves(events: list[dict], run: Path) -> list[int]:
    """The steps of checkpoints a rerun can resume from. An async save is logged (`checkpoint`) when
    it starts and completes later (`checkpoint_complete`): a run killed in between resumes from the
    one before (session 8: the report named the unfinished one). A synchronous save (no `async`
    field, as in records written before it) is complete when logged. Since session 14 an async save
    writes its marker itself, before the loop logs `checkpoint_complete` (a step later at most): one
    killed in that window is complete on disk, and counted so when the run keeps its checkpoints."""
    done = {e.get("saved_step") for e in events if e.get("event") == "checkpoint_complete"}
    late = [e["step"] for e in events if e.get("event") == "checkpoint" and e.get("async") is True
            and isinstance(e.get("step"), int) and e["step"] not in done]
    done |= _complete_on_disk(run) if late else set()
    return [e["step"] for e in events if e.get("event") == "checkpoint" and isinstance(e.get("step"), int)
            and (e.get("async") is not True or e["step"] in done)]


def _complete_on_disk(run: Path) -> set[int]:
    """Steps of the complete checkpoints in the run's own checkpoint folder (COMPLETE.json and the sizes
    it lists); none for storage outside the run (the report reads the run directory alone)."""
    from pretrain.errors import UserError
    from pretrain.train import checkpoint as ck
    from pretrain.train.config import storage_in_run

    cfg = _run_config(run)
    where = (storage_in_run(run, cfg.checkpoint.storage) if cfg else None) or run / "checkpoints"
    try:
        if "://" in str(where) or not Path(where).resolve().is_relative_to(run.resolve()):
            return set()
        return {s for s, _, ok in ck.list_checkpoints(Path(where)) if ok}
    except (OSError, ValueError, UserError, untrusted.BadFile):  # a link out: the resume says it, not this
        return set()


def _trained(last: dict, events: list[dict]) -> str | None:
    """'2,000 steps in 3 h 12 min over 3 commands': the last step line's elapsed_s is the run's
    training time summed over the commands that trained it (kept in the checkpoint since session
    14; a failed attempt's replayed steps are not in it). The commands: the first and each resume
    from before that step (a rerun of a finished run, at its last step, trains nothing). None for a
    run logged before session 14, or a hostile value (a string, inf, a negative number)."""
    secs, step = last.get("elapsed_s"), last.get("step")
    if type(step) is not int or not _number(secs) or not 0 <= secs < 1e9:
        return None
    commands = 1 + sum(1 for e in events if e.get("event") == "resume"
                       and type(e.get("step")) is int and e["step"] < step)
    return f"{step:,} steps in {_duration(secs)} over {commands} command{'s' * (commands > 1)}"


def _duration(secs: float) -> str:
    """'3 h 12 min', '4 min 05 s', '12.3 s'."""
    if secs < 60:
        return f"{secs:.1f} s"
    s = int(round(secs))
    return f"{s // 3600} h {s // 60 % 60} min" if s >= 3600 else f"{s // 60} min {s % 60:02d} s"


def _resumes(events: list[dict], target: int | None) -> list[str]:
    """Restarts ('resume' events): each one replayed the steps after its checkpoint. A rerun of a
    finished run also logs one, at the target, and trains nothing ("nothing to do"): not a restart;
    nor is one from where train.stop_at stopped the run as planned (its `stop_at` event), unless it
    went back past damaged checkpoints or took more than one attempt (then something failed)."""
    extended = _extended_at(events)
    stopped = {e.get("step") for e in events if e.get("event") == "stop_at"}
    at = [str(e.get("step")) + _attempts(e) for e in events if e.get("event") == "resume"
          and not (target and isinstance(e.get("step"), int) and e["step"] >= target)
          and e.get("step") not in extended
          and not (e.get("step") in stopped and not e.get("passed_over") and e.get("attempts", 1) == 1)]
    if not at:
        return []
    times = "once" if len(at) == 1 else f"{len(at)} times"
    return [f"resumed {times}: at step{'s' if len(at) > 1 else ''} {', '.join(at)}"]


def _extended_at(events: list[dict]) -> set:
    """Steps where a finished run was continued with a larger train.steps (README: `--set
    train.steps=20`, later 30): a resume there is the user's plan, not a restart after a failure."""
    out = set()
    for e in events:
        changes, step = e.get("changes"), e.get("step")
        if e.get("event") != "config_change" or not isinstance(changes, dict) or type(step) is not int:
            continue
        steps = changes.get("train.steps")  # [before, now], from a file that may be hostile
        if isinstance(steps, list) and len(steps) == 2 and type(steps[0]) is int and steps[0] <= step:
            out.add(step)
    return out


def _damaged(events: list[dict]) -> list[str]:
    """Checkpoints a resume passed over because their bytes no longer matched their digests
    ('checkpoint_damaged'): the steps after the one it used were trained again."""
    return [f"checkpoint of step {e.get('damaged_step')} damaged ({str(e.get('file'))[:100]} changed after "
            f"its save): resumed from step {e.get('step')} instead" for e in events
            if e.get("event") == "checkpoint_damaged"]


def _attempts(event: dict) -> str:
    """Runs that resumed from the same checkpoint are one event with `attempts` (session 8): the
    failed ones trained nothing that was kept, so they are said, not counted as more restarts."""
    n = event.get("attempts")
    said = f" ({n} attempts)" if type(n) is int and n > 1 else ""
    layout = event.get("resharded")  # saved under another parallel layout (session 14)
    if isinstance(layout, str) and layout:
        said += f" (resharded: {untrusted.one_line(layout)[:100]})"
    skipped = [s for s in event.get("passed_over") or [] if type(s) is int]
    if skipped:  # newer checkpoints whose files did not match their marker or digests (session 10)
        said += (f" (step{'s' if len(skipped) > 1 else ''} {', '.join(map(str, skipped))} damaged: "
                 f"passed over)")
    return said


def _model(run: Path) -> str:
    """The model the run trained, as the trainer printed it: a preset's name, or an imported
    folder's family and size (`Qwen2-0.5B-like`), with its parameter count."""
    cfg = _run_config(run)
    try:
        from pretrain.train.model import resolve_shape

        shape = resolve_shape(cfg.model)
    except Exception:  # noqa: BLE001 - no config, or one of another version: the curves still stand
        return ""
    return note(f"model {shape.name}: {shape.params():,} parameters, {shape.n_layers} layers × "
                f"d_model {shape.d_model} (RUN/config.toml)")


def _settings(run: Path) -> str:
    """The run's settings that differ from the defaults (RUN/config.toml). Its model shape is spelled
    out there, so the defaults are spelled out with the same preset: the demo's page listed all 13
    fields of tiny-cpu (n_layers = 4, mlp = "swiglu", ...) as changed, though it set two of them."""
    try:
        import dataclasses

        from pretrain import config
        from pretrain.train.config import RunConfig
        from pretrain.train.model import resolve_shape
        from pretrain.train.record import resolved_config

        cfg = config.load(RunConfig, run / "config.toml")
        base = RunConfig()
        base = dataclasses.replace(base, model=dataclasses.replace(base.model, preset=cfg.model.preset))
        diff = config.changed(cfg, resolved_config(base, resolve_shape(base.model)))
    except Exception:  # noqa: BLE001 - a config of another version: the curves still stand
        return ""
    text = ", ".join(f"{k} = {json.dumps(v)}" for k, v in list(diff.items())[:40])
    return note(f"settings changed from the defaults (RUN/config.toml): {text or 'none'}")


def _what(e: dict) -> str:
    if e["event"] == "rollback" and "from_step" in e:
        skipped = [s for s in e.get("passed_over") or [] if type(s) is int]
        return (f"rollback from step {e['from_step']} to {e.get('to_step')}, "
                f"skipping batches {e.get('skip_batches')}"
                + (f" (step{'s' if len(skipped) > 1 else ''} {', '.join(map(str, skipped))} damaged: "
                   "passed over)" if skipped else ""))
    if e["event"] == "rollback_limit":
        return (f"a persistent spike at step {e.get('step')} after {e.get('rollbacks')} rollbacks: "
                f"stability.max_rollbacks reached, the run stopped")
    return f"{e['event']} at step {e.get('step')}" + (f" (loss {e['loss']:.3f})" if "loss" in e else "")


def _curves(train: list[dict], evals: list[dict], marked: list[dict]) -> str:
    p = plt()
    fig, axes = p.subplots(1, 3, figsize=(13, 3.6))
    x = [r["step"] for r in train]
    ax = axes[0]
    ax.plot(x, [r["loss"] for r in train], lw=1, label="train")
    if evals:
        ax.plot([r["step"] for r in evals], [r["eval_loss"] for r in evals], "o-", ms=3, label="held-out")
    for i, e in enumerate(marked):
        step = e.get("step", e.get("from_step"))
        if step is not None:
            ax.axvline(step, color="#b3261e", ls="--", lw=0.9, label="spike / rollback" if i == 0 else None)
    ax.set_title("loss" + ("" if marked else " (no spikes)"))
    ax.set_ylabel("cross-entropy (nats/token)")
    ax.legend(fontsize=8)
    axes[1].plot(x, [r.get("lr", 0) for r in train], color="#2e7d32")
    axes[1].set_title("learning rate")
    axes[1].set_ylabel("learning rate")
    axes[2].plot(x, [r.get("grad_norm", 0) for r in train], color="#6a1b9a", lw=1)
    axes[2].set_title("gradient norm (before clipping)")
    axes[2].set_ylabel("global L2 norm")
    for a in axes:
        a.set_xlabel("step")
    fig.tight_layout()
    return fig_to_img(fig, "training curves")


def _evaluations(run: Path, evals: list[dict]) -> str:
    """In-loop task curves (`eval_tasks` events of metrics.jsonl: {"TASK/METRIC": value}) and the
    newest result file of RUN/eval/ (schema pretrain.eval/1, from `pretrain eval` or the loop)."""
    parts = []
    series: dict[str, list[tuple[int, float]]] = {}
    for r in evals:  # eval_loss is on the loss curve already; other in-loop metrics get their own
        for k, v in r.items():
            if k not in ("step", "event", "eval_loss") and _number(v):
                series.setdefault(k, []).append((r.get("step", 0), float(v)))
    if series:
        parts.append(_inloop_figure(series))
    files = sorted((run / "eval").glob("*.json")) if (run / "eval").is_dir() else []
    if files:
        try:
            results = "1 result file" if len(files) == 1 else f"{len(files)} result files"
            parts.append(note(f"{files[-1].name} (newest of {results})")
                         + eval_table(untrusted.load_json(files[-1], within=run), files[-1], run))
        except (ValueError, OSError, AttributeError, TypeError) as e:
            parts.append(note(f"{files[-1].name}: unreadable ({e})"))
    if not parts:
        held = "the held-out loss is on the loss curve; " if any("eval_loss" in r for r in evals) else ""
        return "<h3>Evaluations</h3>" + note(f"{held}no task evaluations in this run (`pretrain eval`)")
    return "<h3>Evaluations</h3>" + "".join(parts)


def _inloop_figure(series: dict[str, list[tuple[int, float]]]) -> str:
    """One panel per metric (TASK/METRIC keys grouped by METRIC): perplexities in the hundreds
    would flatten accuracies near 0.25 on a shared axis."""
    by_metric: dict[str, list[str]] = {}
    for k in sorted(series):
        by_metric.setdefault(k.rsplit("/", 1)[-1], []).append(k)
    metrics = list(by_metric)[:6]
    p = plt()
    fig, axes = p.subplots(1, len(metrics), figsize=(min(12, 3.2 * len(metrics) + 1), 2.8), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        tasks = by_metric[metric]
        for k in tasks[:TASKS_DRAWN]:  # the names are the run's: plain text, bounded (plot_label)
            pts = series[k]
            ax.plot([s for s, _ in pts], [v for _, v in pts], "o-", ms=3,
                    label=untrusted.plot_label(k.rsplit("/", 1)[0], 30))
        more = f" ({TASKS_DRAWN} of {len(tasks)} tasks)" if len(tasks) > TASKS_DRAWN else ""
        ax.set_title(untrusted.plot_label(metric, 40) + more, fontsize=9)
        ax.set_xlabel("step")
        ax.legend(fontsize=7)
    fig.suptitle("in-loop evaluations", fontsize=10)
    fig.tight_layout()
    return fig_to_img(fig, "in-loop evaluations")


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def eval_table(result: dict, path: Path | None = None, run: Path | None = None) -> str:
    """One row per task: kind, examples, shots, and its metrics with standard errors (lm-eval's names),
    after where the scores come from (`path`; see `_provenance`)."""
    rows, tasks = [], result.get("tasks") if isinstance(result.get("tasks"), dict) else {}
    for task, r in sorted((result.get("results") or {}).items()):
        metrics = r.get("metrics", r) if isinstance(r, dict) else {}
        cells = [f"{k} {v:.4f}" + _stderr(metrics.get(k + "_stderr"))
                 for k, v in metrics.items() if _number(v) and k in HEADLINE_METRICS]
        # pretrain.eval/1 keeps a task's kind, examples and shots under "tasks", its metrics under "results"
        about = tasks.get(task) if isinstance(tasks.get(task), dict) else {}
        rows.append([task, about.get("kind"), about.get("n"), about.get("shots"), "; ".join(cells)])
    model = result.get("model") if isinstance(result.get("model"), dict) else {}
    where = note(f"model {model.get('path')} at step {model.get('step')}") if model else ""
    head = ["task", "kind", "examples", "shots", "metrics"]
    body = table(head, rows, {2, 3}) if rows else note("no results")
    return where + _provenance(result, tasks, path, run) + body + _in_loop_note(result, tasks)


def _provenance(result: dict, tasks: dict, path: Path | None, run: Path | None) -> str:
    """Where the scores come from: the file (a number in it is what the file says, not a measurement
    of this report: its digests name what a score was computed from, and anyone can write them), the
    code that scored each task (`tasks[T].code`), and a file written for a model at another path (a
    run directory copied or handed over: `pretrain eval` there scores again rather than take it)."""
    lines = [f"scores as recorded in {path}; `pretrain eval --force` measures them again"] if path else []
    model = result.get("model") if isinstance(result.get("model"), dict) else {}
    if run is not None and model.get("path") not in (None, str(Path(run).resolve())):
        lines.append(f"this file was written for {model.get('path')}, not {Path(run).resolve()}: scores of a "
                     "copied or handed-over run directory, not measured here")
    def code(c) -> str:
        if isinstance(c, dict):
            return f"pretrain {c.get('pretrain')}, scoring {c.get('scoring')}"
        return "a version it did not record (before session 14)"

    codes = {code(t.get("code")) for t in tasks.values() if isinstance(t, dict)}
    if codes:
        lines.append(f"scored by {'; '.join(sorted(codes))}")
    return "".join(note(x) for x in lines)


def _eval_loss_note(evl: list[dict], run: Path) -> str:
    """What the "final eval loss" card is: the number had no word on the page (the demo printed it).
    None while log.eval_every asked for one: the run had no held-out data (session 10's walk)."""
    if not evl:
        cfg = _run_config(run)
        every = getattr(getattr(cfg, "log", None), "eval_every", 0)
        if type(every) is not int or every <= 0:
            return ""
        return (f"final eval loss: none, though log.eval_every = {every}: the run had no held-out data "
                "(data.eval_sources for token sources, data.eval_fraction of a text file).")
    return (f"final eval loss: the mean cross-entropy per token (nats, as the loss) of the run at step "
            f"{evl[-1].get('step')} on log.eval_batches batches of its held-out sources (data.eval_sources), "
            "every log.eval_every steps; exp of it is their perplexity.")


def _in_loop_note(result: dict, tasks: dict) -> str:
    """Which rows the trainer scored (log.eval_tasks: the live model under the run's autocast) and
    which `pretrain eval` scored (the checkpoint in fp32): one file can hold both, their last
    digits differ, and nothing in the table said which was which."""
    marks = {t: tasks[t].get("in_loop") for t in (result.get("results") or {})
             if isinstance(tasks.get(t), dict) and "in_loop" in tasks[t]}
    if not marks:
        return ""
    precision = sorted({str(m.get("precision")) if isinstance(m, dict) else "?" for m in marks.values()})
    others = len(marks) < len(result["results"])
    rest = "; the others by pretrain eval of the checkpoint, in fp32" if others else ""
    return note(f"scored in the training loop (log.eval_tasks; the live model in {'/'.join(precision)}): "
                f"{', '.join(sorted(marks))}{rest}")


def _stderr(v: Any) -> str:
    return f" ± {v:.4f}" if _number(v) else ""


def eval_section(path: Path, result: dict, sid: str) -> Section:
    body = eval_table(result, path)
    n = len(result.get("results") or {})
    return Section(sid, "Evaluation", "eval", str(path), body, [("tasks", n)])
