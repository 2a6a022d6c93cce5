"""Parquet objects under a prefix: an object store's, a local folder's, or a caller's filesystem's.

A listing says which files a dataset holds and how each is told apart from a rewrite (its
identity), and contributes the per-file adjustments a scan applies (partition values of
``key=value`` folders). It knows nothing of indexes or scans. :class:`PrefixListing` lists a
prefix; a table snapshot's listing (``listing/tables/listing.py``) lists the snapshot's files
instead and adds the table's own adjustments.

Example:
    >>> import tempfile
    >>> from bloomskip._store import open_store
    >>> folder = tempfile.mkdtemp()
    >>> listing = PrefixListing(folder, open_store(folder))
    >>> objects = [ObjectInfo("a.parquet", 10, 1, etag="e1"), ObjectInfo("_SUCCESS", 0, 1)]
    >>> [(listed.key, listed.identity) for listed in listing.data_files(objects)]
    [('a.parquet', {'size': 10, 'etag': 'e1'})]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bloomskip._store import ObjectInfo, one_line
from bloomskip.errors import BloomskipError, StorageError

if TYPE_CHECKING:
    import pyarrow as pa

    from bloomskip._store import Store
    from bloomskip.dataset.listing.files import SourceFile
    from bloomskip.dataset.listing.hive import Partitioning

PARQUET_SUFFIXES = (".parquet", ".parq", ".pq")


@dataclass(frozen=True)
class ListedFile:
    """A data file as the listing describes it.

    Attributes:
        key: Its key relative to the dataset's prefix (the name the index uses).
        info: Size, ETag, version and modification time from the listing.
        distrusted: The listing's own metadata disagrees with the object (a table's log
            states another size): the file has no identity, so it is never pruned, while
            ``info`` still tells whether it changes during a read.
        source: The file as it is read, when the listing found it (a local file, with its
            format: Parquet or Arrow IPC); None: read where the dataset's store holds ``key``.
    """

    key: str
    info: ObjectInfo
    distrusted: bool = False
    source: SourceFile | None = field(default=None, compare=False)

    @property
    def identity(self) -> dict[str, int | str] | None:
        """What the index records (see ``ObjectInfo.identity``); None: it cannot be told
        apart from a rewrite, so the file is never pruned."""
        return None if self.distrusted else self.info.identity


def is_hidden(key: str) -> bool:
    """Whether a key is ignored as ``pyarrow.dataset`` ignores it (``_SUCCESS``, ``.crc``,
    ``_delta_log``, an index's own folder): a part of its path starts with ``_`` or ``.``."""
    return any(part.startswith(("_", ".")) for part in key.split("/"))


class PrefixListing:
    """The Parquet files under a prefix.

    Args:
        location: The prefix as the user gave it (a URI or a path), or the path in
            ``filesystem``.
        store: The prefix's store (None with ``filesystem``).
        filesystem: A caller's pyarrow filesystem the files are listed and read through; they
            then have no ETag, and the footer's hash names each file's bytes.

    Attributes:
        is_latest: Whether the files are the newest state of the dataset (a prefix always is;
            a table opened at an older snapshot is not).
        snapshot: The table snapshot listed (None for a prefix).
        warnings: What the last listing found wrong with the files (a table's files changed
            behind its back, in one line).
    """

    is_latest = True
    snapshot = None

    def __init__(self, location: str, store: Store | None, filesystem=None) -> None:
        self.location = location
        self.store = store
        self.filesystem = filesystem
        self.warnings: list[str] = []

    def uri_of(self, key: str) -> str:
        """The URI (or path) of a file, as messages name it."""
        return self.store.uri_of(key) if self.store is not None else f"{self.location}/{key}"

    def objects(self) -> list[ObjectInfo]:
        """Every object under the prefix, in key order: one listing (an index kept inside the
        prefix is listed with it).

        Raises:
            StorageError: The prefix cannot be listed.
        """
        if self.filesystem is None:
            return self.store.list("")
        import pyarrow.fs as pafs

        from bloomskip.dataset.listing.files import SourceFile

        base = self.location.rstrip("/")
        try:
            found = self.filesystem.get_file_info(pafs.FileSelector(base, recursive=True))
        except (OSError, ValueError) as exc:
            raise StorageError(f"cannot list {base}: {one_line(exc)}") from exc
        infos = []
        for item in found:
            if item.type != pafs.FileType.File:
                continue
            key = item.path[len(base) :].lstrip("/")
            listed = ObjectInfo(key, item.size, item.mtime_ns or 0)
            if key.lower().endswith(PARQUET_SUFFIXES) and not is_hidden(key):
                identity = SourceFile(item.path, "parquet", self.filesystem).identity()
                listed = ObjectInfo(
                    key, item.size, item.mtime_ns or 0, etag=f"footer-{identity.footer_sha256}"
                )
            infos.append(listed)
        return sorted(infos, key=lambda info: info.key)

    def files(self) -> list[ListedFile]:
        """The dataset's files, from one listing (:meth:`objects`, then :meth:`data_files`).

        Raises:
            BloomskipError: An object is not a Parquet file by its name, or there is none.
            StorageError: The prefix cannot be listed.
        """
        return self.data_files(self.objects())

    def data_files(self, objects: list[ObjectInfo]) -> list[ListedFile]:
        """The dataset's files among the objects listed under its prefix (the index's own
        objects already set apart).

        Raises:
            BloomskipError: An object is not a Parquet file by its name, or there is none.
        """
        files = []
        for info in objects:
            key = info.key
            if is_hidden(key):
                continue
            if not key.lower().endswith(PARQUET_SUFFIXES):
                raise BloomskipError(
                    f"{self.uri_of(key)}: not a Parquet file by its name; a dataset prefix must "
                    "hold only Parquet files (names ending in .parquet)"
                )
            files.append(ListedFile(key, info))
        if not files:
            raise BloomskipError(f"{self.location}: the dataset holds no Parquet file")
        return files

    def unverifiable(self, files: list[ListedFile]) -> list[str]:
        """Why files whose listing gives no identity are left unindexed: one line, however
        many (none for none)."""
        if not files:
            return []
        if len(files) == 1:
            return [
                f"{self.uri_of(files[0].key)}: not indexed: the store lists no ETag for it, so "
                "a rewrite could not be detected (it is always scanned)"
            ]
        return [
            f"{len(files)} files not indexed: the store lists no ETag for them, so a rewrite "
            f"could not be detected (they are always scanned; e.g. {self.uri_of(files[0].key)})"
        ]

    # -- per-file adjustments ---------------------------------------------------------------

    def files_kept(self, where: str) -> tuple[set[str] | None, str | None]:
        """The files the location's own metadata keeps for ``where`` before any index is read,
        and the predicate it was given: ``(None, None)`` (a prefix has no such metadata)."""
        return None, None

    def describe(self, predicate: str | None, files_kept: int) -> dict | None:
        """What :meth:`files_kept` did, for ``Explanation.table`` (None for a prefix)."""
        return None

    def record(self, indexes=(), base=None) -> dict | None:
        """The snapshot a build of ``indexes`` (on top of the manifest ``base``) covers
        (``Manifest.table``): None for a prefix."""
        return None

    def served_indexes(self, manifest) -> tuple[list, dict[int, str]]:
        """A manifest's index definitions as a query of these files uses them, and the ones
        it cannot use, by number (a prefix: every definition as it is)."""
        return list(manifest.indexes), {}

    def build_indexes(self, manifest, schema: pa.Schema) -> tuple[pa.Schema, list, object]:
        """The schema a build prepares its definitions against and reads the files as, the
        manifest's definitions as it keeps them, and the field ids the files' columns are found
        by (a prefix: ``schema``, the definitions as they are, and None: by name)."""
        return schema, list(manifest.indexes) if manifest is not None else [], None

    def schema(self) -> pa.Schema | None:
        """The dataset's schema when the location states it (None: from the files)."""
        return None

    def check_build(self) -> None:
        """Raise when the files listed cannot be indexed as they are (never, for a prefix)."""

    def check_indexes(self, definitions) -> None:
        """Raise when an index of ``definitions`` (texts) cannot be built here: never for a
        prefix (an index over a ``key=value`` folder's column is refused by
        :meth:`partitioning`'s ``check_index``)."""

    def partitioning(self, paths: list[str], keys: list[str], schema) -> Partitioning:
        """The partition columns of the files' ``key=value`` folders and each file's values.

        Args:
            paths: The files' readable paths, in key order.
            keys: Their keys.
            schema: The columns the files hold, or the whole schema (partition columns already
                typed in it keep their types).
        """
        from bloomskip.dataset.listing.hive import partitioning

        return partitioning(paths, {field.name: field.type for field in schema}, keys)

    def table_files(self, paths: list[str], keys: list[str], schema_source) -> dict | None:
        """The values a scan adds to each file (``TableFile`` by key): its ``key=value``
        folders' partition values; None without such folders (the schema is then not read).

        Args:
            paths: The readable paths of the files a decision covers.
            keys: Their keys.
            schema_source: Gives the dataset's schema (read only when there are folders).
        """
        from bloomskip.dataset.listing.hive import path_partitions

        if not paths or not path_partitions(paths[0]):
            return None
        return self.partitioning(paths, keys, schema_source()).table_files()
