"""Names shared by building and pruning a sidecar: the row-group granule and sidecar file names.

Both :mod:`bloomskip.dataset.build.indexing` and :mod:`bloomskip.dataset.prune` read these, so they
live here rather than in either of them (pruning does not depend on the build machinery).
"""

from __future__ import annotations

import os
from pathlib import Path

ROW_GROUP = "row-group"


def relative_to(path: Path, root: Path) -> str:
    """Return ``path`` relative to ``root`` with ``/`` separators (how the sidecar names files).

    Args:
        path: A file of the dataset.
        root: The dataset's root directory.

    Returns:
        The relative path, ``/``-separated on every platform.

    Example:
        >>> relative_to(Path("/data/a/b.parquet"), Path("/data"))
        'a/b.parquet'
        >>> relative_to(Path("/data/b.parquet"), Path("/data/a"))
        '../b.parquet'
    """
    text, base = str(path), str(root)
    # Called per file on every query: the common case, a file below an absolute root, without
    # relpath's normalisation of both paths.
    if (
        os.sep == "/"
        and base.startswith("/")
        and text.startswith(base.rstrip("/") + "/")
        and "/.." not in text
        and "/.." not in base
    ):
        return text[len(base.rstrip("/")) + 1 :]
    return Path(os.path.relpath(path, root)).as_posix()
