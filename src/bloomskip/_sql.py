"""ClickHouse SQL parsing with sqlglot, with errors a person can read.

sqlglot's parser is recursive descent: about 22 Python frames per level of parentheses, so
Python's default limit of 1000 frames stops it at some 44 nested parentheses. Deeper texts are
parsed again on a thread with a large stack and a raised recursion limit, up to
:data:`MAX_NESTING` levels; anything deeper is refused before parsing (ClickHouse itself refuses
about 200 nested parentheses, ``max_parser_depth``, and 500 nested ``NOT (``,
``max_ast_depth``). Long flat chains (``a OR b OR ...``, long ``IN`` lists) nest nothing and
parse whatever their length.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
from collections.abc import Callable
from functools import lru_cache
from typing import TypeVar

from bloomskip.errors import SQLSyntaxError

__all__ = [
    "MAX_NESTING",
    "SQLSyntaxError",
    "call_deep",
    "nesting_depth",
    "parse_clickhouse",
    "parse_shared",
]

#: Deepest nesting (parentheses, brackets and consecutive NOTs) accepted.
MAX_NESTING = 256
# Enough for MAX_NESTING levels of the deepest-recursing construct (``NOT (``, ~32 frames a
# level) with a wide margin; frames live on the thread's own stack.
_DEEP_RECURSION_LIMIT = 200_000
_DEEP_STACK_BYTES = 512 * 1024 * 1024

# String literals and quoted identifiers, whose brackets and words do not nest anything.
_QUOTED = re.compile(
    r"'(?:[^'\\]|\\.|'')*'?|`(?:[^`\\]|\\.|``)*`?|\"(?:[^\"\\]|\\.|\"\")*\"?", re.S
)
_NOT_RUN = re.compile(r"(?:\bNOT\b\s*)+", re.I)
# sqlglot's "Required keyword: 'expression' missing for <class 'sqlglot...EQ'>".
_MISSING_PART = re.compile(r"Required keyword: .* missing for <class ")

T = TypeVar("T")
# One deep call at a time: each raises the interpreter-wide recursion limit for its duration.
_DEEP_LOCK = threading.Lock()

# sqlglot logs "Falling back to parsing as a 'Command'" (and other warnings) for statements it
# only half understands; a WHERE that does not parse is reported by our own error instead.
logging.getLogger("sqlglot").setLevel(logging.ERROR)


def nesting_depth(sql: str) -> int:
    """Return how deeply ``sql`` nests: brackets open at once, plus the longest run of NOTs.

    Args:
        sql: SQL text.

    Returns:
        The depth (string literals and quoted names are skipped).

    Example:
        >>> nesting_depth("NOT (a = 1 OR (b IN (1, 2)))")
        4
    """
    import numpy as np

    bare = _QUOTED.sub("''", sql)
    codes = np.frombuffer(bare.encode("utf-8"), np.uint8)
    steps = np.zeros(len(codes), np.int64)
    steps[(codes == ord("(")) | (codes == ord("["))] = 1
    steps[(codes == ord(")")) | (codes == ord("]"))] = -1
    brackets = int(np.cumsum(steps).max(initial=0))
    nots = max((len(run.group().split()) for run in _NOT_RUN.finditer(bare)), default=0)
    return brackets + nots


def call_deep(function: Callable[..., T], *args) -> T:
    """Call ``function(*args)``; if it runs out of Python frames, call it again on a thread
    with a large stack and a raised recursion limit.

    sqlglot parses, copies and prints trees recursively; a tree nested :data:`MAX_NESTING`
    levels deep needs tens of thousands of frames.

    Args:
        function: What to call.
        *args: Its arguments.

    Returns:
        What ``function`` returns.

    Raises:
        RecursionError: Even the large stack was not enough.

    Example:
        >>> call_deep(len, "abc")
        3
    """
    try:
        return function(*args)
    except RecursionError:
        pass
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["value"] = function(*args)
        except BaseException as exc:  # handed to the calling thread
            outcome["error"] = exc

    # The recursion limit is per interpreter: raise it for the call, never lower it.
    with _DEEP_LOCK:
        previous_limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(previous_limit, _DEEP_RECURSION_LIMIT))
        previous_stack = threading.stack_size(_DEEP_STACK_BYTES)
        try:
            worker = threading.Thread(target=run, name="bloomskip-deep-sql")
            worker.start()
        finally:
            threading.stack_size(previous_stack)
        worker.join()
        sys.setrecursionlimit(previous_limit)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def parse_clickhouse(sql: str):  # noqa: ANN201 - a sqlglot expression
    """Parse one ClickHouse expression or statement.

    Args:
        sql: The text.

    Returns:
        The sqlglot expression tree.

    Raises:
        SQLSyntaxError: The text does not parse, or nests more than :data:`MAX_NESTING` levels.
            sqlglot's own message spans lines and carries terminal colour codes around the bad
            token; this keeps its first description only.

    Example:
        >>> parse_clickhouse("hasToken(msg, 'x')").sql("clickhouse")
        "hasToken(msg, 'x')"
    """
    import sqlglot
    from sqlglot.errors import SqlglotError

    depth = nesting_depth(sql)
    if depth > MAX_NESTING:
        raise SQLSyntaxError(
            f"the expression nests {depth} levels deep, more than the {MAX_NESTING} supported "
            "(ClickHouse: maximum parse depth exceeded)"
        )
    try:
        return call_deep(sqlglot.parse_one, sql, "clickhouse")
    except SqlglotError as exc:
        errors = getattr(exc, "errors", None)
        reason = errors[0].get("description") if errors else None
        reason = reason or str(exc).splitlines()[0]
        if _MISSING_PART.match(reason):  # names a sqlglot class, which tells a user nothing
            reason = "the expression is incomplete: an operand or argument is missing"
        raise SQLSyntaxError(reason) from exc
    except RecursionError as exc:
        raise SQLSyntaxError("the expression nests too deeply to parse") from exc


@lru_cache(maxsize=16)
def parse_shared(sql: str):  # noqa: ANN201 - a sqlglot expression
    """:func:`parse_clickhouse`, remembered per text: one tree for every reader of a WHERE.

    A query compiles its WHERE for each index and translates it for DuckDB; a long WHERE costs
    about 50 microseconds an element to parse, so it is parsed once. The tree is shared: never
    modify it (``call_deep(tree.copy)`` gives a private copy, several times cheaper than a
    parse). A text that does not parse is not remembered.

    Args:
        sql: The text.

    Returns:
        The shared sqlglot expression tree.

    Raises:
        SQLSyntaxError: As :func:`parse_clickhouse`.

    Example:
        >>> parse_shared("x = 1") is parse_shared("x = 1")
        True
    """
    return parse_clickhouse(sql)
