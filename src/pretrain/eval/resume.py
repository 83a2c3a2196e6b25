"""Resuming `pretrain eval` after a kill: the result file is rewritten as each task finishes, with a
`resume` block naming the command's tasks and inputs; a rerun of the same command on the same model
with the same settings takes the tasks already scored from it (those whose file is unchanged) and
scores the rest.

The block is dropped by the final write, so a resumed run's file equals an uninterrupted run's,
except the seconds: each task keeps the time of the attempt that scored it, and the top-level
`seconds` is their sum (the killed attempt's unfinished task is not counted). A file from another
model, other settings or another task list is not resumed; the merge rule of `report.merge_previous`
applies to it as before.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pretrain.eval.report import assemble, merge_previous, same_model_and_settings, write_json


def task_inputs(specs: list[str], benchmarks: str | None) -> dict[str, str]:
    """Size and modification time of each task's files (a folder: of its files; MMLU: the scored
    split and the dev split its few-shot examples come from): a task file edited, added or removed
    between the kill and the rerun is scored again, not taken from the earlier attempt."""
    from pretrain.eval.tasks import KNOWN, MMLU_DEV

    out = {}
    for spec in specs:
        if spec in KNOWN:
            files = [Path(benchmarks or "") / KNOWN[spec]]
            if spec.startswith("mmlu"):
                files.append(Path(benchmarks or "") / MMLU_DEV)
        else:
            files = [Path(spec[4:] if spec[:4] in ("ppl:", "mem:") else spec)]
        out[spec] = "+".join(_fingerprint(p) for p in files)
    return out


def _fingerprint(p: Path) -> str:
    from pretrain.eval.report import folder_fingerprint

    try:
        st = p.stat()
        return folder_fingerprint(p) if p.is_dir() else f"{st.st_size}:{st.st_mtime_ns}"
    except OSError:
        return ""


def scored_before(old: dict | None, doc: dict, command: dict) -> dict[str, dict]:
    """{spec: result} for the tasks an interrupted run of the same `command` finished, as
    `run_tasks` returned them; empty unless `old` is that run's partial file for this model and
    these settings (`doc` holds the model and settings)."""
    block = old.get("resume") if isinstance(old, dict) else None
    if not isinstance(block, dict) or not same_model_and_settings(old, doc):
        return {}
    def rest(c: dict) -> dict:
        return {k: v for k, v in c.items() if k not in ("done", "inputs")}

    if rest(block) != rest(command) or not isinstance(block.get("done"), dict):
        return {}
    inputs = block.get("inputs") if isinstance(block.get("inputs"), dict) else {}
    out = {}
    for spec, name in block["done"].items():  # a task whose file was edited since is scored again
        if spec not in command["specs"] or not isinstance(name, str):
            continue
        if inputs.get(spec) != command["inputs"][spec]:
            continue
        metrics, info, examples = (old[part].get(name) for part in ("results", "tasks", "examples"))
        if isinstance(metrics, dict) and isinstance(info, dict) and isinstance(examples, list):
            out[spec] = {"task": name, "metrics": metrics, "examples": examples,
                         **{k: v for k, v in info.items() if k not in ("task", "metrics", "examples")}}
    return out


class ResultFile:
    """Rank 0's writer: the merged file after every finished task (with the `resume` block), then
    the final one without it. Says once, at the first write, which earlier tasks it replaced."""

    def __init__(self, path: Path, info: dict, settings: dict, command: dict, old: dict | None,
                 done: dict[str, dict], seconds_before: float):
        self.path, self.info, self.settings, self.command = path, info, settings, command
        self.old, self.done, self.seconds_before = old, dict(done), seconds_before
        self.before = list((old or {}).get("results") or {})
        self.taken = set(done)  # resumed: not scored again
        self.said = False

    def add(self, spec: str, result: dict, seconds: float) -> None:
        self.done[spec] = result
        doc = self.document(seconds)
        doc["resume"] = {**self.command, "done": {s: r["task"] for s, r in self.done.items()}}
        self._write(doc)

    def finish(self, seconds: float) -> dict:
        doc = self.document(seconds)
        self._write(doc)
        again = [r["task"] for s, r in self.done.items() if s not in self.taken and r["task"] in self.before]
        if not again or self.old is None or not same_model_and_settings(self.old, doc):
            return doc
        old_tasks = self.old.get("tasks") or {}
        in_loop = [t for t in again if isinstance(old_tasks.get(t), dict) and "in_loop" in old_tasks[t]]
        if in_loop:  # the trainer's scores of this step: not a rerun of this command
            print(replaced_in_loop(self.old, doc, in_loop, self.path), file=sys.stderr)
        again = [t for t in again if t not in in_loop]
        if again:  # a rerun of a finished command scores again: say so, rather than let it pass for a cache
            print(f"scored again: {', '.join(again)} (already in {self.path}, now replaced; only an "
                  "interrupted evaluation is resumed)", file=sys.stderr)
        return doc

    def document(self, seconds: float) -> dict:
        results = [self.done[s] for s in self.command["specs"] if s in self.done]
        doc = assemble(self.info, self.settings, results, self.seconds_before + seconds)  # per task if known
        return merge_previous(doc, self.old)

    def _write(self, doc: dict) -> None:
        lost = [t for t in self.before if t not in doc["results"]]
        write_json(doc, self.path)
        if lost and not self.said:  # not silently: in-loop results (limit 200) replaced by another eval
            print(f"replaced {self.path}: its earlier results ({', '.join(lost)}) were for another model "
                  "or other settings; -o PATH keeps both", file=sys.stderr)
        self.said = True


DTYPES = ("fp32", "bf16", "fp16", "fp8")  # precision.dtype's choices (train/config.py)
# the number a line shows per task: the first of these its results hold
HEADLINE = ("acc", "exact_match", "bits_per_byte", "memorized", "perplexity")


def replaced_in_loop(old: dict, doc: dict, tasks: list[str], path: Path) -> str:
    """The line for tasks the trainer had scored at this step (`log.eval_tasks`, the live model under
    the run's autocast) that this evaluation of the checkpoint replaces: both numbers, so the two
    evaluations are seen to agree (or not) rather than one silently taking the other's place."""
    marks = [old["tasks"][t]["in_loop"] for t in tasks]
    # the file may be someone else's: only a dtype we know reaches the terminal
    precision = {x.get("precision") if isinstance(x, dict) and x.get("precision") in DTYPES else "?"
                 for x in marks}
    shown = []
    for t in tasks:
        before, now = (old.get("results") or {}).get(t), doc["results"].get(t) or {}
        before = before if isinstance(before, dict) else {}
        m = next((m for m in HEADLINE if _number(before.get(m)) and _number(now.get(m))), None)
        shown.append(f"{t} {m} {before[m]:.4f} -> {now[m]:.4f}" if m else t)
    step = (doc.get("model") or {}).get("step")
    return (f"replaced the in-loop scores of step {step} in {path} (the live model during training, in "
            f"{'/'.join(sorted(precision))}; these are the checkpoint's, in fp32; metrics.jsonl keeps the "
            f"in-loop ones): {', '.join(shown)}")


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)
