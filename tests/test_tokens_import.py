"""Token files other tools wrote, written by the real writers (megatron-core's IndexedDatasetBuilder,
datatrove's DocumentTokenizer), imported into a token directory: the same documents, a 2-step
training run on them, a byte-identical round trip through export-megatron, and hostile or truncated
files refused in one line naming the file and the field."""

from __future__ import annotations

import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from s3server import s3  # noqa: F401  (the fixture)
from test_job_s3 import s3_here  # noqa: F401  (the fixture)

from pretrain.cli import main
from pretrain.errors import DataError, UserError
from pretrain.tokens.imports import import_tokens
from pretrain.tokens.megatron import export_megatron
from pretrain.tokens.shards import TokenDir
from pretrain.tokens.tokenizer import eot_id, load_tokenizer, train_tokenizer

ROOT = Path(__file__).resolve().parents[1]
PEERS_PY = ROOT / ".venv-peers" / "bin" / "python"
# megatron-core's builder calls numpy.array(tensor) the way NumPy 2 deprecates: its warning, not ours.
pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
TEXTS = [f"document {i}: the tide turns the stones, one grain at a time. " * (1 + i % 4) for i in range(30)]


@pytest.fixture(scope="module")
def tok(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("import")
    train_tokenizer(TEXTS, vocab_size=300).save(str(root / "tok.json"))
    t = load_tokenizer(root / "tok.json")
    docs = [t.encode(x).ids for x in TEXTS]
    return {"root": root, "path": root / "tok.json", "docs": docs, "eot": eot_id(t),
            "vocab": t.get_vocab_size()}


def megatron_write(prefix: Path, docs: list[list[int]], dtype, split: bool = False) -> Path:
    """Megatron-LM's own writer (megatron-core), as tools/preprocess_data.py drives it."""
    torch = pytest.importorskip("torch")
    indexed = pytest.importorskip("megatron.core.datasets.indexed_dataset")
    b = indexed.IndexedDatasetBuilder(f"{prefix}.bin", dtype=dtype)
    for d in docs:
        if split and len(d) > 3:  # --split-sentences: one document, several sequences
            b.add_document(torch.tensor(d), [3, len(d) - 3])
        else:
            b.add_item(torch.tensor(d))
            b.end_document()
    b.finalize(f"{prefix}.idx")
    return prefix


def _imported(tok: dict, out: Path, *inputs: Path, kind: str = "megatron") -> TokenDir:
    argv = ["tokens", f"import-{kind}", *map(str, inputs), "-o", str(out), "--tokenizer", str(tok["path"])]
    assert main(argv) == 0
    return TokenDir(out)


@pytest.mark.parametrize("dtype", [np.uint16, np.int16, np.int32, np.int64])
def test_megatron_documents_arrive_whole(tok, tmp_path, dtype):
    eod = [d + [tok["eot"]] for d in tok["docs"]]  # --append-eod
    d = _imported(tok, tmp_path / "t", megatron_write(tmp_path / "web", eod, dtype))
    assert d.num_documents == len(TEXTS) and d.manifest["imported"] == {"from": "megatron", "eot": "present"}
    assert [d.document(i).tolist() for i in range(d.num_documents)] == eod
    assert d.dtype == np.dtype("<u2") and d.vocab_size == tok["vocab"]


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_megatron_one_byte_codes(tok, tmp_path, dtype):
    docs = [[5, 17, 120, tok["eot"]], [3, tok["eot"]], [99, 100, 101, tok["eot"]]]  # ids a byte holds
    d = _imported(tok, tmp_path / "t", megatron_write(tmp_path / "web", docs, dtype))
    assert [d.document(i).tolist() for i in range(d.num_documents)] == docs


def test_megatron_without_eod_gets_one_appended(tok, tmp_path):
    d = _imported(tok, tmp_path / "t", megatron_write(tmp_path / "web", tok["docs"], np.int32))
    assert d.manifest["imported"]["eot"] == "appended"
    assert [d.document(i).tolist() for i in range(d.num_documents)] == [x + [tok["eot"]] for x in tok["docs"]]


def test_split_sentences_make_one_document(tok, tmp_path):
    eod = [d + [tok["eot"]] for d in tok["docs"]]
    d = _imported(tok, tmp_path / "t", megatron_write(tmp_path / "web", eod, np.uint16, split=True))
    assert [d.document(i).tolist() for i in range(d.num_documents)] == eod


def test_empty_documents_are_dropped_and_counted(tok, tmp_path):
    eod = [d + [tok["eot"]] for d in tok["docs"][:4]]
    prefix = megatron_write(tmp_path / "web", [[], *eod[:2], [], *eod[2:]], np.uint16)
    d = _imported(tok, tmp_path / "t", prefix)
    assert [d.document(i).tolist() for i in range(d.num_documents)] == eod
    assert d.manifest["skipped"] == {"empty document": 2} and d.manifest["imported"]["eot"] == "present"


def test_round_trip_is_byte_identical(tok, tmp_path):
    prefix = megatron_write(tmp_path / "web", [d + [tok["eot"]] for d in tok["docs"]], np.uint16)
    _imported(tok, tmp_path / "t", prefix)
    export_megatron(tmp_path / "t", tmp_path / "back")
    assert (tmp_path / "back.bin").read_bytes() == (tmp_path / "web.bin").read_bytes()
    assert (tmp_path / "back.idx").read_bytes() == (tmp_path / "web.idx").read_bytes()


def test_export_to_a_bucket_is_the_local_export(tok, tmp_path, s3_here, capsys, monkeypatch):  # noqa: F811
    """`-o s3://...`: Path() made it "s3:/bucket/..." and wrote a local folder named "s3:" (session 8)."""
    prefix = megatron_write(tmp_path / "web", [d + [tok["eot"]] for d in tok["docs"]], np.uint16)
    _imported(tok, tmp_path / "t", prefix)
    bucket = s3_here.new_bucket("megatron")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)  # a collapsed URL would land here as ./s3:/...
    out = f"s3://{bucket}/m/web_text_document"
    assert main(["tokens", "export-megatron", str(tmp_path / "t"), "-o", out]) == 0
    assert f"s3://{bucket}/m/web_text_document.bin" in capsys.readouterr().out
    fs = s3_here.filesystem()
    assert fs.cat(f"{bucket}/m/web_text_document.bin") == (tmp_path / "web.bin").read_bytes()
    assert fs.cat(f"{bucket}/m/web_text_document.idx") == (tmp_path / "web.idx").read_bytes()
    assert list(cwd.iterdir()) == []


def test_round_trip_of_a_vocabulary_past_65536_ids(tmp_path):
    # int32 (what preprocess_data.py writes for such a vocabulary) -> uint32 shards -> int32 again.
    from test_tokens_shards import tokenize_with_big_vocab

    tokenize_with_big_vocab(tmp_path, tmp_path / "ours")
    docs = [[1, 65535, 65536, 69999, 70_001], [70_000, 3, 70_001]]
    prefix = megatron_write(tmp_path / "big", docs, np.int32)
    d = _imported({"path": tmp_path / "big.json"}, tmp_path / "t", prefix)
    assert d.dtype == np.uint32 and [d.document(i).tolist() for i in range(2)] == docs
    export_megatron(tmp_path / "t", tmp_path / "back")
    assert (tmp_path / "back.bin").read_bytes() == (tmp_path / "big.bin").read_bytes()
    assert (tmp_path / "back.idx").read_bytes() == (tmp_path / "big.idx").read_bytes()


def test_train_two_steps_on_imported_tokens(tok, tmp_path):
    from pretrain.train.metrics import read_metrics
    from pretrain.train.testing import tiny_config
    from pretrain.train.trainer import Trainer

    prefix = megatron_write(tmp_path / "web", [d + [tok["eot"]] for d in tok["docs"]] * 4, np.int32)
    _imported(tok, tmp_path / "t", prefix)
    over = ["data.kind=tokens", f"data.sources.web={tmp_path / 't'}", "data.weights.web=1.0", "train.steps=2",
            "train.resume=false", "model.vocab_size=300", "checkpoint.every=100"]
    Trainer(tiny_config(tmp_path / "run", tmp_path / "none.txt", *over), quiet=True).fit()
    steps, _ = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert [s["step"] for s in steps] == [1, 2] and all(np.isfinite(s["loss"]) for s in steps)
    # A recipe whose vocabulary is smaller than the tokens' is refused before any step.
    small = [o if o != "model.vocab_size=300" else "model.vocab_size=257" for o in over]
    with pytest.raises(UserError, match=r"vocabulary \((\d+)\) is larger than model.vocab_size \(257\): "
                                        r"--set model.vocab_size=\1 \(or more\) fits it"):
        Trainer(tiny_config(tmp_path / "run2", tmp_path / "none.txt", *small), quiet=True).fit()
    # the token directory given as data.path (a text file's key): the error says which keys take it
    t = tmp_path / "t"
    with pytest.raises(UserError, match=f"data.path: {t} is a token directory .*: --set data.kind=tokens "
                                        f"--set data.sources.NAME={t} trains on it"):
        Trainer(tiny_config(tmp_path / "run3", tmp_path / "t", "model.vocab_size=300"), quiet=True)


def test_held_out_tokens_of_a_larger_vocabulary_are_refused(tok, tmp_path):
    """data.eval_sources are read by the same model: their vocabulary must fit it too (only the
    training sources' was compared; the held-out batch then failed in the embedding)."""
    from test_tokens_shards import tokenize_with_big_vocab

    from pretrain.train.testing import tiny_config
    from pretrain.train.trainer import Trainer

    prefix = megatron_write(tmp_path / "web", [d + [tok["eot"]] for d in tok["docs"]] * 4, np.uint16)
    _imported(tok, tmp_path / "t", prefix)
    tokenize_with_big_vocab(tmp_path, tmp_path / "big")
    over = ["data.kind=tokens", f"data.sources.web={tmp_path / 't'}",
            f"data.eval_sources.big={tmp_path / 'big'}", "train.steps=2", "train.resume=false",
            "model.vocab_size=300", "log.eval_every=1", "model.seq_len=4"]
    with pytest.raises(UserError, match=r"vocabulary \(70002\) is larger than model.vocab_size \(300\)"):
        Trainer(tiny_config(tmp_path / "run", tmp_path / "none.txt", *over), quiet=True).fit()


DT_WRITER = """
import sys
from datatrove.data import Document
from datatrove.pipeline.tokens.tokenizer import DocumentTokenizer
out, tok, texts, eos = sys.argv[1], sys.argv[2], sys.argv[3].split("\\x1e"), sys.argv[4] or None
docs = [Document(text=t, id=str(i)) for i, t in enumerate(texts)]
docs[0].metadata["no_loss_ranges"] = [(0, 10)]  # a prompt-like span, masked in .ds.loss when saved
DocumentTokenizer(out, tok, eos_token=eos, shuffle_documents=False, save_filename="web",
                  save_loss_metadata=eos is None).run(iter(docs))
"""


@pytest.fixture(scope="module")
def datatrove_out(tok) -> dict[str, Path]:
    """DocumentTokenizer's files, with and without its eos_token (one peer run each)."""
    return {eos: datatrove_write(tok["root"] / f"dt{len(eos)}", tok, eos) for eos in ("<|endoftext|>", "")}


def datatrove_write(out: Path, tok: dict, eos: str) -> Path:
    if not PEERS_PY.exists():
        pytest.skip("peer venv .venv-peers absent (make peers)")
    if subprocess.run([str(PEERS_PY), "-c", "import datatrove.pipeline.tokens.tokenizer"],
                      capture_output=True).returncode:
        pytest.skip("datatrove not importable in .venv-peers")
    subprocess.run([str(PEERS_PY), "-c", DT_WRITER, str(out), str(tok["path"]), "\x1e".join(TEXTS), eos],
                   check=True, capture_output=True, timeout=120)
    return out


@pytest.mark.parametrize("eos", ["<|endoftext|>", ""])
def test_datatrove_documents_arrive_whole(tok, datatrove_out, tmp_path, eos):
    folder = datatrove_out[eos]
    d = _imported(tok, tmp_path / "t", folder, kind="datatrove")
    assert d.manifest["imported"] == {"from": "datatrove", "eot": "present" if eos else "appended"}
    assert [d.document(i).tolist() for i in range(d.num_documents)] == [x + [tok["eot"]] for x in tok["docs"]]
    # Without eos_token the peer also wrote .ds.loss, masking doc 0's first 10 characters: counted.
    masked = load_tokenizer(tok["path"]).encode(TEXTS[0]).char_to_token(10) if not eos else 0
    assert d.manifest["shards"][0].get("loss_masked", 0) == masked and (masked > 0 or eos)


def _idx_edit(offset: int, fmt: str, value) -> callable:
    def edit(prefix: Path) -> None:
        with open(f"{prefix}.idx", "r+b") as f:
            f.seek(offset)
            f.write(struct.pack(fmt, value))
    return edit


def _truncate(suffix: str, drop: int):
    def edit(prefix: Path) -> None:
        p = Path(f"{prefix}{suffix}")
        p.write_bytes(p.read_bytes()[:-drop])
    return edit


def _append(suffix: str, extra: bytes):
    def edit(prefix: Path) -> None:
        with open(f"{prefix}{suffix}", "ab") as f:
            f.write(extra)
    return edit


N_SEQ = len(TEXTS)
LENGTHS, POINTERS, DOCS = 34, 34 + 4 * N_SEQ, 34 + 12 * N_SEQ
MEGATRON_LIES = {
    "magic": (_idx_edit(0, "<B", ord("X")), r"\.idx: record header: not a Megatron MMIDIDX"),
    "version": (_idx_edit(9, "<Q", 2), r"\.idx: record version: index version 2"),
    "float": (_idx_edit(17, "<B", 7), r"\.idx: record dtype: code 7 \(float32\)"),
    "code": (_idx_edit(17, "<B", 9), r"\.idx: record dtype: unknown dtype code 9"),
    "count": (_idx_edit(18, "<Q", 2**62), r"\.idx: record size: .* need"),
    "short idx": (_truncate(".idx", 8), r"\.idx: record size: .*truncated"),
    "multimodal": (_append(".idx", bytes(N_SEQ)), r"\.idx: record size: a multimodal index"),
    "negative length": (_idx_edit(LENGTHS + 4 * 3, "<i", -5), r"\.idx: record lengths\[3\]: negative"),
    "long length": (_idx_edit(LENGTHS, "<i", 2**31 - 1), r"\.bin: record size: .*truncated \.bin"),
    "pointer": (_idx_edit(POINTERS + 8 * 2, "<q", 2**60), r"\.idx: record pointers\[2\]: byte"),
    "doc end": (_idx_edit(DOCS + 8 * N_SEQ, "<q", N_SEQ + 5), r"\.idx: record document_indices: must run"),
    "doc order": (_idx_edit(DOCS + 8 * 2, "<q", 20), r"\.idx: record document_indices\[3\]: decreasing"),
    "short bin": (_truncate(".bin", 4), r"\.bin: record size: .*truncated \.bin"),
    "odd bin": (_truncate(".bin", 1), r"\.bin: record size: .*not a whole number"),
    "id past vocab": (lambda p: _poke(f"{p}.bin", 7, 65000), r"\.bin: record token 7: id 65000 is not an id"),
    "negative id": (lambda p: _poke(f"{p}.bin", 9, -3), r"\.bin: record token 9: id -3 is not an id"),
}


def _poke(path: str, i: int, value: int, dtype: str = "<i4") -> None:  # "<u8": a .ds.index
    """Write one number of a token or index file in place (the lie a hostile file tells)."""
    arr = np.memmap(path, dtype=dtype, mode="r+")
    arr[i] = value
    arr.flush()


@pytest.mark.parametrize("lie", sorted(MEGATRON_LIES))
def test_hostile_megatron_files_are_named(tok, tmp_path, lie, capsys):
    edit, message = MEGATRON_LIES[lie]
    prefix = megatron_write(tmp_path / "web", [d + [tok["eot"]] for d in tok["docs"]], np.int32)
    edit(prefix)
    with pytest.raises(DataError, match=message):
        import_tokens("megatron", [str(prefix)], tok["path"], tmp_path / "t")
    assert not (tmp_path / "t" / "manifest.json").exists() and not list((tmp_path / "t").glob("shard_*"))
    argv = ["tokens", "import-megatron", str(prefix), "-o", str(tmp_path / "t"), "--tokenizer",
            str(tok["path"])]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "web." in err and "Traceback" not in err


def test_a_bad_later_input_leaves_nothing_written(tok, tmp_path):
    eod = [d + [tok["eot"]] for d in tok["docs"]]
    good, bad = megatron_write(tmp_path / "a", eod, np.uint16), megatron_write(tmp_path / "b", eod, np.uint16)
    _truncate(".bin", 2)(bad)
    with pytest.raises(DataError, match=r"b\.bin: record size"):
        import_tokens("megatron", [str(good), str(bad)], tok["path"], tmp_path / "t")
    assert not (tmp_path / "t").exists()


def test_the_same_input_twice_is_refused(tok, tmp_path):
    # `import-megatron data/web data/./web` wrote two shards of the same documents (a mixture then
    # drew them at twice their weight); `pretrain tokenize` reads a repeated file once.
    a = megatron_write(tmp_path / "a", [d + [tok["eot"]] for d in tok["docs"]], np.uint16)
    with pytest.raises(UserError, match=r"a\.bin.*twice"):
        import_tokens("megatron", [str(a), str(tmp_path / "." / "a")], tok["path"], tmp_path / "t")
    assert not (tmp_path / "t").exists()


def test_a_link_to_a_device_is_refused(tok, tmp_path):
    prefix = megatron_write(tmp_path / "web", [d + [tok["eot"]] for d in tok["docs"]], np.uint16)
    Path(f"{prefix}.bin").unlink()
    Path(f"{prefix}.bin").symlink_to("/dev/zero")  # read without end, were it read
    with pytest.raises(UserError, match=r"web\.bin: not a regular file"):
        import_tokens("megatron", [str(prefix)], tok["path"], tmp_path / "t")


U8 = "<u8"  # datatrove's .ds.index: little-endian uint64 document ends
DATATROVE_LIES = {
    "ragged index": (_append(".ds.index", b"\x01"), r"\.ds\.index: record size: .*uint64"),
    "decreasing": (lambda p: _poke(f"{p}.ds.index", 3, 1, U8), r"\.ds\.index: record end\[3\]: decreasing"),
    "past end": (lambda p: _poke(f"{p}.ds.index", -1, 10**9, U8), r"\.ds: record size: .*truncated \.ds"),
    "short ds": (_truncate(".ds", 2), r"\.ds: record size: .*truncated"),
    "token size": (lambda p: Path(f"{p}.ds.metadata").write_text("x|3\n1\n"), r"record token_size: 3 bytes"),
    "short loss": (lambda p: Path(f"{p}.ds.loss").write_bytes(b"\x01" * 3), r"\.ds\.loss: record size: 3 "),
}


@pytest.mark.parametrize("lie", sorted(DATATROVE_LIES))
def test_hostile_datatrove_files_are_named(tok, datatrove_out, tmp_path, lie):
    edit, message = DATATROVE_LIES[lie]
    folder = shutil.copytree(datatrove_out["<|endoftext|>"], tmp_path / "dt")
    (ds,) = folder.glob("*.ds")
    edit(ds.with_suffix(""))
    with pytest.raises(DataError, match=message):
        import_tokens("datatrove", [str(ds)], tok["path"], tmp_path / "t")


@pytest.mark.parametrize("eos", [True, False])
def test_a_datatrove_index_is_read_a_chunk_at_a_time(tok, tmp_path, monkeypatch, eos):
    """The index is streamed (never whole in memory): with chunks of 4 ends and 4 tokens, documents
    and empty ones straddling every chunk boundary arrive as numpy slices them from the files (+ one
    end-of-text when absent), and a decreasing end at a chunk boundary is named."""
    import pretrain.tokens.imports as imports

    monkeypatch.setattr(imports, "CHUNK", 4)
    monkeypatch.setattr(imports, "ENDS", 4)
    rng = np.random.default_rng(7)
    lengths = [3, 0, 1, 5, 0, 0, 2, 4, 1, 0, 6, 2, 1]  # zeros: empty documents (no token)
    docs = [[*rng.integers(1, 250, size=max(0, n - 1)).tolist(), tok["eot"]][-n:] if eos and n else
            rng.integers(1, 250, size=n).tolist() for n in lengths]
    ds = tmp_path / "web.ds"
    ds.write_bytes(np.array([t for d in docs for t in d], "<u2").tobytes())
    Path(f"{ds}.index").write_bytes(np.cumsum(lengths).astype("<u8").tobytes())
    Path(f"{ds}.metadata").write_text("tok|2\n")
    d = _imported(tok, tmp_path / "t", ds, kind="datatrove")
    want = [x if eos else x + [tok["eot"]] for x in docs if x]
    assert [d.document(i).tolist() for i in range(d.num_documents)] == want
    assert d.manifest["shards"][0]["skipped"] == {"empty document": lengths.count(0)}
    assert d.manifest["imported"]["eot"] == ("present" if eos else "appended")
    _poke(f"{ds}.index", 8, 1, U8)  # end[8] < end[7]: the first end of the third chunk
    with pytest.raises(DataError, match=r"\.ds\.index: record end\[8\]: decreasing"):
        import_tokens("datatrove", [str(ds)], tok["path"], tmp_path / "t2")


def test_rerun_resumes_and_other_inputs_are_refused(tok, tmp_path, capsys):
    eod = [d + [tok["eot"]] for d in tok["docs"]]
    a = megatron_write(tmp_path / "a", eod, np.uint16)
    b = megatron_write(tmp_path / "b", eod[:5], np.uint16)
    d = _imported(tok, tmp_path / "t", a, b)
    stamp = (tmp_path / "t" / "shard_00000.bin").stat().st_mtime_ns
    capsys.readouterr()
    assert _imported(tok, tmp_path / "t", a, b).num_tokens == d.num_tokens  # same command: nothing redone
    said = capsys.readouterr().out
    assert said.startswith(f"kept {tmp_path / 't'}: ") and said.rstrip().endswith(
        "(already imported, nothing to do)"), said  # not "wrote": nothing was
    assert (tmp_path / "t" / "shard_00000.bin").stat().st_mtime_ns == stamp
    out = ["-o", str(tmp_path / "t"), "--tokenizer", str(tok["path"])]
    assert main(["tokens", "import-megatron", str(b), str(a), *out]) == 2  # another file at a position
    assert main(["tokens", "import-megatron", str(a), *out]) == 2  # fewer inputs
    train_tokenizer(TEXTS, vocab_size=290).save(str(tmp_path / "other.json"))
    assert main(["tokens", "import-megatron", str(a), str(b), "-o", str(tmp_path / "t"),
                 "--tokenizer", str(tmp_path / "other.json")]) == 2
    err = capsys.readouterr().err
    assert "different job" in err and "other inputs" in err and "another tokenizer" in err
    assert f"(tokenizer: {tok['path']}, sha256 " in err and f" -> {tmp_path / 'other.json'}, sha256 " in err
    assert "(inputs[0][0]: " in err and '/a.bin" -> ' in err and '/b.bin"' in err, err  # not two hashes
    assert TokenDir(tmp_path / "t").num_tokens == d.num_tokens  # untouched by the refused runs
    # An input inside the output directory (here named like a shard it writes): refused, not replaced.
    megatron_write(tmp_path / "t" / "shard_00009", eod, np.uint16)
    assert main(["tokens", "import-megatron", str(tmp_path / "t" / "shard_00009"), "-o", str(tmp_path / "t"),
                 "--tokenizer", str(tok["path"])]) == 2


def test_sigkill_mid_import_then_rerun(tok, tmp_path):
    rng = np.random.default_rng(0)
    prefixes = []
    for k in range(3):  # ~3M tokens each, no end-of-text (the slower, inserting path)
        docs = [rng.integers(1, tok["vocab"], size=int(n)).tolist() for n in rng.integers(1, 4000, size=1500)]
        prefixes.append(megatron_write(tmp_path / f"p{k}", docs, np.int32))
    argv = [sys.executable, "-m", "pretrain", "tokens", "import-megatron", *map(str, prefixes),
            "--tokenizer", str(tok["path"])]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen([*argv, "-o", str(tmp_path / "killed")], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not (tmp_path / "killed" / "shard_00000.done").exists() and proc.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    if not (tmp_path / "killed" / "manifest.json").exists():  # no half directory is taken for a whole one
        with pytest.raises(UserError, match="no manifest.json"):
            TokenDir(tmp_path / "killed")
    subprocess.run([*argv, "-o", str(tmp_path / "killed")], env=env, check=True, capture_output=True,
                   timeout=120)
    import_tokens("megatron", list(map(str, prefixes)), tok["path"], tmp_path / "clean")
    for name in ("shard_00000.bin", "shard_00001.bin", "shard_00002.bin", "shard_00002.idx"):
        assert (tmp_path / "killed" / name).read_bytes() == (tmp_path / "clean" / name).read_bytes()
    assert not list((tmp_path / "killed").glob(".*.tmp"))
    assert TokenDir(tmp_path / "killed").num_documents == 4500


def test_an_input_rewritten_at_the_same_size_is_refused_and_a_touch_is_silent(tok, tmp_path, capsys):
    """The done marker records each file's size, mtime and xxh3_128 beside the identity (path,
    size). A new mtime at the same size is hashed: the same bytes (a touch, a copy) resume without
    a word, for good; other bytes are refused in one line naming the file; another size too."""
    a = megatron_write(tmp_path / "a", tok["docs"][:5], np.uint16)
    b = megatron_write(tmp_path / "b", tok["docs"][5:10], np.uint16)
    argv = ["tokens", "import-megatron", str(a), str(b), "-o", str(tmp_path / "out"), "--tokenizer",
            str(tok["path"])]
    assert main(argv) == 0
    bin_b = Path(f"{b}.bin")
    same = bin_b.read_bytes()
    for k in (1, 2):  # a touch, twice: nothing said
        os.utime(bin_b, ns=(bin_b.stat().st_mtime_ns + k * 10**9,) * 2)
        capsys.readouterr()
        assert main(argv) == 0
        assert "note" not in capsys.readouterr().err
    other = bytearray(same)
    other[0] ^= 1  # one token id, same length
    before = bin_b.stat().st_mtime_ns
    bin_b.write_bytes(bytes(other))
    os.utime(bin_b, ns=(before + 10**9, before + 10**9))
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{bin_b.resolve()}: its bytes changed since" in err, err
    bin_b.write_bytes(same + b"\0\0")  # another size
    assert main(argv) == 2
    assert str(bin_b.resolve()) in capsys.readouterr().err
