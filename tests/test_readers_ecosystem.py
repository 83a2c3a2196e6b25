"""Files written by other tools (datatrove, HF `datasets`, pandas, Spark's layout, the stdlib's
codecs) read as the same documents, or refused in one line naming the file and the reason.

Every input here is made in tmp_path by the real writer; the truth is what that writer was given.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pretrain.curate.readers import ReaderConfig, read_documents, source_name

RECORDS = [{"id": f"r{i}", "text": f"document {i}: some words", "url": f"http://ex.org/{i}"}
           for i in range(5)]


def _read(path: Path, cfg: ReaderConfig | None = None, root: Path | None = None):
    errors: list[tuple[str, object, str]] = []
    docs = list(read_documents(path, cfg or ReaderConfig(), lambda p, r, why: errors.append((p, r, why)),
                               source=source_name(path, root) if root else None))
    return docs, errors


def _texts_ids(docs) -> list[tuple[str, str]]:
    return [(d.id, d.text) for d in docs]


TRUTH = [(r["id"], r["text"]) for r in RECORDS]


# --------------------------------------------------------------------------- text encodings


def test_utf8_bom_keeps_the_first_record(tmp_path):
    # Notepad, PowerShell's Out-File and Python's "utf-8-sig" codec start the file with a BOM.
    p = tmp_path / "bom.jsonl"
    with open(p, "w", encoding="utf-8-sig", newline="\r\n") as f:  # CRLF too, as on Windows
        for r in RECORDS:
            f.write(json.dumps(r) + "\n")
    docs, errors = _read(p)
    assert errors == [] and _texts_ids(docs) == TRUTH


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-16-be", "utf-32"])
def test_utf16_file_is_refused_in_one_line(tmp_path, codec):
    p = tmp_path / "wide.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding=codec)
    docs, errors = _read(p)
    assert docs == [] and len(errors) == 1
    path, where, why = errors[0]
    assert path == str(p) and where is None and codec[:6].upper() in why and "UTF-8" in why
