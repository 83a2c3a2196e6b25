"""spaCy 3's English tokenizer rules, written from its documented English defaults (no spaCy at run
time): the letter and symbol classes built from the Unicode database, the prefix / suffix / infix
patterns and the URL match (`spacy_regexes`), and the table of special cases, such as contractions,
abbreviations and emoticons (`english_special_cases`). The algorithm that applies them is
`curate.words.SpacyLikeTokenizer`.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

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
    lower, upper = [], []
    for lo, hi in _CASED_BLOCKS:
        for cp in range(lo, hi + 1):
            cat = unicodedata.category(chr(cp))
            if cat == "Ll":
                lower.append(cp)
            elif cat == "Lu":
                upper.append(cp)
    icons = list(_icon_points())
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


@lru_cache(maxsize=1)
def _icon_points() -> tuple[int, ...]:
    """spaCy's icons: the other symbols (So) from U+00A0 to U+1FFFF."""
    return tuple(cp for cp in range(0xA0, 0x20000) if unicodedata.category(chr(cp)) == "So")


def _ranges(cps: list[int]) -> str:
    out, i = [], 0
    while i < len(cps):
        j = i
        while j + 1 < len(cps) and cps[j + 1] == cps[j] + 1:
            j += 1
        out.append(re.escape(chr(cps[i])) + ("-" + re.escape(chr(cps[j])) if j > i else ""))
        i = j + 1
    return "".join(out)


# --- spaCy's English affix rules ---------------------------------------------------------------

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
def spacy_regexes() -> tuple[re.Pattern, ...]:
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


@lru_cache(maxsize=1)
def suffix_final_chars() -> frozenset[str]:
    """Every character a match of the suffix pattern can end on, from the lists it is built of:
    a chunk whose last character is not one of them has no suffix (one set look-up instead of the
    pattern's search, 3 us). "\\n" is in too, since "$" also matches before a final newline."""
    items = [*_PUNCT, "..", "…", *_QUOTES, "'s", "'S", "’s", "’S", "—", "–", "+", ".", *_CURRENCY, *_UNITS]
    return frozenset([x[-1] for x in items] + ["\n", *map(chr, _icon_points())])



@lru_cache(maxsize=1)
def infix_chars() -> frozenset[str]:
    """Every character a match of the infix pattern can consume (each rule consumes a dot run, an
    ellipsis, a symbol, a sign between digits, a dot, a comma, a hyphen or one of ":<>=/"): where a
    chunk holds none of them, it has no infix."""
    return frozenset([".", "…", "+", "-", "*", "^", ",", *"".join(_HYPHENS), *":<>=/",
                      *map(chr, _icon_points())])


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


def english_special_cases() -> dict[str, tuple[str, ...]]:
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
