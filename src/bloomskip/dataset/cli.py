"""``bloomskip index build``, ``bloomskip query`` and ``bloomskip demo``.

Cheap to import: every handler imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
import sys

from bloomskip._cli import (
    EXIT_OK,
    count,
    debug_option,
    positive_int,
    print_json,
    warn,
    where_options,
    where_text,
)
from bloomskip.errors import BloomskipError


def register(subparsers) -> None:
    """Add the ``index`` (``build``), ``query`` and ``demo`` commands.

    Args:
        subparsers: The object ``ArgumentParser.add_subparsers`` returned.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> register(parser.add_subparsers())
    """
    index = subparsers.add_parser("index", help="skip indexes over Parquet / Arrow datasets")
    index_commands = index.add_subparsers(dest="index_command", metavar="COMMAND", required=True)
    _register_build(index_commands)
    _register_maintenance(index_commands)
    _register_query(subparsers)
    _register_sql(subparsers)
    _register_demo(subparsers)


def _register_build(index_commands) -> None:
    """Add ``index build``: what to index, the granule, where the index goes, threads."""
    build = index_commands.add_parser(
        "build",
        help="build or refresh a dataset's skip index",
        description="Build ClickHouse skip indexes over a Parquet file, directory or glob (or an "
        "Arrow IPC file), an object-store prefix or a Delta / Iceberg table, into a segmented "
        "index beside it (or at --index-location). Only new or changed files are re-indexed; "
        "an index made as one sidecar file by an earlier bloomskip is migrated.",
    )
    build.add_argument("dataset", metavar="DATASET")
    build.add_argument(
        "--index",
        action="append",
        default=[],
        metavar="DEFINITION",
        help='e.g. "user_id TYPE bloom_filter(0.01)" or "msg TYPE tokenbf_v1(8192, 3, 0)"; '
        "repeatable; added to the index's own definitions (an index of the same name and "
        "definition is kept); omit to refresh the existing index",
    )
    build.add_argument(
        "--granule",
        metavar="row-group|ROWS",
        help="granule: a Parquet row group / Arrow record batch or a row count (default: the "
        "index's own, else row-group); with row groups of more than 65,536 rows (pyarrow "
        "writes 1Mi, Spark ~128 MB) use 8192, ClickHouse's granule: a query then reads the "
        "kept granules' rows only",
    )
    build.add_argument(
        "--replace",
        action="store_true",
        help="let an --index replace the index's definition of the same name (and --granule "
        "its granule); without it such a change is an error",
    )
    build.add_argument(
        "--sidecar",
        metavar="PATH",
        help="keep the index as this one file instead (docs/sidecar.md)",
    )
    _index_location_option(build)
    build.add_argument(
        "--jobs",
        type=positive_int,
        metavar="N",
        help="threads building the index (default: one per CPU; the C builders run without "
        "the GIL); the index is the same bytes for any N",
    )
    build.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="build on a Dask cluster (tcp://HOST:8786): its workers read the data and build "
        "the index (a segmented index's segments are written where they run; a local "
        "folder's workers must see it at the same path); needs bloomskip[dask]",
    )
    build.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr, in bytes of the files read (default: when stderr is a "
        "terminal)",
    )
    build.add_argument(
        "--json", action="store_true", help="print the build report as one JSON object"
    )
    build.set_defaults(func=_build)


def _output_options(command, explain_note: str) -> None:
    """Add ``--format``, ``--json`` and ``--output``: how a command writes its rows."""
    command.add_argument(
        "--format",
        default="table",
        choices=("table", "csv", "json", "parquet"),
        help="rows as a table, CSV, JSON lines or Parquet" + explain_note,
    )
    command.add_argument(
        "--json", dest="format", action="store_const", const="json", help="same as --format json"
    )
    command.add_argument("--output", metavar="FILE", help="write here instead of standard output")


def _register_sql(subparsers) -> None:
    """Add ``sql``: a query in DuckDB's SQL, its Parquet scans pruned by their indexes."""
    command = subparsers.add_parser(
        "sql",
        help="run a query in DuckDB's SQL, each indexed Parquet scan reading only what its "
        "index keeps",
        description="Run one query in DuckDB's SQL. Each read_parquet('PATH') or 'PATH' over "
        "local Parquet files with a bloomskip index reads only the files, row groups and rows "
        "its index keeps for the WHERE conjuncts over that scan; DuckDB runs the rest as "
        "written, and the rows are DuckDB's (docs/queries.md).",
    )
    command.add_argument("query", metavar="QUERY", help="the query; - reads it from standard input")
    _output_options(command, "")
    command.add_argument(
        "--explain",
        action="store_true",
        help="print what each Parquet scan reads, and for which WHERE; do not run",
    )
    command.set_defaults(func=_sql)


def _sql(args: argparse.Namespace) -> int:
    from bloomskip.dataset.engines.duckdb_sql import plan_sql, run_cli_table
    from bloomskip.dataset.report import write_output
    from bloomskip.dataset.scan.query import connect

    query = sys.stdin.read() if args.query == "-" else args.query
    connection = connect()
    if args.explain:
        print(plan_sql(query, connection).summary())
        return EXIT_OK
    table, _ = run_cli_table(query, connection)
    write_output(table, args.format, args.output, connection)
    return EXIT_OK


def _register_query(subparsers) -> None:
    """Add ``query``: the WHERE, the output, ``--explain`` and its variants, snapshots."""
    query = subparsers.add_parser(
        "query",
        help="query a dataset, reading only the row groups its index cannot rule out",
        description="Filter a dataset with a ClickHouse WHERE expression (hasToken, startsWith, "
        "endsWith, multiSearchAny, has, hasAny, hasAll, LIKE, ILIKE, match, IN, =, AND/OR/NOT, "
        "...). The rows are those ClickHouse returns for it over the same files; the index only "
        "prunes row groups (docs/queries.md).",
    )
    query.add_argument("dataset", metavar="DATASET")
    where_options(query)
    query.add_argument("--select", metavar="COLS", help="comma-separated columns (default: all)")
    query.add_argument("--limit", type=count(0), metavar="N")
    _output_options(query, "; with --explain: text (table) or one JSON object (json)")
    query.add_argument(
        "--explain",
        action="store_true",
        help="print what each index skips, for the WHERE and for each of its predicate atoms, "
        "and what that avoids; do not run",
    )
    query.add_argument(
        "--analyze",
        action="store_true",
        help="--explain, and also run the exact filter over the kept row groups: per index the "
        "granules kept that held no matching row (false positives) next to the number its "
        "fill predicts",
    )
    query.add_argument(
        "--plot",
        metavar="FILE",
        help="--explain, and draw rows and granules kept per index and per predicate atom (PNG, "
        "SVG or PDF by the name; needs bloomskip[plot])",
    )
    query.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr for a long read (default: when stderr is a terminal)",
    )
    debug_option(query)
    query.add_argument("--sidecar", metavar="PATH", help="an index kept as one file (--sidecar)")
    _index_location_option(query)
    snapshot = query.add_argument_group(
        "table snapshots", "for a Delta or Iceberg DATASET (default: its newest snapshot)"
    )
    snapshot.add_argument("--version", type=count(0), metavar="N", help="a Delta version")
    snapshot.add_argument("--snapshot-id", type=int, metavar="ID", help="an Iceberg snapshot id")
    snapshot.add_argument(
        "--as-of",
        metavar="TIMESTAMP",
        help="the newest snapshot at or before this ISO-8601 time (2026-11-30T12:00:00Z)",
    )
    query.set_defaults(func=_query)


def _register_demo(subparsers) -> None:
    """Add ``demo``: where the sample data goes, its rows, whether it is kept."""
    demo = subparsers.add_parser(
        "demo",
        help="generate a sample log dataset, index it and compare with a DuckDB full scan",
        description="Generate a sample log dataset (about 73 bytes a row as Parquet: 5M rows "
        "take about 370 MB) in DIR, index it and time three queries against a DuckDB full "
        "scan. It prints DIR's absolute path and size. By default the generated files are "
        "removed when it ends (--clean); --keep leaves them for your own queries and prints "
        "how to remove them. Nothing else in DIR is touched.",
    )
    demo.add_argument(
        "directory",
        nargs="?",
        default="bloomskip-demo",
        metavar="DIR",
        help="where the data goes (default: ./bloomskip-demo); reused when it holds the same rows",
    )
    demo.add_argument("--rows", type=positive_int, default=5_000_000, help="rows to generate")
    cleanup = demo.add_mutually_exclusive_group()
    cleanup.add_argument(
        "--keep",
        dest="keep",
        action="store_true",
        help="leave the generated data in DIR (a rerun reuses it)",
    )
    cleanup.add_argument(
        "--clean",
        dest="keep",
        action="store_false",
        help="remove the generated data (and DIR, if the demo created it) when the demo "
        "ends, also on an error or Ctrl-C (the default)",
    )
    demo.set_defaults(func=_demo, keep=False)


def _index_location_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--index-location",
        metavar="URI",
        help="keep a segmented index there (a folder, s3://, gs://, abfs://); the "
        "default for an object-store DATASET is DATASET/_bloomskip (docs/segments.md)",
    )


def _register_maintenance(index_commands) -> None:
    """Add ``index status``, ``list``, ``compact``, ``vacuum`` and ``drop``."""
    status = index_commands.add_parser(
        "status",
        help="show an index: definitions and bytes, files covered, stale and missing files "
        "(a segmented index's version and segments too)",
    )
    status.add_argument("--json", action="store_true", help="print one JSON object")
    status.add_argument(
        "--plot",
        metavar="FILE",
        help="also draw each index's per-granule fill heatmap, saturated granules marked (PNG, "
        "SVG or PDF by the name; needs bloomskip[plot])",
    )
    listing = index_commands.add_parser("list", help="list an index's definitions")
    listing.add_argument("--json", action="store_true", help="print one JSON object")
    compact = index_commands.add_parser("compact", help="merge a segmented index's small segments")
    vacuum = index_commands.add_parser(
        "vacuum", help="delete old versions and segments no recent version references"
    )
    vacuum.add_argument(
        "--keep-versions", type=positive_int, default=10, metavar="N", help="default 10"
    )
    vacuum.add_argument(
        "--min-age",
        type=count(0),
        default=3600,
        metavar="SECONDS",
        help="never delete an object younger than this (default 3600: a build in progress)",
    )
    drop = index_commands.add_parser(
        "drop", help="remove one index by NAME, or (without NAME) the whole index"
    )
    for parser, handler in ((compact, _compact), (vacuum, _vacuum)):
        parser.add_argument("dataset", metavar="DATASET")
        _index_location_option(parser)
        parser.set_defaults(func=handler)
    for parser, handler in ((status, _status), (listing, _list)):
        parser.add_argument("dataset", metavar="DATASET")
        parser.add_argument("--sidecar", metavar="PATH", help="a sidecar index file")
        _index_location_option(parser)
        parser.set_defaults(func=handler)
    drop.add_argument("dataset", metavar="DATASET")
    drop.add_argument("name", nargs="?", metavar="NAME", help="the index to remove")
    drop.add_argument("--sidecar", metavar="PATH", help="a sidecar index file")
    _index_location_option(drop)
    drop.set_defaults(func=_drop)


def _dataset(args: argparse.Namespace):
    from bloomskip.dataset.dataset import Dataset

    return Dataset(
        args.dataset,
        sidecar=getattr(args, "sidecar", None),
        index_location=args.index_location,
        version=getattr(args, "version", None),
        snapshot_id=getattr(args, "snapshot_id", None),
        as_of=getattr(args, "as_of", None),
    )


def _build(args: argparse.Namespace) -> int:
    dataset = _dataset(args)
    client = None
    if args.scheduler is not None:
        from bloomskip.dataset.build.tasks import connect

        client = connect(args.scheduler)
    try:
        report = dataset.build_index(
            args.index or None,
            granule=args.granule,
            replace=args.replace,
            progress=args.progress,
            jobs=args.jobs,
            client=client,
        )
    finally:
        if client is not None:
            client.close()
    for warning in report.warnings:
        warn(warning)
    if args.json:
        print_json(report.to_dict())
    else:
        print(report.summary())
    return EXIT_OK


def _status(args: argparse.Namespace) -> int:
    dataset = _dataset(args)
    status = dataset.status()
    if args.plot is not None:
        _plot_fill(dataset, args.plot)
    if args.json:
        print_json(status)
        return EXIT_OK
    for line in status.get("unreadable_versions", ()):
        warn(f"{line}; the next build supersedes it")
    if not status["indexes"] and status.get("version") is None:
        print(f"{status['index']}: no index ({status['files']} files)")
        return EXIT_OK
    coverage = (
        f"{status['files_indexed']}/{status['files']} files indexed, {len(status['stale'])} "
        f"stale, {len(status['missing'])} missing, {len(status['not_indexed'])} not indexed"
    )
    if status.get("version") is None:
        print(f"{status['index']}: {status['index_bytes']:,} bytes; {coverage}")
    else:
        print(
            f"{status['index']}: version {status['version']}, {len(status['segments'])} "
            f"segment{'s' * (len(status['segments']) != 1)}, {status['segment_bytes']:,} bytes; "
            f"{coverage}"
        )
    print(f"  {_granule_line(status)}")
    for index in status["indexes"]:
        print(f"  {index['definition']}: {index['bytes']:,} bytes")
    for kind in ("stale", "missing", "not_indexed"):
        for key in status[kind]:
            print(f"  {kind.replace('_', ' ')}: {key}")
    return EXIT_OK


#: Row groups of more rows than this are "large" beside a granule of a row group: a point
#: lookup then reads a large share of what a scan reads (ClickHouse's granule is 8,192 rows).
LARGE_ROW_GROUP = 65_536


def _granule_line(status: dict) -> str:
    """``index status``'s granule and the files' row-group sizes, side by side, with the
    granule to use when the row groups are large and the granule is a row group."""
    granule = status["granule"]
    text = "granule: " + (f"{granule:,} rows" if isinstance(granule, int) else "a row group")
    sizes = status.get("row_groups")
    if sizes is None:
        return text
    sampled = (
        f"{sizes['files']} of {sizes['of_files']} files"
        if sizes["files"] < sizes["of_files"]
        else f"{sizes['files']} files"
    )
    text += (
        f"; row groups: median {sizes['median_rows']:,} rows ({sizes['min_rows']:,} to "
        f"{sizes['max_rows']:,}; {sizes['row_groups']:,} in {sampled})"
    )
    if not isinstance(granule, int) and sizes["median_rows"] > LARGE_ROW_GROUP:
        text += (
            "; large row groups: for Parquet, 'index build --granule 8192 --replace' lets a "
            "lookup read the kept 8,192-row granules only (docs/queries.md)"
        )
    return text


def _plot_fill(dataset, path: str) -> None:
    """``index status --plot``: the index's per-granule fill, saturated granules marked."""
    from bloomskip.clickhouse.part_cli import DEFAULT_SATURATION_FPR
    from bloomskip.dataset.prune import index_fill
    from bloomskip.plots import plot_fill, save_figure

    states, sidecar = dataset.index_states()
    if sidecar is None:
        raise BloomskipError(f"no index at {dataset.index_location}: nothing to plot")
    fill = index_fill(states, sidecar, DEFAULT_SATURATION_FPR)
    save_figure(plot_fill(fill, f"{dataset.path}: filter fill per granule"), path)


def _list(args: argparse.Namespace) -> int:
    from bloomskip.dataset.build.indexing import index_name

    status = _dataset(args).status()
    indexes = [{"name": index_name(item["definition"]), **item} for item in status["indexes"]]
    if args.json:
        print_json({"index": status["index"], "granule": status["granule"], "indexes": indexes})
        return EXIT_OK
    if not indexes:
        print(f"{status['index']}: no index")
    for item in indexes:
        print(f"{item['name']}\t{item['definition']}\t{item['bytes']:,} bytes")
    return EXIT_OK


def _compact(args: argparse.Namespace) -> int:
    report = _dataset(args).compact()
    if report is None:
        print("nothing to compact: fewer than two small segments")
    else:
        print(
            f"{report.index}: version {report.version}, {report.files} files merged into "
            f"{report.segments_written} segment{'s' * (report.segments_written != 1)}, "
            f"{report.bytes_written:,} bytes written"
        )
    return EXIT_OK


def _vacuum(args: argparse.Namespace) -> int:
    deleted = _dataset(args).vacuum(args.keep_versions, args.min_age)
    print(f"deleted {len(deleted)} objects")
    return EXIT_OK


def _drop(args: argparse.Namespace) -> int:
    dataset = _dataset(args)
    if args.name is not None:
        dataset.drop_index(args.name)
        print(f"{args.name}: removed")
        return EXIT_OK
    location = dataset.index_location
    deleted = dataset.drop()
    print(f"deleted {location}" + (f" ({deleted} objects)" if dataset.segmented else ""))
    return EXIT_OK


def _query(args: argparse.Namespace) -> int:
    from bloomskip.dataset.report import (
        explain_json,
        explain_text,
        observe_matches,
        write_output,
    )
    from bloomskip.dataset.sql.translate import referenced_columns

    if args.analyze or args.plot is not None:
        args.explain = True
    if args.explain and args.format not in ("table", "json"):
        raise BloomskipError(
            f"--explain prints text (--format table) or one JSON object (--format json), "
            f"not {args.format}"
        )
    where = where_text(args.where)
    dataset = _dataset(args)
    # A segmented index's pruning reads no footer; --explain reads the survivors' to tell
    # their bytes.
    result = dataset.explain(where, describe_data=args.explain)
    if args.explain:
        read_columns = referenced_columns(where)
        selected = []
        if args.select:
            # The select list is comma-separated expressions: as a tuple it parses as one.
            selected = referenced_columns(f"tuple({args.select})")
        # Without running the query nothing else would notice a misspelt column.
        unknown = [c for c in read_columns + selected if c not in dataset.schema.names]
        if unknown:
            raise BloomskipError(
                f"no column {', '.join(map(repr, dict.fromkeys(unknown)))} in the dataset; "
                f"columns: {', '.join(dataset.schema.names)}"
            )
        # Bytes are counted over the columns read: all of them when there is no --select.
        columns = read_columns + [c for c in selected if c not in read_columns] if selected else []
        observation = None
        if args.analyze:
            observation = observe_matches(
                result, where, getattr(dataset.backend, "table_files", None)
            )
        facts = explain_json(result, columns, observation)
        if args.plot is not None:
            from bloomskip.plots import plot_explain, save_figure

            save_figure(plot_explain(facts), args.plot)
        if args.format == "json":
            print_json(facts)
        else:
            print(explain_text(result, columns, observation, facts))
        return EXIT_OK
    # Run first: a WHERE the exact path refuses is one error line, not a warning per index
    # that could not use it followed by the error.
    table = dataset.run(result, where, args.select, args.limit, progress=args.progress)
    for warning in result.warnings:
        warn(warning)
    write_output(table, args.format, args.output, dataset.duckdb_connection())
    return EXIT_OK


def _demo(args: argparse.Namespace) -> int:
    from bloomskip.dataset.demo import run_demo

    try:
        run_demo(args.directory, rows=args.rows, keep=args.keep)
    except OSError as exc:
        raise BloomskipError(f"demo in {args.directory}: {exc}") from exc
    return EXIT_OK
