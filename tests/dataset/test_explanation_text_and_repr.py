"""What a dataset and a decision look like in Python and in ``--explain``.

``str(explanation)`` is the text ``bloomskip query --explain`` prints (one renderer), ``repr``
of a decision is one short line, ``repr(Dataset)`` names the location, the index and its
definitions without listing a file, and ``--explain``'s read line says what each number
counts.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from dataset_fixtures import INDEXES, make_table, write_dataset

from bloomskip import Dataset
from bloomskip.cli import main

WHERE = "k = 40"


@pytest.fixture(autouse=True)
def _quiet():
    """The decisions below go without their index on purpose at times: no warning noise."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    folder = tmp_path / "logs"
    write_dataset(folder, [(1_000, 100)] * 6)
    return folder


@pytest.mark.parametrize("index_elsewhere", [False, True], ids=["sidecar", "segmented"])
def test_str_of_an_explanation_is_the_explain_text(folder, tmp_path, capsys, index_elsewhere):
    index = str(tmp_path / "index") if index_elsewhere else None
    Dataset(folder, index_location=index).build_index(INDEXES[:2], progress=False)
    where_option = ["--index-location", index] if index else []
    capsys.readouterr()
    assert main(["query", str(folder), *where_option, "--where", WHERE, "--explain"]) == 0
    printed = capsys.readouterr().out
    text = str(Dataset(folder, index_location=index).explain(WHERE))
    assert text + "\n" == printed
    assert "granules skipped" in text and "\nread: " in text


def test_repr_of_an_explanation_is_one_short_line(tmp_path):
    folder = tmp_path / "many"
    write_dataset(folder, [(2_000, 10)] * 40)
    Dataset(folder).build_index(INDEXES, progress=False)
    explanation = Dataset(folder).explain(WHERE)
    kept = sum(int(keep.sum()) for keep in explanation.keep)
    files = sum(bool(keep.any()) for keep in explanation.keep)
    assert repr(explanation) == (
        f"<Explanation of {WHERE!r}: {kept}/8000 row groups in {files}/40 files to read, "
        "6 indexes, 0 warnings>"
    )


def test_the_read_line_says_what_each_number_counts(folder, capsys):
    Dataset(folder).build_index(INDEXES[:1], progress=False)
    explanation = Dataset(folder).explain(WHERE)
    groups = sum(int(keep.sum()) for keep in explanation.keep)
    files = sum(bool(keep.any()) for keep in explanation.keep)
    assert 0 < files < 6
    read = next(line for line in str(explanation).splitlines() if line.startswith("read: "))
    assert read.startswith(
        f"read: {groups} of 60 row groups (in {files} of 6 files), {100 * groups:,} of 6,000 rows, "
    )


def test_repr_of_a_dataset_names_its_index_and_definitions(folder):
    dataset = Dataset(folder)
    index = folder / "_bloomskip"
    assert repr(dataset) == f"Dataset({str(folder)!r}, index: segmented {index} (no index))"
    dataset.build_index(INDEXES[:2] + ["INDEX d_bf d TYPE bloom_filter"], progress=False)
    assert repr(dataset) == (
        f"Dataset({str(folder)!r}, index: segmented {index}, 3 indexes: k_bf bloom_filter(0.05), "
        "s_tok tokenbf_v1(512, 2, 0), d_bf bloom_filter)"
    )
    # Cheap: no file is listed or read (they are gone, and the repr is the same).
    for path in folder.glob("*.parquet"):
        path.unlink()
    assert "3 indexes" in repr(dataset)


def test_repr_of_a_damaged_index_says_so_and_does_not_raise(folder):
    dataset = Dataset(folder)
    dataset.build_index(INDEXES[:1], progress=False)
    index = folder / "_bloomskip"
    (version,) = index.glob("versions/*")
    version.write_bytes(version.read_bytes()[:100])
    text = repr(Dataset(folder))
    assert text.startswith(f"Dataset({str(folder)!r}, index: segmented {index} unreadable: ")
    # The location and the index's path, then a reason of a few words.
    assert len(text) < 2 * len(str(version)) + 120 and "\n" not in text


def test_repr_of_a_segmented_index_reads_no_data(folder, tmp_path):
    index = tmp_path / "index"
    dataset = Dataset(folder, index_location=index)
    dataset.build_index(INDEXES[:1], progress=False)
    data_requests = dataset.backend.store.stats.requests
    assert repr(dataset) == (
        f"Dataset({str(folder)!r}, index: segmented {index}, 1 index: k_bf bloom_filter(0.05))"
    )
    assert dataset.backend.store.stats.requests == data_requests


def test_an_explanation_of_a_new_file_lists_it_under_its_warning(folder, capsys):
    Dataset(folder).build_index(INDEXES[:1], progress=False)
    pq.write_table(make_table(100, 9, 50_000), folder / "zz-new.parquet")
    text = str(Dataset(folder).explain(WHERE)).splitlines()
    assert text[-2].startswith("warning: 1 file is not indexed (new since the build)")
    assert text[-1] == "  not indexed: zz-new.parquet"
