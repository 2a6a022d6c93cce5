"""ClickHouse's ``sparse_grams`` skip index, against chdb: the tokenizer (``sparseGramsUTF8``),
the DDL's checks, the granule bits of real parts and the granules ``EXPLAIN indexes = 1`` keeps.

The tokenizer's oracle is ClickHouse's SQL function ``sparseGramsUTF8(s, min, max[, cutoff])``,
which runs the same ``SparseGramsImpl<true>`` the index runs; the strings are random bytes,
random picks from an alphabet of 1- to 4-byte code points, invalid UTF-8 and wildcards.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import numpy as np
import pytest
from clickhouse_harness import explain_granules
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bloomskip import _native, bits
from bloomskip.clickhouse.condition import compile_condition
from bloomskip.clickhouse.ddl import IndexDefinitionError, parse_index_definition
from bloomskip.clickhouse.index import SkipIndex
from bloomskip.clickhouse.tokenizers import QueryTokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "foundation"))
from sparse_grams_model import weak_hash  # noqa: E402

# (min_ngram_length, max_ngram_length, min_cutoff_length)
LENGTHS = [(3, 100, None), (3, 5, None), (4, 10, 6), (5, 100, 50), (3, 3, None), (7, 30, None)]
_ALPHABET = [
    b"a", b"b", b"c", b" ", b"/", b"%", b"_", b"\\", b"x", b"1",
    "é".encode(), "中".encode(), "😊".encode(),
    b"\x80", b"\xc3", b"\xe2\x98", b"\xff", b"\x00",
]  # fmt: skip


def _chdb_sparse_grams(session, strings: list[bytes], lengths: tuple[int, int, int | None]) -> list:
    """ClickHouse's sparse grams of each string, as bytes (``session``: the run's chdb)."""
    low, high, cutoff = lengths
    arguments = f"{low}, {high}" + (f", {cutoff}" if cutoff is not None else "")
    values = ",".join(f"'{s.hex()}'" for s in strings)
    sql = (
        f"SELECT arrayMap(g -> hex(g), sparseGramsUTF8(unhex(s), {arguments})) "
        f"FROM (SELECT arrayJoin([{values}]) AS s) SETTINGS max_query_size = 0"
    )
    rows = json.loads(session.query(sql, "JSONCompact").bytes())["data"]
    return [[bytes.fromhex(g) for g in row[0]] for row in rows]


def _ours(strings: list[bytes], lengths: tuple[int, int, int | None]) -> list:
    tokenizer = QueryTokenizer("sparse_grams", bits.sparse_grams_parameter(*lengths))
    return [tokenizer.string_tokens(s) for s in strings]


def _corpus(seed: int, count: int) -> list[bytes]:
    rng = random.Random(seed)
    strings = [b"", b"ab", b"abc", b"\xf0\x9f\x98", "é".encode() * 120, b"a" * 300, b"%" * 9]
    while len(strings) < count:
        size = rng.choice([0, 1, 2, 3, 4, 5, 8, 15, 30, 120, 400])
        if rng.random() < 0.4:
            strings.append(rng.randbytes(size))
        else:
            strings.append(b"".join(rng.choice(_ALPHABET) for _ in range(size)))
    return strings


@pytest.mark.parametrize("lengths", LENGTHS)
def test_tokenizer_equals_chdb_on_a_corpus(chdb_session, lengths) -> None:
    strings = _corpus(sum(x or 0 for x in lengths), 1500)
    assert _ours(strings, lengths) == _chdb_sparse_grams(chdb_session, strings, lengths)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    strings=st.lists(
        st.one_of(
            st.binary(max_size=200),
            st.text(max_size=150).map(str.encode),
            st.lists(st.sampled_from(_ALPHABET), max_size=120).map(b"".join),
        ),
        min_size=1,
        max_size=40,
    ),
    lengths=st.sampled_from(LENGTHS),
)
def test_tokenizer_equals_chdb_hypothesis(chdb_session, strings: list[bytes], lengths) -> None:
    assert _ours(strings, lengths) == _chdb_sparse_grams(chdb_session, strings, lengths)


def test_window_hash_is_clickhouses_weak_hash(chdb_session) -> None:
    """The window hash is visible through ``sparseGramsHashes``, which hashes whole grams with
    the same function: grams of 3..20 bytes cover the short, 8-byte and tail forms. The
    foundation tests' model (and through it the C kernel) uses the function checked here."""
    strings = [bytes(range(97, 97 + n)) for n in range(3, 21)]
    sql = "SELECT " + ", ".join(
        f"sparseGramsHashes('{s.decode()}', {len(s)}, {len(s)})" for s in strings
    )
    got = chdb_session.query(sql, "CSV").bytes().decode().strip().split('","')
    # One gram per string (the whole string), so each answer is the string's own hash.
    expected = [weak_hash(s) for s in strings]
    assert [int(x.strip('"[]')) for x in got] == expected


def test_hull_capacity_never_drops_an_emittable_window(chdb_session) -> None:
    """Strictly decreasing window hashes keep every window on the hull; the C kernel keeps at
    most 128 and drops the oldest, which is past max_ngram_length by then."""
    rng = random.Random(5)
    strings = [rng.randbytes(3000) for _ in range(3)] + [bytes(range(256)) * 8]
    for lengths in [(3, 100, None), (100, 100, None), (3, 100, 100)]:
        assert _ours(strings, lengths) == _chdb_sparse_grams(chdb_session, strings, lengths)


# ---------------------------------------------------------------------------------------------
# DDL

_DDL = [
    "sparse_grams(3, 100, 4096, 3, 0)",
    "sparse_grams(3, 100, 4, 4096, 3, 0)",
    "sparse_grams(3, 100, 100, 256, 2, 18446744073709551615)",
    "sparse_grams(100, 100, 64, 1, 0)",
    "sparse_grams(3, 200, 4096, 3, 0)",
    "sparse_grams(2, 100, 4096, 3, 0)",
    "sparse_grams(5, 4, 4096, 3, 0)",
    "sparse_grams(3, 100, 2, 4096, 3, 0)",
    "sparse_grams(3, 100, 101, 4096, 3, 0)",
    "sparse_grams(3, 100, 4096, 3)",
    "sparse_grams(3, 100, 4096, 0, 0)",
    "sparse_grams(3, 100, 0, 3, 0)",
    "sparse_grams(3, 100, 4096, 3, -1)",
    "sparse_grams(3.5, 100, 4096, 3, 0)",
    "sparse_grams(3, 100, 4, 4096, 3, 0, 1)",
    "sparse_grams",
]


@pytest.mark.parametrize("ddl", _DDL)
def test_ddl_accepts_and_rejects_as_clickhouse(clickhouse, ddl: str) -> None:
    """ClickHouse checks the lengths at the first INSERT and the rest at CREATE TABLE; bloomskip
    checks everything when it parses the definition."""
    table = f"{clickhouse.database}.ddl"
    clickhouse.query(f"DROP TABLE IF EXISTS {table} SYNC")
    try:
        clickhouse.query(
            f"CREATE TABLE {table} (s String, INDEX i s TYPE {ddl} GRANULARITY 1) "
            "ENGINE = MergeTree ORDER BY tuple()"
        )
        clickhouse.query(f"INSERT INTO {table} VALUES ('hello world')")
        accepted = True
    except RuntimeError:
        accepted = False
    finally:
        clickhouse.query(f"DROP TABLE IF EXISTS {table} SYNC")
    try:
        parse_index_definition(f"INDEX i s TYPE {ddl} GRANULARITY 1")
        ours = True
    except IndexDefinitionError:
        ours = False
    assert ours == accepted


def test_ddl_fields_and_round_trip() -> None:
    d = parse_index_definition("INDEX sg url TYPE sparse_grams(3, 60, 5, 4096, 3, 7) GRANULARITY 2")
    assert (d.min_ngram_length, d.max_ngram_length, d.min_cutoff_length) == (3, 60, 5)
    assert (d.size_bytes, d.hash_functions, d.seed, d.granularity) == (4096, 3, 7, 2)
    assert d.tokenizer == "sparse_grams"
    assert d.tokenizer_argument == bits.sparse_grams_parameter(3, 60, 5)
    assert parse_index_definition(d.to_sql()) == d
    plain = parse_index_definition("url TYPE sparse_grams(4, 9, 256, 2, 0)")
    assert plain.min_cutoff_length is None and plain.max_ngram_length == 9
    with pytest.raises(IndexDefinitionError, match="argument 4 \\(size_bytes\\) cannot be zero"):
        parse_index_definition("s TYPE sparse_grams(3, 100, 5, 0, 2, 0)")


def test_packed_parameter_is_checked_in_c() -> None:
    for bad in [0, 2 | 100 << 16, 3 | 101 << 16, 3 | 100 << 16 | 2 << 32, 1 << 60]:
        with pytest.raises(ValueError, match="sparse-gram"):
            _native.tokenize(b"abcdef", _native.TOKENIZER_SPARSE_GRAMS, bad)
        with pytest.raises(ValueError, match="sparse-gram"):
            _native.text_granules(
                b"", np.zeros(1, np.uint64), 0, _native.TOKENIZER_SPARSE_GRAMS, bad, 8, 1, 0,
                np.zeros(0, np.uint8),
            )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Granule bits and EXPLAIN against chdb parts

URLS = (
    "SELECT concat(['https://shop.example/', 'http://x.org/', 'https://例え.jp/'][number % 3 + 1], "
    "['item', 'user', 'tag'][intDiv(number, 7) % 3 + 1], '/', toString(number % 997), "
    "if(number % 5 = 0, '/view?q=', '/edit#'), toString(number * 7919 % 10007), "
    "if(number % 17 = 0, unhex('C3'), ''), if(number % 23 = 0, 'Ünïcödé_%\\\\', '')) "
    "FROM numbers({count})"
)

SPARSE_INDEXES = [
    "INDEX sg s TYPE sparse_grams(3, 100, 256, 2, 0) GRANULARITY 1",
    "INDEX sgc s TYPE sparse_grams(4, 12, 6, 512, 3, 99) GRANULARITY 2",
    "INDEX sgl lower(s) TYPE sparse_grams(3, 8, 128, 1, 4294967297) GRANULARITY 3",
]


@pytest.fixture(scope="module")
def url_part(clickhouse):
    return clickhouse.create_part(
        {"s": "String"},
        SPARSE_INDEXES,
        URLS.format(count=3000),
        settings={"index_granularity": 64},
    )


@pytest.mark.parametrize("name", ["sg", "sgc", "sgl"])
def test_granule_bits_equal_chdb_part(url_part, name: str) -> None:
    definition = url_part.indexes[name]
    built = SkipIndex.build(definition, url_part.data, url_part.granule_rows, url_part.columns)
    assert built.to_bytes() == url_part.index_stream(name)


def test_one_index_stream_per_sparse_grams_index(url_part) -> None:
    """A sparse_grams index writes one stream, skp_idx_<name>.idx, with its marks (no second
    stream such as a text index's dictionary or postings)."""
    for name in ("sg", "sgc", "sgl"):
        files = sorted(p.name for p in url_part.path.iterdir() if f"skp_idx_{name}." in p.name)
        assert [f.split(".", 1)[1] for f in files] in (
            ["cmrk2", "idx"], ["idx", "mrk2"], ["cmrk4", "idx"], ["idx", "mrk4"]
        ), files  # fmt: skip


def test_granule_bits_merged_adaptive_wide_part(clickhouse) -> None:
    part = clickhouse.create_part(
        {"s": "String"},
        ["INDEX sg s TYPE sparse_grams(3, 20, 300, 2, 5) GRANULARITY 2"],
        [URLS.format(count=700), URLS.format(count=900)],
        optimize=True,
        settings={
            "index_granularity": 1000,
            "index_granularity_bytes": 3000,
            "min_bytes_for_wide_part": 0,
        },
    )
    built = SkipIndex.build(part.indexes["sg"], part.data, part.granule_rows, part.columns)
    assert built.to_bytes() == part.index_stream("sg")


PREDICATES = [
    "s LIKE '%/item/42/%'",
    "s LIKE '%item/42%'",
    "s LIKE '%/user/9%'",
    "s LIKE '%view?q=7%'",
    "s LIKE '%ab%'",
    "s LIKE '%zzzzzz%'",
    "s LIKE 'https://shop.example/tag/%'",
    "s LIKE '%/edit#1234'",
    "s LIKE '%tag_12/%'",
    "s LIKE '%tag\\\\_12/%'",
    "s LIKE '%Ünïcödé\\\\_\\\\%%'",
    "s LIKE '%\\\\Users%'",
    "s LIKE '%例え.jp/item/1%'",
    "s NOT LIKE '%/item/42/%'",
    "notLike(s, '%/user/%')",
    "s = 'https://shop.example/item/0/view?q=0'",
    "s = 'http://x.org/item/1/edit#7919'",
    "s = 'nothing like it'",
    "s != 'http://x.org/item/1/edit#7919'",
    "s IN ('http://x.org/item/1/edit#7919', 'https://shop.example/user/12/edit#3')",
    "s IN ('http://x.org/item/1/edit#7919', 'ab')",
    "s NOT IN ('http://x.org/item/1/edit#7919')",
    "startsWith(s, 'https://例え.jp/user/')",
    "startsWith(s, 'http://x.org/item/13/')",
    "endsWith(s, '/view?q=100')",
    "endsWith(s, 'edit#15838')",
    "hasToken(s, 'item')",
    "hasToken(s, 'view')",
    "hasToken(s, 'xyzzy')",
    "multiSearchAny(s, ['/item/42/', '/tag/99/'])",
    "multiSearchAny(s, ['/item/42/', 'ab'])",
    "match(s, 'item/42/v')",
    "match(s, '/user/(12|13)/')",
    "match(s, '.*')",
    "has(['a', 'b'], s)",
    "position(s, 'item/42/') > 0",
    "s LIKE '%/item/42/%' OR s LIKE '%/tag/99/%'",
    "s LIKE '%/item/42/%' AND s LIKE '%view%'",
    "NOT (s LIKE '%/item/42/%')",
    "lower(s) LIKE '%/item/42/%'",
    "lower(s) = 'http://x.org/item/1/edit#7919'",
    "hasTokenCaseInsensitive(s, 'ITEM')",
    "s ILIKE '%/item/42/%'",
]


@pytest.mark.parametrize("name", ["sg", "sgc", "sgl"])
def test_decisions_equal_chdb_explain(url_part, name: str) -> None:
    definition = url_part.indexes[name]
    built = SkipIndex.build(definition, url_part.data, url_part.granule_rows, url_part.columns)
    total = len(url_part.granule_rows)
    mismatches = []
    others = ",".join(n for n in url_part.indexes if n != name)
    for where in PREDICATES:
        text = url_part.harness.query(
            f"EXPLAIN indexes = 1 SELECT * FROM {url_part.qualified_table} WHERE {where} "
            "SETTINGS use_skip_indexes = 1, use_query_condition_cache = 0, "
            f"ignore_data_skipping_indices = '{others}'",
            "TabSeparatedRaw",
        )
        granules = explain_granules(text, name)
        expected = total if granules is None else granules[0]
        selected = len(built.select(where))
        useful = compile_condition(where, definition, url_part.columns).useful
        if selected != expected or useful != (granules is not None):
            mismatches.append((where, expected, selected, granules is not None, useful))
    assert not mismatches, mismatches


def test_pruning_keeps_every_matching_row(url_part) -> None:
    """No false negatives: every row a predicate matches (ClickHouse's count without indexes)
    lies in a granule bloomskip keeps."""
    definition = url_part.indexes["sg"]
    built = SkipIndex.build(definition, url_part.data, url_part.granule_rows, url_part.columns)
    starts = np.concatenate(([0], np.cumsum(url_part.granule_rows)))
    for where in PREDICATES:
        rows = url_part.harness.arrow(
            f"SELECT _part_offset FROM {url_part.qualified_table} WHERE {where} "
            "SETTINGS use_skip_indexes = 0"
        ).column(0)
        granules = np.searchsorted(starts, rows.to_numpy(), side="right") - 1
        kept = set(built.select(where).tolist())
        assert set(granules.tolist()) <= kept, where


def test_cli_explain_and_inspect_on_a_packed_part(clickhouse, capsys) -> None:
    """`bloomskip clickhouse explain` / `inspect` read a part whose sparse_grams index lives in
    skp_idx.packed with compressed marks (ClickHouse's defaults), and agree with EXPLAIN."""
    from bloomskip.cli import main

    part = clickhouse.create_part(
        {"url": "String"},
        ["INDEX sg url TYPE sparse_grams(3, 100, 4096, 3, 0) GRANULARITY 1"],
        URLS.format(count=4000),
        settings={"packed_skip_index_max_bytes": 1 << 30, "compress_marks": 1},
    )
    assert (part.path / "skp_idx.packed").is_file()
    arguments = [str(part.path), "--table-ddl", part.metadata_sql]
    for where in ["url LIKE '%/item/42/%'", "url = 'http://x.org/item/1/edit#7919'"]:
        assert main(["clickhouse", "explain", *arguments, "--where", where, "--json"]) == 0
        [entry] = json.loads(capsys.readouterr().out)["indexes"]
        kept, total = part.explain_granules(where, "sg")
        assert (entry["type"], entry["granules_selected"], entry["granules_total"]) == (
            "sparse_grams", kept, total
        )  # fmt: skip
        assert kept < total
    assert main(["clickhouse", "inspect", *arguments, "--json"]) == 0
    [entry] = json.loads(capsys.readouterr().out)["indexes"]
    assert entry["parameters"] == {
        "min_ngram_length": 3,
        "max_ngram_length": 100,
        "size_bytes": 4096,
        "hash_functions": 3,
        "seed": 0,
    }


def test_simulate_decides_as_chdb(clickhouse, tmp_path) -> None:
    """`clickhouse simulate` over the rows of a fixed-granule Wide part keeps, per predicate,
    the granules ClickHouse's EXPLAIN keeps on that part."""
    import pyarrow.parquet as pq

    from bloomskip.clickhouse.simulate import simulate_file

    index = "INDEX sg s TYPE sparse_grams(3, 100, 2048, 2, 0) GRANULARITY 1"
    part = clickhouse.create_part(
        {"s": "String"},
        [index],
        URLS.format(count=5000),
        settings={
            "index_granularity": 512,
            "index_granularity_bytes": 0,
            "min_bytes_for_wide_part": 0,
        },
    )
    pq.write_table(part.data, tmp_path / "rows.parquet")
    wheres = ["s LIKE '%/item/42/%'", "s = 'http://x.org/item/1/edit#7919'", "s LIKE '%ab%'"]
    simulation = simulate_file(tmp_path / "rows.parquet", [index], wheres, index_granularity=512)
    [report] = simulation.indexes
    assert report.type == "sparse_grams" and report.granules_total == len(part.granule_rows)
    for predicate in report.predicates:
        kept, _ = part.explain_granules(predicate.where, "sg")
        assert predicate.granules_selected == kept, predicate.where


def test_granule_bits_other_string_types(clickhouse) -> None:
    """Array(String) (every element's grams), LowCardinality(String) (each distinct value per
    granule once) and FixedString(12) (the zero padding is part of the string)."""
    part = clickhouse.create_part(
        {"arr": "Array(String)", "lc": "LowCardinality(String)", "fs": "FixedString(12)"},
        [
            "INDEX a arr TYPE sparse_grams(3, 100, 512, 2, 1) GRANULARITY 1",
            "INDEX l lc TYPE sparse_grams(4, 50, 5, 256, 3, 2) GRANULARITY 2",
            "INDEX f fs TYPE sparse_grams(3, 6, 256, 2, 3) GRANULARITY 1",
        ],
        "SELECT [toString(number), concat('/item/', toString(number % 97)), ''], "
        "concat('w', toString(number % 13), '_é/x'), toFixedString(toString(number * 7), 12) "
        "FROM numbers(3000)",
    )
    for name in ("a", "l", "f"):
        built = SkipIndex.build(part.indexes[name], part.data, part.granule_rows, part.columns)
        assert built.to_bytes() == part.index_stream(name), name
