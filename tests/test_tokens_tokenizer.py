"""Byte-level BPE: exact round trips on real multilingual text, emoji and odd whitespace."""

from __future__ import annotations

import json
import random

import pytest

from pretrain.errors import UserError
from pretrain.tokens.tokenizer import EOT, eot_id, load_tokenizer, tokenizer_sha256, train_tokenizer
from tests.conftest import data_file


def _generated(n_docs: int = 400, seed: int = 0) -> list[str]:
    """Pseudo-words from syllables (no shipped corpus): thousands of distinct words, many merges."""
    rng = random.Random(seed)
    syll = [c + v for c in "bcdfghklmnprstvwz" for v in "aeiou"]
    words = ["".join(rng.choice(syll) for _ in range(rng.randint(1, 4))) for _ in range(3000)]
    return [" ".join(rng.choice(words) for _ in range(60)) + ".\n" for _ in range(n_docs)]


GENERATED = _generated()

TRICKY = [
    "",
    " leading and trailing spaces  ",
    "tabs\tand\t\ttabs\nnewlines\n\n\nand\r\nCRLF\rCR",
    "no-break\u00a0space, thin\u2009space, ideographic\u3000space, zero\u200bwidth",
    "emoji 😀👍🏽 family 👩‍👩‍👧‍👦 flag 🇫🇷 keycap 1️⃣",
    "combining: e\u0301 vs é; Hangul 한국어; Arabic العربية; Devanagari हिन्दी; 中文字符",
    "control \x00\x01\x1f chars and a lone surrogate-free astral 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
    "<|endoftext|> typed as plain text inside a document",
    "    indented code:\n\tdef f(x):\n\t\treturn x  # comment\n",
]


@pytest.fixture(scope="module")
def tok():
    return train_tokenizer(GENERATED, vocab_size=400)


def test_vocab_size_and_special_token(tok):
    assert tok.get_vocab_size() == 400
    assert tok.token_to_id(EOT) == eot_id(tok) == 0


@pytest.mark.parametrize("text", TRICKY)
def test_round_trip_unusual_text(tok, text):
    assert tok.decode(tok.encode(text).ids) == text


def test_merges_compress_training_text(tok):
    # Learned merges must beat one token per byte on text like the training text.
    text = GENERATED[3]
    assert len(tok.encode(text).ids) < 0.75 * len(text.encode())


def _lines(path, n=None):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    return lines[:n] if n else lines


def test_round_trip_real_text():
    sherlock = data_file("lm/gutenberg/sherlock.txt").read_text(encoding="utf-8")
    wiki = data_file("lm/wikitext-2/valid.txt").read_text(encoding="utf-8")
    lingua_file = data_file("langid/lingua/lingua-sentences-75lang-100each.tsv")
    rows = [line.split("\t", 1) for line in _lines(lingua_file) if "\t" in line]
    lingua = [text for _, text in rows]
    tok = train_tokenizer([sherlock[:100_000], wiki[:100_000]], vocab_size=600)
    for doc in (sherlock, wiki):
        ids = tok.encode(doc).ids
        assert tok.decode(ids) == doc
        assert len(ids) < len(doc.encode()) / 2  # English text like its training text compresses
    # 75 languages, most of them unseen in training: still exact, byte fallback by construction.
    encs = tok.encode_batch(lingua)
    assert [tok.decode(e.ids) for e in encs] == lingua
    assert len({lang for lang, _ in rows}) >= 70


def test_save_load_keeps_fingerprint(tok, tmp_path):
    path = tmp_path / "tok.json"
    tok.save(str(path), pretty=True)
    loaded = load_tokenizer(path)
    assert tokenizer_sha256(loaded) == tokenizer_sha256(tok)
    other = train_tokenizer(GENERATED, vocab_size=300)
    assert tokenizer_sha256(other) != tokenizer_sha256(tok)


def test_load_foreign_tokenizer(tmp_path):
    # A user's tokenizer built directly with HF tokenizers, with a different end-of-text name.
    from tokenizers import Tokenizer, models, pre_tokenizers

    t = Tokenizer(models.WordLevel({"<unk>": 0, "</s>": 1, "hello": 2, "world": 3}, unk_token="<unk>"))
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    t.add_special_tokens(["</s>"])
    path = tmp_path / "foreign.json"
    t.save(str(path))
    loaded = load_tokenizer(path)
    assert eot_id(loaded) == 1
    assert loaded.encode("hello world").ids == [2, 3]


def test_bad_tokenizer_files(tmp_path):
    with pytest.raises(UserError, match="not found"):
        load_tokenizer(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"not": "a tokenizer"}))
    with pytest.raises(UserError, match="not a readable tokenizer"):
        load_tokenizer(bad)
    from tokenizers import Tokenizer, models

    no_eot = Tokenizer(models.WordLevel({"a": 0, "<unk>": 1}, unk_token="<unk>"))
    with pytest.raises(UserError, match="no end-of-text"):
        eot_id(no_eot)


def test_vocab_too_small():
    with pytest.raises(UserError, match="below the 256 byte tokens"):
        train_tokenizer(GENERATED, vocab_size=100)


@pytest.mark.parametrize("args, says", [
    (["--vocab-size", "300", "--min-frequency", "-1"], "--min-frequency"),
    (["--vocab-size", "300", "--max-mb", "-5"], "--max-mb"),
    (["--vocab-size", "300", "--max-mb", "nan"], "--max-mb"),
    (["--vocab-size", "300", "--empty"], "no text"),
    (["--vocab-size", "300", "--unwritable"], "cannot write"),
])
def test_train_command_refuses_in_one_line(tmp_path, capsys, args, says):
    # Before: a traceback (negative --min-frequency, an unwritable -o), or exit 0 with a tokenizer
    # of 257 ids trained on nothing (an empty corpus, a negative --max-mb).
    from pretrain.cli import main as cli_main

    corpus = tmp_path / "c.txt"
    corpus.write_text("" if "--empty" in args else GENERATED[0] * 20, encoding="utf-8")
    out = tmp_path / ("file" if "--unwritable" in args else "") / "tok.json"
    (tmp_path / "file").write_text("a file, not a folder")
    args = [a for a in args if a not in ("--empty", "--unwritable")]
    assert cli_main(["tokenizer", "train", str(corpus), "-o", str(out), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err
    assert not out.exists()


def test_transformers_reads_our_tokenizer(tmp_path):
    # transformers' fast tokenizer on our tokenizer.json gives our ids and our text back; a special
    # token's text inside a document stays text with split_special_tokens=True, which the file
    # itself cannot carry (tokenizers does not serialize encode_special_tokens): docs/tokens.md.
    transformers = pytest.importorskip("transformers")
    tok = train_tokenizer(GENERATED, vocab_size=600)
    tok.save(str(tmp_path / "tok.json"))
    ours = load_tokenizer(tmp_path / "tok.json")
    theirs = transformers.PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / "tok.json"),
                                                  split_special_tokens=True)
    for text in [*GENERATED[:50], *TRICKY, f"a page quoting {EOT} mid-text"]:
        ids = ours.encode(text).ids
        assert theirs(text, add_special_tokens=False)["input_ids"] == ids
        assert theirs.decode(ids) == text
    default = transformers.PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / "tok.json"))
    assert default(f"x {EOT} y")["input_ids"].count(ours.token_to_id(EOT)) == 1  # why the flag matters
    # AutoTokenizer on a folder holding only our tokenizer.json (a token directory's copy): the same
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "tokenizer.json").write_bytes((tmp_path / "tok.json").read_bytes())
    auto = transformers.AutoTokenizer.from_pretrained(tmp_path / "dir", split_special_tokens=True)
    for text in [*GENERATED[:20], *TRICKY, f"a page quoting {EOT} mid-text"]:
        ids = ours.encode(text).ids
        assert auto(text, add_special_tokens=False)["input_ids"] == ids and auto.decode(ids) == text


@pytest.mark.parametrize("content", [b"", bytes(range(256)) * 20, b"[" * 100_000 + b"]" * 100_000,
                                     b'{"version": "1.0", "model": {"type": "BPE", "vocab": 5}}'])
def test_a_file_that_is_not_a_tokenizer_is_one_line(tmp_path, content):
    # Held already (regression test of the review): empty, binary, nested 100,000 deep, a wrong model.
    bad = tmp_path / "tokenizer.json"
    bad.write_bytes(content)
    with pytest.raises(UserError, match="not a readable tokenizer"):
        load_tokenizer(bad)
    with pytest.raises(UserError, match="a folder: give the tokenizer.json in it"):
        load_tokenizer(tmp_path)  # a directory (a Hugging Face model folder): the file it holds is named
    with pytest.raises(UserError, match="not found"):
        load_tokenizer(tmp_path / "missing.json")


def test_train_twice_into_one_path_says_what_it_replaced(tmp_path, capsys):
    # Run-it-twice review: a second `tokenizer train -o tok.json` replaced the first in silence (the
    # same line as a first run), replaced a token directory's own tokenizer copy (its shards then
    # decoded with another vocabulary), and replaced any file at -o, a config.json included.
    from tokenizers import Tokenizer

    from pretrain.cli import main as cli_main
    from pretrain.tokens.pipeline import tokenize_corpus

    (tmp_path / "a.txt").write_text("".join(GENERATED[:100]), encoding="utf-8")
    (tmp_path / "b.txt").write_text("".join(GENERATED[100:250]), encoding="utf-8")
    out = tmp_path / "tok.json"
    assert cli_main(["tokenizer", "train", str(tmp_path / "a.txt"), "-o", str(out),
                     "--vocab-size", "300"]) == 0
    first = tokenizer_sha256(load_tokenizer(out))
    capsys.readouterr()
    assert cli_main(["tokenizer", "train", str(tmp_path / "b.txt"), "-o", str(out),
                     "--vocab-size", "400"]) == 0
    said = capsys.readouterr().out.strip().splitlines()
    assert len(said) == 1 and f"replaced a tokenizer of 300 ids (sha256 {first[:12]})" in said[0], said
    assert Tokenizer.from_file(str(out)).get_vocab_size() == 400  # HF reads the new file whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.txt", "tok.json"]  # no temp left
    tokenize_corpus([str(tmp_path / "a.txt")], out, tmp_path / "tokens", workers=1)
    copy = tmp_path / "tokens" / "tokenizer.json"
    kept = copy.read_bytes()
    (tmp_path / "config.json").write_text('{"lr": 0.1}')
    for target, says in ((copy, "tokenizer copy of the token directory"), (tmp_path / "config.json",
                                                                           "not a tokenizer.json")):
        assert cli_main(["tokenizer", "train", str(tmp_path / "b.txt"), "-o", str(target),
                         "--vocab-size", "300"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and says in err[0] and str(target) in err[0], err
    assert copy.read_bytes() == kept and (tmp_path / "config.json").read_text() == '{"lr": 0.1}'


def test_a_multilingual_tokenizer_from_the_command_reads_the_same_in_hf_and_transformers(tmp_path):
    # The review's check as a user runs it: `pretrain tokenizer train` on real sentences of 75
    # languages (merges inside multi-byte scripts, not only byte fallbacks as with GENERATED), then
    # the file in HF `tokenizers` and transformers' fast tokenizer: our ids, our text, every line.
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer

    from pretrain.cli import main as cli_main

    lingua = data_file("langid/lingua/lingua-sentences-75lang-100each.tsv")
    rows = [ln.split("\t", 1)[1] for ln in _lines(lingua) if "\t" in ln]
    with open(tmp_path / "c.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"text": t}) + "\n" for t in rows[::2])  # half seen, half unseen
    out = tmp_path / "tok.json"
    assert cli_main(["tokenizer", "train", str(tmp_path / "c.jsonl"), "-o", str(out),
                     "--vocab-size", "2000"]) == 0
    ours = load_tokenizer(out)
    hf = Tokenizer.from_file(str(out))
    hf.encode_special_tokens = True
    fast = transformers.PreTrainedTokenizerFast(tokenizer_file=str(out), split_special_tokens=True)
    texts = [*rows, *TRICKY, "  \t\u00a0\u3000emoji 👩‍👩‍👧‍👦 ok\r\n\r\n  ", f"quoted {EOT} twice {EOT}"]
    mine = [e.ids for e in ours.encode_batch(texts)]
    assert [e.ids for e in hf.encode_batch(texts)] == mine
    assert fast(texts, add_special_tokens=False)["input_ids"] == mine
    assert fast.batch_decode(mine) == texts == [ours.decode(i) for i in mine]
    assert sum(map(len, mine)) < 0.6 * sum(len(t.encode()) for t in texts)  # merges inside scripts


def test_train_command_counts_one_document_in_the_singular(tmp_path, capsys):
    # One text file is one document: the summary said "trained on 1 documents" (session 8).
    from pretrain.cli import main as cli_main

    (tmp_path / "one.txt").write_text("The quick brown fox jumps over the lazy dog. " * 40)
    assert cli_main(["tokenizer", "train", str(tmp_path / "one.txt"), "-o", str(tmp_path / "t.json"),
                     "--vocab-size", "300"]) == 0
    assert capsys.readouterr().out.startswith("trained on 1 document, ")


def test_train_command_names_the_file_and_record_of_each_bad_kind(tmp_path, capsys):
    # Run-it-twice review (S4): hostile records (invalid UTF-8, a number for text, malformed JSON)
    # were "18 records skipped" and nothing else: no file, no record, no kind (tokenize named them).
    from pretrain.cli import main as cli_main

    good = tmp_path / "good.jsonl"
    good.write_text("".join(json.dumps({"text": t}) + "\n" for t in GENERATED[:50]), encoding="utf-8")
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"text": "kept"}\n{"text": 123}\n{"text": "bad \xff utf8"}\n{"text": broken\n'
                    b'{"text": ""}\n{"text": [1]}\n')
    assert cli_main(["tokenizer", "train", str(tmp_path), "-o", str(tmp_path / "tok.json"),
                     "--vocab-size", "300"]) == 0
    out, err = capsys.readouterr()
    assert "5 records skipped" in out, out
    named = [ln for ln in err.splitlines() if str(bad) in ln]
    assert len(named) == 1 and str(good) not in err, err  # the file with bad records, only it
    for record in ("line 2: text field 'text' is int", "line 3: invalid UTF-8", "line 4: malformed JSON"):
        assert record in named[0], named
    kinds = [ln for ln in err.splitlines() if ln.startswith("skipped:")]
    assert len(kinds) == 1 and all(k in kinds[0] for k in ("1 invalid UTF-8", "1 malformed JSON",
                                                             "1 empty text")), err


def test_train_command_says_when_the_corpus_gives_fewer_ids_than_asked(tmp_path, capsys):
    # Run-it-twice review (S4): --vocab-size 100000 on 0.2 MB printed "vocabulary 5,476" and nothing
    # else: the shortfall (no more pair seen --min-frequency times) read as what was asked.
    from pretrain.cli import main as cli_main

    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in GENERATED[:20]))
    assert cli_main(["tokenizer", "train", str(tmp_path / "c.jsonl"), "-o", str(tmp_path / "t.json"),
                     "--vocab-size", "100000"]) == 0
    got = load_tokenizer(tmp_path / "t.json").get_vocab_size()
    out = capsys.readouterr().out
    assert got < 100_000 and f"vocabulary {got:,} of the 100,000 asked" in out, out
    assert "--min-frequency 2" in out, out
    assert cli_main(["tokenizer", "train", str(tmp_path / "c.jsonl"), "-o", str(tmp_path / "t.json"),
                     "--vocab-size", "300"]) == 0
    assert "asked" not in capsys.readouterr().out  # the size asked: nothing to say


def test_undecodable_tokens_counts_the_bytes_of_no_character(tmp_path):
    # W2 (session 9): `pretrain sample` after a short training shows U+FFFD marks; it says how many
    # tokens they came from. Truth: Python's UTF-8 codec on the same bytes; the tokenizer path decodes
    # as HF's ByteLevel decoder does (Rust's from_utf8_lossy: the same maximal-subpart replacement).
    from pretrain.tokens.hf_tokenizer import byte_tokenizer
    from pretrain.train.data import decode_tokens, undecodable_tokens

    raw = b"a\xff" + "é".encode() + b"\xe2\x82" + b"x" + "€".encode() + b"\xc3"
    ids = list(raw) + [256]  # + end-of-text (special: decodes to nothing)
    assert decode_tokens(ids) == raw.decode("utf-8", errors="replace")
    assert undecodable_tokens(ids) == 4  # \xff, \xe2 \x82 (a cut euro sign), a final lone \xc3
    path = tmp_path / "bytes.json"
    byte_tokenizer().save(str(path))
    assert decode_tokens(ids, str(path)) == raw.decode("utf-8", errors="replace")
    assert undecodable_tokens(ids, str(path)) == 4
    assert undecodable_tokens(list("plain ascii and é".encode())) == 0


def test_tokenizer_train_shows_reading_then_training_on_request_only(tmp_path, capsys):
    # W2 (session 9): `pretrain tokenizer train` was silent for the minutes HF tokenizers trains.
    # With --progress: a reading bar by bytes, then "BPE on N MB, D documents" and the elapsed time;
    # without a terminal (the default here, captured) the summary line alone. Same tokenizer either way.
    from pretrain.cli import main

    texts = [" ".join(f"word{i % 37} token{i % 11}" for i in range(k, k + 400)) for k in range(30)]
    for n in (0, 1):
        (tmp_path / f"c{n}.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts[n::2]))
    mb = sum(len(t.encode()) for t in texts) / 1e6
    outs = {}
    for flag in ("--progress", None):
        # A run killed under --progress left its positions beside -o; the next run removes them.
        (tmp_path / f".{flag}.json.progress").mkdir()
        (tmp_path / f".{flag}.json.progress" / "0.json").write_text('{"docs": 99}')
        argv = ["tokenizer", "train", str(tmp_path / "c0.jsonl"), str(tmp_path / "c1.jsonl"),
                "-o", str(tmp_path / f"{flag}.json"), "--vocab-size", "300"]
        assert main(argv + ([flag] if flag else [])) == 0
        outs[flag] = capsys.readouterr()
        assert not list(tmp_path.glob(".*.progress")), list(tmp_path.iterdir())
    err = outs["--progress"].err
    assert f"BPE on {mb:,.1f} MB, {len(texts)} documents" in err and "trained BPE in " in err, err
    assert "2/2 files" in err and f"{len(texts)} docs" in err, err
    assert outs[None].err == "" and outs[None].out.count("\n") == 1, outs[None]
    sha = [o.out.split("sha256 ")[1].split()[0] for o in outs.values()]
    assert sha[0] == sha[1]


@pytest.mark.parametrize("kind", ["sparse", "fifo"])
def test_a_tokenizer_file_too_large_or_not_a_file_is_refused_unread(tmp_path, kind):
    """A token folder or run from someone else holds the tokenizer.json: from_file read any size
    whole (a sparse 1 GiB file of zeros: 1 GB of memory and 8 s before "expected value"). Past 128 MiB
    (4x Gemma 3's, the largest published) it is refused before a byte is read; a FIFO, which was
    "not found", is named for what it is."""
    import os

    from pretrain.tokens.tokenizer import MAX_TOKENIZER_BYTES

    bad = tmp_path / "tokenizer.json"
    if kind == "fifo":
        os.mkfifo(bad)
        says = "not a regular file"
    else:
        with open(bad, "wb") as f:
            f.truncate(8 * MAX_TOKENIZER_BYTES)  # 1 GiB, no block on disk
        says = "1,073,741,824 bytes, over the 134,217,728"
    with pytest.raises(UserError, match=f"not a readable tokenizer.json: {says}"):
        load_tokenizer(bad)


def test_a_gemma_3_sized_tokenizer_is_counted_under_the_cap_and_loads(tmp_path):
    """The element cap must admit the largest real tokenizers: one of Gemma 3's shape (262,144 tokens,
    514,906 merges), serialized by `tokenizers` itself, counts ~1.8 M (at least its true number of JSON
    values, walked here) and loads; the cap is over 2x that."""
    import itertools

    from tokenizers import Tokenizer, models

    from pretrain.tokens.tokenizer import MAX_TOKENIZER_ELEMENTS, tokenizer_elements

    # Every string of 1..6 letters over 8 letters, in order: each split of a token is two tokens, so
    # every merge is valid; a 6-letter token has 5 splits, enough for more merges than tokens.
    tokens = ("".join(t) for n in range(1, 7) for t in itertools.product("abcdefgh", repeat=n))
    vocab = {t: i for i, t in enumerate(itertools.islice(tokens, 262_144))}
    splits = ((t[:k], t[k:]) for t in vocab for k in range(1, len(t)))
    merges = list(itertools.islice(splits, 514_906))
    path = tmp_path / "tokenizer.json"
    path.write_text(Tokenizer(models.BPE(vocab=vocab, merges=merges)).to_str())

    def values(v) -> int:
        items = v.values() if isinstance(v, dict) else v if isinstance(v, list) else ()
        return 1 + sum(values(x) for x in items)

    counted = tokenizer_elements(path, path.read_bytes())
    assert values(json.loads(path.read_text())) <= counted < MAX_TOKENIZER_ELEMENTS / 2
    assert load_tokenizer(path).get_vocab_size() == 262_144


def test_a_tokenizer_of_too_many_entries_is_refused_before_parsing(tok, tmp_path, monkeypatch):
    """Under 128 MiB, 2.4 M merges still took HF tokenizers 1.5 GB: a file over the entry cap (set low
    here, as the small file is cheap) is one line naming it and the count, and `tokenizers` never sees
    it; the same file under the cap loads."""
    import pretrain.tokens.tokenizer as tk

    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    n = tk.tokenizer_elements(path, path.read_bytes())
    monkeypatch.setattr(tk, "MAX_TOKENIZER_ELEMENTS", n)
    assert load_tokenizer(path).get_vocab_size() == tok.get_vocab_size()
    monkeypatch.setattr(tk, "MAX_TOKENIZER_ELEMENTS", n - 1)
    monkeypatch.setattr("tokenizers.Tokenizer.from_str", lambda s: pytest.fail("parsed"))
    says = f"^{path}: not a readable tokenizer: {n:,} entries .* counted, over the {n - 1:,} a tokenizer"
    with pytest.raises(UserError, match=says):
        load_tokenizer(path)


def test_an_hf_folder_counts_its_tokenizer_files_together(tmp_path, monkeypatch):
    """`eval` of an HF folder: transformers reads tokenizer.json, vocab.json + merges.txt or a
    SentencePiece tokenizer.model; their entries (JSON values, lines, pieces: a model written by
    protobuf itself) are summed against the cap before transformers is called."""
    from transformers.utils import sentencepiece_model_pb2_new as pb

    import pretrain.tokens.tokenizer as tk
    from pretrain.eval.lm import _check_tokenizer_files

    sp = pb.ModelProto()
    for i in range(300):
        sp.pieces.add(piece=f"▁w{i}", score=-float(i))
    sp.trainer_spec.vocab_size = 300
    sp.normalizer_spec.name = "nmt_nfkc"
    (tmp_path / "tokenizer.model").write_bytes(sp.SerializeToString())
    (tmp_path / "merges.txt").write_text("#version: 0.2\n" + "".join(f"a{i} b\n" for i in range(99)))
    (tmp_path / "vocab.json").write_text(json.dumps({f"a{i}": i for i in range(50)}))
    assert tk.tokenizer_elements(tmp_path / "tokenizer.model", sp.SerializeToString()) == 300
    total = 300 + (100 + 1) + (49 + 1 + 1)  # pieces; lines (an upper bound); commas, `{`, the root
    monkeypatch.setattr(tk, "MAX_TOKENIZER_ELEMENTS", total)
    _check_tokenizer_files(tmp_path)
    monkeypatch.setattr(tk, "MAX_TOKENIZER_ELEMENTS", total - 1)
    with pytest.raises(UserError, match=f"tokenizer.model: not a readable tokenizer: {total:,} entries"):
        _check_tokenizer_files(tmp_path)
