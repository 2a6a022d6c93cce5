"""``bloomskip parquet inspect`` and ``verify`` on files pyarrow, DuckDB and Polars write, on a
file whose filter a broken writer left empty (verify exits 1 naming the values), and on bad
input (one line, exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bloomskip.cli import main
from bloomskip.parquet import chunk_filters
from bloomskip.parquet.thrift import parse_bloom_filter_header


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("sbbf_cli")
    table = pa.table(
        {
            "k": pa.array(range(4000)),
            "s": pa.array([f"s{i}" if i % 7 else None for i in range(4000)]),
            "st": pa.array([{"x": i % 900} for i in range(4000)]),
            "tiny": pa.array([f"t{i}" for i in range(4000)]),
        }
    )
    options = {"k": True, "s": True, "st.x": True, "tiny": {"ndv": 1, "fpp": 0.5}}
    paths = {name: folder / f"{name}.parquet" for name in ("pyarrow", "duckdb", "polars")}
    pq.write_table(table, paths["pyarrow"], bloom_filter_options=options, row_group_size=1500)
    duckdb.sql(
        "COPY (SELECT 'v' || (i % 300) AS s, (i % 200)::INT AS n FROM range(10000) t(i)) "
        f"TO '{paths['duckdb']}' (FORMAT parquet)"
    )
    pl.DataFrame({"k": list(range(100))}).write_parquet(paths["polars"])
    return paths


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_inspect_json(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(capsys, "parquet", "inspect", str(files["pyarrow"]), "--json")
    report = json.loads(out)
    assert status == 0 and report["row_groups"] == 3 and report["chunks_with_filter"] == 12
    tiny = [c for c in report["chunks"] if c["column"] == "tiny"]
    assert all(c["num_bytes"] == 32 and c["estimated_items"] is None for c in tiny)
    assert {c["column"] for c in report["chunks"]} == {"k", "s", "st.x", "tiny"}


def test_verify_correct_files(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(capsys, "parquet", "verify", str(files["pyarrow"]))
    assert status == 0 and out.rstrip().endswith("OK")
    assert out.count("too full to prune") == 3  # tiny, in each row group
    status, out, _ = _run(capsys, "parquet", "verify", str(files["duckdb"]), "--json")
    report = json.loads(out)
    assert status == 0 and report["ok"] and report["chunks_checked"] >= 1
    status, out, _ = _run(capsys, "parquet", "verify", str(files["polars"]), "--json")
    assert status == 0 and json.loads(out)["chunks_checked"] == 0  # Polars writes no filters


def test_verify_reports_a_writer_that_misses_values(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A filter whose bits were lost (all zero) rejects every value: exit 1, values named."""
    data = bytearray(files["pyarrow"].read_bytes())
    chunk = next(
        c
        for c in chunk_filters(pq.ParquetFile(files["pyarrow"]).metadata)
        if c.column_path == "k" and c.row_group == 1
    )
    num_bytes, header = parse_bloom_filter_header(bytes(data[chunk.offset : chunk.offset + 64]))
    start = chunk.offset + header
    data[start : start + num_bytes] = bytes(num_bytes)
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(bytes(data))
    status, out, _ = _run(capsys, "parquet", "verify", str(broken), "--limit", "2")
    assert status == 1
    assert "row group 1, k: REJECTS 1500 of 1500 values (e.g. 1500, 1501)" in out
    status, out, _ = _run(capsys, "parquet", "verify", str(broken), "--json")
    report = json.loads(out)
    assert status == 1 and not report["ok"] and report["rejected_values"] == 1500


@pytest.mark.parametrize("command", ["inspect", "verify"])
def test_bad_input_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    missing = tmp_path / "missing.parquet"
    status, out, err = _run(capsys, "parquet", command, str(missing))
    assert status == 2 and err.count("\n") == 1 and "missing.parquet" in err
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"not parquet at all")
    status, out, err = _run(capsys, "parquet", command, str(junk))
    assert status == 2 and err.startswith("bloomskip: error:") and err.count("\n") == 1
