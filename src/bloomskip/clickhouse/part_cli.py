"""``bloomskip clickhouse inspect`` and ``bloomskip clickhouse explain``: a real part, offline.

``inspect PART_DIR --table-sql FILE [--index NAME] [--summary | --granules] [--json]`` reports,
per skip index, its type and parameters, granule count, bytes on disk and uncompressed, and per
granule the rows covered, bits set, fill ratio and estimated false-positive rate, then flags
saturated granules (estimated false-positive rate at or above ``--saturation-fpr``) with
parameters that would fix them. A part with more than :data:`SCREENFUL` granule lines gets the
summary (per index totals and the saturated granules only) unless ``--granules`` asks for all.

``explain PART_DIR --table-sql FILE --where PRED [--index NAME] [--json]`` evaluates each index
alone, as ``EXPLAIN indexes = 1`` counts it: data granules (marks) kept, their numbers and rows.
``--where -`` reads the predicate from standard input, ``--where-file FILE`` from a file.
JSON: ``{"indexes": [{"name", "type", "granules_total", "granules_selected", "selected",
"rows_selected"}]}``.

Example:
    $ bloomskip clickhouse explain all_1_1_0 --table-sql t.sql --where "v = 5" --json
    {"indexes": [{"name": "i_v", "type": "bloom_filter", "granules_total": 24, ...}]}
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import TYPE_CHECKING, Any

from bloomskip._cli import EXIT_OK, print_json, probability, where_options, where_text
from bloomskip.errors import BloomskipError, PartCommandError

if TYPE_CHECKING:  # kept out of the import path: registering the commands must stay cheap
    from bloomskip.clickhouse.ddl import IndexDefinition
    from bloomskip.clickhouse.part import Part

#: A granule whose estimated false-positive rate reaches this is flagged as saturated.
DEFAULT_SATURATION_FPR = 0.5
#: The false-positive rate the recommended parameters aim at (ClickHouse's bloom_filter default).
DEFAULT_TARGET_FPR = 0.025
#: ``inspect`` shows the summary by default when the part has more granule lines than this.
SCREENFUL = 40
#: The summary's text lists at most this many saturated granules per index (JSON lists all).
SHOWN_SATURATED = 20


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``inspect`` and ``explain`` sub-commands.

    Args:
        subparsers: The ``bloomskip clickhouse`` sub-command group.
    """
    inspect = subparsers.add_parser(
        "inspect",
        help="per-granule fill and false-positive statistics of a part's Bloom-filter indexes",
        description="Read a MergeTree part's bloom_filter / ngrambf_v1 / tokenbf_v1 / sparse_grams "
        "indexes and "
        "report how full each granule's filter is.",
    )
    _add_part_arguments(inspect)
    inspect.add_argument(
        "--saturation-fpr",
        type=probability,
        default=DEFAULT_SATURATION_FPR,
        help="flag granules whose estimated false-positive rate reaches this (default %(default)s)",
    )
    inspect.add_argument(
        "--target-fpr",
        type=probability,
        default=DEFAULT_TARGET_FPR,
        help="false-positive rate the suggested parameters aim at (default %(default)s)",
    )
    view = inspect.add_mutually_exclusive_group()
    view.add_argument(
        "--summary",
        dest="view",
        action="store_const",
        const="summary",
        help="per index totals and the saturated granules only (the default when the part has "
        f"more than {SCREENFUL} granule lines)",
    )
    view.add_argument(
        "--granules",
        dest="view",
        action="store_const",
        const="granules",
        help=f"every granule of every index (the default up to {SCREENFUL} granule lines)",
    )
    inspect.add_argument(
        "--plot",
        metavar="FILE",
        help="also draw a per-granule fill heatmap, saturated granules marked (PNG, SVG or PDF "
        "by the name; needs bloomskip[plot])",
    )
    inspect.set_defaults(func=inspect_command, view=None)

    explain = subparsers.add_parser(
        "explain",
        help="granules each skip index keeps for a WHERE predicate, as EXPLAIN indexes = 1",
        description="Evaluate a WHERE predicate against each Bloom-filter index of a part, each "
        "index alone, and list the data granules it keeps.",
    )
    _add_part_arguments(explain)
    where_options(explain)
    explain.set_defaults(func=explain_command)


def _add_part_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("part_dir", metavar="PART_DIR", help="the part directory")
    ddl = parser.add_mutually_exclusive_group(required=True)
    ddl.add_argument(
        "--table-sql",
        metavar="FILE",
        help="the table's DDL file (the ATTACH TABLE .sql of the metadata folder); - for stdin",
    )
    ddl.add_argument("--table-ddl", metavar="SQL", help="the table's CREATE TABLE text")
    parser.add_argument(
        "--index",
        action="append",
        metavar="NAME",
        help="only this index (repeatable; default: every Bloom-filter index)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")


def _open_part(args: argparse.Namespace) -> Part:
    from bloomskip.clickhouse.part import Part

    if args.table_ddl is not None:
        sql = args.table_ddl
    elif args.table_sql == "-":
        sql = sys.stdin.read()
    else:
        try:
            with open(args.table_sql, encoding="utf-8") as handle:
                sql = handle.read()
        except OSError as exc:
            raise PartCommandError(f"cannot read --table-sql {args.table_sql}: {exc}") from exc
    return Part.open(args.part_dir, sql)


def _selected_names(part: Part, requested: list[str] | None) -> list[str]:
    if not requested:
        if not part.indexes:
            raise PartCommandError(
                "the table has no bloom_filter, ngrambf_v1, tokenbf_v1 or sparse_grams index"
            )
        return list(part.indexes)
    for name in requested:
        part.definition(name)  # raises on an unknown name
    return list(dict.fromkeys(requested))


# -- explain -----------------------------------------------------------------------------------


def explain_part(part: Part, where: str, names: list[str] | None = None) -> dict[str, Any]:
    """Evaluate ``where`` against each index of ``part`` alone.

    Args:
        part: A :class:`bloomskip.clickhouse.part.Part`.
        where: The WHERE predicate (ClickHouse SQL).
        names: Index names; None for every Bloom-filter index.

    Returns:
        ``{"indexes": [{"name", "type", "granules_total", "granules_selected", "selected",
        "rows_selected"}]}`` with ``selected`` the kept data granule numbers, bloomskip's
        choice. Where it prunes and ClickHouse does not (``hasAnyTokens`` / ``hasAllTokens`` on
        a text index), an entry also has ``clickhouse_granules_selected`` and
        ``clickhouse_selected``: what ClickHouse's ``EXPLAIN indexes = 1`` keeps.

    Raises:
        PartError / FormatError: as :meth:`Part.read_index`.
        BloomskipError: a predicate the condition compiler rejects.

    Example:
        >>> explain_part(part, "v = 5")["indexes"][0]["granules_selected"]  # doctest: +SKIP
        4
    """
    import numpy as np

    from bloomskip.clickhouse.condition import check_identifiers, compile_condition

    check_identifiers(where, part.column_types)
    total = part.granule_count
    results = []
    for name in _selected_names(part, names):
        stored = part.read_index(name)
        definition = part.definition(name)
        # Not materialized in this part: ClickHouse cannot use it and reads every granule.
        selected = clickhouse_selected = np.arange(total, dtype=np.int64)
        beyond = False
        if stored is not None:
            index = stored.skip_index
            try:
                selected = np.asarray(index.select(where), dtype=np.int64)
                condition = compile_condition(where, index.definition, index.column_types)
                beyond = condition.beyond_clickhouse
                if beyond:
                    clickhouse_selected = index.select(where, as_clickhouse=True)
            except BloomskipError:
                raise
            except ValueError as exc:
                raise PartCommandError(f"index {name}: cannot evaluate {where!r}: {exc}") from exc
        entry = {
            "name": name,
            "type": definition.type,
            "granules_total": int(total),
            "granules_selected": int(len(selected)),
            "selected": selected.tolist(),
            "rows_selected": int(part.granule_rows[selected].sum()),
        }
        if beyond:
            entry["clickhouse_granules_selected"] = int(len(clickhouse_selected))
            entry["clickhouse_selected"] = clickhouse_selected.tolist()
        results.append(entry)
    return {"indexes": results}


def explain_command(args: argparse.Namespace) -> int:
    """Handler of ``bloomskip clickhouse explain``; returns the exit status."""
    # Standard input can hold the table's DDL (--table-sql -) or the WHERE, not both.
    where = where_text(args.where, stdin_used=args.table_sql == "-")
    part = _open_part(args)
    report = explain_part(part, where, args.index)
    if args.json:
        print_json(report)
        return EXIT_OK
    print(f"part {part.path} ({part.part_type}, {part.rows} rows, {part.granule_count} granules)")
    print(f"WHERE {where}")
    for entry in report["indexes"]:
        print(
            f"  {entry['name']} ({entry['type']}): {entry['granules_selected']}/"
            f"{entry['granules_total']} granules, {entry['rows_selected']} rows"
        )
        if entry["selected"]:
            print("    granules: " + _ranges(entry["selected"]))
        if "clickhouse_granules_selected" in entry:
            print(
                f"    ClickHouse itself reads {entry['clickhouse_granules_selected']}/"
                f"{entry['granules_total']} granules: it uses no index for hasAnyTokens / "
                "hasAllTokens"
            )
    return EXIT_OK


def _ranges(numbers: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2, 5"``."""
    parts = []
    start = previous = numbers[0]
    for number in [*numbers[1:], None]:
        if number is not None and number == previous + 1:
            previous = number
            continue
        parts.append(str(start) if start == previous else f"{start}-{previous}")
        if number is not None:
            start = previous = number
    return ", ".join(parts)


# -- inspect -----------------------------------------------------------------------------------


def estimate_distinct_items(bits_set: float, bit_count: float, hash_functions: int) -> float:
    """Estimate how many distinct items went into a Bloom filter from its fill.

    Swamidass & Baldi's estimator ``n = -(m / k) ln(1 - X / m)``; a completely full filter is
    treated as one bit short of full (the estimate is then a lower bound).

    Args:
        bits_set: X, bits set.
        bit_count: m, bits in the filter.
        hash_functions: k.

    Returns:
        The estimated number of distinct items.

    Example:
        >>> round(estimate_distinct_items(3935, 8192, 3), 1)
        1787.5
    """
    if bit_count <= 0 or hash_functions <= 0:
        return 0.0
    filled = min(bits_set, bit_count - 1)
    return -(bit_count / hash_functions) * math.log1p(-filled / bit_count)


def recommend_parameters(
    definition: IndexDefinition,
    distinct_items: float,
    target_fpr: float,
) -> dict[str, Any]:
    """Parameters that bring a granule holding ``distinct_items`` down to ``target_fpr``.

    Args:
        definition: The index definition.
        distinct_items: Estimated distinct items (values or tokens) per index granule and column.
        target_fpr: The false-positive rate aimed at.

    Returns:
        ``{"type_clause": "tokenbf_v1(…)", "estimated_fpr": …, "note": …}``.

    Example:
        >>> from bloomskip.clickhouse.ddl import parse_index_definition
        >>> d = parse_index_definition("s TYPE tokenbf_v1(32, 4, 1)")
        >>> recommend_parameters(d, 100, 0.025)["type_clause"]
        'tokenbf_v1(96, 5, 1)'
    """
    if definition.type == "bloom_filter":
        from bloomskip.clickhouse.sizing import bloom_filter_parameters

        bits_per_row, hashes = bloom_filter_parameters(target_fpr)
        # bloom_filter sizes every granule by its distinct count, so fill does not grow with
        # the data: only a lower fpr argument (more bits per value) lowers it.
        return {
            "type_clause": f"bloom_filter({target_fpr:g})",
            "bits_per_row": bits_per_row,
            "hash_functions": hashes,
            "estimated_fpr": (1.0 - math.exp(-hashes / bits_per_row)) ** hashes,
            "note": "bloom_filter sizes each granule by its distinct values; a lower fpr "
            "argument adds bits per value",
        }
    items = max(distinct_items, 1.0)
    bits = -items * math.log(target_fpr) / math.log(2) ** 2
    hashes = max(1, round(bits / items * math.log(2)))
    from bloomskip.clickhouse.ddl import MAX_TEXT_FILTER_BYTES

    # Past ClickHouse's size limit the suggestion must stay valid DDL; its estimate shows the rest.
    size_bytes = min(max(1, math.ceil(bits / 8)), MAX_TEXT_FILTER_BYTES)
    estimated = (1.0 - math.exp(-hashes * items / (8 * size_bytes))) ** hashes
    # The tokenizer's arguments (ngrambf_v1's n, sparse_grams' lengths) precede the filter's.
    tokenizer_arguments = "".join(f"{a}, " for a in definition.arguments[:-3])
    arguments = f"{tokenizer_arguments}{size_bytes}, {hashes}, {definition.seed}"
    note = None
    if definition.granularity > 1:
        note = (
            f"or keep the size and lower GRANULARITY from {definition.granularity}: the items per "
            "index granule shrink about in proportion"
        )
    return {
        "type_clause": f"{definition.type}({arguments})",
        "size_bytes": size_bytes,
        "hash_functions": hashes,
        "estimated_fpr": estimated,
        "note": note,
    }


def inspect_part(
    part: Part,
    names: list[str] | None = None,
    *,
    saturation_fpr: float = DEFAULT_SATURATION_FPR,
    target_fpr: float = DEFAULT_TARGET_FPR,
) -> dict[str, Any]:
    """Statistics of every (or the named) skip index of ``part``.

    Args:
        part: A :class:`bloomskip.clickhouse.part.Part`.
        names: Index names; None for every Bloom-filter index.
        saturation_fpr: Granules whose estimated false-positive rate reaches this are flagged.
        target_fpr: The false-positive rate the recommended parameters aim at.

    Returns:
        ``{"part", "part_type", "rows", "granules", "indexes": [...]}``; each index has its
        definition, sizes, a ``granules`` list (granule, rows, bit_count, bits_set, fill_ratio,
        estimated_fpr, column) and a ``summary``.

    Raises:
        PartError / FormatError: as :meth:`Part.read_index`.

    Example:
        >>> inspect_part(part)["indexes"][0]["summary"]["saturated_granules"]  # doctest: +SKIP
        []
    """
    report: dict[str, Any] = {
        "part": str(part.path),
        "part_type": part.part_type,
        "rows": int(part.rows),
        "granules": int(part.granule_count),
        "indexes": [],
    }
    for name in _selected_names(part, names):
        definition = part.definition(name)
        entry: dict[str, Any] = {
            "name": name,
            "type": definition.type,
            "expressions": list(definition.expressions),
            "granularity": definition.granularity,
            "parameters": _parameters(definition),
        }
        stored = part.read_index(name)
        if stored is None:
            entry["materialized"] = False
            report["indexes"].append(entry)
            continue
        statistics = stored.skip_index.granule_statistics().to_pylist()
        entry.update(
            {
                "materialized": True,
                "column_types": list(stored.column_types),
                "index_granules": int(stored.skip_index.index_granule_count),
                "compressed_bytes": stored.compressed_bytes,
                "uncompressed_bytes": stored.uncompressed_bytes,
                "marks_bytes": stored.marks_bytes,
                "blocks": stored.blocks,
                "codecs": list(stored.methods),
                "marks_format": stored.marks_format.extension,
                "granule_statistics": statistics,
                "summary": _summary(definition, statistics, saturation_fpr, target_fpr),
            }
        )
        report["indexes"].append(entry)
    return report


def _parameters(definition: IndexDefinition) -> dict[str, Any]:
    if definition.type == "bloom_filter":
        return {
            "false_positive_rate": definition.false_positive_rate,
            "bits_per_row": definition.bits_per_row,
            "hash_functions": definition.hash_functions,
        }
    parameters = {
        "size_bytes": definition.size_bytes,
        "hash_functions": definition.hash_functions,
        "seed": definition.seed,
    }
    if definition.type == "ngrambf_v1":
        parameters = {"ngram_size": definition.ngram_size, **parameters}
    if definition.type == "sparse_grams":
        lengths = {
            "min_ngram_length": definition.min_ngram_length,
            "max_ngram_length": definition.max_ngram_length,
        }
        if definition.min_cutoff_length is not None:
            lengths["min_cutoff_length"] = definition.min_cutoff_length
        parameters = {**lengths, **parameters}
    return parameters


def _summary(
    definition: IndexDefinition,
    statistics: list[dict[str, Any]],
    saturation_fpr: float,
    target_fpr: float,
) -> dict[str, Any]:
    fills = [row["fill_ratio"] for row in statistics]
    saturated = sorted(
        {row["granule"] for row in statistics if row["estimated_fpr"] >= saturation_fpr}
    )
    summary: dict[str, Any] = {
        "mean_fill_ratio": sum(fills) / len(fills) if fills else 0.0,
        "max_fill_ratio": max(fills, default=0.0),
        "mean_estimated_fpr": (
            sum(row["estimated_fpr"] for row in statistics) / len(statistics) if statistics else 0.0
        ),
        "max_estimated_fpr": max((row["estimated_fpr"] for row in statistics), default=0.0),
        "saturation_fpr": saturation_fpr,
        "saturated_granules": saturated,
        "recommendation": None,
    }
    if saturated:
        # Size for the fullest granule, so that every granule reaches the target.
        items = max(
            estimate_distinct_items(row["bits_set"], row["bit_count"], definition.hash_functions)
            for row in statistics
        )
        summary["estimated_items_per_granule"] = items
        summary["recommendation"] = recommend_parameters(definition, items, target_fpr)
    return summary


def summarize(report: dict[str, Any]) -> dict[str, Any]:
    """The summary view of an :func:`inspect_part` report: the saturated granules only.

    Args:
        report: From :func:`inspect_part` (not modified).

    Returns:
        A copy in which each materialized index has ``saturated_granule_statistics`` (the
        ``granule_statistics`` rows of its saturated granules) in place of
        ``granule_statistics``; the per index totals (``summary``) are unchanged, and
        ``view`` is ``"summary"``.

    Example:
        >>> summary = summarize(inspect_part(part))  # doctest: +SKIP
        >>> summary["indexes"][0]["saturated_granule_statistics"]  # doctest: +SKIP
        []
    """
    indexes = []
    for entry in report["indexes"]:
        entry = dict(entry)
        if entry["materialized"]:
            saturated = set(entry["summary"]["saturated_granules"])
            entry["saturated_granule_statistics"] = [
                row for row in entry.pop("granule_statistics") if row["granule"] in saturated
            ]
        indexes.append(entry)
    return {**report, "view": "summary", "indexes": indexes}


def granule_lines(report: dict[str, Any]) -> int:
    """How many granule lines :func:`inspect_part`'s full report prints (all its indexes).

    Example:
        >>> granule_lines({"indexes": [{"materialized": False}]})
        0
    """
    return sum(len(entry.get("granule_statistics", ())) for entry in report["indexes"])


def inspect_command(args: argparse.Namespace) -> int:
    """Handler of ``bloomskip clickhouse inspect``; returns the exit status."""
    part = _open_part(args)
    report = inspect_part(
        part, args.index, saturation_fpr=args.saturation_fpr, target_fpr=args.target_fpr
    )
    lines = granule_lines(report)
    view = args.view or ("summary" if lines > SCREENFUL else "granules")
    if args.plot is not None:
        from bloomskip.plots import plot_part_fill, save_figure

        save_figure(plot_part_fill(report), args.plot)
    report["granule_lines"] = lines
    report = summarize(report) if view == "summary" else {**report, "view": "granules"}
    if args.json:
        print_json(report)
        return EXIT_OK
    print(
        f"part {report['part']} ({report['part_type']}, {report['rows']} rows, "
        f"{report['granules']} granules)"
    )
    for entry in report["indexes"]:
        parameters = ", ".join(f"{key}={value}" for key, value in entry["parameters"].items())
        print(
            f"\nindex {entry['name']} {entry['type']} on {', '.join(entry['expressions'])} "
            f"GRANULARITY {entry['granularity']} ({parameters})"
        )
        if not entry["materialized"]:
            print("  not materialized in this part: ClickHouse reads every granule")
            continue
        print(
            f"  {entry['index_granules']} index granules; {entry['compressed_bytes']} bytes on "
            f"disk ({', '.join(entry['codecs'])}, {entry['blocks']} block"
            f"{'' if entry['blocks'] == 1 else 's'}), "
            f"{entry['uncompressed_bytes']} uncompressed, marks {entry['marks_bytes']} bytes "
            f"({entry['marks_format']})"
        )
        multi = len(entry["expressions"]) > 1
        rows = entry.get("granule_statistics", entry.get("saturated_granule_statistics"))
        shown = rows if view == "granules" else rows[: SHOWN_SATURATED * len(entry["expressions"])]
        if shown:
            header = (
                f"  {'granule':>7} {'rows':>9} {'bits':>10} {'set':>10} {'fill':>6} {'est.fpr':>9}"
            )
            print(header + ("  column" if multi else ""))
        for row in shown:
            line = (
                f"  {row['granule']:>7} {row['rows']:>9} {row['bit_count']:>10} "
                f"{row['bits_set']:>10} {row['fill_ratio']:>6.3f} {row['estimated_fpr']:>9.3g}"
            )
            print(line + (f"  {row['column']}" if multi else ""))
        if len(shown) < len(rows):
            print(f"  ... {len(rows) - len(shown)} more saturated granule lines (--json lists all)")
        summary = entry["summary"]
        print(
            f"  mean fill {summary['mean_fill_ratio']:.3f}, max fill "
            f"{summary['max_fill_ratio']:.3f}, mean estimated fpr "
            f"{summary['mean_estimated_fpr']:.3g}"
        )
        if summary["saturated_granules"]:
            advice = summary["recommendation"]
            print(
                f"  SATURATED: {len(summary['saturated_granules'])} granules with estimated fpr "
                f">= {summary['saturation_fpr']:g}: " + _ranges(summary["saturated_granules"])
            )
            print(
                f"  suggest TYPE {advice['type_clause']} (estimated fpr "
                f"{advice['estimated_fpr']:.3g})"
                + (f"; {advice['note']}" if advice.get("note") else "")
            )
        elif view == "summary":
            print(f"  no saturated granule (estimated fpr >= {summary['saturation_fpr']:g})")
    if view == "summary":
        print(
            f"\nsummary of {lines} granule lines: the saturated ones only (--granules lists "
            "every granule)"
        )
    return EXIT_OK
