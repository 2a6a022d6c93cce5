"""A location that cannot be reached is named as the user gave it, with the cause, in one line.

Against the moto S3 server: a bucket that does not exist, an endpoint nothing listens on. The
one line names the location asked for (not an object bloomskip looked for under it, such as
``_delta_log/``) and the cause; ``bloomskip --debug`` prints the client's whole text and the
traceback first.
"""

from __future__ import annotations

import socket

import pytest
from dataset_fixtures import write_dataset

from bloomskip import Dataset, StorageError
from bloomskip.cli import main


def _unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_missing_bucket_is_named_with_its_cause(s3_endpoint, capsys):
    assert main(["query", "s3://no-such-bucket-33/logs/", "--where", "k = 1"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "bloomskip: error: s3://no-such-bucket-33/logs: bucket 'no-such-bucket-33' does not exist"
    ]
    with pytest.raises(StorageError) as raised:
        Dataset("s3://no-such-bucket-33/logs")
    assert "NoSuchBucket" in str(raised.value.__cause__)  # the client's own text, kept


def test_a_missing_index_bucket_is_named(s3_endpoint, tmp_path, capsys):
    write_dataset(tmp_path / "logs", [(100, 50)])
    location = ["--index-location", "s3://no-such-bucket-33/ix"]
    build = ["index", "build", str(tmp_path / "logs"), *location, "--index", "k TYPE bloom_filter"]
    assert main(build) == 2
    assert capsys.readouterr().err.splitlines() == [
        "bloomskip: error: s3://no-such-bucket-33/ix: bucket 'no-such-bucket-33' does not exist"
    ]


def test_an_unreachable_endpoint_is_one_short_line(s3_endpoint, monkeypatch, capsys):
    port = _unused_port()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    assert main(["query", "s3://bucket/logs", "--where", "k = 1"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"bloomskip: error: s3://bucket/logs: cannot reach the object store at "
        f"http://127.0.0.1:{port} (connection refused)"
    ]


@pytest.mark.parametrize("where", ["before", "after"])
def test_debug_prints_the_whole_cause_before_the_line(s3_endpoint, capsys, where):
    query = ["query", "s3://no-such-bucket-33/logs", "--where", "k = 1"]
    argv = ["--debug", *query] if where == "before" else [*query, "--debug"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):")
    assert "<Code>NoSuchBucket</Code>" in err  # the client's text, cut from the line
    assert err.splitlines()[-1] == (
        "bloomskip: error: s3://no-such-bucket-33/logs: bucket 'no-such-bucket-33' does not exist"
    )
