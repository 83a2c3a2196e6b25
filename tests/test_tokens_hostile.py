"""A token directory from someone else: a manifest or .idx that lies is refused with one line naming the
file, before any token is read; real readers (Megatron-LM's own IndexedDataset) read our export."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pretrain.curate.io import write_jsonl_zst
from pretrain.errors import DataError
from pretrain.tokens.pipeline import tokenize_corpus
from pretrain.tokens.shards import TokenDir
from pretrain.tokens.tokenizer import train_tokenizer

ROOT = Path(__file__).resolve().parents[1]
TEXTS = [f"document {i}: the river carries sand to the delta, year after year." * (1 + i % 3)
         for i in range(40)]


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    write_jsonl_zst(root / "a.jsonl.zst", [{"text": t} for t in TEXTS])
    train_tokenizer(TEXTS, vocab_size=300).save(str(root / "tok.json"))
    tokenize_corpus([str(root / "a.jsonl.zst")], root / "tok.json", root / "tokens", workers=1)
    return root / "tokens"


def _edit_manifest(**changes):
    def edit(d: Path) -> None:
        m = json.loads((d / "manifest.json").read_text())
        for key, value in changes.items():
            target, _, leaf = key.rpartition("__")
            node = m["shards"][0] if target == "shard" else m
            if value is _DELETE:
                node.pop(leaf)
            else:
                node[leaf] = value
        (d / "manifest.json").write_text(json.dumps(m))
    return edit


_DELETE = object()


def _write(text: str):
    def edit(d: Path) -> None:
        (d / "manifest.json").write_text(text)
    return edit


def _symlink_out(d: Path) -> None:
    outside = d.parent / "elsewhere.bin"
    shutil.move(d / "shard_00000.bin", outside)
    (d / "shard_00000.bin").symlink_to(outside)


def _listed_again(times: int):
    """The same shard named `times` times, counts multiplied to match: read as `times` shards (its
    tokens counted `times` over), each mapped and held open (100,000: out of file descriptors)."""
    def edit(d: Path) -> None:
        m = json.loads((d / "manifest.json").read_text())
        m["shards"] = m["shards"] * times
        m["tokens"], m["documents"] = m["tokens"] * times, m["documents"] * times
        (d / "manifest.json").write_text(json.dumps(m))
    return edit


LIES = {
    "dtype float16": _edit_manifest(dtype="float16"),  # same size as uint16: only the name tells
    "dtype not a dtype": _edit_manifest(dtype="nope"),
    "dtype object": _edit_manifest(dtype="object"),
    "dtype narrower than the vocabulary": _edit_manifest(vocab_size=100_000),
    "eot not a number": _edit_manifest(eot_id="x"),
    "eot negative": _edit_manifest(eot_id=-5),
    "eot past the vocabulary": _edit_manifest(eot_id=10**30),
    "no shards": _edit_manifest(shards=_DELETE),
    "shards not a list": _edit_manifest(shards="abc"),
    "no tokenizer": _edit_manifest(tokenizer=_DELETE),
    "shard tokens not a number": _edit_manifest(shard__tokens="abc"),
    "shard tokens fractional": _edit_manifest(shard__tokens=0.5),
    "shard tokens negative": _edit_manifest(shard__tokens=-1, tokens=-1),
    "shard documents negative": _edit_manifest(shard__documents=-3),
    "shard name null": _edit_manifest(shard__bin=None),
    "shard name traversal": _edit_manifest(shard__bin="../elsewhere.bin"),
    "manifest is a list": _write("[1, 2]"),
    "manifest nested 100,000 deep": _write("[" * 100_000 + "]" * 100_000),
    "shard is a symlink out of the directory": _symlink_out,
    "one shard listed twice": _listed_again(2),
    # `tokens inspect` and `report` read these: each was a traceback (AttributeError, TypeError,
    # ValueError) before session 13's round 4 checked them with the rest
    "sources a list": _edit_manifest(sources=[1, 2]),
    "source entry a string": _edit_manifest(sources={"web": "x"}),
    "source tokens a string": _edit_manifest(sources={"web": {"tokens": "x", "documents": 1}}),
}


@pytest.mark.parametrize("lie", sorted(LIES))
def test_a_lying_manifest_is_a_data_error_naming_the_file(good, tmp_path, lie):
    d = tmp_path / "tokens"
    shutil.copytree(good, d)
    LIES[lie](d)
    with pytest.raises(DataError) as e:
        TokenDir(d)
    assert str(d) in str(e.value)


def test_a_directory_of_more_shards_than_open_files_allowed_reads_whole(good, tmp_path):
    # np.memmap holds a descriptor per mapping: every shard's .bin and .idx mapped on open stopped
    # `tokens inspect`, `train` and `eval` at ~500 shards under the usual `ulimit -n` of 1,024; the
    # bound is one for the process, whatever the number of directories open.
    import resource

    d, n, room = tmp_path / "tokens", 200, 160  # 2 descriptors a shard were needed: 400
    shutil.copytree(good, d)
    m = json.loads((d / "manifest.json").read_text())
    one = m["shards"][0]
    for k in range(1, n):
        for ext in ("bin", "idx"):
            os.link(d / one[ext], d / f"copy_{k}.{ext}")
    m["shards"] = [one] + [{**one, "bin": f"copy_{k}.bin", "idx": f"copy_{k}.idx"} for k in range(1, n)]
    m["tokens"], m["documents"] = one["tokens"] * n, one["documents"] * n
    (d / "manifest.json").write_text(json.dumps(m))
    single = np.fromfile(good / one["bin"], dtype="<u2").astype(np.int64)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    in_use = len(os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (in_use + room, hard))
    try:
        t, again = TokenDir(d), TokenDir(d)  # two open at once, as a mixture's sources are
        assert t.num_documents == n * one["documents"]
        for u in (t, again, t):
            assert np.array_equal(u.read(0, u.num_tokens), np.tile(single, n))
        per = one["documents"]
        for k in (0, n // 2, n - 1, 0):  # out of order: shards closed and mapped again
            assert np.array_equal(t.document(k * per + 3), TokenDir(good).document(3))
        assert len(os.listdir("/proc/self/fd")) <= in_use + room
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_cli_says_it_in_one_line(good, tmp_path):
    d = tmp_path / "tokens"
    shutil.copytree(good, d)
    LIES["dtype float16"](d)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    for cmd in (["inspect", str(d)], ["export-megatron", str(d), "-o", str(tmp_path / "m")]):
        r = subprocess.run([sys.executable, "-m", "pretrain", "tokens", *cmd], capture_output=True,
                           text=True, cwd=tmp_path, env=env)
        assert r.returncode == 2, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "manifest.json" in r.stderr, r.stderr
    assert not (tmp_path / "m.bin").exists()


def test_megatron_reads_our_export(good, tmp_path):
    # Megatron-LM's own reader (megatron-core), not a re-implementation of its format.
    pytest.importorskip("torch")
    indexed = pytest.importorskip("megatron.core.datasets.indexed_dataset")
    from pretrain.tokens.megatron import export_megatron

    d = TokenDir(good)
    export_megatron(good, tmp_path / "web_text_document")
    ds = indexed.IndexedDataset(str(tmp_path / "web_text_document"), mmap=True)
    assert len(ds) == d.num_documents == len(TEXTS)
    assert ds.index.dtype == np.uint16
    assert list(ds.document_indices) == list(range(len(TEXTS) + 1))
    for i in range(len(TEXTS)):
        assert np.array_equal(ds[i].astype(np.int64), d.document(i))
    assert np.array_equal(ds.get(3, offset=2, length=5).astype(np.int64), d.document(3)[2:7])
    # A vocabulary past 65,536 ids: uint32 shards, exported as Megatron's int32 (dtype code 4).
    from test_tokens_shards import tokenize_with_big_vocab

    tokenize_with_big_vocab(tmp_path, tmp_path / "big")
    export_megatron(tmp_path / "big", tmp_path / "big_text_document")
    ds = indexed.IndexedDataset(str(tmp_path / "big_text_document"), mmap=True)
    assert ds.index.dtype == np.int32 and ds[0].tolist() == [1, 65535, 65536, 69999, 70_001]
    # Exported again into the same prefix (run it twice): Megatron reads the second export whole.
    del ds
    export_megatron(good, tmp_path / "big_text_document")
    ds = indexed.IndexedDataset(str(tmp_path / "big_text_document"), mmap=True)
    assert ds.index.dtype == np.uint16 and len(ds) == d.num_documents
    assert all(np.array_equal(ds[i].astype(np.int64), d.document(i)) for i in range(len(TEXTS)))


def test_inspect_refuses_a_negative_token_count(good, capsys):
    # `--tokens -5` showed every token but the last five, under the heading "first N tokens".
    from pretrain.cli import main

    assert main(["tokens", "inspect", str(good), "--tokens", "-5"]) == 2
    assert "--tokens" in capsys.readouterr().err
    assert main(["tokens", "inspect", str(good), "--tokens", "3"]) == 0
    assert "(first 3 of the 3 decoded below)" in capsys.readouterr().out


@pytest.mark.parametrize("workers", ["0", "-3"])
def test_tokenize_refuses_a_worker_count_below_one(good, tmp_path, capsys, workers):
    # -3 ran silently with one worker, 0 with every core.
    from pretrain.cli import main

    src = good.parent / "a.jsonl.zst"
    args = ["tokenize", str(src), "--tokenizer", str(good.parent / "tok.json"), "-o", str(tmp_path / "t")]
    assert main([*args, "--workers", workers]) == 2
    assert "--workers" in capsys.readouterr().err and not (tmp_path / "t").exists()


def test_export_never_overwrites_the_shards_it_reads(good, tmp_path, capsys):
    # `-o TOKENS/shard_00000` replaced the token directory's first shard with the whole export.
    from pretrain.cli import main

    d = tmp_path / "tokens"
    shutil.copytree(good, d)
    before = (d / "shard_00000.bin").read_bytes()
    assert main(["tokens", "export-megatron", str(d), "-o", str(d / "shard_00000")]) == 2
    assert "shard_00000" in capsys.readouterr().err
    assert (d / "shard_00000.bin").read_bytes() == before
    TokenDir(d)  # still whole
    assert main(["tokens", "export-megatron", str(d), "-o", str(d / "web_text_document")]) == 0


def test_an_id_past_the_vocabulary_stops_training_in_one_line(good, tmp_path):
    """Sizes and offsets agree, one id does not fit the vocabulary: the trainer's embedding raised
    IndexError mid-run (a device-side assert on a GPU). The sampler's windows are checked as read."""
    from pretrain.tokens.mixture import MixtureSampler

    d = tmp_path / "tokens"
    shutil.copytree(good, d)
    ids = np.memmap(d / "shard_00000.bin", dtype="<u2", mode="r+")
    ids[17] = 65_000  # the manifest's vocabulary is 300
    ids.flush()
    sampler = MixtureSampler({"a": str(d)}, {"a": 1.0}, seq_len=ids.size - 1, seed=0)
    with pytest.raises(DataError, match=r"shard_00000\.bin: record token 17: id 65000 is outside the "
                                        r"300-token vocabulary"):
        sampler.next_batch(1)
    with pytest.raises(DataError, match="record token 17: id 65000"):
        TokenDir(d).read(10, 20)  # what perplexity on a token folder reads
    ids[17] = 5
    ids.flush()
    assert MixtureSampler({"a": str(d)}, {"a": 1.0}, seq_len=ids.size - 1, seed=0).next_batch(1).max() < 300


def test_names_in_someone_elses_manifest_or_mixture_print_no_escape_sequences(good, tmp_path, capsys):
    """A source name or skip reason of a manifest (and a mixture file's source key) is anyone's
    string: ESC ] 0 ; ... BEL retitled the terminal window, ESC [ 2 J cleared the screen. Printed,
    every control character is its escape (`\\x1b`)."""
    import shutil

    from pretrain.cli import main
    from pretrain.commands.mix import table_text

    evil = "web\x1b]0;owned\x07\x1b[2J\u202e"
    d = tmp_path / "tokens"
    shutil.copytree(good, d)
    m = json.loads((d / "manifest.json").read_text())
    m["sources"] = {evil: next(iter(m["sources"].values()))}
    m["skipped"] = {evil: 1}
    (d / "manifest.json").write_text(json.dumps(m))
    assert main(["tokens", "inspect", str(d), "--tokens", "3"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert out.count("web\\x1b]0;owned\\x07\\x1b[2J\\u202e") == 2
    row = {"source": evil, "available": 10, "weight": 1.0, "drawn": 5.0, "epochs": 0.5, "warning": False}
    assert "\x1b" not in table_text(5.0, 1.0, [row]) and "web\\x1b" in table_text(5.0, 1.0, [row])
    from pretrain.eval.report import table  # `pretrain eval`'s table: task names from file names

    assert "\x1b" not in table({"results": {evil: {"acc": 0.5}}, "tasks": {}})


def test_one_document_of_two_billion_tokens_is_read_only_as_far_as_it_is_shown(good, tmp_path):
    """A shard of one document of 2^31 tokens (a sparse .bin: 4 GiB on paper, nothing on disk).
    `tokens inspect` copied the whole document to int64 to show its first 100 tokens: 16 GB, killed
    after 46 s; the report's bytes per token listed it as Python ints. Now only the tokens shown.
    Both run in a child held to 8 GB of address space (the code before: a MemoryError, not 16 GB)."""
    import resource

    d = tmp_path / "tokens"
    shutil.copytree(good, d)
    n = 2**31
    with open(d / "big.bin", "wb") as f:
        f.truncate(n * 2)
    with open(d / "big.idx", "wb") as f:
        np.save(f, np.array([0, n], dtype="<u8"), allow_pickle=False)
    m = json.loads((d / "manifest.json").read_text())
    m.update(shards=[{"bin": "big.bin", "idx": "big.idx", "tokens": n, "documents": 1}], tokens=n,
             documents=1, sources={"web": {"tokens": n, "documents": 1}})
    (d / "manifest.json").write_text(json.dumps(m))

    def child(*args: str) -> subprocess.CompletedProcess:
        def limits():  # the 4 GiB mapping of the .bin, and room for Python
            resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))
        return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120,
                              cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
                              preexec_fn=limits)

    r = child("-m", "pretrain", "tokens", "inspect", str(d), "--tokens", "5")
    assert r.returncode == 0, r.stderr[-500:]
    assert f"document 0 ({n:,} tokens): ids [0, 0, 0, 0, 0] (first 5 of the 5 decoded below)" in r.stdout
    report = ("import sys; from pretrain.report_corpus import bytes_per_token; "
              "from pretrain.tokens.shards import TokenDir; print(bytes_per_token(TokenDir(sys.argv[1])))")
    r = child("-c", report, str(d))
    assert (r.returncode, r.stdout) == (0, "None\n"), r.stderr[-500:]  # every token is end-of-text 0
    assert np.array_equal(TokenDir(d).document(0, limit=7), np.zeros(7, np.int64))
    assert np.array_equal(TokenDir(good).document(3, limit=4), TokenDir(good).document(3)[:4])
    assert TokenDir(d).document_length(0) == n


def test_inspect_of_many_sources_and_skip_kinds_prints_a_bounded_listing(good, tmp_path, capsys):
    """100,000 sources printed 100,000 lines, 10^6 skip kinds one line of 16 MB: the first of each
    are shown and the rest counted."""
    from pretrain.cli import main

    d = tmp_path / "tokens"
    shutil.copytree(good, d)
    m = json.loads((d / "manifest.json").read_text())
    one = next(iter(m["sources"].values()))
    m["sources"] = {f"s{i}": one for i in range(100_000)}
    m["skipped"] = {f"kind {i}": 1 for i in range(100_000)}
    (d / "manifest.json").write_text(json.dumps(m))
    assert main(["tokens", "inspect", str(d), "--tokens", "3"]) == 0
    out = capsys.readouterr().out
    assert len(out) < 10_000 and "99,950 more sources" in out and "99,980 more kinds" in out, out[-500:]
    for skipped in ([1], {"x": "many", "y": [1], "z": 2}):  # shown as the report keeps it: a traceback
        m["skipped"] = skipped
        (d / "manifest.json").write_text(json.dumps(m))
        assert main(["tokens", "inspect", str(d), "--tokens", "3"]) == 0
        assert ("skipped records: z: 2\n" in capsys.readouterr().out) == isinstance(skipped, dict)


@pytest.mark.parametrize("shape", ["(1152921504606846976,)", "(-5,)", "(2, 21)"])
def test_an_idx_header_whose_shape_lies_is_one_line(good, tmp_path, shape):
    """A .npy header claiming 2^60 offsets over a 400-byte file was an OverflowError traceback out of
    numpy's mapping ("memory mapped length must be positive"); the other lies were already one line."""
    d = tmp_path / "tokens"
    shutil.copytree(good, d)
    idx = d / "shard_00000.idx"
    raw = idx.read_bytes()
    size = int.from_bytes(raw[8:10], "little")
    head = raw[10:10 + size].decode()
    n = json.loads((d / "manifest.json").read_text())["shards"][0]["documents"] + 1
    lied = head.rstrip().replace(f"({n},)", shape)
    assert lied != head.rstrip()
    idx.write_bytes(raw[:10] + (lied + " " * (size - len(lied) - 1) + "\n").encode() + raw[10 + size:])
    with pytest.raises(DataError, match="shard_00000.idx: record idx"):
        TokenDir(d)


def test_sample_does_not_read_a_token_sources_tokenizer_through_a_link_out(good, tmp_path):
    """`pretrain sample` of a run trained on token shards falls back to the copy `tokenize` keeps
    beside them: a copy linking out of the folder was read (the tokenizer of the user's choosing
    decodes, a secret file is read as one). The folder's own copy is used; a link out is refused."""
    from pretrain.commands.sample import _tokenizer_of_shards
    from pretrain.errors import UserError

    assert _tokenizer_of_shards({"web": str(good)}) == str(good / "tokenizer.json")
    d = tmp_path / "tokens"
    shutil.copytree(good, d)
    shutil.move(d / "tokenizer.json", tmp_path / "elsewhere.json")
    (d / "tokenizer.json").symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(UserError, match="tokenizer.json: links outside .*pass --tokenizer PATH"):
        _tokenizer_of_shards({"web": str(d)})


def test_a_tokenizer_copy_that_links_out_of_the_folder_is_not_read(good, tmp_path, capsys):
    """`tokens inspect` read the folder's tokenizer.json through a link to /etc/passwd (it said only
    "not a readable tokenizer.json"); a link to a real tokenizer elsewhere was decoded with. Now
    refused in one line naming the link, as a shard that links out is, and the report skips it."""
    from pretrain.cli import main
    from pretrain.report_corpus import bytes_per_token

    d = tmp_path / "tokens"
    shutil.copytree(good, d)
    shutil.move(d / "tokenizer.json", tmp_path / "elsewhere.json")
    (d / "tokenizer.json").symlink_to(tmp_path / "elsewhere.json")
    assert main(["tokens", "inspect", str(d), "--tokens", "3"]) == 2
    err = capsys.readouterr().err
    assert "tokenizer.json: links outside" in err and err.count("\n") == 1, err
    assert bytes_per_token(TokenDir(d)) is None and bytes_per_token(TokenDir(good)) is not None
    given = str(tmp_path / "elsewhere.json")  # named by the user: read
    assert main(["tokens", "inspect", str(d), "--tokens", "3", "--tokenizer", given]) == 0
