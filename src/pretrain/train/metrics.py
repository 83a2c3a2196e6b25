"""What a run reports: RUN/metrics.jsonl (one JSON line per step, events as lines with an "event"
field), TensorBoard scalars, and model FLOPs utilization from pretrain.plan's FLOPs per token.

MFU = tokens/s * FLOPs per token / peak FLOP/s (PaLM, Chowdhery et al. 2022, appendix B), where FLOPs
per token = 6N + 12 L d s comes from plan.compute (N as the planner counts it: every parameter).
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path


def flops_per_token(shape, seq_len: int | None = None) -> float:
    """Training FLOPs per token: plan.compute's formula when the planner is installed."""
    try:
        from pretrain.plan.compute import flops_per_token as plan_fpt

        return float(plan_fpt(shape, seq_len))
    except ImportError:
        s = seq_len or shape.seq_len
        n = shape.params() if hasattr(shape, "params") else 0
        return 6.0 * n + 12.0 * shape.n_layers * getattr(shape, "q_dim", shape.d_model) * s


def mfu(tokens_per_s: float, fpt: float, peak_flops: float) -> float | None:
    if peak_flops <= 0:
        return None
    return tokens_per_s * fpt / peak_flops


def _clean(v):
    """JSON has no inf/NaN: write them as strings so every line stays parseable."""
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v


def significant(v, digits: int = 5):
    """Floats (in dicts and lists too) to `digits` significant digits, for events: a median of
    5.123400000001 reads as 5.1234 in the record, the terminal and the report alike. Whole numbers
    stay whole (an fp16 loss scale of 131072.0 is not 131070)."""
    if isinstance(v, float) and math.isfinite(v) and not v.is_integer():
        return float(f"{v:.{digits}g}")
    if isinstance(v, dict):
        return {k: significant(x, digits) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [significant(x, digits) for x in v]
    return v


class Metrics:
    """Appends step records and events; only rank 0 writes.

    `rewind_to=N` (a resume from step N) first drops every line after step N from metrics.jsonl and
    has TensorBoard purge its points from step N+1 on (SummaryWriter's purge_step), so a run killed,
    resumed or rolled back keeps one value per step; `explained` events (a spike) written before the
    last kept line stay (see _drop_after).
    """

    def __init__(self, run_dir: str | Path, tensorboard: bool = True, enabled: bool = True,
                 rewind_to: int | None = None, explained: tuple = ()):
        self.enabled, self.use_tb = enabled, tensorboard
        self.path = Path(run_dir) / "metrics.jsonl"
        self.tb = None
        if not enabled:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if rewind_to is not None:
            _drop_after(self.path, rewind_to, (), kept_before=explained)
        self.file = open(self.path, "a")
        self._open_tb(None if rewind_to is None else rewind_to + 1)

    def _open_tb(self, purge_step: int | None) -> None:
        if self.use_tb:
            from torch.utils.tensorboard import SummaryWriter

            folder = self.path.parent / "tensorboard"
            if purge_step is not None:
                _after_newest_event_file(folder)
            self.tb = SummaryWriter(log_dir=str(folder), purge_step=purge_step)

    def rewind(self, step: int, keep_events: tuple = ()) -> None:
        """Back to `step` (a rollback): drop later lines except the named events, purge TensorBoard."""
        if not self.enabled:
            return
        self.file.close()
        _drop_after(self.path, step, keep_events)
        self.file = open(self.path, "a")
        if self.tb is not None:
            self.tb.close()
            self._open_tb(step + 1)

    def resumed(self, step: int, **extra) -> int:
        """Log one `resume` event at `step` with `attempts`: how many runs resumed from this checkpoint.
        Each attempt from the same step replaced the steps after it, so a run restarted four times
        after a hang was four lines that the report counted as four restarts (run-it-twice review,
        session 8); earlier lines at this step (`attempts` 1 when absent) are folded into this one.
        `extra`: `passed_over`, the newer checkpoints not used because their files were damaged."""
        if not self.enabled:
            return 0
        self.file.close()
        attempts = 1 + _take_events(self.path, "resume", step)
        self.file = open(self.path, "a")
        self.event("resume", step, attempts=attempts, **extra)
        return attempts

    def _write(self, rec: dict) -> None:
        self.file.write(json.dumps({k: _clean(v) for k, v in rec.items()}) + "\n")
        self.file.flush()  # one complete line per step even if the process is killed

    def step(self, rec: dict) -> None:
        if not self.enabled:
            return
        self._write(rec)
        if self.tb is not None:
            for k, v in rec.items():
                if k != "step" and isinstance(v, (int, float)) and v is not None:
                    self.tb.add_scalar(f"train/{k}", v, rec["step"])

    def event(self, name: str, step: int, **fields) -> None:
        if not self.enabled:
            return
        self._write({"event": name, "step": step, **fields})
        if self.tb is not None and name == "eval" and "eval_loss" in fields:
            self.tb.add_scalar("eval/loss", fields["eval_loss"], step)
        if self.tb is not None and name == "eval_tasks":  # {"TASK/METRIC": value}
            for k, v in fields.items():
                self.tb.add_scalar(f"eval/{k}", v, step)

    def close(self) -> None:
        if self.enabled:
            self.file.close()
            if self.tb is not None:
                self.tb.close()


def parse_line(line: str | bytes) -> dict | None:
    """One metrics.jsonl record, or None for a line that is not one: torn by a kill, or hostile (the
    file travels with a run directory: nested 100,000 deep, or JSON that is not an object)."""
    try:
        rec = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(rec, dict):
        return None
    step = rec.get("step", 0)  # every line we write has a numeric step (or none): "x" or {} is not ours
    return rec if isinstance(step, int | float) and not isinstance(step, bool) else None


def read_metrics(path: str | Path, within: str | Path | None = None, max_values: int | None = None,
                 keep: Callable[[dict], dict | None] | None = None) -> tuple[list[dict], list[dict]]:
    """(step records, events) from a metrics.jsonl; a torn last line (killed writer) is ignored,
    and so is a hostile one: invalid UTF-8, over 8 MiB (read through, never held), not an object.
    `within`: the run directory the file must stay inside (a symlink to /dev/zero is refused).
    `max_values`: the JSON values every record held may hold together (`untrusted.json_elements`
    of each line kept, counted over the whole file before a record is held), else `BadFile`
    naming the line: a trainer's line holds ~8 values in ~146 bytes, while a line of `{},{},...`
    holds one in 3 bytes and 72 bytes of Python objects each (99 MB of them held 2.3 GB).
    `keep(record)`: what of each record is held (None: nothing), before the next line is read."""
    from pretrain import untrusted

    untrusted.check_file(path, within)
    if max_values is not None:  # a first pass that holds nothing: a refused file held no record
        for _ in _counted_lines(path, max_values):
            pass
    steps, events = [], []
    for line in _counted_lines(path, max_values):  # counted again: a live run's file grows
        if (rec := parse_line(line)) is not None and (keep is None or (rec := keep(rec)) is not None):
            (events if "event" in rec else steps).append(rec)
    return steps, events


def _counted_lines(path: str | Path, max_values: int | None) -> Iterator[bytes]:
    """The lines of a metrics.jsonl (see `read_metrics`); `BadFile` at the line that passes
    `max_values` JSON values in all."""
    from pretrain import untrusted

    held = 0
    with open(path, "rb") as f:
        for lineno, line in untrusted.lines(f):
            if max_values is not None:
                held += untrusted.json_elements(line)
                if held > max_values:
                    raise untrusted.BadFile(
                        f"{path}: line {lineno}: over {max_values:,} JSON values (commas and brackets) in "
                        "the lines so far; not a trainer's metrics (~8 a line), refusing to hold them")
            yield line


def _drop_after(path: Path, step: int, keep_events: tuple, kept_before: tuple = ()) -> None:
    """Rewrite metrics.jsonl without the lines of steps after `step` (and a torn last line), atomically.
    `keep_events` stay wherever they are; `kept_before` only above the last line of a step <= `step`:
    a resume after a rollback keeps the spike that explains it (logged at the spike's step, before the
    rollback line at the restored step), while a spike of the killed steps after it is dropped and
    logged again when the step is replayed."""
    if not path.is_file():
        return
    from pretrain import untrusted

    last = -1
    if kept_before:
        with open(path, "rb") as src:
            for i, line in untrusted.lines(src):
                if (rec := parse_line(line)) is not None and rec.get("step", 0) <= step:
                    last = i
    tmp = path.with_name(path.name + ".tmp")
    with open(path, "rb") as src, open(tmp, "wb") as dst:  # bytes: a line of bad UTF-8 is dropped, not fatal
        for i, line in untrusted.lines(src):
            if (rec := parse_line(line)) is None:
                continue
            kind = rec.get("event")
            if rec.get("step", 0) <= step or kind in keep_events or (kind in kept_before and i < last):
                dst.write(line if line.endswith(b"\n") else line + b"\n")
    tmp.replace(path)


def _take_events(path: Path, name: str, step: int) -> int:
    """Remove the `name` events at `step` from metrics.jsonl (atomically); their summed `attempts`."""
    if not path.is_file():
        return 0
    from pretrain import untrusted

    taken = 0
    tmp = path.with_name(path.name + ".tmp")
    with open(path, "rb") as src, open(tmp, "wb") as dst:
        for _, line in untrusted.lines(src):
            if (rec := parse_line(line)) is None:
                continue
            if rec.get("event") == name and rec.get("step") == step:
                n = rec.get("attempts", 1)
                taken += n if type(n) is int and 0 < n < 1_000_000 else 1  # a hostile file's number
                continue
            dst.write(line if line.endswith(b"\n") else line + b"\n")
    tmp.replace(path)
    return taken


def _after_newest_event_file(folder: Path) -> None:
    """Wait (< 1 s) until the clock is past the newest event file's second. TensorBoard reads a
    folder's files in name order, `events.out.tfevents.<seconds>.<host>.<pid>.<counter>`: a file
    opened in the same second sorts by its counter as text (".10" before ".9"), and a purge record
    read before the points it should purge purges nothing."""
    newest = max((int(m.group(1)) for f in folder.glob("events.out.tfevents.*")
                  if (m := re.match(r"events\.out\.tfevents\.(\d+)\.", f.name))), default=0)
    while int(time.time()) <= newest:
        time.sleep(0.05)

