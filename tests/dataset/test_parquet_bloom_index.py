"""The ``parquet_bloom_filter`` dataset index: a build harvests the filters the files carry
(and computes them, sized as pyarrow sizes them, for chunks without one); ``=`` / ``IN`` keep
exactly the row groups DuckDB's ``parquet_bloom_probe`` keeps on the harvested filters; the
rows a query returns are DuckDB's; both layouts (segments, sidecar) give the same decisions."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bloomskip import Dataset
from bloomskip.errors import BloomskipError

GROUP = 2_000
INDEXES = [
    "INDEX ik k TYPE parquet_bloom_filter",
    "INDEX is s TYPE parquet_bloom_filter(0.01)",
    "INDEX iv v TYPE parquet_bloom_filter",
    "INDEX it tags TYPE parquet_bloom_filter",
    "INDEX itime t TYPE parquet_bloom_filter",
]


def _table(seed: int, rows: int = 4 * GROUP) -> pa.Table:
    rng = np.random.default_rng(seed)
    k = rng.integers(0, 200_000, rows)
    return pa.table(
        {
            "k": pa.array(k, pa.int64()),
            "s": pa.array([f"user-{x}" for x in rng.integers(0, 50_000, rows).tolist()]),
            # Few distinct doubles, zeros of both signs among them.
            "v": pa.array(rng.choice([0.0, -0.0, 1.5, 2.25, 1e9], rows)),
            "tags": pa.array([[f"t{x}", f"t{x + 1}"] for x in (k % 5_000).tolist()]),
            "pos": pa.array(np.arange(rows) + seed * 1_000_000, pa.int64()),
            "t": pa.array(rng.integers(0, 20_000, rows) * 1_000 + 1_704_067_200_000).cast(
                pa.timestamp("ms")
            ),
        }
    )


def _write(path: Path, table: pa.Table, filters: bool) -> None:
    options = {"k": True, "s": {"fpp": 0.01}, "v": True, "tags": True, "t": True}
    options = options if filters else None
    pq.write_table(table, path, row_group_size=GROUP, bloom_filter_options=options)


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    """Three datasets: files with filters, the same files without, and a mix."""
    base = tmp_path_factory.mktemp("pbf")
    result = {name: base / name for name in ("stored", "computed", "mixed")}
    for folder in result.values():
        folder.mkdir()
    for seed in range(3):
        table = _table(seed)
        _write(result["stored"] / f"f{seed}.parquet", table, True)
        _write(result["computed"] / f"f{seed}.parquet", table, False)
        _write(result["mixed"] / f"f{seed}.parquet", table, seed != 1)
    return result


def _duckdb_keeps(path: Path, column: str, literal: str) -> list[int]:
    rows = duckdb.sql(
        f"SELECT row_group_id, bloom_filter_excludes FROM parquet_bloom_probe('{path}', "
        f"'{column}', {literal}) ORDER BY row_group_id"
    ).fetchall()
    return [rg for rg, excludes in rows if not excludes]


def _kept(dataset: Dataset, where: str) -> dict[str, list[int]]:
    kept: dict[str, list[int]] = {}
    for path, group in dataset.explain(where).row_groups():
        kept.setdefault(Path(path).name, []).append(group)
    return kept


def _positions(dataset: Dataset, where: str) -> list[int]:
    return sorted(dataset.query(where, columns=["pos"])["pos"].to_pylist())


def _duckdb_positions(folder: Path, where: str) -> list[int]:
    rows = duckdb.sql(f"SELECT pos FROM read_parquet('{folder}/*.parquet') WHERE {where}")
    return sorted(value for (value,) in rows.fetchall())


def _lookups(folder: Path) -> list[tuple[str, str, str]]:
    """(column, SQL literal, WHERE) for values present in one file and absent ones."""
    table = pq.read_table(folder / "f1.parquet")
    k = table["k"][5_000].as_py()
    s = table["s"][7_777].as_py()
    t = table["t"][3_333].as_py().strftime("%Y-%m-%d %H:%M:%S")
    return [
        ("k", str(k), f"k = {k}"),
        ("k", "-5", "k = -5"),
        ("s", f"'{s}'", f"s = '{s}'"),
        ("s", "'nobody'", "s = 'nobody'"),
        ("v", "2.25", "v = 2.25"),
        ("v", "7.5", "v = 7.5"),
        ("t", f"'{t}'", f"t = '{t}'"),
        ("t", "'2030-01-01 00:00:00'", "t = '2030-01-01 00:00:00'"),
    ]


@pytest.mark.parametrize("layout", ["segments", "sidecar"])
def test_stored_filters_prune_as_duckdb_probes_them(folders, tmp_path, layout) -> None:
    folder = tmp_path / "d"
    shutil.copytree(folders["stored"], folder)
    sidecar = folder / "_bloomskip.index" if layout == "sidecar" else None
    dataset = Dataset(folder, sidecar=sidecar)
    dataset.build_index(INDEXES, progress=False)
    assert dataset.index.layout == ("sidecar" if layout == "sidecar" else "segmented")
    for column, literal, where in _lookups(folder):
        kept = _kept(Dataset(folder, sidecar=sidecar), where)
        for name in ("f0.parquet", "f1.parquet", "f2.parquet"):
            assert kept.get(name, []) == _duckdb_keeps(folder / name, column, literal), (
                where,
                name,
            )
        assert _positions(dataset, where) == _duckdb_positions(folder, where), where
    # IN: a row group is kept when any literal passes (DuckDB's rule for each literal).
    k0 = pq.read_table(folder / "f0.parquet")["k"][10].as_py()
    k2 = pq.read_table(folder / "f2.parquet")["k"][7_000].as_py()
    where = f"k IN ({k0}, {k2}, -1)"
    kept = _kept(dataset, where)
    for name in ("f0.parquet", "f1.parquet", "f2.parquet"):
        expected = set()
        for literal in (k0, k2, -1):
            expected |= set(_duckdb_keeps(folder / name, "k", str(literal)))
        assert kept.get(name, []) == sorted(expected), name
    assert _positions(dataset, where) == _duckdb_positions(folder, where)


def test_computed_filters_are_the_writers_and_prune_alike(folders, tmp_path) -> None:
    """Filters computed for files without any equal, byte for byte, those pyarrow writes at
    the same false-positive rate (``s`` at 0.01), so the decisions are the same."""
    stored, computed = tmp_path / "stored", tmp_path / "computed"
    shutil.copytree(folders["stored"], stored)
    shutil.copytree(folders["computed"], computed)
    for folder in (stored, computed):
        Dataset(folder).build_index(["INDEX is s TYPE parquet_bloom_filter(0.01)"], progress=False)
    for _column, _literal, where in _lookups(computed):
        if where.startswith("s"):
            assert _kept(Dataset(stored), where) == _kept(Dataset(computed), where), where
            assert _positions(Dataset(computed), where) == _duckdb_positions(computed, where)
    payloads = []
    for folder in (stored, computed):
        states, _ = Dataset(folder).index_states()
        payloads.append([bytes(state.entry.payloads[0]) for state in states])
    assert payloads[0] == payloads[1]


def test_mixed_files_and_trees_return_duckdbs_rows(folders, tmp_path) -> None:
    folder = tmp_path / "mixed"
    shutil.copytree(folders["mixed"], folder)
    dataset = Dataset(folder)
    dataset.build_index(INDEXES, progress=False)
    table = pq.read_table(folder / "f1.parquet")  # the file without filters
    k, s = table["k"][123].as_py(), table["s"][4_567].as_py()
    tag = table["tags"][3_000].as_py()[0]
    cases = [
        f"k = {k} OR s = '{s}'",
        f"k = {k} AND s = '{s}'",
        f"k IN ({k}, 1, 2) AND NOT (s = 'x')",
        f"NOT (k = {k})",
        "v = 0.0",
        "v = -0.0",
        f"has(tags, '{tag}')",
        f"has(tags, '{tag}') AND k = {k}",
    ]
    for where in cases:
        duck = where.replace("has(tags, ", "list_contains(tags, ")
        assert _positions(dataset, where) == _duckdb_positions(folder, duck), where
    # Pruning happens: one value's row groups only.
    assert len(dataset.explain(f"k = {k}").row_groups()) < 3
    assert len(dataset.explain(f"has(tags, '{tag}')").row_groups()) < 12
    text = str(dataset.explain(f"k = {k}"))
    assert "parquet_bloom_filter" in text and "granules skipped" in text
    status = dataset.status()
    assert any("parquet_bloom_filter" in item["definition"] for item in status["indexes"])


@pytest.mark.parametrize(
    "definition, message",
    [
        ("(k, s) TYPE parquet_bloom_filter", "indexes one column"),
        ("lower(s) TYPE parquet_bloom_filter", "indexes one column"),
        ("k TYPE parquet_bloom_filter(0)", "strictly between 0 and 1"),
        ("k TYPE parquet_bloom_filter(1.0)", "strictly between 0 and 1"),
        ("k TYPE parquet_bloom_filter(0.1, 2)", "at most one argument"),
        ("k TYPE parquet_bloom_filter GRANULARITY 2", "GRANULARITY must be 1"),
    ],
)
def test_bad_definitions_are_refused(folders, tmp_path, definition, message) -> None:
    folder = tmp_path / "d"
    shutil.copytree(folders["stored"], folder)
    with pytest.raises(BloomskipError, match=message):
        Dataset(folder).build_index([definition], progress=False)


def test_row_granules_are_refused_on_the_command_line(folders, tmp_path) -> None:
    folder = tmp_path / "d"
    shutil.copytree(folders["stored"], folder)
    command = [sys.executable, "-m", "bloomskip", "index", "build", str(folder)]
    done = subprocess.run(
        [*command, "--index", "k TYPE parquet_bloom_filter", "--granule", "1000"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "granule is a row group" in done.stderr
    done = subprocess.run(
        [*command, "--index", "k TYPE parquet_bloom_filter(0.01)"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    k = pq.read_table(folder / "f2.parquet")["k"][99].as_py()
    query = [sys.executable, "-m", "bloomskip", "query", str(folder), "--where", f"k = {k}"]
    done = subprocess.run([*query, "--explain", "--json"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout)
    (index,) = facts["indexes"]
    assert "parquet_bloom_filter(0.01)" in index["definition"] and index["useful"]
    assert index["granules_skipped"] >= 10 and not index["saturated"]
    done = subprocess.run(
        [sys.executable, "-m", "bloomskip", "index", "status", str(folder)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and "TYPE parquet_bloom_filter(0.01)" in done.stdout


def test_a_damaged_plain_part_is_not_used_and_its_rows_are_still_found(folders, tmp_path) -> None:
    folder = tmp_path / "d"
    shutil.copytree(folders["stored"], folder)
    Dataset(folder).build_index(["k TYPE parquet_bloom_filter"], progress=False)
    (segment,) = (folder / "_bloomskip" / "segments").iterdir()
    data = bytearray(segment.read_bytes())
    data[-100] ^= 0xFF  # inside the granules: the header still reads
    segment.write_bytes(bytes(data))
    k = pq.read_table(folder / "f1.parquet")["k"][5].as_py()
    with pytest.warns(Warning, match="granules SHA-256 mismatch"):
        found = Dataset(folder).query(f"k = {k}", columns=["pos"])
    assert found["pos"].to_pylist() == _duckdb_positions(folder, f"k = {k}")


def test_a_file_without_the_column_is_skipped_as_all_nulls(tmp_path) -> None:
    """The scan reads a missing column as NULLs: the file's granules are empty filters, so
    an equality skips it (for a list column, its elements' filter)."""
    table = pa.table({"tags": [["a", "b"], ["c"]], "k": [1, 2], "pos": [0, 1]})
    pq.write_table(table, tmp_path / "a.parquet", bloom_filter_options={"tags": True, "k": True})
    pq.write_table(pa.table({"pos": [2, 3]}), tmp_path / "b.parquet")
    dataset = Dataset(tmp_path)
    indexes = ["tags TYPE parquet_bloom_filter", "k TYPE parquet_bloom_filter"]
    dataset.build_index(indexes, progress=False)
    for where in ("has(tags, 'a')", "k = 2"):
        assert [Path(p).name for p, _ in dataset.explain(where).row_groups()] == ["a.parquet"]
    assert _positions(dataset, "has(tags, 'a') OR k = 2") == [0, 1]


def test_two_rates_over_one_column_compute_their_own_filters(folders, tmp_path) -> None:
    folder = tmp_path / "computed"
    shutil.copytree(folders["computed"], folder)
    indexes = ["INDEX a s TYPE parquet_bloom_filter(0.2)", "INDEX b s TYPE parquet_bloom_filter"]
    Dataset(folder).build_index(indexes, progress=False)
    states, _ = Dataset(folder).index_states()
    for state in states:
        loose, tight = (len(bytes(state.entry.payloads[n])) for n in (0, 1))
        assert loose < tight  # sized for 0.2 and for the default 0.01


def test_a_struct_column_is_refused(tmp_path) -> None:
    pq.write_table(pa.table({"st": [{"x": 1, "y": "a"}]}), tmp_path / "a.parquet")
    with pytest.raises(BloomskipError, match="one Parquet leaf"):
        Dataset(tmp_path).build_index(["st TYPE parquet_bloom_filter"], progress=False)
