"""``bloomskip index build``, ``bloomskip query`` and ``bloomskip demo`` through argparse."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from dataset_fixtures import INDEXES

from bloomskip.dataset.cli import register
from bloomskip.dataset.sql.translate import UnsupportedPredicateError
from bloomskip.errors import BloomskipError


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bloomskip")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


@pytest.fixture
def data(tmp_path: Path, dataset_dir: Path) -> Path:
    directory = tmp_path / "data"
    shutil.copytree(dataset_dir, directory)
    return directory


def _build(data: Path) -> None:
    argv = ["index", "build", str(data)]
    for definition in INDEXES:
        argv += ["--index", definition]
    assert run(argv + ["--no-progress"]) == 0


def test_build_then_refresh(data: Path, capsys) -> None:
    _build(data)
    first = capsys.readouterr().out
    assert "_bloomskip: version 1, 3 files, 3 (re)indexed" in first
    assert run(["index", "build", str(data)]) == 0
    assert "3 files, 0 (re)indexed" in capsys.readouterr().out


def test_query_formats(data: Path, capsys, tmp_path: Path) -> None:
    _build(data)
    capsys.readouterr()
    where = "hasToken(s, '東京') AND k > 100"
    base = ["query", str(data), "--where", where, "--select", "id, s"]
    assert run(base + ["--format", "json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows and all("東京" in row["s"] and set(row) == {"id", "s"} for row in rows)
    assert run(base + ["--format", "csv", "--limit", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "id,s" and len(lines) == 3
    assert run(base + ["--format", "table"]) == 0
    assert "東京" in capsys.readouterr().out
    out = tmp_path / "result.parquet"
    assert run(base + ["--format", "parquet", "--output", str(out)]) == 0
    assert sorted(pq.read_table(out).column("id").to_pylist()) == sorted(r["id"] for r in rows)


def test_explain_reports_each_index(data: Path, capsys) -> None:
    _build(data)
    capsys.readouterr()
    assert run(["query", str(data), "--where", "k = 13 AND hasToken(s, 'x1')", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "index INDEX k_bf k TYPE bloom_filter(0.05) GRANULARITY 1" in out
    assert "granules skipped:" in out and "bytes skipped:" in out
    assert "no part of the WHERE can use this index" in out  # e.g. tags_bf
    lines = out.splitlines()
    assert lines.index(next(line for line in lines if line.startswith("read: "))) < lines.index(
        next(line for line in lines if line.startswith("avoided: "))
    )


def test_corrupt_sidecar_warns_and_scans(data: Path, capsys) -> None:
    _build(data)
    (version,) = (data / "_bloomskip").glob("versions/*")
    version.write_bytes(version.read_bytes()[:-5])
    capsys.readouterr()
    assert run(["query", str(data), "--where", "k = 13", "--format", "csv"]) == 0
    captured = capsys.readouterr()
    assert "scanning every file" in captured.err
    assert "_bloomskip" in captured.err
    assert captured.out.startswith("id,k,s,d,tags,v")
    assert captured.out.count("\n") > 1


def test_selected_expressions_are_named_by_their_clickhouse_text(data: Path, capsys) -> None:
    # Before: the columns were named by the DuckDB translation ("strlen(s)", "translate(s, ...)")
    # and an alias was refused as "cannot parse WHERE ... not an expression".
    where = "hasToken(s, '東京')"
    select = "id, length(s), upper(s) AS loud, startsWith(s, 'x')"
    assert run(["query", str(data), "--where", where, "--select", select, "--format", "json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows and all(
        list(row) == ["id", "LENGTH(s)", "loud", "startsWith(s, 'x')"] for row in rows
    )
    assert all(row["LENGTH(s)"] == len(row["loud"].encode()) for row in rows)


@pytest.mark.parametrize(
    ("where", "message"),
    [
        # Refused by ClickHouse itself; every index's condition builder refuses it too.
        ("multiSearchAny(s, [" + ", ".join(f"'n{i}'" for i in range(300)) + "])", "at most 255"),
        # Undecodable bytes of a command line (surrogate escapes).
        ("s = '\udcff\udcfe'", "is not UTF-8 text"),
    ],
)
def test_a_refused_where_is_one_error_line(data: Path, capsys, where: str, message: str) -> None:
    # Before: a warning per index that could not use the WHERE, then the error (or, for the
    # bytes, DuckDB's "Python Conversion Failure" of the translated SQL).
    from bloomskip.cli import main

    _build(data)
    capsys.readouterr()
    assert main(["query", str(data), "--where", where]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("bloomskip: error:") and message in line, line


def test_user_errors(data: Path) -> None:
    with pytest.raises(UnsupportedPredicateError):
        run(["query", str(data), "--where", "lowerUTF8(s) = 'x'"])
    with pytest.raises(BloomskipError, match="no --index"):
        run(["index", "build", str(data)])
    with pytest.raises(
        UnsupportedPredicateError, match="Unknown expression or function identifier"
    ):
        run(["query", str(data), "--where", "nope = 1"])
    with pytest.raises(SystemExit):
        run(["query", str(data)])  # --where is required


def test_bad_input_is_one_error_line(data: Path, tmp_path: Path) -> None:
    not_a_directory = data / "part-0.parquet"  # a path below a file can never be written
    with pytest.raises(BloomskipError, match="cannot write the index"):
        run(["index", "build", str(data), "--index", INDEXES[0], "--no-progress",
             "--sidecar", str(not_a_directory / "x.index")])  # fmt: skip
    _build(data)
    with pytest.raises(BloomskipError, match="no column 'nope'"):
        run(["query", str(data), "--where", "nope = 1", "--explain"])
    with pytest.raises(BloomskipError, match="no column 'zz'"):
        run(["query", str(data), "--where", "k = 1", "--select", "id, zz", "--explain"])
    with pytest.raises(BloomskipError, match="cannot write"):
        run(["query", str(data), "--where", "k = 1", "--format", "csv",
             "--output", str(not_a_directory / "out.csv")])  # fmt: skip
    with pytest.raises(BloomskipError, match="names no column"):
        run(["query", str(data), "--where", "k = 1", "--select", " "])
    with pytest.raises(BloomskipError, match="demo in"):
        run(["demo", str(not_a_directory / "demo"), "--rows", "10"])
    for argv in [
        ["query", str(data), "--where", "k = 1", "--limit", "-1"],
        ["demo", "--rows", "0"],
    ]:
        with pytest.raises(SystemExit):
            run(argv)


def test_demo_command_small(tmp_path: Path, capsys) -> None:
    assert run(["demo", str(tmp_path / "demo"), "--rows", "150000"]) == 0
    out = capsys.readouterr().out
    assert "token search" in out and "rows scanned" in out
