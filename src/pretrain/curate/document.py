"""`Document`: the unit every curation step sees, and its stable id."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import xxhash


@dataclass(slots=True)
class Document:
    """One record of the corpus.

    `id` is stable across runs, machines and worker counts: the record's own id when it has one
    (a JSONL field, a WARC-Record-ID), else `stable_id(source, position)`.
    `metadata` carries scores computed by taggers (language, rule values, classifier score) so that
    thresholds can be re-tuned later without recomputing.
    """

    id: str
    text: str
    url: str | None = None
    source: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    # Per-document scratch space shared by steps (e.g. the word split that every rule reuses);
    # never written out. Steps that rewrite `text` must clear it.
    cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "text": self.text}
        if self.url is not None:
            out["url"] = self.url
        out["source"] = self.source
        out["metadata"] = self.metadata
        return out


def stable_id(source: str, position: int | str) -> str:
    """A 16-hex-digit id from where a record came from (file name and position in it)."""
    return xxhash.xxh3_64_hexdigest(f"{source}\x00{position}".encode())
