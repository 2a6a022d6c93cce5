"""The shared CLI layer (``bloomskip._cli``) and the one file opener (``bloomskip._sources``).

Every command reaches the validators and the error path through the real ``bloomskip`` parser:
a bad count or rate is an argparse usage error (status 2) worded the same in every group, and
input bloomskip cannot use is one ``bloomskip: error:`` line on stderr with status 2.
"""

from __future__ import annotations

import ast
import doctest
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

import bloomskip
from bloomskip import _cli
from bloomskip._sources import open_dataset, sniff_format
from bloomskip.cli import main
from bloomskip.errors import FormatError

PACKAGE_DIR = Path(bloomskip.__file__).resolve().parent


@pytest.mark.parametrize(
    ("arguments", "option", "message"),
    [
        (
            ["clickhouse", "simulate", "d.parquet", "--index", "v TYPE bloom_filter"]
            + ["--index-granularity", "0"],
            "--index-granularity",
            "expected a whole number >= 1, not '0'",
        ),
        (["tsfile", "find", "root.a.s1", ".", "--jobs", "x"], "--jobs", "whole number >= 1"),
        (["tsfile", "verify", ".", "--limit", "-1"], "--limit", "whole number >= 1, not '-1'"),
        (["demo", "d", "--rows", "0"], "--rows", "whole number >= 1"),
        (["query", "d", "--where", "v = 1", "--limit", "-1"], "--limit", "whole number >= 0"),
        (
            ["clickhouse", "inspect", "p", "--table-ddl", "x", "--saturation-fpr", "1"],
            "--saturation-fpr",
            "must be between 0 and 1 (exclusive), got 1",
        ),
        (
            ["clickhouse", "explain", "p", "--table-ddl", "x", "--where", "v", "--json"]
            + ["--index", "i", "--table-sql", "f"],
            "--table-sql",
            "not allowed with argument --table-ddl",
        ),
        (["tsfile", "inspect", "f", "--error-rate", "nan"], "--error-rate", "between 0 and 1"),
        (["tsfile", "repair", "f", "--error-rate", "0.x"], "--error-rate", "not a number: '0.x'"),
    ],
)
def test_bad_arguments_are_usage_errors_worded_alike(capsys, arguments, option, message):
    with pytest.raises(SystemExit) as exit_info:
        main(arguments)
    assert exit_info.value.code == _cli.EXIT_ERROR == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"error: argument {option}" in error and message in error, error


def _bloomskip(*arguments: str) -> subprocess.CompletedProcess[str]:
    # A fresh process: what a user sees, tracebacks included if one escaped.
    return subprocess.run(
        [sys.executable, "-m", "bloomskip", *arguments],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_user_errors_are_one_line_and_status_2(tmp_path):
    corrupt = tmp_path / "corrupt.parquet"
    corrupt.write_bytes(b"PAR1 this is not parquet")
    directory = tmp_path / "dir.tsfile"
    directory.mkdir()
    cases = [
        (
            [
                "clickhouse",
                "simulate",
                str(tmp_path / "missing.csv"),
                "--index",
                "v TYPE bloom_filter",
            ],
            "missing.csv: no such file",
        ),
        (
            ["clickhouse", "simulate", str(corrupt), "--index", "v TYPE bloom_filter"],
            "corrupt.parquet",
        ),
        (["tsfile", "inspect", str(directory)], "dir.tsfile: Is a directory"),
        (["query", str(corrupt), "--where", "v = 1"], "corrupt.parquet"),
        (
            ["clickhouse", "explain", str(tmp_path), "--table-sql", str(tmp_path / "no.sql")]
            + ["--where", "v = 1"],
            "cannot read --table-sql",
        ),
    ]
    for arguments, message in cases:
        result = _bloomskip(*arguments)
        assert result.returncode == 2, (arguments, result.stderr)
        assert result.stdout == ""
        lines = result.stderr.splitlines()
        assert len(lines) == 1, (arguments, result.stderr)
        assert lines[0].startswith("bloomskip: error: ") and message in lines[0], lines[0]


def test_run_command_maps_the_outcomes(capsys):
    def refuse(args):
        raise bloomskip.BloomskipError("x.parquet: no such file")

    def closed_pipe(args):
        raise BrokenPipeError

    def no(args):
        return _cli.EXIT_NO

    assert _cli.run_command(_namespace(refuse)) == 2
    assert capsys.readouterr().err == "bloomskip: error: x.parquet: no such file\n"
    assert _cli.run_command(_namespace(closed_pipe)) == 0
    assert _cli.run_command(_namespace(no)) == 1
    assert capsys.readouterr().err == ""


def _namespace(func):
    import argparse

    return argparse.Namespace(func=func)


def test_json_is_printed_one_way_per_style(capsys):
    value = {"b": [1, 2.5], "a": "設備"}
    _cli.print_json(value)
    _cli.print_json(value, pretty=True)
    compact, pretty = capsys.readouterr().out.split("\n", 1)
    assert compact == '{"b": [1, 2.5], "a": "\\u8a2d\\u5099"}'  # key order kept, not sorted
    assert pretty == '{\n  "b": [\n    1,\n    2.5\n  ],\n  "a": "設備"\n}\n'


@pytest.mark.parametrize("module", ["bloomskip._cli", "bloomskip.clickhouse.cli"])
def test_docstring_examples(module):
    import importlib

    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_simulate_is_a_pure_library_module():
    tree = ast.parse((PACKAGE_DIR / "clickhouse" / "simulate.py").read_text(encoding="utf-8"))
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in (node.names if isinstance(node, ast.Import) else [ast.alias(node.module)])
    }
    assert not imported & {"argparse", "sys"}
    calls = {
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    assert "print" not in calls and "exit" not in calls


# -- the opener --------------------------------------------------------------------------------


@pytest.fixture
def table() -> pa.Table:
    return pa.table({"v": pa.array([3, 1, 2], pa.int64()), "s": ["a", "b", "c"]})


def test_the_magic_wins_over_the_extension(tmp_path, table):
    parquet_named_arrow = tmp_path / "rows.arrow"
    pq.write_table(table, parquet_named_arrow)
    ipc_named_parquet = tmp_path / "rows.parquet"
    with ipc.new_file(ipc_named_parquet, table.schema) as writer:
        writer.write_table(table)
    assert sniff_format(parquet_named_arrow) == "parquet"
    assert sniff_format(ipc_named_parquet) == "arrow-ipc"
    for path in (parquet_named_arrow, ipc_named_parquet):
        assert open_dataset(path, sniff_format(path)).to_table().equals(table)


def test_formats_without_magic_are_known_by_extension(tmp_path, table):
    stream = tmp_path / "rows.arrows"
    with ipc.new_stream(stream, table.schema) as writer:
        writer.write_table(table)
    csv = tmp_path / "rows.csv"
    pacsv.write_csv(table, csv)
    unknown = tmp_path / "rows.txt"
    unknown.write_text("v\n1\n")
    assert [sniff_format(p) for p in (stream, csv, unknown)] == ["arrow-ipc-stream", "csv", None]
    assert open_dataset(stream, "arrow-ipc-stream").to_table().equals(table)
    assert open_dataset(csv, "csv").to_table().equals(table)


@pytest.mark.parametrize(
    ("name", "content", "file_format"),
    [
        ("cut.parquet", b"PAR1" + bytes(30), "parquet"),
        ("cut.arrow", b"ARROW1\0\0" + bytes(30), "arrow-ipc"),
        ("bad.arrows", b"\xff\xff\xff\xff" + bytes(3), "arrow-ipc-stream"),
    ],
)
def test_a_corrupt_file_is_a_format_error_naming_it(tmp_path, name, content, file_format):
    path = tmp_path / name
    path.write_bytes(content)
    assert sniff_format(path) == file_format
    with pytest.raises(FormatError, match="cannot read as") as error:
        open_dataset(path, file_format)
    assert error.value.source == str(path) and str(path) in str(error.value)


def test_simulate_reads_an_ipc_file_whatever_its_name(tmp_path, table, capsys):
    # Before the shared opener, simulate trusted a .parquet extension over the ARROW1 magic.
    path = tmp_path / "rows.parquet"
    with ipc.new_file(path, table.schema) as writer:
        writer.write_table(table)
    assert main(["clickhouse", "simulate", str(path), "--index", "v TYPE bloom_filter"]) == 0
    assert capsys.readouterr().out.startswith("3 rows in 1 data granules\n")


def test_a_dataset_still_refuses_what_has_no_granules(tmp_path, table, capsys):
    pacsv.write_csv(table, tmp_path / "rows.csv")
    assert main(["query", str(tmp_path / "rows.csv"), "--where", "v = 1"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("bloomskip: error: ") and "not a Parquet file nor an Arrow IPC" in error
