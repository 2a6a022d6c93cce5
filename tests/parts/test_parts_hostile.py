"""Compression bombs: legal ZSTD that expands far past what a part can hold, in bounded memory.

Every hostile input here is built by hand with a checksum the oracle (clickhouse-cityhash)
computes, so only the size rules can refuse it. Memory is measured twice: tracemalloc for the
Python allocations, and the peak RSS of a child process (``os.wait4``) for everything, ZSTD's
own buffers included.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
import zstandard
from clickhouse_cityhash.cityhash import CityHash128

from bloomskip.clickhouse import compression
from bloomskip.clickhouse.marks import MarksFormat, PackedArchive, read_marks
from bloomskip.errors import FormatError

GiB = 1 << 30
PEAK_LIMIT = 64 << 20
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_RLE_BLOCK = 128 << 10


def zstd_rle_frame(size: int, *, content_size: bool = True, window_exponent: int = 7) -> bytes:
    """A legal ZSTD frame of ``size`` zero bytes made of RLE blocks (4 bytes per 128 KiB).

    With ``content_size`` the frame is single-segment and declares ``size``; without, it
    declares a window of ``2 ** (10 + window_exponent)`` bytes and no size at all.
    """
    if content_size:
        header = bytes([0xE0]) + struct.pack("<Q", size)  # 8-byte content size, single segment
    else:
        header = bytes([0x00, window_exponent << 3])
    blocks = bytearray()
    left = size
    while True:
        length = min(left, _RLE_BLOCK)
        left -= length
        last = int(left == 0)
        blocks += (last | (1 << 1) | (length << 3)).to_bytes(3, "little") + b"\x00"
        if last:
            break
    return _ZSTD_MAGIC + header + bytes(blocks)


def framed(method: int, payload: bytes, decompressed_size: int) -> bytes:
    """One compressed block with the checksum clickhouse-cityhash computes."""
    body = struct.pack("<BII", method, 9 + len(payload), decompressed_size) + payload
    value = CityHash128(body)
    return struct.pack("<QQ", value >> 64, value & (2**64 - 1)) + body


def bomb(size: int = GiB) -> bytes:
    """The issue's block: ~32 KB, valid checksum, frame and header both saying ``size``."""
    return framed(compression.METHOD_ZSTD, zstd_rle_frame(size), size)


def test_the_hostile_frames_are_legal_zstd():
    """The builder makes frames zstandard itself decodes to the zeros they claim."""
    assert zstandard.ZstdDecompressor().decompress(zstd_rle_frame(300_000)) == bytes(300_000)
    reader = zstandard.ZstdDecompressor().stream_reader(zstd_rle_frame(5000, content_size=False))
    assert reader.read(10_000) == bytes(5000)
    assert len(bomb()) < 33_000


def _peak_of(call) -> int:
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _refused(data: bytes, **kwargs) -> FormatError:
    with pytest.raises(FormatError) as error:
        compression.read_compressed_stream(data, "bomb.idx", **kwargs)
    return error.value


def test_a_one_gib_zstd_bomb_is_refused_before_decoding():
    data = bomb() * 3

    def read() -> None:
        error = _refused(data)
        assert (error.field, error.offset, error.source) == ("decompressed_size", 21, "bomb.idx")
        assert f"more than the {compression.DEFAULT_STREAM_LIMIT}" in str(error)
        assert _refused(data, limit=10 << 20).field == "decompressed_size"

    assert _peak_of(read) < PEAK_LIMIT


def test_a_stream_total_is_bounded_not_only_each_block():
    """Blocks that each fit but together pass the limit: the block that passes it is refused."""
    block = bomb(6 << 20)
    assert compression.read_compressed_stream(block * 2, limit=12 << 20) == bytes(12 << 20)

    def read() -> None:
        error = _refused(block * 3, limit=12 << 20)
        assert error.offset == 2 * len(block) + 16 + 5
        assert "after 12582912" in str(error)

    assert _peak_of(read) < PEAK_LIMIT
    assert compression.stream_limit(1 << 40) == compression.MAX_STREAM_SIZE


def test_a_frame_without_content_size_is_decoded_in_bounded_pieces():
    """35 bytes whose header claims 1 GiB: memory follows the real output, not the claim."""
    frame = zstd_rle_frame(100, content_size=False)
    data = framed(compression.METHOD_ZSTD, frame, GiB)
    assert len(data) == 35

    def read() -> None:
        error = _refused(data, limit=compression.MAX_STREAM_SIZE)
        assert error.field == "decompressed_size"
        assert "decodes to 100 bytes" in str(error)

    assert _peak_of(read) < PEAK_LIMIT
    # The same frame with an honest header decodes, and so does one zstandard writes.
    assert compression.read_compressed_stream(framed(0x90, frame, 100)) == bytes(100)
    plain = zstandard.ZstdCompressor(write_content_size=False).compress(b"xyz" * 1000)
    assert compression.read_compressed_stream(framed(0x90, plain, 3000)) == b"xyz" * 1000


def test_a_frame_claiming_another_size_than_its_block_is_refused():
    for claim in (2000, 500):
        error = _refused(framed(0x90, zstd_rle_frame(claim), 1000))
        assert (error.field, error.offset) == ("decompressed_size", 21)


def test_a_window_larger_than_the_block_is_refused():
    """A streaming decoder allocates the declared window: here 128 MiB for a 100-byte block."""
    frame = zstd_rle_frame(100, content_size=False, window_exponent=17)
    error = _refused(framed(0x90, frame, 100))
    assert error.field == "payload"


def test_a_multiple_codec_stage_cannot_expand_past_its_block():
    inner = framed(0x90, zstd_rle_frame(GiB), GiB)[16:]
    data = framed(compression.METHOD_MULTIPLE, bytes([1, 0x90]) + inner, 100)

    def read() -> None:
        error = _refused(data, limit=compression.MAX_STREAM_SIZE)
        assert error.field == "decompressed_size"

    assert _peak_of(read) < PEAK_LIMIT


def test_compressed_marks_are_bounded_by_their_record_count():
    fmt = MarksFormat(".mrk2", compressed=True)

    def read() -> None:
        for records in (10, None):
            with pytest.raises(FormatError) as error:
                read_marks(bomb(), fmt, "skp_idx_i.cmrk2", max_records=records)
            assert error.value.field == "decompressed_size"
        with pytest.raises(FormatError):
            read_marks(framed(0x90, zstd_rle_frame(24 * 11), 24 * 11), fmt, max_records=10)

    assert _peak_of(read) < PEAK_LIMIT
    assert len(read_marks(framed(0x90, zstd_rle_frame(240), 240), fmt, max_records=10)) == 10


# Runs argv[2:] as the ``bloomskip`` console script would, then writes the peak RSS (VmHWM of
# /proc/self/status, in kB) to argv[1]. VmHWM belongs to the new process image; ru_maxrss would
# include the pytest process the child was forked from.
_MEASURED = """
import atexit, re, sys
path = sys.argv.pop(1)
def record():
    status = open("/proc/self/status").read()
    open(path, "w").write(re.search(r"VmHWM:\\s+(\\d+) kB", status).group(1))
atexit.register(record)
if sys.argv[1] == "--read-stream":
    from bloomskip.clickhouse import compression
    from bloomskip.errors import FormatError
    try:
        compression.read_compressed_stream(open(sys.argv[2], "rb").read(), limit=int(sys.argv[3]))
    except FormatError as exc:
        print(exc.field)
else:
    from bloomskip.cli import main
    sys.exit(main(sys.argv[1:]))
"""


def _run_measured(tmp_path: Path, arguments: list[str]) -> tuple[int, str, str, int]:
    """Run the child above; return (exit status, stdout, stderr, its peak RSS in bytes)."""
    record = tmp_path / "peak_rss"
    result = subprocess.run(
        [sys.executable, "-c", _MEASURED, str(record), *arguments],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return result.returncode, result.stdout, result.stderr, int(record.read_text()) * 1024


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_bombs_stay_under_64_mb_of_rss(tmp_path):
    """Process RSS also sees ZSTD's C allocations (window, buffers), which tracemalloc misses."""
    cases = {
        "three_bombs": (bomb() * 3, compression.MAX_STREAM_SIZE // 2),
        "no_content_size": (framed(0x90, zstd_rle_frame(100, content_size=False), GiB), GiB),
        "big_window": (
            framed(0x90, zstd_rle_frame(100, content_size=False, window_exponent=17), 100),
            GiB,
        ),
        "plain": (compression.compress_block(b"x" * 100, "ZSTD"), GiB),
    }
    peaks = {}
    for name, (data, limit) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        assert len(data) < 1 << 20
        status, out, err, peaks[name] = _run_measured(
            tmp_path, ["--read-stream", str(path), str(limit)]
        )
        assert status == 0, err
        expected = {"plain": "", "big_window": "payload"}.get(name, "decompressed_size")
        assert out.strip() == expected, (name, out)
    for name, peak in peaks.items():
        assert peak - peaks["plain"] < PEAK_LIMIT, (name, peaks)


def _write_packed(
    archive: PackedArchive, replace: dict[str, bytes], claims: dict[str, int]
) -> bytes:
    """Re-encode a version-1 ``skp_idx.packed`` with some members' bytes replaced."""
    names = list(archive.members)
    contents = [replace.get(name, archive.read(name)) for name in names]
    header_size = 9 + sum(1 + len(name.encode()) + 24 for name in names)
    out = bytearray([1]) + struct.pack("<Q", len(names))
    offset = header_size
    for name, content in zip(names, contents, strict=True):
        member = archive.members[name]
        encoded = name.encode()
        assert len(encoded) < 128
        out += bytes([len(encoded)]) + encoded
        out += struct.pack("<QQQ", offset, len(content), claims.get(name, member.uncompressed_size))
        offset += len(content)
    assert len(out) == header_size
    return bytes(out) + b"".join(contents)


def _hostile_part(corpus, tmp_path: Path, case: str) -> tuple[Path, Path]:
    """A copy of a real part with one skip-index file replaced by three bombs."""
    layout = {"idx": "wide_plain", "marks": "wide_fixed_zstd", "packed": "wide_packed"}[case]
    built = corpus[layout]
    part = tmp_path / case
    shutil.copytree(built.part_dir, part)
    hostile = bomb() * 3
    if case == "idx":
        (part / "skp_idx_i_tok.idx").write_bytes(hostile)
    elif case == "marks":
        [marks] = part.glob("skp_idx_i_tok.cmrk*")
        marks.write_bytes(hostile)
    else:
        archive_path = part / "skp_idx.packed"
        archive = PackedArchive.parse(archive_path.read_bytes())
        member = "skp_idx_i_tok.idx"
        archive_path.write_bytes(_write_packed(archive, {member: hostile}, {member: 3 * GiB}))
    return part, built.table_sql


@pytest.mark.parametrize("case", ["idx", "marks", "packed"])
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_inspect_on_a_part_holding_a_bomb_is_one_line_in_bounded_memory(corpus, tmp_path, case):
    part, table_sql = _hostile_part(corpus, tmp_path, case)
    command = ["clickhouse", "inspect", "--table-sql", str(table_sql)]
    status, _, err, peak = _run_measured(tmp_path, [*command, str(part)])
    assert status == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bloomskip: error: "), err
    assert "skp_idx_i_tok" in lines[0] and "decompressed_size" in lines[0], lines
    layout = {"idx": "wide_plain", "marks": "wide_fixed_zstd", "packed": "wide_packed"}[case]
    intact = corpus[layout].part_dir
    status, _, err, baseline = _run_measured(tmp_path, [*command, str(intact)])
    assert status == 0, err
    assert peak - baseline < PEAK_LIMIT, (peak, baseline)
