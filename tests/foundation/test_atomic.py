"""Atomic writes: the target holds the old bytes or the new ones, never a mix."""

import os
import stat
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bloomskip import Dataset
from bloomskip._atomic import atomic_path, atomic_writer, write_atomically
from bloomskip.dataset.index.sidecar import read_sidecar


def test_new_file_gets_umask_mode(tmp_path):
    old = os.umask(0o027)
    try:
        write_atomically(tmp_path / "new.bin", b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.bin").stat().st_mode) == 0o640


def test_replacement_keeps_mode_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "data.bin"
    target.write_bytes(b"old")
    target.chmod(0o604)
    write_atomically(target, b"new")
    assert target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o604
    assert [p.name for p in tmp_path.iterdir()] == ["data.bin"]


def test_failure_midway_keeps_the_original(tmp_path):
    target = tmp_path / "data.bin"
    target.write_bytes(b"original")
    with pytest.raises(RuntimeError), atomic_writer(target) as out:
        out.write(b"half")
        raise RuntimeError("crash")
    assert target.read_bytes() == b"original"
    assert [p.name for p in tmp_path.iterdir()] == ["data.bin"]


def test_unwritable_directory_raises_oserror(tmp_path):
    with pytest.raises(OSError):
        write_atomically(tmp_path / "missing" / "x.bin", b"x")


# ------------------------------------------------------------------ symbolic links (issue 10.5)
def _link(link: Path, target: Path | str) -> Path:
    link.symlink_to(target)
    return link


@pytest.mark.parametrize("relative", [False, True])
def test_a_symlink_is_written_through_to_its_target(tmp_path: Path, relative: bool) -> None:
    store = tmp_path / "store"
    store.mkdir()
    real = store / "real.bin"
    real.write_bytes(b"old")
    real.chmod(0o640)
    link = _link(tmp_path / "link.bin", "store/real.bin" if relative else real)
    write_atomically(link, b"new")
    assert link.is_symlink() and os.readlink(link) == ("store/real.bin" if relative else str(real))
    assert real.read_bytes() == b"new"
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    # The temporary file was made beside the real file, and nothing is left behind.
    assert sorted(p.name for p in store.iterdir()) == ["real.bin"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.bin", "store"]


def test_a_chain_of_links_and_a_dangling_link(tmp_path: Path) -> None:
    real = tmp_path / "real.bin"
    real.write_bytes(b"old")
    first = _link(tmp_path / "first", _link(tmp_path / "second", real))
    with atomic_path(first) as temporary:
        assert temporary.parent == real.parent and temporary.name.startswith(".real.bin.")
        temporary.write_bytes(b"by name")
    assert (first.is_symlink(), (tmp_path / "second").is_symlink(), real.read_bytes()) == (
        True,
        True,
        b"by name",
    )
    dangling = _link(tmp_path / "dangling", tmp_path / "new.bin")
    write_atomically(dangling, b"created")  # as open() would: the target is created
    assert dangling.is_symlink() and (tmp_path / "new.bin").read_bytes() == b"created"


def test_a_symlink_loop_is_an_oserror(tmp_path: Path) -> None:
    _link(tmp_path / "a", tmp_path / "b")
    _link(tmp_path / "b", tmp_path / "a")
    with pytest.raises(OSError, match="symbolic links"):
        write_atomically(tmp_path / "a", b"x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]


def test_a_symlinked_sidecar_index_stays_a_link(tmp_path: Path) -> None:
    # The sidecar writer uses atomic_writer: rebuilding through a linked index updates the file
    # the link names and keeps the link.
    data = tmp_path / "data"
    store = tmp_path / "store"
    data.mkdir()
    store.mkdir()
    pq.write_table(pa.table({"user_id": list(range(100))}), data / "part.parquet")
    index = data / "_bloomskip.index"
    Dataset(data, sidecar=index).build_index(["user_id TYPE bloom_filter(0.01)"])
    index.rename(store / "shared.index")
    _link(index, store / "shared.index")
    Dataset(data, sidecar=index).build_index(["user_id TYPE bloom_filter(0.05)"], replace=True)
    assert index.is_symlink()
    (spec,) = read_sidecar(store / "shared.index").indexes
    assert "0.05" in spec.definition
    assert sorted(p.name for p in store.iterdir()) == ["shared.index"]


# ------------------------------------------------------------------ the temporary file (10.6)
def _temporary_in(directory: Path) -> Path:
    (found,) = [p for p in directory.iterdir() if p.name.endswith(".tmp")]
    return found


def _swap_for_symlink(temporary: Path, victim: Path) -> None:
    """What another user can do in a shared writable directory without the sticky bit."""
    temporary.rename(temporary.with_name("stolen"))
    temporary.symlink_to(victim)


@pytest.fixture
def victim_and_target(tmp_path: Path) -> tuple[Path, Path]:
    """A file another user wants us to chmod or overwrite (0o600), and our target (0o644)."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"victim")
    victim.chmod(0o600)
    target = tmp_path / "data.bin"
    target.write_bytes(b"old")
    target.chmod(0o644)
    return victim, target


def _untouched(victim: Path, target: Path) -> bool:
    return (
        stat.S_IMODE(victim.stat().st_mode) == 0o600
        and victim.read_bytes() == b"victim"
        and not target.is_symlink()
        and target.read_bytes() == b"old"
    )


def test_writer_uses_its_descriptor_not_the_name(
    tmp_path: Path, victim_and_target: tuple[Path, Path]
) -> None:
    victim, target = victim_and_target
    with pytest.raises(OSError, match="replaced by another file"), atomic_writer(target) as out:
        out.write(b"new")
        _swap_for_symlink(_temporary_in(tmp_path), victim)
    # Before the fix the mode went to the victim by name and the link replaced the target.
    assert _untouched(victim, target)
    assert (tmp_path / "stolen").read_bytes() == b"new"  # what was written went to our file


def test_path_refuses_a_temporary_swapped_for_a_symlink(
    victim_and_target: tuple[Path, Path],
) -> None:
    victim, target = victim_and_target
    with pytest.raises(OSError, match="replaced by another file"), atomic_path(target) as path:
        path.write_bytes(b"new")
        _swap_for_symlink(path, victim)
    assert _untouched(victim, target)


def test_writer_mode_and_fsync_go_through_the_descriptor(tmp_path: Path) -> None:
    # The file is complete and has its final mode when before_replace reads it back.
    target = tmp_path / "data.bin"
    target.write_bytes(b"old")
    target.chmod(0o604)
    seen = []

    def check(temporary: Path) -> None:
        seen.append((temporary.read_bytes(), stat.S_IMODE(temporary.stat().st_mode)))

    with atomic_writer(target, before_replace=check) as out:
        out.write(b"new")
    assert seen == [(b"new", 0o604)]
    assert target.read_bytes() == b"new"
