"""A long text encoded in bounded pieces (tokens/pieces.py): the ids HF tokenizers gives the whole
text wherever the cut is safe (real English, 75 languages, the tokenizer tests' tricky strings),
the tokenizer's own letter and digit classes behind the cut rule, and the memory of an 8 MiB
document with no space held in a child process."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import unicodedata

import numpy as np
import pytest

from pretrain.tokens import pieces
from pretrain.tokens.tokenizer import load_tokenizer, train_tokenizer
from tests.conftest import data_file
from tests.hostile import PEAK_MB
from tests.test_tokens_tokenizer import GENERATED, TRICKY

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """Real texts and a byte-level BPE trained on them (merges of every script in them)."""
    wiki = data_file("lm/wikitext-2/valid.txt").read_text(encoding="utf-8")[:120_000]
    sherlock = data_file("lm/gutenberg/sherlock.txt").read_text(encoding="utf-8")[:120_000]
    lingua_file = data_file("langid/lingua/lingua-sentences-75lang-100each.tsv")
    lines = lingua_file.read_text(encoding="utf-8").split("\n")
    rows = [line.split("\t", 1) for line in lines if "\t" in line]
    lingua = "\n".join(text for _, text in rows[::4])  # 25 sentences of each of the 75 languages
    tricky = " ".join(TRICKY) + " don't we'll x's  \n\n  --- !!! ...."
    path = tmp_path_factory.mktemp("pieces") / "tok.json"
    tok = train_tokenizer([wiki, sherlock, lingua], vocab_size=3000)  # fed to HF in <= 2K pieces
    tok.save(str(path))
    texts = {"wikitext": wiki, "sherlock": sherlock, "lingua": lingua, "tricky": tricky}
    return {"trained": tok, "texts": texts, "tok": load_tokenizer(path), "path": path}


@pytest.fixture(scope="module")
def gen(tmp_path_factory):
    """A tokenizer trained on generated words (runs without ../shared/data)."""
    path = tmp_path_factory.mktemp("gen") / "tok.json"
    train_tokenizer(GENERATED, vocab_size=1000).save(str(path))
    return {"tok": load_tokenizer(path), "path": path}


def _cut_everywhere(text: str) -> list[str]:
    cuts = [m.start() for m in pieces._CUT.finditer(text) if pieces.is_cut(text, m.start())]
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]


def test_a_cut_at_every_safe_position_gives_the_whole_texts_ids(real):
    # The rule itself, at its most demanding: every safe position of the text cut at once.
    tok = real["tok"]
    assert pieces.exact_pieces(tok)
    for name, text in real["texts"].items():
        frags = _cut_everywhere(text)
        assert "".join(frags) == text and len(frags) > len(text) / 40, name
        got = [i for e in tok.encode_batch(frags, add_special_tokens=False) for i in e.ids]
        assert got == tok.encode(text, add_special_tokens=False).ids, name


def test_long_real_text_encodes_to_the_same_ids_in_pieces(real, monkeypatch):
    # The sizes scaled down 64x (LONG_DOC 4K, PIECE 1K, RUN 1K): many pieces, no cut inside a run.
    tok = real["tok"]
    monkeypatch.setattr(pieces, "LONG_DOC", 4096)
    monkeypatch.setattr(pieces, "PIECE", 1024)
    monkeypatch.setattr(pieces, "RUN", 1024)
    for name, text in ((k, t) for k, t in real["texts"].items() if len(t) > 8192):
        assert len(pieces.pieces(text)) > 5 and pieces.hard_cuts(text) == 0, name
        assert pieces.encode_ids(tok, text).tolist() == tok.encode(text, add_special_tokens=False).ids, name


def test_a_run_with_no_safe_cut_is_cut_and_still_decodes(gen, monkeypatch):
    # 8 KiB of letters, of emoji, of spaces, of "!": each one pre-token. Cut every PIECE characters
    # (the only ids that may differ from the whole's); the text decodes back exactly.
    tok = gen["tok"]
    monkeypatch.setattr(pieces, "LONG_DOC", 4096)
    monkeypatch.setattr(pieces, "PIECE", 1024)
    monkeypatch.setattr(pieces, "RUN", 1024)
    for run in ("qwertyuiop" * 800, "👍🏽" * 4000, " " * 8000, "!" * 8000, "中文字符" * 2000):
        text = "start " + run + " end."
        parts = pieces.pieces(text)
        assert "".join(parts) == text and max(map(len, parts)) <= 2048
        assert pieces.hard_cuts(text) >= 5, run[:4]
        ids = pieces.encode_ids(tok, text)
        assert tok.decode(ids.tolist()) == text
        whole = tok.encode(text, add_special_tokens=False).ids
        assert abs(len(ids) - len(whole)) <= 2 * pieces.hard_cuts(text), run[:4]


def test_python_letters_and_digits_are_the_tokenizers():
    # The cut rule reads letters and digits with Python's `re` ([^\W_]); the tokenizer's regex reads
    # \p{L} and \p{N} with its own Unicode tables. Every code point Python assigns is asked of the
    # tokenizer: " a" + c is one pre-token iff c is a letter, " 1" + c iff a digit.
    from tokenizers import pre_tokenizers

    pre = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    cps = [c for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) not in ("Cn", "Cs", "Co")]

    # " a" + c + " 1" + c: c joins "a" iff a letter (offset 2), "1" iff a digit (offset 5)
    starts = {o[0] for _, o in pre.pre_tokenize_str("".join(f" a{chr(c)} 1{chr(c)}" for c in cps))}
    theirs = [6 * i + 2 not in starts or 6 * i + 5 not in starts for i in range(len(cps))]
    ours = [pieces.is_cut(chr(c) + "!", 1) for c in cps]  # c: a letter or digit to the cut rule
    wrong = [hex(c) for c, a, b in zip(cps, ours, theirs) if a != b]
    assert len(cps) > 100_000 and not wrong, wrong[:20]


def test_an_o200k_cut_is_a_word_end_of_its_regex_for_every_code_point():
    # o200k's words take marks (\p{M}) and a contraction: its rule cuts after a letter or digit
    # only before a character that is none of these. Asked of the tokenizer's own regex for every
    # code point Python assigns: where the rule cuts "a" | c or "1" | c, the regex ends a word.
    from tokenizers import Regex, pre_tokenizers

    pre = pre_tokenizers.Split(Regex(pieces.O200K_SPLIT), behavior="isolated", invert=False)
    ok = pieces._word_ends([], o200k=True)
    cps = [c for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) not in ("Cn", "Cs", "Co")]
    starts = {o[0] for _, o in pre.pre_tokenize_str("".join(f" a{chr(c)} 1{chr(c)}" for c in cps))}
    wrong = [hex(c) for i, c in enumerate(cps) if (ok(f"a{chr(c)}", 1) and 6 * i + 2 not in starts)
             or (ok(f"1{chr(c)}", 1) and 6 * i + 5 not in starts)]
    cut = sum(ok(f"a{chr(c)}", 1) for c in cps)
    assert cut > 8_000 and not wrong, (cut, wrong[:20])
    assert not ok("we'll", 2) and not ok("cafe\u0301", 4) and ok("we.", 2)
    # Each published o200k-style regex this rule is used for: text cut wherever it allows, each piece
    # pre-tokenized alone, gives the whole text's pre-tokens (HF's Split with that regex).
    rule = pieces.Rule("o200k", pieces._CUT, ok)
    for regex in (r for r, name in pieces._SPLITS.items() if name in pieces._O200K):
        pre = pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False)
        cuts = 0
        for name, text in {"probe": pieces.PROBE, **ADVERSARIAL}.items():
            frags = pieces.cut_everywhere(text, rule)
            words = [w for f in frags for w, _ in pre.pre_tokenize_str(f)]
            assert words == [w for w, _ in pre.pre_tokenize_str(text)], (regex[-30:], name)
            cuts += len(frags) - 1
        assert cuts > 2_000, regex  # (none in the runs of marks, emoji, newlines: no letter before)


def test_a_normalized_cut_is_a_word_end_for_every_code_point_normalization_moves():
    # NFC and NFKC (Qwen2's Split regex + ByteLevel): a cut needs a normalization boundary on both
    # sides, and is read on the normalized characters, so NFKC's "字，" (U+FF0C folds to ",") and
    # "ＡＢＣ，" are cuts now (they were not: "，" is not NFKC-normalized). Truth: HF tokenizers'
    # normalizer and pre-tokenizer on the whole text and on each piece alone, for the code points
    # Python assigns below U+20000 on either side of a cut (after a letter or a digit, before "，").
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers

    first, second = pieces._compositions()

    def moved(c: str) -> bool:  # what normalization can change, or compose, or reorder
        return unicodedata.normalize("NFKD", c) != c or unicodedata.combining(c) or c in first or c in second

    # every such code point below U+20000 (17,725, Hangul syllables included), and 1 in 11 of the
    # others (5,543: what normalization leaves alone, the previous rule's; the families test too)
    cps = [chr(c) for c in range(0x20000) if unicodedata.category(chr(c)) not in ("Cn", "Cs", "Co")
           and (moved(chr(c)) or c % 11 == 0)]
    left, right = ("字", "ｆ", "1"), ("，",)
    text = "".join(f" {a}{c}x" for a in left for c in cps) + "".join(f" {c}{b}x" for b in right for c in cps)
    for form in ("NFC", "NFKC"):
        tok = Tokenizer(models.BPE())
        tok.normalizer = getattr(normalizers, form)()
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(pieces.QWEN2_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        rule = pieces._word_rule({"type": form}, [
            {"type": "Split", "pattern": {"Regex": pieces.QWEN2_SPLIT}, "behavior": "Isolated",
             "invert": False}, {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}])
        frags = pieces.cut_everywhere(text, rule)
        assert pieces._words(tok, frags, rule) == pieces._words(tok, [text], rule), form
        assert len(frags) > 2 * len(cps), (form, len(frags))
        assert pieces.is_cut("中文字符，你好", 4, rule) and pieces.is_cut("ＡＢＣ，ｄ", 3, rule), form
        assert not pieces.is_cut("ｶﾞ", 1, rule) and not pieces.is_cut("e\u0301", 1, rule), form


_CHILD = r"""
import json, sys, time""" + PEAK_MB + r"""import random
from pretrain.tokens.pieces import encode_ids, hard_cuts
from pretrain.tokens.tokenizer import load_tokenizer
tok = load_tokenizer(sys.argv[1])
text = random.Random(0).randbytes(8 << 20).translate(bytes(97 + b % 26 for b in range(256))).decode()
base, t0 = peak_mb(), time.perf_counter()
ids = encode_ids(tok, text)
print(json.dumps({"mb": peak_mb() - base, "s": time.perf_counter() - t0, "tokens": int(ids.size),
                  "cuts": hard_cuts(text), "round_trip": tok.decode(ids[:5000].tolist()) == text[:len(
                  tok.decode(ids[:5000].tolist()))]}))
"""


def test_an_8_mib_document_with_no_space_is_held_to_300_mb(gen):
    # Encoded whole it took 897 MB above the child's start (1.2 GB RSS in `tokenize`, 20 s);
    # in pieces 173 MB (bench/bench_tokens_long.py). The bound: 300 MB above the interpreter,
    # its imports and the 8 MiB text itself.
    env = {**os.environ, "PYTHONPATH": SRC, "RAYON_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-c", _CHILD, str(gen["path"])], capture_output=True,
                       text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["mb"] <= 300 and got["tokens"] > 4_000_000 and got["cuts"] > 50 and got["round_trip"], got


def test_training_on_pieces_learns_the_whole_documents_tokenizer(real):
    # train_tokenizer feeds HF's trainer pieces of <= 2K characters (its time is superlinear in a
    # word's length); cut where the pre-tokenizer cuts, they hold the same words. Truth: HF's
    # trainer given the three documents whole.
    from pretrain.tokens.tokenizer import build_bpe

    t = real["texts"]
    whole, trainer = build_bpe(3000)
    whole.train_from_iterator([[t["wikitext"], t["sherlock"], t["lingua"]]], trainer=trainer)
    whole.encode_special_tokens = True
    assert real["trained"].to_str() == whole.to_str()


_TRAIN_CHILD = r"""
import random, sys
from pretrain.tokens.tokenizer import train_tokenizer
text = random.Random(0).randbytes(1 << 19).translate(bytes(97 + b % 26 for b in range(256))).decode()
tok = train_tokenizer([text], vocab_size=1000)
print(tok.get_vocab_size(), tok.decode(tok.encode(text[:5000]).ids) == text[:5000])
"""


def test_training_on_half_a_mib_of_letters_with_no_space_ends():
    # One word of 512K letters: HF's trainer took 33 s of CPU at 256K, over 300 s at 1M; in
    # 1K-character pieces, ~1.5 s. The bound here: 60 s on a loaded machine.
    env = {**os.environ, "PYTHONPATH": SRC, "RAYON_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-c", _TRAIN_CHILD], capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.returncode == 0 and r.stdout.split() == ["1000", "True"], r.stderr[-2000:]


def test_text_training_data_and_eval_encode_long_texts_in_pieces(real, monkeypatch):
    # `data.kind = "text"` (a data.path of up to 2 GiB) and eval's perplexity files (64 MiB) were
    # encoded whole; they now take the same pieces, to the same ids.
    from pretrain.eval.lm import _tokenizer_functions
    from pretrain.train.data import encode_text

    monkeypatch.setattr(pieces, "LONG_DOC", 4096)
    monkeypatch.setattr(pieces, "PIECE", 1024)
    cut: list[int] = []
    real_pieces = pieces.pieces
    monkeypatch.setattr(pieces, "pieces",
                        lambda text, *a, **k: cut.append(len(text)) or real_pieces(text, *a, **k))
    text, path = real["texts"]["sherlock"], str(real["path"])
    truth = real["tok"].encode(text).ids
    assert encode_text(text, path)[0].tolist() == truth
    assert _tokenizer_functions(path)[0](text) == truth
    assert cut == [len(text), len(text)]


@pytest.fixture(scope="module")
def families(request, tmp_path_factory):
    """tokenizer.json files shaped like Llama-3's, Qwen2's (NFC, and NFKC), Llama-2's, Mistral's and
    BERT's (tests/tokenizer_families.py) and ours, trained on the real texts (WikiText-2, Sherlock
    Holmes, 75 languages), or on generated words and the tricky strings without ../shared/data."""
    from tokenizers import Tokenizer

    from tests.conftest import SHARED_DATA
    from tests.tokenizer_families import FAMILIES, build

    if (SHARED_DATA / "lm" / "wikitext-2" / "valid.txt").is_file():
        real = request.getfixturevalue("real")
        t, ours = real["texts"], real["tok"]
        lingua = "\n".join(t["lingua"].split("\n")[::2])  # 12-13 sentences of each language
        train = [t["wikitext"][:60_000], t["sherlock"][:60_000], t["lingua"]]
        texts = {"wikitext": t["wikitext"][:20_000], "lingua": lingua, "tricky": t["tricky"]}
    else:
        tricky = " ".join(TRICKY)
        train, texts = [*GENERATED, tricky], {"generated": "".join(GENERATED[:80]), "tricky": tricky}
        ours = train_tokenizer(train, vocab_size=1000)
    toks = {f: build(f, train) for f in FAMILIES}

    def normalized(family: str, *kinds: str):  # the family's tokenizer.json with these normalizers
        spec = json.loads(toks[family].to_str())
        norm = [{"type": k} for k in kinds]
        tok = Tokenizer.from_str(json.dumps({**spec, "normalizer": norm[0] if len(norm) == 1 else
                                             {"type": "Sequence", "normalizers": norm}}))
        tok.encode_special_tokens = True
        return tok

    more = {"nfkc": normalized("qwen2", "NFKC"),  # Qwen2's, with NFKC (compatibility forms folded)
            "lower": normalized("llama3", "Lowercase"), "lower-nfc": normalized("qwen2", "Lowercase", "NFC"),
            "o200k-nfkc-lower": normalized("o200k", "NFKC", "Lowercase")}
    return {"toks": {**toks, **more, "ours": ours}, "texts": texts}


ADVERSARIAL = {  # 5K-10K characters each: at the scaled-down sizes below, several pieces
    "no spaces": "Thequickbrownfox,jumpedoverthelazydog;12345" * 150,
    "only newlines": "\n" * 6000,
    "newlines and words": "line\n\n" * 1000 + "\r\n" * 1000,
    "cjk": "中文字符，你好。日本語のテキスト、한국어 문장。" * 250,
    "combining marks": ("e\u0301a\u0308o\u0302 " + "n\u0303" * 5 + "!") * 400,
    "emoji": "👍🏽👨\u200d👩\u200d👧🇫🇷 " * 800,
    "emoji run": "😀" * 6000 + " end",
    "spaces": "word" + " " * 5000 + "word  \t  " * 300,
    "case and contractions": "HelloWorld WE'LL Don'T x's İstanbul'un İİ. ΣΑΣ ǅemal ﬁ Å\u212b " * 150,
    "full-width": "全角文字，ＡＢＣ，ｄｅｆ：１２３；ｶﾞｷﾞ，ﬁ，½，㍿，Ⅻ，x\u0308，한，가\u11a8，" * 200,
}


def test_every_family_cuts_real_and_adversarial_text_to_the_whole_texts_ids(families, monkeypatch):
    # Truth: HF tokenizers' ids of the whole text. Each family's rule, cut at every position it
    # allows at once (the rule at its most demanding), then through encode_ids at 1/64 the sizes.
    monkeypatch.setattr(pieces, "LONG_DOC", 4096)
    monkeypatch.setattr(pieces, "PIECE", 1024)
    monkeypatch.setattr(pieces, "RUN", 1024)
    texts = {**families["texts"], "probe": pieces.PROBE, **ADVERSARIAL}
    names = {"llama3": "Llama-3 Split", "qwen2": "Qwen2 Split regex + ByteLevel, NFC",
             "llama2": "Prepend + Replace", "mistral": "Metaspace", "ours": "GPT-2",
             "nfkc": "Qwen2 Split regex + ByteLevel, NFKC", "bert": "BertPreTokenizer, BertNormalizer",
             "o200k": "o200k Split regex + ByteLevel", "lower": "Llama-3 Split regex + ByteLevel, Lowercase",
             "lower-nfc": "Qwen2 Split regex + ByteLevel, Lowercase+NFC",
             "o200k-nfkc-lower": "o200k Split regex + ByteLevel, NFKC+Lowercase"}
    for family, tok in families["toks"].items():
        rule = pieces.cut_rule(tok)
        assert isinstance(rule, pieces.Rule) and rule.name.startswith(names[family]), (family, rule)
        for name, text in texts.items():
            whole = tok.encode(text, add_special_tokens=False).ids
            frags = pieces.cut_everywhere(text, rule)
            assert "".join(frags) == text, (family, name)
            assert pieces._ids(tok, frags, rule) == whole, (family, name)
            # and the words: the pre-tokens of each normalized piece are the whole text's (ids
            # alone miss a cut inside a word the model has no merge across; not on the two long
            # real texts: a call per piece, a third of the test's time)
            if name not in ("wikitext", "lingua"):
                assert pieces._words(tok, frags, rule) == pieces._words(tok, [text], rule), (family, name)
            if len(text) > 4096 and not pieces.hard_cuts(text, rule=rule):
                assert pieces.encode_ids(tok, text, rule).tolist() == whole, (family, name)
        first = next(iter(families["texts"].values()))  # WikiText-2's first 20,000 characters
        assert len(pieces.cut_everywhere(first, rule)) > len(first) / 7, family


def test_a_run_is_cut_and_decodes_and_a_bos_is_added_once(families, monkeypatch):
    # No cut for RUN characters: cut at PIECE, the text still decodes as the whole's ids; with the
    # post-processor's specials (data.kind = "text"), Llama-3's BOS, Llama-2's <s>, BERT's [CLS]
    # and [SEP] come once.
    monkeypatch.setattr(pieces, "LONG_DOC", 4096)
    monkeypatch.setattr(pieces, "PIECE", 1024)
    monkeypatch.setattr(pieces, "RUN", 1024)
    for family in ("llama3", "qwen2", "llama2", "mistral"):
        tok = families["toks"][family]
        rule = pieces.cut_rule(tok)
        runs = ("qwertyuiop" * 800, "😀" * 5000, "中文" * 4000)  # one pre-token each to a byte-level
        # regex; to a SentencePiece BPE a character that begins no merge is a cut (vocabulary's)
        assert family in ("llama2", "mistral") or sum(pieces.hard_cuts(t, rule=rule) for t in runs) >= 6
        for text in runs:
            ids = pieces.encode_ids(tok, text, rule)
            whole = tok.encode(text, add_special_tokens=False).ids  # Llama-2's: emoji are <unk>
            assert tok.decode(ids.tolist()) == tok.decode(whole), (family, text[:4])
            assert abs(len(ids) - len(whole)) <= 2 * pieces.hard_cuts(text, rule=rule), (family, text[:4])
    for family in ("llama3", "qwen2", "llama2", "mistral", "bert"):
        tok, text = families["toks"][family], "Holmes said: 'Elementary.' " * 400
        assert pieces.encode_ids(tok, text, specials=True).tolist() == tok.encode(text).ids, family


def test_a_tokenizer_with_no_known_word_end_is_encoded_whole_and_says_why(families, monkeypatch):
    # Another Split regex, an NFD normalizer, ByteLevel's prefix space: encoded whole, the
    # reason given; and a rule that cuts anywhere fails the check on PROBE and is refused.
    import json as js

    from tokenizers import Tokenizer

    from pretrain.tokens.pipeline import _encoded

    spec = js.loads(families["toks"]["llama3"].to_str())
    other = js.loads(js.dumps(spec))
    other["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = r"\S+|\s+"
    nfd = {**spec, "normalizer": {"type": "NFD"}}
    for changed, why in ((other, "regex whose word ends"), (nfd, "normalizer NFD")):
        tok = Tokenizer.from_str(js.dumps(changed))
        tok.encode_special_tokens = True
        assert why in pieces.cut_rule(tok), why
    anywhere = pieces.Rule("anywhere", re.compile(""), lambda text, at: True)
    monkeypatch.setattr(pieces, "_rule", lambda tok, spec: anywhere)
    assert "anywhere rule allows changed its ids" in pieces.cut_rule(families["toks"]["llama3"])
    monkeypatch.undo()
    monkeypatch.setattr(pieces, "LONG_DOC", 4096)
    said: dict = {}
    text = "Elementary, my dear Watson. " * 400
    got = np.concatenate(list(_encoded(tok, iter([text, "short", text]), said)))
    truth = [i for t in (text, "short", text) for i in tok.encode(t, add_special_tokens=False).ids]
    assert got.tolist() == truth
    assert said["encoded_whole"] == 2 and "normalizer NFD" in said["whole_why"]
    from pretrain.commands.tokenize import cut_runs  # the shard's line

    assert cut_runs(said).startswith("; 2 documents over 4,096 characters encoded whole, not in pieces")


def test_eval_and_text_training_data_say_once_that_a_long_text_is_encoded_whole(families, monkeypatch,
                                                                                  tmp_path, capsys):
    # `tokenize` said it per shard; eval's texts and a data.kind = "text" file were encoded whole in
    # silence. Now one line each, however many long texts: the tokenizer's ids unchanged.
    import json as js

    from tokenizers import Tokenizer

    from pretrain.eval import lm
    from pretrain.train.config import RunConfig
    from pretrain.train.data import build_loaders

    spec = js.loads(families["toks"]["llama3"].to_str())
    tok = Tokenizer.from_str(js.dumps({**spec, "normalizer": {"type": "NFD"}}))
    tok.save(str(tmp_path / "nfd.json"))
    path = str(tmp_path / "nfd.json")
    monkeypatch.setattr(pieces, "LONG_DOC", 4096)
    monkeypatch.setattr(lm, "_SAID_WHOLE", set())
    text = "Elementary, my dear Watson. " * 400
    encode = lm._tokenizer_functions(path)[0]
    truth = load_tokenizer(path).encode(text, add_special_tokens=False).ids
    assert encode(text) == truth and encode(text + " again") and encode("short")
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("eval: texts over 4,096 characters are encoded whole, not "
                                               "in pieces") and "normalizer NFD" in err[0], err
    (tmp_path / "data.txt").write_text(text, encoding="utf-8")
    dcfg = RunConfig().data
    dcfg.kind, dcfg.path, dcfg.tokenizer = "text", str(tmp_path / "data.txt"), path
    build_loaders(dcfg, seq_len=16)
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"data.path {tmp_path / 'data.txt'}: {len(text):,} characters encoded whole, not in "
                   f"pieces (~120 bytes of memory a character): {pieces.cut_rule(load_tokenizer(path))}"], err
