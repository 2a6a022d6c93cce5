"""Fixtures of the TsFile tests: one session-wide corpus of files written by PyPI ``tsfile``."""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from tsfile_corpus import CorpusFile, build_corpus

from bloomskip.tsfile import cli


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CorpusFile]:
    """Every corpus file, written once per session (read-only: copy before changing one)."""
    return build_corpus(tmp_path_factory.mktemp("tsfile_corpus"))


@pytest.fixture
def copy_of(corpus: dict[str, CorpusFile], tmp_path: Path) -> Callable[[str], Path]:
    """Return a function that copies a corpus file into this test's tmp_path."""

    def copy(name: str) -> Path:
        target = tmp_path / corpus[name].path.name
        shutil.copyfile(corpus[name].path, target)
        return target

    return copy


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """Run ``bloomskip tsfile …`` through this group's own parser; return (status, out, err)."""

    def run(*arguments: str) -> tuple[int, str, str]:
        parser = argparse.ArgumentParser(prog="bloomskip")
        cli.register(parser.add_subparsers())
        args = parser.parse_args(["tsfile", *arguments])
        status = args.func(args)
        captured = capsys.readouterr()
        return status, captured.out, captured.err

    return run
