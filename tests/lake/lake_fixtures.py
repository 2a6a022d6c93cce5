"""Helpers of the object-storage tests."""

from __future__ import annotations

from pathlib import Path

from bloomskip._store import open_store


def upload(directory: Path, location: str) -> list[str]:
    """Copy every file under ``directory`` to the store at ``location``; return the keys."""
    store = open_store(location)
    keys = []
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            key = path.relative_to(directory).as_posix()
            store.put(key, path.read_bytes())
            keys.append(key)
    return keys
