"""Real ClickHouse MergeTree parts, written by chdb, to compare bloomskip against.

A :class:`ClickHouseHarness` works in the run's one chdb session (``chdb_session`` in
tests/conftest.py), keeping its tables in a database of its own. ``harness.create_part(...)``
creates a MergeTree table, fills it with one INSERT ... SELECT, and returns a :class:`Part` with
everything a test needs: the part directory, rows per data granule, the column types and index
definitions from ClickHouse's own metadata file, the rows in part order as Arrow, and the
decompressed skip-index streams.

Tables are created with ``packed_skip_index_max_bytes = 0`` (standalone ``skp_idx_<name>.idx``
files) and ``compress_marks = 0`` unless the caller overrides the settings.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pytest

from bloomskip.clickhouse.ddl import IndexDefinition, parse_create_table

if TYPE_CHECKING:
    from chdb.session import Session

DEFAULT_SETTINGS: dict[str, object] = {
    "index_granularity": 128,
    "packed_skip_index_max_bytes": 0,
    "compress_marks": 0,
}

#: Query settings of every CREATE TABLE: LowCardinality over numbers is legal but needs this. It
#: goes in the statement (ClickHouse applies it to the query, not the table), not in a SET that
#: would change the session every test module shares.
CREATE_QUERY_SETTINGS: dict[str, object] = {"allow_suspicious_low_cardinality_types": 1}


def decompress_stream(data: bytes, source: str = "") -> bytes:
    """Decompress a ClickHouse compressed stream with bloomskip's reader (checksums verified)."""
    from bloomskip.clickhouse.compression import read_compressed_stream

    return read_compressed_stream(data, source)


@dataclass
class Part:
    """One MergeTree part written by chdb.

    Attributes:
        database, table, name: Where it lives.
        path: The part directory.
        granule_rows: Rows per data granule (the final 0-row mark removed).
        columns: ClickHouse type per column, from the table's metadata ``.sql`` file.
        indexes: The table's Bloom-filter index definitions, by name.
        data: The rows in part order (``_part_offset``) as an Arrow table.
        metadata_sql: The ATTACH TABLE text ClickHouse stored.
    """

    database: str
    table: str
    name: str
    path: Path
    granule_rows: np.ndarray
    columns: dict[str, str]
    indexes: dict[str, IndexDefinition]
    data: pa.Table
    metadata_sql: str
    harness: ClickHouseHarness = field(repr=False)

    @property
    def qualified_table(self) -> str:
        return f"{self.database}.{self.table}"

    def index_file(self, index_name: str) -> Path:
        """Path of ``skp_idx_<name>.idx`` (requires ``packed_skip_index_max_bytes = 0``)."""
        path = self.path / f"skp_idx_{index_name}.idx"
        if not path.is_file():
            pytest.fail(f"{path.name} not found in {self.path}: {sorted(os.listdir(self.path))}")
        return path

    def index_stream(self, index_name: str) -> bytes:
        """The decompressed bytes of ``skp_idx_<name>.idx``."""
        path = self.index_file(index_name)
        return decompress_stream(path.read_bytes(), path.name)

    def evaluate_column(self, definition: IndexDefinition, column: int = 0) -> pa.ChunkedArray:
        """The values of index column ``column`` of ``definition`` over this part's rows."""
        return definition.index_columns[column].evaluate(self.data)

    def explain_granules(self, where: str, index_name: str) -> tuple[int, int]:
        """(kept, total) data granules for ``WHERE where`` using only index ``index_name``."""
        return self.harness.explain_granules(self.qualified_table, where, index_name)


class ClickHouseHarness:
    """Creates MergeTree parts in the shared chdb session and reads them back.

    Args:
        session: The run's chdb session.
        path: Its data directory (``metadata_path`` in ``system.tables`` is relative to it).
        database: The database this harness creates its tables in (created if missing).
    """

    def __init__(self, session: Session, path: Path, database: str) -> None:
        self.path = path
        self.session = session
        self._names = itertools.count()
        self.database = database
        self.query(f"CREATE DATABASE IF NOT EXISTS {self.database} ENGINE = Atomic")

    def query(self, sql: str, fmt: str = "CSV") -> str:
        """Run a statement; return its output as text."""
        result = self.session.query(sql, fmt)
        return result.bytes().decode() if hasattr(result, "bytes") else str(result)

    def arrow(self, sql: str) -> pa.Table:
        """Run a query; return the result as an Arrow table."""
        return self.session.query(sql, "ArrowTable")

    def metadata_sql(self, table: str) -> str:
        """The ``ATTACH TABLE`` statement ClickHouse keeps for ``table`` in its metadata folder."""
        metadata_path = (
            self.arrow(
                "SELECT metadata_path FROM system.tables WHERE "
                f"database = '{self.database}' AND name = '{table}'"
            )
            .column(0)[0]
            .as_py()
        )
        return (self.path / metadata_path).read_text()

    def create_part(
        self,
        columns: Mapping[str, str] | Sequence[tuple[str, str]],
        indexes: Sequence[str],
        select_sql: str | Sequence[str],
        *,
        optimize: bool = False,
        order_by: str | None = None,
        settings: Mapping[str, object] | None = None,
        insert_settings: Mapping[str, object] | None = None,
        table: str | None = None,
        read_settings: Mapping[str, object] | None = None,
    ) -> Part:
        """Create a MergeTree table, insert ``select_sql`` once, and describe the single part.

        Args:
            columns: ``{name: ClickHouse type}`` in table order.
            indexes: INDEX clauses, e.g. ``"INDEX i s TYPE tokenbf_v1(64, 2, 0) GRANULARITY 2"``.
            select_sql: A SELECT producing the rows, columns in table order; several SELECTs are
                inserted one after the other (one part each).
            optimize: Merge the parts with ``OPTIMIZE TABLE ... FINAL`` (the merge rewrites the
                skip indexes, and its granules follow the source parts' boundaries).
            order_by: Sorting key (``tuple()`` when None: rows keep insertion order).
            settings: MergeTree settings merged over :data:`DEFAULT_SETTINGS`.
            insert_settings: Query settings for the INSERT (e.g. ``max_block_size``).
            table: Table name; a fresh one when None.
            read_settings: Query settings for reading the rows back as Arrow.

        Returns:
            The part (the table must end up with exactly one active part).
        """
        column_items = list(columns.items()) if isinstance(columns, Mapping) else list(columns)
        name = table or f"t{next(self._names)}"
        qualified = f"{self.database}.{name}"
        merged = {**DEFAULT_SETTINGS, **(settings or {}), **CREATE_QUERY_SETTINGS}
        definition = ",\n    ".join(
            [f"`{column}` {type_name}" for column, type_name in column_items] + list(indexes)
        )
        setting_text = ", ".join(f"{key} = {_literal(value)}" for key, value in merged.items())
        self.query(f"DROP TABLE IF EXISTS {qualified} SYNC")
        self.query(
            f"CREATE TABLE {qualified} (\n    {definition}\n) ENGINE = MergeTree "
            f"ORDER BY {order_by or 'tuple()'} SETTINGS {setting_text}"
        )
        insert_suffix = ""
        if insert_settings:
            insert_suffix = " SETTINGS " + ", ".join(
                f"{key} = {_literal(value)}" for key, value in insert_settings.items()
            )
        for statement in [select_sql] if isinstance(select_sql, str) else select_sql:
            self.query(f"INSERT INTO {qualified} {statement}{insert_suffix}")
        if optimize:
            self.query(f"OPTIMIZE TABLE {qualified} FINAL")
        return self.describe_part(name, [c for c, _ in column_items], read_settings)

    def describe_part(
        self,
        table: str,
        column_names: Sequence[str],
        read_settings: Mapping[str, object] | None = None,
    ) -> Part:
        """Describe the single active part of ``table``."""
        qualified = f"{self.database}.{table}"
        parts = self.arrow(
            "SELECT name, path FROM system.parts WHERE active AND "
            f"database = '{self.database}' AND table = '{table}'"
        ).to_pylist()
        if len(parts) != 1:
            pytest.fail(f"{qualified} has {len(parts)} active parts; the fixtures expect one")
        part_name, part_path = parts[0]["name"], Path(parts[0]["path"])
        granules = self.arrow(
            f"SELECT rows_in_granule FROM mergeTreeIndex('{self.database}', '{table}') "
            f"WHERE part_name = '{part_name}' ORDER BY mark_number"
        ).column(0)
        granule_rows = np.asarray(granules.to_numpy(), dtype=np.int64)
        while granule_rows.size and granule_rows[-1] == 0:
            granule_rows = granule_rows[:-1]
        metadata_sql = self.metadata_sql(table)
        columns, indexes = parse_create_table(metadata_sql)
        read_suffix = ""
        if read_settings:
            read_suffix = " SETTINGS " + ", ".join(
                f"{key} = {_literal(value)}" for key, value in read_settings.items()
            )
        selected = ", ".join(f"`{column}`" for column in column_names)
        data = self.arrow(
            f"SELECT {selected} FROM {qualified} WHERE _part = '{part_name}' "
            f"ORDER BY _part_offset{read_suffix}"
        )
        return Part(
            database=self.database,
            table=table,
            name=part_name,
            path=part_path,
            granule_rows=granule_rows,
            columns=columns,
            indexes={d.name: d for d in indexes},
            data=data,
            metadata_sql=metadata_sql,
            harness=self,
        )

    def explain_granules(
        self, qualified_table: str, where: str, index_name: str
    ) -> tuple[int, int]:
        """(kept, total) data granules ClickHouse selects for ``WHERE where`` with one index.

        Other skip indexes of the table are switched off with ``ignore_data_skipping_indices``
        so the count reflects ``index_name`` alone.
        """
        names = (
            self.arrow(
                "SELECT name FROM system.data_skipping_indices WHERE "
                f"database || '.' || table = '{qualified_table}'"
            )
            .column(0)
            .to_pylist()
        )
        others = [n for n in names if n != index_name]
        settings = "use_skip_indexes = 1, use_query_condition_cache = 0"
        if others:
            settings += f", ignore_data_skipping_indices = '{','.join(others)}'"
        text = self.query(
            f"EXPLAIN indexes = 1 SELECT * FROM {qualified_table} WHERE {where} "
            f"SETTINGS {settings}",
            "TabSeparatedRaw",
        )
        return _granules_after_index(text, index_name)


def explain_granules(explain: str, index_name: str) -> tuple[int, int] | None:
    """``(kept, total)`` from the ``Granules: x/y`` line of ``index_name`` in an
    ``EXPLAIN indexes = 1`` text; None when the index is not listed."""
    lines = [line.strip() for line in explain.splitlines()]
    for number, line in enumerate(lines):
        if line == f"Name: {index_name}":
            for following in lines[number + 1 : number + 8]:
                if following.startswith("Granules:"):
                    kept, total = following.split(":", 1)[1].strip().split("/")
                    return int(kept), int(total)
    return None


def _granules_after_index(explain: str, index_name: str) -> tuple[int, int]:
    granules = explain_granules(explain, index_name)
    if granules is None:
        pytest.fail(f"index {index_name} not in EXPLAIN output:\n{explain}")
    return granules


def _literal(value: object) -> str:
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return str(value)
