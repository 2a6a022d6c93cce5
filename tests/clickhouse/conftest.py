"""Fixtures of the ClickHouse tests.

``clickhouse`` (module scope) is a :class:`clickhouse_harness.ClickHouseHarness` around the run's
one chdb session (``chdb_session`` in tests/conftest.py), keeping the module's tables in a
database named after the module. ``clickhouse.create_part(...)`` creates a MergeTree table and
returns a :class:`clickhouse_harness.Part` (see clickhouse_harness.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from clickhouse_harness import ClickHouseHarness

if TYPE_CHECKING:
    from chdb.session import Session


@pytest.fixture(scope="module")
def clickhouse(
    request: pytest.FixtureRequest, chdb_session: Session, chdb_data_path: Path
) -> ClickHouseHarness:
    """A harness on the run's one chdb session, with a database of the test module's own."""
    module = request.module.__name__.rsplit(".", 1)[-1]
    return ClickHouseHarness(chdb_session, chdb_data_path, f"clickhouse_{module}")
