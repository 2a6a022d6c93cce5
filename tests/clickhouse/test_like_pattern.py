"""The one reading of LIKE escapes and wildcards (``tokenizers.split_like_pattern``) against chdb.

ClickHouse's ``LIKE`` is the oracle: a matcher built from the parts alone, and the re-escaped
(canonical) pattern, must match exactly the strings chdb's ``LIKE`` matches. The text-index
rules built on the parts (``like_tokens``) must keep every granule holding a matching row, also
where ClickHouse 26.9's own index loses it (invalid UTF-8 next to a wildcard or a separator).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bloomskip.clickhouse.condition import compile_condition
from bloomskip.clickhouse.ddl import parse_index_definition
from bloomskip.clickhouse.index import SkipIndex
from bloomskip.clickhouse.tokenizers import LikeWildcard, split_like_pattern
from bloomskip.errors import UnsupportedPredicateError

if TYPE_CHECKING:
    from chdb.session import Session

ANY, ONE = LikeWildcard.ANY, LikeWildcard.ONE

# Wildcards, escapes, regular-expression metacharacters, separators and multi-byte characters.
_PATTERN_PIECES = list("aB %_\\.*(|^$") + ["\\%", "\\_", "\\\\", "\\a", "é", "☃", "𝄞", "\n"]
_TEXT = st.text(st.sampled_from(list("aB %_\\.*(é☃𝄞\n")), max_size=4)


@pytest.mark.parametrize(
    ("pattern", "parts", "lone_backslash"),
    [
        ("", (), False),
        ("%", (ANY,), False),
        ("abc", ("abc",), False),
        ("a%b_c", ("a", ANY, "b", ONE, "c"), False),
        ("%%a", (ANY, ANY, "a"), False),
        # \%, \_ and \\ are the escaped characters, joined with their neighbours.
        ("a\\%b\\_c\\\\d", ("a%b_c\\d",), False),
        # A backslash before anything else stands for itself (chdb: 'C:\Users' LIKE '%\Users').
        ("%\\Users%", (ANY, "\\Users", ANY), True),
        ("\\☃_", ("\\☃", ONE), True),
        ("\\\\\\%", ("\\%",), False),
    ],
)
def test_split_like_pattern(pattern: str, parts: tuple, lone_backslash: bool) -> None:
    like = split_like_pattern(pattern)
    assert (like.parts, like.lone_backslash) == (parts, lone_backslash)
    # The bytes of a pattern split the same way, into the literals' bytes.
    encoded = split_like_pattern(pattern.encode())
    assert encoded.parts == tuple(p if isinstance(p, LikeWildcard) else p.encode() for p in parts)
    assert encoded.lone_backslash == lone_backslash
    assert encoded.escaped() == like.escaped().encode()


@pytest.mark.parametrize("pattern", ["x\\", "\\", "%a\\\\\\", b"ab\\"])
def test_a_trailing_lone_backslash_is_refused(pattern: str | bytes) -> None:
    with pytest.raises(UnsupportedPredicateError, match="Invalid escape sequence at the end"):
        split_like_pattern(pattern)


def _quote(text: str) -> str:
    """A ClickHouse string literal holding ``text`` exactly."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _parts_regex(parts: tuple) -> re.Pattern[str]:
    """A matcher built from the parts alone: % any run, _ one code point, literals as they are."""
    pieces = {ANY: ".*", ONE: "."}
    return re.compile(
        "".join(pieces[p] if isinstance(p, LikeWildcard) else re.escape(p) for p in parts),
        re.DOTALL,
    )


@st.composite
def _pattern_and_strings(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A pattern and strings to match it with: some built from its parts (so that many match),
    some random."""
    pattern = "".join(draw(st.lists(st.sampled_from(_PATTERN_PIECES), max_size=8)))
    strings = draw(st.lists(_TEXT, max_size=4))
    try:
        parts = split_like_pattern(pattern).parts
    except UnsupportedPredicateError:
        return pattern, strings
    for _ in range(3):
        filled = []
        for part in parts:
            if part is ANY:
                filled.append(draw(_TEXT))
            elif part is ONE:
                filled.append(draw(st.sampled_from(list("a%_\\é𝄞\n"))))
            else:
                filled.append(part)
        strings.append("".join(filled))
    return pattern, strings


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_pattern_and_strings())
def test_parts_match_what_clickhouse_like_matches(
    chdb_session: Session, case: tuple[str, list[str]]
) -> None:
    pattern, strings = case
    try:
        like = split_like_pattern(pattern)
    except UnsupportedPredicateError:
        with pytest.raises(RuntimeError, match="Invalid escape sequence at the end"):
            chdb_session.query(f"SELECT 'x' LIKE {_quote(pattern)}", "CSV")
        return
    escaped = like.escaped()
    # Round trip: the canonical spelling has the same parts and no lone backslash.
    again = split_like_pattern(escaped)
    assert again.parts == like.parts and not again.lone_backslash
    if not strings:
        return
    rows = ", ".join(f"({i}, unhex('{s.encode().hex()}'))" for i, s in enumerate(strings))
    table = chdb_session.query(
        f"SELECT s LIKE {_quote(pattern)}, s LIKE {_quote(escaped)} "
        f"FROM values('i UInt32, s String', {rows}) ORDER BY i",
        "CSV",
    )
    lines = table.bytes().decode().split()
    expected = [tuple(line.split(",")) for line in lines]
    matcher = _parts_regex(like.parts)
    got = [("1" if matcher.fullmatch(s) else "0",) * 2 for s in strings]
    assert got == expected, (pattern, strings)


@pytest.mark.parametrize(
    ("index_type", "row", "pattern"),
    [
        # ClickHouse 26.9 skips these granules itself (count() with use_skip_indexes = 1 is 0,
        # without it 1): its nextInStringLike steps over the pattern by UTF-8 lead bytes, and
        # the stray lead byte 0xC3 swallows the separator or wildcard after it into a token
        # ('\xC3 ab', '\xC3%a') that the row's tokenizer never produces.
        ("tokenbf_v1(256, 2, 0)", b"\xc3 ab", "\\xC3 ab"),
        ("tokenbf_v1(256, 2, 0)", b"\xc3xab", "\\xC3%ab"),
        ("ngrambf_v1(2, 256, 2, 0)", b"\xc3xab", "\\xC3%ab"),
        ("ngrambf_v1(2, 256, 2, 0)", b"\xc3xabc", "%\\xC3_abc"),
    ],
)
def test_like_on_invalid_utf8_keeps_the_matching_granule(
    chdb_session: Session, index_type: str, row: bytes, pattern: str
) -> None:
    where = f"s LIKE '{pattern}'"
    matches = chdb_session.query(f"SELECT unhex('{row.hex()}') LIKE '{pattern}'", "CSV").bytes()
    assert matches == b"1\n"  # the row matches: its granule must be kept
    columns = {"s": "String"}
    definition = parse_index_definition(f"INDEX i s TYPE {index_type} GRANULARITY 1")
    rows = pa.array([row, b"zzzz"], pa.binary())
    index = SkipIndex.build(definition, pa.table({"s": rows}), [1, 1], columns)
    condition = compile_condition(where, definition, columns)
    assert condition.may_match(index).tolist()[0]
