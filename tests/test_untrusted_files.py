"""Small structured files from someone else (config.toml, mixture.toml, stats.json, plan.json,
metrics.jsonl, HF config.json, eval task files): each hostile shape ends as one line naming the
file, within seconds and well under 1 GB, never a traceback or a hang.

The attacks are run through the documented commands in a child process with a time limit and an
address-space limit (RLIMIT_AS), so a reader that blocks on a FIFO or grows on /dev/zero fails the
test instead of the machine.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from s3server import s3  # noqa: F401  (the fixture)

SRC = str(Path(__file__).resolve().parents[1] / "src")
DEEP_ARRAY = "[" * 100_000 + "]" * 100_000
MEM = 1 << 30  # 1 GiB of address space for a child that imports no torch


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEM, MEM))


def pretrain(*argv, cwd: Path, timeout: float = 30, mem: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run([sys.executable, "-m", "pretrain", *map(str, argv)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout,
                          preexec_fn=_limit if mem else None)


def one_line(r: subprocess.CompletedProcess, *words: str) -> str:
    """The run failed with exit 2 and one stderr line that holds every one of `words`."""
    err = r.stderr.strip()
    assert r.returncode == 2, (r.returncode, err[-1500:])
    assert "Traceback" not in err and len(err.splitlines()) == 1, err[-1500:]
    for w in words:
        assert w in err, err
    return err


MIXTURES = {
    "bad_utf8": (b'budget = 1e9\n[sources.a]\npath = "\xff"\nweight = 1\n', "invalid UTF-8 at byte 33"),
    "deep": (f"budget = {DEEP_ARRAY}\n".encode(), "nested too deeply"),
    "not_toml": (b"budget = = 1\n", "invalid mixture TOML"),
}


@pytest.mark.parametrize("case", sorted(MIXTURES))
def test_mix_on_a_hostile_toml_is_one_line(tmp_path, case):
    body, why = MIXTURES[case]
    (tmp_path / "mixture.toml").write_bytes(body)
    one_line(pretrain("mix", "mixture.toml", cwd=tmp_path), "mixture.toml", why)


def test_a_fifo_or_a_device_is_refused_not_read(tmp_path):
    """A FIFO blocked `pretrain mix` forever; /dev/zero grew its memory until the kernel stepped in."""
    os.mkfifo(tmp_path / "mixture.toml")
    one_line(pretrain("mix", "mixture.toml", cwd=tmp_path, timeout=20), "mixture.toml", "not a regular file")
    one_line(pretrain("mix", "/dev/zero", cwd=tmp_path, timeout=20), "/dev/zero", "not a regular file")


def test_config_files_share_the_bounds(tmp_path):
    """config.toml (train, curate, sample, export, eval all load it through config.load) and the
    hardware table: invalid UTF-8 was a UnicodeDecodeError traceback."""
    from pretrain import config as cfgmod
    from pretrain.curate.pipeline import CurateConfig
    from pretrain.errors import UserError
    from pretrain.plan.hardware import load_table

    bad = tmp_path / "config.toml"
    bad.write_bytes(b'[reader]\ntext_field = "\xfe"\n')
    with pytest.raises(UserError, match=r"config\.toml: invalid UTF-8 at byte 23"):
        cfgmod.load(CurateConfig, bad)
    big = tmp_path / "big.toml"
    with open(big, "wb") as f:  # sparse: 65 MiB of holes
        f.truncate(65 << 20)
    with pytest.raises(UserError, match=r"big\.toml: 68,157,440 bytes, over"):
        cfgmod.load(CurateConfig, big)
    gpus = tmp_path / "gpus.json"
    gpus.write_text('{"x": ' + DEEP_ARRAY + "}")
    with pytest.raises(UserError, match=r"gpus\.json: not valid hardware table: nested too deeply"):
        load_table(gpus)


def test_a_dotted_key_of_thousands_of_parts_is_one_line(tmp_path):
    # tomllib keeps each prefix of a dotted key as a tuple: n parts cost n^2/2 references (10,000
    # parts, a 20 kB file: 396 MB; 200,000, 400 kB: past 23 GB); a header of 200,000 parts: 76 s.
    import tomllib

    from pretrain import config as cfgmod
    from pretrain.curate.pipeline import CurateConfig
    from pretrain.errors import UserError
    from pretrain.untrusted import MAX_KEY_PARTS, load_toml

    for body in ("a" + ".a" * 8_000 + " = 1\n", "[extract]\n[x" + ".a" * 8_000 + "]\nk = 1\n",
                 'x = { "a"' + ' . "a"' * 8_000 + " = 1 }\n"):
        (tmp_path / "config.toml").write_text(body)
        with pytest.raises(UserError, match=r"config\.toml: invalid TOML: line \d: a dotted key of more"):
            cfgmod.load(CurateConfig, tmp_path / "config.toml")
    ok = "[t]\n" + "k" + ".k" * (MAX_KEY_PARTS - 1) + ' = "a. b. c"\nv = [0.1, 0.2]\n'  # 64 parts
    (tmp_path / "ok.toml").write_text(ok)
    assert load_toml(tmp_path / "ok.toml") == tomllib.loads(ok)
    (tmp_path / "ok.toml").write_text(ok.replace("k = ", "k.k = "))  # 65
    with pytest.raises(UserError, match=r"ok\.toml: invalid TOML: line 2: a dotted key of more than 64"):
        load_toml(tmp_path / "ok.toml")


# ----------------------------------------------------------------------------- pretrain report


def _zst(path: Path, pieces) -> None:
    import zstandard

    c = zstandard.ZstdCompressor().compressobj()
    with open(path, "wb") as f:
        for p in pieces:
            f.write(c.compress(p))
        f.write(c.flush())


def _reject(reason: str) -> bytes:
    rec = {"id": reason, "step": "filters", "reason": reason, "text": f"text of {reason}"}
    return json.dumps(rec).encode() + b"\n"


def _corpus(root: Path, hostile) -> Path:
    """A minimal curate output whose rejects file holds a good record, `hostile` pieces, another good one."""
    out = root / "corpus"
    (out / "rejects").mkdir(parents=True)
    (out / "data").mkdir()
    stats = {"job": "curate", "documents": {"read": 2, "kept": 0}, "steps": {"filters": {"in": 2, "kept": 0}},
             "errors": {"count": 0, "by_reason": {}, "examples": []}}
    (out / "stats.json").write_text(json.dumps(stats))
    _zst(out / "rejects" / "filters_00000.jsonl.zst",
         [_reject("before_attack"), *hostile, _reject("after_attack")])
    return out


REJECT_ATTACKS = [
    # 41 KB of zstd that inflates to one 512 MiB line: held whole (a 2 GiB one took 4.3 GB and 38 s)
    [b'{"text": "'] + [b"a" * (1 << 24)] * 32 + [b'"}\n'],
    [DEEP_ARRAY.encode() + b"\n"],  # RecursionError traceback
    [b'{"text": "\xff"}\n'],  # UnicodeDecodeError, the file not named
    [b'{"step": "filters", "reason": null}\n'],  # TypeError sorting None against str
]


def test_report_reads_a_hostile_rejects_file_in_bounded_memory(tmp_path):
    """Every attack between two good rejects, in a child limited to 1 GiB of address space."""
    out = _corpus(tmp_path, [piece for attack in REJECT_ATTACKS for piece in attack])
    r = pretrain("report", out, "-o", "page.html", cwd=tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr[-1500:]
    page = (tmp_path / "page.html").read_text()
    assert "text of before_attack" in page and "text of after_attack" in page


def test_report_does_not_copy_what_a_run_directory_links_to(tmp_path):
    """samples.txt -> a private file: its content went into the page (which users share)."""
    secret = tmp_path / "id_rsa"
    secret.write_text("-----BEGIN OPENSSH PRIVATE KEY----- s3cr3t")
    run = tmp_path / "run"
    run.mkdir()
    lines = [b'{"step": 1, "loss": 5.0}', b'{"step": "\xff"}', DEEP_ARRAY.encode(),
             b'{"step": 1, "loss": "' + b"x" * (9 << 20) + b'"}', b'{"step": 2, "loss": 4.25}']
    (run / "metrics.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    (run / "samples.txt").symlink_to(secret)
    r = pretrain("report", run, "-o", "page.html", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-1500:]
    page = (tmp_path / "page.html").read_text()
    assert "s3cr3t" not in page and "links outside" in page
    assert "4.25" in page  # step 2's loss: the good line after the hostile ones


@pytest.mark.parametrize("what", ["stats", "plan", "metrics"])
def test_report_on_a_hostile_json_is_one_line(tmp_path, what):
    if what == "metrics":  # an MFU of "x": "Unknown format code '%'", without the file's name, before
        (tmp_path / "run").mkdir()
        (tmp_path / "run" / "metrics.jsonl").write_text('{"step": 1, "loss": 2.0, "mfu": "x"}\n'
                                                        '{"event": "spike", "step": {"a": 1}}\n')
        r = pretrain("report", "run", cwd=tmp_path)
        assert r.returncode == 0 and "MFU" in (tmp_path / "report.html").read_text(), r.stderr[-1500:]
    elif what == "stats":
        out = _corpus(tmp_path, [])
        (out / "stats.json").write_text('{"documents": [1, 2]}')  # a list where an object belongs
        one_line(pretrain("report", out, cwd=tmp_path), "corpus", "not a well-formed pretrain output")
    else:
        (tmp_path / "plan.json").write_text('{"layout": ' + DEEP_ARRAY + "}")
        one_line(pretrain("report", "plan.json", cwd=tmp_path), "plan.json", "nested too deeply")


def test_a_resume_drops_hostile_metrics_lines_instead_of_failing(tmp_path):
    """A resume rewrites metrics.jsonl up to its step: invalid UTF-8 was a UnicodeDecodeError and a
    step of "x" a TypeError, both stopping the resume of a run directory received from elsewhere."""
    from pretrain.train.metrics import Metrics, read_metrics

    lines = [b'{"step": 1, "loss": 5.0}', b'{"step": "\xff"}', b'{"step": "x", "loss": 1}',
             b'{"step": 2, "loss": 4.0}', b'{"step": 3, "loss": 3.0}']
    (tmp_path / "metrics.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    Metrics(tmp_path, tensorboard=False, rewind_to=2).close()
    steps, _ = read_metrics(tmp_path / "metrics.jsonl")
    assert [s["step"] for s in steps] == [1, 2]


# ----------------------------------------------------------------------------- eval and HF folders


def test_eval_task_file_skips_hostile_lines_and_keeps_the_rest(tmp_path):
    """`pretrain eval --tasks ppl:FILE` / a custom task file: one line nested 100,000 deep was a
    RecursionError traceback, a lone surrogate a TypeError from the tokenizer, and a line without a
    newline was held whole, however long."""
    import gzip

    from pretrain.eval.tasks import load_file

    good = [json.dumps({"context": f"q{i}", "continuation": f" a{i}"}).encode() for i in range(3)]
    body = b"\n".join([good[0], DEEP_ARRAY.encode(), good[1], b'{"context": "' + b"x" * (9 << 20) + b'"}',
                       b'{"context": "\xff", "continuation": " b"}',
                       b'{"context": "\\ud800", "continuation": " c"}', good[2]]) + b"\n"
    (tmp_path / "task.jsonl").write_bytes(body)
    task = load_file(tmp_path / "task.jsonl", "t", "lm")
    assert [d["context"] for d in task.docs] == ["q0", "q1", "\ufffd", "q2"]
    (tmp_path / "task.jsonl.gz").write_bytes(gzip.compress(body)[:-40])  # cut: its end is lost
    assert [d["context"] for d in load_file(tmp_path / "task.jsonl.gz", "t", "lm").docs][:2] == ["q0", "q1"]


def test_hf_config_json_nested_deep_is_one_line(tmp_path):
    from pretrain.errors import UserError
    from pretrain.train.hf import read_hf_model_config

    (tmp_path / "config.json").write_text('{"model_type": ' + DEEP_ARRAY + "}")
    with pytest.raises(UserError, match=r"config\.json: not valid config\.json: nested too deeply"):
        read_hf_model_config(tmp_path)
    (tmp_path / "config.json").write_text("[1]")
    with pytest.raises(UserError, match=r"expected an object, found list"):
        read_hf_model_config(tmp_path)


# ----------------------------------------------------------------------------- object storage keys


def test_an_object_key_with_dotdot_is_not_copied_outside_the_work_folder(tmp_path, s3):  # noqa: F811
    """An S3 key is any string: `data/sub/../../../../escape/pwned.jsonl` is an object under `data/`.
    `pretrain tokenize s3://bkt/data` copied it to WORK/inputs/<key below the prefix>, which climbed
    out of the work folder to a path the bucket's owner chose."""
    from pretrain.tokens.tokenizer import train_tokenizer

    train_tokenizer(["hello world, a tiny corpus"] * 4, vocab_size=300).save(str(tmp_path / "tok.json"))
    fs, bucket = s3.filesystem(), s3.new_bucket()
    good = json.dumps({"text": "hello world"}).encode() + b"\n"
    fs.pipe(f"{bucket}/data/a.jsonl", good)
    fs.pipe(f"{bucket}/data/sub/../../../../../escape/pwned.jsonl", good)
    (tmp_path / "run").mkdir()
    r = subprocess.run([sys.executable, "-m", "pretrain", "tokenize", f"s3://{bucket}/data", "--tokenizer",
                        "../tok.json", "-o", "out", "--work-dir", "w/x"], cwd=tmp_path / "run",
                       env={**s3.env(), "PYTHONPATH": SRC}, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-1500:]
    assert not list(tmp_path.rglob("pwned.jsonl")) and not (tmp_path / "escape").exists()
    assert "skipped 1 object under" in r.stderr and ", 1 document, 1 shard " in r.stdout


def test_report_of_a_token_folder_whose_tokenizer_copy_is_not_one(tmp_path):
    """The copy beside the shards was opened with `Tokenizer.from_file` directly: its plain
    Exception ("data did not match any variant...") was a traceback out of `pretrain report`."""
    from pretrain.report import build_report
    from pretrain.tokens.tokenizer import train_tokenizer

    train_tokenizer(["hello world, a tiny corpus"] * 4, vocab_size=300).save(str(tmp_path / "tok.json"))
    (tmp_path / "c.jsonl").write_text(json.dumps({"text": "hello world"}) + "\n")
    r = subprocess.run([sys.executable, "-m", "pretrain", "tokenize", "c.jsonl", "--tokenizer", "tok.json",
                        "-o", "t"], cwd=tmp_path, env={**os.environ, "PYTHONPATH": SRC},
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-1500:]
    assert "<b>—</b><span>bytes per token" not in build_report([tmp_path / "t"])  # measured
    (tmp_path / "t" / "tokenizer.json").write_text('{"model": 5}')
    assert "<b>—</b><span>bytes per token" in build_report([tmp_path / "t"])  # the section stands


def test_an_earlier_eval_file_nested_deep_is_replaced_not_a_traceback(tmp_path):
    from pretrain.eval.report import SCHEMA, merge_previous

    doc = {"schema": SCHEMA, "model": {"path": "m"}, "settings": {}, "results": {"copa": {"acc": 0.5}},
           "tasks": {}, "examples": {}}
    (tmp_path / "step_0000010.json").write_text('{"schema": ' + DEEP_ARRAY + "}")
    assert merge_previous(doc, tmp_path / "step_0000010.json") == doc


def test_a_hugging_face_folder_with_damaged_files_is_one_line(tmp_path):
    """`pretrain eval HF_DIR`: a safetensors header that is not the JSON it should be was a
    SafetensorError traceback, a folder without tokenizer files a ValueError from transformers."""
    import struct

    from pretrain.errors import UserError
    from pretrain.eval.lm import from_hf_dir
    from pretrain.tokens.tokenizer import train_tokenizer

    cfg = {"model_type": "llama", "vocab_size": 300, "hidden_size": 8, "intermediate_size": 16,
           "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2,
           "max_position_embeddings": 32, "rms_norm_eps": 1e-5, "tie_word_embeddings": True}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(UserError, match="transformers cannot load its tokenizer"):
        from_hf_dir(tmp_path)
    train_tokenizer(["hello world, a tiny corpus"] * 4, vocab_size=300).save(str(tmp_path / "tokenizer.json"))
    header = b'{"model.embed_tokens.weight": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}, ' \
             b'"__metadata__": [1]}'
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + bytes(16))
    with pytest.raises(UserError, match=r"model\.safetensors: not a readable safetensors file"):
        from_hf_dir(tmp_path)


def test_a_file_name_cannot_send_terminal_escapes(tmp_path):
    """A name from someone else's folder went to the terminal as is: ESC ]0;...BEL sets the window
    title, other sequences recolour or clear it (OSC 52 writes the clipboard on some terminals)."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a\x1b]0;pwned\x07\u202egpj.jsonl").write_text('{"text": "not closed\n')
    # a newline in a name (an object key may hold one) printed a line of the name's choosing
    # (another kind of bad record: the summary shows the first record of each kind)
    (tmp_path / "in" / "b\nFAKE: all good.jsonl").write_bytes(b'{"text": "\xff"}\n')
    r = pretrain("curate", "in", "-o", "out", "--workers", "1", cwd=tmp_path, timeout=60)
    assert r.returncode == 1, r.stderr[-1500:]
    said = r.stdout + r.stderr
    assert "\x1b]0;" not in said and "\u202e" not in said
    assert "a\\x1b]0;pwned\\x07\\u202egpj.jsonl: record line 1: malformed JSON" in said
    assert "b\\nFAKE: all good.jsonl: record line 1: invalid UTF-8" in said and "\nFAKE" not in said, said
