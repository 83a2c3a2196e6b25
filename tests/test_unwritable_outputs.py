"""An output path that cannot be written (under a regular file) stops every command of tokens, the
planner and the tour with one line naming it, instead of a FileNotFoundError/FileExistsError
traceback (run-it-twice review, session 5)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pretrain.cli import main
from pretrain.curate.io import write_jsonl_zst
from pretrain.tokens.pipeline import tokenize_corpus
from pretrain.tokens.tokenizer import train_tokenizer

TEXTS = [f"page {i}: the glacier carved the valley over ten thousand years." for i in range(30)]


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("unwritable")
    write_jsonl_zst(root / "a.jsonl.zst", [{"text": t} for t in TEXTS])
    train_tokenizer(TEXTS, vocab_size=300).save(str(root / "tok.json"))
    tokenize_corpus([str(root / "a.jsonl.zst")], root / "tok.json", root / "tokens", workers=1)
    (root / "file").write_text("a regular file: nothing can be created under it")
    return {"root": root, "bad": root / "file" / "out"}


CASES = {
    "tokenize": lambda m: ["tokenize", str(m["root"] / "a.jsonl.zst"), "--tokenizer",
                           str(m["root"] / "tok.json"), "-o", str(m["bad"]), "--workers", "1"],
    "tokenize onto a file": lambda m: ["tokenize", str(m["root"] / "a.jsonl.zst"), "--tokenizer",
                                       str(m["root"] / "tok.json"), "-o", str(m["root"] / "file")],
    "export-megatron": lambda m: ["tokens", "export-megatron", str(m["root"] / "tokens"), "-o",
                                  str(m["bad"] / "web")],
    "plan --emit-recipe": lambda m: ["plan", "--model", "gpt2-124m", "--emit-recipe",
                                     str(m["bad"] / "r.toml")],
    "plan --figures": lambda m: ["plan", "--model", "gpt2-124m", "--figures", str(m["bad"])],
    "tour --figures": lambda m: ["tour", "--section", "4", "--figures", str(m["bad"])],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_unwritable_output_is_one_line(made, capsys, case):
    assert main(CASES[case](made)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err and "error:" in err[-1] and "Traceback" not in "\n".join(err), err
    assert str(made["root"] / "file") in err[-1], err
