"""A Parquet split-block Bloom filter as stored at a column chunk's bloom_filter_offset: the
Thrift compact BloomFilterHeader, then the bitset.

Any bytes either parse or raise FormatError. When they parse: they serialize back to the same
bytes when the header was the canonical one, a reparse gives an equal filter, a value added is
then found, and the filter's statistics are in range.
"""

from __future__ import annotations

from common import main

from bloomskip.errors import FormatError
from bloomskip.parquet.filter import SplitBlockBloomFilter
from bloomskip.parquet.thrift import encode_bloom_filter_header


def test_one_input(data: bytes) -> None:
    try:
        bloom = SplitBlockBloomFilter.from_bytes(data, offset=4, source="fuzz.parquet")
    except FormatError:
        return
    canonical = encode_bloom_filter_header(bloom.num_bytes)
    if data.startswith(canonical):
        assert bloom.to_bytes() == data
    again = SplitBlockBloomFilter.from_bytes(bloom.to_bytes())
    assert again == bloom
    assert 0.0 <= bloom.estimated_fpr <= 1.0 and 0.0 <= bloom.fill_ratio <= 1.0
    value = data[-8:]
    bloom.add(value)
    assert value in bloom
    assert (bloom | again) == bloom


if __name__ == "__main__":
    main(test_one_input)
