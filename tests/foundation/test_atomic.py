"""Atomic writes: the target holds the old bytes or the new ones, never a mix."""

import os
import stat

import pytest

from bloomskip._atomic import atomic_writer, write_atomically


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
