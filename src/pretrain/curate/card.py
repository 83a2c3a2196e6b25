"""OUT/README.md: a dataset card that tells HF `datasets` the schema of what the job wrote.

`datasets` infers the features of a JSON folder from the first block of its first file and casts
every later file to them (datasets 5.2): a null-only column there, a key the first file's
`metadata` lacks, or a column only later files have, fails the load. A corpus of WARC and JSONL
inputs (a `url` on some documents, FineWeb's or cc_net's fields in some `metadata`) and any
rejects folder (dedup rejects carry `kept_id`, filter rejects `value` and `threshold`) hit it.
The records keep the contract's shape; instead each writer records the JSON types it wrote
(`Shape`), the job merges them, and the card's YAML gives two configs with their features:
`load_dataset("OUT")` reads data/, `load_dataset("OUT", "rejects")` reads rejects/, as the Hub
reads a dataset repo (its `configs` and `dataset_info` metadata).

A type tree is "null", "bool", "int", "float", "string", {"list": item} or {"struct": [[key,
type], ...]} (keys in the order first written, so the card does not depend on the worker count),
or "mixed" where one key held two kinds (a string here, a number there): a top-level field with a
mixed part anywhere is given as `string`, which `datasets` fills with the JSON text of an object.
"""

from __future__ import annotations

import json
from typing import Any

from pretrain.curate.rejects import FLOAT_FIELDS, INT_FIELDS, STRING_FIELDS

NUMBERS = {"int", "float"}
# Distinct fields one Shape records, all structs and depths together. Records choose their metadata
# keys: 2,000 records of 500 new keys each (21 MB of JSONL) made a 56 MB README.md, a 91 MB done
# marker and 627 MB of memory, growing with the input. Past this many, the struct that asks for a
# new field is "mixed" (its top-level field a JSON string column, as for two kinds of one key) and
# its fields are freed for others; a record's own top-level fields are not counted (the writers
# choose them). FineWeb's and cc_net's metadata hold 5-20 keys.
MAX_FIELDS = 2048
DTYPES = {"bool": "bool", "int": "int64", "float": "float64", "string": "string", "null": "string"}
# the reject record's fixed fields (rejects.py); `metadata` is typed from what was written
REJECT_TYPES = {**dict.fromkeys(STRING_FIELDS, "string"), **dict.fromkeys(FLOAT_FIELDS, "float"),
                **dict.fromkeys(INT_FIELDS, "int")}


def type_of(value: Any) -> Any:
    """The type tree of one JSON value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return {"struct": [[str(k), type_of(v)] for k, v in value.items()]}
    if isinstance(value, (list, tuple)):
        item: Any = "null"
        for v in value:
            item = merge(item, type_of(v))
        return {"list": item}
    return "mixed"  # not a JSON value: never written


def merge(a: Any, b: Any) -> Any:
    """The type that holds values of both `a` and `b` (as pyarrow's JSON reader widens)."""
    if a == b or b == "null":
        return a
    if a == "null":
        return b
    if isinstance(a, str) and isinstance(b, str) and a in NUMBERS and b in NUMBERS:
        return "float"
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        if "list" in a:
            return {"list": merge(a["list"], b["list"])}
        fields = {k: t for k, t in a["struct"]}
        for k, t in b["struct"]:
            fields[k] = merge(fields[k], t) if k in fields else t
        return {"struct": [[k, t] for k, t in fields.items()]}
    return "mixed"


SCALARS = {str: "string", int: "int", float: "float", bool: "bool", type(None): "null"}


class Shape:
    """The merged type of every record one writer wrote: `add(record)`, then `tree` (JSON-able,
    kept in shard stats and done markers so a resumed job still knows it).

    Each record is folded into one mutable tree (a struct a dict, a list a one-item list) instead
    of building its own tree and merging: a record of the same shape as the ones before costs a
    dictionary lookup and a type check per field (bench/bench_card.py)."""

    def __init__(self, max_fields: int = MAX_FIELDS) -> None:
        self._node: Any = "null"
        self._left = [max_fields]  # fields this shape may still add (MAX_FIELDS)

    def add(self, record: dict) -> dict:
        self._node = _absorb(self._node, record, self._left, top=True)
        return record

    @property
    def tree(self) -> Any:
        return _export(self._node)


class _Struct(dict):
    """A struct's fields (key -> node), and the keys and kinds of the last record folded in."""

    seen: tuple = ()
    containers: list = []


def _absorb(node: Any, value: Any, left: list[int], top: bool = False) -> Any:
    """`node` widened to hold `value` too (as `merge`, on the mutable form); `left[0]`: the fields
    that may still be added, past which a struct that needs a new one is "mixed" (`top`, the
    record itself, excepted)."""
    if node == "mixed":
        return node
    kind = type(value)
    scalar = SCALARS.get(kind)
    if scalar is not None:
        if node == scalar or scalar == "null" or (node == "float" and scalar == "int"):
            return node
        return merge(_export(node), scalar)  # a new kind here: rare, the general rule
    if kind is dict:
        if node == "null":
            node = _Struct()
        if not isinstance(node, _Struct):
            return "mixed"
        seen = (tuple(value), tuple(map(type, value.values())))
        if seen == node.seen:  # the same keys holding the same kinds: only containers can widen
            for k in node.containers:
                node[k] = _absorb(node[k], value[k], left)
            return node
        for k, v in value.items():
            if k not in node and not top:
                if left[0] <= 0:
                    left[0] += _fields(node)
                    return "mixed"
                left[0] -= 1
            node[k] = _absorb(node.get(k, "null"), v, left)
        node.seen, node.containers = seen, [k for k, v in value.items() if type(v) in (dict, list)]
        return node
    if kind is list:
        if node == "null":
            node = ["null"]
        if not isinstance(node, list):
            return "mixed"
        kinds = set(map(type, value))
        if len(kinds) == 1 and next(iter(kinds)) in SCALARS:  # a list of numbers: one check
            node[0] = _absorb(node[0], value[0], left)
        else:
            for v in value:
                node[0] = _absorb(node[0], v, left)
        return node
    return "mixed"


def _fields(node: Any) -> int:
    """The struct fields in a mutable node, at every depth."""
    if isinstance(node, dict):
        return sum(1 + _fields(v) for v in node.values())
    if isinstance(node, list):
        return _fields(node[0])
    return 0


def _export(node: Any) -> Any:
    if isinstance(node, dict):
        return {"struct": [[str(k), _export(v)] for k, v in node.items()]}
    if isinstance(node, list):
        return {"list": _export(node[0])}
    return node


def merged(trees: list[Any]) -> Any | None:
    """One type for the records of every shard, or None when a shard did not record one (written
    by a pretrain from before the card: its types are unknown)."""
    out: Any = "null"
    for t in trees:
        if t is None:
            return None
        out = _capped(merge(out, t))
    return out


def _capped(tree: Any) -> Any:
    """A merged record type with any top-level field of more than MAX_FIELDS fields "mixed": each
    shard's type is bounded (Shape), a thousand shards' union need not be."""
    if not isinstance(tree, dict) or "struct" not in tree:
        return tree
    return {"struct": [[k, "mixed" if _tree_fields(t) > MAX_FIELDS else t] for k, t in tree["struct"]]}


def _tree_fields(t: Any) -> int:
    if isinstance(t, str):
        return 0
    if "list" in t:
        return _tree_fields(t["list"])
    return sum(1 + _tree_fields(v) for _, v in t["struct"])


def features(tree: Any, fixed: dict[str, str] | None = None) -> list[dict] | None:
    """`datasets`' YAML list of features for records of type `tree` (a struct), the fields in
    `fixed` typed as given; None when nothing was written (no features to give)."""
    if not isinstance(tree, dict) or "struct" not in tree:
        return None
    out = []
    for name, t in tree["struct"]:
        t = fixed.get(name, t) if fixed else t
        out.append({"name": name, **(_feature(t) if not _has_mixed(t) else {"dtype": "string"})})
    return out


def _feature(t: Any) -> dict:
    if isinstance(t, str):
        return {"dtype": DTYPES[t]}
    if "list" in t:
        inner = _feature(t["list"])
        return {"list": inner.get("dtype", inner.get("struct") if "struct" in inner else inner)}
    return {"struct": [{"name": k, **_feature(v)} for k, v in t["struct"]]}


def _has_mixed(t: Any) -> bool:
    if isinstance(t, str):
        return t == "mixed"
    if "list" in t:
        return _has_mixed(t["list"])
    return any(_has_mixed(v) for _, v in t["struct"])


def card(data: Any, rejects: Any, job: str) -> str:
    """The README.md text: front matter with both configs (features where known), a few lines."""
    configs = [{"config_name": "default", "data_files": [{"split": "train", "path": "data/*.jsonl.zst"}]},
               {"config_name": "rejects", "data_files": [{"split": "train", "path": "rejects/*.jsonl.zst"}]}]
    infos = []
    for name, tree, fixed in (("default", data, None), ("rejects", rejects, REJECT_TYPES)):
        feats = features(tree, fixed)
        if feats is not None:
            infos.append({"config_name": name, "features": feats})
    meta: dict[str, Any] = {"configs": configs}
    if infos:
        meta["dataset_info"] = infos
    return (f"---\n{_yaml(meta)}---\n\n# pretrain {job} output\n\n"
            "`data/` holds the kept documents, `rejects/` the dropped ones with the step and reason;\n"
            "`stats.json` the funnel"
            + (";\n`decontam_report.json` which benchmark items leaked into which documents"
               if job == "decontaminate" else "")
            + ". Load them with HF `datasets`, schema included:\n\n"
            "```python\nfrom datasets import load_dataset\n"
            "corpus = load_dataset(\"path/to/this/folder\", split=\"train\")\n"
            "rejects = load_dataset(\"path/to/this/folder\", \"rejects\", split=\"train\")\n```\n")


def _yaml(obj: Any, indent: int = 0) -> str:
    """Block YAML of dicts (keys: the card's own identifiers), lists and strings; every value a JSON
    string, which YAML reads as written whatever a metadata key holds."""
    pad = " " * indent
    if isinstance(obj, dict):
        lines = []
        for k, v in obj.items():
            if isinstance(v, (dict, list)) and v:
                lines.append(f"{pad}{k}:\n{_yaml(v, indent + 2)}")
            else:
                lines.append(f"{pad}{k}: {json.dumps(v)}\n")
        return "".join(lines)
    lines = []
    for v in obj:
        if isinstance(v, dict) and v:
            body = _yaml(v, indent + 2)
            lines.append(f"{pad}- {body[indent + 2:]}")
        else:
            lines.append(f"{pad}- {json.dumps(v)}\n")
    return "".join(lines)
