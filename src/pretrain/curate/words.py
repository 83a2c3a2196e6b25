"""Word and sentence splitters for the quality rules, without spaCy or NLTK at run time.

Two splitters reproduce the tokenizers that datatrove's English rules ran on:

- `spacy_words` — spaCy 3's rule-based English tokenizer (`spacy.blank("en")`), used by datatrove
  0.10: text is cut on whitespace, then each chunk is peeled of prefixes and suffixes (punctuation,
  quotes, currency, units), special cases are applied (contractions such as "don't" -> "do", "n't";
  abbreviations such as "Mr." stay whole), URLs stay whole, and infixes (hyphens between letters,
  "a,b", "x/y", "...") split what remains. The same algorithm as spaCy's `Tokenizer._split_affixes`
  and `_attach_tokens`; the rule tables are written here from spaCy's documented English defaults.
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
from functools import lru_cache
from itertools import chain

# --- character classes (built once from the Unicode database) ---------------------------------


# spaCy's letter classes cover cased scripts (Latin, Greek, Cyrillic) by case and a fixed list of
# uncased scripts as whole blocks, marks included (its `char_classes._uncased`); other scripts
# (Thai, Armenian, Georgian, ...) are not letters to its affix rules.
_CASED_BLOCKS = (
    (0x00C0, 0x024F),
    (0x0250, 0x02AF),
    (0x1D00, 0x1DBF),
    (0x1E00, 0x1EFF),
    (0x2C60, 0x2C7F),
    (0xA720, 0xA7FF),
    (0xAB30, 0xAB6F),
    (0xFF21, 0xFF5A),
)
_UNCASED = (
    r"\u1200-\u137F\u0980-\u09FF\u0591-\u05F4\uFB1D-\uFB4F\u0620-\u064A\u066E-\u06D5\u06E5-\u06FF"
    r"\u0750-\u077F\u08A0-\u08BD\uFB50-\uFBB1\uFBD3-\uFD3D\uFD50-\uFDC7\uFDF0-\uFDFB\uFE70-\uFEFC"
    r"\U0001EE00-\U0001EEBB\u0D80-\u0DFF\u0900-\u097F\u0C80-\u0CFF\u0B80-\u0BFF\u0C00-\u0C7F"
    r"\uAC00-\uD7AF\u1100-\u11FF\u3040-\u309F\u30A0-\u30FF\u4E00-\u9FFF\u3400-\u4DBF"
    r"\U00020000-\U0002EBEF\u2E80-\u2FDF\u2FF0-\u303F\u31C0-\u31EF\u3200-\u33FF\uF900-\uFAFF"
    r"\uFE30-\uFE4F\U0001F200-\U0001F2FF\U0002F800-\U0002FA1F"
)


@lru_cache(maxsize=1)
def _classes() -> dict[str, str]:
    """Regex character-class bodies for letters (all / lower / upper) and symbols (So)."""
    lower, upper, icons = [], [], []
    for lo, hi in _CASED_BLOCKS:
        for cp in range(lo, hi + 1):
            cat = unicodedata.category(chr(cp))
            if cat == "Ll":
                lower.append(cp)
            elif cat == "Lu":
                upper.append(cp)
    for cp in range(0xA0, 0x20000):
        if unicodedata.category(chr(cp)) == "So":
            icons.append(cp)
    # Greek and Cyrillic: the letters of spaCy's Greek, Russian, Ukrainian, Tatar and Macedonian lists.
    lo = _ranges(lower) + "\u03b1-\u03c9\u03ac\u03ad\u03af\u03cc\u03ce\u03ae\u03cd\u0451\u0430-\u044f"
    lo += "\u0456\u0457\u0454\u0491\u04d9\u04e9\u04af\u0497\u04a3\u04bb"
    lo += "\u0453\u0455\u0458\u0459\u045a\u045c\u0450\u045d"
    up = _ranges(upper) + "\u0391-\u03a9\u0386\u0388\u038a\u038c\u038f\u0389\u038e\u0401\u0410-\u042f"
    up += "\u0406\u0407\u0404\u0490\u04d8\u04e8\u04ae\u0496\u04a2\u04ba"
    up += "\u0403\u0405\u0408\u0409\u040a\u040c\u0400\u040d"
    return {
        "a": "A-Za-z" + lo + up + _UNCASED,
        "al": "a-z" + lo + _UNCASED,
        "au": "A-Z" + up + _UNCASED,
        "icons": _ranges(icons),
    }


def _ranges(cps: list[int]) -> str:
    out, i = [], 0
    while i < len(cps):
        j = i
        while j + 1 < len(cps) and cps[j + 1] == cps[j] + 1:
            j += 1
        out.append(re.escape(chr(cps[i])) + ("-" + re.escape(chr(cps[j])) if j > i else ""))
        i = j + 1
    return "".join(out)


# --- spaCy-style English tokenizer ------------------------------------------------------------

_PUNCT = "… …… , : ; ! ? ¿ ؟ ¡ ( ) [ ] { } < > _ # * & 。 ？ ！ ， 、 ； ： ～ · । ، ۔ ؛ ٪".split()
_QUOTES = "' \" ” “ ` ‘ ´ ’ ‚ , „ » « 「 」 『 』 （ ） 〔 〕 【 】 《 》 〈 〉 〈 〉 ⟦ ⟧".split()
_CURRENCY = "$ £ € ¥ ฿ US$ C$ A$ ₽ ﷼ ₴ ₠ ₡ ₢ ₣ ₤ ₥ ₦ ₧ ₨ ₩ ₪ ₫ ₭ ₮ ₯ ₰ ₱ ₲ ₳ ₵ ₶ ₷ ₸ ₹ ₺ ₻ ₼ ₾ ₿".split()
_UNITS = (
    "km km² km³ m m² m³ dm dm² dm³ cm cm² cm³ mm mm² mm³ ha µm nm yd in ft kg g mg µg t lb oz m/s km/h "
    "kmh mph hPa Pa mbar mb MB kb KB gb GB tb TB T G M K % км км² км³ м м² м³ дм дм² дм³ см см² см³ мм мм² "
    "мм³ нм кг г мг м/с км/ч кПа Па мбар Кб КБ кб Мб МБ мб Гб ГБ гб Тб ТБ тбكم كم² كم³ م م² م³ سم سم² سم³ مم "
    "مم² مم³ كم غرام جرام جم كغ ملغ كوب اكواب"
).split()
_HYPHENS = "- – — -- --- —— ~".split()


def _alt(items: list[str]) -> str:
    return "|".join(re.escape(x) for x in items)


@lru_cache(maxsize=1)
def _spacy_regexes() -> tuple[re.Pattern, ...]:
    c = _classes()
    q = re.escape("".join(_QUOTES))
    p = re.escape("".join(_PUNCT))
    icons = f"[{c['icons']}]"
    ellipses = r"\.\.+|…"
    prefix = "|".join(
        [
            "§",
            "%",
            "=",
            "—",
            "–",
            r"\+(?![0-9])",
            _alt(_PUNCT),
            ellipses,
            _alt(_QUOTES),
            _alt(_CURRENCY),
            icons,
        ]
    )
    dot = [  # the suffix rules for a final "." after a letter, digit or mark
        # spaCy's class here also holds '(', '?', ':' and '|' from its template: keep them.
        rf"(?<=[0-9{c['al']}%²\-\+{p}{q}(?:|])\.",
        rf"(?<=[{c['au']}][{c['au']}])\.",
    ]
    suffix = "|".join(
        [
            _alt(_PUNCT),
            ellipses,
            _alt(_QUOTES),
            icons,
            "'s|'S|’s|’S|—|–",
            r"(?<=[0-9])\+",
            r"(?<=°[FfCcKk])\.",
            rf"(?<=[0-9])(?:{_alt(_CURRENCY)})",
            rf"(?<=[0-9])(?:{_alt(_UNITS)})",
            *dot,
        ]
    )
    infix = "|".join(
        [
            ellipses,
            icons,
            r"(?<=[0-9])[+\-\*^](?=[0-9-])",
            rf"(?<=[{c['al']}{q}])\.(?=[{c['au']}{q}])",
            rf"(?<=[{c['a']}]),(?=[{c['a']}])",
            rf"(?<=[{c['a']}0-9])(?:{_alt(_HYPHENS)})(?=[{c['a']}])",
            rf"(?<=[{c['a']}0-9])[:<>=/](?=[{c['a']}])",
        ]
    )
    return (
        re.compile(f"^(?:{prefix})"),
        re.compile(f"(?:{suffix})$"),
        re.compile(infix),
        _url_regex(c["al"], False),
        _url_regex(c["al"], True),
        re.compile("|".join(dot)),
    )


def _url_regex(lower: str, userinfo: bool) -> re.Pattern:
    """A whole-chunk URL/e-mail/domain match (spaCy's URL_MATCH, after Diego Perini's pattern).

    The optional `user:pass@` part can only match when the chunk has an "@"; it backtracks
    quadratically on long chunks, so it is compiled into a second pattern used only then."""
    host = r"(?:(?:[A-Za-z0-9\u00a1-\uffff][A-Za-z0-9\u00a1-\uffff_-]{0,62})?[A-Za-z0-9\u00a1-\uffff]\.)+"
    ip = (
        r"(?!(?:10|127)(?:\.\d{1,3}){3})(?!(?:169\.254|192\.168)(?:\.\d{1,3}){2})"
        r"(?!172\.(?:1[6-9]|2\d|3[0-1])(?:\.\d{1,3}){2})"
        r"(?:[1-9]\d?|1\d\d|2[01]\d|22[0-3])(?:\.(?:1?\d{1,2}|2[0-4]\d|25[0-5])){2}"
        r"(?:\.(?:[1-9]\d?|1\d\d|2[0-4]\d|25[0-4]))"
    )
    return re.compile(
        r"(?u)^(?:(?:[\w\+\-\.]{2,})://)?"
        + (r"(?:\S+(?::\S*)?@)?" if userinfo else "")
        + rf"(?:{ip}|{host}(?:[{lower}]{{2,63}}))(?::\d{{2,5}})?(?:[/?#]\S*)?$"
    )


def _english_special_cases() -> dict[str, tuple[str, ...]]:
    """Chunks spaCy's English tokenizer splits (or keeps whole) by table rather than by rule."""
    sc: dict[str, tuple[str, ...]] = {}

    def add(orth: str, parts: tuple[str, ...]) -> None:
        for a in ("'", "’"):
            sc[orth.replace("'", a)] = tuple(x.replace("'", a) for x in parts)

    def contraction(word: str, suffix: str, bare: bool = True) -> None:
        # "n't" is one token; spaCy cuts "'ma" as "'m" + "a".
        parts = tuple(re.findall(r"n't|'m(?=a)|'?[a-z]+", suffix))
        for w in (word, word.title()):
            add(w + suffix, (w, *parts))
            if bare:
                add(w + suffix.replace("'", ""), (w, *(x.replace("'", "") for x in parts)))

    for w in ("i",):
        for s in ("'m", "'ma"):
            contraction(w, s)
    for w in ("i", "you", "he", "she", "it", "we", "they"):
        for s in ("'ll", "'ll've", "'d", "'d've"):
            contraction(w, s)
    for w in ("i", "you", "we", "they"):
        contraction(w, "'ve")
    for w in ("you", "we", "they"):
        contraction(w, "'re")
    for w in ("he", "she", "it"):
        contraction(w, "'s")
    for w in ("who", "what", "when", "where", "why", "how", "there", "that", "this", "these", "those"):
        if w not in ("these", "those"):
            contraction(w, "'s")
        for s in ("'ll", "'ll've", "'d", "'d've"):
            contraction(w, s)
        if w not in ("that", "this"):
            contraction(w, "'re")
            contraction(w, "'ve")
    for verb in (
        "ca",
        "could",
        "do",
        "does",
        "did",
        "had",
        "may",
        "might",
        "must",
        "need",
        "ought",
        "sha",
        "should",
        "wo",
        "would",
    ):
        contraction(verb, "n't")
        contraction(verb, "n't've")
    for verb in ("could", "might", "must", "should", "would"):
        contraction(verb, "'ve")
    for verb in ("ai", "are", "is", "was", "were", "have", "has", "dare"):
        contraction(verb, "n't")
    for h in range(1, 13):
        for period in ("a.m.", "am", "p.m.", "pm"):
            sc[f"{h}{period}"] = (str(h), period)
    for orth, parts in {
        "cannot": ("can", "not"),
        "gonna": ("gon", "na"),
        "gotta": ("got", "ta"),
        "let's": ("let", "'s"),
        "c'mon": ("c'm", "on"),
        "y'all": ("y'", "all"),
        "yall": ("y", "all"),
        "how'd'y": ("how", "'d", "'y"),
        "not've": ("not", "'ve"),
        "notve": ("not", "ve"),
    }.items():
        add(orth, parts)
        if not orth.startswith("y"):
            add(orth.capitalize(), (parts[0].capitalize(), *parts[1:]))
    for orth in _KEEP_WHOLE.split():
        add(orth, (orth,))
    for w in ("doin", "goin", "nothin", "nuthin", "ol", "somethin", "havin", "lovin"):
        for form in (w, w.title()):
            add(form, (form,))
            add(form + "'", (form + "'",))
    for orth in (
        "(\u00ac_\u00ac)",
        "(\u0ca0_\u0ca0)",
        "(\u256f\u00b0\u25a1\u00b0\uff09\u256f\ufe35\u253b\u2501\u253b",
        "\u0ca0_\u0ca0",
        "\u0ca0\ufe35\u0ca0",
        "\u00af\\(\u30c4)/\u00af",
    ):
        sc[orth] = (orth,)
    for unit in "CFKcfk":
        sc[f"\u00b0{unit}."] = ("\u00b0", unit, ".")
    for ch in "abcdefghijklmnopqrstuvwxyzäöü":
        sc[ch + "."] = (ch + ".",)
    # spaCy drops these from the table: they are ordinary words ("ill" is not "i'll").
    for w in ("ill", "its", "hell", "shell", "shed", "were", "well", "whore"):
        for form in (w, w.title()):
            sc.pop(form, None)
    return sc


_EMOTICONS = (
    ":) :( :-) :-( ;) ;-) :P :p :D xD XD xDD XDD <3 </3 <33 <333 =) =( :/ (*_*) (-8 (-: (-; (-_-) "
    "(._.) (: (; (= (>_<) (^_^) (o: )-: ): -_- -__- ._. 0.0 0.o 0_0 0_o 8) 8-) 8-D 8D :'( :') :'-( :'-) "
    ":(( :((( :() :)) :))) "
    ":* :-(( :-((( :-)) :-))) :-* :-/ :-0 :-3 :-> :-D :-O :-P :-X :-] :-o :-p :-x :-| :-} :0 :1 :3 :> :O :X "
    ":] :o :o) :x :| :} ;-D ;D ;_; <.< =/ =3 =D =[ =] =| >.< >.> >:( >:o ><(((*> @_@ O.O O.o O_O O_o V.V V_V "
    '[-: [: [= ]= ^_^ ^__^ ^___^ o.0 o.O o.o o_0 o_O o_o v.v v_v \\")'
)
_KEEP_WHOLE = (
    "'d 'em em 'll ll 'nuff nuff 're 's 'S ‘s ‘S 'bout 'cause 'cos 'coz 'cuz 'Cause 'Cos 'Coz "
    "'Cuz ma'am Ma'am o'clock O'clock lovin' Lovin' and/or w/o a.m. p.m. Adm. Bros. co. Co. Corp. D.C. "
    "Dr. e.g. E.g. E.G. Gen. Gov. i.e. I.e. I.E. Inc. Jr. Ltd. Md. Messrs. Mo. Mont. Mr. Mrs. Ms. "
    "Ph.D. Prof. Rep. Rev. Sen. St. vs. v.s. Mt. Ak. Ala. Apr. Ariz. Ark. Aug. Calif. Colo. Conn. Dec. "
    "Del. Feb. Fla. Ga. Ia. Id. Ill. Ind. Jan. Jul. Jun. Kan. Kans. Ky. La. Mar. Mass. Mich. Minn. Miss. "
    "N.C. N.D. N.H. N.J. N.M. N.Y. Neb. Nebr. Nev. Nov. Oct. Okla. Ore. Pa. Sep. Sept. Tenn. Va. Wash. "
    "Wis. S.C. '' " + _EMOTICONS + " C++"
)


# Hostile input: a chunk longer than this (a base64 blob, 10,000 "!") is cut into runs of word
# characters and single other characters in linear time instead of by the affix loop, whose cost
# grows with the square of the chunk (spaCy's too). Natural text never has such chunks.
MAX_CHUNK = 500
_LONG_CHUNK = re.compile(r"\w+|[^\w\s]")
# A plain chunk (see `SpacyLikeTokenizer._plain`): an optional opening mark; ASCII letters (words
# joined by single hyphens), ASCII digits or word characters of any script (checked to be letters);
# an optional possessive; up to two closing marks.
_MARKS = ",;:!?)\"'\u201d\u2019"  # closing marks: one-character suffixes after anything
_PLAIN = re.compile(
    f"([(\"'\u201c\u2018]?)([A-Za-z]+(?:-[A-Za-z]+)*|[0-9]+|[^\\W\\d_]+)((?:['\u2019][sS])?)([{_MARKS}.]{{0,2}})"
)


class SpacyLikeTokenizer:
    """spaCy 3's English tokenizer algorithm over whitespace chunks, with a bounded chunk cache."""

    def __init__(self, max_cache: int = 200_000) -> None:
        self._prefix, self._suffix, self._infix, self._url, self._url_at, self._dot = _spacy_regexes()
        self._special = _english_special_cases()
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
