"""The tokens pipeline run twice as a user would (session 13 sweep): what a newcomer tripped on,
each checked against the files themselves. In-process, a tokenizer of 300 ids; ~2 s."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pretrain.cli import main

TEXT = "The quick brown fox jumps over the lazy dog. " * 40


@pytest.fixture(scope="module")
def tok(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tok")
    (root / "train.txt").write_text(TEXT)
    assert main(["tokenizer", "train", str(root / "train.txt"), "-o", str(root / "tok.json"),
                 "--vocab-size", "300"]) == 0
    return root / "tok.json"


def _one_line(capsys, *words: str) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, err
    return err


def test_a_text_field_for_plain_text_only_is_refused_before_any_work(tok, tmp_path, capsys):
    """`--text-field content` over .txt files was dropped in silence: the argparse default "text"
    hid whether it was given. Refused now, naming it, and nothing is written."""
    (tmp_path / "a.txt").write_text("one document")
    (tmp_path / "b.txt").write_text("another one")
    capsys.readouterr()
    assert main(["tokenizer", "train", str(tmp_path / "a.txt"), str(tmp_path / "b.txt"),
                 "-o", str(tmp_path / "t.json"), "--vocab-size", "300", "--text-field", "content"]) == 2
    _one_line(capsys, "--text-field content", "2 input files (.txt)", "drop --text-field")
    assert not (tmp_path / "t.json").exists()
    assert main(["tokenize", str(tmp_path / "a.txt"), "--tokenizer", str(tok), "-o", str(tmp_path / "out"),
                 "--text-field", "content"]) == 2
    _one_line(capsys, "--text-field content", "the input file (.txt) has no fields")
    assert not (tmp_path / "out").exists()


def test_a_text_field_applies_where_an_input_has_fields(tok, tmp_path, capsys):
    """With one JSONL among .txt files, the field is read there, and the .txt read whole. Truth:
    the tokenizer's own encoding of each file's text, + end-of-text."""
    from pretrain.tokens.tokenizer import eot_id, load_tokenizer

    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.jsonl").write_text(json.dumps({"content": "a fox", "text": "not this"}) + "\n")
    (tmp_path / "c" / "b.txt").write_text("a lazy dog")
    assert main(["tokenize", str(tmp_path / "c"), "--tokenizer", str(tok), "-o", str(tmp_path / "t"),
                 "--text-field", "content", "--workers", "1"]) == 0
    t = load_tokenizer(tok)
    for k, text in enumerate(["a fox", "a lazy dog"]):
        ids = np.fromfile(tmp_path / "t" / f"shard_{k:05d}.bin", dtype="<u2")
        assert ids.tolist() == [*t.encode(text).ids, eot_id(t)]
    # without the flag, the .txt-only case still reads (the default field is never refused)
    assert main(["tokenizer", "train", str(tmp_path / "c" / "b.txt"), "-o", str(tmp_path / "t2.json"),
                 "--vocab-size", "300"]) == 0
