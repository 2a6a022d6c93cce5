"""Both local listings (a folder dataset's and a local store's) find the files pyarrow.dataset
finds: links followed, ``_``/``.`` names skipped by the dataset, one stat per entry."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

from bloomskip import BloomskipError
from bloomskip._store import LocalStore
from bloomskip.dataset.listing.files import discover, stat_key


@pytest.fixture()
def linked(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    root = tmp_path / "data"
    (root / "a" / "b").mkdir(parents=True)
    (root / "_hidden").mkdir()
    for path in (
        root / "top.parquet",
        root / "a" / "one.parquet",
        root / "a" / "b" / "two.parquet",
        root / "_hidden" / "no.parquet",
        root / "a" / ".dot.parquet",
        outside / "deep" / "far.parquet",
    ):
        pq.write_table(pa.table({"x": [len(str(path))]}), path)
    (root / "linked_dir").symlink_to(outside / "deep")
    (root / "a" / "linked_file.parquet").symlink_to(root / "top.parquet")
    (root / "dangling.parquet").symlink_to(root / "missing.parquet")
    return root


def test_a_folder_lists_what_pyarrow_dataset_discovers(linked: Path) -> None:
    root, files, keys = discover(linked)
    expected = sorted(pads.dataset(str(linked), format="parquet").files)
    assert [str(source.path) for source in files] == expected
    assert keys == [stat_key(path) for path in expected]
    assert root == linked.resolve()


def test_a_local_store_lists_every_object_under_a_prefix(linked: Path) -> None:
    store = LocalStore(linked)
    keys = [info.key for info in store.list("")]
    assert keys == sorted(
        [
            "_hidden/no.parquet",
            "a/.dot.parquet",
            "a/b/two.parquet",
            "a/linked_file.parquet",
            "a/one.parquet",
            "linked_dir/far.parquet",
            "top.parquet",
        ]
    )
    assert [info.key for info in store.list("a/b")] == ["a/b/two.parquet"]
    assert [info.key for info in store.list("a/")] == keys[1:5]
    assert [info.key for info in store.list("linked")] == ["linked_dir/far.parquet"]
    assert store.list("missing/") == []
    info = next(item for item in store.list("") if item.key == "top.parquet")
    stat = os.stat(linked / "top.parquet")
    assert (info.size, info.mtime_ns, info.ctime_ns) == (
        stat.st_size,
        stat.st_mtime_ns,
        stat.st_ctime_ns,
    )


def test_a_directory_linked_twice_is_listed_under_each_name(tmp_path: Path) -> None:
    # Not a cycle: pyarrow lists the folder's file under both links, and so must a listing
    # (deduplicating by inode would drop whichever alias came second, and its rows).
    root = tmp_path / "aliases"
    (root / "a").mkdir(parents=True)
    pq.write_table(pa.table({"x": [1]}), root / "a" / "f.parquet")
    (root / "0_link").symlink_to(root / "a")
    (root / "b_link").symlink_to(root / "a")
    (root / "loop.parquet").symlink_to(root / "loop.parquet")  # skipped, as pyarrow skips it
    _, files, _ = discover(root)
    expected = sorted(pads.dataset(str(root), format="parquet").files)
    assert [str(source.path) for source in files] == expected and len(expected) == 3
    keys = [info.key for info in LocalStore(root).list("")]
    assert keys == ["0_link/f.parquet", "a/f.parquet", "b_link/f.parquet"]


def test_a_link_cycle_is_walked_once(tmp_path: Path) -> None:
    root = tmp_path / "cycle"
    (root / "a").mkdir(parents=True)
    pq.write_table(pa.table({"x": [1]}), root / "a" / "x.parquet")
    (root / "a" / "up").symlink_to(root)
    _, files, _ = discover(root)
    assert [source.path.name for source in files] == ["x.parquet"]
    assert [info.key for info in LocalStore(root).list("")] == ["a/x.parquet"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every directory")
def test_an_unreadable_directory_is_an_error_not_missing_files(linked: Path) -> None:
    locked = linked / "a" / "b"
    locked.chmod(0)
    try:
        with pytest.raises(BloomskipError, match="cannot list"):
            discover(linked)
        with pytest.raises(BloomskipError, match="cannot list"):
            LocalStore(linked).list("")
    finally:
        locked.chmod(0o755)
