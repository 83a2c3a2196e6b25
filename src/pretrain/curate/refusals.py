"""What a rerun into another job's OUT is told: one phrase saying what differs between the
identity in OUT/plan.json and this run's (inputs added or missing, a resized input, the files the
config names, the config keys with both values). `identity.claim` raises with it."""

from __future__ import annotations

import json


def difference(old: dict, new: dict) -> str:
    """One phrase saying what differs between two identities."""
    inputs = old.get("inputs", []) if isinstance(old, dict) else None
    if not isinstance(inputs, list) or "hash" not in old or not all(isinstance(i, dict) for i in inputs):
        return "a job written by an older pretrain, without an identity"
    if [i["path"] for i in old.get("inputs", [])] != [i["path"] for i in new["inputs"]]:
        return _other_inputs(old, new)
    if old.get("inputs") != new["inputs"]:
        was = {i["path"]: i.get("size") for i in inputs}
        first = next((i for i in new["inputs"] if was.get(i["path"]) != i.get("size")), None)
        if first is None:  # the same paths and sizes, another field of an input (an older plan)
            return "the same input files, recorded otherwise: they changed since"
        then, now = (f"{v:,}" if isinstance(v, int) else "?" for v in (was.get(first["path"]), first["size"]))
        return (f"the same input files with other sizes: {first['path']} changed since "
                f"({then} bytes then, {now} now)")
    refs_old, refs_new = old.get("references", []), new.get("references", [])
    if refs_new and "references" not in old and old.get("config") == new["config"]:
        return "a job written before pretrain recorded the files its config names (benchmarks, models, lists)"
    from pretrain.curate.identity import without_neutral  # (identity imports this module)

    before, after = without_neutral(old.get("config", {})), without_neutral(new["config"])
    # other files named (--benchmarks other/) are a config change; "changed since" only for the same config
    if refs_old != refs_new and before == after:
        changed = [r["path"] for r in refs_new if r not in refs_old] or [r["path"] for r in refs_old]
        return f"files the config names changed since ({changed[0]})"
    keys = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    changes = _changes(before, after)
    shown = "; ".join(f"{k}: {a} -> {b}" for k, a, b in changes[:3]) + ("; ..." if len(changes) > 3 else "")
    what = f"a different config: {', '.join(keys) or 'unknown'} settings differ"  # "reader differ" read oddly
    return what + (f" ({shown})" if shown else "") + _default_changed(changes)


# Defaults that changed, (key, old default, new default, when): a job written under the old default
# and rerun without the key is refused as another job; the message says so and how to keep it.
DEFAULTS_CHANGED = (("extract.backend", "resiliparse", "blocks", "2026-12-03"),
                    ("extract.strict", False, True, "2026-12-03"))


def _default_changed(changes: list[tuple[str, str, str]]) -> str:
    """"; the default K is V since D: to rerun this job with its old setting, add --set K=OLD" for
    each changed default among `changes` (an old plan without the key counts as the old default)."""
    from pretrain.curate.identity import ONLY_WITH  # (identity imports this module)

    hints = [(key, new, was, when) for key, was, new, when in DEFAULTS_CHANGED
             if any(c == (key, old, _short(new)) for c in changes for old in (_short(was), "null"))]
    # a key that acts only with another's value says nothing when that other key's hint is given
    # (resiliparse has no strict trees: its hint alone resumes the job)
    moot = {key for key, needs, _ in ONLY_WITH if any(h[0] == needs for h in hints)}
    hints = [h for h in hints if h[0] not in moot]
    if not hints:
        return ""
    said = "; ".join(f"the default {key} is {_toml(new)} since {when}" for key, new, _, when in hints)
    keep = " ".join(f"--set {key}={_toml(was)}" for key, _, was, _ in hints)
    return f"; {said}: to rerun this job with its old setting, add {keep}"


def _toml(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _other_inputs(old: dict, new: dict) -> str:
    """Both counts, and when the two lists share files, the first added and the first missing one
    ("4 other input files" for one file added to three said none of them was the same)."""
    was, now = [i["path"] for i in old["inputs"]], [i["path"] for i in new["inputs"]]
    n, m = len(was), len(now)
    head = f"{old.get('job', 'a job')} of {n} input file{'s' * (n != 1)}; this run "
    was_set, now_set = set(was), set(now)
    added, lacks = [p for p in now if p not in was_set], [p for p in was if p not in now_set]
    if not (added or lacks):  # only the order differs
        return head + f"has {m} other input file{'s' * (m != 1)}"
    if len(added) == m:  # nothing in common: the first of each, and a folder moved or copied said so
        more = (", ...", ", ...")
        said = (head + f"has {m} other input file{'s' * (m != 1)}: was {was[0]}{more[0] * (n > 1)}, "
                f"now {now[0]}{more[1] * (m > 1)}")
        sizes = sorted((i["path"].rsplit("/", 1)[-1], i.get("size")) for i in old["inputs"])
        if sizes == sorted((i["path"].rsplit("/", 1)[-1], i.get("size")) for i in new["inputs"]):
            said += ": the same file names and sizes in another folder, but a job is its inputs' paths"
        return said
    said = [f"{verb} {len(paths)} ({paths[0]}{', ...' * (len(paths) > 1)})"
            for verb, paths in (("adds", added), ("lacks", lacks)) if paths]
    return head + " and ".join(said)


def _changes(old: object, new: object, key: str = "") -> list[tuple[str, str, str]]:
    """(dotted key, old value, new value) of every setting that differs, values as TOML-ish text."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [c for k in sorted(set(old) | set(new))
                for c in _changes(old.get(k), new.get(k), f"{key}.{k}" if key else k)]
    if old == new:
        return []
    return [(key, _short(old), _short(new))]


def _short(value: object) -> str:
    """A value as JSON, at most ~60 characters: its head and its tail (two lists of paths under one
    folder cut at 57 characters read the same on both sides of the arrow)."""
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:24] + "..." + text[-33:]
