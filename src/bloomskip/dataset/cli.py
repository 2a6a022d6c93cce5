"""``bloomskip index build``, ``bloomskip query`` and ``bloomskip demo``.

Cheap to import: every handler imports what it needs when it runs.
"""

from __future__ import annotations

import argparse

from bloomskip._cli import EXIT_OK, count, positive_int, print_json, warn
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
    build = index_commands.add_parser(
        "build",
        help="build or refresh a dataset's sidecar index",
        description="Build ClickHouse skip indexes over a Parquet file, directory or glob (or an "
        "Arrow IPC file) into a sidecar file. Only new or changed files are re-indexed.",
    )
    build.add_argument("dataset", metavar="DATASET")
    build.add_argument(
        "--index",
        action="append",
        default=[],
        metavar="DEFINITION",
        help='e.g. "user_id TYPE bloom_filter(0.01)" or "msg TYPE tokenbf_v1(8192, 3, 0)"; '
        "repeatable; omit to refresh the existing index",
    )
    build.add_argument(
        "--granule",
        default="row-group",
        metavar="row-group|ROWS",
        help="granule: a Parquet row group / Arrow record batch (default) or a row count",
    )
    build.add_argument("--sidecar", metavar="PATH", help="index file (default: next to the data)")
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
        help="build on a Dask cluster (tcp://HOST:8786): its workers read the data and write "
        "the segments; needs a segmented index (an object-store DATASET or --index-location) "
        "and bloomskip[dask]",
    )
    build.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar (default: on a terminal only)",
    )
    build.set_defaults(func=_build)
    _register_maintenance(index_commands)

    query = subparsers.add_parser(
        "query",
        help="query a dataset, reading only the row groups its index cannot rule out",
        description="Filter a dataset with a ClickHouse WHERE expression (hasToken, startsWith, "
        "endsWith, multiSearchAny, has, hasAny, hasAll, LIKE, ILIKE, match, IN, =, AND/OR/NOT, "
        "...). The rows are those ClickHouse returns for it over the same files; the index only "
        "prunes row groups (docs/queries.md).",
    )
    query.add_argument("dataset", metavar="DATASET")
    query.add_argument("--where", required=True, metavar="PRED")
    query.add_argument("--select", metavar="COLS", help="comma-separated columns (default: all)")
    query.add_argument("--limit", type=count(0), metavar="N")
    query.add_argument("--format", default="table", choices=("table", "csv", "json", "parquet"))
    query.add_argument("--output", metavar="FILE", help="write here instead of standard output")
    query.add_argument(
        "--explain", action="store_true", help="print what each index skips; do not run"
    )
    query.add_argument("--sidecar", metavar="PATH", help="index file (default: next to the data)")
    _index_location_option(query)
    query.set_defaults(func=_query)

    demo = subparsers.add_parser(
        "demo",
        help="generate a sample log dataset, index it and compare with a DuckDB full scan",
    )
    demo.add_argument("directory", nargs="?", default="bloomskip-demo", metavar="DIR")
    demo.add_argument("--rows", type=positive_int, default=5_000_000, help="rows to generate")
    demo.set_defaults(func=_demo)


def _index_location_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--index-location",
        metavar="URI",
        help="keep a segmented index there (a folder, s3://, gs://, abfs://); the "
        "default for an object-store DATASET is DATASET/_bloomskip (docs/segments.md)",
    )


def _register_maintenance(index_commands) -> None:
    status = index_commands.add_parser(
        "status",
        help="show a segmented index: version, segments, files covered, stale and missing files",
    )
    status.add_argument("--json", action="store_true", help="print one JSON object")
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
    drop = index_commands.add_parser("drop", help="delete a segmented index")
    for parser, handler in ((status, _status), (compact, _compact), (vacuum, _vacuum)):
        parser.add_argument("dataset", metavar="DATASET")
        _index_location_option(parser)
        parser.set_defaults(func=handler)
    drop.add_argument("dataset", metavar="DATASET")
    _index_location_option(drop)
    drop.set_defaults(func=_drop)


def _lake(args: argparse.Namespace):
    from bloomskip.dataset.lake import LakeDataset

    # A URI (an object store, or an unknown scheme that open_store names) has its index beside.
    if args.index_location is None and "://" not in args.dataset:
        raise BloomskipError(
            f"{args.dataset}: index {args.index_command} works on a segmented index: give "
            "--index-location for a local dataset (its sidecar file is rebuilt by index build "
            "and described by query --explain)"
        )
    return LakeDataset(args.dataset, index_location=args.index_location)


def _dataset(args: argparse.Namespace):
    from bloomskip.dataset.dataset import Dataset

    return Dataset(args.dataset, sidecar=args.sidecar, index_location=args.index_location)


def _build(args: argparse.Namespace) -> int:
    dataset = _dataset(args)
    client = None
    if args.scheduler is not None:
        from bloomskip.dataset.lake_build import connect

        client = connect(args.scheduler)
    try:
        report = dataset.build_index(
            args.index or None,
            granule=args.granule,
            progress=args.progress,
            jobs=args.jobs,
            client=client,
        )
    finally:
        if client is not None:
            client.close()
    for warning in report.warnings:
        warn(warning)
    if hasattr(report, "version"):
        print(
            f"{report.index}: version {report.version}, {report.files} files, "
            f"{len(report.rebuilt)} (re)indexed, {len(report.removed)} removed, "
            f"{report.segments_written} new segments, {report.bytes_written:,} bytes written"
        )
    else:
        print(
            f"{report.sidecar}: {report.files} files, {len(report.rebuilt)} (re)indexed, "
            f"{report.index_bytes:,} bytes"
        )
    return EXIT_OK


def _status(args: argparse.Namespace) -> int:
    status = _lake(args).status()
    if args.json:
        print_json(status)
        return EXIT_OK
    if status["version"] is None:
        print(f"{status['index']}: no index ({status['files']} files)")
        return EXIT_OK
    print(
        f"{status['index']}: version {status['version']}, {len(status['segments'])} segments, "
        f"{status['segment_bytes']:,} bytes; {status['files_indexed']}/{status['files']} files "
        f"indexed, {len(status['stale'])} stale, {len(status['missing'])} missing, "
        f"{len(status['not_indexed'])} not indexed"
    )
    for index in status["indexes"]:
        print(f"  {index['definition']}: {index['bytes']:,} bytes")
    for kind in ("stale", "missing", "not_indexed"):
        for key in status[kind]:
            print(f"  {kind.replace('_', ' ')}: {key}")
    return EXIT_OK


def _compact(args: argparse.Namespace) -> int:
    report = _lake(args).compact()
    if report is None:
        print("nothing to compact: fewer than two small segments")
    else:
        print(
            f"{report.index}: version {report.version}, {report.files} files merged into one "
            f"segment, {report.bytes_written:,} bytes written"
        )
    return EXIT_OK


def _vacuum(args: argparse.Namespace) -> int:
    deleted = _lake(args).vacuum(args.keep_versions, args.min_age)
    print(f"deleted {len(deleted)} objects")
    return EXIT_OK


def _drop(args: argparse.Namespace) -> int:
    print(f"deleted {_lake(args).drop()} objects")
    return EXIT_OK


def _query(args: argparse.Namespace) -> int:
    from bloomskip.dataset.lake import LakeDataset
    from bloomskip.dataset.report import explain_text, write_output
    from bloomskip.dataset.translate import referenced_columns

    dataset = _dataset(args)
    if args.explain and isinstance(dataset, LakeDataset):
        # Its pruning reads no footer; --explain reads the survivors' to tell their bytes.
        result = dataset.explain(args.where, describe_data=True)
    else:
        result = dataset.explain(args.where)
    if args.explain:
        read_columns = referenced_columns(args.where)
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
        print(explain_text(result, columns))
        return EXIT_OK
    # Run first: a WHERE the exact path refuses is one error line, not a warning per index
    # that could not use it followed by the error.
    table = dataset.run(result, args.where, args.select, args.limit)
    for warning in result.warnings:
        warn(warning)
    write_output(table, args.format, args.output)
    return EXIT_OK


def _demo(args: argparse.Namespace) -> int:
    from bloomskip.dataset.demo import run_demo

    try:
        run_demo(args.directory, rows=args.rows)
    except OSError as exc:
        raise BloomskipError(f"demo in {args.directory}: {exc}") from exc
    return EXIT_OK
