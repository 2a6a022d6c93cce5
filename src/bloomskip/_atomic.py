"""Atomic file replacement: a reader, or a crash, sees the old file or the new one, never a mix.

Every file bloomskip writes (sidecar indexes, repaired TsFiles, emitted ClickHouse index files,
query output) goes through :func:`atomic_path` or :func:`atomic_writer`: the bytes go to a
temporary file in the same directory, are flushed to disk, and replace the target with
``os.replace``.

Example:
    >>> import tempfile, pathlib
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "out.bin"
    >>> write_atomically(target, b"data")
    >>> target.read_bytes()
    b'data'
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import BinaryIO

__all__ = ["atomic_path", "atomic_writer", "write_atomically"]


@contextmanager
def atomic_path(
    path: str | os.PathLike[str], *, before_replace: Callable[[Path], None] | None = None
) -> Iterator[Path]:
    """A temporary path beside ``path`` that replaces ``path`` when the block succeeds.

    For writers that want a file name rather than a file object (DuckDB's ``COPY``, say). The
    new file keeps the mode of the file it replaces; a new file gets the usual mode for the
    process's umask. If the block raises (or the process dies), ``path`` is untouched and the
    temporary file is removed (a killed process may leave a hidden ``.<name>.*.tmp`` behind, which
    nothing reads).

    Args:
        path: The file to create or replace.
        before_replace: Called with the temporary file's path once it is complete and on disk;
            raising there abandons the write (use it to read the new file back and check it).

    Yields:
        The temporary file's path (the file exists, empty).

    Raises:
        OSError: The directory is not writable, or the disk is full.
    """
    target = Path(path)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    # O_EXCL: never reuse another writer's file; mode 0o666 lets the umask apply as for open().
    os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    try:
        yield temporary
        descriptor = os.open(temporary, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        if before_replace is not None:
            before_replace(temporary)
        if target.exists():
            os.chmod(temporary, target.stat().st_mode & 0o7777)
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    _fsync_directory(target.parent)


@contextmanager
def atomic_writer(
    path: str | os.PathLike[str], *, before_replace: Callable[[Path], None] | None = None
) -> Iterator[BinaryIO]:
    """Like :func:`atomic_path`, but yields the temporary file opened for binary writing.

    Raises:
        OSError: The directory is not writable, or the disk is full.
    """
    with (
        atomic_path(path, before_replace=before_replace) as temporary,
        open(temporary, "wb") as out,
    ):
        yield out


def write_atomically(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_writer`).

    Raises:
        OSError: The directory is not writable, or the disk is full.
    """
    with atomic_writer(path) as out:
        out.write(data)


def _fsync_directory(directory: Path) -> None:
    # The rename itself is durable only once the directory entry is on disk.
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:
        return  # not supported here (e.g. some network file systems)
    try:
        with suppress(OSError):
            os.fsync(descriptor)
    finally:
        os.close(descriptor)
