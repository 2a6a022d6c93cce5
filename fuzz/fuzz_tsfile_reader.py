"""The TsFile reader (v3 and v4 files: tail, TsFileMetadata, metadata index, lookups).

When a file opens and lists its series, the index walk of a lookup finds each listed series
(the listing and the lookup read the same index two ways), and a lookup that passes the filter
finds it too. A self-contradictory index (a device under another table's root or with more tags
than its table's schema, a table without a schema, keys out of order) must be refused with a
FormatError by the listing or the lookup, never listed and then not found.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from common import main

from bloomskip.tsfile.reader import TsFileReader

SCRATCH = Path(tempfile.mkdtemp(prefix="bloomskip-fuzz-tsfile-")) / "fuzz.tsfile"
#: Lookups per input: enough to cross the index, few enough to keep executions fast.
LOOKUPS = 16


def test_one_input(data: bytes) -> None:
    SCRATCH.write_bytes(data)
    with TsFileReader(SCRATCH) as reader:
        series = reader.series()
        step = max(1, len(series) // LOOKUPS)
        for item in series[::step]:
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
