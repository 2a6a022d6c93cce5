"""Shared test configuration."""

from pathlib import Path

import pytest

#: The read-only shared folder (specs, research, reference vectors), beside the project root.
SHARED = Path(__file__).resolve().parents[1].parent / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.fail(f"the shared folder is missing: expected it at {SHARED}")
    return SHARED
