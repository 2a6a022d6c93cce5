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


class SQLSyntaxError(BloomskipError, ValueError):
    """SQL that does not parse; the message is sqlglot's first error, on one line."""


class TruncatedError(FormatError):
    """The bytes ended inside a field: the structure is cut short (or was read only in part)."""


class PartError(BloomskipError):
    """A part directory that cannot be used: missing files, unknown index names."""


class SimulateError(BloomskipError):
    """Bad input to ``simulate``: unreadable data, an unknown column, a bad option."""


class IndexDefinitionError(BloomskipError, ValueError):
    """An index definition ClickHouse would reject, or one bloomskip cannot evaluate."""


class UnsupportedTypeError(BloomskipError, ValueError):
    """A ClickHouse type (or Arrow type) that the requested index cannot hash."""


class ConditionError(BloomskipError, ValueError):
    """A WHERE expression that is not valid ClickHouse SQL, or that ClickHouse refuses."""


class PartCommandError(BloomskipError):
    """A user error of ``inspect`` / ``explain`` (bad file, unknown index)."""


class UnsupportedPredicateError(BloomskipError, ValueError):
    """A WHERE clause that cannot be translated exactly (or is not valid ClickHouse SQL)."""


class StorageError(BloomskipError, OSError):
    """A location that cannot be read or written: unreachable, denied, missing, or not writable.

    The message names the URI (or path) and what failed, on one line.
    """


class CommitConflictError(BloomskipError):
    """An index commit that cannot be applied on top of the newest version, or kept losing races."""
