"""Reruns of `pretrain eval`: the tasks a result file already holds for this model, under the
settings each reads, are taken from it; the others are scored.

The file is rewritten (atomically) as each task finishes, each task with `inputs` (the digest of
the files it read), `settings` (those of shots, seed, limit, ppl_tokens it reads) and `code` (the
pretrain version and scoring format: eval/identity.py). A rerun on the same model (run + step +
checkpoint digest, or a folder's file digest) takes every task of its list whose recorded key equals
its own now, and scores only the rest: the same command after it finished scores nothing (and does
not load the model); killed after 5 of 6 tasks, it scores the sixth (killed inside one, it continues
there: eval/partial.py); `--tasks copa` then `--tasks copa,piqa` scores piqa. Each is said on stderr
(`copa: from OUT (same model, same settings); --force to score again`). Scored again, and said why:
an edited task file, other settings for that task, other code, a score recorded before the digests
(session 13), metrics that are not what the task's own records give (`consistent`), `--force`.
Never taken: a task the trainer scored in the loop (the live model in bf16; `pretrain eval` replaces
it with the checkpoint's fp32 score and prints both numbers). A file of another model is replaced,
naming the tasks scored again and those dropped.

A resumed or partly reused file equals a fresh run's, except the seconds: each task keeps the time of
the attempt that scored it, and the top-level `seconds` is their sum.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import xxhash

from pretrain.eval.identity import (
    MEMO,
    code_change,
    code_version,
    model_change,
    same_model,
    settings_change,
    task_name,
    task_settings,
)
from pretrain.eval.partial import Partial
from pretrain.eval.report import assemble, merge_previous, write_json


@dataclass
class Plan:
    """What a rerun takes from the earlier file and what it scores again despite a record."""

    taken: dict[str, dict] = field(default_factory=dict)  # spec -> result, as run_tasks returns one
    again: dict[str, str] = field(default_factory=dict)  # spec -> why its recorded score is not taken


def plan(old: dict | None, doc: dict, specs: list[str], inputs: dict[str, str], force: bool) -> Plan:
    """Which of `specs` the earlier file `old` answers for `doc`'s model and settings: per task, the
    same code, the settings that task reads and its files' bytes (eval/identity.py)."""
    out = Plan()
    if old is None or not same_model(old.get("model"), doc["model"]):
        return out
    for spec in specs:
        name = task_name(spec)
        metrics, info, examples = (old.get(part, {}).get(name) for part in ("results", "tasks", "examples"))
        if not _well_formed(metrics, info, examples):
            continue  # not there (or damaged: the file may be someone else's): scored, nothing to say
        if "in_loop" in info:
            continue  # the trainer's bf16 score: replaced, said with both numbers once scored
        if (why := _why_again(spec, info, doc["settings"], inputs, force)) is not None:
            out.again[spec] = why
        elif not consistent(metrics, info, examples):
            out.again[spec] = "its metrics are not what its examples give: edited?"
        else:
            out.taken[spec] = {"task": name, "metrics": metrics, "examples": examples,
                               **{k: v for k, v in info.items() if k not in ("task", "metrics", "examples")}}
    return out


def _why_again(spec: str, info: dict, settings: dict, inputs: dict[str, str], force: bool) -> str | None:
    """Why a recorded task is scored again, or None when its score stands for this command."""
    if force:
        return "--force"
    if "inputs" not in info:
        return "its score predates task file digests, session 13"
    if info.get("code") != code_version():
        return code_change(info.get("code"))
    now = task_settings(spec, settings)
    if now != info.get("settings") and not _same_examples(info, info.get("settings"), now):
        return settings_change(info.get("settings"), now)
    if info["inputs"] != inputs.get(spec):
        return "its task file changed since"
    return None


def _well_formed(metrics, info, examples) -> bool:
    """A recorded task the table can print: numbers where it prints numbers."""
    def number(x) -> bool:
        return isinstance(x, (int, float)) and not isinstance(x, bool)

    return (isinstance(metrics, dict) and all(number(v) for v in metrics.values()) and isinstance(info, dict)
            and isinstance(examples, list) and all(number(info.get(k)) for k in ("n", "shots"))
            and isinstance(info.get("kind"), str))


def _same_examples(info: dict, was: object, now: dict) -> bool:
    """Another --limit that reads the same examples of a benchmark: both at least the file's count
    (copa's 100 under --limit 500 and under none). The count is known when the recorded run was not
    cut by its limit: it read n examples plus those skipped (empty, too long; mem: reads --limit windows)."""
    from pretrain.eval.harness import SKIPS

    if info.get("kind") in ("ppl", "mem") or not isinstance(was, dict):
        return False
    if {k: v for k, v in was.items() if k != "limit"} != {k: v for k, v in now.items() if k != "limit"}:
        return False
    skipped = info.get("skipped") if isinstance(info.get("skipped"), dict) else {}
    read = info["n"] + sum(k for k in (skipped.get(r, 0) for r in SKIPS) if type(k) is int)  # of the file
    old, new = was.get("limit"), now.get("limit")
    if old is not None and (type(old) is not int or old <= read):
        return False  # perhaps cut at its limit: how many the file holds is not known
    return new is None or new >= read


def consistent(metrics: dict, info: dict, examples: list) -> bool:
    """Whether a recorded task's metrics are what its own records give (as `harness.aggregate` and
    `suite` compute them) and each multiple-choice record's acc what its log-likelihoods give: a
    number edited into `results` alone is not taken. Not a proof: whoever edits the records and
    computes the metrics again passes; only scoring again (--force) measures."""
    import math
    from types import SimpleNamespace

    import numpy as np

    from pretrain.eval.harness import aggregate

    kind = info["kind"]
    try:
        if kind == "ppl":
            nll, tokens, nbytes = metrics["nll"], metrics["tokens"], metrics["bytes"]
            return (math.isclose(metrics["perplexity"], math.exp(nll / tokens), rel_tol=1e-12)
                    and math.isclose(metrics["bits_per_byte"], nll / (max(1, nbytes) * math.log(2)),
                                     rel_tol=1e-12))
        if kind == "mem":
            hits = [bool(r["memorized"]) for r in examples]
            return info["n"] == len(hits) and metrics["memorized"] == sum(hits) / max(1, len(hits))
        if info["n"] != len(examples) or not all(isinstance(r, dict) for r in examples):
            return False
        for r in examples:
            if "lls" in r and "gold" in r and r["acc"] != float(int(np.argmax(r["lls"])) == r["gold"]):
                return False
        again = aggregate(SimpleNamespace(kind=kind), examples)
        return all(metrics.get(k) == v for k, v in again.items())
    except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError, OverflowError):
        return False


def plan_lines(p: Plan, specs: list[str], path: Path) -> list[str]:
    """What the rerun says before it scores (stderr)."""
    lines = []
    if p.taken:
        names = ", ".join(r["task"] for r in p.taken.values())
        lines.append(f"{names}: from {path} (same model, same settings); --force to score again")
    for why in dict.fromkeys(p.again.values()):
        names = ", ".join(task_name(s) for s, w in p.again.items() if w == why)
        lines.append(f"{names}: in {path}, scored again ({why})")
    rest = [task_name(s) for s in specs if s not in p.taken]
    if p.taken and rest:
        lines.append(f"scoring {len(rest)} of {len(specs)}: {', '.join(rest)}")
    return lines


class ResultFile:
    """Rank 0's writer: the merged file after every finished task. Says once, at the first write,
    which earlier results it replaced (another model or other settings), scored again or dropped."""

    def __init__(self, path: Path, info: dict, settings: dict, specs: list[str], old: dict | None,
                 done: dict[str, dict], inputs: dict[str, str]):
        self.path, self.info, self.settings, self.specs = path, info, settings, specs
        self.old, self.done, self.inputs = old, dict(done), inputs
        self.taken = set(done)
        self.said = False

    def add(self, spec: str, result: dict, seconds: float) -> None:
        self.done[spec] = {**result, "inputs": self.inputs.get(spec, ""),
                           "settings": task_settings(spec, self.settings), "code": code_version()}
        self._write(self.document())

    def partial(self, spec: str) -> Partial:
        """Where the chunks of `spec` are kept while it is scored (eval/partial.py), under the key
        a recorded score of it must match: the model, the settings it reads, its files, the code."""
        model = {k: v for k, v in self.info.items() if k not in MEMO or "digest" not in self.info}
        key = {"model": model, "settings": task_settings(spec, self.settings),
               "inputs": self.inputs.get(spec, ""), "code": code_version()}
        digest = xxhash.xxh3_128(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]
        return Partial(self.path.with_name(self.path.stem + ".partial.jsonl"), task_name(spec), digest)

    def finish(self) -> dict:
        doc = self.document()
        scored = [s for s in self.done if s not in self.taken]
        if scored or (self.old or {}).get("model") != doc["model"]:  # a folder's `files` memo, refreshed
            self._write(doc)
        again = [r["task"] for s, r in self.done.items() if s in scored and r["task"] in (self.old or {}).get(
            "results", {})]
        if not again or self.old is None or not same_model(self.old.get("model"), doc["model"]):
            return doc
        old_tasks = self.old.get("tasks") or {}
        in_loop = [t for t in again if isinstance(old_tasks.get(t), dict) and "in_loop" in old_tasks[t]]
        if in_loop:  # the trainer's scores of this step: not a rerun of this command
            print(replaced_in_loop(self.old, doc, in_loop, self.path), file=sys.stderr)
        return doc

    def document(self) -> dict:
        results = [self.done[s] for s in self.specs if s in self.done]
        seconds = sum(r.get("seconds", 0.0) for r in results)
        return merge_previous(assemble(self.info, self.settings, results, seconds), self.old)

    def _write(self, doc: dict) -> None:
        write_json(doc, self.path)
        other = self.old and self.old.get("results") and not same_model(self.old.get("model"), doc["model"])
        if other and not self.said:
            print(replaced_line(self.old, doc, self.specs, self.path), file=sys.stderr)
        self.said = True


def replaced_line(old: dict, doc: dict, specs: list[str], path: Path) -> str:
    """Another model's results replaced: why, and which of them this run scores for the new model
    and which are gone (`-o` keeps both files). Other settings replace only the tasks that read them
    (`plan` says so per task)."""
    from pretrain.untrusted import one_line

    why = model_change(old.get("model"), doc["model"])
    names = {task_name(s) for s in specs}
    before = [one_line(str(t))[:80] for t in old["results"]]
    again = [t for t in before if t in names]
    dropped = [t for t in before if t not in names]
    parts = ([f"{_names(again)} scored again for this one"] if again else []) + (
        [f"{_names(dropped)} dropped"] if dropped else [])
    return (f"replaced {path}: its earlier results were for {one_line(why)[:300]}: {'; '.join(parts)}; "
            "-o PATH keeps both")


def _names(names: list[str], most: int = 8) -> str:
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


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
