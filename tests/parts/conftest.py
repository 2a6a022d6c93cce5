"""Fixtures of the part-reader tests: real parts written by chdb, built once per session."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from parts_corpus import BuiltPart, build_corpus

if TYPE_CHECKING:
    from chdb.session import Session


@pytest.fixture(scope="session")
def corpus(
    chdb_session: Session, chdb_data_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, BuiltPart]:
    """Every layout of parts_corpus.LAYOUTS, with ClickHouse's answers recorded."""
    return build_corpus(chdb_session, chdb_data_path, tmp_path_factory.mktemp("clickhouse_parts"))
