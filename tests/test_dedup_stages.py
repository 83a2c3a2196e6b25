"""The global dedup stages: a single-process reference, any worker count, faults, the rules."""

from __future__ import annotations

import multiprocessing as mp
import shutil
from pathlib import Path

import numpy as np
import pytest

from pretrain.curate.dedup import DedupConfig, find_duplicates, load_removals, shard_ok, sign_shard
from pretrain.curate.dedup_synth import Generator, planted_corpus
from pretrain.curate.document import Document
from pretrain.curate.exact import text_key
from pretrain.curate.minhash import MinHasher, shingle_hashes
from pretrain.errors import DataError

SHARDS = 4


def _corpus() -> list[Document]:
    docs, _ = planted_corpus([0.5, 0.7, 0.8, 0.9], pairs_per_level=40, n_words=120, singles=60, seed=3)
    out = [Document(id=i, text=t) for i, t in docs]
    gen = Generator(seed=4)
    for i in range(0, 80, 8):  # exact copies up to case and spacing, chains of three
        out.append(Document(id=f"z-{i:03d}", text="  " + out[i].text.upper().replace(" ", "\n ")))
        out.append(Document(id=f"0-{i:03d}", text=out[i].text))
    out += [Document(id=f"short-{i}", text=gen.text(3)) for i in range(5)]  # fewer than 5 words
    out += [Document(id="empty-1", text=""), Document(id="empty-2", text=" \n ")]
    return out


def _sign_unit(args):
    shard, docs, work, cfg = args
    sign_shard(((d, p) for d, p in docs), shard, Path(work), cfg)
    return shard


def _sign_all(docs, work: Path, cfg: DedupConfig, map_fn=map, prio=lambda i, d: 0):
    items = [(i, d) for i, d in enumerate(docs)]
    units = [(s, [(d, prio(i, d)) for i, d in items[s::SHARDS]], str(work), cfg) for s in range(SHARDS)]
    list(map_fn(_sign_unit, units))


def _reference(docs: list[Document], cfg: DedupConfig) -> dict[str, str]:
    """Plain Python: every pair sharing an exact key or a band key, union-find, keep smallest id."""
    hasher = MinHasher(cfg.bands, cfg.rows, cfg.seed)
    buckets: dict[tuple, list[int]] = {}
    for i, d in enumerate(docs):
        buckets.setdefault(("exact", text_key(d.text)), []).append(i)
        sh = shingle_hashes(d.text, cfg.ngram)
        if sh.size:
            for b, key in enumerate(hasher.band_keys(hasher.signatures([sh]))[0]):
                buckets.setdefault((b, int(key)), []).append(i)
    parent = list(range(len(docs)))

    def find(x):
        while parent[x] != x:
            x = parent[x]
        return x

    for members in buckets.values():
        for m in members[1:]:
            ra, rb = find(members[0]), find(m)
            parent[max(ra, rb)] = min(ra, rb)
    clusters: dict[int, list[int]] = {}
    for i in range(len(docs)):
        clusters.setdefault(find(i), []).append(i)
    out = {}
    for members in clusters.values():
        keep = min(members, key=lambda i: docs[i].id)
        out.update({docs[i].id: docs[keep].id for i in members if i != keep})
    return out


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    docs = _corpus()
    cfg = DedupConfig(verify="none")
    work = tmp_path_factory.mktemp("signed")
    _sign_all(docs, work, cfg)
    return docs, cfg, work


def test_matches_a_single_process_reference(signed, tmp_path):
    docs, cfg, work = signed
    removed = load_removals(find_duplicates(work, SHARDS, cfg))
    want = _reference(docs, cfg)
    assert {k: v[2] for k, v in removed.items()} == want
    assert len(want) > 100


def test_same_removals_for_1_2_8_workers_and_any_memory_budget(signed, tmp_path):
    docs, cfg, work = signed
    results = []
    ctx = mp.get_context("fork")
    for workers, parts in ((1, 0), (2, 0), (8, 0), (2, 5)):
        run_dir = tmp_path / f"w{workers}-p{parts}"
        with ctx.Pool(workers) as pool:  # signing in parallel too: same shard files
            _sign_all(docs, run_dir, cfg, map_fn=pool.map)
            run_cfg = DedupConfig(verify="none", parts=parts)  # parts=5: what a small budget does
            path = find_duplicates(run_dir, SHARDS, run_cfg, map_fn=pool.map)
        results.append(path.read_bytes())
        if parts:
            assert len(list((run_dir / "edges").glob("b00.*.npy"))) > 1  # really partitioned
    assert all(r == results[0] for r in results)


def test_signature_check_reference(tmp_path):
    """With verification, a kept edge is a band-sharing pair whose signatures agree >= threshold."""
    docs = _corpus()
    cfg = DedupConfig()
    _sign_all(docs, tmp_path, cfg)
    removed = load_removals(find_duplicates(tmp_path, SHARDS, cfg))
    hasher = MinHasher(cfg.bands, cfg.rows, cfg.seed)
    by_id = {d.id: d for d in docs}
    for rid, (step, _, kept) in removed.items():
        if step == "near_dedup":
            sa, sb = (shingle_hashes(by_id[x].text) for x in (rid, kept))
            sig = hasher.signatures([sa, sb])
            # the removed document joins its keeper through some chain; direct pairs mostly agree
            assert (sig[0] == sig[1]).mean() >= 0.5
    unchecked_dir = tmp_path / "unchecked"
    _sign_all(docs, unchecked_dir, DedupConfig(verify="none"))
    unchecked = load_removals(find_duplicates(unchecked_dir, SHARDS, DedupConfig(verify="none")))
    assert set(removed) < set(unchecked)  # the check only ever drops candidate pairs


def test_rules_exact_short_and_empty_documents(signed, tmp_path):
    docs, cfg, work = signed
    removed = load_removals(find_duplicates(work, SHARDS, cfg))
    for i in range(0, 80, 8):
        assert removed[f"z-{i:03d}"][:2] == ("exact_dedup", "duplicate_text")
        assert removed[docs[i].id] == ("exact_dedup", "duplicate_text", f"0-{i:03d}")  # "0-" < "p"
    assert not [d for d in removed if d.startswith("short-")]  # 3 distinct words: nothing shared
    assert removed["empty-2"] == ("exact_dedup", "duplicate_text", "empty-1")


def test_priority_decides_which_copy_stays(tmp_path):
    gen = Generator(seed=9)
    text = gen.text(200)
    docs = [Document(id=f"d{i}", text=text) for i in range(SHARDS * 2)]
    cfg = DedupConfig()
    _sign_all(docs, tmp_path, cfg, prio=lambda i, d: -i)  # the last document has the lowest priority
    removed = load_removals(find_duplicates(tmp_path, SHARDS, cfg))
    assert set(removed) == {d.id for d in docs[:-1]}
    assert {v[2] for v in removed.values()} == {docs[-1].id}


def test_url_duplicates(tmp_path):
    gen = Generator(seed=10)
    docs = [Document(id=f"u{i}", text=gen.text(50), url="https://x.org/a" if i < 3 else None)
            for i in range(8)]
    cfg = DedupConfig(url=True)
    _sign_all(docs, tmp_path, cfg)
    removed = load_removals(find_duplicates(tmp_path, SHARDS, cfg))
    twin = ("exact_dedup", "duplicate_url", "u0")
    assert removed == {"u1": twin, "u2": twin}


def test_corrupt_intermediate_files_are_recomputed(signed, tmp_path):
    docs, cfg, work = signed
    run = tmp_path / "run"
    shutil.copytree(work, run)
    path = find_duplicates(run, SHARDS, cfg)
    good = path.read_bytes()
    edge = sorted((run / "edges").glob("b03.*.npy"))[0]
    edge.write_bytes(edge.read_bytes()[:-40])  # truncated edge file
    path.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))  # corrupt removal list
    assert find_duplicates(run, SHARDS, cfg).read_bytes() == good
    assert len(np.load(edge)) == 2  # rewritten whole
    shard_file = run / "shards" / "s000002.b05.npy"
    shard_file.write_bytes(shard_file.read_bytes()[:100])
    assert not shard_ok(run, 2, cfg)
    path.unlink()
    with pytest.raises(DataError, match="s000002"):
        find_duplicates(run, SHARDS, cfg)
    _sign_all(docs, run, cfg)  # the caller re-signs that shard
    assert shard_ok(run, 2, cfg)
    assert find_duplicates(run, SHARDS, cfg).read_bytes() == good


def test_exact_key_is_the_hash_of_the_normalized_text_for_any_whitespace():
    # The ASCII fast path must equal the definition: xxh3 of " ".join(text.lower().split()).
    import random

    import xxhash

    from pretrain.curate.exact import normalize_exact

    rng = random.Random(0)
    alphabet = "aB3 \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x00-" + "é\u00a0\u2003"
    texts = ["".join(rng.choice(alphabet[: rng.choice((9, 13, 15, 18))]) for _ in range(rng.randint(0, 40)))
             for _ in range(3000)]
    for t in texts + ["a\x1cb", "A  b", "\u00a0x", ""]:
        want = xxhash.xxh3_64_intdigest(normalize_exact(t).encode("utf-8", "surrogatepass")) or 1
        assert text_key(t) == want, repr(t)
    assert text_key("a\x1cb") == text_key("A B")  # str.split() splits on U+001C; bytes.split() does not
