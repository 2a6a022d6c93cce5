"""Walking a local folder as pyarrow.dataset's discovery does, one ``stat`` per entry.

Links are followed, to directories and to files. A directory that is its own ancestor (a link
cycle) is not entered again, but a directory reached by two different paths (two links to it)
is listed under both, as pyarrow lists it. A link that dangles or loops is skipped, as pyarrow
skips it; any other entry that cannot be stat-ed, and any directory that cannot be read, is an
error, so that no file is ever silently missing from a listing.

Example:
    >>> [key for _, key, _ in walk(".", descend=lambda key: False)][:0]
    []
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator
from stat import S_ISDIR


def walk(
    top: str,
    key_prefix: str = "",
    *,
    skip: Callable[[str], bool] | None = None,
    descend: Callable[[str], bool] | None = None,
) -> Iterator[tuple[str, str, os.stat_result]]:
    """Yield ``(path, key, stat)`` for every entry under ``top`` that is not a directory.

    Args:
        top: The folder (nothing is yielded when it does not exist).
        key_prefix: Prepended to each entry's ``/``-separated path below ``top``: its key.
        skip: Given an entry's name: leave it out (and, for a directory, all below it).
        descend: Given a directory's key (without a trailing ``/``): whether to walk it.

    Raises:
        OSError: A directory cannot be read, or an entry cannot be stat-ed for another reason
            than a dangling or looping link (``filename`` names it).
    """
    try:
        top_stat = os.stat(top)
    except FileNotFoundError:
        return
    pending = [(top, key_prefix, frozenset({(top_stat.st_dev, top_stat.st_ino)}))]
    while pending:
        directory, prefix, ancestors = pending.pop()
        try:
            with os.scandir(directory) as scan:
                entries = list(scan)
        except FileNotFoundError:
            continue  # removed while the walk ran
        for entry in entries:
            if skip is not None and skip(entry.name):
                continue
            key = prefix + entry.name
            try:
                stat = entry.stat()
            except OSError as exc:
                if exc.errno in (errno.ENOENT, errno.ELOOP):
                    continue  # a dangling or looping link, or an entry removed meanwhile
                raise
            if not S_ISDIR(stat.st_mode):
                yield entry.path, key, stat
            elif (stat.st_dev, stat.st_ino) not in ancestors and (descend is None or descend(key)):
                pending.append((entry.path, key + "/", ancestors | {(stat.st_dev, stat.st_ino)}))


__all__ = ["walk"]
