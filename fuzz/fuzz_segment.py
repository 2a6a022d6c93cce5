"""The parts of a format-2 segment (docs/segments.md, docs/sliced-layout.md): its file
directory, and a bit-sliced index part.

The first byte selects the parser: even, the directory; odd, a sliced part: its header, then
the whole part decoded to granules, which encode to the same bytes again. When the flag's
second bit is set, the SHA-256 (the directory's, the part header's) is recomputed first, so
that mutations reach the checks behind it.
"""

from __future__ import annotations

import hashlib

from common import main, selector

from bloomskip.dataset.index.segments import DIRECTORY_MAGIC, decode_directory
from bloomskip.dataset.index.sliced import (
    PREFIX_SIZE,
    decode_part,
    encode_part,
    part_header_length,
    read_part_header,
)
from bloomskip.errors import FormatError


def _resealed_part(data: bytes) -> bytes:
    """The part with its header's SHA-256 recomputed, where the prefix gives a length."""
    try:
        length = part_header_length(data[:PREFIX_SIZE])
    except FormatError:
        return data
    if length > len(data):
        return data
    body = data[: length - 32]
    return body + hashlib.sha256(body).digest() + data[length:]


def test_one_input(data: bytes) -> None:
    flag, data = selector(data, 4)
    if flag % 2 == 0:
        if flag & 2 and data[:8] == DIRECTORY_MAGIC:
            data = DIRECTORY_MAGIC + hashlib.sha256(data[40:]).digest() + data[40:]
        decode_directory(data, "fuzz.bsk")
        return
    if flag & 2:
        data = _resealed_part(data)
    read_part_header(data, "fuzz.bsk", part_size=len(data))
    granules = decode_part(data, None, "fuzz.bsk")
    assert encode_part(granules) == data


if __name__ == "__main__":
    main(test_one_input)
