"""Streaming build of the sidecar index: one granule's index columns in memory at a time.

A granule is a Parquet row group (an Arrow IPC record batch), or a fixed number of rows. Each
granule is handed to the ClickHouse engine (``SkipIndex.build``) as a one-granule part, and the
granule payloads are concatenated: with GRANULARITY 1 that is exactly the ``.idx`` stream
ClickHouse writes for the same granules. Reading (pyarrow, which releases the GIL) overlaps with
building on a small thread pool, with a bounded number of granules in flight.
"""

from __future__ import annotations

import os
import re
import sys
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from bloomskip.dataset.sidecar import FileEntry, IndexSpec, Sidecar
from bloomskip.dataset.sources import SourceFile, read_layout
from bloomskip.dataset.vocabulary import ROW_GROUP, relative_to
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
            "'EXPR TYPE tokenbf_v1(...)' or 'EXPR TYPE ngrambf_v1(...)'"
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

    Yields:
        One table per granule (a row group, a record batch, or ``granule`` rows; the last one of
        a file may be shorter).

    Example:
        >>> [t.num_rows for t in iter_granules(source, ["id"], 1000)]  # doctest: +SKIP
        [1000, 1000, 500]
    """
    import pyarrow as pa

    units = _iter_units(source, list(columns), missing_types)
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


def _iter_units(source: SourceFile, columns: list[str], missing_types: dict | None) -> Iterator:
    import pyarrow as pa

    if source.format == "parquet":
        import pyarrow.parquet as pq

        parquet = pq.ParquetFile(source.open())
        present = set(parquet.schema_arrow.names)
        absent = [name for name in columns if name not in present]
        if absent and not all(name in (missing_types or {}) for name in absent):
            raise BloomskipError(f"{source.path}: no column {', '.join(map(repr, absent))}")
        read = [name for name in columns if name in present]
        for group in range(parquet.num_row_groups):
            table = parquet.read_row_group(group, columns=read)
            for name in absent:
                table = table.append_column(
                    pa.field(name, missing_types[name]),
                    pa.nulls(table.num_rows, missing_types[name]),
                )
            yield table.select(columns)
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
    import pyarrow.compute as pc

    from bloomskip.clickhouse.index import SkipIndex

    payloads = []
    for prepared in indexes:
        part = table.select(list(prepared.columns))
        single = len(prepared.columns) == 1 and len(prepared.definition.index_columns) == 1
        if single and pa.types.is_dictionary(part.schema.field(0).type):
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
) -> FileEntry:
    """Index one file.

    Args:
        source: The file.
        relative_path: Its path relative to the dataset's root directory.
        indexes: The indexes to build.
        granule: ``"row-group"`` or rows per granule.
        executor: Pool the granule builds run on.
        max_in_flight: Granules read but not yet built, at most (bounds memory).
        on_rows: Called with the row count of each finished granule (progress).

    Returns:
        The file's sidecar entry. Zero-row granules (empty row groups) get no payload: they are
        never read, so they are always skipped.

    Raises:
        BloomskipError: From the engine, for data its types cannot hash.
    """
    identity = source.identity()
    columns = sorted({name for prepared in indexes for name in prepared.columns})
    granule_rows: list[int] = []
    parts: list[list[bytes]] = [[] for _ in indexes]
    in_flight: deque = deque()

    def collect(future) -> None:
        rows, payloads = future.result()
        for store, payload in zip(parts, payloads, strict=True):
            store.append(payload)
        on_rows(rows)

    types = {
        name: arrow_type
        for prepared in indexes
        for name, arrow_type in zip(prepared.columns, prepared.arrow_types, strict=False)
    }
    for table in iter_granules(source, columns, granule, types):
        granule_rows.append(table.num_rows)
        if table.num_rows == 0:
            continue
        in_flight.append(executor.submit(_build_one, table, indexes))
        while len(in_flight) >= max_in_flight:
            collect(in_flight.popleft())
    while in_flight:
        collect(in_flight.popleft())
    if source.identity() != identity:
        raise BloomskipError(f"{source.path}: changed while it was being indexed; build again")
    payloads = [b"".join(store) for store in parts]
    return FileEntry(relative_path, source.format, identity, granule_rows, payloads)


def _build_one(table, indexes: Sequence[PreparedIndex]) -> tuple[int, list[bytes]]:
    return table.num_rows, granule_payloads(table, indexes)


def progress_bar(total_rows: int, description: str, enabled: bool | None = None):
    """Return a tqdm bar counting rows; shown only on a terminal unless ``enabled`` is given."""
    from tqdm import tqdm

    show = sys.stderr.isatty() if enabled is None else enabled
    return tqdm(
        total=total_rows,
        unit="rows",
        unit_scale=True,
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


def build_sidecar(
    files: Sequence[SourceFile],
    root: Path,
    indexes: Sequence[PreparedIndex],
    granule: str | int,
    previous: Sidecar | None,
    show_progress: bool | None = None,
    jobs: int | None = None,
) -> tuple[Sidecar, list[str]]:
    """Index the files that are new or changed since ``previous`` and keep the rest.

    Args:
        files: The dataset's files.
        root: The dataset's root directory; the sidecar names files relative to it.
        indexes: The indexes to build.
        granule: ``"row-group"`` or rows per granule.
        previous: The current sidecar; its entries are reused only when it has the same index
            definitions and granule and the file's identity is unchanged.
        show_progress: Force the progress bar on or off (default: on a terminal only).
        jobs: Threads building granules (default: one per CPU); the granule builders run in C
            without the GIL, and the bytes do not depend on the count.

    Returns:
        ``(sidecar, rebuilt)``: the new sidecar and the relative paths that were (re)indexed.
    """
    from pyarrow import ArrowException

    specs = [prepared.spec for prepared in indexes]
    reusable = previous if previous is not None and previous.indexes == specs else None
    if reusable is not None and reusable.granule != granule:
        reusable = None
    entries: dict[str, FileEntry] = {}
    todo: list[tuple[SourceFile, str]] = []
    for source in files:
        relative = relative_to(source.path, root)
        old = reusable.files.get(relative) if reusable is not None else None
        entry = reuse_entry(old, source)
        if entry is not None:
            entries[relative] = entry
        else:
            todo.append((source, relative))
    total = 0
    for source, _ in todo:
        try:
            total += int(read_layout(source).rows.sum())
        except OSError as exc:
            raise BloomskipError(f"{source.path}: cannot read it: {exc}") from exc
    workers = worker_count() if jobs is None else max(1, jobs)
    with (
        progress_bar(total, "indexing", show_progress) as bar,
        ThreadPoolExecutor(max_workers=workers) as executor,
    ):
        for source, relative in todo:
            try:
                entries[relative] = build_file(
                    source, relative, indexes, granule, executor, 2 * workers, bar.update
                )
            except BloomskipError:
                raise
            except (ArrowException, KeyError, ValueError, OSError) as exc:
                # A file whose columns differ from the dataset's, data the engine rejects, or
                # an unreadable file.
                raise BloomskipError(f"{source.path}: cannot index it: {exc}") from exc
    ordered = {relative_to(source.path, root): None for source in files}
    sidecar = Sidecar(granule, specs, {name: entries[name] for name in ordered})
    return sidecar, [relative for _, relative in todo]
