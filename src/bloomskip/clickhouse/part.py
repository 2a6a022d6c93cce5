"""A MergeTree data part on disk (Wide or Compact) and its Bloom-filter skip indexes.

The part directory gives the row count (``count.txt``), the rows of every data granule (the data
marks: the rows field of ``.mrk2``/``.mrk4``, or ``index_granularity`` for fixed-granularity
``.mrk`` parts), and each skip index's ``.idx`` stream and marks, standalone or inside the
``skp_idx.packed`` archive of ClickHouse 26.x. The index definitions come from the table's DDL
(``CREATE TABLE`` text or the ``ATTACH TABLE`` ``.sql`` file of the metadata folder).

Reading an index checks everything the bytes claim: every block checksum, that every mark points
at a block of the ``.idx`` stream, that there is one mark per index granule, and that each
granule is exactly as long as its own header says.

API::

    part = Part.open(part_dir, table_sql)   # table_sql: DDL text
    part.part_type, part.rows, part.granule_rows, part.indexes, part.column_types
    stored = part.read_index("i")           # -> StoredIndex
    stored.skip_index                       # a SkipIndex (statistics, select)
    stored.compressed_bytes, stored.uncompressed_bytes, stored.marks_bytes

Example:
    >>> part = Part.open("all_1_1_0", open("t.sql").read())     # doctest: +SKIP
    >>> part.read_index("i_v").skip_index.select("v = 5")         # doctest: +SKIP
    array([3])
"""

from __future__ import annotations

import functools
import os
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from bloomskip.clickhouse import compression
from bloomskip.clickhouse.marks import (
    Marks,
    MarksFormat,
    PackedArchive,
    escape_for_file_name,
    read_marks,
)
from bloomskip.errors import FormatError, PartError

if TYPE_CHECKING:  # the engine modules are imported when an index is read, not at import time
    from bloomskip.clickhouse.ddl import IndexDefinition
    from bloomskip.clickhouse.index import SkipIndex

#: MergeTree's default ``index_granularity``.
DEFAULT_INDEX_GRANULARITY = 8192
PACKED_ARCHIVE = "skp_idx.packed"
#: Marks extensions in the order they are looked for.
_MARKS_EXTENSIONS = (".cmrk2", ".mrk2", ".cmrk4", ".mrk4", ".cmrk", ".mrk", ".cmrk3", ".mrk3")
# Matched on bytes: a corrupt listing must give a FormatError, not a decoding error.
_SUBSTREAMS_LINE = re.compile(rb"^(\d{1,6}) substreams for column ", re.MULTILINE)
_COLUMNS_LINE = re.compile(rb"^(\d{1,6}) columns:", re.MULTILINE)
#: Checking checksums decodes nothing, so no stream bound below the format's applies.
_MAX_STREAM = compression.MAX_STREAM_SIZE
#: A sane ceiling for a count.txt row count (ClickHouse parts are far smaller).
_MAX_ROWS = 1 << 48


@dataclass(frozen=True)
class StoredIndex:
    """One skip index as read from a part.

    Attributes:
        definition: The index definition from the DDL.
        skip_index: The decoded index (a :class:`bloomskip.clickhouse.index.SkipIndex`).
        column_types: The ClickHouse type of each index column.
        compressed_bytes: Size of the ``.idx`` stream on disk.
        uncompressed_bytes: Size of the decompressed ``.idx`` stream.
        marks_bytes: Size of the marks file on disk.
        blocks: Number of compressed blocks in the ``.idx`` stream.
        methods: Names of the compression methods of those blocks.
        idx_source: Where the ``.idx`` stream was read (file, or archive member).
        marks_source: Where the marks were read.
        marks_format: The marks layout.
    """

    definition: IndexDefinition
    skip_index: SkipIndex
    column_types: tuple[str, ...]
    compressed_bytes: int
    uncompressed_bytes: int
    marks_bytes: int
    blocks: int
    methods: tuple[str, ...]
    idx_source: str
    marks_source: str
    marks_format: MarksFormat


#: How many verified indexes :meth:`Part.read_index` keeps (see there).
READ_CACHE_SIZE = 8
_READ_LOCK = threading.Lock()
#: A file last changed longer ago than this when a read of it began cannot change again without
#: its change time moving: timestamps come from a clock that is coarse (a few ms; 1-2 s on some
#: file systems) but not that coarse.
_SETTLED_NS = 2_000_000_000


@dataclass
class _CachedIndex:
    """A verified index, what its bytes were, and the file identity seen when they were read."""

    stored: StoredIndex
    fingerprint: tuple
    identity: tuple[int, ...]
    settled: bool


_READ_CACHE: OrderedDict[tuple, _CachedIndex] = OrderedDict()


def clear_index_cache() -> None:
    """Forget the indexes :meth:`Part.read_index` keeps, so that the next reads verify again.

    Example:
        >>> clear_index_cache()
    """
    with _READ_LOCK:
        _READ_CACHE.clear()


def _file_identity(path: Path) -> tuple[int, ...] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    # The change time too: unlike the modification time, no one can set it back (tar and rsync
    # restore modification times, and a new file may get a deleted one's inode).
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


def _settled(identity: tuple[int, ...] | None, started_ns: int) -> bool:
    """Whether the file of ``identity`` was last changed over :data:`_SETTLED_NS` before a read
    that began at ``started_ns``: then any later change gives it another identity."""
    return identity is not None and started_ns - max(identity[3], identity[4]) > _SETTLED_NS


def table_settings(table_sql: str) -> dict[str, str]:
    """The ``SETTINGS`` of a CREATE/ATTACH TABLE statement, as text.

    Args:
        table_sql: The DDL text.

    Returns:
        ``{setting: value}``; values are unquoted literals or SQL text.

    Raises:
        PartError: the text does not parse as a CREATE/ATTACH TABLE.

    Example:
        >>> table_settings("CREATE TABLE t (a UInt8) ENGINE = MergeTree ORDER BY a "
        ...                "SETTINGS index_granularity = 128")
        {'index_granularity': '128'}
    """
    from sqlglot import exp

    from bloomskip.clickhouse.ddl import IndexDefinitionError, parse_table_statement

    try:
        statement = parse_table_statement(table_sql)
    except IndexDefinitionError as exc:
        raise PartError(f"cannot parse the table DDL: {exc}") from exc
    settings: dict[str, str] = {}
    for prop in statement.find_all(exp.SettingsProperty):
        for assignment in prop.expressions:
            if isinstance(assignment, exp.EQ):
                value = assignment.expression
                text_value = (
                    value.name if isinstance(value, exp.Literal) else value.sql("clickhouse")
                )
                settings[assignment.this.name] = text_value
    return settings


@functools.lru_cache(maxsize=32)
def _table_ddl(table_sql: str) -> tuple[tuple, tuple[IndexDefinition, ...]]:
    """The columns and Bloom-filter index definitions of a table's DDL, as tuples.

    Parsed once per text: parsing is most of the cost of opening a part again (every part of a
    table shares its DDL).
    """
    from bloomskip.clickhouse.ddl import parse_create_table

    columns, definitions = parse_create_table(table_sql)
    return tuple(columns.items()), tuple(definitions)


@functools.lru_cache(maxsize=32)
def _table_settings(table_sql: str) -> tuple:
    return tuple(table_settings(table_sql).items())


class Part:
    """A MergeTree part directory plus its table's DDL.

    Attributes:
        path: The part directory.
        part_type: ``"Wide"`` or ``"Compact"``.
        rows: Rows in the part (``count.txt``).
        granule_rows: int64 array, rows of every data granule (from the data marks).
        data_marks_format: The layout of the data marks.
        column_types: ``{column: ClickHouse type}`` from the DDL.
        indexes: The Bloom-filter skip index definitions of the DDL, by name.
        settings: The table's SETTINGS.
    """

    def __init__(self, path: str | os.PathLike[str], table_sql: str) -> None:
        self.path = Path(path)
        if not self.path.is_dir():
            raise PartError(f"not a part directory: {self.path}")
        columns, definitions = _table_ddl(table_sql)
        self.column_types: dict[str, str] = dict(columns)
        self.indexes = {definition.name: definition for definition in definitions}
        self._table_sql = table_sql
        self.rows = self._read_row_count()
        self._packed: PackedArchive | None = None
        # Compact parts keep every column in data.bin with .mrk3/.mrk4 marks; a Wide part may
        # have a column named "data", but its marks are .mrk/.mrk2.
        self.part_type = "Compact" if self._compact_marks() else "Wide"
        self.data_marks_format, self.granule_rows = self._read_granule_rows()

    @functools.cached_property
    def settings(self) -> dict[str, str]:
        """The table's SETTINGS, parsed when first asked for (only a part with fixed-granularity
        marks needs one, ``index_granularity``)."""
        return dict(_table_settings(self._table_sql))

    @classmethod
    def open(cls, path: str | os.PathLike[str], table_sql: str) -> Part:
        """Open a part directory.

        Args:
            path: The part directory (e.g. ``.../store/abc/abc.../all_1_1_0``).
            table_sql: The table's DDL text.

        Returns:
            The part.

        Raises:
            PartError: missing or unreadable part files.
            FormatError: corrupt data marks or count.txt.
        """
        return cls(path, table_sql)

    # -- part-level files ---------------------------------------------------------------------

    def _read_row_count(self) -> int:
        count_file = self.path / "count.txt"
        if not count_file.exists():
            raise PartError(f"{count_file} is missing: not a MergeTree part directory")
        text = count_file.read_bytes()
        if not re.fullmatch(rb"\d{1,15}", text.strip()):
            raise FormatError(
                f"count.txt does not hold a row count: {text[:40]!r}",
                field="count",
                offset=0,
                source=str(count_file),
            )
        rows = int(text)
        if rows > _MAX_ROWS:
            raise FormatError(
                f"implausible row count {rows}", field="count", offset=0, source=str(count_file)
            )
        return rows

    def _find_marks(self, stem: str) -> Path | None:
        for extension in _MARKS_EXTENSIONS:
            candidate = self.path / f"{stem}{extension}"
            if candidate.is_file():
                return candidate
        return None

    def _compact_marks(self) -> Path | None:
        for extension in (".cmrk4", ".mrk4", ".cmrk3", ".mrk3"):
            candidate = self.path / f"data{extension}"
            if candidate.is_file():
                return candidate
        return None

    def _data_marks_file(self) -> Path:
        compact = self._compact_marks()
        if compact is not None:
            return compact
        # Wide: every column stream has the same marks; any one of them gives the granules.
        for entry in sorted(self.path.iterdir()):
            if entry.name.startswith("skp_idx") or not entry.is_file():
                continue
            if entry.suffix in _MARKS_EXTENSIONS:
                return entry
        raise PartError(f"{self.path}: no column marks file (*.mrk*, *.cmrk*) found")

    def _compact_substreams(self, fmt: MarksFormat) -> int:
        if fmt.kind == ".mrk4":
            listing = self.path / "columns_substreams.txt"
            if not listing.exists():
                raise PartError(f"{listing} is missing: needed to read {fmt.extension} marks")
            counts = _SUBSTREAMS_LINE.findall(listing.read_bytes())
        else:
            listing = self.path / "columns.txt"
            if not listing.exists():
                raise PartError(f"{listing} is missing: needed to read {fmt.extension} marks")
            counts = _COLUMNS_LINE.findall(listing.read_bytes())[:1]
        total = sum(int(count) for count in counts)
        if total < 1:
            raise FormatError(
                "no stream counts found", field="substreams", offset=0, source=str(listing)
            )
        return total

    def _read_granule_rows(self) -> tuple[MarksFormat, np.ndarray]:
        marks_file = self._data_marks_file()
        fmt = MarksFormat.from_name(marks_file.name)
        substreams = self._compact_substreams(fmt) if self.part_type == "Compact" else 1
        # Every granule holds at least one row, and adaptive marks end with one more of 0 rows.
        marks = read_marks(
            marks_file.read_bytes(), fmt, str(marks_file), substreams, max_records=self.rows + 1
        )
        if marks.rows is None:
            granularity = self._index_granularity()
            count = len(marks)
            rows = np.full(count, granularity, dtype=np.int64)
            if count:
                rows[-1] = self.rows - granularity * (count - 1)
            if count == 0 and self.rows or count and not 0 < rows[-1] <= granularity:
                raise FormatError(
                    f"{count} marks of index_granularity {granularity} cannot hold the part's "
                    f"{self.rows} rows",
                    field="marks",
                    offset=0,
                    source=str(marks_file),
                )
        else:
            rows = marks.rows.astype(np.int64)
            # Adaptive granularity ends with a final mark of 0 rows; it is not a granule.
            if len(rows) and rows[-1] == 0:
                rows = rows[:-1]
            # Each granule holds 1..count.txt rows; this also keeps the sum below from overflowing.
            plausible = (rows > 0) & (rows <= max(self.rows, 1))
            if not plausible.all():
                bad = int(np.argmin(plausible))
                raise FormatError(
                    f"data granule {bad} has {int(rows[bad])} rows",
                    field="rows",
                    offset=bad * fmt.record_size(substreams),
                    source=str(marks_file),
                )
            if int(rows.sum()) != self.rows:
                raise FormatError(
                    f"data marks cover {int(rows.sum())} rows, count.txt says {self.rows}",
                    field="rows",
                    offset=0,
                    source=str(marks_file),
                )
        return fmt, rows

    def _index_granularity(self) -> int:
        value = self.settings.get("index_granularity", str(DEFAULT_INDEX_GRANULARITY))
        if not value.isdigit() or int(value) < 1:
            raise PartError(f"index_granularity setting is not a positive integer: {value!r}")
        return int(value)

    @property
    def granule_count(self) -> int:
        """Number of data granules (marks)."""
        return len(self.granule_rows)

    # -- skip indexes ---------------------------------------------------------------------------

    def definition(self, name: str) -> IndexDefinition:
        """The definition of index ``name``.

        Raises:
            PartError: the DDL has no Bloom-filter index of that name.
        """
        if name not in self.indexes:
            known = ", ".join(self.indexes) or "none"
            raise PartError(
                f"no bloom_filter/ngrambf_v1/tokenbf_v1/sparse_grams index {name!r} "
                f"(known: {known})"
            )
        return self.indexes[name]

    def _archive(self) -> PackedArchive | None:
        if self._packed is None:
            archive_file = self.path / PACKED_ARCHIVE
            if archive_file.is_file():
                self._packed = PackedArchive.parse(archive_file.read_bytes(), str(archive_file))
        return self._packed

    def index_files(self, name: str) -> tuple[Path | bytes, str, bytes, str, MarksFormat] | None:
        """Where the ``.idx`` stream of index ``name`` is, and its marks.

        Args:
            name: The index name.

        Returns:
            ``(idx, idx source, marks bytes, marks source, marks format)`` where ``idx`` is the
            path of a standalone ``.idx`` file or the bytes of a ``skp_idx.packed`` member; None
            when the part holds no files for the index (added later and never materialized).

        Raises:
            FormatError: a corrupt ``skp_idx.packed`` header.
            PartError: the ``.idx`` exists without marks.
        """
        stem = f"skp_idx_{escape_for_file_name(name)}"
        idx_file = self.path / f"{stem}.idx"
        if idx_file.is_file():
            marks_file = self._find_marks(stem)
            if marks_file is None:
                raise PartError(f"{idx_file} has no marks file beside it")
            return (
                idx_file,
                str(idx_file),
                marks_file.read_bytes(),
                str(marks_file),
                MarksFormat.from_name(marks_file.name),
            )
        archive = self._archive()
        if archive is None or f"{stem}.idx" not in archive.members:
            return None
        for extension in _MARKS_EXTENSIONS:
            member = stem + extension
            if member in archive.members:
                where = f"{archive.source}:{{}}"
                return (
                    archive.read(f"{stem}.idx"),
                    where.format(f"{stem}.idx"),
                    archive.read(member),
                    where.format(member),
                    MarksFormat.from_name(member),
                )
        raise PartError(f"{archive.source} holds {stem}.idx but no marks for it")

    def read_index(self, name: str) -> StoredIndex | None:
        """Read and check skip index ``name``.

        An index read and verified before in this process (same ``.idx`` or archive file, marks,
        DDL and data granules) is not decoded again, as ClickHouse keeps such indexes in memory
        (its skipping-index cache): the file is read once more and every block's checksum
        compared with those of the bytes decoded then (no decoding). A file that has not changed
        since a read that began over 2 s after its last change (same device, inode, size,
        modification and change times) is not read at all: a later change would show in its
        change time. The last :data:`READ_CACHE_SIZE` indexes are kept.

        Args:
            name: The index name.

        Returns:
            The index, or None when the part holds no files for it.

        Raises:
            PartError: unknown index, or an index column the DDL cannot type.
            FormatError: any inconsistency in the index bytes or marks (naming file and offset).
        """

        definition = self.definition(name)
        # The file the index's bytes come from: its own .idx, or the skp_idx.packed archive.
        origin = self.path / f"skp_idx_{escape_for_file_name(name)}.idx"
        if not origin.is_file():
            origin = self.path / PACKED_ARCHIVE
        # Every byte read below is read after this moment, and after this identity was seen.
        started = time.time_ns()
        before = _file_identity(origin)
        files = self.index_files(name)
        if files is None:
            return None
        try:
            column_types = definition.index_column_types(self.column_types)
        except ValueError as exc:
            raise PartError(str(exc)) from exc
        key = (
            str(origin.resolve()),
            files[2],  # the marks
            definition,
            tuple(sorted(self.column_types.items())),
            self.granule_rows.tobytes(),
        )
        with _READ_LOCK:
            cached = _READ_CACHE.get(key)
            if cached is not None:
                _READ_CACHE.move_to_end(key)
        if cached is not None and before is not None:
            if cached.settled and cached.identity == before:
                return cached.stored
            try:
                same = self._fingerprint(name, files[0], files[1]) == cached.fingerprint
            except FormatError:
                same = False  # the read below says what is wrong
            if same:
                self._keep(key, cached.stored, cached.fingerprint, before, started, origin)
                return cached.stored
        stored, fingerprint = self._read_index(definition, files, column_types)
        self._keep(key, stored, fingerprint, before, started, origin)
        return stored

    def _fingerprint(self, name: str, idx: Path | bytes, idx_source: str) -> tuple:
        """What identifies the bytes of index ``name``: its blocks' checksums, and for an archive
        member the decoded size the archive records (which the read checks too)."""
        if isinstance(idx, Path):
            with idx.open("rb") as handle:
                return (compression.stream_checksums(handle, idx_source, limit=_MAX_STREAM),)
        member = self._archive().members[f"skp_idx_{escape_for_file_name(name)}.idx"]
        checksums = compression.stream_checksums(idx, idx_source, limit=_MAX_STREAM)
        return checksums, member.uncompressed_size

    @staticmethod
    def _keep(
        key: tuple,
        stored: StoredIndex,
        fingerprint: tuple,
        before: tuple[int, ...] | None,
        started: int,
        origin: Path,
    ) -> None:
        """Cache a verified index, read from ``origin`` after ``started`` and after ``origin`` was
        seen as ``before``; settled when it still is and had settled then."""
        if before is None:
            return
        settled = _settled(before, started) and _file_identity(origin) == before
        with _READ_LOCK:
            _READ_CACHE[key] = _CachedIndex(stored, fingerprint, before, settled)
            _READ_CACHE.move_to_end(key)
            while len(_READ_CACHE) > READ_CACHE_SIZE:
                _READ_CACHE.popitem(last=False)

    def _read_index(
        self, definition: IndexDefinition, files: tuple, column_types: tuple[str, ...]
    ) -> tuple[StoredIndex, tuple]:
        from bloomskip.clickhouse.index import SkipIndex

        name = definition.name
        idx, idx_source, marks_bytes, marks_source, marks_format = files
        expected = -(-self.granule_count // definition.granularity)
        marks = read_marks(marks_bytes, marks_format, marks_source, max_records=expected)
        if len(marks) != expected:
            raise FormatError(
                f"{len(marks)} index marks, but {self.granule_count} data granules at "
                f"GRANULARITY {definition.granularity} make {expected} index granules",
                field="marks",
                offset=min(len(marks), expected) * marks_format.record_size(),
                source=marks_source,
            )
        limit = _max_index_bytes(definition, column_types, self.granule_rows)
        if isinstance(idx, Path):
            # Read block by block: the compressed file is never held whole in memory.
            with idx.open("rb") as handle:
                stream = compression.read_compressed_stream_with_blocks(
                    handle, idx_source, limit=limit
                )
        else:
            archive = self._archive()
            member = archive.members[f"skp_idx_{escape_for_file_name(name)}.idx"]
            if member.uncompressed_size:
                limit = min(limit, member.uncompressed_size)
            stream = compression.read_compressed_stream_with_blocks(idx, idx_source, limit=limit)
            # Version 1 archives record the decoded size (0 = not recorded).
            if member.uncompressed_size and member.uncompressed_size != len(stream.data):
                raise FormatError(
                    f"member {member.name} decodes to {len(stream.data)} bytes, the archive "
                    f"header says {member.uncompressed_size}",
                    field="uncompressed_size",
                    offset=member.offset,
                    source=archive.source,
                )
        starts = self._granule_starts(stream, marks, marks_source)
        _check_granule_lengths(definition, stream.data, starts, len(column_types), idx_source)
        skip_index = SkipIndex.from_bytes(
            definition, stream.data, self.granule_rows, self.column_types, source=idx_source
        )
        # A set, not numpy.unique: its first call imports numpy.ma (30 ms of a first explain).
        methods = sorted(
            {
                compression.METHOD_NAMES.get(method, f"0x{method:02x}")
                for method in set(np.asarray(stream.block_methods).tolist())
            }
        )
        stored = StoredIndex(
            definition=definition,
            skip_index=skip_index,
            column_types=column_types,
            compressed_bytes=stream.compressed_bytes,
            uncompressed_bytes=len(stream.data),
            marks_bytes=len(marks_bytes),
            blocks=len(stream.block_offsets),
            methods=tuple(methods),
            idx_source=idx_source,
            marks_source=marks_source,
            marks_format=marks_format,
        )
        if isinstance(idx, Path):
            return stored, (stream.checksums,)
        return stored, (stream.checksums, member.uncompressed_size)

    @staticmethod
    def _granule_starts(
        stream: compression.DecompressedStream, marks: Marks, marks_source: str
    ) -> np.ndarray:
        """Where each index granule starts in the decompressed stream; contiguous and in order."""
        if not len(marks):
            if stream.data:
                raise FormatError(
                    f"no marks, but the index stream holds {len(stream.data)} bytes",
                    field="marks",
                    offset=0,
                    source=marks_source,
                )
            return np.zeros(0, dtype=np.int64)
        record = 16 if marks.rows is None else 24
        starts = stream.resolve_marks(
            marks.block_offset[:, 0], marks.offset_in_block[:, 0], marks_source, record
        )
        if starts[0] != 0:
            raise FormatError(
                f"the first mark points at byte {int(starts[0])} of the index stream, not 0",
                field="marks",
                offset=0,
                source=marks_source,
            )
        steps = np.diff(starts)
        if (steps <= 0).any():
            bad = int(np.argmin(steps > 0)) + 1
            raise FormatError(
                f"mark {bad} does not point after mark {bad - 1}",
                field="marks",
                offset=bad * record,
                source=marks_source,
            )
        return starts


def _max_index_bytes(
    definition: IndexDefinition, column_types: tuple[str, ...], granule_rows: np.ndarray
) -> int:
    """The most bytes index ``definition``'s ``.idx`` stream can decode to in this part.

    A text index granule is ``size_bytes`` per column. A bloom_filter granule is a VarUInt (at
    most 10 bytes) and per column ``bits_per_row`` bits per distinct value; a scalar column has at
    most one distinct value per row of the index granule. An ``Array`` or ``Map`` column has one
    value per element, which the part's row counts do not bound: there only the global stream
    cap (:data:`compression.MAX_STREAM_SIZE`) applies.
    """
    columns = len(column_types)
    granules = -(-len(granule_rows) // definition.granularity)
    if definition.type != "bloom_filter":
        return granules * columns * definition.size_bytes
    if any("Array(" in text or "Map(" in text for text in column_types):
        return compression.MAX_STREAM_SIZE
    if not granules:
        return 0
    starts = np.arange(0, len(granule_rows), definition.granularity)
    rows = np.add.reduceat(granule_rows.astype(np.int64), starts)
    # Python integers: the sum cannot overflow, however large the row counts claim to be.
    filters = (int(rows.sum()) * definition.bits_per_row + 7 * granules) // 8 + granules
    return granules * 10 + columns * filters


def _check_granule_lengths(
    definition: IndexDefinition, data: bytes, starts: np.ndarray, column_count: int, source: str
) -> None:
    """Every granule between two marks must be exactly as long as its own header says."""
    ends = np.append(starts[1:], len(data)).astype(np.int64)
    if definition.type == "bloom_filter":
        # Granule: VarUInt distinct count, then one (bits_per_row * count + 7) // 8 filter per
        # column. Decode the VarUInt at every granule start at once.
        buffer = np.frombuffer(data, dtype=np.uint8)
        positions = starts[:, None] + np.arange(10)[None, :]
        inside = positions < ends[:, None]
        raw = np.where(inside, buffer[np.minimum(positions, len(buffer) - 1)], 0).astype(np.uint64)
        continues = (raw & 0x80) != 0
        # Length = first byte without the continuation bit; none within 10 bytes is corrupt.
        terminated = ~continues & inside
        has_end = terminated.any(axis=1)
        if not has_end.all():
            bad = int(np.argmin(has_end))
            raise FormatError(
                f"granule {bad}: truncated or overlong row count",
                field="total_rows",
                offset=int(starts[bad]),
                source=source,
            )
        lengths = np.argmax(terminated, axis=1) + 1
        used = np.arange(10)[None, :] < lengths[:, None]
        shifts = (7 * np.arange(10)).astype(np.uint64)
        # Only the first 9 groups (63 bits) can be summed safely; a count needing more is corrupt.
        too_big = lengths > 9
        values = ((raw & 0x7F) << shifts[None, :]) * used
        counts = values[:, :9].sum(axis=1, dtype=np.uint64)
        bits_per_row = np.uint64(definition.bits_per_row)
        limit = (np.iinfo(np.uint64).max - 7) // int(bits_per_row)
        too_big |= counts > np.uint64(limit)
        safe = np.where(too_big, 0, counts)
        filter_bytes = (bits_per_row * safe + np.uint64(7)) // np.uint64(8)
        expected = lengths.astype(np.float64) + column_count * filter_bytes.astype(np.float64)
        expected[too_big] = np.inf
    else:
        expected = np.full(len(starts), column_count * definition.size_bytes, dtype=np.float64)
    actual = (ends - starts).astype(np.float64)
    wrong = actual != expected
    if wrong.any():
        bad = int(np.argmax(wrong))
        claim = "an impossible size" if np.isinf(expected[bad]) else f"{int(expected[bad])} bytes"
        raise FormatError(
            f"granule {bad} spans {int(actual[bad])} bytes between its marks, but its filters "
            f"need {claim}",
            field="granule",
            offset=int(starts[bad]),
            source=source,
        )
