"""Shared test configuration: the shared folder, the run's one chdb (ClickHouse) session, and a
headless Chromium for the pages the tests render.

chdb 4.4 runs one embedded ClickHouse server per process, bound to one data path: while a session
on one path is open, a session on another path, or the stateless ``chdb.query`` (which uses
``:memory:``), fails with "EmbeddedServer already initialized with path ...". So every test
reaches ClickHouse through the session-scoped ``chdb_session`` fixture, whatever order the tests
run in. Each test module keeps its tables in a database of its own (named after the module), and
passes query settings in the statement's SETTINGS clause where it can, since a ``SET`` changes the
session for every later test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from chdb.session import Session

#: The browsers a rendered page is checked in, by their names on PATH.
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
#: Installing Debian's ``chromium`` downloads about 100 MB; past this it is an error, not a hang.
CHROMIUM_INSTALL_SECONDS = 1200

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


def _find_chromium() -> str | None:
    return next(filter(None, map(shutil.which, CHROMIUM_NAMES)), None)


@pytest.fixture(scope="session")
def chromium() -> str:
    """The path of a headless-capable Chromium, installed from Debian's package when missing.

    The README's test command is all a fresh machine gets, so the tests fetch the browser
    themselves: as root with ``apt-get``, otherwise through ``sudo -n`` when it needs no
    password. Anything else fails with the command to run, never a skip.

    Example:
        >>> def test_page(chromium):
        ...     subprocess.run([chromium, "--headless", "--version"], check=True)
    """
    found = _find_chromium()
    if found is not None:
        return found
    apt = shutil.which("apt-get")
    if apt is None:
        pytest.fail(
            f"no Chromium ({', '.join(CHROMIUM_NAMES)}) on PATH and no apt-get to install one"
        )
    prefix = [] if os.geteuid() == 0 else [shutil.which("sudo") or "sudo", "-n"]
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    wait = ["-o", "DPkg::Lock::Timeout=600"]  # another apt run holds the lock: wait for it
    for step in (
        ["update", "-qq"],
        ["install", "-y", "-qq", "--no-install-recommends", "chromium"],
    ):
        try:
            done = subprocess.run(
                [*prefix, apt, *wait, *step],
                capture_output=True,
                text=True,
                env=environment,
                timeout=CHROMIUM_INSTALL_SECONDS,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            pytest.fail(f"installing Debian's chromium failed: {exc}")
        if done.returncode != 0:
            pytest.fail(
                f"installing Debian's chromium failed ({' '.join(done.args)}): "
                f"{done.stderr.strip()[-500:]}; install it with `apt-get install chromium`"
            )
    found = _find_chromium()
    if found is None:
        pytest.fail("Debian's chromium was installed but no Chromium is on PATH")
    return found
