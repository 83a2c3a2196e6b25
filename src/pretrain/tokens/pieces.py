"""Encode a long text in bounded pieces: the memory and time of one document held, not its size.

HF tokenizers keeps an alignment per byte of every pre-tokenized word while it encodes, ~110-140
bytes of memory per character: one 8 MiB document took 1.0-1.2 GB (and 12-20 s when it had no
space) in one `tokenize` worker; a 64 MiB perplexity text or a 2 GiB `data.path`, proportionally
more. A text over `LONG_DOC` characters is therefore cut into pieces of about `PIECE` characters,
encoded a few pieces per call, and the ids concatenated.

Where the cuts go. With GPT-2's pre-tokenizer (ByteLevel with its regex, Radford et al. 2019),
no normalizer and no added non-special token, a position between a letter or digit and a
character that is neither is always the end of a pre-token: `?\\p{L}+` and `?\\p{N}+` stop there,
the regex has no lookbehind, and its only lookahead (`\\s+(?!\\S)`) is not at stake when the
piece ends in a letter or digit. BPE merges never cross pre-tokens, so the pieces' ids are the
whole text's ids. A cut is looked for from `PIECE` characters on; when the next `RUN` characters
hold no such position (a run of 64K letters with no space or punctuation, of emoji, of
whitespace: nothing a language writes), the run is cut at `PIECE` characters (a character
boundary, so the pieces' bytes still decode to the text) and only the ids next to that cut may
differ from the whole's. Any other tokenizer is encoded whole, as before (bounded by the readers'
8 MiB per record). Measured in docs/decisions.md (2026-12-02, session 10).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator

import numpy as np

LONG_DOC = 1 << 18  # characters: a text up to this long is encoded in one call
PIECE = 1 << 16  # characters per piece, about (a cut is looked for from here on)
RUN = 1 << 16  # characters with no cut after PIECE: the run is cut at PIECE
PER_CALL = 4  # pieces per encode_batch call (parallel in Rust)

# A letter or digit, then a character that is neither (Python's [^\W_] is \p{L} or \p{N} as the
# tokenizer's regex reads them, for every code point Python's tables assign: tests/test_tokens_
# pieces.py checks each). A code point unassigned in Python's tables (Cn) may be a letter in the
# tokenizer's newer ones (9,392 are, Unicode 14 against 16): never cut before one.
_CUT = re.compile(r"(?<=[^\W_])(?=[\W_])")


def _cut_in(text: str, lo: int, hi: int) -> int | None:
    """The first safe cut in text[lo:hi] (see _CUT), or None."""
    for m in _CUT.finditer(text, lo, hi):
        if unicodedata.category(text[m.start()]) != "Cn":
            return m.start()
    return None


def is_cut(text: str, at: int) -> bool:
    """Whether a cut before text[at] leaves the ids of the text's two sides unchanged."""
    return 0 < at < len(text) and _cut_in(text, at, at + 1) == at


def exact_pieces(tok) -> bool:
    """Whether `tok` encodes pieces cut by `pieces` to exactly the whole text's ids."""
    spec = json.loads(tok.to_str())
    pre = spec.get("pre_tokenizer") or {}
    post = spec.get("post_processor") or {}
    return bool(spec.get("normalizer") is None and pre.get("type") == "ByteLevel"
                and pre.get("use_regex") is True and pre.get("add_prefix_space") is False
                and (spec.get("model") or {}).get("type") == "BPE"
                and not (spec.get("model") or {}).get("dropout")
                and post.get("type") in (None, "ByteLevel")
                and all(a.get("special") for a in spec.get("added_tokens") or [])
                and getattr(tok, "encode_special_tokens", False))


def pieces(text: str, piece: int | None = None, run: int | None = None) -> list[str]:
    """`text` cut at the first safe position at or after every `piece` characters (PIECE); where
    the next `run` (RUN) hold none, cut at `piece` characters (the only cut whose ids may differ)."""
    piece, run = piece or PIECE, run or RUN
    out, start = [], 0
    while len(text) - start > piece + run:
        cut = _cut_in(text, start + piece, start + piece + run)
        cut = start + piece if cut is None else cut
        out.append(text[start:cut])
        start = cut
    out.append(text[start:])
    return out


def hard_cuts(text: str, piece: int | None = None, run: int | None = None) -> int:
    """How many of `pieces(text)`'s cuts fell inside a run (0: the ids are the whole text's)."""
    n, start = 0, 0
    for p in pieces(text, piece, run)[:-1]:
        start += len(p)
        n += not is_cut(text, start)
    return n


def encode_pieces(tok, text: str, exact: bool | None = None, specials: bool = False) -> Iterator[np.ndarray]:
    """Ids (int64) of `text`, in order, one array per call: whole when short or when `tok` does
    not cut exactly (`exact`: `exact_pieces(tok)` when the caller already knows it). `specials`:
    the post-processor's (a BOS) added to a text encoded whole; an exact tokenizer adds none."""
    if len(text) <= LONG_DOC:
        yield np.asarray(tok.encode(text, add_special_tokens=specials).ids, dtype=np.int64)
        return
    encode = getattr(tok, "encode_batch_fast", tok.encode_batch)  # no offsets: only ids
    parts = pieces(text) if (exact_pieces(tok) if exact is None else exact) else [text]
    for lo in range(0, len(parts), PER_CALL):
        for e in encode(parts[lo:lo + PER_CALL], add_special_tokens=specials):
            yield np.asarray(e.ids, dtype=np.int64)


def encode_ids(tok, text: str, exact: bool | None = None, specials: bool = False) -> np.ndarray:
    """`tok.encode(text, add_special_tokens=specials).ids` as int64, in bounded pieces (above)."""
    arrays = list(encode_pieces(tok, text, exact, specials))
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays) if arrays else np.zeros(0, np.int64)
