"""A segment's plain index part of a ``parquet_bloom_filter`` index (the BSKPLAIN header and
the granules: physical type, type_length, Parquet filter header and bitset, back to back).

Any bytes either decode or raise a BloomskipError. When they decode: the granules serialize
back to the part's granule bytes, every granule has a whole number of 32-byte blocks, and a
probe answers one bool per granule and literal.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from common import main

from bloomskip.dataset.index.plain_part import decode_part, read_part_header


def test_one_input(data: bytes) -> None:
    header = read_part_header(data, "fuzz.bsk", len(data))
    granules = decode_part(data, None, "fuzz.bsk")
    assert len(granules) == header.granule_count
    assert granules.to_bytes() == data[header.header_length :]
    sizes = granules.filter_sizes()
    assert (sizes % 32 == 0).all()
    found = granules.literals_present(0, pa.array([1, 2, 3], pa.int64()), "Int64")
    assert found.shape == (len(granules), 3) and found.dtype == np.bool_


if __name__ == "__main__":
    main(test_one_input)
