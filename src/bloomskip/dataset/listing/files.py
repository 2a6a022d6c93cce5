"""Dataset sources: which files a DATASET argument names, and each file's identity and granules.

A DATASET is one Parquet or Arrow IPC file, a directory of them (discovered the way
``pyarrow.dataset`` does it, so ``_``- and ``.``-prefixed entries such as our own sidecar are
ignored) or a glob. The files of one dataset are all Parquet or all Arrow IPC (the file format,
with its footer): a mix is refused by name. Every file is described by a :class:`SourceFile`:
its identity (size, modification time and a SHA-256 of its footer) and its granules (row
groups, or record batches for Arrow IPC).
"""

from __future__ import annotations

import glob
import hashlib
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISREG
from typing import TYPE_CHECKING

from bloomskip._sources import (
    ARROW_IPC,
    ARROW_IPC_MAGIC,
    ARROW_IPC_STREAM,
    PARQUET,
    PARQUET_MAGIC,
    sniff_format,
)
from bloomskip.errors import BloomskipError, FormatError

if TYPE_CHECKING:
    import pyarrow as pa

# A footer larger than this is not a footer we can trust: refuse rather than allocate it.
MAX_FOOTER_BYTES = 256 * 1024 * 1024
#: Bytes read from a file's end to find its footer: most footers fit, so one read does.
TAIL_READ_BYTES = 64 * 1024
GLOB_CHARACTERS = frozenset("*?[")


@dataclass(frozen=True)
class FileIdentity:
    """What a source file looked like when it was indexed.

    Attributes:
        size: File size in bytes.
        mtime_ns: Modification time in nanoseconds.
        footer_sha256: Hex SHA-256 of the Parquet footer (or the Arrow IPC footer) bytes.
    """

    size: int
    mtime_ns: int
    footer_sha256: str


@dataclass(frozen=True)
class SourceFile:
    """One file of a dataset.

    Attributes:
        path: Absolute path of the file; on an object store, its path in :attr:`filesystem`
            (``bucket/key``).
        format: ``"parquet"`` or ``"arrow-ipc"``.
        filesystem: The pyarrow filesystem holding it; None for a local file.
        opener: Opens an object as its listing described it, each read pinned to the listed
            version, without asking the store for its size first (``Store.opener``); None:
            opened through ``filesystem``.
    """

    path: Path
    format: str
    filesystem: object = field(default=None, compare=False, hash=False, repr=False)
    opener: object = field(default=None, compare=False, hash=False, repr=False)

    def open(self):
        """What pyarrow readers take for this file: its local path, or an input file."""
        if self.opener is not None:
            import pyarrow as pa

            return pa.PythonFile(self.opener(), mode="r")
        if self.filesystem is None:
            return str(self.path)
        return self.filesystem.open_input_file(str(self.path))

    def identity(self) -> FileIdentity:
        """Return the file's current identity.

        Returns:
            The size, modification time and footer hash read now.

        Raises:
            FormatError: The file is too short or its footer is malformed.
            OSError: The file cannot be read.

        Example:
            >>> SourceFile(Path("a.parquet"), "parquet").identity()  # doctest: +SKIP
            FileIdentity(size=1234, mtime_ns=..., footer_sha256='9f2c...')
        """
        if self.filesystem is not None:
            info = self.filesystem.get_file_info(str(self.path))
            with self.filesystem.open_input_file(str(self.path)) as handle:
                footer = read_footer_bytes(handle, info.size, self.format, str(self.path))
            return FileIdentity(info.size, info.mtime_ns or 0, hashlib.sha256(footer).hexdigest())
        with open(self.path, "rb") as handle:
            stat = os.fstat(handle.fileno())
            footer = read_footer_bytes(handle, stat.st_size, self.format, str(self.path))
        return FileIdentity(stat.st_size, stat.st_mtime_ns, hashlib.sha256(footer).hexdigest())


def stat_key(path: str | os.PathLike) -> tuple[int, ...]:
    """Return what ``stat`` says about a file that any change to it also changes.

    The status-change time ``st_ctime_ns`` is set by the kernel on every write, rename or
    ``utime`` call and cannot be set back by a program, so a file whose key is unchanged holds
    the same bytes (and the same footer) as when the key was taken.

    Args:
        path: The file.

    Returns:
        ``(device, inode, size, mtime_ns, ctime_ns)``.

    Raises:
        OSError: The file cannot be stat-ed.

    Example:
        >>> stat_key("a.parquet")  # doctest: +SKIP
        (2049, 1311, 1234, 1764460000000000000, 1764460000000000000)
    """
    return key_of(os.stat(path))


def key_of(stat: os.stat_result) -> tuple[int, ...]:
    """The :func:`stat_key` of a ``stat`` result already taken (a listing's)."""
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


class IdentityCache:
    """File identities (size, mtime, footer hash), re-validated by ``stat`` on every use.

    Hashing a footer means opening the file and reading its metadata; a dataset answering many
    queries would do it for every file on every query. The cache keeps each file's identity with
    the :func:`stat_key` it was read under, and re-reads the footer only when that key changes:
    every query still checks every file, at the cost of one ``stat``.

    Example:
        >>> identities = IdentityCache()
        >>> identities.identity(SourceFile(Path("a.parquet"), "parquet"))  # doctest: +SKIP
        FileIdentity(size=1234, mtime_ns=..., footer_sha256='9f2c...')
    """

    def __init__(self) -> None:
        self._known: dict[Path, tuple[tuple[int, ...], FileIdentity]] = {}

    def identity(self, source: SourceFile) -> FileIdentity:
        """Return the file's current identity (see :meth:`SourceFile.identity`).

        Args:
            source: The file.

        Returns:
            Its identity now.

        Raises:
            FormatError: The file is too short or its footer is malformed.
            OSError: The file cannot be read.
        """
        return self.keyed(source)[1]

    def keyed(
        self, source: SourceFile, key: tuple[int, ...] | None = None
    ) -> tuple[tuple[int, ...], FileIdentity]:
        """Return the file's :func:`stat_key`, taken before anything of it is read, and its
        current identity.

        A reader that finds the file with that key after its own reads knows they all read the
        bytes the identity describes: a file changed since has another key.

        Args:
            source: The file.
            key: Its key as the listing took it: when it is the key the identity was cached
                under, no ``stat`` is taken; otherwise (or None) the key is taken now.

        Returns:
            ``(stat key, identity)``.

        Raises:
            FormatError: The file is too short or its footer is malformed.
            OSError: The file cannot be read.
        """
        known = self._known.get(source.path)
        if key is not None and known is not None and known[0] == key:
            return key, known[1]
        # Its footer must be read: the key is taken again right before, so that the read and
        # the check after it cover the shortest window (a listing's key may be older).
        key = stat_key(source.path)
        if known is not None and known[0] == key:
            return key, known[1]
        identity = source.identity()
        # Cached only when nothing changed while the footer was read.
        if stat_key(source.path) == key and (identity.size, identity.mtime_ns) == key[2:4]:
            self._known[source.path] = (key, identity)
        return key, identity


def read_footer_bytes(handle, size: int, file_format: str, source: str) -> bytes:
    """Return the footer of a Parquet or Arrow IPC file (the metadata plus its length and magic).

    Args:
        handle: A binary file object open for reading.
        size: The file size in bytes.
        file_format: ``"parquet"`` or ``"arrow-ipc"``.
        source: The file name, for error messages.

    Returns:
        The footer bytes, from the start of the footer metadata to the end of the file.

    Raises:
        FormatError: The trailing magic or the footer length is wrong.

    Example:
        >>> with open("a.parquet", "rb") as f:  # doctest: +SKIP
        ...     read_footer_bytes(f, os.fstat(f.fileno()).st_size, "parquet", "a.parquet")
    """
    magic = PARQUET_MAGIC if file_format == "parquet" else ARROW_IPC_MAGIC
    trailer_size = 4 + len(magic)
    if size < trailer_size + len(magic):
        raise FormatError(
            "file too short to hold a footer", field="footer", offset=0, source=source
        )
    # One read of the tail holds most footers whole: on an object store each read is a request.
    tail_length = min(size, TAIL_READ_BYTES)
    handle.seek(size - tail_length)
    tail = handle.read(tail_length)
    if len(tail) != tail_length:
        raise FormatError(
            f"read {len(tail)} of the last {tail_length} bytes: the file is shorter than "
            f"{size} bytes",
            field="footer",
            offset=size - tail_length,
            source=source,
        )
    trailer = tail[-trailer_size:]
    if trailer[4:] != magic:
        raise FormatError(
            f"missing trailing {magic!r} magic",
            field="magic",
            offset=size - len(magic),
            source=source,
        )
    (footer_length,) = struct.unpack("<i", trailer[:4])
    if footer_length < 0 or footer_length > min(size - trailer_size, MAX_FOOTER_BYTES):
        raise FormatError(
            f"footer length {footer_length} does not fit in a {size}-byte file",
            field="footer_length",
            offset=size - trailer_size,
            source=source,
        )
    needed = footer_length + trailer_size
    if needed <= len(tail):
        return tail[len(tail) - needed :]
    handle.seek(size - needed)
    return handle.read(needed)


@dataclass
class OpenedParquet:
    """A Parquet file opened once for indexing: its footer read and parsed a single time.

    Attributes:
        source: The file.
        identity: Its identity, from the footer read.
        metadata: The parsed footer (``pyarrow.parquet.FileMetaData``).
    """

    source: SourceFile
    identity: FileIdentity
    metadata: object
    _handle: object = field(default=None, repr=False)

    @property
    def schema(self):  # noqa: ANN201 - a pyarrow schema
        """The Arrow schema the file reads as."""
        return self.metadata.schema.to_arrow_schema()

    def reader(self):  # noqa: ANN201 - a pyarrow.parquet.ParquetFile
        """A reader over the footer already parsed, one per thread (a reader is not shared);
        on an object store they share the one open file, whose ranged reads are thread-safe
        (an object opened as listed: a file each, its reads taking turns otherwise), and each
        row group's column chunks are fetched together."""
        import pyarrow.parquet as pq

        if self.source.opener is not None:
            where = self.source.open()
        else:
            where = self._handle if self._handle is not None else str(self.source.path)
        return pq.ParquetFile(where, metadata=self.metadata, pre_buffer=self._handle is not None)

    def unchanged(self) -> bool:
        """Whether the file still holds the footer it was opened with: one more read, or none
        for an object opened as listed, whose every read was of the listed version (a read of
        another fails)."""
        if self.source.opener is not None:
            return True
        if self._handle is None:
            return self.source.identity() == self.identity
        footer = read_footer_bytes(
            self._handle, self.identity.size, self.source.format, str(self.source.path)
        )
        return hashlib.sha256(footer).hexdigest() == self.identity.footer_sha256


def open_parquet(source: SourceFile, size: int | None = None, mtime_ns: int | None = None):
    """Open a Parquet file for indexing with as few reads as the format allows: the footer is
    read once (with the tail, one request on an object store) and parsed from those bytes.

    Args:
        source: The file.
        size: Its size when a listing already told it (saves a request on an object store).
        mtime_ns: Its modification time from the same listing.

    Returns:
        An :class:`OpenedParquet`.

    Raises:
        FormatError: The footer is malformed.
        OSError: The file cannot be read.
        StaleSourceError: An object opened as listed (``source.opener``) is another one now;
            its reads later raise it too.

    Example:
        >>> open_parquet(SourceFile(Path("a.parquet"), "parquet")).metadata.num_row_groups
        ... # doctest: +SKIP
        3
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    if source.filesystem is None:
        with open(source.path, "rb") as local:
            stat = os.fstat(local.fileno())
            footer = read_footer_bytes(local, stat.st_size, source.format, str(source.path))
        identity = FileIdentity(stat.st_size, stat.st_mtime_ns, hashlib.sha256(footer).hexdigest())
        handle = None
    else:
        if size is None or mtime_ns is None:
            info = source.filesystem.get_file_info(str(source.path))
            size, mtime_ns = info.size, info.mtime_ns or 0
        handle = source.open()
        footer = read_footer_bytes(handle, size, source.format, str(source.path))
        identity = FileIdentity(size, mtime_ns, hashlib.sha256(footer).hexdigest())
    try:
        # The footer with the leading magic is a file pyarrow reads the metadata of.
        metadata = pq.read_metadata(pa.BufferReader(PARQUET_MAGIC + footer))
    except pa.ArrowException as exc:
        raise FormatError(
            f"cannot parse the footer: {exc}", field="footer", source=str(source.path)
        ) from exc
    return OpenedParquet(source, identity, metadata, handle)


def _dataset_format(path: Path) -> str:
    """Return ``"parquet"`` or ``"arrow-ipc"``: the formats whose units can be granules."""
    file_format = sniff_format(path)
    if file_format in (PARQUET, ARROW_IPC):
        return file_format
    if file_format == ARROW_IPC_STREAM:
        # A stream has no footer: its record batches cannot be found without reading it all.
        raise BloomskipError(
            f"{path}: an Arrow IPC stream, not an Arrow IPC file (no {ARROW_IPC_MAGIC!r} magic); "
            "write it with pyarrow.ipc.new_file or feather version 2"
        )
    with open(path, "rb") as handle:
        head = handle.read(len(ARROW_IPC_MAGIC))
    raise BloomskipError(f"{path}: not a Parquet file nor an Arrow IPC file (magic {head!r})")


#: How many file names a refusal of a mixed dataset shows per format.
_NAMED_FILES = 3


def _one_format(text: str, files: list[SourceFile], root: Path) -> None:
    """Refuse a dataset whose files are not all of one format, naming files of each.

    Parquet files are read by DuckDB's Parquet reader and typed as ClickHouse types Parquet
    columns; Arrow IPC files by their Arrow schema. One dataset holding both would answer with
    types that depend on which files survive pruning, so it is refused.
    """
    formats = sorted({source.format for source in files}, key=lambda name: name != PARQUET)
    if len(formats) < 2:
        return
    described = []
    for file_format in formats:
        names = sorted(
            Path(os.path.relpath(source.path, root)).as_posix()
            for source in files
            if source.format == file_format
        )
        shown = ", ".join(names[:_NAMED_FILES]) + (", ..." if len(names) > _NAMED_FILES else "")
        label = "Parquet" if file_format == PARQUET else "Arrow IPC"
        described.append(f"{len(names)} {label} ({shown})")
    raise BloomskipError(
        f"{text}: holds {' and '.join(described)} files; a dataset is of one format: "
        "name each with its own glob (e.g. 'DIR/*.parquet' and 'DIR/*.arrow')"
    )


def is_glob(text: str) -> bool:
    """Return True when ``text`` holds a glob wildcard (``*``, ``?`` or ``[``)."""
    return any(character in GLOB_CHARACTERS for character in text)


def glob_root(pattern: str) -> Path:
    """Return the deepest directory of a glob pattern that holds no wildcard."""
    parts = Path(pattern).parts
    fixed = []
    for part in parts:
        if is_glob(part):
            break
        fixed.append(part)
    return Path(*fixed) if fixed else Path(".")


def type_conflicts(named_schemas: Iterable[tuple[str, pa.Schema]]) -> dict[str, str]:
    """Columns whose type differs between files, each with a description naming them.

    Types are compared as an index hashes them (their ClickHouse types, LowCardinality
    aside): a dictionary-encoded and a plain string column agree.

    Args:
        named_schemas: ``(file name, its Arrow schema)`` pairs.

    Returns:
        ``{column: "a.parquet: int64, b.parquet: string"}``; empty when the files agree.

    Example:
        >>> import pyarrow as pa
        >>> type_conflicts([("a", pa.schema([("id", pa.int64())])),
        ...                 ("b", pa.schema([("id", pa.string())]))])
        {'id': 'a: int64, b: string'}
    """
    from bloomskip.clickhouse.types import index_type_key

    seen: dict[str, dict[str, str]] = {}
    for name, schema in named_schemas:
        for column in schema:
            seen.setdefault(column.name, {}).setdefault(
                index_type_key(column.type), f"{name}: {column.type}"
            )
    return {name: ", ".join(kinds.values()) for name, kinds in seen.items() if len(kinds) > 1}


def check_ipc_schemas(named_schemas: Iterable[tuple[str, pa.Schema]]) -> None:
    """Refuse Arrow IPC files of more than one schema.

    An IPC file is read by its Arrow schema, as stored: there is no reading of two different
    schemas as one that a query could be checked against.

    Args:
        named_schemas: ``(file name, its Arrow schema)`` pairs, in dataset order.

    Raises:
        BloomskipError: Two schemas differ (the message names the first file and the first
            that differs from it, with their schemas).
    """
    first = None
    for name, schema in named_schemas:
        if first is None:
            first = name, schema
        elif not schema.equals(first[1]):
            raise BloomskipError(
                f"the Arrow IPC files of one dataset must share one schema: {first[0]} has "
                f"{_schema_text(first[1])}, {name} has {_schema_text(schema)}"
            )


def _schema_text(schema: pa.Schema) -> str:
    """A schema on one line: ``(id: int64, s: string)``."""
    return "(" + ", ".join(f"{field.name}: {field.type}" for field in schema) + ")"


def dataset_root(dataset: str | os.PathLike) -> Path:
    """The directory :func:`discover` names a DATASET's files relative to, without listing it:
    a file's folder, a glob's fixed root, or the folder itself (also one that does not exist
    yet, whose listing then fails).

    Example:
        >>> str(dataset_root("/data/logs/2026-*/*.parquet"))
        '/data/logs'
    """
    text = os.fspath(dataset)
    path = Path(text)
    if path.is_file():
        return path.resolve().parent
    if is_glob(text) and not path.exists():
        return glob_root(text).resolve()
    return path.resolve()


def discover(
    dataset: str | os.PathLike, formats: dict | None = None, skip: Path | None = None
) -> tuple[Path, list[SourceFile], list[tuple[int, ...]]]:
    """Resolve a DATASET argument to its files, each ``stat``-ed once.

    Args:
        dataset: A Parquet or Arrow IPC file, a directory of them, or a glob.
        formats: A memo of the files listed before, ``{(path text, size, mtime_ns):
            SourceFile}``, kept by the caller between listings so that only new or rewritten
            files are opened to sniff their format; updated in place. None: sniff every file.
        skip: An absolute folder whose files are not the dataset's (a segmented index kept
            inside it under a name that is not hidden), never opened.

    Returns:
        ``(root, files, keys)``: the directory the dataset lives in (where the default sidecar
        goes; the sidecar names files relative to it), the files sorted by path, and each
        file's :func:`stat_key` as the listing took it (a decision compares it with the
        file's key after reading, to prove it read those bytes).

    Raises:
        BloomskipError: Nothing matches, a directory cannot be listed, a file is neither
            Parquet nor an Arrow IPC file, or the files are not all of one of the two formats.

    Example:
        >>> root, files, keys = discover("logs/*.parquet")  # doctest: +SKIP
        >>> [f.path.name for f in files]  # doctest: +SKIP
        ['part-0.parquet', 'part-1.parquet']
    """
    text = os.fspath(dataset)
    path = Path(text)
    memo = {} if formats is None else formats
    used = set()
    listed: list[tuple[str, os.stat_result]] = []

    if path.is_file():
        resolved = path.resolve()
        key = stat_key(resolved)  # before the format is sniffed: a decision proves its reads
        return resolved.parent, [SourceFile(resolved, _dataset_format(path))], [key]
    if path.is_dir():
        root = path.resolve()
        listed = _walk_files(root, skip)
    elif is_glob(text):
        root = glob_root(text).resolve()
        folders: dict[str, str] = {}
        inside = None if skip is None else os.path.join(skip, "")
        for name in glob.glob(text, recursive=True):
            try:
                stat = os.stat(name)
            except OSError:
                continue  # a dangling link, or a file removed since the glob listed it
            if not S_ISREG(stat.st_mode):
                continue
            resolved = _real_path(name, folders)
            if inside is None or not resolved.startswith(inside):
                listed.append((resolved, stat))
    else:
        raise BloomskipError(f"{text}: no such file, directory or glob match")
    if not listed:
        raise BloomskipError(f"{text}: the dataset holds no Parquet or Arrow IPC file")
    listed.sort(key=lambda item: item[0])
    files = []
    for name, stat in listed:
        key = (name, stat.st_size, stat.st_mtime_ns)
        used.add(key)
        source = memo.get(key)
        if source is None:
            source = memo[key] = SourceFile(Path(name), _dataset_format(Path(name)))
        files.append(source)
    for key in [key for key in memo if key not in used]:
        del memo[key]  # files gone or rewritten: the memo holds only the current listing
    _one_format(text, files, root)
    return root, files, [key_of(stat) for _, stat in listed]


def _real_path(name: str, folders: dict[str, str]) -> str:
    """``os.path.realpath(name)``, each folder resolved once (``folders``: a memo): a glob's
    matches mostly share theirs, and resolving walks every component with a ``stat``."""
    if os.path.islink(name):
        return os.path.realpath(name)
    folder, base = os.path.split(name)
    real = folders.get(folder)
    if real is None:
        real = folders[folder] = os.path.realpath(folder or ".")
    return os.path.join(real, base)


def _walk_files(root: Path, skip: Path | None = None) -> list[tuple[str, os.stat_result]]:
    """Every regular file under ``root`` with its ``stat``, as pyarrow.dataset discovers them
    (``bloomskip._walk``), names starting with ``_`` or ``.`` skipped at any depth, and the
    folder ``skip`` (absolute) not entered.

    Raises:
        BloomskipError: A directory or an entry cannot be read (its files would silently be
            missing).
    """
    from bloomskip._walk import walk

    skipped = Path(os.path.relpath(skip, root)).as_posix() if skip is not None else None
    try:
        return [
            (path, stat)
            for path, _, stat in walk(
                str(root),
                skip=lambda name: name.startswith(("_", ".")),
                descend=lambda key: key != skipped,
            )
            if S_ISREG(stat.st_mode)
        ]
    except OSError as exc:
        raise BloomskipError(f"cannot list {exc.filename or root}: {exc.strerror or exc}") from exc


@dataclass(frozen=True)
class Layout:
    """The storage units of a file: Parquet row groups or Arrow IPC record batches.

    Attributes:
        rows: Rows of each unit, ``int64[units]``.
        column_bytes: For each top-level column, its stored (compressed) bytes in each unit.
        metadata: The parsed Parquet footer (``pyarrow.parquet.FileMetaData``), None for Arrow
            IPC; reading row groups with it skips parsing the footer again.
    """

    rows: object
    column_bytes: dict[str, object]
    metadata: object = None

    def bytes_of(self, columns: list[str]):
        """Return the stored bytes per unit of ``columns`` (all columns when empty)."""
        import numpy as np

        names = columns or list(self.column_bytes)
        total = np.zeros(len(self.rows), dtype=np.int64)
        for name in names:
            if name in self.column_bytes:
                total += self.column_bytes[name]
        return total


def row_group_sizes(layouts: list, files: int) -> dict | None:
    """The row-group sizes of some files, as ``index status`` shows them beside the granule.

    Args:
        layouts: The :class:`Layout` of each file looked at.
        files: Files in the dataset (more than ``len(layouts)`` when they are a sample).

    Returns:
        ``{"files", "of_files", "row_groups", "min_rows", "median_rows", "max_rows"}`` over
        the non-empty row groups (record batches) of ``layouts``; None when they hold none.

    Example:
        >>> import numpy as np
        >>> row_group_sizes([Layout(np.array([8, 8, 2]), {})], 1)["median_rows"]
        8
    """
    import numpy as np

    rows = np.concatenate([np.asarray(layout.rows, np.int64) for layout in layouts] or [[]])
    rows = rows[rows > 0]
    if not len(rows):
        return None
    return {
        "files": len(layouts),
        "of_files": files,
        "row_groups": len(rows),
        "min_rows": int(rows.min()),
        "median_rows": int(np.median(rows)),
        "max_rows": int(rows.max()),
    }


def read_layout(source: SourceFile) -> Layout:
    """Read the row counts and per-column sizes of a file's row groups (or record batches).

    Args:
        source: The file.

    Returns:
        Its :class:`Layout`.

    Raises:
        OSError: The file cannot be read.
        FormatError: The file is not valid Parquet / Arrow IPC.

    Example:
        >>> read_layout(SourceFile(Path("a.parquet"), "parquet")).rows  # doctest: +SKIP
        array([65536, 65536, 1200])
    """
    import pyarrow as pa

    try:
        return _read_layout(source)
    except pa.ArrowException as exc:
        raise FormatError(
            f"cannot read the layout: {exc}", field="footer", source=str(source.path)
        ) from exc


def _read_layout(source: SourceFile) -> Layout:
    import numpy as np

    if source.format == PARQUET:
        import pyarrow.parquet as pq

        # pyarrow.parquet, not a pyarrow.dataset fragment: importing the dataset layer loads
        # pandas (when installed), a quarter of a second of a cold query.
        if source.opener is not None:
            metadata = pq.read_metadata(source.open())
        else:
            metadata = pq.read_metadata(os.fspath(source.path), filesystem=source.filesystem)
        rows = np.array(
            [metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)], np.int64
        )
        column_bytes: dict[str, object] = {}
        for g in range(metadata.num_row_groups):
            group = metadata.row_group(g)
            for c in range(group.num_columns):
                chunk = group.column(c)
                name = chunk.path_in_schema.split(".")[0]
                sizes = column_bytes.setdefault(name, np.zeros(len(rows), np.int64))
                sizes[g] += chunk.total_compressed_size
        return Layout(rows, column_bytes, metadata)
    import pyarrow as pa

    # The record batches are the granules, as stored: read through the IPC file reader, since
    # a dataset scan may cut or merge batches.
    with pa.memory_map(str(source.path)) as handle:
        reader = pa.ipc.open_file(handle)
        batches = [reader.get_batch(b) for b in range(reader.num_record_batches)]
        rows = np.array([batch.num_rows for batch in batches], np.int64)
        column_bytes = {
            name: np.array([batch.column(c).nbytes for batch in batches], np.int64)
            for c, name in enumerate(reader.schema.names)
        }
    return Layout(rows, column_bytes)
