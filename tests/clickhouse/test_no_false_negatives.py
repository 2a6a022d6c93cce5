"""Property: a granule that holds a row satisfying the predicate is never skipped.

Hypothesis draws rows (short strings from an alphabet rich in separators, wildcards, escapes and
multi-byte characters; small integers; arrays), granule boundaries, small filters (so that
collisions and false positives are common) and predicates mixing every supported function with
AND / OR / NOT. The truth is ClickHouse's own evaluation of the predicate on the rows (chdb,
Memory table); bloomskip's selection must contain every granule with a matching row.
"""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bloomskip.clickhouse.condition import compile_condition
from bloomskip.clickhouse.ddl import parse_index_definition
from bloomskip.clickhouse.index import SkipIndex

_PIECES = ["a", "b", "ab", "Ab", "x1", " ", "-", "_", "%", "\\", ".", "é", "☃", "Пр"]
_TOKENS = ["a", "b", "ab", "Ab", "x1", "é", "☃", "Пр", "ab1", "zz"]
_REGEX_PARTS = [
    "a",
    "b",
    "ab",
    "x1",
    ".",
    ".*",
    "(a|b)",
    "(ab|x1)",
    "?",
    "+",
    "[ab]",
    "\\.",
    "é",
    " ",
]
_COLUMNS = {"s": "String", "sa": "Array(String)", "x": "UInt8", "xa": "Array(UInt8)"}
_TABLE_NAMES = itertools.count()


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


_text = st.lists(st.sampled_from([*_PIECES, "xxab", "b1a"]), max_size=6).map("".join)
_needle = st.lists(st.sampled_from(_PIECES), min_size=0, max_size=4).map("".join)
# A backslash before an ordinary character ("\\a") is a literal backslash in ClickHouse's LIKE.
_like = st.lists(
    st.sampled_from([*_PIECES, "%", "_", "\\%", "\\_", "\\\\", "\\a", "\\x1"]), max_size=6
).map("".join)
_word = st.lists(st.sampled_from(["a", "b", "ab", "x1", "é"]), min_size=1, max_size=3).map("".join)
_regex = st.lists(st.sampled_from(_REGEX_PARTS), min_size=1, max_size=5).map("".join)
_small_int = st.integers(0, 20)


def _string_atom() -> st.SearchStrategy[str]:
    values = st.lists(_text, min_size=1, max_size=3)
    return st.one_of(
        _text.map(lambda v: f"s = {_quote(v)}"),
        _text.map(lambda v: f"s != {_quote(v)}"),
        values.map(lambda vs: f"s IN ({', '.join(map(_quote, vs))})"),
        values.map(lambda vs: f"s NOT IN ({', '.join(map(_quote, vs))})"),
        _like.map(lambda v: f"s LIKE {_quote(v)}"),
        # Wildcards right against a word: the tokens they touch must not be required.
        _word.map(lambda v: f"s LIKE {_quote('%' + v + '%')}"),
        st.tuples(_word, _word).map(lambda p: f"s LIKE {_quote(p[0] + '_' + p[1] + '%')}"),
        _word.map(lambda v: f"startsWith(s, {_quote(v)})"),
        _word.map(lambda v: f"endsWith(s, {_quote(v)})"),
        _like.map(lambda v: f"s NOT LIKE {_quote(v)}"),
        _needle.map(lambda v: f"startsWith(s, {_quote(v)})"),
        _needle.map(lambda v: f"endsWith(s, {_quote(v)})"),
        st.sampled_from(_TOKENS).map(lambda v: f"hasToken(s, {_quote(v)})"),
        st.lists(_needle, min_size=1, max_size=3).map(
            lambda vs: f"multiSearchAny(s, [{', '.join(map(_quote, vs))}])"
        ),
        _regex.map(lambda v: f"match(s, {_quote(v)})"),
        _text.map(lambda v: f"has(sa, {_quote(v)})"),
        values.map(lambda vs: f"hasAny(sa, [{', '.join(map(_quote, vs))}])"),
        values.map(lambda vs: f"hasAll(sa, [{', '.join(map(_quote, vs))}])"),
        _small_int.map(lambda v: f"x = {v}"),
        st.lists(_small_int, min_size=1, max_size=3).map(
            lambda vs: f"x IN ({', '.join(map(str, vs))})"
        ),
        _small_int.map(lambda v: f"has(xa, {v})"),
        _small_int.map(lambda v: f"indexOf(xa, {v}) > 0"),
        st.lists(_small_int, max_size=3).map(lambda vs: f"hasAll(xa, [{', '.join(map(str, vs))}])"),
        st.lists(_small_int, min_size=1, max_size=3).map(
            lambda vs: f"hasAny(xa, [{', '.join(map(str, vs))}])"
        ),
    )


_predicate = st.recursive(
    _string_atom(),
    lambda inner: st.one_of(
        st.tuples(inner, inner).map(lambda p: f"({p[0]}) AND ({p[1]})"),
        st.tuples(inner, inner).map(lambda p: f"({p[0]}) OR ({p[1]})"),
        inner.map(lambda p: f"NOT ({p})"),
    ),
    max_leaves=4,
)

_row = st.tuples(
    _text,
    st.lists(_text, max_size=3),
    _small_int,
    st.lists(_small_int, max_size=3),
)

_INDEXES = [
    "INDEX bs s TYPE bloom_filter(0.3) GRANULARITY {g}",
    "INDEX bsa sa TYPE bloom_filter(0.3) GRANULARITY {g}",
    "INDEX bx x TYPE bloom_filter(0.3) GRANULARITY {g}",
    "INDEX bxa xa TYPE bloom_filter(0.3) GRANULARITY {g}",
    "INDEX tk s TYPE tokenbf_v1(8, 2, 0) GRANULARITY {g}",
    "INDEX tka sa TYPE tokenbf_v1(8, 2, 3) GRANULARITY {g}",
    "INDEX n1 s TYPE ngrambf_v1(1, 8, 2, 0) GRANULARITY {g}",
    "INDEX n2 s TYPE ngrambf_v1(2, 8, 2, 5) GRANULARITY {g}",
    "INDEX n3 s TYPE ngrambf_v1(3, 16, 3, 0) GRANULARITY {g}",
    "INDEX n3a sa TYPE ngrambf_v1(3, 16, 2, 1) GRANULARITY {g}",
    "INDEX sg s TYPE sparse_grams(3, 100, 16, 2, 0) GRANULARITY {g}",
    "INDEX sga sa TYPE sparse_grams(3, 8, 16, 2, 1) GRANULARITY {g}",
    # Large filters: few false positives, so a wrong probe shows up as a skipped granule.
    "INDEX tkl s TYPE tokenbf_v1(512, 3, 0) GRANULARITY {g}",
    "INDEX n2l s TYPE ngrambf_v1(2, 512, 3, 0) GRANULARITY {g}",
    "INDEX sgl s TYPE sparse_grams(3, 100, 512, 3, 0) GRANULARITY {g}",
    "INDEX sgc s TYPE sparse_grams(4, 10, 5, 512, 3, 0) GRANULARITY {g}",
    "INDEX bsl s TYPE bloom_filter(0.001) GRANULARITY {g}",
]


def _matching_rows(clickhouse, rows: list[tuple], predicates: list[str]) -> list[set[int] | None]:
    """Row numbers satisfying each predicate, per ClickHouse; None where ClickHouse rejects it."""
    table = f"{clickhouse.database}.nfn{next(_TABLE_NAMES)}"
    clickhouse.query(
        f"CREATE TABLE {table} (n UInt32, s String, sa Array(String), x UInt8, xa Array(UInt8)) "
        "ENGINE = Memory"
    )
    try:
        values = ", ".join(
            f"({n}, {_quote(s)}, [{', '.join(map(_quote, sa))}], {x}, [{', '.join(map(str, xa))}])"
            for n, (s, sa, x, xa) in enumerate(rows)
        )
        clickhouse.query(f"INSERT INTO {table} VALUES {values}")
        results: list[set[int] | None] = []
        for where in predicates:
            try:
                text = clickhouse.query(f"SELECT n FROM {table} WHERE {where}", "TSV")
            except Exception:  # noqa: BLE001 - chdb raises a bare RuntimeError
                results.append(None)  # e.g. an invalid regular expression
                continue
            results.append({int(line) for line in text.split()})
        return results
    finally:
        clickhouse.query(f"DROP TABLE {table}")


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    rows=st.lists(_row, min_size=1, max_size=40),
    cuts=st.lists(st.integers(1, 8), min_size=1, max_size=12),
    granularity=st.integers(1, 3),
    predicates=st.lists(_predicate, min_size=1, max_size=6),
)
def test_no_granule_with_a_matching_row_is_skipped(
    clickhouse, rows: list[tuple], cuts: list[int], granularity: int, predicates: list[str]
) -> None:
    _check_no_false_negatives(clickhouse, rows, cuts, granularity, predicates)


def _check_no_false_negatives(
    clickhouse, rows: list[tuple], cuts: list[int], granularity: int, predicates: list[str]
) -> None:
    """Build every index over ``rows`` and check each predicate against ClickHouse's truth."""
    granule_rows = _granule_rows(len(rows), cuts)
    table = pa.table(
        {
            "s": pa.array([r[0] for r in rows], pa.string()),
            "sa": pa.array([r[1] for r in rows], pa.list_(pa.string())),
            "x": pa.array([r[2] for r in rows], pa.uint8()),
            "xa": pa.array([r[3] for r in rows], pa.list_(pa.uint8())),
        }
    )
    truth = _matching_rows(clickhouse, rows, predicates)
    # Row -> index granule, for an index whose granules span `granularity` data granules.
    data_granule_of_row = np.repeat(np.arange(len(granule_rows)), granule_rows)
    index_granule_of_row = data_granule_of_row // granularity
    for clause in _INDEXES:
        definition = parse_index_definition(clause.format(g=granularity))
        index = SkipIndex.build(definition, table, granule_rows, _COLUMNS)
        for where, matching in zip(predicates, truth, strict=True):
            if matching is None:
                continue
            condition = compile_condition(where, definition, _COLUMNS)
            selected = condition.may_match(index)
            needed = set(index_granule_of_row[sorted(matching)].tolist())
            missed = sorted(g for g in needed if not selected[g])
            assert not missed, f"{definition.name}: {where} skips granules {missed}"


def _granule_rows(total: int, cuts: list[int]) -> np.ndarray:
    """Split ``total`` rows into granules of the drawn sizes (the last one takes the rest)."""
    sizes = []
    remaining = total
    for cut in itertools.cycle(cuts):
        if remaining <= 0:
            break
        sizes.append(min(cut, remaining))
        remaining -= sizes[-1]
    return np.array(sizes, dtype=np.int64)


@pytest.mark.parametrize(
    ("where", "rows"),
    [
        # Hand-picked edges: the needle shorter than n, empty strings, escapes, non-ASCII.
        ("s LIKE '%ab%'", ["xxabyy", "ab", "b"]),
        ("s LIKE '%a\\\\_b%'", ["a_b", "ab", "a-b"]),
        ("s = ''", ["", "a"]),
        ("startsWith(s, 'é')", ["éa", "a"]),
        ("endsWith(s, '☃')", ["a☃", "☃"]),
        ("match(s, '(ab|x1)+')", ["x1x1", "zz", "ab"]),
        ("multiSearchAny(s, ['', 'zz'])", ["q", "r"]),
    ],
)
def test_edge_predicates_keep_matching_granules(clickhouse, where: str, rows: list[str]) -> None:
    full_rows = [(s, [], 0, []) for s in rows]
    _check_no_false_negatives(clickhouse, full_rows, [1], 1, [where])


_RE2_META = set("\\.+*?()|[]{}^$-/")


def _like_escape(text: str) -> str:
    return "".join("\\" + c if c in "%_\\" else c for c in text)


def _regex_escape(text: str) -> str:
    return "".join("\\" + c if c in _RE2_META else c for c in text)


def _needle_predicates(rows: list[str], picks: list[tuple[int, int, int]]) -> list[str]:
    """Predicates whose needles are cut out of the rows, so each one matches some row."""
    predicates = []
    for row_pick, start_pick, length in picks:
        row = rows[row_pick % len(rows)]
        start = start_pick % (len(row) + 1)
        needle = row[start : start + length]
        prefix, suffix = row[: start + length], row[start:]
        tokens = [
            t for t in "".join(c if c.isalnum() or ord(c) > 127 else " " for c in row).split()
        ]
        predicates += [
            f"s LIKE {_quote('%' + _like_escape(needle) + '%')}",
            f"s LIKE {_quote(_like_escape(prefix) + '%')}",
            f"s LIKE {_quote('%' + _like_escape(suffix))}",
            f"s LIKE {_quote(_like_escape(row))}",
            f"startsWith(s, {_quote(prefix)})",
            f"endsWith(s, {_quote(suffix)})",
            f"multiSearchAny(s, [{_quote(needle)}, 'zzz'])",
            f"match(s, {_quote(_regex_escape(needle))})",
            f"match(s, {_quote('zzz|' + _regex_escape(needle))})",
            f"s = {_quote(row)}",
            f"s IN ({_quote(row)}, 'zzz')",
            f"has(sa, {_quote(row)})",
        ]
        if tokens:
            token = tokens[start_pick % len(tokens)]
            predicates.append(f"hasToken(s, {_quote(token)})")
    return predicates


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts=st.lists(_text, min_size=1, max_size=30),
    cuts=st.lists(st.integers(1, 6), min_size=1, max_size=8),
    granularity=st.integers(1, 2),
    picks=st.lists(
        st.tuples(st.integers(0, 99), st.integers(0, 99), st.integers(0, 8)), min_size=1, max_size=4
    ),
)
def test_needles_cut_from_the_rows_are_never_skipped(
    clickhouse, texts: list[str], cuts: list[int], granularity: int, picks: list[tuple]
) -> None:
    rows = [(text, [text], 0, []) for text in texts]
    predicates = _needle_predicates(texts, picks)
    _check_no_false_negatives(clickhouse, rows, cuts, granularity, predicates)
