"""The TsFile Bloom filter as serialized in TsFileMetadata.

When the bytes parse: they serialize back to an equal filter, a path added from the input is
found in both hash variants, and a filter is a superset of itself before the add.
"""

from __future__ import annotations

from common import main

from bloomskip.tsfile.filter import BloomFilter


def test_one_input(data: bytes) -> None:
    bloom = BloomFilter.from_bytes(data, source="fuzz.filter")
    again = BloomFilter.from_bytes(bloom.to_bytes(), source="again.filter")
    assert again == bloom and again.to_bytes() == bloom.to_bytes()
    before = bloom.copy()
    path = "root.fuzz." + data[-8:].hex()
    bloom.add(path)
    assert path in bloom
    assert bool(bloom.contains_with([path], True)[0]) or bool(bloom.contains_with([path], False)[0])
    assert bloom.issuperset(before)


if __name__ == "__main__":
    main(test_one_input)
