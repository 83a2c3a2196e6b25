"""A corpus job's identity, and OUT claimed for it.

What a job is (`identity`): its input files, listed once (local paths, folders, globs and URLs, with
each object's size and version from the listing), its resolved config, the files that config names,
and a hash of all of it. `claim` writes it to OUT/plan.json, or checks that the plan.json there is
this job's: a rerun with the same identity resumes, any other inputs or config into the same OUT is
refused with one line naming what changed (refusals.py), before anything is written. Beside the
hash, not in it: each input's version (ETag, mtime), checked by a rerun and by each shard's read
(versions.py). The driver that uses it is job.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import xxhash

from pretrain import config as cfgmod
from pretrain.curate import io, versions
from pretrain.curate.inputs import say_unread
from pretrain.curate.outputs import url_job_data_only
from pretrain.curate.readers import list_inputs, source_name
from pretrain.curate.refusals import difference
from pretrain.errors import UserError, storage_error
from pretrain.progress import count

if TYPE_CHECKING:
    from pretrain.curate.job import Layout
    from pretrain.curate.pipeline import CurateConfig


def list_any_inputs(inputs: list[str], own_out: str | None = None, sizes: dict[str, int] | None = None,
                    stamps: dict[str, dict] | None = None,
                    exclude: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """(file, source name) for local paths, folders and globs and for URLs (a prefix is a folder),
    sorted; the source name is the file's path relative to the input it came from. `sizes` and
    `stamps`, when given, receive each URL's size and version (versions.of_listing) from the
    listing (no request per object). `exclude`: --exclude GLOB, as `inputs.excluded` reads it."""
    from pretrain.curate.inputs import excluded, globbed, is_supported, say_paperwork, walked

    found: dict[str, str] = {}
    local = [p for p in inputs if not io.is_url(p)]
    if local:
        for f in list_inputs(local, None if own_out is None or io.is_url(own_out) else own_out, exclude):
            found[str(f)] = source_name(f, _root_of(f, local))
    for url in (p for p in inputs if io.is_url(p)):
        try:
            listed = _list_url(url, is_supported, walked, globbed)
        except Exception as e:  # the store refused: say which input, not only what the client said
            line = storage_error(e)
            if line is None:
                raise
            raise UserError(f"cannot list {url}: {line}") from e
        if not (len(listed) == 1 and url.rstrip("/") in listed):  # an object named itself is read
            listed = {f: v for f, v in listed.items() if not excluded(v[0], exclude)}
            say_paperwork(url.rstrip("/"), [Path(v[0]) for v in listed.values()])
        climbing = []
        for f, (src, size, stamp) in listed.items():
            if _climbs(src):
                climbing.append(f)
                continue
            found[f] = src
            if sizes is not None:
                sizes[f] = size
            if stamps is not None and stamp is not None:
                stamps[f] = stamp
        if climbing:
            import sys

            print(f"pretrain: skipped {count(len(climbing), 'object')} under {url} whose key climbs out of "
                  f"it, e.g. {climbing[0]!r}", file=sys.stderr)  # !r: escapes what a key may hold
    return sorted(found.items())


def _list_url(url: str, is_supported, walked=None, globbed=None) -> dict[str, tuple[str, int, dict | None]]:
    """{file URL: (source name, size, version)} under one input URL: a glob is matched, else one listing
    of the prefix (`find` gives the object itself when the URL names one). One listing, not
    isdir() then find(): each lists the prefix, a page per 1,000 keys; sizes come with it."""
    fs, path = io.url_fs(url)
    if any(ch in path for ch in "*?["):
        every = {h: d for h, d in fs.glob(path, detail=True).items() if d.get("type") == "file"}
        root = path.split("*")[0].rsplit("/", 1)[0]
        globbed = globbed or (lambda rel: is_supported(Path(rel)))  # the local glob's rule
        below = {h: h[len(root):].lstrip("/") if h.startswith(root + "/") else h for h in every}
        hits = sorted(h for h in every if globbed(below[h]))
        if every and not hits:
            raise UserError(f"{url!r} matches {count(len(every), 'object')}, none a file of a known type "
                            "outside hidden prefixes")
    else:
        every = fs.find(path, detail=True)
        if not every:
            raise UserError(f"input not found: {url} (no object there nor under it)")
        if list(every) == [path.rstrip("/")] and every[path.rstrip("/")].get("type") == "file":
            hits, root = [path.rstrip("/")], path.rstrip("/").rsplit("/", 1)[0]
        else:
            root = path.rstrip("/")
            walked = walked or (lambda rel: is_supported(Path(rel)))
            hits = url_job_data_only(fs, [h for h in every if walked(h[len(root):].lstrip("/"))], list(every))
            below = [Path(h[len(root):].lstrip("/")) for h, d in every.items() if d.get("type") == "file"]
            if not hits or not any(b.name == "plan.json" for b in below):  # a job's OUT: its data/ alone
                say_unread(url.rstrip("/"), below, len(hits))
    return {fs.unstrip_protocol(h): (h[len(root):].lstrip("/") if h.startswith(root + "/") else h,
                                     int(every[h]["size"]), versions.of_listing(every[h])) for h in hits}


def _climbs(name: str) -> bool:
    """An object key is any string: `data/../../../home/u/.bashrc` is one key under `data/`, and
    its name below the prefix becomes a local path where `pretrain tokenize` copies the object
    (it wrote outside its work folder). Such a name, an absolute one or one with NUL, is refused."""
    parts = name.split("/")
    return not name or name.startswith("/") or "\0" in name or any(p in ("..", ".") for p in parts)


def _size(path: str, stamps: dict[str, dict]) -> int:
    if io.is_url(path):
        fs, p = io.url_fs(path)
        return int(fs.size(p))
    st = Path(path).stat()
    stamps[str(Path(path).resolve())] = versions.of_local(st)
    return st.st_size


def identity(job: str, files: list[str], cfg: CurateConfig, sizes: dict[str, int] | None = None,
             stamps: dict[str, dict] | None = None) -> dict:
    """What the job is: its inputs (resolved path or URL, and size: from `sizes` when the listing
    gave it), its resolved config, the files that config names (with a hash of their bytes), and
    a hash of all of it. Beside the hash, not in it: `versions`, each input's stamp (an URL's from
    `stamps`, a local file's mtime; see versions.py)."""
    sizes, found = sizes or {}, dict(stamps or {})
    inputs = [{"path": f if io.is_url(f) else str(Path(f).resolve()),
               "size": sizes.get(f) if io.is_url(f) and sizes.get(f) else _size(f, found)} for f in files]
    resolved = json.loads(json.dumps(cfgmod.to_dict(cfg), default=str))  # as plan.json will read back
    resolved.pop("shards", None)  # how the inputs are grouped is the plan's (grouping.py), beside the hash
    what = {"inputs": inputs, "config": resolved}
    refs = referenced_files(cfg)
    if refs:  # only then: the identity of a job that names no file stays what it was
        what["references"] = refs
    stamped = {i["path"]: found[i["path"]] for i in inputs if i["path"] in found}
    return {"job": job, "hash": _hash(what), **what, "versions": stamped}


def _hash(what: dict, drop: tuple[str, ...] = ()) -> str:
    """xxh3 of a plan's inputs, config (less NEUTRAL_SINCE keys and the sections in `drop`) and
    referenced files: the same for the plan.json a job wrote and for the identity it was made from."""
    config = {k: v for k, v in without_neutral(what["config"]).items() if k not in drop}
    kept = {k: what[k] for k in ("inputs", "references") if k in what}
    blob = json.dumps({**kept, "config": config}, sort_keys=True, default=str).encode()
    return xxhash.xxh3_64_hexdigest(blob)


def extractor_reads(ident: dict) -> bool:
    """Whether the extract step changes any document of this job: it runs (`extract` in its steps)
    and some input holds HTML: an .html file, a WARC/ARC (by name: a file named .wet may still hold
    `response` records, read as HTML by warc.py), or JSONL/Parquet/Arrow read with
    reader.text_is_html. Otherwise it passes every record through and extract.* changes nothing."""
    from pretrain.curate.inputs import HTML_SUFFIXES, WARC_SUFFIXES

    config = ident.get("config") or {}
    if "extract" not in (config.get("steps") or ()):
        return False
    if (config.get("reader") or {}).get("text_is_html"):
        return True
    marked = HTML_SUFFIXES + WARC_SUFFIXES
    return any(str(i.get("path", "")).lower().endswith(marked) for i in ident["inputs"])


def same_job(old: dict, ident: dict) -> bool:
    """`old` (a plan.json) is the job `ident` is: the same hash, or, for a job the extractor does not
    touch (extractor_reads), the same hash once extract.* is left out of both: an OUT made before
    the extract step's default moved (2026-12-03, resiliparse -> blocks with strict) resumes. On
    such a match `ident` takes the old hash, which the shards' done markers carry."""
    if old.get("hash") == ident["hash"]:
        return True
    try:
        if extractor_reads(ident) or extractor_reads(old):
            return False
        if _hash(old, ("extract",)) != _hash(ident, ("extract",)):
            return False
    except (KeyError, TypeError, AttributeError):  # a plan.json of another shape: refused as another job
        return False
    ident["hash"] = old["hash"]
    return True


def referenced_files(cfg: CurateConfig) -> list[dict]:
    """{path, size, xxh3} of every file the steps read besides the inputs: benchmark files, the
    classifier model, URL lists. The config holds only their names; a file rewritten between two
    attempts would otherwise let one shard be judged by the old file and the next by the new."""
    from pretrain.curate.decontam import benchmark_files, parse_spec

    paths: list[Path] = []
    if "decontaminate" in cfg.steps and cfg.decontam.enabled:
        for spec in cfg.decontam.benchmarks:
            paths.extend(f for _, f in benchmark_files(parse_spec(spec)[0]))
    if "classifier" in cfg.steps and cfg.classifier.model:
        paths.append(Path(cfg.classifier.model))
    if "url_filter" in cfg.steps:
        u = cfg.url_filter
        paths.extend(Path(p) for p in [*u.domain_files, *u.url_files, *u.banned_word_files])
    if "language" in cfg.steps and cfg.language.model_path:
        paths.append(Path(cfg.language.model_path))
    return [_fingerprint(p) for p in dict.fromkeys(p.resolve() for p in paths) if p.is_file()]


def _fingerprint(path: Path) -> dict:
    h = xxhash.xxh3_64()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return {"path": str(path), "size": path.stat().st_size, "xxh3": h.hexdigest()}


# Keys added after jobs were written, with the value that does what those jobs did: at that value
# a key is left out of the hash, so a job written before the key existed resumes under a newer
# pretrain (its plan.json has no such key) instead of being refused as "another job". Only keys
# whose value reproduces the old output byte for byte belong here (not, e.g., extract.rescue).
# decontam.max_grams (session 10): a bound, so a job at its default either fails or writes what it did.
# extract.strict (session 14): false is the blocks output before the key existed.
NEUTRAL_SINCE: dict[str, object] = {"dedup.site_lines": 0,  # 2026-12-02, session 8
                                    "decontam.max_grams": 20_000_000,
                                    "reader.text_is_html": False,  # 2026-12-03, session 13
                                    "extract.strict": False}  # 2026-12-03, session 14

# Keys that change nothing unless another key has a value: (key, the key it needs, that value).
# extract.strict acts on `blocks` only, so a resiliparse job written before it existed resumes
# with `--set extract.backend=resiliparse` although strict now defaults to true.
ONLY_WITH: tuple[tuple[str, str, object], ...] = (("extract.strict", "extract.backend", "blocks"),)


def without_neutral(config: dict) -> dict:
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in config.items()}
    for key, value in NEUTRAL_SINCE.items():
        head, _, tail = key.partition(".")
        if isinstance(out.get(head), dict) and tail in out[head] and out[head][tail] == value:
            del out[head][tail]
    for key, needs, value in ONLY_WITH:
        head, _, tail = key.partition(".")
        other, _, other_tail = needs.partition(".")
        section = out.get(head)
        if isinstance(section, dict) and tail in section and (out.get(other) or {}).get(other_tail) != value:
            del section[tail]
    return out


def claim(lay: Layout, ident: dict) -> tuple[dict[str, dict], dict]:
    """Write OUT/plan.json, or check that the one there is this job; refuse anything else. Returns
    the inputs' stamps the shards check (versions.check_rerun) and the plan in force (the one
    there, whose shard grouping a rerun keeps: grouping.py)."""
    plan, out = lay.file("plan.json"), lay.out
    if not io.exists(plan) and io.create_json(plan, ident, lay.tmp):
        return ident["versions"], ident  # (two hosts may both find none: one creates it, io.create_json)
    try:
        old = json.loads(io.read_bytes(plan))
    except (OSError, json.JSONDecodeError) as e:
        raise UserError(f"{plan}: unreadable job plan ({e}); use a new --output") from e
    if isinstance(old, dict) and same_job(old, ident):
        return versions.check_rerun(old, ident["versions"]), old
    raise UserError(f"{out} holds another job ({difference(old, ident)}); use a new --output or remove it")


def _root_of(f: Path, inputs: list[str]) -> Path:
    for raw in inputs:
        p = Path(raw)
        if p.is_dir() and p.resolve() in f.resolve().parents:
            return p
    return f.parent
