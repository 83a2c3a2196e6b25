"""Corpus-scale exact and near (MinHash + LSH) deduplication with bounded memory.

Owns the global dedup stages and their files under `work_dir`:

1. `sign_shard` (per shard, in parallel): for every document its exact-text key, URL key and
   `bands` LSH band keys (`minhash.py`), one part of `chunk_docs` documents at a time. Each part's
   key columns are written sorted by key as `.npy` files (keys, then local row numbers), so any
   key range of a part is a contiguous slice. The later stages see a flat list of pieces (shard,
   part) in input order; a document's dense index is the same whatever the chunk size, so every
   later file is too.
2. Per (column, key range) unit: the slices of that range from every piece are concatenated and
   sorted; documents sharing a key become edges (first member -> each other member), written as
   one edge file. The number of ranges P is chosen from the memory budget, never from the number
   of workers.
3. Connected components (`components.py`) by min-label propagation over the edge files, streamed: only
   the label array (8 bytes per document) stays in memory, never every edge (hook roots to the
   smaller label, then pointer jumping; Shiloach-Vishkin style).
4. Removal list: every member of a component but one, the one with the lowest priority (ties:
   the smallest id, then input position). A removed document is `exact_dedup` when its text (or
   URL) key equals its kept twin's, else `near_dedup`.

Short documents: a document with fewer than `ngram` normalized words has no shingle and takes no
part in near dedup (as in datatrove); exact dedup still covers it.

Faults: every file is written atomically; a done marker records its size and xxh3 checksum and the
digest of its inputs. A missing, truncated or corrupt file fails the check and its unit is
recomputed (a shard's signature files can only be recomputed by its caller: `shard_ok` tells it).

Memory (per process): sign_shard holds one part, about (40 + 8 x bands + 4 x bands x rows) bytes
per document of it (~0.6 KB at 14 x 8, ~30 MB at 50,000 documents) plus one batch of shingles,
whatever the shard's size; a unit of stage 2 holds about 48 bytes per row of its key range, and
P = ceil(rows_per_column x 48 / min(memory_budget, 64 MB)); stage 3 holds 8N bytes of labels plus
one chunk of edges (16 bytes per edge, budget / 64 edges per chunk); stage 4 holds about 9N bytes
(labels, a flag) plus the priorities, keys and ids of the documents in clusters. For N = 10M
documents that is ~0.2 GB: 10M fits a 24 GB machine with room for the workers.
"""

from __future__ import annotations

import io as _io
import json
import math
import os
import time
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import xxhash

from pretrain.config import bounded
from pretrain.curate import io
from pretrain.curate.components import components
from pretrain.curate.document import Document
from pretrain.curate.exact import NO_KEY, text_key, url_key
from pretrain.curate.minhash import MinHasher, ngram_hashes_many, word_bytes, word_hashes
from pretrain.curate.removals import keepers, load_removals, removal_summary, renames  # noqa: F401
from pretrain.errors import DataError, UserError

FORMAT = 2  # bump when the files change meaning (2: the id column)
MAX_HASHES = 10_000  # bands x rows: signing holds two (256, k) uint64 buffers, 41 MB at this bound
_BATCH = 512  # documents per signature batch
_ROW_BYTES = 48  # stage-2 bytes per key row: keys, refs, sort order, edges
# A stage-2 unit's rows cost at most min(memory_mb, this): more, smaller key ranges cost little
# (each unit slices every piece's sorted column), and a large job's peak stays flat.
_UNIT_MB = 64
_LABEL_CHUNK = 1 << 20  # labels scanned at a time in stage 4


@dataclass
class DedupConfig:
    """Exact and near-duplicate removal (TOML section `[dedup]`)."""

    exact: bool = True  # normalized-text hash
    url: bool = False  # same URL -> duplicate
    near: bool = True  # MinHash + LSH
    ngram: int = bounded(5, lo=1, hi=1000, why="words per shingle (FineWeb: 5)")
    bands: int = bounded(14, lo=1, hi=MAX_HASHES, why="b; FineWeb's 14 x 8 = 112 hashes")
    rows: int = bounded(8, lo=1, hi=MAX_HASHES, why="r, hashes per band")
    seed: int = bounded(1, hi=2**32 - 1, why="np.random.RandomState takes 32 bits")
    # Candidate check: "signature" keeps a candidate pair when the fraction of agreeing signature
    # slots is >= threshold; "none" keeps every pair that shares a band (datatrove's behaviour).
    verify: str = "signature"
    # a share of slots: 0..1 (70, meant as percent, made near dedup remove nothing, silently)
    threshold: float = bounded(0.7, lo=0.0, hi=1.0, why="a share of signature slots")
    memory_mb: int = bounded(1024, lo=1, why="MB per process for the global stages")
    # key ranges per column in stage 2; 0: from memory_mb (more parts, less memory). Each is a unit of
    # work and a file (named with 4 digits): 2**62 of them was a loop that never ended
    parts: int = bounded(0, lo=0, hi=9999, why="key ranges, named with 4 digits; 0 = from memory_mb")
    # Documents per signed part of a shard: one part (~0.6 KB/doc at 14 x 8) is what signing holds.
    chunk_docs: int = bounded(50_000, lo=1, why="documents per signed part")
    # Site boilerplate (curate/site_lines.py): after exact and near removal, remove from each
    # document the lines that >= K other surviving documents of its site also hold. 0: off.
    site_lines: int = bounded(0, lo=0, hi=10**9, why="K: a line of >= K + 1 documents of its site goes")


    def __post_init__(self) -> None:
        if self.verify not in ("signature", "none"):
            raise UserError(f"dedup.verify must be 'signature' or 'none', got {self.verify!r}")
        for key in ("ngram", "bands", "rows"):
            if getattr(self, key) < 1:
                raise UserError(f"dedup.{key} must be >= 1, got {getattr(self, key)}")
        if self.bands * self.rows > MAX_HASHES:  # 10^7 hashes: killed for memory (buffers of 256 x k)
            raise UserError(f"dedup.bands x dedup.rows = {self.bands} x {self.rows} = "
                            f"{self.bands * self.rows:,} hashes; at most "
                            f"{MAX_HASHES:,} (RefinedWeb's 9,000 is the largest published; default 112)")
        if self.chunk_docs < 1:
            raise UserError(f"dedup.chunk_docs must be >= 1, got {self.chunk_docs}")


def _sign_hash(cfg: DedupConfig) -> str:
    """Fingerprint of what the signature files depend on."""
    keys = {k: getattr(cfg, k) for k in ("exact", "url", "near", "ngram", "bands", "rows", "seed", "verify")}
    return xxhash.xxh3_64_hexdigest(json.dumps({"format": FORMAT, **keys}, sort_keys=True).encode())


def _columns(cfg: DedupConfig) -> list[str]:
    """Key columns signed and grouped. "id" is always there: its groups are documents that share an
    id, whatever their text; they are not duplicates (no edge joins them), but every surviving
    copy after the first is renamed, so ids are unique in the output."""
    cols = ["id", "exact"] if cfg.exact else ["id"]
    cols += ["url"] if cfg.url else []
    cols += [f"b{i:02d}" for i in range(cfg.bands)] if cfg.near else []
    return cols


# ----------------------------------------------------------------------------- checked files


def _write_checked(path: Path, data: bytes) -> dict:
    """Write atomically (temporary name, rename) without fsync: the checksum in the done marker,
    not the disk cache, is what proves a work file complete; a bad one is recomputed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return {"size": len(data), "xxh3": xxhash.xxh3_64_hexdigest(data)}


def _npy_bytes(arr: np.ndarray) -> bytes:
    buf = _io.BytesIO()
    np.lib.format.write_array(buf, np.ascontiguousarray(arr), allow_pickle=False)
    return buf.getvalue()


def _file_ok(path: Path, info: dict) -> bool:
    try:
        data = path.read_bytes()
    except OSError:
        return False
    return len(data) == info.get("size") and xxhash.xxh3_64_hexdigest(data) == info.get("xxh3")


def _marker_ok(marker: Path, folder: Path, expect: dict) -> dict | None:
    """The marker's content when it exists, matches `expect` and every file it lists checks out."""
    try:
        info = json.loads(marker.read_text())
    except (OSError, ValueError):
        return None
    if any(info.get(k) != v for k, v in expect.items()):
        return None
    files = info.get("files", {})
    return info if all(_file_ok(folder / name, f) for name, f in files.items()) else None


# ----------------------------------------------------------------------------- stage 1: sign


def _shard_dir(work_dir: Path) -> Path:
    return Path(work_dir) / "shards"


def _shard_name(shard: int, what: str) -> str:
    return f"s{shard:06d}.{what}"


def shard_ok(work_dir: Path, shard: int, cfg: DedupConfig) -> bool:
    """True when the shard's signature files exist, are complete and match `cfg`."""
    d = _shard_dir(work_dir)
    return _marker_ok(d / _shard_name(shard, "done"), d, {"sign_hash": _sign_hash(cfg)}) is not None


def _signed(items: Iterable[tuple[Document, int]], cfg: DedupConfig) -> Iterator[tuple]:
    """(id, priority, text key, url key, word hashes) per document, in input order."""
    for doc, prio in items:
        words = word_hashes(word_bytes(doc.text)) if cfg.near else None
        yield doc.id, int(prio), text_key(doc.text), url_key(doc.url), words


def _part_name(shard: int, part: int, what: str) -> str:
    """Part 0 keeps the plain shard name, so a one-part shard's files are those of a shard signed
    before parts existed."""
    return _shard_name(shard, what) if part == 0 else _shard_name(shard, f"p{part:04d}.{what}")


class _Part:
    """Up to `dedup.chunk_docs` documents of one shard, in compact columns (ids as one UTF-8
    buffer, keys in typed arrays): ~0.6 KB per document at 14 x 8 instead of Python objects."""

    def __init__(self, hasher: MinHasher, cfg: DedupConfig):
        self.hasher, self.cfg = hasher, cfg
        self.ids = bytearray()
        self.offsets = array("q", [0])
        self.prio, self.tkeys, self.ukeys, self.near_rows = array("q"), array("Q"), array("Q"), array("Q")
        self.ikeys = array("Q")
        self.bands: list[np.ndarray] = []
        self.sigs: list[np.ndarray] = []
        self.batch: list[np.ndarray] = []

    @property
    def n(self) -> int:
        return len(self.prio)

    def add(self, doc_id: str, prio: int, tkey: int, ukey: int, words: np.ndarray | None) -> None:
        if words is not None and len(words) >= self.cfg.ngram:  # at least one shingle
            self.batch.append(words)
            self.near_rows.append(self.n)
        raw_id = doc_id.encode("utf-8", "surrogatepass")
        self.ids += raw_id
        self.offsets.append(len(self.ids))
        self.ikeys.append(xxhash.xxh3_64_intdigest(raw_id))
        self.prio.append(prio)
        self.tkeys.append(tkey)
        self.ukeys.append(ukey)
        if len(self.batch) >= _BATCH:
            self._flush()

    def _flush(self) -> None:
        if self.batch:
            full = self.hasher.signatures_concat(*ngram_hashes_many(self.batch, self.cfg.ngram))
            self.bands.append(self.hasher.band_keys(full))
            # The low 32 bits of each minimum suffice to count agreeing slots (false agreement 2^-32).
            self.sigs.append(full.astype(np.uint32))
            self.batch = []

    def write(self, work_dir: Path, shard: int, part: int) -> dict:
        """Write this part's meta, sorted key columns and signatures; returns its marker entry."""
        self._flush()
        cfg = self.cfg
        bands = np.concatenate(self.bands) if self.bands else np.empty((0, cfg.bands), np.uint64)
        sigs = np.concatenate(self.sigs) if self.sigs else np.empty((0, self.hasher.k), np.uint32)
        tkeys, ukeys = np.frombuffer(self.tkeys, np.uint64), np.frombuffer(self.ukeys, np.uint64)
        near_rows = np.frombuffer(self.near_rows, np.uint64)
        d = _shard_dir(work_dir)
        buf = _io.BytesIO()
        np.savez(buf, ids=np.frombuffer(bytes(self.ids), np.uint8),
                 offsets=np.frombuffer(self.offsets, np.int64),
                 prio=np.frombuffer(self.prio, np.int64), text=tkeys, url=ukeys, near_rows=near_rows)
        meta = _part_name(shard, part, "meta.npz")
        files = {meta: _write_checked(d / meta, buf.getvalue())}
        del buf
        all_rows = np.arange(self.n, dtype=np.uint64)
        has_url = ukeys != NO_KEY
        columns = {"exact": (tkeys, all_rows), "url": (ukeys[has_url], all_rows[has_url]),
                   "id": (np.frombuffer(self.ikeys, np.uint64), all_rows)}
        for b in range(cfg.bands):
            columns[f"b{b:02d}"] = (bands[:, b], near_rows)
        for col in _columns(cfg):
            name = _part_name(shard, part, f"{col}.npy")
            files[name] = _write_checked(d / name, _npy_bytes(_sorted_column(*columns[col])))
        if cfg.near and cfg.verify == "signature":
            name = _part_name(shard, part, "sig.npy")
            files[name] = _write_checked(d / name, _npy_bytes(sigs))
        return {"n": self.n, "near_rows": int(len(near_rows)), "files": files}


def sign_shard(items: Iterable[tuple[Document, int]], shard: int, work_dir: Path, cfg: DedupConfig) -> None:
    """Write one shard's exact keys and LSH band keys (priority: lower is kept), one part of
    `cfg.chunk_docs` documents at a time, so memory does not grow with the shard."""
    work_dir = Path(work_dir)
    hasher = MinHasher(cfg.bands, cfg.rows, cfg.seed)
    d = _shard_dir(work_dir)
    (d / _shard_name(shard, "done")).unlink(missing_ok=True)  # stale marker
    parts: list[dict] = []
    part = _Part(hasher, cfg)
    for row in _signed(items, cfg):
        part.add(*row)
        if part.n >= cfg.chunk_docs:
            parts.append(part.write(work_dir, shard, len(parts)))
            part = _Part(hasher, cfg)
    if part.n or not parts:
        parts.append(part.write(work_dir, shard, len(parts)))
    del part
    _remove_stale_parts(d, shard, len(parts))
    files = {name: f for p in parts for name, f in p["files"].items()}
    marker = {"sign_hash": _sign_hash(cfg), "n": sum(p["n"] for p in parts),
              "near_rows": sum(p["near_rows"] for p in parts),
              "parts": [{"n": p["n"], "near_rows": p["near_rows"]} for p in parts], "files": files}
    io.write_json_atomic(d / _shard_name(shard, "done"), marker)


def _remove_stale_parts(d: Path, shard: int, parts: int) -> None:
    """Files of parts past the last one, left by an earlier run with a smaller chunk_docs."""
    for path in d.glob(_shard_name(shard, "p*.*")):
        num = path.name.split(".")[1][1:]
        if num.isdigit() and int(num) >= parts:
            path.unlink(missing_ok=True)


def _sorted_column(keys: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """(2m,) uint64: keys sorted ascending (ties by row), then the matching local rows."""
    order = np.lexsort((rows, keys))
    return np.concatenate([keys[order], rows[order]])


# ----------------------------------------------------------------------------- stage 2: edges


def _check_shard(args: tuple[str, int, str]) -> dict | None:
    """The shard's marker info when its files check out, else None (raised by the caller: a
    DataError does not survive pickling back from a worker process)."""
    work_dir, shard, sign_hash = args
    d = _shard_dir(Path(work_dir))
    info = _marker_ok(d / _shard_name(shard, "done"), d, {"sign_hash": sign_hash})
    if info is None:
        return None
    parts = [p["n"] for p in info.get("parts", [{"n": info["n"]}])]  # no "parts": signed as one
    return {"n": info["n"], "parts": parts, "files": info["files"]}


def _load_column(work_dir: Path, piece: tuple[int, int], col: str) -> np.ndarray:
    return np.load(_shard_dir(work_dir) / _part_name(*piece, f"{col}.npy"), mmap_mode="r")


def _column_slice(work_dir: Path, piece: tuple[int, int], col: str, lo: int,
                  hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Keys in [lo, hi) of one piece's column and their local rows. The bounds come from a binary
    search on a map (a few pages); the slice is read with plain reads, so no page of the file
    stays resident in this process (a map kept them all: 16 bytes per document)."""
    arr = _load_column(work_dir, piece, col)
    m, start = len(arr) // 2, arr.offset
    a = int(np.searchsorted(arr[:m], np.uint64(lo), "left"))
    b = m if hi >= 1 << 64 else int(np.searchsorted(arr[:m], np.uint64(hi), "left"))
    del arr
    with open(_shard_dir(work_dir) / _part_name(*piece, f"{col}.npy"), "rb") as f:
        f.seek(start + 8 * a)
        keys = np.fromfile(f, np.uint64, b - a)
        f.seek(start + 8 * (m + a))
        rows = np.fromfile(f, np.uint64, b - a)
    if len(keys) != b - a or len(rows) != b - a:
        raise DataError(f.name, f"rows {a}-{b}", "column file shorter than its header says")
    return keys, rows


def _edge_path(work_dir: Path, col: str, part: int, parts: int) -> Path:
    return Path(work_dir) / "edges" / f"{col}.p{part:04d}of{parts:04d}.npy"


def _range(part: int, parts: int) -> tuple[int, int]:
    """[lo, hi) of the uint64 key space for one part (keys are hashes: uniform)."""
    span = (1 << 64) // parts
    return part * span, (1 << 64) if part == parts - 1 else (part + 1) * span


def _edge_unit(args: tuple) -> int:
    """Edges of one (column, key range): every piece's slice, sorted, equal keys -> star edges.
    A piece is one signed part of a shard; `offsets` gives each its first dense index."""
    work_dir, col, part, parts, pieces, offsets, digest, cfg = args
    work_dir = Path(work_dir)
    path = _edge_path(work_dir, col, part, parts)
    marker = io.done_marker(path)
    info = _marker_ok(marker, path.parent, {"digest": digest})
    if info is not None:
        return int(info["edges"])
    lo, hi = _range(part, parts)
    keys, refs = [], []
    for piece, base in zip(pieces, offsets[:-1]):
        k, r = _column_slice(work_dir, piece, col, lo, hi)
        keys.append(k)
        refs.append(r.astype(np.int64) + base)
    if not keys:
        keys, refs = [np.empty(0, np.uint64)], [np.empty(0, np.int64)]
    edges = _group_edges(np.concatenate(keys), np.concatenate(refs))
    if col.startswith("b") and cfg.verify == "signature":
        budget_edges = max(1024, cfg.memory_mb * 2**20 // (8 * cfg.bands * cfg.rows + 64))
        edges = _verified(work_dir, pieces, offsets, edges, cfg.threshold, budget_edges)
    files = {path.name: _write_checked(path, _npy_bytes(edges))}
    io.write_json_atomic(marker, {"digest": digest, "edges": int(edges.shape[1]), "files": files})
    return int(edges.shape[1])


_GATHER = 1024  # signature rows copied or compared per numpy call (0.45 MB at k = 112)


class _Signatures:
    """Random access to the stored signatures of any document, by dense index. One piece's file
    is mapped at a time and unmapped after its rows are copied: a map kept open keeps every page
    it touched resident (0.45 KB per document at 14 x 8), which grew RSS with the corpus."""

    _CACHED = 64  # pieces whose near_rows stay loaded (8 bytes per document each)

    def __init__(self, work_dir: Path, pieces: list[tuple[int, int]], offsets: list[int]):
        self.work_dir, self.pieces, self.offsets = work_dir, pieces, np.asarray(offsets)
        self.near: dict[int, np.ndarray] = {}

    def _near_rows(self, i: int) -> np.ndarray:
        if i not in self.near:
            if len(self.near) >= self._CACHED:
                self.near.pop(next(iter(self.near)))  # oldest first
            self.near[i] = _read_meta(self.work_dir, self.pieces[i], ("near_rows",))["near_rows"]
        return self.near[i]

    def rows(self, refs: np.ndarray) -> np.ndarray:
        piece_of = np.searchsorted(self.offsets, refs, "right") - 1
        out = None
        for i in np.unique(piece_of):
            piece = self.pieces[int(i)]
            sig = np.load(_shard_dir(self.work_dir) / _part_name(*piece, "sig.npy"), mmap_mode="r")
            near_rows = self._near_rows(int(i))
            if out is None:
                out = np.empty((len(refs), sig.shape[1]), np.uint32)
            where = np.flatnonzero(piece_of == i)
            at = np.searchsorted(near_rows, (refs[where] - self.offsets[i]).astype(np.uint64))
            for s in range(0, len(where), _GATHER):  # a whole gather was a second copy of `out`
                out[where[s : s + _GATHER]] = sig[at[s : s + _GATHER]]
            del sig  # unmapped here, not at the end of the unit
        return out if out is not None else np.empty((0, 0), np.uint32)


def _verified(work_dir: Path, pieces: list[tuple[int, int]], offsets: list[int], edges: np.ndarray,
              threshold: float, chunk: int) -> np.ndarray:
    """Keep the candidate edges whose signatures agree in >= threshold of their slots."""
    sigs = _Signatures(work_dir, pieces, offsets)
    keep = np.zeros(edges.shape[1], bool)
    for s in range(0, edges.shape[1], chunk):
        u, v = edges[0, s : s + chunk], edges[1, s : s + chunk]
        both = sigs.rows(np.concatenate([u, v]))  # one pass over the pieces for both ends
        for b in range(0, len(u), _GATHER):  # the (rows, k) comparison in blocks, not whole
            same = both[b : min(b + _GATHER, len(u))] == both[len(u) + b : len(u) + min(b + _GATHER, len(u))]
            # count / k is the mean's value, without its float64 copy of the block
            keep[s + b : s + b + len(same)] = np.count_nonzero(same, axis=1) / same.shape[1] >= threshold
        del both
    return edges[:, keep]


def _group_edges(keys: np.ndarray, refs: np.ndarray) -> np.ndarray:
    """(2, e) int64 edges: within each group of equal keys, first member -> each other member."""
    order = np.lexsort((refs, keys))
    keys, refs = keys[order], refs[order]
    start = np.ones(len(keys), bool)
    start[1:] = keys[1:] != keys[:-1]
    first = np.maximum.accumulate(np.where(start, np.arange(len(keys)), 0))
    return np.stack([refs[first[~start]], refs[~start]])


# ----------------------------------------------------------------------------- stage 4: removals


def _read_meta(work_dir: Path, piece: tuple[int, int],
               keys: tuple[str, ...] | None = None) -> dict[str, np.ndarray]:
    with np.load(_shard_dir(work_dir) / _part_name(*piece, "meta.npz"), allow_pickle=False) as z:
        return {k: z[k] for k in (keys or z.files)}


def _member_columns(work_dir: Path, pieces: list[tuple[int, int]], offsets: list[int],
                    members: np.ndarray) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """Ids, priorities, text and URL keys of the documents at dense indices `members` (sorted),
    reading one piece at a time: memory is the members' and one piece's, never the corpus's."""
    ids: list[str] = []
    cols: dict[str, list[np.ndarray]] = {"prio": [], "text": [], "url": []}
    piece_of = np.searchsorted(np.asarray(offsets), members, "right") - 1
    for i in np.unique(piece_of):
        meta = _read_meta(work_dir, pieces[i])
        local = members[piece_of == i] - offsets[i]
        for name, got in cols.items():
            got.append(meta[name][local])
        blob, off = meta["ids"].tobytes(), meta["offsets"]
        ids.extend(blob[off[j] : off[j + 1]].decode("utf-8", "surrogatepass") for j in local)
    prio, tkey, ukey = (np.concatenate(cols[k]) for k in ("prio", "text", "url"))
    return ids, prio, tkey, ukey


def _clustered(labels: np.ndarray) -> np.ndarray:
    """Indices of the documents in a component of two or more: those whose label is not their
    own index, and the roots they point at. One bool per document beside the labels (a bincount
    of component sizes cost 16 bytes per document)."""
    n = len(labels)
    flag = np.zeros(n, bool)
    for s in range(0, n, _LABEL_CHUNK):
        seg = labels[s : s + _LABEL_CHUNK]
        joined = seg != np.arange(s, s + len(seg))
        flag[s : s + len(seg)] |= joined
        flag[seg[joined]] = True
    return np.flatnonzero(flag)


def _removals(work_dir: Path, pieces: list[tuple[int, int]], offsets: list[int],
              labels: np.ndarray, same_id: np.ndarray) -> Iterator[dict]:
    """One record per removed document, and one per renamed one (`"step": "rename"`, the new id
    in "kept"), ordered by input position. `same_id`: star edges of the id column (the first
    copy of an id in input order -> each later one)."""
    members = np.union1d(_clustered(labels), same_id.ravel())
    if members.size == 0:
        return
    ids, prio, tkey, ukey = _member_columns(work_dir, pieces, offsets, members)
    shard_of_piece = np.array([shard for shard, _ in pieces])
    # the shard's first dense index, per piece: a document's row in its shard is what stage C
    # matches on (ids need not be unique: a removal keyed by id took every document of that id)
    first_of_shard = {}
    for i, (shard, _) in enumerate(pieces):
        first_of_shard.setdefault(shard, offsets[i])
    start_of_piece = np.array([first_of_shard[shard] for shard, _ in pieces], dtype=np.int64)
    piece_of = np.searchsorted(np.asarray(offsets), members, side="right") - 1
    shard_of, row_of = shard_of_piece[piece_of], members - start_of_piece[piece_of]
    lab = labels[members].tolist()
    keeper = keepers(lab, prio.tolist(), ids)
    kept_at = np.fromiter((keeper[x] for x in lab), np.int64, len(lab))
    new_id = renames(members, same_id, kept_at != np.arange(len(lab)), ids)
    for j in range(len(members)):
        k = keeper[lab[j]]
        if k == j:
            if j in new_id:
                yield {"id": ids[j], "step": "rename", "reason": "duplicate_id", "kept": new_id[j],
                       "shard": int(shard_of[j]), "row": int(row_of[j])}
            continue
        if tkey[j] == tkey[k]:
            step, reason = "exact_dedup", "duplicate_text"
        elif ukey[j] != NO_KEY and ukey[j] == ukey[k]:
            step, reason = "exact_dedup", "duplicate_url"
        else:
            step, reason = "near_dedup", "near_duplicate"
        yield {"id": ids[j], "step": step, "reason": reason, "kept": new_id.get(k, ids[k]),
               "shard": int(shard_of[j]), "row": int(row_of[j])}


def find_duplicates(work_dir: Path, num_shards: int, cfg: DedupConfig,
                    map_fn: Callable[[Callable, Iterable], Iterable] = map) -> Path:
    """Global stages over every shard's keys; returns the removal-list file (see `load_removals`)."""
    work_dir = Path(work_dir)
    t0 = time.time()
    shards = list(map_fn(_check_shard, [(str(work_dir), s, _sign_hash(cfg)) for s in range(num_shards)]))
    bad = [s for s, info in enumerate(shards) if info is None]
    if bad:
        raise DataError(str(_shard_dir(work_dir) / _shard_name(bad[0], "*")), f"shards {bad[:10]}",
                        "signature files missing, truncated, corrupt or from another config: "
                        "sign these shards again (shard_ok tells which)")
    pieces = [(shard, p) for shard, info in enumerate(shards) for p in range(len(info["parts"]))]
    offsets = [0] + np.cumsum([n for info in shards for n in info["parts"]], dtype=np.int64).tolist()
    digest = xxhash.xxh3_64_hexdigest(json.dumps(
        {"cfg": {k: v for k, v in asdict(cfg).items() if k != "site_lines"}  # not in this list
         | {"memory_mb": None, "parts": None, "chunk_docs": None},
         "records": 3,  # 2: records carry the row in their shard; 3: renames of repeated ids
         "shards": [s["files"] for s in shards]},
        sort_keys=True).encode())
    out = work_dir / "removals.jsonl.zst"
    if _marker_ok(io.done_marker(out), work_dir, {"digest": digest}) is not None:
        return out
    n = offsets[-1]
    budget = max(1, cfg.memory_mb) * 2**20
    unit_budget = min(budget, _UNIT_MB * 2**20)
    parts = cfg.parts if cfg.parts > 0 else max(1, math.ceil(n * _ROW_BYTES / unit_budget))
    units = [(str(work_dir), col, p, parts, pieces, offsets, digest, cfg)
             for col in _columns(cfg) for p in range(parts)]
    counts = list(map_fn(_edge_unit, units))
    edge_files = [_edge_path(work_dir, u[1], u[2], parts) for u in units if u[1] != "id"]
    labels = components(edge_files, n, chunk=max(1024, budget // 64))
    same_id = [np.load(_edge_path(work_dir, "id", p, parts)) for p in range(parts)]
    steps: Counter[str] = Counter()  # the records go to the file as they come: one at a time
    records = (steps.update([r["step"] == "rename"]) or r
               for r in _removals(work_dir, pieces, offsets, labels, np.concatenate(same_id, axis=1)))
    files = {out.name: _write_checked_records(out, records)}
    io.write_json_atomic(io.done_marker(out), {
        "digest": digest, "files": files, "documents": n, "removed": steps[False], "renamed": steps[True],
        "edges": int(sum(counts)), "parts": parts, "seconds": round(time.time() - t0, 3)})
    return out


def _write_checked_records(path: Path, records: Iterable[dict]) -> dict:
    io.write_jsonl_zst(path, records)
    data = path.read_bytes()
    return {"size": len(data), "xxh3": xxhash.xxh3_64_hexdigest(data)}
