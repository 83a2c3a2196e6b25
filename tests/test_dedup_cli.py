"""`pretrain dedup`: the output contract, --explain, and resuming after SIGKILL."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import zstandard

from pretrain.cli import main
from pretrain.curate import io
from pretrain.curate.dedup import load_removals
from pretrain.curate.dedup_synth import planted_corpus


def _write_corpus(folder: Path, pairs_per_level: int = 20, n_words: int = 150) -> None:
    docs, _ = planted_corpus([0.3, 0.9, 0.95], pairs_per_level, n_words=n_words, singles=20, seed=21)
    lines = [json.dumps({"id": i, "text": t, "url": f"https://example.org/{i}"}) for i, t in docs]
    lines += [json.dumps({"id": f"copy-{i}", "text": docs[i][1].upper()}) for i in range(5)]
    third = len(lines) // 3
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "a.jsonl").write_text("\n".join(lines[:third] + ["{not json"]) + "\n")
    with gzip.open(folder / "b.jsonl.gz", "wt") as f:
        f.write("\n".join(lines[third : 2 * third]) + "\n")
    rest = [json.loads(line) for line in lines[2 * third :]]
    half = len(rest) // 2
    (folder / "c.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(
        "".join(json.dumps(r) + "\n" for r in rest[:half]).encode()))
    pq.write_table(pa.Table.from_pylist([{"id": r["id"], "text": r["text"]} for r in rest[half:]]),
                   folder / "d.parquet")


def _read_all(folder: Path) -> list[dict]:
    return [r for f in sorted(folder.glob("*.jsonl.zst")) for r in io.read_jsonl_zst(f)]


def test_output_contract(tmp_path, capsys):
    _write_corpus(tmp_path / "in")
    out = tmp_path / "out"
    assert main(["dedup", str(tmp_path / "in"), "--output", str(out), "--workers", "1", "--quiet"]) == 0
    kept, rejects = _read_all(out / "data"), _read_all(out / "rejects")
    stats = json.loads((out / "stats.json").read_text())
    kept_ids = {r["id"] for r in kept}
    assert stats["documents"]["read"] == len(kept) + len(rejects) == 20 * 3 * 2 + 20 + 5
    assert stats["errors"]["count"] == 1 and stats["errors"]["examples"][0]["file"].endswith("a.jsonl")
    assert {r["step"] for r in rejects} == {"exact_dedup", "near_dedup"}
    assert all(r["kept_id"] in kept_ids for r in rejects)
    assert sum(stats["steps"]["exact_dedup"]["dropped"].values()) == 5
    assert sum(1 for r in rejects if r["step"] == "near_dedup") >= 38  # the 40 pairs at J >= 0.9
    near = [r for r in rejects if r["step"] == "near_dedup"]
    assert not [r for r in near if r["id"].startswith("p00-")]  # J = 0.3 pairs are no near duplicates
    assert {"id", "text", "url", "source", "metadata"} <= set(kept[0])
    assert (out / "config.toml").exists()
    again = ["dedup", str(tmp_path / "in"), "--output", str(out), "--workers", "1", "--quiet"]
    assert main(again) == 0  # a finished run: everything skipped, same answer
    assert _read_all(out / "data") == kept
    assert main(again + ["--set", "dedup.bands=20"]) == 2  # another config never mixes in
    assert "a different config: dedup settings differ" in capsys.readouterr().err


def test_explain_prints_the_s_curve(capsys):
    assert main(["dedup", "--explain", "--set", "dedup.bands=20", "--set", "dedup.rows=5"]) == 0
    text = capsys.readouterr().out
    assert f"{1 - (1 - 0.8**5) ** 20:10.4f}" in text and "0.9996" in text
    assert f"{(1 / 20) ** (1 / 5):.3f}" in text


def test_sigkill_then_rerun_gives_the_same_result(tmp_path):
    _write_corpus(tmp_path / "in", pairs_per_level=300, n_words=200)
    cmd = [sys.executable, "-m", "pretrain", "dedup", str(tmp_path / "in"), "--workers", "1", "--quiet"]
    ref = tmp_path / "ref"
    subprocess.run(cmd + ["-o", str(ref)], check=True, capture_output=True, timeout=300)
    out = tmp_path / "out"
    for delay in (0.8, 1.6, 2.4):
        proc = subprocess.Popen(cmd + ["-o", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    subprocess.run(cmd + ["-o", str(out)], check=True, capture_output=True, timeout=300)
    removals = "work/dedup/removals.jsonl.zst"
    assert load_removals(out / removals) == load_removals(ref / removals)
    for sub in ("data", "rejects"):
        for f in sorted((ref / sub).glob("*.jsonl.zst")):
            assert (out / sub / f.name).read_bytes() == f.read_bytes()
