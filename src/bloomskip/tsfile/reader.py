"""Reading .tsfile files: the tail, TsFileMetadata, the metadata index and exact lookups.

Layout (format v4; v3 noted where it differs)::

    "TsFile" | version u8 | chunk groups ... | 0x02 at metaOffset | TimeseriesMetadata and
    index nodes ... | TsFileMetadata | i32 metadataSize | "TsFile"

    TsFileMetadata v4 := uvarint tableCount, {varstr table, MetadataIndexNode root}*,
                         uvarint schemaCount, {varstr table, TableSchema}*, i64 metaOffset,
                         BloomFilter, varint propertyCount, {varstr key, varstr value}*
    TsFileMetadata v3 := MetadataIndexNode root (device keys are plain strings), i64 metaOffset,
                         BloomFilter (bit_count and k always present)

The reader seeks to the tail, reads TsFileMetadata, and reads index nodes only along the path of a
lookup, so that a lookup in a multi-gigabyte file touches a few kilobytes. Every length and offset
read from the file is checked against the bytes that back it before it is used; a violation is a
:class:`~bloomskip.errors.FormatError` naming the field and the offset.

Example:
    >>> with TsFileReader("data.tsfile") as reader:  # doctest: +SKIP
    ...     reader.lookup("root.sg.d1.s1")
    LookupResult(path='root.sg.d1.s1', bloom='maybe', present=True)
"""

from __future__ import annotations

import bisect
import itertools
import operator
import os
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Literal

from bloomskip import _native
from bloomskip.errors import FormatError
from bloomskip.tsfile.codec import ByteCursor, TruncatedError
from bloomskip.tsfile.filter import BloomFilter, PathProbe
from bloomskip.tsfile.hash import HashVariant
from bloomskip.tsfile.paths import (
    DEFAULT_CHARSET,
    NULL_SEGMENT_TEXT,
    DeviceSegments,
    device_path,
    null_tag_forms,
    series_path,
    split_tree_device,
)

MAGIC = b"TsFile"
OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0)
_I32 = struct.Struct(">i")
HEAD_SIZE = len(MAGIC) + 1
#: i32 metadataSize + magic.
TAIL_SIZE = 4 + len(MAGIC)
SUPPORTED_VERSIONS = (3, 4)
#: How much of the end of a file the first read fetches; TsFileMetadata usually fits.
DEFAULT_TAIL_READ = 16 * 1024
#: First read size of an index node (a node of 256 entries is a few kilobytes).
NODE_READ_SIZE = 4096
#: Index nodes nest a few levels deep; anything deeper is a corrupt (cyclic) index.
MAX_INDEX_DEPTH = 64
#: Beyond this many ways of splitting a path string into (device, measurement), a lookup lists
#: the series instead of walking the index once per interpretation.
MAX_PATH_INTERPRETATIONS = 256
#: Column category of a TAG column in a table schema.
TAG_CATEGORY = 0

#: Bytes of the type-specific part of Statistics, by TSDataType code; None: variable length.
_STATISTICS_SIZES: dict[int, int | None] = {
    0: 10,  # BOOLEAN: first, last (1 byte each), sum (i64)
    1: 24,  # INT32: min, max, first, last (i32), sum (i64)
    2: 40,  # INT64: min, max, first, last (i64), sum (double)
    3: 24,  # FLOAT: min, max, first, last (f32), sum (double)
    4: 40,  # DOUBLE
    5: None,  # TEXT: first, last (i32-length strings)
    6: 0,  # VECTOR (aligned time column): time statistics only
    8: 40,  # TIMESTAMP, as INT64
    9: 24,  # DATE, as INT32
    10: 0,  # BLOB
    11: None,  # STRING: min, max, first, last (i32-length strings)
}
_VARIABLE_STATISTICS_STRINGS = {5: 2, 11: 4}


class NodeType(IntEnum):
    """MetadataIndexNode types."""

    INTERNAL_DEVICE = 0
    LEAF_DEVICE = 1
    INTERNAL_MEASUREMENT = 2
    LEAF_MEASUREMENT = 3


_NODE_TYPES = tuple(NodeType)


@dataclass(frozen=True)
class IndexNode:
    """A MetadataIndexNode: keys with child offsets, the end of the last child, and a type.

    Child ``i`` spans ``[offsets[i], offsets[i + 1])``, the last one ``[offsets[-1], end_offset)``.
    Device-level keys are segment tuples, measurement-level keys are names.
    """

    keys: tuple[DeviceSegments, ...] | tuple[str, ...]
    offsets: tuple[int, ...]
    end_offset: int
    node_type: NodeType
    position: int

    def child_span(self, index: int) -> tuple[int, int]:
        """Return the ``[start, end)`` file span of child ``index``."""
        end = self.offsets[index + 1] if index + 1 < len(self.offsets) else self.end_offset
        return self.offsets[index], end


@dataclass(frozen=True)
class ColumnSchema:
    """One column of a table schema stored in TsFileMetadata."""

    name: str
    data_type: int
    encoding: int
    compressor: int
    category: int
    properties: dict[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class TableSchema:
    """A table-model schema stored in TsFileMetadata."""

    name: str
    columns: tuple[ColumnSchema, ...]

    @property
    def tag_count(self) -> int:
        """Number of TAG columns (the device ID holds one segment per tag after the table)."""
        return sum(1 for column in self.columns if column.category == TAG_CATEGORY)


@dataclass(frozen=True)
class TsFileMetadata:
    """The parsed TsFileMetadata and where its parts sit in the file.

    ``start`` and ``end`` delimit TsFileMetadata; ``filter_start`` and ``filter_end`` delimit the
    serialized Bloom filter inside it. ``table_roots`` builds each root node on first access
    (testing the filter does not need them); the C scan has checked every root at open.
    """

    version: int
    start: int
    end: int
    table_roots: Mapping[str, IndexNode]
    table_schemas: dict[str, TableSchema]
    meta_offset: int
    bloom_filter: BloomFilter | None
    filter_start: int
    filter_end: int
    properties: dict[str, str | None]


@dataclass(frozen=True)
class Series:
    """One indexed series: its DeviceID segments, measurement and TSDataType code."""

    device: DeviceSegments
    measurement: str
    data_type: int

    @property
    def path(self) -> str:
        """The filter input text of this series."""
        return f"{device_path(self.device)}.{self.measurement}"


@dataclass(frozen=True)
class LookupResult:
    """Answer to an exact lookup: the filter's verdict and whether the index holds the series."""

    path: str
    bloom: Literal["absent", "maybe"]
    present: bool


class _LazyRoots(Mapping[str, IndexNode]):
    """The table map of TsFileMetadata: table name -> root node, each parsed on first access."""

    def __init__(self, positions: dict[str, int], parse: Callable[[int], IndexNode]) -> None:
        self._positions = positions
        self._parse = parse
        self._nodes: dict[str, IndexNode] = {}

    def __getitem__(self, name: str) -> IndexNode:
        node = self._nodes.get(name)
        if node is None:
            node = self._parse(self._positions[name])
            self._nodes[name] = node
        return node

    def __contains__(self, name: object) -> bool:
        return name in self._positions

    def __iter__(self) -> Iterator[str]:
        return iter(self._positions)

    def __len__(self) -> int:
        return len(self._positions)


def check_envelope(head: bytes, tail: bytes, size: int, source: str) -> tuple[int, int, int]:
    """Check the magic at both ends, the version and the metadata size of a TsFile.

    Args:
        head: The first :data:`HEAD_SIZE` bytes of the file (or more).
        tail: The last bytes of the file, at least :data:`TAIL_SIZE` of them.
        size: The file size (at least ``HEAD_SIZE + TAIL_SIZE``).
        source: File name for errors.

    Returns:
        ``(version, metadata_start, metadata_end)``: TsFileMetadata is ``[start, end)``.

    Raises:
        FormatError: A magic, the version or the metadata size is wrong.

    Example:
        >>> check_envelope(b"TsFile\\x04", b"TsFile\\x04\\x00\\x00\\x00\\x00TsFile", 17, "x")
        (4, 7, 7)
    """
    if head[: len(MAGIC)] != MAGIC:
        raise FormatError(
            f"head magic is {head[: len(MAGIC)]!r}, not {MAGIC!r}",
            field="magic",
            offset=0,
            source=source,
        )
    version = head[len(MAGIC)]
    if version not in SUPPORTED_VERSIONS:
        raise FormatError(
            f"unsupported format version {version}",
            field="version",
            offset=len(MAGIC),
            source=source,
        )
    if tail[-len(MAGIC) :] != MAGIC:
        raise FormatError(
            f"tail magic is {tail[-len(MAGIC) :]!r}, not {MAGIC!r}",
            field="tail magic",
            offset=size - len(MAGIC),
            source=source,
        )
    metadata_end = size - TAIL_SIZE
    metadata_size = _I32.unpack_from(tail, len(tail) - TAIL_SIZE)[0]
    metadata_start = metadata_end - metadata_size
    if metadata_size < 0 or metadata_start < HEAD_SIZE:
        raise FormatError(
            f"metadata_size {metadata_size} does not fit between the head and the tail",
            field="metadata_size",
            offset=metadata_end,
            source=source,
        )
    return version, metadata_start, metadata_end


class _TooManyInterpretations(Exception):
    """A path string splits into too many (device, measurement) candidates to try one by one."""


class TsFileReader:
    """Reads the metadata of one TsFile and answers exact series lookups.

    Args:
        file: Path of the .tsfile.
        variant: Hash variant(s) the filter is tested with. ``both`` (default) answers "absent"
            only when every variant rules the path out, since a file does not record which one
            its writer used.
        charset: Charset of the writer's path bytes.
        tail_read_size: Bytes read from the end of the file at open.

    Raises:
        FormatError: The file is not a well-formed TsFile (v3 or v4).
        OSError: The file cannot be opened or read.

    Example:
        >>> with TsFileReader("data.tsfile") as reader:  # doctest: +SKIP
        ...     [series.path for series in reader.series()][:2]
        ['root.sg.d1.s1', 'root.sg.d1.s2']
    """

    def __init__(
        self,
        file: str | os.PathLike[str],
        *,
        variant: HashVariant = "both",
        charset: str = DEFAULT_CHARSET,
        tail_read_size: int = DEFAULT_TAIL_READ,
    ) -> None:
        self._start(file, variant, charset, os.open(os.fspath(file), OPEN_FLAGS))
        try:
            self.size = os.fstat(self._fd).st_size
            tail_length = min(self.size, max(tail_read_size, TAIL_SIZE))
            tail = self.read_bytes(self.size - tail_length, tail_length, "tail")
            head = tail if tail_length == self.size else self.read_bytes(0, HEAD_SIZE, "head")
            self.version, self.metadata = self._read_metadata(tail, head)
        except BaseException:
            self.close()
            raise

    @classmethod
    def adopt(
        cls,
        file: str | os.PathLike[str],
        fd: int,
        size: int,
        tail: bytes,
        head: bytes,
        *,
        variant: HashVariant = "both",
        charset: str = DEFAULT_CHARSET,
    ) -> TsFileReader:
        """Take over an open file whose last and first bytes the caller has read already.

        ``find`` reads a file's tail to test the filter; when the filter cannot rule a path out,
        the reader carries on from those bytes instead of opening and reading the file again.

        Args:
            file: Path of the .tsfile (for errors).
            fd: Open descriptor of it; the reader owns it from now on (closed on error too).
            size: The file size.
            tail: The last ``len(tail)`` bytes of the file.
            head: Its first :data:`HEAD_SIZE` bytes (or all of them, when ``tail`` is the file).
            variant: As for the constructor.
            charset: As for the constructor.

        Returns:
            The reader (its ``bytes_read`` counts only what it reads from now on).

        Raises:
            FormatError: The file is not a well-formed TsFile (v3 or v4).
            OSError: The file cannot be read.
        """
        reader = cls.__new__(cls)
        reader._start(file, variant, charset, fd)
        try:
            reader.size = size
            reader.version, reader.metadata = reader._read_metadata(tail, head)
        except BaseException:
            reader.close()
            raise
        return reader

    def _start(
        self, file: str | os.PathLike[str], variant: HashVariant, charset: str, fd: int
    ) -> None:
        self.path = os.fspath(file)
        self.variant: HashVariant = variant
        self.charset = charset
        self.bytes_read = 0
        self._node_cache: dict[tuple[int, int, bool], IndexNode] = {}
        # Position of a node -> the key every key below it must precede (its parent's next key,
        # or the parent's own bound), and the roots whose keys have been checked.
        self._upper_keys: dict[int, DeviceSegments | str] = {}
        self._checked_roots: set[int] = set()
        self._series: list[Series] | None = None
        self._tail, self._tail_start = b"", 1 << 63  # the bytes read at open, see read_bytes
        self._fd = fd

    # ------------------------------------------------------------------ life cycle
    def close(self) -> None:
        """Close the file."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def fileno(self) -> int:
        """The open file descriptor (valid until :meth:`close`)."""
        return self._fd

    def __enter__(self) -> TsFileReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ raw access
    def _error(self, message: str, field_name: str, offset: int) -> FormatError:
        return FormatError(message, field=field_name, offset=offset, source=self.path)

    def _scan_error(self, error: _native.TsFileScanError) -> FormatError:
        """The FormatError of a C scan's error (TruncatedError when the bytes ended in a field)."""
        kind = TruncatedError if error.truncated else FormatError
        return kind(error.message, field=error.field, offset=error.offset, source=self.path)

    def read_bytes(self, offset: int, length: int, field_name: str) -> bytes:
        """Read exactly ``length`` bytes at ``offset`` (from the tail read at open if it has them).

        Raises:
            FormatError: The range is not inside the file.
        """
        if offset < 0 or length < 0 or offset + length > self.size:
            raise self._error(
                f"range [{offset}, {offset + length}) is outside the file of {self.size} bytes",
                field_name,
                offset,
            )
        in_tail = offset - self._tail_start
        if in_tail >= 0:  # the tail runs to the end of the file, so it holds the whole range
            return self._tail[in_tail : in_tail + length]
        data = os.pread(self._fd, length, offset)
        self.bytes_read += len(data)
        if len(data) != length:
            raise self._error(
                f"read {len(data)} of {length} bytes: the file shrank while being read",
                field_name,
                offset,
            )
        return data

    # ------------------------------------------------------------------ TsFileMetadata
    def _read_metadata(self, tail: bytes, head: bytes) -> tuple[int, TsFileMetadata]:
        """Check the envelope and parse TsFileMetadata, given the file's last and first bytes."""
        if self.size < HEAD_SIZE + TAIL_SIZE:
            raise self._error(
                f"file of {self.size} bytes is shorter than the head and tail "
                f"({HEAD_SIZE + TAIL_SIZE} bytes)",
                "file size",
                0,
            )
        tail_start = self.size - len(tail)
        version, metadata_start, metadata_end = check_envelope(head, tail, self.size, self.path)
        # Index nodes of a small file sit in the tail already; read_bytes serves them from it.
        self._tail, self._tail_start = tail, tail_start
        if metadata_start >= tail_start:
            data = tail[metadata_start - tail_start : metadata_end - tail_start]
        else:
            data = self.read_bytes(metadata_start, metadata_end - metadata_start, "TsFileMetadata")
        return version, self._scan_metadata(data, metadata_start, version)

    def _scan_metadata(self, data: bytes, metadata_start: int, version: int) -> TsFileMetadata:
        """Build TsFileMetadata from the C scan, which checks every rule of the format (the
        table roots in full) without Python objects per root or column.

        Raises:
            FormatError: The scan's error, naming the field and the offset.
        """
        schemas: dict[str, tuple[tuple, ...]] = {}
        try:
            scan = _native.tsfile_scan_metadata(
                data, 0, len(data), version, metadata_start, schemas
            )
        except _native.TsFileScanError as error:
            raise self._scan_error(error) from None
        (
            tables, _, _, meta_offset, filter_start, bits_start,
            byte_length, bit_count, hash_count, filter_end, properties,
        ) = scan  # fmt: skip
        table_schemas = {
            name: TableSchema(name, tuple(ColumnSchema(*column) for column in columns))
            for name, columns in schemas.items()
        }
        bloom_filter = None
        if byte_length:
            bloom_filter = BloomFilter.from_stored_bits(
                data[bits_start : bits_start + byte_length],
                bit_count,
                hash_count,
                variant=self.variant,
                charset=self.charset,
            )
        return TsFileMetadata(
            version,
            metadata_start,
            metadata_start + len(data),
            _LazyRoots(dict(tables), self._root_parser(data, metadata_start, meta_offset, version)),
            table_schemas,
            meta_offset,
            bloom_filter,
            metadata_start + filter_start,
            metadata_start + filter_end,
            properties,
        )

    def _root_parser(
        self, data: bytes, metadata_start: int, meta_offset: int, version: int
    ) -> Callable[[int], IndexNode]:
        """Parse the root node at a position of ``data`` (TsFileMetadata, at ``metadata_start``)."""

        def parse(position: int) -> IndexNode:
            root_cursor = ByteCursor(data, metadata_start, self.path)
            root_cursor.pos = position
            return self._parse_node(root_cursor, True, meta_offset, metadata_start, version)

        return parse

    # ------------------------------------------------------------------ index nodes
    def _parse_node(
        self, cursor: ByteCursor, device_level: bool, floor: int, limit: int, version: int
    ) -> IndexNode:
        """Parse a MetadataIndexNode whose children must lie in ``[floor, limit]``.

        Writers serialize children before their parent, so ``limit`` is the parent's own
        position: offsets that point forward are corrupt, and a descent always terminates.

        Raises:
            TruncatedError: The node runs past the bytes of the cursor (a prefix read widens).
            FormatError: The node is corrupt.
        """
        position = cursor.offset
        if not device_level:
            key_kind = _native.TSFILE_KEY_MEASUREMENT
        elif version >= 4:
            key_kind = _native.TSFILE_KEY_DEVICE_V4
        else:
            key_kind = _native.TSFILE_KEY_DEVICE_V3
        try:
            keys, offsets, end_offset, type_code, end = _native.tsfile_index_node(
                cursor.data, cursor.pos, key_kind, floor, limit, cursor.base
            )
        except _native.TsFileScanError as error:
            raise self._scan_error(error) from None
        cursor.pos = end
        return IndexNode(keys, offsets, end_offset, _NODE_TYPES[type_code], position)

    def _child(self, node: IndexNode, index: int, device_level: bool, depth: int) -> IndexNode:
        """Read and parse child ``index`` of ``node`` (a node of the given level)."""
        if depth > MAX_INDEX_DEPTH:
            raise self._error(
                f"index deeper than {MAX_INDEX_DEPTH} levels", "index_node", node.position
            )
        start, end = node.child_span(index)
        cached = self._node_cache.get((start, end, device_level))
        if cached is not None:
            return cached
        # A device entry's span runs up to the next device's measurement root, across all of the
        # next device's TimeseriesMetadata; read a prefix and widen it only if the node is longer.
        length = min(end - start, NODE_READ_SIZE)
        while True:
            cursor = ByteCursor(self.read_bytes(start, length, "index_node"), start, self.path)
            try:
                child = self._parse_node(
                    cursor, device_level, self.metadata.meta_offset, start, self.version
                )
                break
            except TruncatedError:
                if length == end - start:
                    raise
                length = min(end - start, length * 8)
        self._check_key_order(child, device_level)
        self._node_cache[(start, end, device_level)] = child
        if node.node_type in (NodeType.INTERNAL_DEVICE, NodeType.INTERNAL_MEASUREMENT):
            self._check_child_keys(node, index, child, device_level)
        return child

    def _check_key_order(self, node: IndexNode, device_level: bool) -> None:
        """Check that the keys of a node strictly increase, as a lookup's search needs.

        The check is not part of parsing a node: the C scan of TsFileMetadata checks the
        structure of the roots only, and a node is checked when a walk first uses it.
        """
        keys = node.keys
        if _increasing(keys, device_level):
            return
        code_points = _device_orders[1] if device_level else str
        for index in range(1, len(keys)):
            if not code_points(keys[index - 1]) < code_points(keys[index]):  # type: ignore[arg-type]
                raise self._error(
                    f"index key {index} ({_key_text(keys[index])!r}) does not follow key "
                    f"{index - 1} ({_key_text(keys[index - 1])!r}): the keys of a node are not "
                    "strictly increasing",
                    _key_field(device_level),
                    node.position,
                )

    def _root(self, table: str) -> IndexNode:
        """The root node of ``table``, its keys checked once."""
        root = self.metadata.table_roots[table]
        if root.position not in self._checked_roots:
            self._check_key_order(root, True)
            self._checked_roots.add(root.position)
        return root

    def _check_child_keys(
        self, node: IndexNode, index: int, child: IndexNode, device_level: bool
    ) -> None:
        """Check that a child of an internal node holds the keys its entry says it holds.

        The writers key an internal entry by its child's first key (observed on every corpus and
        Java-written file), and a lookup picks the child by the greatest key not above its
        target: a child's keys must start at its entry's key and stay below the next entry's
        key (or the bound of the parent).
        """
        key = node.keys[index]
        if not child.keys or child.keys[0] != key:
            first = _key_text(child.keys[0]) if child.keys else None
            raise self._error(
                f"child node's first key {first!r} is not its entry's key {_key_text(key)!r}",
                _key_field(device_level),
                child.position,
            )
        upper = self._upper_bound(node, index)
        if upper is not None:
            self._upper_keys[child.position] = upper
            precedes = _device_precedes if device_level else _name_precedes
            if not precedes(child.keys[-1], upper):
                raise self._error(
                    f"child node's last key {_key_text(child.keys[-1])!r} does not precede "
                    f"the next key {_key_text(upper)!r} of its parent",
                    _key_field(device_level),
                    child.position,
                )

    def _upper_bound(self, node: IndexNode, index: int) -> DeviceSegments | str | None:
        """The key every key under entry ``index`` of ``node`` must precede (None: no bound)."""
        if index + 1 < len(node.keys):
            return node.keys[index + 1]
        return self._upper_keys.get(node.position)

    def _check_devices(self, node: IndexNode, table: str) -> None:
        """Check that the devices of a leaf device node belong to the table they are listed under.

        A lookup picks the root by a device's first segment, splits a table-model path by the
        table's tag count and a tree-model path as the writers split it; a device that disagrees
        with its table could be listed but never found. A device may hold fewer tags than its
        schema: a Java writer drops trailing null tags (the Java-written test file has such
        devices). The listing runs this check; a lookup needs no such check, as it only meets
        a device that its own path splits into.
        """
        roots, schemas = self.metadata.table_roots, self.metadata.table_schemas
        schema = schemas.get(table)
        for device in node.keys:
            problem = None
            if table and device[0] != table:
                problem = f"is listed under table {table!r}, not under its first segment"
            elif not table and self.version >= 4 and device[0] in roots:
                problem = f"is listed under table '', not under its own table {device[0]!r}"
            elif schemas and schema is None:
                problem = f"is listed under table {table!r}, which has no table schema"
            elif schema is not None and len(device) - 1 > schema.tag_count:
                problem = (
                    f"has {len(device) - 1} tags, more than the {schema.tag_count} of the "
                    f"schema of table {table!r}"
                )
            elif schema is None and device != _tree_form(device, table):
                problem = "is not split into segments as its path text splits"
            if problem is not None:
                raise self._error(
                    f"device {_key_text(device)!r} {problem}", "index_node.device", node.position
                )

    def _timeseries_run(self, node: IndexNode, index: int) -> Iterator[tuple[str, int]]:
        """Yield ``(measurement, data_type)`` of the TimeseriesMetadata run of a leaf entry."""
        start, end = node.child_span(index)
        data = self.read_bytes(start, end - start, "timeseries_metadata")
        cursor = ByteCursor(data, start, self.path)
        # The entry's key is the run's first name, and its names increase up to the next key:
        # a lookup finds a name by the greatest key not above it.
        previous: str | None = None
        last_offset = start
        while cursor.remaining:
            cursor.u8("timeseries_metadata.type")
            name_offset = cursor.offset
            name = cursor.varstr("timeseries_metadata.measurement")
            if name is None:
                raise cursor.error("measurement name is null", "measurement", name_offset)
            if previous is None and name != node.keys[index]:
                raise cursor.error(
                    f"first measurement {name!r} is not its index key {node.keys[index]!r}",
                    "timeseries_metadata.measurement",
                    name_offset,
                )
            if previous is not None and not _name_precedes(previous, name):
                raise cursor.error(
                    f"measurement {name!r} does not follow {previous!r}: the names are not "
                    "strictly increasing",
                    "timeseries_metadata.measurement",
                    name_offset,
                )
            previous, last_offset = name, name_offset
            type_offset = cursor.offset
            data_type = cursor.u8("timeseries_metadata.data_type")
            chunk_metadata_size = cursor.uvarint("timeseries_metadata.chunk_metadata_size")
            _skip_statistics(cursor, data_type, type_offset)
            cursor.skip(chunk_metadata_size, "timeseries_metadata.chunk_metadata")
            yield name, data_type
        upper = self._upper_bound(node, index)
        if upper is not None and previous is not None and not _name_precedes(previous, upper):
            raise cursor.error(
                f"measurement {previous!r} does not precede the next index key {upper!r}",
                "timeseries_metadata.measurement",
                last_offset,
            )

    # ------------------------------------------------------------------ listing
    def series(self) -> list[Series]:
        """Return every indexed series, in index order (walks the whole index once; cached).

        Raises:
            FormatError: The index is corrupt.
        """
        if self._series is None:
            found: list[Series] = []
            for table in self.metadata.table_roots:
                self._collect_devices(self._root(table), table, found, 0)
            self._series = found
        return self._series

    def series_paths(self) -> list[str]:
        """Return the filter input text of every indexed series."""
        return [series.path for series in self.series()]

    def _collect_devices(
        self, node: IndexNode, table: str, found: list[Series], depth: int
    ) -> None:
        if node.node_type == NodeType.LEAF_DEVICE:
            self._check_devices(node, table)
        for index, key in enumerate(node.keys):
            if node.node_type == NodeType.INTERNAL_DEVICE:
                child = self._child(node, index, True, depth + 1)
                self._collect_devices(child, table, found, depth + 1)
            else:
                device: DeviceSegments = key  # type: ignore[assignment]
                measurement_root = self._child(node, index, False, depth + 1)
                self._collect_measurements(measurement_root, device, found, depth + 1)

    def _collect_measurements(
        self, node: IndexNode, device: DeviceSegments, found: list[Series], depth: int
    ) -> None:
        for index in range(len(node.keys)):
            if node.node_type == NodeType.INTERNAL_MEASUREMENT:
                child = self._child(node, index, False, depth + 1)
                self._collect_measurements(child, device, found, depth + 1)
            else:
                for name, data_type in self._timeseries_run(node, index):
                    found.append(Series(device, name, data_type))

    # ------------------------------------------------------------------ lookups
    @property
    def bloom_filter(self) -> BloomFilter | None:
        """The file's filter (queried with the reader's variant), or None if it has none."""
        return self.metadata.bloom_filter

    def filter_verdict(self, path: str | PathProbe) -> Literal["absent", "maybe"]:
        """Return what the filter says about a path: "absent" only if it rules it out.

        Args:
            path: The path text, or a :class:`PathProbe` (which then sets the variants).
        """
        bloom_filter = self.metadata.bloom_filter
        if bloom_filter is None:
            return "maybe"
        if not isinstance(path, PathProbe):
            path = PathProbe(path, variant=self.variant, charset=self.charset)
        return "maybe" if path.might_be_in(bloom_filter) else "absent"

    def lookup(self, path: str | PathProbe) -> LookupResult:
        """Look a series path up: the filter first, the index only if the filter passes.

        A table-model path is also looked up in the other writers' null-tag form (see
        :func:`~bloomskip.tsfile.paths.null_tag_forms`): ``t1.bj.null.s1`` finds the series a
        Java writer stored as ``t1.bj.s1``, and the reverse.

        Args:
            path: The series path text, e.g. ``root.sg.d1.s1`` or ``t1.bj.设备.温度``, or a
                :class:`PathProbe` of one (to look the same path up in many files).

        Returns:
            The filter's verdict and whether the index holds the series.

        Raises:
            FormatError: The part of the index on the lookup's way is corrupt.
        """
        text = str(path.path) if isinstance(path, PathProbe) else path
        if self._filter_rules_out(path, self._other_forms(text)):
            return LookupResult(text, "absent", False)
        return LookupResult(text, "maybe", self.index_contains_path(text))

    def lookup_series(self, device: Sequence[str | None], measurement: str) -> LookupResult:
        """Look up a series given as DeviceID segments and a measurement (in either null-tag
        form, as :meth:`lookup`)."""
        path = series_path(device, measurement)
        devices = self._device_forms(tuple(device))
        others = [series_path(form, measurement) for form in devices[1:]]
        if self._filter_rules_out(path, others):
            return LookupResult(path, "absent", False)
        found = any(self.index_contains(form, measurement) for form in devices)
        return LookupResult(path, "maybe", found)

    def _filter_rules_out(self, path: str | PathProbe, others: list[str] | None) -> bool:
        """True when the filter rules out ``path`` and each of its other forms (None: unknown)."""
        if others is None or self.filter_verdict(path) == "maybe":
            return False
        return all(self.filter_verdict(other) == "absent" for other in others)

    def _device_forms(self, device: DeviceSegments) -> tuple[DeviceSegments, ...]:
        schema = self.metadata.table_schemas.get(device[0]) if device and device[0] else None
        return null_tag_forms(device, schema.tag_count) if schema else (device,)

    def _other_forms(self, path: str) -> list[str] | None:
        """The other null-tag forms of a table-model path text (None: too many to list)."""
        if not self.metadata.table_schemas:
            return []
        try:
            forms = {series_path(device, name) for device, name in self._interpretations(path)}
        except _TooManyInterpretations:
            return None
        forms.discard(path)
        return sorted(forms)

    def index_contains_path(self, path: str) -> bool:
        """Tell whether the index holds a series whose path text is ``path`` (no filter).

        A path text can split into a device and a measurement in several ways (dots inside tags,
        ``null`` for a null tag); each interpretation allowed by the file's tables is looked up,
        a table-model device in both writers' null-tag forms.
        """
        try:
            candidates = list(self._interpretations(path))
        except _TooManyInterpretations:
            return path in self._all_path_forms()
        return any(self.index_contains(device, measurement) for device, measurement in candidates)

    def _all_path_forms(self) -> set[str]:
        """Every series' path text in each of its null-tag forms."""
        return {
            series_path(form, series.measurement)
            for series in self.series()
            for form in self._device_forms(series.device)
        }

    def index_contains(self, device: DeviceSegments, measurement: str) -> bool:
        """Walk the metadata index for one series (no filter).

        Raises:
            FormatError: A node on the way is corrupt.
        """
        if not device:
            return False
        roots = self.metadata.table_roots
        table = device[0] if device[0] in roots else ""
        if table not in roots:
            return False
        return any(
            self._measurement_found(self._child(leaf, index, False, depth), measurement, depth)
            for leaf, index, depth in self._device_entries(self._root(table), device, 0)
        )

    def _device_entries(
        self, node: IndexNode, device: DeviceSegments, depth: int
    ) -> Iterator[tuple[IndexNode, int, int]]:
        keys: Sequence[DeviceSegments] = node.keys  # type: ignore[assignment]
        if node.node_type == NodeType.LEAF_DEVICE:
            for index, key in enumerate(keys):
                if key == device:
                    yield node, index, depth + 1
            return
        for index in _floor_candidates(keys, device, _device_orders):
            child = self._child(node, index, True, depth + 1)
            yield from self._device_entries(child, device, depth + 1)

    def _measurement_found(self, node: IndexNode, measurement: str, depth: int) -> bool:
        keys: Sequence[str] = node.keys  # type: ignore[assignment]
        for index in _floor_candidates(keys, measurement, _string_orders):
            if node.node_type == NodeType.INTERNAL_MEASUREMENT:
                child = self._child(node, index, False, depth + 1)
                if self._measurement_found(child, measurement, depth + 1):
                    return True
            elif any(name == measurement for name, _ in self._timeseries_run(node, index)):
                return True
        return False

    def _interpretations(self, path: str) -> Iterator[tuple[DeviceSegments, str]]:
        """(device, measurement) pairs ``path`` can name in this file; a table-model device in
        each of its null-tag forms (so not all of them join back to ``path``)."""
        count = 0
        for table in self.metadata.table_roots:  # names only: roots are parsed when walked
            if table == "":
                candidates = _tree_splits(path, "", lambda device: (device,))
            elif not path.startswith(table + "."):
                continue
            elif table in self.metadata.table_schemas:
                tags = self.metadata.table_schemas[table].tag_count
                candidates = (
                    (form, measurement)
                    for device, measurement in _table_splits(table, path[len(table) + 1 :], tags)
                    for form in null_tag_forms(device, tags)
                )
            else:
                candidates = _tree_splits(path, table, split_tree_device)
            for candidate in candidates:
                count += 1
                if count > MAX_PATH_INTERPRETATIONS:
                    raise _TooManyInterpretations
                yield candidate


def _skip_statistics(cursor: ByteCursor, data_type: int, type_offset: int) -> None:
    if data_type not in _STATISTICS_SIZES:
        raise cursor.error(
            f"unknown data type {data_type}", "timeseries_metadata.data_type", type_offset
        )
    cursor.uvarint("statistics.count")
    cursor.skip(16, "statistics.time_range")
    size = _STATISTICS_SIZES[data_type]
    if size is None:
        for _ in range(_VARIABLE_STATISTICS_STRINGS[data_type]):
            cursor.skip_i32_bytes("statistics.value")
    else:
        cursor.skip(size, "statistics.values")


# Java orders strings by UTF-16 code units, C++ by bytes (= code points). They disagree only
# around supplementary characters; a lookup descends into the child either order selects.
def _utf16_key(text: str) -> bytes:
    return text.encode("utf-16-be", "surrogatepass")


def _segment_key(segment: str | None, text_key: Callable[[str], object]) -> tuple:
    return (0,) if segment is None else (1, text_key(segment))


_string_orders: tuple[Callable[[str], object], ...] = (_utf16_key, lambda text: text)
_device_orders: tuple[Callable[[DeviceSegments], object], ...] = tuple(
    (lambda device, order=order: tuple(_segment_key(segment, order) for segment in device))
    for order in _string_orders
)


def _increasing(keys: Sequence, device_level: bool) -> bool:
    """Whether index keys strictly increase in one of the writers' orders."""
    try:  # plain comparison is the code-point order (it raises on a null segment)
        if all(map(operator.lt, keys, keys[1:])):
            return True
    except TypeError:
        pass
    for order in reversed(_device_orders) if device_level else (_utf16_key,):
        ordered = [order(key) for key in keys]
        if all(map(operator.lt, ordered, ordered[1:])):
            return True
    return False


def _name_precedes(first: str, second: str) -> bool:
    """Whether ``first`` sorts before ``second`` in either writer's order of strings."""
    return first < second or _utf16_key(first) < _utf16_key(second)


def _device_precedes(first: DeviceSegments, second: DeviceSegments) -> bool:
    """Whether device ``first`` sorts before ``second`` in either writer's order."""
    return any(order(first) < order(second) for order in reversed(_device_orders))


def _tree_form(device: DeviceSegments, table: str) -> DeviceSegments:
    """The segments a lookup splits a tree-model device's path text into (under ``table``)."""
    if None in device:
        return ()  # a tree-model path has no null segment: never equal to the device
    text = device_path(device)
    return split_tree_device(text) if table else (text,)


def _key_text(key: DeviceSegments | str) -> str:
    return key if isinstance(key, str) else device_path(key)


def _key_field(device_level: bool) -> str:
    return "index_node.device" if device_level else "index_node.measurement"


def _floor_candidates(keys: Sequence, target: object, orders: Sequence[Callable]) -> set[int]:
    """Indices of the greatest key <= target under each order (index 0 when target < all)."""
    chosen = set()
    for order in orders:
        ordered = [order(key) for key in keys]
        chosen.add(max(bisect.bisect_right(ordered, order(target)) - 1, 0))
    return chosen if keys else set()


def _tree_splits(
    path: str, table: str, to_segments: Callable[[str], DeviceSegments]
) -> Iterator[tuple[DeviceSegments, str]]:
    """(device, measurement) pairs of a tree-model path whose device belongs to ``table``."""
    position = path.find(".", len(table))
    while position >= 0:
        device = to_segments(path[:position])
        if not table or device[0] == table:
            yield device, path[position + 1 :]
        position = path.find(".", position + 1)


def _table_splits(table: str, rest: str, tag_count: int) -> Iterator[tuple[DeviceSegments, str]]:
    """(device, measurement) pairs of a table-model path text after ``table + "."``.

    Tags may contain dots and the text ``null`` may be a null tag; a Java writer drops trailing
    null tags, so a device may hold fewer tags than the schema.
    """
    parts = rest.split(".")
    for tags_used in range(min(tag_count, len(parts) - 1), -1, -1):
        for cuts in itertools.combinations(range(1, len(parts)), tags_used):
            bounds = (0, *cuts)
            groups = [".".join(parts[a:b]) for a, b in itertools.pairwise((*bounds, len(parts)))]
            tags, measurement = groups[:-1], groups[-1]
            choices = [(tag, None) if tag == NULL_SEGMENT_TEXT else (tag,) for tag in tags]
            for chosen in itertools.product(*choices):
                yield (table, *chosen), measurement
