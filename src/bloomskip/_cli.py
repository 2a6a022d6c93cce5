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
import functools
import json
import sys
from collections.abc import Callable
from typing import Any

from bloomskip.errors import BloomskipError

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


def run_command(args: argparse.Namespace) -> int:
    """Run the command ``args`` selected and return its exit status.

    A :class:`~bloomskip.errors.BloomskipError` becomes one line ``bloomskip: error: ...`` on
    stderr and status :data:`EXIT_ERROR`; a closed pipe (``bloomskip ... | head``) ends the
    command quietly with status 0; Ctrl-C prints ``bloomskip: interrupted`` and gives status
    :data:`EXIT_INTERRUPTED` (130, as for a shell's SIGINT).

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
    try:
        return int(args.func(args) or EXIT_OK)
    except BloomskipError as exc:
        print(f"bloomskip: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        return EXIT_OK
    except KeyboardInterrupt:
        # Every write is atomic (a temporary file replaced, or a create-only commit), so an
        # interrupted command has changed nothing: say so in one line, as a shell expects.
        print("bloomskip: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


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
