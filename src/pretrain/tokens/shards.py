"""The token shard format: flat memory-mappable `.bin` + `.idx` of document offsets + `manifest.json`.

A token directory `TOKENS/` holds, per unit of work (one input file):

- `shard_NNNNN.bin`: the token ids of every document, each followed by the end-of-text id, back to
  back, raw little-endian `uint16` (vocabulary <= 65,536) or `uint32`. `np.memmap` reads it.
- `shard_NNNNN.idx`: an `.npy` file (`np.load` reads it) holding `documents + 1` little-endian
  `uint64` offsets into the `.bin`, in tokens: document i is `bin[idx[i]:idx[i+1]]`, its
  end-of-text token included, `idx[0] == 0` and `idx[-1]` is the shard's token count.
- `manifest.json`: format name and version, dtype, the tokenizer's fingerprint, end-of-text id,
  per-shard and per-source token and document counts, and the inputs the shards came from.

`TokenDir` opens a directory, checks every shard against its manifest (sizes, offsets) before any
training step can read garbage, and serves contiguous token windows across shard boundaries. A
shard is mapped when it is read, and at most `KEEP_MAPPED` files are mapped at a time in a process,
over every open directory: a mapping holds a file descriptor, and a directory of thousands of shards
(or a manifest naming one shard 100,000 times, or a mixture of many directories) ran out of them.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pretrain.curate.io import atomic_path, write_json_atomic
from pretrain.errors import DataError, UserError
from pretrain.untrusted import BadFile, load_json

FORMAT = "pretrain-tokens"
VERSION = 1
MANIFEST = "manifest.json"
# A manifest is ~150 bytes a shard: 64 MiB is ~400,000 shards, the most a token directory may list.
MAX_MANIFEST_BYTES = 64 * 2**20
# Shard files (.bin or .idx) kept mapped at once in a process, all token directories together.
# np.memmap keeps a file descriptor per mapping: mapping every shard on open stopped `tokens
# inspect`, `train` and `eval` at ~500 shards under the usual `ulimit -n` of 1,024 ("Too many open
# files"), and the kernel's 65,530 mappings cap the rest. Mapping a file again costs ~30 us.
KEEP_MAPPED = 128


def dtype_for_vocab(vocab_size: int) -> np.dtype:
    """The smallest unsigned dtype that holds every id of a vocabulary (uint16 up to 65,536 ids)."""
    return np.dtype("<u2") if vocab_size <= 2**16 else np.dtype("<u4")


def shard_name(i: int) -> str:
    return f"shard_{i:05d}"


def write_shard(
    out_dir: Path, name: str, docs: Iterable[np.ndarray], dtype: np.dtype, eot: int
) -> tuple[int, int]:
    """Stream token arrays (one per document) into `name.bin` + `name.idx`, atomically.

    Appends `eot` after each document. Returns (tokens, documents). The `.idx` is written last, so a
    killed writer leaves no `.idx` newer than its `.bin`; the caller's done marker comes after both.
    """
    offsets = [0]
    eot_arr = np.array([eot], dtype=dtype)
    with atomic_path(out_dir / f"{name}.bin") as tmp, open(tmp, "wb") as f:
        for ids in docs:
            arr = np.asarray(ids)
            if arr.size and int(arr.max()) > np.iinfo(dtype).max:
                raise UserError(f"token id {int(arr.max())} does not fit {dtype.name}")
            f.write(arr.astype(dtype, copy=False).tobytes())
            f.write(eot_arr.tobytes())
            offsets.append(offsets[-1] + arr.size + 1)
    with atomic_path(out_dir / f"{name}.idx") as tmp, open(tmp, "wb") as f:
        np.save(f, np.asarray(offsets, dtype="<u8"), allow_pickle=False)
    return offsets[-1], len(offsets) - 1


def write_manifest(out_dir: Path, manifest: dict[str, Any]) -> None:
    write_json_atomic(out_dir / MANIFEST, {"format": FORMAT, "version": VERSION, **manifest})


def read_manifest(directory: str | Path) -> dict[str, Any]:
    _not_a_url(directory)
    path = Path(directory) / MANIFEST
    if not Path(directory).exists():  # a typo, not a format question (or another tool's files)
        from pretrain.tokens.imports import other_tool

        if other := other_tool(directory):  # a Megatron prefix names no file of its own
            raise UserError(f"{directory}: {other}")
        raise UserError(f"{directory}: not found (a token directory: `pretrain tokenize` or "
                        "`pretrain tokens import-*` output)")
    if not path.is_file():
        raise UserError(f"{directory}: no {MANIFEST}: {_not_tokens(Path(directory))}")
    try:  # a regular file of bounded size, any nesting depth one line (pretrain/untrusted.py)
        man = load_json(path, MAX_MANIFEST_BYTES, what="manifest JSON")
    except BadFile as e:
        raise DataError(str(path), "manifest", str(e).removeprefix(f"{path}: ")) from None
    if not isinstance(man, dict):
        raise DataError(str(path), "manifest", f"expected a JSON object, found {type(man).__name__}")
    if man.get("format") != FORMAT:
        raise DataError(str(path), "format", f"expected {FORMAT!r}, found {man.get('format')!r}")
    if man.get("version") != VERSION:
        raise DataError(str(path), "version", f"format version {man.get('version')} (this reads {VERSION})")
    _check_fields(man, str(path))
    return man


def _not_a_url(directory: str | Path) -> None:
    """Shards are memory-mapped from local disk: a URL is refused as one (Path() made
    `s3://b/tokens` "s3:/b/tokens: not found"), naming the local copy `pretrain tokenize -o URL`
    keeps in its default staging folder when there is one."""
    url = str(directory)
    if "://" not in url:
        return
    from pretrain.curate.job import default_work_dir

    staged = default_work_dir(url) / "tokens"
    kept = f"; `pretrain tokenize -o {url}` kept a local copy: {staged}" if (staged / MANIFEST).is_file() \
        else ""
    raise UserError(f"{url}: a URL; token directories are read (memory-mapped) from local disk: copy it to "
                    f"a local folder first{kept}")


def _not_tokens(d: Path) -> str:
    """What a folder without a manifest is instead, and the command that makes tokens of it: a
    corpus job's OUT or its data/ read as tokens said only "is this a directory written by
    `pretrain tokenize`?" (the first 1,000 entries looked at: a folder may be huge)."""
    import itertools

    from pretrain.tokens.imports import other_tool

    made = "a token directory is what `pretrain tokenize` or `pretrain tokens import-*` writes"
    if other := other_tool(d):  # a Megatron or datatrove output: its import, not "rerun its command"
        return other
    if not d.is_dir():
        return f"a file, not a folder ({made})"
    try:
        names = [p.name for p in itertools.islice(d.iterdir(), 1000)]
    except OSError as e:
        return f"unreadable ({e.strerror or e}; {made})"
    if not names:
        return f"an empty folder ({made})"
    docs = (".jsonl", ".jsonl.gz", ".jsonl.zst", ".parquet", ".txt")
    if "stats.json" in names and (d / "data").is_dir():  # a corpus job's OUT (curate, dedup)
        return (f"the output of a corpus job, documents not tokens: tokenize them first, `pretrain tokenize "
                f"{d / 'data'} --tokenizer TOKENIZER -o TOKENS`")
    if any(n.endswith(docs) for n in names) and not any(n.endswith(".bin") for n in names):
        return (f"a folder of documents, not tokens: tokenize it first, `pretrain tokenize {d} "
                "--tokenizer TOKENIZER -o TOKENS`")
    return f"{made} (an interrupted one: rerun its command)"


DTYPES = ("uint16", "uint32")


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _plain_name(value: object) -> bool:
    # Names come from the manifest, which may be hostile: only plain file names inside the directory.
    return isinstance(value, str) and bool(value) and Path(value).name == value and not value.startswith(".")


def _check_fields(man: dict[str, Any], where: str) -> None:
    """Every field a reader relies on has its documented type and range (a manifest may lie)."""
    if man.get("dtype") not in DTYPES:
        raise DataError(where, "dtype", f"{man.get('dtype')!r} is not one of {', '.join(DTYPES)}")
    vocab, eot = man.get("vocab_size"), man.get("eot_id")
    if not _count(vocab) or vocab < 1 or vocab > np.iinfo(man["dtype"]).max + 1:
        raise DataError(where, "vocab_size", f"{vocab!r} ids do not fit {man['dtype']}")
    if not _count(eot) or eot >= vocab:
        raise DataError(where, "eot_id", f"{eot!r} is not an id of a {vocab}-token vocabulary")
    tok = man.get("tokenizer")
    if not isinstance(tok, dict) or not isinstance(tok.get("sha256"), str) or not _plain_name(
            tok.get("copy", "tokenizer.json")):
        raise DataError(where, "tokenizer", "needs a sha256 string and a plain file name as its copy")
    for key in ("tokens", "documents"):
        if not _count(man.get(key)):
            raise DataError(where, key, f"{man.get(key)!r} is not a count")
    _check_tallies(man, where)
    shards = man.get("shards")
    if not isinstance(shards, list):
        raise DataError(where, "shards", f"expected a list, found {type(shards).__name__}")
    seen: dict[str, int] = {}
    for i, sh in enumerate(shards):
        if not isinstance(sh, dict):
            raise DataError(where, f"shards[{i}]", "not a JSON object")
        for key in ("bin", "idx"):
            if not _plain_name(sh.get(key)):
                raise DataError(where, f"shards[{i}].{key}", f"{sh.get(key)!r} is not a plain file name")
            if (j := seen.setdefault(sh[key], i)) != i:  # its tokens would be counted twice
                raise DataError(where, f"shards[{i}].{key}", f"{sh[key]!r} is already shards[{j}]'s file")
        for key in ("tokens", "documents"):
            if not _count(sh.get(key)):
                raise DataError(where, f"shards[{i}].{key}", f"{sh.get(key)!r} is not a count")


def _check_tallies(man: dict[str, Any], where: str) -> None:
    """`sources` ({name: {tokens, documents}}), which `tokens inspect` and `report` add up and print:
    a list or a string there was a traceback (session 13, round 4). `skipped` is only shown, and
    its readers keep what counts in it (`report_corpus._skipped_kinds`)."""
    sources = man.get("sources", {})
    if not isinstance(sources, dict):
        raise DataError(where, "sources", f"expected a JSON object, found {type(sources).__name__}")
    for name, c in sources.items():
        if not isinstance(c, dict) or not (_count(c.get("tokens")) and _count(c.get("documents"))):
            raise DataError(where, "sources", f"{name[:100]!r} is not {{tokens, documents}} counts")


def load_idx(path: Path) -> np.ndarray:
    try:  # a header's shape of 2^60: numpy's size overflows (a warning, then OverflowError)
        with np.errstate(over="ignore"):
            idx = np.load(path, allow_pickle=False, mmap_mode="r")
    except (OSError, ValueError, OverflowError) as e:
        raise DataError(str(path), "idx", f"not a readable .npy offset array: {e}") from e
    if idx.ndim != 1 or idx.dtype != np.dtype("<u8") or idx.size < 1:
        raise DataError(str(path), "idx", f"expected 1-D uint64 offsets, found {idx.dtype} {idx.shape}")
    return idx


def _increasing(idx: np.ndarray, chunk: int = 1 << 22) -> bool:
    """Strictly increasing, checked in chunks so a huge index never needs a full-size copy."""
    for lo in range(0, idx.size - 1, chunk):
        part = np.asarray(idx[lo:lo + chunk + 1], dtype=np.int64)
        if bool(np.any(np.diff(part) <= 0)):
            return False
    return True


class _Mapped(Sequence):
    """Shard k's array, opened by `open_one(k)` when first asked for. The process keeps at most
    `KEEP_MAPPED` of them open, over every `_Mapped`, closing the least recently used first (a
    collected directory's arrays age out with the rest: no `__del__` taking the lock mid-call)."""

    _open_now: OrderedDict[tuple[int, int], np.ndarray] = OrderedDict()  # (owner, k) -> array
    _lock = threading.Lock()
    _owners = itertools.count()  # not id(): a later object could reuse a collected one's id

    def __init__(self, n: int, open_one: Callable[[int], np.ndarray]):
        self._n, self._open, self._me = n, open_one, next(self._owners)

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, k: int) -> np.ndarray:  # type: ignore[override]
        k = int(k)
        if not -self._n <= k < self._n:
            raise IndexError(f"shard {k} of {self._n}")
        key = (self._me, k % self._n)
        with self._lock:
            arr = self._open_now.get(key)
            if arr is not None:
                self._open_now.move_to_end(key)
                return arr
        arr = self._open(key[1])
        with self._lock:
            self._open_now[key] = arr
            while len(self._open_now) > KEEP_MAPPED:
                self._open_now.popitem(last=False)
        return arr


class TokenDir:
    """A validated token directory: the concatenation of its shards as one token stream."""

    def __init__(self, directory: str | Path, check_offsets: bool = True):
        """Open and validate; `check_offsets=False` skips reading every offset (the sampler never
        uses them), keeping the O(1) checks: sizes, counts, first and last offset."""
        _not_a_url(directory)
        self.path = Path(directory)
        self.manifest = read_manifest(self.path)
        self.dtype = np.dtype(self.manifest["dtype"]).newbyteorder("<")
        self.eot_id = int(self.manifest["eot_id"])
        self.vocab_size = int(self.manifest["vocab_size"])
        self.tokenizer_sha256 = self.manifest["tokenizer"]["sha256"]
        shards = self.manifest["shards"]
        for sh in shards:  # every shard checked now; mapped later, a few at a time
            self._check_shard(sh, check_offsets)
        sizes = [int(sh["tokens"]) for sh in shards]
        # starts[k] = global position of shard k's first token; starts[-1] = total tokens.
        self.starts = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int64)
        self.doc_starts = np.concatenate([[0], np.cumsum([int(sh["documents"]) for sh in shards],
                                                         dtype=np.int64)]).astype(np.int64)
        self.num_tokens = int(self.starts[-1])
        self.num_documents = int(self.doc_starts[-1])
        if self.num_tokens != int(self.manifest["tokens"]):
            raise DataError(str(self.path / MANIFEST), "tokens",
                            f"manifest says {self.manifest['tokens']} tokens, shards hold {self.num_tokens}")
        self.bins: Sequence[np.ndarray] = _Mapped(len(shards), self._map_bin)
        self.idxs: Sequence[np.ndarray] = _Mapped(len(shards), self._map_idx)

    def _paths(self, sh: dict) -> tuple[Path, Path]:
        return self.path / sh["bin"], self.path / sh["idx"]

    def _check_shard(self, sh: dict, check_offsets: bool) -> None:
        # read_manifest checked the names are plain; a symlink could still lead out of the directory.
        bin_path, idx_path = self._paths(sh)
        if not bin_path.is_file() or not idx_path.is_file():
            raise DataError(str(bin_path), "shard", "missing .bin or .idx listed in the manifest")
        home = self.path.resolve()
        for p in (bin_path, idx_path):
            if p.resolve().parent != home:
                raise DataError(str(p), "shard", f"a link to {p.resolve()}, outside {self.path}")
        n = int(sh["tokens"])
        size = bin_path.stat().st_size
        if size != n * self.dtype.itemsize:
            raise DataError(str(bin_path), "size",
                            f"{size} bytes, manifest expects {n} {self.dtype.name} tokens "
                            f"({n * self.dtype.itemsize} bytes): truncated or not this manifest's shard")
        idx = load_idx(idx_path)
        if idx.size - 1 != int(sh["documents"]) or int(idx[0]) != 0 or int(idx[-1]) != n:
            raise DataError(str(idx_path), "offsets",
                            f"{idx.size - 1} documents ending at {int(idx[-1])}, manifest says "
                            f"{sh['documents']} documents and {n} tokens")
        if check_offsets and not _increasing(idx):
            raise DataError(str(idx_path), "offsets", "offsets are not strictly increasing")
        del idx  # unmapped here: its descriptor is not kept

    def _map_bin(self, k: int) -> np.ndarray:
        sh = self.manifest["shards"][k]
        n = int(sh["tokens"])
        if n == 0:
            return np.zeros(0, self.dtype)
        path = self._paths(sh)[0]
        arr = np.memmap(path, dtype=self.dtype, mode="r")
        if arr.size != n:  # replaced since it was checked
            raise DataError(str(path), "size", f"now holds {arr.size} tokens, the manifest {n}")
        return arr

    def _map_idx(self, k: int) -> np.ndarray:
        sh = self.manifest["shards"][k]
        path = self._paths(sh)[1]
        idx = load_idx(path)
        if idx.size - 1 != int(sh["documents"]):  # replaced since it was checked
            raise DataError(str(path), "offsets", f"now lists {idx.size - 1} documents, the manifest "
                            f"{sh['documents']}")
        return idx

    def check_tokenizer(self, sha256: str, where: str = "tokenizer") -> None:
        """Raise when a tokenizer's fingerprint differs from the one these tokens were made with."""
        if sha256 != self.tokenizer_sha256:
            raise UserError(f"{where} (sha256 {sha256[:12]}) does not match the tokenizer of {self.path} "
                            f"(sha256 {self.tokenizer_sha256[:12]}); use the tokenizer that made them")

    def read(self, start: int, length: int) -> np.ndarray:
        """Tokens [start, start + length) of the concatenated stream, as int64 (may span shards)."""
        if start < 0 or start + length > self.num_tokens:
            raise IndexError(f"{self.path}: window [{start}, {start + length}) "
                             f"outside {self.num_tokens} tokens")
        out = np.empty(length, dtype=np.int64)
        k = int(np.searchsorted(self.starts, start, side="right")) - 1
        filled = 0
        while filled < length:
            lo = start + filled - int(self.starts[k])
            take = min(length - filled, self.bins[k].size - lo)
            out[filled:filled + take] = self.bins[k][lo:lo + take]
            filled += take
            k += 1
        self._check_ids(out[None, :], np.array([start]))  # `pretrain eval --tasks ppl:TOKENS` reads here
        return out

    def gather(self, starts: np.ndarray, length: int) -> np.ndarray:
        """Windows of `length` tokens at each global start: int64 array (len(starts), length).

        Windows inside one shard are read with one vectorized fancy index per shard; the rare window
        that straddles a shard boundary is copied piece by piece.
        """
        starts = np.asarray(starts, dtype=np.int64)
        out = np.empty((starts.size, length), dtype=np.int64)
        first = np.searchsorted(self.starts, starts, side="right") - 1
        last = np.searchsorted(self.starts, starts + length - 1, side="right") - 1
        inside = first == last
        cols = np.arange(length, dtype=np.int64)
        for k in np.unique(first[inside]):
            rows = np.nonzero(inside & (first == k))[0]
            local = starts[rows] - self.starts[k]
            out[rows] = self.bins[k][local[:, None] + cols]
        for r in np.nonzero(~inside)[0]:
            out[r] = self.read(int(starts[r]), length)
        self._check_ids(out, starts)
        return out

    def _check_ids(self, windows: np.ndarray, starts: np.ndarray) -> None:
        """Every id of a window read for training is inside the manifest's vocabulary. Sizes and
        offsets are checked on open; the ids themselves would cost a read of every shard, so they are
        checked as they are read (a max over the batch): one id past the vocabulary in a shard from
        elsewhere was an IndexError traceback deep in the embedding mid-run (a device-side assert on
        a GPU)."""
        if not windows.size or int(windows.max()) < self.vocab_size:
            return
        r, c = (int(x[0]) for x in np.nonzero(windows >= self.vocab_size))
        pos = int(starts[r]) + c
        k = int(np.searchsorted(self.starts, pos, side="right")) - 1
        shard = self.path / self.manifest["shards"][k]["bin"]
        raise DataError(str(shard), f"token {pos - int(self.starts[k])}", f"id {int(windows[r, c])} is "
                        f"outside the {self.vocab_size}-token vocabulary of {self.path / MANIFEST}")

    def document(self, i: int, limit: int | None = None) -> np.ndarray:
        """Document i's tokens (its trailing end-of-text included), or its first `limit`: a shard may
        be one document of 2^31 tokens (a sparse file), 16 GB as int64 for a look at its start."""
        if not 0 <= i < self.num_documents:
            raise IndexError(f"{self.path}: document index out of range ({self.num_documents} documents)")
        k = int(np.searchsorted(self.doc_starts, i, side="right")) - 1
        idx, j = self.idxs[k], i - int(self.doc_starts[k])
        lo, hi = int(idx[j]), int(idx[j + 1])
        hi = hi if limit is None else min(hi, lo + max(limit, 0))
        return np.asarray(self.bins[k][lo:hi], dtype=np.int64)

    def document_length(self, i: int) -> int:
        """Document i's token count, from the offsets alone."""
        if not 0 <= i < self.num_documents:
            raise IndexError(f"{self.path}: document index out of range ({self.num_documents} documents)")
        k = int(np.searchsorted(self.doc_starts, i, side="right")) - 1
        idx, j = self.idxs[k], i - int(self.doc_starts[k])
        return max(int(idx[j + 1]) - int(idx[j]), 0)
