"""A segment's plain index part: granules stored one after another, read whole by a probe.

The granules of a ``parquet_bloom_filter`` index (Parquet split-block filters, one per row
group) differ in size and each value's block depends on the size, so slicing them as
:mod:`~bloomskip.dataset.index.sliced` does would not make a probe read fewer bytes. They are
stored plainly instead, behind a header shaped like a sliced part's (the same 16-byte prefix,
so a segment reader learns the header's length the same way):

==========  ==================================================================================
bytes       field
==========  ==================================================================================
8           magic ``BSKPLAIN``
2, 2, 4     format version (1), flags (0), header length (all little-endian)
8, 8        part length, granule count
32          SHA-256 of the granules (checked when they are read)
4, n        definition length, the index definition (canonical ``INDEX …`` text)
32          SHA-256 of the header before it
...         the granules, back to back (the index type's own layout)
==========  ==================================================================================

The functions here take either kind of part: :func:`encode_part` writes a plain part for plain
granule kinds and a sliced one otherwise; the readers dispatch on the magic.

Example:
    >>> import pyarrow as pa
    >>> from bloomskip.clickhouse.ddl import parse_index_definition
    >>> from bloomskip.parquet.granules import ParquetBloomGranules, encode_granule
    >>> d = parse_index_definition("k TYPE parquet_bloom_filter")
    >>> granules = ParquetBloomGranules.from_bytes(d, encode_granule(None), 1)
    >>> part = encode_part(granules)
    >>> header = read_part_header(part)
    >>> header.granule_count, decode_part(part).to_bytes() == granules.to_bytes()
    (1, True)
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from bloomskip.dataset.index import sliced
from bloomskip.errors import FormatError, TruncatedError
from bloomskip.parquet.granules import ParquetBloomGranules

if TYPE_CHECKING:
    from bloomskip.clickhouse.ddl import IndexDefinition

__all__ = [
    "PLAIN_MAGIC",
    "PlainPartGranules",
    "PlainPartHeader",
    "decode_part",
    "encode_part",
    "part_granules",
    "part_header_length",
    "read_part_header",
]

PLAIN_MAGIC = b"BSKPLAIN"
_VERSION = 1
_FIXED = struct.Struct("<8sHHIQQ32sI")  # magic .. definition length
_DIGEST = 32
MAX_HEADER_LENGTH = 1 << 20


@dataclass(frozen=True)
class PlainPartHeader:
    """What a plain part's header says, checked.

    Attributes:
        definition: The index definition.
        granule_count: Granules in the part.
        header_length: Bytes of the header (the granules start here).
        part_length: Bytes of the whole part.
        payload_sha256: SHA-256 of the granules.
    """

    definition: IndexDefinition
    granule_count: int
    header_length: int
    part_length: int
    payload_sha256: bytes


def encode_part(granules) -> bytes:  # noqa: ANN001 - any granule kind
    """A segment's part of one index: plain for ``parquet_bloom_filter`` granules, else the
    sliced part of :func:`bloomskip.dataset.index.sliced.encode_part`.

    Example:
        >>> encode_part(granules)[:8]  # doctest: +SKIP
        b'BSKPLAIN'
    """
    if not isinstance(granules, ParquetBloomGranules):
        return sliced.encode_part(granules)
    payload = granules.to_bytes()
    text = granules.definition.to_sql().encode("utf-8")
    header_length = _FIXED.size + len(text) + _DIGEST
    part_length = header_length + len(payload)
    head = _FIXED.pack(
        PLAIN_MAGIC, _VERSION, 0, header_length, part_length, len(granules),
        hashlib.sha256(payload).digest(), len(text),
    ) + text  # fmt: skip
    return head + hashlib.sha256(head).digest() + payload


def part_header_length(prefix: bytes, source: str | None = None) -> int:
    """The header length a part's first 16 bytes announce, for a plain or a sliced part.

    Raises:
        FormatError: As :func:`bloomskip.dataset.index.sliced.part_header_length`.
    """
    if bytes(prefix[:8]) != PLAIN_MAGIC:
        return sliced.part_header_length(prefix, source)
    source = source or "plain part"
    if len(prefix) < 16:
        raise TruncatedError(f"plain part: {len(prefix)} bytes, the prefix needs 16",
                             field="magic", offset=0, source=source)  # fmt: skip
    version, flags, length = struct.unpack_from("<HHI", prefix, 8)
    if version != _VERSION or flags:
        raise FormatError(f"plain part: version {version}, flags {flags}; this reader knows 1, 0",
                          field="format_version", offset=8, source=source)  # fmt: skip
    if not _FIXED.size + _DIGEST <= length <= MAX_HEADER_LENGTH:
        raise FormatError(f"plain part: header length {length} out of bounds",
                          field="header_length", offset=12, source=source)  # fmt: skip
    return length


def read_part_header(data: bytes, source: str | None = None, part_size: int | None = None):  # noqa: ANN201
    """Read and check a part's header, plain or sliced.

    Returns:
        A :class:`PlainPartHeader`, or a sliced part's
        :class:`~bloomskip.dataset.index.sliced.PartHeader`.

    Raises:
        FormatError: A damaged header, or one that disagrees with ``part_size``.
    """
    from bloomskip.clickhouse.ddl import parse_index_definition

    if bytes(data[:8]) != PLAIN_MAGIC:
        return sliced.read_part_header(data, source, part_size)
    source = source or "plain part"
    length = part_header_length(data, source)
    if len(data) < length:
        raise TruncatedError(f"plain part: {len(data)} bytes, the header needs {length}",
                             field="header", offset=len(data), source=source)  # fmt: skip
    body = bytes(data[: length - _DIGEST])
    if hashlib.sha256(body).digest() != bytes(data[length - _DIGEST : length]):
        raise FormatError("plain part: header SHA-256 mismatch", field="header_sha256",
                          offset=length - _DIGEST, source=source)  # fmt: skip
    _, _, _, _, part_length, count, digest, text_length = _FIXED.unpack_from(body)
    if _FIXED.size + text_length != len(body) or part_length < length:
        raise FormatError("plain part: lengths disagree", field="definition_length",
                          offset=_FIXED.size - 4, source=source)  # fmt: skip
    if part_size is not None and part_size != part_length:
        raise FormatError(f"plain part: part length {part_length}, but it has {part_size} bytes",
                          field="part_length", offset=16, source=source)  # fmt: skip
    if count > part_length - length:  # every granule takes at least one byte
        raise FormatError(f"plain part: {count} granules in {part_length - length} bytes",
                          field="granule_count", offset=24, source=source)  # fmt: skip
    try:
        definition = parse_index_definition(body[_FIXED.size :].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise FormatError(f"plain part: definition unreadable: {exc}", field="definition",
                          offset=_FIXED.size, source=source) from exc  # fmt: skip
    return PlainPartHeader(definition, count, length, part_length, digest)


def decode_part(data: bytes, definition: IndexDefinition | None = None, source: str | None = None):  # noqa: ANN201 - granules
    """A whole part's granules, plain or sliced.

    Raises:
        FormatError: A damaged part, or one written for another definition.
    """
    if bytes(data[:8]) != PLAIN_MAGIC:
        return sliced.decode_part(data, definition, source)
    header = read_part_header(data, source, len(data))
    if definition is not None and definition.to_sql() != header.definition.to_sql():
        raise FormatError(f"plain part: written for {header.definition.to_sql()!r}",
                          field="definition", source=source)  # fmt: skip
    return _granules(header, bytes(data[header.header_length :]), source)


def _granules(header: PlainPartHeader, payload: bytes, source: str | None) -> ParquetBloomGranules:
    if hashlib.sha256(payload).digest() != header.payload_sha256:
        raise FormatError("plain part: granules SHA-256 mismatch", field="granules",
                          offset=header.header_length, source=source)  # fmt: skip
    return ParquetBloomGranules.from_bytes(
        header.definition, payload, header.granule_count, None, source
    )


def part_granules(header, source: str | None = None):  # noqa: ANN001, ANN201
    """What a probe reads a part through: :class:`PlainPartGranules` for a plain part, else
    :func:`bloomskip.dataset.index.sliced.sliced_granules`."""
    if isinstance(header, PlainPartHeader):
        return PlainPartGranules(header, source)
    return sliced.sliced_granules(header, source)


class PlainPartGranules:
    """A plain part's granules for the two-pass probe of :class:`ProbeIndex`: ``plan`` asks
    for the whole part after the header, ``fetch`` reads and checks it, then the probes run.

    Args:
        header: The part's header.
        source: The part, for error messages.
    """

    def __init__(self, header: PlainPartHeader, source: str | None = None) -> None:
        self.header = header
        self._source = source
        self._granules: ParquetBloomGranules | None = None

    def __len__(self) -> int:
        return self.header.granule_count

    def plan(self, condition: object) -> list[tuple[int, int]]:
        """The ranges a probe needs: all the granules (offsets relative to the part)."""
        header = self.header
        return [(header.header_length, header.part_length - header.header_length)]

    def unfetched(self, ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """``ranges`` unless they were read already."""
        return [] if self._granules is not None else ranges

    def fetch(self, ranges: list[tuple[int, int]], read_ranges) -> None:  # noqa: ANN001
        """Read the granules with one call of ``read_ranges`` and check their SHA-256.

        Raises:
            FormatError: The bytes are damaged.
        """
        if self._granules is None and ranges:
            payload = b"".join(read_ranges(ranges))
            self._granules = _granules(self.header, payload, self._source)

    def granules(self) -> ParquetBloomGranules:
        """The granules (fetched on first use)."""
        if self._granules is None:
            raise FormatError("plain part: probed before its granules were read",
                              source=self._source)  # fmt: skip
        return self._granules

    def literals_present(
        self, column: int, literals, clickhouse_type: str, granules: np.ndarray | None = None
    ) -> np.ndarray:  # noqa: ANN001
        """See :meth:`ParquetBloomGranules.literals_present`."""
        return self.granules().literals_present(column, literals, clickhouse_type, granules)
