"""A Delta Lake table at one version, read with the ``deltalake`` package (the ``[lake]`` extra).

The log's add actions name the live data files (their size, row count and partition values);
the deletion vectors of the version name the rows each file has lost. Reader features whose rows
bloomskip cannot reproduce exactly are refused by name (:data:`SUPPORTED_READER_FEATURES`).

Example:
    >>> snapshot = open_delta("events/", version=2)  # doctest: +SKIP
    >>> snapshot.snapshot, len(snapshot.files)  # doctest: +SKIP
    (2, 12)
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import TYPE_CHECKING
from urllib.parse import unquote

from bloomskip._store import one_line
from bloomskip.dataset.listing.tables.snapshot import TableFile, TableSnapshot, parse_timestamp
from bloomskip.errors import BloomskipError, StorageError

if TYPE_CHECKING:
    import pyarrow as pa

#: Reader features a query honours exactly: deletion vectors are applied, the others change
#: nothing for a by-name Parquet read (``v2Checkpoint`` and ``vacuumProtocolCheck`` concern the
#: log, which deltalake reads; ``timestampNtz`` is a plain Parquet timestamp).
SUPPORTED_READER_FEATURES = frozenset(
    {"deletionVectors", "timestampNtz", "v2Checkpoint", "vacuumProtocolCheck", "variantType"}
)
#: What each refused reader feature would make a by-name read of the files get wrong.
REFUSED_BECAUSE = {
    "columnMapping": "the files name their columns by physical names",
    "typeWidening": "older files hold a column in a narrower type than the table's",
    "icebergCompatV1": "the files name their columns by physical names",
    "icebergCompatV2": "the files name their columns by physical names",
}


def storage_options(location: str) -> dict[str, str]:
    """The options deltalake needs beyond its own environment reading: plain HTTP for a local
    S3-API server whose endpoint (``AWS_ENDPOINT_URL``) says ``http://``."""
    if not location.startswith(("s3://", "s3a://")):
        return {}
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint and endpoint.startswith("http://"):
        return {"AWS_ALLOW_HTTP": "true", "AWS_ENDPOINT_URL": endpoint}
    return {}


def open_delta(
    location: str, *, version: int | None = None, as_of: str | None = None
) -> TableSnapshot:
    """Read the Delta table at ``location`` at one version.

    Args:
        location: A folder or object-store prefix holding ``_delta_log/``.
        version: The version (default: the newest).
        as_of: An ISO-8601 timestamp: the newest version committed at or before it.

    Returns:
        A :class:`~bloomskip.dataset.listing.tables.snapshot.TableSnapshot`.

    Raises:
        BloomskipError: Not a Delta table, a version that does not exist, or a reader feature
            that cannot be honoured exactly (named).
        StorageError: The table cannot be read.
    """
    try:
        import deltalake
    except ImportError as exc:
        raise BloomskipError(
            f"{location}: is a Delta table; reading it needs the deltalake package "
            "(pip install 'bloomskip[lake]')"
        ) from exc
    location = location.rstrip("/")
    if version is not None and as_of is not None:
        raise BloomskipError("give --version or --as-of, not both")
    options = storage_options(location)
    try:
        table = deltalake.DeltaTable(location, storage_options=options or None)
        newest = table.version()
        if version is not None:
            if not 0 <= version <= newest:
                raise BloomskipError(
                    f"{location}: Delta version {version} does not exist (versions 0 to {newest})"
                )
            table.load_as_version(version)
        elif as_of is not None:
            moment = parse_timestamp(as_of)
            table.load_as_version(moment)
            # deltalake loads the oldest version for a time before the table existed; Delta's
            # own rule (and Spark's) is an error: no version was current then.
            first = _commit_timestamp(location, table.version())
            if first is not None and moment.timestamp() * 1000 < first:
                raise BloomskipError(
                    f"{location}: no version at {as_of}: the oldest available was committed at "
                    f"{datetime.fromtimestamp(first / 1000, UTC).isoformat()}"
                )
    except BloomskipError:
        raise
    except deltalake.exceptions.TableNotFoundError as exc:
        raise BloomskipError(f"{location}: not a Delta table ({one_line(exc)})") from exc
    except (deltalake.exceptions.DeltaError, OSError, ValueError) as exc:
        raise StorageError(f"{location}: cannot read the Delta log: {one_line(exc)}") from exc
    _check_features(table, location)
    schema = _arrow_schema(table)
    files = _files(table, location, schema)
    return TableSnapshot(
        format="delta",
        location=location,
        name=location,
        snapshot=table.version(),
        sequence=table.version(),
        # Read only to answer --as-of: it costs a request, and nothing else needs it.
        timestamp_ms=None,
        schema=schema,
        files=files,
        is_latest=table.version() == newest,
        keep_files=lambda text: _keep_files(table, text, files),
    )


def _check_features(table, location: str) -> None:
    protocol = table.protocol()
    features = set(protocol.reader_features or ())
    configuration = table.metadata().configuration or {}
    mode = configuration.get("delta.columnMapping.mode", "none")
    if protocol.min_reader_version == 2 or mode != "none":
        features.add("columnMapping")
    if protocol.min_reader_version > 3:
        raise BloomskipError(
            f"{location}: Delta reader version {protocol.min_reader_version} is newer than "
            "bloomskip reads (3)"
        )
    refused = sorted(features - SUPPORTED_READER_FEATURES)
    if refused and (mode != "none" or set(refused) - {"columnMapping"}):
        name = refused[0]
        why = REFUSED_BECAUSE.get(name, "bloomskip does not know what it changes")
        raise BloomskipError(
            f"{location}: the Delta table uses the reader feature {name!r}, which bloomskip "
            f"cannot honour exactly ({why})"
        )


def _arrow_schema(table) -> pa.Schema:
    import pyarrow as pa

    from bloomskip._sources import plain_types

    return plain_types(pa.schema(table.schema().to_arrow()))


def _files(table, location: str, schema: pa.Schema) -> tuple[TableFile, ...]:
    import pyarrow as pa

    # Through the stream interface: pa.table() on deltalake's arro3 table imports pandas.
    actions = pa.RecordBatchReader.from_stream(table.get_add_actions(flatten=True)).read_all()
    if actions.num_rows == 0:
        return ()
    deleted = _deleted_positions(table, location)
    partition_columns = list(table.metadata().partition_columns)
    paths = actions.column("path").to_pylist()
    sizes = actions.column("size_bytes").to_pylist()
    records = (
        actions.column("num_records").to_pylist()
        if "num_records" in actions.column_names
        else [None] * len(paths)
    )
    values = {}
    for name in partition_columns:
        column = actions.column(f"partition.{name}")
        target = schema.field(name).type
        try:
            values[name] = column.cast(target).to_pylist()
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise BloomskipError(
                f"{location}: partition values of {name!r} do not read as {target}: {one_line(exc)}"
            ) from exc
    files = []
    for number, path in enumerate(paths):
        key = _key(path, table)
        files.append(
            TableFile(
                key=key,
                size=int(sizes[number]),
                records=None if records[number] is None else int(records[number]),
                partition={name: values[name][number] for name in partition_columns},
                deleted=deleted.get(key, None),
            )
        )
    files.sort(key=lambda item: item.key)
    return tuple(files)


def _key(path: str, table) -> str:
    """A data file's key (its path in storage, relative to the table) from a path the Delta log
    holds: an add action's ``path``, or the file a deletion vector belongs to.

    The protocol makes such a path a URI (RFC 2396): a partition value ``a b`` is written to
    storage as ``region=a%20b/`` and logged as ``region=a%2520b/``. Decoding it once gives the
    key; this is the only place a log path is decoded. An absolute URI (deltalake names a
    deletion vector's file so) must lie under the table's; one outside it (a shallow clone's
    file) is refused, since its files live in another table.

    Raises:
        BloomskipError: The path names a file outside the table's location.
    """
    if "://" in path or path.startswith("/"):
        prefix = unquote(table.table_uri.removeprefix("file://")).rstrip("/") + "/"
        text = unquote(path.removeprefix("file://"))
        if not text.startswith(prefix):
            raise BloomskipError(
                f"{table.table_uri}: the Delta log names a data file outside the table ({path}); "
                "bloomskip indexes files under the table's location only"
            )
        return text[len(prefix) :]
    return unquote(path)


def _deleted_positions(table, location: str) -> dict:
    """Per file key, the row positions its deletion vector removes (sorted int64).

    deltalake reads every vector, wherever its descriptor puts it: in the table's folder
    (``storageType`` ``u``), inline (``i``) or at an absolute path (``p``), even one outside the
    table's location, which its own reader applies too; so does bloomskip.

    Raises:
        StorageError: A vector cannot be read: its file is missing, or its bytes fail their
            CRC-32 or do not parse (deltalake's message names the file).
    """
    import numpy as np
    import pyarrow as pa
    from deltalake.exceptions import DeltaError

    if "deletionVectors" not in set(table.protocol().reader_features or ()):
        return {}
    found = {}
    try:
        # The stream may fail at any batch, not only when it is opened.
        for batch in pa.RecordBatchReader.from_stream(table.deletion_vectors()):
            paths = batch.column("filepath").to_pylist()
            vectors = batch.column("selection_vector")
            offsets = vectors.offsets.to_numpy()
            keep = vectors.values.to_numpy(zero_copy_only=False)
            for number, path in enumerate(paths):
                mask = keep[offsets[number] : offsets[number + 1]]
                found[_key(path, table)] = np.flatnonzero(~mask).astype(np.int64)
    except (DeltaError, OSError, pa.ArrowException) as exc:
        # Without the vector the file's deleted rows would come back: nothing can be read.
        raise StorageError(
            f"{location}: cannot read a deletion vector of version {table.version()}: "
            f"{one_line(exc)}"
        ) from exc
    return found


def _commit_timestamp(location: str, version: int) -> int | None:
    """When ``version`` was committed (milliseconds): its commit's ``commitInfo.timestamp``,
    read from the log with one request (deltalake's ``history()`` reads every commit, and was
    seen to hang against an S3-API server). None when the commit carries none."""
    import json

    from bloomskip._store import open_store

    try:
        text = open_store(location).get(f"_delta_log/{version:020d}.json")
    except StorageError:
        return None  # compacted into a checkpoint: nothing to tell it by
    for line in text.splitlines():
        try:
            action = json.loads(line)
        except ValueError:
            continue
        info = action.get("commitInfo") if isinstance(action, dict) else None
        stamp = info.get("inCommitTimestamp", info.get("timestamp")) if info else None
        if isinstance(stamp, int):
            return stamp
    return None


def _keep_files(table, text: str, files) -> frozenset[str]:
    """deltalake's own file skipping (partition values, then min/max statistics).

    ``file_uris`` is not a URI of the file: it joins the table's URI (encoded, without
    ``file://`` for a local table) and the file's key as stored, not encoded
    (``…/my%20dir/t/region=a%20b/part-….parquet`` for the key ``region=a%20b/part-….parquet``).
    So the table's URI is cut off and the rest is the key, never decoded: decoding it again
    turned ``region=a%20b`` into ``region=a b``, matched no file, and lost the partition's rows.
    """
    from deltalake.exceptions import DeltaError

    known = frozenset(item.key for item in files)
    try:
        uris = table.file_uris(file_pruning_predicate=text)
    except (DeltaError, ValueError, TypeError):
        # A predicate deltalake cannot plan prunes nothing: every file may match.
        return known
    root = table.table_uri.removeprefix("file://").rstrip("/") + "/"
    kept = set()
    for uri in uris:
        key = uri[len(root) :] if uri.startswith(root) else None
        if key not in known:
            # A name not understood could stand for any file: pruning by the rest would lose
            # that file's rows, so nothing is pruned.
            return known
        kept.add(key)
    return frozenset(kept)
