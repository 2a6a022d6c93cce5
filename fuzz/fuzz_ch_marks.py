"""ClickHouse marks files (``.mrk``..``.mrk4`` and the compressed ``.cmrk*``).

The first byte chooses the layout and the substream count, the second whether compressed
blocks get their checksums recomputed (odd: yes, so mutations reach the decoders). When the
marks decode, re-encoding their words gives back the decoded bytes, and the record bound
(``max_records``) holds at the decoded count and refuses one record less.
"""

from __future__ import annotations

import numpy as np
from common import main, reseal_blocks, selector

from bloomskip.clickhouse import compression
from bloomskip.clickhouse.marks import MARKS_KINDS, MarksFormat, read_marks
from bloomskip.errors import FormatError

FORMATS = [MarksFormat(kind, compressed) for kind in MARKS_KINDS for compressed in (False, True)]


def test_one_input(data: bytes) -> None:
    choice, rest = selector(data, len(FORMATS) * 3)
    fmt, substreams = FORMATS[choice % len(FORMATS)], 1 + choice // len(FORMATS)
    flag, body = selector(rest, 2)
    if flag and fmt.compressed:
        body = reseal_blocks(body)
    marks = read_marks(body, fmt, "fuzz.mrk", substreams)
    raw = compression.read_compressed_stream(body) if fmt.compressed else body
    columns = [marks.block_offset, marks.offset_in_block]
    words = np.stack(columns, axis=2).reshape(len(marks), 2 * substreams)
    if marks.rows is not None:
        words = np.concatenate([words, marks.rows[:, None]], axis=1)
    assert words.astype("<u8").tobytes() == bytes(raw)
    assert len(read_marks(body, fmt, "fuzz.mrk", substreams, max_records=len(marks))) == len(marks)
    if fmt.compressed and len(marks):
        try:
            read_marks(body, fmt, "fuzz.mrk", substreams, max_records=len(marks) - 1)
        except FormatError:
            pass
        else:
            raise AssertionError("marks decoded past their max_records bound")


if __name__ == "__main__":
    main(test_one_input)
