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
from pyiceberg.types import LongType, NestedField, StringType, TimestampType  # noqa: E402

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


@pytest.mark.parametrize(
    "change, refused",
    [
        (lambda update: update.rename_column("msg", "message"), "renamed to 'message'"),
        (lambda update: update.update_column("small", LongType()), "promoted from int to long"),
        (
            lambda update: update.delete_column("msg").add_column("msg", StringType()),
            "name 'msg' was given to two columns",
        ),
        (
            lambda update: update.add_column("flag", StringType(), default_value="on"),
            "'flag' has an initial default",
        ),
    ],
    ids=["rename", "promotion", "re-added", "default"],
)
def test_a_schema_history_a_by_name_read_gets_wrong_is_refused(catalog, change, refused):
    rows = _rows(0, 20)
    rows = rows.append_column("small", pa.array(range(20), pa.int32()))
    table = catalog.create_table("ns.evolving", schema=rows.schema)
    table.append(rows)
    with table.update_schema() as update:
        change(update)
    with pytest.raises(BloomskipError, match=refused) as caught:
        open_iceberg(f"iceberg://{CATALOG}/ns.evolving")
    assert "\n" not in str(caught.value) and "not supported" in str(caught.value)


def test_name_mapping_aliases_are_refused_and_imported_files_read(catalog, tmp_path):
    table = catalog.create_table("ns.imported", schema=_rows(0, 1).schema)
    # A file written without field ids, added as it is: pyiceberg maps its columns by name.
    imported = Path(table.location().removeprefix("file://")) / "data" / "imported.parquet"
    imported.parent.mkdir(parents=True)
    pq.write_table(_rows(0, 30), imported)
    table.add_files([f"file://{imported}"])
    table = catalog.load_table("ns.imported")
    assert table.name_mapping() is not None
    opened = open_iceberg(f"iceberg://{CATALOG}/ns.imported")
    assert [(item.key, item.records) for item in opened.files] == [("data/imported.parquet", 30)]
    mapping = table.name_mapping().model_dump_json()
    aliased = mapping.replace('"names":["msg"]', '"names":["msg","message"]')
    assert aliased != mapping
    with table.transaction() as transaction:
        transaction.set_properties({"schema.name-mapping.default": aliased})
    with pytest.raises(BloomskipError, match="name it 'message'.*aliases are not"):
        open_iceberg(f"iceberg://{CATALOG}/ns.imported")


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
