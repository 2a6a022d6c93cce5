"""A real S3-API server on 127.0.0.1 for the object-storage tests, and stores on both backends.

The server is ``moto``'s standalone server (its WSGI application and request handler, served as
``ThreadedMotoServer`` serves them), reached over HTTP by the same clients a user's run uses
(obstore for the index, pyarrow's S3 filesystem for data), configured the standard way:
``AWS_ENDPOINT_URL`` and the usual credential variables. The server notes every request it
answers (:class:`S3RequestLog`), so that a test can count what a build or a query cost.
"""

from __future__ import annotations

import logging
import os
import secrets
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bloomskip._store import Store, open_store

S3_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}


@dataclass(frozen=True)
class S3Request:
    """One request the server answered: ``LIST`` (a GET of a bucket), ``GET``, ``HEAD``,
    ``PUT``, ``POST`` or ``DELETE``, the bucket and key it named, its ``If-Match`` and its
    ``Range`` (``bytes=first-last``)."""

    method: str
    bucket: str
    key: str
    if_match: str | None
    range: str | None = None

    @property
    def length(self) -> int | None:
        """The bytes its ``Range`` asks for; None without one."""
        if self.range is None:
            return None
        first, _, last = self.range.removeprefix("bytes=").partition("-")
        return int(last) - int(first) + 1


class S3RequestLog:
    """The server's WSGI application, noting each request before answering it.

    Args:
        app: moto's application.
    """

    def __init__(self, app) -> None:
        self.app = app
        self.requests: list[S3Request] = []
        self._lock = threading.Lock()

    def __call__(self, environ, start_response):
        bucket, _, key = environ.get("PATH_INFO", "").lstrip("/").partition("/")
        method = environ["REQUEST_METHOD"]
        if method == "GET" and not key:
            method = "LIST"
        with self._lock:
            self.requests.append(
                S3Request(
                    method, bucket, key, environ.get("HTTP_IF_MATCH"), environ.get("HTTP_RANGE")
                )
            )
        return self.app(environ, start_response)

    def mark(self) -> int:
        """Where the log is now: :meth:`since` counts what came after."""
        with self._lock:
            return len(self.requests)

    def since(self, mark: int, bucket: str) -> list[S3Request]:
        """The requests naming ``bucket`` after ``mark``."""
        with self._lock:
            return [request for request in self.requests[mark:] if request.bucket == bucket]

    def methods_since(self, mark: int, bucket: str) -> Counter[str]:
        """How many requests of each method named ``bucket`` after ``mark``."""
        return Counter(request.method for request in self.since(mark, bucket))


@pytest.fixture(scope="session")
def s3_server() -> Iterator[tuple[str, S3RequestLog]]:
    """A moto S3 server started for this test run (and its env set): its endpoint URL and
    the log of the requests it answers."""
    from moto.server import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    log = S3RequestLog(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", 0, log, True, request_handler=MotoRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    endpoint = f"http://{host}:{port}"
    saved = {name: os.environ.get(name) for name in [*S3_ENV, "AWS_ENDPOINT_URL"]}
    os.environ.update(S3_ENV, AWS_ENDPOINT_URL=endpoint)
    try:
        yield endpoint, log
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        server.shutdown()
        thread.join()


@pytest.fixture(scope="session")
def s3_endpoint(s3_server) -> str:
    """The endpoint URL of the moto S3 server."""
    return s3_server[0]


@pytest.fixture
def s3_requests(s3_server) -> S3RequestLog:
    """The log of the requests the moto S3 server answers."""
    return s3_server[1]


@pytest.fixture(scope="module")
def cluster(s3_endpoint: str):
    """A real Dask cluster, ``(LocalCluster, Client)``: a scheduler on 127.0.0.1 and two
    worker processes, which inherit the S3 server's environment; its dashboard on a free port
    (distributed reads None as 8787, which another cluster of the run may hold)."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=":0",
        ) as local,
        Client(local) as client,
    ):
        yield local, client


@pytest.fixture
def bucket(s3_endpoint: str) -> str:
    """A new empty bucket's name."""
    import boto3

    name = f"bkt-{secrets.token_hex(6)}"
    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket=name)
    return name


@pytest.fixture(params=["local", "s3"])
def location(request: pytest.FixtureRequest, tmp_path) -> str:
    """A fresh location on the local disk or in a bucket of the S3 server."""
    if request.param == "local":
        return str(tmp_path / "index")
    bucket = request.getfixturevalue("bucket")
    return f"s3://{bucket}/tables/index"


@pytest.fixture
def store(location: str) -> Store:
    return open_store(location)


@pytest.fixture(params=["local", "s3"])
def lake_at(request: pytest.FixtureRequest, tmp_path) -> tuple[str, str]:
    """``(data, index)`` locations: a folder with an index kept elsewhere, or a bucket."""
    if request.param == "local":
        return str(tmp_path / "data"), str(tmp_path / "index")
    bucket = request.getfixturevalue("bucket")
    return f"s3://{bucket}/data", f"s3://{bucket}/index"


# The dataset tests' data and predicate corpus (tests/dataset), reused here on object storage.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dataset"))
