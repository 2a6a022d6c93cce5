"""Pruning: which row groups (or record batches) of a dataset can hold rows matching a WHERE.

Each index of the sidecar is evaluated by the ClickHouse engine (``compile_condition`` /
``may_match``) over the granules of every file whose identity still matches the sidecar. A
granule the engine rules out is skipped; everything else is kept. Files that changed, are not in
the sidecar, or a sidecar that is missing or corrupt, make the pruner keep every row group of the
files concerned: the answer is then a scan, never a miss.

The decision is an :class:`Explanation`: per index what it skipped, the surviving row groups
(:meth:`Explanation.row_groups`), and those row groups as a ``pyarrow.dataset``
(:meth:`Explanation.to_dataset`) for DuckDB or Polars to scan without a copy.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from bloomskip.dataset.index.sidecar import FileEntry, Sidecar
from bloomskip.dataset.listing.files import IdentityCache, Layout, SourceFile
from bloomskip.dataset.vocabulary import ROW_GROUP, relative_to
from bloomskip.errors import FormatError, StorageError, warn_caller

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.dataset as pads

    from bloomskip.dataset.scan.plan import AccessPlan, FileAccess, PlanReader

INDEXED = "indexed"
NOT_INDEXED = "not indexed"
CHANGED = "changed since indexing"


@dataclass
class FileState:
    """A dataset file as the pruner sees it.

    Attributes:
        source: The file.
        relative_path: Its name in the sidecar.
        layout: Its row groups (record batches).
        entry: Its sidecar entry when that entry is still valid, else None.
        status: ``"indexed"``, ``"not indexed"`` or ``"changed since indexing"``.
        listed: The identity the decision was made for, which a query checks again once it
            has read the file (:func:`read_consistently`): a local file's
            :func:`~bloomskip.dataset.listing.files.stat_key`, taken before its footer and layout
            were read; an object's listing (``ObjectInfo``). None: not checked.
    """

    source: SourceFile
    relative_path: str
    layout: Layout
    entry: FileEntry | None
    status: str
    listed: object = field(default=None, compare=False)


@dataclass
class IndexOutcome:
    """What one index decided.

    Attributes:
        definition: The index definition text.
        useful: Whether any atom of the WHERE can use this index.
        granules: Indexed granules considered.
        granules_skipped: Granules the index rules out.
        rows_skipped: Rows in those granules.
        keep: Per file, a bool per row group: False where this index alone skips it.
        note: Why the index was not used, when it was not.
        granule_keep: Per file, a bool per sidecar granule (False: this index skips it), or
            None for a file this index did not evaluate.
        engine: ``(spec, SkipIndex, file positions)`` of an index that was evaluated: what
            :func:`atom_outcomes` and the observed false positives probe again (no payload is
            read twice).
    """

    definition: str
    useful: bool
    granules: int = 0
    granules_skipped: int = 0
    rows_skipped: int = 0
    keep: list = field(default_factory=list)
    note: str = ""
    granule_keep: list = field(default_factory=list)
    engine: tuple | None = field(default=None, repr=False, compare=False)


@dataclass
class Explanation:
    """What the index decided for a WHERE: the row groups each file must read, and why.

    Attributes:
        files: Every dataset file.
        keep: Per file, a bool per row group: True = must be read.
        indexes: One :class:`IndexOutcome` per sidecar index.
        warnings: Problems that made the pruner fall back to scanning (corrupt sidecar, ...).
        schema_source: Gives the schema of :meth:`to_dataset` (set by ``Dataset.explain``).
        io: Requests and bytes the index cost (``index_requests``, ``index_bytes``), for a
            dataset on a store that counts them.
        table: For a Delta or Iceberg table: its format and snapshot, the files of the
            snapshot, the files its own pruning (partition values, statistics) kept, and the
            predicate that pruning was given (``files`` then holds only the kept ones).
        where: The WHERE the indexes were evaluated for.
        granule: The sidecar's granule (``"row-group"`` or a row count), None without one.
        table_files: Values :meth:`to_dataset` adds as columns, by file (``TableFile`` by
            relative path): the partition values of ``key=value`` folders; None: none.
        files_agree: Whether DuckDB may read the files by path as the dataset's schema says
            (local Parquet files of one schema), for a dataset that knows its files' schemas
            without their footers (set by a lake's ``explain``); None: the dataset decides.
        atoms: The :class:`AtomOutcome` of each predicate atom, when pruning needed them
            (an OR or NOT over atoms different indexes evaluate); None: not computed.
        across: What deciding each atom by its own indexes skipped beyond what the indexes
            skipped one by one (:func:`decide_across_indexes`); None when not tried.
        granule_keep: Per file, for granules of a row count (``--granule ROWS``): a bool per
            sidecar granule, True where every index (and :attr:`across`) keeps it; None for a
            file no index narrowed, or granules of a row group (``keep`` says it all then).
            The access plan reads the kept granules' rows only (:func:`combine_granules`).
        reader: How :meth:`access_plan`'s files are read by other engines (set by
            ``Dataset.explain``).
        changed_files: The files (relative paths) whose index entries no longer describe them
            (a new size or modification time, ETag, footer): scanned whole, until the next
            build re-indexes them. Set by :func:`note_scanned_files`.
        unindexed_files: The files the index does not hold (added since the build): scanned
            whole. Empty when there is no index at all (a warning says so).
        text_source: Gives :meth:`__str__`'s text (the dataset's ``--explain`` text, set by
            ``Dataset.explain``); None: :meth:`__repr__`'s.

    ``str(explanation)`` is what ``bloomskip query --explain`` prints for it; ``repr`` is a
    one-line summary.

    Example:
        >>> explanation = Dataset("logs/").explain("user_id = 42")  # doctest: +SKIP
        >>> explanation.row_groups()  # doctest: +SKIP
        [(PosixPath('/data/logs/part-3.parquet'), 17)]
        >>> explanation  # doctest: +SKIP
        <Explanation of 'user_id = 42': 1/305 row groups in 1/20 files to read, 2 indexes, ...>
    """

    files: list[FileState]
    keep: list
    indexes: list[IndexOutcome]
    warnings: list[str]
    schema_source: Callable[[], pa.Schema] | None = field(default=None, repr=False)
    io: dict[str, int] = field(default_factory=dict)
    table: dict | None = None
    where: str | None = None
    granule: str | None = None
    table_files: Mapping | None = field(default=None, repr=False)
    files_agree: Callable[[], bool] | None = field(default=None, repr=False)
    atoms: list | None = field(default=None, repr=False)
    across: IndexOutcome | None = None
    granule_keep: list | None = field(default=None, repr=False)
    reader: PlanReader | None = field(default=None, repr=False, compare=False)
    changed_files: list[str] = field(default_factory=list)
    unindexed_files: list[str] = field(default_factory=list)
    text_source: Callable[[Explanation], str] | None = field(
        default=None, repr=False, compare=False
    )

    def __repr__(self) -> str:
        # The dataclass's own repr spells out every file's state and mask: megabytes.
        groups = sum(len(keep) for keep in self.keep)
        kept = sum(int(keep.sum()) for keep in self.keep)
        files = sum(bool(keep.any()) for keep in self.keep)
        return (
            f"<Explanation of {self.where!r}: {kept}/{groups} row groups in "
            f"{files}/{len(self.files)} files to read, {_count(len(self.indexes), 'index')}, "
            f"{_count(len(self.warnings), 'warning')}>"
        )

    def __str__(self) -> str:
        """The text ``bloomskip query --explain`` prints for this decision."""
        return self.text_source(self) if self.text_source is not None else repr(self)

    @functools.cached_property
    def plan(self) -> AccessPlan:
        """The access plan: per file read, its row groups and the row ranges within them
        (:class:`~bloomskip.dataset.scan.plan.AccessPlan`); what every query's scan reads.

        Example:
            >>> plan = Dataset("logs/").explain("user_id = 42").plan  # doctest: +SKIP
            >>> [(a.key, a.row_groups.tolist(), a.row_ranges.tolist()) for a in plan.files]
            [('part-3.parquet', [17], [[1114112, 1179648]])]
        """
        from bloomskip.dataset.scan.plan import access_plan

        granules = None
        if self.granule_keep is not None:
            granules = [
                None if keep is None else (state.entry.granule_rows, keep)
                for state, keep in zip(self.files, self.granule_keep, strict=True)
            ]
        return access_plan(
            [
                (str(state.source.path), state.relative_path, state.layout.rows)
                for state in self.files
            ],
            self.keep,
            granules,
            [file_identity(state.listed) for state in self.files],
        )

    def access_plan(self) -> AccessPlan:
        """The access plan as the hand-off to another engine: per file read, its identity,
        row groups and row ranges, with ``to_pyarrow()``, ``to_duckdb()`` and ``to_polars()``
        reading exactly it (docs/queries.md, "Handing the plan to another engine").

        Returns:
            The :attr:`plan`, readable when the explanation came from ``Dataset.explain``.

        Example:
            >>> plan = Dataset("logs/").explain("user_id = 42").access_plan()  # doctest: +SKIP
            >>> plan.to_duckdb().filter("user_id = 42").fetchall()  # doctest: +SKIP
            [(42, 'login')]
        """
        return self.plan if self.reader is None else self.plan.with_reader(self.reader)

    def row_groups(self) -> list[tuple[Path, int]]:
        """Return the ``(file, row_group)`` pairs that must be read, in dataset order.

        Returns:
            The surviving pairs; for Arrow IPC the number is a record batch.

        Example:
            >>> Dataset("logs/").explain("user_id = 42").row_groups()  # doctest: +SKIP
            [(PosixPath('/data/logs/part-3.parquet'), 17)]
        """
        return [
            (self.files[access.number].source.path, group)
            for access in self.plan.files
            for group in access.row_groups.tolist()
        ]

    def to_dataset(self) -> pads.Dataset:
        """Return the surviving row groups as a ``pyarrow.dataset.Dataset``, without reading them.

        Hand it to DuckDB (``duckdb.sql("SELECT ... FROM ds WHERE ...")``) or Polars
        (``polars.scan_pyarrow_dataset(ds)``); neither copies the data up front. Apply the exact
        predicate there: the row groups may hold non-matching rows too. (Count rows by scanning:
        pyarrow 26's ``Dataset.count_rows()`` reports whole files for row-group subsets.)

        Its schema is the files' own when they all agree, else that of the whole dataset's scan
        (``Dataset.scan_schema``, the one every query returns): each file's columns are then cast
        to it, and a column a file lacks reads as nulls.

        Returns:
            A ``pyarrow.dataset.Dataset``.

        Raises:
            BloomskipError: The explanation has no schema (it was not made by
                ``Dataset.explain``), or DuckDB cannot read the files together.

        Example:
            >>> ds = Dataset("logs/").explain("user_id = 42").to_dataset()  # doctest: +SKIP
            >>> duckdb.sql("SELECT count(*) FROM ds").fetchone()  # doctest: +SKIP
            (65536,)
        """
        from bloomskip.errors import BloomskipError

        if self.schema_source is None:
            raise BloomskipError("this explanation has no schema: make it with Dataset.explain")
        return surviving_dataset(self, self.schema_source(), self.table_files)


def file_identity(listed) -> dict | None:
    """A file's identity as the plan records it, from what its listing said (``listed``).

    Example:
        >>> file_identity((2049, 1311, 1234, 1764460000000000000, 1764460000000000001))
        {'size': 1234, 'modified_ns': 1764460000000000000}
    """
    if isinstance(listed, tuple):  # a local file's stat key
        return {"size": listed[2], "modified_ns": listed[3]}
    if getattr(listed, "distrusted", False):
        return None
    info = getattr(listed, "info", listed)
    if info is None or not hasattr(info, "etag"):
        return None
    identity = {"size": info.size, "modified_ns": info.mtime_ns}
    if info.etag is None and info.version is None:
        return identity  # a local file: its stat is its identity
    return {**identity, "etag": info.etag, "version": info.version}


def surviving_dataset(
    result: Explanation,
    schema: pa.Schema,
    table_files: Mapping | None = None,
    accesses: Sequence[FileAccess] | None = None,
) -> pads.Dataset:
    """Return the surviving row groups as a ``pyarrow.dataset.Dataset`` (no data is read).

    Args:
        result: The pruning result.
        schema: The schema of the dataset returned; the files' columns are cast to it.
        table_files: For a Delta or Iceberg table, its
            :class:`~bloomskip.dataset.listing.tables.formats.TableFile` per key: their partition
            values become
            constant columns, and the rows their snapshot deleted are dropped (the row groups of
            such a file are read here, and only they).
        accesses: Only these files of the plan (a query read in steps); all when None.

    Returns:
        A dataset DuckDB (``duckdb.from_arrow`` or a replacement scan) and Polars
        (``polars.scan_pyarrow_dataset``) scan without copying: Parquet fragments restricted
        to the surviving row groups, or the memory-mapped record batches of an Arrow IPC file.

    Example:
        >>> ds = surviving_dataset(result, schema)  # doctest: +SKIP
        >>> duckdb.sql("SELECT count(*) FROM ds").fetchone()  # doctest: +SKIP
    """
    import pyarrow as pa
    import pyarrow.dataset as pads
    import pyarrow.fs as pafs

    remote = [state.source.filesystem for state in result.files if state.source.filesystem]
    filesystem = remote[0] if remote else pafs.LocalFileSystem()
    # On an object store, the column chunks a scan needs are fetched together (coalesced, in
    # parallel) rather than one small read at a time.
    options = pads.ParquetFragmentScanOptions(pre_buffer=bool(remote))
    parquet_format = pads.ParquetFileFormat(default_fragment_scan_options=options)
    fragments = []
    batches = []
    table_files = table_files or {}
    accesses = result.plan.files if accesses is None else accesses
    made = _parquet_fragments(result, accesses, parquet_format, filesystem, schema, table_files)
    for access in accesses:
        state = result.files[access.number]
        groups = access.row_groups.tolist()
        table_file = table_files.get(state.relative_path)
        if state.source.format == "parquet":
            fragment = made[access.number]
            held = _held_by_field_id(table_file, state, fragment)
            if table_file is not None and table_file.deleted is not None:
                batches.extend(_without_deleted(fragment, state, groups, table_file, schema, held))
            elif held is not None:
                # Its columns lie under other names than the table's (renamed, or added again
                # under a dropped one's name): read by field id, as Iceberg reads them.
                batches.extend(_fragment_table(fragment, schema, held).to_batches())
            elif _holds_partition_columns(table_file, fragment):
                # A partition value overrides the file's own column of that name (ClickHouse's
                # hive rule): pyarrow fills only the columns a file lacks.
                table = fragment.to_table(schema=schema)
                batches.extend(_with_partition_values(table, table_file, schema).to_batches())
            elif _has_view_types(state, fragment):
                # pyarrow's dataset filters have no kernels for view types (pyarrow 26: "no
                # kernel matching input types (string, string_view)"), and DuckDB pushes its
                # filters into the scan: such a file's kept row groups are read and cast here.
                # deltalake writes them (a delete rewrites a file with ``string_view``).
                batches.extend(fragment.to_table(schema=schema).to_batches())
            else:
                fragments.append(fragment)
        else:
            # Memory-mapped: the batches point into the file's pages, nothing is copied.
            reader = pa.ipc.open_file(pa.memory_map(str(state.source.path)))
            batches.extend(reader.get_batch(g).select(schema.names) for g in groups)
    parts = []
    if fragments or not batches:
        parts.append(pads.FileSystemDataset(fragments, schema, parquet_format, filesystem))
    if batches:
        parts.append(pads.InMemoryDataset(batches, schema=schema))
    return parts[0] if len(parts) == 1 else pads.UnionDataset(schema, parts)


def _listed_size(state: FileState) -> int | None:
    """A remote file's size as its listing gave it (None when unknown or distrusted): with
    it, pyarrow opens the file without asking the store for its size first. A file replaced
    since reads wrong and is caught like any other change (:func:`read_consistently`)."""
    listed = state.listed
    if state.source.filesystem is None or getattr(listed, "distrusted", False):
        return None
    size = getattr(getattr(listed, "info", listed), "size", None)
    return size if isinstance(size, int) else None


def _parquet_fragments(
    result: Explanation, accesses, parquet_format, filesystem, schema, table_files
):
    """The Parquet files of ``accesses`` as fragments of their kept row groups, by file number.

    A remote file whose footer the decision did not parse has it fetched here, all such
    files at once: one after another (as pyarrow reads them when a scan first needs them),
    each would cost a round trip to the store.
    """
    from concurrent.futures import ThreadPoolExecutor

    def fragment(access):
        state = result.files[access.number]
        made = parquet_format.make_fragment(
            str(state.source.path),
            filesystem,
            _partition_expression(table_files.get(state.relative_path), schema),
            row_groups=access.row_groups.tolist(),
            file_size=_listed_size(state),
        )
        if state.source.filesystem is not None and _footer_unread(state):
            made.ensure_complete_metadata()
        return made

    accesses = [
        access for access in accesses if result.files[access.number].source.format == "parquet"
    ]
    remote = sum(result.files[access.number].source.filesystem is not None for access in accesses)
    if remote < 2:
        return {access.number: fragment(access) for access in accesses}
    with ThreadPoolExecutor(max_workers=min(remote, FOOTER_THREADS)) as pool:
        return dict(
            zip((access.number for access in accesses), pool.map(fragment, accesses), strict=True)
        )


def _footer_unread(state: FileState) -> bool:
    return state.layout is None or state.layout.metadata is None


def _has_view_types(state: FileState, fragment) -> bool:
    """Whether a Parquet file's Arrow schema holds a view type, at any depth (from the footer
    its layout already parsed, when it did)."""
    import pyarrow as pa

    metadata = state.layout.metadata if state.layout is not None else None
    physical = (
        metadata.schema.to_arrow_schema() if metadata is not None else fragment.physical_schema
    )
    views = (pa.types.is_string_view, pa.types.is_binary_view, pa.types.is_list_view)
    pending = [item.type for item in physical]
    while pending:
        arrow_type = pending.pop()
        if any(test(arrow_type) for test in views) or pa.types.is_large_list_view(arrow_type):
            return True
        pending.extend(arrow_type.field(number).type for number in range(arrow_type.num_fields))
    return False


def _held_by_field_id(table_file, state: FileState, fragment) -> dict | None:
    """Where a table file holds each column, when its field ids say otherwise than its names
    (:meth:`~bloomskip.dataset.listing.field_ids.FieldIds.in_file`); None: read by name."""
    if table_file is None or table_file.field_ids is None:
        return None
    metadata = state.layout.metadata if state.layout is not None else None
    physical = (
        metadata.schema.to_arrow_schema() if metadata is not None else fragment.physical_schema
    )
    return table_file.field_ids.in_file(physical)


def _fragment_table(fragment, schema: pa.Schema, held: dict | None, columns=None) -> pa.Table:
    """A fragment's rows as ``schema`` reads them (by field id where ``held`` says where),
    of ``columns`` only when given."""
    names = schema.names if columns is None else columns
    if held is None:
        return fragment.to_table(schema=schema, columns=names)
    from bloomskip.dataset.listing.field_ids import physical_names, read_as

    table = fragment.to_table(columns=physical_names(held, names))
    return read_as(table, held, schema, names)


def _holds_partition_columns(table_file, fragment) -> bool:
    if table_file is None or not table_file.partition:
        return False
    return any(name in fragment.physical_schema.names for name in table_file.partition)


def _with_partition_values(table: pa.Table, table_file, schema: pa.Schema) -> pa.Table:
    """``table`` with each partition column set to the file's partition value."""
    import pyarrow as pa

    for name, value in table_file.partition.items():
        arrow_type = schema.field(name).type
        column = pa.repeat(pa.scalar(value, arrow_type), table.num_rows)
        table = table.set_column(table.schema.get_field_index(name), name, column)
    return table


def _partition_expression(table_file, schema: pa.Schema):
    """The partition values of a table file as the guarantee pyarrow fills columns from."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if table_file is None or not table_file.partition:
        return None
    expression = None
    for name, value in table_file.partition.items():
        term = (
            pc.field(name).is_null()
            if value is None
            else pc.field(name) == pa.scalar(value, schema.field(name).type)
        )
        expression = term if expression is None else expression & term
    return expression


def _without_deleted(
    fragment, state: FileState, groups: list[int], table_file, schema, held: dict | None = None
):
    """The kept row groups of a file whose snapshot deleted rows, those rows dropped (its
    columns read by field id where ``held`` says where)."""
    import numpy as np
    import pyarrow as pa

    starts = np.concatenate([[0], np.cumsum(state.layout.rows)])
    positions = np.concatenate(
        [np.arange(starts[g], starts[g + 1], dtype=np.int64) for g in groups]
    )
    table = _fragment_table(fragment, schema, held)
    if table.num_rows != len(positions):
        raise FormatError(
            f"holds {table.num_rows} rows in row groups {groups[:3]}…, its layout says "
            f"{len(positions)}",
            source=str(state.source.path),
        )
    alive = ~np.isin(positions, table_file.deleted, assume_unique=True)
    return table.filter(pa.array(alive)).to_batches()


def file_states(
    files: list[SourceFile],
    root: Path,
    sidecar: Sidecar | None,
    layouts: dict | None = None,
    identities: IdentityCache | None = None,
    keys: Sequence[tuple[int, ...]] | None = None,
) -> list[FileState]:
    """Match each dataset file with its sidecar entry, if that entry is still valid.

    Args:
        files: The dataset's files.
        root: The dataset's root directory; the sidecar names files relative to it.
        sidecar: The loaded sidecar, or None.
        layouts: Reused across calls: layouts keyed by file and identity.
        identities: Reused across calls: footer hashes, re-read when a file's ``stat`` changes.
        keys: Each file's ``stat_key`` as the listing took it (None: each file is stat-ed).

    Returns:
        One :class:`FileState` per file. An entry is valid when the file's size, modification
        time and footer hash are unchanged and its granules still cover the file's rows.
    """
    from bloomskip.dataset.listing.files import read_layout

    layouts = {} if layouts is None else layouts
    identities = IdentityCache() if identities is None else identities
    if len(layouts) > 4 * len(files) + 64:
        layouts.clear()  # entries of files that changed since; rebuilt on demand
    states = []
    for number, source in enumerate(files):
        relative = relative_to(source.path, root)
        key, identity = identities.keyed(source, keys[number] if keys is not None else None)
        if (source.path, identity) not in layouts:
            layouts[(source.path, identity)] = read_layout(source)
        layout = layouts[(source.path, identity)]
        entry = sidecar.files.get(relative) if sidecar is not None else None
        status = NOT_INDEXED if entry is None else INDEXED
        if entry is not None:
            rows = [int(r) for r in layout.rows]
            covers = (
                entry.granule_rows == rows
                if sidecar.granule == ROW_GROUP
                else sum(entry.granule_rows) == sum(rows)
            )
            if not covers or entry.format != source.format or entry.identity != identity:
                entry, status = None, CHANGED
        states.append(FileState(source, relative, layout, entry, status, key))
    return states


#: A query whose files keep changing while it reads them is answered again at most this many
#: times in all, each time from a new listing, before it gives up.
READ_ATTEMPTS = 3
#: Footers of a query's remote files fetched at once (each costs a round trip).
FOOTER_THREADS = 32


def read_consistently(
    result: Explanation,
    where: str,
    read: Callable[[Explanation], pa.Table],
    changed: Callable[[list[FileState]], list[FileState]],
    explain: Callable[[str], Explanation],
) -> pa.Table:
    """Answer a query only from files that still are what its decision was made for.

    A decision names row groups of each file as it was listed; reading them from a file
    replaced since would apply one version's row-group numbers (and index bits) to another
    version's bytes, and lose or invent rows. So once the read is done (or failed), every file
    it read is checked against :attr:`FileState.listed`; when one changed, the answer is
    dropped and the query decided again from a new listing, where the new version is read as
    it is now (as a file changed since indexing, whole). The identity checked is the one taken
    before the decision read anything of the file, so a change at any moment from the listing
    to the end of the read is seen.

    Args:
        result: The decision (from ``explain(where)``).
        where: The WHERE.
        read: Reads the row groups a decision keeps and applies ``where``.
        changed: Given the states of the files read, those whose identity differs now (a
            file gone included).
        explain: Decides again from a new listing.

    Returns:
        ``read``'s answer for a decision whose files were unchanged throughout.

    Raises:
        StaleSourceError: Files changed during each of :data:`READ_ATTEMPTS` reads.
        Exception: What ``read`` raised, when no file it read had changed.
    """
    from bloomskip.errors import StaleSourceError

    moved: list[FileState] = []
    for attempt in range(READ_ATTEMPTS):
        if attempt:
            result = explain(where)
        read_states = [
            state
            for state, keep in zip(result.files, result.keep, strict=True)
            if keep.any() and state.listed is not None
        ]
        try:
            table = read(result)
        except Exception:
            # Bytes of another version may not even parse as the decision expects them.
            moved = changed(read_states)
            if not moved:
                raise
            continue
        moved = changed(read_states)
        if not moved:
            return table
    raise StaleSourceError(
        f"{moved[0].source.path}: changed while the query read it, {READ_ATTEMPTS} times in a "
        "row; run the query again"
    )


def changed_on_disk(states: list[FileState]) -> list[FileState]:
    """The local files whose :func:`~bloomskip.dataset.listing.files.stat_key` is no longer the
    one their decision was made under (a file gone included): one ``stat`` each.

    The key holds the inode and the status-change time, which every write, rename or
    ``utime`` sets, so a file replaced (even by an older copy, its times restored) or written
    in place since has another key.

    Args:
        states: Local files' states, :attr:`FileState.listed` set.

    Returns:
        The states of the files that changed.
    """
    from bloomskip.dataset.listing.files import stat_key

    moved = []
    for state in states:
        try:
            key = stat_key(state.source.path)
        except OSError:
            key = None
        if key != state.listed:
            moved.append(state)
    return moved


def granules_to_units(granule_rows, granule_keep, unit_rows):
    """Map kept granules (fixed-row granules) onto the row groups they overlap.

    Args:
        granule_rows: Rows of each granule, in file order.
        granule_keep: Bool per granule.
        unit_rows: Rows of each row group.

    Returns:
        Bool per row group: True when it overlaps a kept granule.

    Example:
        >>> granules_to_units([4, 4, 2], [False, True, False], [5, 5]).tolist()
        [True, True]
    """
    import numpy as np

    granule_rows = np.asarray(granule_rows, np.int64)
    unit_rows = np.asarray(unit_rows, np.int64)
    granule_end = np.cumsum(granule_rows)
    granule_start = granule_end - granule_rows
    unit_end = np.cumsum(unit_rows)
    unit_start = unit_end - unit_rows
    kept = np.flatnonzero(np.asarray(granule_keep, bool) & (granule_rows > 0))
    first = np.searchsorted(unit_end, granule_start[kept], side="right")
    last = np.searchsorted(unit_start, granule_end[kept], side="left")
    coverage = np.zeros(len(unit_rows) + 1, np.int64)
    np.add.at(coverage, first, 1)
    np.add.at(coverage, last, -1)
    return np.cumsum(coverage[:-1]) > 0


def note_scanned_files(
    result: Explanation,
    build_command: Callable[[], str],
    changed_how: str,
    unverifiable: Collection[str] = (),
) -> None:
    """List the files the index could not prune for being out of date, say so in one line per
    cause, and issue the decision's one :class:`~bloomskip.errors.BloomskipWarning`.

    A copied folder has every file's modification time new: its decisions name them all on
    the explanation (:attr:`Explanation.changed_files`, :attr:`Explanation.unindexed_files`,
    what ``--explain`` and ``index status`` list), never one warning line per file.

    Args:
        result: A decision, its warnings complete but these lines.
        build_command: Gives what re-indexes them (``bloomskip index build DATASET …``);
            called only when some file needs it.
        changed_how: What tells a changed file, for this location (``new size or
            modification time``).
        unverifiable: Files no build can index (no identity: a table's file changed behind
            its log, an object without an ETag); the listing says why, and they are left out.

    Example:
        >>> note_scanned_files(result, lambda: "bloomskip index build logs", "new size or ETag")
        ... # doctest: +SKIP
        >>> result.warnings[-1]  # doctest: +SKIP
        '200 files changed since they were indexed (new size or ETag); they were scanned. Run
        `bloomskip index build logs` to re-index them.'
    """
    if result.granule is not None:  # with no index at all, a warning already says so
        skipped = set(unverifiable)
        for status, files in (
            (CHANGED, result.changed_files),
            (NOT_INDEXED, result.unindexed_files),
        ):
            files[:] = [
                state.relative_path
                for state in result.files
                if state.status == status and state.relative_path not in skipped
            ]
        if result.changed_files or result.unindexed_files:
            result.warnings += _scanned_lines(result, build_command(), changed_how)
    if result.warnings:
        warn_caller("\n".join(result.warnings))


def _scanned_lines(result: Explanation, command: str, changed_how: str) -> list[str]:
    """:func:`note_scanned_files`'s lines: one for the changed files, one for the new ones."""
    lines = []
    if result.changed_files:
        lines.append(
            _several(
                len(result.changed_files),
                f"file changed since it was indexed ({changed_how}); it was scanned. Run "
                f"`{command}` to re-index it.",
                f"files changed since they were indexed ({changed_how}); they were scanned. "
                f"Run `{command}` to re-index them.",
            )
        )
    if result.unindexed_files:
        lines.append(
            _several(
                len(result.unindexed_files),
                f"file is not indexed (new since the build); it was scanned. Run `{command}` "
                "to index it.",
                "files are not indexed (new since the build); they were scanned. Run "
                f"`{command}` to index them.",
            )
        )
    return lines


def _several(count: int, one: str, many: str) -> str:
    """``count`` and the noun phrase that agrees with it."""
    return f"{count} {one if count == 1 else many}"


def _count(count: int, noun: str) -> str:
    """``1 index``, ``2 indexes``; ``1 warning``, ``2 warnings``."""
    return _several(count, noun, noun + ("es" if noun.endswith("x") else "s"))


def prune(
    where: str,
    states: list[FileState],
    sidecar: Sidecar | None,
    engine_cache: dict,
    condition_cache: dict | None = None,
    unusable: Mapping[int, str] | None = None,
) -> Explanation:
    """Evaluate every sidecar index against ``where`` and combine the decisions.

    Args:
        where: The ClickHouse WHERE expression.
        states: From :func:`file_states`.
        sidecar: The sidecar (None: keep everything).
        engine_cache: Reused across calls: decoded ``SkipIndex`` objects keyed by index and the
            set of valid files.
        condition_cache: Reused across calls: compiled conditions keyed by WHERE and index.
        unusable: Indexes (by number) that must not be used, each with why (a table's index
            whose column the snapshot does not have): every granule is kept for them.

    Returns:
        An :class:`Explanation`; its warnings name indexes that could not be used.
    """
    import numpy as np

    keep = _all_kept(states)
    indexed = [i for i, state in enumerate(states) if state.entry is not None]
    outcomes = []
    warnings = []
    for number, spec in enumerate(sidecar.indexes if sidecar is not None else []):
        outcome = IndexOutcome(spec.definition, useful=False)
        outcome.keep = _all_kept(states)
        outcomes.append(outcome)
        if not indexed:
            outcome.note = "no file is indexed"
            continue
        if unusable and number in unusable:
            outcome.note = f"not used: {unusable[number]}"
            continue
        try:
            condition = _condition(spec, where, condition_cache)
            if not condition.useful:
                outcome.note = "no part of the WHERE can use this index"
                continue
            # Only now are the index's payload sections read (and verified).
            index, usable, problems = _engine_index(number, spec, states, indexed, engine_cache)
            warnings.extend(problems)
            if index is None:
                outcome.note = "not used: no readable payload section"
                continue
            may_match = np.asarray(probe(condition, index), bool)
            _spread(outcome, may_match, usable, states, sidecar.granule)
        except (ValueError, StorageError) as exc:
            # A malformed payload or slice, a part that cannot be read, or a predicate the
            # engine cannot evaluate: keeping every granule is always correct.
            outcome.note = f"not used: {exc}"
            warnings.append(f"index {spec.definition} not used: {exc}")
            continue
        outcome.useful = True
        outcome.engine = (spec, index, usable)
        for i in usable:
            keep[i] &= outcome.keep[i]
    granule = sidecar.granule if sidecar is not None else None
    result = Explanation(states, keep, outcomes, warnings, where=where, granule=granule)
    decide_across_indexes(result, condition_cache)
    combine_granules(result)
    return result


def combine_granules(result: Explanation) -> None:
    """Intersect, per granule of a row count, what every index (and deciding atom by atom)
    keeps, and narrow ``result.keep`` to the row groups those granules overlap.

    Each index's verdict keeps every granule holding a matching row, so their intersection
    does too; it is finer than intersecting the row groups each index keeps (two indexes may
    keep different granules of one row group). Sets ``result.granule_keep``; granules of a
    row group (``keep`` is already per granule) leave it None.
    """
    import numpy as np

    if result.granule in (None, ROW_GROUP):
        return
    verdicts = [outcome for outcome in result.indexes if outcome.useful]
    if result.across is not None:
        verdicts.append(result.across)
    if not verdicts:
        return
    combined: list = [None] * len(result.files)
    for i, state in enumerate(result.files):
        kept = [outcome.granule_keep[i] for outcome in verdicts]
        kept = [file_keep for file_keep in kept if file_keep is not None]
        if state.entry is None or not kept:
            continue
        file_keep = np.logical_and.reduce(kept) if len(kept) > 1 else kept[0]
        combined[i] = file_keep
        result.keep[i] &= granules_to_units(state.entry.granule_rows, file_keep, state.layout.rows)
    result.granule_keep = combined


def decide_across_indexes(result: Explanation, condition_cache: dict | None = None) -> None:
    """Prune an OR (or a NOT) whose atoms different indexes evaluate, atom by atom.

    ClickHouse evaluates skip indexes one at a time: for ``a = X OR b = Y`` with an index on
    each, each index knows one atom and must keep every granule for the other, so nothing is
    skipped. Here each predicate atom is decided by every index that evaluates it alone (the
    intersection of their verdicts), the WHERE's AND / OR over the atoms (NOT pushed down to
    them, which Kleene's three-valued logic allows) combines those verdicts per granule, and
    the result narrows ``result.keep``. Each index's verdict for an atom keeps every granule
    holding a row for which the atom is true, so the combination keeps every granule holding a
    row for which the WHERE is true: no row is lost.

    Only tried for a WHERE of at most :data:`MAX_ATOMS` atoms with an OR among them, and at
    least two indexes used; sets ``result.atoms`` and ``result.across``.
    """
    import numpy as np

    if result.where is None or sum(outcome.useful for outcome in result.indexes) < 2:
        return
    tree = boolean_tree(result.where, MAX_ATOMS)
    if tree is None:
        return
    atoms = atom_outcomes(result, condition_cache)
    if atoms is None:
        return
    result.atoms = atoms
    indexed = [i for i, state in enumerate(result.files) if state.entry is not None]
    lengths = [len(result.files[i].entry.granule_rows) for i in indexed]
    total = sum(lengths)
    starts = np.cumsum([0, *lengths])
    verdicts = {}
    for atom in atoms:
        verdict = np.ones(total, bool)
        for item in atom.indexes:
            if not item.useful:
                continue
            for position, i in enumerate(indexed):
                file_keep = item.granule_keep[i]
                if file_keep is not None:
                    verdict[starts[position] : starts[position + 1]] &= file_keep
        verdicts[atom.predicate] = verdict
    granule_keep = _evaluate_tree(tree, verdicts)
    rows = np.concatenate(
        [np.asarray(result.files[i].entry.granule_rows, np.int64) for i in indexed]
    )
    across = IndexOutcome("each atom by the indexes that evaluate it", useful=True)
    across.granules = total
    across.granules_skipped = int(total - granule_keep.sum())
    across.rows_skipped = int(rows[~granule_keep].sum())
    across.granule_keep = [None] * len(result.files)
    for position, i in enumerate(indexed):
        state = result.files[i]
        file_keep = granule_keep[starts[position] : starts[position + 1]]
        across.granule_keep[i] = file_keep
        if result.granule != ROW_GROUP:
            file_keep = granules_to_units(state.entry.granule_rows, file_keep, state.layout.rows)
        result.keep[i] &= file_keep
    across.keep = result.keep
    result.across = across


def boolean_tree(where: str, limit: int):
    """The WHERE as nested ``("and" | "or", [operands])`` over atom texts (NOT pushed down to
    the atoms, spelled as :func:`predicate_atoms` spells them), or None when it has no OR
    once NOTs are pushed down, one atom only, or more than ``limit`` atoms.

    Example:
        >>> boolean_tree("a = 1 OR NOT (b = 2 AND c = 3)", 8)
        ('or', ['a = 1', 'NOT (b = 2)', 'NOT (c = 3)'])
        >>> boolean_tree("a = 1 AND b = 2", 8) is None
        True
    """
    from sqlglot import exp

    from bloomskip.dataset.sql.translate import parse_where

    root = parse_where(where)
    atoms: set[str] = set()
    has_or = False
    built: dict[int, object] = {}
    # (node, negated, expanded): post-order without recursion (a WHERE may chain many ORs).
    pending: list[tuple[exp.Expression, bool, bool]] = [(root, False, False)]
    order: list[tuple[int, object]] = []
    while pending:
        node, negated, expanded = pending.pop()
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.Not):
            pending.append((node.this, not negated, False))
            order.append((id(node), ("alias", id(_unparen(node.this)))))
            continue
        if isinstance(node, (exp.And, exp.Or)):
            operator = "and" if isinstance(node, exp.And) != negated else "or"
            has_or = has_or or operator == "or"
            left, right = _unparen(node.this), _unparen(node.expression)
            order.append((id(node), (operator, id(left), id(right))))
            pending.extend([(node.expression, negated, False), (node.this, negated, False)])
            continue
        text = node.sql(dialect="clickhouse")
        text = f"NOT ({text})" if negated else text
        atoms.add(text)
        if len(atoms) > limit:
            return None
        built[id(node)] = text
    if not has_or or len(atoms) < 2:
        return None
    for key, item in reversed(order):
        if item[0] == "alias":
            built[key] = built[item[1]]
        else:
            operator, left, right = item
            operands = []
            for child in (built[left], built[right]):
                same = isinstance(child, tuple) and child[0] == operator
                operands.extend(child[1] if same else [child])
            built[key] = (operator, operands)
    return built[id(_unparen(root))]


def _unparen(node):
    from sqlglot import exp

    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _evaluate_tree(tree, verdicts: dict):
    """Per granule, whether :func:`boolean_tree`'s ``tree`` can be true, given each atom's
    verdict (a bool array per atom text)."""
    import numpy as np

    if isinstance(tree, str):
        return verdicts[tree]
    operator, operands = tree
    values = [_evaluate_tree(operand, verdicts) for operand in operands]
    combine = np.logical_and if operator == "and" else np.logical_or
    return functools.reduce(combine, values)


def _all_kept(states: list[FileState]) -> list:
    """Per file, a ``True`` per row group: views into one buffer (one allocation, not one per
    file: a lake has many files)."""
    import numpy as np

    sizes = np.fromiter((len(state.layout.rows) for state in states), np.int64, len(states))
    ends = np.cumsum(sizes)
    buffer = np.ones(int(ends[-1]) if len(ends) else 0, bool)
    return [
        buffer[end - size : end] for size, end in zip(sizes.tolist(), ends.tolist(), strict=True)
    ]


def _spread(outcome: IndexOutcome, may_match, usable: list[int], states, granule: str) -> None:
    """Spread an index's verdict (one per non-empty granule of the files it covers, in
    ``usable`` order) over each file's granules and row groups, and count what it skips.

    Sets ``outcome.granule_keep`` (None for the files it does not cover), ``outcome.keep``
    for the files it covers, and its counts, with whole-array operations over all the files.

    Raises:
        ValueError: The verdict does not have one value per non-empty granule.
    """
    import itertools

    import numpy as np

    lengths = [len(states[i].entry.granule_rows) for i in usable]
    total = sum(lengths)
    rows = np.fromiter(
        itertools.chain.from_iterable(states[i].entry.granule_rows for i in usable),
        np.int64,
        total,
    )
    nonempty = rows > 0
    if int(nonempty.sum()) != len(may_match):
        raise ValueError(f"{len(may_match)} verdicts for {int(nonempty.sum())} non-empty granules")
    granule_keep = np.zeros(total, bool)
    granule_keep[nonempty] = may_match
    outcome.granules = total
    outcome.granules_skipped = int(total - granule_keep.sum())
    outcome.rows_skipped = int(rows[~granule_keep].sum())
    outcome.granule_keep = [None] * len(states)
    start = 0
    for i, length in zip(usable, lengths, strict=True):
        file_keep = granule_keep[start : start + length]
        outcome.granule_keep[i] = file_keep
        if granule == ROW_GROUP:
            outcome.keep[i] = file_keep
        else:
            outcome.keep[i] = granules_to_units(
                rows[start : start + length], file_keep, states[i].layout.rows
            )
        start += length


def _condition(spec, where, condition_cache):
    """The compiled condition of ``where`` for one index (no payload is read for it)."""
    from bloomskip.clickhouse.condition import compile_condition
    from bloomskip.clickhouse.ddl import parse_index_definition

    # The condition depends on the WHERE and the index definition only, not on the data: a
    # repeated query skips sqlglot parsing and RPN building.
    condition_cache = {} if condition_cache is None else condition_cache
    condition_key = (where, spec)
    condition = condition_cache.get(condition_key)
    if condition is None:
        if len(condition_cache) > 256:
            condition_cache.clear()
        definition = parse_index_definition(spec.definition)
        condition = compile_condition(where, definition, _probe_types(spec.column_types))
        condition_cache[condition_key] = condition
    return condition


def _probe_types(column_types) -> dict[str, str]:
    """The types a condition converts its constants to: the stored ones, timestamps in UTC.

    An index built before timestamps were typed in UTC (as ClickHouse reads every Parquet
    timestamp, see ``clickhouse_type_for``) recorded the file's zone, e.g.
    ``DateTime64(6, 'Europe/Paris')``. Its hashes are the same (a timestamp hashes its UTC
    ticks in any zone), but a constant read in that zone is another instant than the one the
    exact filter keeps, which reads it in UTC.
    """
    from bloomskip.clickhouse.types import parse_clickhouse_type

    return {
        name: str(_in_utc(parse_clickhouse_type(text))) if "DateTime" in text else text
        for name, text in column_types
    }


def _in_utc(parsed):
    """``parsed`` with the zone of every DateTime / DateTime64 in it set to UTC."""
    from bloomskip.clickhouse.types import ClickHouseType

    if parsed.name == "DateTime":
        return ClickHouseType("DateTime", ("UTC",))
    if parsed.name == "DateTime64":
        return ClickHouseType("DateTime64", (parsed.arguments[0], "UTC"))
    if parsed.name in ("Nullable", "LowCardinality", "Array", "Map"):
        return ClickHouseType(parsed.name, tuple(_in_utc(item) for item in parsed.arguments))
    return parsed


def probe(condition, index):
    """``condition.may_match(index)``, after reading what it tests of a sliced index.

    Raises:
        ValueError: A malformed payload, or a predicate the engine cannot evaluate.
        FormatError: A slice of a sliced part fails its check.
    """
    prepare = getattr(index, "prepare", None)
    if prepare is not None:
        prepare(condition)
    return condition.may_match(index)


def _engine_index(number, spec, states, indexed, cache):
    """The decoded ``SkipIndex`` of index ``number`` over the indexed files it can use.

    Returns:
        ``(index, usable, problems)``: the index (None when no section is readable), the
        positions in ``states`` of the files it covers, and a warning per file whose payload
        section is corrupt (those files are scanned for this index).
    """
    import numpy as np

    from bloomskip.clickhouse.ddl import parse_index_definition
    from bloomskip.clickhouse.index import SkipIndex
    from bloomskip.dataset.index.sidecar import join_sections

    # The positions are part of the key: ``usable`` maps the index's granules to positions in
    # ``states``, and the same indexed files may sit elsewhere in another query's list (a
    # table's own pruning drops other files per WHERE).
    key = (
        number,
        spec,
        tuple((i, states[i].relative_path, states[i].entry.identity) for i in indexed),
    )
    if key not in cache and any(hasattr(states[i].entry.payloads, "sliced_part") for i in indexed):
        index, usable, problems = _probe_index(number, spec, states, indexed)
        if problems:
            return index, usable, problems
        if len(cache) > 64:
            cache.clear()
        cache[key] = (index, usable, problems)
    if key not in cache:
        payload, good, errors = join_sections(
            [states[i].entry.payloads for i in indexed],
            number,
        )
        usable = [indexed[item] for item in good]
        problems = [
            f"index {spec.definition} not used for {states[indexed[item]].relative_path}, "
            f"scanning it: {exc}"
            for item, exc in errors.items()
        ]
        index = None
        if usable:
            rows = np.concatenate(
                [np.asarray(states[i].entry.granule_rows, np.int64) for i in usable]
            )
            rows = rows[rows > 0]
            definition = parse_index_definition(spec.definition)
            # Kept across queries: probing reads its filters in place (column_filter_spans).
            index = SkipIndex.from_bytes(definition, payload, rows, dict(spec.column_types))
        if problems:
            # Not kept: a rebuilt sidecar may repair the section for the same file identities.
            return index, usable, problems
        if len(cache) > 64:
            # Old keys belong to superseded sidecars or file sets; drop them all.
            cache.clear()
        cache[key] = (index, usable, problems)
    return cache[key]


def _probe_index(number, spec, states, indexed):
    """The index of ``number`` over the indexed files when some of them lie in sliced parts:
    a :class:`~bloomskip.dataset.index.probe.ProbeIndex` whose pieces are each part's chosen
    granules and, for files with plain payloads, their joined payloads.

    Returns:
        ``(index, usable, problems)`` as :func:`_engine_index`.
    """
    import numpy as np

    from bloomskip.clickhouse.ddl import parse_index_definition
    from bloomskip.clickhouse.index import SkipIndex, _index_column_types
    from bloomskip.dataset.index.probe import Piece, ProbeIndex
    from bloomskip.dataset.index.sidecar import join_sections

    definition = parse_index_definition(spec.definition)
    problems, located = [], []
    for i in indexed:
        payloads = states[i].entry.payloads
        try:
            located.append((i, payloads.sliced_part(number) if hasattr(payloads, "sliced_part")
                            else None))  # fmt: skip
        except FormatError as exc:
            problems.append(
                f"index {spec.definition} not used for {states[i].relative_path}, scanning "
                f"it: {exc}"
            )
    plain = [i for i, where in located if where is None]
    plain_first: dict[int, int] = {}
    plain_granules = None
    if plain:
        payload, good, errors = join_sections([states[i].entry.payloads for i in plain], number)
        problems += [
            f"index {spec.definition} not used for {states[plain[item]].relative_path}, "
            f"scanning it: {exc}"
            for item, exc in errors.items()
        ]
        first = 0
        for item in good:
            plain_first[plain[item]] = first
            first += int((np.asarray(states[plain[item]].entry.granule_rows) > 0).sum())
        if good:
            rows = np.concatenate(
                [np.asarray(states[plain[item]].entry.granule_rows, np.int64) for item in good]
            )
            plain_granules = SkipIndex.from_bytes(
                definition, payload, rows[rows > 0], dict(spec.column_types)
            ).granules
    pieces: list[Piece] = []
    usable, rows = [], []
    for i, where in located:
        if where is None:
            if i not in plain_first:
                continue
            granules, first, read_ranges, whole = plain_granules, plain_first[i], None, None
            count = int((np.asarray(states[i].entry.granule_rows) > 0).sum())
        else:
            part, first, count = where
            granules, read_ranges, whole = part.granules, part.read_ranges, part.whole
        usable.append(i)
        file_rows = np.asarray(states[i].entry.granule_rows, np.int64)
        rows.append(file_rows[file_rows > 0])
        chosen = np.arange(first, first + count, dtype=np.int64)
        if pieces and pieces[-1].granules is granules:
            pieces[-1].chosen = np.concatenate((pieces[-1].chosen, chosen))
        else:
            pieces.append(Piece(granules, chosen, read_ranges, whole))
    if not usable:
        return None, usable, problems
    types = _index_column_types(definition, dict(spec.column_types))
    index = ProbeIndex(definition, types, np.concatenate(rows), pieces)
    return index, usable, problems


#: At most this many predicate atoms get their own verdict in an explanation (each is compiled
#: and probed against every index again); a longer WHERE is described as a whole only.
MAX_ATOMS = 32


def predicate_atoms(where: str, limit: int | None = None) -> list[str]:
    """Split a WHERE into its predicate atoms: the operands AND, OR and NOT combine.

    An atom under an odd number of NOTs is returned as ``NOT (atom)``, so that each atom is
    evaluated as it counts in the WHERE. Repeated atoms are listed once.

    Args:
        where: ClickHouse WHERE expression.
        limit: Stop once more than this many atoms are found (the first ``limit + 1`` are
            returned).

    Returns:
        The atoms' SQL texts (ClickHouse dialect) in the WHERE's order; the WHERE itself when
        it is one atom.

    Raises:
        UnsupportedPredicateError: The WHERE does not parse.

    Example:
        >>> predicate_atoms("k = 1 AND NOT (hasToken(s, 'a') OR s LIKE '%b%')")
        ['k = 1', "NOT (hasToken(s, 'a'))", "NOT (s LIKE '%b%')"]
    """
    from sqlglot import exp

    from bloomskip.dataset.sql.translate import parse_where

    root = parse_where(where)
    atoms: dict[str, None] = {}
    pending = [(root, False)]
    while pending:  # no recursion: a WHERE may chain thousands of ORs
        node, negated = pending.pop()
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.Not):
            pending.append((node.this, not negated))
        elif isinstance(node, (exp.And, exp.Or)):
            pending.extend([(node.expression, negated), (node.this, negated)])
        elif node is root and not negated:
            return [where]
        else:
            text = node.sql(dialect="clickhouse")
            atoms.setdefault(f"NOT ({text})" if negated else text)
            if limit is not None and len(atoms) > limit:
                break
    return list(atoms)


@dataclass
class AtomOutcome:
    """What each index decides for one predicate atom alone.

    Attributes:
        predicate: The atom's SQL text.
        indexes: One :class:`IndexOutcome` per index of the explanation (``useful`` False for
            an index that cannot evaluate this atom).
    """

    predicate: str
    indexes: list[IndexOutcome]


def atom_outcomes(
    result: Explanation, condition_cache: dict | None = None
) -> list[AtomOutcome] | None:
    """Evaluate each predicate atom of the explanation's WHERE alone against each index.

    The indexes already decoded for the WHERE are probed again (nothing is read); each atom is
    compiled as its own WHERE by the same engine, so an AND's verdict is the AND of its atoms'
    and an OR's the OR.

    Args:
        result: From :func:`prune` (its ``where`` set).
        condition_cache: Compiled conditions keyed by WHERE and index, reused.

    Returns:
        One :class:`AtomOutcome` per atom of :func:`predicate_atoms`, or None when the WHERE has
        more than :data:`MAX_ATOMS` atoms.

    Example:
        >>> [atom.predicate for atom in atom_outcomes(explanation)]  # doctest: +SKIP
        ['k = 5', "hasToken(s, 'error')"]
    """
    if result.where is None:
        return []
    atoms = predicate_atoms(result.where, MAX_ATOMS)
    if len(atoms) > MAX_ATOMS:
        return None
    import numpy as np

    outcomes = []
    for atom in atoms:
        per_index = []
        for outcome in result.indexes:
            item = IndexOutcome(outcome.definition, useful=False)
            item.keep = [keep.copy() for keep in outcome.keep]
            per_index.append(item)
            if outcome.engine is None:
                item.note = outcome.note or "not used"
                continue
            spec, index, usable = outcome.engine
            try:
                condition = _condition(spec, atom, condition_cache)
                if not condition.useful:
                    item.note = "this index cannot evaluate this predicate"
                    continue
                may_match = np.asarray(probe(condition, index), bool)
                _spread(item, may_match, usable, result.files, result.granule)
            except ValueError as exc:
                item.note = f"not used: {exc}"
                continue
            item.useful = True
            item.engine = outcome.engine
        outcomes.append(AtomOutcome(atom, per_index))
    return outcomes


def saturated(outcome: IndexOutcome, where: str, condition_cache: dict | None = None) -> bool:
    """Whether an index is saturated for ``where``: it evaluated it, kept every granule, and
    would have skipped a granule whose filters hold nothing.

    The last test tells saturation from structure: a predicate that keeps every granule
    whatever the filters hold (a negation, an OR with what the index cannot evaluate) says
    nothing about them. Keeping every granule otherwise means that every granule's filters
    hold every value or token the predicate probes: the value is in every granule, or the
    filters are too full to tell (``--analyze`` counts which).

    Args:
        outcome: An index's verdict for ``where`` (from :func:`prune` or
            :func:`atom_outcomes`).
        where: The WHERE (or atom) it was evaluated for.
        condition_cache: Compiled conditions keyed by WHERE and index, reused.

    Returns:
        True when saturated.

    Example:
        >>> saturated(explanation.indexes[0], explanation.where)  # doctest: +SKIP
        False
    """
    import numpy as np

    from bloomskip.clickhouse.granule import BloomFilterGranules, TextGranules

    if not outcome.useful or outcome.engine is None or not outcome.granules:
        return False
    if outcome.granules_skipped:
        return False
    spec, index, _ = outcome.engine
    definition = index.definition
    columns = len(definition.expressions)
    types = index.index_column_types
    if definition.type == "parquet_bloom_filter":
        empty = _empty_parquet_bloom(definition, types)
    elif definition.type == "bloom_filter":
        # One granule of one distinct value: a VarUInt 1, then each column's all-zero filter.
        width = (definition.bits_per_row + 7) // 8
        empty = BloomFilterGranules.from_bytes(
            definition, b"\x01" + bytes(width * columns), 1, types
        )
    else:
        empty = TextGranules(
            definition, np.zeros((1, columns * definition.size_bytes), np.uint8), types
        )
    try:
        return not bool(_condition(spec, where, condition_cache).may_match(empty)[0])
    except ValueError:
        return False


def _empty_parquet_bloom(definition, types):  # noqa: ANN001, ANN202 - granules
    """One empty 32-byte split-block filter of the column's type (no filter where no
    constant of the type can be probed)."""
    from bloomskip.parquet.filter import SplitBlockBloomFilter
    from bloomskip.parquet.granules import ParquetBloomGranules, encode_granule, probe_arrow_type

    arrow_type = probe_arrow_type(types[0]) if types else None
    bloom = None if arrow_type is None else SplitBlockBloomFilter(32, value_type=arrow_type)
    return ParquetBloomGranules.from_bytes(definition, encode_granule(bloom), 1, types)


def index_fill(states: list[FileState], sidecar: Sidecar, saturation_fpr: float) -> list[dict]:
    """Each sidecar index's per-granule fill over the files it still describes.

    Args:
        states: From :func:`file_states` with ``sidecar``.
        sidecar: The sidecar.
        saturation_fpr: A granule whose estimated false-positive rate (``fill ** k``) reaches
            this is saturated.

    Returns:
        Per index ``{"name", "definition", "fill_ratio", "estimated_fpr", "saturated",
        "boundaries", "files"}``: per non-empty granule of its files in dataset order (the
        fullest column of a multi-column index), and the granule numbers where each of
        ``files`` (their sidecar names) starts; empty lists for an index no file has readable.

    Example:
        >>> index_fill(states, sidecar, 0.5)[0]["saturated"][:3]  # doctest: +SKIP
        array([False, False,  True])
    """
    import numpy as np

    from bloomskip.clickhouse.ddl import parse_index_definition

    indexed = [i for i, state in enumerate(states) if state.entry is not None]
    filled = []
    for number, spec in enumerate(sidecar.indexes):
        index, usable, _ = (
            _engine_index(number, spec, states, indexed, {}) if indexed else (None, [], [])
        )
        fill = fpr = np.zeros(0)
        boundaries: list[int] = []
        if index is not None:
            statistics = index.granule_statistics()
            columns = index.column_count
            fill = statistics.column("fill_ratio").to_numpy().reshape(-1, columns).max(axis=1)
            fpr = statistics.column("estimated_fpr").to_numpy().reshape(-1, columns).max(axis=1)
            counts = [int((np.asarray(states[i].entry.granule_rows) > 0).sum()) for i in usable]
            boundaries = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(int).tolist()
        filled.append(
            {
                "name": parse_index_definition(spec.definition).name,
                "definition": spec.definition,
                "fill_ratio": fill,
                "estimated_fpr": fpr,
                "saturated": fpr >= saturation_fpr,
                "boundaries": boundaries,
                "files": [states[i].relative_path for i in usable] if index is not None else [],
            }
        )
    return filled
