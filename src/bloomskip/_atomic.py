"""Atomic file replacement: a reader, or a crash, sees the old file or the new one, never a mix.

Every file bloomskip writes (sidecar indexes, repaired TsFiles, emitted ClickHouse index files,
query output) goes through :func:`atomic_path` or :func:`atomic_writer`: the bytes go to a
temporary file in the same directory, are flushed to disk, and replace the target with
``os.replace``.

A target that is a symbolic link is written through: the link is followed to the file it finally
names, the temporary file is made in that file's directory, and that file is replaced, so the
link stays a link and what it points to gets the new bytes (replacing the link itself would leave
the real file stale while reporting success).

Example:
    >>> import tempfile, pathlib
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "out.bin"
    >>> write_atomically(target, b"data")
    >>> target.read_bytes()
    b'data'
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import BinaryIO

__all__ = ["atomic_path", "atomic_writer", "final_target", "write_atomically"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
# O_EXCL: never reuse another writer's file (nor follow a symlink planted under the name).
_CREATE_FLAGS = (
    os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)  # fmt: skip


def final_target(path: str | os.PathLike[str]) -> Path:
    """The file a write to ``path`` lands in: ``path`` itself, or what its symlinks lead to.

    Args:
        path: The file to create or replace.

    Returns:
        ``path`` when it is not a symbolic link, else the path the chain of links ends at (which
        need not exist yet: a dangling link is written through, as ``open`` would).

    Raises:
        OSError: The links form a loop (``ELOOP``).

    Example:
        >>> final_target("plain.bin")
        PosixPath('plain.bin')
    """
    target = Path(path)
    if not target.is_symlink():
        return target
    resolved = Path(os.path.realpath(target))
    if resolved.is_symlink():  # realpath gives up on a loop and returns a link
        raise OSError(errno.ELOOP, "too many levels of symbolic links", str(target))
    return resolved


@contextmanager
def atomic_path(
    path: str | os.PathLike[str], *, before_replace: Callable[[Path], None] | None = None
) -> Iterator[Path]:
    """A temporary path beside ``path`` that replaces ``path`` when the block succeeds.

    For writers that want a file name rather than a file object (DuckDB's ``COPY``, say, which
    replaces the file it is given). The new file keeps the mode of the file it replaces; a new
    file gets the usual mode for the process's umask. A symbolic link is written through (see the
    module docstring). If the block raises (or the process dies), ``path`` is untouched and the
    temporary file is removed (a killed process may leave a hidden ``.<name>.*.tmp`` behind, which
    nothing reads). If the temporary name is found to be a symbolic link (swapped in a shared
    directory), nothing is replaced. :func:`atomic_writer` goes further: it never uses the name.

    Args:
        path: The file to create or replace.
        before_replace: Called with the temporary file's path once it is complete and on disk;
            raising there abandons the write (use it to read the new file back and check it).

    Yields:
        The temporary file's path (the file exists, empty).

    Raises:
        OSError: The directory is not writable, the disk is full, the links form a loop, or
            the temporary name was replaced by something other than a regular file.
    """
    target = final_target(path)
    temporary, descriptor = _create_temporary(target)
    os.close(descriptor)
    try:
        yield temporary
        # The block wrote by name; refuse to follow a symlink now standing under that name.
        try:
            descriptor = os.open(temporary, os.O_RDONLY | _NOFOLLOW)
        except OSError as exc:
            raise _replaced_error(temporary, target) from exc
        try:
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                raise _replaced_error(temporary, target)
            _make_durable(descriptor, target)
        finally:
            os.close(descriptor)
        if before_replace is not None:
            before_replace(temporary)
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

    Everything goes through the descriptor the temporary file was created with (writes, fsync,
    the mode); the name is used only to replace ``path``, and only if it still names that file.

    Raises:
        OSError: The directory is not writable, the disk is full, the links form a loop, or the
            temporary name was swapped for another file while the block ran.
    """
    target = final_target(path)
    temporary, descriptor = _create_temporary(target)
    try:
        with os.fdopen(descriptor, "wb", closefd=False) as out:
            yield out
        _make_durable(descriptor, target)
        if before_replace is not None:
            before_replace(temporary)
        try:
            named = os.stat(temporary, follow_symlinks=False)
        except OSError as exc:
            raise _replaced_error(temporary, target) from exc
        created = os.fstat(descriptor)
        if (named.st_dev, named.st_ino) != (created.st_dev, created.st_ino):
            raise _replaced_error(temporary, target)
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    finally:
        os.close(descriptor)
    _fsync_directory(target.parent)


def write_atomically(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_writer`).

    Raises:
        OSError: The directory is not writable, or the disk is full.
    """
    with atomic_writer(path) as out:
        out.write(data)


def write_if_absent(path: str | os.PathLike[str], data: bytes) -> bool:
    """Create ``path`` holding ``data`` unless it exists; atomic, and safe between processes.

    The bytes go to a temporary file that is flushed to disk and then hard-linked to ``path``:
    a link fails if the name exists, so of two writers racing for one name exactly one wins,
    and a reader never sees a partly written file.

    Returns:
        ``True`` if this call created ``path``; ``False`` if it already existed (left as it was).

    Raises:
        OSError: The directory is not writable, or the disk is full.

    Example:
        >>> import tempfile, pathlib
        >>> target = pathlib.Path(tempfile.mkdtemp()) / "v1.json"
        >>> write_if_absent(target, b"{}"), write_if_absent(target, b"[]"), target.read_bytes()
        (True, False, b'{}')
    """
    target = Path(path)
    temporary, descriptor = _create_temporary(target)
    try:
        with os.fdopen(descriptor, "wb", closefd=False) as out:
            out.write(data)
        os.fsync(descriptor)
        try:
            os.link(temporary, target)
        except FileExistsError:
            return False
    finally:
        os.close(descriptor)
        temporary.unlink(missing_ok=True)
    _fsync_directory(target.parent)
    return True


def _create_temporary(target: Path) -> tuple[Path, int]:
    temporary = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    # Mode 0o666 lets the umask apply as for open().
    return temporary, os.open(temporary, _CREATE_FLAGS, 0o666)


def _make_durable(descriptor: int, target: Path) -> None:
    """Give the new file the mode of the one it replaces, then flush it to disk."""
    with suppress(FileNotFoundError):
        os.fchmod(descriptor, target.stat().st_mode & 0o7777)
    os.fsync(descriptor)


def _replaced_error(temporary: Path, target: Path) -> OSError:
    return OSError(
        errno.EEXIST,
        f"the temporary file was replaced by another file while being written; {target} is "
        "left unchanged",
        str(temporary),
    )


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
