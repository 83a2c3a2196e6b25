"""Real page pairs judged by people (Webis CopyCat): what the default setting flags, per grade.

Grades (label_raw) 3 > 2 > 1 > 0.5 rank how much of a duplicate a pair is. The pipeline runs on
all 960 pages at once (one shard) with the default config; a pair is flagged when its two pages
end in the same cluster.
"""

from __future__ import annotations

import gzip
import json
import math
from collections import defaultdict

import numpy as np
import pytest
from conftest import data_file

from pretrain.curate.dedup import DedupConfig, find_duplicates, load_removals, sign_shard
from pretrain.curate.document import Document
from pretrain.curate.minhash import MinHasher, estimate_jaccard, jaccard, shingle_hashes

GRADES = ["0.5", "1", "2", "3"]


@pytest.fixture(scope="module")
def pairs():
    path = data_file("near-dup/webis-copycat/canonical-link-pairs-human-judged.jsonl.gz")
    out = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            grade = rec["label_raw"].rstrip("s")  # one pair is labelled "0.5s"
            out.append((rec["pair_id"], grade, rec["src_doc"], rec["target_doc"]))
    return out


def test_flag_rate_rises_with_the_human_grade(pairs, tmp_path):
    docs = [Document(id=f"{pid}/{side}", text=t)
            for pid, _, a, b in pairs for side, t in (("a", a), ("b", b))]
    cfg = DedupConfig()
    sign_shard(((d, 0) for d in docs), 0, tmp_path, cfg)
    removed = load_removals(find_duplicates(tmp_path, 1, cfg))

    def cluster(doc_id):
        return removed[doc_id][2] if doc_id in removed else doc_id

    flagged = defaultdict(list)
    for pid, grade, _, _ in pairs:
        flagged[grade].append(cluster(f"{pid}/a") == cluster(f"{pid}/b"))
    print("\ngrade  pairs  flagged (default: 14x8, signature check 0.7)")
    for g in GRADES + ["unknown"]:
        print(f"  {g:>7} {len(flagged[g]):5d}  {np.mean(flagged[g]):.3f}")
    pos = sum(sum(flagged[g]) for g in ("2", "3"))
    all_flagged = sum(sum(flagged[g]) for g in GRADES)
    print(f"grades 2-3 as duplicates: precision {pos / all_flagged:.3f}, "
          f"recall {pos / (len(flagged['2']) + len(flagged['3'])):.3f}")
    rates = [np.mean(flagged[g]) for g in GRADES]
    assert rates == sorted(rates) and rates[0] < 0.25
    assert np.mean(flagged["3"]) >= 0.9


def test_estimates_track_the_true_jaccard_on_real_pages(pairs):
    hasher = MinHasher()
    z = []
    for _, _, a, b in pairs:
        sa, sb = shingle_hashes(a), shingle_hashes(b)
        if not (sa.size and sb.size):
            continue
        true_j = jaccard(set(sa.tolist()), set(sb.tolist()))
        sig = hasher.signatures([sa, sb])
        sigma = math.sqrt(max(true_j * (1 - true_j), 1e-4) / hasher.k)
        z.append((estimate_jaccard(sig[0], sig[1]) - true_j) / sigma)
    assert len(z) > 400
    assert abs(np.mean(z)) < 0.25
    assert np.mean(np.abs(np.array(z)) > 3) < 0.02
