"""``bloomskip demo``: it says where it wrote and how big that is, and ``--clean`` / ``--keep``."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from bloomskip.dataset.cli import register

ROWS = "120000"


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bloomskip")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_default_removes_the_data_and_the_folder_it_created(tmp_path: Path, capsys) -> None:
    target = tmp_path / "demo"
    assert run(["demo", str(target), "--rows", ROWS]) == 0
    out = capsys.readouterr().out
    # The absolute path and the size of what it wrote, printed while the data exists.
    data_line = next(line for line in out.splitlines() if line.startswith("data: "))
    assert data_line.startswith(f"data: {target.absolute()} (") and "MB in 4 files" in data_line
    assert "token search" in out
    assert f"removed the demo data in {target.absolute()}" in out and "--keep" in out
    assert not target.exists()


def test_keep_leaves_the_data_and_prints_a_command_that_removes_it(tmp_path: Path, capsys):
    target = tmp_path / "demo kept"  # a space: the printed command must quote it
    assert run(["demo", str(target), "--rows", ROWS, "--keep"]) == 0
    out = capsys.readouterr().out
    assert "removed" not in out
    names = sorted(path.name for path in target.iterdir())
    assert names == ["_bloomskip"] + [f"logs-00{n}.parquet" for n in range(4)]
    size = sum(path.stat().st_size for path in target.rglob("*") if path.is_file())
    kept = next(line for line in out.splitlines() if line.startswith("kept "))
    assert kept.startswith(f"kept {target.absolute()} ({size / 1e6:.1f} MB)")
    command = kept.split("remove it with: ", 1)[1]
    # A rerun reuses the kept files.
    assert run(["demo", str(target), "--rows", ROWS, "--keep"]) == 0
    assert "reusing 4 files" in capsys.readouterr().out
    subprocess.run(command, shell=True, check=True)
    assert not target.exists()


def test_clean_touches_nothing_but_the_demo_files(tmp_path: Path, capsys) -> None:
    target = tmp_path / "mine"
    target.mkdir()
    (target / "_notes.txt").write_text("my own file")  # "_": not a data file
    assert run(["demo", str(target), "--rows", ROWS, "--clean"]) == 0
    assert [path.name for path in target.iterdir()] == ["_notes.txt"]
    # With --keep in a folder holding other files, the command removes the demo files only.
    assert run(["demo", str(target), "--rows", ROWS, "--keep"]) == 0
    command = capsys.readouterr().out.split("remove it with: ", 1)[1].strip()
    assert "logs-*.parquet" in command  # not the whole folder
    subprocess.run(command, shell=True, check=True)
    assert [path.name for path in target.iterdir()] == ["_notes.txt"]


def test_clean_also_runs_when_the_demo_fails(tmp_path: Path, capsys, monkeypatch) -> None:
    from bloomskip.dataset import demo

    target = tmp_path / "demo"
    # The data is written, then indexing fails: the written files must not stay behind.
    monkeypatch.setattr(demo, "DEMO_INDEXES", ["user_id TYPE no_such_index"])
    with pytest.raises(Exception, match="no_such_index"):
        run(["demo", str(target), "--rows", ROWS])
    assert not target.exists()


def test_keep_and_clean_together_is_a_usage_error() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bloomskip", "demo", "--keep", "--clean"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "not allowed with argument" in result.stderr
