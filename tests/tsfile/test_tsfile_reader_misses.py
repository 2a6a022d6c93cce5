"""``verify`` blames the filter only for the misses it causes (issue 26).

PyPI ``tsfile``'s tree-model query (``query_timeseries``) names a series by text, which the C++
reader parses back into a DeviceID and a measurement. Some stored series do not come back from
that parse (a device of two tags, a null tag, a dotted tag ...): the reader does not return them
whatever the filter holds. Every claim of ``verify`` is checked here against PyPI's reader. A
tree-model query reads a series when it returns exactly that series' rows (for a table, the rows
PyPI's ``query_table`` selects by the device's tag values; for a tree file, the values written),
not nothing, an InvalidPathError, or the rows of another series. The filter hides a series when
PyPI does not read it with the file's filter but does once ``repair --variant both`` has put
every path in the filter; the reader misses a series by itself when it does not read it with
either filter.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import tsfile as pypi_tsfile
from tsfile import Field, RowRecord, TimeseriesSchema, TSDataType, TsFileWriter
from tsfile.exceptions import InvalidPathError
from tsfile_corpus import pypi_series, pypi_table_rows, pypi_tree_series_rows, write_table

Run = Callable[..., tuple[int, str, str]]
JAVA_TABLE = "java_table_trailing_null.tsfile"
TREE = "tree_model_series_queries"
TABLE = "table_model_queries"
Rows = list[tuple[int, object]]


def _tree_query_reads(path: Path, expected: dict[tuple[str, str], Rows]) -> dict[str, bool]:
    """Per series path: whether PyPI's ``query_timeseries`` of ``(device text, measurement)``
    returns exactly that series' rows."""
    reader = pypi_tsfile.TsFileReader(str(path))
    reads = {}
    try:
        for (device, name), rows in expected.items():
            try:
                returned = pypi_tree_series_rows(reader, device, name)
            except InvalidPathError:
                returned = []
            assert f"{device}.{name}" not in reads  # each series has its own path text
            reads[f"{device}.{name}"] = bool(rows) and returned == rows
    finally:
        reader.close()
    return reads


def _table_rows(path: Path) -> dict[tuple[str, str], Rows]:
    """Per (device path text, column): the rows PyPI's ``query_table`` selects by the
    device's tag values."""
    series = [item for item in pypi_series(path, "table") if item[1] != ""]
    reader = pypi_tsfile.TsFileReader(str(path))
    try:
        return {
            (".".join("null" if s is None else s for s in device), name): pypi_table_rows(
                reader, device, name
            )
            for device, name in series
        }
    finally:
        reader.close()


def _verify(run_cli: Run, path: Path) -> tuple[int, dict, str]:
    status, out, _ = run_cli("verify", str(path), "--json")
    (report,) = json.loads(out)
    text_status, text, _ = run_cli("verify", str(path), "--limit", "100")
    assert text_status == status
    return status, report, text


def _repair(path: Path, run_cli: Run, variant: str) -> None:
    status, _, _ = run_cli("repair", str(path), "--variant", variant)
    assert status == 0


def _claims(report: dict, reader: str = "cpp") -> tuple[set[str], set[str]]:
    facts = report["readers"][reader][TREE]
    return set(facts["hidden"]), set(facts["missed_by_reader"])


def _own_line(text: str) -> str:
    (line,) = [line for line in text.splitlines() if "whatever the filter holds" in line]
    return line


def test_java_table_file_blames_the_filter_only_for_what_it_causes(
    shared_dir: Path, tmp_path: Path, run_cli: Run
) -> None:
    # Before: verify said the filter hides 4 series from C++ readers and exited 1, but two of
    # them (three-segment devices) PyPI never reads, filter or not.
    target = tmp_path / JAVA_TABLE
    shutil.copyfile(shared_dir / "research" / "tsfile" / "java_written" / JAVA_TABLE, target)
    expected = _table_rows(target)
    assert all(len(rows) == 3 for rows in expected.values())
    before = _tree_query_reads(target, expected)
    status, report, text = _verify(run_cli, target)
    _repair(target, run_cli, "both")
    after = _tree_query_reads(target, expected)
    caused = {path for path, read in before.items() if not read and after[path]}
    anyway = {path for path, read in after.items() if not read}
    assert caused == {"t1.bj.温度", "t1.设备.s1"}
    assert anyway == {"t1.null.d4.s1", "t1.null.d4.温度", "t1.bj.d1.s1", "t1.bj.d1.温度"}
    assert _claims(report) == (caused, anyway)
    assert status == 1 and report["false_negatives"] is True
    assert "C++ / PyPI tsfile (unsigned-tail): tree-model series queries: 2 series hidden" in text
    own = _own_line(text)
    assert "4 series" in own and all(path in own for path in anyway)
    assert not any(path in line for line in text.splitlines() if line != own for path in anyway)
    # Java's reader names the DeviceID itself and read every row of every series.
    assert _claims(report, "java") == (set(), set())
    for reader in ("java", "cpp"):
        assert report["readers"][reader][TABLE]["missed_by_reader"] == []
    # After the repair the filter hides nothing: the reader's own misses do not fail verify.
    status, report, text = _verify(run_cli, target)
    assert _claims(report) == (set(), anyway)
    assert status == 0 and report["false_negatives"] is False and report["reader_misses"] is True
    assert "FALSE NEGATIVES" not in text and "4 series" in _own_line(text)


def test_repair_warns_only_of_the_series_the_new_filter_hides(
    shared_dir: Path, tmp_path: Path, run_cli: Run
) -> None:
    # The repair's warning applies the same rule: a signed-tail filter for the Java table file
    # hides 2 series from PyPI, not the 4 whose C++ check fails.
    target = tmp_path / JAVA_TABLE
    shutil.copyfile(shared_dir / "research" / "tsfile" / "java_written" / JAVA_TABLE, target)
    expected = _table_rows(target)
    status, out, err = run_cli("repair", str(target), "--variant", "signed-tail", "--json")
    assert status == 0 and json.loads(out)["hidden_series"] == {"cpp": 2}
    signed = _tree_query_reads(target, expected)
    _repair(target, run_cli, "both")
    caused = {path for path, read in _tree_query_reads(target, expected).items()
              if read and not signed[path]}  # fmt: skip
    assert caused == {"t1.bj.温度", "t1.设备.s1"}
    assert "hides 2 series from C++ / PyPI tsfile readers" in err
    assert all(path in err for path in caused) and "t1.bj.d1" not in err


# Tag values covering each way the reader's parse of a path text can miss the stored device: a
# dot, a back-quoted keyword it unquotes (`select` reads the device "select") and one it keeps,
# a leading digit, wildcards and a % it refuses, quotes that keep a dot inside, the text null.
ONE_TAG = [("bj",), ("null",), ("a.b",), ("select",), ("`select`",), ("`from`",), ("1abc",),
           ("a*b",), ("**",), ("'a.b'",), ("`c.d`",), ("设备",), ("x%y",)]  # fmt: skip
# A null tag: its path text names the text null, which this file does not hold.
ONE_NULL_TAG = [("bj",), (None,), ("设备",)]
TWO_TAGS = [("bj", "d1"), ("bj", None), (None, "d4"), (None, None), ("设备", "null")]
TREE_DEVICES = {
    "root": ["s1"], "root.x": ["温度"], "root.a.b.c": ["s1"], "root.a.b.c.d": ["温度"],
    "root.sg.`a.b`": ["s1", "温度"], "x.y.z.w.v.u": ["温度"], "root.sg.null": ["s1"],
    "root.sg.设备": ["s1", "温度"],
}  # fmt: skip


def _cpp_tree(path: Path) -> dict[tuple[str, str], Rows]:
    """Write a tree file with PyPI ``tsfile`` (the C++ writer), each device with its own
    values; return each series' rows, by (device, measurement)."""
    writer = TsFileWriter(str(path))
    for device, names in TREE_DEVICES.items():
        for name in names:
            writer.register_timeseries(device, TimeseriesSchema(name, TSDataType.INT64))
    expected: dict[tuple[str, str], Rows] = {}
    for number, (device, names) in enumerate(TREE_DEVICES.items()):
        for row in range(2):
            values = [Field(name, number * 100 + row, TSDataType.INT64) for name in names]
            writer.write_row_record(RowRecord(device, row, values))
        for name in names:
            expected[device, name] = [(row, number * 100 + row) for row in range(2)]
    writer.close()
    return expected


@pytest.mark.parametrize("kind", ["one_tag", "one_null_tag", "two_tags", "tree"])
def test_the_reader_misses_are_exactly_what_pypi_never_reads(
    tmp_path: Path, run_cli: Run, kind: str
) -> None:
    path = tmp_path / f"{kind}.tsfile"
    if kind == "tree":
        expected = _cpp_tree(path)
    else:
        devices = {"one_tag": ONE_TAG, "one_null_tag": ONE_NULL_TAG, "two_tags": TWO_TAGS}[kind]
        tags = [f"tag{index}" for index in range(len(devices[0]))]
        write_table(path, "t1", tags, ["s1", "温度"], devices)
        expected = _table_rows(path)
    # The C++ writer's own filter: PyPI's check passes for every series it wrote (Java's may
    # not, so the status is checked once every reader's check passes).
    as_written = _tree_query_reads(path, expected)
    anyway = {series for series, read in as_written.items() if not read}
    status, report, _ = _verify(run_cli, path)
    assert _claims(report) == (set(), anyway)
    _repair(path, run_cli, "both")
    assert _tree_query_reads(path, expected) == as_written
    status, report, _ = _verify(run_cli, path)
    assert _claims(report) == (set(), anyway) and _claims(report, "java") == (set(), set())
    assert status == 0
    # A filter of the other tail hides from PyPI series it read before.
    _repair(path, run_cli, "signed-tail")
    signed = _tree_query_reads(path, expected)
    caused = {series for series, read in signed.items() if not read and as_written[series]}
    assert {series for series, read in signed.items() if not read} == caused | anyway
    status, report, _ = _verify(run_cli, path)
    assert _claims(report) == (caused, anyway)
    assert status == (1 if caused else 0)
    unread_devices = {series.rpartition(".")[0] for series in anyway}
    if kind == "one_tag":
        assert caused and unread_devices == {
            "t1.a.b", "t1.`select`", "t1.1abc", "t1.a*b", "t1.x%y"
        }  # fmt: skip
    elif kind == "one_null_tag":
        assert caused and unread_devices == {"t1.null"}
    elif kind == "two_tags":
        assert not caused and len(anyway) == 10  # every series of a device of two tags
    else:
        assert caused and anyway == set()  # tree devices parse back to themselves
