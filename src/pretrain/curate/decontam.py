"""Benchmark decontamination: an index of evaluation-set word n-grams and the `decontaminate` step.

Rule (GPT-3, Brown et al., 2020, appendix C; the 13-gram test used since by most labs): a training
document is contaminated by an evaluation item when they share a word n-gram, n = 13 by default.
Words are lowercased runs of letters and digits; punctuation and underscores separate words and
are otherwise dropped, so "Janet’s ducks" and "janet's ducks!" give the same words.

An item is its text fields joined (question, choices, answer, ...) and indexed by its n-grams.
Short items: an item with fewer than n words (but at least `min_words`, default 8: GPT-3's lower
bound for its variable n) is indexed as one gram of its own length, and documents are also
scanned at those lengths, so a whole short item is still found. The same holds for the item's
lead field (its question, prompt or context): when it is shorter than n words it is also indexed
whole, so a short question copied without its choices is found. Items under `min_words` words are
not indexed (too generic to tell a leak from a common phrase) and are counted as `too_short`.

Index: every n-gram is hashed to 64 bits (xxhash3 of each word, combined as a polynomial in
2^64 arithmetic, length-salted and finalized with the splitmix64 mixer), and the hashes live in one
sorted numpy array beside the item each came from: 8 + 4 bytes per n-gram, binary search per
lookup. With ~3M n-grams, a false match has probability ~3e6 / 2^64 per document n-gram.

Benchmarks are JSONL files (.jsonl, .jsonl.gz, .jsonl.zst) or folders of them, optionally with a
field path: `file.jsonl:question` or `file.jsonl:meta.prompt,answer`. Without one, the usual
text fields of evaluation sets are used (see TEXT_FIELDS), joined in that order.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import xxhash
import zstandard

from pretrain.config import bounded, choice
from pretrain.curate.document import Document
from pretrain.curate.step import Filter
from pretrain.errors import UserError, not_found

REASON = "benchmark_overlap"
MODES = ("remove", "tag")
MAX_N = 1000  # words per n-gram: no benchmark item shares 1,000 words with a page by chance
# Fields that hold an item's text in common evaluation sets (MMLU, GSM8K, HumanEval, the
# llm-foundry/lm-eval formats), joined in this order. Answer choices and answers are part of the
# item: a page with the question followed by its answer is the leak that matters most.
TEXT_FIELDS = ("question", "query", "context", "passage", "prompt", "context_options", "continuation",
               "choices", "canonical_solution", "answer", "text", "goal", "sentence")
LABEL_FIELDS = ("task_id", "id", "idx")
SUFFIXES = (".jsonl", ".jsonl.gz", ".jsonl.zst")
MAX_BENCHMARK_BYTES = 1024**3  # decompressed bytes read from one benchmark file at most
MAX_LINE_BYTES = 16 * 1024**2

_WORD = re.compile(r"[^\W_]+")
_P = np.uint64(0x100000001B3)  # odd multiplier of the polynomial (FNV prime): invertible mod 2^64


MAX_GRAMS = 20_000_000  # decontam.max_grams's default: ~10x ../shared/data/benchmarks, ~1.5 GB at most


@dataclass
class DecontamConfig:
    """`decontaminate` step: off unless `benchmarks` names evaluation files (or folders of them)."""

    enabled: bool = True
    benchmarks: tuple[str, ...] = ()
    # words per n-gram: GPT-3's 13 (Brown et al. 2020, C.1); PaLM used 8, published ones 8 to 50.
    n: int = bounded(13, lo=1, hi=MAX_N, why="words per n-gram; published ones are 8 to 50")
    # "remove": drop contaminated documents; "tag": keep them, mark metadata
    mode: str = choice("remove", MODES)
    # an item shorter than n is matched whole when it has this many words (GPT-3: 8); above n,
    # items of n..min_words-1 words would never be indexed
    min_words: int = bounded(8, lo=1, hi=MAX_N, why="words of the shortest item matched; at most n")
    # n-grams indexed from all benchmarks together, at most: ~75 bytes each while the index is built
    # (a 293 KB .gz of one item repeated, 64 MiB, made 8.8 M: 661 MB; a folder may hold any number
    # of 1 GiB files). ../shared/data/benchmarks, all of it: 2.05 M. 0 = no bound.
    max_grams: int = bounded(MAX_GRAMS, why="n-grams indexed, all benchmarks (0 = no bound)")

    def __post_init__(self) -> None:
        if self.min_words > self.n:
            raise UserError(f"decontam.min_words={self.min_words} is above decontam.n={self.n}: "
                            "want 1 <= min_words <= n")


# ----------------------------------------------------------------------------- hashing


def words(text: str) -> list[str]:
    """Lowercased words with punctuation stripped."""
    return _WORD.findall(text.lower())


_word_cache: dict[str, int] = {}


def word_hashes(ws: list[str]) -> np.ndarray:
    """xxhash3-64 of each word (cached: a corpus repeats the same words)."""
    cache = _word_cache
    try:
        return np.fromiter(map(cache.__getitem__, ws), dtype=np.uint64, count=len(ws))
    except KeyError:
        if len(cache) > 2_000_000:
            cache.clear()
        for w in ws:
            if w not in cache:
                cache[w] = xxhash.xxh3_64_intdigest(w.encode("utf-8", "surrogatepass"))
        return np.fromiter(map(cache.__getitem__, ws), dtype=np.uint64, count=len(ws))


def _finalize(h: np.ndarray, length: int) -> np.ndarray:
    """splitmix64's finalizer over the length-salted polynomial, so grams of different lengths differ."""
    h = h ^ np.uint64((length * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF)
    h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


def gram_hashes(wh: np.ndarray, lengths: list[int]) -> dict[int, np.ndarray]:
    """Hashes of every window of each length in `lengths` (ascending), built up one word at a time.

    After step k, acc[i] = sum_{j<k} wh[i+j] * P^(k-1-j) mod 2^64: the polynomial of the window of
    length k starting at word i. One pass serves every length.
    """
    out: dict[int, np.ndarray] = {}
    acc = wh.copy()
    wanted = set(lengths)
    with np.errstate(over="ignore"):
        for k in range(1, max(lengths) + 1):
            if k > len(wh):
                break
            if k > 1:
                acc = acc[:-1] * _P + wh[k - 1:]
            if k in wanted:
                out[k] = _finalize(acc, k)
    return out


# ----------------------------------------------------------------------------- benchmarks


@dataclass
class Benchmark:
    name: str
    items: list[str] = field(default_factory=list)  # item labels (e.g. "HumanEval/0", "line 17")
    too_short: int = 0
    bad_records: int = 0


def parse_spec(spec: str) -> tuple[Path, tuple[str, ...]]:
    """`path` or `path:field.path[,field.path]` -> (path, fields); fields empty means TEXT_FIELDS."""
    if re.match(r"[a-z][a-z0-9+.-]*://", spec):  # the colon after the scheme is no field list
        raise UserError(f"--benchmarks {spec}: benchmarks are read from local files (every worker "
                        "builds the index from them); copy it to a local folder and name that")
    if Path(spec).exists() or ":" not in spec:
        path, fields = Path(spec), ()
    else:
        head, tail = spec.rsplit(":", 1)
        path, fields = Path(head), tuple(f.strip() for f in tail.split(",") if f.strip())
    if not path.exists():
        raise not_found("benchmark", path)
    return path, fields


# File names that say which split, not which benchmark (gsm8k/test.jsonl is GSM8K's test split).
SPLIT_NAMES = {"test", "train", "dev", "val", "valid", "validation", "eval", "data", "all"}


def benchmark_files(path: Path) -> list[tuple[str, Path]]:
    """(name, file) for a file, or for every JSONL file under a folder (name = relative path).

    A file named only by its split takes its folder's name too: gsm8k/test.jsonl is "gsm8k/test"."""
    if path.is_file():
        return [(_named(_strip_suffix(path.name), path), path)]
    from pretrain.curate.inputs import walk_folder

    found = walk_folder(path, SUFFIXES)  # the corpus folders' rule: hidden names and links out skipped
    if not found:
        raise UserError(f"no benchmark files ({', '.join(SUFFIXES)}) under {path}")
    return [(_named(_strip_suffix(f.relative_to(path).as_posix()), f), f) for f in found]


def _named(name: str, file: Path) -> str:
    if "/" in name or name.lower() not in SPLIT_NAMES:
        return name
    return f"{file.resolve().parent.name}/{name}"


def _strip_suffix(name: str) -> str:
    for s in sorted(SUFFIXES, key=len, reverse=True):
        if name.lower().endswith(s):
            return name[: -len(s)]
    return name


def _open(path: Path):
    raw = open(path, "rb")
    name = path.name.lower()
    if name.endswith(".gz"):
        return gzip.GzipFile(fileobj=raw)
    if name.endswith(".zst"):
        return zstandard.ZstdDecompressor().stream_reader(raw, closefd=True)
    return raw


def read_records(path: Path, bench: Benchmark) -> Iterator[tuple[int, dict]]:
    """(line number, object) of a JSONL file; bad lines counted in `bench.bad_records`.

    Reading is bounded: a line longer than MAX_LINE_BYTES is skipped without being held whole, and
    a file that decompresses past MAX_BENCHMARK_BYTES is refused.
    """
    try:
        with _open(path) as f:
            yield from _records(path, f, bench)
    except (OSError, EOFError, zstandard.ZstdError) as e:
        raise UserError(f"{path}: cannot read benchmark file: {e}") from e


def _records(path: Path, f, bench: Benchmark) -> Iterator[tuple[int, dict]]:
    total, lineno = 0, 0
    while line := f.readline(MAX_LINE_BYTES + 1):
        lineno += 1
        total += len(line)
        if total > MAX_BENCHMARK_BYTES:
            raise UserError(f"{path}: over {MAX_BENCHMARK_BYTES} bytes decompressed; not a benchmark")
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):  # oversized: skip the rest of it
            while True:
                rest = f.readline(MAX_LINE_BYTES)
                total += len(rest)
                if not rest or rest.endswith(b"\n"):
                    break
            bench.bad_records += 1
            continue
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nested 100k deep
            bench.bad_records += 1
            continue
        if isinstance(obj, dict):
            yield lineno, obj
        else:
            bench.bad_records += 1


def _field(obj: dict, key: str) -> Any:
    """The value at a dotted path of one item, None where it has none."""
    value: Any = obj
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _check_fields(file: Path, fields: tuple[str, ...], seen: set[str], keys: set[str]) -> None:
    """Refuse a benchmark file none of whose records has a field named (`FILE:field`), or, unnamed,
    any of TEXT_FIELDS: its items were all "too short", and a leak of it could never be found
    (`gsm8k/test.jsonl:question,nofield` indexed the questions alone, without a word)."""
    missing = [k for k in fields if k not in seen]
    if not missing and (fields or seen or not keys):
        return
    have = f"its records' fields: {', '.join(sorted(keys)[:20]) or 'none'}"
    if missing:
        raise UserError(f"{file}: no record has the field {', '.join(map(repr, missing))} named in "
                        f"--benchmarks ({have})")
    raise UserError(f"{file}: no record has a field read by default ({', '.join(TEXT_FIELDS)}); {have}: "
                    f"name the text's, as --benchmarks {file}:FIELD[,FIELD]")


def item_fields(obj: dict, fields: tuple[str, ...]) -> list[list[str]]:
    """The strings of each present field of one item: the named fields (dotted paths), else TEXT_FIELDS."""
    groups: list[list[str]] = []
    for key in fields or TEXT_FIELDS:
        value = _field(obj, key)
        parts: list[str] = []
        _flatten(value, parts)
        if parts:
            groups.append(parts)
    return groups


def item_text(obj: dict, fields: tuple[str, ...]) -> str:
    """The whole text of one item, its fields joined in order."""
    return "\n".join(s for group in item_fields(obj, fields) for s in group)


def _flatten(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, list):
        for v in value:
            _flatten(v, out)


# ----------------------------------------------------------------------------- the index


class NgramIndex:
    """Sorted 64-bit n-gram hashes of evaluation items, each with the (benchmark, item) it came from."""

    def __init__(self, specs: tuple[str, ...] | list[str], n: int = 13, min_words: int = 8,
                 max_grams: int = MAX_GRAMS):
        if n < 1 or not 1 <= min_words <= n:
            raise UserError(f"decontam: want 1 <= min_words <= n, got n={n}, min_words={min_words}")
        self.n, self.min_words, self.max_grams, self.n_grams = n, min_words, max_grams, 0
        self.benchmarks: list[Benchmark] = []
        self.item_owner: list[tuple[int, int]] = []  # global item -> (benchmark index, item index)
        self._lengths: set[int] = set()
        hashes: list[np.ndarray] = []
        owners: list[np.ndarray] = []
        for spec in specs:
            path, fields = parse_spec(spec)
            for name, file in benchmark_files(path):
                self._add_file(name, file, fields, hashes, owners)
        if not hashes:
            raise UserError(f"decontam: no benchmark item of {min_words}+ words in {', '.join(specs)}")
        h, o = np.concatenate(hashes), np.concatenate(owners)
        order = np.argsort(h, kind="stable")
        self.hashes, self.owners = h[order], o[order]
        # A prefilter on the top bits: most document grams miss the index, and a table lookup
        # rejects them without a binary search (~16 table slots per indexed gram: ~6% pass).
        self.bits = int(min(26, max(16, np.ceil(np.log2(16 * len(h))))))
        self.shift = np.uint64(64 - self.bits)
        self.table = np.zeros(1 << self.bits, dtype=bool)
        self.table[self.hashes >> self.shift] = True
        self.lengths = sorted(self._lengths)

    def _add_file(self, name: str, file: Path, fields: tuple[str, ...], hashes: list, owners: list) -> None:
        bench = Benchmark(name)
        b = len(self.benchmarks)
        self.benchmarks.append(bench)
        seen: set[str] = set()  # the fields read that some record has
        keys: set[str] = set()  # the records' own top-level fields, for the error
        for lineno, obj in read_records(file, bench):
            if len(seen) < len(fields) or not seen:  # until every field named, or one unnamed, is met
                seen.update(k for k in fields or TEXT_FIELDS if k not in seen and _field(obj, k) is not None)
                keys.update(list(obj)[:50])
            grams = self._item_grams(item_fields(obj, fields))
            if grams is None:
                bench.too_short += 1
                continue
            label = next((str(obj[k]) for k in LABEL_FIELDS if k in obj), f"line {lineno}")
            self.n_grams += len(grams)
            if self.max_grams and self.n_grams > self.max_grams:
                raise UserError(f"{file}: line {lineno}: the benchmarks hold more than decontam.max_grams="
                                f"{self.max_grams:,} n-grams (~75 bytes each while indexed; every benchmark "
                                "of ../shared/data together: 2.05 M); raise it, or 0 for no bound")
            hashes.append(grams)
            owners.append(np.full(len(grams), len(self.item_owner), dtype=np.int32))
            self.item_owner.append((b, len(bench.items)))
            bench.items.append(label)
        _check_fields(file, fields, seen, keys)

    def _item_grams(self, groups: list[list[str]]) -> np.ndarray | None:
        """Distinct gram hashes of one item, or None when it has fewer than `min_words` words.

        The n-grams of the whole item (fields joined, so a page with a question and its answer
        matches across them), plus its lead field (the question, prompt or context) whole when that
        is shorter than n words: a short question copied without its choices is still found.
        """
        ws = words("\n".join(s for group in groups for s in group))
        if len(ws) < self.min_words:
            return None
        segments = [ws] + [w for w in map(words, groups[0]) if self.min_words <= len(w) < self.n]
        out = []
        for seg in segments:
            length = min(len(seg), self.n)
            self._lengths.add(length)
            out.append(gram_hashes(word_hashes(seg), [length])[length])
        return np.unique(np.concatenate(out))

    def __len__(self) -> int:
        return len(self.hashes)

    def lookup(self, text: str) -> Counter[int]:
        """Global item index -> number of the text's distinct grams it shares with that item."""
        ws = words(text)
        if len(ws) < self.lengths[0]:
            return Counter()
        grams = gram_hashes(word_hashes(ws), self.lengths).values()
        gh = np.concatenate(list(grams))
        gh = np.sort(gh[self.table[gh >> self.shift]])  # sorted keys make the search cache-friendly
        pos = np.searchsorted(self.hashes, gh)
        pos[pos == len(self.hashes)] = 0
        hit = np.unique(gh[self.hashes[pos] == gh])
        found: Counter[int] = Counter()
        if len(hit):  # rare: a clean document has none
            los = np.searchsorted(self.hashes, hit, side="left")
            his = np.searchsorted(self.hashes, hit, side="right")
            for lo, hi in zip(los.tolist(), his.tolist()):
                found.update(self.owners[lo:hi].tolist())
        return found

    def describe(self, item: int) -> tuple[str, str]:
        b, i = self.item_owner[item]
        return self.benchmarks[b].name, self.benchmarks[b].items[i]


def load_index(specs: tuple[str, ...], n: int = 13, min_words: int = 8,
               max_grams: int = MAX_GRAMS) -> NgramIndex:
    """One index per process for a given config and given file contents (the belt builds its steps
    once per shard): a benchmark file edited since is read again, not served from the cache."""
    specs = tuple(specs)
    stamp = tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns)
                  for spec in specs for _, f in benchmark_files(parse_spec(spec)[0]))
    return _cached_index(specs, n, min_words, max_grams, stamp)


@lru_cache(maxsize=2)
def _cached_index(specs: tuple[str, ...], n: int, min_words: int, max_grams: int, stamp: tuple) -> NgramIndex:
    return NgramIndex(specs, n, min_words, max_grams)


# ----------------------------------------------------------------------------- the step


class DecontamStep(Filter):
    """Finds documents sharing an n-gram with an evaluation item; removes or tags them.

    Writes metadata["contamination"] = [{"benchmark", "item", "ngrams"}] on contaminated
    documents and keeps every leak in `self.leaks` for the report.
    """

    name = "decontaminate"

    def __init__(self, index: NgramIndex, mode: str = "remove"):
        super().__init__()
        if mode not in MODES:
            raise UserError(f"decontam.mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.index, self.mode = index, mode
        self.leaks: list[dict] = []

    def keep(self, doc: Document) -> bool | str:
        found = self.index.lookup(doc.text)
        if not found:
            return True
        hits = []
        for item, count in sorted(found.items()):
            bench, label = self.index.describe(item)
            hits.append({"benchmark": bench, "item": label, "ngrams": count})
            self.leaks.append({"benchmark": bench, "item": label, "doc": doc.id, "ngrams": count})
        doc.metadata["contamination"] = hits
        self.stats["contaminated"] += 1
        return REASON if self.mode == "remove" else True

    def report(self) -> dict:
        return build_report(self.index, self.leaks, self.stats)


def build_report(index: NgramIndex, leaks: list[dict], stats: Counter | None = None) -> dict:
    """Per benchmark: items indexed/too short/bad, and which items leaked into which documents."""
    by_bench: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for leak in leaks:
        by_bench[leak["benchmark"]][leak["item"]].append(leak["doc"])
    benches = {}
    for b in index.benchmarks:
        leaked = by_bench.get(b.name, {})
        benches[b.name] = {
            "items_indexed": len(b.items),
            "too_short": b.too_short,
            "bad_records": b.bad_records,
            "items_leaked": len(leaked),
            "leaks": {item: sorted(set(docs)) for item, docs in sorted(leaked.items())},
        }
    stats = stats or Counter()
    return {
        "n": index.n,
        "min_words": index.min_words,
        "ngrams_indexed": len(index),
        "documents": {"in": stats.get("in", 0), "contaminated": stats.get("contaminated", 0)},
        "benchmarks": benches,
    }


def build_decontam_step(cfg: DecontamConfig) -> DecontamStep | None:
    """The `decontaminate` step, or None when disabled or no benchmark is named."""
    if not cfg.enabled or not cfg.benchmarks:
        return None
    return DecontamStep(load_index(tuple(cfg.benchmarks), cfg.n, cfg.min_words, cfg.max_grams), cfg.mode)
