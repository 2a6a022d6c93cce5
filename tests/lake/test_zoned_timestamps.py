"""A timestamp column with a time zone: the index probes the instant the exact filter keeps.

pandas and pyarrow write zoned data as ``timestamp[us, tz=Europe/Paris]``. ClickHouse reads every
Parquet timestamp, zoned or naive, as ``DateTime64(p, 'UTC')`` and a string constant compared
with it as a UTC time, whatever the session's zone. The ``bloom_filter`` index hashes the stored
UTC instant; its probe must read the constant as that same UTC time, or it skips the granule
holding the row (``ts = '…'`` returned nothing with the index, the row without it). The rows
must be chdb's (``file('dir/*.parquet', Parquet)`` over the same files), with and without an
index, in the sidecar layout, the segmented layout (``index_location``) and on S3, and literals
that fall on a clock change of the file's zone included.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from lake_fixtures import upload

from bloomskip import Dataset
from bloomskip.dataset.index.sidecar import IndexSpec, read_sidecar, write_sidecar
from bloomskip.errors import BloomskipError

if TYPE_CHECKING:
    from chdb.session import Session

ZONES = ["Europe/Paris", "America/New_York", "UTC", None]
UTC = dt.UTC
# Half-hourly instants around the clock changes of 2024 (Paris: 31 March and 27 October at
# 01:00 UTC; New York: 10 March at 07:00 UTC and 3 November at 06:00 UTC), and ordinary hours.
STARTS = [
    dt.datetime(2024, 1, 15, 9, 0, tzinfo=UTC),
    dt.datetime(2024, 3, 10, 5, 0, tzinfo=UTC),
    dt.datetime(2024, 3, 30, 23, 0, tzinfo=UTC),
    dt.datetime(2024, 10, 26, 23, 0, tzinfo=UTC),
    dt.datetime(2024, 11, 3, 4, 0, tzinfo=UTC),
]
STEPS = 8  # half hours from each start
ROW_GROUP = 4
INSTANTS = [start + dt.timedelta(minutes=30 * step) for start in STARTS for step in range(STEPS)]
INDEX = "INDEX ts_bf ts TYPE bloom_filter(0.001)"


def _utc_text(instant: dt.datetime) -> str:
    return instant.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _local_text(instant: dt.datetime, zone: str) -> str:
    from zoneinfo import ZoneInfo

    return instant.astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M:%S")


def _wheres() -> list[str]:
    """Equality and IN over the stored instants' UTC text (each matches one row), their Paris and
    New York wall-clock text (another row or none), and wall-clock times a clock change skips
    or repeats in those zones."""
    wheres = []
    for number in (0, 5, 9, 13, 18, 22, 26, 30, 35, 38):
        instant = INSTANTS[number]
        wheres.append(f"ts = '{_utc_text(instant)}'")
        wheres.append(f"ts = '{_local_text(instant, 'Europe/Paris')}'")
        wheres.append(f"ts = '{_local_text(instant, 'America/New_York')}'")
    wheres += [
        f"ts IN ('{_utc_text(INSTANTS[3])}', '{_utc_text(INSTANTS[21])}')",
        f"ts IN ('{_utc_text(INSTANTS[12])}', '{_local_text(INSTANTS[28], 'Europe/Paris')}', "
        f"'{_local_text(INSTANTS[36], 'America/New_York')}')",
        "ts = '2024-03-31 02:30:00'",  # skipped in Paris
        "ts IN ('2024-03-31 01:30:00', '2024-03-31 02:30:00')",
        "ts = '2024-10-27 02:30:00'",  # repeated in Paris
        "ts IN ('2024-10-27 01:00:00', '2024-10-27 02:00:00', '2024-10-27 02:30:00')",
        "ts = '2024-03-10 02:30:00'",  # skipped in New York
        "ts = '2024-11-03 01:30:00'",  # repeated in New York
        "ts IN ('2024-11-03 05:30:00', '2024-11-03 06:30:00')",
        "ts = '2024-03-10 07:00:00.000000'",
        "ts IN ('2024-01-15', '2024-01-15 09:30:00')",
        "ts = '2024-01-15 09:30:00' OR ts = '2024-03-31 00:30:00'",
        "ts NOT IN ('2024-01-15 09:00:00') AND id < 3",
        "ts != '2024-01-15 09:00:00' AND id < 3",
    ]
    return wheres


WHERES = _wheres()


def _write(folder: Path, zone: str | None, writer: str) -> None:
    folder.mkdir(parents=True)
    if zone is None:
        values = pa.array([i.replace(tzinfo=None) for i in INSTANTS], pa.timestamp("us"))
    else:
        values = pa.array(INSTANTS, pa.timestamp("us", tz="UTC")).cast(pa.timestamp("us", zone))
    table = pa.table({"id": pa.array(range(len(INSTANTS)), pa.int64()), "ts": values})
    path = folder / "events.parquet"
    if writer == "pyarrow":
        pq.write_table(table, path, row_group_size=ROW_GROUP)
    else:
        frame = table.to_pandas()
        frame.to_parquet(path, index=False, row_group_size=ROW_GROUP)
    stored = pq.read_schema(path).field("ts").type
    assert pa.types.is_timestamp(stored) and stored.tz == zone, stored


def _clickhouse(session: Session, folder: Path, where: str, zone: str = "UTC") -> list[int]:
    text = session.query(
        f"SELECT id FROM file('{folder}/*.parquet', Parquet) WHERE {where} ORDER BY id "
        f"SETTINGS session_timezone = '{zone}'",
        "CSV",
    ).bytes()
    return [int(value) for value in text.split()]


def _ids(dataset: Dataset, where: str) -> list[int]:
    return sorted(dataset.query(where, ["id"]).column("id").to_pylist())


@pytest.fixture(params=["sidecar", "segmented", "s3"])
def layout(request: pytest.FixtureRequest, tmp_path: Path):
    """``(a factory of the Dataset over the folder it is given, the layout's name)``."""

    def make(folder: Path) -> Dataset:
        if request.param == "sidecar":
            return Dataset(folder)
        if request.param == "segmented":
            return Dataset(folder, index_location=folder.parent / f"{folder.name}-index")
        bucket = request.getfixturevalue("bucket")
        upload(folder, f"s3://{bucket}/{folder.name}")
        return Dataset(f"s3://{bucket}/{folder.name}")

    return make, request.param


@pytest.mark.parametrize("writer", ["pyarrow", "pandas"])
@pytest.mark.parametrize("zone", ZONES, ids=lambda zone: zone or "naive")
def test_zoned_timestamps_keep_chdbs_rows(
    layout, zone: str | None, writer: str, tmp_path: Path, chdb_session: Session
) -> None:
    make, name = layout
    folder = tmp_path / f"data-{writer}"
    _write(folder, zone, writer)
    if name == "s3" and (zone, writer) not in (("Europe/Paris", "pyarrow"), (None, "pandas")):
        pytest.skip("on S3: one zoned and one naive dataset (the local layouts cover the rest)")
    plain = make(folder)
    expected = {where: _clickhouse(chdb_session, folder, where) for where in WHERES}
    for where in WHERES:
        assert _ids(plain, where) == expected[where], (where, "no index")
    indexed = make(folder)
    indexed.build_index([INDEX], granule="row-group", progress=False)
    for where in WHERES:
        assert _ids(indexed, where) == expected[where], (where, "bloom_filter")
    # The index is used: a point lookup reads one row group of ten.
    where = f"ts = '{_utc_text(INSTANTS[18])}'"
    outcome = indexed.explain(where).indexes[0]
    assert outcome.granules == len(INSTANTS) // ROW_GROUP
    assert outcome.granules_skipped == outcome.granules - 1, where


def test_the_reference_ignores_the_session_zone(tmp_path: Path, chdb_session: Session) -> None:
    """chdb reads a Parquet timestamp's constant in UTC in any session zone: one reference."""
    for zone in ("Europe/Paris", None):
        folder = tmp_path / (zone or "naive").replace("/", "-")
        _write(folder, zone, "pyarrow")
        for where in WHERES[:12]:
            utc = _clickhouse(chdb_session, folder, where)
            for session_zone in ("Europe/Paris", "America/New_York", "Asia/Kolkata"):
                assert _clickhouse(chdb_session, folder, where, session_zone) == utc, where


_CHILD = """
import json, sys
from bloomskip import Dataset
folder, wheres = sys.argv[1], json.loads(sys.argv[2])
dataset = Dataset(folder)
print(json.dumps([sorted(dataset.query(w, ["id"]).column("id").to_pylist()) for w in wheres]))
"""


@pytest.mark.parametrize("local_zone", ["Europe/Paris", "America/New_York"])
def test_a_local_zone_changes_nothing(
    local_zone: str, tmp_path: Path, chdb_session: Session
) -> None:
    """bloomskip in a process whose local zone is not UTC (DuckDB's session zone and the
    condition's server zone follow it) returns chdb's rows, with the index, naive and zoned."""
    for zone in ("Europe/Paris", None):
        folder = tmp_path / (zone or "naive").replace("/", "-")
        _write(folder, zone, "pyarrow")
        Dataset(folder).build_index([INDEX], granule="row-group", progress=False)
        environment = dict(os.environ, TZ=local_zone)
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, str(folder), json.dumps(WHERES)],
            capture_output=True,
            text=True,
            env=environment,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        got = json.loads(done.stdout)
        for where, ids in zip(WHERES, got, strict=True):
            assert ids == _clickhouse(chdb_session, folder, where), (zone, where)


def test_an_index_recorded_with_the_files_zone(tmp_path: Path, chdb_session: Session) -> None:
    """A sidecar written before timestamps were typed in UTC names the file's zone in the
    column's type; its hashes are the same, and its probe reads constants in UTC too."""
    folder = tmp_path / "data"
    _write(folder, "Europe/Paris", "pyarrow")
    path = folder / "_bloomskip.index"
    Dataset(folder, sidecar=path).build_index([INDEX], granule="row-group", progress=False)
    sidecar = read_sidecar(path)
    (spec,) = sidecar.indexes
    assert dict(spec.column_types) == {"ts": "DateTime64(6, 'UTC')"}
    sidecar.indexes = [IndexSpec(spec.definition, (("ts", "DateTime64(6, 'Europe/Paris')"),))]
    write_sidecar(sidecar, path)
    dataset = Dataset(folder)
    for where in WHERES:
        assert _ids(dataset, where) == _clickhouse(chdb_session, folder, where), where
    where = f"ts = '{_utc_text(INSTANTS[18])}'"
    assert dataset.explain(where).indexes[0].granules_skipped == len(INSTANTS) // ROW_GROUP - 1


# Date-time text in the other forms ClickHouse reads as written: a 'T' for the space, a bare '.',
# a fraction (9 digits: truncated to the column's microseconds, by ClickHouse and by DuckDB).
OTHER_FORMS = [
    "ts = '2024-01-15T09:30:00'",
    "ts = '2024-01-15 09:30:00.'",
    "ts = '2024-01-15T09:30:00.000'",
    "ts = '2024-01-15 09:30:00.000000999'",
    "ts IN ('2024-01-15T09:00:00', '2024-03-31T01:30:00.')",
    "ts > '2024-10-27T00:30:00' AND id < 30",
]
# Text ClickHouse refuses (a day or a form it does not read), or reads in a way bloomskip does
# not model (25:00:00 is the next day's 01:00; ten fraction digits are cut to nine).
UNREAD_FORMS = [
    "ts = '2024-02-30 00:00:00'",
    "ts = '2024-01-15 9:30:00'",
    "ts = '2024-01-15T09:30:00Z'",
    "ts = '2024-01-15 25:00:00'",
    "ts = '2024-01-15 09:30:00.0000000001'",
]


@pytest.mark.parametrize("zone", ["Europe/Paris", None], ids=lambda zone: zone or "naive")
def test_date_time_text_is_read_once_as_clickhouse_reads_it(
    zone: str | None, tmp_path: Path, chdb_session: Session
) -> None:
    """The exact filter and the index's probe read a date-time constant with one reader
    (clickhouse/kinds.py): each form ClickHouse reads as written gives chdb's rows, with and
    without the index, and the index still skips; any other text is refused in one line, where
    the translation used to refuse the 'T' and '.' forms and hand '2024-02-30' to DuckDB."""
    folder = tmp_path / "data"
    _write(folder, zone, "pyarrow")
    plain = Dataset(folder)
    expected = {where: _clickhouse(chdb_session, folder, where) for where in OTHER_FORMS}
    assert expected["ts = '2024-01-15T09:30:00'"] == [1]
    for where in OTHER_FORMS:
        assert _ids(plain, where) == expected[where], (where, "no index")
    for where in UNREAD_FORMS:
        with pytest.raises(BloomskipError, match="Cannot parse string .* as DateTime64"):
            plain.query(where, ["id"])
    indexed = Dataset(folder)
    indexed.build_index([INDEX], granule="row-group", progress=False)
    for where in OTHER_FORMS:
        assert _ids(indexed, where) == expected[where], (where, "bloom_filter")
    outcome = indexed.explain("ts = '2024-01-15T09:30:00.'").indexes[0]
    assert outcome.granules_skipped == outcome.granules - 1
