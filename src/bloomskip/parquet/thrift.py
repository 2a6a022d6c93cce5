"""The Thrift compact protocol, as much as a Parquet ``BloomFilterHeader`` needs: a bounded
reader that walks a struct (skipping fields it does not know, as Thrift readers must) and the
writer of the one header bloomskip writes.

``BloomFilterHeader`` (parquet.thrift)::

    1: required i32 numBytes
    2: required BloomFilterAlgorithm algorithm      union { 1: SplitBlockAlgorithm BLOCK }
    3: required BloomFilterHash hash                union { 1: XxHash XXHASH }
    4: required BloomFilterCompression compression  union { 1: Uncompressed UNCOMPRESSED }

Example:
    >>> header = encode_bloom_filter_header(32)
    >>> header.hex()
    '15401c1c00001c1c00001c1c000000'
    >>> parse_bloom_filter_header(header + bytes(32))
    (32, 15)
"""

from __future__ import annotations

from bloomskip.errors import FormatError, TruncatedError

__all__ = ["encode_bloom_filter_header", "parse_bloom_filter_header"]

# Compact protocol type ids.
_BOOL_TRUE, _BOOL_FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY = 1, 2, 3, 4, 5, 6, 7, 8
_LIST, _SET, _MAP, _STRUCT = 9, 10, 11, 12
#: Nesting deeper than this is hostile: the header's own depth is 3.
_MAX_DEPTH = 16
#: A header is 15 bytes or so; a field or container claiming more than this is corrupt.
_MAX_ELEMENTS = 1 << 16


class _Reader:
    """A cursor over ``data`` that raises FormatError naming the field and absolute offset."""

    def __init__(self, data: bytes | memoryview, base: int, source: str | None) -> None:
        self.data = memoryview(data)
        self.pos = 0
        self.base = base
        self.source = source
        self.field = "BloomFilterHeader"

    def error(self, message: str, truncated: bool = False) -> FormatError:
        kind = TruncatedError if truncated else FormatError
        return kind(message, field=self.field, offset=self.base + self.pos, source=self.source)

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise self.error("the Bloom filter header ends inside a field", truncated=True)
        value = self.data[self.pos]
        self.pos += 1
        return value

    def varint(self) -> int:
        result = shift = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift >= 64:
                raise self.error("a varint longer than 10 bytes")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def skip(self, type_id: int, depth: int) -> None:
        if depth > _MAX_DEPTH:
            raise self.error(f"structures nested deeper than {_MAX_DEPTH}")
        if type_id in (_BOOL_TRUE, _BOOL_FALSE):
            return
        if type_id == _BYTE:
            self.byte()
        elif type_id in (_I16, _I32, _I64):
            self.varint()
        elif type_id == _DOUBLE:
            self.take(8)
        elif type_id == _BINARY:
            self.take(self.size())
        elif type_id in (_LIST, _SET):
            head = self.byte()
            count = head >> 4 if head >> 4 != 15 else self.size()
            for _ in range(count):
                self.skip(head & 0x0F, depth + 1)
        elif type_id == _MAP:
            count = self.size()
            if count:
                kinds = self.byte()
                for _ in range(count):
                    self.skip(kinds >> 4, depth + 1)
                    self.skip(kinds & 0x0F, depth + 1)
        elif type_id == _STRUCT:
            for _field_id, field_type in self.fields():
                self.skip(field_type, depth + 1)
        else:
            raise self.error(f"unknown Thrift compact type {type_id}")

    def size(self) -> int:
        n = self.varint()
        if n > _MAX_ELEMENTS:
            raise self.error(f"a length of {n}, more than a Bloom filter header can hold")
        return n

    def take(self, n: int) -> None:
        if self.pos + n > len(self.data):
            raise self.error("the Bloom filter header ends inside a field", truncated=True)
        self.pos += n

    def fields(self):
        """Yield ``(field_id, type_id)`` for each field of a struct, up to its stop byte."""
        last = 0
        while True:
            head = self.byte()
            if head == 0:
                return
            delta, type_id = head >> 4, head & 0x0F
            last = last + delta if delta else self.zigzag()
            yield last, type_id

    def union_choice(self, name: str, depth: int) -> int:
        """The field id a union (a struct with one field set) holds; its value is skipped."""
        chosen = None
        for field_id, type_id in self.fields():
            if chosen is not None:
                raise self.error(f"{name} sets more than one member")
            chosen = field_id
            self.skip(type_id, depth + 1)
        if chosen is None:
            raise self.error(f"{name} sets no member")
        return chosen


_MEMBERS = {
    2: ("algorithm", "BLOCK (split-block)"),
    3: ("hash", "XXHASH"),
    4: ("compression", "UNCOMPRESSED"),
}


def parse_bloom_filter_header(
    data: bytes | memoryview, *, offset: int = 0, source: str | None = None
) -> tuple[int, int]:
    """Read a ``BloomFilterHeader`` at the start of ``data``.

    Args:
        data: The bytes at the filter's offset (the header and, after it, the bitset).
        offset: Where ``data`` starts in its file, for error messages.
        source: The file, for error messages.

    Returns:
        ``(num_bytes, header_length)``: the bitset's size and the header's own length.

    Raises:
        FormatError: Malformed Thrift, a missing field, an algorithm, hash or compression other
            than the split-block, XXHASH, uncompressed filter the format defines, or a size that
            is not a positive multiple of 32 bytes (TruncatedError when the bytes end early).

    Example:
        >>> parse_bloom_filter_header(bytes.fromhex("15401c1c00001c1c00001c1c000000"))
        (32, 15)
    """
    reader = _Reader(data, offset, source)
    num_bytes = None
    seen = set()
    for field_id, type_id in reader.fields():
        if field_id == 1 and type_id == _I32:
            reader.field = "BloomFilterHeader.numBytes"
            num_bytes = reader.zigzag()
        elif field_id in _MEMBERS and type_id == _STRUCT:
            name, expected = _MEMBERS[field_id]
            reader.field = f"BloomFilterHeader.{name}"
            if reader.union_choice(name, 1) != 1:
                raise reader.error(f"{name} is not {expected}, the only one Parquet defines")
            seen.add(field_id)
        else:
            reader.skip(type_id, 1)
        reader.field = "BloomFilterHeader"
    missing = [_MEMBERS[f][0] for f in sorted(_MEMBERS) if f not in seen]
    if num_bytes is None:
        missing.insert(0, "numBytes")
    if missing:
        raise reader.error(f"the header lacks its required field(s) {', '.join(missing)}")
    if num_bytes <= 0 or num_bytes % 32:
        reader.field = "BloomFilterHeader.numBytes"
        raise reader.error(f"numBytes is {num_bytes}, not a positive multiple of 32")
    return num_bytes, reader.pos


def encode_bloom_filter_header(num_bytes: int) -> bytes:
    """The ``BloomFilterHeader`` of a split-block, XXHASH, uncompressed filter of ``num_bytes``
    (as arrow C++ and parquet-mr write it).

    Example:
        >>> len(encode_bloom_filter_header(1 << 20))
        18
    """
    n = (num_bytes << 1) ^ (num_bytes >> 31)  # zigzag of an i32
    varint = bytearray()
    while True:
        if n < 0x80:
            varint.append(n)
            break
        varint.append((n & 0x7F) | 0x80)
        n >>= 7
    union_with_empty_first_member = b"\x1c\x1c\x00\x00"
    return b"\x15" + bytes(varint) + union_with_empty_first_member * 3 + b"\x00"
