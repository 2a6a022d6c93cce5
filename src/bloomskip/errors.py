"""Exceptions raised by bloomskip."""

from __future__ import annotations


class BloomskipError(Exception):
    """Base class of every error bloomskip raises on purpose."""


class FormatError(BloomskipError, ValueError):
    """Bytes that do not follow the format they claim to be in.

    Args:
        message: What is wrong.
        field: The format field being read when the problem was found.
        offset: Byte offset of that field (in the file or buffer named by ``source``).
        source: The file or buffer, when known.
    """

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        offset: int | None = None,
        source: str | None = None,
    ) -> None:
        self.field = field
        self.offset = offset
        self.source = source
        where = []
        if source is not None:
            where.append(str(source))
        if field is not None:
            where.append(f"field {field}")
        if offset is not None:
            where.append(f"offset {offset}")
        super().__init__(f"{message} ({', '.join(where)})" if where else message)


class StaleSourceError(BloomskipError):
    """A source file changed or vanished after it was indexed."""
