"""``bloomskip clickhouse …``: the command group, and ``simulate``'s parser and output.

``simulate DATA --index "DDL" [--index ...] [--index-granularity 8192] [--where PRED ...]
[--where-file FILE ...] [--emit DIR] [--codec LZ4|NONE] [--column-type col=Type ...] [--jobs N]
[--json]``

DATA is Parquet, Arrow IPC (file or stream) or CSV; :func:`bloomskip.clickhouse.simulate.
simulate_file` does the work. ``--json`` prints ``{"rows", "data_granules", "indexes": [{"name",
"type", "definition", "bytes", "compressed_bytes", "bits_per_row", "mean_fill_ratio",
"granules_total", "warnings", "predicates": [{"where", "granules_selected", "rows_skipped" (a
row count), "rows_skipped_fraction", "useful"[, "clickhouse_granules_selected"]}]}]}`` (the
last where bloomskip prunes and ClickHouse does not: hasAnyTokens / hasAllTokens). An index no
predicate can ever use (a text index over IPv6, say) is reported with a warning on stderr.
``inspect`` and ``explain`` are declared in :mod:`bloomskip.clickhouse.part_cli`.

Cheap to import: the command imports the machinery it needs when it runs.

Example:
    $ bloomskip clickhouse simulate logs.parquet --index "msg TYPE tokenbf_v1(10240, 3, 0)" \\
          --index "msg TYPE ngrambf_v1(3, 10240, 3, 0)" --where "hasToken(msg, 'timeout')"
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from bloomskip._cli import EXIT_OK, positive_int, print_json, warn, where_options, where_text

# Cheap: the library module imports pyarrow and the index machinery only when it runs.
from bloomskip.clickhouse.simulate import (
    DEFAULT_INDEX_GRANULARITY,
    PredicateReport,
    Simulation,
    simulate_file,
)
from bloomskip.errors import SimulateError


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``clickhouse`` command group: ``simulate``, ``inspect`` and ``explain``.

    Args:
        subparsers: The top-level ``bloomskip`` sub-command collection.

    Example:
        >>> parser = argparse.ArgumentParser(prog="bloomskip")
        >>> register(parser.add_subparsers())
        >>> parser.parse_args(["clickhouse", "simulate", "d.csv", "--index", "v TYPE set"]).codec
        'LZ4'
    """
    from bloomskip.clickhouse import part_cli

    group = subparsers.add_parser(
        "clickhouse",
        help="ClickHouse bloom_filter / ngrambf_v1 / tokenbf_v1 / sparse_grams skip indexes",
    )
    commands = group.add_subparsers(dest="clickhouse_command", required=True)
    _register_simulate(commands)
    part_cli.register(commands)


def _register_simulate(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "simulate",
        help="build candidate skip indexes over a data file and compare their pruning",
        description="Build ClickHouse bloom_filter / ngrambf_v1 / tokenbf_v1 / sparse_grams "
        "indexes over a Parquet, Arrow IPC or CSV file exactly as ClickHouse would, and report "
        "size and the granules each WHERE predicate would read.",
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
        type=positive_int,
        default=DEFAULT_INDEX_GRANULARITY,
        metavar="ROWS",
        help="rows per data granule (MergeTree index_granularity, default %(default)s)",
    )
    where_options(parser, repeatable=True)
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
    parser.add_argument(
        "--jobs",
        type=positive_int,
        metavar="N",
        help="threads reading the data and building the granules (default: one per CPU); the "
        "granules are the same bytes for any N",
    )
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    parser.set_defaults(func=simulate_command)


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
    predicates = [
        where_text(value, stdin_used="-" in args.predicates[:number])
        for number, value in enumerate(args.predicates)
    ]
    simulation = simulate_file(
        args.data,
        args.indexes,
        predicates,
        index_granularity=args.index_granularity,
        column_types=_parse_column_types(args.column_types),
        emit=args.emit,
        codec=args.codec,
        progress=None,
        jobs=args.jobs,
    )
    for report in simulation.indexes:
        for warning in report.warnings:
            warn(f"index {report.name!r}: {warning}")
    if args.json:
        print_json(_as_json(simulation))
    else:
        _print_table(simulation, predicates)
    return EXIT_OK


def _parse_column_types(items: list[str]) -> dict[str, str]:
    types = {}
    for item in items:
        name, sep, type_name = item.partition("=")
        if not sep or not name.strip() or not type_name.strip():
            raise SimulateError(f"--column-type wants COL=TYPE, got {item!r}")
        types[name.strip()] = type_name.strip()
    return types


def _as_json(simulation: Simulation) -> dict[str, Any]:
    return {
        "rows": simulation.rows,
        "data_granules": simulation.granules,
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
                "predicates": [_predicate_json(p) for p in r.predicates],
            }
            for r in simulation.indexes
        ],
    }


def _predicate_json(p: PredicateReport) -> dict:
    """One predicate's JSON; ``clickhouse_granules_selected`` only where ClickHouse reads more
    granules than bloomskip keeps."""
    entry = {
        "where": p.where,
        "granules_selected": p.granules_selected,
        "rows_skipped": p.rows_skipped,
        "rows_skipped_fraction": p.rows_skipped_fraction,
        "useful": p.useful,
    }
    if p.clickhouse_granules_selected is not None:
        entry["clickhouse_granules_selected"] = p.clickhouse_granules_selected
    return entry


def _print_table(simulation: Simulation, predicates: list[str]) -> None:
    """Candidate indexes side by side: one line per index, one column per predicate."""
    print(f"{simulation.rows} rows in {simulation.granules} data granules")
    header = ["index", "type", "bytes", "bits/row", "fill"]
    header += [f"[{n}] granules (skipped rows)" for n in range(1, len(predicates) + 1)]
    lines = [header]
    for r in simulation.indexes:
        line = [
            r.name,
            r.type,
            str(r.bytes),
            f"{r.bits_per_row:.2f}",
            f"{r.mean_fill_ratio:.3f}",
        ]
        for p in r.predicates:
            note = "" if p.useful else " n/a"
            if p.clickhouse_granules_selected is not None:
                note += " *"
            share = f"{p.rows_skipped_fraction:.1%}"
            line.append(f"{p.granules_selected}/{r.granules_total} ({share}){note}")
        lines.append(line)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for line in lines:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)))
    for n, where in enumerate(predicates, 1):
        print(f"[{n}] {where}")
    if any(not p.useful for r in simulation.indexes for p in r.predicates):
        print("n/a: the index cannot evaluate any part of that predicate (reads every granule)")
    if any(
        p.clickhouse_granules_selected is not None for r in simulation.indexes for p in r.predicates
    ):
        print(
            "*: bloomskip's pruning; ClickHouse uses no index for hasAnyTokens / hasAllTokens "
            "and reads every granule the rest of the predicate does not rule out (--json: "
            "clickhouse_granules_selected)"
        )
    sys.stdout.flush()
