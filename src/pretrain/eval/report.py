"""The eval result file and its table.

Schema `pretrain.eval/1` (one JSON object; RUN/eval/step_NNNNNNN.json for a run):
    {"schema": "pretrain.eval/1", "model": {"path", "kind": "run" | "hf", "step", "files"?, "tokenizer"?},
     "settings": {"shots", "seed", "limit", "ppl_tokens", "world_size"},  # the latest command's
     "seconds": float,
     "results": {TASK: {METRIC: number}},          # acc, acc_stderr, acc_norm, ..., perplexity, bits_per_byte
     "tasks": {TASK: {"kind", "n", "shots", "seed", "path", "skipped": {reason: count}, "seconds",
                      "inputs"?: digest of the task's files,  # eval/identity.py: a rerun reuses the score
                      "settings"?: {the settings it reads}, "code"?: {"pretrain", "scoring"},
                      "in_loop"?: {"precision"}}},   # in_loop: scored by the trainer (log.eval_tasks)
     "examples": {TASK: [{"i", "lls" | "generation", "acc", ...}, ...]}}
`model.checkpoint` (a run) digests the checkpoint's marker, `model.digest` (a Hugging Face folder) its
files' bytes, `model.files` fingerprints them by name, size, time and inode (`folder_fingerprint`,
the shortcut to `digest`); `model.tokenizer` is a --tokenizer given (`tokenizer_digest` its bytes).
What they mean for a rerun: eval/identity.py. Metric names
are lm-evaluation-harness's; a task has only the metrics its kind defines. `results` holds numbers
only, so a reader can tabulate it without knowing the kinds (pretrain report does).
`tasks[T].seconds` is the time spent scoring task T, by whichever run scored it; the top-level
`seconds` is their sum over the file's tasks, so a file that merged tasks from several runs (or a
resumed one) states the time behind all its results, not only the latest run's. A task kept from
a file written before per-task seconds (session 8) has none; its run's total is then added when
every task of that file is kept (else its time is unknown and left out).
"""

from __future__ import annotations

import json
from pathlib import Path

SCHEMA = "pretrain.eval/1"
SHOWN = ("acc", "acc_norm", "exact_match", "perplexity", "bits_per_byte", "memorized")


def assemble(model: dict, settings: dict, task_results: list[dict], seconds: float) -> dict:
    results, tasks, examples = {}, {}, {}
    for r in task_results:
        name = r["task"]
        results[name] = dict(r["metrics"])
        keys = ("kind", "n", "shots", "seed", "path", "skipped", "seconds", "inputs", "settings", "code",
                "in_loop")
        tasks[name] = {k: r[k] for k in keys if k in r}
        examples[name] = r.get("examples", [])
    if task_results and all("seconds" in t for t in tasks.values()):  # the time behind these results
        seconds = sum(t["seconds"] for t in tasks.values())
    return {"schema": SCHEMA, "model": model, "settings": settings, "seconds": round(seconds, 3),
            "results": results, "tasks": tasks, "examples": examples}


def folder_fingerprint(folder: str | Path) -> str:
    """Name, size, modification time and inode of each file in `folder`, hashed: `export --format hf`
    (or save_pretrained) into the same folder again changes it, so an earlier evaluation of the old
    model is not merged with one of the new. Not a content hash (reading a 5 GB model to decide
    whether to keep a small file is not worth it); a copy of the same model counts as another."""
    import hashlib

    h = hashlib.sha256()
    for f in sorted(Path(folder).iterdir()):
        if f.is_file():
            st = f.stat()
            h.update(f"{f.name}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}\n".encode())
    return h.hexdigest()[:16]


def read_previous(path: str | Path) -> dict | None:
    """The earlier result file at `path` when it is one (None when absent, damaged or another schema)."""
    from pretrain.untrusted import load_json

    path = Path(path)
    if not path.exists():
        return None
    try:  # RUN/eval/ travels with a run directory: nested 100,000 deep was a RecursionError
        old = load_json(path)
    except ValueError:
        return None
    if not isinstance(old, dict) or old.get("schema") != SCHEMA:
        return None
    if not all(isinstance(old.get(part, {}), dict) for part in ("results", "tasks", "examples")):
        return None  # a damaged earlier file is replaced, not merged
    return old


def merge_previous(doc: dict, previous: str | Path | dict | None) -> dict:
    """Keep the tasks an earlier evaluation of the same model wrote (`previous`: its path, or the file
    as `read_previous` returned it): `--tasks copa` then `--tasks arc_easy --limit 50` leaves both,
    each with the settings it was scored with (`tasks[T].settings`); a task run again is replaced."""
    from pretrain.eval.identity import same_model

    old = previous if isinstance(previous, dict) or previous is None else read_previous(previous)
    if old is None or not same_model(old.get("model"), doc["model"]):
        return doc
    merged = dict(doc)
    for part in ("results", "tasks", "examples"):  # in the file's order: a task scored again keeps its row
        earlier = old.get(part) or {}
        merged[part] = {k: doc[part][k] if k in doc["results"] else v for k, v in earlier.items()}
        merged[part].update({k: v for k, v in doc[part].items() if k not in merged[part]})
    merged["seconds"] = round(doc["seconds"] + _kept_seconds(old, doc), 3)
    return merged


def _kept_seconds(old: dict, doc: dict) -> float:
    """The scoring time of the earlier file's tasks that the merge keeps (see the module docstring)."""
    def num(x) -> float:  # the file is someone else's: a number, or nothing
        return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0 else 0.0

    tasks = {k: v for k, v in (old.get("tasks") or {}).items() if isinstance(v, dict)}
    kept = [v for k, v in tasks.items() if k not in doc["results"]]
    if any("seconds" in v for v in tasks.values()):
        return sum(num(v.get("seconds")) for v in kept)
    return num(old.get("seconds")) if kept and len(kept) == len(tasks) else 0.0


def write_json(doc: dict, path: str | Path) -> Path:
    """Atomic and durable (temporary file, fsync, rename): a kill leaves the old file or the new."""
    from pretrain.curate.io import write_bytes_atomic

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(path, (json.dumps(doc, indent=1) + "\n").encode())
    return path


def table(doc: dict) -> str:
    """Plain-text table: one line per task, the headline metrics with their standard errors (task
    names come from file names and result files: printed without escape sequences)."""
    from pretrain.untrusted import one_line

    head = f"{'task':<20} {'kind':<7} {'n':>6} {'shots':>5}  metrics"
    lines = [head, "-" * len(head)]
    for name, m in doc["results"].items():
        r = doc["tasks"].get(name, {"kind": "?", "n": 0, "shots": 0})
        cells = []
        for k in SHOWN:
            if k in m:
                err = m.get(f"{k}_stderr")
                cells.append(f"{k} {m[k]:.4f}" + (f" ±{err:.4f}" if err is not None else ""))
        who = f"{one_line(name):<20} {one_line(str(r['kind'])):<7}"
        lines.append(f"{who} {r['n']:>6} {r['shots']:>5}  " + "  ".join(cells))
    return "\n".join(lines)
