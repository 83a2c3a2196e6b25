"""Degenerate numbers (session 7): every numeric key of the configs of `pretrain train` and `pretrain
curate`, swept over 0, -1, 1, NaN, inf and a huge value (1e30; 2**62 and 10**30 for integers). Each is
either accepted by every check made before anything is built (then the run fits in memory: no
allocation of gigabytes) or refused in one line naming the key and the value, never a traceback;
a probability key of the language step accepts nothing outside [0, 1].
The keys come from the config classes, and the options of `eval`, `plan` and `tokens inspect` from
their parsers, so a key or an option added later is swept too. ~30 s on the shared 2-core machine."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from test_config_bounds import fields

from pretrain import config as cfgmod
from pretrain.errors import UserError

pytestmark = pytest.mark.usefixtures("restore_torch_threads")  # runs and evals set torch's threads

INT_VALUES = (0, -1, 1, 2**62, 10**30)
FLOAT_VALUES = (0.0, -1.0, 1.0, math.nan, math.inf, 1e30)


def numeric_keys(cls: type) -> list[tuple[str, type]]:
    """(dotted key, int or float) of every numeric field, `X | None` included (lists left out)."""
    return [(key, typ) for key, typ, _ in fields(cls) if typ in (int, float)]


def _literal(v) -> str:
    """`--set key=VALUE` text TOML reads back as v."""
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    if isinstance(v, float) and math.isinf(v):
        return "inf"
    return repr(v)


def _sweep(key: str, typ: type, check) -> list[str]:
    """The values the checks accept (a refusal must be one line naming the key and the value)."""
    accepted = []
    for v in INT_VALUES if typ is int else FLOAT_VALUES:
        try:
            check(f"{key}={_literal(v)}")
        except UserError as e:
            said = str(e)
            assert "\n" not in said, said
            assert key.rsplit(".", 1)[-1] in said, f"{key}={v}: {said}"  # names the key
            shown = {f"{v}", f"{v:,}" if typ is int else f"{v}", repr(v), f"{float(v)}"}
            assert any(s in said for s in shown), f"{key}={v}: {said}"  # and the value
        else:
            accepted.append(_literal(v))
    return accepted


def _train(override: str) -> None:
    from pretrain.train.config import RunConfig
    from pretrain.train.fits import preflight
    from pretrain.train.testing import TINY

    cfg = cfgmod.load(RunConfig, None, [*TINY, "data.path=unused.txt", override])
    preflight(cfg, 1, torch.device("cpu"))


def _curate(override: str) -> None:
    from pretrain.curate.pipeline import CurateConfig, build_steps

    build_steps(cfgmod.load(CurateConfig, None, [override]))


def _train_keys():
    from pretrain.train.config import RunConfig

    return numeric_keys(RunConfig)


def _curate_keys():
    from pretrain.curate.pipeline import CurateConfig

    return numeric_keys(CurateConfig)


@pytest.mark.parametrize("key,typ", _train_keys(), ids=lambda x: x if isinstance(x, str) else "")
def test_train_key(key, typ):
    accepted = _sweep(key, typ, _train)
    assert "nan" not in accepted and "inf" not in accepted and str(10**30) not in accepted


@pytest.mark.parametrize("key,typ", _curate_keys(), ids=lambda x: x if isinstance(x, str) else "")
def test_curate_key(key, typ):
    accepted = _sweep(key, typ, _curate)
    assert "nan" not in accepted and "inf" not in accepted and str(10**30) not in accepted
    if key.startswith("language.") and typ is float:
        # fastText's and CLD3's probabilities and the stop-word share lie in [0, 1]: a threshold
        # of 1e30 dropped every document, silently
        assert set(accepted) <= {"0.0", "1.0"}, accepted
    if key == "language.sample_windows":  # 2**62 windows of a 150-character sample looped forever
        assert accepted == ["1"], accepted


def test_train_runs_with_the_huge_values_it_accepts(tmp_path, text):
    """The integer keys that take 2**62 (a seed, a step count, an interval, a count of rollbacks)
    mean it: the first step of a tiny run trains with each, no allocation, no overflow."""
    from pretrain.train.testing import tiny_config
    from pretrain.train.trainer import Trainer

    huge = [key for key, typ in _train_keys() if typ is int and str(2**62) in _sweep(key, typ, _train)]
    assert "train.seed" in huge and "model.seq_len" not in huge and "data.batch_size" not in huge
    for i, key in enumerate(k for k in huge if k != "train.stop_at"):  # stop_at: as train.steps
        cfg = tiny_config(tmp_path / str(i), text, "log.tensorboard=false", "checkpoint.every=0",
                          "model.n_layers=1", "model.d_model=32", "model.d_ff=64", "data.batch_size=2",
                          f"train.steps={2**62}", f"{key}={2**62}")
        t = Trainer(cfg, quiet=True)
        rec = t.train_step()  # fit's loop body, without the final save (a DCP save is ~0.5 s)
        t.maybe_eval()
        t.maybe_save()
        assert rec is not None and math.isfinite(rec["loss"]), key


# --- the numeric options of `eval`, `plan` and `tokens inspect`, taken from their parsers ------------

def numeric_options(command: str, action: str | None = None) -> list[tuple[str, type]]:
    from pretrain.cli import _subparser, build_parser

    sub = _subparser(build_parser(), command)
    if action is not None:  # `pretrain tokens inspect`: a parser under the command's
        sub = _subparser(sub, action)
    return [(a.option_strings[-1], getattr(a.type, "typ", a.type)) for a in sub._actions  # noqa: SLF001
            if a.option_strings and getattr(a.type, "typ", a.type) in (int, float)]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, text) -> Path:
    from pretrain.train.testing import tiny_config
    from pretrain.train.trainer import Trainer

    d = tmp_path_factory.mktemp("sweep")
    Trainer(tiny_config(d / "run", text, "train.steps=1", "model.n_layers=1", "model.d_model=32",
                        "model.d_ff=64", "log.tensorboard=false"), quiet=True).fit()
    (d / "v.txt").write_text("To be, or not to be, that is the question. " * 3)
    return d


def _flag_sweep(argv: list[str], flag: str, typ: type, capsys) -> None:
    from pretrain.cli import main

    values = ["0", "-1", "1", str(10**30)] + (["nan", "inf"] if typ is float else [])
    for v in values:
        capsys.readouterr()
        rc = main([*argv, flag, v])  # an exception (a traceback) fails the test
        err = capsys.readouterr().err
        assert rc in (0, 1, 2), (flag, v, rc)
        if rc == 2:  # one line, naming the option and the value as it reads it (1e+30, 1,000,...)
            line = err.strip().splitlines()[-1]
            shown = {v, repr(float(v)), f"{int(v):,}" if v.lstrip("-").isdigit() else v}
            assert err.count("error:") == 1 and any(s in line for s in shown), (flag, v, err)
            assert flag in line or flag == "--seq-len", (flag, v, err)  # seq-len: "no sequence of N"


@pytest.mark.parametrize("flag,typ", numeric_options("eval"), ids=lambda x: x if isinstance(x, str) else "")
def test_eval_option(flag, typ, tiny_run, capsys):
    run = tiny_run / "run"
    _flag_sweep(["eval", str(run), "--tasks", f"ppl:{tiny_run / 'v.txt'}", "--quiet",
                 "-o", str(tiny_run / "e.json")], flag, typ, capsys)


@pytest.mark.parametrize("flag,typ", numeric_options("plan"), ids=lambda x: x if isinstance(x, str) else "")
def test_plan_option(flag, typ, capsys):
    _flag_sweep(["plan", "--model", "gpt2-124m", "--gpus", "8", "--json"], flag, typ, capsys)


@pytest.fixture(scope="module")
def token_dir(tmp_path_factory) -> Path:
    from pretrain.curate.io import write_jsonl_zst
    from pretrain.tokens.pipeline import tokenize_corpus
    from pretrain.tokens.tokenizer import train_tokenizer

    root = tmp_path_factory.mktemp("tokens")
    texts = [f"document {i}: the river carries sand to the delta." * (1 + i % 3) for i in range(20)]
    write_jsonl_zst(root / "a.jsonl.zst", [{"text": t} for t in texts])
    train_tokenizer(texts, vocab_size=300).save(str(root / "tok.json"))
    tokenize_corpus([str(root / "a.jsonl.zst")], root / "tok.json", root / "tokens", workers=1)
    return root / "tokens"


@pytest.mark.parametrize("flag,typ", numeric_options("tokens", "inspect"),
                         ids=lambda x: x if isinstance(x, str) else "")
def test_tokens_inspect_option(flag, typ, token_dir, capsys):
    _flag_sweep(["tokens", "inspect", str(token_dir)], flag, typ, capsys)


# --- the preflight's estimate against what the trainer's step holds (session 8) ----------------------

SMALL_HEAD = ("log.tensorboard=false", "checkpoint.every=0", "model.n_layers=1", "model.d_model=32",
              "model.d_ff=64", "model.n_heads=2", "model.n_kv_heads=1", "model.seq_len=64")


def _loss_peaks(tmp_path, text, dtype: str, vocab: int, chunks: int) -> tuple[float, float]:
    """(measured, estimated) bytes per token that the trainer's own forward and backward
    (Trainer._forward_backward) add from batch 2 to batch 6: each storage counted live on the CPU
    (test_plan_activations_peers._LiveBytes) against fits.estimate's activations and loss."""
    from test_plan_activations_peers import _LiveBytes

    from pretrain.train.fits import estimate
    from pretrain.train.model import resolve_shape
    from pretrain.train.parallel import dims_from_config
    from pretrain.train.testing import tiny_config
    from pretrain.train.trainer import Trainer

    measured, estimated = [], []
    for batch in (2, 6):
        cfg = tiny_config(tmp_path / f"{dtype}-{vocab}-{chunks}-{batch}", text, *SMALL_HEAD,
                          f"model.vocab_size={vocab}", f"data.batch_size={batch}",
                          f"precision.dtype={dtype}", f"train.loss_chunks={chunks}")
        trainer = Trainer(cfg, quiet=True)
        live = _LiveBytes()
        with live:
            trainer._forward_backward(1)  # noqa: SLF001
        measured.append(live.peak)
        need = estimate(cfg, resolve_shape(cfg.model), dims_from_config(cfg.parallel))
        estimated.append(need.activations + need.logits)
    tokens = 4 * 64
    return (measured[1] - measured[0]) / tokens, (estimated[1] - estimated[0]) / tokens


@pytest.mark.parametrize("dtype,chunks", [("bf16", 1), ("fp32", 1), ("bf16", 4)])
def test_preflight_counts_what_the_loss_holds(tmp_path, text, dtype, chunks):
    """At V = 2,048 and 8,192 (d_model 32, so the loss dominates) the trainer's step adds, per token
    and vocabulary entry, what fits.estimate adds: 12 bytes (log_softmax's fp32 output and two fp32
    gradients, the logits freed before backward; 14 and 16 when the trainer kept them, session 8),
    in bf16 and fp32; over train.loss_chunks = 4 slices recomputed in backward, 12 / 4 = 3."""
    per_token, predicted = {}, {}
    for vocab in (2048, 8192):
        per_token[vocab], predicted[vocab] = _loss_peaks(tmp_path, text, dtype, vocab, chunks)
    slope = (per_token[8192] - per_token[2048]) / (8192 - 2048)  # the layer's own bytes cancel
    assert slope == pytest.approx(12 / chunks, rel=0.02), per_token
    assert (predicted[8192] - predicted[2048]) / (8192 - 2048) == pytest.approx(slope, rel=0.02)
    assert predicted[8192] == pytest.approx(per_token[8192], rel=0.05), (predicted, per_token)
