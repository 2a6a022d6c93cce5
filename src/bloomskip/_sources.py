"""One opener for tabular files: Parquet, Arrow IPC (file or stream) and CSV.

The format of a file is sniffed once, by :func:`sniff_format`, and a whole file is opened with
``pyarrow.dataset`` by :func:`open_dataset`, so that it is read the same way wherever it is
named. (A Parquet footer alone is read with ``pyarrow.parquet``, whose import does not load the
dataset layer and, with it, pandas.)

Format names are those the dataset sidecar stores: ``"parquet"``, ``"arrow-ipc"`` (the IPC file
format, with its ``ARROW1`` magic), ``"arrow-ipc-stream"`` and ``"csv"``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from bloomskip.errors import FormatError

if TYPE_CHECKING:
    import pyarrow.dataset as pads

PARQUET = "parquet"
ARROW_IPC = "arrow-ipc"
ARROW_IPC_STREAM = "arrow-ipc-stream"
CSV = "csv"

PARQUET_MAGIC = b"PAR1"
ARROW_IPC_MAGIC = b"ARROW1"

# Formats without a leading magic are known by their extension only.
_STREAM_SUFFIXES = frozenset({".arrow", ".feather", ".ipc", ".arrows"})
_PARQUET_SUFFIXES = frozenset({".parquet", ".pq"})
_NAMES = {
    PARQUET: "Parquet",
    ARROW_IPC: "Arrow IPC",
    ARROW_IPC_STREAM: "an Arrow IPC stream",
    CSV: "CSV",
}


def sniff_format(path: str | os.PathLike) -> str | None:
    """Return a file's format: from its leading magic bytes, else from its extension.

    The magic comes first because it is the file's own statement: a Parquet file named
    ``.arrow`` is still Parquet. Formats with no magic (CSV, an IPC stream) and a Parquet file
    whose head is damaged are known by their extension.

    Args:
        path: The file.

    Returns:
        ``"parquet"``, ``"arrow-ipc"``, ``"arrow-ipc-stream"``, ``"csv"``, or None when neither
        the bytes nor the name say.

    Raises:
        OSError: The file cannot be read.

    Example:
        >>> sniff_format("events.parquet")  # doctest: +SKIP
        'parquet'
    """
    with open(path, "rb") as handle:
        head = handle.read(len(ARROW_IPC_MAGIC))
    if head.startswith(PARQUET_MAGIC):
        return PARQUET
    if head == ARROW_IPC_MAGIC:
        return ARROW_IPC
    suffix = Path(path).suffix.lower()
    if suffix in _PARQUET_SUFFIXES:
        return PARQUET
    if suffix in _STREAM_SUFFIXES:
        return ARROW_IPC_STREAM
    if suffix == ".csv":
        return CSV
    return None


def open_dataset(path: str | os.PathLike, file_format: str) -> pads.Dataset:
    """Open one file as a ``pyarrow.dataset.Dataset`` (its schema is read; its rows are not).

    Args:
        path: The file.
        file_format: One of the names :func:`sniff_format` returns.

    Returns:
        The dataset. An IPC stream, which ``pyarrow.dataset`` cannot scan, is read whole into
        an in-memory dataset.

    Raises:
        FormatError: The file cannot be read in that format; the message names the file.
        OSError: The file cannot be opened.

    Example:
        >>> open_dataset("events.parquet", sniff_format("events.parquet")).schema.names
        ... # doctest: +SKIP
        ['ts', 'user_id', 'msg']
    """
    import pyarrow as pa
    import pyarrow.dataset as pads

    try:
        if file_format == ARROW_IPC_STREAM:
            with pa.memory_map(os.fspath(path)) as stream:
                return pads.dataset(pa.ipc.open_stream(stream).read_all())
        scanned = {PARQUET: "parquet", ARROW_IPC: "ipc", CSV: "csv"}[file_format]
        return pads.dataset(os.fspath(path), format=scanned)
    except pa.ArrowException as exc:
        # pyarrow's message repeats the path in its own words: keep what follows the last one.
        detail = str(exc).rpartition("': ")[2] or str(exc)
        raise FormatError(
            f"cannot read as {_NAMES[file_format]}: {detail}", source=os.fspath(path)
        ) from exc


def plain_types(schema):  # noqa: ANN001, ANN201 - pyarrow schemas
    """``schema`` with view and large string/binary types as their plain forms.

    Writers differ (deltalake writes ``string_view`` into some files' Arrow schema and not into
    others; Polars writes large types): the files of one table still hold the same Parquet
    column, and a scan casts them all to one type.

    Example:
        >>> import pyarrow as pa
        >>> plain_types(pa.schema([("s", pa.string_view())])).field("s").type
        DataType(string)
    """
    import pyarrow as pa

    def plain(arrow_type):
        if pa.types.is_string_view(arrow_type) or pa.types.is_large_string(arrow_type):
            return pa.string()
        if pa.types.is_binary_view(arrow_type) or pa.types.is_large_binary(arrow_type):
            return pa.binary()
        return arrow_type

    return pa.schema(
        [item.with_type(plain(item.type)) for item in schema], metadata=schema.metadata
    )
