"""The TsFile reader (v3 and v4 files: tail, TsFileMetadata, metadata index, lookups).

When a file opens and lists its series, the index walk of a lookup finds each listed series
(the listing and the lookup read the same index two ways), and a lookup that passes the filter
finds it too. Series of a self-contradictory file are left out of the check: a device listed
under the index root of another table (its first segment is not the root's table name), a
table device whose table has no schema, or whose segments are not its schema's tags (the path
text then splits another way); and a whole file whose index is out of order (devices, or a
device's measurements, not strictly increasing), as a lookup searches the index by binary
search. A lookup cannot find those (a known limitation, see docs/reliability.md: TsFile has no
checksum, and the reader does not yet refuse such an index; the listing and the lookup never
crash or hang on them).
"""

from __future__ import annotations

import itertools
import os
import tempfile
from pathlib import Path

from common import main

from bloomskip.tsfile.reader import TsFileReader

SCRATCH = Path(tempfile.mkdtemp(prefix="bloomskip-fuzz-tsfile-")) / "fuzz.tsfile"
#: Lookups per input: enough to cross the index, few enough to keep executions fast.
LOOKUPS = 16


def _device_key(device: tuple) -> tuple:
    return tuple((0, "") if segment is None else (1, segment) for segment in device)


def _in_order(series: list) -> bool:
    """Devices, and each device's measurements, strictly increasing as the index lists them."""
    groups = [list(group) for _, group in itertools.groupby(series, key=lambda s: s.device)]
    devices = [_device_key(group[0].device) for group in groups]
    if any(a >= b for a, b in itertools.pairwise(devices)):
        return False
    return all(
        a.measurement < b.measurement for group in groups for a, b in itertools.pairwise(group)
    )


def test_one_input(data: bytes) -> None:
    SCRATCH.write_bytes(data)
    with TsFileReader(SCRATCH) as reader:
        series = reader.series()
        if not _in_order(series):
            series = []
        roots, schemas = reader.metadata.table_roots, reader.metadata.table_schemas
        step = max(1, len(series) // LOOKUPS)
        for item in series[::step]:
            table = item.device[0]
            if (table not in roots and "" not in roots) or (schemas and table not in schemas):
                continue
            if schemas and len(item.device) != 1 + schemas[table].tag_count:
                continue
            path = item.path
            assert reader.index_contains_path(path), path
            result = reader.lookup(path)
            assert result.present or result.bloom == "absent", result
        reader.lookup("root.fuzz.not.there")


if __name__ == "__main__":
    try:
        main(test_one_input)
    finally:
        if SCRATCH.exists():
            os.unlink(SCRATCH)
