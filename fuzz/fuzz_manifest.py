"""A manifest version of the segmented index (``versions/<n>.json``, docs/segments.md): a
commit record (format 2) or a whole manifest (format 1).

The first byte of an input is a flag: odd means the checksums (the header's and each segment
entry's) are recomputed first when the rest is a JSON object, so that mutations reach the field
checks and the schema checks behind them. When a record decodes, it is written again and reads
back equal, without the entries it left out as damaged; one on no base also applies.
"""

from __future__ import annotations

import dataclasses
import json

from common import main, selector

from bloomskip.dataset.index.segments import (
    MANIFEST_VERSION,
    _checksum,
    decode_record,
    encode_record,
)


def reseal(data: bytes) -> bytes:
    """Recompute the checksums a writer puts in a manifest, where the input has them."""
    try:
        document = json.loads(data)
        if not isinstance(document, dict):
            return data
        for entry in document.get("segments", None) or ():
            if isinstance(entry, dict) and "checksum" in entry:
                entry["checksum"] = _checksum(entry, "segments[]", "fuzz")
        if "checksum" in document:
            header = {name: value for name, value in document.items() if name != "segments"}
            document["checksum"] = _checksum(header, "manifest", "fuzz")
        return json.dumps(document).encode()
    except Exception:  # noqa: BLE001 - not a JSON object the fuzzer can reseal: used as is
        return data


def test_one_input(data: bytes) -> None:
    flag, data = selector(data, 2)
    if flag:
        data = reseal(data)
    record = decode_record(data, "fuzz.json")
    again = decode_record(encode_record(record), "again.json", record.version)
    assert again == dataclasses.replace(record, damaged=(), format_version=MANIFEST_VERSION)
    if not record.base:
        record.apply(None)


if __name__ == "__main__":
    main(test_one_input)
