"""The ``skp_idx.packed`` archive of ClickHouse 26.x (header, members, their bytes).

When an archive parses, every member lies inside the data area and reads back at its size, and
an archive written again from the parsed members parses to the same members.
"""

from __future__ import annotations

import struct

from common import main

from bloomskip.clickhouse.marks import PackedArchive


def _encode(archive: PackedArchive) -> bytes:
    """Write the members again, in order, back to back after a fresh header."""
    names = list(archive.members)
    fixed = 16 + (8 if archive.version >= 1 else 0)
    header_size = 9 + sum(_varuint_size(len(n.encode())) + len(n.encode()) + fixed for n in names)
    out = bytearray([archive.version]) + struct.pack("<Q", len(names))
    offset = header_size
    for name in names:
        member = archive.members[name]
        encoded = name.encode()
        out += _varuint(len(encoded)) + encoded + struct.pack("<QQ", offset, member.size)
        if archive.version >= 1:
            out += struct.pack("<Q", member.uncompressed_size)
        offset += member.size
    return bytes(out) + b"".join(archive.read(name) for name in names)


def _varuint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _varuint_size(value: int) -> int:
    return len(_varuint(value))


def test_one_input(data: bytes) -> None:
    archive = PackedArchive.parse(data, "fuzz.packed")
    for member in archive.members.values():
        assert member.offset >= 9 and member.offset + member.size <= len(data)
        assert len(archive.read(member.name)) == member.size
    again = PackedArchive.parse(_encode(archive), "again.packed")
    assert list(again.members) == list(archive.members)
    for name, member in archive.members.items():
        assert again.read(name) == archive.read(name)
        assert again.members[name].uncompressed_size == member.uncompressed_size


if __name__ == "__main__":
    main(test_one_input)
