"""The test S3 server is a real S3 API: s3fs in this process and boto3 in a subprocess see the same bucket."""

from __future__ import annotations

import subprocess
import sys

from s3server import s3  # noqa: F401  (the fixture)


def test_round_trip_and_subprocess_sees_it(s3):  # noqa: F811
    bucket = s3.new_bucket()
    fs = s3.filesystem()
    fs.pipe(f"{bucket}/a/b.txt", b"hello")
    assert fs.cat(f"{bucket}/a/b.txt") == b"hello"
    assert fs.ls(f"{bucket}/a", detail=False) == [f"{bucket}/a/b.txt"]
    code = f"import fsspec; print(fsspec.open('s3://{bucket}/a/b.txt').open().read().decode())"
    cmd = [sys.executable, "-c", code]
    out = subprocess.run(cmd, env=s3.env(), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "hello"
