"""Checkpoints in object storage, against a real S3 API server (moto, tests/s3server.py) through
DCP's fsspec writer and reader: a run stopped at step 20 with `checkpoint.storage = "s3://..."`
resumes from the bucket and ends bit for bit where a local run that never stopped ends; old ones
are pruned in the bucket; a truncated object is not taken for a checkpoint; `pretrain sample
--checkpoints URL` reads the newest model from the bucket.
"""

from __future__ import annotations

import pytest
import torch
from s3server import s3  # noqa: F401  (the fixture)

from pretrain.train import checkpoint as ck
from pretrain.train.testing import tiny_config
from pretrain.train.trainer import Trainer

pytestmark = pytest.mark.usefixtures("restore_torch_threads")
SHORT = ("train.steps=12", "checkpoint.every=4")


@pytest.fixture()
def bucket_env(s3, monkeypatch):  # noqa: F811
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3.endpoint)  # how s3fs (botocore) finds the server
    return s3


def test_stop_resume_through_s3_equals_a_local_run(tmp_path, text, bucket_env, capsys):
    url = f"s3://{bucket_env.new_bucket()}/runs/tiny"
    ref = Trainer(tiny_config(tmp_path / "local", text, *SHORT), quiet=True)
    ref_losses = {r["step"]: r["loss"] for r in ref.fit()}

    over = (*SHORT, f"checkpoint.storage={url}", "checkpoint.keep=2")
    first = Trainer(tiny_config(tmp_path / "s3run", text, *over, "train.stop_at=6"), quiet=True).fit()
    fs = bucket_env.filesystem()
    assert [s for s, _, ok in ck.list_checkpoints(url) if ok] == [4, 6]
    assert fs.isfile(f"{url}/step_0000004/.metadata") and not (tmp_path / "s3run" / "checkpoints").exists()
    fs.pipe_file(f"{url}/step_0000008/__0_0.distcp", b"cut")  # a save of step 8 a kill cut short
    capsys.readouterr()
    t = Trainer(tiny_config(tmp_path / "s3run", text, *over), quiet=True)
    assert t.step == 6
    assert "; the save of step 8 did not finish (no COMPLETE.json): not used" in capsys.readouterr().err
    rest = t.fit()
    assert {r["step"]: r["loss"] for r in first + rest} == ref_losses  # bit for bit
    assert all(torch.equal(a, b) for a, b in zip(t.params, ref.params))
    assert [s for s, _, _ in ck.list_checkpoints(url)] == [8, 12]  # pruned in the bucket too

    # a data object cut short (its marker intact) is not a checkpoint: the previous one is used
    newest = ck.step_dir(ck.as_root(url), 12)
    data = max((p for p in fs.ls(newest) if p.endswith(".distcp")), key=fs.size)
    fs.pipe_file(data, fs.cat_file(data)[:100])
    assert ck.latest_complete(url)[0] == 8

    from pretrain.cli import main

    capsys.readouterr()
    sample = ["sample", str(tmp_path / "s3run"), "--prompt", "The ", "--tokens", "5", "--temperature", "0"]
    assert main(sample) == 2  # the run directory's config.toml alone does not send a read to a bucket
    assert f"pass --checkpoints {url} to read them there" in capsys.readouterr().err
    assert main([*sample, "--checkpoints", url]) == 0
    assert capsys.readouterr().out.startswith("The ")

    # the digests were taken by reading the objects back; one bit changed in the bucket is refused
    step8 = ck.step_dir(ck.as_root(url), 8)
    ck.verify(step8)
    data = max((p for p in fs.ls(step8) if p.endswith(".distcp")), key=fs.size)
    body = bytearray(fs.cat_file(data))
    body[len(body) // 2] ^= 0x10
    fs.pipe_file(data, bytes(body))
    with pytest.raises(ck.IntegrityError, match=f"{step8}: damaged: __0_0.distcp does not match"):
        ck.verify(step8)


def test_fresh_start_over_remote_checkpoints_is_refused(tmp_path, text, bucket_env):
    """A local record is moved aside on a fresh start; object storage cannot be, so it stops."""
    from pretrain.errors import UserError

    url = f"s3://{bucket_env.new_bucket()}/runs/tiny"
    over = ("train.steps=4", "checkpoint.every=2", f"checkpoint.storage={url}")
    Trainer(tiny_config(tmp_path / "a", text, *over), quiet=True).fit()
    with pytest.raises(UserError, match="holds checkpoints of an earlier run"):
        Trainer(tiny_config(tmp_path / "b", text, *over, "train.resume=false"), quiet=True).fit()
    assert [s for s, _, ok in ck.list_checkpoints(url) if ok] == [2, 4]  # nothing overwritten
