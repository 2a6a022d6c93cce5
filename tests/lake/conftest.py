"""A real S3-API server on 127.0.0.1 for the object-storage tests, and stores on both backends.

The server is ``moto``'s standalone server (``ThreadedMotoServer``), reached over HTTP by the same
clients a user's run uses (obstore for the index, pyarrow's S3 filesystem for data), configured
the standard way: ``AWS_ENDPOINT_URL`` and the usual credential variables.
"""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Iterator
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


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """The endpoint URL of a moto S3 server started for this test run (and its env set)."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    saved = {name: os.environ.get(name) for name in [*S3_ENV, "AWS_ENDPOINT_URL"]}
    os.environ.update(S3_ENV, AWS_ENDPOINT_URL=endpoint)
    try:
        yield endpoint
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        server.stop()


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
