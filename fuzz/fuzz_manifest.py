"""A manifest version of the segmented index (``versions/<n>.json``, docs/segments.md).

The first byte of an input is a flag: odd means the checksums (the header's and each segment
entry's) are recomputed first when the rest is a JSON object, so that mutations reach the field
checks and the schema checks behind them. When a manifest decodes, it is written again and
reads back equal, without the entries it left out as damaged.
"""

from __future__ import annotations

import dataclasses
import json

from common import main, selector

from bloomskip.dataset.index.segments import _checksum, decode_manifest, encode_manifest


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
    manifest = decode_manifest(data, "fuzz.json")
    again = decode_manifest(encode_manifest(manifest), "again.json", manifest.version)
    assert again == dataclasses.replace(manifest, damaged=())


if __name__ == "__main__":
    main(test_one_input)
