"""Bounded reading and writing of TsFile's primitive encodings.

TsFile mixes LEB128 unsigned varints, zig-zag varints, big-endian fixed-width integers and
length-prefixed strings. :class:`ByteCursor` reads them from an in-memory slice of a file while
remembering where that slice sits in the file, so that every :class:`~bloomskip.errors.FormatError`
names the field and the absolute byte offset. Nothing here trusts a length read from the input:
each one is checked against the bytes actually available before anything is allocated.

Example:
    >>> cursor = ByteCursor(b"\\x80\\x02\\x05", base=0x105)
    >>> cursor.uvarint("bit_count"), cursor.uvarint("hash_function_count")
    (256, 5)
"""

from __future__ import annotations

import struct

from bloomskip.errors import FormatError, TruncatedError

#: Java's readUnsignedVarInt fills an ``int``: 5 groups of 7 bits at most.
MAX_UVARINT_BYTES = 5
INT32_MAX = 2**31 - 1

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class ByteCursor:
    """Reads TsFile encodings from ``data``, which starts at file offset ``base``.

    Args:
        data: The bytes to read (a slice of the file).
        base: File offset of ``data[0]``; error offsets are reported relative to the file.
        source: File name (or other label) carried into errors.

    Example:
        >>> ByteCursor(b"\\x0eroot.sg").varstr("table name")
        'root.sg'
    """

    __slots__ = ("data", "base", "pos", "source")

    def __init__(
        self, data: bytes | bytearray | memoryview, base: int = 0, source: str | None = None
    ) -> None:
        self.data = data if isinstance(data, bytes) else bytes(data)
        self.base = base
        self.pos = 0
        self.source = source

    @property
    def offset(self) -> int:
        """Absolute file offset of the next byte to read."""
        return self.base + self.pos

    @property
    def remaining(self) -> int:
        """Bytes left before the end of ``data``."""
        return len(self.data) - self.pos

    def error(self, message: str, field: str, offset: int | None = None) -> FormatError:
        """Return a FormatError about ``field`` at ``offset`` (default: the current offset)."""
        return FormatError(
            message,
            field=field,
            offset=self.offset if offset is None else offset,
            source=self.source,
        )

    def take(self, count: int, field: str) -> bytes:
        """Return the next ``count`` bytes.

        Raises:
            FormatError: Fewer than ``count`` bytes remain (or ``count`` is negative).
        """
        start = self.pos
        self.skip(count, field)
        return self.data[start : self.pos]

    def skip(self, count: int, field: str) -> None:
        """Advance over the next ``count`` bytes.

        Raises:
            FormatError: Fewer than ``count`` bytes remain (or ``count`` is negative).
        """
        if count < 0:
            raise self.error(f"negative length {count}", field)
        if count > self.remaining:
            raise TruncatedError(
                f"needs {count} bytes but only {self.remaining} remain before the end of the "
                "enclosing structure",
                field=field,
                offset=self.offset,
                source=self.source,
            )
        self.pos += count

    def u8(self, field: str) -> int:
        """Read one unsigned byte."""
        return self.take(1, field)[0]

    def i32(self, field: str) -> int:
        """Read a big-endian signed 32-bit integer."""
        return _I32.unpack(self.take(4, field))[0]

    def i64(self, field: str) -> int:
        """Read a big-endian signed 64-bit integer."""
        return _I64.unpack(self.take(8, field))[0]

    def uvarint(self, field: str) -> int:
        """Read an unsigned LEB128 varint holding a non-negative Java ``int``.

        Raises:
            FormatError: The varint is truncated, longer than 5 bytes, not minimally encoded,
                or above 2**31 - 1.
        """
        pos = self.pos
        if pos < len(self.data) and self.data[pos] < 0x80:  # the common one-byte case
            self.pos = pos + 1
            return self.data[pos]
        start = self.offset
        value = self._multibyte_varint(field, start)
        if value > INT32_MAX:
            raise self.error(f"varint {value} exceeds 2**31 - 1", field, start)
        return value

    def varint(self, field: str) -> int:
        """Read a zig-zag encoded signed varint (Java ``writeVarInt``)."""
        pos = self.pos
        if pos < len(self.data) and self.data[pos] < 0x80:  # the common one-byte case
            self.pos = pos + 1
            byte = self.data[pos]
            return (byte >> 1) ^ -(byte & 1)
        start = self.offset
        value = self._multibyte_varint(field, start)
        if value > 0xFFFFFFFF:
            raise self.error(f"varint {value} exceeds 32 bits", field, start)
        return (value >> 1) ^ -(value & 1)

    def _multibyte_varint(self, field: str, start: int) -> int:
        """Read the LEB128 bytes of a varint (at most 5, minimally encoded) at ``start``."""
        value = 0
        for index in range(MAX_UVARINT_BYTES):
            if self.pos >= len(self.data):
                raise TruncatedError(
                    "truncated varint", field=field, offset=start, source=self.source
                )
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << (7 * index)
            if not byte & 0x80:
                if byte == 0 and index > 0:
                    raise self.error("overlong varint (non-minimal encoding)", field, start)
                return value
        raise self.error(f"overlong varint (more than {MAX_UVARINT_BYTES} bytes)", field, start)

    def varstr(self, field: str) -> str | None:
        """Read a zig-zag varint length (-1 for null) followed by that many UTF-8 bytes."""
        start = self.offset
        length = self.varint(field)
        if length == -1:
            return None
        if length < 0:
            raise self.error(f"negative string length {length}", field, start)
        return self._decode(self.take(length, field), field, start)

    def i32str(self, field: str) -> str | None:
        """Read a big-endian i32 length (-1 for null) followed by that many UTF-8 bytes."""
        start = self.offset
        length = self.i32(field)
        if length == -1:
            return None
        if length < 0:
            raise self.error(f"negative string length {length}", field, start)
        return self._decode(self.take(length, field), field, start)

    def skip_i32_bytes(self, field: str) -> None:
        """Skip an i32-length-prefixed byte string (-1 for null) without decoding it."""
        start = self.offset
        length = self.i32(field)
        if length < -1:
            raise self.error(f"negative length {length}", field, start)
        if length > 0:
            self.skip(length, field)

    def _decode(self, raw: bytes, field: str, start: int) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.error(f"invalid UTF-8 ({exc.reason})", field, start) from None


def encode_uvarint(value: int) -> bytes:
    """Encode a non-negative Java ``int`` as an unsigned LEB128 varint.

    Args:
        value: 0 .. 2**31 - 1.

    Returns:
        The minimal encoding (1 to 5 bytes).

    Raises:
        ValueError: ``value`` is outside 0 .. 2**31 - 1.

    Example:
        >>> encode_uvarint(256).hex()
        '8002'
    """
    if not 0 <= value <= INT32_MAX:
        raise ValueError(f"uvarint value {value} is outside 0 .. 2**31 - 1")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_i32(value: int) -> bytes:
    """Encode a big-endian signed 32-bit integer (the TsFile tail's metadata size)."""
    return _I32.pack(value)
