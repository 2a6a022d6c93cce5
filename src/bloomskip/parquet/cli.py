"""``bloomskip parquet …``: inspect and verify the split-block Bloom filters inside Parquet files.

This module only declares the parsers; each handler imports the machinery it needs, so that
``bloomskip --help`` stays fast.

Example:
    $ bloomskip parquet inspect data.parquet --json
    $ bloomskip parquet verify s3://bucket/data.parquet && echo "no filter misses a value"
"""

from __future__ import annotations

import argparse

from bloomskip._cli import EXIT_NO, EXIT_OK, positive_int, print_json
from bloomskip._cli import probability as _probability


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``parquet`` command group and its sub-commands.

    Args:
        subparsers: The top-level ``bloomskip`` sub-parser collection.

    Example:
        >>> parser = argparse.ArgumentParser(prog="bloomskip")
        >>> register(parser.add_subparsers())
        >>> parser.parse_args(["parquet", "verify", "f.parquet", "--max-fpr", "0.3"]).max_fpr
        0.3
    """
    group = subparsers.add_parser(
        "parquet", help="Parquet's own split-block Bloom filters: inspect, verify"
    )
    commands = group.add_subparsers(dest="parquet_command", metavar="COMMAND", required=True)

    inspect = commands.add_parser(
        "inspect",
        help="which column chunks carry a Bloom filter: size, fill, estimated rate",
        description="Reads the footer and the filters only. Exit status 0, or 2 when the file "
        "cannot be read or a filter is corrupt.",
    )
    inspect.add_argument("file", help="a Parquet file: a path or an s3:// gs:// abfs:// URI")
    inspect.add_argument("--json", action="store_true", help="print JSON")
    inspect.set_defaults(func=_inspect)

    verify = commands.add_parser(
        "verify",
        help="test every value against its chunk's filter (a rejected value is a writer bug)",
        description="Reads the filtered columns' data. Exit status 0 when no filter rejects a "
        "value of its chunk, 1 when one does, 2 when the file cannot be read or is corrupt. "
        "Filters too full to prune are reported, and do not change the status.",
    )
    verify.add_argument("file", help="a Parquet file: a path or an s3:// gs:// abfs:// URI")
    verify.add_argument(
        "--max-fpr",
        type=_probability,
        default=0.5,
        metavar="RATE",
        help="report a filter as too full when its estimated false-positive rate is at least "
        "RATE (default 0.5)",
    )
    verify.add_argument(
        "--limit",
        type=positive_int,
        default=5,
        metavar="N",
        help="rejected values shown per chunk (default 5)",
    )
    verify.add_argument("--json", action="store_true", help="print JSON")
    verify.set_defaults(func=_verify)


def _inspect(args: argparse.Namespace) -> int:
    from bloomskip.parquet.verify import inspect_file

    report = inspect_file(args.file)
    if args.json:
        print_json(report, pretty=True)
        return EXIT_OK
    print(
        f"{report['file']}: {report['chunks_with_filter']} of "
        f"{report['row_groups'] * report['columns']} column chunks carry a Bloom filter "
        f"({report['filter_bytes']:,} bytes)"
    )
    for row in report["chunks"]:
        if row["has_filter"]:
            print(
                f"  row group {row['row_group']}  {row['column']}  {row['physical_type']}  "
                f"{row['num_bytes']:,} bytes  fill {row['fill_ratio']:.3f}  "
                f"estimated fpr {row['estimated_fpr']:.3g}  "
                + (
                    "saturated"
                    if row["estimated_items"] is None
                    else f"~{row['estimated_items']:,.0f} values"
                )
            )
    return EXIT_OK


def _verify(args: argparse.Namespace) -> int:
    from bloomskip.parquet.verify import verify_file

    report = verify_file(args.file, max_fpr=args.max_fpr, limit=args.limit)
    if args.json:
        print_json(report.to_dict(), pretty=True)
        return EXIT_OK if report.ok else EXIT_NO
    summary = report.to_dict()
    for chunk in report.chunks:
        where = f"row group {chunk.row_group}, {chunk.column}"
        if chunk.skipped:
            print(f"{report.file}: {where}: not checked ({chunk.skipped})")
        if chunk.rejected:
            shown = ", ".join(chunk.rejected_examples)
            print(
                f"{report.file}: {where}: REJECTS {chunk.rejected} of {chunk.values} values "
                f"(e.g. {shown}): a reader trusting this filter misses their rows"
            )
        if chunk.too_full:
            print(
                f"{report.file}: {where}: too full to prune (estimated fpr "
                f"{chunk.estimated_fpr:.3g} >= {report.max_fpr})"
            )
    print(
        f"{report.file}: {summary['chunks_checked']} filtered chunks checked, "
        f"{summary['rejected_values']} values rejected, {summary['too_full']} too full, "
        f"{report.chunks_without_filter} chunks without a filter: "
        + ("OK" if report.ok else "FILTERS MISS VALUES")
    )
    return EXIT_OK if report.ok else EXIT_NO
