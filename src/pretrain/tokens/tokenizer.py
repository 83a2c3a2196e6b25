"""Tokenizers: train a byte-level BPE with HF `tokenizers`, load any `tokenizer.json`, fingerprint it.

Byte-level BPE (GPT-2, Radford et al. 2019, section 2.2) starts from the 256 byte values, so every
string is encodable and `decode(encode(x)) == x` for any Unicode input; merges are then learned
from pair counts (Sennrich et al. 2016). The pre-tokenizer splits with GPT-2's regex so merges
never cross word/space/punctuation classes. `<|endoftext|>` separates documents in token shards.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from pathlib import Path

from pretrain import untrusted
from pretrain.errors import UserError

EOT = "<|endoftext|>"
# End-of-document names used by common tokenizers, tried in order by `eot_id`.
EOT_CANDIDATES = (EOT, "<|end_of_text|>", "</s>", "<eos>", "<|eot_id|>", "[SEP]")


def build_bpe(vocab_size: int, special_tokens: Iterable[str] = (EOT,), min_frequency: int = 2):
    """An untrained byte-level BPE tokenizer and its trainer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    specials = list(dict.fromkeys([EOT, *special_tokens]))
    if vocab_size < 256 + len(specials):
        raise UserError(f"vocab size {vocab_size} is below the 256 byte tokens "
                        f"+ {len(specials)} special tokens")
    tok = Tokenizer(models.BPE())
    # add_prefix_space=False keeps the round trip exact (no space invented before the first word).
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    return tok, trainer


def train_tokenizer(
    texts: Iterable[str],
    vocab_size: int,
    special_tokens: Iterable[str] = (EOT,),
    min_frequency: int = 2,
    length: int | None = None,
):
    """Train a byte-level BPE on an iterator of documents; returns a `tokenizers.Tokenizer`."""
    tok, trainer = build_bpe(vocab_size, special_tokens, min_frequency)
    tok.train_from_iterator(_batches(texts), trainer=trainer, length=length)
    tok.encode_special_tokens = True  # as `load_tokenizer` does: special strings in text stay text
    return tok


# The trainer is fed pieces of at most 2 x TRAIN_PIECE characters. Cut where the pre-tokenizer
# cuts (tokens/pieces.py), they hold the same words, so the same tokenizer is learned; a run with
# no such cut for TRAIN_PIECE characters (one "word" of 1 MiB of letters) is cut inside: HF's BPE
# trainer is superlinear in a word's length (one word of 64K letters: 1.4 s of CPU, 256K: 33 s,
# 1M: over 300 s; the same 1M letters in 1,024-character words: 2.6 s; 1M of English: 0.5 s).
TRAIN_PIECE = 1024


def _batches(texts: Iterable[str], size: int = 1000) -> Iterator[list[str]]:
    from pretrain.tokens.pieces import pieces

    batch: list[str] = []
    for t in texts:
        batch.extend(pieces(t, TRAIN_PIECE, TRAIN_PIECE) if len(t) > 2 * TRAIN_PIECE else (t,))
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


MAX_TOKENIZER_BYTES = 128 * 1024 * 1024
# HF `tokenizers` holds ~200-350 bytes per JSON value it loads, so bytes alone do not bound it: a
# 5.2 M-entry vocabulary (133 MB) took 57 s and 1.8 GB, 2.4 M merges (42 MB) 8.9 s and 1.5 GB. The
# largest real tokenizers: Gemma 3's 262,144 tokens and 514,906 merges (each merge `["a", "b"]`,
# three counted characters) are ~1.8 M, Llama 3's (128,256 and 280,147) ~1 M, GPT-2's ~0.1 M; 4 M
# is 2.2x Gemma 3 and holds a hostile file to ~1 GB. Counted by `untrusted.json_elements` (commas
# and brackets, strings included: an upper bound) before anything is parsed.
MAX_TOKENIZER_ELEMENTS = 4_000_000


def tokenizer_elements(path: str | Path, data: bytes | str) -> int:
    """An upper bound on the entries `tokenizers` or `transformers` builds from one tokenizer file:
    JSON values (tokenizer.json, vocab.json, ...), lines (merges.txt, vocab.txt), or pieces of a
    SentencePiece model (tokenizer.model), counted from its bytes without parsing it."""
    name = Path(path).name
    if name.endswith(".json"):
        return untrusted.json_elements(data)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if name.endswith(".model"):
        return _sentencepiece_pieces(raw, MAX_TOKENIZER_ELEMENTS + 1)
    return raw.count(b"\n") + 1


def _sentencepiece_pieces(raw: bytes, stop: int) -> int:
    """The number of `pieces` (field 1) at the top level of a SentencePiece ModelProto, up to `stop`;
    a malformed message ends the count (the protobuf parser refuses it, cheaply)."""
    def varint(i: int) -> tuple[int, int]:
        v = shift = 0
        while i < len(raw) and shift < 64:
            b = raw[i]
            v, i, shift = v | (b & 0x7F) << shift, i + 1, shift + 7
            if b < 0x80:
                return v, i
        return -1, len(raw)

    i = n = 0
    while i < len(raw) and n < stop:
        tag, i = varint(i)
        kind = tag & 7
        if tag < 0:
            break
        if kind == 2:
            size, i = varint(i)
            if size < 0:
                break
            i += size
            n += tag >> 3 == 1
        elif kind == 0:
            i = varint(i)[1]
        elif kind in (1, 5):
            i += 8 if kind == 1 else 4
        else:
            break
    return n


def check_tokenizer_elements(path: str | Path, data: bytes | str, counted: int = 0) -> int:
    """`counted` plus this file's `tokenizer_elements`; over MAX_TOKENIZER_ELEMENTS, one line naming
    the file (and the number) before `tokenizers` parses it."""
    n = counted + tokenizer_elements(path, data)
    if n > MAX_TOKENIZER_ELEMENTS:
        raise UserError(f"{untrusted.one_line(str(path))}: not a readable tokenizer: {n:,} entries "
                        f"(JSON values, lines, pieces) counted, over the {MAX_TOKENIZER_ELEMENTS:,} a "
                        "tokenizer may hold (Gemma 3's, among the largest, ~1.8 M); loading it could take "
                        "gigabytes")
    return n


def load_tokenizer(path: str | Path, literal_specials: bool = True):
    """Load a `tokenizer.json` (ours or any HF one) as a `tokenizers.Tokenizer`.

    With `literal_specials` (the default) a special token's text inside a document, such as a web
    page that quotes "<|endoftext|>", is encoded as ordinary text: documents cannot inject a
    document boundary, and decode(encode(x)) == x holds for every string.
    """
    from tokenizers import Tokenizer

    path = Path(path)
    if path.is_dir():  # a Hugging Face model folder: "not found" read as if it did not exist
        inside = path / "tokenizer.json"
        raise UserError(f"{path}: a folder: give the tokenizer.json in it ({inside})" if inside.is_file()
                        else f"{path}: a folder with no tokenizer.json: give a tokenizer.json file")
    if not path.exists():
        raise UserError(f"tokenizer not found: {path}")
    # A tokenizer.json from someone else (a token folder's copy, a run's): Tokenizer.from_file read
    # any size whole (a sparse 1 GiB file: 1 GB and 8 s; 2 GiB, 2 GB); the largest published ones
    # are ~33 MB (Gemma 3), so the bound is 4x that. Only a regular file is read.
    try:
        text = untrusted.read_text(path, MAX_TOKENIZER_BYTES)
    except untrusted.BadFile as e:
        why = str(e).removeprefix(f"{path}: ")
        raise UserError(f"{path}: not a readable tokenizer.json: {why}") from None
    check_tokenizer_elements(path, text)
    try:
        tok = Tokenizer.from_str(text)
    except Exception as e:  # the Rust side raises a plain Exception on malformed JSON
        raise UserError(f"{path}: not a readable tokenizer.json: {e}") from e
    tok.encode_special_tokens = literal_specials
    return tok


def eot_id(tok) -> int:
    """The id of the end-of-document token (the first of `EOT_CANDIDATES` the vocabulary has)."""
    for name in EOT_CANDIDATES:
        i = tok.token_to_id(name)
        if i is not None:
            return int(i)
    raise UserError(f"tokenizer has no end-of-text token (looked for {', '.join(EOT_CANDIDATES)}); "
                    f"train one with `pretrain tokenizer train`, which adds {EOT}")


def tokenizer_sha256(tok) -> str:
    """Fingerprint of a tokenizer's full definition (its canonical JSON), not of the file's bytes."""
    return hashlib.sha256(tok.to_str().encode("utf-8")).hexdigest()
