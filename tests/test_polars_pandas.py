"""``Dataset.to_polars`` and ``Dataset.to_pandas`` (issue 17): exactly the rows DuckDB returns
over the raw files, for every clause of the WHERE corpus; a Delta table's deleted rows stay
deleted and its partition values are filled; neither library is needed by anything else."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from bloomskip import BloomskipError, Dataset
from bloomskip.dataset.sql.translate import clickhouse_to_duckdb, column_kinds

sys.path.insert(0, str(Path(__file__).parent / "dataset"))
from test_where_corpus import (  # noqa: E402 - the corpus lives beside its own tests
    CLAUSES,
    FILES,
    INDEXES,
    ROWS_PER_FILE,
    base_table,
    write_with,
)

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "bloomskip"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Dataset, str]:
    """The WHERE corpus's pyarrow files, indexed one granule per row group, and their scan."""
    directory = tmp_path_factory.mktemp("frames")
    for number in range(FILES):
        write_with("pyarrow", base_table(number * ROWS_PER_FILE, ROWS_PER_FILE),
                   directory / f"part-{number}.parquet")  # fmt: skip
    dataset = Dataset(directory)
    dataset.build_index(INDEXES, progress=False)
    listing = ", ".join(f"'{path}'" for path in sorted(directory.glob("*.parquet")))
    return dataset, f"read_parquet([{listing}])"


def _reference(scan: str, where: str, kinds: tuple | None = None) -> pa.Table | None:
    """DuckDB over the raw files, every row read; None when the WHERE is refused."""
    try:
        condition = clickhouse_to_duckdb(where, kinds)
        return duckdb.sql(f"SELECT * FROM {scan} WHERE {condition} ORDER BY id").to_arrow_table()
    except (BloomskipError, duckdb.Error):
        return None


def test_the_corpus_is_the_where_corpus() -> None:
    assert len(CLAUSES) >= 300


@pytest.mark.parametrize("where", CLAUSES)
def test_to_polars_and_to_pandas_give_duckdbs_rows(corpus, where: str) -> None:
    dataset, scan = corpus
    expected = _reference(scan, where, column_kinds(dataset.scan_schema()))
    if expected is None:
        with pytest.raises(BloomskipError):
            dataset.to_polars(where)
        with pytest.raises(BloomskipError):
            dataset.to_pandas(where)
        return
    frame = dataset.to_polars(where)
    assert isinstance(frame, pl.LazyFrame)
    got = frame.sort("id").collect()
    # Every column and value, NULL and NaN apart: polars' equality counts NaN equal to NaN.
    assert got.equals(pl.from_arrow(expected), null_equal=True), where
    pandas_frame = dataset.to_pandas(where)
    assert isinstance(pandas_frame, pd.DataFrame)
    ordered = pandas_frame.sort_values("id", kind="stable").reset_index(drop=True)
    assert ordered["id"].tolist() == expected.column("id").to_pylist(), where
    # Back to Arrow as pandas holds it: the same types and values (NaN read as NaN).
    back = pa.Table.from_pandas(ordered, preserve_index=False).replace_schema_metadata(None)
    assert back.schema == expected.schema, where
    assert pl.from_arrow(back).equals(pl.from_arrow(expected), null_equal=True), where


def test_columns_and_the_lazy_plan(corpus) -> None:
    dataset, scan = corpus
    where = "hasToken(s, 'timeout') OR id IN (1, 4000)"
    expected = _reference(scan, where)
    frame = dataset.to_polars(where, ["id", "s"])
    assert frame.collect_schema().names() == ["id", "s"]
    # What is chained on the frame runs at collect(), on the exact rows only.
    counted = frame.filter(pl.col("id") < 6000).select(pl.len()).collect().item()
    assert counted == int(pc.sum(pc.less(expected.column("id"), 6000)).as_py())
    numpy_frame = dataset.to_pandas(where, "id, upper(s) AS shout", dtype_backend="numpy")
    assert list(numpy_frame.columns) == ["id", "shout"]
    assert str(numpy_frame["id"].dtype) == "int64"
    assert sorted(numpy_frame["id"]) == expected.column("id").to_pylist()
    with pytest.raises(BloomskipError, match="dtype_backend"):
        dataset.to_pandas(where, dtype_backend="arrow")


def test_pandas_keeps_null_and_nan_apart_and_64_bit_integers_exact(tmp_path) -> None:
    big = 2**62 + 1  # not a float64 value: a float column would round it
    table = pa.table(
        {
            "id": pa.array([0, 1, 2, 3]),
            "big": pa.array([big, None, -big, 7], pa.int64()),
            "f": pa.array([float("nan"), None, 1.5, 2.0]),
        }
    )
    pq.write_table(table, tmp_path / "exact.parquet", row_group_size=2)
    dataset = Dataset(tmp_path / "exact.parquet")
    frame = dataset.to_pandas("id < 3").sort_values("id")
    assert frame["big"].tolist()[0::2] == [big, -big] and frame["big"].isna().tolist()[1]
    assert frame["f"].isna().tolist() == [False, True, False]  # NULL is NA, NaN is not
    nan = frame["f"].iloc[0]
    assert nan != nan
    assert frame["big"].astype(object).tolist()[0] == big
    # The NumPy backend is pandas' own conversion, with its documented losses.
    numpy_frame = dataset.to_pandas("id < 3", dtype_backend="numpy").sort_values("id")
    assert str(numpy_frame["big"].dtype) == "float64" and numpy_frame["f"].isna().tolist()[:2] == [
        True,
        True,
    ]
    polars_frame = dataset.to_polars("id < 3").sort("id").collect()
    assert polars_frame["big"].to_list() == [big, None, -big]
    assert polars_frame["f"].is_nan().to_list() == [True, None, False]


def test_a_delta_tables_deleted_rows_stay_deleted_and_partitions_are_filled(tmp_path) -> None:
    deltalake = pytest.importorskip("deltalake")
    location = str(tmp_path / "events")
    table = base_table(0, 3000).select(["id", "k", "s", "n"])
    table = table.append_column("p", pc.cast(pc.bit_wise_and(table.column("id"), 3), pa.string()))
    properties = deltalake.WriterProperties(max_row_group_size=250)
    deltalake.write_deltalake(location, table, partition_by=["p"], writer_properties=properties)
    deltalake.DeltaTable(location).delete("id % 5 = 0")  # copy-on-write: old files stay
    table_dataset = Dataset(location)
    table_dataset.build_index(["INDEX n_bf n TYPE bloom_filter(0.01)"], progress=False)
    live = deltalake.DeltaTable(location).to_pyarrow_table()  # noqa: F841 - read by DuckDB
    for where in ["n = 3", "n IN (16, 41) AND p = '1'", "id IN (16, 2001)", "id < 12"]:
        condition = clickhouse_to_duckdb(where)
        expected = duckdb.sql(f"SELECT id, p FROM live WHERE {condition} ORDER BY id").fetchall()
        assert all(row[0] % 5 for row in expected) and expected
        # The folder still holds the deleted rows, in the files the delete replaced.
        in_folder = (
            f"SELECT count(*) FROM read_parquet('{location}/**/*.parquet') WHERE {condition}"
        )
        assert duckdb.sql(in_folder).fetchall()[0][0] > len(expected)
        frame = table_dataset.to_polars(where, ["id", "p"]).sort("id").collect()
        assert frame.rows() == expected, where
        pandas_frame = table_dataset.to_pandas(where, ["id", "p"])
        assert sorted(pandas_frame.itertuples(index=False, name=None)) == expected, where


def _run_without(package: str, code: str, cwd: Path) -> subprocess.CompletedProcess:
    # A finder first on sys.meta_path that finds no such module: ``import package`` raises
    # ModuleNotFoundError, as when it is not installed (pyarrow's own probe of pandas included).
    prelude = textwrap.dedent(
        f"""
        import sys
        class Absent:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == {package!r}:
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        sys.meta_path.insert(0, Absent())
        """
    )
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize(("missing", "method"), [("polars", "to_polars"), ("pandas", "to_pandas")])
def test_without_the_package_only_its_method_fails_in_one_line(
    tmp_path: Path, missing: str, method: str
) -> None:
    write_with("pyarrow", base_table(0, 2000), tmp_path / "part-0.parquet")
    code = f"""
        import bloomskip
        from bloomskip import BloomskipError
        dataset = bloomskip.Dataset("{tmp_path}")
        dataset.build_index(["INDEX k_bf k TYPE bloom_filter(0.01)"], progress=False)
        assert dataset.query("k = 'k15'", ["id"]).column("id").to_pylist() == [15]
        if "{method}" == "to_polars":
            assert len(dataset.to_pandas("k = 'k15'")) == 1
        else:
            assert dataset.to_polars("k = 'k15'").collect().height == 1
        try:
            dataset.{method}("k = 'k15'")
        except BloomskipError as exc:
            print(exc)
    """
    result = _run_without(missing, code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        f"{method} needs {missing}, which is not installed (pip install {missing})"
    )


def test_only_to_pandas_imports_pandas() -> None:
    # pyarrow.dataset itself imports pandas when it is installed; bloomskip never does but in
    # to_pandas, and works without it (the test above).
    found = []

    def visit(node: ast.AST, where: str, path: Path) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            where = node.name
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        if any(name.split(".")[0] == "pandas" for name in names):
            found.append((path.name, where))
        for child in ast.iter_child_nodes(node):
            visit(child, where, path)

    for path in sorted(PACKAGE.rglob("*.py")):
        visit(ast.parse(path.read_text(encoding="utf-8")), "<module>", path)
    assert found == [("frames.py", "to_pandas")]
