"""Reading the split-block Bloom filters a Parquet file carries, from its footer and their own
byte ranges only.

Each column chunk's ``ColumnMetaData`` may hold ``bloom_filter_offset`` (field 14) and
``bloom_filter_length`` (field 15, written since parquet-format 2.10; older parquet-mr files have
the offset only). pyarrow parses the footer (and, since pyarrow 16, exposes both fields); the
filters themselves — a Thrift ``BloomFilterHeader`` and the bitset — are read here, their ranges
coalesced (writers put all the filters of a file together), so a file costs its footer and about
one more read, never the column data.

Example:
    >>> import tempfile, pyarrow as pa, pyarrow.parquet as pq
    >>> path = tempfile.mkdtemp() + "/t.parquet"
    >>> pq.write_table(pa.table({"k": [1, 2, 3]}), path, bloom_filter_options={"k": True})
    >>> filters = read_bloom_filters(path)
    >>> list(filters), 2 in filters[0, "k"], 9 in filters[0, "k"]
    ([(0, 'k')], True, False)
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from bloomskip._store import coalesce, is_object_uri, open_store
from bloomskip.errors import FormatError, StorageError
from bloomskip.parquet.filter import MAX_BYTES, SplitBlockBloomFilter, check_num_bytes
from bloomskip.parquet.thrift import parse_bloom_filter_header
from bloomskip.parquet.values import ParquetValueType

__all__ = ["ChunkFilter", "chunk_filters", "open_parquet", "read_bloom_filters"]

#: Filter ranges closer than this are read together (the writers put them side by side).
FILTER_GAP = 64 << 10
#: Read when a chunk gives no length: a header is 15-17 bytes, with room for unknown fields.
HEADER_PROBE = 256
#: The longest header accepted (a longer claimed length is corrupt, not a filter).
MAX_HEADER = 4096


@dataclass(frozen=True)
class ChunkFilter:
    """Where one column chunk's Bloom filter lies, and what its column holds.

    Attributes:
        row_group: The row group's index.
        column: The column's index among the file's leaf columns.
        column_path: The dotted path in the schema (``path_in_schema``).
        value_type: How the column's values are stored and hashed.
        num_values: The chunk's value count (nulls included).
        offset: ``bloom_filter_offset``, or None when the chunk has no filter.
        length: ``bloom_filter_length`` (header and bitset), or None when not written.
    """

    row_group: int
    column: int
    column_path: str
    value_type: ParquetValueType | None
    num_values: int
    offset: int | None
    length: int | None


def open_parquet(path: str | os.PathLike, filesystem: Any = None) -> tuple[Any, str]:
    """Open a Parquet file for random reads.

    Args:
        path: A local path, or an object-store URI (``s3://…``, ``gs://…``, ``abfs://…``).
        filesystem: A pyarrow filesystem to read ``path`` from instead.

    Returns:
        ``(file, name)``: a pyarrow ``RandomAccessFile`` and the name used in messages.

    Raises:
        StorageError: The file cannot be opened.
    """
    name = os.fspath(path)
    try:
        if filesystem is not None:
            return filesystem.open_input_file(name), name
        if is_object_uri(name):
            parent, _, leaf = name.rstrip("/").rpartition("/")
            arrow_fs, root = open_store(parent).arrow_filesystem()
            return arrow_fs.open_input_file(f"{root.rstrip('/')}/{leaf}"), name
        return pa.OSFile(name, "rb"), name
    except (OSError, pa.ArrowException) as exc:
        raise StorageError(f"{name}: cannot open: {_one_line(exc)}") from None


def chunk_filters(metadata: Any) -> list[ChunkFilter]:
    """Every column chunk of a file, with its filter's location (``offset`` None: no filter).

    Args:
        metadata: The file's ``pyarrow.parquet.FileMetaData``.

    Returns:
        One :class:`ChunkFilter` per row group and leaf column, in file order.
    """
    types = _value_types(metadata)
    result = []
    for rg in range(metadata.num_row_groups):
        group = metadata.row_group(rg)
        for column in range(group.num_columns):
            chunk = group.column(column)
            result.append(
                ChunkFilter(
                    rg,
                    column,
                    chunk.path_in_schema,
                    types[column],
                    chunk.num_values,
                    chunk.bloom_filter_offset,
                    chunk.bloom_filter_length,
                )
            )
    return result


def read_bloom_filters(
    path: str | os.PathLike,
    *,
    filesystem: Any = None,
    columns: list[str] | None = None,
) -> dict[tuple[int, str], SplitBlockBloomFilter]:
    """The split-block Bloom filters of a Parquet file, by row group and column path.

    Only the footer and the filters' byte ranges are read.

    Args:
        path: A local path or an object-store URI.
        filesystem: A pyarrow filesystem to read ``path`` from instead.
        columns: Only these column paths (dotted, as ``path_in_schema``); default all.

    Returns:
        ``{(row_group, column_path): filter}`` for each chunk that carries one; each filter's
        ``value_type`` is its column's, so ``value in filter`` hashes as the writer did.

    Raises:
        StorageError: The file cannot be read.
        FormatError: Not Parquet, or a filter's location, header or size is corrupt (the
            message names the file, the field and the offset).

    Example:
        >>> read_bloom_filters(path, columns=["nothing"])  # doctest: +SKIP
        {}
    """
    import pyarrow.parquet as pq

    file, name = open_parquet(path, filesystem)
    with file:
        try:
            metadata = pq.ParquetFile(file).metadata
        except (pa.ArrowInvalid, OSError) as exc:
            raise FormatError(
                f"not a readable Parquet file: {_one_line(exc)}", source=name
            ) from None
        size = file.size()
        wanted = [
            c
            for c in chunk_filters(metadata)
            if c.offset is not None and (columns is None or c.column_path in columns)
        ]
        return read_chunk_filters(file, size, wanted, name)


def read_chunk_filters(
    file: Any, size: int, chunks: list[ChunkFilter], name: str
) -> dict[tuple[int, str], SplitBlockBloomFilter]:
    """Read the filters of ``chunks`` (each with an offset) from an open file of ``size`` bytes.

    Raises:
        FormatError: As :func:`read_bloom_filters`.
    """
    spans = {}
    for chunk in chunks:
        spans[chunk] = _span(chunk, size, name)
    blocks = _read_coalesced(file, list(spans.values()), name)
    result = {}
    unknown_length = []
    for chunk, (start, length) in spans.items():
        data = _slice(blocks, start, length)
        if chunk.length is None:
            unknown_length.append((chunk, data))
            continue
        result[chunk.row_group, chunk.column_path] = SplitBlockBloomFilter.from_bytes(
            data, value_type=chunk.value_type, offset=start, source=name
        )
    if unknown_length:
        # Older writers give no length: the header (read above) says the bitset's size.
        second = {}
        for chunk, head in unknown_length:
            num_bytes, header_length = parse_bloom_filter_header(
                head, offset=chunk.offset, source=name
            )
            check_num_bytes(num_bytes, chunk.offset, name)
            if chunk.offset + header_length + num_bytes > size:
                raise _location_error(chunk, name, "its bitset runs past the end of the file")
            second[chunk] = (chunk.offset, header_length + num_bytes)
        more = _read_coalesced(file, list(second.values()), name)
        for chunk, (start, length) in second.items():
            result[chunk.row_group, chunk.column_path] = SplitBlockBloomFilter.from_bytes(
                _slice(more, start, length), value_type=chunk.value_type, offset=start, source=name
            )
    return dict(sorted(result.items()))


def _span(chunk: ChunkFilter, size: int, name: str) -> tuple[int, int]:
    offset = chunk.offset
    assert offset is not None
    if offset < 4 or offset >= size:
        raise _location_error(chunk, name, f"bloom_filter_offset {offset} is outside the file")
    if chunk.length is None:
        return offset, min(HEADER_PROBE, size - offset)
    if chunk.length <= 0 or chunk.length > MAX_HEADER + MAX_BYTES or offset + chunk.length > size:
        raise _location_error(
            chunk, name, f"bloom_filter_length {chunk.length} at offset {offset} does not fit"
        )
    return offset, chunk.length


def _location_error(chunk: ChunkFilter, name: str, message: str) -> FormatError:
    return FormatError(
        f"row group {chunk.row_group}, column {chunk.column_path}: {message}",
        field="ColumnMetaData.bloom_filter_offset",
        offset=chunk.offset,
        source=name,
    )


def _read_coalesced(file: Any, spans: list[tuple[int, int]], name: str) -> list[tuple[int, bytes]]:
    blocks = []
    for start, length in coalesce(spans, FILTER_GAP):
        try:
            data = file.read_at(length, start)
        except (OSError, pa.ArrowException) as exc:
            raise StorageError(f"{name}: cannot read {length} bytes at {start}: {exc}") from None
        if len(data) != length:
            raise FormatError(
                f"the file ended after {len(data)} of {length} bytes", offset=start, source=name
            )
        blocks.append((start, data))
    return blocks


def _slice(blocks: list[tuple[int, bytes]], start: int, length: int) -> memoryview:
    for block_start, data in blocks:
        if block_start <= start and start + length <= block_start + len(data):
            return memoryview(data)[start - block_start : start - block_start + length]
    raise AssertionError("a span outside the ranges read")  # coalesce covers every span


def _value_types(metadata: Any) -> list[ParquetValueType | None]:
    """Each leaf column's physical type with the Arrow type it reads as (None: no Bloom filter
    can hold it, as BOOLEAN, or its Arrow type is unknown)."""
    schema = metadata.schema
    try:
        leaves = _arrow_leaves(schema.to_arrow_schema())
    except (pa.ArrowException, NotImplementedError):
        leaves = []
    if len(leaves) != len(schema):
        leaves = [None] * len(schema)
    result: list[ParquetValueType | None] = []
    for index, arrow_type in enumerate(leaves):
        column = schema.column(index)
        physical = column.physical_type
        if physical == "BOOLEAN" or arrow_type is None:
            result.append(None)
            continue
        length = column.length if physical == "FIXED_LEN_BYTE_ARRAY" else None
        result.append(ParquetValueType(physical, arrow_type, length))
    return result


def _arrow_leaves(schema: pa.Schema) -> list[pa.DataType | None]:
    """The Arrow type of each leaf, depth first: the order of Parquet's leaf columns."""
    leaves: list[pa.DataType | None] = []

    def walk(t: pa.DataType) -> None:
        if pa.types.is_struct(t):
            for i in range(t.num_fields):
                walk(t.field(i).type)
        elif pa.types.is_map(t):
            walk(t.key_type)
            walk(t.item_type)
        elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            walk(t.value_type)
        elif pa.types.is_dictionary(t):
            leaves.append(t.value_type)
        else:
            leaves.append(t)

    for field in schema:
        walk(field.type)
    return leaves


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
