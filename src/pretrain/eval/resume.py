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
        if again and self.old is not None and same_model_and_settings(self.old, doc):
            # a rerun of a finished command scores again: say so, rather than let it pass for a cache
            # the training loop's log.eval_tasks writes this file too: on the demo's first run the
            # "earlier" scores are the loop's last evaluation, which a newcomer did not ask for
            by = ("the training loop's evaluation of this step or an earlier pretrain eval"
                  if self.info.get("kind") == "run" else "an earlier pretrain eval")
            print(f"scored again: {', '.join(again)} (already in {self.path}, from {by}; now replaced; "
                  "only an interrupted evaluation is resumed)", file=sys.stderr)
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
