"""Compressed-block framing against files ClickHouse (chdb) wrote, and against bad bytes."""

from __future__ import annotations

import struct
import tracemalloc

import lz4.block
import numpy as np
import pytest
import zstandard
from clickhouse_cityhash.cityhash import CityHash128
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parts_corpus import LAYOUTS, ROWS

from bloomskip.clickhouse import compression
from bloomskip.clickhouse.marks import MarksFormat, read_marks
from bloomskip.errors import FormatError

# The method byte ClickHouse used for skip-index files and compressed marks in each layout.
EXPECTED_IDX_METHOD = {
    "wide_packed": 0x82,
    "wide_plain": 0x82,
    "wide_fixed_zstd": 0x90,
    "wide_fixed_plain_packed": 0x82,
    "compact_packed": 0x82,
    "compact_plain_zstd": 0x90,
    "compact_merged": 0x82,
    "wide_multiple_codec": 0x91,
    "wide_small_blocks": 0x02,
}


def _oracle_checksum(body: bytes) -> bytes:
    """The block checksum computed with clickhouse-cityhash (returns (low64 << 64) | high64)."""
    value = CityHash128(body)
    return struct.pack("<QQ", value >> 64, value & (2**64 - 1))


def _frame(method: int, payload: bytes, decompressed_size: int) -> bytes:
    """A block framed by hand, with a correct checksum, for the bad-size cases."""
    body = struct.pack("<BII", method, 9 + len(payload), decompressed_size) + payload
    return _oracle_checksum(body) + body


def test_every_real_compressed_file_decodes(corpus):
    """Every .bin/.idx/.cmrk* of every layout: checksums verify, the k column decodes to 0..N-1."""
    checked = 0
    for layout, built in corpus.items():
        for path in sorted(built.part_dir.iterdir()):
            if path.suffix not in (".bin", ".idx", ".cmrk", ".cmrk2", ".cmrk4"):
                continue
            data = path.read_bytes()
            blocks = list(compression.iter_blocks(data, str(path)))
            assert blocks, path
            assert sum(16 + block.compressed_size for block in blocks) == len(data)
            checked += 1
            if path.suffix == ".idx":
                assert {block.method for block in blocks} == {EXPECTED_IDX_METHOD[layout]}
        if built.part_type == "Wide":
            # ClickHouse's own data: k UInt64 = 0..ROWS-1, in LZ4 / ZSTD / Multiple / NONE.
            k = compression.read_compressed_stream((built.part_dir / "k.bin").read_bytes())
            assert np.array_equal(np.frombuffer(k, "<u8"), np.arange(ROWS, dtype=np.uint64))
    assert checked > 100


def test_checksums_match_clickhouse_cityhash(corpus):
    """Our written blocks carry the checksum the oracle computes, and decode back."""
    raw = (corpus["wide_plain"].part_dir / "skp_idx_i_tok.idx").read_bytes()
    decoded = compression.read_compressed_stream(raw)
    for codec in ("NONE", "LZ4", "ZSTD", "ZSTD(3)"):
        block = compression.compress_block(decoded, codec)
        assert block[:16] == _oracle_checksum(block[16:])
        assert compression.read_compressed_stream(block) == decoded


def _granules_of(built, index: str) -> list[bytes]:
    """ClickHouse's own index granules, cut from the decompressed .idx at its marks."""
    idx = (built.part_dir / f"skp_idx_{index}.idx").read_bytes()
    marks_path = next(built.part_dir.glob(f"skp_idx_{index}.*mrk*"))
    marks = read_marks(marks_path.read_bytes(), MarksFormat.from_name(marks_path.name))
    stream = compression.read_compressed_stream_with_blocks(idx)
    starts = stream.resolve_marks(marks.block_offset[:, 0], marks.offset_in_block[:, 0])
    bounds = [*starts.tolist(), len(stream.data)]
    return [stream.data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


@pytest.mark.parametrize("index", ["i_v", "i_tok", "i_big", "i_ng", "i_multi"])
def test_writer_reproduces_clickhouse_files_byte_for_byte(corpus, index):
    """Codec NONE with small blocks: same block boundaries, straddling included, same bytes."""
    built = corpus["wide_small_blocks"]
    expected_idx = (built.part_dir / f"skp_idx_{index}.idx").read_bytes()
    expected_marks = (built.part_dir / f"skp_idx_{index}.mrk2").read_bytes()
    data, marks = compression.write_compressed_stream(
        _granules_of(built, index), "NONE", min_block_size=1200, max_block_size=1500
    )
    assert data == expected_idx
    clickhouse_marks = read_marks(expected_marks, MarksFormat(".mrk2"))
    assert marks == list(
        zip(
            clickhouse_marks.block_offset[:, 0].tolist(),
            clickhouse_marks.offset_in_block[:, 0].tolist(),
            strict=True,
        )
    )


def test_writer_blocks_match_clickhouse_at_default_sizes(corpus):
    """30000-byte granules: ClickHouse puts 3 per 64 KiB+ block; the writer does the same."""
    built = corpus["wide_plain"]
    granules = _granules_of(built, "i_big")
    ours = compression.read_compressed_stream_with_blocks(
        compression.write_compressed_stream(granules, "LZ4")[0]
    )
    theirs = compression.read_compressed_stream_with_blocks(
        (built.part_dir / "skp_idx_i_big.idx").read_bytes()
    )
    assert ours.data == theirs.data
    assert ours.block_starts.tolist() == theirs.block_starts.tolist()
    assert np.diff(theirs.block_starts).tolist()[0] == 90000


def test_every_truncation_of_a_real_file_is_a_format_error(corpus):
    data = (corpus["wide_plain"].part_dir / "skp_idx_i_v.idx").read_bytes()
    data += (corpus["wide_plain"].part_dir / "skp_idx_i_fs.idx").read_bytes()
    first_block_end = 16 + struct.unpack_from("<I", data, 17)[0]
    for length in range(1, len(data)):
        if length == first_block_end:
            continue  # a whole first block is a valid, shorter stream
        with pytest.raises(FormatError) as error:
            compression.read_compressed_stream(data[:length], "x.idx")
        assert error.value.source == "x.idx" and error.value.offset is not None


@pytest.mark.parametrize("layout", ["wide_plain", "wide_fixed_zstd", "wide_multiple_codec"])
def test_every_single_byte_corruption_is_a_format_error(corpus, layout):
    data = (corpus[layout].part_dir / "skp_idx_i_v.idx").read_bytes()
    for position in range(len(data)):
        for flip in (0x01, 0x80, 0xFF):
            corrupt = bytearray(data)
            corrupt[position] ^= flip
            with pytest.raises(FormatError):
                compression.read_compressed_stream(bytes(corrupt), "i_v.idx")


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_random_corruption_is_a_format_error(corpus, data):
    original = (corpus["compact_plain_zstd"].part_dir / "skp_idx_i_tok.idx").read_bytes()
    corrupt = bytearray(original)
    for _ in range(data.draw(st.integers(1, 8))):
        position = data.draw(st.integers(0, len(corrupt) - 1))
        corrupt[position] = data.draw(st.integers(0, 255))
    if bytes(corrupt) == original:
        return
    with pytest.raises(FormatError):
        compression.read_compressed_stream(bytes(corrupt))


def test_huge_sizes_are_refused_without_allocating():
    """A valid checksum over a header that claims 4 GiB, 1 GiB, or a 255x+ LZ4 ratio."""
    payload = lz4.block.compress(b"a" * 100, store_size=False)
    cases = [
        _frame(0x82, payload, 0xFFFFFFFF),
        _frame(0x82, payload, compression.MAX_BLOCK_SIZE),
        _frame(0x82, payload, 300 * len(payload)),
        _frame(0x02, b"abc", 0x7FFFFFFF),
        _frame(0x90, zstandard.ZstdCompressor().compress(b"a" * 100), 1 << 29),
        _frame(0x90, zstandard.ZstdCompressor(write_content_size=False).compress(b"a"), 1 << 20),
    ]
    tracemalloc.start()
    try:
        for block in cases:
            with pytest.raises(FormatError) as error:
                compression.read_compressed_stream(block, "huge.idx")
            assert error.value.field in ("decompressed_size", "payload")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20


def test_bad_headers_name_the_field():
    good = compression.compress_block(b"hello", "LZ4")
    cases = {
        "compressed_size": good[:17] + struct.pack("<I", 3) + good[21:],
        "checksum": bytes([good[0] ^ 1]) + good[1:],
        "method": _frame(0x95, b"xx", 2),
        "block_header": good[:20],
        "payload": good[:-1],
    }
    for field, data in cases.items():
        with pytest.raises(FormatError) as error:
            compression.read_compressed_stream(data, "f")
        assert error.value.field == field, (field, error.value)


def test_multiple_codec_stages_are_checked():
    inner = _frame(0x82, lz4.block.compress(b"x" * 50, store_size=False), 50)[16:]
    good = _frame(0x91, bytes([1, 0x82]) + inner, 50)
    assert compression.read_compressed_stream(good) == b"x" * 50
    bad_lists = [
        bytes([0]) + inner,  # no codecs
        bytes([1, 0x90]) + inner,  # list says ZSTD, stage is LZ4
        bytes([3, 0x82]),  # list longer than the payload
        bytes([1, 0x82]) + inner[:5],  # stage shorter than its header
        bytes([1, 0x91]) + _frame(0x91, inner, 50)[16:],  # Multiple inside Multiple
    ]
    for payload in bad_lists:
        with pytest.raises(FormatError):
            compression.read_compressed_stream(_frame(0x91, payload, 50))


def test_resolve_marks_rejects_marks_outside_the_stream():
    data, _ = compression.write_compressed_stream([b"a" * 10, b"b" * 10], "NONE", min_block_size=5)
    stream = compression.read_compressed_stream_with_blocks(data, "s.idx")
    assert stream.resolve_marks(np.array([0, 35]), np.array([0, 3])).tolist() == [0, 13]
    for block_offset, inside in ((1, 0), (len(data), 0), (10**12, 0), (35, 10), (0, 2**40)):
        with pytest.raises(FormatError) as error:
            stream.resolve_marks(np.array([block_offset]), np.array([inside]))
        assert error.value.source == "s.idx"


def test_writer_straddles_at_max_block_size():
    data, marks = compression.write_compressed_stream(
        [b"a" * 700, b"b" * 700, b"c" * 10], "LZ4", min_block_size=1000, max_block_size=1000
    )
    stream = compression.read_compressed_stream_with_blocks(data)
    # "b" straddles; the 400 bytes left are under min_block_size, so "c" joins them.
    assert np.diff(stream.block_starts).tolist() == [1000, 410]
    assert marks == [(0, 0), (0, 700), (int(stream.block_offsets[1]), 400)]
    assert stream.data == b"a" * 700 + b"b" * 700 + b"c" * 10


def test_codec_names():
    assert compression.parse_codec("CODEC(LZ4)") == (0x82, None)
    assert compression.parse_codec("zstd(5)") == (0x90, 5)
    for bad in ("Delta", "LZ4(3)", "ZSTD(x)"):
        with pytest.raises(ValueError):
            compression.parse_codec(bad)


def test_layouts_cover_the_issue():
    """The corpus holds Wide and Compact, fixed and adaptive, plain and compressed marks."""
    settings_text = " ".join(setting for setting, _ in LAYOUTS.values())
    for needle in ("index_granularity_bytes = 0", "compress_marks = 0", "ZSTD", "'1G'"):
        assert needle in settings_text
