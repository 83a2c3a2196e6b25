"""What `pretrain report` holds of a run's metrics.jsonl: of each record, only what the page uses
(`Slim`, the `keep` hook of train.metrics.read_metrics), and how an event's value reads in words
(`say_value`, the Events table's cells). report_run.py draws the section.
"""

from __future__ import annotations

from typing import Any

# What the page reads of a record (session 14). Held whole, a metrics.jsonl of events with many short
# string fields took ~8.8x its size (100,000 events of 70 ten-character fields, 150 MB: 1.3 GB), and a
# trainer's step line ~830 bytes for its 146 (each line's keys are new strings: json memoizes keys
# within one document only). bench/bench_report_metrics.py prints both, before and after.
PLOTTED = ("step", "loss", "lr", "grad_norm", "tokens_per_s", "mfu", "eval_loss",
           "elapsed_s")  # numbers of a step the page uses (elapsed_s: the time trained, report_run._trained)
READ = ("step", "from_step", "to_step", "skip_batches", "passed_over", "rollbacks", "max_rollbacks",
        "loss", "async", "saved_step", "blocking_s", "attempts", "damaged_step", "file", "reason")
EVENTS_SHOWN = 60  # the Events table's rows: those events keep every field, as the table says them
SERIES = 256  # in-loop metric names held (TASK/METRIC): the figure draws 6 metrics x 10 tasks (report_run)
TEXT = 400  # characters of a string held: the Events table's cell is cut at 400 (`_detail`)


class Slim:
    """`keep` for train.metrics.read_metrics: of each record, what the page uses, with the key
    strings shared between records. A step: its PLOTTED numbers (a non-finite one, written "nan",
    as a float) and its split. An eval record: its numbers, under at most SERIES names. Other
    events: the first EVENTS_SHOWN (the Events table) with every field, strings cut to TEXT
    characters and nested values as the table writes them; the rest with the READ fields the page
    counts from, and a config_change's train.steps. The newest `data` event is kept aside
    (`data`), not returned."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {k: k for k in (*PLOTTED, *READ, "event", "split", "changes")}
        self.series: dict[str, str] = {}
        self.shown = 0
        self.data: dict | None = None

    def name(self, key: Any) -> str:
        """The shared copy of `key` (cut to TEXT characters); 4,096 names are shared at most."""
        key = str(key)[:TEXT]
        got = self.names.get(key)
        if got is None and len(self.names) < 4096:
            got = self.names[key] = key
        return got or key

    def __call__(self, rec: dict) -> dict | None:
        event = rec.get("event")
        if event is None and "eval_loss" not in rec:
            out = {self.names[k]: _finite(rec[k]) for k in PLOTTED if _plotted(rec.get(k))}
            if isinstance(rec.get("split"), str):
                out["split"] = self.name(rec["split"])
            return out
        if event is None or event in ("eval", "eval_tasks"):
            return self._numbers(rec, event)
        if event == "data":  # only the newest is read (`_data`): held aside, added after the last line
            self.data = {"event": "data", "step": rec.get("step"), "sources": rec.get("sources")}
            return None
        self.shown += 1
        if self.shown <= EVENTS_SHOWN:
            return {self.name(k): self._text(v, k) for k, v in rec.items()}
        out = {self.names[k]: self._text(rec[k], k) for k in READ if k in rec}
        out["event"] = self.name(event)
        changes = rec.get("changes")
        if event == "config_change" and isinstance(changes, dict) and "train.steps" in changes:
            out["changes"] = {"train.steps": changes["train.steps"]}
        return out

    def _numbers(self, rec: dict, event: str | None) -> dict:
        out = {} if event is None else {"event": self.name(event)}
        if isinstance(rec.get("split"), str):
            out["split"] = self.name(rec["split"])
        for k, v in rec.items():
            if not _number(v):
                continue
            k = k[:TEXT]
            key = self.names.get(k) or self.series.get(k)
            if key is None and len(self.series) < SERIES:
                key = self.series[k] = k
            if key is not None:
                out[key] = v
        return out

    def _text(self, v: Any, key: str) -> Any:
        if isinstance(v, str):
            return v[:TEXT]
        if isinstance(v, list) and key in READ:  # steps skipped or passed over: the page lists a few
            return v[:64]
        if isinstance(v, dict | list) and key not in READ and key != "changes":
            return say_value(v)[:TEXT]  # as the Events table writes it
        return v


def _plotted(v: Any) -> bool:
    return _number(v) or v in ("nan", "inf", "-inf")  # the trainer writes a non-finite float so


def _finite(v: Any) -> float | int:
    return float(v) if isinstance(v, str) else v


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def say_value(v: Any, depth: int = 0) -> str:
    """One value of an event in words (`_detail`)."""
    if isinstance(v, dict | list) and depth > 16:  # someone else's log nested deeper than a trainer's
        return "…"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {say_value(x, depth + 1)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(say_value(x, depth + 1) for x in v) + "]"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.5g}"  # as the trainer rounds event values (metrics.significant)
    return str(v)
