"""The ``bloomskip`` command line: one sub-command group per format."""

from __future__ import annotations

import argparse
import sys

from bloomskip import __version__
from bloomskip._cli import run_command


def build_parser() -> argparse.ArgumentParser:
    """Return the parser with every sub-command registered."""
    from bloomskip.advise import cli as advise_cli
    from bloomskip.clickhouse import cli as clickhouse_cli
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
    clickhouse_cli.register(commands)
    advise_cli.register(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status."""
    parser = build_parser()
    return run_command(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
