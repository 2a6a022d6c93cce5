"""The ``bloomskip`` command line: one sub-command group per format."""

from __future__ import annotations

import argparse
import sys

from bloomskip import __version__
from bloomskip.errors import BloomskipError


def build_parser() -> argparse.ArgumentParser:
    """Return the parser with every sub-command registered."""
    from bloomskip.clickhouse import part_cli, simulate
    from bloomskip.dataset import cli as dataset_cli
    from bloomskip.tsfile import cli as tsfile_cli

    parser = argparse.ArgumentParser(
        prog="bloomskip",
        description="Bloom-filter data skipping for TsFile, ClickHouse and Parquet/Arrow data.",
    )
    parser.add_argument("--version", action="version", version=f"bloomskip {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    dataset_cli.register(commands)
    tsfile_cli.register(commands)

    clickhouse = commands.add_parser(
        "clickhouse", help="ClickHouse bloom_filter / ngrambf_v1 / tokenbf_v1 skip indexes"
    )
    clickhouse_commands = clickhouse.add_subparsers(dest="clickhouse_command", required=True)
    simulate.register(clickhouse_commands)
    part_cli.register(clickhouse_commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except BloomskipError as exc:
        print(f"bloomskip: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
