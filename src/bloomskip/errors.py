"""Exceptions raised by bloomskip, and the category of the warnings it issues."""

from __future__ import annotations

import os
import sys
import warnings


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


class BloomskipWarning(UserWarning):
    """A query answered exactly, but without all the pruning its index could give: files
    changed or added since the build, or a damaged or missing index, were scanned whole.

    One is issued per decision (``Dataset.explain``, each query), whatever the number of
    files; ``Explanation.warnings`` holds its lines, and the files concerned are listed on the
    explanation. The ``bloomskip`` command prints those lines itself instead.
    """


_PACKAGE = os.path.dirname(__file__) + os.sep


def warn_caller(message: str) -> None:
    """Issue ``message`` as a :class:`BloomskipWarning` attributed to the first frame outside
    bloomskip: the user's line that ran the query, however deep in bloomskip it was decided.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     warn_caller("3 files are not indexed")
        >>> caught[0].category.__name__, str(caught[0].message)
        ('BloomskipWarning', '3 files are not indexed')
    """
    # stacklevel 2 is warn_caller's caller; each frame of bloomskip's above it adds one.
    frame, level = sys._getframe(1), 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, BloomskipWarning, stacklevel=level)
