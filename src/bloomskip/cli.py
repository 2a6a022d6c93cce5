"""The ``bloomskip`` command line: one sub-command group per format."""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys

from bloomskip import __version__
from bloomskip._cli import EXIT_ERROR, debug_option, run_command


def build_parser() -> argparse.ArgumentParser:
    """Return the parser with every sub-command registered."""
    from bloomskip.advise import cli as advise_cli
    from bloomskip.clickhouse import cli as clickhouse_cli
    from bloomskip.dataset import cli as dataset_cli
    from bloomskip.parquet import cli as parquet_cli
    from bloomskip.tsfile import cli as tsfile_cli

    parser = argparse.ArgumentParser(
        prog="bloomskip",
        description="Bloom-filter data skipping for TsFile, ClickHouse and Parquet/Arrow data.",
    )
    parser.add_argument("--version", action="version", version=f"bloomskip {__version__}")
    debug_option(parser)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    dataset_cli.register(commands)
    tsfile_cli.register(commands)
    clickhouse_cli.register(commands)
    parquet_cli.register(commands)
    advise_cli.register(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status.

    As the ``bloomskip`` command (``argv`` None, the arguments are ``sys.argv``), the garbage
    collector runs its youngest generation every 100,000 allocations instead of 700: the
    imports of a command (pyarrow, sqlglot, DuckDB) create hundreds of thousands of objects
    that live as long as the process, and collecting among them again and again took 15% of
    a cold query (100 ms of 600 on this machine); cycles are still collected. And the process
    ends once the command is done (:func:`end_process`). Called with ``argv``, as a program or
    a test calls it, it changes neither and returns.
    """
    if argv is None:
        gc.set_threshold(100_000, 10, 10)
    parser = build_parser()
    status = run_command(parser.parse_args(argv))
    if argv is None:
        end_process(status)
    return status


def end_process(status: int) -> None:
    """End the process now with ``status``, skipping the interpreter's teardown.

    Tearing down a process that has loaded pyarrow, DuckDB and sqlglot (a full garbage
    collection, every module's and extension's finalizers) takes 60-90 ms, a fifth of a cold
    query. Nothing is lost by skipping it: every file bloomskip writes is written and closed
    (atomically) before its command returns, and a command waits for all of its threads. The
    standard streams are flushed and the ``atexit`` handlers run, as at a normal exit.
    """
    import atexit

    try:
        sys.stdout.flush()
    except BrokenPipeError:
        pass  # a closed pipe (`bloomskip ... | head`) ends quietly, as in run_command
    except OSError as exc:  # a full disk, say: what was printed is lost, and it is said
        with contextlib.suppress(OSError, ValueError):
            print(f"bloomskip: error: cannot write the output: {exc}", file=sys.stderr)
        status = status or EXIT_ERROR
    except ValueError:
        pass  # standard output was closed by the command
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    atexit._run_exitfuncs()
    os._exit(status)


if __name__ == "__main__":
    sys.exit(main())
