"""ClickHouse SQL parsing with sqlglot, with errors a person can read.

sqlglot's parser is recursive descent: about 22 Python frames per level of parentheses, so
Python's default limit of 1000 frames stops it at some 44 nested parentheses. Deeper texts are
parsed again on a thread with a large stack and a raised recursion limit, up to
:data:`MAX_NESTING` levels; anything deeper is refused before parsing (ClickHouse itself refuses
about 200 nested parentheses, ``max_parser_depth``, and 500 nested ``NOT (``,
``max_ast_depth``). Long flat chains (``a OR b OR ...``, long ``IN`` lists) nest nothing and
parse whatever their length.

A WHERE is parsed once per text (:func:`parse_shared`), and a long ``IN`` list or array of
plain literals is not given to sqlglot at all: sqlglot takes some 15 microseconds a value to
tokenize, parse, copy and print one (100,000 values: seconds), where reading the list with one
regular expression and ``int`` takes well under one. The list stays in the tree as one node
holding all of its values (:class:`LiteralList`, found with :func:`literal_list`), which the
readers of the tree (the index conditions, the DuckDB translation) use in one vectorized step.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, TypeVar

from bloomskip.errors import SQLSyntaxError

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "LITERAL_LIST_MIN",
    "MAX_NESTING",
    "LiteralList",
    "SQLSyntaxError",
    "call_deep",
    "literal_list",
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

    Long ``IN`` lists and arrays of plain literals are read without sqlglot: each is one
    ``exp.Var`` node (printed as the list's text) whose :func:`literal_list` holds the values,
    and the root's ``meta["parsed_text"]`` is then the text sqlglot read (the one its nodes'
    offsets refer to).

    Example:
        >>> parse_shared("x = 1") is parse_shared("x = 1")
        True
    """
    return _parse_where(sql)


#: An ``IN`` list or an array of at least this many plain literals is read without sqlglot
#: (shorter ones cost little, and keep every reader's ordinary path).
LITERAL_LIST_MIN = 64

# Plain literals: a decimal integer without a leading zero or plus sign (anything else, such as
# 0x1F, 1e3 or 007, is sqlglot's to read), or a single-quoted string without a backslash or a
# quote inside (no escape to decode).
_INTEGER = r"-?(?:0|[1-9][0-9]*)"
_STRING = r"'[^'\\]*'"
_SEPARATOR = r"\s*,\s*"
# One pass over the text: quoted texts are skipped whole (an IN inside a string is no list),
# a comment or a dollar quote stops the search (what they hide is sqlglot's to read).
_INTEGERS = rf"{_INTEGER}(?:{_SEPARATOR}{_INTEGER}){{{LITERAL_LIST_MIN - 1},}}"
_STRINGS = rf"{_STRING}(?:{_SEPARATOR}{_STRING}){{{LITERAL_LIST_MIN - 1},}}"
# An array literal is one after "(" or ",": a function's argument (not a subscript, x[...]).
_LIST_SCAN = re.compile(
    r"(?P<quoted>'(?:[^'\\]|\\.|'')*'?|`(?:[^`\\]|\\.|``)*`?|\"(?:[^\"\\]|\\.|\"\")*\"?)"
    r"|(?P<stop>--|\#|/\*|\$)"
    rf"|(?<![\w$.])IN\s*\(\s*(?P<list>(?P<integers>{_INTEGERS})|(?P<strings>{_STRINGS}))\s*\)"
    rf"|[(,]\s*(?P<array>\[\s*(?:(?P<array_integers>{_INTEGERS})|(?P<array_strings>{_STRINGS}))"
    r"\s*\])",
    re.IGNORECASE | re.ASCII,
)
_STRING_BODY = re.compile(r"'([^']*)'")
_PLACEHOLDER = "__bloomskip_literal_list_{}"
# Where a list's values hang in the tree: the meta of the exp.Var standing for the list.
_META_KEY = "bloomskip_literal_list"


@dataclass(frozen=True, eq=False)
class LiteralList:
    """The values of a long ``IN (...)`` list or ``[...]`` array of plain literals, read in
    one step.

    Attributes:
        kind: ``"int"`` (every element a decimal integer) or ``"string"`` (every element a
            single-quoted string without escapes).
        values: For ``int``, an ``int64`` numpy array, or ``uint64`` when some value needs it
            (read-only); for ``string``, a tuple of the strings' texts.
        text: The list as written: between the parentheses of ``IN (...)``, or the array with
            its brackets (valid ClickHouse and DuckDB SQL).
        array: Whether it is an array literal (a constant ``Array``) rather than an ``IN`` list.

    Example:
        >>> tree = parse_shared("x IN (" + ", ".join(map(str, range(100))) + ")")
        >>> literal_list(tree.expressions[0]).values[-1]
        np.int64(99)
    """

    kind: str
    values: np.ndarray | tuple[str, ...]
    text: str
    array: bool = False

    def __len__(self) -> int:
        return len(self.values)

    def __deepcopy__(self, memo: dict) -> LiteralList:
        return self  # immutable: a copied tree shares it


def literal_list(node: object) -> LiteralList | None:
    """The :class:`LiteralList` a parsed node stands for, or None.

    Args:
        node: A node of a tree from :func:`parse_shared` (the only expression of an ``exp.In``).

    Returns:
        The list, or None for any other node.

    Example:
        >>> literal_list(parse_shared("x IN (1, 2)").expressions[0]) is None
        True
    """
    meta = getattr(node, "_meta", None)
    return meta.get(_META_KEY) if meta else None


def _read_list(match: re.Match) -> LiteralList | None:
    """The values of one matched list or array, or None when they need sqlglot's reading."""
    import numpy as np

    array = match.group("array") is not None
    text = match.group("array") if array else match.group("list")
    integers = match.group("array_integers" if array else "integers")
    if integers is None:
        # No element holds a quote: each quoted run is one element (commas inside included).
        return LiteralList("string", tuple(_STRING_BODY.findall(text)), text, array)
    numbers = list(map(int, integers.split(",")))  # only digits, signs and blanks: validated
    low, high = min(numbers), max(numbers)
    if low >= -(2**63) and high < 2**63:
        values = np.array(numbers, np.int64)
    elif low >= 0 and high < 2**64:
        values = np.array(numbers, np.uint64)
    else:
        return None  # wider than 64 bits: a Float64 in ClickHouse
    values.setflags(write=False)
    return LiteralList("int", values, text, array)


def _without_literal_lists(sql: str) -> tuple[str, dict[str, LiteralList]]:
    """``sql`` with each long literal ``IN`` list or array replaced by a placeholder name, and
    the lists by placeholder (none when the text has a comment or a placeholder name of its
    own)."""
    lists: dict[str, LiteralList] = {}
    pieces = []
    position = 0
    for match in _LIST_SCAN.finditer(sql):
        if match.group("stop") is not None:
            return sql, {}
        group = "array" if match.group("array") is not None else "list"
        if match.group(group) is None:
            continue
        found = _read_list(match)
        if found is None:
            continue
        name = _PLACEHOLDER.format(len(lists))
        lists[name] = found
        pieces += [sql[position : match.start(group)], name]
        position = match.end(group)
    if not lists or "__bloomskip_literal_list_" in sql:
        return sql, {}
    pieces.append(sql[position:])
    return "".join(pieces), lists


def _parse_where(sql: str):  # noqa: ANN202 - a sqlglot expression
    """:func:`parse_clickhouse`, with long literal ``IN`` lists and arrays read without
    sqlglot."""
    from sqlglot import exp

    shortened, lists = _without_literal_lists(sql)
    if not lists:
        return parse_clickhouse(sql)
    try:
        tree = parse_clickhouse(shortened)
    except SQLSyntaxError:
        return parse_clickhouse(sql)  # the error as the whole text gives it (its positions)
    placed = []
    for column in tree.find_all(exp.Column):
        found = lists.get(column.name) if not column.table else None
        if found is None:
            continue
        parent = column.parent
        if found.array:
            # A function's argument (sqlglot reads some calls into classes of their own).
            where_it_goes = isinstance(parent, exp.Func) or (
                isinstance(parent, exp.In) and parent.expressions == [column]
            )
        else:
            where_it_goes = isinstance(parent, exp.In) and parent.expressions == [column]
        if not where_it_goes:
            # Not where a list of values goes (it cannot be, but sqlglot has the last word).
            return parse_clickhouse(sql)
        placed.append((column, found))
    if len(placed) != len(lists):
        return parse_clickhouse(sql)
    for column, found in placed:
        node = exp.Var(this=found.text)
        node.meta[_META_KEY] = found
        column.replace(node)
    # String literals' offsets (meta "start") are positions in the text sqlglot read.
    tree.meta["parsed_text"] = shortened
    return tree
