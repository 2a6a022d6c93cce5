"""What a cold start loads (issue 16, target 2): nothing on a query's path imports pandas.

pandas takes 0.2-0.4 s to import, and pyarrow imports it behind the scenes: ``pyarrow.array``
and ``pyarrow.scalar`` on Python objects (and on numpy arrays), ``fill_null`` with a Python
value, the numpy conversion of a boolean array, and ``import pyarrow.dataset`` itself all load
it. Each check runs in a fresh interpreter, where ``sys.modules`` tells what was loaded.

Before: compiling ``user_id = 42`` hashed its constant through ``pyarrow.array`` (pandas
loaded), and locating the rows of a point lookup filled NULLs with ``fill_null(mask, False)``
(pandas again).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bloomskip.dataset import Dataset

# Runs in a fresh interpreter: reads the file with pyarrow.parquet (which loads no pandas),
# then exercises the engine the way a query does, and prints the modules that came in.
ENGINE = """
import sys
import numpy as np
import pyarrow.parquet as pq

from bloomskip.clickhouse.condition import compile_condition
from bloomskip.clickhouse.ddl import parse_index_definition
from bloomskip.clickhouse.index import SkipIndex
from bloomskip.dataset.scan.query import _lookup_mask
from bloomskip.dataset.sql.translate import (
    clickhouse_to_duckdb_tables,
    column_kinds,
    integer_lookup,
)

table = pq.ParquetFile(sys.argv[1]).read()
rows = [1000] * (table.num_rows // 1000)
types = {"user_id": "Int64", "small": "UInt8", "f": "Float64", "s": "String"}
long_ids = ", ".join(map(str, range(0, 3000, 7)))
long_words = ", ".join(f"'w{i}'" for i in range(100))
wheres = [
    "user_id = 42",
    "user_id IN (1, 2, 3)",
    f"user_id IN ({long_ids})",
    "small = 7 OR small IN (300, 8)",
    "f = 1.5 OR f = 0",
    "s = 'w5'",
    f"s IN ({long_words})",
]
for column in types:
    definition = parse_index_definition(f"{column} TYPE bloom_filter(0.01)")
    index = SkipIndex.build(definition, table.select([column]), rows, types)
    for where in wheres:
        compile_condition(where, definition, types).may_match(index)
kinds = column_kinds(table.schema)
for where in wheres:
    clickhouse_to_duckdb_tables(where, kinds)
    lookup = integer_lookup(where)
    if lookup is not None:
        _lookup_mask(table, lookup)
print(" ".join(sorted(m for m in ("pandas", "matplotlib") if m in sys.modules)))
"""


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("cold") / "data"
    directory.mkdir()
    ids = np.arange(20_000, dtype=np.int64)
    table = pa.table(
        {
            "user_id": pa.array(ids, mask=ids % 11 == 0),
            "small": pa.array(ids % 256, pa.uint8()),
            "f": pa.array(ids / 4),
            "s": pa.array([f"w{i}" for i in range(20_000)]),
        }
    )
    pq.write_table(table, directory / "part.parquet", row_group_size=1000)
    Dataset(directory).build_index(["user_id TYPE bloom_filter(0.01)"], progress=False)
    return directory


def _fresh(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *arguments], capture_output=True, text=True, check=False, timeout=300
    )


def test_the_engine_loads_no_pandas(data: Path) -> None:
    done = _fresh("-c", ENGINE, str(data / "part.parquet"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "", f"loaded: {done.stdout.strip()}"


def test_import_bloomskip_and_help_load_no_pandas() -> None:
    done = _fresh("-c", "import sys, bloomskip; print('pandas' in sys.modules)")
    assert done.stdout.strip() == "False", done.stderr
    done = _fresh("-X", "importtime", "-m", "bloomskip", "--help")
    assert done.returncode == 0
    loaded = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    assert not loaded & {"pandas", "matplotlib", "pyarrow", "sqlglot", "duckdb"}


def test_a_cold_point_lookup_loads_no_pandas(data: Path) -> None:
    # Two row groups kept: their rows are located before the selected columns are read.
    where = "user_id = 4242 OR user_id = 15151"
    done = _fresh("-X", "importtime", "-m", "bloomskip", "query", str(data), "--where", where)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "4242" in done.stdout and "15151" in done.stdout
    loaded = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    assert "pandas" not in loaded and "matplotlib" not in loaded
    # 40-60 ms of a cold start: locating the rows reads the values buffers with numpy.
    assert "pyarrow.compute" not in loaded
    # 12-30 ms: numpy.unique's first call imports numpy.ma; the located rows are sorted instead.
    assert "numpy.ma" not in loaded


def test_a_local_query_loads_no_object_store_or_table_format_code(data: Path) -> None:
    # Issue 28, item 7: a folder is told apart from a bucket and from a Delta or Iceberg table
    # with os calls (dataset/locate.py); the store client, the table modules, the build's
    # task scheduler and Dask are never imported for it (its segmented index, beside it, is
    # read through the local store).
    done = _fresh(
        "-X", "importtime", "-m", "bloomskip", "query", str(data), "--where", "user_id = 42"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    foreign = {"obstore", "pyiceberg", "deltalake", "distributed", "dask"}
    assert not {name.split(".")[0] for name in loaded} & foreign
    ours = {
        "bloomskip.dataset.listing.tables.formats",
        "bloomskip.dataset.listing.tables.snapshot",
        "bloomskip.dataset.listing.tables.delta",
        "bloomskip.dataset.listing.tables.iceberg",
        "bloomskip.dataset.listing.prefix_store",
        "bloomskip.dataset.build.tasks",
        "pyarrow._s3fs",
        "pyarrow._gcsfs",
        "pyarrow._azurefs",
    }
    assert not loaded & ours, sorted(loaded & ours)


PLAIN = [
    "user_id = 42",
    "42 = user_id",
    "user_id = -42 OR (s = 'it''s' AND NOT user_id IN (1, 2))",
    "user_id IS NULL OR s != 'a\\\\b é'",
    "isNull(user_id) AND isNotNull(s)",
    "user_id BETWEEN 1 AND 5 AND small > 3",
    "NOT (user_id = 1 OR user_id = 2) AND small <= 7",
    "user_id = - -5 OR user_id IN (NULL, 3)",
    "(user_id = 1) = (small = 2)",
    "user_id IN () OR true",
    "user_id IN (" + ", ".join(map(str, range(-5, 100))) + ")",
    "user_id != 1 AND user_id != 2 AND s = ''",
    " OR ".join(f"(user_id = {i} AND s = 'w{i}')" for i in range(3000)),
]


@pytest.mark.parametrize("where", PLAIN)
def test_plain_trees_print_as_sqlglot_prints_them(where: str) -> None:
    from bloomskip._sql import call_deep
    from bloomskip.dataset.sql import translate

    kinds = {"user_id": "int", "small": "uint", "s": "string"}
    tree = translate._Translator(kinds).translate(call_deep(translate.parse_where(where).copy))
    plain = translate._plain_sql(tree)
    assert plain is not None
    assert plain == call_deep(lambda: tree.sql("duckdb", copy=False))


def test_a_point_lookup_is_translated_without_sqlglots_duckdb_dialect() -> None:
    # Setting up sqlglot's DuckDB generator costs a cold query 40-80 ms.
    script = (
        "import sys\n"
        "from bloomskip.dataset.sql.translate import clickhouse_to_duckdb\n"
        "sql = clickhouse_to_duckdb('user_id = 42 OR s IN (\\'a\\', \\'b\\')', "
        "(('user_id', 'int'), ('s', 'string')))\n"
        "print(sql, 'sqlglot.generators.duckdb' in sys.modules)\n"
    )
    done = _fresh("-c", script)
    assert done.stdout.strip() == """"user_id" = 42 OR "s" IN ('a', 'b') False""", done.stderr


def test_a_part_index_read_again_is_reused_until_its_file_changes(
    chdb_session, chdb_data_path: Path, tmp_path: Path
) -> None:
    # A second `clickhouse explain` in a process reused nothing: 25 ms to read and verify a
    # 10 MB index again, where ClickHouse answers from its skipping-index cache (11 ms).
    import os
    import shutil
    import time

    from bloomskip.clickhouse.marks import PackedArchive
    from bloomskip.clickhouse.part import Part
    from bloomskip.errors import FormatError

    def text(sql: str) -> str:
        return chdb_session.query(sql, "TSVRaw").bytes().decode().strip()

    chdb_session.query("CREATE DATABASE IF NOT EXISTS cold_imports", "CSV")
    chdb_session.query("DROP TABLE IF EXISTS cold_imports.t SYNC", "CSV")
    chdb_session.query(
        "CREATE TABLE cold_imports.t (k UInt64, v UInt64, INDEX iv v TYPE bloom_filter "
        "GRANULARITY 1) ENGINE = MergeTree ORDER BY k SETTINGS index_granularity = 1024, "
        "min_bytes_for_wide_part = 0",
        "CSV",
    )
    chdb_session.query(
        "INSERT INTO cold_imports.t SELECT number, intHash64(number) FROM numbers(50000)", "CSV"
    )
    where = "database = 'cold_imports' AND table = 't'"
    source = Path(text(f"SELECT path FROM system.parts WHERE {where} AND active"))
    named = "database = 'cold_imports' AND name = 't'"
    metadata = Path(text(f"SELECT metadata_path FROM system.tables WHERE {named}"))
    table_sql = (metadata if metadata.is_absolute() else chdb_data_path / metadata).read_text()
    part_dir = tmp_path / source.name
    shutil.copytree(source, part_dir)  # chdb's own part is left as it is
    fresh = Part.open(part_dir, table_sql)
    # Files written in the last seconds are kept too: their blocks' checksums, not their coarse
    # times, say that the bytes are those read before.
    assert fresh.read_index("iv") is fresh.read_index("iv")
    for path in part_dir.iterdir():  # a part written a minute ago
        os.utime(path, (time.time() - 60, time.time() - 60))

    first = Part.open(part_dir, table_sql).read_index("iv")
    again = Part.open(part_dir, table_sql).read_index("iv")
    assert again is first
    probe = int(text("SELECT intHash64(777)"))
    assert len(again.skip_index.select(f"v = {probe}")) >= 1

    # The index's bytes: its own .idx file, or a member of the skp_idx.packed archive.
    idx, start, size = part_dir / "skp_idx_iv.idx", 0, None
    if not idx.exists():
        idx = part_dir / "skp_idx.packed"
        member = PackedArchive.parse(idx.read_bytes()).members["skp_idx_iv.idx"]
        start, size = member.offset, member.size
    damaged = bytearray(idx.read_bytes())
    damaged[start + (size or len(damaged)) // 2] ^= 0xFF
    idx.write_bytes(bytes(damaged))  # same size, new modification time: read and verified again
    with pytest.raises(FormatError):
        Part.open(part_dir, table_sql).read_index("iv")


@pytest.mark.parametrize(
    "index",
    [
        "user_id TYPE bloom_filter(0.01)",
        "s TYPE bloom_filter(0.01)",
        "s TYPE tokenbf_v1(1024, 3, 0)",
        "s TYPE ngrambf_v1(3, 1024, 3, 0)",
    ],
)
def test_an_index_build_loads_no_pyarrow_compute(data: Path, tmp_path: Path, index: str) -> None:
    # 40-60 ms of every `index build`: it was imported for paths the build does not take
    # (dictionary columns, all-NULL string chunks).
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "part.parquet").symlink_to(data / "part.parquet")
    done = _fresh(
        "-X", "importtime", "-m", "bloomskip", "index", "build", str(folder), "--index", index
    )
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    assert "pyarrow.compute" not in loaded and "pandas" not in loaded


def test_a_command_ends_without_teardown_and_loses_no_output(data: Path, tmp_path: Path) -> None:
    # The command ends with os._exit once it is done (60-90 ms of interpreter teardown saved):
    # what it printed, the files it wrote and its exit status must all be there.
    where = "user_id < 15000"
    done = _fresh("-m", "bloomskip", "query", str(data), "--where", where, "--format", "csv")
    assert done.returncode == 0, done.stderr[-3000:]
    import pyarrow.compute as pc

    expected = pq.read_table(data / "part.parquet").filter(pc.field("user_id") < 15000)
    assert len(done.stdout.splitlines()) == expected.num_rows + 1  # the header line
    out = tmp_path / "out.parquet"
    done = _fresh(
        "-m", "bloomskip", "query", str(data), "--where", where, "--format", "parquet",
        "--output", str(out),
    )  # fmt: skip
    assert done.returncode == 0 and pq.read_table(out).num_rows == expected.num_rows
    done = _fresh("-m", "bloomskip", "query", str(data), "--where", "nope = 1")
    assert done.returncode == 2 and done.stderr.startswith("bloomskip: error: ")
    # A reader that stops early: the command ends quietly.
    command = ["query", str(data), "--where", where, "--format", "csv"]
    reader = subprocess.Popen(
        [sys.executable, "-m", "bloomskip", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert reader.stdout is not None and reader.stdout.read(10)
    reader.stdout.close()
    assert reader.wait(timeout=300) == 0
    assert b"Traceback" not in reader.stderr.read()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("unbuffered", [False, True])
def test_output_that_cannot_be_written_is_one_error(data: Path, unbuffered: bool) -> None:
    # Before: with block buffering the last flush failed silently and the command exited 0,
    # its output lost; unbuffered, the write failed in the command with a traceback.
    import os

    environment = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        environment["PYTHONUNBUFFERED"] = "1"
    command = ["query", str(data), "--where", "user_id < 15000", "--format", "csv"]
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "bloomskip", *command],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env=environment,
            timeout=300,
            check=False,
        )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bloomskip: error: "), done.stderr
    assert "No space left" in lines[0]
