"""Streaming build of the sidecar index: one granule's index columns in memory at a time.

A granule is a Parquet row group (an Arrow IPC record batch), or a fixed number of rows. Each
granule is handed to the ClickHouse engine (``SkipIndex.build``) as a one-granule part, and the
granule payloads are concatenated: with GRANULARITY 1 that is exactly the ``.idx`` stream
ClickHouse writes for the same granules. Reading (pyarrow, which releases the GIL) overlaps with
building on a small thread pool, with a bounded number of granules in flight.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from bloomskip.dataset.index.sidecar import FileEntry, IndexSpec
from bloomskip.dataset.listing.files import OpenedParquet, SourceFile, open_parquet
from bloomskip.dataset.vocabulary import ROW_GROUP
from bloomskip.errors import BloomskipError, FormatError


@dataclass(frozen=True)
class PreparedIndex:
    """An index definition ready to build: parsed, with its columns and ClickHouse types.

    Attributes:
        spec: What the sidecar stores for it.
        definition: The parsed ``IndexDefinition``.
        columns: The source column each index expression reads.
        arrow_types: The dataset's Arrow type of each of ``columns``: a file without one of
            them is indexed as if it held NULLs of that type (as the dataset's scan reads it).
    """

    spec: IndexSpec
    definition: object
    columns: tuple[str, ...]
    arrow_types: tuple = ()


def parse_granule(text: str | int) -> str | int:
    """Parse a ``--granule`` value: ``"row-group"`` or a positive row count.

    Args:
        text: The value.

    Returns:
        ``"row-group"`` or an ``int``.

    Raises:
        BloomskipError: Anything else.

    Example:
        >>> parse_granule("8192")
        8192
    """
    if text == ROW_GROUP:
        return ROW_GROUP
    try:
        rows = int(text)
    except (TypeError, ValueError):
        rows = 0
    if rows <= 0:
        raise BloomskipError(f"--granule must be 'row-group' or a positive row count, not {text!r}")
    return rows


def prepare_index(
    definition_text: str, schema, column_types=None, conflicts: dict | None = None
) -> PreparedIndex:
    """Parse an index definition and bind it to the dataset's columns.

    Args:
        definition_text: ``"COL TYPE bloom_filter(0.01)"`` or
            ``"INDEX i msg TYPE tokenbf_v1(...)"``.
        schema: The dataset's ``pyarrow.Schema``.
        column_types: ``{column: ClickHouse type}`` to hash the columns as; inferred from the
            Arrow types when omitted.
        conflicts: Columns whose type differs between files, with the files named
            (``Dataset.schema_conflicts``): an index over one of them is refused.

    Returns:
        A :class:`PreparedIndex`.

    Raises:
        BloomskipError: The definition is invalid, reads a missing column or an expression the
            engine cannot evaluate, or has GRANULARITY other than 1.

    Example:
        >>> prepare_index("user_id TYPE bloom_filter(0.01)", schema).columns  # doctest: +SKIP
        ('user_id',)
    """
    from bloomskip.clickhouse.ddl import parse_index_definition
    from bloomskip.clickhouse.types import clickhouse_type_for

    # The parser crashes on text without a TYPE clause (e.g. a bare column name): say what is
    # expected instead of passing it on.
    if not re.search(r"\bTYPE\b", definition_text, re.IGNORECASE):
        raise BloomskipError(
            f"index {definition_text!r}: expected 'EXPR TYPE bloom_filter(...)', "
            "'EXPR TYPE tokenbf_v1(...)', 'EXPR TYPE ngrambf_v1(...)', "
            "'EXPR TYPE sparse_grams(...)' or 'COLUMN TYPE parquet_bloom_filter(...)'"
        )
    try:
        definition = parse_index_definition(definition_text)
    except BloomskipError:
        raise
    except ValueError as exc:
        raise BloomskipError(f"index {definition_text!r}: {exc}") from exc
    if definition.granularity != 1:
        raise BloomskipError(
            f"index {definition_text!r}: GRANULARITY must be 1 (a dataset granule is already a "
            "row group or --granule rows)"
        )
    for expression in definition.index_columns:
        if not expression.supported or expression.column not in schema.names:
            raise BloomskipError(
                f"index {definition_text!r}: {expression.sql!r} is not a column of the dataset "
                f"(or a supported function of one); columns: {', '.join(schema.names)}"
            )
    columns = definition.source_columns
    if definition.type == "parquet_bloom_filter":
        _check_filterable(definition_text, schema.field(columns[0]).type)
    for name in columns:
        if conflicts and name in conflicts:
            raise BloomskipError(
                f"index {definition_text!r}: column {name!r} has different types in different "
                f"files ({conflicts[name]}); an index hashes one type"
            )
    if column_types is None:
        column_types = {}
        for name in columns:
            try:
                column_types[name] = clickhouse_type_for(schema.field(name).type)
            except BloomskipError as exc:
                raise BloomskipError(f"index {definition_text!r}: column {name!r}: {exc}") from exc
    types = tuple((name, column_types[name]) for name in columns)
    # Fails early, with the column named, on a type the index cannot take.
    definition.index_column_types(dict(types))
    spec = IndexSpec(definition.to_sql(), types)
    arrow_types = tuple(schema.field(name).type for name in columns)
    return PreparedIndex(spec, definition, tuple(columns), arrow_types)


def _check_filterable(definition_text: str, arrow_type) -> None:  # noqa: ANN001
    """Refuse a parquet_bloom_filter over a column Parquet stores in several leaves."""
    import pyarrow as pa

    t = arrow_type
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        t = t.value_type
    if pa.types.is_nested(t):
        raise BloomskipError(
            f"index {definition_text!r}: a parquet_bloom_filter column holds values or a list "
            f"of values (one Parquet leaf, one filter per row group), not {arrow_type}"
        )


def resolve_granule(requested: str | int | None, existing: str | int | None, replace: bool):
    """The granule of a build: the one given, else the index's own, else ``"row-group"``.

    Raises:
        BloomskipError: The one given differs from the index's own without ``replace`` (all
            indexes would be rebuilt), or it is not a granule.

    Example:
        >>> resolve_granule(None, 8192, False)
        8192
    """
    if requested is None:
        return existing if existing is not None else ROW_GROUP
    granule = parse_granule(requested)
    if existing is not None and granule != existing and not replace:
        raise BloomskipError(
            f"the index's granule is {existing}; --granule {granule} rebuilds every index of "
            "it: give --replace"
        )
    return granule


@contextmanager
def build_lock(sidecar: Path) -> Iterator[None]:
    """Hold an exclusive lock on the sidecar's folder while a build reads and rewrites it.

    A second build of the same sidecar waits, then starts from what the first wrote; readers
    never wait (the sidecar is replaced atomically). Where the folder cannot be locked (a
    file system without ``flock``), the build runs unlocked.

    Example:
        >>> with build_lock(Path("logs/_bloomskip.index")):  # doctest: +SKIP
        ...     pass
    """
    import fcntl

    try:
        descriptor = os.open(sidecar.parent if str(sidecar.parent) else ".", os.O_RDONLY)
    except OSError:
        yield  # a missing folder: the write reports it
        return
    try:
        with suppress(OSError):  # not supported here: unlocked, as before
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # releases the lock


def merge_indexes(
    existing: Sequence[PreparedIndex], requested: Sequence[PreparedIndex], replace: bool = False
) -> list[PreparedIndex]:
    """The indexes a build with ``requested`` definitions makes of an index holding ``existing``.

    Definitions are matched by index name: a new name is added (after the existing ones), the
    same name with the same definition is kept, and the same name with another definition
    replaces the old one only with ``replace``.

    Args:
        existing: The index's current definitions, in order.
        requested: The definitions given to the build.
        replace: Let a definition replace the existing one of its name.

    Returns:
        The merged definitions, in order.

    Raises:
        BloomskipError: A name given twice with different definitions, or an existing name
            with a new definition without ``replace``.

    Example:
        >>> [item.definition.name for item in merge_indexes(old, new)]  # doctest: +SKIP
        ['user_id', 'msg']
    """
    merged = list(existing)
    position = {item.definition.name: number for number, item in enumerate(merged)}
    given: dict[str, PreparedIndex] = {}
    for item in requested:
        name = item.definition.name
        if name in given and given[name].spec != item.spec:
            raise BloomskipError(
                f"index {name!r} is given twice: {given[name].spec.definition} and "
                f"{item.spec.definition}"
            )
        given[name] = item
        if name not in position:
            position[name] = len(merged)
            merged.append(item)
        elif merged[position[name]].spec != item.spec:
            if not replace:
                raise BloomskipError(
                    f"index {name!r} exists as {merged[position[name]].spec.definition}; "
                    f"give --replace to rebuild it as {item.spec.definition}"
                )
            merged[position[name]] = item
    return merged


def index_name(definition: str) -> str:
    """The name of a stored index, from its definition (``INDEX name …``).

    Example:
        >>> index_name("INDEX k_bf k TYPE bloom_filter GRANULARITY 1")
        'k_bf'
    """
    return definition.split(None, 2)[1]


def index_number(specs: Sequence[IndexSpec], name: str) -> int:
    """The position of the index called ``name``.

    Raises:
        BloomskipError: There is none (the names there are listed).
    """
    for number, spec in enumerate(specs):
        if index_name(spec.definition) == name:
            return number
    names = ", ".join(index_name(spec.definition) for spec in specs) or "none"
    raise BloomskipError(f"no index named {name!r} (indexes: {names})")


def never_used_warnings(prepared: PreparedIndex) -> list[str]:
    """One line per index column no predicate can ever use the index for.

    Args:
        prepared: The index.

    Returns:
        Warnings naming the index and the reason ClickHouse gives for it (empty when some
        predicate can use it).

    Example:
        >>> never_used_warnings(prepare_index("id TYPE bloom_filter", schema))  # doctest: +SKIP
        []
    """
    from bloomskip.clickhouse.condition import index_never_used_reason

    types = prepared.definition.index_column_types(dict(prepared.spec.column_types))
    warnings = []
    for ch_type in dict.fromkeys(types):
        reason = index_never_used_reason(prepared.definition.type, ch_type)
        if reason is not None:
            warnings.append(
                f"index {prepared.spec.definition!r} can never be used by a query: {reason}"
            )
    return warnings


def iter_granules(
    source: SourceFile,
    columns: Sequence[str],
    granule: str | int,
    missing_types: dict | None = None,
    opened: OpenedParquet | None = None,
    groups: range | None = None,
) -> Iterator:
    """Yield a ``pyarrow.Table`` of ``columns`` for each granule of a file, in order.

    Only one row group (or record batch) plus, with fixed-row granules, less than one granule of
    carried-over rows is held at a time.

    Args:
        source: The file.
        columns: Columns to read.
        granule: ``"row-group"`` or rows per granule.
        missing_types: Arrow type of each column a file may lack: such a column is read as
            NULLs (as DuckDB's ``union_by_name`` scan reads it). A lacking column not listed
            here is an error.
        opened: The Parquet file already opened (:func:`open_parquet`).
        groups: Only the granules that start in these row groups of a Parquet file (a part of
            the file built on its own, see :func:`granule_window`); all when None.

    Yields:
        One table per granule (a row group, a record batch, or ``granule`` rows; the last one of
        a file may be shorter).

    Example:
        >>> [t.num_rows for t in iter_granules(source, ["id"], 1000)]  # doctest: +SKIP
        [1000, 1000, 500]
    """
    import pyarrow as pa

    window = None
    if groups is not None:
        opened = opened or open_parquet(source)
        window = granule_window(opened.metadata, granule, groups)
    units = _iter_units(source, list(columns), missing_types, opened, window)
    if granule == ROW_GROUP:
        yield from units
        return
    carry = None
    for unit in units:
        table = unit if carry is None else pa.concat_tables([carry, unit])
        start = 0
        while table.num_rows - start >= granule:
            yield table.slice(start, granule)
            start += granule
        carry = table.slice(start) if start < table.num_rows else None
    if carry is not None and carry.num_rows:
        yield carry


def granule_window(metadata, granule: str | int, groups: range) -> tuple[int, int]:
    """The rows ``[start, end)`` of the granules that start in row groups ``groups``.

    A file built in parts (row-group ranges, see ``lake_build``) must give the granules a
    whole-file build gives: with fixed-row granules, a granule that starts in one part and ends
    in the next belongs to the part it starts in, and that part reads on into the next one.

    Args:
        metadata: The file's ``pyarrow.parquet.FileMetaData``.
        granule: ``"row-group"`` or rows per granule.
        groups: Consecutive row groups.

    Returns:
        The row window; empty when no granule starts in ``groups``.

    Example:
        >>> granule_window(metadata, 1000, range(1, 2))  # doctest: +SKIP
        (1000, 2000)
    """
    starts = [0]
    for number in range(metadata.num_row_groups):
        starts.append(starts[-1] + metadata.row_group(number).num_rows)
    first, end = starts[groups.start], starts[groups.stop]
    if granule == ROW_GROUP:
        return first, end
    begin = -(-first // granule) * granule
    finish = min(-(-end // granule) * granule, starts[-1])
    return begin, max(begin, finish)


def _iter_units(
    source: SourceFile, columns: list[str], missing_types, opened, window=None
) -> Iterator:
    import pyarrow as pa

    if source.format == "parquet":
        load = _RowGroupLoader(opened or open_parquet(source), columns, missing_types)
        start = 0
        for group in range(load.groups):
            rows = load.opened.metadata.row_group(group).num_rows
            begin, start = start, start + rows
            if window is not None and (start <= window[0] or begin >= window[1]):
                continue
            # Read on this one thread: pyarrow's pool decodes the columns in parallel.
            table = load(group, use_threads=True)
            if window is not None:
                low = max(window[0] - begin, 0)
                table = table.slice(low, min(window[1] - begin, rows) - low)
            yield table
        return
    with pa.memory_map(str(source.path)) as handle:
        reader = pa.ipc.open_file(handle)
        for number in range(reader.num_record_batches):
            batch = reader.get_batch(number)
            yield pa.Table.from_batches([batch]).select(columns)


def granule_payloads(table, indexes: Sequence[PreparedIndex]) -> list[bytes]:
    """Build each index over one granule and return its ClickHouse granule bytes.

    A single-column index over a dictionary-encoded column is built from the distinct values the
    granule uses: a ClickHouse granule depends only on the set of distinct values (bloom_filter
    keeps distinct hashes, the text indexes the union of tokens), so each value is hashed once.

    Args:
        table: The granule's rows (at least one).
        indexes: The indexes to build.

    Returns:
        One ``bytes`` per index.

    Example:
        >>> granule_payloads(pa.table({"id": [1, 2]}), [prepared])  # doctest: +SKIP
        [b'\\x02...']
    """
    import pyarrow as pa

    from bloomskip.clickhouse.index import SkipIndex

    payloads = []
    for prepared in indexes:
        part = table.select(list(prepared.columns))
        single = len(prepared.columns) == 1 and len(prepared.definition.index_columns) == 1
        if single and pa.types.is_dictionary(part.schema.field(0).type):
            import pyarrow.compute as pc  # here only: 40-60 ms to import

            encoded = part.column(0).combine_chunks()
            distinct = encoded.dictionary.take(pc.unique(encoded.indices))
            part = pa.table({prepared.columns[0]: distinct})
        index = SkipIndex.build(
            prepared.definition,
            part,
            [part.num_rows],
            column_types=dict(prepared.spec.column_types),
        )
        payloads.append(index.to_bytes())
    return payloads


def build_file(
    source: SourceFile,
    relative_path: str,
    indexes: Sequence[PreparedIndex],
    granule: str | int,
    executor: ThreadPoolExecutor,
    max_in_flight: int,
    on_rows: Callable[[int], None],
    opened: OpenedParquet | None = None,
    groups: range | None = None,
) -> FileEntry:
    """Index one file, or the part of a Parquet file that ``groups`` gives.

    Args:
        source: The file.
        relative_path: Its path relative to the dataset's root directory.
        indexes: The indexes to build.
        granule: ``"row-group"`` or rows per granule.
        executor: Pool the granule builds run on.
        max_in_flight: Granules read but not yet built, at most (bounds memory).
        on_rows: Called with the row count of each finished granule (progress).
        opened: The Parquet file already opened (:func:`open_parquet`), so that its footer is
            not read again; opened here when None.
        groups: Build only the granules that start in these row groups: the entry of a part,
            whose granule rows and payloads, joined in order with the other parts', are the
            whole file's (see :func:`join_parts`).

    Returns:
        The file's sidecar entry. Zero-row granules (empty row groups) get no payload: they are
        never read, so they are always skipped.

    Raises:
        BloomskipError: From the engine, for data its types cannot hash.
    """
    if source.format == "parquet" and opened is None:
        opened = open_parquet(source)
    identity = opened.identity if opened is not None else source.identity()
    harvested = _harvest(source, indexes, granule, opened, groups)
    built = [prepared for prepared in indexes if not _is_parquet_bloom(prepared)]
    if harvested is not None and not built:
        # Only harvested filters: the footer and the filters' byte ranges were all it read.
        return _harvested_entry(source, relative_path, indexes, opened, groups, harvested, on_rows)
    columns = sorted({name for prepared in built for name in prepared.columns})
    granule_rows: list[int] = []
    sections = [_Section() for _ in indexes]
    in_flight: deque = deque()

    def collect(future) -> None:
        rows, payloads = future.result()
        number = len(granule_rows)
        granule_rows.append(rows)
        if rows == 0:
            return  # an empty row group: no payload, never read, always skipped
        payloads = iter(payloads)
        for section, prepared in zip(sections, indexes, strict=True):
            if _is_parquet_bloom(prepared):
                section.add(harvested[_harvest_key(prepared)][number])
            else:
                section.add(next(payloads))
        on_rows(rows)

    types = {
        name: arrow_type
        for prepared in indexes
        for name, arrow_type in zip(prepared.columns, prepared.arrow_types, strict=False)
    }
    if granule == ROW_GROUP and source.format == "parquet":
        # Each row group is read and built on the pool's threads: pyarrow's Parquet decoding
        # and the C granule builders both run without the GIL, so N threads use N cores.
        load = _RowGroupLoader(opened, columns, types)
        numbers = range(load.groups) if groups is None else groups
        units = (partial(_load_and_build, load, group, built) for group in numbers)
    else:
        units = (
            partial(_build_one, table, built)
            for table in iter_granules(source, columns, granule, types, opened, groups)
        )
    for unit in units:
        in_flight.append(executor.submit(unit))
        while len(in_flight) >= max_in_flight:
            collect(in_flight.popleft())
    while in_flight:
        collect(in_flight.popleft())
    if not (opened.unchanged() if opened is not None else source.identity() == identity):
        raise BloomskipError(f"{source.path}: changed while it was being indexed; build again")
    payloads = [section.view() for section in sections]
    digests = [section.digest.digest() for section in sections]
    return FileEntry(relative_path, source.format, identity, granule_rows, payloads, digests)


def _is_parquet_bloom(prepared: PreparedIndex) -> bool:
    return prepared.definition.type == "parquet_bloom_filter"


def _harvest(
    source: SourceFile,
    indexes: Sequence[PreparedIndex],
    granule: str | int,
    opened: OpenedParquet | None,
    groups: range | None,
) -> dict[tuple[str, float], list[bytes]] | None:
    """Each ``parquet_bloom_filter`` index's granule bytes per row group (of ``groups``),
    harvested from the file's filters or computed for chunks without one; None when no index
    is of that type.

    Raises:
        BloomskipError: Such an index with granules other than row groups, or over a file
            that is not Parquet.
    """
    from bloomskip.parquet.granules import encode_granule
    from bloomskip.parquet.harvest import harvest_open

    wanted = [prepared for prepared in indexes if _is_parquet_bloom(prepared)]
    if not wanted:
        return None
    if granule != ROW_GROUP:
        raise BloomskipError(
            f"index {wanted[0].spec.definition}: a parquet_bloom_filter granule is a row group; "
            f"build it with granule 'row-group', not {granule}"
        )
    if source.format != "parquet" or opened is None:
        raise BloomskipError(
            f"{source.path}: a parquet_bloom_filter index reads Parquet filters; this file is "
            f"{source.format}"
        )
    metadata = opened.metadata
    numbers = range(metadata.num_row_groups) if groups is None else groups
    # The file's own reader and names: an Iceberg file's columns are read by field id under
    # the table's names (FieldIdParquet), but its filters are found by the file's names.
    parquet = OpenedParquet.reader(opened)
    held = getattr(opened, "_held", None)
    present = set(opened.schema.names)
    with ExitStack() as stack:
        file = getattr(opened, "_handle", None)
        if file is None:
            import pyarrow as pa

            file = stack.enter_context(pa.OSFile(str(source.path)))
        result: dict[tuple[str, float], list[bytes]] = {}
        for prepared in wanted:
            column, key = prepared.columns[0], _harvest_key(prepared)
            if key in result:
                continue
            if column not in present:
                # The scan reads the column as NULLs here: no row group holds a value.
                result[key] = [_empty_filter(prepared.arrow_types[0])] * len(numbers)
                continue
            leaf = _leaf_path(metadata, held.get(column, column) if held else column, source)
            found = harvest_open(
                parquet,
                file,
                str(source.path),
                [leaf],
                fpr=prepared.definition.false_positive_rate,
                groups=numbers,
            )
            result[key] = [encode_granule(bloom) for bloom in found.filters[leaf]]
    return result


def _harvest_key(prepared: PreparedIndex) -> tuple[str, float]:
    """What a harvested index's granules depend on: its column and the rate of the filters
    computed for chunks without one."""
    return prepared.columns[0], prepared.definition.false_positive_rate


def _leaf_path(metadata, column: str, source: SourceFile) -> str:  # noqa: ANN001
    """The Parquet leaf column that holds ``column``'s values: itself, or the element of a
    list (``tags.list.element``, whatever the writer named the levels).

    Raises:
        BloomskipError: The column is a struct or map (several leaves; no one filter).
    """
    schema = metadata.schema
    leaves = [schema.column(i).path for i in range(len(schema))]
    found = [leaf for leaf in leaves if leaf == column or leaf.startswith(column + ".")]
    if len(found) != 1:
        raise BloomskipError(
            f"{source.path}: column {column!r} has {len(found)} Parquet leaf columns; a "
            "parquet_bloom_filter index needs one (a value or a list of values)"
        )
    return found[0]


def _empty_filter(arrow_type) -> bytes:  # noqa: ANN001 - a pyarrow type
    """The granule of a row group that lacks the column: an empty filter (nothing passes),
    or no filter where Parquet keeps none for the type."""
    import pyarrow as pa

    from bloomskip.errors import UnsupportedTypeError
    from bloomskip.parquet.filter import SplitBlockBloomFilter
    from bloomskip.parquet.granules import encode_granule

    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        arrow_type = arrow_type.value_type  # the filter holds the elements
    try:
        return encode_granule(SplitBlockBloomFilter(32, value_type=arrow_type))
    except UnsupportedTypeError:
        return encode_granule(None)


def _harvested_entry(
    source: SourceFile,
    relative_path: str,
    indexes: Sequence[PreparedIndex],
    opened: OpenedParquet,
    groups: range | None,
    harvested: dict[tuple[str, float], list[bytes]],
    on_rows: Callable[[int], None],
) -> FileEntry:
    """The entry of a file whose indexes are all harvested: its row counts from the footer,
    its payloads the granules of ``harvested``.

    Raises:
        BloomskipError: The file changed while it was being indexed.
    """
    metadata = opened.metadata
    numbers = range(metadata.num_row_groups) if groups is None else groups
    granule_rows = [metadata.row_group(number).num_rows for number in numbers]
    sections = [_Section() for _ in indexes]
    for slot, rows in enumerate(granule_rows):
        if rows == 0:
            continue  # an empty row group: no payload, never read, always skipped
        for section, prepared in zip(sections, indexes, strict=True):
            section.add(harvested[_harvest_key(prepared)][slot])
        on_rows(rows)
    if not opened.unchanged():
        raise BloomskipError(f"{source.path}: changed while it was being indexed; build again")
    payloads = [section.view() for section in sections]
    digests = [section.digest.digest() for section in sections]
    return FileEntry(relative_path, source.format, opened.identity, granule_rows, payloads, digests)


def index_file(
    source: SourceFile,
    name: str,
    indexes: Sequence[PreparedIndex],
    granule: str | int,
    executor: ThreadPoolExecutor,
    max_in_flight: int,
    opened: OpenedParquet | None,
    groups: range | None,
    shown_as: str,
    progress: Callable[[int, int], None] | None = None,
) -> FileEntry:
    """:func:`build_file` for a build task, with what it raises turned into one line naming
    the file.

    Args:
        shown_as: The file as messages name it (its path or URI).
        progress: Called after each granule with its rows and the bytes of the file they
            stand for (see :func:`read_progress`); what it raises (a cancelled build) stops
            the build of the file.

    Raises:
        BloomskipError: ``<file>: cannot index it: ...`` for a file whose columns differ from
            the dataset's, data the engine rejects, or bytes that cannot be read.
    """
    from pyarrow import ArrowException

    from bloomskip._store import one_line

    on_rows = _no_progress if progress is None else read_progress(opened, groups, progress)
    try:
        return build_file(
            source, name, indexes, granule, executor, max_in_flight, on_rows, opened, groups
        )
    except BloomskipError:
        raise
    except (ArrowException, KeyError, ValueError, OSError) as exc:
        raise BloomskipError(f"{shown_as}: cannot index it: {one_line(exc)}") from exc


def _no_progress(_rows: int) -> None:
    """Per-granule progress nobody asked for."""


def read_progress(
    opened: OpenedParquet | None, groups: range | None, progress: Callable[[int, int], None]
) -> Callable[[int], None]:
    """The ``on_rows`` of :func:`build_file` that reports to ``progress`` each granule's rows
    and the bytes of the file they were read from: the compressed bytes of the row groups
    built, shared out by rows, so that a file's granules together report its row groups'
    bytes. An Arrow IPC file (``opened`` None) reports rows only.

    Example:
        >>> on_rows = read_progress(None, None, print)
        >>> on_rows(8192)
        8192 0
    """
    if opened is None:
        return lambda rows: progress(rows, 0)
    metadata = opened.metadata
    numbers = range(metadata.num_row_groups) if groups is None else groups
    sizes = row_group_bytes(metadata)
    total_rows = max(1, sum(metadata.row_group(number).num_rows for number in numbers))
    total_bytes = sum(sizes[number] for number in numbers)
    done_rows = done_bytes = 0

    def on_rows(rows: int) -> None:
        nonlocal done_rows, done_bytes
        # A part's last fixed-row granule may run past its row groups: its bytes are capped.
        done_rows = min(total_rows, done_rows + rows)
        nbytes = total_bytes * done_rows // total_rows - done_bytes
        done_bytes += nbytes
        progress(rows, nbytes)

    return on_rows


def row_group_bytes(metadata) -> list[int]:
    """The compressed bytes of each row group of a Parquet footer (what a plan splits by)."""
    return [
        sum(group.column(column).total_compressed_size for column in range(group.num_columns))
        for group in map(metadata.row_group, range(metadata.num_row_groups))
    ]


class _Section:
    """One index's payload of a file, assembled in granule order as the granules are collected.

    Each granule's bytes are appended to one buffer and added to the section's SHA-256 on the
    thread that collects them (hashlib releases the GIL), while the pool builds the next
    granules: neither a join of every granule nor a hash of the whole section is left for
    after the last one.
    """

    def __init__(self) -> None:
        self.data = bytearray()
        self.digest = hashlib.sha256()

    def add(self, payload: bytes) -> None:
        self.data += payload
        self.digest.update(payload)

    def view(self) -> memoryview:
        """The section's bytes (read-only; no copy)."""
        return memoryview(self.data).toreadonly()


def join_parts(parts: Sequence[FileEntry]) -> FileEntry:
    """The entry of a whole file from the entries of its parts, in row-group order.

    Args:
        parts: :func:`build_file` entries of consecutive row-group ranges covering the file.

    Returns:
        The entry a whole-file build gives: the same granules, the same bytes.

    Raises:
        BloomskipError: The parts saw different files (it was rewritten during the build).

    Example:
        >>> join_parts([first_half, second_half]).granule_rows  # doctest: +SKIP
        [8192, 8192, 8192, 1000]
    """
    first = parts[0]
    if any(part.identity != first.identity for part in parts):
        raise BloomskipError(f"{first.path}: changed while it was being indexed; build again")
    rows = [count for part in parts for count in part.granule_rows]
    payloads = [
        b"".join(part.payloads[number] for part in parts) for number in range(len(first.payloads))
    ]
    return FileEntry(first.path, first.format, first.identity, rows, payloads)


def _build_one(table, indexes: Sequence[PreparedIndex]) -> tuple[int, list[bytes] | None]:
    if table.num_rows == 0:
        return 0, None
    return table.num_rows, granule_payloads(table, indexes)


def _load_and_build(load, group: int, indexes) -> tuple[int, list[bytes] | None]:
    return _build_one(load(group), indexes)


class _RowGroupLoader:
    """Reads one row group of ``columns`` per call, from any thread: each thread has its own
    reader over the footer parsed once (a Parquet reader is not shared between threads)."""

    def __init__(self, opened: OpenedParquet, columns: list[str], missing_types: dict) -> None:
        self.opened = opened
        self.groups = opened.metadata.num_row_groups
        present = set(opened.schema.names)
        absent = [name for name in columns if name not in present]
        if absent and not all(name in (missing_types or {}) for name in absent):
            raise BloomskipError(f"{opened.source.path}: no column {', '.join(map(repr, absent))}")
        self.columns, self.read, self.absent = columns, [c for c in columns if c in present], absent
        self.missing_types = missing_types
        self._local = threading.local()

    def __call__(self, group: int, use_threads: bool = False):
        import pyarrow as pa

        reader = getattr(self._local, "reader", None)
        if reader is None:
            reader = self._local.reader = self.opened.reader()
        # Called on the build's threads, one row group each, pyarrow's own pool would only
        # oversubscribe the cores.
        table = reader.read_row_group(group, columns=self.read, use_threads=use_threads)
        for name in self.absent:
            arrow_type = self.missing_types[name]
            table = table.append_column(
                pa.field(name, arrow_type), pa.nulls(table.num_rows, arrow_type)
            )
        return table.select(self.columns)


def progress_bar(total_bytes: int, description: str, enabled: bool | None = None):
    """Return a tqdm bar on stderr counting the bytes of the files a build reads (the one unit
    from start to end); shown only when stderr is a terminal unless ``enabled`` is given."""
    from tqdm import tqdm

    show = sys.stderr.isatty() if enabled is None else enabled
    return tqdm(
        total=total_bytes,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        desc=description,
        disable=not show,
        file=sys.stderr,
    )


def worker_count() -> int:
    """Threads used for building: one per CPU (granule builds release the GIL in C)."""
    return max(1, os.cpu_count() or 1)


def reuse_entry(old: FileEntry | None, source: SourceFile) -> FileEntry | None:
    """An indexed file's entry, if it still describes ``source``, with its sections read.

    It is reused when the file's format and identity (size, modification time, footer hash)
    are unchanged. Its sections are read and verified now: a corrupt one means indexing the
    file again (None), never reusing bad bits.
    """
    if old is None or old.format != source.format or old.identity != source.identity():
        return None
    try:
        payloads = list(old.payloads)
    except FormatError:
        return None
    return FileEntry(old.path, old.format, old.identity, old.granule_rows, payloads)


def select_indexes(entry: FileEntry, numbers: list[int]) -> FileEntry:
    """``entry`` with the sections of its indexes ``numbers``, in that order."""
    payloads = [entry.payloads[number] for number in numbers]
    return FileEntry(entry.path, entry.format, entry.identity, entry.granule_rows, payloads)
