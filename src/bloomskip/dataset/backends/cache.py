"""What a dataset keeps between queries, and the one rule that drops it.

Both backends follow it: everything derived (decoded indexes, compiled conditions, layouts,
schemas, the DuckDB connection) is kept under the state it was derived from, the keys of the
files as listed and the key of the index, and dropped whole when any of them changes.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bloomskip.dataset.listing.files import IdentityCache, stat_key

if TYPE_CHECKING:
    from collections.abc import Hashable, Sequence
    from concurrent.futures import Future

    import pyarrow as pa


@dataclass
class DatasetCache:
    """Everything a ``Dataset`` derives from its files and its sidecar.

    Each entry was derived under :attr:`state`, the ``stat`` of every file and of the sidecar.
    :meth:`refresh` compares a new listing's keys and, when anything differs,
    :meth:`invalidate` drops every entry: a file rewritten between two queries (even with its
    size and modification time restored: ``stat_key`` includes the change time), or a sidecar
    rebuilt with other definitions or granules, is then read again, never answered from
    memory. The verified sidecar itself is its store's
    (:class:`~bloomskip.dataset.index.store.SidecarStore`), kept while its own ``stat`` holds.

    Attributes:
        state: ``(stat keys of the files, stat key of the sidecar or None)`` the entries were
            derived under; None before the first refresh, or when the sidecar cannot be
            stat-ed.
        identities: File identities (footer hashes); each also re-validated by ``stat``.
        layouts: Row-group layouts, keyed by file and identity.
        engines: Decoded skip indexes, keyed by index and the identities of the files covered.
        conditions: Compiled conditions, keyed by WHERE and index.
        connection: The DuckDB connection queries run on (it caches Parquet footers).
        pending: A connection being opened ahead, in a thread; it has cached nothing yet, so it
            survives :meth:`invalidate`.
        scan_schema: The schema of DuckDB's ``union_by_name`` scan of the whole dataset.
        empty_results: The empty result of each (columns, WHERE) that matched nothing.
        schema: The dataset's Arrow schema (columns by first appearance).
        file_schemas: The Arrow schema of each file.
        named_schemas: A segmented index's schemas (one per segment, one per file no segment
            describes), each named by a file and saying whether its files hold exactly it.
        uniform: Whether every file has the same Arrow and Parquet schema (valid once
            :attr:`file_schemas` is set).
        partitioning: The partition columns of the files' ``key=value`` folders and their
            values (``dataset/listing/hive.py``), once derived.
        decisions: The decision (``Explanation``) of each WHERE: the same WHERE over the same
            files and index is decided alike.

    Example:
        >>> cache = DatasetCache()
        >>> cache.refresh(keys, dataset.sidecar_path)  # doctest: +SKIP
        >>> cache.layouts  # doctest: +SKIP
        {}
    """

    state: tuple | None = None
    identities: IdentityCache = field(default_factory=IdentityCache)
    layouts: dict = field(default_factory=dict)
    engines: dict = field(default_factory=dict)
    conditions: dict = field(default_factory=dict)
    connection: Any = None
    pending: Future | None = None
    scan_schema: pa.Schema | None = None
    empty_results: dict = field(default_factory=dict)
    schema: pa.Schema | None = None
    file_schemas: list[pa.Schema] | None = None
    named_schemas: list | None = None
    uniform: bool = True
    partitioning: Any = None
    decisions: dict = field(default_factory=dict)

    def refresh(self, keys: Sequence[Hashable], index_key: Hashable) -> None:
        """Invalidate the cache when a file or the index changed since the last refresh.

        Args:
            keys: Each of the dataset's files as its listing described it: a local file's
                :func:`~bloomskip.dataset.listing.files.stat_key`, an object's ``ObjectInfo``
                (the files are not stat-ed again).
            index_key: What identifies the index read: a sidecar's :func:`sidecar_key`, a
                segmented index's manifest version; :data:`UNKNOWN` keeps nothing.

        Example:
            >>> cache = DatasetCache()
            >>> cache.refresh([(1, 2, 3, 4, 5)], None)
            >>> cache.layouts["a"] = 1
            >>> cache.refresh([(1, 2, 3, 4, 5)], None); cache.layouts
            {'a': 1}
            >>> cache.refresh([(1, 2, 3, 4, 6)], None); cache.layouts
            {}
        """
        state = (tuple(keys), index_key)
        if index_key is UNKNOWN or state != self.state:
            self.invalidate()
        self.state = state

    def invalidate(self) -> None:
        """Drop every entry (closing the DuckDB connection), keeping only a pending connection.

        Example:
            >>> cache.invalidate()  # doctest: +SKIP
        """
        if self.connection is not None:
            # DuckDB re-validates its footer cache only by modification time in seconds.
            self.connection.close()
        pending = self.pending
        for item in dataclasses.fields(self):
            if item.default_factory is not dataclasses.MISSING:
                setattr(self, item.name, item.default_factory())
            else:
                setattr(self, item.name, item.default)
        self.pending = pending


#: An index key that matches no other: what cannot be identified is never served from memory.
UNKNOWN = object()


def sidecar_key(path: str | os.PathLike) -> Hashable:
    """A sidecar's key for :meth:`DatasetCache.refresh`: its ``stat_key``, None when there is
    none, :data:`UNKNOWN` when it cannot be stat-ed (its read then reports why)."""
    try:
        return stat_key(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        return UNKNOWN
