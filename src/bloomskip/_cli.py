"""What every ``bloomskip`` command shares: argument validators, exit statuses, errors, JSON.

Each command module declares its parser and, per command, parses, calls one library function
and prints. This module holds the rest, so that a rule (what a positive count is, how an error
is reported, how JSON is printed) is written once. It imports nothing heavy: ``bloomskip --help``
loads it.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> _ = parser.add_argument("--jobs", type=positive_int)
    >>> parser.parse_args(["--jobs", "4"]).jobs
    4
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import sys
import traceback
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from bloomskip.errors import BloomskipError, BloomskipWarning

#: The command did what was asked and the answer is yes (found, verified, written).
EXIT_OK = 0
#: The command ran and the answer is no: a path absent, a series hidden by a filter.
EXIT_NO = 1
#: A user error: bad arguments (argparse's own status) or input bloomskip cannot use.
EXIT_ERROR = 2
#: Interrupted (Ctrl-C): 128 + SIGINT, as a shell reports it.
EXIT_INTERRUPTED = 130


def count(minimum: int) -> Callable[[str], int]:
    """Return an argparse ``type`` accepting whole numbers of at least ``minimum``.

    Args:
        minimum: The smallest accepted value.

    Returns:
        A function turning the argument text into an ``int``.

    Raises:
        argparse.ArgumentTypeError: (from the returned function) not a whole number, or too small.

    Example:
        >>> count(0)("3")
        3
        >>> count(1)("0")
        Traceback (most recent call last):
        ...
        argparse.ArgumentTypeError: expected a whole number >= 1, not '0'
    """

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {minimum}, not {text!r}")
        return value

    return parse


#: A whole number of at least 1 (rows per granule, worker processes, lines listed).
positive_int = count(1)


def probability(text: str) -> float:
    """An argparse ``type`` for a rate strictly between 0 and 1 (a false-positive rate).

    Args:
        text: The argument text.

    Returns:
        The rate.

    Raises:
        argparse.ArgumentTypeError: Not a number, or not inside (0, 1); NaN is refused too.

    Example:
        >>> probability("0.05")
        0.05
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 < value < 1.0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (exclusive), got {text}")
    return value


def os_errors_as_user_errors(
    handler: Callable[[argparse.Namespace], int],
) -> Callable[[argparse.Namespace], int]:
    """Wrap a command so that a file it cannot open or read is a user error (exit status 2).

    Args:
        handler: The command function.

    Returns:
        The same command, raising :class:`~bloomskip.errors.BloomskipError` for an ``OSError``;
        the message names the file (taken from the ``file`` argument when the error has none).

    Example:
        >>> @os_errors_as_user_errors
        ... def show(args):
        ...     return open(args.file).close() or 0
        >>> show(argparse.Namespace(file="no/such/file"))
        Traceback (most recent call last):
        ...
        bloomskip.errors.BloomskipError: [Errno 2] No such file or directory: 'no/such/file'
    """

    @functools.wraps(handler)
    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except OSError as exc:
            # Some errors (reading a directory, say) come without the file name: add it.
            named = exc if exc.filename else f"{getattr(args, 'file', '')}: {exc.strerror or exc}"
            raise BloomskipError(str(named)) from exc

    return run


class WhereFile(str):
    """The argument of ``--where-file``: a path whose file holds the WHERE (see
    :func:`where_text`)."""

    __slots__ = ()


def where_options(parser: argparse.ArgumentParser, *, repeatable: bool = False) -> None:
    """Add ``--where PRED`` (``-`` reads it from standard input) and ``--where-file FILE``.

    A WHERE too long for the command line (a 100,000-value ``IN``) comes from a file or a pipe.
    Both options store into ``args.where`` (``args.predicates`` when ``repeatable``); the
    handler turns each value into the WHERE text with :func:`where_text`.

    Args:
        parser: The command's parser.
        repeatable: Each option may be given several times and neither is required (several
            predicates, in the order given); otherwise exactly one of them is required.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> where_options(parser)
        >>> type(parser.parse_args(["--where-file", "w.sql"]).where).__name__
        'WhereFile'
    """
    stdin = "; - reads it from standard input"
    if repeatable:
        common = {"dest": "predicates", "action": "append", "default": []}
        target = parser
        text_help = "a WHERE predicate (ClickHouse SQL) to evaluate; repeatable" + stdin
        file_help = "a file holding one WHERE predicate; repeatable"
    else:
        common = {"dest": "where"}
        target = parser.add_mutually_exclusive_group(required=True)
        text_help = "the WHERE predicate (ClickHouse SQL)" + stdin
        file_help = "read the WHERE predicate from this file (for one too long to type)"
    target.add_argument("--where", metavar="PRED", help=text_help, **common)
    target.add_argument("--where-file", metavar="FILE", type=WhereFile, help=file_help, **common)


def read_user_text(path, origin: str) -> str:
    """The UTF-8 text of a file the user named, or a one-line error naming it as ``origin``.

    Raises:
        BloomskipError: The file cannot be read, or is not UTF-8 (the byte is named).
    """
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError as exc:
        raise BloomskipError(f"cannot read {origin}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise BloomskipError(
            f"{origin}: not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from exc


def where_text(value: str, *, stdin_used: bool = False) -> str:
    """The WHERE a ``--where`` / ``--where-file`` value (:func:`where_options`) gives.

    Args:
        value: The option's value: the WHERE itself, a :class:`WhereFile`, or ``-`` (either
            option) for standard input.
        stdin_used: Standard input was already read by another option: ``-`` is refused.

    Returns:
        The WHERE, without surrounding white space.

    Raises:
        BloomskipError: The file cannot be read or is not UTF-8 text, standard input was read
            already, or the WHERE read is empty.

    Example:
        >>> where_text("v = 1")
        'v = 1'
        >>> where_text(WhereFile("no/such.sql"))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        bloomskip.errors.BloomskipError: cannot read --where-file no/such.sql: No such file ...
    """
    if value == "-":
        origin = "standard input (-)"
        if stdin_used:
            raise BloomskipError(f"{origin}: read by another option already")
        text = sys.stdin.read()
    elif isinstance(value, WhereFile):
        origin = f"--where-file {value}"
        text = read_user_text(value, origin)
    else:
        origin, text = "--where", value
    if not text.strip():
        raise BloomskipError(f"{origin}: the WHERE is empty")
    return text.strip()


def debug_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--debug``: :func:`run_command` then prints bloomskip's debug log on stderr, and
    before an error's one line, its whole cause (the client's own text, the traceback).

    The generated DuckDB SQL (megabytes for a long ``IN`` over many files), DuckDB's full
    error messages and an object store's client text go there, never into the one-line error.
    Given to ``bloomskip`` itself (``bloomskip --debug COMMAND``) it holds for every command;
    a command's own ``--debug`` leaves it unset when absent, so that one given before the
    command is not undone.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> debug_option(parser)
        >>> parser.parse_args(["--debug"]).debug, hasattr(parser.parse_args([]), "debug")
        (True, False)
    """
    parser.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="also print on stderr the SQL given to DuckDB, DuckDB's full error messages and "
        "an error's whole cause (a storage client's text, the traceback)",
    )


def run_command(args: argparse.Namespace) -> int:
    """Run the command ``args`` selected and return its exit status.

    A :class:`~bloomskip.errors.BloomskipError`, or an ``OSError`` no command turned into one
    (writing to a full disk, say), becomes one line ``bloomskip: error: ...`` on stderr and
    status :data:`EXIT_ERROR`; a closed pipe (``bloomskip ... | head``) ends the
    command quietly with status 0; Ctrl-C prints ``bloomskip: interrupted`` and gives status
    :data:`EXIT_INTERRUPTED` (130, as for a shell's SIGINT). With ``args.debug``
    (:func:`debug_option`), the ``bloomskip`` logger's debug messages are printed on stderr,
    and an error's traceback with its causes before its line. A
    :class:`~bloomskip.errors.BloomskipWarning` is not printed: the commands print the
    lines it carries (``Explanation.warnings``) themselves.

    Args:
        args: The parsed command line; ``args.func`` is the command.

    Returns:
        The exit status.

    Example:
        >>> def fail(args):
        ...     raise BloomskipError("x.parquet: no such file")
        >>> run_command(argparse.Namespace(func=fail))  # prints the error line on stderr
        2
    """
    debug = getattr(args, "debug", False)
    with _debug_log(debug), warnings.catch_warnings():
        warnings.simplefilter("ignore", BloomskipWarning)
        return _run(args, debug)


def _run(args: argparse.Namespace, debug: bool) -> int:
    try:
        return int(args.func(args) or EXIT_OK)
    except BloomskipError as exc:
        return _report_error(exc, debug)
    except BrokenPipeError:
        return EXIT_OK
    except KeyboardInterrupt:
        return _report_interrupt()
    except OSError as exc:  # a failed read or write no bloomskip code named (a full disk, say)
        return _report_error(exc, debug)
    except Exception as exc:
        # DuckDB takes the KeyboardInterrupt of a Ctrl-C and raises its own error instead; a
        # call site that did not turn it back (query.run_query does) still ends in one line.
        if interrupted(exc):
            return _report_interrupt()
        raise


def interrupted(exc: BaseException) -> bool:
    """Whether DuckDB raised ``exc`` because its query was interrupted (Ctrl-C).

    DuckDB's Python module takes the SIGINT that Python's handler turned into a pending
    ``KeyboardInterrupt``, stops the query and raises ``duckdb.InterruptException`` or, from a
    relation's result, ``RuntimeError("Query interrupted")`` (DuckDB 2.0) in its place. The
    CLI and every DuckDB call site turn these back into the interrupt they are.

    Args:
        exc: Any exception.

    Returns:
        True for DuckDB's two forms of an interrupt.

    Example:
        >>> interrupted(RuntimeError("Query interrupted")), interrupted(ValueError("x"))
        (True, False)
    """
    if type(exc) is RuntimeError and str(exc).startswith("Query interrupted"):
        return True
    # Not imported here (``bloomskip --help`` stays light): an error of DuckDB's means that
    # DuckDB is loaded.
    duckdb = sys.modules.get("duckdb")
    return duckdb is not None and isinstance(exc, duckdb.InterruptException)


def _report_error(exc: BaseException, debug: bool) -> int:
    """The error's one line on stderr, after (``--debug``) its traceback and causes."""
    if debug:
        traceback.print_exception(exc, file=sys.stderr)
    print(f"bloomskip: error: {exc}", file=sys.stderr)
    return EXIT_ERROR


def _report_interrupt() -> int:
    # Every write is atomic (a temporary file replaced, or a create-only commit), so an
    # interrupted command has changed nothing: say so in one line, as a shell expects.
    print("bloomskip: interrupted", file=sys.stderr)
    return EXIT_INTERRUPTED


@contextlib.contextmanager
def _debug_log(enabled: bool) -> Iterator[None]:
    """While a ``--debug`` command runs, print the ``bloomskip`` logger's messages on stderr."""
    if not enabled:
        yield
        return
    logger = logging.getLogger("bloomskip")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("bloomskip: debug: %(message)s"))
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        # In-process callers (tests, notebooks) get the logger back as it was.
        logger.removeHandler(handler)
        logger.setLevel(level)


def warn(message: str) -> None:
    """Print ``bloomskip: warning: <message>`` on stderr.

    Example:
        >>> warn("index 'i': never used")  # doctest: +SKIP
    """
    print(f"bloomskip: warning: {message}", file=sys.stderr)


def print_json(value: Any, *, pretty: bool = False) -> None:
    """Print ``value`` as JSON on stdout, followed by a newline.

    Args:
        value: Anything ``json`` serialises.
        pretty: Indent by 2 and keep non-ASCII characters as they are (the ``tsfile`` commands,
            whose series paths are often CJK); otherwise one compact line, ASCII-escaped.

    Example:
        >>> print_json({"rows": 3, "path": "root.设备"})
        {"rows": 3, "path": "root.\\u8bbe\\u5907"}
    """
    if pretty:
        json.dump(value, sys.stdout, ensure_ascii=False, indent=2)
    else:
        json.dump(value, sys.stdout)
    sys.stdout.write("\n")
