"""The funnel: what each step of a corpus job let through, why it dropped the rest, what failed."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pretrain.progress import count
from pretrain.untrusted import one_line

ERRORS_SHOWN = 5  # first bad-record examples printed under the funnel
KINDS_SHOWN = 8  # kinds of bad record printed under the funnel (every kind is in stats.json)
TEXT_FIELD_HINT = "the text under another field? --text-field NAME"


def funnel_rows(stats: dict) -> list[tuple[str, int, int, int, str]]:
    """(step, in, kept, dropped, top reasons) for every step, in belt order."""
    rows = []
    for name in stats.get("step_order", list(stats["steps"])):
        s = stats["steps"][name]
        dropped = s.get("dropped", {})
        n_drop = sum(dropped.values())
        if s.get("in", 0) == 0 and n_drop == 0:
            continue
        top = ", ".join(f"{k} {v}" for k, v in sorted(dropped.items(), key=lambda kv: -kv[1])[:3])
        rows.append((name, s["in"], s["kept"] if "kept" in s else s["in"] - n_drop, n_drop, top))
    return rows


def error_lines(stats: dict, shown: int = ERRORS_SHOWN) -> list[str]:
    """'file: record R: reason' for the first few bad records, the first of each file first (one
    garbage file must not hide why another failed)."""
    examples = stats["errors"]["examples"]
    seen: set[str] = set()
    firsts = [e for e in examples if not (e["file"] in seen or seen.add(e["file"]))]
    picked = (firsts + [e for e in examples if e not in firsts])[:shown]
    # record None: the whole file failed (a Parquet/Arrow file without the text column), not a record
    return [one_line(_where(e)) for e in picked]  # names: theirs


def _where(e: dict) -> str:
    # record None: the whole file failed (a Parquet/Arrow file without the text column), not a record
    return f"{e['file']}: " + ("" if e["record"] is None else f"record {e['record']}: ") + e["reason"]


def kind_lines(stats: dict, shown: int = KINDS_SHOWN) -> list[str]:
    """'N kind; first: file: record R: reason' for every kind of bad record (pretrain/faults.py),
    the most frequent first; a stats.json written before kinds (no `first`) gives its examples."""
    errors = stats["errors"]
    if "first" not in errors:
        return error_lines(stats)
    top = sorted(errors["by_reason"].items(), key=lambda kv: -kv[1])
    # a file whose text is under another field was only said when no document at all was read
    hint = {kind: f"; {TEXT_FIELD_HINT}" for kind, _ in top
            if kind.startswith(("missing text field", "missing text column"))}
    lines = [one_line(f"{n:,} {kind}" + (f"; first: {_where(errors['first'][kind])}"
                                          if kind in errors["first"] else "")) + hint.get(kind, "")
             for kind, n in top[:shown]]
    if len(top) > shown:
        lines.append(f"{len(top) - shown} more kinds in stats.json")
    return lines


def print_funnel(stats: dict, out: str | Path) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    first = nothing_done_line(stats)
    if first:  # said first: the funnel below is an earlier attempt's work
        console.print(first, highlight=False, soft_wrap=True)
    table = Table(title=f"{stats.get('job', 'curation')} funnel", title_justify="left")
    for col, just in (
        ("step", "left"),
        ("in", "right"),
        ("kept", "right"),
        ("dropped", "right"),
        ("top reasons", "left"),
    ):
        table.add_column(col, justify=just)
    for name, n_in, kept, dropped, top in funnel_rows(stats):
        table.add_row(name, f"{n_in:,}", f"{kept:,}", f"{dropped:,}", top)
    console.print(table)
    console.print(totals_line(stats), highlight=False, soft_wrap=True)
    for warning in markup_warnings(stats):
        console.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
    if renamed := stats.get("dedup", {}).get("renamed", 0):
        console.print(f"{count(renamed, 'document')} kept under a repeated id "
                      f"{'was' if renamed == 1 else 'were'} renamed ID#2, ID#3, ... "
                      "(ids are unique in data/)", soft_wrap=True)
    lines = kind_lines(stats)
    if lines:
        console.print(f"{count(stats['errors']['count'], 'bad record')} skipped, by kind:")
        for line in lines:
            console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)
    from pretrain.curate.io import join

    for line in contamination_lines(out) if "decontaminate" in stats["steps"] else []:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    console.print(f"corpus: {join(out, 'data')}   rejects: {join(out, 'rejects')}   "
                  f"stats: {join(out, 'stats.json')}", soft_wrap=True)


def markup_warnings(stats: dict) -> list[str]:
    """HTML that no `extract` step turned into text (pipeline._markup_counted): `pretrain dedup
    crawl/` or `decontaminate` of WARC files hashed and matched the pages' markup, tags and scripts
    included, and wrote it to data/ as the documents' text; a JSONL of pages (`--text-field
    source_html`) had every page judged as markup (mozilla-readability's 130: none kept)."""
    records, job = stats.get("records"), stats.get("job", "curate")
    # a stats.json from someone else's OUT (pretrain report): counts only when they are counts
    records = {k: v for k, v in records.items() if type(v) is int} if isinstance(records, dict) else {}
    compared = "compared" if job in ("dedup", "decontaminate") else "judged"
    out = []
    if n := records.get("html_not_extracted", 0):
        steps = f'\'["extract","{job}"]\'' if job in ("dedup", "decontaminate") else "'[\"extract\", ...]'"
        out.append(f"{count(n, 'HTML page')} went through without the extract step: their markup was "
                   f"{compared} and written as their text; for the main text, --set steps={steps}")
    if n := records.get("html_in_text", 0):
        out.append(f"{count(n, 'record')} hold a whole HTML page as text (<html ...): its markup was "
                   f"{compared}; --set reader.text_is_html=true extracts the main text first")
    return out


def nothing_done_line(stats: dict) -> str:
    """'already complete: nothing to do (...)' when this attempt found every shard done; else ""."""
    this = stats.get("this_attempt")
    if not this or this["written"] or not this["shards"]:
        return ""
    shards = f"{this['shards']} shard{'s' * (this['shards'] != 1)}"
    from pretrain.progress import seconds_text

    took = seconds_text(this["seconds"])
    index = ", the benchmarks not indexed" if this.get("indexed") is False else ""
    return f"already complete: nothing to do (this attempt checked {shards} in {took}{index})"


def totals_line(stats: dict) -> str:
    """Documents read and kept, bad records, seconds; after a rerun labelled as the job's (its
    attempts' together), with what this attempt did itself when it did some of the shards."""
    from pretrain.progress import rerun_note, seconds_text

    d = stats["documents"]
    share = d["kept"] / d["read"] if d["read"] else 0.0
    n = stats.get("attempts", 1)
    totals = (f"read {count(d['read'], 'document')}, kept {d['kept']:,} ({share:.1%}); "
              f"{count(stats['errors']['count'], 'bad record')} skipped; {stats['wall_seconds']:.1f} s"
              + (f" over {n} attempts" if n > 1 else ""))
    this = stats.get("this_attempt")
    note = rerun_note(this["written"], this["shards"], "done") if this else ""
    if not note:  # this invocation did every shard: the totals are its own
        return totals
    if nothing_done_line(stats):
        return f"the job, all attempts: {totals}"
    return f"this attempt: {note} ({seconds_text(this['seconds'])})\nthe job, all attempts: {totals}"


def contamination_lines(out: str | Path, shown: int = 10) -> list[str]:
    """Per benchmark, how many of its items leaked into how many documents, and where the full
    list is (OUT/decontam_report.json): decontamination's answer, not only a drop count."""
    import json

    from pretrain.curate import io
    from pretrain.untrusted import one_line  # benchmark names are file names of someone's folder

    path = io.join(out, "decontam_report.json")
    if not io.exists(path):
        return []
    report = json.loads(io.read_bytes(path))
    lines = []
    for name, b in sorted(report["benchmarks"].items(), key=lambda kv: -kv[1]["items_leaked"])[:shown]:
        docs = len({d for ids in b["leaks"].values() for d in ids})
        # items not indexed are said: "0 of 0 items leaked" read as a clean result for a set of short answers
        unchecked = [count(b["too_short"], "item") + " too short to check"] if b.get("too_short") else []
        unchecked += [count(b["bad_records"], "bad record")] if b.get("bad_records") else []
        items, into = count(b["items_indexed"], "item"), count(docs, "document")
        lines.append(f"  {one_line(name)}: {b['items_leaked']:,} of {items} leaked into {into}"
                     + (f" ({', '.join(unchecked)})" if unchecked else ""))
    more = len(report["benchmarks"]) - shown
    return ["contamination (per benchmark):", *lines, *([f"  ... {more} more"] if more > 0 else []),
            f"which items, in which documents: {path}"]


def exit_code(stats: dict) -> int:
    """0, or 1 with one line on stderr when no document could be read (a job that read nothing
    did not succeed: every input was empty, truncated or not what its name says)."""
    if stats["documents"]["read"] > 0:
        return 0
    n = stats["errors"]["count"]
    first = error_lines(stats, 1)
    why = f"; first: {first[0]}" if first else ""
    reasons = stats["errors"].get("by_reason", {})
    if any(r.startswith(("missing text field", "missing text column")) for r in reasons):
        why += f"; {TEXT_FIELD_HINT}"
    print(f"error: no document could be read from the inputs ({count(n, 'bad record')}{why})",
          file=sys.stderr)
    return 1


def why_none_read(skipped: dict[str, int]) -> str:
    """The most frequent reason records were skipped, with the flag that fixes a missing text field
    (a command that read no document says this instead of a bare count)."""
    if not skipped:
        return "the inputs hold no record"
    why = max(skipped.items(), key=lambda kv: kv[1])[0]
    missing = why.startswith(("missing text field", "missing text column"))
    return f"most often: {why}" + (f"; {TEXT_FIELD_HINT}" if missing else "")


def markers(lay) -> set[str]:
    """The names in the done markers' folder, listed once (a marker read per shard cost a 1M-input
    job as many reads). OUT is already this job's: no marker of another job is there."""
    try:
        return set(os.listdir(lay.removals_marker.parent))
    except OSError:
        return set()


def shards_left(tasks: list, lay, names: set[str]) -> int:
    """Shards an earlier attempt did not finish (both stages' markers): this attempt's work, said
    after the funnel ("already complete: nothing to do" when none). A marker whose outputs were
    since deleted counts as finished here; the shard still runs again."""
    return sum(not {lay.marker("filter", t.shard).name, lay.marker("write", t.shard).name} <= names
               for t in tasks)


def resuming(tasks: list, lay, job: str, attempt: int, names: set[str]) -> str | None:
    """Where a rerun picks up, from the done markers of earlier attempts, in one line: a log has no
    bar, and before this a resumed job said nothing until its funnel ("... over 2 attempts"). None
    for a first attempt, and for a finished job (its funnel says first that nothing was left)."""
    if attempt < 2 or not tasks or not shards_left(tasks, lay, names):
        return None
    n = len(tasks)

    def done(stage: str) -> int:
        return sum(lay.marker(stage, t.shard).name in names for t in tasks)

    parts = [f"{done('filter')} of {n} shard{'s' * (n != 1)} already filtered"]
    if lay.removals_marker.name in names:
        parts.append("dedup done")
    if written := done("write"):
        parts.append(f"{written} of {n} written")
    return f"pretrain {job}: resuming (attempt {attempt}): " + ", ".join(parts)
