"""Object keys that stage to one local name in `pretrain tokenize s3://...` are each tokenized once.

An object key is any string: `in/a//b.jsonl` and `in/a/b.jsonl` are two objects, and so are
`x/data.jsonl` and `y/data.jsonl` named as two inputs; their copies under the work folder were the
same local file, so one object silently replaced the other (its documents lost, the other's
counted twice on a rerun). The truth: the documents written to the bucket, counted by id.
"""

from __future__ import annotations

import json

from s3server import s3  # noqa: F401  (the fixture)
from test_job_s3 import s3_here  # noqa: F401  (the fixture)

from pretrain.cli import main


def _tokenizer(tmp_path):
    from test_pipeline import _prose

    from pretrain.tokens.tokenizer import train_tokenizer

    tok = tmp_path / "tok.json"
    train_tokenizer(_prose(20, seed=3), vocab_size=300).save(str(tok))
    return str(tok)


def _rows(tag: str, n: int) -> bytes:
    return "".join(json.dumps({"id": f"{tag}-{i}", "text": f"document {tag} number {i} says hello"}) + "\n"
                   for i in range(n)).encode()


def _documents(out) -> int:
    return json.loads((out / "manifest.json").read_text())["documents"]


def test_keys_that_stage_to_one_local_name_are_each_tokenized_once(s3_here, tmp_path, capsys):  # noqa: F811
    fs = s3_here.filesystem()
    bucket = s3_here.new_bucket()
    objects = {"in/a//b.jsonl": _rows("double", 3), "in/a/b.jsonl": _rows("single", 5),
               "x/data.jsonl": _rows("x", 7), "y/data.jsonl": _rows("y", 11)}
    for key, data in objects.items():
        fs.pipe(f"{bucket}/{key}", data)
    assert sorted(fs.find(bucket)) == sorted(f"{bucket}/{k}" for k in objects)  # four objects
    tok = _tokenizer(tmp_path)
    args = ["tokenize", f"s3://{bucket}/in", f"s3://{bucket}/x/data.jsonl", f"s3://{bucket}/y/data.jsonl",
            "--tokenizer", tok, "-o", str(tmp_path / "out"), "--workers", "1",
            "--work-dir", str(tmp_path / "w")]
    assert main(args) == 0
    said = capsys.readouterr().err
    assert _documents(tmp_path / "out") == 3 + 5 + 7 + 11
    for a, b in (("in/a//b.jsonl", "in/a/b.jsonl"), ("x/data.jsonl", "y/data.jsonl")):
        line = next(x for x in said.splitlines() if f"{bucket}/{a}" in x and f"{bucket}/{b}" in x)
        assert "same local" in line
    assert main(args) == 0  # a rerun resumes: the same staging, nothing redone or doubled
    assert _documents(tmp_path / "out") == 26


def test_thousands_of_keys_naming_one_file_are_staged_apart_in_six_lines(capsys):
    """`a//b`, `a///b`, ... (any number of keys can collapse to `a/b`): each gets its own local name
    and the terminal gets five lines and a count, not one line per key."""
    from pretrain.commands.tokenize import _local_names

    listed = sorted((f"s3://b/in/a{'/' * i}b.jsonl", f"a{'/' * i}b.jsonl") for i in range(1, 2001))
    names = [n for _, n in _local_names(listed)]
    said = capsys.readouterr().err.splitlines()
    assert len(set(names)) == 2000 and names.count("a/b.jsonl") == 1
    assert len(said) == 6 and said[-1] == "pretrain: and 1,994 more objects staged under dup*/ the same way"
