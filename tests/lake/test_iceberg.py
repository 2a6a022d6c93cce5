"""Apache Iceberg tables written by real writers, read snapshot by snapshot.

pyiceberg writes through a ``SqlCatalog`` on SQLite (configured the pyiceberg way, by
``PYICEBERG_CATALOG__<NAME>__*`` variables, so that ``iceberg://NAME/ns.tbl`` resolves as a
user's does): appends, an overwrite, copy-on-write deletes, an added column, partitions. Its
own planning and reader are the reference for every snapshot. ClickHouse (chdb's
``IcebergLocal`` engine) writes the tables with position delete files (merge-on-read
``DELETE``) and ORC data files, which pyiceberg 0.12 cannot write.
"""

from __future__ import annotations

import datetime
import json
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from dataset_fixtures import INDEXES, make_table
from test_dataset_query_corpus import PREDICATES

from bloomskip import Dataset
from bloomskip.cli import main
from bloomskip.dataset.backends.table import TableDataset
from bloomskip.dataset.listing.tables.formats import open_table
from bloomskip.dataset.listing.tables.iceberg import open_iceberg
from bloomskip.dataset.locate import is_iceberg_folder
from bloomskip.dataset.sql.translate import clickhouse_to_duckdb
from bloomskip.errors import BloomskipError, StorageError

if TYPE_CHECKING:
    from chdb.session import Session

pyiceberg = pytest.importorskip("pyiceberg")
from pyiceberg.catalog.sql import SqlCatalog  # noqa: E402
from pyiceberg.partitioning import PartitionField, PartitionSpec  # noqa: E402
from pyiceberg.schema import Schema  # noqa: E402
from pyiceberg.table import StaticTable  # noqa: E402
from pyiceberg.transforms import IdentityTransform  # noqa: E402
from pyiceberg.types import (  # noqa: E402
    DoubleType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
)

CATALOG = "bloomskiptest"
DATABASE = "test_iceberg"  # this module's ClickHouse database


def _env(monkeypatch: pytest.MonkeyPatch, name: str, properties: dict[str, str]) -> None:
    for key, value in properties.items():
        variable = key.upper().replace(".", "__").replace("-", "_")
        monkeypatch.setenv(f"PYICEBERG_CATALOG__{name.upper()}__{variable}", value)


@pytest.fixture
def catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SqlCatalog:
    """A SQLite catalog with a local warehouse, also named ``CATALOG`` by the environment."""
    properties = {
        "type": "sql",
        "uri": f"sqlite:///{tmp_path}/catalog.db",
        "warehouse": f"file://{tmp_path}/warehouse",
    }
    _env(monkeypatch, CATALOG, properties)
    catalog = SqlCatalog(CATALOG, **{k: v for k, v in properties.items() if k != "type"})
    catalog.create_namespace("ns")
    return catalog


def _rows(first: int, count: int) -> pa.Table:
    ids = np.arange(first, first + count, dtype=np.int64)
    return pa.table(
        {
            "id": pa.array(ids),
            "user_id": pa.array((ids * 7919) % 1000, pa.int64()),
            "region": pa.array(np.array(["eu", "us", "ap"])[ids % 3], pa.string()),
            "msg": pa.array([f"event {i} from user" for i in ids.tolist()], pa.string()),
            "ts": pa.array(
                np.datetime64("2026-11-01T00:00:00", "us") + ids * np.timedelta64(7, "h"),
                pa.timestamp("us"),
            ),
        }
    )


def _planned(table, snapshot_id: int, row_filter: str = "true") -> dict[str, tuple[int, int]]:
    """pyiceberg's own plan: data file path → (size, records)."""
    tasks = table.scan(row_filter=row_filter, snapshot_id=snapshot_id).plan_files()
    return {t.file.file_path: (t.file.file_size_in_bytes, t.file.record_count) for t in tasks}


def _absolute(snapshot) -> dict[str, tuple[int, int]]:
    return {
        f"file://{snapshot.location}/{item.key}": (item.size, item.records)
        for item in snapshot.files
    }


def _read_types(schema: pa.Schema) -> pa.Schema:
    """The types pyiceberg's reader gives the columns it reads from Parquet files: it gives
    ``large_string`` to a column no file of a snapshot holds yet (one added later)."""
    return pa.schema(
        [f.with_type(pa.string()) if f.type == pa.large_string() else f for f in schema]
    )


def _history_table(catalog: SqlCatalog):
    """Appends, an overwrite, two copy-on-write deletes, and an added column."""
    table = catalog.create_table("ns.events", schema=_rows(0, 1).schema)
    table.append(_rows(0, 300))
    table.append(_rows(300, 300))
    table.append(_rows(600, 300))
    table.delete("id < 50")
    table.overwrite(_rows(1000, 200), overwrite_filter="region = 'eu'")
    with table.update_schema() as update:
        update.add_column("extra", StringType())
    extra = _rows(2000, 100)
    table.append(extra.append_column("extra", pa.array([f"x{i}" for i in range(100)])))
    table.delete("user_id = 7")
    return catalog.load_table("ns.events")


def test_every_snapshot_matches_pyicebergs_plan_and_reader(catalog):
    table = _history_table(catalog)
    snapshots = table.metadata.snapshots
    assert len(snapshots) >= 7
    on_disk = {f"file://{path}" for path in Path(table.location()[7:]).rglob("data/*.parquet")}
    for snapshot in snapshots:
        opened = open_iceberg(f"iceberg://{CATALOG}/ns.events", snapshot_id=snapshot.snapshot_id)
        assert opened.format == "iceberg" and opened.name == f"iceberg://{CATALOG}/ns.events"
        assert opened.location == table.location().removeprefix("file://").rstrip("/")
        assert opened.snapshot == snapshot.snapshot_id
        assert opened.sequence == snapshot.sequence_number
        assert opened.timestamp_ms == snapshot.timestamp_ms
        assert opened.is_latest == (snapshot.snapshot_id == table.current_snapshot().snapshot_id)
        assert _absolute(opened) == _planned(table, snapshot.snapshot_id)
        inspected = table.inspect.files(snapshot_id=snapshot.snapshot_id)
        assert set(inspected.column("content").to_pylist()) == {0}  # data files only
        assert {f"file://{opened.location}/{item.key}" for item in opened.files} == set(
            inspected.column("file_path").to_pylist()
        )
        rows = table.scan(snapshot_id=snapshot.snapshot_id).to_arrow()
        assert opened.schema == _read_types(rows.schema)
        assert sum(item.records for item in opened.files) == rows.num_rows
        assert all(item.deleted is None and item.partition == {} for item in opened.files)
        assert opened.record() == {
            "format": "iceberg",
            "snapshot": snapshot.snapshot_id,
            "sequence": snapshot.sequence_number,
        }
    # The copy-on-write deletes and the overwrite left files the current snapshot does not use.
    current = open_iceberg(f"iceberg://{CATALOG}/ns.events")
    assert current.snapshot == table.current_snapshot().snapshot_id and current.is_latest
    assert set(_absolute(current)) < on_disk
    assert "extra" in current.schema.names
    first = open_iceberg(f"iceberg://{CATALOG}/ns.events", snapshot_id=snapshots[0].snapshot_id)
    assert "extra" not in first.schema.names, "each snapshot has its own schema"
    assert first.schema.field("msg").type == pa.string()  # schema_to_pyarrow says large_string


def test_a_multi_level_namespace_and_open_table(catalog):
    catalog.create_namespace("a")
    catalog.create_namespace("a.b")
    table = catalog.create_table("a.b.tbl", schema=_rows(0, 1).schema)
    table.append(_rows(0, 10))
    opened = open_table(f"iceberg://{CATALOG}/a.b.tbl")
    assert opened.snapshot == table.current_snapshot().snapshot_id
    assert [item.records for item in opened.files] == [10]


def test_as_of_picks_the_snapshot_current_then(catalog):
    table = _history_table(catalog)
    uri = f"iceberg://{CATALOG}/ns.events"
    log = table.history()
    for entry in log:
        moment = datetime.datetime.fromtimestamp(entry.timestamp_ms / 1000, datetime.UTC)
        text = moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        assert open_iceberg(uri, as_of=text).snapshot == entry.snapshot_id
    later = datetime.datetime.fromtimestamp(log[-1].timestamp_ms / 1000 + 3600, datetime.UTC)
    assert open_iceberg(uri, as_of=later.isoformat()).snapshot == log[-1].snapshot_id
    with pytest.raises(BloomskipError, match="no Iceberg snapshot at or before 2001-01-01") as e:
        open_iceberg(uri, as_of="2001-01-01")
    assert "first snapshot was committed at 20" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(BloomskipError, match="not an ISO-8601 timestamp"):
        open_iceberg(uri, as_of="yesterday")
    with pytest.raises(BloomskipError, match="not both"):
        open_iceberg(uri, as_of="2030-01-01", snapshot_id=log[0].snapshot_id)


def test_bad_snapshots_catalogs_and_tables_are_one_line_errors(catalog, monkeypatch, tmp_path):
    table = catalog.create_table("ns.t", schema=_rows(0, 1).schema)
    table.append(_rows(0, 5))
    _env(monkeypatch, "unreachable", {"type": "sql", "uri": f"sqlite:///{tmp_path}/no/x.db"})
    _env(monkeypatch, "wrongtype", {"type": "nosuchkind", "uri": "x"})
    cases = [
        (f"iceberg://{CATALOG}/ns.t", {"snapshot_id": 42}, BloomskipError, "snapshot 42 does not"),
        (f"iceberg://{CATALOG}/ns.nope", {}, BloomskipError, "no table 'ns.nope'"),
        (f"iceberg://{CATALOG}/nons.t", {}, BloomskipError, "no table 'nons.t'"),
        ("iceberg://notconfigured/ns.t", {}, BloomskipError, "'notconfigured' is configured"),
        ("iceberg://unreachable/ns.t", {}, StorageError, "unable to open database file"),
        ("iceberg://wrongtype/ns.t", {}, StorageError, "nosuchkind"),
        (f"iceberg://{CATALOG}/t", {}, BloomskipError, "expected iceberg://CATALOG/NAMESPACE"),
        (f"iceberg://{CATALOG}/ns..t", {}, BloomskipError, "expected iceberg://CATALOG/NAMES"),
        ("iceberg:///ns.t", {}, BloomskipError, "expected iceberg://CATALOG/NAMESPACE.TABLE"),
        (str(tmp_path / "missing"), {}, BloomskipError, "not an Iceberg table"),
    ]
    for uri, options, kind, message in cases:
        with pytest.raises(kind, match=message) as caught:
            open_iceberg(uri, **options)
        text = str(caught.value)
        assert "\n" not in text and (uri in text or "snapshot" in text), text


def test_an_empty_table_has_no_files(catalog):
    catalog.create_table("ns.empty", schema=_rows(0, 1).schema)
    opened = open_iceberg(f"iceberg://{CATALOG}/ns.empty")
    assert opened.files == () and opened.is_latest and opened.keep_files('"id" = 1') == set()
    assert opened.schema.names == _rows(0, 1).schema.names
    with pytest.raises(BloomskipError, match="the table is empty"):
        open_iceberg(f"iceberg://{CATALOG}/ns.empty", snapshot_id=1)
    with pytest.raises(BloomskipError, match="it has no snapshot"):
        open_iceberg(f"iceberg://{CATALOG}/ns.empty", as_of="2030-01-01")


def _nested_rows() -> pa.Table:
    rows = _rows(0, 20)
    point = pa.StructArray.from_arrays(
        [pa.array(range(20), pa.int32()), pa.array(range(20), pa.int32())], ["x", "y"]
    )
    return rows.append_column("point", point).append_column(
        "nums", pa.array([[i, -i] for i in range(20)], pa.list_(pa.int32()))
    )


@pytest.mark.parametrize(
    "change, refused",
    [
        (
            lambda update: update.rename_column(("point", "x"), "px"),
            "nested Iceberg field 'point.x' was renamed to 'point.px'",
        ),
        (
            lambda update: update.update_column(("nums", "element"), LongType()),
            "'nums.element' was promoted from int to long",
        ),
        (
            lambda update: update.add_column("flag", StringType(), default_value="on"),
            "'flag' has an initial default",
        ),
    ],
    ids=["nested-rename", "nested-promotion", "default"],
)
def test_a_schema_history_bloomskip_cannot_read_as_iceberg_does_is_refused(
    catalog, change, refused
):
    # Before issue 33 a top-level rename, promotion or re-added name was refused here too: they
    # are read by field id now (tests at the end of this module).
    table = catalog.create_table("ns.evolving", schema=_nested_rows().schema)
    table.append(_nested_rows())
    with table.update_schema() as update:
        change(update)
    with pytest.raises(BloomskipError, match=refused) as caught:
        open_iceberg(f"iceberg://{CATALOG}/ns.evolving")
    assert "\n" not in str(caught.value) and "not supported" in str(caught.value)
    # The snapshot written before the change is read with its own schema: nothing to refuse.
    first = table.metadata.snapshots[0].snapshot_id
    assert open_iceberg(f"iceberg://{CATALOG}/ns.evolving", snapshot_id=first).files


def test_name_mapping_aliases_read_imported_files_and_nested_ones_are_refused(catalog):
    table = catalog.create_table("ns.imported", schema=_nested_rows().schema)
    # A file written without field ids, added as it is: pyiceberg maps its columns by name.
    imported = Path(table.location().removeprefix("file://")) / "data" / "imported.parquet"
    imported.parent.mkdir(parents=True)
    pq.write_table(_nested_rows(), imported)
    table.add_files([f"file://{imported}"])
    table = catalog.load_table("ns.imported")
    assert table.name_mapping() is not None
    opened = open_iceberg(f"iceberg://{CATALOG}/ns.imported")
    assert [(item.key, item.records) for item in opened.files] == [("data/imported.parquet", 20)]
    # A rename makes the old name an alias in the mapping (issue 33: it was refused before):
    # the file, which names the column "msg", is read under "message" as pyiceberg reads it.
    with table.update_schema() as update:
        update.rename_column("msg", "message")
    table = catalog.load_table("ns.imported")
    assert '"names":["msg","message"]' in table.name_mapping().model_dump_json()
    uri = f"iceberg://{CATALOG}/ns.imported"
    got = Dataset(uri).query("message = 'event 7 from user'")
    assert (
        got.to_pylist()
        == table.scan(row_filter="message = 'event 7 from user'").to_arrow().to_pylist()
    )
    assert Dataset(uri).query("1").sort_by("id").equals(table.scan().to_arrow().sort_by("id"))
    mapping = table.name_mapping().model_dump_json()
    aliased = mapping.replace('"names":["x"]', '"names":["x","px"]')
    assert aliased != mapping
    with table.transaction() as transaction:
        transaction.set_properties({"schema.name-mapping.default": aliased})
    with pytest.raises(BloomskipError, match="name it 'px'.*nested name-mapping aliases are not"):
        open_iceberg(uri)


def _partitioned(catalog: SqlCatalog):
    """Partitioned by ``region`` (identity: pyiceberg 0.12 needs the pyiceberg-core package,
    not installed, to write any other transform; ClickHouse writes bucket partitions below)."""
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "user_id", LongType(), required=False),
        NestedField(3, "region", StringType(), required=False),
        NestedField(4, "msg", StringType(), required=False),
        NestedField(5, "ts", TimestampType(), required=False),
    )
    spec = PartitionSpec(PartitionField(3, 1000, IdentityTransform(), "region"))
    table = catalog.create_table("ns.parts", schema=schema, partition_spec=spec)
    for first in (0, 400, 800):
        table.append(_rows(first, 400))
    table.delete("id >= 1100")
    return catalog.load_table("ns.parts")


PRUNING_PREDICATES = [
    "\"region\" = 'eu'",
    "\"region\" IN ('eu', 'ap')",
    "\"region\" != 'us'",
    "NOT \"region\" = 'us'",
    '"user_id" = 7',
    '"user_id" IN (7, 19, 996)',
    '"id" < 100',
    '"id" >= 1000 AND "id" <= 1050',
    '"id" > 900 OR "region" = \'ap\'',
    '("id" = 5) AND ("region" = \'us\')',
    '"id" IS NULL',
    '"msg" IS NOT NULL',
    "\"msg\" = 'event 5 from user'",
    "\"ts\" >= '2026-11-20T00:00:00'",
    '"id" = -1',
    '"id" = 99999999999999999999',
]


def test_keep_files_is_pyicebergs_own_pruning_and_never_loses_a_row(catalog):
    table = _partitioned(catalog)
    for snapshot in table.metadata.snapshots:
        opened = open_iceberg(f"iceberg://{CATALOG}/ns.parts", snapshot_id=snapshot.snapshot_id)
        assert all(item.partition == {} for item in opened.files)  # the files hold the columns
        everything = {item.key for item in opened.files}
        pruned = 0
        for text in PRUNING_PREDICATES:
            kept = opened.keep_files(text)
            assert isinstance(kept, frozenset) and kept <= everything
            planned = _planned(table, snapshot.snapshot_id, text)
            assert kept == {path[len(f"file://{opened.location}/") :] for path in planned}, text
            condition = text.replace("'2026-11-20T00:00:00'", "TIMESTAMP '2026-11-20 00:00:00'")
            if "99999999999999999999" in text:
                condition = "false"
            for item in opened.files:
                data = pq.read_table(f"{opened.location}/{item.key}")  # noqa: F841 - DuckDB
                count = duckdb.connect().execute(f"SELECT count(*) FROM data WHERE {condition}")
                if count.fetchone()[0]:
                    assert item.key in kept, (text, item.key)
            pruned += len(kept) < len(everything)
        assert pruned >= len(PRUNING_PREDICATES) // 2 or len(everything) < 3


def test_keep_files_keeps_every_file_for_what_pyiceberg_would_prune_wrongly(catalog):
    rows = pa.table(
        {
            "i": pa.array([10, 20, 30, 40], pa.int64()),
            "f": pa.array([0.1, 0.2, 0.3, 0.4], pa.float32()),
            "s": pa.array(["a\tb", "a b", "c\\'d", "e"]),
        }
    )
    table = catalog.create_table("ns.literals", schema=rows.schema)
    for number in range(4):
        table.append(rows.slice(number, 1))
    opened = open_iceberg(f"iceberg://{CATALOG}/ns.literals")
    everything = {item.key for item in opened.files}
    snapshot = table.current_snapshot().snapshot_id
    # pyiceberg itself loses the file holding 20 (it truncates 20.5 to 20), and the one holding
    # 0.1 in float32 (it compares bounds with the literal rounded to 32 bits).
    assert len(_planned(table, snapshot, '"i" < 20.5')) == 1
    assert len(_planned(table, snapshot, '"f" <= 0.1')) == 0
    # It reads a tab in a string literal as spaces.
    assert len(_planned(table, snapshot, "\"s\" = 'a\tb'")) == 0
    for text in [
        '"i" < 20.5',
        '"i" IN (1.5, 20)',
        '"f" <= 0.1',
        '"f" IS NOT NULL AND "f" = 0.1',
        "\"s\" = 'a\tb'",
        "\"s\" = 'c\\''d'",
        '"nope" = 1',
        "\"i\" = 'x'",
        '"s" = 5',
        '"i" = ',
        '"i" = 1e5',
        "hasToken(s, 'x')",
        "",
    ]:
        assert opened.keep_files(text) == everything, text
    assert len(opened.keep_files('"i" < 20')) == 1
    assert len(opened.keep_files('"i" IS NULL OR "f" IS NULL')) == 0
    deep = " AND ".join(f'("i" != {n})' for n in range(3000))
    assert opened.keep_files(deep) == everything


def test_a_data_file_outside_the_table_location_is_refused(catalog, tmp_path):
    table = catalog.create_table(
        "ns.elsewhere",
        schema=_rows(0, 1).schema,
        properties={"write.data.path": f"file://{tmp_path}/other"},
    )
    table.append(_rows(0, 5))
    with pytest.raises(BloomskipError, match="outside the table's location") as caught:
        open_iceberg(f"iceberg://{CATALOG}/ns.elsewhere")
    assert f"{tmp_path}/other/" in str(caught.value)


# -- tables ClickHouse writes: position deletes, ORC, no catalog -----------------------------


def _clickhouse(session: Session, statement: str) -> None:
    session.query(statement, "TSV")


def _clickhouse_table(
    session: Session, location: Path, file_format: str = "Parquet", partition: str = ""
) -> str:
    name = f"{DATABASE}.t_{secrets.token_hex(4)}"
    _clickhouse(session, f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    _clickhouse(
        session,
        f"CREATE TABLE {name} (id Int64, user_id Int64, msg Nullable(String)) "
        f"ENGINE = IcebergLocal('{location}', '{file_format}') {partition}",
    )
    return name


#: Writes to Iceberg are a beta feature of ClickHouse, enabled statement by statement.
ALLOW = "SETTINGS allow_insert_into_iceberg = 1"


def _clickhouse_write(session: Session, name: str, statement: str) -> None:
    """``statement`` with ``{name}`` and ``{allow}`` (where SETTINGS go; default: the end)."""
    if "{allow}" not in statement:
        statement += " {allow}"
    _clickhouse(session, statement.format(name=name, allow=ALLOW))


def _read_with_deletes(snapshot) -> list[int]:
    """The ids of every file of ``snapshot`` minus its deleted positions, read by pyarrow."""
    ids = []
    for item in snapshot.files:
        column = pq.read_table(f"{snapshot.location}/{item.key}", columns=["id"]).column("id")
        keep = np.ones(len(column), dtype=bool)
        if item.deleted is not None:
            assert item.deleted.dtype == np.int64 and np.all(np.diff(item.deleted) > 0)
            keep[item.deleted] = False
        ids += pc.filter(column, pa.array(keep)).to_pylist()
    return sorted(ids)


def _positions(item) -> list[int] | None:
    return None if item.deleted is None else item.deleted.tolist()


def test_position_deletes_written_by_clickhouse(chdb_session, tmp_path, catalog, monkeypatch):
    monkeypatch.chdir(tmp_path)  # ClickHouse writes files only below its working directory
    location = tmp_path / "ch_events"
    name = _clickhouse_table(chdb_session, location)
    _clickhouse_write(
        chdb_session,
        name,
        "INSERT INTO {name} {allow} SELECT number, number % 17, toString(number) FROM numbers(500)",
    )
    _clickhouse_write(
        chdb_session,
        name,
        "INSERT INTO {name} {allow} SELECT number, number % 17, NULL FROM numbers(500, 300)",
    )
    _clickhouse_write(chdb_session, name, "DELETE FROM {name} WHERE user_id = 3")
    _clickhouse_write(chdb_session, name, "ALTER TABLE {name} DELETE WHERE id % 10 = 1")
    _clickhouse_write(chdb_session, name, "ALTER TABLE {name} UPDATE msg = 'x' WHERE id = 42")
    assert is_iceberg_folder(str(location)) and is_iceberg_folder(f"file://{location}/")
    reference = StaticTable.from_metadata(str(_newest_metadata_file(location)))
    assert len(reference.metadata.snapshots) >= 5
    with_deletes = 0
    for snapshot in reference.metadata.snapshots:
        opened = open_iceberg(str(location), snapshot_id=snapshot.snapshot_id)
        expected = reference.scan(snapshot_id=snapshot.snapshot_id).to_arrow()
        assert _read_with_deletes(opened) == sorted(expected.column("id").to_pylist())
        assert opened.location == str(location)
        assert opened.schema == expected.schema
        with_deletes += any(item.deleted is not None for item in opened.files)
    assert with_deletes >= 3
    current = open_iceberg(f"{location}/")
    assert current.is_latest and current.snapshot == reference.current_snapshot().snapshot_id
    assert 42 in _read_with_deletes(current) and 3 not in _read_with_deletes(current)
    # The same table registered in a catalog reads the same through iceberg://.
    catalog.register_table("ns.from_clickhouse", reference.metadata_location)
    through_catalog = open_iceberg(f"iceberg://{CATALOG}/ns.from_clickhouse")
    assert through_catalog.files == current.files
    assert [
        item.deleted.tolist() if item.deleted is not None else None for item in current.files
    ] == [
        item.deleted.tolist() if item.deleted is not None else None
        for item in through_catalog.files
    ]


def test_clickhouse_partition_summaries_are_not_trusted(chdb_session, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    location = tmp_path / "ch_buckets"
    name = _clickhouse_table(
        chdb_session, location, partition="PARTITION BY (identity(user_id), icebergBucket(4, id))"
    )
    for first in (0, 200):
        _clickhouse_write(
            chdb_session,
            name,
            f"INSERT INTO {{name}} {{allow}} SELECT number, number % 3, 'm' "
            f"FROM numbers({first}, 200)",
        )
    _clickhouse_write(chdb_session, name, "DELETE FROM {name} WHERE id % 7 = 0")
    opened = open_iceberg(str(location))
    reference = StaticTable.from_metadata(str(_newest_metadata_file(location)))
    assert len(opened.files) >= 12 and sum(item.deleted is not None for item in opened.files) >= 8
    expected = reference.scan().to_arrow()
    assert _read_with_deletes(opened) == sorted(expected.column("id").to_pylist())
    # Its manifest list says each manifest holds no row: pyiceberg's plan loses id 5's file.
    assert _planned(reference, opened.snapshot, '"id" = 5') == {}
    assert 5 in _read_with_deletes(opened)
    everything = {item.key for item in opened.files}
    assert opened.keep_files('"id" = 5') == everything
    assert opened.keep_files('"user_id" = 1') == everything


def _newest_metadata_file(location: Path) -> Path:
    return max((location / "metadata").glob("v*.metadata.json"), key=lambda p: int(p.name[1:-14]))


def test_orc_data_files_are_refused_by_name(chdb_session, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    location = tmp_path / "ch_orc"
    name = _clickhouse_table(chdb_session, location, "ORC")
    _clickhouse_write(chdb_session, name, "INSERT INTO {name} {allow} VALUES (1, 1, 'a')")
    with pytest.raises(BloomskipError, match=r"is ORC; bloomskip reads Parquet data files only"):
        open_iceberg(str(location))


def test_folder_detection_and_metadata_choice(chdb_session, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    location = tmp_path / "ch_small"
    name = _clickhouse_table(chdb_session, location)
    for number in range(3):
        _clickhouse_write(
            chdb_session, name, f"INSERT INTO {{name}} {{allow}} VALUES ({number}, 0, 'm')"
        )
    assert not is_iceberg_folder(str(tmp_path)) and not is_iceberg_folder(str(tmp_path / "no"))
    assert not is_iceberg_folder(f"iceberg://{CATALOG}/ns.t")
    (tmp_path / "metadata").mkdir()
    (tmp_path / "metadata" / "notes.txt").write_text("not a table")
    assert not is_iceberg_folder(str(tmp_path))
    newest = open_iceberg(str(location))
    assert sorted(_read_with_deletes(newest)) == [0, 1, 2]
    # A numeric version hint may be stale (Iceberg's Hadoop tables read past it too).
    (location / "metadata" / "version-hint.text").write_text("2")
    assert open_iceberg(str(location)).snapshot == newest.snapshot
    # Two files claiming the newest version: only a catalog can say which one won.
    top = _newest_metadata_file(location)
    (location / "metadata" / f"{top.name[:-14]}-copy.metadata.json").write_bytes(top.read_bytes())
    with pytest.raises(BloomskipError, match="several metadata files claim version"):
        open_iceberg(str(location))
    unnumbered = tmp_path / "unnumbered" / "metadata"
    unnumbered.mkdir(parents=True)
    (unnumbered / "current.metadata.json").write_bytes(top.read_bytes())
    assert is_iceberg_folder(str(unnumbered.parent))
    with pytest.raises(BloomskipError, match="no numbered"):
        open_iceberg(str(unnumbered.parent))


# -- object storage ----------------------------------------------------------------------


def test_a_catalog_table_on_the_s3_server(s3_endpoint, bucket, tmp_path, monkeypatch):
    properties = {
        "type": "sql",
        "uri": f"sqlite:///{tmp_path}/catalog.db",
        "warehouse": f"s3://{bucket}/warehouse",
        "s3.endpoint": s3_endpoint,
        "s3.access-key-id": "testing",
        "s3.secret-access-key": "testing",
        "s3.region": "us-east-1",
    }
    _env(monkeypatch, "s3test", properties)
    catalog = SqlCatalog("s3test", **{k: v for k, v in properties.items() if k != "type"})
    catalog.create_namespace("ns")
    table = catalog.create_table("ns.events", schema=_rows(0, 1).schema)
    table.append(_rows(0, 200))
    table.append(_rows(200, 200))
    table.delete("id < 100")
    table = catalog.load_table("ns.events")
    assert table.location().startswith(f"s3://{bucket}/")
    for snapshot in table.metadata.snapshots:
        opened = open_iceberg("iceberg://s3test/ns.events", snapshot_id=snapshot.snapshot_id)
        assert opened.location == table.location().rstrip("/")
        planned = _planned(table, snapshot.snapshot_id)
        assert {
            f"{opened.location}/{item.key}": (item.size, item.records) for item in opened.files
        } == planned
        assert opened.keep_files('"id" < 150') == {
            path[len(opened.location) + 1 :]
            for path in _planned(table, snapshot.snapshot_id, '"id" < 150')
        }
    # The same table's folder, without the catalog: one listing of metadata/.
    assert is_iceberg_folder(table.location())
    folder = open_iceberg(table.location())
    assert folder.snapshot == table.current_snapshot().snapshot_id
    assert folder.files == open_iceberg("iceberg://s3test/ns.events").files
    # Indexed and queried at each snapshot, through the catalog.
    uri = "iceberg://s3test/ns.events"
    Dataset(uri).build_index(["INDEX u user_id TYPE bloom_filter(0.01)"], progress=False)
    for snapshot in table.metadata.snapshots:
        for where in ("user_id = 7", "user_id IN (3, 996)", "region = 'eu' AND user_id = 19"):
            got = Dataset(uri, snapshot_id=snapshot.snapshot_id).query(where, ["id"])
            expected = _expected(table, snapshot.snapshot_id, where)
            assert sorted(got.column("id").to_pylist()) == expected, (snapshot, where)


# -- end to end: index, then query at every snapshot ---------------------------------------


def _corpus_rows(rows: int, seed: int, first: int) -> pa.Table:
    """The dataset tests' rows (Iceberg has no dictionary type: ``d`` is a plain string)."""
    table = make_table(rows, seed, first)
    return table.set_column(2 + 1, "d", table.column("d").cast(pa.string()))


def _expected(reference, snapshot_id: int, where: str) -> list[int]:
    """pyiceberg's own reader at the snapshot, filtered exactly as the WHERE means."""
    rows = reference.scan(snapshot_id=snapshot_id).to_arrow()
    connection = duckdb.connect()
    connection.register("rows", rows)
    query = f"SELECT id FROM rows WHERE {clickhouse_to_duckdb(where)}"
    return sorted(row[0] for row in connection.execute(query).fetchall())


def _keys(reference, snapshot_id: int) -> dict[str, int]:
    ks = reference.scan(snapshot_id=snapshot_id).to_arrow().column("k").to_pylist()
    ks = [k for k in ks if k is not None]
    return {"k0": ks[5], "k1": ks[len(ks) // 2], "k2": ks[-3]}


def _check_corpus(uri: str, reference, extra: list[str]) -> int:
    """Every predicate at every snapshot equals pyiceberg's reader; how many were pruned."""
    keys = _keys(reference, reference.metadata.snapshots[0].snapshot_id)
    pruned = 0
    for snapshot in reference.metadata.snapshots:
        table = Dataset(uri, snapshot_id=snapshot.snapshot_id)
        assert (
            isinstance(table.backend, TableDataset)
            and table.snapshot.snapshot == snapshot.snapshot_id
        )
        columns = set(table.snapshot.schema.names)
        for template in PREDICATES + extra:
            where = template.format(**keys)
            if "extra" in where and "extra" not in columns:
                continue  # no such column before the schema change
            explanation = table.explain(where)
            got = table.run(explanation, where, ["id"]).column("id").to_pylist()
            expected = _expected(reference, snapshot.snapshot_id, where)
            assert sorted(got) == expected, (snapshot.snapshot_id, where)
            pruned += sum(outcome.granules_skipped for outcome in explanation.indexes) > 0
    return pruned


def test_corpus_at_every_snapshot_equals_pyicebergs_reader(catalog):
    uri = f"iceberg://{CATALOG}/ns.corpus"
    first = _corpus_rows(1500, 1, 0)
    table = catalog.create_table(
        "ns.corpus", schema=first.schema, properties={"write.parquet.row-group-limit": "200"}
    )
    # Written and refreshed snapshot by snapshot, as a table's index is kept up.
    table.append(first)
    Dataset(uri).build_index(INDEXES, progress=False)
    table.append(_corpus_rows(1200, 2, 1500))
    table.delete("id IN (" + ", ".join(str(i) for i in range(0, 2700, 5)) + ")")
    report = Dataset(uri).build_index(progress=False)
    assert report.removed, "the delete rewrote files: their old versions leave the live index"
    with table.update_schema() as update:
        update.add_column("extra", StringType())
    extra = _corpus_rows(900, 3, 2700)
    table.append(extra.append_column("extra", pa.array([f"e{i}" for i in range(900)])))
    table.overwrite(_corpus_rows(300, 4, 5000), overwrite_filter="id >= 3000")
    Dataset(uri).build_index(progress=False)
    reference = catalog.load_table("ns.corpus")
    assert len(reference.metadata.snapshots) >= 6
    pruned = _check_corpus(uri, reference, ["extra = 'e7'", "id = 2701", "k = {k0} AND id < 100"])
    assert pruned > len(reference.metadata.snapshots) * len(PREDICATES) // 4
    # The first snapshot's files were all rewritten since; its index is an older manifest's.
    oldest = Dataset(uri, snapshot_id=reference.metadata.snapshots[0].snapshot_id)
    states = oldest.explain("k = 1").files
    assert states and all(state.status == "indexed" for state in states)


def test_position_deletes_end_to_end(chdb_session, tmp_path, monkeypatch, catalog, capsys):
    """A table ClickHouse wrote, with merge-on-read deletes: no deleted row ever comes back."""
    monkeypatch.chdir(tmp_path)
    location = tmp_path / "ch_corpus"
    name = f"{DATABASE}.corpus_{secrets.token_hex(4)}"
    _clickhouse(chdb_session, f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
    _clickhouse(
        chdb_session,
        f"CREATE TABLE {name} (id Int64, k Nullable(Int64), s Nullable(String), "
        f"d Nullable(String), tags Array(String), v Float64) "
        f"ENGINE = IcebergLocal('{location}', 'Parquet')",
    )
    for number, (rows, seed, first) in enumerate([(1500, 1, 0), (1200, 2, 1500)]):
        data = _corpus_rows(rows, seed, first)
        data = data.set_column(
            4,
            "tags",
            pc.fill_null(data.column("tags"), pa.scalar([], data.schema.field("tags").type)),
        )
        pq.write_table(data, tmp_path / f"rows{number}.parquet")
        _clickhouse_write(
            chdb_session,
            name,
            f"INSERT INTO {{name}} {{allow}} SELECT * FROM file('rows{number}.parquet')",
        )
    catalog.register_table("ns.clickhouse", str(_newest_metadata_file(location)))
    uri = f"iceberg://{CATALOG}/ns.clickhouse"
    Dataset(uri).build_index(INDEXES, progress=False)
    reference = catalog.load_table("ns.clickhouse")
    keys = _keys(reference, reference.current_snapshot().snapshot_id)
    _clickhouse_write(chdb_session, name, "DELETE FROM {name} WHERE id % 5 = 0")
    _clickhouse_write(chdb_session, name, f"DELETE FROM {{name}} WHERE k = {keys['k1']}")
    # ClickHouse commits to the folder; the catalog follows the newest metadata file.
    catalog.drop_table("ns.clickhouse")
    catalog.register_table("ns.clickhouse", str(_newest_metadata_file(location)))
    Dataset(uri).build_index(progress=False)
    reference = catalog.load_table("ns.clickhouse")
    assert any(item.deleted is not None for item in open_iceberg(uri).files)
    pruned = _check_corpus(uri, reference, ["id = 10", "id = 11"])
    assert pruned > 0
    capsys.readouterr()
    where = f"k = {keys['k1']}"
    assert main(["query", uri, "--where", where, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out or "[]") == []
    first = str(reference.metadata.snapshots[1].snapshot_id)
    assert main(["query", uri, "--where", where, "--snapshot-id", first, "--format", "json"]) == 0
    older = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert older and all(row["k"] == keys["k1"] for row in older), "there at the older snapshot"
    assert main(["query", uri, "--where", where, "--snapshot-id", "12345"]) == 2
    error = capsys.readouterr().err.strip()
    assert "snapshot 12345 does not exist" in error and "\n" not in error


# -- schema evolution: columns found by field id (issue 33) ---------------------------------


def _evolving_rows(first: int, count: int, text: str = "s", wide: bool = False) -> pa.Table:
    """``n`` holds negative numbers (Int32 and Int64 hash those differently), ``w`` numbers a
    float32 holds exactly; ``wide``: as the promoted types, ``n`` beyond Int32."""
    ids = np.arange(first, first + count, dtype=np.int64)
    n = (ids % 500) - 250
    if wide:
        n = np.where(ids % 2 == 0, n, n * 10_000_019)
    return pa.table(
        {
            "id": pa.array(ids),
            "n": pa.array(n, pa.int64() if wide else pa.int32()),
            "w": pa.array(ids / 8, pa.float64() if wide else pa.float32()),
            text: pa.array([f"m{i} word{i % 7}" for i in ids.tolist()]),
        }
    )


def _pyiceberg_rows(table, snapshot_id: int | None, where: str, row_filter: str | None) -> list:
    """pyiceberg's rows (ids) for a WHERE: its own row filter where it can say the WHERE,
    else its whole scan filtered by DuckDB. ``snapshot_id`` None: the table as it is now
    (pyiceberg reads it with the current schema)."""
    scan = table.scan(row_filter=row_filter or "true", snapshot_id=snapshot_id)
    rows = scan.to_arrow()
    if row_filter is None:
        connection = duckdb.connect()
        connection.register("rows", rows)
        query = f"SELECT id FROM rows WHERE {clickhouse_to_duckdb(where)}"
        return sorted(row[0] for row in connection.execute(query).fetchall())
    return sorted(rows.column("id").to_pylist())


def _checked(uri: str, table, where: str, row_filter: str | None, snapshot_id=None):
    """Query ``where`` through bloomskip, assert pyiceberg's rows, return the explanation."""
    dataset = Dataset(uri, snapshot_id=snapshot_id)
    explanation = dataset.explain(where)
    got = dataset.run(explanation, where, ["id"]).column("id").to_pylist()
    assert sorted(got) == _pyiceberg_rows(table, snapshot_id, where, row_filter), where
    return explanation


def _outcome(explanation, name: str):
    return next(o for o in explanation.indexes if f"INDEX {name} " in o.definition)


EVOLVING_INDEXES = [
    "INDEX n_bf n TYPE bloom_filter(0.01)",
    "INDEX w_bf w TYPE bloom_filter(0.01)",
    "INDEX s_bf s TYPE bloom_filter(0.01)",
]


def test_an_index_follows_its_column_through_renames_and_promotions(catalog):
    from bloomskip.clickhouse.types import value_hashes
    from bloomskip.dataset.report import observe_matches

    uri = f"iceberg://{CATALOG}/ns.evolve"
    first = _evolving_rows(0, 2000)
    table = catalog.create_table(
        "ns.evolve", schema=first.schema, properties={"write.parquet.row-group-limit": "200"}
    )
    table.append(first)
    Dataset(uri).build_index(EVOLVING_INDEXES, progress=False)
    with table.update_schema() as update:
        update.rename_column("s", "text")
        update.update_column("n", LongType())
        update.update_column("w", DoubleType())
    table = catalog.load_table("ns.evolve")
    # No data written since: the current schema names and types the old file's columns.
    assert Dataset(uri).snapshot.schema.field("text").type == pa.string()
    assert Dataset(uri).snapshot.schema.field("n").type == pa.int64()
    # The old file's n was hashed as Int32; as Int64, -200 hashes otherwise: a probe in the
    # new type would skip the granules holding it (a false negative this test catches).
    assert (
        value_hashes(pa.array([-200], pa.int32()), "Int32")[0][0]
        != (value_hashes(pa.array([-200], pa.int64()), "Int64")[0][0])
    )
    probes = [
        ("text = 'm17 word3'", "text = 'm17 word3'", "s_bf"),
        ("n = -200", "n = -200", "n_bf"),
        ("n IN (-200, 5000000000)", "n IN (-200, 5000000000)", "n_bf"),
        ("w = 2.125", "w = 2.125", "w_bf"),
    ]
    for where, row_filter, index in probes:
        explanation = _checked(uri, table, where, row_filter)
        outcome = _outcome(explanation, index)
        assert outcome.useful and outcome.granules_skipped > 0, (where, outcome)
    served = _outcome(Dataset(uri).explain("text = 'm17 word3'"), "s_bf").definition
    assert served == "INDEX s_bf text TYPE bloom_filter(0.01) GRANULARITY 1"
    dataset = Dataset(uri)
    explanation = dataset.explain("text = 'm17 word3'")
    assert observe_matches(explanation, "text = 'm17 word3'", dataset.table_files).rows_matched == 1

    # Rows written with the new schema: n beyond Int32, w a double, text under its new name.
    table.append(_evolving_rows(5000, 600, "text", wide=True))
    table = catalog.load_table("ns.evolve")
    probes.append(("n = -2490004731", "n = -2490004731", "n_bf"))  # -249 * 10_000_019
    probes.append(("text = 'm5017 word5'", "text = 'm5017 word5'", "s_bf"))
    for where, row_filter, _ in probes:
        _checked(uri, table, where, row_filter)  # the new file is not indexed: scanned
    report = Dataset(uri).build_index(progress=False)
    # Hashed as Int32 and Float32, the index cannot hold the new values: rebuilt as the
    # columns' new types. The renamed column needed nothing.
    assert sorted(report.rebuilt) == sorted(item.key for item in Dataset(uri).snapshot.files)
    assert len(report.warnings) == 2 and all("the table promoted it" in w for w in report.warnings)
    assert any("'n' is Int64 now, Int32 when indexed" in w for w in report.warnings)
    manifest = Dataset(uri).backend.latest_manifest()
    fields = {field.name: field.field_id for field in table.schema().fields}
    assert manifest.table["columns"] == {"n": fields["n"], "w": fields["w"], "s": fields["text"]}
    assert [spec.definition for spec in manifest.indexes] == [
        "INDEX n_bf n TYPE bloom_filter(0.01) GRANULARITY 1",
        "INDEX w_bf w TYPE bloom_filter(0.01) GRANULARITY 1",
        "INDEX s_bf s TYPE bloom_filter(0.01) GRANULARITY 1",
    ], "the definitions stay as written: the segments hold them"
    for where, row_filter, index in probes:
        outcome = _outcome(_checked(uri, table, where, row_filter), index)
        assert outcome.useful and outcome.granules_skipped > 0, (where, outcome)

    # An index defined after the rename, over old and new files.
    Dataset(uri).build_index(["INDEX text_tok text TYPE tokenbf_v1(512, 2, 0)"], progress=False)
    outcome = _outcome(_checked(uri, table, "hasToken(text, 'm17')", None), "text_tok")
    assert outcome.useful and outcome.granules_skipped > 0

    # Renamed again: both indexes serve the new name at once, and a build re-indexes nothing.
    with table.update_schema() as update:
        update.rename_column("text", "body")
    table = catalog.load_table("ns.evolve")
    for where, index in [("body = 'm17 word3'", "s_bf"), ("hasToken(body, 'm5017')", "text_tok")]:
        outcome = _outcome(_checked(uri, table, where, None), index)
        assert outcome.useful and outcome.granules_skipped > 0, (where, outcome)
    report = Dataset(uri).build_index(progress=False)
    assert report.rebuilt == [] and report.warnings == []

    # Every snapshot, under the names it had: pyiceberg's rows, the index used.
    for snapshot in table.metadata.snapshots:
        names = {field.name for field in table.schemas()[snapshot.schema_id].fields}
        (text,) = names & {"s", "text", "body"}
        where = f"{text} = 'm1234 word2'"
        # pyiceberg binds a row filter with the current schema, whatever the snapshot.
        row_filter = where if text == "body" else None
        outcome = _outcome(_checked(uri, table, where, row_filter, snapshot.snapshot_id), "s_bf")
        assert outcome.useful and outcome.granules_skipped > 0, (snapshot.snapshot_id, outcome)
        everything = Dataset(uri, snapshot_id=snapshot.snapshot_id).query("1").sort_by("id")
        reference = table.scan(snapshot_id=snapshot.snapshot_id).to_arrow().sort_by("id")
        assert everything.to_pylist() == reference.to_pylist()


def test_dropped_and_re_added_columns_read_as_pyiceberg_reads_them(catalog, capsys):
    uri = f"iceberg://{CATALOG}/ns.readded"
    first = _evolving_rows(0, 1000).append_column("code", pa.array(range(1000), pa.int64()))
    table = catalog.create_table(
        "ns.readded", schema=first.schema, properties={"write.parquet.row-group-limit": "100"}
    )
    table.append(first)
    Dataset(uri).build_index(
        ["INDEX s_bf s TYPE bloom_filter(0.01)", "INDEX code_bf code TYPE bloom_filter(0.01)"],
        progress=False,
    )
    # "s" is renamed and another column takes its name; "code" is dropped and added again,
    # now a string: the old file holds neither new column.
    with table.update_schema() as update:
        update.rename_column("s", "text")
    with table.update_schema() as update:
        update.add_column("s", StringType())
        update.delete_column("code")
    with table.update_schema() as update:
        update.add_column("code", StringType())
    later = _evolving_rows(2000, 500, "text").append_column(
        "s", pa.array([f"m{i % 1000} word{i % 7}" for i in range(500)])
    )
    table.append(later.append_column("code", pa.array([str(i) for i in range(500)])))
    table = catalog.load_table("ns.readded")
    everything = Dataset(uri).query("1").sort_by("id").to_pylist()
    assert everything == table.scan().to_arrow().sort_by("id").to_pylist()
    assert all(row["s"] is None and row["code"] is None for row in everything if row["id"] < 1000)
    for where, index in [
        ("s = 'm17 word3'", None),  # the new column: the index on the old "s" must not serve it
        ("text = 'm17 word3'", "s_bf"),  # the old one, renamed
        ("code = '17'", None),
    ]:
        explanation = _checked(uri, table, where, where)
        for outcome in explanation.indexes:
            assert outcome.useful == (f"INDEX {index} " in outcome.definition), (where, outcome)
    oldest = table.metadata.snapshots[0].snapshot_id
    assert _outcome(_checked(uri, table, "s = 'm17 word3'", None, oldest), "s_bf").useful
    code = _outcome(Dataset(uri).explain("text = 'm17 word3'"), "code_bf")
    assert "its column 'code' (Iceberg field 5) is not in snapshot" in code.note
    # A build cannot keep an index whose column is gone: it says what to do, on one line.
    with pytest.raises(BloomskipError, match=r"was dropped from the table; drop it \(bloomskip"):
        Dataset(uri).build_index(progress=False)
    capsys.readouterr()
    assert main(["index", "build", uri]) == 2
    error = capsys.readouterr().err.strip()
    assert f"index drop {uri} code_bf" in error and "\n" not in error
    assert main(["index", "drop", uri, "code_bf"]) == 0
    # "s" now names another column: the index follows its column under its new name, and is
    # built again (its segments hold the old definition).
    report = Dataset(uri).build_index(progress=False)
    assert len(report.rebuilt) == 2 and len(report.warnings) == 1
    assert "its column 's' is now named 'text', and 's' names another column" in report.warnings[0]
    manifest = Dataset(uri).backend.latest_manifest()
    assert [spec.definition for spec in manifest.indexes] == [
        "INDEX s_bf text TYPE bloom_filter(0.01) GRANULARITY 1"
    ]
    outcome = _outcome(_checked(uri, table, "text = 'm17 word3'", "text = 'm17 word3'"), "s_bf")
    assert outcome.useful and outcome.granules_skipped > 0
    assert not _outcome(_checked(uri, table, "s = 'm17 word3'", "s = 'm17 word3'"), "s_bf").useful


def test_the_tables_own_pruning_at_an_older_snapshot_reads_its_names(catalog):
    uri = f"iceberg://{CATALOG}/ns.swapped"
    rows = pa.table({"id": pa.array(range(300)), "a": [f"a{i:03}" for i in range(300)]})
    rows = rows.append_column("b", pa.array([f"b{i:03}" for i in range(300)]))
    table = catalog.create_table("ns.swapped", schema=rows.schema)
    for first in range(0, 300, 100):
        table.append(rows.slice(first, 100))
    with table.update_schema() as update:
        update.rename_column("a", "tmp")
    with table.update_schema() as update:
        update.rename_column("b", "a")
    with table.update_schema() as update:
        update.rename_column("tmp", "b")
    table = catalog.load_table("ns.swapped")
    # The snapshot asked for by id is read with its own schema (as pyiceberg reads it), from
    # before the swap. pyiceberg's planning binds a name with the current schema: at
    # the snapshot, "a" holds 'a017', but today's "a" (then "b") holds only b-values, and
    # pyiceberg's own pruning loses the file.
    before = table.current_snapshot().snapshot_id
    assert not _planned(table, before, "a = 'a017'")
    for where in ["a = 'a017'", "a IN ('a017', 'a250')", "b = 'b003'"]:
        explanation = _checked(uri, table, where, None, before)
        assert explanation.table["predicate"] and explanation.table["files_kept"] == 3
    explanation = _checked(uri, table, "a = 'b017'", "a = 'b017'")
    assert explanation.table["files_kept"] == 1, "today's names are pyiceberg's own"


def test_an_index_column_is_bound_to_the_field_it_named_when_built():
    from bloomskip.dataset.listing.tables.snapshot import FieldHistory

    history = FieldHistory(
        at={10: {"msg": 4, "id": 1}, 20: {"message": 4, "msg": 7, "id": 1}},
        ever={"msg": frozenset({4, 7}), "message": frozenset({4}), "id": frozenset({1})},
    )
    # Recorded bindings win; else the snapshot the index was built at names the field.
    assert history.field_of("msg", {"snapshot": 20, "columns": {"msg": 4}}) == 4
    assert history.field_of("msg", {"snapshot": 10}) == 4
    assert history.field_of("msg", {"snapshot": 20}) == 7
    # That snapshot expired: a name only one field ever had is that field's; else unknown.
    assert history.field_of("message", {"snapshot": 99}) == 4
    assert history.field_of("msg", {"snapshot": 99}) is None
