"""The sidecar format: round trip, corruption, truncation and malformed headers."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bloomskip.dataset.index.sidecar import (
    MAGIC,
    FileEntry,
    IndexSpec,
    Sidecar,
    decode_sidecar,
    join_sections,
    read_sidecar,
    write_sidecar,
)
from bloomskip.dataset.listing.files import FileIdentity
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
    assert (magic, version, flags) == (MAGIC, 2, 0)
    header_end = 16 + header_length
    assert hashlib.sha256(data[:header_end]).digest() == data[header_end : header_end + 32]
    header = json.loads(data[16:header_end])
    payload_start = header_end + 32
    assert payload_start + header["payload_length"] == len(data)
    one, two = header["files"]
    # Index-major: the sections of index 0 of every file, then those of index 1.
    assert [section[:2] for section in one["payloads"]] == [[0, 3], [3, 32]]
    assert [section[:2] for section in two["payloads"]] == [[3, 0], [35, 16]]
    for entry, sample in zip(header["files"], _sample().files.values(), strict=True):
        for (offset, length, digest), payload in zip(
            entry["payloads"], sample.payloads, strict=True
        ):
            section = data[payload_start + offset : payload_start + offset + length]
            assert section == payload
            assert hashlib.sha256(section).hexdigest() == digest


def _load_everything(data: bytes, source: str) -> Sidecar:
    """Decode and read every payload section (a v2 section is verified when it is read)."""
    sidecar = decode_sidecar(data, source)
    for entry in sidecar.files.values():
        list(entry.payloads)
    return sidecar


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_flipped_byte_is_a_format_error(tmp_path: Path, data) -> None:
    encoded = bytearray(_encoded(tmp_path))
    position = data.draw(st.integers(0, len(encoded) - 1))
    encoded[position] ^= data.draw(st.integers(1, 255))
    with pytest.raises(FormatError):
        _load_everything(bytes(encoded), "flipped")


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_truncation_is_a_format_error(tmp_path: Path, data) -> None:
    encoded = _encoded(tmp_path)
    length = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(FormatError):
        decode_sidecar(encoded[:length], "truncated")  # the size check runs before any payload


def _reseal(header: object, payload: bytes = b"") -> bytes:
    """Encode ``header`` as a version-1 file with a valid checksum, to reach the header checks.

    Version 1 is no longer written but still read: these crafted files are its fixtures.
    """
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
    bad_version[8] = 3
    with pytest.raises(FormatError, match="version"):
        decode_sidecar(bytes(bad_version))
    with pytest.raises(FormatError, match="too short"):
        decode_sidecar(b"BSKIPIDX")
    header = b"{}"
    body = struct.pack("<8sHHI", MAGIC, 1, 0, 2**31) + header + struct.pack("<Q", 0)
    with pytest.raises(FormatError, match="do not add up"):
        decode_sidecar(body + hashlib.sha256(body).digest())


def _reseal_v2(header: dict, payload: bytes = b"") -> bytes:
    """Encode ``header`` as a version-2 file with a valid header checksum."""
    text = json.dumps({"payload_length": len(payload), **header}).encode()
    prefix = struct.pack("<8sHHI", MAGIC, 2, 0, len(text)) + text
    return prefix + hashlib.sha256(prefix).digest() + payload


GOOD_SECTION = [0, 4, hashlib.sha256(b"abcd").hexdigest()]


def test_v2_reads_only_the_sections_it_is_asked_for() -> None:
    header = {"granule": "row-group", "indexes": [GOOD_INDEX, GOOD_INDEX], "files": [
        {**GOOD_FILE, "payloads": [GOOD_SECTION, [4, 2, "00" * 32]]}]}  # fmt: skip
    encoded = _reseal_v2(header, b"abcdXY")
    sidecar = decode_sidecar(encoded, "crafted")
    payloads = sidecar.files["a.parquet"].payloads
    assert bytes(payloads[0]) == b"abcd"  # its own checksum holds, the other's does not matter
    with pytest.raises(FormatError, match="corrupt") as caught:
        payloads[1]
    assert (caught.value.field, caught.value.offset) == ("files[0].payloads[1]", len(encoded) - 2)


@pytest.mark.parametrize(
    ("file", "payload_length", "field"),
    [
        ({**GOOD_FILE, "payloads": [[0, 4]]}, 4, "files[0]"),  # no checksum
        ({**GOOD_FILE, "payloads": [[0, 4, "zz" * 32]]}, 4, "files[0]"),
        ({**GOOD_FILE, "payloads": [[1, 3, "00" * 32]]}, 4, "payloads"),  # a gap
        ({**GOOD_FILE, "payloads": [[0, 5, "00" * 32]]}, 4, "files[0]"),  # past the end
        ({**GOOD_FILE, "payloads": [[0, 3, "00" * 32]]}, 4, "payload_length"),  # stray byte
        (GOOD_FILE | {"payloads": [GOOD_SECTION]}, 5, "payload_length"),  # size mismatch
        (GOOD_FILE | {"payloads": [GOOD_SECTION]}, "4", "payload_length"),
    ],
)
def test_v2_malformed_section_table_names_the_field(file, payload_length, field) -> None:
    header = {"granule": "row-group", "indexes": [GOOD_INDEX], "files": [file]}
    text = json.dumps({**header, "payload_length": payload_length}).encode()
    prefix = struct.pack("<8sHHI", MAGIC, 2, 0, len(text)) + text
    with pytest.raises(FormatError) as caught:
        decode_sidecar(prefix + hashlib.sha256(prefix).digest() + b"abcd", "crafted")
    assert caught.value.field == field


def test_v2_header_length_past_the_end_is_a_format_error() -> None:
    good = bytearray(_reseal_v2({"granule": "row-group", "indexes": [], "files": []}))
    struct.pack_into("<I", good, 12, 2**31)
    with pytest.raises(FormatError, match="runs past the end"):
        decode_sidecar(bytes(good))


def test_v1_file_on_disk_is_still_read(tmp_path: Path) -> None:
    path = tmp_path / "_bloomskip.index"
    header = {"granule": "row-group", "indexes": [GOOD_INDEX], "files": [GOOD_FILE]}
    path.write_bytes(_reseal(header, b"abcd"))
    sidecar = read_sidecar(path)
    assert sidecar.files["a.parquet"].payloads == [b"abcd"]
    write_sidecar(sidecar, path)  # rewritten as version 2
    assert struct.unpack_from("<H", path.read_bytes(), 8) == (2,)
    assert read_sidecar(path) == sidecar


@pytest.mark.parametrize("number", [0, 1])
def test_join_sections_reads_an_index_at_once_and_isolates_a_corrupt_section(
    tmp_path: Path, number: int
) -> None:
    path = tmp_path / "_bloomskip.index"
    write_sidecar(_sample(), path)
    lists = [entry.payloads for entry in read_sidecar(path).files.values()]
    expected = [entry.payloads[number] for entry in _sample().files.values()]
    data, good, errors = join_sections(lists, number)
    assert (data, good, errors) == (b"".join(expected), [0, 1], {})
    # Corrupt the first file's section of this index: only that file drops out.
    encoded = bytearray(path.read_bytes())
    (header_length,) = struct.unpack_from("<I", encoded, 12)
    header = json.loads(encoded[16 : 16 + header_length])
    offset, length, _ = header["files"][0]["payloads"][number]
    encoded[16 + header_length + 32 + offset + length - 1] ^= 0x01
    corrupt = decode_sidecar(bytes(encoded), "flipped")
    data, good, errors = join_sections([e.payloads for e in corrupt.files.values()], number)
    assert (data, good, list(errors)) == (expected[1], [1], [0])
    assert errors[0].field == f"files[0].payloads[{number}]"


def test_v2_overlapping_sections_are_a_format_error() -> None:
    twice = {**GOOD_FILE, "payloads": [GOOD_SECTION, GOOD_SECTION]}
    header = {"granule": "row-group", "indexes": [GOOD_INDEX, GOOD_INDEX], "files": [twice]}
    with pytest.raises(FormatError, match="gap or overlap") as caught:
        decode_sidecar(_reseal_v2({**header, "payload_length": 4}, b"abcd"), "crafted")
    assert caught.value.field == "payloads"


@pytest.mark.parametrize(
    ("literal", "why"),
    [
        ("9" * 5000, "5000 digits"),  # json.loads alone raises a plain ValueError here
        ("-" + "1" * 4301, "4302 digits"),
        ("1" * 21, "21 digits"),
        (str(2**63), "files[0]"),  # 19 digits, but no 64-bit count
    ],
)
def test_a_header_integer_beyond_64_bits_is_a_format_error(literal: str, why: str) -> None:
    header = {"granule": "row-group", "indexes": [GOOD_INDEX], "files": [GOOD_FILE]}
    text = json.dumps(header).replace('"mtime_ns": 2', f'"mtime_ns": {literal}')
    assert literal in text
    body = struct.pack("<8sHHI", MAGIC, 1, 0, len(text)) + text.encode() + b"abcd"
    body += struct.pack("<Q", 4)
    with pytest.raises(FormatError) as caught:
        decode_sidecar(body + hashlib.sha256(body).digest(), "crafted")
    assert why in str(caught.value) or caught.value.field == why
    assert caught.value.source == "crafted"


def _plant_huge_integer(sidecar_path: Path) -> None:
    """Rewrite a real version-2 sidecar's header with a 5000-digit mtime, checksum resealed."""
    encoded = sidecar_path.read_bytes()
    (header_length,) = struct.unpack_from("<I", encoded, 12)
    header = json.loads(encoded[16 : 16 + header_length])
    payload = encoded[16 + header_length + 32 :]
    text = json.dumps(header, separators=(",", ":"))
    mtime = f'"mtime_ns":{header["files"][0]["mtime_ns"]}'
    text = text.replace(mtime, '"mtime_ns":' + "7" * 5000, 1).encode()
    prefix = struct.pack("<8sHHI", MAGIC, 2, 0, len(text)) + text
    sidecar_path.write_bytes(prefix + hashlib.sha256(prefix).digest() + payload)


def test_cli_query_scans_and_build_replaces_a_sidecar_with_a_huge_integer(
    tmp_path: Path, dataset_dir: Path, capsys
) -> None:
    """``bloomskip query`` warns, scans and exits 0; ``index build`` writes a new sidecar."""
    import shutil

    import pyarrow.dataset as ds
    from dataset_fixtures import INDEXES

    from bloomskip.cli import main

    data = tmp_path / "data"
    shutil.copytree(dataset_dir, data)
    sidecar_path = data / "_bloomskip.index"
    build = ["index", "build", str(data), "--no-progress", "--sidecar", str(sidecar_path)]
    for definition in INDEXES:
        build += ["--index", definition]
    assert main(build) == 0
    _plant_huge_integer(sidecar_path)
    capsys.readouterr()
    query = ["query", str(data), "--where", "k = 13", "--select", "id", "--format", "json"]
    query += ["--sidecar", str(sidecar_path)]
    assert main(query) == 0
    captured = capsys.readouterr()
    warnings = captured.err.strip().splitlines()
    assert len(warnings) == 1 and warnings[0].startswith("bloomskip: warning: index ignored")
    assert "5000 digits" in warnings[0]
    got = sorted(json.loads(line)["id"] for line in captured.out.splitlines())
    table = ds.dataset(sorted(data.glob("*.parquet"))).to_table(filter=ds.field("k") == 13)
    assert got == sorted(table.column("id").to_pylist()) and got
    # The build replaces it (keeping the definitions it cannot read means naming them again).
    assert main(build) == 0
    assert "3 (re)indexed" in capsys.readouterr().out
    assert len(read_sidecar(sidecar_path).files) == 3
    assert main(query) == 0
    assert capsys.readouterr().err == ""
