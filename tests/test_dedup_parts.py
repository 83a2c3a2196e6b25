"""A shard signed in parts (`dedup.chunk_docs`): the same bytes for any chunk size and worker
count, stale parts of an earlier run never read, and signing memory flat in the shard's size."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from pretrain.cli import main
from pretrain.curate.dedup import DedupConfig, find_duplicates, shard_ok, sign_shard
from pretrain.curate.dedup_synth import Generator, planted_corpus
from pretrain.curate.document import Document


def _corpus() -> list[dict]:
    docs, _ = planted_corpus([0.5, 0.85, 0.95], pairs_per_level=25, n_words=80, singles=30, seed=5)
    recs = [{"id": i, "text": t} for i, t in docs]
    recs += [{"id": f"copy-{k}", "text": recs[k]["text"].upper()} for k in range(0, 60, 6)]  # exact
    gen = Generator(seed=6)
    recs += [{"id": f"short-{k}", "text": gen.text(3)} for k in range(4)] + [{"id": "e1", "text": ""}]
    recs.append({"id": "e2", "text": " "})
    return recs


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("parts-in")
    recs = _corpus()
    half = len(recs) // 2  # two files: two shards, duplicates across them
    for name, part in (("a.jsonl", recs[:half]), ("b.jsonl", recs[half:])):
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in part))
    return folder


def _outputs(out: Path) -> dict[str, bytes]:
    files = [*(out / "data").glob("*.jsonl.zst"), *(out / "rejects").glob("*.jsonl.zst"),
             out / "work" / "dedup" / "removals.jsonl.zst"]
    return {str(f.relative_to(out)): f.read_bytes() for f in files}


@pytest.mark.parametrize("keep,runs", [
    ("id", ((3, 1), (3, 2), (40, 1), (10**9, 1))),  # (chunk_docs, workers)
    ("first", ((3, 2), (10**9, 1))),  # priority = input position across parts
])
def test_any_chunk_size_and_worker_count_gives_the_same_bytes(corpus_dir, tmp_path, keep, runs):
    results = {}
    for chunk, workers in runs:
        out = tmp_path / f"c{chunk}-w{workers}"
        args = ["dedup", str(corpus_dir), "-o", str(out), "--workers", str(workers), "--quiet",
                "--set", f"dedup.chunk_docs={chunk}", "--set", f"keep={keep}"]
        assert main(args) == 0
        results[(chunk, workers)] = _outputs(out)
        parts = list((out / "work" / "dedup" / "shards").glob("s000000.p*.meta.npz"))
        assert (len(parts) > 10) == (chunk == 3)  # really signed in many parts
    ref = results[(10**9, 1)]  # one part per shard: the layout before parts existed
    assert sum(len(v) for k, v in ref.items() if k.startswith("rejects")) > 0
    for key, got in results.items():
        assert got == ref, key
    stats = json.loads((tmp_path / f"c3-w{runs[0][1]}" / "stats.json").read_text())
    assert sum(stats["steps"]["exact_dedup"]["dropped"].values()) >= 10  # the planted copies


def _sign(docs: list[Document], work: Path, cfg: DedupConfig) -> None:
    sign_shard(((d, 0) for d in docs), 0, work, cfg)


def test_resigning_with_bigger_parts_drops_the_stale_ones(tmp_path):
    docs = [Document(id=r["id"], text=r["text"]) for r in _corpus()]
    fresh = tmp_path / "fresh"
    _sign(docs, fresh, DedupConfig(chunk_docs=1000))
    want = find_duplicates(fresh, 1, DedupConfig()).read_bytes()
    work = tmp_path / "work"
    _sign(docs, work, DedupConfig(chunk_docs=7))
    assert len(list((work / "shards").glob("s000000.p*.done"))) == 0  # one marker per shard
    assert len(list((work / "shards").glob("s000000.p*.b00.npy"))) == -(-len(docs) // 7) - 1
    _sign(docs, work, DedupConfig(chunk_docs=1000))
    assert not list((work / "shards").glob("s000000.p*"))
    assert shard_ok(work, 0, DedupConfig())
    assert find_duplicates(work, 1, DedupConfig()).read_bytes() == want


def _signing_peak(n: int, tmp: Path, chunk: int) -> int:
    gen = Generator(seed=n)
    docs = (Document(id=f"d{i:07d}", text=gen.text(8)) for i in range(n))
    tracemalloc.start()
    try:
        sign_shard(((d, 0) for d in docs), 0, tmp / f"n{n}", DedupConfig(chunk_docs=chunk))
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_signing_memory_is_flat_in_the_shard_size(tmp_path):
    """Peak traced memory (numpy's buffers included) of signing 2k and 8k tiny documents in parts
    of 500: the same part sizes, so the same peak; 8k signed as one part costs ~8x more."""
    small, big = (_signing_peak(n, tmp_path, 500) for n in (2000, 8000))
    assert big < 1.25 * small, (small, big)
    whole = _signing_peak(8000, tmp_path / "whole", 10**9)
    assert whole > 2.5 * big, (big, whole)


def test_a_shard_killed_between_parts_is_signed_again(tmp_path):
    """Parts already written when signing dies leave no shard marker (an earlier run's is deleted
    first): the shard is not trusted, is signed again (as the belt does) and gives the bytes of
    an uninterrupted run."""
    docs = [Document(id=r["id"], text=r["text"]) for r in _corpus()]
    cfg = DedupConfig(chunk_docs=20)
    ref = tmp_path / "ref"
    _sign(docs, ref, cfg)
    want = find_duplicates(ref, 1, cfg).read_bytes()

    def dying():
        for i, d in enumerate(docs):
            if i == 130:
                raise KeyboardInterrupt  # stands for SIGKILL: nothing after this line runs
            yield d, 0

    work = tmp_path / "work"
    _sign(docs[::-1], work, cfg)  # an earlier complete run on other input: its marker must not count
    assert shard_ok(work, 0, cfg)
    with pytest.raises(KeyboardInterrupt):
        sign_shard(dying(), 0, work, cfg)
    assert not shard_ok(work, 0, cfg)
    _sign(docs, work, cfg)
    assert shard_ok(work, 0, cfg)
    assert find_duplicates(work, 1, cfg).read_bytes() == want


def test_clustered_documents_match_component_sizes(monkeypatch):
    """Stage 4's members (chunked scan, one bool per document) against a bincount of component
    sizes, on random components whose label is their smallest index."""
    import numpy as np

    from pretrain.curate import dedup

    monkeypatch.setattr(dedup, "_LABEL_CHUNK", 7)  # many chunks
    rng = np.random.default_rng(0)
    comp = rng.integers(0, 60, 100)  # 100 documents in up to 60 components: singletons too
    labels = np.array([np.flatnonzero(comp == c)[0] for c in comp], np.int64)
    want = np.flatnonzero(np.bincount(labels, minlength=len(labels))[labels] > 1)
    assert 0 < len(want) < len(labels)
    assert np.array_equal(dedup._clustered(labels), want)
