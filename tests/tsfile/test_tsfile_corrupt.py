"""Corrupt files: every failure is a FormatError naming a field and an offset, nothing else."""

from __future__ import annotations

import random
import struct
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tsfile_corpus import CorpusFile

from bloomskip import FormatError
from bloomskip.tsfile import TsFileReader, analyze_filter
from bloomskip.tsfile.codec import encode_uvarint

# Peak Python + numpy allocation allowed while reading one small corrupt file.
ALLOCATION_LIMIT = 8 * 1024 * 1024


def _exercise(path: Path) -> str:
    """Open, list, analyze and look up; return "ok" or raise (only FormatError is acceptable)."""
    with TsFileReader(path) as reader:
        paths = reader.series_paths()
        analyze_filter(reader)
        for probe in [*paths[:3], "root.sg.d1.s1", "t1.gz.null.s1"]:
            reader.lookup(probe)
    return "ok"


def _outcome(path: Path) -> str:
    try:
        return _exercise(path)
    except FormatError as error:
        assert error.field and error.offset is not None and error.source == str(path)
        return "format-error"


class _Scratch:
    """One scratch file rewritten in place (creating files is slow on some file systems)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = open(path, "w+b")  # noqa: SIM115 - closed by the fixture

    def write(self, data: bytes) -> Path:
        self._file.seek(0)
        self._file.write(data)
        self._file.truncate(len(data))
        self._file.flush()
        return self.path

    def close(self) -> None:
        self._file.close()


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[_Scratch]:
    file = _Scratch(tmp_path / "scratch.tsfile")
    yield file
    file.close()


def _metadata_span(path: Path) -> tuple[int, int, int, int]:
    with TsFileReader(path) as reader:
        metadata = reader.metadata
        return metadata.start, metadata.end, metadata.meta_offset, metadata.filter_start


def test_every_truncation_is_a_format_error(
    corpus: dict[str, CorpusFile], scratch: _Scratch
) -> None:
    data = corpus["tree_10_cjk"].path.read_bytes()
    for length in range(len(data) - 1, -1, -1):
        target = scratch.write(data[:length])
        with pytest.raises(FormatError) as raised:
            _exercise(target)
        assert raised.value.field in {"file size", "tail magic"}


@pytest.mark.parametrize("name", ["tree_10_cjk", "table_small"])
def test_cutting_into_the_metadata_keeps_the_tail(
    corpus: dict[str, CorpusFile], scratch: _Scratch, name: str
) -> None:
    data = corpus[name].path.read_bytes()
    start, end, _, _ = _metadata_span(corpus[name].path)
    outcomes = []
    for cut in range(start - 40, end):
        outcomes.append(_outcome(scratch.write(data[:cut] + data[end:])))
    assert outcomes.count("format-error") == len(outcomes)


@pytest.mark.parametrize(
    "name", ["tree_10_cjk", "table_small", "tree_types", "tree_devices", "tree_wide"]
)
def test_random_byte_flips(corpus: dict[str, CorpusFile], scratch: _Scratch, name: str) -> None:
    data = corpus[name].path.read_bytes()
    start, end, meta_offset, _ = _metadata_span(corpus[name].path)
    generator = random.Random(f"flips-{name}")
    outcomes = {"ok": 0, "format-error": 0}
    for trial in range(800):
        flipped = bytearray(data)
        # Mostly inside TsFileMetadata; some in the index region before it.
        low = start if trial % 4 else meta_offset
        for _ in range(1 + trial % 3):
            flipped[generator.randrange(low, end)] ^= generator.randrange(1, 256)
        outcomes[_outcome(scratch.write(bytes(flipped)))] += 1
    assert outcomes["format-error"] > 0


def _patched(path: Path, tmp_path: Path, offset: int, new: bytes, old_length: int) -> Path:
    data = path.read_bytes()
    start, end, _, _ = _metadata_span(path)
    patched = bytearray(data[:offset] + new + data[offset + old_length :])
    if start <= offset < end:
        # Keep the tail's metadata size consistent with the edit.
        size = end - start + len(new) - old_length
        patched[-10:-6] = struct.pack(">i", size)
    target = tmp_path / "patched.tsfile"
    target.write_bytes(bytes(patched))
    return target


def _assert_bounded_format_error(path: Path, field_part: str) -> FormatError:
    tracemalloc.start()
    try:
        with pytest.raises(FormatError) as raised:
            _exercise(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < ALLOCATION_LIMIT
    assert field_part in (raised.value.field or ""), raised.value
    return raised.value


def test_absurd_metadata_size(corpus: dict[str, CorpusFile], tmp_path: Path) -> None:
    data = bytearray(corpus["tree_1"].path.read_bytes())
    for size in (2**31 - 1, -1, -(2**31), len(data)):
        data[-10:-6] = struct.pack(">i", size)
        target = tmp_path / "size.tsfile"
        target.write_bytes(bytes(data))
        error = _assert_bounded_format_error(target, "metadata_size")
        assert error.offset == len(data) - 10


def test_absurd_meta_offset(corpus: dict[str, CorpusFile], tmp_path: Path) -> None:
    path = corpus["tree_1"].path
    _, _, _, filter_start = _metadata_span(path)
    for value in (2**63 - 1, -(2**63), 0):
        target = _patched(path, tmp_path, filter_start - 8, struct.pack(">q", value), 8)
        error = _assert_bounded_format_error(target, "meta_offset")
        assert error.offset == filter_start - 8


def test_absurd_child_offset(corpus: dict[str, CorpusFile], tmp_path: Path) -> None:
    path = corpus["tree_1000"].path
    with TsFileReader(path) as reader:
        root = next(iter(reader.metadata.table_roots.values()))
    data = path.read_bytes()
    encoded = struct.pack(">q", root.offsets[1])
    offset = data.index(encoded, root.position)
    target = _patched(path, tmp_path, offset, struct.pack(">q", 2**63 - 1), 8)
    _assert_bounded_format_error(target, "index_node")


def test_absurd_counts_and_lengths(corpus: dict[str, CorpusFile], tmp_path: Path) -> None:
    path = corpus["table_small"].path
    start, _, _, _ = _metadata_span(path)
    # table_count (one byte at the start of TsFileMetadata) -> 2**31 - 1
    target = _patched(path, tmp_path, start, encode_uvarint(2**31 - 1), 1)
    _assert_bounded_format_error(target, "table_count")
    # the table name's zig-zag length -> 2**30
    target = _patched(path, tmp_path, start + 1, b"\x80\x80\x80\x80\x08", 1)
    _assert_bounded_format_error(target, "table_name")
    # a column name's i32 length -> 2**31 - 1
    data = path.read_bytes()
    column = data.index(b"\x00\x00\x00\x06region", start)
    target = _patched(path, tmp_path, column, struct.pack(">i", 2**31 - 1), 4)
    _assert_bounded_format_error(target, "column.name")
    # an overlong varint where the table count is
    target = _patched(path, tmp_path, start, b"\x81\x80\x80\x80\x80\x00", 1)
    _assert_bounded_format_error(target, "table_count")


def test_filter_crossing_the_metadata_boundary(
    corpus: dict[str, CorpusFile], tmp_path: Path
) -> None:
    path = corpus["tree_10_cjk"].path
    _, end, _, filter_start = _metadata_span(path)
    remaining = end - filter_start - 1
    for byte_length in (remaining + 1, 2**31 - 1):
        old = 1  # the original byte_length (< 128) is one byte
        target = _patched(path, tmp_path, filter_start, encode_uvarint(byte_length), old)
        error = _assert_bounded_format_error(target, "bloom_filter.bits")
        assert "crosses the TsFileMetadata boundary" in str(error)


def test_filter_fields_out_of_range(corpus: dict[str, CorpusFile], tmp_path: Path) -> None:
    path = corpus["tree_1"].path
    data = path.read_bytes()
    _, _, _, filter_start = _metadata_span(path)
    byte_length = data[filter_start]
    counts = filter_start + 1 + byte_length  # bit_count (2 bytes: 256) then k (1 byte)
    assert data[counts : counts + 3] == b"\x80\x02\x05"
    cases: list[tuple[bytes, int, str]] = [
        (b"\x00", 2, "bloom_filter.bit_count"),
        (b"\x10", 2, "bloom_filter.byte_length"),  # 26 bytes > ceil(16 / 8)
        (b"\x80\x02\x09", 3, "bloom_filter.hash_function_count"),
        (b"\x80\x02\x00", 3, "bloom_filter.hash_function_count"),
    ]
    for new, old_length, field in cases:
        target = _patched(path, tmp_path, counts, new, old_length)
        _assert_bounded_format_error(target, field)


def test_corrupt_statistics_in_the_index(corpus: dict[str, CorpusFile], tmp_path: Path) -> None:
    # tree_types has TEXT and STRING statistics (i32-length strings) in its TimeseriesMetadata.
    path = corpus["tree_types"].path
    data = path.read_bytes()
    marker = b"\x00\x00\x00\x05text0"  # the TEXT series' first-value statistic
    offset = data.index(marker)
    target = _patched(path, tmp_path, offset, struct.pack(">i", 2**31 - 1), 4)
    _assert_bounded_format_error(target, "statistics")


def test_not_a_tsfile(tmp_path: Path, copy_of: Callable[[str], Path]) -> None:
    target = tmp_path / "other.tsfile"
    target.write_bytes(b"PAR1" + bytes(100) + b"PAR1")
    with pytest.raises(FormatError) as raised:
        TsFileReader(target)
    assert raised.value.field == "magic" and raised.value.offset == 0
    version = copy_of("tree_1")
    data = bytearray(version.read_bytes())
    data[6] = 5
    version.write_bytes(bytes(data))
    with pytest.raises(FormatError) as raised:
        TsFileReader(version)
    assert raised.value.field == "version" and raised.value.offset == 6
