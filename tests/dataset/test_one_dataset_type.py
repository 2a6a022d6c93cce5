"""One public dataset type over every location, and a local query that stats each file once
(issue 28, items 1 and 7).

Before: ``bloomskip.Dataset`` over an index location or a Delta table returned a
``LakeDataset`` or ``TableDataset``, neither a ``Dataset``; and a warm local query took each
file's ``stat`` four to six times (three cache refreshes, the identity check, and a check
before and after the read).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bloomskip
from bloomskip import BloomskipError
from bloomskip.dataset.backends.folder import FolderDataset
from bloomskip.dataset.backends.lake import LakeDataset
from bloomskip.dataset.backends.table import TableDataset
from bloomskip.dataset.build.report import BuildReport

deltalake = pytest.importorskip("deltalake")

INDEX = "user_id TYPE bloom_filter(0.01)"
STORED = "INDEX user_id user_id TYPE bloom_filter(0.01) GRANULARITY 1"
WHERE = "user_id = 1234 OR user_id = 2500"


def _table(start: int, rows: int = 1000) -> pa.Table:
    ids = pa.array(range(start, start + rows), pa.int64())
    return pa.table(
        {"user_id": ids, "msg": pa.array([f"m{i}" for i in range(start, start + rows)])}
    )


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    for number in range(4):
        pq.write_table(_table(number * 1000), data / f"part-{number}.parquet", row_group_size=250)
    return data


def _ids(table: pa.Table) -> list[int]:
    return sorted(table.column("user_id").to_pylist())


def _check_plan(explanation) -> None:
    """The access plan reads exactly the kept row groups, as row ranges within each file."""
    plan = explanation.plan
    kept = [(explanation.files[a.number].source.path, g) for a in plan.files for g in a.row_groups]
    assert kept == explanation.row_groups()
    assert plan.file_count == len(explanation.files)
    for access in plan.files:
        state = explanation.files[access.number]
        rows = np.asarray(state.layout.rows)
        starts = np.cumsum(rows) - rows
        covered = np.concatenate([np.arange(a, b) for a, b in access.row_ranges.tolist()])
        expected = np.concatenate(
            [np.arange(starts[g], starts[g] + rows[g]) for g in access.row_groups.tolist()]
        )
        assert covered.tolist() == expected.tolist()
        assert access.key == state.relative_path and access.rows == len(expected)


def test_every_location_gives_a_dataset_with_the_same_verbs(folder: Path, tmp_path: Path):
    delta = tmp_path / "delta"
    deltalake.write_deltalake(str(delta), pa.concat_tables([_table(0), _table(1000), _table(2000)]))
    cases = [
        (bloomskip.Dataset(folder), LakeDataset, True),
        (bloomskip.Dataset(folder, sidecar=tmp_path / "one.index"), FolderDataset, False),
        (bloomskip.Dataset(folder, index_location=tmp_path / "elsewhere"), LakeDataset, True),
        (bloomskip.Dataset(delta), TableDataset, True),
    ]
    for dataset, backend, segmented in cases:
        assert isinstance(dataset, bloomskip.Dataset)
        assert type(dataset.backend) is backend and dataset.segmented is segmented
        report = dataset.build_index([INDEX], progress=False)
        assert type(report) is BuildReport and report.files >= 1
        assert report.layout == ("segmented" if segmented else "sidecar")
        explanation = dataset.explain(WHERE, describe_data=True)
        assert explanation.row_groups()  # the two ids' row groups are kept
        _check_plan(explanation)
        assert _ids(dataset.run(explanation, WHERE)) == [1234, 2500]
        assert _ids(dataset.query(WHERE)) == [1234, 2500]
        status = dataset.status()
        assert [item["definition"] for item in status["indexes"]] == [STORED]
        assert report.index_bytes == status["segment_bytes" if segmented else "index_bytes"] > 0
        states, definitions = dataset.index_states()
        assert len(states) == status["files"] and definitions.indexes[0].definition == STORED
        assert dataset.to_pandas(WHERE)["user_id"].sort_values().tolist() == [1234, 2500]
        dataset.drop_index("user_id")
        assert dataset.status()["indexes"] == []
        assert dataset.drop() >= 1
        assert _ids(dataset.query(WHERE)) == [1234, 2500]  # no index: every file scanned


def test_segment_maintenance_on_a_sidecar_is_one_clear_error(folder: Path):
    dataset = bloomskip.Dataset(folder, sidecar=folder / "_bloomskip.index")
    for verb in (dataset.compact, dataset.vacuum):
        with pytest.raises(BloomskipError, match="works on a segmented index"):
            verb()


def test_a_warm_local_query_stats_each_file_once(folder: Path, monkeypatch):
    dataset = bloomskip.Dataset(folder)
    dataset.build_index([INDEX], progress=False)
    assert _ids(dataset.query(WHERE)) == [1234, 2500]  # warm: index decoded, DuckDB open
    counts: dict[str, int] = {}
    real_stat = os.stat

    def counting_stat(path, *args, **kwargs):
        name = os.fspath(path)
        if str(name).endswith(".parquet"):
            counts[name] = counts.get(name, 0) + 1
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", counting_stat)
    assert _ids(dataset.query(WHERE)) == [1234, 2500]
    monkeypatch.undo()
    # The listing's one stat per file is a directory entry's (os.scandir), not os.stat; the
    # two files read are stat-ed once more after the read, to prove their bytes did not change.
    read = {str(folder / "part-1.parquet"), str(folder / "part-2.parquet")}
    assert counts == dict.fromkeys(read, 1)


def test_a_file_rewritten_after_the_listing_is_never_answered_from(folder: Path, monkeypatch):
    dataset = bloomskip.Dataset(folder)
    dataset.build_index([INDEX], progress=False)
    target = folder / "part-1.parquet"
    backend = dataset.backend
    explain = backend.explain

    def explain_then_rewrite(where: str, **options):
        decision = explain(where, **options)
        if target.exists() and 1234 in pq.read_table(target).column("user_id").to_pylist():
            # After the listing and the decision, before the read: the row moves away.
            pq.write_table(_table(10_000), target, row_group_size=250)
        return decision

    monkeypatch.setattr(backend, "explain", explain_then_rewrite)
    assert _ids(dataset.query(WHERE)) == [2500]


def test_a_sidecar_that_cannot_be_stat_ed_is_scanned_around(folder: Path) -> None:
    dataset = bloomskip.Dataset(folder, sidecar=folder / "_bloomskip.index")
    dataset.build_index([INDEX], progress=False)
    sidecar = folder / "_bloomskip.index"
    sidecar.unlink()
    sidecar.symlink_to(sidecar)  # stat fails with ELOOP, not "no such file"
    explanation = dataset.explain(WHERE)
    assert any("scanning every file" in warning for warning in explanation.warnings)
    assert _ids(dataset.query(WHERE)) == [1234, 2500]
