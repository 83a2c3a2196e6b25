"""The report's data sections: a corpus job (funnel, errors, reject examples with the measured value
and threshold, duplicate clusters), a token directory (tokens per source, per document, bytes per
token) and a mixture (epochs per source, explained).

Rejects are read by streaming and only what is shown is kept: the first example of each (step,
reason) and the members of the largest duplicate clusters, with a bound on records scanned, so a
corpus with millions of rejects costs the page neither memory nor minutes.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from pretrain import untrusted
from pretrain.curate import io as cio
from pretrain.progress import count
from pretrain.report import Section, fig_to_img, fmt, kpis, note, plt, snippet, table

MAX_SCANNED = 200_000  # reject records read for examples and clusters
MAX_DUP_KEPT = 20_000  # duplicate records held to group into clusters
MAX_EXAMPLES = 500  # (step, reason) pairs shown, one reject each (the default belt has about 40)
MAX_SHOWN = 1000  # characters kept of an id, url, reason or value of a reject (a url: 2,083 in IE)
MAX_LINE = 8 * 1024 * 1024  # a reject or kept record read whole at most (curate's max_record_bytes)
MAX_READ = 1 << 30  # decompressed bytes read from one file for the page, at most
# An object of rejects/ or data/ is read ahead this much per GET (s3fs's default: 50 MiB, fetched
# whole for the first few records the page shows); ~1 MiB per request is a round trip per MiB
# when a scan goes on (to MAX_SCANNED records).
READ_BLOCK = 1 << 20
STEPS_DRAWN = 40  # bars of the funnel figure (the belt has 11 steps; a stats.json may list any number)
EPOCHS_WARN = 4.0  # Muennighoff et al. 2023 (Scaling Data-Constrained LMs): past ~4 epochs repeats lose value


# ----------------------------------------------------------------------------- corpus job


def _seconds_label(stats: dict) -> str:
    """wall_seconds sums every attempt of the job (a resumed one too): say over how many."""
    n = stats.get("attempts", 1)
    return f"seconds ({n} attempts)" if n > 1 else "seconds"


def curate_section(out: Path, sid: str, remote: str | None = None) -> Section:
    """`remote`: the URL `out` was staged from; rejects/ and data/ are streamed from there."""
    from pretrain.curate.report import funnel_rows, markup_warnings

    stats = untrusted.load_json_object(out / "stats.json", within=out)
    rows = funnel_rows(stats)
    d, errors = stats["documents"], stats.get("errors", {"count": 0, "by_reason": {}, "examples": []})
    job = stats.get("job", "curate")
    share = d["kept"] / max(d["read"], 1)
    seconds = stats.get("wall_seconds", stats.get("seconds"))
    parts = [kpis([("documents read", d["read"]), ("kept", d["kept"]), ("kept share", f"{share:.1%}"),
                   ("bad records skipped", errors["count"]), (_seconds_label(stats), seconds)],
                  bad={"bad records skipped"} if errors["count"] else set())]
    if rows:
        parts.append(_funnel_figure(rows))
        heads = ["step", "in", "kept", "dropped", "top reasons"]
        parts.append(table(heads, [list(r) for r in rows], {1, 2, 3}))
    parts.append(_what_ran(out, job))
    parts.append("<h3>Errors: bad records skipped</h3>" + _errors(errors))
    leaks = out / "decontam_report.json"
    if leaks.exists():
        report = untrusted.load_json_object(leaks, 1 << 30, within=out)  # every leak: can be big
        parts.append("<h3>Contamination</h3>" + _contamination(report))
    examples, clusters = scan_rejects(out, stats, remote)
    parts.append("<h3>Examples of rejects</h3>" + _reject_examples(examples))
    parts.append("<h3>Duplicate clusters</h3>" + _clusters(clusters, out, remote))
    problems = []
    if errors["count"]:
        problems.append(f"{count(errors['count'], 'bad record')} skipped ({_top(errors['by_reason'])})")
    if d["read"] == 0:
        problems.append("no document could be read")
    problems += markup_warnings(stats)  # pages judged as markup: kept as such, or all dropped
    return Section(sid, f"Corpus: {job}", job, str(out), "".join(parts),
                   [("documents kept", f"{d['kept']:,} of {d['read']:,}"), ("kept share", f"{share:.1%}"),
                    ("bad records", errors["count"])], problems)


# What the report reads of OUT/plan.json for its inputs line (three names and a count). The file
# may hold 1 GiB (curate.outputs.MAX_PLAN_BYTES: millions of inputs), ~2.2 GB read whole.
MAX_INPUTS = untrusted.MAX_SMALL_FILE


class _NotListed(Exception):
    """The inputs line, when plan.json is over MAX_INPUTS."""


def _what_ran(out: Path, job: str) -> str:
    """The inputs (OUT/plan.json) and the settings that differ from the job's defaults (config.toml)."""
    lines = []
    try:
        size = untrusted.check_file(out / "plan.json", within=out)
        if size > MAX_INPUTS:
            raise _NotListed(f"inputs: not listed (plan.json holds {size:,} bytes, over the {MAX_INPUTS:,} "
                             "read for them)")
        ident = untrusted.load_json_object(out / "plan.json", MAX_INPUTS, within=out)
        files = ident.get("inputs") or []
        size = sum(int(f.get("size") or 0) for f in files if isinstance(f, dict))
        names = ", ".join(str(f.get("path") if isinstance(f, dict) else f) for f in files[:3])
        more = f" and {len(files) - 3} more" if len(files) > 3 else ""
        lines.append(f"inputs: {count(len(files), 'file')}, {size / 1e6:,.1f} MB: {names}{more}")
    except _NotListed as e:
        lines.append(str(e))
    except untrusted.BadFile as e:  # refused (too many values, not JSON...): said, not left out in silence
        if (out / "plan.json").exists():
            lines.append(f"inputs: not listed ({e})")
    except (OSError, ValueError, AttributeError, TypeError):  # a plan.json of another shape: no line
        pass
    try:
        from pretrain import config
        from pretrain.curate.dedup_job import job_config
        from pretrain.curate.pipeline import CurateConfig

        cfg = config.load(CurateConfig, out / "config.toml")
        diff = config.changed(cfg, job_config(job))
        lines.append("settings changed from the defaults: "
                     + (", ".join(f"{k} = {json.dumps(v)}" for k, v in diff.items()) or "none"))
    except Exception:  # noqa: BLE001 - a config of another version: the page still stands
        pass
    return "".join(note(x) for x in lines)


def _top(counts: dict, n: int = 3) -> str:
    return ", ".join(f"{k} {v:,}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])[:n])


def _funnel_figure(rows: list) -> str:
    """The steps of a stats.json (anyone's: names are plain text, at most STEPS_DRAWN bars; the
    table below the figure lists every step)."""
    rows = rows[:STEPS_DRAWN]
    p = plt()
    fig, ax = p.subplots(figsize=(8, 0.42 * len(rows) + 1.2))
    names = [untrusted.plot_label(r[0], 40) for r in rows][::-1]
    kept, dropped = [r[2] for r in rows][::-1], [r[3] for r in rows][::-1]
    ax.barh(names, kept, color="#3a7bd5", label="kept")
    ax.barh(names, dropped, left=kept, color="#e57373", label="dropped")
    ax.set_xlabel("documents")
    ax.set_ylabel("step (belt order, top first)")
    ax.legend(loc="lower right")
    ax.set_title("what each step let through")
    return fig_to_img(fig, "curation funnel")


def _errors(errors: dict) -> str:
    if not errors["count"]:
        return note("none: every record could be read")
    by = table(["reason", "records"], sorted(errors["by_reason"].items(), key=lambda kv: -kv[1]), {1})
    ex = [[e.get("file"), e.get("record"), e.get("reason")] for e in errors.get("examples", [])[:20]]
    return by + "<h3>First bad records</h3>" + table(["file", "record", "reason"], ex, wrap={0})


def _contamination(rep: dict) -> str:
    benches = sorted(rep.get("benchmarks", {}).items())
    rows = [[name, b.get("items_indexed"), b.get("items_leaked"), b.get("too_short"),
             ", ".join(list(b.get("leaks", {}))[:5])] for name, b in benches]
    docs = rep.get("documents", {})
    head = note(f"{docs.get('contaminated', 0):,} of {docs.get('in', 0):,} documents share a "
                f"{rep.get('n')}-word n-gram with a benchmark item (GPT-3's 13-gram overlap rule).")
    heads = ["benchmark", "items indexed", "items leaked", "too short", "leaked items"]
    return head + table(heads, rows, {1, 2, 3})


def scan_rejects(out: Path, stats: dict,
                 remote: str | None = None) -> tuple[list[dict], dict[str, list[dict]]]:
    """First reject of each (step, reason), in belt order; duplicate rejects grouped by kept twin."""
    order = {n: i for i, n in enumerate(stats.get("step_order", list(stats.get("steps", {}))))}
    firsts: dict[tuple[str, str], dict] = {}
    clusters: dict[str, list[dict]] = {}
    held = scanned = 0
    for path in _shard_files(out, "rejects", remote):
        for r in _records(path, out):
            scanned += 1
            key = (_cut(r.get("step") or "?"), _cut(r.get("reason") or "?"))
            if key not in firsts and len(firsts) < MAX_EXAMPLES:
                firsts[key] = {k: _cut(r.get(k)) for k in ("value", "threshold", "url", "id")}
                firsts[key]["step"], firsts[key]["reason"] = key
                firsts[key]["text"] = snippet(r.get("text"))
                meta = r.get("metadata") if isinstance(r.get("metadata"), dict) else {}
                firsts[key]["metadata"] = {k: _cut(meta.get(k)) for k in ("language", "language_score")}
            if r.get("kept_id") and held < MAX_DUP_KEPT:
                member = {k: _cut(r.get(k)) for k in ("id", "url", "step")}
                clusters.setdefault(_cut(r["kept_id"]), []).append(member)
                held += 1
            if scanned >= MAX_SCANNED:
                break
        if scanned >= MAX_SCANNED:
            break
    examples = sorted(firsts.values(), key=lambda r: (order.get(r["step"], len(order)), r["reason"]))
    return examples, clusters


def _cut(v: object, n: int = MAX_SHOWN) -> object:
    """A field of someone's reject record as the page keeps it: a number as it is, anything else a
    string of at most `n` characters (ids, urls, values and reasons of 1 MB each: 256 such records,
    an 89 KB file, made a 537 MB page and took 3.2 GB)."""
    if v is None or isinstance(v, (bool, int, float)):
        return v
    t = v if isinstance(v, str) else json.dumps(v)[: n + 1] if isinstance(v, (list, dict)) else str(v)
    return t if len(t) <= n else t[:n] + "…"


def _shard_files(out: Path, sub: str, remote: str | None) -> list[Path | str]:
    """The `*.jsonl.zst` of OUT/sub, sorted: local files, or the URLs under `remote`/sub (one
    listing; nothing is downloaded: `_records` streams them)."""
    if remote is None:
        return sorted((out / sub).glob("*.jsonl.zst"))
    fs, root = cio.url_fs(f"{remote.rstrip('/')}/{sub}")
    try:
        names = fs.ls(root, detail=False)
    except FileNotFoundError:
        return []
    return sorted(fs.unstrip_protocol(n) for n in names if n.endswith(".jsonl.zst"))


def _records(path: Path | str, out: Path):
    """The records of one rejects/data file of a corpus folder someone may have handed us: bounded
    per line and per file, bad lines skipped (the page shows examples, not every record)."""
    if not cio.is_url(path):
        untrusted.check_file(path, within=out)
    return cio.read_jsonl_zst(path, max_line=MAX_LINE, max_bytes=MAX_READ, block_size=READ_BLOCK)


def _measured(r: dict) -> tuple[object, object]:
    """The rule's measured value and threshold; a language drop without one shows the language."""
    value, threshold = r.get("value"), r.get("threshold")
    meta = r.get("metadata") or {}
    if value is None and r["reason"] == "wrong_language" and meta.get("language"):
        value = meta["language"]
    if value is None and r["reason"] == "low_language_score" and meta.get("language_score") is not None:
        value = meta["language_score"]
    return value, threshold


def _reject_examples(examples: list[dict]) -> str:
    if not examples:
        return note("no document was dropped")
    rows = [[r["step"], r["reason"], *_measured(r), r.get("url") or r.get("id"), r["text"]] for r in examples]
    return (note("One example per drop reason, in belt order; value is what the rule measured on the "
                 "document, threshold the limit it failed (— where the rule records none).")
            + table(["step", "reason", "value", "threshold", "url / id", "text"], rows, {2, 3},
                    wrap={4}))


def _clusters(clusters: dict[str, list[dict]], out: Path, remote: str | None = None, shown: int = 8) -> str:
    if not clusters:
        return note("no duplicates found")
    sizes = sorted((len(v) + 1 for v in clusters.values()), reverse=True)
    top = sorted(clusters.items(), key=lambda kv: -len(kv[1]))[:shown]
    kept_text = _kept_texts(out, {k for k, _ in top}, remote)
    rows = [[kid, len(m) + 1, snippet(kept_text.get(kid), 100),
             "; ".join(f"{x['step']}: {x.get('url') or x['id']}" for x in m[:4])] for kid, m in top]
    heads = ["kept id", "size", "kept text", "removed"]
    return (f"<p>{len(clusters):,} clusters, {sum(sizes) - len(sizes):,} documents removed, "
            f"largest {sizes[0]}</p>" + table(heads, rows, {1}, wrap={0, 3}))


def _kept_texts(out: Path, ids: set[str], remote: str | None = None) -> dict[str, str]:
    """Excerpts of the kept twins, looked up in data/ (at most MAX_SCANNED documents read)."""
    found: dict[str, str] = {}
    scanned = 0
    for p in _shard_files(out, "data", remote):
        for r in _records(p, out):
            scanned += 1
            if r.get("id") in ids:
                found[r["id"]] = (r.get("text") or "")[:1000]  # an excerpt: the page shows 100 chars
            if len(found) == len(ids) or scanned >= MAX_SCANNED:
                return found
    return found


# ----------------------------------------------------------------------------- tokens


def tokens_section(path: Path, sid: str) -> Section:
    from pretrain.tokens.shards import TokenDir

    tdir = TokenDir(path, check_offsets=False)
    m = tdir.manifest
    lengths = np.concatenate([np.diff(i.astype(np.int64)) for i in tdir.idxs]) if tdir.idxs else np.zeros(0)
    bpt = bytes_per_token(tdir)
    kinds = _skipped_kinds(m)
    skipped = sum(kinds.values())
    parts = [kpis([("tokens", int(m["tokens"])), ("documents", int(m["documents"])),
                   ("median tokens/document", float(np.median(lengths)) if lengths.size else None),
                   ("bytes per token", f"{bpt:.2f}" if bpt else "—"), ("vocabulary", m.get("vocab_size"))])]
    parts.append(note(f"Tokenizer sha256 {str(m.get('tokenizer', {}).get('sha256', ''))[:12]}, "
                      f"{count(len(m.get('shards', [])), 'shard')} of {m.get('dtype')}; "
                      f"bytes per token = UTF-8 bytes of the decoded documents / their tokens "
                      f"(end-of-text left out), over up to 200 documents (65,536 tokens of each); "
                      f"{skipped} input records skipped."))
    srcs = m.get("sources") or {}
    rows = [[k, v.get("tokens"), v.get("documents"), v.get("tokens", 0) / max(v.get("documents", 0), 1),
             f"{v.get('tokens', 0) / max(int(m['tokens']), 1):.1%}"] for k, v in sorted(srcs.items())]
    parts.append("<h3>Tokens per source</h3>"
                 + table(["source", "tokens", "documents", "mean tokens/document", "share"], rows,
                         {1, 2, 3, 4}))
    if lengths.size:
        parts.append(_length_histogram(lengths))
    problems = []
    if skipped:  # input records tokenize could not read: counted per kind in the manifest
        parts.append("<h3>Input records skipped</h3>" + table(
            ["reason", "records"], [[k, v] for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])], {1}))
        problems.append(f"{skipped:,} input records skipped ({_top(kinds)})")
    return Section(sid, f"Tokens: {path.name}", "tokens", str(path), "".join(parts),
                   [("tokens", int(m["tokens"])), ("bytes/token", f"{bpt:.2f}" if bpt else "—"),
                    ("documents", int(m["documents"]))], problems)


def _skipped_kinds(manifest: dict, limit: int | None = 64) -> dict[str, int]:
    """The manifest's `skipped` ({kind: count}, bounded per pretrain/faults.py) as far as it is one:
    a manifest may be anyone's, and TokenDir checks only what reading tokens needs (the first
    `limit` kinds; `tokens inspect` counts them all)."""
    got = manifest.get("skipped")
    if not isinstance(got, dict):
        return {}
    return {str(k)[:200]: v for k, v in list(got.items())[:limit]
            if isinstance(v, int) and not isinstance(v, bool) and v > 0}


def bytes_per_token(tdir, sample: int = 200) -> float | None:
    """UTF-8 bytes per token over the first `sample` documents, decoded with the shards' tokenizer."""
    tok_file = tdir.path / (tdir.manifest.get("tokenizer", {}).get("copy") or "tokenizer.json")
    if not tok_file.is_file() or tdir.num_documents == 0 or not tok_file.resolve().is_relative_to(
            tdir.path.resolve()):  # a link out of the folder is not read
        return None
    from pretrain.errors import UserError
    from pretrain.tokens.tokenizer import load_tokenizer

    try:  # the shared loader: a copy that is not a tokenizer is one line there, a "—" here
        tok = load_tokenizer(tok_file)
    except UserError:
        return None
    n_bytes = n_tokens = 0
    for i in range(min(sample, tdir.num_documents)):
        # the first 65,536 tokens of each: one document of 2^31 tokens was 16 GB as int64, more as ints
        ids = [int(t) for t in tdir.document(i, limit=1 << 16) if int(t) != tdir.eot_id]
        n_bytes += len(tok.decode(ids, skip_special_tokens=False).encode("utf-8"))
        n_tokens += len(ids)
    return n_bytes / n_tokens if n_tokens else None


def _length_histogram(lengths: np.ndarray) -> str:
    p = plt()
    fig, ax = p.subplots(figsize=(8, 2.8))
    ax.hist(lengths, bins=min(50, max(5, lengths.size // 4)), color="#3a7bd5")
    med = float(np.median(lengths))
    ax.axvline(med, color="#b3261e", ls="--", lw=1, label=f"median {med:,.0f}")
    ax.set_xlabel("tokens per document (end-of-text included)")
    ax.set_ylabel("documents")
    ax.legend()
    ax.set_title("document lengths")
    return fig_to_img(fig, "tokens per document")


# ----------------------------------------------------------------------------- mixture


def mixture_section(path: Path, mix: dict, sid: str) -> Section:
    rows_in = mix.get("sources") or []
    budget = mix.get("budget")
    rows = [[r.get("source"), r.get("available"), r.get("weight"), r.get("drawn"), r.get("epochs"),
             f"over {EPOCHS_WARN:g} epochs" if r.get("warning") else ""]
            for r in rows_in]
    flagged = [r["source"] for r in rows_in if r.get("warning")]
    expl = ("Epochs: how many passes the mixture makes over a source, epochs = weight × D / tokens "
            f"available, with D = {fmt(budget)} training tokens. Below 1 the run sees part of the "
            f"source; above 1 it repeats it. Up to about {EPOCHS_WARN:g} epochs repeated tokens are worth "
            "nearly as much as new ones; past that their value falls quickly and the model memorizes "
            "more (Muennighoff et al., 2023, Scaling Data-Constrained Language Models): such sources "
            "are flagged (the `warning` of `pretrain mix`).")
    body = note(expl) + table(["source", "tokens available", "weight", "tokens drawn", "epochs", "warning"],
                              rows, {1, 2, 3, 4})
    problems = [f"{', '.join(flagged)} read more than {EPOCHS_WARN:g} times"] if flagged else []
    most = max(rows_in, key=lambda r: r.get("epochs", 0), default={})
    facts = [("budget D", budget), ("most epochs", f"{most.get('source')} {most.get('epochs', 0):.2f}")]
    return Section(sid, "Mixture", "mixture", str(path), body, facts, problems)
