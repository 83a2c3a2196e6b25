"""Configuration: plain dataclasses that round-trip through TOML.

Precedence: dataclass defaults < TOML file < `--set a.b=value` overrides. Values given with
`--set` are parsed as TOML literals when they parse (`3`, `1e-3`, `true`, `["en","fr"]`) and kept
as strings otherwise. Unknown keys are errors that name the key and the known ones.
`config_hash` fingerprints a resolved config, so resumable jobs can refuse to mix outputs of two
different configs; such a refusal says which settings changed, old -> new (`describe_changes`),
never only the two hashes.

Validation, one mechanism for every config class, applied when a config is loaded (a wrong value
stops with one line naming the key, the value and what is allowed):
- types: a section given a scalar, `int` given a bool or a float, `X | None`, lists, tables;
- integers fit in 64 bits (10**30 was an OverflowError deep in torch);
- numbers are >= 0 unless the field says otherwise (every count, size, time and rate in the
  project is; a field that may be negative declares it with `signed()`), and never NaN;
- field metadata from `choice(default, allowed)` and `bounded(default, lo=, hi=, gt=, why=)`, the
  reason said with the refusal (tests/test_config_bounds.py wants one on every numeric key);
- a class's own `__post_init__` checks: their ValueError becomes the same one-line UserError;
  values that are fine alone but contradict each other (a minimum above its maximum) go there.
A refusal of a value a TOML file gave starts with the file's path.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import tomllib
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import tomli_w

from pretrain.bounds import check_number
from pretrain.errors import UserError
from pretrain.untrusted import load_toml

T = TypeVar("T")


def to_dict(cfg: Any) -> dict:
    """A dataclass (nested) as a plain dict with None values removed (TOML has no null)."""
    out = {}
    for f in dataclasses.fields(cfg):
        v = getattr(cfg, f.name)
        if dataclasses.is_dataclass(v):
            v = to_dict(v)
        elif isinstance(v, tuple):
            v = list(v)
        if v is not None:
            out[f.name] = v
    return out


def choice(default: Any, allowed: tuple) -> Any:
    """A dataclass field that takes only one of `allowed` (checked when a config is loaded)."""
    return dataclasses.field(default=default, metadata={"choices": tuple(allowed)})


def bounded(default: Any, lo: float | None = None, hi: float | None = None, gt: float | None = None,
            why: str = "", lt: float | None = None, off: float | None = None) -> Any:
    """A numeric dataclass field with bounds: lo <= v <= hi, v > gt, v < lt (checked when loaded);
    `off`: a value outside them that turns the limit off. `why` is the reason (a paper's range,
    what the code divides by); the refusal says it."""
    return dataclasses.field(default=default, metadata={"lo": lo, "hi": hi, "gt": gt, "lt": lt, "off": off,
                                                        "why": why})


def signed(default: Any, lo: float | None = None, hi: float | None = None, why: str = "") -> Any:
    """A numeric dataclass field that may be negative (numbers are >= 0 otherwise)."""
    return dataclasses.field(default=default, metadata={"signed": True, "lo": lo, "hi": hi, "why": why})


def allowed_range(f: dataclasses.Field) -> str:
    """The range a numeric field takes, as the refusal and docs/curation.md's table say it."""
    meta = f.metadata
    lo = meta.get("lo")
    if lo is None and meta.get("gt") is None and not meta.get("signed"):
        lo = 0
    low = f"> {meta['gt']:g}" if meta.get("gt") is not None else (f">= {lo:,}" if lo is not None else "")
    high = f"<= {meta['hi']:,}" if meta.get("hi") is not None else ""
    below = f"< {meta['lt']:,}" if meta.get("lt") is not None else ""
    text = " and ".join(x for x in (low, high, below) if x) or "any finite number"
    if meta.get("off") is not None:
        text += f", or {meta['off']:,}"
    return text + (f"; {meta['why']}" if meta.get("why") else "")


def from_dict(cls: type[T], data: dict, where: str = "", root: type | None = None) -> T:
    """Build dataclass `cls` from a (possibly partial) nested dict; unknown keys or values out of
    their type, choices or bounds raise UserError naming the key."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in data.items():
        if key not in fields:
            meant = _did_you_mean(key, where, fields, root or cls)
            raise UserError(f"unknown config key {where + key!r}{meant}; known: {', '.join(sorted(fields))}")
        typ = hints[key]
        if dataclasses.is_dataclass(typ):
            if not isinstance(value, dict):
                raise UserError(f"config key {where + key!r} is a section ([{where + key}]), not {value!r}")
            value = from_dict(typ, value, where + key + ".", root or cls)
        else:
            value = _coerce(value, typ, where + key)
            _check(value, fields[key], where + key)
        kwargs[key] = value
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as e:  # a class's own __post_init__ check
        raise UserError(f"config [{where.rstrip('.') or 'top level'}]: {e}") from None


def _did_you_mean(key: str, where: str, fields: dict, root: type) -> str:
    """` (did you mean 'optim.lr'?)`: a near spelling in the same section (`language.threshhold`),
    else the sections holding a key of that name (`train.lr` is `optim.lr`), else ""."""
    import difflib

    close = difflib.get_close_matches(key, fields, n=1, cutoff=0.75)
    if close:
        return f" (did you mean {where + close[0]!r}?)"
    found = [name for name in _keys(root) if name.rsplit(".", 1)[-1] == key and name != where + key]
    return f" (did you mean {' or '.join(map(repr, found[:3]))}?)" if found else ""


def _keys(cls: type, prefix: str = "") -> list[str]:
    """Every key of a config, dotted (`optim.lr`), sections' keys included."""
    out, hints = [], typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        out.append(prefix + f.name)
        if dataclasses.is_dataclass(hints[f.name]):
            out += _keys(hints[f.name], prefix + f.name + ".")
    return out


def _coerce(value: Any, typ: Any, key: str) -> Any:
    origin, args = typing.get_origin(typ), typing.get_args(typ)
    if origin in (typing.Union, types.UnionType):  # X | None
        if value is None or type(None) not in args:
            return value
        inner = [a for a in args if a is not type(None)]
        return _coerce(value, inner[0], key) if len(inner) == 1 else value
    if typ is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if origin is tuple and isinstance(value, list):
        return tuple(value)
    want = {tuple: (list, tuple), list: (list, tuple), dict: dict}.get(origin or typ)
    if want is not None and not isinstance(value, want):
        raise UserError(f"config key {key!r} wants a {'table' if want is dict else 'list'}, got {value!r}")
    if origin is list and isinstance(value, tuple):
        return list(value)
    is_bool = isinstance(value, bool)  # True is an int to Python, not to a config
    if typ in (int, float, str, bool) and (not isinstance(value, typ) or (typ is not bool and is_bool)):
        raise UserError(f"config key {key!r} wants {typ.__name__}, got {value!r}")
    return value


def _check(value: Any, f: dataclasses.Field, key: str) -> None:
    """Choices and bounds of one field's value (after its type was checked)."""
    meta = f.metadata
    if "choices" in meta and value not in meta["choices"]:
        allowed = ", ".join(str(c) for c in meta["choices"])
        raise UserError(f"{key} must be one of {allowed}, got {value!r}")
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return
    check_number(value, meta, key)


def parse_override(text: str) -> tuple[list[str], Any]:
    """'a.b=value' -> (['a','b'], parsed value)."""
    if "=" not in text:
        raise UserError(f"--set wants key=value, got {text!r}")
    key, raw = text.split("=", 1)
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return key.strip().split("."), value


def merge(base: dict, path: list[str], value: Any) -> None:
    node = base
    for part in path[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise UserError(f"--set {'.'.join(path)}: {part!r} is not a section")
    node[path[-1]] = value


def load(cls: type[T], path: str | Path | None = None, overrides: list[str] | None = None,
         base: list[str] | tuple[str, ...] = ()) -> T:
    """Defaults < `base` (a preset, as `key=value` texts) < TOML file < overrides, validated into `cls`."""
    data = to_dict(cls())
    for text in base:
        merge(data, *parse_override(text))
    if path:
        p = Path(path)
        if not p.is_file():
            raise UserError(f"config file not found: {p}{_nearest_file(p)}")
        # a run directory from elsewhere: bad UTF-8, nesting thousands deep, a FIFO: one line each
        _deep_update(data, load_toml(p))
    set_keys = set()
    for text in overrides or []:
        key, value = parse_override(text)
        merge(data, key, value)
        set_keys.add(".".join(key))
    try:
        return from_dict(cls, data)
    except UserError as e:  # a value the file gave: say which file (a --set one the user just typed)
        said = str(e)
        if not path or said.startswith(str(path)) or _from_set(said, set_keys):
            raise
        raise UserError(f"{path}: {said}") from None


def _nearest_file(p: Path) -> str:
    """` (did you mean recipes/tiny-cpu.toml?)` for `recipe/tiny-cpu.toml` or `recipes/tiny-cpu`: a
    TOML file of a near name in the folder, or in a folder of a near name beside it (session 14)."""
    import difflib

    def near(name: str, names: list[str]) -> str | None:
        found = difflib.get_close_matches(name, names[:1000], 1, 0.7)
        return found[0] if found else None

    if p.suffix != ".toml" and p.with_name(p.name + ".toml").is_file():
        return f" (did you mean {p.with_name(p.name + '.toml')}?)"
    try:
        folder = p.parent
        if not folder.is_dir():
            other = near(folder.name, sorted(x.name for x in folder.parent.iterdir() if x.is_dir()))
            folder = folder.parent / other if other else None
        stems = sorted(x.stem for x in folder.iterdir() if x.suffix == ".toml") if folder else []
    except OSError:
        return ""
    stem = near(p.stem, stems)
    return f" (did you mean {folder / (stem + '.toml')}?)" if stem else ""


def _from_set(said: str, set_keys: set[str]) -> bool:
    """Whether a refusal is of a key a --set gave: `--set trian.steps=3` is refused as 'trian' (it
    was blamed on the recipe file), and a suggestion in the line ("did you mean 'train'?") is not
    the key refused."""
    import re

    m = re.search(r"config key '([^']+)'", said)
    if m:
        return any(k == m[1] or k.startswith(m[1] + ".") for k in set_keys)
    return any(k in said for k in set_keys)


def _deep_update(base: dict, new: dict) -> None:
    for k, v in new.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            _deep_update(base[k], v)
        else:
            base[k] = v


def dumps(cfg: Any) -> str:
    return tomli_w.dumps(to_dict(cfg))


def changed(cfg: Any, base: Any | None = None) -> dict[str, Any]:
    """The settings of `cfg` that differ from `base` (default: its class's defaults), as dotted keys.

    The terminal echoes only these: the full resolved config is still written to OUT/config.toml.
    """
    now, ref = _flat(_plain(to_dict(cfg))), _flat(_plain(to_dict(base if base is not None else type(cfg)())))
    return {k: v for k, v in now.items() if ref.get(k, _MISSING) != v}


_MISSING = object()


def _plain(d: dict) -> dict:
    """Nested tuples as lists, as a TOML file gives them back (so a loaded config equals its source)."""
    return json.loads(json.dumps(d, default=str))


def _flat(d: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def echo(cfg: Any, saved_to: str | Path | None = None, base: Any | None = None) -> str:
    """A few lines for the terminal: the changed settings, and where the full config lives."""
    diff = changed(cfg, base)
    where = f" (full config: {saved_to})" if saved_to else ""
    if not diff:
        return f"config: all defaults{where}"
    # JSON spells strings, numbers, booleans and lists on one line the way TOML reads them back
    body = "\n".join(f"  {k} = {json.dumps(v, ensure_ascii=False)}" for k, v in diff.items())
    differ = "1 setting differs" if len(diff) == 1 else f"{len(diff)} settings differ"
    return f"config: {differ} from the defaults{where}\n{body}"


def config_hash(cfg: Any) -> str:
    """A short stable fingerprint of a resolved config."""
    blob = json.dumps(to_dict(cfg), sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def changes(old: object, new: object, key: str = "") -> list[tuple[str, str, str]]:
    """(dotted key, old value, new value) of every setting that differs, values as TOML-ish text."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [c for k in sorted(set(old) | set(new))
                for c in changes(old.get(k), new.get(k), f"{key}.{k}" if key else k)]
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new) and old != new:
        return [c for i, (a, b) in enumerate(zip(old, new)) for c in changes(a, b, f"{key}[{i}]")]
    if old == new:
        return []
    return [(key, _short(old), _short(new))]


def describe_changes(old: object, new: object, limit: int = 3) -> str:
    """`key: old -> new; ...` for the first `limit` settings that differ ("" when none do): what a
    refusal of a changed config says instead of two hashes."""
    found = changes(old, new)
    more = "; ..." if len(found) > limit else ""
    return "; ".join(f"{k}: {a} -> {b}" for k, a, b in found[:limit]) + more


def _short(value: object) -> str:
    """A value on one line, at most ~60 characters: its head and its tail (a path's file name)."""
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= 60 else text[:17] + "..." + text[-40:]
