"""ClickHouse compressed-block framing, the container of every ``.bin``, ``.idx``, ``.cmrk*`` file.

A compressed file is a sequence of blocks::

    +0   16 B  checksum: CityHash128 v1.0.2 of bytes [+16, +16 + compressed_size),
               low64 LE then high64 LE
    +16   1 B  method: 0x02 NONE, 0x82 LZ4 (and LZ4HC), 0x90 ZSTD, 0x91 Multiple
    +17   4 B  compressed_size, u32 LE, counting this 9-byte header (method + both sizes)
    +21   4 B  decompressed_size, u32 LE
    +25        payload

A ``Multiple`` payload is ``u8 count``, ``count`` method bytes (in the order the codecs were
applied), then the output of the last codec, which is itself a header + payload block (without a
checksum); decoding unwraps the codecs in reverse order.

Reading (every block's checksum is verified; bad bytes raise :class:`~bloomskip.errors.FormatError`
naming the source, field and offset)::

    iter_blocks(data, source="", limit=None) -> Iterator[CompressedBlock]
        # CompressedBlock(offset, method, compressed_size, data): offset of the block (its checksum)
        # in the file, method byte, compressed_size as stored in the header, decompressed bytes
    read_compressed_stream(data, source="", limit=None) -> bytes      # all blocks, concatenated
    read_compressed_stream_with_blocks(data, source="", limit=None) -> DecompressedStream
        # .data, .block_offsets (file offset of every block), .block_starts (where each block's
        # bytes begin in .data), .checksums; resolves a mark (block offset, offset in block) to a
        # position
    stream_checksums(data, source="", limit=None) -> bytes   # every block's verified checksum,
        # nothing decoded: recognises a stream read before

Decoding is bounded: ``limit`` is the most the whole stream may decode to (what the caller can
expect: granules x the largest possible granule, records x record size), at most
:data:`MAX_STREAM_SIZE`, and :data:`DEFAULT_STREAM_LIMIT` when the caller cannot say. A block
whose declared size does not fit what is left is refused before anything is allocated for it,
and ZSTD frames are decoded in bounded chunks, so memory follows the bytes really produced, never
a size some header claims (a compression bomb costs at most ``limit``).

Writing, the way ClickHouse writes a skip index (a new block starts only at a granule boundary, once
the pending block holds at least ``min_block_size`` bytes; a full ``max_block_size`` buffer is
flushed even inside a granule)::

    writer = CompressedStreamWriter("LZ4")          # "NONE" | "LZ4" | "ZSTD" | "ZSTD(level)"
    mark = writer.write_granule(granule_bytes)      # -> (block offset in file, offset in block)
    data = writer.finish()
    data, marks = write_compressed_stream(granules, "LZ4")    # the same in one call
    compress_block(raw, "ZSTD(3)") -> bytes                    # one framed block

Example:
    >>> data, marks = write_compressed_stream([b"a" * 10, b"b" * 5], "NONE")
    >>> marks
    [(0, 0), (0, 10)]
    >>> read_compressed_stream(data)
    b'aaaaaaaaaabbbbb'
"""

from __future__ import annotations

import io
import re
import struct
import threading
from collections.abc import Iterable, Iterator
from typing import BinaryIO, NamedTuple

import numpy as np

from bloomskip import hashing
from bloomskip.errors import FormatError

METHOD_NONE = 0x02
METHOD_LZ4 = 0x82
METHOD_ZSTD = 0x90
METHOD_MULTIPLE = 0x91

METHOD_NAMES = {
    METHOD_NONE: "NONE",
    METHOD_LZ4: "LZ4",
    METHOD_ZSTD: "ZSTD",
    METHOD_MULTIPLE: "Multiple",
    0x92: "Delta",
    0x93: "T64",
    0x94: "DoubleDelta",
    0x95: "Gorilla",
    0x96: "AES_128_GCM_SIV",
    0x97: "AES_256_GCM_SIV",
    0x98: "FPC",
    0x9A: "GCD",
    0x9B: "ZSTD_QPL",
}

CHECKSUM_SIZE = 16
HEADER_SIZE = 9
#: ClickHouse refuses compressed blocks above 1 GiB (DBMS_MAX_COMPRESSED_SIZE); so do we, for both
#: sizes, so a corrupt size field can never make us allocate more than that.
MAX_BLOCK_SIZE = 1 << 30
#: An LZ4 sequence expands at most ~255x; a larger claimed ratio is corruption, and refusing it
#: bounds the output buffer we allocate by the bytes actually present.
LZ4_MAX_RATIO = 255
#: No stream decodes to more than this, whatever its caller allows. ZSTD has no ratio cap like
#: LZ4's (a 32 KB frame of RLE blocks legally decodes to 1 GiB), so the total is what bounds it.
MAX_STREAM_SIZE = 1 << 30
#: The bound of a stream whose caller passes no ``limit`` (callers that know more pass it).
DEFAULT_STREAM_LIMIT = 16 << 20
#: ZSTD output is produced in pieces of at most this size, so memory grows with real output only.
_ZSTD_CHUNK = 1 << 20
#: Windows up to this are accepted from any frame (zstd's streaming compressors declare up to
#: 8 MiB at level 19); above it, a frame may not declare a window larger than its own output.
_ZSTD_WINDOW_FLOOR = 8 << 20
_ZSTD_DECOMPRESSORS = threading.local()

DEFAULT_MIN_COMPRESS_BLOCK_SIZE = 65536
DEFAULT_MAX_COMPRESS_BLOCK_SIZE = 1048576
DEFAULT_ZSTD_LEVEL = 1

_HEADER = struct.Struct("<BII")
_CODEC_SPEC = re.compile(r"^\s*(NONE|LZ4|ZSTD)\s*(?:\(\s*(-?\d+)\s*\))?\s*$", re.IGNORECASE)


class CompressedBlock(NamedTuple):
    """One block of a compressed stream.

    Attributes:
        offset: Offset of the block (its checksum) in the file.
        method: Method byte of the outer header.
        compressed_size: Size stored in the header: the 9-byte header plus the payload.
        data: The decompressed bytes.
    """

    offset: int
    method: int
    compressed_size: int
    data: bytes


class DecompressedStream(NamedTuple):
    """A whole decompressed stream and where each block landed.

    Attributes:
        data: Every block's decompressed bytes, concatenated.
        block_offsets: int64 array, the file offset of every block.
        block_starts: int64 array of len(blocks) + 1, where each block's bytes begin in ``data``
            (the last entry is ``len(data)``).
        source: The file or buffer name, for error messages.
        block_methods: uint8 array, the method byte of every block.
        compressed_bytes: Size of the whole compressed stream.
        checksums: Every block's 16-byte checksum, concatenated (see :func:`stream_checksums`).
    """

    data: bytes
    block_offsets: np.ndarray
    block_starts: np.ndarray
    source: str
    block_methods: np.ndarray
    compressed_bytes: int
    checksums: bytes

    def resolve_marks(
        self,
        block_offset: np.ndarray,
        offset_in_block: np.ndarray,
        marks_source: str | None = None,
        record_size: int = 16,
    ) -> np.ndarray:
        """Turn marks into positions in :attr:`data`, checking each one.

        Args:
            block_offset: uint64/int64 array, the file offset of the compressed block of each mark.
            offset_in_block: uint64/int64 array, the offset inside that block's decompressed bytes.
            marks_source: The marks file; when given, errors name it and the bad record's offset
                (``record_size`` bytes per record) instead of this stream and the block offset.
            record_size: Bytes per mark record in ``marks_source``.

        Returns:
            int64 array of positions in :attr:`data`.

        Raises:
            FormatError: a mark that does not point at a block start of this stream, or points past
                the end of its block.

        Example:
            >>> s = read_compressed_stream_with_blocks(write_compressed_stream([b"xy"], "NONE")[0])
            >>> s.resolve_marks(np.array([0]), np.array([1])).tolist()
            [1]
        """
        block_offset = np.asarray(block_offset, dtype=np.uint64)
        offset_in_block = np.asarray(offset_in_block, dtype=np.uint64)
        known = self.block_offsets.astype(np.uint64)
        index = np.searchsorted(known, block_offset)
        found = index < len(known)
        found[found] = known[index[found]] == block_offset[found]
        if not found.all():
            bad = int(np.argmin(found))
            raise self._mark_error(
                f"mark {bad} points at byte {int(block_offset[bad])} of {self.source or 'the'} "
                f"stream, which is not the start of one of its {len(known)} compressed blocks",
                bad,
                int(block_offset[bad]),
                marks_source,
                record_size,
            )
        sizes = np.diff(self.block_starts).astype(np.uint64)
        # A mark may point at the very end of a block only when the block is empty; ClickHouse
        # never writes those, so an offset must be strictly inside its block.
        inside = offset_in_block < sizes[index] if len(sizes) else np.zeros(len(index), bool)
        if not inside.all():
            bad = int(np.argmin(inside))
            raise self._mark_error(
                f"mark {bad} points {int(offset_in_block[bad])} bytes into a block of "
                f"{int(sizes[index[bad]])} decompressed bytes of {self.source or 'the'} stream",
                bad,
                int(block_offset[bad]),
                marks_source,
                record_size,
            )
        return self.block_starts[index].astype(np.int64) + offset_in_block.astype(np.int64)

    def _mark_error(
        self, message: str, mark: int, block_offset: int, marks_source: str | None, record: int
    ) -> FormatError:
        if marks_source is None:
            return FormatError(message, field="mark", offset=block_offset, source=self.source)
        return FormatError(message, field="mark", offset=mark * record, source=marks_source)


def parse_codec(codec: str) -> tuple[int, int | None]:
    """Parse a codec name as the writer accepts it.

    Args:
        codec: ``"NONE"``, ``"LZ4"``, ``"ZSTD"`` or ``"ZSTD(level)"`` (case-insensitive); an
            optional ``CODEC(...)`` wrapper as in ``default_compression_codec.txt`` is accepted.

    Returns:
        (method byte, ZSTD level or None).

    Raises:
        ValueError: any other codec.

    Example:
        >>> parse_codec("ZSTD(3)")
        (144, 3)
    """
    text = codec.strip()
    wrapped = re.fullmatch(r"CODEC\((.*)\)", text, flags=re.IGNORECASE | re.DOTALL)
    if wrapped:
        text = wrapped.group(1)
    match = _CODEC_SPEC.match(text)
    if not match:
        raise ValueError(f"unsupported codec {codec!r}: expected NONE, LZ4, ZSTD or ZSTD(level)")
    name, level = match.group(1).upper(), match.group(2)
    if name == "ZSTD":
        return METHOD_ZSTD, int(level) if level is not None else DEFAULT_ZSTD_LEVEL
    if level is not None:
        raise ValueError(f"codec {name} takes no level: {codec!r}")
    return (METHOD_NONE if name == "NONE" else METHOD_LZ4), None


def _method_name(method: int) -> str:
    return METHOD_NAMES.get(method, "unknown")


def _decode_payload(
    method: int,
    payload: memoryview,
    decompressed_size: int,
    *,
    source: str,
    offset: int,
    depth: int = 0,
) -> bytes:
    """Decode one codec layer; ``offset`` is where the header of this layer sits in the file."""
    if method == METHOD_NONE:
        if len(payload) != decompressed_size:
            raise FormatError(
                f"NONE block holds {len(payload)} bytes but declares {decompressed_size}",
                field="decompressed_size",
                offset=offset + 5,
                source=source,
            )
        return bytes(payload)
    if method == METHOD_LZ4:
        import lz4.block

        if decompressed_size > LZ4_MAX_RATIO * len(payload) + 16:
            raise FormatError(
                f"LZ4 block of {len(payload)} bytes claims {decompressed_size} decompressed bytes, "
                f"more than LZ4 can encode",
                field="decompressed_size",
                offset=offset + 5,
                source=source,
            )
        try:
            out = lz4.block.decompress(payload, uncompressed_size=decompressed_size)
        except lz4.block.LZ4BlockError as exc:
            raise FormatError(
                f"corrupt LZ4 payload: {exc}", field="payload", offset=offset + 9, source=source
            ) from None
    elif method == METHOD_ZSTD:
        out = _decode_zstd(payload, decompressed_size, source=source, offset=offset)
    elif method == METHOD_MULTIPLE and depth == 0:
        out = _decode_multiple(payload, decompressed_size, source=source, offset=offset)
    else:
        what = "nested Multiple" if method == METHOD_MULTIPLE else _method_name(method)
        raise FormatError(
            f"unsupported compression method 0x{method:02x} ({what}); "
            "supported: NONE, LZ4, ZSTD, Multiple of these",
            field="method",
            offset=offset,
            source=source,
        )
    if len(out) != decompressed_size:
        raise FormatError(
            f"{_method_name(method)} payload decodes to {len(out)} bytes, header says "
            f"{decompressed_size}",
            field="decompressed_size",
            offset=offset + 5,
            source=source,
        )
    return out


def _decode_zstd(payload: memoryview, decompressed_size: int, *, source: str, offset: int) -> bytes:
    """Decode a ZSTD payload into at most ``decompressed_size + 1`` bytes.

    A block of up to one chunk (:data:`_ZSTD_CHUNK`, ClickHouse writes blocks of 64 KiB to
    1 MiB) is decoded in one call into a buffer of its declared size. A larger block is decoded
    chunk by chunk: neither its header's size nor the frame's content size is handed to the
    decoder as a buffer size, since a frame can hold much less than it says. The window is capped
    too (it is what a streaming decoder allocates): a frame never needs a window above its own
    output.
    """
    import zstandard

    try:
        declared = zstandard.frame_content_size(payload)
    except zstandard.ZstdError as exc:
        raise FormatError(
            f"corrupt ZSTD frame header: {exc}", field="payload", offset=offset + 9, source=source
        ) from None
    # A size claim that disagrees with the header is refused before decoding anything.
    if declared >= 0 and declared != decompressed_size:
        raise FormatError(
            f"ZSTD frame declares {declared} bytes, the block header {decompressed_size}",
            field="decompressed_size",
            offset=offset + 5,
            source=source,
        )
    window = max(_ZSTD_WINDOW_FLOOR, 1 << (decompressed_size - 1).bit_length())
    try:
        decompressor = _zstd_decompressor(window)
        if decompressed_size <= _ZSTD_CHUNK:
            # One call, into one buffer of at most the declared size (<= one chunk, what the loop
            # below allocates too): the frame's content size was checked equal to it above, and
            # a frame without one may not decode to more.
            return decompressor.decompress(payload, max_output_size=decompressed_size)
        out = bytearray()
        reader = decompressor.stream_reader(payload)
        while len(out) <= decompressed_size:
            chunk = reader.read(min(_ZSTD_CHUNK, decompressed_size + 1 - len(out)))
            if not chunk:
                break
            out += chunk
    except zstandard.ZstdError as exc:
        raise FormatError(
            f"corrupt ZSTD payload: {exc}", field="payload", offset=offset + 9, source=source
        ) from None
    return bytes(out)


def _zstd_decompressor(window: int):
    """A ZSTD decompressor accepting windows up to ``window``.

    Setting one up costs more than decoding a 64 KiB block, so each thread keeps one for the
    usual window (decompressors may not be shared between threads).
    """
    import zstandard

    if window != _ZSTD_WINDOW_FLOOR:
        return zstandard.ZstdDecompressor(max_window_size=window)
    decompressor = getattr(_ZSTD_DECOMPRESSORS, "floor", None)
    if decompressor is None:
        decompressor = zstandard.ZstdDecompressor(max_window_size=window)
        _ZSTD_DECOMPRESSORS.floor = decompressor
    return decompressor


def _decode_multiple(
    payload: memoryview, decompressed_size: int, *, source: str, offset: int
) -> bytes:
    """Undo a Multiple codec: each stage is a header + payload made by the next codec."""
    if len(payload) < 1 or payload[0] == 0 or payload[0] + 1 > len(payload):
        raise FormatError(
            "Multiple codec with a bad list of methods",
            field="codec_count",
            offset=offset + 9,
            source=source,
        )
    count = payload[0]
    methods = bytes(payload[1 : 1 + count])
    current: bytes | memoryview = payload[1 + count :]
    # Inner stages live in memory, not in the file: errors name where the innermost one starts.
    stage_offset = offset + 9 + 1 + count
    for stage in range(count - 1, -1, -1):
        if len(current) < HEADER_SIZE:
            raise FormatError(
                f"Multiple codec stage {stage} is {len(current)} bytes, shorter than its header",
                field="stage_header",
                offset=stage_offset,
                source=source,
            )
        method, csize, usize = _HEADER.unpack_from(current, 0)
        if method != methods[stage]:
            raise FormatError(
                f"Multiple codec stage {stage} has method 0x{method:02x}, the list says "
                f"0x{methods[stage]:02x}",
                field="method",
                offset=stage_offset,
                source=source,
            )
        if csize != len(current):
            raise FormatError(
                f"Multiple codec stage {stage} claims {csize} bytes but holds {len(current)}",
                field="compressed_size",
                offset=stage_offset + 1,
                source=source,
            )
        # An inner stage holds the next codec's output: a little more than the block at worst
        # (LZ4 and ZSTD grow incompressible bytes by under 1%), so this bounds every stage by
        # what the block itself may decode to.
        if usize > 2 * decompressed_size + 4096 or (stage == 0 and usize != decompressed_size):
            raise FormatError(
                f"Multiple codec stage {stage} claims {usize} decompressed bytes"
                + (f", the block {decompressed_size}" if stage == 0 else ""),
                field="decompressed_size",
                offset=stage_offset + 5,
                source=source,
            )
        view = memoryview(current)[HEADER_SIZE:]
        current = _decode_payload(method, view, usize, source=source, offset=stage_offset, depth=1)
    return bytes(current)


def _check_header(method: int, csize: int, usize: int, header_at: int, source: str) -> None:
    """Refuse sizes no valid block has, before anything is read or allocated for them."""
    if csize < HEADER_SIZE or csize > MAX_BLOCK_SIZE:
        raise FormatError(
            f"compressed size {csize} out of range [{HEADER_SIZE}, {MAX_BLOCK_SIZE}]",
            field="compressed_size",
            offset=header_at + 1,
            source=source,
        )
    if usize == 0 or usize > MAX_BLOCK_SIZE:
        raise FormatError(
            f"decompressed size {usize} out of range [1, {MAX_BLOCK_SIZE}]",
            field="decompressed_size",
            offset=header_at + 5,
            source=source,
        )


def _truncated_header(left: int, offset: int, source: str) -> FormatError:
    return FormatError(
        f"truncated block header: {left} bytes left, a header needs {CHECKSUM_SIZE + HEADER_SIZE}",
        field="block_header",
        offset=offset,
        source=source,
    )


def _truncated_block(csize: int, left: int, header_at: int, source: str) -> FormatError:
    return FormatError(
        f"truncated block: needs {csize} bytes after the checksum, {left} left",
        field="payload",
        offset=header_at,
        source=source,
    )


def _verify_checksum(
    checksum: bytes | memoryview, body: memoryview, offset: int, source: str
) -> None:
    """Check that ``checksum`` is the CityHash128 of ``body`` (header + payload)."""
    low, high = hashing.cityhash128(body)
    stored_low, stored_high = struct.unpack_from("<QQ", checksum, 0)
    if (low, high) != (stored_low, stored_high):
        raise FormatError(
            f"checksum mismatch: stored {stored_low:016x}{stored_high:016x}, computed "
            f"{low:016x}{high:016x} over {len(body)} bytes",
            field="checksum",
            offset=offset,
            source=source,
        )


def _verify_and_decode(
    checksum: bytes | memoryview, body: memoryview, offset: int, source: str
) -> CompressedBlock:
    """Check the checksum of ``body`` (header + payload) and decode it."""
    method, csize, usize = _HEADER.unpack_from(body, 0)
    _verify_checksum(checksum, body, offset, source)
    header_at = offset + CHECKSUM_SIZE
    decoded = _decode_payload(method, body[HEADER_SIZE:], usize, source=source, offset=header_at)
    return CompressedBlock(offset, method, csize, decoded)


def stream_limit(limit: int | None = None) -> int:
    """The bound a stream is decoded under: ``limit`` clipped to :data:`MAX_STREAM_SIZE`.

    Args:
        limit: What the caller can expect the stream to decode to at most; None when it cannot
            say (then :data:`DEFAULT_STREAM_LIMIT`).

    Returns:
        The bound in bytes.

    Raises:
        ValueError: a negative limit.

    Example:
        >>> stream_limit(10), stream_limit(1 << 40) == MAX_STREAM_SIZE
        (10, True)
    """
    if limit is None:
        return DEFAULT_STREAM_LIMIT
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    return min(int(limit), MAX_STREAM_SIZE)


def iter_blocks(
    data: bytes | bytearray | memoryview | BinaryIO, source: str = "", *, limit: int | None = None
) -> Iterator[CompressedBlock]:
    """Decode a compressed stream block by block, verifying every checksum.

    Args:
        data: The file's bytes, or a binary file opened for reading (then read block by block,
            so that only one compressed block is in memory at a time).
        source: File name used in error messages.
        limit: The most the whole stream may decode to (see :func:`stream_limit`); a block that
            would pass it is refused before it is decoded.

    Returns:
        An iterator of :class:`CompressedBlock`.

    Raises:
        FormatError: a truncated header or payload, a checksum mismatch, a size field out of
            range, an unknown method, a payload that does not decode to the declared size, or a
            stream that decodes to more than ``limit``.

    Example:
        >>> [b.data for b in iter_blocks(compress_block(b"hi", "LZ4"))]
        [b'hi']
    """
    for offset, checksum, body in _iter_framed(data, source, stream_limit(limit)):
        yield _verify_and_decode(checksum, body, offset, source)


def stream_checksums(
    data: bytes | bytearray | memoryview | BinaryIO, source: str = "", *, limit: int | None = None
) -> bytes:
    """The checksum of every block of a compressed stream, each verified, nothing decoded.

    Two streams with the same checksums hold the same bytes (up to a CityHash128 collision):
    this is how a stream decoded before is recognised without decoding it again.

    Args:
        data: The file's bytes, or a binary file opened for reading (read block by block).
        source: File name used in error messages.
        limit: As for :func:`iter_blocks` (the blocks' declared sizes are checked against it).

    Returns:
        The blocks' 16-byte checksums, concatenated in order.

    Raises:
        FormatError: a truncated header or payload, a checksum mismatch, a size field out of
            range, or a stream that declares more than ``limit``.

    Example:
        >>> block = compress_block(b"hi", "NONE")
        >>> stream_checksums(block * 2) == block[:16] * 2
        True
    """
    checksums = []
    for offset, checksum, body in _iter_framed(data, source, stream_limit(limit)):
        _verify_checksum(checksum, body, offset, source)
        checksums.append(bytes(checksum))
    return b"".join(checksums)


def _iter_framed(
    data: bytes | bytearray | memoryview | BinaryIO, source: str, budget: int
) -> Iterator[tuple[int, bytes | memoryview, memoryview]]:
    """Every block's offset, stored checksum and body (header + payload); sizes checked, not
    checksums."""
    if hasattr(data, "read"):
        yield from _iter_file_blocks(data, source, budget)
        return
    view = memoryview(data).cast("B")
    total = len(view)
    offset = 0
    decoded = 0
    while offset < total:
        if total - offset < CHECKSUM_SIZE + HEADER_SIZE:
            raise _truncated_header(total - offset, offset, source)
        header_at = offset + CHECKSUM_SIZE
        method, csize, usize = _HEADER.unpack_from(view, header_at)
        _check_header(method, csize, usize, header_at, source)
        _check_budget(usize, decoded, budget, header_at, source)
        end = header_at + csize
        if end > total:
            raise _truncated_block(csize, total - header_at, header_at, source)
        yield offset, view[offset:header_at], view[header_at:end]
        decoded += usize
        offset = end


def _check_budget(usize: int, decoded: int, budget: int, header_at: int, source: str) -> None:
    """Refuse a block that would take the stream past its bound, before decoding it.

    A block decodes to exactly its declared size or is refused, so checking the declared size
    bounds the memory that decoding may take.
    """
    if usize > budget - decoded:
        raise FormatError(
            f"block declares {usize} decompressed bytes after {decoded}, more than the {budget} "
            f"this stream can hold",
            field="decompressed_size",
            offset=header_at + 5,
            source=source,
        )


def _iter_file_blocks(
    handle: BinaryIO, source: str, budget: int
) -> Iterator[tuple[int, bytes, memoryview]]:
    offset = 0
    decoded = 0
    while True:
        head = handle.read(CHECKSUM_SIZE + HEADER_SIZE)
        if not head:
            return
        if len(head) < CHECKSUM_SIZE + HEADER_SIZE:
            raise _truncated_header(len(head), offset, source)
        header_at = offset + CHECKSUM_SIZE
        method, csize, usize = _HEADER.unpack_from(head, CHECKSUM_SIZE)
        _check_header(method, csize, usize, header_at, source)
        _check_budget(usize, decoded, budget, header_at, source)
        # One block is read at a time, and only once its sizes passed the checks above.
        body = bytearray(head[CHECKSUM_SIZE:])
        rest = handle.read(csize - HEADER_SIZE)
        body += rest
        if len(body) < csize:
            raise _truncated_block(csize, len(body), header_at, source)
        yield offset, head[:CHECKSUM_SIZE], memoryview(body)
        decoded += usize
        offset = header_at + csize


def read_compressed_stream_with_blocks(
    data: bytes | bytearray | memoryview | BinaryIO, source: str = "", *, limit: int | None = None
) -> DecompressedStream:
    """Decode a whole compressed stream and record where every block starts.

    Args:
        data: The file's bytes, or a binary file opened for reading (read block by block).
        source: File name used in error messages.
        limit: The most the stream may decode to (see :func:`iter_blocks`).

    Returns:
        A :class:`DecompressedStream` (its ``data`` is ``bytes``, built without holding the
        decoded stream twice).

    Raises:
        FormatError: as :func:`iter_blocks`.

    Example:
        >>> s = read_compressed_stream_with_blocks(compress_block(b"abc", "NONE") * 2)
        >>> s.data, s.block_offsets.tolist(), s.block_starts.tolist(), s.compressed_bytes
        (b'abcabc', [0, 28], [0, 3, 6], 56)
    """
    # BytesIO grows its buffer in place and getvalue() hands that buffer over without a copy,
    # so the decoded stream is held once, not once in pieces and again joined.
    out = io.BytesIO()
    offsets: list[int] = []
    methods: list[int] = []
    checksums: list[bytes] = []
    starts = [0]
    end = 0
    for offset, checksum, body in _iter_framed(data, source, stream_limit(limit)):
        block = _verify_and_decode(checksum, body, offset, source)
        out.write(block.data)
        offsets.append(block.offset)
        methods.append(block.method)
        checksums.append(bytes(checksum))
        starts.append(starts[-1] + len(block.data))
        end = block.offset + CHECKSUM_SIZE + block.compressed_size
    return DecompressedStream(
        out.getvalue(),
        np.asarray(offsets, dtype=np.int64),
        np.asarray(starts, dtype=np.int64),
        source,
        np.asarray(methods, dtype=np.uint8),
        end,
        b"".join(checksums),
    )


def read_compressed_stream(
    data: bytes | bytearray | memoryview, source: str = "", *, limit: int | None = None
) -> bytes:
    """Decode every block of a compressed stream (checksums verified) and concatenate them.

    Args:
        data: The file's bytes.
        source: File name used in error messages.
        limit: The most the stream may decode to (see :func:`iter_blocks`).

    Returns:
        The decompressed bytes.

    Raises:
        FormatError: as :func:`iter_blocks`.

    Example:
        >>> read_compressed_stream(compress_block(b"abc", "ZSTD"))
        b'abc'
    """
    return read_compressed_stream_with_blocks(data, source, limit=limit).data


def compress_block(raw: bytes | bytearray | memoryview, codec: str = "LZ4") -> bytes:
    """Frame ``raw`` as one compressed block: checksum, header, payload.

    Args:
        raw: 1 to 2**30 bytes.
        codec: ``"NONE"``, ``"LZ4"``, ``"ZSTD"`` or ``"ZSTD(level)"``.

    Returns:
        The block's bytes.

    Raises:
        ValueError: an unsupported codec, or ``raw`` empty or larger than the format allows.

    Example:
        >>> len(compress_block(b"abc", "NONE"))
        28
    """
    method, level = parse_codec(codec)
    return _frame(method, level, raw)


def _frame(method: int, level: int | None, raw: bytes | bytearray | memoryview) -> bytes:
    size = len(raw)
    if not 0 < size <= MAX_BLOCK_SIZE:
        raise ValueError(f"a block holds 1 to {MAX_BLOCK_SIZE} bytes, got {size}")
    if method == METHOD_NONE:
        payload = bytes(raw)
    elif method == METHOD_LZ4:
        import lz4.block

        payload = lz4.block.compress(raw, store_size=False)
    else:
        import zstandard

        payload = zstandard.ZstdCompressor(level=level or DEFAULT_ZSTD_LEVEL).compress(raw)
    body = _HEADER.pack(method, HEADER_SIZE + len(payload), size) + payload
    low, high = hashing.cityhash128(body)
    return struct.pack("<QQ", low, high) + body


class CompressedStreamWriter:
    """Write granules into a compressed stream with ClickHouse's block boundaries.

    A new block starts before a granule once the pending bytes reach ``min_block_size``; a pending
    buffer that reaches ``max_block_size`` is flushed at once, even inside a granule.

    Args:
        codec: ``"NONE"``, ``"LZ4"``, ``"ZSTD"`` or ``"ZSTD(level)"``.
        min_block_size: ClickHouse's ``min_compress_block_size``.
        max_block_size: ClickHouse's ``max_compress_block_size``.

    Raises:
        ValueError: an unsupported codec or inconsistent block sizes.

    Example:
        >>> w = CompressedStreamWriter("NONE", min_block_size=4)
        >>> w.write_granule(b"abcd"), w.write_granule(b"ef")
        ((0, 0), (29, 0))
        >>> read_compressed_stream(w.finish())
        b'abcdef'
    """

    def __init__(
        self,
        codec: str = "LZ4",
        *,
        min_block_size: int = DEFAULT_MIN_COMPRESS_BLOCK_SIZE,
        max_block_size: int = DEFAULT_MAX_COMPRESS_BLOCK_SIZE,
    ) -> None:
        self._method, self._level = parse_codec(codec)
        if not 0 < max_block_size <= MAX_BLOCK_SIZE or min_block_size < 0:
            raise ValueError(
                f"bad block sizes: min {min_block_size}, max {max_block_size} "
                f"(need 0 <= min, 0 < max <= {MAX_BLOCK_SIZE})"
            )
        self._min = min_block_size
        self._max = max_block_size
        self._blocks: list[bytes] = []
        self._written = 0  # bytes of finished blocks
        self._pending = bytearray()
        self._finished = False

    def _flush(self) -> None:
        if self._pending:
            block = _frame(self._method, self._level, self._pending)
            self._blocks.append(block)
            self._written += len(block)
            self._pending = bytearray()

    def write_granule(self, granule: bytes | bytearray | memoryview) -> tuple[int, int]:
        """Append one granule and return its mark.

        Args:
            granule: The granule's serialized bytes.

        Returns:
            (offset of the compressed block holding the granule's first byte, offset of that byte
            inside the block's decompressed bytes).

        Raises:
            ValueError: the writer is already finished.
        """
        if self._finished:
            raise ValueError("write_granule after finish")
        if len(self._pending) >= self._min or len(self._pending) >= self._max:
            self._flush()
        mark = (self._written, len(self._pending))
        view = memoryview(granule).cast("B")
        while len(view):
            room = self._max - len(self._pending)
            self._pending += view[:room]
            view = view[room:]
            if len(view):
                self._flush()
        return mark

    def finish(self) -> bytes:
        """Flush the last block and return the whole stream.

        Returns:
            Every block written, in order; further calls return the same stream.
        """
        if not self._finished:
            self._flush()
            self._finished = True
        return b"".join(self._blocks)


def write_compressed_stream(
    granules: Iterable[bytes | bytearray | memoryview],
    codec: str = "LZ4",
    *,
    min_block_size: int = DEFAULT_MIN_COMPRESS_BLOCK_SIZE,
    max_block_size: int = DEFAULT_MAX_COMPRESS_BLOCK_SIZE,
) -> tuple[bytes, list[tuple[int, int]]]:
    """Write granules as ClickHouse does and return the stream with one mark per granule.

    Args:
        granules: Serialized granules, in order.
        codec: ``"NONE"``, ``"LZ4"``, ``"ZSTD"`` or ``"ZSTD(level)"``.
        min_block_size: ClickHouse's ``min_compress_block_size``.
        max_block_size: ClickHouse's ``max_compress_block_size``.

    Returns:
        (stream bytes, [(block offset in file, offset inside the decompressed block)] per granule).

    Raises:
        ValueError: an unsupported codec or inconsistent block sizes.

    Example:
        >>> data, marks = write_compressed_stream([b"ab", b"cd"], "LZ4", min_block_size=2)
        >>> marks
        [(0, 0), (28, 0)]
    """
    writer = CompressedStreamWriter(
        codec, min_block_size=min_block_size, max_block_size=max_block_size
    )
    marks = [writer.write_granule(granule) for granule in granules]
    return writer.finish(), marks
