"""A run directory from someone else cannot run code: pickle payloads in a DCP checkpoint are refused.

Each attack is first shown to work against stock `dcp.load` (so the test can fail), then `pretrain
sample`/`export` and a training resume are run on the same directory in a child process with a time
and a memory limit: the payload's marker file must not appear and the error is one line naming the file.
"""

from __future__ import annotations

import contextlib
import io
import json
import pickle
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed.checkpoint as dcp
from s3server import s3  # noqa: F401  (the fixture)
from torch.distributed.checkpoint.filesystem import _StorageInfo
from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_state_dict

from pretrain import config as cfgmod
from pretrain.train import checkpoint as ck
from pretrain.train.config import RunConfig
from pretrain.train.safe_dcp import UnsafeCheckpoint, read_metadata
from pretrain.train.testing import tiny_config
from pretrain.train.trainer import Trainer

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("restore_torch_threads")


class _Payload:
    """Unpickling this writes `marker` (what an attacker's `os.system` would do, made visible)."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return exec, (f"open({self.marker!r}, 'w').write('pwned')",)


@pytest.fixture(scope="module")
def run(tmp_path_factory, text) -> Path:
    out = tmp_path_factory.mktemp("run")
    Trainer(tiny_config(out, text, "train.steps=5"), quiet=True).fit()
    (out / "config.toml").write_text(cfgmod.dumps(tiny_config(out, text, "train.steps=5")))
    return out


def _copy(run: Path, dst: Path) -> tuple[Path, Path]:
    import shutil

    shutil.copytree(run, dst)
    return dst, dst / "checkpoints" / "step_0000005"


def _reseal(ckpt: Path) -> None:
    """An attacker rewrites COMPLETE.json too (sizes and digests: they detect damage, they are not a
    signature), so the edited checkpoint still counts as complete and verifies."""
    marker = ckpt / ck.MARKER
    meta = json.loads(marker.read_text())
    meta["files"] = {p.name: p.stat().st_size for p in ckpt.iterdir() if p.is_file() and p.name != ck.MARKER}
    meta[ck.DIGEST] = {name: ck.digest_file(ckpt / name) for name in meta["files"]}
    marker.write_text(json.dumps(meta))
    assert ck.is_complete(ckpt)
    ck.verify(ckpt)


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    def limits():  # a payload that escaped would still be bounded; torch needs ~2 GB of address space
        resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))

    return subprocess.run([sys.executable, "-m", "pretrain", *args], capture_output=True, text=True,
                          timeout=timeout, preexec_fn=limits, cwd=ROOT)


def _metadata_payload(ckpt: Path, marker: Path) -> None:
    md = pickle.loads((ckpt / ".metadata").read_bytes())
    (ckpt / ".metadata").write_bytes(pickle.dumps((_Payload(marker), md)))
    _reseal(ckpt)


def _bytes_payload(ckpt: Path, marker: Path) -> str:
    """The optimizer's lr value now points at a torch.save'd payload appended to the data file; its
    key (optim.param_groups.<parameter name>.lr: the optimizer state is saved flattened)."""
    md = pickle.loads((ckpt / ".metadata").read_bytes())
    key = next(k for k in md.storage_data
               if k.fqn.startswith("optim.param_groups.") and k.fqn.endswith(".lr"))
    buf = io.BytesIO()
    torch.save(_Payload(marker), buf)
    info = md.storage_data[key]
    data = ckpt / info.relative_path
    offset = data.stat().st_size
    with open(data, "ab") as f:
        f.write(buf.getvalue())
    md.storage_data[key] = _StorageInfo(info.relative_path, offset, len(buf.getvalue()), None)
    (ckpt / ".metadata").write_bytes(pickle.dumps(md))
    _reseal(ckpt)
    return key.fqn


def _model_and_optim(run: Path):
    from pretrain.train.model import build_model, materialize, resolve_shape

    cfg = cfgmod.load(RunConfig, run / "config.toml")
    model = materialize(build_model(resolve_shape(cfg.model), cfg.model, "meta"), "cpu", 0)
    return model, torch.optim.AdamW(model.parameters())


def test_metadata_payload_runs_under_stock_dcp_and_is_refused_by_sample_and_export(run, tmp_path):
    marker = tmp_path / "pwned"
    bad, ckpt = _copy(run, tmp_path / "bad")
    _metadata_payload(ckpt, marker)
    model, _ = _model_and_optim(bad)
    from torch.distributed.checkpoint.api import CheckpointException

    with pytest.raises(CheckpointException):  # the stock reader runs the payload, then chokes on the tuple
        dcp.load({"model": get_model_state_dict(model)}, checkpoint_id=str(ckpt), no_dist=True)
    assert marker.exists()  # proof that the file is an attack
    marker.unlink()

    r = _cli("sample", str(bad), "--tokens", "2")
    assert r.returncode == 2, r.stderr
    assert not marker.exists()
    assert r.stderr.count("\n") == 1 and str(ckpt / ".metadata") in r.stderr
    assert "builtins.exec" in r.stderr and "refused" in r.stderr
    from pretrain.train.runs import export_safetensors  # the same loader, in this process

    with pytest.raises(UnsafeCheckpoint, match="refused, its pickle calls builtins.exec"):
        export_safetensors(bad, tmp_path / "m.safetensors")
    assert not marker.exists() and not (tmp_path / "m.safetensors").exists()


def test_optimizer_value_payload_is_refused_on_resume(run, tmp_path):
    marker = tmp_path / "pwned"
    bad, ckpt = _copy(run, tmp_path / "bad")
    key = _bytes_payload(ckpt, marker)
    model, opt = _model_and_optim(bad)
    msd, osd = get_state_dict(model, opt, options=ck.FLAT)
    from torch.distributed.checkpoint.api import CheckpointException

    with contextlib.suppress(CheckpointException):  # it loads None for lr without a word
        dcp.load({"model": msd, "optim": osd}, checkpoint_id=str(ckpt), no_dist=True)
    assert marker.exists()  # stock DCP: torch.load(weights_only=False) ran it
    marker.unlink()

    manager = ck.CheckpointManager(bad / "checkpoints", async_save=False)
    with pytest.raises(UnsafeCheckpoint, match=f"{re.escape(key)} is not plain data"):
        manager.load(ckpt, model, opt)
    assert not marker.exists()
    cfg = cfgmod.load(RunConfig, bad / "config.toml", ["train.steps=6", f"train.out={bad}"])
    with pytest.raises(UnsafeCheckpoint) as e:  # a training resume, as `pretrain train` runs it
        Trainer(cfg, quiet=True)
    assert not marker.exists() and "\n" not in str(e.value)
    said = f"{ckpt}: refused, value {key} is not plain data (it calls "
    assert str(e.value).startswith(said)


def test_traversal_and_overrun_in_storage_items_are_refused(run, tmp_path):
    for name, edit in (("up", lambda i: _StorageInfo("../../secret", 0, 4, None)),
                       ("abs", lambda i: _StorageInfo("/dev/zero", 0, 1 << 40, None)),
                       ("long", lambda i: _StorageInfo(i.relative_path, i.offset, 1 << 40, None))):
        _, ckpt = _copy(run, tmp_path / name)
        md = pickle.loads((ckpt / ".metadata").read_bytes())
        key = next(iter(md.storage_data))
        md.storage_data[key] = edit(md.storage_data[key])
        (ckpt / ".metadata").write_bytes(pickle.dumps(md))
        with pytest.raises(UnsafeCheckpoint, match=r"\.metadata: refused, item "):
            read_metadata(ckpt / ".metadata")


def test_normal_checkpoint_loads_bit_exact_through_the_safe_reader(run):
    """Model and optimizer read by the safe path equal those read by stock DCP (tensors and values)."""
    ckpt = ck.latest_complete(run / "checkpoints")[1]
    a_model, a_opt = _model_and_optim(run)
    b_model, b_opt = _model_and_optim(run)
    ck.CheckpointManager(run / "checkpoints", async_save=False).load(ckpt, a_model, a_opt)
    msd, osd = get_state_dict(b_model, b_opt, options=ck.FLAT)  # the optimizer is saved flattened
    dcp.load({"model": msd, "optim": osd}, checkpoint_id=str(ckpt), no_dist=True)
    from torch.distributed.checkpoint.state_dict import set_state_dict

    set_state_dict(b_model, b_opt, model_state_dict=msd, optim_state_dict=osd, options=ck.FLAT)
    for (ka, va), (kb, vb) in zip(a_model.state_dict().items(), b_model.state_dict().items()):
        assert ka == kb and torch.equal(va, vb)
    sa, sb = a_opt.state_dict(), b_opt.state_dict()
    assert sa["param_groups"] == sb["param_groups"] and sa["param_groups"][0]["lr"] > 0
    for k in sb["state"]:
        assert all(torch.equal(sa["state"][k][n], sb["state"][k][n]) for n in sb["state"][k])


def test_hostile_json_and_toml_in_a_run_directory_are_one_line_errors(run, tmp_path):
    """The other files a run directory carries: nested 100k deep they raised RecursionError."""
    from pretrain.errors import UserError
    from pretrain.train.runs import load_run_model

    bad, ckpt = _copy(run, tmp_path / "bad")
    (ckpt / "state_rank0.json").write_text("[" * 100_000 + "]" * 100_000)
    _reseal(ckpt)
    model, opt = _model_and_optim(bad)
    with pytest.raises(UserError, match=r"state_rank0\.json: not a checkpoint state file \(nested too"):
        ck.CheckpointManager(bad / "checkpoints", async_save=False).load(ckpt, model, opt)
    (ckpt / ck.MARKER).write_text('{"files": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert not ck.is_complete(ckpt)
    (bad / "config.toml").write_text("a = " + "[" * 100_000 + "]" * 100_000)
    with pytest.raises(UserError, match=r"config\.toml: invalid TOML: nested too deeply"):
        load_run_model(bad)


def test_invalid_utf8_in_a_checkpoints_json_is_one_line(run, tmp_path):
    """COMPLETE.json or state_rank0.json of bad UTF-8 raised UnicodeDecodeError (a traceback out of
    sample, export and a resume): the marker now makes the checkpoint incomplete, the state one line."""
    from pretrain.errors import UserError

    _, ckpt = _copy(run, tmp_path / "bad")
    (ckpt / "state_rank0.json").write_bytes(b'{"step": 5\xff}')
    _reseal(ckpt)
    with pytest.raises(UserError, match=r"state_rank0\.json: not a checkpoint state file"):
        ck.read_state(ckpt)
    (ckpt / ck.MARKER).write_bytes(b'{"files": "\xff"}')
    assert not ck.is_complete(ckpt)


def test_checkpoint_in_object_storage_is_read_through_the_same_checks(run, tmp_path, s3, monkeypatch):  # noqa: F811
    """s3:// checkpoints (DCP's FsspecReader): a normal one loads equal to the local copy; one with
    a payload in .metadata runs it under stock DCP and is refused by ours, naming the object."""
    from pretrain.train.safe_dcp import safe_load

    for k, v in s3.env().items():
        if k.startswith("AWS_"):
            monkeypatch.setenv(k, v)
    fs, bucket = s3.filesystem(), s3.new_bucket("ckpt")
    local = ck.latest_complete(run / "checkpoints")[1]
    marker = tmp_path / "pwned"
    fs.put(str(local) + "/", f"{bucket}/good/", recursive=True)
    bad, ckpt = _copy(run, tmp_path / "bad")
    _metadata_payload(ckpt, marker)
    fs.put(str(ckpt) + "/", f"{bucket}/bad/", recursive=True)
    names = sorted(p.rsplit("/", 1)[-1] for p in fs.ls(f"{bucket}/good"))
    assert names == sorted(p.name for p in local.iterdir())

    model, _ = _model_and_optim(run)
    ref, _ = _model_and_optim(run)
    ck.load_model_only(local, ref)
    state = {"model": get_model_state_dict(model)}
    safe_load(state, f"s3://{bucket}/good", no_dist=True)
    from torch.distributed.checkpoint.state_dict import set_model_state_dict

    set_model_state_dict(model, state["model"])
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), ref.state_dict().values()))

    from torch.distributed.checkpoint._fsspec_filesystem import FsspecReader
    from torch.distributed.checkpoint.api import CheckpointException

    with pytest.raises(CheckpointException):
        dcp.load({"model": get_model_state_dict(model)}, storage_reader=FsspecReader(f"s3://{bucket}/bad"),
                 no_dist=True)
    assert marker.exists()  # the stock reader ran it
    marker.unlink()
    said = rf"s3://{bucket}/bad/\.metadata: refused, its pickle calls builtins\.exec"
    with pytest.raises(UnsafeCheckpoint, match=said):
        safe_load({"model": get_model_state_dict(model)}, f"s3://{bucket}/bad", no_dist=True)
    assert not marker.exists()


class _HostilePath:
    """A PosixPath whose parts say one thing and whose cached `_str` (set by pickle's BUILD, slot
    state) says another: what a restricted find_class that admits `pathlib` lets through."""

    def __reduce__(self):
        from pathlib import PosixPath

        return PosixPath, ("run", "checkpoints", "step_5"), (None, {"_str": "/etc/passwd"})


class _Global:
    """Pickles as the bare global `module.name` (a class where data belongs)."""

    def __init__(self, module: str, name: str):
        self.module, self.name = module, name

    def __reduce__(self):
        import importlib

        return getattr, (importlib.import_module(self.module), self.name)


def _edits():
    """(name, edit of a real Metadata) that only the globals a real checkpoint uses can express."""
    from pathlib import PosixPath

    def first_tensor(md):
        return next(v for v in md.state_dict_metadata.values() if hasattr(v, "chunks"))

    def path_str(md):
        md.storage_meta.checkpoint_id = _HostilePath()

    def extra_field(md):
        md.__dict__["load_hook"] = "x"

    def size_text(md):
        first_tensor(md).size = "(4, 3)"

    def key_path(md):
        k = next(iter(md.storage_data))
        md.storage_data[PosixPath("x")] = md.storage_data.pop(k)

    def chunks_dict(md):
        t = first_tensor(md)
        t.chunks = {"a": t.chunks[0]}

    def dtype_path(md):
        first_tensor(md).properties.dtype = PosixPath("float32")

    def info_as_index(md):
        k = next(iter(md.storage_data))
        md.storage_data[k] = k

    return [("path_str", path_str), ("extra_field", extra_field), ("size_text", size_text),
            ("key_path", key_path), ("chunks_dict", chunks_dict), ("dtype_path", dtype_path),
            ("info_as_index", info_as_index)]


def test_real_metadata_is_rebuilt_equal_to_pickles_own(run):
    """The independent truth: stock pickle.load of the same file torch wrote."""
    for step in (run / "checkpoints").glob("step_*"):
        md = read_metadata(step / ".metadata")
        assert md == pickle.loads((step / ".metadata").read_bytes())
        assert md.storage_data and md.state_dict_metadata and md.storage_meta.checkpoint_id is not None


@pytest.mark.parametrize("name,edit", _edits())
def test_metadata_built_from_allowed_classes_but_not_dcps_shape_is_refused(run, tmp_path, name, edit):
    """A file that names only DCP's classes, Size, dtypes and pathlib, but puts them where they do
    not belong or sets attributes through BUILD, is refused in one line naming the file."""
    _, ckpt = _copy(run, tmp_path / name)
    md = pickle.loads((ckpt / ".metadata").read_bytes())
    edit(md)
    data = pickle.dumps(md)
    (ckpt / ".metadata").write_bytes(data)
    if name == "path_str":  # what stock pickle (and the previous allow-list) gives: a path that lies
        got = pickle.loads(data).storage_meta.checkpoint_id
        assert str(got) == "/etc/passwd" and got.name == "step_5"
    with pytest.raises(UnsafeCheckpoint) as e:
        read_metadata(ckpt / ".metadata")
    said = str(e.value)
    assert said.startswith(f"{ckpt / '.metadata'}: ") and "\n" not in said and "refused" in said


def test_a_compressed_storage_item_is_refused_before_it_inflates(run, tmp_path):
    """DCP's own `stream.zstd` transform, named in `.metadata`, inflates an item whole before torch.load
    sees it (`io.BytesIO(stream.read(-1))`): 64 KB of zstd was 2 GiB and a 4.5 GB peak in `sample`
    (two transforms chained square the ratio). pretrain writes no transforms: any is refused."""
    import zstandard

    for descriptors in (["stream.zstd/1"], ["stream.zstd/1", "stream.zstd/1"]):
        _, ckpt = _copy(run, tmp_path / str(len(descriptors)))
        md = pickle.loads((ckpt / ".metadata").read_bytes())
        key = next(k for k in md.storage_data if k.fqn.endswith("tok_emb.weight"))
        info = md.storage_data[key]
        blob = zstandard.ZstdCompressor().compress(bytes(1 << 20))  # 1 MiB: the test stays small
        data = ckpt / info.relative_path
        offset = data.stat().st_size
        with open(data, "ab") as f:
            f.write(blob)
        md.storage_data[key] = _StorageInfo(info.relative_path, offset, len(blob), descriptors)
        (ckpt / ".metadata").write_bytes(pickle.dumps(md))
        _reseal(ckpt)
        with pytest.raises(UnsafeCheckpoint, match=r"\.metadata: refused, item \S*tok_emb\.weight is "
                           r"stored through \['stream\.zstd/1'"):
            read_metadata(ckpt / ".metadata")
    r = _cli("sample", str(tmp_path / "2"), "--tokens", "2")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "stream.zstd" in r.stderr, r.stderr
