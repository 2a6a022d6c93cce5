"""Fixtures of the part-reader tests: real parts written by chdb, built once per session."""

from __future__ import annotations

import pytest
from parts_corpus import BuiltPart, build_corpus


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, BuiltPart]:
    """Every layout of parts_corpus.LAYOUTS, with ClickHouse's answers recorded."""
    return build_corpus(tmp_path_factory.mktemp("clickhouse_parts"))
