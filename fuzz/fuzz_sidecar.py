"""The sidecar index file (``_bloomskip.index``, versions 1 and 2).

The first byte of an input is a flag: odd means the header checksum (version 2) or the whole-file
checksum (version 1) is recomputed first, so that mutations reach the JSON header, the section
table and the payload checks behind it. When a sidecar decodes, every payload either reads (its
SHA-256 verified) or is a FormatError, and a sidecar whose payloads all read is written again
and reads back equal.
"""

from __future__ import annotations

import hashlib
import struct
import tempfile
from pathlib import Path

from common import main, selector

from bloomskip.dataset.index.sidecar import MAGIC, decode_sidecar, read_sidecar, write_sidecar

SCRATCH = Path(tempfile.mkdtemp(prefix="bloomskip-fuzz-sidecar-")) / "_bloomskip.index"


def reseal(data: bytes) -> bytes:
    """Recompute the checksum a sidecar's layout puts where its header says."""
    if len(data) < 16 or data[:8] != MAGIC:
        return data
    version, _, header_length = struct.unpack_from("<HHI", data, 8)
    out = bytearray(data)
    if version == 1 and len(data) >= 16 + 8 + 32:
        out[-32:] = hashlib.sha256(out[:-32]).digest()
    elif version == 2 and 16 + header_length + 32 <= len(data):
        end = 16 + header_length
        out[end : end + 32] = hashlib.sha256(out[:end]).digest()
    return bytes(out)


def test_one_input(data: bytes) -> None:
    flag, data = selector(data, 2)
    if flag:
        data = reseal(data)
    sidecar = decode_sidecar(data, "fuzz.index")
    for entry in sidecar.files.values():
        for number in range(len(entry.payloads)):
            entry.payloads[number]  # noqa: B018 - reading verifies the section
    write_sidecar(sidecar, SCRATCH)
    again = read_sidecar(SCRATCH)
    assert again == sidecar
    assert (again.granule, again.indexes, list(again.files)) == (
        sidecar.granule, sidecar.indexes, list(sidecar.files)
    )  # fmt: skip


if __name__ == "__main__":
    main(test_one_input)
