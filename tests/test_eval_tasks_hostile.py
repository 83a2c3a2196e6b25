"""Evaluation task files from someone else (red team round 5): what a line carries beside the
fields its kind reads is never held, and every list an example brings is bounded."""

from __future__ import annotations

import gzip
import json
import tracemalloc

import pytest


def _peak_of(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_fields_a_kind_does_not_read_are_not_held_while_the_file_is_read(tmp_path):
    """A line of `{}` values parses to ~24x its bytes of Python objects; 40 such 8 MiB lines (a
    317 KB .gz) held 7.7 GB before, because every parsed record was kept until the file was read.
    Truth: the peak of parsing one such line alone. Reading twelve must stay near one, not twelve."""
    from pretrain.eval.tasks import load_file

    line = json.dumps({"context": "a b", "continuation": " c", "x": [{}] * 60_000}) + "\n"
    p = tmp_path / "t.jsonl.gz"
    p.write_bytes(gzip.compress(line.encode() * 12))
    one = _peak_of(lambda: json.loads(line))
    got = {}
    peak = _peak_of(lambda: got.setdefault("task", load_file(p)))
    assert [d["context"] for d in got["task"].docs] == ["a b"] * 12
    assert peak < 3 * one, (peak, one)  # held whole: ~12x


@pytest.mark.parametrize("rec, kind", [
    ({"context": "Q", "answer": "1", "aliases": ["1"] * 1001}, "qa"),
    ({"subject": "s", "question": "q", "choices": ["x"] * 1001, "answer": "A"}, "mmlu"),
])
def test_a_list_past_max_choices_in_any_kind_is_skipped_by_its_reason(tmp_path, rec, kind):
    """`aliases` (each compared with every generation, each a Python string: 4 M in an 8 MiB line,
    40 such lines ran out of 12 GB) and MMLU's choices were not bounded by MAX_CHOICES."""
    from pretrain.eval.tasks import MAX_CHOICES, load_file

    ok = dict(rec)
    key = "aliases" if kind == "qa" else "choices"
    ok[key] = rec[key][:4]
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps(rec) + "\n" + json.dumps(ok) + "\n")
    assert len(rec[key]) == MAX_CHOICES + 1
    task = load_file(p, kind=kind)
    assert len(task.docs) == 1 and task.skipped == {"too_many_choices": 1}
    p.write_text(json.dumps({**ok, key: "abcd"}) + "\n" + json.dumps(ok) + "\n")  # not a list
    assert load_file(p, kind=kind).skipped == {"bad_value": 1}
