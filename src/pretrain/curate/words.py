"""Word and sentence splitters for the quality rules, without spaCy or NLTK at run time.

Two splitters reproduce the tokenizers that datatrove's English rules ran on:

- `spacy_words` — spaCy 3's rule-based English tokenizer (`spacy.blank("en")`), used by datatrove
  0.10: text is cut on whitespace, then each chunk is peeled of prefixes and suffixes (punctuation,
  quotes, currency, units), special cases are applied (contractions such as "don't" -> "do", "n't";
  abbreviations such as "Mr." stay whole), URLs stay whole, and infixes (hyphens between letters,
  "a,b", "x/y", "...") split what remains. The same algorithm as spaCy's `Tokenizer._split_affixes`
  and `_attach_tokens`; the rule tables are in `curate/spacy_rules.py`.
  `spacy_sentence_count` counts sentences as spaCy's `sentencizer` does (a new sentence starts at
  the first non-punctuation token after a terminal mark).
- `nltk_words` — NLTK's `word_tokenize` (Punkt sentences, then the improved Treebank word rules),
  used when FineWeb was built. Punkt's trained English model is approximated by a boundary rule
  (terminal mark + whitespace + a token that can start a sentence, not after a known abbreviation
  or an initial); Treebank's rules are regular expressions and are reproduced here.

Whitespace-delimited chunks repeat (Zipf), so a chunk's tokens are cached, as spaCy itself does;
the cache is bounded and holds only strings. A new chunk that is a plain word with a few marks
around it (9 in 10 of them on web pages) is answered without the affix loop, with the same tokens.
Every token is non-empty and has no whitespace, as in datatrove's `strip_strings`.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from itertools import chain

from pretrain.curate.spacy_rules import english_special_cases, infix_chars, spacy_regexes, suffix_final_chars

# --- spaCy-style English tokenizer ------------------------------------------------------------

# Hostile input: a chunk longer than this (a base64 blob, 10,000 "!") is cut into runs of word
# characters and single other characters in linear time instead of by the affix loop, whose cost
# grows with the square of the chunk (spaCy's too). Natural text never has such chunks.
MAX_CHUNK = 500
_LONG_CHUNK = re.compile(r"\w+|[^\w\s]")
# A plain chunk (see `SpacyLikeTokenizer._plain`): an optional opening mark; ASCII letters (words
# joined by single hyphens), ASCII digits or word characters of any script (checked to be letters);
# an optional possessive; up to two closing marks.
_MARKS = ",;:!?)\"'\u201d\u2019"  # closing marks: one-character suffixes after anything
_OPEN_1 = "(\"'\u201c\u2018"  # the opening marks of _PLAIN
_CLOSE_1 = frozenset(_MARKS + ".")  # its closing marks
_PLAIN = re.compile(
    f"([(\"'\u201c\u2018]?)([A-Za-z]+(?:-[A-Za-z]+)*|[0-9]+|[^\\W\\d_]+)((?:['\u2019][sS])?)([{_MARKS}.]{{0,2}})"
)


class SpacyLikeTokenizer:
    """spaCy 3's English tokenizer algorithm over whitespace chunks, with a bounded chunk cache."""

    def __init__(self, max_cache: int = 200_000) -> None:
        self._prefix, self._suffix, self._infix, self._url, self._url_at, self._dot = spacy_regexes()
        self._suffix_ends = suffix_final_chars()
        self._infix_chars = infix_chars()
        self._special = english_special_cases()
        self._affixed = {k for k in self._special if not k.isalnum()}
        self._affixed_len = max(map(len, self._affixed))  # tokens are non-empty: a bound on the run
        self._cache: dict[str, tuple[str, ...]] = {}
        self._max_cache = max_cache

    def words(self, text: str) -> list[str]:
        chunks, cache = text.split(), self._cache
        try:  # the common case: every chunk seen before
            return list(chain.from_iterable(map(cache.__getitem__, chunks)))
        except KeyError:
            pass
        # Tokenize each new distinct chunk once, then join the text with C-level lookups only.
        missing = set(chunks).difference(cache)
        if len(cache) + len(missing) > self._max_cache:
            cache.clear()
            missing = set(chunks)
        long = {}
        for c in missing:
            if len(c) > MAX_CHUNK:
                long[c] = tuple(_LONG_CHUNK.findall(c))  # not cached: unbounded in size
            else:
                cache[c] = self._tokens(c)
        if long:
            return list(chain.from_iterable(cache.get(c) or long[c] for c in chunks))
        return list(chain.from_iterable(map(cache.__getitem__, chunks)))

    def count(self, text: str) -> int:
        chunks = text.split()
        got = list(map(self._cache.get, chunks))
        if None in got:
            got = [t if t is not None else self._chunk(c) for t, c in zip(got, chunks)]
        return sum(map(len, got))

    def _chunk(self, chunk: str) -> tuple[str, ...]:
        if len(chunk) > MAX_CHUNK:
            return tuple(_LONG_CHUNK.findall(chunk))
        if len(self._cache) >= self._max_cache:
            self._cache.clear()
        self._cache[chunk] = toks = self._tokens(chunk)
        return toks

    def _tokens(self, chunk: str) -> tuple[str, ...]:
        """The tokens of one chunk of at most MAX_CHUNK characters (uncached)."""
        toks = self._plain(chunk)
        if toks is not None:
            return toks
        parts = self._split(sys.intern(chunk) if len(chunk) < 20 else chunk)
        return tuple(self._merge_specials(parts) if len(parts) > 1 else parts)

    def _plain(self, chunk: str) -> tuple[str, ...] | None:
        """The tokens of a plain chunk, or None when the full algorithm must decide.

        Plain (most chunks of web text): a word (letters of any script; ASCII words may be joined
        by single hyphens) or an ASCII number, with at most one opening mark, an optional
        possessive "'s" and up to two closing marks. For these the affix loop can only peel the
        marks, one per step: no prefix, suffix or infix rule of spaCy's matches inside a run of
        letters (they all need a mark, a digit or "US$"-like currency), and the URL rule needs a
        dot. So the tokens are the pieces between the marks (and hyphens), unless the table of
        special cases knows a run of them (the loop and the merge pass only ever look up such
        runs), or a closing "." is not cut by spaCy's "." suffix rules (`_dot`, their lookbehinds).
        """
        special = self._special
        if chunk in special:  # the loop's first look-up; its tokens still go through the merge pass
            toks = special[chunk]
            return toks if len(toks) == 1 else tuple(self._merge_specials(list(toks)))
        if chunk.isalpha():
            return (chunk,)
        # The commonest marked shapes, a word (or ASCII number) and one closing mark ("said,",
        # "2019.") or an opening mark and a word ("(see"): what the general path below makes of
        # them, without the pattern.
        last = chunk[-1]
        if last in _CLOSE_1 and ((body := chunk[:-1]).isalpha() or (body.isdigit() and body.isascii())):
            if body in special or last in special:
                return None
            if last == "." and not self._dot.match(chunk, len(chunk) - 1):
                return None
            return (body, last)
        if chunk[0] in _OPEN_1 and ((body := chunk[1:]).isalpha() or (body.isdigit() and body.isascii())):
            return None if body in special or chunk[0] in special else (chunk[0], body)
        # A possessive ("Trump’s"): the loop peels "’s" as a suffix and keeps the word, whatever the
        # table says of "’s" alone (the pattern path below gives up on it, as "’s" is in the table).
        if chunk[-2:-1] in ("'", "\u2019") and last in "sS" and (body := chunk[:-2]).isalpha():
            return None if body in special else (body, chunk[-2:])
        m = _PLAIN.fullmatch(chunk)
        if m is None:
            return None
        pre, body, poss, close = m.groups()
        if not (body.isascii() or body.isalpha()):
            return None  # a number or the like in another script
        # spaCy's infix rule splits a hyphen between letters: "state-of-the-art" -> 7 tokens.
        toks = [pre] if pre else []
        toks += body.replace("-", " - ").split() if "-" in body else (body,)
        if poss:
            toks.append(poss)
        toks += close
        for i in range(len(toks)):  # every run of consecutive tokens
            run = toks[i]
            if run in special:
                return None
            for t in toks[i + 1 :]:
                run += t
                if run in special:
                    return None
        if "." in close:  # a second "." would make an ellipsis
            dot = len(chunk) - len(close) + close.find(".")
            if close.count(".") > 1 or not self._dot.match(chunk, dot):
                return None
        return tuple(toks)

    def _split(self, s: str) -> list[str]:
        special, prefixes, suffixes = self._special, [], []
        last = -1
        while s and len(s) != last:
            if s in special:
                break
            last = len(s)
            m = self._prefix.match(s)
            pre = m.end() if m else 0
            if pre and s[pre:] in special:
                prefixes.append(s[:pre])
                s = s[pre:]
                break
            suf = self._suffix_len(s[pre:])
            if suf and s[:-suf] in special:
                suffixes.append(s[-suf:])
                s = s[:-suf]
                break
            if pre and suf and pre + suf <= len(s):
                prefixes.append(s[:pre])
                suffixes.append(s[-suf:])
                s = s[pre:-suf]
            elif pre:
                prefixes.append(s[:pre])
                s = s[pre:]
            elif suf:
                suffixes.append(s[-suf:])
                s = s[:-suf]
        return prefixes + self._attach(s) + suffixes[::-1]

    def _suffix_len(self, t: str) -> int:
        """Length of the suffix spaCy's `suffix_search` finds at the end of `t` (0 if none).

        Every suffix rule matches at most 4 characters except a run of dots, so the search looks at
        the last 8 characters only (lookbehinds still see before the window) and widens a dot run
        that reaches the window's edge: linear time, where a plain search is quadratic."""
        if not t or t[-1] not in self._suffix_ends:
            return 0  # no suffix rule ends on this character
        w = max(0, len(t) - 8)
        m = self._suffix.search(t, w)
        if m is None:
            return 0
        start = m.start()
        if start == w and w and t[w] == "." and t[w - 1] == ".":
            start = len(t.rstrip(".")) if t.endswith("..") else start
        return len(t) - start

    def _merge_specials(self, toks: list[str]) -> list[str]:
        """spaCy's second pass: a run of tokens spelling a special case with punctuation in it
        (an emoticon, "''") becomes that special case."""
        out, i = [], 0
        while i < len(toks):
            for j in range(min(len(toks), i + self._affixed_len), i + 1, -1):
                joined = "".join(toks[i:j])
                if joined in self._affixed:
                    out += self._special[joined]
                    i = j
                    break
            else:
                out.append(toks[i])
                i += 1
        return out

    def _attach(self, s: str) -> list[str]:
        if not s:
            return []
        if s in self._special:
            return list(self._special[s])
        if (self._url_at if "@" in s else self._url).match(s):
            return [s]
        if self._infix_chars.isdisjoint(s):  # no character an infix rule consumes ("2019", "@user")
            return [s]
        out, start = [], 0
        for m in self._infix.finditer(s):
            a, b = m.span()
            if a == 0:  # spaCy ignores an infix at the very start of the chunk
                continue
            if a != start:
                out.append(s[start:a])
            if a != b:
                out.append(s[a:b])
            start = b
        if start < len(s):
            out.append(s[start:])
        return out


# spaCy's sentencizer: default terminal marks (its `Sentencizer.default_punct_chars`).
SENTENCIZER_PUNCT = frozenset(
    "!.?։؟۔܀܁܂߹।॥၊။።፧፨᙮᜵᜶᠃᠉᥄᥅᪨᪩᪪᪫᭚᭛᭞᭟᰻᰼᱾᱿‼‽⁇⁈⁉⸮⸼꓿꘎꘏꛳꛷꡶꡷꣎꣏꤯꧈꧉꩝꩞꩟꫰꫱꯫﹒﹖﹗！．？"
    "𐩖𐩗𑁇𑁈𑂾𑂿𑃀𑃁𑅁𑅂𑅃𑇅𑇆𑇍𑇞𑇟𑈸𑈹𑈻𑈼𑊩𑑋𑑌𑗂𑗃𑗉𑗊𑗋𑗌𑗍𑗎𑗏𑗐𑗑𑗒𑗓𑗔𑗕𑗖𑗗𑙁𑙂𑜼𑜽𑜾𑩂𑩃𑪛𑪜𑱁𑱂𖩮𖩯𖫵𖬷𖬸𖭄𛲟𝪈｡。"
)
_WS_GAP = re.compile(r"\s+")
_ODD_GAP = re.compile(r"[^\S ]|  |^ | $")


def _sentences(tokens: list[str]) -> int:
    count, seen = 1, False
    for t in tokens:
        if t in SENTENCIZER_PUNCT:
            seen = True
        elif seen and not _is_punct(t):
            count += 1
            seen = False
    return count


def _is_punct(tok: str) -> bool:
    """spaCy's `is_punct`: every character is in a Unicode punctuation category (P*)."""
    return all(unicodedata.category(c)[0] == "P" for c in tok)


_TOKENIZER: SpacyLikeTokenizer | None = None


def spacy_tokenizer() -> SpacyLikeTokenizer:
    global _TOKENIZER
    if _TOKENIZER is None:
        _TOKENIZER = SpacyLikeTokenizer()
    return _TOKENIZER


def spacy_words(text: str) -> list[str]:
    """Tokens of `text` as datatrove 0.10 gets them from spaCy `blank("en")` (whitespace dropped)."""
    return spacy_tokenizer().words(text)


def spacy_word_count(text: str) -> int:
    """len(spacy_words(text)), without building the list."""
    return spacy_tokenizer().count(text)


def spacy_sentence_count(line: str) -> int:
    """Number of sentences spaCy's sentencizer finds in `line` (at least 1), as datatrove counts them.

    A whitespace gap other than one plain space is a token of its own in spaCy and, not being
    punctuation, opens a sentence after a terminal mark.
    """
    if SENTENCIZER_PUNCT.isdisjoint(line):
        return 1
    tok = spacy_tokenizer()
    if not _ODD_GAP.search(line):  # only single spaces between chunks: no whitespace tokens
        return _sentences(tok.words(line))
    count, seen, pos = 1, False, 0
    for m in [*_WS_GAP.finditer(line), None]:
        end = m.start() if m else len(line)
        for t in tok.words(line[pos:end]):
            if t in SENTENCIZER_PUNCT:
                seen = True
            elif seen and not _is_punct(t):
                count += 1
                seen = False
        if m is None:
            break
        pos = m.end()
        if m.group() != " " and seen:
            count += 1
            seen = False
    return count


# --- NLTK-style English tokenizer (FineWeb era) ------------------------------------------------

# Punkt's English model is trained; this rule stands in for it: a sentence ends at . ! or ?
# (plus closing quotes/brackets) before whitespace and a token that can open a sentence, unless the
# word before the mark is a common abbreviation or a single initial.
_ABBREV = frozenset(
    "mr mrs ms dr prof st jr sr co corp inc ltd vs etc e.g i.e u.s u.k no vol fig jan feb mar apr jun jul "
    "aug sep sept oct nov dec gen gov sen rep rev mt ft lt col capt sgt".split()
)
_SENT_END = re.compile(r"(?<=[.!?])([\"')\]}\u201d\u2019]*)\s+(?=[\"'(\[\u201c\u2018]*[A-Z0-9])")


def punkt_like_sentences(text: str) -> list[str]:
    """Sentences of `text`, approximating NLTK's Punkt English model (see above)."""
    out, start = [], 0
    for m in _SENT_END.finditer(text):
        head = text[start : m.start()].rstrip(".!?")
        last = head.rsplit(None, 1)[-1].lower() if head.strip() else ""
        if text[m.start() - 1] == "." and (last in _ABBREV or (len(last) == 1 and last.isalpha())):
            continue
        out.append(text[start : m.start() + len(m.group(1))])
        start = m.end()
    out.append(text[start:])
    return [x for x in (s.strip() for s in out) if x]


def _sub(pattern: str, repl: str, flags: int = 0) -> tuple[re.Pattern, str]:
    return re.compile(pattern, flags), repl


# The improved Treebank word rules, in NLTK's order: opening quotes, punctuation, brackets,
# dashes, closing quotes, then contractions split into two tokens.
_CLOSE = "\\]\\)}>\"'\u00bb\u201d\u2019 "
_TREEBANK_RULES = [
    _sub("([\u00ab\u201c\u2018\u201e]|[`]+)", r" \1 "),
    _sub(r"^\"", "``"),
    _sub(r"(``)", r" \1 "),
    _sub(r"([ \(\[{<])(\"|\'{2})", r"\1 `` "),
    _sub(r"(?i)(?<!\w)(\')(?!(?:re|ve|ll|m|t|s|d|n)\b)(?=\w)", r"\1 "),
    _sub(rf"([^\.])(\.)([{_CLOSE}]*)\s*$", r"\1 \2 \3 "),
    _sub(r"([:,])([^\d])", r" \1 \2"),
    _sub(r"([:,])$", r" \1 "),
    _sub(r"\.{2,}", r" \g<0> "),
    _sub(r"[;@#$%&]", r" \g<0> "),
    _sub("[\u2012-\u2015]", r" \g<0> "),
    _sub(r'([^\.])(\.)([\]\)}>"\']*)\s*$', r"\1 \2\3 "),
    _sub(r"[?!]", r" \g<0> "),
    _sub(r"([^'])' ", r"\1 ' "),
    _sub(r"[*]", r" \g<0> "),
    _sub(r"[\]\[\(\)\{\}\<\>]", r" \g<0> "),
    _sub(r"--", r" -- "),
]
_TREEBANK_END = [
    _sub("([\u00bb\u201d\u2019])", r" \1 "),
    _sub(r"''", " '' "),
    _sub(r'"', " '' "),
    _sub(r"\s+", " "),
    _sub(r"([^' ])('[sS]|'[mM]|'[dD]|') ", r"\1 \2 "),
    _sub(r"([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) ", r"\1 \2 "),
] + [
    _sub(p, r" \1 \2 ")
    for p in (
        r"(?i)\b(can)(?#X)(not)\b",
        r"(?i)\b(d)(?#X)('ye)\b",
        r"(?i)\b(gim)(?#X)(me)\b",
        r"(?i)\b(gon)(?#X)(na)\b",
        r"(?i)\b(got)(?#X)(ta)\b",
        r"(?i)\b(lem)(?#X)(me)\b",
        r"(?i)\b(more)(?#X)('n)\b",
        r"(?i)\b(wan)(?#X)(na)(?=\s)",
        r"(?i) ('t)(?#X)(is)\b",
        r"(?i) ('t)(?#X)(was)\b",
    )
]


def treebank_words(sentence: str) -> list[str]:
    """One sentence through the improved Treebank word rules (NLTK's `NLTKWordTokenizer`)."""
    for rx, repl in _TREEBANK_RULES:
        sentence = rx.sub(repl, sentence)
    sentence = " " + sentence + " "
    for rx, repl in _TREEBANK_END:
        sentence = rx.sub(repl, sentence)
    return sentence.split()


def nltk_words(text: str) -> list[str]:
    """Tokens of `text` as NLTK's `word_tokenize` gives them (FineWeb's datatrove)."""
    return [w for sent in punkt_like_sentences(text) for w in treebank_words(sent)]


def nltk_sentence_count(line: str) -> int:
    """Sentences in `line` by the Punkt stand-in (at least 1 for a non-empty line)."""
    return max(1, len(punkt_like_sentences(line)))
