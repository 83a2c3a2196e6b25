"""The loop end to end: loss falls on real text, the run directory contract, token shards, sample, export."""

from __future__ import annotations

import json
import math
import tomllib
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from pretrain.cli import main
from pretrain.train.data import BYTE_VOCAB, encode_text, read_text
from pretrain.train.metrics import read_metrics
from pretrain.train.testing import tiny_config
from pretrain.train.trainer import Trainer

ROOT = Path(__file__).resolve().parents[1]


pytestmark = pytest.mark.usefixtures("restore_torch_threads")


@pytest.fixture(scope="module")
def trained(tmp_path_factory, text):
    out = tmp_path_factory.mktemp("run")
    cfg = tiny_config(
        out,
        text,
        "train.steps=120",
        "model.seq_len=64",
        "data.batch_size=8",
        "precision.dtype=bf16",
        "log.eval_every=40",
        "log.eval_batches=4",
        "log.tensorboard=true",
        "checkpoint.every=0",
        "checkpoint.first_at=30",
        "log.peak_flops=1e11",
    )
    t = Trainer(cfg, quiet=True)
    t.fit()
    return out, t


def _unigram_entropy_nats(ids: np.ndarray) -> float:
    counts = np.array(list(Counter(ids.tolist()).values()), dtype=np.float64)
    p = counts / counts.sum()
    return float(-(p * np.log(p)).sum())


def test_loss_falls_below_the_unigram_entropy_of_held_out_text(trained, text):
    # Independent bar: a model that only knew byte frequencies would score the held-out text's unigram
    # entropy; falling below it means the model uses context. It starts near ln(257) = 5.55.
    out, t = trained
    ids, _ = encode_text(read_text(text))
    held_out = ids[int(ids.size * 0.95) :]
    _, events = read_metrics(out / "metrics.jsonl")
    evals = [e["eval_loss"] for e in events if e["event"] == "eval"]
    assert len(evals) == 3
    assert evals[0] > evals[-1]
    assert evals[-1] < _unigram_entropy_nats(held_out)


def test_run_directory_contract(trained):
    out, t = trained
    steps, events = read_metrics(out / "metrics.jsonl")
    assert [r["step"] for r in steps] == list(range(1, 121))
    for key in ("step", "loss", "lr", "grad_norm", "tokens_per_s", "loss_scale", "mfu"):
        assert all(key in r for r in steps), key
    assert 0 < steps[-1]["mfu"] < 10  # tokens/s x plan FLOPs/token / the configured peak
    assert {"checkpoint", "eval"} <= {e["event"] for e in events}
    cfg = tomllib.loads((out / "config.toml").read_text())
    assert cfg["model"]["d_model"] == 64 and cfg["model"]["n_layers"] == 2  # the shape, spelled out
    assert list((out / "tensorboard").glob("events.out.tfevents.*"))
    ckpts = sorted(p.name for p in (out / "checkpoints").iterdir() if p.is_dir())
    assert ckpts[-1] == "step_0000120" and all(p.startswith("step_") and len(p) == 12 for p in ckpts)
    files = {p.name for p in (out / "checkpoints").iterdir() if not p.is_dir()}
    assert files == {"save_interval.json"}  # checkpoint.every=0: Young's interval, kept from its measurement


def test_young_interval_sets_checkpoint_spacing(trained):
    # checkpoint.every = 0: the first save measures C; later saves are sqrt(2 C M) apart in wall time,
    # which for a tiny fast model and M = 180 min is far beyond this run: only first_at and the final save.
    out, t = trained
    _, events = read_metrics(out / "metrics.jsonl")
    saved = [e["step"] for e in events if e["event"] == "checkpoint"]
    assert saved == [30, 120]
    assert t.next_save > 120


def test_sample_prints_control_characters_escaped(trained, capsys):
    """The text `sample` prints is what a run's model and tokenizer decode to, and a run may be
    someone else's: ESC ] 52 writes the clipboard on some terminals. Here the prompt (echoed with
    the continuation) carries the sequence; it is printed escaped, newlines kept."""
    out, _ = trained
    assert main(["sample", str(out), "--prompt", "a\x1b]52;c;aGk=\x07\nb", "--tokens", "2",
                 "--temperature", "0"]) == 0
    printed = capsys.readouterr().out
    assert "\x1b" not in printed and "\x07" not in printed
    assert printed.startswith("a\\x1b]52;c;aGk=\\x07\nb")


def test_sample_and_export_round_trip(trained, tmp_path, capsys):
    out, t = trained
    assert main(["sample", str(out), "--prompt", "The ", "--tokens", "20", "--temperature", "0"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("The ")
    st = tmp_path / "m.safetensors"
    assert main(["export", str(out), "-o", str(st)]) == 0
    from safetensors import safe_open

    from pretrain.train.runs import load_exported, load_run_model

    with safe_open(str(st), "pt") as f:
        meta = f.metadata()
        assert "d_model = 64" in meta["config"] and meta["step"] == "120"
    model, cfg, _ = load_run_model(out)
    again = load_exported(st, cfg)
    x = torch.randint(0, BYTE_VOCAB, (1, 16))
    assert torch.equal(model(x), again(x))
    assert torch.equal(model(x), t.model.eval()(x))  # the checkpoint holds the trained weights


def test_an_exported_file_is_as_readable_as_any_new_file(trained, tmp_path):
    """safetensors' save_file writes 0600: `export -o m.safetensors` made a model its owner alone
    could read on a shared machine, while `--format hf` wrote its weights 0644. The truth is the
    mode open() gives a new file here, under this process's umask."""
    out, _ = trained
    plain = tmp_path / "plain"
    plain.write_bytes(b"")
    hf = tmp_path / "hf"
    for args, weights in ((["-o", str(tmp_path / "m.safetensors")], tmp_path / "m.safetensors"),
                          (["--format", "hf", "-o", str(hf)], hf / "model.safetensors")):
        assert main(["export", str(out), *args]) == 0
        assert oct(weights.stat().st_mode & 0o777) == oct(plain.stat().st_mode & 0o777), args


def _byte_token_dir(path: Path, text: Path) -> Path:
    """The text as a token directory in the tokens engineer's format (bytes, end-of-text 256)."""
    from pretrain.tokens import shards

    raw = read_text(text)[:200_000]
    docs = [np.frombuffer(p.encode(), dtype=np.uint8).astype(np.int64) for p in raw.split("\n\n") if p]
    path.mkdir(parents=True)
    t, n = shards.write_shard(path, shards.shard_name(0), docs, np.dtype("<u2"), 256)
    shards.write_manifest(
        path,
        {
            "dtype": "uint16",
            "eot_id": 256,
            "vocab_size": BYTE_VOCAB,
            "tokenizer": {"sha256": "bytes"},
            "tokens": t,
            "documents": n,
            "shards": [{"bin": "shard_00000.bin", "idx": "shard_00000.idx", "tokens": t, "documents": n}],
            "sources": {"text": {"tokens": t, "documents": n}},
        },
    )
    return path


def test_token_shards_train_and_resume_exactly(tmp_path, text):
    pytest.importorskip("pretrain.tokens.mixture")
    src = _byte_token_dir(tmp_path / "tok", text)
    over = ["data.kind=tokens", f'data.sources={{a="{src}"}}', "data.weights={a=1.0}", "train.steps=16"]
    full = Trainer(tiny_config(tmp_path / "full", "", *over), quiet=True)
    ref = {r["step"]: r["loss"] for r in full.fit()}
    first = Trainer(tiny_config(tmp_path / "half", "", *over, "train.stop_at=8"), quiet=True).fit()
    t = Trainer(tiny_config(tmp_path / "half", "", *over), quiet=True)
    rest = t.fit()
    assert {r["step"]: r["loss"] for r in first + rest} == ref
    assert t.loader.state_dict() == full.loader.state_dict()
    assert ref[16] < ref[1]


def test_cli_train_writes_resolved_config(tmp_path, text, capsys):
    cfg = tmp_path / "r.toml"
    from pretrain import config as cfgmod

    cfg.write_text(cfgmod.dumps(tiny_config(tmp_path / "run", text, "train.steps=3")))
    assert main(["train", str(cfg), "--set", "optim.lr=1e-3", "--quiet"]) == 0
    saved = tomllib.loads((tmp_path / "run" / "config.toml").read_text())
    assert saved["optim"]["lr"] == 1e-3 and saved["train"]["steps"] == 3
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in lines if "event" not in json.loads(x)] == [1, 2, 3]
    assert math.isfinite(json.loads(lines[0])["loss"])


def test_bad_config_is_a_clear_error(tmp_path, text, capsys):
    cfg = tmp_path / "r.toml"
    cfg.write_text('[model]\npreset = "tiny-cpu"\nd_model = 100\nn_heads = 3\n')
    assert main(["train", str(cfg), "--set", f"data.path={text}", "--dry-run"]) == 2
    assert "n_heads" in capsys.readouterr().err


def test_activation_checkpointing_changes_memory_not_results(tmp_path, text):
    # Recomputing each block's activations in backward gives the same numbers (fp32, one thread).
    plain = Trainer(tiny_config(tmp_path / "a", text, "train.steps=3"), quiet=True).fit()
    ac = Trainer(
        tiny_config(tmp_path / "b", text, "train.steps=3", "parallel.activation_checkpointing=full"),
        quiet=True,
    )
    assert "_checkpoint_wrapped_module" in next(n for n, _ in ac.model.named_parameters() if "layers" in n)
    assert [r["loss"] for r in ac.fit()] == [r["loss"] for r in plain]
