"""The TsFile reader (v3 and v4 files: tail, TsFileMetadata, metadata index, lookups).

When a file opens and lists its series, the index walk of a lookup finds each listed series
(the listing and the lookup read the same index two ways), and a lookup that passes the filter
finds it too. A self-contradictory index (a device under another table's root or with more tags
than its table's schema, a table without a schema, keys out of order) must be refused with a
FormatError by the listing or the lookup, never listed and then not found. Opening must
answer as the tests' Python oracle of TsFileMetadata does (tests/tsfile/tsfile_oracle.py): the
same metadata, or an error with the same message, field, offset and kind.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from common import main

from bloomskip.errors import FormatError, TruncatedError
from bloomskip.tsfile.reader import HEAD_SIZE, TAIL_SIZE, TsFileReader, check_envelope

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "tsfile"))
from tsfile_oracle import parse_metadata  # noqa: E402

SCRATCH = Path(tempfile.mkdtemp(prefix="bloomskip-fuzz-tsfile-")) / "fuzz.tsfile"
#: Lookups per input: enough to cross the index, few enough to keep executions fast.
LOOKUPS = 16


def _oracle(data: bytes) -> tuple[object, ...] | None:
    """The oracle's error for TsFileMetadata (None: it parses, or the envelope fails first)."""
    if len(data) < HEAD_SIZE + TAIL_SIZE:
        return None
    try:
        version, start, end = check_envelope(data[:HEAD_SIZE], data, len(data), str(SCRATCH))
    except FormatError:
        return None
    try:
        parse_metadata(data[start:end], start, version, str(SCRATCH))
    except FormatError as error:
        return _described(error)
    return None


def _described(error: FormatError) -> tuple[object, ...]:
    return str(error), error.field, error.offset, isinstance(error, TruncatedError)


def test_one_input(data: bytes) -> None:
    SCRATCH.write_bytes(data)
    expected = _oracle(data)
    try:
        reader = TsFileReader(SCRATCH)
    except FormatError as error:
        assert expected is None or _described(error) == expected, (_described(error), expected)
        raise
    assert expected is None, expected
    with reader:
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
