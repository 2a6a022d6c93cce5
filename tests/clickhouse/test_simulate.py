"""``bloomskip clickhouse simulate`` against the part ClickHouse writes for the same rows.

chdb writes a MergeTree part with candidate indexes; the same rows go to Parquet / Arrow IPC /
CSV files and through the CLI. Checked: the selected data granules per predicate equal
``EXPLAIN indexes = 1`` (also with GRANULARITY > 1), the emitted ``.idx`` streams decompress to
ClickHouse's bytes with the same block boundaries and marks, and bad input exits with status 2.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

from bloomskip.cli import main
from bloomskip.clickhouse.compression import read_compressed_stream_with_blocks
from bloomskip.clickhouse.marks import MarksFormat, read_marks

_INDEXES = [
    "INDEX bv v TYPE bloom_filter GRANULARITY 1",
    "INDEX bv3 v TYPE bloom_filter(0.01) GRANULARITY 3",
    "INDEX tk msg TYPE tokenbf_v1(1024, 3, 0) GRANULARITY 1",
    "INDEX ng msg TYPE ngrambf_v1(3, 1024, 2, 0) GRANULARITY 2",
]
_PREDICATES = [
    "v = 77",
    "v IN (5, 1900, 99999)",
    "hasToken(msg, 'w17')",
    "msg LIKE '%v123-%'",
    "startsWith(msg, 'w5 ')",
    "v = 77 OR hasToken(msg, 'w3')",
    "v != 3",
]


@pytest.fixture(scope="module")
def part(clickhouse):
    # Granules of 128 rows (conftest default), the last one partial: 2000 rows -> 16 granules.
    return clickhouse.create_part(
        {"v": "UInt64", "msg": "String"},
        _INDEXES,
        "SELECT number * 3, concat('w', toString(number % 40), ' v', toString(number), '-', "
        "toString(number % 7)) FROM numbers(2000)",
        settings={"min_bytes_for_wide_part": 0},  # a Wide part: .mrk2 marks, as --emit writes
    )


@pytest.fixture(scope="module")
def parquet_file(part, tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("simulate") / "rows.parquet"
    pq.write_table(part.data, path)
    return str(path)


def _run_json(capsys, arguments: list[str]) -> dict:
    assert main(["clickhouse", "simulate", *arguments, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _cli_arguments(data: str, granularity: int = 128) -> list[str]:
    arguments = [data, "--index-granularity", str(granularity)]
    for clause in _INDEXES:
        arguments += ["--index", clause]
    for where in _PREDICATES:
        arguments += ["--where", where]
    return arguments


def test_selected_granules_equal_explain(part, parquet_file, capsys) -> None:
    assert list(part.granule_rows[:-1]) == [128] * (len(part.granule_rows) - 1)
    report = _run_json(capsys, _cli_arguments(parquet_file))
    assert report["rows"] == 2000
    assert [i["name"] for i in report["indexes"]] == ["bv", "bv3", "tk", "ng"]
    for index in report["indexes"]:
        assert index["granules_total"] == len(part.granule_rows)
        for predicate in index["predicates"]:
            if predicate["useful"]:
                expected = part.explain_granules(predicate["where"], index["name"])[0]
            else:
                expected = len(part.granule_rows)
            assert predicate["granules_selected"] == expected, (index["name"], predicate)


def test_rows_skipped_and_sizes(part, parquet_file, capsys) -> None:
    report = _run_json(capsys, _cli_arguments(parquet_file))
    for index in report["indexes"]:
        for predicate in index["predicates"]:
            # Every granule holds 128 rows but the last (2000 - 15 * 128 = 80).
            read_rows = 2000 - predicate["rows_skipped"]
            assert predicate["rows_skipped_fraction"] == predicate["rows_skipped"] / 2000
            selected = predicate["granules_selected"]
            assert read_rows in (128 * selected, 128 * (selected - 1) + 80), predicate
    # The decompressed stream ClickHouse wrote has the reported size.
    for index in report["indexes"]:
        assert index["bytes"] == len(part.index_stream(index["name"]))
        assert index["bits_per_row"] == pytest.approx(8 * index["bytes"] / 2000)
        assert 0 < index["mean_fill_ratio"] < 1


@pytest.mark.parametrize(("codec", "jobs"), [("LZ4", "1"), ("NONE", "1"), ("LZ4", "3")])
def test_emitted_files_match_clickhouse(part, parquet_file, capsys, tmp_path, codec, jobs) -> None:
    arguments = [*_cli_arguments(parquet_file), "--emit", str(tmp_path), "--codec", codec]
    _run_json(capsys, [*arguments, "--jobs", jobs])
    for name in ("bv", "bv3", "tk", "ng"):
        ours = read_compressed_stream_with_blocks((tmp_path / f"skp_idx_{name}.idx").read_bytes())
        theirs = read_compressed_stream_with_blocks(part.index_file(name).read_bytes())
        assert ours.data == theirs.data, name
        assert ours.block_starts.tolist() == theirs.block_starts.tolist(), name
        fmt = MarksFormat.from_name(".mrk2")
        our_marks = read_marks((tmp_path / f"skp_idx_{name}.mrk2").read_bytes(), fmt)
        their_marks = read_marks((part.path / f"skp_idx_{name}.mrk2").read_bytes(), fmt)
        assert our_marks.offset_in_block.tolist() == their_marks.offset_in_block.tolist()
        assert our_marks.rows.tolist() == their_marks.rows.tolist()
        # Marks point at the same block (by block number; compressed sizes differ by codec).
        our_blocks = np.searchsorted(ours.block_offsets, our_marks.block_offset[:, 0])
        their_blocks = np.searchsorted(theirs.block_offsets, their_marks.block_offset[:, 0])
        assert our_blocks.tolist() == their_blocks.tolist()
        if codec == "NONE":
            assert set(ours.block_methods.tolist()) == {0x02}


def test_arrow_ipc_and_csv_give_the_parquet_report(part, parquet_file, tmp_path, capsys) -> None:
    expected = _run_json(capsys, _cli_arguments(parquet_file))
    arrow_path = tmp_path / "rows.arrow"
    with ipc.new_file(arrow_path, part.data.schema) as writer:
        writer.write_table(part.data)
    stream_path = tmp_path / "rows.arrows"
    with ipc.new_stream(stream_path, part.data.schema) as writer:
        writer.write_table(part.data)
    csv_path = tmp_path / "rows.csv"
    pacsv.write_csv(part.data, csv_path)
    for path, extra in (
        (arrow_path, []),
        (stream_path, []),
        (csv_path, ["--column-type", "v=UInt64"]),
    ):
        assert _run_json(capsys, [*_cli_arguments(str(path)), *extra]) == expected, path


def test_text_report_lists_indexes_side_by_side(parquet_file, capsys) -> None:
    assert main(["clickhouse", "simulate", *_cli_arguments(parquet_file)]) == 0
    out = capsys.readouterr().out
    assert "2000 rows in 16 data granules" in out
    for name in ("bv", "bv3", "tk", "ng"):
        assert any(line.startswith(name + " ") for line in out.splitlines()), name
    assert "[4] msg LIKE '%v123-%'" in out


def test_granularity_is_counted_in_data_granules(tmp_path, capsys) -> None:
    # 10 data granules of 10 rows; GRANULARITY 4 -> index granules of 4, 4 and 2 data granules.
    path = tmp_path / "v.parquet"
    pq.write_table(pa.table({"v": pa.array(np.arange(100), pa.uint32())}), path)
    report = _run_json(
        capsys,
        [
            str(path),
            "--index-granularity",
            "10",
            "--index",
            "v TYPE bloom_filter GRANULARITY 4",
            "--where",
            "v = 95",
            "--where",
            "v = 15",
        ],
    )
    [index] = report["indexes"]
    assert index["granules_total"] == 10
    assert [p["granules_selected"] for p in index["predicates"]] == [2, 4]
    assert [p["rows_skipped_fraction"] for p in index["predicates"]] == [0.8, 0.6]
    assert [p["rows_skipped"] for p in index["predicates"]] == [80, 60]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["missing.parquet", "--index", "v TYPE bloom_filter"], "no such file"),
        (["{data}", "--index", "nope TYPE bloom_filter"], "no column 'nope'"),
        (["{data}", "--index", "v TYPE minmax"], "minmax"),
        (
            ["{data}", "--index", "v TYPE bloom_filter", "--index", "v TYPE bloom_filter(0.1)"],
            "repeated: v",
        ),
        (["{data}", "--index", "v TYPE bloom_filter", "--where", "v = = 1"], "cannot parse"),
        (["{data}", "--index", "v TYPE bloom_filter", "--column-type", "v"], "COL=TYPE"),
        (["{data}", "--index", "v TYPE tokenbf_v1(64, 2, 0)"], "v"),
        (["{corrupt}", "--index", "v TYPE bloom_filter"], "cannot read"),
    ],
)
def test_bad_input_exits_with_status_2(tmp_path, capsys, arguments, message) -> None:
    data = tmp_path / "v.parquet"
    pq.write_table(pa.table({"v": pa.array([1, 2, 3], pa.uint32())}), data)
    corrupt = tmp_path / "corrupt.parquet"
    corrupt.write_bytes(b"PAR1 this is not parquet")
    filled = [a.format(data=data, corrupt=corrupt) for a in arguments]
    assert main(["clickhouse", "simulate", *filled]) == 2
    assert message in capsys.readouterr().err


def test_an_index_no_predicate_can_use_is_warned_about(tmp_path, capsys) -> None:
    path = tmp_path / "ip.parquet"
    addresses = pa.array([bytes(15) + bytes([i]) for i in range(40)], pa.binary(16))
    pq.write_table(pa.table({"ip": addresses}), path)
    arguments = [str(path), "--index-granularity", "10", "--column-type", "ip=IPv6"]
    arguments += [
        "--index",
        "INDEX t ip TYPE tokenbf_v1(64, 2, 0)",
        "--index",
        "INDEX b ip TYPE bloom_filter",
    ]
    assert main(["clickhouse", "simulate", *arguments, "--where", "ip = '::5'", "--json"]) == 0
    captured = capsys.readouterr()
    text, bloom = json.loads(captured.out)["indexes"]
    assert "never used" in text["warnings"][0] and bloom["warnings"] == []
    assert captured.err.count("warning: index 't': a tokenbf_v1 index over IPv6 is never used") == 1
    assert text["predicates"][0]["granules_selected"] == 4 and not text["predicates"][0]["useful"]
    assert bloom["predicates"][0]["granules_selected"] == 1


@pytest.mark.parametrize("rows", [1234, 1250, 1249, 205, 149, 40])
def test_a_short_last_granule_is_kept_as_a_wide_part_keeps_it(clickhouse, tmp_path, capsys, rows):
    """simulate models a Wide part (what --emit writes): its last granule keeps the short tail
    (1,234 rows at 100: 12 granules of 100 and one of 34). A Compact part, which ClickHouse
    writes for small inserts, merges a tail of under half the granularity into the granule
    before (seen with chdb: 11 of 100 and one of 134); simulate does not model that layout."""
    index = "INDEX bv v TYPE bloom_filter(0.01) GRANULARITY 1"
    part = clickhouse.create_part(
        {"v": "UInt64"},
        [index],
        f"SELECT number * 7 FROM numbers({rows})",
        settings={"index_granularity": 100, "min_bytes_for_wide_part": 0},
    )
    path = tmp_path / "rows.parquet"
    pq.write_table(part.data, path)
    arguments = [str(path), "--index-granularity", "100", "--index", index, "--where", "v = 77"]
    report = _run_json(capsys, [*arguments, "--emit", str(tmp_path / "emit")])
    assert report["data_granules"] == len(part.granule_rows)
    fmt = MarksFormat.from_name(".mrk2")
    ours_marks = read_marks((tmp_path / "emit" / "skp_idx_bv.mrk2").read_bytes(), fmt)
    theirs_marks = read_marks((part.path / "skp_idx_bv.mrk2").read_bytes(), fmt)
    assert ours_marks.rows.tolist() == theirs_marks.rows.tolist()
    assert part.granule_rows[-1] == rows % 100 or rows % 100 == 0
    ours = read_compressed_stream_with_blocks((tmp_path / "emit" / "skp_idx_bv.idx").read_bytes())
    assert ours.data == part.index_stream("bv")
