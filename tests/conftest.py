"""Shared test configuration: the shared folder, and the run's one chdb (ClickHouse) session.

chdb 4.4 runs one embedded ClickHouse server per process, bound to one data path: while a session
on one path is open, a session on another path, or the stateless ``chdb.query`` (which uses
``:memory:``), fails with "EmbeddedServer already initialized with path ...". So every test
reaches ClickHouse through the session-scoped ``chdb_session`` fixture, whatever order the tests
run in. Each test module keeps its tables in a database of its own (named after the module), and
passes query settings in the statement's SETTINGS clause where it can, since a ``SET`` changes the
session for every later test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from chdb.session import Session

#: The read-only shared folder (specs, research, reference vectors), beside the project root.
SHARED = Path(__file__).resolve().parents[1].parent / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.fail(f"the shared folder is missing: expected it at {SHARED}")
    return SHARED


@pytest.fixture(scope="session")
def chdb_data_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The data directory of the run's chdb server (``system.tables.metadata_path`` is relative
    to it)."""
    return tmp_path_factory.mktemp("chdb")


@pytest.fixture(scope="session")
def chdb_session(chdb_data_path: Path) -> Iterator[Session]:
    """The one chdb session of the test run, on :func:`chdb_data_path`.

    Example:
        >>> def test_one(chdb_session):
        ...     assert chdb_session.query("SELECT 1", "CSV").bytes() == b"1\\n"
    """
    from chdb.session import Session

    session = Session(str(chdb_data_path))
    yield session
    session.close()
