"""``hasAnyTokens`` / ``hasAllTokens`` against a part chdb wrote, with its own index granules.

ClickHouse 26.9 uses no text index for these functions (ClickHouse#120583): its ``EXPLAIN
indexes = 1`` leaves every ``tokenbf_v1`` / ``ngrambf_v1`` index out, which ``as_clickhouse``
and ``clickhouse explain``'s ``clickhouse_granules_selected`` reproduce. bloomskip prunes with
the hasToken probe of each needle token; no granule holding a row chdb returns is skipped.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest
from clickhouse_harness import explain_granules
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bloomskip.clickhouse import part_cli
from bloomskip.clickhouse.condition import compile_condition
from bloomskip.clickhouse.ddl import parse_index_definition
from bloomskip.clickhouse.part import Part
from bloomskip.clickhouse.part_cli import explain_part
from bloomskip.clickhouse.simulate import simulate
from bloomskip.errors import ConditionError

GRANULE = 16
ROWS = 1_600
COLUMNS = {
    "id": "UInt64",
    "s": "String",
    "lc": "LowCardinality(String)",
    "arr": "Array(String)",
    "fs": "FixedString(12)",
}
INDEXES = [
    "INDEX s_tok s TYPE tokenbf_v1(256, 3, 0) GRANULARITY 1",
    "INDEX s_ng s TYPE ngrambf_v1(3, 256, 2, 1) GRANULARITY 1",
    "INDEX lc_tok lc TYPE tokenbf_v1(128, 2, 0) GRANULARITY 1",
    "INDEX arr_tok arr TYPE tokenbf_v1(256, 2, 0) GRANULARITY 2",
    "INDEX fs_tok fs TYPE tokenbf_v1(128, 2, 0) GRANULARITY 1",
    "INDEX id_bf id TYPE bloom_filter GRANULARITY 1",
]
# A word common to every granule, and rare ones that change every 160 rows (ten granules).
COMMON = ["alpha", "Beta", "東京", "x1"]
RARE = ["naïve", "мир", "v2", "404", "éé", "kilo", "Lima", "mike", "oscar", "papa"]
NOT_TOKENS = ["", "naïve мир", "x1-v2", "a_b", "!!"]
SELECT = f"""
SELECT number,
       concat(arrayElement({COMMON}, number % 4 + 1), if(number % 3 = 0, ' - ', ','),
              arrayElement({RARE}, intDiv(number, 160) + 1), if(number % 11 = 0, '!Tail', '')),
       arrayElement(['alpha beta', 'мир', '', 'x1,v2'], number % 4 + 1),
       if(number % 9 = 0, [], [arrayElement({RARE}, intDiv(number, 160) + 1), 'alpha']),
       toFixedString(arrayElement({RARE}, intDiv(number, 160) + 1), 12)
FROM numbers({ROWS})
"""


@pytest.fixture(scope="module")
def part(clickhouse):
    built = clickhouse.create_part(
        COLUMNS,
        INDEXES,
        SELECT,
        settings={"index_granularity": GRANULE, "index_granularity_bytes": 0},
    )
    return built, Part.open(built.path, built.metadata_sql)


def _granules_with_rows(built, where: str) -> set[int]:
    """The data granules holding a row chdb returns for ``where``."""
    offsets = built.harness.arrow(
        f"SELECT _part_offset FROM {built.qualified_table} WHERE {where} "
        "SETTINGS use_skip_indexes = 0, use_query_condition_cache = 0"
    ).column(0)
    bounds = np.cumsum(built.granule_rows)
    return set(np.searchsorted(bounds, offsets.to_numpy(), side="right").tolist())


def _clickhouse_uses_no_index(built, where: str) -> bool:
    text = built.harness.query(
        f"EXPLAIN indexes = 1 SELECT * FROM {built.qualified_table} WHERE {where} "
        "SETTINGS use_query_condition_cache = 0",
        "TabSeparatedRaw",
    )
    return all(explain_granules(text, name.split()[1]) is None for name in INDEXES)


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


@st.composite
def predicates(draw) -> str:
    function = draw(st.sampled_from(["hasAnyTokens", "hasAllTokens", "hasAllToken"]))
    column = draw(st.sampled_from(["s", "lc", "arr", "fs"]))
    pool = COMMON + RARE + ["zzz", "ALPHA", "Tail"]
    if draw(st.booleans()):
        needles = draw(st.lists(st.sampled_from(pool + NOT_TOKENS), max_size=4))
        argument = "[" + ", ".join(_quote(n) for n in needles) + "]"
    else:
        words = draw(st.lists(st.sampled_from(pool), max_size=4))
        argument = _quote(draw(st.sampled_from([" ", "-", ", ", "/"])).join(words))
    return f"{function}({column}, {argument})"


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(where=predicates())
def test_no_granule_holding_a_row_is_skipped(part, where: str) -> None:
    built, on_disk = part
    report = explain_part(on_disk, where)
    needed = _granules_with_rows(built, where)
    for entry in report["indexes"]:
        assert needed <= set(entry["selected"]), (where, entry["name"])
        # What ClickHouse does: no index at all.
        if "clickhouse_granules_selected" in entry:
            assert entry["clickhouse_selected"] == list(range(entry["granules_total"]))
    assert _clickhouse_uses_no_index(built, where), where


@pytest.mark.parametrize(
    ("where", "index", "at_most"),
    [
        ("hasAnyTokens(s, ['naïve'])", "s_tok", 10),
        ("hasAnyTokens(s, 'naïve,мир')", "s_tok", 20),
        ("hasAllTokens(s, 'alpha naïve')", "s_tok", 10),
        ("hasAnyTokens(s, ['kilo', 'zzz'])", "s_ng", 10),
        ("hasAllTokens(s, ['Lima', 'x1'])", "s_ng", 10),
        ("hasAnyTokens(arr, 'oscar')", "arr_tok", 10),
        ("hasAnyTokens(fs, ['papa'])", "fs_tok", 10),
        ("hasAllTokens(lc, ['alpha', 'zzz'])", "lc_tok", 0),
        ("hasAnyTokens(s, [])", "s_tok", 0),
        ("hasAllTokens(s, ['naïve', 'a b'])", "s_tok", 0),
    ],
)
def test_bloomskip_prunes_where_clickhouse_reads_everything(part, where, index, at_most) -> None:
    built, on_disk = part
    (entry,) = explain_part(on_disk, where, [index])["indexes"]
    total = entry["granules_total"]
    assert entry["granules_selected"] <= at_most + 1  # a false positive or two at most
    assert entry["granules_selected"] < total
    assert entry["clickhouse_granules_selected"] == total
    assert _granules_with_rows(built, where) <= set(entry["selected"])
    assert _clickhouse_uses_no_index(built, where)


def test_as_clickhouse_and_other_indexes(part) -> None:
    built, on_disk = part
    definition = on_disk.indexes["s_tok"]
    where = "hasAnyTokens(s, 'naïve') OR id = 3"
    ours = compile_condition(where, definition, COLUMNS)
    theirs = compile_condition(where, definition, COLUMNS, as_clickhouse=True)
    assert ours.beyond_clickhouse and ours.useful
    assert not theirs.beyond_clickhouse and not theirs.useful
    # An AND with an atom ClickHouse uses: both prune, bloomskip at least as much.
    where = "hasAnyTokens(s, 'naïve') AND hasToken(s, 'alpha')"
    (entry,) = explain_part(on_disk, where, ["s_tok"])["indexes"]
    kept, _ = built.explain_granules(where, "s_tok")
    assert entry["clickhouse_granules_selected"] == kept
    assert entry["granules_selected"] < kept


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("hasAnyTokens(s, 1)", "got: UInt8"),
        ("hasAnyTokens(s, [1, 2])", "got: Array(UInt8)"),
        ("hasAnyTokens(s, ['a', NULL])", "got: Array(Nullable(String))"),
        ("hasAllTokens(s, s)", "Expected: const String or const Array(String)"),
        ("hasAnyTokens(id, 'a')", "got: UInt64"),
        ("hasAnyTokens(s)", "got 1 argument"),
        ("hasAnyTokens(s, 'a', 'nope')", "Unknown tokenizer: 'nope'"),
    ],
)
def test_errors_clickhouse_raises(part, where: str, message: str) -> None:
    built, on_disk = part
    with pytest.raises(Exception, match="Code: (4[2-6]|36)"):
        built.harness.query(f"SELECT count() FROM {built.qualified_table} WHERE {where}")
    definition = on_disk.indexes["id_bf" if where.startswith("hasAnyTokens(id") else "s_tok"]
    with pytest.raises(ConditionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        compile_condition(where, definition, COLUMNS)


def test_explain_command_reports_both(part, tmp_path, capsys) -> None:
    built, _ = part
    table_sql = tmp_path / "t.sql"
    table_sql.write_text(built.metadata_sql)
    parser = argparse.ArgumentParser(prog="bloomskip clickhouse")
    part_cli.register(parser.add_subparsers(dest="command", required=True))
    where = "hasAnyTokens(s, ['naïve'])"
    common = ["explain", str(built.path), "--table-sql", str(table_sql), "--where", where]
    args = parser.parse_args([*common, "--index", "s_tok"])
    assert args.func(args) == 0
    text = capsys.readouterr().out
    total = len(built.granule_rows)
    assert f"ClickHouse itself reads {total}/{total} granules" in text
    args = parser.parse_args([*common, "--json"])
    assert args.func(args) == 0
    entries = {e["name"]: e for e in json.loads(capsys.readouterr().out)["indexes"]}
    assert entries["s_tok"]["clickhouse_granules_selected"] == total
    # An index that cannot evaluate the predicate has nothing of bloomskip's own to report.
    assert "clickhouse_granules_selected" not in entries["id_bf"]


def test_simulate_reports_both(part) -> None:
    built, _ = part
    definitions = [parse_index_definition(text) for text in INDEXES[:2]]
    reports = simulate(
        built.data.select(["s"]),
        definitions,
        ["hasAnyTokens(s, 'naïve')", "hasToken(s, 'naïve')"],
        index_granularity=GRANULE,
    )
    token_set, has_token = reports[0].predicates
    assert token_set.clickhouse_granules_selected == len(built.granule_rows)
    assert token_set.granules_selected == has_token.granules_selected < len(built.granule_rows)
    assert has_token.clickhouse_granules_selected is None
