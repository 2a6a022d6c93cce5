"""ClickHouse compressed blocks (``.bin``/``.idx``/``.cmrk*`` framing) against independent oracles.

The first byte of an input is a flag: odd means its blocks' checksums are recomputed first, so
the mutations reach the decoders (LZ4, ZSTD, Multiple) behind the checksum. When a stream
decodes: every block's stored checksum is what clickhouse-cityhash computes over it, the stream
read from bytes and from a file object agree, the block table adds up to the input and to the
declared sizes, and re-framing each block's bytes decodes to the same bytes.
"""

from __future__ import annotations

import io
import struct

from clickhouse_cityhash.cityhash import CityHash128
from common import main, reseal_blocks, selector

from bloomskip.clickhouse import compression


def test_one_input(data: bytes) -> None:
    flag, data = selector(data, 2)
    if flag:
        data = reseal_blocks(data)
    stream = compression.read_compressed_stream_with_blocks(data, "fuzz.idx")
    from_file = compression.read_compressed_stream_with_blocks(io.BytesIO(data), "fuzz.idx")
    assert from_file.data == stream.data
    assert from_file.block_offsets.tolist() == stream.block_offsets.tolist()
    assert stream.compressed_bytes == len(data)
    assert stream.block_starts[-1] == len(stream.data) <= compression.DEFAULT_STREAM_LIMIT
    offsets = stream.block_offsets.tolist() + [len(data)]
    for number, (start, end) in enumerate(zip(offsets[:-1], offsets[1:], strict=True)):
        body = data[start + 16 : end]
        value = CityHash128(body)
        assert struct.pack("<QQ", value >> 64, value & (2**64 - 1)) == data[start : start + 16]
        method, csize, usize = struct.unpack_from("<BII", body, 0)
        assert csize == len(body) and method == stream.block_methods[number]
        block = stream.data[stream.block_starts[number] : stream.block_starts[number + 1]]
        assert len(block) == usize
        if method == compression.METHOD_NONE:
            assert block == body[9:]
        assert compression.read_compressed_stream(compression.compress_block(block, "LZ4")) == block


if __name__ == "__main__":
    main(test_one_input)
