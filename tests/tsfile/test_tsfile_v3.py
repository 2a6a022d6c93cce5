"""Format v3 metadata, assembled from the layout in research/tsfile.md §3.

No v3 file can be written with PyPI tsfile (it writes v4) and the repository's v3 test resource is
not available here, so this file is built byte by byte from the documented layout: a single root
MetadataIndexNode with plain-string device keys, metaOffset, and a filter whose bit_count and k
are always present. Its filter holds {d1.s1, d1.s2, d2.s1} with the spec hash, as the research
reports for the real resource.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from bloomskip import FormatError
from bloomskip.tsfile import BloomFilter, TsFileReader, analyze_filter, repair_filter
from bloomskip.tsfile.codec import encode_uvarint


def _varstr(text: str) -> bytes:
    raw = text.encode()
    return encode_uvarint(len(raw) * 2) + raw  # zig-zag of a non-negative length


def _timeseries(name: str) -> bytes:
    statistics = encode_uvarint(1) + struct.pack(">qq", 1, 1) + bytes(40)  # INT64
    return b"\x00" + _varstr(name) + b"\x02" + encode_uvarint(0) + statistics


def _node(entries: list[tuple[bytes, int]], end_offset: int, node_type: int) -> bytes:
    body = b"".join(key + struct.pack(">q", offset) for key, offset in entries)
    return encode_uvarint(len(entries)) + body + struct.pack(">q", end_offset) + bytes([node_type])


def build_v3(filter_bytes: bytes | None = None) -> bytes:
    data = bytearray(b"TsFile\x03")
    meta_offset = len(data)
    data += b"\x02"
    leaves = {}
    for device, names in {"d1": ["s1", "s2"], "d2": ["s1"]}.items():
        first = len(data)
        for name in names:
            data += _timeseries(name)
        leaves[device] = len(data)
        data += _node([(_varstr(names[0]), first)], leaves[device], 3)
    index_end = len(data)
    paths = ["d1.s1", "d1.s2", "d2.s1"]
    if filter_bytes is None:
        filter_bytes = BloomFilter.for_paths(paths, variant="signed-tail").to_bytes()
    metadata = (
        _node([(_varstr(d), offset) for d, offset in leaves.items()], index_end, 1)
        + struct.pack(">q", meta_offset)
        + filter_bytes
    )
    return bytes(data) + metadata + struct.pack(">i", len(metadata)) + b"TsFile"


def test_v3_metadata(tmp_path: Path) -> None:
    path = tmp_path / "v3.tsfile"
    path.write_bytes(build_v3())
    with TsFileReader(path) as reader:
        assert reader.version == 3
        assert reader.metadata.table_schemas == {} and reader.metadata.properties == {}
        assert reader.series_paths() == ["d1.s1", "d1.s2", "d2.s1"]
        assert reader.lookup("d1.s2").present and reader.lookup("d2.s1").present
        assert not reader.lookup("d2.s2").present
        assert analyze_filter(reader).exact_match["signed-tail"]
    repair_filter(path)
    with TsFileReader(path) as reader:
        assert reader.version == 3
        assert analyze_filter(reader).hash_variant == "both"


def test_v3_empty_filter_still_has_its_counts(tmp_path: Path) -> None:
    path = tmp_path / "v3.tsfile"
    path.write_bytes(build_v3(b"\x00" + encode_uvarint(256) + encode_uvarint(5)))
    with TsFileReader(path) as reader:
        assert reader.bloom_filter is None
        assert reader.lookup("d1.s1").present
    path.write_bytes(build_v3(b"\x00"))  # v3 without the counts: cut short
    with pytest.raises(FormatError) as raised:
        TsFileReader(path)
    assert raised.value.field == "bloom_filter.bit_count"
