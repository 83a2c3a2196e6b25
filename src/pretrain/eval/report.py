"""The eval result file and its table.

Schema `pretrain.eval/1` (one JSON object; RUN/eval/step_NNNNNNN.json for a run):
    {"schema": "pretrain.eval/1", "model": {"path", "kind": "run" | "hf", "step"},
     "settings": {"shots", "seed", "limit", "world_size"}, "seconds": float,
     "results": {TASK: {"kind", "n", "shots", "path", "skipped": {reason: count},
                        "metrics": {"acc", "acc_stderr", "acc_norm", ..., "perplexity", "bits_per_byte"}}},
     "examples": {TASK: [{"i", "lls" | "generation", "acc", ...}, ...]}}
Metric names are lm-evaluation-harness's; a task has only the metrics its kind defines.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

SCHEMA = "pretrain.eval/1"
SHOWN = ("acc", "acc_norm", "exact_match", "perplexity", "bits_per_byte", "memorized")


def assemble(model: dict, settings: dict, task_results: list[dict], seconds: float) -> dict:
    results, examples = {}, {}
    for r in task_results:
        examples[r["task"]] = r.pop("examples", [])
        results[r["task"]] = r
    return {"schema": SCHEMA, "model": model, "settings": settings, "seconds": round(seconds, 3),
            "results": results, "examples": examples}


def write_json(doc: dict, path: str | Path) -> Path:
    """Atomic write (temporary name, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    tmp.replace(path)
    return path


def table(doc: dict) -> str:
    """Plain-text table: one line per task, the headline metrics with their standard errors."""
    head = f"{'task':<20} {'kind':<7} {'n':>6} {'shots':>5}  metrics"
    lines = [head, "-" * len(head)]
    for name, r in doc["results"].items():
        m = r["metrics"]
        cells = []
        for k in SHOWN:
            if k in m:
                err = m.get(f"{k}_stderr")
                cells.append(f"{k} {m[k]:.4f}" + (f" ±{err:.4f}" if err is not None else ""))
        lines.append(f"{name:<20} {r['kind']:<7} {r['n']:>6} {r['shots']:>5}  " + "  ".join(cells))
    return "\n".join(lines)
