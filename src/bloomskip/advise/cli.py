"""``bloomskip advise``: choose skip indexes from a dataset's data and a query log.

Cheap to import: the handler imports what it needs when it runs.
"""

from __future__ import annotations

import argparse

from bloomskip._cli import EXIT_OK, os_errors_as_user_errors, positive_int, print_json


def _positive_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def register(subparsers) -> None:
    """Add the ``advise`` command.

    Args:
        subparsers: The object ``ArgumentParser.add_subparsers`` returned.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> register(parser.add_subparsers())
    """
    advise = subparsers.add_parser(
        "advise",
        help="choose skip indexes from the data and a query log",
        description="Build candidate bloom_filter / tokenbf_v1 / ngrambf_v1 / sparse_grams indexes "
        "over the "
        "data (or a sample), probe them with the queries' real conditions, and recommend one "
        "index (or none) per column: the rows each query still reads after the exact filter "
        "against the index bytes, an index only when an average query of the log saves more "
        "of the column's compressed bytes than the index holds; as bloomskip --index text "
        "(one 'bloomskip index build' command for all of them) and ClickHouse DDL.",
    )
    advise.add_argument("dataset", metavar="DATASET", help="a Parquet file, folder or glob")
    advise.add_argument(
        "--where-file",
        required=True,
        metavar="QUERIES",
        help="WHERE clauses, one a line, each optionally preceded by its count and a TAB "
        "(COUNT<TAB>WHERE, a query log); blank lines and # comments are skipped",
    )
    advise.add_argument(
        "--columns",
        nargs="+",
        metavar="COLUMN",
        help="advise on these columns only (default: every column the queries read)",
    )
    advise.add_argument(
        "--sample-rows",
        type=positive_int,
        metavar="N",
        help="measure on about N rows of whole row groups spread over the dataset "
        "(default: all rows)",
    )
    advise.add_argument(
        "--budget-bits-per-row",
        type=_positive_number,
        metavar="B",
        help="only candidates of at most B index bits per row",
    )
    advise.add_argument("--table", metavar="NAME", help="table name in the ClickHouse DDL")
    advise.add_argument("--json", action="store_true", help="print the advice as one JSON object")
    advise.add_argument(
        "--report",
        metavar="report.html",
        help="also write a self-contained HTML report (needs bloomskip[plot])",
    )
    advise.add_argument(
        "--plot",
        metavar="out.png",
        help="also write the Pareto plot as PNG (needs bloomskip[plot])",
    )
    advise.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar (default: on a terminal only)",
    )
    advise.set_defaults(func=_advise)


@os_errors_as_user_errors
def _advise(args: argparse.Namespace) -> int:
    import sys

    from bloomskip.advise.advisor import advise
    from bloomskip.advise.report import text_report, write_html_report

    if args.report is not None or args.plot is not None:
        from bloomskip.advise.figures import require_matplotlib

        require_matplotlib()  # without matplotlib, say so before measuring, not after
    advice = advise(
        args.dataset,
        args.where_file,
        columns=args.columns,
        sample_rows=args.sample_rows,
        budget_bits_per_row=args.budget_bits_per_row,
        table=args.table,
        progress=args.progress,
    )
    if args.plot is not None:
        from bloomskip.advise.figures import pareto_figure, save_png

        save_png(pareto_figure(advice), args.plot)
    if args.report is not None:
        write_html_report(advice, args.dataset, args.report)
    if args.json:
        print_json(advice.to_json())
    else:
        sys.stdout.write(text_report(advice, args.dataset))
    return EXIT_OK
