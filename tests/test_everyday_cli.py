"""Everyday use of the ``bloomskip`` command line (issue 17): long predicates from a file or
standard input, DuckDB's errors on one line, JSON from ``index build`` and ``query --explain``,
Ctrl-C on a real child process, and ``tsfile find`` saying when nothing holds the series."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from bloomskip.cli import main


def _listing(files: list[Path]) -> str:
    return "[" + ", ".join(f"'{path}'" for path in files) + "]"


def _error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture
def ids_data(tmp_path: Path) -> Path:
    """Three files of 20,000 rows: ``user_id`` (0, 3, 6, ...), ``g`` and ``s``."""
    directory = tmp_path / "ids"
    directory.mkdir()
    for number in range(3):
        ids = np.arange(number * 20_000, (number + 1) * 20_000, dtype=np.int64) * 3
        table = pa.table(
            {
                "user_id": ids,
                "g": pa.array(ids % 7),
                "s": pc.binary_join_element_wise("s", pc.cast(pa.array(ids), pa.string()), ""),
            }
        )
        pq.write_table(table, directory / f"part-{number}.parquet", row_group_size=2_000)
    return directory


# -- --where-file and --where - ----------------------------------------------------------------


def test_a_100000_value_in_from_a_file_gives_duckdbs_rows(
    ids_data: Path, tmp_path: Path, capsys
) -> None:
    assert main(["index", "build", str(ids_data), "--index", "user_id TYPE bloom_filter"]) == 0
    capsys.readouterr()
    values = np.random.default_rng(17).choice(400_000, 100_000, replace=False)
    in_list = ", ".join(map(str, values))
    where_file = tmp_path / "where.sql"
    where_file.write_text(f"user_id IN ({in_list})\n")
    assert where_file.stat().st_size > 600_000  # beyond what one argument may hold (128 KiB)
    out = tmp_path / "rows.parquet"
    argv = ["query", str(ids_data), "--where-file", str(where_file), "--select", "user_id, s"]
    assert main(argv + ["--format", "parquet", "--output", str(out)]) == 0
    got = sorted(pq.read_table(out).column("user_id").to_pylist())
    files = sorted(ids_data.glob("*.parquet"))
    expected = duckdb.sql(
        f"SELECT user_id FROM read_parquet({_listing(files)}) WHERE user_id IN ({in_list})"
    ).fetchall()
    assert got == sorted(row[0] for row in expected) and len(got) > 10_000


def test_where_from_standard_input(ids_data: Path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("user_id IN (3, 6, 59997)\n"))
    base = ["query", str(ids_data), "--select", "user_id", "--format", "json"]
    assert main(base + ["--where", "-"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted(row["user_id"] for row in rows) == [3, 6, 59997]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read --where-file"),
        ("", "the WHERE is empty"),
        ("  \n\t\n", "the WHERE is empty"),
        (b"user_id = \xff", "not UTF-8 text"),
    ],
)
def test_a_bad_where_file_is_one_error_line(
    ids_data: Path, tmp_path: Path, capsys, content, message: str
) -> None:
    where_file = tmp_path / "where.sql"
    if isinstance(content, bytes):
        where_file.write_bytes(content)
    elif content is not None:
        where_file.write_text(content)
    assert main(["query", str(ids_data), "--where-file", str(where_file)]) == 2
    line = _error_line(capsys)
    assert line.startswith("bloomskip: error: ") and message in line
    assert main(["query", str(ids_data), "--where-file", str(tmp_path)]) == 2  # a directory
    assert "cannot read --where-file" in _error_line(capsys)


def test_exactly_one_of_where_and_where_file(ids_data: Path, tmp_path: Path, capsys) -> None:
    where_file = tmp_path / "where.sql"
    where_file.write_text("user_id = 3")
    for argv in (
        ["query", str(ids_data)],
        ["query", str(ids_data), "--where", "user_id = 3", "--where-file", str(where_file)],
    ):
        with pytest.raises(SystemExit) as stopped:
            main(argv)
        assert stopped.value.code == 2
        assert "--where" in capsys.readouterr().err


def test_simulate_and_part_explain_take_where_files(
    ids_data: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    where_file = tmp_path / "where.sql"
    where_file.write_text("user_id IN (" + ", ".join(str(3 * i) for i in range(50_000)) + ")")
    data = str(ids_data / "part-0.parquet")
    monkeypatch.setattr(sys, "stdin", io.StringIO("user_id = 5"))
    argv = ["clickhouse", "simulate", data, "--index", "user_id TYPE bloom_filter"]
    argv += ["--where-file", str(where_file), "--where", "-", "--where", "user_id = 6", "--json"]
    assert main(argv) == 0
    (report,) = json.loads(capsys.readouterr().out)["indexes"]
    predicates = report["predicates"]
    assert [p["where"] for p in predicates[1:]] == ["user_id = 5", "user_id = 6"]
    assert predicates[0]["where"].startswith("user_id IN (0, 3, 6")
    monkeypatch.setattr(sys, "stdin", io.StringIO("user_id = 5"))
    assert main([*argv[:5], "--where", "-", "--where", "-"]) == 2
    assert "standard input (-): read by another option already" in _error_line(capsys)
    # clickhouse explain: the table's DDL and the WHERE cannot both come from standard input.
    part_argv = ["clickhouse", "explain", str(tmp_path), "--table-sql", "-", "--where", "-"]
    assert main(part_argv) == 2
    assert "read by another option already" in _error_line(capsys)
    missing = ["clickhouse", "explain", str(tmp_path), "--table-ddl", "CREATE TABLE t (v Int8)"]
    assert main([*missing, "--where-file", str(tmp_path / "nope.sql")]) == 2
    assert "cannot read --where-file" in _error_line(capsys)


# -- DuckDB's errors ---------------------------------------------------------------------------


@pytest.fixture
def fifty_files(tmp_path: Path) -> Path:
    directory = tmp_path / "fifty"
    directory.mkdir()
    for number in range(50):
        ids = np.arange(number * 100, (number + 1) * 100, dtype=np.int64)
        table = pa.table({"user_id": ids, "message": pc.cast(pa.array(ids), pa.string())})
        pq.write_table(table, directory / f"part-{number:02}.parquet", row_group_size=25)
    return directory


def test_a_misspelt_column_over_fifty_files_is_one_short_line(fifty_files: Path, capsys) -> None:
    assert main(["query", str(fifty_files), "--where", "user_id = 5 AND mesage = 'x'"]) == 2
    line = _error_line(capsys)
    assert len(line) < 300 and "mesage" in line and "parquet" not in line


def test_a_duckdb_error_over_fifty_files_is_one_short_line(fifty_files: Path, capsys) -> None:
    # DuckDB's first line quotes the literal it cannot convert: 2,000 characters before.
    where = f"user_id = 5 OR user_id = toFloat32('{'x' * 2_000}')"
    assert main(["query", str(fifty_files), "--where", where]) == 2
    line = _error_line(capsys)
    assert len(line) < 300 and "DuckDB rejected the query" in line
    assert "Could not convert string" in line and "parquet" not in line


def test_debug_shows_the_generated_sql(fifty_files: Path, capsys) -> None:
    where = "user_id = 5 OR user_id = toFloat32('abc')"
    assert main(["query", str(fifty_files), "--where", where, "--debug"]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert lines[-1].startswith("bloomskip: error: DuckDB rejected the query")
    assert any(
        line.startswith("bloomskip: debug: DuckDB SQL: SELECT") and "part-49.parquet" in line
        for line in lines
    )
    assert "bloomskip: debug: DuckDB's message: Conversion Error" in err
    assert main(["query", str(fifty_files), "--where", "user_id = 5", "--debug"]) == 0
    assert "DuckDB SQL: SELECT" in capsys.readouterr().err  # shown on success too


# -- JSON --------------------------------------------------------------------------------------


def test_index_build_json(ids_data: Path, tmp_path: Path, capsys) -> None:
    argv = ["index", "build", str(ids_data), "--index", "user_id TYPE bloom_filter", "--json"]
    assert main(argv + ["--index", "s TYPE tokenbf_v1(256, 2, 0)"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    index = ids_data / "_bloomskip"
    assert report["index_layout"] == "segmented" and report["index"] == str(index)
    assert report["files_reindexed"] == ["part-0.parquet", "part-1.parquet", "part-2.parquet"]
    assert report["index_bytes"] == sum(p.stat().st_size for p in index.glob("segments/*"))
    assert main(["index", "build", str(ids_data), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["files_reindexed"] == []

    sidecar = tmp_path / "ids.index"
    assert main(argv + ["--sidecar", str(sidecar)]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "index_layout": "sidecar",
        "index": str(sidecar),
        "files": 3,
        "files_reindexed": ["part-0.parquet", "part-1.parquet", "part-2.parquet"],
        "index_bytes": sidecar.stat().st_size,
        "warnings": [],
    }

    location = tmp_path / "segments"
    assert main(argv + ["--index-location", str(location)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["index_layout"] == "segmented" and report["index"] == str(location)
    assert (report["version"], report["files"], report["segments_written"]) == (1, 3, 1)
    assert sorted(report["files_reindexed"]) == [f"part-{n}.parquet" for n in range(3)]
    assert report["files_removed"] == [] and report["warnings"] == []
    assert report["bytes_written"] > 0
    assert isinstance(report["files_reindexed_from_sidecar"], list)


def test_explain_json(ids_data: Path, capsys) -> None:
    argv = ["index", "build", str(ids_data), "--index", "user_id TYPE bloom_filter"]
    assert main(argv + ["--index", "s TYPE tokenbf_v1(256, 2, 0)"]) == 0
    capsys.readouterr()
    where = "user_id = 30 AND g = 2"
    base = ["query", str(ids_data), "--where", where, "--explain"]
    assert main(base + ["--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert main(base + ["--json"]) == 0
    assert json.loads(capsys.readouterr().out) == report
    assert report["table"] is None and report["warnings"] == []
    assert report["io"]["index_requests"] > 0 and report["io"]["data_footers_read"] > 0
    by_column, tokens = report["indexes"]
    assert by_column["definition"].endswith("user_id TYPE bloom_filter GRANULARITY 1")
    assert by_column["useful"] and by_column["note"] == ""
    assert by_column["granules"] == 30 and by_column["granules_skipped"] >= 28
    assert by_column["rows_skipped"] == 2_000 * by_column["granules_skipped"]
    assert by_column["bytes_skipped"] > 0
    assert not tokens["useful"] and tokens["note"] and tokens["bytes_skipped"] is None
    read = report["read"]
    assert (read["files"], read["row_groups"], read["rows"]) == (3, 30, 60_000)
    assert read["row_groups_to_read"] == 30 - by_column["granules_skipped"]
    assert read["rows_to_read"] == 2_000 * read["row_groups_to_read"]
    assert 1 <= read["files_to_read"] <= read["row_groups_to_read"]
    assert 0 < read["bytes_to_read"] < read["bytes"]
    # The text form says the same.
    assert main(base) == 0
    text = capsys.readouterr().out
    assert f"granules skipped: {by_column['granules_skipped']}/30" in text
    assert (
        f"read: {read['row_groups_to_read']} of 30 row groups (in {read['files_to_read']} of 3 "
        "files)"
    ) in text
    assert main(base + ["--format", "csv"]) == 2
    assert "--explain prints text (--format table) or one JSON object" in _error_line(capsys)


def test_explain_json_of_a_delta_table_has_its_table_block(tmp_path: Path, capsys) -> None:
    deltalake = pytest.importorskip("deltalake")
    ids = np.arange(4_000, dtype=np.int64)
    table = pa.table({"id": ids, "p": pc.cast(pa.array(ids % 2), pa.string())})
    location = str(tmp_path / "delta")
    deltalake.write_deltalake(location, table, partition_by=["p"])
    assert main(["index", "build", location, "--index", "id TYPE bloom_filter", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["index_layout"] == "segmented"
    assert main(["query", location, "--where", "p = '1' AND id = 13", "--explain", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["table"] == {
        "format": "delta",
        "snapshot": 0,
        "snapshot_files": 2,
        "files_kept": 1,
        "pruning_predicate": report["table"]["pruning_predicate"],
        "files_changed_behind": [],
    }
    assert "p" in report["table"]["pruning_predicate"]
    assert report["read"]["files"] == 1


# -- Ctrl-C on a real process ------------------------------------------------------------------


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _interrupt(argv: list[str], cpu_seconds: float) -> tuple[int, str]:
    """Run ``bloomskip argv`` in a child process, send SIGINT once it has worked
    ``cpu_seconds`` (CPU time, not wall time: the same point of the run under any load)."""
    child = subprocess.Popen(
        [sys.executable, "-m", "bloomskip", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while child.poll() is None and _cpu_seconds(child.pid) < cpu_seconds:
            time.sleep(0.02)
        assert child.poll() is None, "the command ended before it could be interrupted"
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return child.returncode, err


@pytest.fixture
def long_text(tmp_path: Path) -> Path:
    """2.4M rows of 500-character text: about 5 CPU-seconds of n-gram hashing (measured), so
    that the SIGINT after 2 CPU-seconds lands in the build."""
    directory = tmp_path / "text"
    directory.mkdir()
    ids = pa.array(np.arange(200_000, dtype=np.int64))
    words = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor " * 6
    text = pc.binary_join_element_wise(pc.cast(ids, pa.string()), pa.scalar(words), "-")
    for number in range(12):
        pq.write_table(
            pa.table({"id": ids, "msg": text}),
            directory / f"part-{number}.parquet",
            row_group_size=20_000,
        )
    return directory


@pytest.mark.parametrize("segmented", [False, True])
def test_ctrl_c_during_index_build(long_text: Path, tmp_path: Path, segmented: bool) -> None:
    location = ["--index-location", str(tmp_path / "segments")] if segmented else []
    first = ["index", "build", str(long_text), *location, "--no-progress"]
    assert main([*first, "--index", "id TYPE bloom_filter"]) == 0
    index_files = tmp_path / "segments" if segmented else long_text
    before = {path: path.read_bytes() for path in index_files.rglob("*") if path.is_file()}
    status, err = _interrupt([*first, "--index", "msg TYPE ngrambf_v1(4, 65536, 3, 0)"], 2.0)
    assert (status, err.strip()) == (130, "bloomskip: interrupted")
    after = {path: path.read_bytes() for path in index_files.rglob("*") if path.is_file()}
    # Nothing of the interrupted build is left: no version, no segment it wrote (it deletes
    # those it did not commit), no temporary file beside the data.
    assert after == before


@pytest.mark.parametrize("segmented", [False, True])
def test_ctrl_c_during_query(tmp_path: Path, segmented: bool) -> None:
    directory = tmp_path / "rows"
    directory.mkdir()
    ids = pa.array(np.arange(3_000_000, dtype=np.int64))
    msg = pc.binary_join_element_wise("event ", pc.cast(ids, pa.string()), " user", "")
    pq.write_table(
        pa.table({"user_id": ids, "msg": msg}), directory / "rows.parquet", row_group_size=10_000
    )
    location = ["--index-location", str(tmp_path / "segments")] if segmented else []
    build = ["index", "build", str(directory), *location, "--index", "user_id TYPE bloom_filter"]
    assert main(build) == 0
    # A slow predicate: a hundred substring tests on every row (several CPU-seconds in DuckDB).
    where = " OR ".join(f"msg LIKE '%{number}x%'" for number in range(100))
    started = time.monotonic()
    argv = ["query", str(directory), *location, "--where", where, "--format", "csv"]
    status, err = _interrupt(argv, 2.0)
    assert (status, err.strip().splitlines()[-1]) == (130, "bloomskip: interrupted")
    assert [line for line in err.splitlines() if "interrupted" in line] == [
        "bloomskip: interrupted"
    ]
    assert "Traceback" not in err
    assert time.monotonic() - started < 120


# -- tsfile find -------------------------------------------------------------------------------


def test_tsfile_find_says_when_no_file_holds_the_series(tmp_path: Path, capsys) -> None:
    from tsfile import Field, RowRecord, TimeseriesSchema, TSDataType, TsFileWriter

    for number in range(3):
        writer = TsFileWriter(str(tmp_path / f"f{number}.tsfile"))
        writer.register_timeseries("root.sg.d1", TimeseriesSchema("s1", TSDataType.INT64))
        writer.write_row_record(RowRecord("root.sg.d1", 1, [Field("s1", 5, TSDataType.INT64)]))
        writer.close()
    assert main(["tsfile", "find", "root.sg.d1.s1", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 3 and captured.err == ""
    assert main(["tsfile", "find", "root.nowhere.d.s9", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""  # standard output lists files only
    assert captured.err == "bloomskip: root.nowhere.d.s9 not found in 3 files\n"
    assert main(["tsfile", "find", "root.nowhere.d.s9", str(tmp_path), "--json"]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out)["files"] == [] and captured.err == ""


# -- managing indexes: add, replace, list, status, drop; concurrent builds ----------------
@pytest.mark.parametrize("segmented", [False, True])
def test_index_build_adds_definitions_and_list_status_drop(
    ids_data: Path, tmp_path: Path, capsys, segmented: bool
) -> None:
    where = ["--index-location", str(tmp_path / "segments")] if segmented else []
    first = ["index", "build", str(ids_data), "--index", "INDEX u user_id TYPE bloom_filter"]
    assert main([*first, *where]) == 0
    second = ["index", "build", str(ids_data), "--index", "INDEX t s TYPE tokenbf_v1(512, 2, 0)"]
    assert main([*second, *where]) == 0
    capsys.readouterr()
    assert main(["index", "list", str(ids_data), "--json", *where]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [item["name"] for item in listed["indexes"]] == ["u", "t"]
    changed = ["index", "build", str(ids_data), "--index", "INDEX u user_id TYPE bloom_filter(0.3)"]
    assert main([*changed, *where]) == 2
    assert "give --replace" in _error_line(capsys)
    assert main([*changed, "--replace", *where]) == 0
    capsys.readouterr()
    assert main(["index", "status", str(ids_data), "--json", *where]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["files_indexed"] == status["files"] == 3
    assert [item["definition"] for item in status["indexes"]] == [
        "INDEX u user_id TYPE bloom_filter(0.3) GRANULARITY 1",
        "INDEX t s TYPE tokenbf_v1(512, 2, 0) GRANULARITY 1",
    ]
    assert main(["index", "drop", str(ids_data), "t", *where]) == 0
    assert main(["index", "drop", str(ids_data), "nope", *where]) == 2
    assert "no index named 'nope' (indexes: u)" in _error_line(capsys)
    assert main(["index", "list", str(ids_data), "--json", *where]) == 0
    assert [item["name"] for item in json.loads(capsys.readouterr().out)["indexes"]] == ["u"]
    ids = pq.read_table(sorted(ids_data.glob("*.parquet"))[1], columns=["user_id"]).column(0)
    assert main(["query", str(ids_data), "--where", f"user_id = {ids[7]}", "--json", *where]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [row["user_id"] for row in rows] == [ids[7].as_py()]


def test_two_index_builds_started_together_keep_both_indexes(ids_data: Path) -> None:
    commands = [
        [sys.executable, "-m", "bloomskip", "index", "build", str(ids_data), "--index", text]
        for text in ("INDEX u user_id TYPE bloom_filter", "INDEX t s TYPE tokenbf_v1(512, 2, 0)")
    ]
    processes = [subprocess.Popen(command, stderr=subprocess.PIPE) for command in commands]
    for process in processes:
        _, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
    from bloomskip.dataset import Dataset

    definitions = Dataset(ids_data).index.definitions()
    assert sorted(spec.definition.split()[1] for spec in definitions.indexes) == ["t", "u"]
