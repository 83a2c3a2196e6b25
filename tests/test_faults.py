"""curate's error summary counts bad records by kind (pretrain/faults.py, shared with tokenize).

Review (session 8): stats.json and the terminal grouped reasons by the text before the first colon
(`missing text column 'text' (columns`) and kept byte positions in keys (one key per bad record of
a hostile file). The truth here is what the test planted: which lines are bad, and why.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from pretrain.cli import main
from pretrain.faults import MAX_FAULT_KINDS, OTHER_KINDS, count_fault, merge_faults

PROSE = ("The river valley was settled by farmers who grew wheat and barley along the banks, and "
         "over the centuries the villages grew into small market towns with their own churches. ") * 4


def test_curate_counts_by_kind_and_names_the_first_of_each(tmp_path, capsys):
    d = tmp_path / "in"
    d.mkdir()
    with open(d / "bad.jsonl", "wb") as f:
        f.write((json.dumps({"id": "ok", "text": PROSE}) + "\n").encode())
        for i in range(3):  # invalid UTF-8 at three different bytes: one kind
            f.write(b'{"text": "' + b"x" * i + b'\xff"}\n')
        f.write(b'{"text": broken\n{"text": "x", broken\n')  # two parser messages: one kind
    pq.write_table(pa.table({"body": ["no text column"]}), d / "z.parquet")  # a reason with a colon
    out = tmp_path / "out"
    assert main(["curate", str(d), "-o", str(out), "--workers", "1"]) == 0
    errors = json.loads((out / "stats.json").read_text())["errors"]
    missing = "missing text column 'text' (columns: body)"
    assert errors["by_reason"] == {"invalid UTF-8": 3, "malformed JSON": 2, missing: 1}, errors
    first = errors["first"]
    assert (first["invalid UTF-8"]["record"], first["malformed JSON"]["record"]) == ("line 2", "line 5")
    assert first["invalid UTF-8"]["file"].endswith("bad.jsonl")
    assert first[missing]["file"].endswith("z.parquet")
    said = capsys.readouterr().out
    for kind, n, where in (("invalid UTF-8", 3, "bad.jsonl: record line 2"),
                           ("malformed JSON", 2, "bad.jsonl: record line 5"), (missing, 1, "z.parquet")):
        line = next((ln for ln in said.splitlines() if f"{n:,} {kind}" in ln), None)
        assert line and where in line, (kind, said)


def test_kinds_are_bounded_on_a_hostile_file():
    counts: dict[str, int] = {}
    for i in range(500):  # a reason that carries the record's own words: a new kind each time
        count_fault(counts, f"unreadable (ArrowInvalid: field x{i})")
    count_fault(counts, "invalid UTF-8 at byte 12345")
    assert len(counts) == MAX_FAULT_KINDS + 1 and sum(counts.values()) == 501
    assert counts[OTHER_KINDS] == 500 - MAX_FAULT_KINDS + 1
    total: dict[str, int] = {}
    merge_faults(total, counts)
    merge_faults(total, {"another kind": 2})
    assert len(total) == MAX_FAULT_KINDS + 1 and sum(total.values()) == 503
