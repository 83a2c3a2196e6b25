"""MinHash and LSH banding: text normalization, word shingles, vectorized signatures, band keys.

Owns the per-document maths of near-duplicate detection; the corpus-scale stages (band files,
candidate pairs, clusters) live in `dedup.py`.

- Normalization follows datatrove's `simplify_text` defaults: lowercase, runs of digits (with an
  optional decimal part) -> "0", punctuation and symbols -> space, whitespace collapsed,
  accents stripped (NFD, combining marks removed). ASCII text, and text whose non-ASCII characters
  each normalize to ASCII alone (curly quotes, dashes, accented Latin letters), go through byte
  tables; the same bytes as the general Unicode path, faster.
- Shingles are word n-grams (5 by default, FineWeb). Each word is hashed once with xxh3-64
  (fixed seed 0) and an n-gram's 64-bit hash combines its words' hashes in numpy, so no Python
  string is built per shingle. The combination is stable across processes and machines.
- Signatures: k = bands x rows permutations h_i(x) = ((a_i*x + b_i) mod 2^64) mod (2^61 - 1), the
  family datatrove and datasketch evaluate (Broder 1997; the 2^64 wrap is theirs too). a_i, b_i
  come from `np.random.RandomState(seed)` like datatrove's. The mod (2^61-1) uses the Mersenne
  fold, exact and ~6x faster than numpy's `%`.
- P[min h(A) = min h(B)] = J(A, B) (Broder 1997), so the fraction of agreeing slots estimates J
  with standard error sqrt(J(1-J)/k). LSH: a pair with Jaccard s shares at least one of b bands
  of r rows with probability 1 - (1 - s^r)^b (Leskovec, Rajaraman, Ullman, MMDS ch. 3.4).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable, Sequence

import numpy as np
import xxhash

MERSENNE = (1 << 61) - 1
_P = np.uint64(MERSENNE)
_S61 = np.uint64(61)
_BLOCK = 256  # shingle rows per block: (256, 112) uint64 stays in L2 cache

# Digits in any script, with an optional decimal part, become one "0" (datatrove's NUMBERS_PATTERN).
_NUMBERS = re.compile(r"\d+(?:[.,\u060c\u066b\u2396\u2397\u2398]\d+)?")
_ASCII_NUMBERS = re.compile(rb"0+(?:[.,]0+)?")  # the same spans once every digit is "0"
_DIGITS_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")


class _CharClass:
    """Replace runs of the code points whose Unicode category satisfies `pred`.

    The Basic Multilingual Plane is one compiled class (re matches it with a bitmap, fast). The
    rare astral characters are checked one by one, and only in texts that contain one.
    """

    def __init__(self, pred) -> None:
        self.pred = pred
        self.bmp = re.compile(f"[{self._ranges(pred, 0, 0x10000)}]+")

    @staticmethod
    def _ranges(pred, lo: int, hi: int) -> str:
        out, start, prev = [], None, None
        for cp in range(lo, hi):
            if pred(unicodedata.category(chr(cp))):
                start = cp if start is None else start
                prev = cp
            elif start is not None:
                out.append((start, prev))
                start = None
        if start is not None:
            out.append((start, prev))
        return "".join(re.escape(chr(a)) + ("-" + re.escape(chr(b)) if b > a else "") for a, b in out)

    def sub(self, repl: str, text: str) -> str:
        text = self.bmp.sub(repl, text)
        if max(text, default=" ") <= "\uffff":
            return text
        cat = unicodedata.category
        return "".join(repl if c > "\uffff" and self.pred(cat(c)) else c for c in text)


def _is_punct(cat: str) -> bool:
    return cat[0] == "P" or cat in ("Sm", "Sc", "Sk", "Cc")


def _is_accent(cat: str) -> bool:
    return cat == "Mn"


@functools.cache
def _tables() -> tuple[_CharClass, _CharClass, bytes]:
    """Built on first use (~0.1 s): punctuation/symbol/control class, combining marks, ASCII table.

    Punctuation is every P* category plus math, currency and modifier symbols and control
    characters (datatrove lists these by hand; a category rule also covers scripts it misses).
    """
    punct, accents = _CharClass(_is_punct), _CharClass(_is_accent)
    ascii_table = bytes(ord(" ") if punct.bmp.fullmatch(chr(c)) else c for c in range(256))
    return punct, accents, ascii_table


def normalize(text: str) -> str:
    """Text as MinHash sees it: lowercase, digits -> 0, punctuation -> space, no accents."""
    return b" ".join(word_bytes(text)).decode("utf-8", "surrogatepass")


def word_bytes(text: str) -> list[bytes]:
    """The normalized words of a text as UTF-8 bytes (what gets hashed)."""
    _, _, ascii_table = _tables()
    text = text.lower()
    if not text.isascii():
        # Mostly-English web text: its few non-ASCII characters (curly quotes, dashes, no-break
        # spaces, accented letters) become what normalization would make of them, and the ASCII
        # path below finishes the job with the same result.
        folded = _fold().fold(text)
        if folded is None:
            return _unicode_word_bytes(text)
        text = folded
    # The common case: C-level byte tables instead of Unicode regexes.
    raw = text.encode("ascii")
    if len(raw.translate(None, b"0123456789")) < len(raw):
        # every digit -> "0" first, so the number pattern starts with a literal (a fast scan)
        raw = _ASCII_NUMBERS.sub(b"0", raw.translate(_DIGITS_TO_ZERO))
    return raw.translate(ascii_table).split()


def _unicode_word_bytes(text: str) -> list[bytes]:
    """`word_bytes` of lowercased text by the general Unicode rules (any script)."""
    punct, accents, _ = _tables()
    text = _NUMBERS.sub("0", text)
    text = accents.sub("", unicodedata.normalize("NFD", stream_safe(punct.sub(" ", text))))
    return " ".join(text.split()).encode("utf-8", "surrogatepass").split()


# Unicode's Stream-Safe Text Format (UAX #15, section 13): after 30 non-starters in a row, a
# COMBINING GRAPHEME JOINER. CPython's normalize() puts a run of combining marks in canonical order
# by insertion: a document of 40,000 acute accents then 40,000 grave-below took 36 s (80,000:
# ~150 s; the 8 MiB a record may hold, hours). Text holds at most a few marks per letter; the
# joiner is itself a mark (Mn), removed with the accents, so such text hashes as before.
SAFE_RUN = 30
_CGJ = "\u034f"
# the characters whose decomposition starts with a non-starter but are not one (UAX #15's
# "non-starter decompositions": three Tibetan vowel signs, frozen by the stability policy)
_NONSTARTER_DECOMPOSITIONS = "\u0f73\u0f75\u0f81"


@functools.cache
def _nonstarter_runs() -> re.Pattern:
    comb = unicodedata.combining
    cps = [cp for cp in range(0x110000) if comb(chr(cp))] + [ord(c) for c in _NONSTARTER_DECOMPOSITIONS]
    ranges = []
    for cp in sorted(cps):
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    body = "".join(re.escape(chr(a)) + ("-" + re.escape(chr(b)) if b > a else "") for a, b in ranges)
    return re.compile(f"[{body}]{{{SAFE_RUN + 1},}}")


# Every non-starter (canonical combining class > 0, and the three characters above) is at or
# above U+0300, so a text without SAFE_RUN + 1 such characters in a row has no run to split. This
# scan answers most texts (any whose script puts spaces between words) without the class above,
# whose build walks all 1,114,112 code points (~0.05 s, once per process).
_MAYBE_RUN = re.compile(f"[^\\x00-\\u02ff]{{{SAFE_RUN + 1},}}")


def stream_safe(text: str) -> str:
    """`text` with a joiner after every SAFE_RUN non-starters in a row (unchanged if none is longer),
    so that normalizing it takes time linear in its length."""
    if _MAYBE_RUN.search(text) is None:
        return text

    def split(m: re.Match) -> str:
        run = m.group()
        return _CGJ.join(run[i:i + SAFE_RUN] for i in range(0, len(run), SAFE_RUN))

    return _nonstarter_runs().sub(split, text)


class _Fold:
    """Non-ASCII characters of the BMP that normalization turns into ASCII on their own.

    A punctuation/symbol/control character becomes a space (as the punctuation rule makes it) and
    so does a whitespace character (the final split treats it as one); a letter whose canonical
    decomposition is an ASCII letter plus combining marks becomes that letter (NFD, then marks
    dropped). The number pattern's non-ASCII decimal separators are left out: between digits they
    are part of a number. Any other non-ASCII character sends the text down the general path.

    Each character is classified the first time a text holds it (a page has a few dozen distinct
    non-ASCII characters; classifying the whole BMP up front cost ~0.02-0.04 s per process), in
    the one scan that folds the text. Bounded: at most the 65,536 BMP characters are kept.
    """

    _SEPS = frozenset("\u060c\u066b\u2396\u2397\u2398")

    def __init__(self) -> None:
        self.punct = _tables()[0].bmp
        self.table: dict[str, str | None] = {}  # character seen -> its ASCII, None: does not fold

    def fold(self, text: str) -> str | None:
        """`text` with each non-ASCII character folded, or None when one of them does not fold."""
        try:
            return _NON_ASCII.sub(self._replace, text)
        except _Unfoldable:  # the first such character ends the scan
            return None

    def _replace(self, m: re.Match) -> str:
        c = m.group()
        try:
            rep = self.table[c]
        except KeyError:
            rep = self.classify(c)
            if c <= "\uffff":  # astral characters never fold: not kept, so the table stays bounded
                self.table[c] = rep
        if rep is None:
            raise _Unfoldable
        return rep

    def classify(self, c: str) -> str | None:
        """The ASCII that one non-ASCII character folds to, or None (see the class docstring)."""
        cp = ord(c)
        if cp >= 0x10000 or c in self._SEPS or 0xD800 <= cp < 0xE000:
            return None
        if self.punct.fullmatch(c) or c.isspace():
            return " "
        base = unicodedata.normalize("NFD", c)
        if len(base) > 1 and base[0].isascii() and base[0].isalpha():
            if all(unicodedata.category(m) == "Mn" for m in base[1:]):
                return base[0]
        return None


_NON_ASCII = re.compile(r"[^\x00-\x7f]")


class _Unfoldable(Exception):
    """A character that normalization does not turn into ASCII on its own."""


@functools.cache
def _fold() -> _Fold:
    return _Fold()


def words(text: str) -> list[str]:
    """The normalized words of a text (see `normalize`)."""
    return [w.decode("utf-8", "surrogatepass") for w in word_bytes(text) if w]


def shingles(text: str, n: int = 5) -> set[str]:
    """The set of word n-grams of the normalized text (empty when it has fewer than n words)."""
    ws = words(text)
    return {" ".join(ws[i : i + n]) for i in range(len(ws) - n + 1)}


def jaccard(a: set, b: set) -> float:
    """|A n B| / |A u B| (1.0 for two empty sets)."""
    union = len(a | b)
    return len(a & b) / union if union else 1.0


# --------------------------------------------------------------------------- hashing

_K1 = np.uint64(0x9E3779B97F4A7C15)  # golden-ratio odd constant
_M1 = np.uint64(0xBF58476D1CE4E5B9)  # splitmix64 finalizer constants (Steele et al. 2014)
_M2 = np.uint64(0x94D049BB133111EB)


def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: spreads every input bit over the output (in place)."""
    h ^= h >> np.uint64(30)
    h *= _M1
    h ^= h >> np.uint64(27)
    h *= _M2
    h ^= h >> np.uint64(31)
    return h


def word_hashes(ws: Sequence[bytes] | Sequence[str]) -> np.ndarray:
    """xxh3-64 (seed 0) of each word's UTF-8 bytes."""
    if ws and isinstance(ws[0], str):
        ws = [w.encode("utf-8", "surrogatepass") for w in ws]
    return np.fromiter(map(xxhash.xxh3_64_intdigest, ws), np.uint64, len(ws))


def ngram_hashes(wh: np.ndarray, n: int) -> np.ndarray:
    """64-bit hash of each word n-gram from its words' hashes (order-sensitive)."""
    m = len(wh) - n + 1
    if m <= 0:
        return np.empty(0, np.uint64)
    acc = wh[:m].copy()
    with np.errstate(over="ignore"):
        for j in range(1, n):
            acc *= _K1
            acc ^= wh[j : j + m]
        return _mix(acc)


def ngram_hashes_many(whs: Sequence[np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
    """`ngram_hashes` of many documents at once: (the concatenation, the count per document).

    The n-grams are hashed over the concatenated word hashes in one pass and those that straddle two
    documents are dropped, so numpy's per-call cost is paid once per batch rather than per document.
    """
    lens = np.fromiter(map(len, whs), np.int64, len(whs))
    counts = np.maximum(lens - n + 1, 0)
    total = int(counts.sum())
    if total == 0:
        return np.empty(0, np.uint64), counts
    grams = ngram_hashes(np.concatenate(whs), n)
    # n-gram j of document d starts at word starts[d] + j, for j < counts[d]
    starts = np.cumsum(lens) - lens
    first = np.cumsum(counts) - counts
    take = np.repeat(starts - first, counts) + np.arange(total)
    return grams[take], counts


def shingle_hashes(text: str, n: int = 5) -> np.ndarray:
    """Hashes of the word n-grams of `text` (empty when it has fewer than n words)."""
    return ngram_hashes(word_hashes(word_bytes(text)), n)


class MinHasher:
    """k = bands x rows permutations of 64-bit shingle hashes; signatures and LSH band keys."""

    def __init__(self, bands: int = 14, rows: int = 8, seed: int = 1):
        self.bands, self.rows, self.seed = bands, rows, seed
        self.k = bands * rows
        gen = np.random.RandomState(seed)
        self.a = gen.randint(1, MERSENNE, self.k, dtype=np.uint64)
        self.b = gen.randint(0, MERSENNE, self.k, dtype=np.uint64)
        self._buf: tuple[np.ndarray, np.ndarray] | None = None

    def _permute(self, x: np.ndarray) -> np.ndarray:
        """(m,) -> (m, k) ((a*x + b) mod 2^64) mod p, via the Mersenne fold, in reused buffers.

        The buffers matter: a fresh (256, 112) uint64 array is above malloc's mmap threshold, and
        the page faults of allocating one per block cost ~5x the arithmetic.
        """
        m = len(x)
        if self._buf is None:
            self._buf = (np.empty((_BLOCK, self.k), np.uint64), np.empty((_BLOCK, self.k), np.uint64))
        y = np.multiply(x[:, None], self.a, out=self._buf[0][:m])  # wraps mod 2^64 like datatrove
        y += self.b
        r = np.bitwise_and(y, _P, out=self._buf[1][:m])
        y >>= _S61
        r += y  # y mod p == (y & p) + (y >> 61), minus p once if that reaches p
        # r >= p needs the low 61 bits of y within 7 of all ones (odds ~2^-58 per value): one read
        # to rule it out is cheaper than subtracting and taking a minimum over every value.
        if r.max() >= _P:
            np.subtract(r, _P, out=y)  # wraps to a huge value when r < p ...
            np.minimum(r, y, out=r)  # ... so the minimum is the reduced value
        return r

    def signature(self, hashes: np.ndarray) -> np.ndarray:
        """(k,) uint64 signature of one document's shingle hashes (all p when there are none)."""
        if hashes.size == 0:
            return np.full(self.k, MERSENNE, np.uint64)
        return self.signatures([hashes])[0]

    def signatures(self, docs: Sequence[np.ndarray]) -> np.ndarray:
        """(len(docs), k) signatures; every document must have at least one shingle hash."""
        sizes = np.fromiter((len(d) for d in docs), np.int64, len(docs))
        if len(docs) == 0:
            return np.empty((0, self.k), np.uint64)
        return self.signatures_concat(np.concatenate(docs), sizes)

    def signatures_concat(self, x: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        """`signatures` of documents given as one concatenated array and each one's count."""
        if len(sizes) == 0:
            return np.empty((0, self.k), np.uint64)
        if (sizes == 0).any():
            raise ValueError("signatures(): a document without shingles has no MinHash signature")
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        # Cut the concatenation at every document start and every block start; reduce each piece,
        # then reduce the pieces of each document (pieces of one document are contiguous).
        cuts = np.union1d(starts, np.arange(0, len(x), _BLOCK))
        # cuts[bounds[i]:bounds[i + 1]] are the cuts inside block i (one search, not a mask per block)
        bounds = np.searchsorted(cuts, np.arange(0, len(x) + _BLOCK, _BLOCK))
        pieces = []
        with np.errstate(over="ignore"):
            for i, s in enumerate(range(0, len(x), _BLOCK)):
                local = cuts[bounds[i] : bounds[i + 1]] - s
                pieces.append(np.minimum.reduceat(self._permute(x[s : s + _BLOCK]), local, axis=0))
        mins = np.concatenate(pieces)
        first_piece = np.searchsorted(cuts, starts)
        return np.minimum.reduceat(mins, first_piece, axis=0)

    def band_keys(self, sigs: np.ndarray) -> np.ndarray:
        """(n, k) signatures -> (n, bands) uint64 keys, one hash of each band's r values."""
        n = sigs.shape[0]
        grouped = sigs.reshape(n, self.bands, self.rows)
        with np.errstate(over="ignore"):
            acc = np.zeros((n, self.bands), np.uint64)
            for j in range(self.rows):
                acc *= _K1
                acc ^= grouped[:, :, j]
                acc = _mix(acc)
        return acc


def estimate_jaccard(sig_a: np.ndarray, sig_b: np.ndarray) -> float:
    """The fraction of signature slots where the two minima agree."""
    return float(np.mean(sig_a == sig_b))


def candidate_probability(s: float | np.ndarray, bands: int, rows: int) -> float | np.ndarray:
    """P(a pair of Jaccard s shares at least one band) = 1 - (1 - s^r)^b (MMDS 3.4)."""
    return 1 - (1 - np.asarray(s, dtype=float) ** rows) ** bands


def threshold(bands: int, rows: int) -> float:
    """(1/b)^(1/r): where the S-curve is about steepest (MMDS 3.4.3)."""
    return (1 / bands) ** (1 / rows)


def s_curve_table(bands: int, rows: int, points: Iterable[float] | None = None) -> list[tuple[float, float]]:
    """(s, P(candidate)) rows for printing the S-curve."""
    default = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0]
    pts = points if points is not None else default
    return [(float(s), float(candidate_probability(s, bands, rows))) for s in pts]
