"""An independent Python parser of TsFileMetadata and MetadataIndexNode: the tests' oracle.

bloomskip parses TsFile metadata once, in C (``_native.tsfile_scan_metadata`` and
``_native.tsfile_index_node``), and turns the scan's error into a FormatError. This module is
the same format read field by field in Python, with the same rules checked in the same order,
so that a differential test can demand, on any bytes, the same values or the same error field,
offset and kind (a truncation or not). It was the reader's own parser before the C scanner
reported its errors itself; it is itself checked against files written by PyPI ``tsfile`` and by
the Java library in the other tests.

The order of the checks (the C scanner's too): the table roots' structure, the table schemas,
meta_offset, then each root's child bounds (children lie in ``[meta_offset, metadata start]``,
in table order), the filter, the properties and the end. A node's child bounds are checked after
its type byte, and a violation is reported at the node's position.
"""

from __future__ import annotations

from bloomskip.errors import FormatError, TruncatedError
from bloomskip.tsfile.codec import ByteCursor
from bloomskip.tsfile.filter import decode_filter
from bloomskip.tsfile.reader import (
    HEAD_SIZE,
    ColumnSchema,
    IndexNode,
    NodeType,
    TableSchema,
    TsFileMetadata,
)

KEY_MEASUREMENT, KEY_DEVICE_V3, KEY_DEVICE_V4 = range(3)


def _count(cursor: ByteCursor, field_name: str, min_item_size: int, zigzag: bool = False) -> int:
    """Read an element count and check that the remaining bytes can hold that many elements."""
    offset = cursor.offset
    count = cursor.varint(field_name) if zigzag else cursor.uvarint(field_name)
    if count < 0:
        raise cursor.error(f"negative count {count}", field_name, offset)
    if count * min_item_size > cursor.remaining:
        raise TruncatedError(
            f"count {count} cannot fit in the {cursor.remaining} bytes that remain",
            field=field_name,
            offset=offset,
            source=cursor.source,
        )
    return count


def _bounds_error(cursor: ByteCursor, node: IndexNode, floor: int, limit: int) -> None:
    """Raise if the child bounds of ``node`` break the rule of increasing within [floor, limit]."""
    bounds = [*node.offsets, node.end_offset]
    for index, value in enumerate(bounds):
        low = bounds[index - 1] if index else floor
        if not low <= value <= limit or (index and value == low):
            raise cursor.error(
                f"child offset {value} is out of order or outside [{floor}, {limit}] "
                "(children precede their parent)",
                "index_node.offset" if index < len(node.offsets) else "index_node.end_offset",
                node.position,
            )


def parse_node(cursor: ByteCursor, kind: int, bounds: tuple[int, int] | None) -> IndexNode:
    """Parse the MetadataIndexNode at the cursor (``kind``: a ``KEY_*`` constant).

    Args:
        cursor: Positioned at the node; left after its type byte.
        kind: Measurement level, v3 device level (1-tuples) or v4 device level (segments).
        bounds: ``(floor, limit)`` the child offsets must lie in, or None not to check them.

    Returns:
        The node.

    Raises:
        FormatError: Naming the first field that breaks a rule (TruncatedError: cut short).
    """
    position = cursor.offset
    key_field = "index_node.measurement" if kind == KEY_MEASUREMENT else "index_node.device"
    keys: list = []
    offsets: list[int] = []
    for _ in range(_count(cursor, "index_node.entry_count", 9)):
        key_offset = cursor.offset
        if kind == KEY_DEVICE_V4:
            segment_count = _count(cursor, "index_node.segment_count", 1)
            if segment_count == 0:
                raise cursor.error("device ID has no segments", key_field, key_offset)
            key: object = tuple(cursor.varstr(key_field) for _ in range(segment_count))
        else:
            name = cursor.varstr(key_field)
            if name is None:
                raise cursor.error("index key is null", key_field, key_offset)
            key = name if kind == KEY_MEASUREMENT else (name,)
        keys.append(key)
        offsets.append(cursor.i64("index_node.offset"))
    end_offset = cursor.i64("index_node.end_offset")
    type_offset = cursor.offset
    type_code = cursor.u8("index_node.type")
    level = "measurement" if kind == KEY_MEASUREMENT else "device"
    if type_code not in ((2, 3) if kind == KEY_MEASUREMENT else (0, 1)):
        raise cursor.error(
            f"node type {type_code} where a {level}-level node is expected",
            "index_node.type",
            type_offset,
        )
    node = IndexNode(tuple(keys), tuple(offsets), end_offset, NodeType(type_code), position)
    if bounds is not None:
        _bounds_error(cursor, node, *bounds)
    return node


def _table_schema(cursor: ByteCursor) -> TableSchema:
    name_offset = cursor.offset
    name = cursor.varstr("table_schema.name")
    if name is None:
        raise cursor.error("table name is null", "table_schema.name", name_offset)
    columns = []
    for _ in range(_count(cursor, "table_schema.column_count", 15)):
        column_offset = cursor.offset
        column_name = cursor.i32str("column.name")
        if column_name is None:
            raise cursor.error("column name is null", "column.name", column_offset)
        data_type = cursor.u8("column.data_type")
        encoding = cursor.u8("column.encoding")
        compressor = cursor.u8("column.compressor")
        property_offset = cursor.offset
        property_count = cursor.i32("column.property_count")
        if not 0 <= property_count <= cursor.remaining // 8:
            raise cursor.error(
                f"property count {property_count} is negative or cannot fit",
                "column.property_count",
                property_offset,
            )
        properties: dict[str, str | None] = {}
        for _ in range(property_count):
            key = cursor.i32str("column.property_key")
            properties[key if key is not None else ""] = cursor.i32str("column.property_value")
        category = cursor.i32("column.category")
        columns.append(
            ColumnSchema(column_name, data_type, encoding, compressor, category, properties)
        )
    return TableSchema(name, tuple(columns))


def parse_metadata(
    data: bytes, start: int, version: int, source: str | None = None
) -> TsFileMetadata:
    """Parse the TsFileMetadata ``data``, which sits at file offset ``start`` (v3 or v4).

    Returns:
        The metadata, every root node parsed (``table_roots`` is a plain dict), the filter read
        with the default variant and charset.

    Raises:
        FormatError: Naming the first field that breaks a rule (TruncatedError: cut short).
    """
    cursor = ByteCursor(data, start, source)
    kind = KEY_DEVICE_V4 if version >= 4 else KEY_DEVICE_V3
    roots: dict[str, IndexNode] = {}
    for _ in range(_count(cursor, "table_count", 3) if version >= 4 else 1):
        name = ""
        if version >= 4:
            name_offset = cursor.offset
            name = cursor.varstr("table_name")  # type: ignore[assignment]
            if name is None:
                raise cursor.error("table name is null", "table_name", name_offset)
        roots[name] = parse_node(cursor, kind, None)
    schemas: dict[str, TableSchema] = {}
    for _ in range(_count(cursor, "table_schema_count", 2) if version >= 4 else 0):
        schema = _table_schema(cursor)
        schemas[schema.name] = schema
    meta_position = cursor.offset
    meta_offset = cursor.i64("meta_offset")
    if not HEAD_SIZE <= meta_offset <= start:
        raise cursor.error(
            f"meta_offset {meta_offset} is not between the head and TsFileMetadata",
            "meta_offset",
            meta_position,
        )
    for root in _every_root(data, start, version, kind, source):
        _bounds_error(cursor, root, meta_offset, start)
    bloom_filter, filter_start, filter_end = None, cursor.offset, cursor.offset
    properties: dict[str, str | None] = {}
    # Java reads the v4 filter and properties only "if the buffer has remaining bytes".
    if version == 3 or cursor.remaining:
        bloom_filter = decode_filter(cursor, version=version)
        filter_end = cursor.offset
    if version >= 4 and cursor.remaining:
        for _ in range(_count(cursor, "property_count", 2, zigzag=True)):
            key = cursor.varstr("property_key")
            properties[key if key is not None else ""] = cursor.varstr("property_value")
    if cursor.remaining:
        after = "properties" if version >= 4 else "Bloom filter"
        raise cursor.error(
            f"{cursor.remaining} unexpected bytes after the {after}", "TsFileMetadata end"
        )
    return TsFileMetadata(
        version, start, start + len(data), roots, schemas, meta_offset, bloom_filter,
        filter_start, filter_end, properties,
    )  # fmt: skip


def _every_root(data: bytes, start: int, version: int, kind: int, source: str | None) -> list:
    """Every root node in table order (duplicate table names included), parsed again."""
    cursor = ByteCursor(data, start, source)
    found = []
    for _ in range(_count(cursor, "table_count", 3) if version >= 4 else 1):
        if version >= 4:
            cursor.varstr("table_name")
        found.append(parse_node(cursor, kind, None))
    return found


def error_of(error: FormatError) -> tuple[str | None, int | None, bool]:
    """What the differential tests compare of an error: field, offset, and a truncation or not."""
    return error.field, error.offset, isinstance(error, TruncatedError)
