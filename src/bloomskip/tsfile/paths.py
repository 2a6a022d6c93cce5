"""Series paths: the Bloom-filter input built from a DeviceID and a measurement.

Both TsFile writers add ``join(segments, ".") + "." + measurement`` to the filter, a null
segment written as the text ``null``. Tree-model device strings are split into segments by the
writer's rule (the first segment is the "table name" key of TsFileMetadata); table-model devices
are ``(table_name, tag1, tag2, ...)`` and the aligned time column is a series too, with an empty
measurement (``"t1.bj.设备."``).

Example:
    >>> split_tree_device("root.sg.d1")
    ('root.sg', 'd1')
    >>> series_path(("t1", "gz", None), "s1")
    't1.gz.null.s1'
    >>> table_series_path("T1", ["bj", "设备"], "")
    't1.bj.设备.'
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

#: Tree-model device strings with more nodes keep this many in the first segment.
TREE_TABLE_NAME_NODES = 3
NULL_SEGMENT_TEXT = "null"
DEFAULT_CHARSET = "utf-8"
#: How text the charset cannot encode is hashed: as Java's ``String.getBytes``, a "?" each.
JAVA_ENCODE_ERRORS = "replace"

DeviceSegments = tuple[str | None, ...]
#: Back-quoted names that the C++ reader's path parser unquotes (`select` reads as select).
CPP_UNQUOTED_KEYWORDS = frozenset(
    {"select", "device", "drop_trigger", "and", "or", "not", "null", "contains"}
)
_QUOTES = "`\"'"
_QUOTE = re.compile("[`\"']")
_REFUSED_NODE = re.compile(r"[0-9]|.*%|(?!\*+\Z).*\*", re.DOTALL)


def split_tree_nodes(device: str) -> list[str]:
    """Split a tree-model path on dots that are not inside back-quotes.

    Args:
        device: A dotted tree-model device string such as ``root.sg.`a.b```.

    Returns:
        The nodes, back-quotes kept (the writers keep them, so the joined path is unchanged).

    Example:
        >>> split_tree_nodes("root.sg.`a.b`")
        ['root', 'sg', '`a.b`']
    """
    nodes: list[str | None] = []
    current: list[str] = []
    quoted = False
    for char in device:
        if char == "`":
            quoted = not quoted
        if char == "." and not quoted:
            nodes.append("".join(current))
            current = []
        else:
            current.append(char)
    nodes.append("".join(current))
    return nodes


def split_tree_device(device: str) -> DeviceSegments:
    """Split a tree-model device string into DeviceID segments as the writers do.

    One node stays whole; up to three nodes become ``(all but the last, last)``; four or more
    become ``(first three joined, the rest one by one)``. Joining the segments with dots gives the
    original string back.

    Args:
        device: The device string, e.g. ``root.sg.d1``.

    Returns:
        The segments; the first one is the table-name key in TsFileMetadata.

    Example:
        >>> split_tree_device("root.a.b.c.d")
        ('root.a.b', 'c', 'd')
    """
    return group_tree_nodes(split_tree_nodes(device))


def group_tree_nodes(nodes: Sequence[str]) -> DeviceSegments:
    """Group a tree-model device's nodes into DeviceID segments (see :func:`split_tree_device`).

    Example:
        >>> group_tree_nodes(["root", "sg", "d1"])
        ('root.sg', 'd1')
    """
    if len(nodes) <= 1:
        return tuple(nodes)
    if len(nodes) <= TREE_TABLE_NAME_NODES:
        return (".".join(nodes[:-1]), nodes[-1])
    return (".".join(nodes[:TREE_TABLE_NAME_NODES]), *nodes[TREE_TABLE_NAME_NODES:])


def cpp_tree_query_series(path: str) -> tuple[DeviceSegments, str] | None:
    """Return the series the C++ reader reads when a tree-model query names ``path``.

    PyPI ``tsfile``'s ``query_timeseries(device, [measurement])`` does not take a DeviceID: it
    parses the text ``device.measurement`` into nodes, keeps the last as the measurement and
    groups the others as the writers group a tree-model device (:func:`group_tree_nodes`).
    A stored series is read only if this gives its own DeviceID and measurement back, which
    fails for a device of more than one tag (``t1.bj.d1`` parses as ``("t1.bj", "d1")``), a
    null tag (the text ``null`` is not a null segment), a dot in a name outside quotes, or an
    empty name (the parser drops empty nodes). Back-quotes, double and single quotes keep a
    dot inside a node; a back-quoted keyword of :data:`CPP_UNQUOTED_KEYWORDS` loses its quotes. The
    parser refuses a path with a line break, unbalanced quotes, or an unquoted node that
    starts with a digit, holds ``%``, or holds ``*`` besides other characters: the query then
    raises ``InvalidPathError``. (Observed with PyPI ``tsfile`` 2.5 on every case named here;
    the node rules are those of the C++ source, ``IDeviceID::split_string``.)

    Args:
        path: A series path text, ``device_path(segments) + "." + measurement``.

    Returns:
        ``(device segments, measurement)``, or None when the reader refuses the text.

    Example:
        >>> cpp_tree_query_series("root.sg.`a.b`.s1")
        (('root.sg', '`a.b`'), 's1')
        >>> cpp_tree_query_series("t1.bj.d1.s1")
        (('t1.bj', 'd1'), 's1')
        >>> cpp_tree_query_series("t1.1abc.s1") is None
        True
    """
    if "\n" in path or "\r" in path:
        return None
    nodes: list[str] = []
    current: list[str] = []
    quote = ""
    if _QUOTE.search(path):
        for char in path:
            if char == "." and not quote:
                nodes.append("".join(current))
                current = []
                continue
            if char in _QUOTES and quote in ("", char):
                quote = "" if quote else char
            current.append(char)
        nodes.append("".join(current))
    else:  # the common case, a character loop only where quotes can hide dots
        nodes = path.split(".")
    nodes = [node for node in nodes if node]
    if quote or not nodes or any(map(_cpp_refuses, nodes)):
        return None
    nodes = [_cpp_unquote(node) for node in nodes]
    return group_tree_nodes(nodes[:-1]), nodes[-1]


def _quoted(node: str) -> bool:
    return len(node) >= 2 and node[0] == node[-1] and node[0] in _QUOTES


def _cpp_refuses(node: str) -> bool:
    """Whether the C++ path parser refuses a node: unquoted, and it starts with a digit, holds
    ``%``, or holds ``*`` besides other characters."""
    return _REFUSED_NODE.match(node) is not None and not _quoted(node)


def _cpp_unquote(node: str) -> str:
    keyword = node[1:-1]
    if node[0] == "`" and _quoted(node) and keyword.lower() in CPP_UNQUOTED_KEYWORDS:
        return keyword
    return node


def table_device(table_name: str, tags: Sequence[str | None]) -> DeviceSegments:
    """Return a table-model DeviceID: the lower-cased table name, then the tag values.

    PyPI ``tsfile`` lower-cases table and column names (tag values keep their case); a null tag
    stays a null segment (the C++ writer keeps trailing nulls too).

    Args:
        table_name: The table name.
        tags: Tag values in the schema's tag-column order, ``None`` for null.

    Returns:
        The segments.

    Example:
        >>> table_device("T1", ["BJ", None])
        ('t1', 'BJ', None)
    """
    return (table_name.lower(), *tags)


def null_tag_forms(device: Sequence[str | None], tag_count: int) -> tuple[DeviceSegments, ...]:
    """Return the DeviceIDs one table-model device has in files of the different writers.

    The writers disagree on null tags at the end: Java drops trailing null tags (tags
    ``(bj, null)`` give device ``t1.bj``), the C++ writer (PyPI ``tsfile``) keeps one segment per
    tag column (``t1.bj.null``). A null tag elsewhere is a null segment for both. So a series
    written by one writer is looked up under the other's form too.

    Args:
        device: ``(table, tag, ...)``; ``None`` for a null tag.
        tag_count: Number of TAG columns of the table's schema.

    Returns:
        ``device`` itself, then its Java form (trailing nulls dropped) and its C++ form (padded
        with nulls to ``tag_count`` tags) where those differ; a device with more tags than the
        schema has no other form.

    Example:
        >>> null_tag_forms(("t1", "bj", None), 2)
        (('t1', 'bj', None), ('t1', 'bj'))
        >>> null_tag_forms(("t1", "bj"), 2)
        (('t1', 'bj'), ('t1', 'bj', None))
    """
    given = tuple(device)
    if len(given) > tag_count + 1:
        return (given,)
    java = given
    while len(java) > 1 and java[-1] is None:
        java = java[:-1]
    native = java + (None,) * (tag_count + 1 - len(java))
    return tuple(dict.fromkeys((given, java, native)))


def device_path(segments: Sequence[str | None]) -> str:
    """Join DeviceID segments with dots, a null segment as ``null``.

    Example:
        >>> device_path(("t1", None, "x"))
        't1.null.x'
    """
    return ".".join(NULL_SEGMENT_TEXT if segment is None else segment for segment in segments)


def series_path(segments: Sequence[str | None], measurement: str) -> str:
    """Return the filter input text of one series: ``device_path(segments) + "." + measurement``.

    Args:
        segments: The DeviceID segments.
        measurement: The measurement (column) name; ``""`` for an aligned time column.

    Returns:
        The path text (encode it with the writer's charset before hashing).

    Example:
        >>> series_path(("root.sg", "d1"), "s1")
        'root.sg.d1.s1'
    """
    return f"{device_path(segments)}.{measurement}"


def tree_series_path(device: str, measurement: str) -> str:
    """Return the filter input of a tree-model series (the device string is kept as written).

    Example:
        >>> tree_series_path("root.sg.设备", "温度")
        'root.sg.设备.温度'
    """
    return series_path(split_tree_device(device), measurement)


def table_series_path(table_name: str, tags: Sequence[str | None], column: str) -> str:
    """Return the filter input of a table-model series (column ``""``: the time column).

    Example:
        >>> table_series_path("t1", ["gz", None], "S1")
        't1.gz.null.s1'
    """
    return series_path(table_device(table_name, tags), column.lower())


def encode_paths(paths: Sequence[str] | Any, charset: str = DEFAULT_CHARSET) -> Any:
    """Turn path texts into a batch the hash kernels read.

    UTF-8 is the kernels' own string encoding, so a UTF-8 batch is passed through untouched;
    another charset (Java's platform default, for instance) is encoded here.

    Args:
        paths: Path texts (a sequence of ``str``, or a pyarrow string array for UTF-8).
        charset: The writer's charset.

    Returns:
        A batch for ``bloomskip.hashing`` / ``bloomskip.bits``.

    Raises:
        LookupError: ``charset`` is unknown.

    Example:
        >>> encode_paths(["root.é"], "latin-1")
        [b'root.\\xe9']
    """
    if is_utf8(charset):
        return paths
    if hasattr(paths, "to_pylist"):
        paths = paths.to_pylist()
    return [encode_path(path, charset) for path in paths]


def encode_path(path: str | bytes, charset: str = DEFAULT_CHARSET) -> bytes:
    """Encode one path text with ``charset`` (bytes pass through).

    Example:
        >>> encode_path("root.设备.s1")
        b'root.\\xe8\\xae\\xbe\\xe5\\xa4\\x87.s1'
    """
    # Java's String.getBytes(charset) puts "?" for what the charset cannot encode (a CJK name
    # under ISO-8859-1, a lone surrogate under UTF-8); Python's "replace" does the same.
    return path.encode(charset, JAVA_ENCODE_ERRORS) if isinstance(path, str) else bytes(path)


def is_utf8(charset: str) -> bool:
    """Tell whether ``charset`` names UTF-8 (the kernels' own string encoding)."""
    return charset.lower().replace("_", "-") in ("utf-8", "utf8")
