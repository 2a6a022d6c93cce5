"""Two builds of one segmented index at once (issue 26, case 7), locally with an index location
and on a real S3-API server: each adds its own index, and both indexes must survive with their
bits, or the later build must fail with a one-line ``CommitConflictError`` saying to run it again.

The deterministic tests run two real builds in two processes that both read the same newest
version before either commits: each waits at a barrier just before its first commit, so one of
them always loses the race for the next version number. The CLI test starts two
``bloomskip index build`` processes together and lets them race as they will. Rows are checked
against DuckDB's scan of the raw files.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest
from dataset_fixtures import write_dataset
from lake_fixtures import upload
from test_dataset_query_corpus import _oracle, _sample_keys

from bloomskip import CommitConflictError
from bloomskip.dataset.backends.lake import LakeDataset
from bloomskip.dataset.index.segments import IndexLog

BASE = "INDEX d_bf d TYPE bloom_filter"
BUILD_A = "INDEX k_bf k TYPE bloom_filter(0.05)"
BUILD_B = "INDEX s_tok s TYPE tokenbf_v1(512, 2, 0)"


@pytest.fixture(scope="module")
def local_data(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("concurrent") / "data"
    write_dataset(directory, [(1500, 97), (2600, 250), (2100, 1000)], seed=11)
    return directory


@pytest.fixture(params=["index-location", "s3"])
def where_built(request, tmp_path, local_data) -> tuple[str, str | None]:
    """``(dataset, index location)``: a local folder with its index kept elsewhere, or a bucket
    prefix with its index beside the data (``PREFIX/_bloomskip``)."""
    if request.param == "index-location":
        return str(local_data), str(tmp_path / "index")
    location = f"s3://{request.getfixturevalue('bucket')}/warehouse/logs"
    upload(local_data, location)
    return location, None


def _build_at_the_barrier(number, dataset, index_location, definitions, replace, barrier, results):
    """One build, in its own process, that commits only once the other has built too.

    Both builds have then planned and written their segments from the same newest version, so
    exactly one wins the next version number and the other has to rebase. The real commit runs;
    only its start waits (a later commit of the same build, after a rebase, does not).
    """
    commit = IndexLog.commit
    waited = []

    def commit_after_the_other(self, change):
        if not waited:
            waited.append(True)
            barrier.wait(timeout=120)
        return commit(self, change)

    IndexLog.commit = commit_after_the_other
    try:
        lake = LakeDataset(dataset, index_location=index_location)
        report = lake.build_index(definitions, replace=replace, progress=False, jobs=1)
        results.put((number, "ok", report.version, report.warnings))
    except CommitConflictError as exc:
        results.put((number, "conflict", str(exc), []))
    except BaseException as exc:  # noqa: BLE001 - reported by the test, not lost in the child
        results.put((number, "error", f"{type(exc).__name__}: {exc}", []))


def _race(where_built, first, second, replace=False) -> list[tuple]:
    """Run the two builds at once; returns each one's ``(outcome, version or message,
    warnings)``, in the order given."""
    dataset, index_location = where_built
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(2)
    results = context.Queue()
    processes = [
        context.Process(
            target=_build_at_the_barrier,
            args=(number, dataset, index_location, definitions, replace, barrier, results),
        )
        for number, definitions in enumerate((first, second))
    ]
    for process in processes:
        process.start()
    outcomes = sorted(results.get(timeout=300) for _ in processes)
    for process in processes:
        process.join(60)
        assert process.exitcode == 0
    return [outcome[1:] for outcome in outcomes]


def _names(lake: LakeDataset) -> list[str]:
    return [spec.definition.split()[1] for spec in lake.latest_manifest().indexes]


def _a_and_b_checks(local_data: Path) -> dict[str, str]:
    """Build A's and build B's index, each with a WHERE it skips granules for."""
    return {
        f"{BUILD_A} GRANULARITY 1": f"k = {_sample_keys(local_data)['k0']}",
        f"{BUILD_B} GRANULARITY 1": "hasToken(s, 'absentword')",
    }


def _check_rows_and_bits(lake: LakeDataset, local_data: Path, indexes: dict[str, str]) -> None:
    """Every file indexed; each index skips granules for its predicate (its bits are there);
    the rows are DuckDB's over the raw files."""
    status = lake.status()
    assert status["files_indexed"] == status["files"] == 3, status
    files = sorted(str(path) for path in local_data.glob("*.parquet"))
    for definition, where in indexes.items():
        explanation = lake.explain(where)
        assert not explanation.warnings, explanation.warnings
        (outcome,) = [item for item in explanation.indexes if item.definition == definition]
        assert outcome.granules_skipped > 0, (definition, where)
        got = lake.run(explanation, where, ["id"]).column("id").to_pylist()
        assert sorted(got) == _oracle(files, where)[0], where


@pytest.mark.parametrize("existing", [False, True], ids=["new-index", "existing-index"])
def test_two_builds_adding_different_indexes_keep_both(where_built, local_data, existing):
    dataset, index_location = where_built
    lake = LakeDataset(dataset, index_location=index_location)
    if existing:
        lake.build_index([BASE], progress=False)
    outcomes = _race(where_built, [BUILD_A], [BUILD_B])
    assert [outcome[0] for outcome in outcomes] == ["ok", "ok"], outcomes
    names = _names(LakeDataset(dataset, index_location=index_location))
    expected = ["d_bf"] if existing else []
    assert names[: len(expected)] == expected
    assert sorted(names[len(expected) :]) == ["k_bf", "s_tok"]
    # The loser built again on top of the winner's version, and says so.
    assert sum(any("meanwhile" in line for line in outcome[2]) for outcome in outcomes) == 1
    checks = _a_and_b_checks(local_data)
    if existing:
        checks[f"{BASE} GRANULARITY 1"] = "d = 'nope'"
    _check_rows_and_bits(LakeDataset(dataset, index_location=index_location), local_data, checks)


@pytest.mark.parametrize("replace", [False, True], ids=["new-index", "replace"])
def test_two_builds_defining_one_index_differently_fail_the_later_one(
    where_built, local_data, replace
):
    dataset, index_location = where_built
    if replace:
        LakeDataset(dataset, index_location=index_location).build_index([BASE], progress=False)
    outcomes = _race(
        where_built,
        ["INDEX d_bf d TYPE bloom_filter(0.2)"],
        ["INDEX d_bf d TYPE bloom_filter(0.001)"],
        replace=replace,
    )
    assert sorted(outcome[0] for outcome in outcomes) == ["conflict", "ok"], outcomes
    (message,) = [outcome[1] for outcome in outcomes if outcome[0] == "conflict"]
    assert "\n" not in message and "run the build again" in message and "d_bf" in message
    (spec,) = LakeDataset(dataset, index_location=index_location).latest_manifest().indexes
    winner = 0 if "(0.2)" in spec.definition else 1
    assert outcomes[winner][0] == "ok" and outcomes[1 - winner][0] == "conflict"
    _check_rows_and_bits(
        LakeDataset(dataset, index_location=index_location),
        local_data,
        {spec.definition: "d = 'nope'"},
    )


def test_a_replace_and_an_add_of_another_index_both_land(where_built, local_data):
    """Different names: the ``--replace`` of one index and the add of another compose, whichever
    commits first (only a change of the same index is a conflict)."""
    dataset, index_location = where_built
    LakeDataset(dataset, index_location=index_location).build_index([BASE], progress=False)
    outcomes = _race(where_built, ["INDEX d_bf d TYPE bloom_filter(0.2)"], [BUILD_A], replace=True)
    assert [outcome[0] for outcome in outcomes] == ["ok", "ok"], outcomes
    lake = LakeDataset(dataset, index_location=index_location)
    assert [spec.definition for spec in lake.latest_manifest().indexes] == [
        "INDEX d_bf d TYPE bloom_filter(0.2) GRANULARITY 1",
        f"{BUILD_A} GRANULARITY 1",
    ]
    checks = _a_and_b_checks(local_data)
    checks.pop(f"{BUILD_B} GRANULARITY 1")
    checks["INDEX d_bf d TYPE bloom_filter(0.2) GRANULARITY 1"] = "d = 'nope'"
    _check_rows_and_bits(lake, local_data, checks)


def test_two_cli_builds_started_together_keep_both_indexes(where_built, local_data):
    dataset, index_location = where_built
    where = ["--index-location", index_location] if index_location else []
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "bloomskip", "index", "build", dataset, *where,
             "--index", definition, "--no-progress", "--jobs", "1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=os.environ.copy(),
        )
        for definition in (BUILD_A, BUILD_B)
    ]  # fmt: skip
    finished = [(run.wait(300), *run.communicate()) for run in runs]
    assert [status for status, _, _ in finished] == [0, 0], finished
    listed = subprocess.run(
        [sys.executable, "-m", "bloomskip", "index", "list", dataset, *where],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "k_bf" in listed and "s_tok" in listed, listed
    _check_rows_and_bits(
        LakeDataset(dataset, index_location=index_location),
        local_data,
        _a_and_b_checks(local_data),
    )
