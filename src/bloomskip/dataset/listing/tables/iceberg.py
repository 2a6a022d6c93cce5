"""An Apache Iceberg table at one snapshot, read with ``pyiceberg`` (the ``[lake]`` extra).

A table is named ``iceberg://CATALOG/NAMESPACE.TABLE``, the catalog configured the pyiceberg
way (``.pyiceberg.yaml`` or ``PYICEBERG_CATALOG__<NAME>__*`` variables), or it is a folder or
object-store prefix holding a ``metadata/`` folder of ``*.metadata.json`` files (a table
without a catalog, as ClickHouse's ``IcebergLocal`` or a Hadoop catalog writes them). The
snapshot's manifests name its data files and the position-delete files that apply to each.

bloomskip reads the top-level columns of the data files by field id, as Iceberg does
(:mod:`bloomskip.dataset.listing.field_ids`): a column renamed, dropped, added again under an
old name or promoted (int to long, float to double, a decimal to more digits) reads as Iceberg
reads it. Whatever would still make its read differ from Iceberg's, and every delete it cannot
apply, is refused by name: equality deletes, deletion vectors, data files that are not Parquet,
renamed or promoted nested fields, column defaults.

Example:
    >>> snapshot = open_iceberg("iceberg://local/logs.events")  # doctest: +SKIP
    >>> snapshot.format, len(snapshot.files)  # doctest: +SKIP
    ('iceberg', 12)
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from datetime import UTC
from typing import TYPE_CHECKING

from bloomskip._store import one_line, open_store
from bloomskip.dataset.listing.field_ids import FieldIds
from bloomskip.dataset.listing.tables.snapshot import (
    FieldHistory,
    TableFile,
    TableSnapshot,
    parse_timestamp,
)
from bloomskip.dataset.locate import (
    ICEBERG_SCHEME,
    iceberg_metadata_names,
)
from bloomskip.errors import BloomskipError, StorageError

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

#: A metadata file's version: ``v3.metadata.json`` (Hadoop, ClickHouse) or
#: ``00003-<uuid>.metadata.json`` (catalogs); ``.gz.metadata.json`` when compressed.
_METADATA_VERSION = re.compile(r"v?(\d+)(?:[-.].*)?\.metadata\.json")


def open_iceberg(
    uri: str, *, snapshot_id: int | None = None, as_of: str | None = None
) -> TableSnapshot:
    """Read an Iceberg table at one snapshot.

    Args:
        uri: ``iceberg://CATALOG/NAMESPACE.TABLE`` (the namespace may have several levels,
            ``a.b.table``), or a folder or object-store prefix holding ``metadata/``.
        snapshot_id: The snapshot (default: the table's current one).
        as_of: An ISO-8601 timestamp or date: the snapshot that was current then (the newest
            in the table's snapshot log committed at or before it).

    Returns:
        A :class:`~bloomskip.dataset.listing.tables.snapshot.TableSnapshot`; a table without a
        snapshot has no files.

    Raises:
        BloomskipError: A bad URI, a snapshot that does not exist, or a table feature whose
            rows bloomskip cannot reproduce exactly (named).
        StorageError: The catalog or the table's metadata cannot be reached or read.

    Example:
        >>> open_iceberg("iceberg://local/logs.events", snapshot_id=1).snapshot  # doctest: +SKIP
        1
    """
    try:
        import pyiceberg  # noqa: F401
    except ImportError as exc:
        raise BloomskipError(
            f"{uri}: reading an Iceberg table needs the pyiceberg package "
            "(pip install 'bloomskip[lake]')"
        ) from exc
    if snapshot_id is not None and as_of is not None:
        raise BloomskipError("give --snapshot-id or --as-of, not both")
    table = _load_catalog_table(uri) if uri.startswith(ICEBERG_SCHEME) else _load_folder(uri)
    snapshot = _snapshot(table, uri, snapshot_id, as_of)
    latest = snapshot_id is None and as_of is None
    read_as = _schema_of(table, None if latest else snapshot)
    _check_schemas(table, uri, read_as, snapshot)
    field_ids = FieldIds(
        {field.name: field.field_id for field in read_as.fields}, _name_mapping(table, uri)
    )
    history = _history(table)
    location = _plain(table.location()).rstrip("/")
    schema = _arrow_schema(read_as, uri)
    if snapshot is None:
        return TableSnapshot(
            format="iceberg",
            location=location,
            name=uri,
            snapshot=0,
            sequence=0,
            timestamp_ms=int(table.metadata.last_updated_ms),
            schema=schema,
            files=(),
            is_latest=True,
            keep_files=lambda text: frozenset(),
            field_ids=field_ids,
            history=history,
        )
    tasks = _plan(table, uri, snapshot.snapshot_id)
    files = _files(table, uri, location, tasks, field_ids)
    everything = frozenset(item.key for item in files)
    trusted = _summaries_hold(table, uri, snapshot)
    current = table.current_snapshot()
    return TableSnapshot(
        format="iceberg",
        location=location,
        name=uri,
        snapshot=snapshot.snapshot_id,
        sequence=int(snapshot.sequence_number or 0),
        timestamp_ms=int(snapshot.timestamp_ms),
        schema=schema,
        files=files,
        is_latest=current is not None and current.snapshot_id == snapshot.snapshot_id,
        keep_files=lambda text: (
            _keep_files(table, uri, location, snapshot.snapshot_id, read_as, text, everything)
            if trusted
            else everything
        ),
        field_ids=field_ids,
        history=history,
    )


# -- loading ------------------------------------------------------------------------------


def _catalog_errors() -> tuple[type[BaseException], ...]:
    """What pyiceberg's catalogs raise for a catalog or table that cannot be reached or found:
    its own exceptions, a bad configuration (ValueError), network and file errors (OSError;
    requests' errors are OSErrors), and SQLAlchemy's for a SQL catalog."""
    from pyiceberg import exceptions

    found: list[type[BaseException]] = [
        ValueError,
        OSError,
        exceptions.NoSuchTableError,
        exceptions.NoSuchNamespaceError,
        exceptions.NoSuchIdentifierError,
        exceptions.NoSuchPropertyException,
        exceptions.NotInstalledError,
        exceptions.RESTError,
        exceptions.ValidationError,
        exceptions.SignError,
        exceptions.DynamoDbError,
    ]
    try:
        from sqlalchemy.exc import SQLAlchemyError
    except ImportError:  # pragma: no cover - only the SQL catalog needs SQLAlchemy
        pass
    else:
        found.append(SQLAlchemyError)
    return tuple(found)


def _load_catalog_table(uri: str):
    from pyiceberg.catalog import load_catalog
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
    from pyiceberg.utils.config import Config

    catalog_name, _, identifier = uri[len(ICEBERG_SCHEME) :].rstrip("/").partition("/")
    namespace, _, name = identifier.rpartition(".")
    if not catalog_name or not name or not namespace or "" in namespace.split("."):
        raise BloomskipError(f"{uri}: expected iceberg://CATALOG/NAMESPACE.TABLE")
    errors = _catalog_errors()
    # pyiceberg reads its configuration once, when it is imported; read again here, the same
    # files and variables count as they are now (a variable set after the import).
    properties = Config().get_catalog_config(catalog_name)
    if not properties:
        variable = f"PYICEBERG_CATALOG__{catalog_name.upper()}__URI"
        raise BloomskipError(
            f"{uri}: no Iceberg catalog {catalog_name!r} is configured (in .pyiceberg.yaml, "
            f"or by {variable} and the other PYICEBERG_CATALOG__ variables)"
        )
    try:
        catalog = load_catalog(catalog_name, **properties)
    except errors as exc:
        raise StorageError(
            f"{uri}: cannot load the Iceberg catalog {catalog_name!r}: {one_line(exc)}"
        ) from exc
    try:
        return catalog.load_table((*namespace.split("."), name))
    except (NoSuchTableError, NoSuchNamespaceError) as exc:
        raise BloomskipError(
            f"{uri}: no table {identifier!r} in the Iceberg catalog {catalog_name!r}"
        ) from exc
    except errors as exc:
        raise StorageError(
            f"{uri}: cannot load {identifier!r} from the Iceberg catalog {catalog_name!r}: "
            f"{one_line(exc)}"
        ) from exc


def _newest_metadata(location: str, names: list[str]) -> str:
    """The metadata file a table without a catalog is at: the highest version number.

    ``version-hint.text`` is not needed: a hint can be stale (written after its metadata
    file), and Iceberg's Hadoop tables then read past it to the highest version, too.
    """
    versions: dict[int, list[str]] = {}
    for name in names:
        match = _METADATA_VERSION.fullmatch(name)
        if match:
            versions.setdefault(int(match.group(1)), []).append(name)
    if not versions:
        raise BloomskipError(
            f"{location}: no numbered *.metadata.json file in metadata/ (found {names[0]}); "
            "open the table through its catalog (iceberg://CATALOG/NAMESPACE.TABLE)"
        )
    newest = max(versions)
    if len(versions[newest]) > 1:
        raise BloomskipError(
            f"{location}: several metadata files claim version {newest} "
            f"({', '.join(versions[newest][:2])}); open the table through its catalog "
            "(iceberg://CATALOG/NAMESPACE.TABLE)"
        )
    return versions[newest][0]


def _load_folder(location: str):
    from pyiceberg.table import StaticTable

    location = location.rstrip("/") or "/"
    names = iceberg_metadata_names(location)
    if not names:
        raise BloomskipError(
            f"{location}: not an Iceberg table (no metadata/*.metadata.json; a table in a "
            "catalog is written iceberg://CATALOG/NAMESPACE.TABLE)"
        )
    store = open_store(location)
    metadata = store.uri_of(f"metadata/{_newest_metadata(location, names)}")
    try:
        return StaticTable.from_metadata(metadata, properties=_file_io_properties(location))
    except _catalog_errors() as exc:
        raise StorageError(
            f"{metadata}: cannot read the Iceberg metadata: {one_line(exc)}"
        ) from exc


def _file_io_properties(location: str) -> dict[str, str]:
    """pyiceberg's S3 settings for a table without a catalog (a catalog brings its own), from
    the environment every AWS client reads: pyiceberg's S3 client otherwise addresses AWS
    itself, whatever ``AWS_ENDPOINT_URL`` says."""
    if not location.startswith(("s3://", "s3a://")):
        return {}
    properties = {}
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        properties["s3.endpoint"] = endpoint
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        properties["s3.region"] = region
    return properties


def _plain(path: str) -> str:
    """A ``file:`` URI as a plain path (how bloomskip's local store names files); pyiceberg
    reads a ``file:`` URI's path as it is, without percent-decoding, and so does this."""
    if path.startswith("file://"):
        return path[len("file://") :]
    if path.startswith("file:/"):
        return path[len("file:") :]
    return path


# -- the snapshot ---------------------------------------------------------------------------


def _snapshot(table, uri: str, snapshot_id: int | None, as_of: str | None):

    if snapshot_id is not None:
        found = table.snapshot_by_id(snapshot_id)
        if found is None:
            known = [item.snapshot_id for item in table.metadata.snapshots]
            listed = ", ".join(map(str, known[-5:])) if known else "none: the table is empty"
            raise BloomskipError(
                f"{uri}: Iceberg snapshot {snapshot_id} does not exist (newest snapshots: {listed})"
            )
        return found
    if as_of is not None:
        moment = parse_timestamp(as_of)
        found = table.snapshot_as_of_timestamp(int(moment.timestamp() * 1000))
        if found is None:
            history = table.history()
            first = (
                f"its first snapshot was committed at {_iso(history[0].timestamp_ms)}"
                if history
                else "it has no snapshot"
            )
            raise BloomskipError(f"{uri}: no Iceberg snapshot at or before {as_of} ({first})")
        return found
    return table.current_snapshot()


def _iso(timestamp_ms: int) -> str:
    from datetime import datetime

    moment = datetime.fromtimestamp(timestamp_ms / 1000, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _schema_of(table, snapshot):
    """The pyiceberg schema a snapshot is read with, as pyiceberg's scan reads it: a snapshot
    asked for by id or time, its own; the table's newest state (``snapshot`` None), the
    table's current schema, which a rename or promotion changes before any data is written."""
    schema = table.metadata.schema()
    if snapshot is not None and snapshot.schema_id is not None:
        schema = table.metadata.schema_by_id(snapshot.schema_id) or schema
    return schema


def _check_schemas(table, uri: str, read_as, snapshot) -> None:
    """Refuse a schema history whose files bloomskip cannot read as Iceberg reads them.

    The snapshot's files, written under the table's schemas up to the snapshot's, are read
    with ``read_as``. Their top-level columns are found by field id and cast to its types
    (``listing/field_ids.py``), so a top-level column may have been renamed, dropped, added
    (again under an old name) and promoted from int to long, float to double, or to a decimal
    of more digits. What lies inside a column (a struct's fields, a list's element, a map's
    keys and values) is read by name and type as the file holds it: a nested rename or
    promotion is refused, and so is an initial default (Iceberg v3), which files written
    before the column was added read as, not as NULL.
    """
    from pyiceberg.schema import index_by_id, index_name_by_id
    from pyiceberg.types import PrimitiveType

    wanted = index_by_id(read_as)
    wanted_names = index_name_by_id(read_as)
    top = {field.field_id for field in read_as.fields}
    for schema in _written_with(table, read_as, snapshot):
        fields = index_by_id(schema)
        for field_id, name in index_name_by_id(schema).items():
            field = fields[field_id]
            if field.initial_default is not None:
                raise BloomskipError(
                    f"{uri}: the Iceberg column {name!r} has an initial default; files "
                    "written before it was added read as that default, not NULL (column "
                    "defaults are not supported)"
                )
            now = wanted.get(field_id)
            if now is None:
                continue  # dropped since (or added later): no file's value is read for it
            if field_id not in top and field.name != now.name:
                raise BloomskipError(
                    f"{uri}: the nested Iceberg field {name!r} was renamed to "
                    f"{wanted_names[field_id]!r}; bloomskip finds top-level columns by field "
                    "id, and the fields inside them by name (nested renames are not supported)"
                )
            if field.field_type == now.field_type or not isinstance(
                field.field_type, PrimitiveType
            ):
                continue
            if field_id not in top or not _widens(field.field_type, now.field_type):
                raise BloomskipError(
                    f"{uri}: the Iceberg column {name!r} was promoted from {field.field_type} "
                    f"to {now.field_type}; bloomskip casts a top-level int, float or decimal "
                    "column to its wider type only (this type promotion is not supported)"
                )


def _written_with(table, read_as, snapshot) -> list:
    """The schemas the files of ``snapshot`` may have been written with: those of the table's
    snapshots up to it, and every schema between (a writer may have started before a schema
    change it committed after), by schema id; all of them for a table without snapshots."""
    limit = read_as.schema_id
    for item in table.metadata.snapshots:
        if item.schema_id is not None and (
            snapshot is None or (item.sequence_number or 0) <= (snapshot.sequence_number or 0)
        ):
            limit = max(limit, item.schema_id)
    return [schema for schema in table.metadata.schemas if schema.schema_id <= limit]


def _widens(narrow, wide) -> bool:
    """Whether Iceberg's promotion of ``narrow`` to ``wide`` keeps every value exactly, as a
    cast of the file's values does: int to long, float to double, a decimal to more digits."""
    from pyiceberg import types

    if isinstance(narrow, types.DecimalType) and isinstance(wide, types.DecimalType):
        return narrow.scale == wide.scale and narrow.precision <= wide.precision
    return (type(narrow), type(wide)) in {
        (types.IntegerType, types.LongType),
        (types.FloatType, types.DoubleType),
    }


def _name_mapping(table, uri: str) -> dict[str, int]:
    """The table's name mapping for its top-level columns: each name a file written without
    field ids (an imported file) may use, to the field id Iceberg reads it as.

    A name mapping may give a top-level column earlier names (pyiceberg adds the old name on a
    rename): those are read by field id like any other. Nested fields are read by name, so a
    nested alias is refused.

    Raises:
        BloomskipError: The mapping is unreadable, or gives a nested field another name.
    """
    from pyiceberg.schema import index_by_id

    try:
        mapping = table.name_mapping()
    except ValueError as exc:
        raise BloomskipError(
            f"{uri}: the table's name mapping is unreadable: {one_line(exc)}"
        ) from exc
    if mapping is None:
        return {}
    current = index_by_id(table.metadata.schema())
    pending = [nested for mapped in mapping for nested in mapped.fields]
    while pending:
        mapped = pending.pop()
        pending += mapped.fields
        field = current.get(mapped.field_id) if mapped.field_id is not None else None
        if field is not None and set(mapped.names) != {field.name}:
            others = sorted(set(mapped.names) - {field.name})
            raise BloomskipError(
                f"{uri}: the table's name mapping reads the nested Iceberg field "
                f"{field.name!r} from files that name it {others[0]!r}; bloomskip reads "
                "nested fields by name (nested name-mapping aliases are not supported)"
            )
    return {
        name: mapped.field_id
        for mapped in mapping
        if mapped.field_id is not None
        for name in mapped.names
    }


def _history(table) -> FieldHistory:
    """What field id each top-level column name meant, per snapshot (one that names a schema
    the metadata still holds) and over every schema."""
    by_schema = {
        schema.schema_id: {field.name: field.field_id for field in schema.fields}
        for schema in table.metadata.schemas
    }
    ever: dict[str, set[int]] = {}
    for columns in by_schema.values():
        for name, field_id in columns.items():
            ever.setdefault(name, set()).add(field_id)
    at = {
        snapshot.snapshot_id: by_schema[snapshot.schema_id]
        for snapshot in table.metadata.snapshots
        if snapshot.schema_id in by_schema
    }
    return FieldHistory(at, {name: frozenset(ids) for name, ids in ever.items()})


def _arrow_schema(schema, uri: str) -> pa.Schema:
    """The snapshot's schema in the Arrow types pyiceberg's own reader returns (``string``,
    ``binary``, ``list``: the types Parquet files decode to; ``schema_to_pyarrow`` says
    ``large_string``, ``large_binary``, ``large_list``)."""
    import pyarrow as pa
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    try:
        arrow = schema_to_pyarrow(schema, include_field_ids=False)
    except (TypeError, ValueError, NotImplementedError) as exc:
        raise BloomskipError(
            f"{uri}: the Iceberg schema has no Arrow form: {one_line(exc)}"
        ) from exc
    return pa.schema([field.with_type(_small(field.type)) for field in arrow])


def _small(arrow_type):
    import pyarrow as pa

    if pa.types.is_large_string(arrow_type):
        return pa.string()
    if pa.types.is_large_binary(arrow_type):
        return pa.binary()
    if pa.types.is_large_list(arrow_type) or pa.types.is_list(arrow_type):
        value = arrow_type.value_field
        return pa.list_(value.with_type(_small(value.type)))
    if pa.types.is_map(arrow_type):
        key, item = arrow_type.key_field, arrow_type.item_field
        return pa.map_(key.with_type(_small(key.type)), item.with_type(_small(item.type)))
    if pa.types.is_struct(arrow_type):
        return pa.struct([field.with_type(_small(field.type)) for field in arrow_type])
    return arrow_type


def _plan(table, uri: str, snapshot_id: int, row_filter=None) -> list:
    """pyiceberg's file plan of the snapshot (its FileScanTasks)."""
    from pyiceberg.expressions import AlwaysTrue

    scan = table.scan(
        row_filter=row_filter if row_filter is not None else AlwaysTrue(), snapshot_id=snapshot_id
    )
    try:
        return list(scan.plan_files())
    except ValueError as exc:
        if "equality delete" in str(exc).lower():
            raise BloomskipError(
                f"{uri}: snapshot {snapshot_id} has equality delete files, which bloomskip "
                "cannot apply (equality deletes are not supported)"
            ) from exc
        raise StorageError(
            f"{uri}: cannot read the manifests of snapshot {snapshot_id}: {one_line(exc)}"
        ) from exc
    except (OSError, EOFError) as exc:
        raise StorageError(
            f"{uri}: cannot read the manifests of snapshot {snapshot_id}: {one_line(exc)}"
        ) from exc


def _files(
    table, uri: str, location: str, tasks: list, field_ids: FieldIds
) -> tuple[TableFile, ...]:
    from pyiceberg.manifest import DataFileContent, FileFormat

    for task in tasks:
        data = task.file
        if data.file_format != FileFormat.PARQUET:
            raise BloomskipError(
                f"{uri}: the data file {data.file_path} is {data.file_format.value}; bloomskip "
                "reads Parquet data files only"
            )
        for delete in task.delete_files:
            if delete.content == DataFileContent.EQUALITY_DELETES:
                raise BloomskipError(
                    f"{uri}: the data file {data.file_path} has equality deletes "
                    f"({delete.file_path}), which bloomskip cannot apply (equality deletes "
                    "are not supported)"
                )
            if delete.file_format == FileFormat.PUFFIN:
                raise BloomskipError(
                    f"{uri}: the data file {data.file_path} has a deletion vector "
                    f"({delete.file_path}), which bloomskip cannot apply (Iceberg v3 deletion "
                    "vectors are not supported)"
                )
            if delete.file_format != FileFormat.PARQUET:
                raise BloomskipError(
                    f"{uri}: the position delete file {delete.file_path} is "
                    f"{delete.file_format.value}; bloomskip reads Parquet delete files only"
                )
    positions = _delete_positions(table, uri, {d for task in tasks for d in task.delete_files})
    files = []
    for task in tasks:
        data = task.file
        deleted = [positions[d.file_path].get(data.file_path) for d in task.delete_files]
        files.append(
            TableFile(
                key=_key(data.file_path, location, uri),
                size=int(data.file_size_in_bytes),
                records=None if data.record_count is None else int(data.record_count),
                partition={},
                deleted=_union([part for part in deleted if part is not None]),
                field_ids=field_ids,
            )
        )
    files.sort(key=lambda item: item.key)
    return tuple(files)


def _key(path: str, location: str, uri: str) -> str:
    text = _plain(path)
    prefix = location + "/"
    if not text.startswith(prefix) or len(text) == len(prefix):
        raise BloomskipError(
            f"{uri}: the data file {path} is outside the table's location {location}; "
            "bloomskip indexes files under the table's location only"
        )
    return text[len(prefix) :]


def _delete_positions(table, uri: str, deletes: Iterable) -> dict[str, dict[str, np.ndarray]]:
    """Per position-delete file, the positions it deletes in each data file it names."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    found: dict[str, dict[str, np.ndarray]] = {}
    for delete in deletes:
        try:
            with table.io.new_input(delete.file_path).open() as stream:
                rows = pq.read_table(stream, columns=["file_path", "pos"])
        except (OSError, ValueError, KeyError, pa.ArrowException) as exc:
            raise StorageError(
                f"{uri}: cannot read the position delete file {delete.file_path}: {one_line(exc)}"
            ) from exc
        if rows.column("pos").null_count or rows.column("file_path").null_count:
            raise BloomskipError(
                f"{uri}: the position delete file {delete.file_path} has NULL file_path or pos"
            )
        grouped = rows.group_by("file_path").aggregate([("pos", "list")])
        paths = grouped.column("file_path").to_pylist()
        lists = grouped.column("pos_list").combine_chunks()
        offsets = lists.offsets.to_numpy()
        values = lists.values.to_numpy(zero_copy_only=False).astype(np.int64)
        found[delete.file_path] = {
            path: values[offsets[number] : offsets[number + 1]] for number, path in enumerate(paths)
        }
    return found


def _union(parts: list) -> np.ndarray | None:
    import numpy as np

    if not parts:
        return None
    return np.unique(np.concatenate(parts)).astype(np.int64)


# -- the table's own pruning ----------------------------------------------------------------


def _summaries_hold(table, uri: str, snapshot) -> bool:
    """Whether the partition summaries of the snapshot's manifest list can be believed.

    A summary without bounds that has no NULL and no NaN says its manifest holds no row,
    which a manifest with files contradicts. ClickHouse 26.9 writes such summaries for its
    partitioned tables; pyiceberg (like Iceberg's Java reader) then skips those manifests,
    so pruning by them would lose rows: such a table's own pruning is not used.
    """
    try:
        manifests = snapshot.manifests(table.io)
    except (OSError, ValueError, EOFError) as exc:
        raise StorageError(
            f"{uri}: cannot read the manifest list of snapshot {snapshot.snapshot_id}: "
            f"{one_line(exc)}"
        ) from exc
    for manifest in manifests:
        holds = (manifest.added_files_count or 0) + (manifest.existing_files_count or 0)
        for summary in manifest.partitions or ():
            empty = summary.lower_bound is None and summary.upper_bound is None
            if holds and empty and not summary.contains_null and not summary.contains_nan:
                return False
    return True


def _keep_files(
    table,
    uri: str,
    location: str,
    snapshot_id: int,
    read_as,
    text: str,
    everything: frozenset[str],
) -> frozenset[str]:
    """The keys of the files pyiceberg's planning keeps for ``text`` (partition values, then
    column bounds); every file when the text cannot be used exactly.

    ``text`` names the columns of the snapshot's schema, ``read_as``; pyiceberg's planning
    binds names with the table's current schema, whatever the snapshot.
    """
    from pyiceberg.expressions.visitors import bind

    expression = _parse(table, text, read_as)
    if expression is None:
        return everything
    try:
        # Bound here first: pyiceberg binds lazily, inside its planning, where a ValueError
        # may also mean a manifest it cannot read.
        bind(table.metadata.schema(), expression, case_sensitive=True)
    except (ValueError, TypeError, RecursionError):
        # A literal pyiceberg cannot convert to its column's type, or an expression nested
        # too deeply for its (recursive) evaluators, prunes nothing.
        return everything
    tasks = _plan(table, uri, snapshot_id, expression)
    return frozenset(_key(task.file.file_path, location, uri) for task in tasks)


def _parse(table, text: str, read_as):
    """pyiceberg's expression for ``text``, or None when it might not say what ``text`` says.

    pyiceberg's parser (pyparsing) expands a tab to spaces, even inside a string literal: a
    text holding a control character is not handed to it. (A backslash in a string literal
    only makes some texts fail to parse, which prunes nothing.) ``text`` names the columns of
    ``read_as`` (the snapshot's schema).
    """
    from pyiceberg.expressions.parser import parse
    from pyparsing import ParseBaseException

    if any(ord(character) < 32 for character in text):
        return None
    try:
        expression = parse(text)
        exact = _exact(expression, table.metadata.schema(), read_as)
    except (ParseBaseException, ValueError, RecursionError):
        return None
    return expression if exact else None


def _exact(expression, schema, read_as) -> bool:
    """Whether pyiceberg converts every literal of ``expression`` exactly to its column's type,
    each column named as in ``read_as`` being the same field in ``schema`` (the table's current
    schema, which pyiceberg binds with).

    Where it does not, its pruning may drop files holding matching rows: it truncates 20.5 to
    20 for an integer column (so ``x < 20.5`` would lose the files holding 20), parses a
    decimal literal through a binary float, and compares a ``float`` column's bounds with a
    literal rounded to 32 bits. Those expressions are not used (nor any of a type not listed),
    nor one naming a column renamed (or dropped) since the snapshot.
    """
    from pyiceberg import types
    from pyiceberg.expressions import AlwaysFalse, AlwaysTrue, And, Not, Or, UnboundPredicate
    from pyiceberg.expressions.literals import (
        BooleanLiteral,
        DecimalLiteral,
        LongLiteral,
        StringLiteral,
    )

    exact = {
        types.IntegerType: (LongLiteral,),
        types.LongType: (LongLiteral,),
        types.DoubleType: (LongLiteral, DecimalLiteral),
        types.DecimalType: (LongLiteral,),
        types.StringType: (StringLiteral,),
        types.BooleanType: (BooleanLiteral,),
        types.DateType: (StringLiteral,),
        types.TimestampType: (StringLiteral,),
        types.TimestamptzType: (StringLiteral,),
    }
    pending = [expression]
    while pending:
        node = pending.pop()
        if isinstance(node, And | Or):
            pending += [node.left, node.right]
        elif isinstance(node, Not):
            pending.append(node.child)
        elif isinstance(node, UnboundPredicate):
            try:
                field = schema.find_field(node.term.name, case_sensitive=True)
                named = read_as.find_field(node.term.name, case_sensitive=True)
            except ValueError:
                return False
            if named.field_id != field.field_id:
                return False
            if hasattr(node, "literals"):
                literals = list(node.literals)
            elif hasattr(node, "literal"):
                literals = [node.literal]
            else:
                continue  # IS [NOT] NULL, IS [NOT] NAN: no literal to convert
            allowed = exact.get(type(field.field_type), ())
            if not all(isinstance(item, allowed) for item in literals):
                return False
            if isinstance(field.field_type, types.DoubleType) and any(
                isinstance(item, LongLiteral) and abs(item.value) > 2**53 for item in literals
            ):
                return False  # rounded to a double, the bound would not be the literal
        elif not isinstance(node, AlwaysTrue | AlwaysFalse):
            return False
    return True
