"""Typed interface of the C kernels (public wrappers: bloomskip.hashing, bloomskip.bits)."""

from collections.abc import Sequence
from typing import Any, Final

from typing_extensions import Buffer

BatchView = tuple[Buffer, Buffer | None, int, int, int]

# hash_batch kinds
HASH_MURMUR3_128: Final[int]
HASH_TSFILE32: Final[int]
HASH_CITY64: Final[int]
HASH_CITY64_SEEDED: Final[int]
HASH_CITY128: Final[int]
HASH_XXH64: Final[int]
# tsfile_op / seeded_op / pair_op ops (pair_op: OP_POSITIONS and OP_ADD only)
OP_POSITIONS: Final[int]
OP_ADD: Final[int]
OP_CONTAINS: Final[int]
# text_granules tokenizers
TOKENIZER_NGRAM: Final[int]
TOKENIZER_TOKEN: Final[int]
TOKENIZER_SPARSE_GRAMS: Final[int]
# tsfile_index_node key kinds
TSFILE_KEY_MEASUREMENT: Final[int]
TSFILE_KEY_DEVICE_V3: Final[int]
TSFILE_KEY_DEVICE_V4: Final[int]

def murmur3_128(data: Buffer, seed: int, /) -> tuple[int, int]: ...
def tsfile_hash32(data: Buffer, seed: int, signed_tail: bool, /) -> int: ...
def cityhash64(data: Buffer, /) -> int: ...
def cityhash64_with_seed(data: Buffer, seed: int, /) -> int: ...
def cityhash128(data: Buffer, /) -> tuple[int, int]: ...
def hash128_to_64(low: int, high: int, /) -> int: ...
def int_hash64(x: int, /) -> int: ...
def xxhash64(data: Buffer, seed: int, /) -> int: ...
def hash_batch(
    kind: int,
    batch: BatchView,
    seed: int,
    signed_tail: bool,
    out1: Buffer,
    out2: Buffer | None,
    /,
) -> None: ...
def hash128_to_64_array(low: Buffer, high: Buffer, out: Buffer, /) -> None: ...
def int_hash64_array(x: Buffer, out: Buffer, /) -> None: ...
def set_bits(bitset: Buffer, positions: Buffer, /) -> None: ...
def test_bits(bitset: Buffer, positions: Buffer, out: Buffer, /) -> None: ...
def popcount(bitset: Buffer, /) -> int: ...
def popcount_rows(matrix: Buffer, width: int, out: Buffer, /) -> None: ...
def union_into(dst: Buffer, src: Buffer, /) -> None: ...
def sbbf_op(op: int, bitset: Buffer, hashes: Buffer, out: Buffer | None, /) -> None: ...
def covers(a: Buffer, b: Buffer, /) -> bool: ...
def covers_rows(matrix: Buffer, query: Buffer, out: Buffer, /) -> None: ...
def tsfile_op(
    op: int,
    bitset: Buffer | None,
    batch: BatchView,
    bit_count: int,
    k: int,
    signed_tail: bool,
    out: Buffer | None,
    /,
) -> None: ...
def seeded_op(
    op: int, bitset: Buffer | None, hashes: Buffer, bit_count: int, k: int, out: Buffer | None, /
) -> None: ...
def pair_op(
    op: int,
    bitset: Buffer | None,
    batch: BatchView,
    seed: int,
    bit_count: int,
    k: int,
    out: Buffer | None,
    /,
) -> None: ...
def bloom_filter_granules(
    columns: Any,
    granules: int,
    bits_per_row: int,
    k: int,
    offsets: Buffer,
    total_rows: Buffer,
    threads: int = 1,
    /,
) -> bytes: ...
def text_granules(
    batch: BatchView,
    bounds: Buffer,
    granules: int,
    tokenizer: int,
    n: int,
    size_bytes: int,
    k: int,
    seed: int,
    out: Buffer,
    threads: int = 1,
    /,
) -> None: ...
def tokenize(data: Buffer, tokenizer: int, n: int, /) -> list[tuple[int, int]]: ...
def fastmod(x: int, d: int, /) -> int: ...

# TsFile metadata scanning: the two parsers raise TsFileScanError on bad bytes
class TsFileScanError(ValueError):
    message: str  # what is wrong
    field: str  # the TsFile field being read
    offset: int  # its file offset
    truncated: bool  # the bytes ended inside the field (a prefix read may be widened)

def tsfile_scan_metadata(
    data: Buffer,
    start: int,
    end: int,
    version: int,
    base: int,
    # filled with table name -> columns (name, data_type, encoding, compressor, category,
    # properties)
    schemas: dict[str, tuple[tuple[str, int, int, int, int, dict[str, str | None]], ...]] = ...,
    /,
) -> tuple[
    list[tuple[str, int]], int, int, int, int, int, int, int, int, int, dict[str, str | None]
]: ...
def tsfile_index_node(
    data: Buffer, pos: int, key_kind: int, floor: int, limit: int, base: int, /
) -> tuple[tuple[Any, ...], tuple[int, ...], int, int, int]: ...
def tsfile_tail_verdict(
    tail: Buffer, head: Buffer, size: int, path: Buffer, signed_tails: Sequence[bool], /
) -> int: ...
