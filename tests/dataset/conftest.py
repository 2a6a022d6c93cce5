"""Shared fixtures of the dataset tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from dataset_fixtures import write_dataset


@pytest.fixture(scope="session")
def dataset_dir(tmp_path_factory) -> Path:
    """Three files, row groups of 97, 250 and 1000 rows."""
    directory = tmp_path_factory.mktemp("dataset") / "data"
    write_dataset(directory, [(1500, 97), (2600, 250), (2100, 1000)])
    return directory
