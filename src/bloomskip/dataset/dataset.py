"""``bloomskip.Dataset``: ClickHouse skip indexes over Parquet / Arrow IPC files, in a sidecar."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from pathlib import Path
from typing import TYPE_CHECKING

from bloomskip.dataset.sources import IdentityCache, discover, glob_root, is_glob, stat_key

if TYPE_CHECKING:
    from concurrent.futures import Future

    import pyarrow as pa
    import pyarrow.dataset as pads

    from bloomskip.dataset.prune import PruneResult
    from bloomskip.dataset.sidecar import Sidecar

DIRECTORY_SIDECAR = "_bloomskip.index"


def default_sidecar_path(dataset: str | os.PathLike) -> Path:
    """Return where the sidecar of a DATASET argument lives by default.

    ``_``-prefixed names are ignored by ``pyarrow.dataset`` (and by our discovery), so the
    sidecar never shows up as a data file.

    Args:
        dataset: A file, a directory or a glob.

    Returns:
        ``<dir>/_<name>.bloomskip`` for a file, ``<dir>/_bloomskip.index`` for a directory and
        ``<root>/_bloomskip-<hash of the pattern>.index`` for a glob.

    Example:
        >>> default_sidecar_path("logs")  # doctest: +SKIP
        PosixPath('logs/_bloomskip.index')
    """
    text = os.fspath(dataset)
    path = Path(text)
    if path.is_dir():
        return path / DIRECTORY_SIDECAR
    if is_glob(text) and not path.exists():
        root = glob_root(text)
        pattern = Path(os.path.relpath(Path(text).absolute(), root.absolute())).as_posix()
        digest = hashlib.sha256(pattern.encode("utf-8")).hexdigest()[:12]
        return root / f"_bloomskip-{digest}.index"
    return path.parent / f"_{path.name}.bloomskip"


def _index_type_key(arrow_type) -> str:
    """How an index sees a column's type: its ClickHouse type without LowCardinality."""
    from bloomskip.clickhouse.types import clickhouse_type_for, parse_clickhouse_type
    from bloomskip.errors import BloomskipError

    try:
        return str(parse_clickhouse_type(clickhouse_type_for(arrow_type)).base())
    except BloomskipError:
        return str(arrow_type)


def _new_connection():
    """A DuckDB connection caching Parquet footers (``parquet_metadata_cache``)."""
    import duckdb

    connection = duckdb.connect()
    connection.execute("SET GLOBAL parquet_metadata_cache = true")
    return connection


@dataclass
class BuildReport:
    """What :meth:`Dataset.build_index` did.

    Attributes:
        sidecar: Path of the sidecar written.
        files: Files in the dataset.
        rebuilt: Relative paths of the files (re)indexed; the others were reused.
        index_bytes: Size of the sidecar in bytes.
        warnings: One line per index no predicate can ever use (e.g. a text index over a
            type ClickHouse never evaluates it for).
    """

    sidecar: Path
    files: int
    rebuilt: list[str]
    index_bytes: int
    warnings: list[str] = dataclass_field(default_factory=list)


class Dataset:
    """A folder, glob or file of Parquet (or one Arrow IPC file) with a sidecar skip index.

    Args:
        path: A Parquet file, an Arrow IPC file, a directory of Parquet files or a glob.
        sidecar: Where the index lives (default: :func:`default_sidecar_path`).

    Raises:
        BloomskipError: The dataset holds no file, or a file is not Parquet / Arrow IPC.

    A ``Dataset`` caches the decoded index between queries; use one per thread. Its files are
    listed once, when it is created (as ``pyarrow.dataset`` does): a file added or removed later
    is seen by a new ``Dataset``, while a listed file that changes is detected on every query.

    Example:
        >>> ds = Dataset("logs/")  # doctest: +SKIP
        >>> ds.build_index(["user_id TYPE bloom_filter(0.01)", "msg TYPE tokenbf_v1(8192, 3, 0)"])
        >>> ds.query("hasToken(msg, 'timeout') AND user_id = 42").num_rows
        3
    """

    def __init__(self, path: str | os.PathLike, sidecar: str | os.PathLike | None = None) -> None:
        self.path = os.fspath(path)
        self.root, self.files = discover(self.path)
        self.sidecar_path = Path(sidecar) if sidecar is not None else default_sidecar_path(path)
        # Everything below is derived from files and re-validated on use (sidecar and sources
        # by stat, decoded indexes by the sources' identities), so a reused Dataset answers
        # from memory but never from a stale state.
        self._engine_cache: dict = {}
        self._condition_cache: dict = {}
        self._sidecar_cache: tuple | None = None
        self._identities = IdentityCache()
        self._duckdb = None
        self._duckdb_sources: tuple | None = None
        self._pending_connection: Future | None = None
        self._empty_results: dict = {}
        self._layouts: dict = {}
        self._schema = None
        self._file_schemas: list | None = None
        self._uniform = True

    def duckdb_connection(self):
        """The DuckDB connection :meth:`query` runs on (created on first use, then reused).

        It caches Parquet footers (``parquet_metadata_cache``), so a repeated query does not
        parse them again. DuckDB re-validates that cache only by modification time in seconds,
        so the connection is replaced whenever a file of the dataset changes (its ``stat``).
        """
        try:
            sources = tuple(stat_key(source.path) for source in self.files)
        except OSError:
            sources = None  # a vanished file: never reuse cached footers
        if self._duckdb is None or sources is None or sources != self._duckdb_sources:
            if self._duckdb is not None:
                self._duckdb.close()
            pending, self._pending_connection = self._pending_connection, None
            # A connection opened ahead (see query) is new: it has cached no footer yet.
            self._duckdb = pending.result() if pending is not None else _new_connection()
            self._empty_results.clear()
            # A file that changed may have changed its columns too.
            self._schema = self._file_schemas = None
            self._duckdb_sources = sources
        return self._duckdb

    @property
    def schema(self) -> pa.Schema:
        """The dataset's Arrow schema: every file's columns by name, in order of first
        appearance, each with its type in the first file that has it (read once).

        Files may differ (a later file adds a column, another stores it with another type):
        queries then see the one schema DuckDB's ``union_by_name`` scan gives the whole
        dataset (:meth:`scan_schema`), and an index over a column whose type differs between
        files is refused (:meth:`schema_conflicts`).

        Raises:
            FormatError: A file's footer cannot be read.
        """
        import pyarrow as pa

        if self._schema is None:
            fields: dict[str, pa.Field] = {}
            for schema in self.file_schemas():
                for field in schema:
                    fields.setdefault(field.name, field)
            self._schema = pa.schema(list(fields.values()))
        return self._schema

    def file_schemas(self) -> list[pa.Schema]:
        """The Arrow schema of each file, in dataset order (footers read once).

        Returns:
            One ``pyarrow.Schema`` per file of :attr:`files`.

        Raises:
            FormatError: A file's footer cannot be read.

        Example:
            >>> [s.names for s in Dataset("logs/").file_schemas()]  # doctest: +SKIP
            [['user_id', 'message'], ['user_id', 'message', 'extra']]
        """
        import pyarrow as pa
        import pyarrow.parquet as pq

        from bloomskip.errors import FormatError

        if self._file_schemas is None:
            schemas = []
            stored = []  # the Parquet schemas: physical and logical types
            for source in self.files:
                try:
                    if source.format == "parquet":
                        with pq.ParquetFile(source.path) as parquet:
                            schemas.append(parquet.schema_arrow)
                            stored.append(parquet.schema)
                    else:
                        with pa.memory_map(str(source.path)) as handle:
                            schemas.append(pa.ipc.open_file(handle).schema)
                except (pa.ArrowException, OSError) as exc:
                    raise FormatError(
                        f"cannot read the schema: {exc}", field="footer", source=str(source.path)
                    ) from exc
            # Equal Arrow schemas can hide types DuckDB reads differently (an INT96 and an
            # INT64 nanosecond timestamp are both timestamp[ns] to Arrow, TIMESTAMP and
            # TIMESTAMP_NS to DuckDB): the files agree only if their Parquet schemas do too.
            self._uniform = all(schema.equals(schemas[0]) for schema in schemas[1:]) and all(
                schema.equals(stored[0]) for schema in stored[1:]
            )
            self._file_schemas = schemas
        return self._file_schemas

    def uniform(self) -> bool:
        """Whether every file has the same schema: Arrow's (names, order and types) and the
        Parquet one it is read from (physical and logical types).

        Returns:
            True when the files agree; queries then read them without a ``union_by_name``
            reader over all of them.

        Raises:
            FormatError: A file's footer cannot be read.

        Example:
            >>> Dataset("logs/").uniform()  # doctest: +SKIP
            True
        """
        self.file_schemas()
        return self._uniform

    def schema_conflicts(self) -> dict[str, str]:
        """Columns whose type differs between files, each with a description naming them.

        Types are compared as an index hashes them (their ClickHouse types, LowCardinality
        aside): a dictionary-encoded and a plain string column agree.

        Returns:
            ``{column: "a.parquet: int64, b.parquet: string"}``; empty when the files agree.

        Raises:
            FormatError: A file's footer cannot be read.

        Example:
            >>> Dataset("drift/").schema_conflicts()  # doctest: +SKIP
            {'id': 'part-0.parquet: int64, part-2.parquet: string'}
        """
        from bloomskip.dataset.vocabulary import relative_to

        seen: dict[str, dict[str, str]] = {}
        for source, schema in zip(self.files, self.file_schemas(), strict=True):
            for field in schema:
                seen.setdefault(field.name, {}).setdefault(
                    _index_type_key(field.type),
                    f"{relative_to(source.path, self.root)}: {field.type}",
                )
        return {name: ", ".join(kinds.values()) for name, kinds in seen.items() if len(kinds) > 1}

    def scan_schema(self) -> pa.Schema:
        """The schema of the rows a query returns: DuckDB's scan of the whole dataset
        (``union_by_name``: columns by name, types widened where files differ), whichever
        row groups the index keeps.

        Returns:
            The ``pyarrow.Schema`` of every query's result (before ``columns`` selects).

        Raises:
            BloomskipError: DuckDB cannot read the files together.

        Example:
            >>> Dataset("drift/").scan_schema().field("id").type  # doctest: +SKIP
            DataType(string)
        """
        return self._scan_schema(self.duckdb_connection())

    def _scan_schema(self, connection) -> pa.Schema:
        import duckdb

        from bloomskip.dataset.query import full_scan_source
        from bloomskip.errors import BloomskipError

        key = ("scan schema",)
        if key not in self._empty_results:
            if all(source.format == "parquet" for source in self.files):
                try:
                    self._empty_results[key] = (
                        connection.cursor()
                        .sql(f"SELECT * FROM {full_scan_source(self.files)} LIMIT 0")
                        .to_arrow_table()
                        .schema
                    )
                except duckdb.Error as exc:
                    raise BloomskipError(f"DuckDB cannot read the dataset: {exc}") from exc
            else:
                self._empty_results[key] = self.schema
        return self._empty_results[key]

    def load_sidecar(self) -> Sidecar | None:
        """Return the sidecar, or None when there is none.

        The verified sidecar is kept, and read again only when its ``stat`` changes.

        Raises:
            FormatError: The sidecar exists but is corrupt or cannot be read (callers then
                scan or rebuild, as for any unusable index).
        """
        from bloomskip.dataset.sidecar import read_sidecar
        from bloomskip.errors import FormatError

        try:
            key = stat_key(self.sidecar_path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        if self._sidecar_cache is None or self._sidecar_cache[0] != key:
            try:
                sidecar = read_sidecar(self.sidecar_path)
            except OSError as exc:
                raise FormatError(
                    f"cannot read the index: {exc}", source=str(self.sidecar_path)
                ) from exc
            self._sidecar_cache = (key, sidecar)
        return self._sidecar_cache[1]

    def build_index(
        self,
        indexes: Sequence[str] | None = None,
        *,
        granule: str | int = "row-group",
        progress: bool | None = None,
    ) -> BuildReport:
        """Build or refresh the sidecar index, re-indexing only new or changed files.

        Args:
            indexes: ClickHouse index definitions, e.g. ``"user_id TYPE bloom_filter(0.01)"``.
                None keeps the definitions (and granule) of the existing sidecar.
            granule: ``"row-group"`` (a record batch for Arrow IPC) or rows per granule.
            progress: Show a progress bar (default: only on a terminal).

        Returns:
            A :class:`BuildReport`.

        Raises:
            BloomskipError: Bad definitions, no definitions and no sidecar, data the engine
                cannot hash, or a sidecar location that cannot be written.

        Example:
            >>> Dataset("logs/").build_index(["msg TYPE tokenbf_v1(8192, 3, 0)"]).rebuilt
            ['part-0.parquet', 'part-1.parquet']
        """
        from bloomskip.dataset.build import (
            build_sidecar,
            never_used_warnings,
            parse_granule,
            prepare_index,
        )
        from bloomskip.dataset.sidecar import FORMAT_VERSION, write_sidecar
        from bloomskip.errors import BloomskipError, FormatError

        try:
            previous = self.load_sidecar()
        except FormatError:
            previous = None  # a corrupt sidecar is simply rebuilt
        schema = self.schema
        conflicts = self.schema_conflicts()
        if indexes is None or len(indexes) == 0:
            if previous is None:
                raise BloomskipError("no --index given and no existing index to refresh")
            prepared = [
                prepare_index(spec.definition, schema, dict(spec.column_types), conflicts)
                for spec in previous.indexes
            ]
            granule = previous.granule
        else:
            prepared = [prepare_index(text, schema, None, conflicts) for text in indexes]
            granule = parse_granule(granule)
        sidecar, rebuilt = build_sidecar(
            self.files, self.root, prepared, granule, previous, progress
        )
        if (
            rebuilt
            or previous is None
            or previous.format_version != FORMAT_VERSION  # upgraded to the current format
            or len(previous.files) != len(sidecar.files)
        ):
            try:
                write_sidecar(sidecar, self.sidecar_path)
            except OSError as exc:
                raise BloomskipError(f"cannot write the index {self.sidecar_path}: {exc}") from exc
        return BuildReport(
            self.sidecar_path,
            len(self.files),
            rebuilt,
            self.sidecar_path.stat().st_size,
            [warning for item in prepared for warning in never_used_warnings(item)],
        )

    def prune(self, where: str) -> list[tuple[Path, int]]:
        """Return the ``(file, row_group)`` pairs that may hold rows matching ``where``.

        Args:
            where: ClickHouse WHERE expression.

        Returns:
            Surviving pairs in dataset order; for Arrow IPC the number is a record batch.

        Example:
            >>> Dataset("logs/").prune("user_id = 42")  # doctest: +SKIP
            [(PosixPath('/data/logs/part-3.parquet'), 17)]
        """
        return self.explain(where).surviving()

    def explain(self, where: str) -> PruneResult:
        """Prune and return the full decision: per file, per index, and any warnings.

        A missing or corrupt sidecar, or a changed file, is not an error: the affected files
        are scanned, and :attr:`PruneResult.warnings` says why.

        Args:
            where: ClickHouse WHERE expression.

        Returns:
            A :class:`~bloomskip.dataset.prune.PruneResult`.
        """
        from bloomskip.dataset.prune import CHANGED, file_states, prune
        from bloomskip.dataset.translate import check_where
        from bloomskip.errors import BloomskipError, FormatError

        check_where(where)  # a malformed WHERE is the user's error, reported before any work
        warnings = []
        try:
            sidecar = self.load_sidecar()
        except FormatError as exc:
            sidecar = None
            warnings.append(f"index ignored, scanning every file: {exc}")
        if sidecar is None and not warnings:
            warnings.append(f"no index at {self.sidecar_path}: scanning every file")
        try:
            states = file_states(self.files, self.root, sidecar, self._layouts, self._identities)
        except OSError as exc:
            raise BloomskipError(f"cannot read a file of the dataset: {exc}") from exc
        result = prune(where, states, sidecar, self._engine_cache, self._condition_cache)
        for state in states:
            if sidecar is not None and state.entry is None:
                verb = "changed since it was indexed" if state.status == CHANGED else "not indexed"
                warnings.append(f"{state.relative_path}: {verb}; scanning it")
        result.warnings = warnings + result.warnings
        return result

    def pruned(self, where: str) -> pads.Dataset:
        """Return the surviving row groups as a ``pyarrow.dataset.Dataset``, without reading them.

        Hand it to DuckDB (``duckdb.sql("SELECT ... FROM ds WHERE ...")``) or Polars
        (``polars.scan_pyarrow_dataset(ds)``); neither copies the data up front. Apply the exact
        predicate there: the row groups may hold non-matching rows too. (Count rows by scanning:
        pyarrow 26's ``Dataset.count_rows()`` reports whole files for row-group subsets.)

        Args:
            where: ClickHouse WHERE expression used for pruning.

        Returns:
            A ``pyarrow.dataset.Dataset`` with the dataset's schema.
        """
        from bloomskip.dataset.query import surviving_dataset

        return surviving_dataset(self.explain(where), self.schema)

    def query(
        self,
        where: str,
        columns: Sequence[str] | str | None = None,
        limit: int | None = None,
    ) -> pa.Table:
        """Return the rows matching ``where``, reading only the surviving row groups.

        Args:
            where: ClickHouse WHERE expression (hasToken, startsWith, LIKE, IN, has, ...).
            columns: Columns to return; all when None.
            limit: At most this many rows.

        Returns:
            A ``pyarrow.Table`` holding exactly the rows ClickHouse returns for ``where`` over
            the same files (docs/queries.md), with the columns of :meth:`scan_schema`.

        Raises:
            UnsupportedPredicateError: The WHERE has no exact DuckDB translation.

        Example:
            >>> Dataset("logs/").query("user_id = 42", ["message"]).num_rows  # doctest: +SKIP
            12
        """
        names = list(columns) if columns is not None and not isinstance(columns, str) else columns
        if self._duckdb is None and self._pending_connection is None:
            from concurrent.futures import ThreadPoolExecutor

            # Opening DuckDB takes ~10-15 ms and releases the GIL: do it while pruning.
            opener = ThreadPoolExecutor(max_workers=1)
            self._pending_connection = opener.submit(_new_connection)
            opener.shutdown(wait=False)
        result = self.explain(where)
        return self.run(result, where, names, limit)

    def run(
        self,
        result: PruneResult,
        where: str,
        columns: Sequence[str] | str | None = None,
        limit: int | None = None,
    ) -> pa.Table:
        """Evaluate ``where`` exactly over the row groups a pruning result keeps.

        Args:
            result: From :meth:`explain` with the same ``where``.
            where: ClickHouse WHERE expression.
            columns: Column names, or ClickHouse expressions as one comma-separated string.
            limit: At most this many rows.

        Returns:
            A ``pyarrow.Table`` with the columns and types of :meth:`scan_schema`.

        Raises:
            UnsupportedPredicateError: The WHERE has no exact DuckDB translation.

        Example:
            >>> ds.run(ds.explain("user_id = 42"), "user_id = 42").num_rows  # doctest: +SKIP
            12
        """
        from bloomskip.dataset.query import run_query

        connection = self.duckdb_connection()
        return run_query(
            result,
            self.schema,
            where,
            columns,
            limit,
            connection,
            self._empty_results,
            scan_schema=self._scan_schema(connection),
            uniform=self.uniform(),
        )
