"""The schema of OUT/rejects for readers that need one: `hf_features()` for HF `datasets`.

The reject record itself is written by `pipeline.reject_record` in the shape DESIGN.md's curate
contract promises (`id`, `url`, `source`, `step`, `reason`, the measured `value` and `threshold`
where a rule measured one, `kept_id` for duplicates, `metadata`, `text`, `text_chars`); this module
only describes it. `datasets.load_dataset("json", data_dir="OUT/rejects")` without features infers
the schema from the first block of the first file and fails on the next that differs: `value` all
null in a dedup file and a float in a filter file, `kept_id` in one file only, `metadata` objects
whose keys differ by step (datasets 5.2, 2026-12-02). With these features every row loads: a
missing column is null, and `metadata` (an object) arrives as its JSON text. A finished job's
OUT/README.md (card.py) gives the same loader the types the job actually wrote:
`load_dataset("OUT", "rejects")`.
"""

from __future__ import annotations

from typing import Any

# Every field any step writes (filters, dedup and site_lines, decontamination) -> its Arrow type.
STRING_FIELDS = ("id", "url", "source", "step", "reason", "kept_id", "text")
FLOAT_FIELDS = ("value", "threshold")  # a rule's measured number and the bound it was held to
JSON_FIELDS = ("metadata",)  # an object whose keys differ by step: loaded as its JSON text
INT_FIELDS = ("text_chars",)


def hf_features() -> Any:
    """`datasets.Features` for every field a reject may carry; pass it to
    `load_dataset("json", data_dir="OUT/rejects", features=hf_features())`."""
    import datasets  # lazy: only the users who load rejects with datasets need it

    types = {**dict.fromkeys(STRING_FIELDS + JSON_FIELDS, "string"), **dict.fromkeys(FLOAT_FIELDS, "float64"),
             **dict.fromkeys(INT_FIELDS, "int64")}
    return datasets.Features({name: datasets.Value(t) for name, t in types.items()})
