"""``bloomskip clickhouse simulate``: try candidate skip indexes on a data file before ALTER TABLE.

``simulate DATA --index "DDL" [--index ...] [--index-granularity 8192] [--where PRED ...]
[--emit DIR] [--codec LZ4|NONE] [--column-type col=Type ...] [--json]``

DATA is Parquet, Arrow IPC (file or stream) or CSV. Every ``--index`` (ClickHouse's own
``INDEX name expr TYPE ... GRANULARITY g`` clause; the ``INDEX name`` prefix and ``GRANULARITY``
may be left out) is built exactly as ClickHouse builds it for a part holding these rows in this
order, cut into data granules of ``--index-granularity`` rows. The report gives, per index, its
size, bits per row and mean fill ratio, and per ``--where`` predicate the data granules selected
out of the total (as ``EXPLAIN indexes = 1`` counts them) and the share of rows skipped.

``--emit DIR`` writes ``skp_idx_<name>.idx`` and ``skp_idx_<name>.mrk2`` in ClickHouse's layout.
``--json`` prints ``{"rows", "data_granules", "indexes": [{"name", "type", "definition", "bytes",
"compressed_bytes", "bits_per_row", "mean_fill_ratio", "granules_total", "warnings", "predicates":
[{"where", "granules_selected", "rows_skipped", "useful"}]}]}``. An index no predicate can ever
use (a text index over IPv6, say) is reported with a warning on stderr.

Example:
    $ bloomskip clickhouse simulate logs.parquet --index "msg TYPE tokenbf_v1(10240, 3, 0)" \\
          --index "msg TYPE ngrambf_v1(3, 10240, 3, 0)" --where "hasToken(msg, 'timeout')"
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bloomskip.errors import SimulateError

if TYPE_CHECKING:
    from collections.abc import Callable

    import pyarrow as pa

    from bloomskip.clickhouse.ddl import IndexDefinition

__all__ = ["IndexReport", "PredicateReport", "SimulateError", "register", "simulate"]

#: ClickHouse's default ``index_granularity`` (rows per data granule).
DEFAULT_INDEX_GRANULARITY = 8192


@dataclass
class PredicateReport:
    """What one index does for one predicate.

    Attributes:
        where: The predicate.
        granules_selected: Data granules ClickHouse would read after this index.
        rows_skipped: Share of rows in the skipped granules (0..1).
        useful: Whether the index can evaluate any part of the predicate at all.
    """

    where: str
    granules_selected: int
    rows_skipped: float
    useful: bool


@dataclass
class IndexReport:
    """One candidate index built over the data.

    Attributes:
        name, type, definition: The index (``definition`` is its INDEX clause).
        bytes: Size of the decompressed ``.idx`` stream.
        compressed_bytes: Size of the ``.idx`` file with the chosen codec.
        bits_per_row: ``8 * bytes / rows``.
        mean_fill_ratio: Mean share of set bits over granules and index columns.
        granules_total: Data granules of the part.
        predicates: One report per ``--where``.
        warnings: Why no predicate can ever use the index, when that is so (printed to stderr).
    """

    name: str
    type: str
    definition: str
    bytes: int
    compressed_bytes: int
    bits_per_row: float
    mean_fill_ratio: float
    granules_total: int
    predicates: list[PredicateReport] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``simulate`` sub-command to the ``bloomskip clickhouse`` group.

    Args:
        subparsers: The ``bloomskip clickhouse`` sub-command group.
    """
    parser = subparsers.add_parser(
        "simulate",
        help="build candidate skip indexes over a data file and compare their pruning",
        description="Build ClickHouse bloom_filter / ngrambf_v1 / tokenbf_v1 indexes over a "
        "Parquet, Arrow IPC or CSV file exactly as ClickHouse would, and report size and the "
        "granules each WHERE predicate would read.",
    )
    parser.add_argument("data", metavar="DATA", help="Parquet, Arrow IPC (.arrow/.feather) or CSV")
    parser.add_argument(
        "--index",
        dest="indexes",
        action="append",
        required=True,
        metavar="DDL",
        help="an index clause: [INDEX name] expr TYPE type(args) [GRANULARITY g]; repeatable",
    )
    parser.add_argument(
        "--index-granularity",
        type=_positive_int,
        default=DEFAULT_INDEX_GRANULARITY,
        metavar="ROWS",
        help="rows per data granule (MergeTree index_granularity, default %(default)s)",
    )
    parser.add_argument(
        "--where",
        dest="predicates",
        action="append",
        default=[],
        metavar="PRED",
        help="a WHERE predicate (ClickHouse SQL) to evaluate; repeatable",
    )
    parser.add_argument(
        "--column-type",
        dest="column_types",
        action="append",
        default=[],
        metavar="COL=TYPE",
        help="ClickHouse type of a column (default: derived from the Arrow type); repeatable",
    )
    parser.add_argument("--emit", metavar="DIR", help="write skp_idx_<name>.idx/.mrk2 here")
    parser.add_argument(
        "--codec",
        choices=("LZ4", "NONE"),
        default="LZ4",
        help="codec of the emitted .idx files (default %(default)s)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    parser.set_defaults(func=simulate_command)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def simulate_command(args: argparse.Namespace) -> int:
    """Run ``bloomskip clickhouse simulate``.

    Args:
        args: The parsed command line.

    Returns:
        The exit status (0).

    Raises:
        SimulateError: Unreadable data or a bad option.
        IndexDefinitionError: An index ClickHouse would reject.
        ConditionError: A predicate that is not valid SQL.
    """
    from bloomskip.clickhouse.ddl import parse_index_definition

    definitions = [parse_index_definition(text) for text in args.indexes]
    names = [d.name for d in definitions]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise SimulateError(f"index names must differ; repeated: {', '.join(duplicates)}")
    columns = sorted({c for d in definitions for c in d.source_columns})
    column_types = _parse_column_types(args.column_types)
    unknown = sorted(set(column_types) - set(columns))
    if unknown:
        raise SimulateError(
            f"--column-type names {', '.join(map(repr, unknown))}, which no --index reads"
        )
    table = read_table(args.data, columns)
    reports = simulate(
        table,
        definitions,
        args.predicates,
        index_granularity=args.index_granularity,
        column_types=column_types,
        emit=Path(args.emit) if args.emit else None,
        codec=args.codec,
    )
    for report in reports:
        for warning in report.warnings:
            print(f"bloomskip: warning: index {report.name!r}: {warning}", file=sys.stderr)
    if args.json:
        print(json.dumps(_as_json(table.num_rows, reports)))
    else:
        _print_table(table.num_rows, reports, args.predicates)
    return 0


def _parse_column_types(items: list[str]) -> dict[str, str]:
    types = {}
    for item in items:
        name, sep, type_name = item.partition("=")
        if not sep or not name.strip() or not type_name.strip():
            raise SimulateError(f"--column-type wants COL=TYPE, got {item!r}")
        types[name.strip()] = type_name.strip()
    return types


def read_table(path: str, columns: list[str]) -> pa.Table:
    """Read the columns an index needs from a Parquet, Arrow IPC or CSV file.

    Args:
        path: The file; its format comes from the extension (.parquet/.pq, .arrow/.feather/.ipc,
            .csv), or from its first bytes when the extension says nothing.
        columns: Columns to read.

    Returns:
        A ``pyarrow.Table`` with those columns.

    Raises:
        SimulateError: The file is missing, unreadable, or lacks a column.
    """
    import pyarrow as pa

    source = Path(path)
    if not source.is_file():
        raise SimulateError(f"{path}: no such file")
    try:
        file_columns, read = _open_any(source)
        missing = [c for c in columns if c not in file_columns]
        if missing:
            raise SimulateError(
                f"{path}: no column {', '.join(map(repr, missing))} "
                f"(columns: {', '.join(file_columns)})"
            )
        return read(columns)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise SimulateError(f"{path}: cannot read as Parquet, Arrow IPC or CSV: {exc}") from exc


def _open_any(source: Path) -> tuple[list[str], Callable[[list[str]], pa.Table]]:
    """The file's column names (from its header), and a reader of the columns asked for.

    The names come first so that a missing column is reported with the ones the file has.
    """
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq

    suffix = source.suffix.lower()
    with source.open("rb") as handle:
        magic = handle.read(6)
    if suffix in (".parquet", ".pq") or magic[:4] == b"PAR1":
        return pq.read_schema(source).names, lambda columns: pq.read_table(source, columns=columns)
    if suffix in (".arrow", ".feather", ".ipc", ".arrows") or magic == b"ARROW1":
        try:
            with pa.memory_map(str(source)) as stream:
                table = ipc.open_file(stream).read_all()
        except pa.ArrowInvalid:
            with pa.memory_map(str(source)) as stream:
                table = ipc.open_stream(stream).read_all()
        return table.column_names, table.select
    with pacsv.open_csv(source) as reader:  # parses the header and the first block only
        names = reader.schema.names
    return names, lambda columns: pacsv.read_csv(
        source, convert_options=pacsv.ConvertOptions(include_columns=columns)
    )


def simulate(
    table: pa.Table,
    definitions: list[IndexDefinition],
    predicates: list[str],
    *,
    index_granularity: int = DEFAULT_INDEX_GRANULARITY,
    column_types: dict[str, str] | None = None,
    emit: Path | None = None,
    codec: str = "LZ4",
) -> list[IndexReport]:
    """Build each index over ``table`` and evaluate each predicate against it.

    Args:
        table: The rows, in part order.
        definitions: :class:`~bloomskip.clickhouse.ddl.IndexDefinition` objects.
        predicates: WHERE predicates.
        index_granularity: Rows per data granule.
        column_types: ClickHouse type per column, overriding the Arrow-derived default.
        emit: Directory to write ``skp_idx_<name>.idx`` / ``.mrk2`` into, or None.
        codec: ``"LZ4"`` or ``"NONE"`` for the emitted streams.

    Returns:
        One report per index, in order.

    Raises:
        SimulateError: An unusable column type.
        ConditionError: A predicate that is not valid SQL.

    Example:
        >>> import pyarrow as pa
        >>> from bloomskip.clickhouse.ddl import parse_index_definition
        >>> d = parse_index_definition("v TYPE bloom_filter")
        >>> r = simulate(pa.table({"v": list(range(100))}), [d], ["v = 7"], index_granularity=10)
        >>> r[0].predicates[0].granules_selected
        1
    """
    import numpy as np
    from tqdm import tqdm

    from bloomskip.clickhouse.compression import write_compressed_stream
    from bloomskip.clickhouse.condition import compile_condition, index_never_used_reason
    from bloomskip.clickhouse.index import SkipIndex
    from bloomskip.clickhouse.marks import write_skip_index_files
    from bloomskip.clickhouse.types import clickhouse_type_for

    rows = table.num_rows
    full, rest = divmod(rows, index_granularity)
    granule_rows = np.array([index_granularity] * full + ([rest] if rest else []), np.int64)
    types = {}
    for name in table.column_names:
        types[name] = (column_types or {}).get(name) or clickhouse_type_for(
            table.schema.field(name).type
        )
    if emit is not None:
        try:
            emit.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SimulateError(f"--emit {emit}: cannot create the directory: {exc}") from exc
    data_row_bounds = np.concatenate(([0], np.cumsum(granule_rows)))
    reports = []
    for definition in tqdm(definitions, desc="building indexes", unit="index", disable=None):
        try:
            index = SkipIndex.build(definition, table, granule_rows, types)
        except ValueError as exc:
            # Type checks already name the index; other errors (data, Arrow types) do not.
            prefix = f"index {definition.name!r}: "
            message = str(exc) if str(exc).startswith(prefix) else prefix + str(exc)
            raise SimulateError(message) from exc
        granules = [granule.to_bytes() for granule in index]
        uncompressed_bytes = sum(map(len, granules))
        if emit is None:
            compressed_bytes = len(write_compressed_stream(granules, codec)[0])
        else:
            try:
                idx_path, _ = write_skip_index_files(emit, definition.name, granules, codec=codec)
            except OSError as exc:
                raise SimulateError(f"--emit {emit}: cannot write: {exc}") from exc
            compressed_bytes = idx_path.stat().st_size
        statistics = index.granule_statistics()
        fill = statistics.column("fill_ratio").to_numpy()
        report = IndexReport(
            name=definition.name,
            type=definition.type,
            definition=definition.to_sql(),
            bytes=uncompressed_bytes,
            compressed_bytes=compressed_bytes,
            bits_per_row=8 * uncompressed_bytes / rows if rows else 0.0,
            mean_fill_ratio=float(fill.mean()) if len(fill) else 0.0,
            granules_total=len(granule_rows),
        )
        for column_type in index.index_column_types or ():
            reason = index_never_used_reason(definition.type, str(column_type))
            if reason is not None and reason not in report.warnings:
                report.warnings.append(reason)
        for where in predicates:
            condition = compile_condition(where, definition, types)
            selected = condition.select(index)
            rows_read = int((data_row_bounds[selected + 1] - data_row_bounds[selected]).sum())
            report.predicates.append(
                PredicateReport(
                    where=where,
                    granules_selected=len(selected),
                    rows_skipped=(rows - rows_read) / rows if rows else 0.0,
                    useful=condition.useful,
                )
            )
        reports.append(report)
    return reports


def _as_json(rows: int, reports: list[IndexReport]) -> dict[str, Any]:
    granules = reports[0].granules_total if reports else 0
    return {
        "rows": rows,
        "data_granules": granules,
        "indexes": [
            {
                "name": r.name,
                "type": r.type,
                "definition": r.definition,
                "bytes": r.bytes,
                "compressed_bytes": r.compressed_bytes,
                "bits_per_row": r.bits_per_row,
                "mean_fill_ratio": r.mean_fill_ratio,
                "granules_total": r.granules_total,
                "warnings": r.warnings,
                "predicates": [
                    {
                        "where": p.where,
                        "granules_selected": p.granules_selected,
                        "rows_skipped": p.rows_skipped,
                        "useful": p.useful,
                    }
                    for p in r.predicates
                ],
            }
            for r in reports
        ],
    }


def _print_table(rows: int, reports: list[IndexReport], predicates: list[str]) -> None:
    """Candidate indexes side by side: one line per index, one column per predicate."""
    granules = reports[0].granules_total if reports else 0
    print(f"{rows} rows in {granules} data granules")
    header = ["index", "type", "bytes", "bits/row", "fill"]
    header += [f"[{n}] granules (skipped rows)" for n in range(1, len(predicates) + 1)]
    lines = [header]
    for r in reports:
        line = [
            r.name,
            r.type,
            str(r.bytes),
            f"{r.bits_per_row:.2f}",
            f"{r.mean_fill_ratio:.3f}",
        ]
        for p in r.predicates:
            note = "" if p.useful else " n/a"
            line.append(f"{p.granules_selected}/{r.granules_total} ({p.rows_skipped:.1%}){note}")
        lines.append(line)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for line in lines:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)))
    for n, where in enumerate(predicates, 1):
        print(f"[{n}] {where}")
    if any(not p.useful for r in reports for p in r.predicates):
        print("n/a: the index cannot evaluate any part of that predicate (reads every granule)")
    sys.stdout.flush()
