"""Encode a long text in bounded pieces: the memory and time of one document held, not its size.

HF tokenizers keeps an alignment per byte of every pre-tokenized word while it encodes, ~110-140
bytes of memory per character: one 8 MiB document took 1.0-1.2 GB (and 12-20 s when it had no
space) in one `tokenize` worker; a 64 MiB perplexity text or a 2 GiB `data.path`, proportionally
more. A text over `LONG_DOC` characters is therefore cut into pieces of about `PIECE` characters,
encoded a few pieces per call, and the ids concatenated.

Where the cuts go depends on the tokenizer (`cut_rule` reads its tokenizer.json):
- Word ends (GPT-2's ByteLevel regex; Llama-3's and Qwen2's Split regex then ByteLevel): a
  position between a letter or digit and a character that is neither always ends a pre-token:
  `?\\p{L}+`, `[^\\r\\n\\p{L}\\p{N}]?\\p{L}+`, `\\p{N}{1,3}`, `\\p{N}` stop there, no alternative
  holding a letter or digit runs past it, the regexes have no lookbehind and their only lookahead
  (`\\s+(?!\\S)`) is not at stake when the piece ends in a letter or digit. Models encode each
  pre-token alone, so the pieces' ids are the whole text's. o200k's regex (GPT-4o; Tekken) joins
  marks and a contraction to a word: there the right character must not be a mark or `'` either.
  With an NFC or NFKC normalizer (Qwen2) both characters at the cut must have a normalization
  boundary before them (a decomposition that starts with a starter composing with nothing before
  it; the right one's composes with nothing after either), and the rule is read on the characters
  at the cut once normalized (NFKC: "字，" is "字," and a word end); with Lowercase (per
  character, alone or with NFC/NFKC) on the lowercased characters at the cut.
- SentencePiece-style BPE (Metaspace, or Llama-2's Prepend("▁") + Replace(" ", "▁") with no
  pre-tokenizer, where one "word" may be the whole text): before a space, or before a character no
  merge's right side starts with, where no merge joins the two characters at the cut (read from
  the merges). A piece that gains a "▁" the whole text has not is fed without its space (Prepend) or
  has that lone "▁" id dropped (Metaspace's prepend_scheme).
- Whitespace (BERT's BertPreTokenizer and BertNormalizer, Whitespace, WhitespaceSplit, with
  normalizers that change a character and its marks alone): before a space.
Any other tokenizer (another regex, an NFD/NFKD, Replace or Precompiled normalizer before a
byte-level pre-tokenizer, a non-special added token, truncation) is encoded whole, as before
(bounded by the readers' 8 MiB per record), and `cut_rule` says why. Every rule is also checked on
`PROBE` (many scripts, digits, emoji, combining marks, space runs) cut at every position it allows:
ids or pre-tokens not identical to the whole's, and the text is encoded whole, saying so.

A cut is looked for from `PIECE` characters on; when the next `RUN` characters hold no cut (64K
letters with no space or punctuation, emoji, whitespace: nothing a language writes), the run is cut
at `PIECE` characters (a character boundary, so the pieces still decode to the text) and only the
ids next to that cut may differ from the whole's. Measured in docs/decisions.md (2026-12-02,
sessions 10 and 11).
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass

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

# The Split regexes whose word ends are the ones above, as published in tokenizer.json files.
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")  # Llama 3 (tiktoken's cl100k_base)
QWEN2_SPLIT = LLAMA3_SPLIT.replace(r"\p{N}{1,3}", r"\p{N}")  # Qwen2, Qwen2.5, Qwen3: one digit a token
# o200k (GPT-4o's tiktoken, as published): a word is letters and marks (\p{M}) with the contraction
# after it ("we'll" one pre-token), cased runs split ("HelloWorld"). It also ends after a letter or
# digit, but not before a mark or an apostrophe (`_O200K_ENDS`). Tekken (Mistral-Nemo): no
# contraction, one digit a token; some files publish o200k with `[\r\n]*` for `[\r\n/]*`.
O200K_SPLIT = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
               r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+"
               r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}"
               r"| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
TEKKEN_SPLIT = O200K_SPLIT.replace("(?i:'s|'t|'re|'ve|'m|'ll|'d)?", "").replace(r"\p{N}{1,3}", r"\p{N}")
_SPLITS = {LLAMA3_SPLIT: "Llama-3", QWEN2_SPLIT: "Qwen2", O200K_SPLIT: "o200k",
           O200K_SPLIT.replace(r"[\r\n/]*", r"[\r\n]*"): "o200k", TEKKEN_SPLIT: "Tekken"}
_O200K = ("o200k", "Tekken")
_SPACE = "\u2581"  # SentencePiece's "▁", the space of Metaspace and Llama-2's normalizer

# Real text in many scripts and the cases a rule could get wrong; each rule is checked on it.
PROBE = ("Don't we'll x's: 12345.678,9 and 1,000,000 -- the U.S.A.'s GDP (3.5%)! café cafe\u0301 "
         "Å\u212b ﬁne x² ＡＢＣ１２ क्षि नमस्ते। مرحباً שלום. 中文字符，你好。日本語のテキスト。 "
         "한국어 \u1100\u1161\u11a8。 ภาษาไทย \u0cbf\u0cd5ಕೀ a\u0338=\u0338<\u0338 "
         "👍🏽👨\u200d👩\u200d👧!! \t\n\n  \r\n   x\u2581y \u2581\u2581z   end.\n"
         "def f(x):\n    return x**2  # 42\n\n\n\u00a0\u3000\u2028ok")


@dataclass(frozen=True)
class Rule:
    """Where a tokenizer's text may be cut, and how a piece after the first is fed to it."""

    name: str  # said to users: "Llama-3 Split regex + ByteLevel"
    candidates: re.Pattern  # zero-width matches: the positions that may be cuts
    ok: Callable[[str, int], bool]  # whether a candidate position (0 < at < len) is a cut
    drop_space: bool = False  # Prepend normalizer: a piece's leading space is fed without it
    space_id: int | None = None  # ... and a piece that is one space is this id
    prepended: int | None = None  # Metaspace prepend: the id a piece gains in front (dropped)


def _assigned(text: str, at: int) -> bool:
    return unicodedata.category(text[at]) != "Cn"


WORD_ENDS = Rule("GPT-2 ByteLevel regex", _CUT, _assigned)  # the rule of `pieces` by default


@functools.cache
def _compositions() -> tuple[frozenset[str], frozenset[str]]:
    """Characters that start, and that end, a canonical composition pair (Hangul's L, V, T
    jamo included). Decompositions of two characters lie below U+20000, outside the CJK blocks."""
    first = {chr(c) for c in range(0x1100, 0x1113)}
    second = {chr(c) for c in (*range(0x1161, 0x1176), *range(0x11A8, 0x11C3))}
    for c in (*range(0x3400), *range(0xA000, 0xAC00), *range(0xD7A4, 0x20000)):
        d = unicodedata.decomposition(chr(c))
        if d and d[0] != "<" and len(parts := d.split()) == 2:
            first.add(chr(int(parts[0], 16)))
            second.add(chr(int(parts[1], 16)))
    return frozenset(first), frozenset(second)


def _normal_pair(form: str) -> Callable[[str, str], tuple[str, str] | None]:
    """The characters on either side of a cut between `a` and `b` once the text is normalized with
    `form` (NFC, NFKC), or None when normalization may work across the cut. Each side must have a
    normalization boundary before it (Unicode UAX #15; ICU's `hasBoundaryBefore`): its
    decomposition starts with a starter that composes with nothing before it, so the text before it
    normalizes alone. Then the left side ends with the last character of `a` normalized alone; the
    right side starts with the first of `b`'s decomposition, which must start no composition pair
    (else what follows `b` could change it). `b` need not be normalized already: NFKC folds "，"
    (U+FF0C) to ",", "ｆ" to "f", and the cut stays a word end (session 14; it was never a cut)."""
    first, second = _compositions()
    decompose = "NFKD" if form == "NFKC" else "NFD"

    def boundary_before(c: str) -> str | None:  # c's decomposition's first character, if a boundary
        d = unicodedata.normalize(decompose, c)
        ok = unicodedata.category(c) != "Cn" and unicodedata.combining(d[0]) == 0 and d[0] not in second
        return d[0] if ok else None

    def pair(a: str, b: str) -> tuple[str, str] | None:
        right = boundary_before(b)
        if boundary_before(a) is None or right is None or right in first:
            return None
        return unicodedata.normalize(form, a)[-1], right

    return pair


def _word_ends(norms: list[str], o200k: bool) -> Callable[[str, int], bool]:
    """Whether a `_CUT` candidate ends a word after the normalizers `norms` (NFC, NFKC, Lowercase,
    in order). Lowercase maps each character alone (HF's `NormalizedString::lowercase`, Rust's
    `char::to_lowercase`, no final-sigma context), so the characters at the cut become the last of
    `a.lower()` and the first of `b.lower()` ("İ" -> "i" + U+0307: a mark, no word end after it);
    these must still end a word. o200k's words also take marks and a contraction after them."""
    steps = [_normal_pair(n) if n != "Lowercase" else None for n in norms]

    def ok(text: str, at: int) -> bool:
        a, b = text[at - 1], text[at]
        if unicodedata.category(b) == "Cn":  # a letter in the tokenizer's newer tables, maybe
            return False
        for step in steps:
            if step is None:
                a, b = a.lower()[-1], b.lower()[0]
            elif (normal := step(a, b)) is None:
                return False
            else:
                a, b = normal
        if not _CUT.match(a + b, 1):  # a letter or digit, then neither
            return False
        return not o200k or (b != "'" and not unicodedata.category(b).startswith("M"))

    return ok


def is_cut(text: str, at: int, rule: Rule = WORD_ENDS) -> bool:
    """Whether a cut before text[at] leaves the ids of the text's two sides unchanged."""
    return 0 < at < len(text) and _cut_in(text, at, at + 1, rule) == at


def _cut_in(text: str, lo: int, hi: int, rule: Rule = WORD_ENDS) -> int | None:
    """The first cut in text[lo:hi] (see `Rule`), or None."""
    for m in rule.candidates.finditer(text, lo, hi):
        if 0 < m.start() < len(text) and rule.ok(text, m.start()):
            return m.start()
    return None


def last_cut(text: str, hi: int, rule: Rule = WORD_ENDS, back: int | None = None) -> int | None:
    """The last cut (`rule`'s) at or before `hi`, looked for in the `back` (RUN) characters before
    it; None when there is none. What comes after it encodes to the tail of the whole's ids
    (`_ids(..., first=False)`): eval keeps only a long context's last tokens this way."""
    lo, best = max(1, hi - (back or RUN)), None
    for m in rule.candidates.finditer(text, lo, min(hi, len(text) - 1) + 1):
        if 0 < m.start() <= hi and rule.ok(text, m.start()):
            best = m.start()
    return best


def encode_after(tok, text: str, rule: Rule) -> list[int]:
    """Ids of `text` as it is encoded after a cut: the tail of a longer text's ids."""
    return _ids(tok, [text], rule, first=False)


def pieces(text: str, piece: int | None = None, run: int | None = None, rule: Rule = WORD_ENDS) -> list[str]:
    """`text` cut at the first cut (`rule`'s) at or after every `piece` characters (PIECE); where
    the next `run` (RUN) hold none, cut at `piece` characters (the only cut whose ids may differ)."""
    piece, run = piece or PIECE, run or RUN
    out, start = [], 0
    while len(text) - start > piece + run:
        cut = _cut_in(text, start + piece, start + piece + run, rule)
        cut = start + piece if cut is None else cut
        out.append(text[start:cut])
        start = cut
    out.append(text[start:])
    return out


def hard_cuts(text: str, piece: int | None = None, run: int | None = None, rule: Rule = WORD_ENDS) -> int:
    """How many of `pieces(text)`'s cuts fell inside a run (0: the ids are the whole text's)."""
    n, start = 0, 0
    for p in pieces(text, piece, run, rule)[:-1]:
        start += len(p)
        n += not is_cut(text, start, rule)
    return n


def cut_everywhere(text: str, rule: Rule = WORD_ENDS) -> list[str]:
    """`text` cut at every position `rule` allows, at once (the rule at its most demanding)."""
    cuts = [m.start() for m in rule.candidates.finditer(text) if 0 < m.start() < len(text)
            and rule.ok(text, m.start())]
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]


def cut_rule(tok) -> Rule | str:
    """The `Rule` that cuts `tok`'s long texts, or why there is none (then they are encoded whole).
    The rule's cuts are checked on `PROBE`, each allowed position cut at once."""
    spec = json.loads(tok.to_str())
    rule = _rule(tok, spec)
    if isinstance(rule, str):
        return rule
    parts = cut_everywhere(PROBE, rule)
    if len(parts) < 20 or _ids(tok, parts, rule) != tok.encode(PROBE, add_special_tokens=False).ids \
            or _words(tok, parts, rule) != _words(tok, [PROBE], rule):
        return f"cutting a test text where the {rule.name} rule allows changed its ids"
    return rule


def _words(tok, texts: list[str], rule: Rule) -> list[str] | None:
    """The pre-tokens of `texts`, each normalized and pre-tokenized alone (None for the
    SentencePiece rules, whose pieces are fed changed): the ids alone miss a cut inside a word
    across which the model happens to have no merge."""
    if tok.pre_tokenizer is None or rule.drop_space or rule.prepended is not None:
        return None
    norm = tok.normalizer.normalize_str if tok.normalizer else (lambda t: t)
    return [w for t in texts for w, _ in tok.pre_tokenizer.pre_tokenize_str(norm(t))]


def _rule(tok, spec: dict) -> Rule | str:
    model, added = spec.get("model") or {}, spec.get("added_tokens") or []
    if spec.get("truncation") or spec.get("padding"):
        return "the tokenizer truncates or pads"
    if model.get("dropout"):
        return "BPE dropout (random ids)"
    if not all(a.get("special") for a in added):
        return "an added token that is not special (matched in the text)"
    if not getattr(tok, "encode_special_tokens", False):
        return "special tokens matched in the text (load_tokenizer's literal_specials off)"
    if _affixes(tok) is None:
        return "a post-processor that does not add the same tokens around every text"
    norm, pre = spec.get("normalizer"), spec.get("pre_tokenizer") or {}
    pres = pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else [pre] if pre else []
    words = _word_rule(norm, pres) or _space_rule(norm, pres)
    if words is not None:
        return words
    return _spm_rule(tok, norm, pres, model)


_SPACE_SPLITS = ("BertPreTokenizer", "Whitespace", "WhitespaceSplit")
_LOCAL = ("BertNormalizer", "Lowercase", "NFC", "NFD", "NFKC", "NFKD", "StripAccents")


def _space_rule(norm: dict | None, pres: list[dict]) -> Rule | None:
    """BERT-style: a pre-tokenizer that drops whitespace (BertPreTokenizer, Whitespace,
    WhitespaceSplit), normalizers that change a character with at most the combining marks after
    it (a space is a starter: nothing composes, reorders or changes case across it). A cut goes
    before a space."""
    norms = (norm.get("normalizers", []) if norm.get("type") == "Sequence" else [norm]) if norm else []
    if len(pres) != 1 or pres[0].get("type") not in _SPACE_SPLITS \
            or any(n.get("type") not in _LOCAL for n in norms):
        return None
    name = f"{pres[0]['type']}{', ' + _kinds(norms) if norms else ''}"
    return Rule(f"{name} (before a space)", re.compile("(?= )"), lambda text, at: True)


def _word_rule(norm: dict | None, pres: list[dict]) -> Rule | str | None:
    """Word ends for GPT-2's ByteLevel regex, or a known Split regex then ByteLevel (with GPT-2's
    regex too or not: a cut ends a word to both)."""
    if not pres or pres[-1].get("type") != "ByteLevel" or len(pres) > 2:
        return None
    byte, split = pres[-1], pres[0] if len(pres) == 2 else None
    if byte.get("add_prefix_space"):
        return "ByteLevel adds a space in front of each text"
    if split is None:
        name = "GPT-2 ByteLevel regex"
        if not byte.get("use_regex", True):
            return "ByteLevel with no regex and no Split before it (no word ends)"
    else:
        regex = (split.get("pattern") or {}).get("Regex")
        if split.get("type") != "Split" or regex not in _SPLITS \
                or split.get("behavior") != "Isolated" or split.get("invert"):
            return "a pre-tokenizer regex whose word ends are not known here"
        name = f"{_SPLITS[regex]} Split regex + ByteLevel"
    o200k = split is not None and _SPLITS[regex] in _O200K
    if norm is None:
        return Rule(name, _CUT, _word_ends([], True) if o200k else _assigned)
    norms = norm.get("normalizers", []) if norm.get("type") == "Sequence" else [norm]
    kinds = [str(n.get("type")) for n in norms]
    if not kinds or any(k not in ("NFC", "NFKC", "Lowercase") for k in kinds):
        return f"the normalizer {_kinds(norms)} (only NFC, NFKC or Lowercase keeps word ends known)"
    return Rule(f"{name}, {'+'.join(kinds)}", _CUT, _word_ends(kinds, o200k))


def _kinds(items: list[dict]) -> str:
    return "+".join(str(x.get("type")) for x in items) or "none"


def _spm_rule(tok, norm: dict | None, pres: list[dict], model: dict) -> Rule | str:
    """SentencePiece-style BPE: Metaspace (no normalizer), or Llama-2's Prepend + Replace normalizer
    with no pre-tokenizer. Cuts before a space or a character no merge's right side starts with,
    where no merge joins the characters on either side (read from the merges)."""
    norms = (norm.get("normalizers", []) if norm.get("type") == "Sequence" else [norm]) if norm else []
    legacy = [{"type": "Prepend", "prepend": _SPACE},
              {"type": "Replace", "pattern": {"String": " "}, "content": _SPACE}]
    if not norms and len(pres) == 1 and pres[0].get("type") == "Metaspace" \
            and pres[0].get("replacement") == _SPACE:
        split, prepend = bool(pres[0].get("split", True)), pres[0].get("prepend_scheme") != "never"
        name = "Metaspace"
    elif norms == legacy and not pres:
        split, prepend, name = False, True, "Prepend + Replace (SentencePiece) normalizer"
    else:
        return f"the pre-tokenizer {_kinds(pres)} with the normalizer {_kinds(norms)} (no known word end)"
    if model.get("type") != "BPE" or model.get("continuing_subword_prefix") \
            or model.get("end_of_word_suffix"):
        return f"a {name} tokenizer whose model is not a plain BPE"
    pairs = set()
    for m in model.get("merges") or []:
        a, b = m.split(" ") if isinstance(m, str) and m.count(" ") == 1 else m if len(m) == 2 else ("", "")
        if not a or not b:
            return f"a merge the {name} rule cannot read: {str(m)[:40]!r}"
        pairs.add((a[-1], b[0]))
    space_id = tok.token_to_id(_SPACE)
    if space_id is None:
        return f"a {name} tokenizer with no {_SPACE!r} token"
    # A cut before a known character (a token of its own: not <unk>, not bytes, which fuse_unk
    # could join) that begins no merge's right side: no merge joins it to what is before it, and
    # the "▁" a piece gains in front stays a token of its own (dropped). Or before a space.
    starts = {b for _, b in pairs} | {_SPACE, " "}
    free = sorted(t for t in (model.get("vocab") or {}) if len(t) == 1 and t not in starts)
    candidates = re.compile(f"(?= )|(?=[{''.join(re.escape(c) for c in free)}])" if free else "(?= )")

    def ok(text: str, at: int) -> bool:
        a = _SPACE if text[at - 1] == " " else text[at - 1]
        return text[at] != " " or split or (a, _SPACE) not in pairs

    return Rule(f"{name} BPE merges", candidates, ok, drop_space=name != "Metaspace",
                space_id=space_id, prepended=space_id if prepend else None)


def _affixes(tok) -> tuple[list[int], list[int]] | None:
    """The ids the post-processor puts before and after a text (a BOS), the same for any text; or None."""
    seen = set()
    for probe in ("a", PROBE[:80]):
        bare = tok.encode(probe, add_special_tokens=False).ids
        full = tok.encode(probe).ids
        at = next((i for i in range(len(full) - len(bare) + 1) if full[i:i + len(bare)] == bare), None)
        if at is None:
            return None
        seen.add((tuple(full[:at]), tuple(full[at + len(bare):])))
    return (list(next(iter(seen))[0]), list(next(iter(seen))[1])) if len(seen) == 1 else None


def _fed(part: str, first: bool, rule: Rule) -> str:
    """The text the tokenizer is given for one piece (see `Rule.drop_space`)."""
    return part[1:] if rule.drop_space and not first and part.startswith(" ") else part


def _ids(tok, parts: list[str], rule: Rule, first: bool = True) -> list[int]:
    """Ids of consecutive pieces (the first of the text when `first`), one encode_batch call."""
    encode = getattr(tok, "encode_batch_fast", tok.encode_batch)  # no offsets: only ids
    fed = [_fed(p, first and i == 0, rule) for i, p in enumerate(parts)]
    out: list[int] = []
    for i, (part, text, e) in enumerate(zip(parts, fed, encode(fed, add_special_tokens=False))):
        ids = e.ids
        if not (first and i == 0):
            if rule.drop_space and part.startswith(" ") and not text:
                ids = [rule.space_id]  # a piece of one space: Prepend("") is ""
            elif rule.prepended is not None and not part.startswith(" ") and ids:
                ids = ids[1:] if ids[0] == rule.prepended else _unprepended(tok, ids)
        out.extend(ids)
    return out


def _unprepended(tok, ids: list[int]) -> list[int]:
    """`ids` with the "▁" a piece gained taken off its first token ("▁qw" -> the model's ids of
    "qw"): a piece after a cut inside a run, where no merge rule kept the "▁" alone (its ids may
    differ from the whole's; without this it would also decode with a space not in the text)."""
    first = tok.id_to_token(ids[0]) or ""
    if not first.startswith(_SPACE) or len(first) < 2:
        return ids
    return [t.id for t in tok.model.tokenize(first[1:])] + ids[1:]


def encode_pieces(tok, text: str, rule: Rule | str | None = None,
                  specials: bool = False) -> Iterator[np.ndarray]:
    """Ids (int64) of `text`, in order, one array per call: whole when short or when `tok` has no
    `rule` (a str: why; None: `cut_rule(tok)`, which callers with many texts compute once).
    `specials`: the post-processor's (a BOS) added once, around the whole text."""
    if len(text) > LONG_DOC and rule is None:
        rule = cut_rule(tok)
    if len(text) <= LONG_DOC or not isinstance(rule, Rule):
        yield np.asarray(tok.encode(text, add_special_tokens=specials).ids, dtype=np.int64)
        return
    before, after = _affixes(tok) if specials else ([], [])
    if before:
        yield np.asarray(before, dtype=np.int64)
    parts = pieces(text, rule=rule)
    for lo in range(0, len(parts), PER_CALL):
        yield np.asarray(_ids(tok, parts[lo:lo + PER_CALL], rule, lo == 0), dtype=np.int64)
    if after:
        yield np.asarray(after, dtype=np.int64)


def encode_ids(tok, text: str, rule: Rule | str | None = None, specials: bool = False) -> np.ndarray:
    """`tok.encode(text, add_special_tokens=specials).ids` as int64, in bounded pieces (above)."""
    arrays = list(encode_pieces(tok, text, rule, specials))
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays) if arrays else np.zeros(0, np.int64)


def whole_because(why: str) -> str:
    """`encoded whole, not in pieces (...): WHY`, the words every command uses for a long text its
    tokenizer has no cut rule for (`tokenize` per shard; `eval` and `data.kind = "text"` once)."""
    from pretrain.untrusted import printable

    return f"encoded whole, not in pieces (~120 bytes of memory a character): {printable(why)}"


def exact_pieces(tok) -> bool:
    """Whether `tok` has a cut rule (its long texts are cut into pieces with the whole's ids)."""
    return isinstance(cut_rule(tok), Rule)
