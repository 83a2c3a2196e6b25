"""The reject record: the one shape every job writes to OUT/rejects, and the one reader of old and new.

Readers that infer a schema (HF `datasets.load_dataset("json", data_dir=...)`, pyarrow) take the
types of the first block of the first file and cast every later file to them: a field all-null in
one file (`value` in a dedup file, `url` of JSONL input) and numbers in the next, a field present
in one shape and absent in the other (`kept_id`), or a nested object whose keys differ between
files (`metadata`: the language step's keys, the decontaminator's list) each failed that cast
(datasets 5.2, 2026-12-02). So every record carries the same ten fields, each with one JSON type
and never null: strings ("" for "none"), one integer, and the two parts whose keys vary (what the
step measured; the document's metadata) as JSON strings. datatrove's `JsonlReader` parses a
`metadata` string itself; pandas reads the file as is.

Records written before this shape (format 1: `metadata` an object, `value`/`threshold` top-level
and absent or null, `kept_id` only on dedup rejects, `url` null when unknown) are never rewritten:
a rerun of an old job resumes beside them. `read_reject` gives both the same dict.
"""

from __future__ import annotations

import json
from typing import Any

from pretrain.curate.document import Document

REJECT_TEXT_CHARS = 2000  # a reject keeps this much text (and its full length): enough to judge it

# Field -> the Python type of its JSON value, in the order written (docs/curation.md).
FIELDS: dict[str, type] = {
    "id": str, "text": str, "step": str, "reason": str, "url": str, "source": str,
    "kept_id": str, "measured": str, "metadata": str, "text_chars": int,
}


def _json(obj: dict) -> str:
    # compact and key order as given: byte-identical across workers and reruns
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=float)


def reject_record(doc: Document, step: str, reason: str, measured: dict | None = None,
                  kept_id: str | None = None) -> dict:
    """Who, which step, why, what it measured (`{"value": .., "threshold": ..}` or `{}`), the
    document's metadata (the scores that decided it), an excerpt of the text and its full length."""
    return {
        "id": str(doc.id), "text": doc.text[:REJECT_TEXT_CHARS], "step": step, "reason": reason,
        "url": doc.url or "", "source": doc.source or "", "kept_id": kept_id or "",
        "measured": _json(measured or {}), "metadata": _json(doc.metadata or {}),
        "text_chars": len(doc.text),
    }


def _obj(v: Any) -> dict:
    """A JSON-string field (format 2) or an object (format 1) as a dict; anything else empty."""
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except ValueError:
            return {}
    return v if isinstance(v, dict) else {}


def read_reject(r: dict) -> dict:
    """A reject of either format as one dict: `value`, `threshold` (None when not measured),
    `metadata` a dict, `kept_id` and `url` None when none; the other fields as written."""
    measured = _obj(r.get("measured")) if "measured" in r else {k: r.get(k) for k in ("value", "threshold")}
    return {
        "id": r.get("id"), "step": r.get("step"), "reason": r.get("reason"),
        "url": r.get("url") or None, "source": r.get("source") or "", "kept_id": r.get("kept_id") or None,
        "value": measured.get("value"), "threshold": measured.get("threshold"),
        "metadata": _obj(r.get("metadata")), "text": r.get("text") or "", "text_chars": r.get("text_chars"),
    }
