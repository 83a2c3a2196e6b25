"""Token shards: `pretrain tokenize` output decodes back to its inputs, is worker-count independent,
resumes after a kill, and refuses damaged or mismatched files with errors that name them."""

from __future__ import annotations

import gzip
import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest

from pretrain.cli import main as cli_main
from pretrain.curate.io import write_jsonl_zst
from pretrain.errors import DataError, UserError
from pretrain.tokens.pipeline import tokenize_corpus
from pretrain.tokens.shards import TokenDir, dtype_for_vocab
from pretrain.tokens.tokenizer import load_tokenizer, train_tokenizer
from tests.conftest import data_file


def _docs(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    syll = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
    extra = ["emoji 👍🏽 ok", "tab\tand\nnewline  ", "quoted <|endoftext|> marker", "中文 العربية"]
    return [" ".join("".join(rng.choice(syll) for _ in range(rng.randint(1, 3)))
                     for _ in range(rng.randint(1, 80))) + rng.choice(extra) for _ in range(n)]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("corpus")
    texts = {"a.jsonl.zst": _docs(1, 120), "b.jsonl.gz": _docs(2, 80), "c.txt": _docs(3, 1),
             "d.parquet": _docs(4, 10)}
    write_jsonl_zst(root / "a.jsonl.zst",
                    [{"id": str(i), "text": t} for i, t in enumerate(texts["a.jsonl.zst"])])
    with gzip.open(root / "b.jsonl.gz", "wt", encoding="utf-8") as f:
        for t in texts["b.jsonl.gz"]:
            f.write(json.dumps({"text": t}) + "\n")
        f.write("{not json\n")  # a bad record: skipped and counted, never fatal
    (root / "c.txt").write_text(texts["c.txt"][0], encoding="utf-8")
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": texts["d.parquet"]}), root / "d.parquet")
    tok = train_tokenizer(_docs(9, 300), vocab_size=500)
    tok.save(str(root / "tok.json"))
    return {"root": root, "texts": texts, "tok": root / "tok.json"}


@pytest.fixture(scope="module")
def tokens(corpus, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tokens") / "web"
    tokenize_corpus([str(corpus["root"])], corpus["tok"], out, workers=1)
    return out


def test_documents_decode_to_inputs(corpus, tokens):
    tok = load_tokenizer(corpus["tok"])
    d = TokenDir(tokens)
    expected = [t for name in sorted(corpus["texts"]) for t in corpus["texts"][name]]
    assert d.num_documents == len(expected) == d.manifest["documents"]
    for i, text in enumerate(expected):
        ids = d.document(i)
        assert ids[-1] == d.eot_id and d.eot_id not in ids[:-1].tolist()  # one EOT, at the end
        assert tok.decode(ids[:-1].tolist()) == text
    # The one malformed JSON line was skipped and counted.
    assert sum(d.manifest["skipped"].values()) == 1
    assert all(k.startswith("malformed JSON") for k in d.manifest["skipped"])


def test_format_is_plain_numpy(tokens):
    # The documented format, read without our reader: raw .bin of the manifest dtype, .npy offsets.
    man = json.loads((tokens / "manifest.json").read_text())
    assert man["dtype"] == "uint16" and man["vocab_size"] == 500
    total = 0
    for sh in man["shards"]:
        arr = np.fromfile(tokens / sh["bin"], dtype="<u2")
        off = np.load(tokens / sh["idx"])
        assert off.dtype == np.dtype("<u8") and off[0] == 0 and off[-1] == arr.size == sh["tokens"]
        assert (arr[off[1:] - 1] == man["eot_id"]).all()
        total += arr.size
    assert total == man["tokens"] == man["sources"]["web"]["tokens"]


def test_dtype_for_vocab():
    assert dtype_for_vocab(65536) == np.uint16
    assert dtype_for_vocab(65537) == np.uint32


def tokenize_with_big_vocab(tmp_path: Path, out: Path) -> None:
    """Tokenize 4 words with a 70,002-id word-level tokenizer (ids past 65,535: uint32 shards)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {f"w{i}": i for i in range(70_000)} | {"<unk>": 70_000, "<|endoftext|>": 70_001}
    t = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    t.add_special_tokens(["<|endoftext|>"])
    t.save(str(tmp_path / "big.json"))
    (tmp_path / "in.txt").write_text("w1 w65535 w65536 w69999")
    tokenize_corpus([str(tmp_path / "in.txt")], tmp_path / "big.json", out, workers=1)


def test_large_vocab_uses_uint32(tmp_path):
    tokenize_with_big_vocab(tmp_path, tmp_path / "out")
    d = TokenDir(tmp_path / "out")
    assert d.dtype == np.uint32
    assert d.document(0).tolist() == [1, 65535, 65536, 69999, 70_001]


def _tree_bytes(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.suffix in (".bin", ".idx")}


def test_same_bytes_for_any_worker_count(corpus, tokens, tmp_path):
    out = tmp_path / "web"
    man = tokenize_corpus([str(corpus["root"])], corpus["tok"], out, workers=2)
    assert _tree_bytes(out) == _tree_bytes(tokens)
    assert man == json.loads((tokens / "manifest.json").read_text())


def test_resume_after_kill(corpus, tokens, tmp_path):
    out = tmp_path / "web"
    shutil.copytree(tokens, out)
    # Simulate a kill during shard 1: its files and marker are gone, a temporary file is left behind.
    for suffix in (".bin", ".idx", ".done"):
        (out / f"shard_00001{suffix}").unlink(missing_ok=True)
    (out / "manifest.json").unlink()
    (out / ".shard_00001.bin.abc.tmp").write_bytes(b"half a shard")
    rerun = []
    tokenize_corpus([str(corpus["root"])], corpus["tok"], out, workers=1, on_unit=rerun.append)
    assert [e["bin"] for e in rerun] == ["shard_00001.bin"]
    assert _tree_bytes(out) == _tree_bytes(tokens)
    assert (out / "manifest.json").read_text() == (tokens / "manifest.json").read_text()


def test_resume_with_other_tokenizer_is_refused(corpus, tokens, tmp_path):
    out = tmp_path / "web"
    shutil.copytree(tokens, out)
    other = tmp_path / "other.json"
    train_tokenizer(_docs(5, 200), vocab_size=400).save(str(other))
    with pytest.raises(UserError, match="another tokenizer"):
        tokenize_corpus([str(corpus["root"])], other, out, workers=1)


def test_rerun_with_other_inputs_is_refused(corpus, tmp_path):
    # Fewer inputs used to rewrite the manifest over the first shards and leave the others' files
    # behind (a killed run: their done markers); more inputs, or other files at the same positions
    # (a changed file's size changes its shard's hash), are other jobs too. Same inputs: a no-op.
    root = corpus["root"]
    files = sorted(str(p) for p in root.iterdir() if p.name != "tok.json")
    out = tmp_path / "web"
    tokenize_corpus(files[:3], corpus["tok"], out, workers=1)
    before = _tree_bytes(out)
    for other in (files[:2], files, files[1:]):
        with pytest.raises(UserError, match="other inputs|different job"):
            tokenize_corpus(other, corpus["tok"], out, workers=1)
    (out / "manifest.json").unlink()  # as if killed before the manifest: the done markers still tell
    with pytest.raises(UserError, match="other inputs"):
        tokenize_corpus(files[:2], corpus["tok"], out, workers=1)
    tokenize_corpus(files[:3], corpus["tok"], out, workers=1)
    assert _tree_bytes(out) == before


def test_rerun_sweeps_every_temporary_file_of_a_killed_run(corpus, tmp_path):
    # A kill can land in any atomic write: a shard, its done marker, the tokenizer copy, the
    # manifest. Only `.shard_*.tmp` was swept; the others stayed in the directory for good.
    files = [str(corpus["root"] / "c.txt")]
    out = tmp_path / "web"
    tokenize_corpus(files, corpus["tok"], out, workers=1)
    debris = [".shard_00000.bin.k1.tmp", ".shard_00000.done.k2.tmp", ".manifest.json.k3.tmp",
              ".tokenizer.json.k4.tmp"]
    for name in debris:
        (out / name).write_bytes(b"half a write")
    (out / "notes.tmp").write_text("the user's own file: not ours to delete")
    tokenize_corpus(files, corpus["tok"], out, workers=1)
    assert sorted(p.name for p in out.iterdir() if p.name.endswith(".tmp")) == ["notes.tmp"]


def test_truncated_shard_is_named(tokens, tmp_path):
    out = tmp_path / "web"
    shutil.copytree(tokens, out)
    b = out / "shard_00000.bin"
    b.write_bytes(b.read_bytes()[:-6])
    with pytest.raises(DataError, match=r"shard_00000\.bin.*truncated"):
        TokenDir(out)


def test_manifest_not_matching_bin(tokens, tmp_path):
    out = tmp_path / "web"
    shutil.copytree(tokens, out)
    # Shard 0's .bin replaced by shard 1's: the manifest's counts no longer describe the file.
    shutil.copy(out / "shard_00001.bin", out / "shard_00000.bin")
    with pytest.raises(DataError, match=r"shard_00000\.bin"):
        TokenDir(out)
    shutil.copytree(tokens, out, dirs_exist_ok=True)
    man = json.loads((out / "manifest.json").read_text())
    man["shards"][0]["documents"] += 1
    (out / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(DataError, match=r"shard_00000\.idx.*documents"):
        TokenDir(out)
    man["shards"][0]["documents"] -= 1
    man["shards"][0]["bin"] = "../../etc/passwd"
    (out / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(DataError, match="plain file name"):
        TokenDir(out)
    (out / "manifest.json").write_text("{}")
    with pytest.raises(DataError, match="format"):
        TokenDir(out)


def test_inspect_checks_the_tokenizer(corpus, tokens, tmp_path, capsys):
    assert cli_main(["tokens", "inspect", str(tokens), "--tokens", "400"]) == 0
    printed = capsys.readouterr().out
    assert f"{TokenDir(tokens).num_tokens:,} tokens" in printed
    assert repr(corpus["texts"]["a.jsonl.zst"][0] + "<|endoftext|>") in printed
    other = tmp_path / "other.json"
    train_tokenizer(_docs(5, 200), vocab_size=400).save(str(other))
    assert cli_main(["tokens", "inspect", str(tokens), "--tokenizer", str(other)]) == 2
    assert "does not match the tokenizer" in capsys.readouterr().err


def test_real_text_round_trip_through_shards(tmp_path):
    text = data_file("lm/wikitext-2/valid.txt").read_text(encoding="utf-8")
    (tmp_path / "wiki.txt").write_text(text, encoding="utf-8")
    tok = train_tokenizer([text[:300_000]], vocab_size=800)
    tok.save(str(tmp_path / "tok.json"))
    tokenize_corpus([str(tmp_path / "wiki.txt")], tmp_path / "tok.json", tmp_path / "out", workers=1)
    d = TokenDir(tmp_path / "out")
    assert tok.decode(d.document(0)[:-1].tolist()) == text
    assert d.num_tokens == len(tok.encode(text).ids) + 1


def test_command_line_train_then_tokenize(corpus, tmp_path, capsys):
    tok_path = tmp_path / "cli_tok.json"
    args = ["tokenizer", "train", str(corpus["root"]), "-o", str(tok_path), "--vocab-size", "400"]
    assert cli_main(args) == 0
    tok = load_tokenizer(tok_path)
    assert tok.get_vocab_size() == 400 and tok.token_to_id("<|endoftext|>") == 0
    assert cli_main(["tokenize", str(corpus["root"]), "--tokenizer", str(tok_path), "-o", str(tmp_path / "t"),
                     "--workers", "1", "--source", "books"]) == 0
    d = TokenDir(tmp_path / "t")
    assert d.manifest["sources"] == {"books": {"tokens": d.num_tokens, "documents": 211}}
    assert tok.decode(d.document(200)[:-1].tolist()) == corpus["texts"]["c.txt"][0]
    assert f"{d.num_tokens:,} tokens" in capsys.readouterr().out
    # The same command again: the totals are said as an earlier run's, not as tokenized "in 0.1 s"
    assert cli_main(["tokenize", str(corpus["root"]), "--tokenizer", str(tok_path), "-o", str(tmp_path / "t"),
                     "--workers", "1", "--source", "books"]) == 0
    said = capsys.readouterr().out
    assert f"{d.num_tokens:,} tokens, 211 documents, 4 shards (uint16), all kept from an earlier run " \
           "(checked in " in said
    assert said.rstrip().endswith("(already tokenized, nothing to do)") and "(uint16) in " not in said, said
    # Another --source renames it in the manifest: said (it read "nothing to do" alone, session 11)
    assert cli_main(["tokenize", str(corpus["root"]), "--tokenizer", str(tok_path), "-o", str(tmp_path / "t"),
                     "--workers", "1", "--source", "novels"]) == 0
    assert list(TokenDir(tmp_path / "t").manifest["sources"]) == ["novels"]
    assert "source renamed in manifest.json: books -> novels" in capsys.readouterr().err
    # A Hugging Face model folder as --tokenizer (as `tokens import-*` take it; the continued-
    # pretraining recipe's base): its tokenizer.json. It said "tokenizer not found: DIR".
    hf = tmp_path / "base"
    hf.mkdir()
    shutil.copy(tok_path, hf / "tokenizer.json")
    assert cli_main(["tokenize", str(corpus["root"]), "--tokenizer", str(hf), "-o", str(tmp_path / "u"),
                     "--workers", "1", "--source", "books"]) == 0
    assert [(tmp_path / d / "shard_00000.bin").read_bytes() for d in "tu"] == [
        (tmp_path / "t" / "shard_00000.bin").read_bytes()] * 2
    capsys.readouterr()
    assert cli_main(["tokenize", str(corpus["root"]), "--tokenizer", str(tmp_path), "-o", str(tmp_path / "v"),
                     "--workers", "1"]) == 2
    assert "no tokenizer.json" in capsys.readouterr().err
    # Where a file is wanted (eval/sample --tokenizer, data.tokenizer) a folder is named as one
    with pytest.raises(UserError, match=r"a folder: give the tokenizer\.json in it \(.*base/tokenizer\.json"):
        load_tokenizer(hf)


PEERS_PY = Path(__file__).resolve().parents[1] / ".venv-peers" / "bin" / "python"
DATATROVE_WRITER = """
import json, sys
from datatrove.pipeline.tokens.megatron_tokenizer import MegatronTokenizedFile
out, docs = sys.argv[1], json.load(open(sys.argv[2]))
f = MegatronTokenizedFile(out, "peer", token_size=2)
for d in docs:
    f.write(d)
f.close()
"""


def test_megatron_export_matches_datatrove(tokens, tmp_path):
    # Peer oracle: datatrove's Megatron writer, given the same documents, writes the same bytes.
    import subprocess

    if not PEERS_PY.exists():
        pytest.skip("peer venv .venv-peers absent (make peers)")
    probe = subprocess.run([str(PEERS_PY), "-c", "import datatrove.pipeline.tokens.megatron_tokenizer"],
                           capture_output=True)
    if probe.returncode != 0:
        pytest.skip("datatrove not importable in .venv-peers")
    from pretrain.tokens.megatron import export_megatron

    d = TokenDir(tokens)
    (tmp_path / "docs.json").write_text(json.dumps([d.document(i).tolist() for i in range(d.num_documents)]))
    subprocess.run([str(PEERS_PY), "-c", DATATROVE_WRITER, str(tmp_path), str(tmp_path / "docs.json")],
                   check=True, timeout=120)
    assert cli_main(["tokens", "export-megatron", str(tokens), "-o", str(tmp_path / "ours")]) == 0
    assert (tmp_path / "ours.bin").read_bytes() == (tmp_path / "peer.bin").read_bytes()
    assert (tmp_path / "ours.idx").read_bytes() == (tmp_path / "peer.idx").read_bytes()
    export_megatron(tokens, tmp_path / "again")  # the library call gives the same files
    assert (tmp_path / "again.idx").read_bytes() == (tmp_path / "peer.idx").read_bytes()


def test_sigkill_then_rerun_gives_the_same_bytes(corpus, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    inp = tmp_path / "in"
    inp.mkdir()
    for k in range(4):  # four ~400 KB files: the kill lands after the first shard, before the last
        write_jsonl_zst(inp / f"part_{k}.jsonl.zst", [{"text": t} for t in _docs(100 + k, 1500)])
    cmd = [sys.executable, "-m", "pretrain", "tokenize", str(inp), "--tokenizer", str(corpus["tok"]),
           "-o", str(tmp_path / "killed"), "--workers", "1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not (tmp_path / "killed" / "shard_00000.done").exists() and proc.poll() is None:
        assert time.monotonic() < deadline, "tokenize produced no shard in 120 s"
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (tmp_path / "killed" / "manifest.json").exists(), "the run finished before the kill"
    assert subprocess.run(cmd, capture_output=True).returncode == 0
    tokenize_corpus([str(inp)], corpus["tok"], tmp_path / "clean", workers=2)
    assert _tree_bytes(tmp_path / "killed") == _tree_bytes(tmp_path / "clean")
    assert not list((tmp_path / "killed").glob(".*.tmp"))


def _children(pid: int) -> set[int]:
    try:
        return {int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}
    except OSError:
        return set()


def _alive(pid: int) -> bool:
    try:  # a zombie has exited: it only waits to be reaped
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc (Linux)")
def test_sigkill_leaves_no_worker_behind(corpus, tmp_path):
    # A killed parent (kill -9, the OOM killer) must not leave its pool's workers running: they kept
    # tokenizing into the directory a rerun then writes too, and lingered idle for good afterwards.
    import os
    import signal
    import subprocess
    import sys
    import time

    inp = tmp_path / "in"
    inp.mkdir()
    for k in range(4):
        write_jsonl_zst(inp / f"part_{k}.jsonl.zst", [{"text": t} for t in _docs(200 + k, 1500)])
    cmd = [sys.executable, "-m", "pretrain", "tokenize", str(inp), "--tokenizer", str(corpus["tok"]),
           "-o", str(tmp_path / "out"), "--workers", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    workers: set[int] = set()
    while len(workers) < 2 and proc.poll() is None:  # the pool's two workers (+ resource tracker)
        assert time.monotonic() < deadline, "no worker started in 120 s"
        workers = {c for c in _children(proc.pid)
                   if "spawn_main" in Path(f"/proc/{c}/cmdline").read_text(errors="replace")}
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    try:
        deadline = time.monotonic() + 10
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [w for w in workers if _alive(w)], "workers outlived their parent by 10 s"
    finally:
        for w in workers:
            if _alive(w):
                os.kill(w, signal.SIGKILL)


def test_offsets_must_increase(tokens, tmp_path):
    out = tmp_path / "web"
    shutil.copytree(tokens, out)
    idx = np.load(out / "shard_00000.idx")
    idx[[1, 2]] = idx[[2, 1]]  # two documents' boundaries swapped: same count, same ends
    with open(out / "shard_00000.idx", "wb") as f:
        np.save(f, idx)
    with pytest.raises(DataError, match="strictly increasing"):
        TokenDir(out)


def test_every_kind_of_bad_record_is_said_and_named(corpus, tmp_path, capsys):
    # Run-it-twice review: a file with an empty document, invalid UTF-8, malformed JSON and an
    # oversized record (the reader's 8 MiB bound; a 50 MB document in the review) printed only the
    # three most frequent reasons: the dropped large document was in manifest.json only. Reasons
    # carried the byte/column, so a hostile file made one manifest key per bad record.
    root = tmp_path / "in"
    root.mkdir()
    with open(root / "bad.jsonl", "wb") as f:
        f.write(b'{"text": "kept"}\n{"text": ""}\n{"text": "bad \xff utf8"}\n{"text": "\xfe"}\n')
        f.write(b'{"text": broken\n{"text": "x", broken\n')
        f.write(b'{"text": "' + b"a" * (8 * 2**20 + 10) + b'"}\n{"text": "kept too"}\n')
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"body": ["no text column"]}), root / "z.parquet")  # a reason with a colon
    out = tmp_path / "t"
    assert cli_main(["tokenize", str(root), "--tokenizer", str(corpus["tok"]), "-o", str(out),
                     "--workers", "1"]) == 0
    err = capsys.readouterr().err
    assert "1 missing text column 'text' (columns: body)" in err, err
    said = [ln for ln in err.splitlines() if ln.startswith("skipped")]
    assert len(said) == 1 and "record larger than max_record_bytes" in said[0], err
    assert "split" in said[0] and "8 MiB" in said[0]  # what to do about it
    assert all(w in said[0] for w in ("1 empty text", "2 invalid UTF-8", "2 malformed JSON")), said
    # the shard's line names the input and the first bad record of each kind (its line number)
    shard_line = next(ln for ln in err.splitlines() if "shard_00000.bin" in ln)
    assert "bad.jsonl" in shard_line and "6 records skipped" in shard_line and "line 3" in shard_line
    skipped = TokenDir(out).manifest["skipped"]
    assert sum(skipped.values()) == 7 and len(skipped) == 5, skipped  # one key per kind of fault
    assert TokenDir(out).num_documents == 2


def test_export_megatron_twice_never_leaves_a_mixed_pair(corpus, tokens, tmp_path, monkeypatch):
    # Run-it-twice review: a second export into the same prefix renamed the new .bin into place,
    # then computed and wrote the .idx; a failure (disk full, a kill) in between left the new .bin
    # beside the old .idx, which Megatron reads as a dataset of wrong documents, silently.
    from pretrain.tokens import megatron

    small = tmp_path / "small"
    tokenize_corpus([str(corpus["root"] / "c.txt")], corpus["tok"], small, workers=1)
    prefix = tmp_path / "out" / "web_text_document"
    megatron.export_megatron(tokens, prefix)
    before = [Path(f"{prefix}.{x}").read_bytes() for x in ("bin", "idx")]

    def full(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(megatron, "_index_bytes", full)
    with pytest.raises(OSError):
        megatron.export_megatron(small, prefix)
    assert [Path(f"{prefix}.{x}").read_bytes() for x in ("bin", "idx")] == before
    assert sorted(p.name for p in prefix.parent.iterdir()) == [f"{prefix.name}.bin", f"{prefix.name}.idx"]
    monkeypatch.undo()
    megatron.export_megatron(small, prefix)  # the second export, done: the small directory's pair
    megatron.export_megatron(small, tmp_path / "fresh")
    assert [Path(f"{prefix}.{x}").read_bytes() for x in ("bin", "idx")] == [
        Path(f"{tmp_path / 'fresh'}.{x}").read_bytes() for x in ("bin", "idx")]


def test_a_text_file_over_the_record_bound_says_how_to_split_it(tmp_path, capsys):
    # A newcomer's 9 MB books.txt is one document over the reader's 8 MiB bound: `tokenizer train`
    # said "no text to train on ... file of N bytes is larger than max_record_bytes", no way on.
    (tmp_path / "books.txt").write_text("It was a dark and stormy night.\n" * 300_000)
    assert cli_main(["tokenizer", "train", str(tmp_path / "books.txt"), "-o", str(tmp_path / "t.json"),
                     "--vocab-size", "300"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "8 MiB" in err[0] and "JSONL" in err[0], err
    # Two such files of other sizes are one kind of fault, counted twice (the size was in the key).
    (tmp_path / "more.txt").write_text("A second book, longer.\n" * 400_000)
    (tmp_path / "t.json").unlink(missing_ok=True)
    tok = train_tokenizer(_docs(9, 50), vocab_size=300)
    tok.save(str(tmp_path / "t.json"))
    assert cli_main(["tokenize", str(tmp_path / "books.txt"), str(tmp_path / "more.txt"), "--tokenizer",
                     str(tmp_path / "t.json"), "-o", str(tmp_path / "tokens"), "--workers", "1"]) == 1
    said = json.loads((tmp_path / "tokens" / "manifest.json").read_text())["skipped"]
    assert said == {"file is larger than max_record_bytes=8388608": 2}, said


def test_a_long_document_is_encoded_in_pieces_to_the_same_ids(corpus, tmp_path, monkeypatch):
    # One 7.9 MB document took 1.16 GB to encode whole (HF tokenizers keeps an alignment per byte of
    # every pre-tokenized word); with GPT-2's pre-tokenizer it is now encoded in pieces cut after a
    # letter or digit (tokens/pieces.py). Truth: HF tokenizers on the whole document.
    from pretrain.tokens import pieces

    monkeypatch.setattr(pieces, "LONG_DOC", 3000)  # the real sizes: 256K characters, 64K pieces
    monkeypatch.setattr(pieces, "PIECE", 300)
    monkeypatch.setattr(pieces, "RUN", 300)
    rng = random.Random(5)
    seps = [" ", "  ", "   ", "\n", "\n\n", "\t", " \u00a0", ". ", ", ", " 42 ", "'s ", " 中文 ", " 👍🏽 ",
            "\r\n ", " \n   "]
    long_doc = "".join(w + rng.choice(seps) for w in " ".join(_docs(7, 60)).split(" "))
    # trained on the document itself: merges of whitespace runs, "\n\n", " 42", "'s" exist
    train_tokenizer([long_doc] * 3, vocab_size=1500).save(str(tmp_path / "tok.json"))
    tok = load_tokenizer(tmp_path / "tok.json")
    assert len(long_doc) > 3000 and len(pieces.pieces(long_doc)) > 10 and pieces.hard_cuts(long_doc) == 0
    (tmp_path / "in").mkdir()
    docs = ["short one", long_doc, "short two", long_doc[::-1], "x" * 500, "y" * 4000]
    write_jsonl_zst(tmp_path / "in" / "a.jsonl.zst", [{"text": t} for t in docs])
    said: list[dict] = []
    tokenize_corpus([str(tmp_path / "in")], tmp_path / "tok.json", tmp_path / "t", workers=1,
                    on_unit=said.append)
    assert said[0]["cut_runs"] == 1  # the 4000 y, said on the shard's line (commands/tokenize.py)
    d = TokenDir(tmp_path / "t")
    assert [d.document(i)[:-1].tolist() for i in range(5)] == [tok.encode(t).ids for t in docs[:5]]
    # 4000 y: one pre-token, cut every 300 characters (its ids may differ from the whole's); exact text
    run = [i for p in pieces.pieces(docs[5]) for i in tok.encode(p).ids]
    assert pieces.hard_cuts(docs[5]) > 5 and d.document(5)[:-1].tolist() == run
    assert tok.decode(run) == docs[5]
    # A tokenizer whose pieces would not encode alike (an NFD normalizer here: NFKC and Lowercase
    # now have a rule, tokens/pieces.py) is encoded whole.
    from tokenizers import normalizers

    tok.normalizer = normalizers.NFD()
    assert not pieces.exact_pieces(tok)
    assert pieces.exact_pieces(load_tokenizer(tmp_path / "tok.json"))


def test_a_rerun_with_fewer_or_more_inputs_names_the_files(corpus, tmp_path, capsys):
    # Run-it-twice review (S4): `tokenize` of 1 file into a directory of 4 said "holds 4 shards made
    # from other inputs (1 input files now)": which file was dropped or added was left to guess.
    files = sorted(str(p) for p in corpus["root"].iterdir() if p.name != "tok.json")
    out = tmp_path / "web"
    argv = ["--tokenizer", str(corpus["tok"]), "-o", str(out), "--workers", "1"]
    assert cli_main(["tokenize", *files[:3], *argv]) == 0
    capsys.readouterr()
    assert cli_main(["tokenize", *files[:2], *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "3 input files then, 2 now" in err[0] and f"{files[2]} no longer given" in err[0]
    assert cli_main(["tokenize", *files, *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "3 input files then, 4 now" in err[0] and f"{files[3]} new" in err[0], err
    (out / "manifest.json").unlink()  # killed before the manifest: the done marker names its input
    assert cli_main(["tokenize", *files[:2], *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "shard_00002" in err[0] and files[2] in err[0], err


def test_the_bar_follows_the_bytes_read_inside_each_file(corpus, tmp_path):
    # Run-it-twice review (S4): `pretrain tokenize` of one 10 GB file said nothing until its shard
    # was done. The workers now keep a meter (progress.ShardMeter, as curate's) that the driver's
    # bar reads; the meters live in OUT/.progress while the run goes on, swept as its temp files.
    from pretrain import progress as prog
    from pretrain.tokens.pipeline import tokenize_unit

    files = sorted(p for p in corpus["root"].iterdir() if p.name != "tok.json")
    meter = tmp_path / "m" / "0.json"
    e = tokenize_unit(str(corpus["tok"]), str(files[0]), str(tmp_path / "one"), 0, "h", meter=str(meter))
    size = files[0].stat().st_size
    assert json.loads(meter.read_text()) == {"docs": e["documents"], "bytes": size, "size": size}

    (tmp_path / "t" / ".progress").mkdir(parents=True)  # as a killed run leaves it
    (tmp_path / "t" / ".progress" / "0.json").write_text('{"docs": 99, "bytes": 1, "size": 1}')
    for run in ("first", "rerun"):  # a rerun counts the kept shards whole
        bar = prog.Progress(enabled=True)
        man = tokenize_corpus([str(f) for f in files], corpus["tok"], tmp_path / "t", workers=1, progress=bar)
        bar.close()
        task = bar._bar.tasks[0]  # noqa: SLF001
        total = sum(f.stat().st_size for f in files)
        assert (task.completed, task.total) == (total, total), run
        assert task.fields["info"] == f"{man['documents']:,} docs, {len(files)}/{len(files)} files", run
        assert not (tmp_path / "t" / ".progress").exists()  # removed at the end
    clean = tmp_path / "clean"
    tokenize_corpus([str(f) for f in files], corpus["tok"], clean, workers=1)  # no bar: no meters
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == sorted(p.name for p in clean.iterdir())


def test_a_shard_of_one_document_says_one_document(corpus, tmp_path, capsys):
    # Run-it-twice review (S4): "shard_00000.bin: 2 tokens, 1 documents <- c.parquet".
    (tmp_path / "one.jsonl").write_text('{"text": "a"}\n')
    assert cli_main(["tokenize", str(tmp_path / "one.jsonl"), "--tokenizer", str(corpus["tok"]),
                     "-o", str(tmp_path / "t"), "--workers", "1"]) == 0
    out, err = capsys.readouterr()
    assert "1 document <-" in err and ", 1 document, 1 shard " in out, (out, err)


def test_tokens_into_a_corpus_jobs_output_are_refused(corpus, tmp_path, capsys):
    # Run-it-twice review (S4): `tokenize ... -o OUT` with OUT a `pretrain curate` output wrote the
    # shards beside plan.json and data/: `pretrain report OUT` then showed the curate job and
    # `pretrain mix` the tokens, one folder read as two things. Refused before anything is written.
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in _docs(5, 20)))
    assert cli_main(["curate", str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "cur")]) == 0
    before = sorted(p.name for p in (tmp_path / "cur").iterdir())
    capsys.readouterr()
    assert cli_main(["tokenize", str(tmp_path / "in.jsonl"), "--tokenizer", str(corpus["tok"]),
                     "-o", str(tmp_path / "cur"), "--workers", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "corpus job's output" in err[0] and str(tmp_path / "cur") in err[0], err
    assert sorted(p.name for p in (tmp_path / "cur").iterdir()) == before
    assert cli_main(["tokenize", str(tmp_path / "in.jsonl"), "--tokenizer", str(corpus["tok"]),  # inside,
                     "-o", str(tmp_path / "cur" / "tokens"), "--workers", "1"]) == 0  # a folder of its own


def test_a_datasetdict_folder_says_its_held_out_splits_are_tokenized(corpus, tmp_path, capsys):
    # Run-it-twice review (S4): `tokenize dd/` of a `DatasetDict.save_to_disk` folder put its test
    # split into the training tokens without a word (the readers read every split, docs/readers.md).
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"text": ["a b c", "d e f", "g h i"]})
    datasets.DatasetDict({"train": ds, "test": ds.select(range(1)), "validation": ds.select(range(2))}
                         ).save_to_disk(str(tmp_path / "dd"))
    argv = ["--tokenizer", str(corpus["tok"]), "--workers", "1"]
    assert cli_main(["tokenize", str(tmp_path / "dd"), "-o", str(tmp_path / "t"), *argv]) == 0
    said = [ln for ln in capsys.readouterr().err.splitlines() if "DatasetDict" in ln]
    assert len(said) == 1 and "test, validation" in said[0], said
    assert str(tmp_path / "dd" / "train") in said[0], said  # the way to leave them out
    assert TokenDir(tmp_path / "t").num_documents == 6  # read all the same, as documented
    assert cli_main(["tokenize", str(tmp_path / "dd" / "train"), "-o", str(tmp_path / "t2"), *argv]) == 0
    assert "DatasetDict" not in capsys.readouterr().err


def test_inspect_says_how_many_of_the_ids_it_lists(tokens, capsys):
    # Run-it-twice review (S4): `inspect --tokens 30` said "first 30 tokens: [20 ids] ...", the text
    # below it decoded from 30: the list read as the 30 tokens.
    doc = TokenDir(tokens).document(0).tolist()
    assert len(doc) > 30
    assert cli_main(["tokens", "inspect", str(tokens), "--tokens", "30"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("document 0"))
    shown = json.loads(line[line.index("["):line.index("]") + 1])
    assert shown == doc[:len(shown)] and f"{len(doc):,} tokens" in line, line
    assert f"first {len(shown)} of the 30 decoded below" in line, line


def test_a_corpus_job_into_a_token_directory_is_refused(tokens, tmp_path, capsys):
    # W2 (session 9): `pretrain curate IN -o TOKENS` was refused as "holds files that are not a
    # pretrain job's" only by luck of its names, and not at all for a killed tokenize's shards; it
    # is refused naming what the folder is, as `tokenize` names a corpus OUT, and nothing is written.
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in _docs(5, 20)))
    before = {p.name: p.read_bytes() for p in tokens.iterdir()}
    assert cli_main(["curate", str(tmp_path / "in.jsonl"), "--output", str(tokens)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{tokens} is a token directory" in err[0] and "pretrain tokenize" in err[0], err
    assert {p.name: p.read_bytes() for p in tokens.iterdir()} == before


def test_inspect_sample_options_are_used_or_refused(corpus, tokens, tmp_path, capsys):
    """Newcomer sweep (session 13): with no tokenizer copy in the folder, or a --tokenizer path that
    does not exist, `inspect --doc 5 --tokens 50` printed the counts and exit 0, the options dropped."""
    bare = tmp_path / "bare"
    shutil.copytree(tokens, bare)
    (bare / "tokenizer.json").unlink()
    assert cli_main(["tokens", "inspect", str(bare), "--doc", "5"]) == 2
    said = capsys.readouterr()
    assert "--doc" in said.err and "tokenizer.json" in said.err and "--tokenizer" in said.err, said.err
    assert said.out == ""  # refused before the counts: one line, not a report and then an error
    assert cli_main(["tokens", "inspect", str(tokens), "--tokenizer", str(tmp_path / "nope.json")]) == 2
    assert f"--tokenizer {tmp_path / 'nope.json'}: no such file" in capsys.readouterr().err
    assert cli_main(["tokens", "inspect", str(bare)]) == 0  # no option given: counts, and why no sample
    assert "no sample" in capsys.readouterr().out
    n = TokenDir(tokens).num_documents
    assert cli_main(["tokens", "inspect", str(bare), "--doc", str(n)]) == 2  # checked without a tokenizer
    assert f"outside 0..{n - 1}" in capsys.readouterr().err
    # given --tokenizer (the one that made it), the sample is document 5's text
    assert cli_main(["tokens", "inspect", str(bare), "--tokenizer", str(corpus["tok"]), "--doc", "5",
                     "--tokens", "10000"]) == 0
    ids = TokenDir(tokens).document(5).tolist()
    want = load_tokenizer(corpus["tok"]).decode(ids, skip_special_tokens=False)
    assert repr(want) in capsys.readouterr().out


def test_a_folder_that_is_not_tokens_says_what_it_is_and_what_makes_tokens(tokens, tmp_path, capsys):
    """`tokens inspect`, `mix` and `train` on a corpus job's OUT, its data/ folder or a file said
    "no manifest.json; is this a directory written by `pretrain tokenize`": the folder is named
    with what it holds and the command that makes tokens of it."""
    (tmp_path / "corpus" / "data").mkdir(parents=True)
    (tmp_path / "corpus" / "stats.json").write_text("{}")
    (tmp_path / "corpus" / "data" / "shard_00000.jsonl.zst").write_bytes(b"")
    (tmp_path / "empty").mkdir()
    cases = {tmp_path / "corpus": f"pretrain tokenize {tmp_path / 'corpus' / 'data'} --tokenizer",
             tmp_path / "corpus" / "data": f"pretrain tokenize {tmp_path / 'corpus' / 'data'} --tokenizer",
             tmp_path / "corpus" / "stats.json": "a file, not a folder",
             tmp_path / "empty": "an empty folder"}
    for folder, said in cases.items():
        assert cli_main(["tokens", "inspect", str(folder)]) == 2
        err = capsys.readouterr().err
        assert f"{folder}: no manifest.json" in err and said in err, err
        assert len(err.strip().splitlines()) == 1, err
    (tmp_path / "mix.toml").write_text(f'budget = 1e5\n[sources.web]\npath = "{tmp_path / "corpus"}"\n'
                                       'weight = 1\n')
    assert cli_main(["mix", str(tmp_path / "mix.toml")]) == 2
    err = capsys.readouterr().err
    assert f"source 'web': {tmp_path / 'corpus'}: no manifest.json" in err and "pretrain tokenize" in err, err
    # a folder of shards whose manifest a killed tokenize never wrote: rerun that command
    (tmp_path / "killed").mkdir()
    shutil.copy(tokens / "shard_00000.bin", tmp_path / "killed")
    assert cli_main(["tokens", "inspect", str(tmp_path / "killed")]) == 2
    assert "rerun its command" in capsys.readouterr().err
