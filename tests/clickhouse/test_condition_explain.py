"""Selected granules per predicate equal ClickHouse's ``EXPLAIN indexes = 1``, one index at a time.

Each part is written by chdb; bloomskip builds every index from the same rows and granule
boundaries and compiles each predicate. The oracle is the ``Granules: x/y`` line of the index in
``EXPLAIN indexes = 1`` with every other skip index ignored. When ClickHouse leaves the index
out of EXPLAIN (it judged the predicate useless for it), every granule is read, and bloomskip's
``useful`` must be False.
"""

from __future__ import annotations

import pytest
from clickhouse_harness import Part, explain_granules

from bloomskip.clickhouse.condition import _local_zone_is_utc, compile_condition
from bloomskip.clickhouse.index import SkipIndex

# Predicates where bloomskip reaches ClickHouse's granule count but deliberately keeps no atom
# where ClickHouse keeps one that cannot prune here (see regexp.analyze_regexp).
_CONSERVATIVE = {"match(s, '.*|abc')", "match(s, '\\\\x41lpha')"}


_FOLDED = (-1, -1)


def _explain(part, where: str, index: str) -> tuple[int, int] | None:
    """(kept, total) for ``index``; None when EXPLAIN does not list it; ``_FOLDED`` when the
    predicate folded to a constant and ClickHouse reads no granule at all."""
    others = [name for name in part.indexes if name != index]
    settings = "use_skip_indexes = 1, use_query_condition_cache = 0"
    if others:
        settings += f", ignore_data_skipping_indices = '{','.join(others)}'"
    text = part.harness.query(
        f"EXPLAIN indexes = 1 SELECT * FROM {part.qualified_table} WHERE {where} "
        f"SETTINGS {settings}",
        "TabSeparatedRaw",
    )
    granules = explain_granules(text, index)
    if granules is None and "Granules:" not in text:
        return _FOLDED
    return granules


class _Built:
    """A chdb part with bloomskip's build of each of its indexes."""

    def __init__(self, part: Part) -> None:
        self.part = part
        self.indexes = {
            name: SkipIndex.build(definition, part.data, part.granule_rows, part.columns)
            for name, definition in part.indexes.items()
        }

    def check(self, index: str, where: str) -> None:
        explained = _explain(self.part, where, index)
        if explained == _FOLDED:
            # ClickHouse proved no row can match (e.g. `x = NULL`) and reads nothing; any
            # selection is then free of false negatives. Confirm that no row matches.
            count = self.part.harness.query(
                f"SELECT count() FROM {self.part.qualified_table} WHERE {where}"
            )
            assert count.strip() == "0", where
            return
        data_granules = len(self.part.granule_rows)
        expected = data_granules if explained is None else explained[0]
        selected = self.indexes[index].select(where)
        assert len(selected) == expected, f"{index}: {where}"
        condition = compile_condition(where, self.part.indexes[index], self.part.columns)
        if where not in _CONSERVATIVE:
            assert condition.useful == (explained is not None), f"{index}: {where}"


@pytest.fixture(scope="module")
def bloom_part(clickhouse) -> _Built:
    return _Built(
        clickhouse.create_part(
            {
                "n": "UInt32",
                "x": "UInt8",
                "y": "Int32",
                "f": "Float32",
                "d": "Float64",
                "s": "String",
                "fs": "FixedString(4)",
                "ns": "Nullable(String)",
                "ls": "LowCardinality(String)",
                "dt": "Date",
                "u": "UUID",
                "arr": "Array(UInt16)",
                "sa": "Array(String)",
                "m": "Map(String, UInt32)",
            },
            [
                "INDEX ix x TYPE bloom_filter GRANULARITY 1",
                "INDEX iy y TYPE bloom_filter(0.01) GRANULARITY 2",
                "INDEX iff f TYPE bloom_filter GRANULARITY 1",
                "INDEX idd d TYPE bloom_filter(0.05) GRANULARITY 3",
                "INDEX is s TYPE bloom_filter GRANULARITY 1",
                "INDEX ifs fs TYPE bloom_filter GRANULARITY 1",
                "INDEX ins ns TYPE bloom_filter GRANULARITY 1",
                "INDEX ils ls TYPE bloom_filter GRANULARITY 1",
                "INDEX idt dt TYPE bloom_filter GRANULARITY 1",
                "INDEX iu u TYPE bloom_filter GRANULARITY 1",
                "INDEX iarr arr TYPE bloom_filter GRANULARITY 1",
                "INDEX isa sa TYPE bloom_filter GRANULARITY 1",
                "INDEX ixy (x, y) TYPE bloom_filter GRANULARITY 1",
                "INDEX imk mapKeys(m) TYPE bloom_filter GRANULARITY 1",
                "INDEX imv mapValues(m) TYPE bloom_filter GRANULARITY 1",
            ],
            "SELECT number, number % 256, toInt32(number) - 1000, number / 2, number / 4, "
            "if(number % 300 = 0, '', toString(number)), toString(number % 1000), "
            "if(number % 3 = 0, NULL, toString(number)), toString(number % 50), "
            "toDate('2020-01-01') + number, "
            "toUUID(concat('00000000-0000-0000-0000-', leftPad(toString(number), 12, '0'))), "
            "[number % 65536, (number + 1) % 65536], [toString(number)], "
            "map(toString(number % 97), number) FROM numbers(2048)",
        )
    )


_BLOOM_CASES = [
    ("ix", "x = 5"),
    ("ix", "5 = x"),
    ("ix", "x = 5.0"),
    ("ix", "x = 5.5"),
    ("ix", "x = 300"),
    ("ix", "x = -1"),
    ("ix", "x = '5'"),
    ("ix", "x = 5::UInt64"),
    ("ix", "x = CAST(7 AS UInt16)"),
    ("ix", "x = NULL"),
    ("ix", "x != 5"),
    ("ix", "NOT x != 5"),
    ("ix", "NOT (x = 5)"),
    ("ix", "x IN (5, 6)"),
    ("ix", "x IN (5, 300)"),
    ("ix", "x IN (5, NULL)"),
    ("ix", "x IN (300)"),
    ("ix", "x IN (300, 400)"),
    ("ix", "x IN (5.5, 6.5)"),
    ("ix", "x IN (5.5, 6)"),
    ("ix", "x IN ('5', '6')"),
    ("ix", "x IN [5, 6]"),
    ("ix", "x IN 5"),
    ("ix", "x IN ((5, 6))"),
    ("ix", "x NOT IN (5, 6)"),
    ("ix", "NOT (x IN (5, 6))"),
    ("ix", "x GLOBAL IN (5, 6)"),
    ("ix", "x = 5 OR 0"),
    ("ix", "x = 5 AND 1"),
    ("ix", "x = 5 AND true"),
    ("ix", "x = 5 OR 1"),
    ("ix", "x = 5 OR x = 200 OR x = 201"),
    ("ix", "x = 5 AND n > 3"),
    ("ix", "x = 5 OR n > 3"),
    ("ix", "x = 5 OR s = '3'"),
    ("ix", "NOT (x = 5 OR x = 6)"),
    ("ix", "NOT (x != 5 AND x != 6)"),
    ("ix", "(x = 5 OR x = 6) AND NOT (n = 3)"),
    ("iy", "y = -3"),
    ("iy", "y = -995"),
    ("iy", "y = 3000000000"),
    ("iy", "y IN (-995, 17, 900)"),
    ("iy", "y IN (-995, 3000000000)"),
    ("iff", "f = 2.5"),
    ("iff", "f = 0.1"),
    ("iff", "f = 3"),
    ("iff", "f IN (2.5, 100.5)"),
    ("idd", "d = 0.25"),
    ("idd", "d = 1"),
    ("idd", "d = 0.1"),
    ("is", "s = '17'"),
    ("is", "s = ''"),
    ("is", "s != ''"),
    ("is", "s IN ('', '17')"),
    ("is", "s IN ('17', '1700')"),
    ("is", "s = '\\x31\\x37'"),
    ("is", "s = 'é☃'"),
    ("is", "s IN (17, 1700)"),
    ("is", "s IN ('17', 1700)"),
    ("is", "s IN (17)"),
    ("ifs", "fs IN (17, 999)"),
    ("is", "has(sa, NULL)"),
    ("ix", "x = nan"),
    ("ix", "x = inf"),
    ("ix", "x = 18446744073709551616"),
    ("iy", "y = 1e2"),
    ("iff", "f = '2.5'"),
    ("iff", "f = 0.1::Float32"),
    ("iff", "f IN (0.1, 2.5)"),
    ("is", "position(s, '17') > 0"),
    ("is", "lower(s) = '17'"),
    ("is", "upper(s) = '17'"),
    ("is", "length(s) = 2"),
    ("is", "empty(s)"),
    ("is", "s ILIKE '17'"),
    ("iff", "isNaN(f)"),
    ("idt", "toDate(dt) = '2020-01-05'"),
    ("ifs", "fs = '17'"),
    ("ifs", "fs = ''"),
    ("ifs", "fs = '12345'"),
    ("ifs", "fs IN ('17', '999')"),
    ("ins", "ns = '5'"),
    ("ins", "ns IN ('5', NULL)"),
    ("ins", "ns IS NULL"),
    ("ins", "isNull(ns) OR ns = '7'"),
    ("ils", "ls = '5'"),
    ("ils", "ls = ''"),
    ("ils", "ls IN ('5', '60')"),
    ("idt", "dt = '2020-01-05'"),
    ("idt", "dt IN ('2020-01-05', '2021-06-01')"),
    ("iu", "u = '00000000-0000-0000-0000-000000000017'"),
    ("iu", "u = toUUID('00000000-0000-0000-0000-000000000017')"),
    ("ix", "x = toUInt8(5)"),
    ("idt", "dt = toDate('2020-01-05')"),
    ("iarr", "has(arr, 5)"),
    ("iarr", "has(arr, 70000)"),
    ("iarr", "has(arr, -1)"),
    ("iarr", "has(arr, NULL)"),
    ("iarr", "indexOf(arr, 5) > 0"),
    ("iarr", "indexOf(arr, 5) = 0"),
    ("iarr", "indexOf(arr, 5) != 0"),
    ("iarr", "indexOf(arr, 5) = 2"),
    ("iarr", "0 < indexOf(arr, 5)"),
    ("iarr", "indexOf(arr, 5) >= 1"),
    ("iarr", "indexOf(arr, 5) >= 0"),
    ("iarr", "indexOf(arr, 5)"),
    ("iarr", "hasAny(arr, [5, 77])"),
    ("iarr", "hasAll(arr, [5, 6])"),
    ("iarr", "hasAll(arr, [5, 1000])"),
    ("iarr", "hasAll(arr, [])"),
    ("iarr", "hasAny(arr, [])"),
    ("iarr", "hasAny(arr, [5, 70000])"),
    ("isa", "has(sa, '17')"),
    ("isa", "hasAny(sa, ['17', '2000'])"),
    ("isa", "hasAll(sa, ['17', '2000'])"),
    ("ixy", "(x, y) = (5, -995)"),
    ("ixy", "(x, y) IN ((5, -995), (6, 0))"),
    ("ixy", "(x, y) IN ((5, -995))"),
    ("ixy", "(y, x) IN ((-995, 5), (7, 3))"),
    ("ixy", "(x, n) IN ((5, 5), (6, 1000))"),
    ("ixy", "x = 5 AND y = 7"),
    ("ixy", "x = 5 OR y = 7"),
    ("ixy", "y = 17"),
    ("imk", "mapContains(m, '5')"),
    ("imk", "has(m, '5')"),
    ("imk", "m['5'] = 5"),
    ("imk", "m['5'] = 0"),
    ("imk", "m['zz'] = 3"),
    ("imv", "m['5'] = 5"),
    ("imv", "m['5'] IN (5, 102)"),
]


@pytest.mark.parametrize(("index", "where"), _BLOOM_CASES)
def test_bloom_filter_matches_explain(bloom_part: _Built, index: str, where: str) -> None:
    bloom_part.check(index, where)


@pytest.fixture(scope="module")
def text_part(clickhouse) -> _Built:
    return _Built(
        clickhouse.create_part(
            {
                "n": "UInt32",
                "s": "String",
                "t": "String",
                "fs": "FixedString(8)",
                "ls": "LowCardinality(String)",
                "sa": "Array(String)",
                "m": "Map(String, String)",
            },
            [
                "INDEX tk s TYPE tokenbf_v1(512, 3, 0) GRANULARITY 1",
                "INDEX ng s TYPE ngrambf_v1(3, 512, 2, 7) GRANULARITY 1",
                "INDEX ng1 s TYPE ngrambf_v1(1, 256, 2, 0) GRANULARITY 2",
                "INDEX tst (s, t) TYPE tokenbf_v1(256, 2, 1) GRANULARITY 2",
                "INDEX lw lower(s) TYPE tokenbf_v1(512, 3, 0) GRANULARITY 1",
                "INDEX tfs fs TYPE ngrambf_v1(2, 256, 2, 0) GRANULARITY 1",
                "INDEX tls ls TYPE tokenbf_v1(256, 2, 0) GRANULARITY 3",
                "INDEX tsa sa TYPE tokenbf_v1(256, 2, 0) GRANULARITY 1",
                "INDEX nsa sa TYPE ngrambf_v1(3, 256, 2, 0) GRANULARITY 1",
                "INDEX tmk mapKeys(m) TYPE tokenbf_v1(256, 2, 0) GRANULARITY 1",
                "INDEX tmv mapValues(m) TYPE ngrambf_v1(2, 256, 2, 0) GRANULARITY 1",
            ],
            "SELECT number, concat('alpha', toString(number % 37), ' Beta-', toString(number), "
            "if(number % 5 = 0, ' Привет☃ мир', ''), if(number % 7 = 0, ' a%b_c\\\\d', '')), "
            "concat('t', toString(number % 11)), toString(number % 100), "
            "concat('w', toString(number % 40), ' v', toString(number % 3)), "
            "[concat('x', toString(number % 13)), 'common word'], "
            "map(concat('k', toString(number % 29)), concat('val ', toString(number))) "
            "FROM numbers(2048)",
        )
    )


_STRING_PREDICATES = [
    "s = 'alpha5 Beta-5'",
    "'alpha5 Beta-5' = s",
    "s = ''",
    "s = 'Beta'",
    "s = 'al'",
    "s != 'alpha5 Beta-5'",
    "NOT s = 'alpha5 Beta-5'",
    "s IN ('alpha5 Beta-5', 'alpha6 Beta-6')",
    "s IN ('alpha5 Beta-5', NULL)",
    "s IN ('alpha5 Beta-5')",
    "s NOT IN ('a', 'b')",
    "has(['alpha5 Beta-5', 'b'], s)",
    "s LIKE '%alpha5 %'",
    "s LIKE '%alpha5%'",
    "s LIKE 'alpha5 %'",
    "s LIKE '%x alpha5 Beta%'",
    "s LIKE '%Beta-999 %'",
    "s LIKE '%Beta-999%'",
    "s LIKE '%Beta\\\\_999%'",
    "s LIKE '%a\\\\%b%'",
    "s LIKE '%a\\\\%b\\\\_c%'",
    "s LIKE '%\\\\\\\\d%'",
    "s LIKE '%Привет%'",
    "s LIKE '%ет☃ м%'",
    "s LIKE '%a1_ b%'",
    "s LIKE 'alpha1_ Beta%'",
    "s LIKE 'Beta'",
    "s LIKE ''",
    "s LIKE '%'",
    "s LIKE '%al%'",
    "s NOT LIKE '%alpha5 %'",
    "s ILIKE '%alpha5 %'",
    "s LIKE NULL",
    "s = NULL",
    "hasToken(s, 'alpha5')",
    "hasToken(s, 'Beta')",
    "hasToken(s, 'al')",
    "hasToken(s, NULL)",
    "hasTokenOrNull(s, 'alpha5')",
    "hasTokenCaseInsensitive(s, 'ALPHA5')",
    "hasTokenCaseInsensitive(s, 'alpha5')",
    "hasTokenCaseInsensitiveOrNull(s, 'ALPHA5')",
    "lower(s) = 'alpha5 beta-5'",
    "upper(s) LIKE '%ALPHA5 %'",
    "position(s, 'alpha5 ') > 0",
    "positionCaseInsensitive(s, 'alpha5 ') > 0",
    "match(s, 'Beta-12')",
    "s IN (5, 6)",
    "s IN (5)",
    "(s, n) IN ((5, 5))",
    "multiSearchAnyCaseInsensitive(s, ['alpha5 '])",
    "hasToken(s, 'alpha5') OR hasToken(s, 'alpha6') OR s = 'alpha7 Beta-7'",
    "startsWith(s, 'alpha5 ')",
    "startsWith(s, 'alpha5')",
    "startsWith(s, 'alpha5 Beta-5')",
    "startsWith(s, '')",
    "endsWith(s, ' Beta-5')",
    "endsWith(s, 'Beta-5')",
    "endsWith(s, 'мир')",
    "multiSearchAny(s, [' alpha5 ', ' Beta-99 '])",
    "multiSearchAny(s, ['Beta-999', 'xyz'])",
    "multiSearchAny(s, ['a'])",
    "match(s, 'alpha5 Beta')",
    "match(s, 'Beta-(999|998)')",
    "match(s, '^alpha5 .*Beta')",
    "match(s, 'alpha(5|6) ')",
    "match(s, '(?i)alpha5')",
    "match(s, 'a.c')",
    "match(s, 'Beta-99?9')",
    "match(s, '.*|abc')",
    "match(s, 'alpha5\\\\.x|Beta-777')",
    "match(s, '\\\\x41lpha')",
    "match(s, 'Beta-1[0-9]+')",
    "match(s, 'alpha5 Beta-(?:5|42)')",
    "match(s, '(abc)?alpha5')",
    "s = 'alpha5 Beta-5' AND s LIKE '%zzz%'",
    "s = 'alpha5 Beta-5' OR s LIKE '%Beta-1000%'",
    "NOT (s = 'alpha5 Beta-5' OR s = 'x')",
    "s = 'alpha5 Beta-5' OR n = 3",
    "(s LIKE '%Beta-12%' OR hasToken(s, 'alpha7')) AND NOT s LIKE '%zz%'",
    # A backslash before anything but %, _ or \\ is a literal backslash in ClickHouse's LIKE,
    # and ClickHouse 26.9 then uses no text index (the data holds 'a%b_c\\d').
    "s LIKE '%c\\\\d%'",
    "s LIKE '%\\\\d%'",
    "s LIKE '%b\\\\_c\\\\\\\\d%'",
    "s NOT LIKE '%c\\\\d%'",
    "like(s, '%c\\\\d%')",
    "s LIKE '%c\\\\d%' OR s = 'alpha5 Beta-5'",
    "s LIKE '%c\\\\d%' AND s = 'alpha5 Beta-5'",
    "s LIKE 'alpha5\\\\'",
    "s LIKE '%\\\\Привет%'",
    "s ILIKE '%c\\\\d%'",
    "s LIKE '%c\\\\\\\\d%'",
    # Perfect prefix / suffix patterns are startsWith / endsWith in ClickHouse, backslashes kept.
    "s LIKE '%b\\\\_c\\\\d'",
    "s LIKE 'alpha35 Beta-35 Привет☃ мир a\\\\%b\\\\_c\\\\d%'",
    "s LIKE 'alpha35 Beta-35 Привет☃ мир a%b\\\\_c\\\\d%'",
    "s NOT LIKE '%b\\\\_c\\\\d'",
    "s LIKE '%%c\\\\d'",
    "s LIKE 'alpha35 Beta\\\\-35%%'",
    "s LIKE '%\\\\d'",
    "s LIKE 'alpha35 Beta-35 Привет☃ мир a%b_c\\\\d'",
    # Constants over 64 bytes (the vectorized n-gram path).
    "s = 'Привет☃ мир Привет☃ мир Привет☃ мир Привет☃ мир'",
    "s LIKE '%Beta-1 Привет☃ мир Привет☃ мир Привет☃ мир%'",
    "startsWith(s, 'alpha0 Beta-0 Привет☃ мир a%b_c and more bytes, to pass 64')",
]

_TEXT_CASES = [(index, where) for index in ("tk", "ng", "ng1") for where in _STRING_PREDICATES]
_TEXT_CASES += [
    ("lw", "hasTokenCaseInsensitive(s, 'ALPHA5')"),
    ("lw", "hasTokenCaseInsensitiveOrNull(s, 'BETA')"),
    ("lw", "lower(s) = 'alpha5 beta-5'"),
    ("lw", "lower(s) LIKE '%beta-77 %'"),
    ("lw", "hasToken(s, 'alpha5')"),
    ("lw", "hasToken(lower(s), 'alpha5')"),
    ("tst", "s = 'alpha5 Beta-5'"),
    ("tst", "t = 't3'"),
    ("tst", "(s, t) IN (('alpha5 Beta-5', 't5'), ('alpha6 Beta-6', 't6'))"),
    ("tst", "(s, n) IN (('alpha5 Beta-5', 5))"),
    ("tst", "(t, s) IN (('t5', 'zz'), ('t1', 'alpha1 Beta-1'))"),
    ("tst", "s = 'alpha5 Beta-5' AND t = 't9'"),
    ("tfs", "fs = '17'"),
    ("tfs", "fs = '1'"),
    ("tfs", "fs IN ('17', '18')"),
    ("tfs", "fs LIKE '%17%'"),
    ("tls", "ls = 'w5 v2'"),
    ("tls", "hasToken(ls, 'w17')"),
    ("tls", "ls LIKE 'w1 %'"),
]
_TEXT_CASES += [
    ("tmk", "mapContains(m, 'k5')"),
    ("tmk", "mapContainsKey(m, 'k5')"),
    ("tmk", "has(m, 'k5')"),
    ("tmk", "mapContainsKeyLike(m, 'k1%')"),
    ("tmk", "mapContainsKeyLike(m, '%k1 %')"),
    ("tmk", "m['k5'] = 'val 5'"),
    ("tmk", "m['k5'] = ''"),
    ("tmk", "mapContainsValue(m, 'val 5')"),
    ("tmk", "mapContainsKeyLike(m, 'k\\\\1%')"),
    ("tmv", "mapContainsValueLike(m, '%l\\\\ 17%')"),
    ("tmv", "mapContainsValue(m, 'val 5')"),
    ("tmv", "mapContainsValueLike(m, '%l 17%')"),
    ("tmv", "m['k5'] = 'val 5'"),
    ("tmv", "m['k5'] = ''"),
    ("tmv", "mapContains(m, 'k5')"),
]
for _index in ("tsa", "nsa"):
    _TEXT_CASES += [
        (_index, "has(sa, 'x5')"),
        (_index, "has(sa, 'common')"),
        (_index, "hasAny(sa, ['x5', 'x6'])"),
        (_index, "hasAll(sa, ['x5', 'common word'])"),
        (_index, "hasAll(sa, ['x5', 'x6'])"),
        (_index, "hasAny(sa, [])"),
        (_index, "hasAll(sa, [])"),
    ]


@pytest.mark.parametrize(("index", "where"), _TEXT_CASES)
def test_text_index_matches_explain(text_part: _Built, index: str, where: str) -> None:
    text_part.check(index, where)


def test_float_zero_keeps_both_signs_where_clickhouse_loses_rows(clickhouse) -> None:
    """Engine disagreement, on purpose: 0.0 and -0.0 compare equal but hash apart.

    ClickHouse probes the constant's own sign only, so ``f = -0.0`` skips the granule holding
    ``f = 0.0`` and the query returns 0 rows with the index, 1 without. bloomskip probes both.
    """
    part = clickhouse.create_part(
        {"n": "UInt32", "f": "Float64", "g": "Float32"},
        [
            "INDEX bf f TYPE bloom_filter(0.001) GRANULARITY 1",
            "INDEX bg g TYPE bloom_filter(0.001) GRANULARITY 1",
        ],
        "SELECT number, if(number = 5, 0.0, number + 0.5), if(number = 300, -0.0, number + 0.5) "
        "FROM numbers(2048)",
    )
    for index, where, granule in (("bf", "f = -0.0", 0), ("bg", "g = 0.0", 300 // 128)):
        counts = [
            part.harness.query(
                f"SELECT count() FROM {part.qualified_table} WHERE {where} "
                f"SETTINGS use_skip_indexes = {flag}, use_query_condition_cache = 0"
            ).strip()
            for flag in (0, 1)
        ]
        assert counts == ["1", "0"], (where, counts)  # ClickHouse loses the row
        built = SkipIndex.build(part.indexes[index], part.data, part.granule_rows, part.columns)
        assert granule in built.select(where).tolist(), where
        assert granule in built.select(where.replace("=", "IN (") + ", 7.5)").tolist(), where


# Every type bloom_filter indexes beyond the basic numbers and strings, with the constant forms
# ClickHouse converts (issue: these had no atom and kept 98/98 granules).
_TYPED_COLUMNS = {
    "dt64": (
        "DateTime64(3)",
        "toDateTime64('2024-01-01 00:00:00', 3) + toIntervalMillisecond(number * 1001)",
    ),
    "ts": (
        "DateTime64(6, 'UTC')",
        "toDateTime64('1969-12-31 23:59:00', 6, 'UTC') + toIntervalMicrosecond(number * 1000001)",
    ),
    "ndt64": (
        "Nullable(DateTime64(3))",
        "if(number % 5 = 0, NULL, "
        "toDateTime64('2024-01-01 00:00:00', 3) + toIntervalSecond(number))",
    ),
    "dtz": (
        "DateTime('Asia/Shanghai')",
        "toDateTime('2024-01-01 00:00:00', 'Asia/Shanghai') + number * 7",
    ),
    "dtny": (
        "DateTime('America/New_York')",
        "toDateTime('2024-11-03 00:00:00', 'America/New_York') + number * 30",
    ),
    "dt": ("DateTime", "toDateTime('2024-01-01 00:00:00') + number * 7"),
    "ip4": ("IPv4", "toIPv4(number * 16777259)"),
    "ip6": ("IPv6", "toIPv6(concat('2001:db8::', lower(hex(toUInt16(number)))))"),
    "i128": ("Int128", "toInt128(number) * toInt128('-1000000000000000000000')"),
    "u128": ("UInt128", "toUInt128(number) * toUInt128('1000000000000000000000') + number"),
    "i256": ("Int256", "toInt256(number) - 400"),
    "u256": ("UInt256", "toUInt256(number) * toUInt256('1' || repeat('0', 70)) + number"),
    "e8": (
        "Enum8('a' = -128, 'b' = 0, 'c' = 127, 'd' = 5)",
        "['a', 'b', 'c'][intDiv(number, 300) + 1]",
    ),
    "e16": (
        "Enum16('x' = -1000, 'y' = 1, 'z' = 30000)",
        "['x', 'y', 'z'][intDiv(number, 300) + 1]",
    ),
    "f32": ("Float32", "toFloat32(number) / 10"),
}


@pytest.fixture(scope="module")
def typed_part(clickhouse) -> _Built:
    return _Built(
        clickhouse.create_part(
            {column: type_name for column, (type_name, _) in _TYPED_COLUMNS.items()},
            [
                f"INDEX i_{column} {column} TYPE bloom_filter GRANULARITY 1"
                for column in _TYPED_COLUMNS
            ],
            "SELECT "
            + ", ".join(value for _, value in _TYPED_COLUMNS.values())
            + " FROM numbers(784)",
            settings={"index_granularity": 8},
        )
    )


_TYPED_CASES = [
    ("i_dt64", "dt64 = '2024-01-01 00:00:01.001'"),
    ("i_dt64", "dt64 = '2024-01-01 00:00:01.0011'"),
    ("i_dt64", "dt64 = '2024-01-01T00:00:01.001'"),
    ("i_dt64", "dt64 = '2024-01-01 00:00:01'"),
    ("i_dt64", "dt64 = '2024-01-01 00:00:01.'"),
    ("i_dt64", "dt64 = '2024-01-01'"),
    ("i_dt64", "dt64 = 1704067201"),
    ("i_dt64", "dt64 = toDateTime64('2024-01-01 00:00:01.001', 3)"),
    ("i_dt64", "dt64 = toDateTime64('2024-01-01 00:00:01.001', 3, 'Asia/Shanghai')"),
    ("i_dt64", "dt64 = toDateTime64(1704067201.001, 3)"),
    ("i_dt64", "dt64 = toDateTime('2024-01-01 00:00:00')"),
    ("i_dt64", "dt64 = toDate('2024-01-01')"),
    ("i_dt64", "dt64 = CAST('2024-01-01 00:00:02.002' AS DateTime64(3))"),
    ("i_dt64", "dt64 IN ('2024-01-01 00:00:01.001', '2024-01-01 00:00:02.002')"),
    ("i_dt64", "dt64 != '2024-01-01 00:00:01.001'"),
    ("i_ts", "ts = '1969-12-31 23:59:01.000001'"),
    ("i_ts", "ts = '1970-01-01 00:00:07.000007'"),
    ("i_ts", "ts = '1969-12-31 23:59:00'"),
    ("i_ts", "ts IN ('1970-01-01 00:00:07.000007', '1970-01-01 00:01:00.000060')"),
    ("i_ndt64", "ndt64 = '2024-01-01 00:00:07'"),
    ("i_ndt64", "ndt64 IN ('2024-01-01 00:00:07', NULL)"),
    ("i_dtz", "dtz = '2024-01-01 00:00:07'"),
    ("i_dtz", "dtz = '2024-01-01'"),
    ("i_dtz", "dtz = 1704038407"),
    ("i_dtz", "dtz = toDateTime('2024-01-01 00:00:07', 'Asia/Shanghai')"),
    ("i_dtz", "dtz = toDateTime('2023-12-31 16:00:07', 'UTC')"),
    ("i_dtz", "dtz = toDate('2024-01-01')"),
    ("i_dtz", "dtz IN ('2024-01-01 00:00:07', '2024-01-01 00:01:10')"),
    ("i_dtny", "dtny = '2024-11-03 00:30:00'"),
    ("i_dtny", "dtny = '2024-11-03 02:30:00'"),
    ("i_dt", "dt = '2024-01-01 00:00:07'"),
    ("i_dt", "dt = '2024-01-01'"),
    ("i_dt", "dt = 1704067207"),
    ("i_ip4", "ip4 = '1.0.0.43'"),
    ("i_ip4", "ip4 = 16777259"),
    ("i_ip4", "ip4 = toIPv4('1.0.0.43')"),
    ("i_ip4", "ip4 IN ('1.0.0.43', '2.0.0.86')"),
    ("i_ip4", "ip4 != '1.0.0.43'"),
    ("i_ip6", "ip6 = '2001:db8::5'"),
    ("i_ip6", "ip6 = '2001:DB8:0:0::5'"),
    ("i_ip6", "ip6 = toIPv6('2001:db8::5')"),
    ("i_ip6", "ip6 = '1.2.3.4'"),
    ("i_ip6", "ip6 IN ('2001:db8::5', '2001:db8::1ff')"),
    ("i_i128", "i128 = '-5000000000000000000000'"),
    ("i_i128", "i128 = toInt128('-5000000000000000000000')"),
    ("i_i128", "i128 = -5000000000000000000000"),
    ("i_i128", "i128 = -5"),
    ("i_i128", "i128 = 0"),
    ("i_i128", "i128 IN (0, -1000000000000000000000)"),
    ("i_i128", "i128 IN ('-3000000000000000000000', '-4000000000000000000000')"),
    ("i_u128", "u128 = '5000000000000000000005'"),
    ("i_u128", "u128 = 0"),
    ("i_i256", "i256 = -3"),
    ("i_i256", "i256 = 383"),
    ("i_i256", "i256 IN (-400, 5)"),
    ("i_u256", "u256 = 3"),
    ("i_u256", "u256 = toUInt256('2" + "0" * 69 + "2')"),
    ("i_u256", "u256 = 20000000000000000000000000000000000000000000000000000000000000000000000002"),
    ("i_e8", "e8 = 'a'"),
    ("i_e8", "e8 = 'b'"),
    ("i_e8", "e8 = 'd'"),
    ("i_e8", "e8 = -128"),
    ("i_e8", "e8 = 127"),
    ("i_e8", "e8 = 5"),
    ("i_e8", "e8 IN ('a', 'c')"),
    ("i_e8", "e8 != 'a'"),
    ("i_e16", "e16 = 'z'"),
    ("i_e16", "e16 = 30000"),
    ("i_e16", "e16 IN ('x', 'y')"),
    ("i_f32", "f32 = 0.1"),
    ("i_f32", "f32 = 0.5"),
    ("i_f32", "f32 IN (0.1, 0.5)"),
    ("i_f32", "f32 = toFloat32(0.1)"),
    ("i_f32", "f32 = 0.1::Float32"),
    ("i_f32", "f32 = '0.1'"),
    ("i_f32", "f32 = 1"),
    ("i_f32", "f32 = 5e-1"),
    ("i_f32", "f32 = inf"),
    ("i_f32", "f32 = -inf"),
    ("i_f32", "f32 = Infinity"),
    ("i_f32", "f32 = nan"),
    ("i_f32", "f32 IN (nan, 0.5)"),
    # A NaN is looked up by its bits, whose sign the constant gives (-nan is nan's).
    ("i_f32", "f32 IN (-nan, 0.5)"),
    ("i_f32", "f32 IN (-(nan), 0.5)"),
    ("i_f32", "f32 IN ('-nan', 0.5)"),
    ("i_f32", "f32 IN (toFloat64('-nan'), 0.5)"),
    ("i_f32", "f32 = 3.4028234663852886e38"),
    ("i_f32", "isNaN(f32)"),
]


@pytest.mark.parametrize(("index", "where"), _TYPED_CASES)
def test_typed_bloom_filter_matches_explain(typed_part: _Built, index: str, where: str) -> None:
    if index in ("i_dt64", "i_ndt64", "i_dt") and not _local_zone_is_utc():
        # A column without a zone reads text in the server's (here: this machine's) zone, which
        # bloomskip models only when it is UTC; elsewhere it keeps more granules, never fewer.
        kept, _ = _explain(typed_part.part, where, index) or (0, 0)
        assert len(typed_part.indexes[index].select(where)) >= kept
        return
    typed_part.check(index, where)


def test_repeated_local_time_keeps_every_granule(typed_part: _Built) -> None:
    """01:30 happens twice in New York on 2024-11-03: bloomskip does not guess which instant
    ClickHouse's time-zone tables pick, and keeps every granule (never fewer than ClickHouse)."""
    where = "dtny = '2024-11-03 01:30:00'"
    kept, total = _explain(typed_part.part, where, "i_dtny")
    assert kept < total
    assert len(typed_part.indexes["i_dtny"].select(where)) == total
    assert not compile_condition(
        where, typed_part.part.indexes["i_dtny"], typed_part.part.columns
    ).useful


def test_float_in_a_string_set_keeps_every_granule(bloom_part: _Built) -> None:
    """ClickHouse builds ``s IN (..., 18.0)`` with a text of the float that is not '18' (it
    keeps 0/16 granules although '18' is in granule 0); bloomskip does not guess that text and
    keeps every granule, never fewer than ClickHouse."""
    for where in ("s IN (-3, 18.0)", "s IN (17.5, 18)"):
        kept, total = _explain(bloom_part.part, where, "is")
        assert kept < total
        assert len(bloom_part.indexes["is"].select(where)) == total
