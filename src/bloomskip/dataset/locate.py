"""What a dataset location names, decided in one place before any format code is loaded.

A local folder, glob or file is told apart from an object-store prefix and from a Delta or
Iceberg table with ``os`` calls alone: a query over local files never imports the object-store
client or a table-format module. Also here: where a local dataset's sidecar index lives.

Example:
    >>> table_format("iceberg://local/ns.events")
    'iceberg'
    >>> is_remote("s3://bucket/logs"), is_remote("logs/"), is_remote("file:///data/logs")
    (True, False, False)
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from bloomskip.dataset.listing.files import glob_root, is_glob

#: A table opened through a PyIceberg catalog: ``iceberg://CATALOG/NAMESPACE.TABLE``.
ICEBERG_SCHEME = "iceberg://"
#: The name of a folder's sidecar index (the single-file layout before segments).
DIRECTORY_SIDECAR = "_bloomskip.index"
#: The name of a local folder's segmented index (docs/segments.md), beside its files.
INDEX_FOLDER = "_bloomskip"


def default_sidecar_path(dataset: str | os.PathLike) -> Path:
    """Return where the sidecar of a DATASET argument lives by default.

    ``_``-prefixed names are ignored by ``pyarrow.dataset`` (and by our discovery), so the
    sidecar never shows up as a data file.

    Args:
        dataset: A file, a directory or a glob.

    Returns:
        ``<dir>/_<name>.bloomskip`` for a file, ``<dir>/_bloomskip.index`` for a directory and
        ``<root>/_bloomskip-<hash of the pattern>.index`` for a glob.

    Example:
        >>> default_sidecar_path("logs")  # doctest: +SKIP
        PosixPath('logs/_bloomskip.index')
    """
    return _beside(dataset, DIRECTORY_SIDECAR, "_bloomskip-{}.index", "_{}.bloomskip")


def default_index_folder(dataset: str | os.PathLike) -> Path:
    """Return where the segmented index of a local DATASET argument lives by default.

    The names start with ``_``, so the index is never listed as data, and differ from the
    sidecars' (:func:`default_sidecar_path`), so that an index migrated from a sidecar can
    sit beside it until the build that migrates it commits.

    Args:
        dataset: A file, a directory or a glob.

    Returns:
        ``<dir>/_bloomskip`` for a directory, ``<root>/_bloomskip-<hash of the pattern>`` for
        a glob and ``<dir>/_bloomskip-<name>`` for a file.

    Example:
        >>> default_index_folder("logs")  # doctest: +SKIP
        PosixPath('logs/_bloomskip')
    """
    return _beside(dataset, INDEX_FOLDER, INDEX_FOLDER + "-{}", INDEX_FOLDER + "-{}")


def _beside(dataset: str | os.PathLike, directory: str, glob: str, file: str) -> Path:
    """Where a local DATASET's index of one layout lives: ``directory`` inside a directory,
    ``glob`` (formatted with the hash of the pattern relative to its fixed root) in a glob's
    root, ``file`` (formatted with the file's name) beside a file."""
    text = os.fspath(dataset)
    path = Path(text)
    if path.is_dir():
        return path / directory
    if is_glob(text) and not path.exists():
        root = glob_root(text)
        relative = Path(os.path.relpath(Path(text).absolute(), root.absolute())).as_posix()
        return root / glob.format(hashlib.sha256(relative.encode("utf-8")).hexdigest()[:12])
    return path.parent / file.format(path.name)


def holds_segmented_index(folder: str | os.PathLike) -> bool:
    """Whether ``folder`` holds a segmented index (any object in it: a version, a checkpoint
    or a segment a build left); an empty or missing folder holds none."""
    try:
        with os.scandir(folder) as entries:
            return any(True for _ in entries)
    except OSError:
        return False


def nearest_folder_index(start: str | os.PathLike) -> tuple[str, Path] | None:
    """The nearest directory, ``start`` or one above it, holding a folder's index.

    Args:
        start: A directory (a glob's fixed part, see :func:`glob_root`).

    Returns:
        ``("segmented", folder)`` when ``folder/_bloomskip/`` holds an index, else
        ``("sidecar", folder)`` when ``folder/_bloomskip.index`` does (a folder indexed
        before segments, read until a build migrates it); None when no folder does.

    Example:
        >>> nearest_folder_index("logs/2026")  # doctest: +SKIP
        ('segmented', PosixPath('/data/logs'))
    """
    here = Path(start).resolve()
    for folder in (here, *here.parents):
        if holds_segmented_index(folder / INDEX_FOLDER):
            return "segmented", folder
        if (folder / DIRECTORY_SIDECAR).is_file():
            return "sidecar", folder
    return None


def indexed_folder(start: str | os.PathLike) -> Path | None:
    """Return the nearest directory, ``start`` or one above it, holding a folder's sidecar.

    A folder's index (``index build DIR``) names every file under it by its path relative to
    the folder, so it covers any glob inside it: ``DIR/*.parquet``, ``DIR/part-1*.parquet`` or
    ``DIR/sub/*.parquet``.

    Args:
        start: A directory (a glob's fixed part, see :func:`glob_root`).

    Returns:
        The directory holding ``_bloomskip.index``, or None when no directory up to the
        filesystem's root does.

    Example:
        >>> indexed_folder("logs/2026")  # doctest: +SKIP
        PosixPath('/data/logs')
    """
    here = Path(start).resolve()
    for folder in (here, *here.parents):
        if (folder / DIRECTORY_SIDECAR).is_file():
            return folder
    return None


def local_path(path: str | os.PathLike) -> str | os.PathLike:
    """A ``file://`` URI as the path it names; anything else as given."""
    text = os.fspath(path)
    if text.startswith("file://"):
        from urllib.parse import unquote, urlsplit

        return unquote(urlsplit(text).path)
    return path


def is_remote(location: str | os.PathLike) -> bool:
    """Whether ``location`` is a URI other than ``file://`` (an object store, or a scheme the
    store refuses by name), rather than a local path."""
    text = os.fspath(location)
    return "://" in text and not text.startswith("file://")


def table_format(location: str | os.PathLike) -> str | None:
    """``"delta"`` when ``location`` holds a Delta log (``_delta_log/``), ``"iceberg"`` for an
    ``iceberg://`` URI or a folder holding Iceberg ``metadata/*.metadata.json``, else None
    (plain files, a glob or one file).

    A local location is looked at with ``os`` calls; a remote one with one listing of its
    store.

    Raises:
        StorageError: A remote location cannot be listed.

    Example:
        >>> table_format("iceberg://local/ns.events")
        'iceberg'
    """
    text = os.fspath(location)
    if text.startswith(ICEBERG_SCHEME):
        return "iceberg"
    if any(character in text for character in "*?[") or not text:
        return None
    if is_remote(text):
        from concurrent.futures import ThreadPoolExecutor

        from bloomskip._store import open_store

        # Both listings at once: each is a round trip to the store, on every query's path.
        with ThreadPoolExecutor(max_workers=2) as pool:
            log = pool.submit(open_store(text.rstrip("/")).has_prefix, "_delta_log/")
            iceberg = pool.submit(is_iceberg_folder, text)
            if log.result():
                return "delta"
            return "iceberg" if iceberg.result() else None
    if (Path(local_path(text)) / "_delta_log").is_dir():
        return "delta"
    return "iceberg" if is_iceberg_folder(text) else None


def is_iceberg_folder(location: str | os.PathLike) -> bool:
    """Whether ``location`` (a folder or object-store prefix) holds an Iceberg ``metadata/``
    folder with at least one ``*.metadata.json`` file.

    Locally this is a directory check; on an object store, one listing of ``metadata/``.

    Args:
        location: A path, ``file://…`` or an object-store URI.

    Returns:
        True for an Iceberg table's folder (False for anything that cannot be read).

    Example:
        >>> is_iceberg_folder("logs/")
        False
    """
    text = os.fspath(location)
    if text.startswith(ICEBERG_SCHEME):
        return False
    from bloomskip.errors import BloomskipError

    try:
        return bool(iceberg_metadata_names(text.rstrip("/") or "/"))
    except BloomskipError:
        return False


def iceberg_metadata_names(location: str) -> list[str]:
    """The names of the ``*.metadata.json`` files in ``location``'s ``metadata/`` folder, sorted.

    Raises:
        StorageError: The folder or prefix cannot be listed (a missing one holds none).
    """
    from bloomskip.errors import StorageError

    if is_remote(location):
        from bloomskip._store import open_store

        names = [info.key[len("metadata/") :] for info in open_store(location).list("metadata/")]
    else:
        folder = Path(local_path(location)) / "metadata"
        if not folder.is_dir():
            return []
        try:
            names = os.listdir(folder)
        except OSError as exc:
            raise StorageError(f"cannot list {folder}: {exc.strerror or exc}") from exc
    return sorted(name for name in names if "/" not in name and name.endswith(".metadata.json"))


__all__ = [
    "DIRECTORY_SIDECAR",
    "ICEBERG_SCHEME",
    "INDEX_FOLDER",
    "default_index_folder",
    "default_sidecar_path",
    "holds_segmented_index",
    "iceberg_metadata_names",
    "indexed_folder",
    "is_iceberg_folder",
    "is_remote",
    "local_path",
    "nearest_folder_index",
    "table_format",
]
