"""The sidecar format: round trip, corruption, truncation and malformed headers."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bloomskip.dataset.sidecar import (
    MAGIC,
    FileEntry,
    IndexSpec,
    Sidecar,
    decode_sidecar,
    read_sidecar,
    write_sidecar,
)
from bloomskip.dataset.sources import FileIdentity
from bloomskip.errors import FormatError


def _sample() -> Sidecar:
    specs = [
        IndexSpec("INDEX a a TYPE bloom_filter(0.01) GRANULARITY 1", (("a", "Int64"),)),
        IndexSpec("INDEX s s TYPE tokenbf_v1(16, 2, 0) GRANULARITY 1", (("s", "String"),)),
    ]
    files = {
        "x/one.parquet": FileEntry(
            "x/one.parquet", "parquet", FileIdentity(123, 456, "ab" * 32), [3, 2],
            [b"\x01\x02\x03", bytes(range(32))],
        ),
        "two.arrow": FileEntry(
            "two.arrow", "arrow-ipc", FileIdentity(9, 10, "cd" * 32), [5], [b"", b"\xff" * 16]
        ),
    }  # fmt: skip
    return Sidecar("row-group", specs, files)


def _encoded(tmp_path: Path) -> bytes:
    path = tmp_path / "_bloomskip.index"
    write_sidecar(_sample(), path)
    return path.read_bytes()


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "_bloomskip.index"
    write_sidecar(_sample(), path)
    assert read_sidecar(path) == _sample()
    assert path.read_bytes()[:8] == MAGIC
    assert [p.name for p in tmp_path.iterdir()] == ["_bloomskip.index"]  # no temp file left


def test_fixed_layout(tmp_path: Path) -> None:
    data = _encoded(tmp_path)
    magic, version, flags, header_length = struct.unpack_from("<8sHHI", data)
    assert (magic, version, flags) == (MAGIC, 1, 0)
    assert hashlib.sha256(data[:-32]).digest() == data[-32:]
    (payload_length,) = struct.unpack_from("<Q", data, len(data) - 40)
    assert 16 + header_length + payload_length + 40 == len(data)
    header = json.loads(data[16 : 16 + header_length])
    assert header["files"][0]["payloads"] == [[0, 3], [3, 32]]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_flipped_byte_is_a_format_error(tmp_path: Path, data) -> None:
    encoded = bytearray(_encoded(tmp_path))
    position = data.draw(st.integers(0, len(encoded) - 1))
    encoded[position] ^= data.draw(st.integers(1, 255))
    with pytest.raises(FormatError):
        decode_sidecar(bytes(encoded), "flipped")


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_truncation_is_a_format_error(tmp_path: Path, data) -> None:
    encoded = _encoded(tmp_path)
    length = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(FormatError):
        decode_sidecar(encoded[:length], "truncated")


def _reseal(header: object, payload: bytes = b"") -> bytes:
    """Encode ``header`` with a valid checksum, to reach the header checks."""
    text = json.dumps(header).encode()
    body = struct.pack("<8sHHI", MAGIC, 1, 0, len(text)) + text + payload
    body += struct.pack("<Q", len(payload))
    return body + hashlib.sha256(body).digest()


GOOD_FILE = {
    "path": "a.parquet", "format": "parquet", "size": 1, "mtime_ns": 2,
    "footer_sha256": "00" * 32, "granule_rows": [1], "payloads": [[0, 4]],
}  # fmt: skip
GOOD_INDEX = {"definition": "a TYPE bloom_filter", "column_types": {"a": "Int64"}}


@pytest.mark.parametrize(
    ("header", "field"),
    [
        ([], "header"),
        ({"granule": 0, "indexes": [], "files": []}, "granule"),
        ({"granule": "rows", "indexes": [], "files": []}, "granule"),
        ({"granule": "row-group", "indexes": {}, "files": []}, "indexes"),
        ({"granule": "row-group", "indexes": [{"definition": 1}], "files": []}, "indexes[0]"),
        ({"granule": "row-group", "indexes": [GOOD_INDEX], "files": [
            {**GOOD_FILE, "payloads": [[0, 5]]}]}, "files[0]"),
        ({"granule": "row-group", "indexes": [GOOD_INDEX], "files": [
            {**GOOD_FILE, "payloads": []}]}, "files[0]"),
        ({"granule": "row-group", "indexes": [GOOD_INDEX], "files": [
            {**GOOD_FILE, "size": -1}]}, "files[0]"),
        ({"granule": "row-group", "indexes": [GOOD_INDEX], "files": [
            {**GOOD_FILE, "footer_sha256": "zz" * 32}]}, "files[0]"),
        ({"granule": "row-group", "indexes": [GOOD_INDEX], "files": [
            {**GOOD_FILE, "format": "csv"}]}, "files[0]"),
        ({"granule": "row-group", "indexes": [GOOD_INDEX], "files": [GOOD_FILE, GOOD_FILE]},
         "files[1]"),
    ],
)  # fmt: skip
def test_malformed_header_names_the_field(header: object, field: str) -> None:
    with pytest.raises(FormatError) as caught:
        decode_sidecar(_reseal(header, b"abcd"), "crafted")
    assert caught.value.field == field
    assert caught.value.source == "crafted"


def test_deeply_nested_header_is_a_format_error() -> None:
    text = b"[" * 100_000 + b"]" * 100_000
    body = struct.pack("<8sHHI", MAGIC, 1, 0, len(text)) + text + struct.pack("<Q", 0)
    with pytest.raises(FormatError, match="header"):
        decode_sidecar(body + hashlib.sha256(body).digest())


def test_valid_crafted_header_is_accepted() -> None:
    header = {"granule": 8192, "indexes": [GOOD_INDEX], "files": [GOOD_FILE]}
    sidecar = decode_sidecar(_reseal(header, b"abcd"))
    assert sidecar.granule == 8192
    assert sidecar.files["a.parquet"].payloads == [b"abcd"]


def test_wrong_magic_version_and_lengths() -> None:
    good = _reseal({"granule": "row-group", "indexes": [], "files": []})
    with pytest.raises(FormatError, match="magic"):
        decode_sidecar(b"NOTMAGIC" + good[8:])
    bad_version = bytearray(good)
    bad_version[8] = 2
    with pytest.raises(FormatError, match="version"):
        decode_sidecar(bytes(bad_version))
    with pytest.raises(FormatError, match="too short"):
        decode_sidecar(b"BSKIPIDX")
    header = b"{}"
    body = struct.pack("<8sHHI", MAGIC, 1, 0, 2**31) + header + struct.pack("<Q", 0)
    with pytest.raises(FormatError, match="do not add up"):
        decode_sidecar(body + hashlib.sha256(body).digest())
