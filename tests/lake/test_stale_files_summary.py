"""Files the index no longer describes are summed up, never named one warning line each.

A copied folder (``cp -r``: every modification time new) or a rewritten prefix makes every file
stale. Each query then says so once: one warning line naming the count and the command that
re-indexes them (with the ``--index-location`` the user gave), one ``BloomskipWarning`` in
Python; the files themselves are listed by ``--explain`` (text and JSON), ``index status`` and
``Explanation.changed_files``. The same for every kind of location: a folder with its sidecar,
a folder with its index elsewhere, an S3 prefix, a Delta table and an Iceberg table.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from dataset_fixtures import make_table, write_dataset
from lake_fixtures import upload

from bloomskip import BloomskipWarning, Dataset
from bloomskip.cli import main

FILES = 5
CATALOG = "bloomskipstale"
INDEX = "INDEX k_bf k TYPE bloom_filter(0.05)"
# A value the first file holds: the scanned files must still answer it.
WHERE = f"k = {next(k for k in make_table(400, 0, 0).column('k').to_pylist() if k is not None)}"


def _copy(source: Path, target: Path) -> None:
    """``cp -r``: the bytes copied, every modification time new."""
    shutil.copytree(source, target, copy_function=shutil.copy)


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "logs"
    write_dataset(folder, [(400, 100)] * FILES)
    return folder


def _copied_folder(tmp_path: Path, request) -> tuple[list[str], str | None, str, str]:
    source = _folder(tmp_path)
    Dataset(source).build_index([INDEX], progress=False)
    copy = tmp_path / "copy"
    _copy(source, copy)
    return [str(copy)], None, f"bloomskip index build {copy}", "new size or modification time"


def _copied_folder_index_elsewhere(
    tmp_path: Path, request
) -> tuple[list[str], str | None, str, str]:
    source, index = _folder(tmp_path), str(tmp_path / "index")
    Dataset(source, index_location=index).build_index([INDEX], progress=False)
    copy = tmp_path / "copy"
    _copy(source, copy)
    command = f"bloomskip index build {copy} --index-location {index}"
    how = "new size or modification time"
    return [str(copy), "--index-location", index], index, command, how


def _rewritten_prefix(tmp_path: Path, request) -> tuple[list[str], str | None, str, str]:
    location = f"s3://{request.getfixturevalue('bucket')}/logs"
    source = _folder(tmp_path)
    upload(source, location)
    Dataset(location).build_index([INDEX], progress=False)
    # The same rows, written again in other row groups: every object has a new ETag.
    rewritten = tmp_path / "rewritten"
    rewritten.mkdir()
    for path in sorted(source.glob("*.parquet")):
        pq.write_table(pq.read_table(path), rewritten / path.name, row_group_size=150)
    upload(rewritten, location)
    return [location], None, f"bloomskip index build {location}", "new size or ETag"


def _copied_delta_table(tmp_path: Path, request) -> tuple[list[str], str | None, str, str]:
    deltalake = pytest.importorskip("deltalake")
    source = tmp_path / "table"
    for number in range(FILES):
        deltalake.write_deltalake(str(source), make_table(400, number, number * 400), mode="append")
    Dataset(source).build_index([INDEX], progress=False)
    copy = tmp_path / "copy"
    _copy(source, copy)
    return [str(copy)], None, f"bloomskip index build {copy}", "new size or modification time"


def _touched_iceberg_table(tmp_path: Path, request) -> tuple[list[str], str | None, str, str]:
    catalog = request.getfixturevalue("catalog")
    table = catalog.create_table("ns.logs", schema=make_table(1, 0, 0).schema)
    for number in range(FILES):
        table.append(make_table(400, number, number * 400))
    uri = f"iceberg://{CATALOG}/ns.logs"
    Dataset(uri).build_index([INDEX], progress=False)
    # Its metadata names the files by absolute path: a copy would read the originals.
    for path in (tmp_path / "warehouse").rglob("*.parquet"):
        stat = path.stat()
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    return [uri], None, f"bloomskip index build {uri}", "new size or modification time"


@pytest.fixture
def catalog(tmp_path, monkeypatch):
    """A SQLite catalog named ``CATALOG`` by the environment, as a user's is (test_iceberg)."""
    pytest.importorskip("pyiceberg")
    from pyiceberg.catalog.sql import SqlCatalog

    properties = {
        "uri": f"sqlite:///{tmp_path}/catalog.db",
        "warehouse": f"file://{tmp_path}/warehouse",
    }
    monkeypatch.setenv(f"PYICEBERG_CATALOG__{CATALOG.upper()}__TYPE", "sql")
    for key, value in properties.items():
        monkeypatch.setenv(f"PYICEBERG_CATALOG__{CATALOG.upper()}__{key.upper()}", value)
    catalog = SqlCatalog(CATALOG, **properties)
    catalog.create_namespace("ns")
    return catalog


LOCATIONS = {
    "folder": _copied_folder,
    "folder with --index-location": _copied_folder_index_elsewhere,
    "s3 prefix": _rewritten_prefix,
    "delta table": _copied_delta_table,
    "iceberg table": _touched_iceberg_table,
}


@pytest.mark.parametrize("kind", LOCATIONS)
def test_stale_files_are_one_warning_and_a_list(kind, tmp_path, request, capsys):
    argv, index_location, command, how = LOCATIONS[kind](tmp_path, request)
    dataset = Dataset(argv[0], index_location=index_location)
    explanation = dataset.explain(WHERE)
    stale = sorted(explanation.changed_files)
    assert len(stale) == FILES
    assert sorted(state.relative_path for state in explanation.files) == stale
    summary = (
        f"{FILES} files changed since they were indexed ({how}); they were scanned. Run "
        f"`{command}` to re-index them."
    )
    assert summary in explanation.warnings

    # Python: one warning per query, attributed to the line that ran it.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows = dataset.query(WHERE, ["id"]).column("id").to_pylist()
    assert [item.category for item in caught] == [BloomskipWarning]
    assert summary in str(caught[0].message) and caught[0].filename == __file__
    assert rows  # scanned, the stale files still answer

    # The command line: one warning line, whatever the number of files.
    capsys.readouterr()
    assert main(["query", *argv, "--where", WHERE, "--format", "json"]) == 0
    assert capsys.readouterr().err.splitlines() == [f"bloomskip: warning: {summary}"]

    # --explain lists them, in its text and its JSON.
    assert main(["query", *argv, "--where", WHERE, "--explain"]) == 0
    text = capsys.readouterr().out.splitlines()
    assert f"warning: {summary}" in text
    listed = [line.removeprefix("  changed since indexed: ") for line in text if "since" in line]
    assert sorted(listed[1:]) == stale  # the first is the warning
    assert main(["query", *argv, "--where", WHERE, "--explain", "--format", "json"]) == 0
    assert sorted(json.loads(capsys.readouterr().out)["files_changed"]) == stale

    # index status lists them too.
    assert main(["index", "status", *argv, "--json"]) == 0
    assert sorted(json.loads(capsys.readouterr().out)["stale"]) == stale
    assert main(["index", "status", *argv]) == 0
    status = capsys.readouterr().out.splitlines()
    assert sorted(line.removeprefix("  stale: ") for line in status if "stale: " in line) == stale


def test_new_files_are_one_warning_and_a_list(tmp_path, capsys):
    folder = _folder(tmp_path)
    Dataset(folder).build_index([INDEX], progress=False)
    added = [f"added-{number}.parquet" for number in range(3)]
    for number, name in enumerate(added):
        pq.write_table(make_table(100, 50 + number, 10_000), folder / name)
    explanation = Dataset(folder).explain(WHERE)
    assert explanation.unindexed_files == added and explanation.changed_files == []
    capsys.readouterr()
    assert main(["query", str(folder), "--where", WHERE]) == 0
    assert capsys.readouterr().err.splitlines() == [
        f"bloomskip: warning: 3 files are not indexed (new since the build); they were "
        f"scanned. Run `bloomskip index build {folder}` to index them."
    ]
    assert main(["query", str(folder), "--where", WHERE, "--explain"]) == 0
    text = capsys.readouterr().out.splitlines()
    assert [line for line in text if line.startswith("  not indexed: ")] == [
        f"  not indexed: {name}" for name in added
    ]


def test_a_glob_served_by_its_folders_index_names_the_folders_build(tmp_path, capsys):
    folder = _folder(tmp_path)
    Dataset(folder).build_index([INDEX], progress=False)
    for path in folder.glob("part-[12].parquet"):
        pq.write_table(pq.read_table(path), path, row_group_size=50)
    explanation = Dataset(f"{folder}/part-*.parquet").explain(WHERE)
    assert explanation.changed_files == ["part-1.parquet", "part-2.parquet"]
    assert (
        f"Run `bloomskip index build {folder.resolve()}` to re-index them."
        in (explanation.warnings[-1])
    )


def test_files_changed_behind_a_tables_back_are_one_line_and_listed(tmp_path, capsys):
    deltalake = pytest.importorskip("deltalake")
    location = tmp_path / "table"
    for number in range(3):
        deltalake.write_deltalake(
            str(location), make_table(400, number, number * 400), mode="append"
        )
    Dataset(location).build_index([INDEX], progress=False)
    rewritten = sorted(path.name for path in location.glob("*.parquet"))[:2]
    for name in rewritten:
        pq.write_table(make_table(500, 9, 0), location / name)
    explanation = Dataset(location).explain(WHERE)
    behind = [line for line in explanation.warnings if "changed behind" in line]
    assert len(behind) == 1 and behind[0].startswith("2 files changed behind the table's back")
    assert explanation.table["changed_behind"] == rewritten
    # No build can index them (they differ from the log): no advice to run one.
    assert explanation.changed_files == [] and len(explanation.warnings) == 1
    capsys.readouterr()
    assert main(["query", str(location), "--where", WHERE, "--explain", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["table"]["files_changed_behind"] == rewritten
    assert main(["query", str(location), "--where", WHERE, "--explain"]) == 0
    text = capsys.readouterr().out.splitlines()
    assert [line for line in text if "changed behind the table's back: " in line] == [
        f"  changed behind the table's back: {name}" for name in rewritten
    ]
    # A build cannot index them either, and says so once.
    report = Dataset(location).build_index(progress=False)
    assert [line for line in report.warnings if "changed behind" in line] == behind
    assert [line for line in report.warnings if "not indexed" in line] == [
        f"2 files not indexed: they differ from the table's metadata (e.g. "
        f"{location / rewritten[0]})"
    ]
