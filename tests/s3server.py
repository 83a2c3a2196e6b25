"""A real S3 API server for tests: moto's ThreadedMotoServer on 127.0.0.1, and s3fs pointed at it.

Tests that move data through object storage talk to this server over HTTP with the real s3fs/botocore
client (no mock of the client): what passes here is what a job would send to a bucket. The server
runs in a thread of the test process on a free port and is stopped when the fixture ends.

Use it as a fixture (`s3` in a test's arguments after `from s3server import s3  # noqa: F401`),
or as a context manager in a script::

    with S3Server() as srv:
        fs = srv.filesystem()
        fs.mkdir("bucket")
        ...
        env = srv.env()   # AWS_* variables for a subprocess (the CLI) to reach the same server

A subprocess (a `pretrain ...` command) reaches the server through the environment that `env()`
returns: botocore honours `AWS_ENDPOINT_URL_S3`, and s3fs passes it on.
"""

from __future__ import annotations

import logging
import os
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


class S3Server:
    """One moto S3 server on 127.0.0.1; `filesystem()` gives an s3fs client aimed at it.

    `latency_s` delays every request by that much before moto answers it (requests in flight
    wait side by side, as on a network): an emulated remote bucket, for benchmarks of what
    overlapping round trips buys. moto on localhost otherwise answers in a few milliseconds."""

    def __init__(self, port: int | None = None, latency_s: float = 0.0) -> None:
        # Port 0 by default: the server binds one the OS picks and reports it (`start`). A port found
        # free and closed could be taken by another process (the other test worker) before moto binds it.
        self.port = port or 0
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.latency_s = latency_s
        self._server = None

    def start(self) -> S3Server:
        import logging

        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
        # botocore reads the credentials from the environment even for a local server
        for k, v in CREDENTIALS.items():
            os.environ.setdefault(k, v)
        cls = _delayed_server(self.latency_s) if self.latency_s else ThreadedMotoServer
        self._server = cls(ip_address="127.0.0.1", port=self.port, verbose=False)
        self._server.start()
        self.port = self._server.get_host_and_port()[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
        _forget_cached_filesystems()

    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def storage_options(self) -> dict:
        """Keyword arguments for `s3fs.S3FileSystem` / `fsspec.open(..., **options)`."""
        return {
            "key": CREDENTIALS["AWS_ACCESS_KEY_ID"],
            "secret": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            "token": CREDENTIALS["AWS_SESSION_TOKEN"],
            # no region_name here: s3fs would send it as a LocationConstraint, which us-east-1 refuses
            "client_kwargs": {"endpoint_url": self.endpoint},
        }

    def filesystem(self):
        """A fresh s3fs filesystem (no instance cache, no listing cache) talking to this server."""
        import s3fs

        return s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False, **self.storage_options())

    def env(self) -> dict[str, str]:
        """Environment for a subprocess to reach this server with any botocore-based client."""
        env = dict(os.environ)
        env.update(CREDENTIALS)
        env["AWS_ENDPOINT_URL_S3"] = self.endpoint
        env["AWS_ENDPOINT_URL"] = self.endpoint
        return env

    def new_bucket(self, prefix: str = "test") -> str:
        """Create a bucket with a unique name; returns the name."""
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        self.filesystem().mkdir(name)
        return name


def _forget_cached_filesystems() -> None:
    """fsspec caches one S3FileSystem per set of arguments; code that builds it from the environment
    (DCP's FsspecWriter, `io.url_fs`) would reuse one aimed at a stopped server's port in the next
    test module. Users' endpoints do not move, so only the tests need this."""
    try:
        import s3fs
    except ImportError:
        return
    s3fs.S3FileSystem.clear_instance_cache()


def wrapped_server(wrap):
    """moto's threaded server with its WSGI app replaced by `wrap(app)`: a store that answers some
    requests otherwise (a delay, an error moto does not give)."""
    from moto.server import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        ThreadedMotoServer,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    class Wrapped(ThreadedMotoServer):
        def _server_entry(self) -> None:  # moto's own, with the app wrapped
            app = wrap(DomainDispatcherApplication(create_backend_app))
            self._server = make_server(self._ip_address, self._port, app, True,
                                       request_handler=MotoRequestHandler)
            self._server_ready_event.set()
            self._server.serve_forever()

    return Wrapped


def _delayed_server(seconds: float):
    """moto's threaded server with its WSGI app behind a fixed delay per request."""
    import time

    def delay(app):
        def delayed(environ, start_response):
            time.sleep(seconds)
            return app(environ, start_response)
        return delayed

    return wrapped_server(delay)


@contextmanager
def s3_server(latency_s: float = 0.0) -> Iterator[S3Server]:
    """Start a server, yield it, stop it (also on failure)."""
    srv = S3Server(latency_s=latency_s).start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    """A moto S3 server for the tests of one module (skips when moto[server] or s3fs is missing)."""
    pytest.importorskip("moto.server")
    pytest.importorskip("s3fs")
    with s3_server() as srv:
        yield srv


class Requests(logging.Handler):
    """Every request the S3 server of this process answered, from its log: `seen` holds
    (method, path, query); `lines` "METHOD key" for those that name an object."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, str, str]] = []

    @property
    def lines(self) -> list[str]:
        return [f"{m} {path.split('/', 2)[2]}" for m, path, _ in self.seen if path.count("/") >= 2]

    def emit(self, record: logging.LogRecord) -> None:
        # werkzeug colours some lines (a 206 answer to a ranged GET): ANSI codes before the method
        m = re.search(r'"(?:\x1b\[[0-9;]*m)*(GET|PUT|HEAD|DELETE|POST) (/[^ ?]*)\??([^ ]*) HTTP',
                      record.getMessage())
        if m:
            self.seen.append(m.groups())

    def __enter__(self) -> Requests:
        log = logging.getLogger("werkzeug")
        self._level = log.level
        log.setLevel(logging.INFO)
        log.addHandler(self)
        return self

    def __exit__(self, *exc) -> None:
        log = logging.getLogger("werkzeug")
        log.removeHandler(self)
        log.setLevel(self._level)
