"""One corpus job layer: the regressions of issue 13, each caught again by a test.

Every corpus command (curate, dedup, decontaminate) runs on the same driver, so each contract is
checked against each command: a rerun into OUT with other inputs or config is refused; OUT/data and
OUT/rejects hold only `*.jsonl.zst` that `datasets` and datatrove read back exactly; files honour
the umask; the funnel keeps belt order and adds seconds over attempts; a job that read nothing fails
loudly; an unreachable Ray address fails in one line.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from test_pipeline import DEMO, _ids, _prose, _write_jsonl_corpus

from pretrain.cli import main
from pretrain.curate import io
from pretrain.curate.executor import LocalExecutor
from pretrain.curate.pipeline import CurateConfig, curate
from pretrain.curate.report import funnel_rows
from pretrain.curate.step import Step

ROOT = Path(__file__).resolve().parents[1]
PEERS_PY = ROOT / ".venv-peers" / "bin" / "python"
SRC = str(ROOT / "src")


def _bench(folder: Path, text: str) -> str:
    """A one-item benchmark file whose question is `text`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "bench.jsonl").write_text(json.dumps({"question": text}) + "\n")
    return f"{folder / 'bench.jsonl'}:question"


def _command(job: str, inputs: list[Path], out: Path, bench: str, extra: list[str] = ()) -> list[str]:
    args = [job, *map(str, inputs), "-o", str(out), "--workers", "1", "--quiet", *extra]
    return args + (["--benchmarks", bench] if job == "decontaminate" else [])


@pytest.mark.parametrize("job", ["curate", "dedup", "decontaminate"])
def test_rerun_with_other_inputs_or_config_is_refused(tmp_path, capsys, job):
    a, b = tmp_path / "A.jsonl", tmp_path / "B.jsonl"
    docs = _prose(12, seed=3)
    a.write_text("".join(json.dumps({"id": f"a{i}", "text": t}) + "\n" for i, t in enumerate(docs[:4])))
    b.write_text("".join(json.dumps({"id": f"b{i}", "text": t}) + "\n" for i, t in enumerate(docs[4:])))
    bench = _bench(tmp_path / "bench", docs[0])
    out = tmp_path / "out"
    assert main(_command(job, [a], out, bench)) == 0
    before = {p.name: p.read_bytes() for p in (out / "data").iterdir()}
    plan = json.loads((out / "plan.json").read_text())
    assert plan["inputs"] == [{"path": str(a.resolve()), "size": a.stat().st_size}]
    capsys.readouterr()
    assert main(_command(job, [b], out, bench)) == 2  # other inputs
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "other input" in err and "new --output" in err
    assert main(_command(job, [a], out, bench, ["--set", "dedup.bands=20"])) == 2  # other config
    assert "dedup settings differ" in capsys.readouterr().err
    a.write_text(a.read_text() + json.dumps({"id": "late", "text": docs[11]}) + "\n")
    assert main(_command(job, [a], out, bench)) == 2  # the same file, changed since
    assert "changed since" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in (out / "data").iterdir()} == before  # nothing mixed in
    assert main(_command(job, [b], tmp_path / "fresh", bench)) == 0
    assert set(_ids(tmp_path / "fresh", "data")) <= {f"b{i}" for i in range(8)}


# FineWeb's order as the docs give it (datatrove examples/fineweb.py), not read from our code.
FINEWEB_ORDER = ["url_filter", "extract", "language", "gopher_repetition", "gopher_quality", "c4_quality",
                 "fineweb_quality", "exact_dedup", "near_dedup"]


def test_funnel_keeps_belt_order_and_seconds_add_over_attempts(tmp_path):
    out = tmp_path / "out"
    first = curate([str(DEMO)], out, CurateConfig(), executor=LocalExecutor(1))
    assert first["step_order"] == [s for s in FINEWEB_ORDER if s in first["steps"]]
    assert first["step_order"][:3] == ["extract", "language", "gopher_repetition"]
    # A second attempt that finds the per-shard work done (as after a SIGKILL in the dedup stage):
    # the shard stats come back from disk, written with sorted keys.
    for marker in (out / "work" / "done").glob("write_*.done"):
        marker.unlink()
    (out / "stats.json").unlink()
    time.sleep(0.05)
    again = curate([str(DEMO)], out, CurateConfig(), executor=LocalExecutor(1))
    assert again["step_order"] == first["step_order"]
    on_disk = json.loads((out / "stats.json").read_text())
    assert [r[0] for r in funnel_rows(on_disk)] == [s for s in first["step_order"] if first["steps"][s]["in"]]
    # the filter work was done once, by the first attempt: its seconds are carried, not zeroed
    assert again["steps"]["extract"]["seconds"] == first["steps"]["extract"]["seconds"] > 0
    attempts = json.loads((out / "work" / "attempts.json").read_text())["seconds"]
    assert len(attempts) == 2 and again["wall_seconds"] == pytest.approx(sum(attempts), abs=0.01)
    assert again["wall_seconds"] >= first["wall_seconds"]



def test_a_rerun_of_a_finished_job_reads_each_done_marker_once_per_check(tmp_path, monkeypatch):
    """Skipping done work read each marker twice (is it done? then its counts): once now; the
    filter marker is asked twice, by the driver (input stamps) and by stage A (skip the shard)."""
    out = tmp_path / "out"
    first = curate([str(DEMO)], out, CurateConfig(), executor=LocalExecutor(1))
    reads: list[str] = []
    read_text = Path.read_text

    def counted(self, *a, **k):
        if self.suffix == ".done":
            reads.append(self.name)
        return read_text(self, *a, **k)

    monkeypatch.setattr(Path, "read_text", counted)
    again = curate([str(DEMO)], out, CurateConfig(), executor=LocalExecutor(1))
    assert again["steps"] == first["steps"]  # nothing ran again
    counts = Counter(reads)
    assert {"filter_00000.done", "write_00000.done", "removals.done"} <= set(counts)  # 4, 3, 2 before
    assert counts.pop("filter_00000.done") == 2 and set(counts.values()) == {1}


def _peer_ids(folder: Path) -> list[str]:
    code = ("import json,sys\nfrom datatrove.pipeline.readers import JsonlReader\n"
            "print(json.dumps([d.id for d in JsonlReader(sys.argv[1])()]))")
    cmd = [str(PEERS_PY), "-c", code, str(folder)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "error" not in res.stderr.lower(), res.stderr[-2000:]
    return json.loads(res.stdout)


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_layout_modes_and_peer_readers(tmp_path, umask):
    _write_jsonl_corpus(tmp_path / "in", files=3, per_file=10)
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=SRC)
    res = subprocess.run([sys.executable, "-m", "pretrain", "dedup", str(tmp_path / "in"), "-o", str(out),
                          "--workers", "2", "--quiet"], env=env, capture_output=True, text=True,
                         timeout=300, preexec_fn=lambda: os.umask(umask))
    assert res.returncode == 0, res.stderr
    for sub in ("data", "rejects"):
        names = [p.name for p in (out / sub).iterdir()]
        assert names and all(n.endswith(".jsonl.zst") and not n.startswith(".") for n in names), names
    files = [p for p in out.rglob("*") if p.is_file()]
    assert {stat.S_IMODE(p.stat().st_mode) for p in files} == {0o666 & ~umask}
    kept = _ids(out, "data")
    assert len(kept) == 30 + 4 - 4  # the planted exact and near twins are gone
    if umask != 0o022:
        return
    datasets = pytest.importorskip("datasets")
    ds = datasets.load_dataset("json", data_dir=str(out / "data"), split="train",
                               cache_dir=str(tmp_path / "hf"))
    assert sorted(ds["id"]) == sorted(kept)
    if not PEERS_PY.exists():
        pytest.skip("datatrove's side needs .venv-peers (make peers)")
    has_zstd = subprocess.run([str(PEERS_PY), "-c", "import zstandard"], capture_output=True).returncode == 0
    if not has_zstd:
        pytest.skip("datatrove reads .jsonl.zst through fsspec, which needs zstandard in .venv-peers")
    assert sorted(_peer_ids(out / "data")) == sorted(kept)


def test_rejects_have_one_shape_in_every_job(tmp_path):
    truth = _write_jsonl_corpus(tmp_path / "in", files=2, per_file=8)
    bench = _bench(tmp_path / "bench", _prose(8)[3])
    for job in ("curate", "dedup", "decontaminate"):
        assert main(_command(job, [tmp_path / "in"], tmp_path / job, bench)) == 0
        rejects = list(_ids(tmp_path / job, "rejects").values())
        assert rejects, job
        for r in rejects:
            assert {"id", "url", "source", "step", "reason", "metadata", "text", "text_chars"} <= set(r)
            assert len(r["text"]) <= min(2000, r["text_chars"])
        twins = {r["id"]: r["kept_id"] for r in rejects if r["step"].endswith("_dedup")}
        if job != "decontaminate":
            assert twins == dict(truth["exact"] + truth["near"])
        stats = json.loads((tmp_path / job / "stats.json").read_text())
        assert stats["job"] == job and stats["documents"]["read"] == 18


def test_report_renders_every_job(tmp_path):
    from pretrain.report import write_report

    _write_jsonl_corpus(tmp_path / "in", files=2, per_file=8)
    bench = _bench(tmp_path / "bench", _prose(8)[3])
    for job in ("dedup", "decontaminate"):
        assert main(_command(job, [tmp_path / "in"], tmp_path / job, bench)) == 0
    page = write_report([tmp_path / "dedup", tmp_path / "decontaminate"], tmp_path / "r.html").read_text()
    assert "Corpus: dedup" in page and "Corpus: decontaminate" in page
    assert "near_dedup" in page and "benchmark_overlap" in page
    assert page.count("<h3>Examples of rejects</h3>") == 2


def test_job_that_read_nothing_fails_and_says_why(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    (d / "empty.jsonl.zst").write_bytes(b"")
    whole = io.dumps_line({"id": "x", "text": "some words here"}) * 200
    import zstandard

    (d / "trunc.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(whole)[:-30])
    (d / "binary.jsonl").write_bytes(bytes(range(256)) * 8)
    res = subprocess.run([sys.executable, "-m", "pretrain", "dedup", str(d), "-o", str(tmp_path / "out"),
                          "--workers", "1", "--quiet"], env=dict(os.environ, PYTHONPATH=SRC),
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 1
    assert "first" in res.stdout and "trunc.jsonl.zst: record" in res.stdout and "binary.jsonl" in res.stdout
    assert res.stderr.strip().count("\n") == 0 and "no document could be read" in res.stderr


def test_unreachable_ray_address_is_one_line_fast(tmp_path):
    pytest.importorskip("ray")
    src = tmp_path / "a.jsonl"
    src.write_text(json.dumps({"id": "a", "text": "hello there"}) + "\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: nobody answers
        t0 = time.time()
        res = subprocess.run([sys.executable, "-m", "pretrain", "curate", str(src), "-o", str(tmp_path / "o"),
                              "--executor", "ray", "--address", f"127.0.0.1:{port}", "--quiet"],
                             env=dict(os.environ, PYTHONPATH=SRC), capture_output=True, text=True, timeout=60)
    assert time.time() - t0 < 30
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and f"127.0.0.1:{port}" in res.stderr


def test_an_open_port_that_is_not_rays_is_one_line_fast(monkeypatch):
    """`--address` at a port where something else listens (an S3 server's) waited over 90 s in
    Ray's retries: a probe (HTTP/2 preface; Ray's head is a gRPC server) refuses it at once, naming
    the address; a gRPC server passes it, as does Ray's head (the Ray cluster tests join one)."""
    grpc = pytest.importorskip("grpc")
    from concurrent import futures

    from pretrain.curate import executor
    from pretrain.errors import UserError

    monkeypatch.setattr(executor, "CONNECT_TIMEOUT_S", 0.5)
    # an HTTP/1 server (as moto), a silent one
    for reply in (b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", None):
        with socket.socket() as srv:
            srv.bind(("127.0.0.1", 0))
            srv.listen()
            port = srv.getsockname()[1]

            def answer(srv=srv, reply=reply):
                conn, _ = srv.accept()
                with conn:
                    if reply:
                        conn.recv(64)
                        conn.sendall(reply)
                    else:
                        time.sleep(1)
            t = threading.Thread(target=answer, daemon=True)
            t.start()
            with pytest.raises(UserError) as e:
                executor._check_reachable(f"127.0.0.1:{port}")
            t.join()
        said = str(e.value)
        assert f"no Ray cluster at 127.0.0.1:{port}" in said and "\n" not in said
        assert ("HTTP/1.1 400" in said) if reply else ("no answer in 0.5 s" in said)
    server = grpc.server(futures.ThreadPoolExecutor(1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        executor._check_reachable(f"127.0.0.1:{port}")
        executor._check_reachable(f"ray://127.0.0.1:{port}")
    finally:
        server.stop(None)


class Shout(Step):
    """A user's own step (imported by `test_job:Shout`): drops documents that shout."""

    name = "shout"

    def process(self, doc):
        upper = sum(c.isupper() for c in doc.text) / max(1, len(doc.text))
        if upper > 0.5:
            self.drop(doc, "shouting")
            return None
        doc.metadata["upper_share"] = round(upper, 4)
        return doc

    def measured(self, doc, reason):
        return {"value": sum(c.isupper() for c in doc.text) / len(doc.text), "threshold": 0.5}


def test_steps_are_a_list_the_user_writes(tmp_path):
    docs = _prose(6, seed=5)
    rows = [{"id": f"d{i}", "text": t} for i, t in enumerate(docs)]
    rows[2]["text"] = rows[2]["text"].upper()
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    args = ["curate", str(tmp_path / "in.jsonl"), "-o", str(out), "--workers", "1", "--quiet",
            "--set", 'steps=["test_job:Shout", "language", "dedup"]', "--set", "language.threshold=0.99"]
    assert main(args) == 0
    stats = json.loads((out / "stats.json").read_text())
    assert stats["step_order"] == ["shout", "language", "exact_dedup", "near_dedup"]
    assert stats["steps"]["shout"]["dropped"] == {"shouting": 1}
    rejects = _ids(out, "rejects")
    shout = rejects["d2"]
    assert shout["step"] == "shout" and shout["value"] > 0.5 and shout["threshold"] == 0.5
    # the language step measured a score under its threshold: both are in the reject, and the
    # score of every kept document is in its metadata (re-tune the threshold without recomputing)
    low = [r for r in rejects.values() if r["reason"] == "low_language_score"]
    assert low and all(r["value"] == r["metadata"]["language_score"] < r["threshold"] == 0.99 for r in low)
    for rec in _ids(out, "data").values():
        assert rec["metadata"]["language_score"] >= 0.99 and "upper_share" in rec["metadata"]
    assert main(["curate", str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "o2"), "--quiet",
                 "--set", 'steps=["dedup", "language"]']) == 2  # dedup is global: last
    assert main(["curate", str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "o3"), "--quiet",
                 "--set", 'steps=["nosuch.module:Step"]']) == 2
    assert not (tmp_path / "o3").exists()
