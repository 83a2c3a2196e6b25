"""`pretrain plan`: --help teaches, --json is one object with the library's numbers, the table shows the
same numbers, --figures writes PNGs, bad input is a clear error; plan/ imports neither torch nor
matplotlib unless figures are drawn."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pretrain import cli
from pretrain.plan import compute, memory
from pretrain.plan.shapes import get_shape


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pretrain", "plan", *args], capture_output=True, text=True,
                          timeout=120)


def test_help_teaches(capsys):
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["plan", "--help"])
    out = capsys.readouterr().out
    for term in ("ZeRO", "bubble", "(p-1)/(m+p-1)", "6N + 12*L*h*s", "sqrt(2*C*M)", "Examples",
                 "--layout", "--json", "--figures"):
        assert term in out, term


def test_json_has_the_library_numbers():
    r = _run("--model", "llama-3-8b", "--gpus", "64", "--gpu", "h100", "--tokens", "1T", "--json")
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    shape = get_shape("llama-3-8b")
    assert plan["model"]["params"] == shape.params()
    assert plan["model"]["flops_per_token"] == compute.flops_per_token(shape)
    assert plan["budget"]["training_flops_6nd"] == compute.training_flops(shape.params(), 1e12)
    zero = plan["memory_single_replica"]["zero_per_gpu_gb"]
    assert zero["stage3"] == pytest.approx(memory.zero_memory_per_gpu(shape.params(), 3, 64) / 1e9)
    lay = plan["layout"]
    assert lay["fits"] and lay["memory_gb"]["total"] <= 0.9 * 80 * 2**30 / 1e9  # 90% of 80 GiB
    t = plan["time"]
    # calendar time is the token budget over tokens/s, stretched by goodput
    goodput = plan["reliability"]["goodput"]
    assert t["calendar_days"] == pytest.approx(1e12 / t["tokens_per_s"] / goodput / 86400)
    assert plan["search"]["explanation"][0].startswith(lay["label"])


def test_table_shows_the_same_numbers():
    args = ("--model", "llama-2-7b", "--gpus", "8", "--gpu", "a100-80gb", "--tokens", "140B")
    plan = json.loads(_run(*args, "--json").stdout)
    table = _run(*args)
    assert table.returncode == 0, table.stderr
    assert plan["layout"]["label"] in table.stdout
    assert f"{plan['time']['tokens_per_s']:,.0f}" in table.stdout
    assert f"{plan['model']['params']:,}" in table.stdout


def test_given_layout_and_params_flag():
    lay = "tp=2,pp=2,zero=1,recompute=selective,sp=1"
    plan = json.loads(_run("--params", "7B", "--gpus", "8", "--layout", lay, "--json").stdout)
    assert plan["layout"]["layout"] == {"tp": 2, "pp": 2, "dp": 2, "dp_shard": 2, "dp_replicate": 1, "cp": 1,
                                        "zero": 1, "mbs": 1, "recompute": "selective", "sp": True, "v": 1,
                                        "cp_load_balance": True}
    assert plan["model"]["n_layers"] == 32
    too_big = _run("--model", "llama-3-70b", "--gpus", "8", "--layout", "tp=1,zero=0", "--json")
    assert too_big.returncode == 1
    assert json.loads(too_big.stdout)["layout"]["reason"] == "does not fit in memory"


def test_bad_input_is_a_clear_error(tmp_path):
    r = _run("--model", "llama-9", "--gpus", "8")
    assert r.returncode == 2 and "unknown model 'llama-9'" in r.stderr and "Traceback" not in r.stderr
    bad = tmp_path / "hw.toml"
    bad.write_text("[h100]\nmemory = 3\n")
    r = _run("--model", "llama-3-8b", "--hardware", str(bad))
    assert r.returncode == 2 and "unknown fields" in r.stderr and str(bad) in r.stderr
    r = _run("--model", "llama-3-8b", "--layout", "tp=two")
    assert r.returncode == 2 and "integer" in r.stderr
    r = _run("--model", "llama-3-8b", "--layout", "tp=2,v=0")
    assert r.returncode == 2 and "v must be >= 1" in r.stderr
    bad.write_text('[h100]\nmemory_gb = "lots"\n')
    r = _run("--model", "llama-3-8b", "--hardware", str(bad))
    assert r.returncode == 2 and "memory_gb must be a positive number" in r.stderr


def test_figures(tmp_path):
    r = _run("--model", "gpt2-124m", "--gpus", "8", "--gpu", "a100-40gb", "--figures", str(tmp_path),
             "--json")
    assert r.returncode == 0, r.stderr
    for name in ("memory.png", "zero.png", "pipeline.png", "checkpoint.png"):
        data = (tmp_path / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_plan_imports_no_torch_or_matplotlib():
    code = ("import sys, pretrain.plan, pretrain.plan.search, pretrain.plan.report, pretrain.commands.plan;"
            "bad = [m for m in ('torch', 'matplotlib') if m in sys.modules]; print(bad); sys.exit(bool(bad))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
