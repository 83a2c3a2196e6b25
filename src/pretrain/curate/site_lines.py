"""Site boilerplate across the crawl: the lines a site repeats on many of its pages, removed.

Owns the `dedup.site_lines = K` pass of the global dedup stage (0: off). CCNet (Wenzek et al. 2020,
§3.1) removes every paragraph whose normalised hash occurs elsewhere in its shard; Dolma and
RefinedWeb remove repeated paragraphs and lines likewise. Here the count is per site (a URL's host
without "www."), over the whole job, and only after exact and near duplicates are gone, so that a
duplicate page does not strip its twin bare. Three steps, each a unit with a done marker:

1. `count_shard` (per shard): for each document that survives the removal list and has a site,
   the distinct keys xxh3_64(site NUL normalised line); the shard's keys sorted, with how many of
   its documents hold each -> work/dedup/site_lines/sNNNNNN.npy (keys, then counts as uint64).
2. `boilerplate` (global, per key range): the counts of every shard summed; the keys held by
   >= K + 1 documents of their site -> work/dedup/site_lines/boilerplate.npy (sorted keys).
3. `Stripper` (stage C, per document): its lines whose key is in that set are removed. A document
   left with no text goes to the rejects (`site_lines`, `site_boilerplate`).

Memory: hashes, never strings. Step 1 holds 8 bytes per (document, distinct line) of one shard and
writes 16 per distinct key; step 2 holds ~40 bytes per row of one key range (the range count comes
from `dedup.memory_mb`, as stage 2 of dedup.py); step 3 holds 8 bytes per boilerplate key. Each
document costs one hash and one binary search per line: no per-record quadratic work.
Lines are compared with whitespace collapsed (not CCNet's digit folding: see `normalise`); a blank
line is never counted.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import xxhash

from pretrain.curate import io

_ROW_BYTES = 40  # step 2, per key row of a range: keys, counts, their sort order and the sums
_UNIT_MB = 64
TOP_SITES = 100  # stats.json lists the sites with the most characters removed, up to this many


def site(url: str) -> str:
    """The site of a page: its URL's host, lower case, without a leading "www.".

    A benchmark key without a scheme (trafilatura-eval's `hard::<host>-<words>.html`) gives that host
    (`hard::blog.python.org.html` -> `blog.python.org`).
    """
    if "://" in url:
        try:
            host = (urlsplit(url).hostname or "").lower()
        except ValueError:  # a hostile URL ("http://[") has no host rather than an error
            host = ""
    else:
        host = url.rsplit("::", 1)[-1].removesuffix(".html").split("-", 1)[0].lower()
    return host.removeprefix("www.")


def normalise(line: str) -> str:
    """Whitespace collapsed and stripped, nothing more. CCNet's normalize_for_dedup also lower-cases,
    folds every digit to 0 and drops punctuation: on the crawl set that made a shop's
    "商品コード : 1357" and "商品コード : 1367" (product code, price) one line, and keep fell
    0.794 -> 0.632 (resiliparse, K = 2; docs/curation.md)."""
    return " ".join(line.split())  # str.split(): Unicode whitespace, as re's \s


def line_keys(site_name: str, lines: Iterable[str]) -> list[int]:
    """The key of each line (0 for a line that normalises to nothing: never counted, never removed)."""
    prefix, h = site_name.encode("utf-8", "surrogatepass") + b"\0", xxhash.xxh3_64_intdigest
    # normalise() inlined: this runs once per line of the corpus, twice
    return [h(prefix + n.encode("utf-8", "surrogatepass")) if (n := " ".join(x.split())) else 0
            for x in lines]


def doc_site(rec: dict) -> str:
    return site(rec.get("url") or "") if rec.get("url") else ""


# ----------------------------------------------------------------------------- step 1: count


def folder(dedup_dir: Path) -> Path:
    return Path(dedup_dir) / "site_lines"


def count_path(dedup_dir: Path, shard: int) -> Path:
    return folder(dedup_dir) / f"s{shard:06d}.npy"


def count_shard(survivors: Iterator[dict], out: Path, tmp: Path) -> int:
    """Keys and document counts of one shard's surviving documents; returns the distinct keys."""
    keys: list[np.ndarray] = []
    for rec in survivors:
        name = doc_site(rec)
        if name:
            k = np.unique(np.array(line_keys(name, rec["text"].split("\n")), np.uint64))
            keys.append(k[k != 0])
    allk = np.concatenate(keys) if keys else np.empty(0, np.uint64)
    uniq, counts = np.unique(allk, return_counts=True)
    del allk, keys
    io.write_bytes_atomic(out, _npy(np.concatenate([uniq, counts.astype(np.uint64)])), tmp)
    return int(len(uniq))


def _npy(arr: np.ndarray) -> bytes:
    import io as _io

    buf = _io.BytesIO()
    np.lib.format.write_array(buf, np.ascontiguousarray(arr), allow_pickle=False)
    return buf.getvalue()


# ----------------------------------------------------------------------------- step 2: merge


def _slice(path: Path, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Keys in [lo, hi) of one shard's count file and their counts."""
    arr = np.load(path, mmap_mode="r")
    m = len(arr) // 2
    a = int(np.searchsorted(arr[:m], np.uint64(lo), "left"))
    b = m if hi >= 1 << 64 else int(np.searchsorted(arr[:m], np.uint64(hi), "left"))
    out = np.array(arr[a:b]), np.array(arr[m + a : m + b])
    del arr
    return out


def boilerplate(count_files: list[Path], k: int, memory_mb: int) -> np.ndarray:
    """Sorted keys held by >= k + 1 documents of their site over all shards, one key range at a
    time (ranges from the memory budget, never from the number of workers)."""
    rows = sum(max(0, (np.load(p, mmap_mode="r").shape[0]) // 2) for p in count_files)
    parts = max(1, math.ceil(rows * _ROW_BYTES / (min(max(1, memory_mb), _UNIT_MB) * 2**20)))
    span, found = (1 << 64) // parts, []
    for p in range(parts):
        lo, hi = p * span, (1 << 64) if p == parts - 1 else (p + 1) * span
        pieces = [_slice(f, lo, hi) for f in count_files]
        keys = np.concatenate([x for x, _ in pieces] or [np.empty(0, np.uint64)])
        counts = np.concatenate([c for _, c in pieces] or [np.empty(0, np.uint64)])
        del pieces
        order = np.argsort(keys, kind="stable")
        keys, counts = keys[order], counts[order]
        if len(keys):
            start = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
            total = np.add.reduceat(counts, start)
            found.append(keys[start][total >= k + 1])
    return np.concatenate(found) if found else np.empty(0, np.uint64)


# ----------------------------------------------------------------------------- step 3: strip


class Stripper:
    """Removes a site's boilerplate lines from documents; counts lines and characters per site."""

    def __init__(self, keys: np.ndarray):
        self.keys = keys
        self.removed: dict[str, list[int]] = {}  # site -> [lines, characters]

    def __call__(self, rec: dict) -> str | None:
        """The document's text without its site's boilerplate lines (None: nothing was removed)."""
        name = doc_site(rec)
        if not name or not len(self.keys):
            return None
        lines = rec["text"].split("\n")
        k = np.array(line_keys(name, lines), np.uint64)
        at = np.minimum(np.searchsorted(self.keys, k), len(self.keys) - 1)
        hit = (self.keys[at] == k) & (k != 0)
        if not hit.any():
            return None
        c = self.removed.setdefault(name, [0, 0])
        c[0] += int(hit.sum())
        c[1] += sum(len(x) for x, h in zip(lines, hit.tolist()) if h)
        return "\n".join(x for x, h in zip(lines, hit.tolist()) if not h)


def load_stripper(dedup_dir: Path) -> Stripper:
    return Stripper(np.load(folder(dedup_dir) / "boilerplate.npy"))


def summary(per_shard: Iterable[dict]) -> dict:
    """stats.json's `site_lines` figures from stage C's per-shard counts."""
    by_site: Counter[str] = Counter()
    lines = 0
    for c in per_shard:
        for name, (n, chars) in c.items():
            by_site[name] += chars
            lines += n
    sites = {name: {"lines": sum(c.get(name, [0, 0])[0] for c in per_shard), "chars": chars}
             for name, chars in by_site.most_common(TOP_SITES)}
    return {"lines_removed": lines, "chars_removed": sum(by_site.values()), "sites": len(by_site),
            "top_sites": sites}


# ----------------------------------------------------------------------------- the pass


def run(units: list, shards: list[int], count_one: Callable, dedup_dir: Path, k: int, memory_mb: int,
        job_hash: str, map_fn: Callable, tmp: Path) -> Path:
    """Steps 1 and 2 (step 3 runs in stage C); returns the boilerplate key file. `count_one(unit)`
    counts one shard (pipeline.count_site_lines); each unit is skipped when its marker is there."""
    out = folder(dedup_dir) / "boilerplate.npy"
    if io.is_done(out, job_hash) and out.exists():  # a marker whose file was deleted: redo
        return out
    list(map_fn(count_one, units))
    keys = boilerplate([count_path(dedup_dir, s) for s in shards], k, memory_mb)
    io.write_bytes_atomic(out, _npy(keys), tmp)
    io.mark_done(out, {"job_hash": job_hash, "keys": int(len(keys)), "k": k})
    return out


def global_pass(tasks: list, lay, cfg, map_fn: Callable) -> dict:
    """Steps 1-2 for a job (job.Layout `lay`, DedupConfig `cfg`); stage C removes the lines."""
    from pretrain.curate.pipeline import count_site_lines

    units = [(t, str(lay.removals_dir)) for t in tasks]
    path = run(units, [t.shard for t in tasks], count_site_lines, lay.dedup_dir, cfg.site_lines,
               cfg.memory_mb, tasks[0].job_hash, map_fn, lay.tmp)
    return {"k": cfg.site_lines, "boilerplate_keys": describe(path)["keys"]}


def counted(dedup_dir: Path, shard: int, job_hash: str) -> bool:
    path = count_path(dedup_dir, shard)
    return io.is_done(path, job_hash) and path.exists()


def mark_counted(dedup_dir: Path, shard: int, job_hash: str, keys: int) -> None:
    io.mark_done(count_path(dedup_dir, shard), {"job_hash": job_hash, "keys": keys})


def describe(path: Path) -> dict:
    return json.loads(io.done_marker(path).read_text())
