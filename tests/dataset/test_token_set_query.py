"""``hasAnyTokens`` / ``hasAllTokens`` over a dataset: the rows chdb returns, with pruning.

ClickHouse 26.9 prunes nothing for these functions with ``tokenbf_v1`` / ``ngrambf_v1``
(ClickHouse#120583); bloomskip probes each needle token as it probes ``hasToken`` (an any-of is
a union, an all-of an intersection). The rows must be chdb's, reading the same file, whatever the
index keeps, and a row group holding a row chdb returns is never skipped.
"""

from __future__ import annotations

import random
import re
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bloomskip.dataset import Dataset
from bloomskip.errors import BloomskipError, UnsupportedPredicateError

if TYPE_CHECKING:
    from chdb.session import Session

ROWS, GROUP = 1_200, 30
# Tokens of the corpus: ASCII, mixed case, digits, non-ASCII, one a byte >= 0x80 run alone.
WORDS = ["alpha", "Alpha", "beta", "x1", "v2", "東京", "naïve", "мир", "é", "a", "b", "404"]
SEPARATORS = [" ", "-", "_", ",", "/", ".", "  ", "\t", "\u00a0"]
# Needles: the corpus's words, one word no row holds, and array needles that are no token.
NEEDLE_WORDS = [*WORDS, "zzz"]
NOT_TOKENS = ["", "a b", "x1-v2", "alpha_beta", "!!"]
INDEXES = [
    "INDEX s_tok s TYPE tokenbf_v1(512, 3, 0)",
    "INDEX s_ng s TYPE ngrambf_v1(2, 512, 2, 0)",
    "INDEX d_tok d TYPE tokenbf_v1(256, 2, 0)",
    "INDEX tags_tok tags TYPE tokenbf_v1(256, 2, 0)",
]


def _text(rng: random.Random, rare: str) -> str:
    words = [rng.choice(WORDS[:6]) for _ in range(rng.randint(0, 3))]
    if rng.random() < 0.2:
        words.append(rare)
    return "".join(w + rng.choice(SEPARATORS) for w in words).rstrip(" ")


def _corpus() -> pa.Table:
    """Rows whose rarer words cluster by row group, so a selective needle prunes."""
    rng = random.Random(32)
    s, d, tags = [], [], []
    for row in range(ROWS):
        rare = WORDS[6 + (row // GROUP) % 6]
        s.append(None if rng.random() < 0.05 else _text(rng, rare))
        d.append(rng.choice(["alpha beta", "мир", "", "x1,v2"]))
        tags.append(
            None
            if rng.random() < 0.05
            else [
                None if rng.random() < 0.1 else _text(rng, rare) for _ in range(rng.randint(0, 3))
            ]
        )
    return pa.table(
        {
            "id": pa.array(range(ROWS), pa.int64()),
            "s": pa.array(s, pa.string()),
            "d": pa.array(d, pa.string()).dictionary_encode(),
            "tags": pa.array(tags, pa.list_(pa.string())),
        }
    )


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Dataset, str]:
    path = tmp_path_factory.mktemp("token_set") / "data.parquet"
    pq.write_table(_corpus(), path, row_group_size=GROUP)
    dataset = Dataset(path)
    dataset.build_index(INDEXES, progress=False)
    return dataset, str(path)


def _clickhouse_ids(session: Session, path: str, where: str) -> list[int]:
    text = session.query(
        f"SELECT id FROM file('{path}', Parquet) WHERE {where} ORDER BY id "
        "SETTINGS input_format_parquet_filter_push_down = 0",
        "TSVRaw",
    ).bytes()
    return [int(line) for line in text.split()]


def _ours(dataset: Dataset, where: str) -> list[int]:
    return sorted(dataset.query(where, columns=["id"]).column("id").to_pylist())


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


@st.composite
def predicates(draw) -> str:
    function = draw(st.sampled_from(["hasAnyTokens", "hasAllTokens", "hasAnyToken"]))
    column = draw(st.sampled_from(["s", "d", "tags"]))
    if draw(st.booleans()):
        needles = draw(st.lists(st.sampled_from(NEEDLE_WORDS + NOT_TOKENS), max_size=4))
        argument = "[" + ", ".join(_quote(n) for n in needles) + "]"
    else:
        words = draw(st.lists(st.sampled_from(NEEDLE_WORDS), max_size=4))
        glue = draw(st.sampled_from(SEPARATORS))
        argument = _quote(glue.join(words))
    where = f"{function}({column}, {argument})"
    return f"NOT {where}" if draw(st.integers(0, 4)) == 0 else where


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(where=predicates())
def test_rows_equal_chdb(corpus, chdb_session: Session, where: str) -> None:
    dataset, path = corpus
    theirs = _clickhouse_ids(chdb_session, path, where)
    assert _ours(dataset, where) == theirs, where
    # No false negative: every row group holding a row chdb returns is read.
    kept = {group for _, group in dataset.explain(where).row_groups()}
    assert {row // GROUP for row in theirs} <= kept, where


@pytest.mark.parametrize(
    "where",
    [
        "hasAnyTokens(s, ['naïve', 'мир'])",
        "hasAnyTokens(s, 'naïve,мир')",
        "hasAllTokens(s, 'naïve alpha')",
        "hasAllTokens(s, ['naïve', 'Alpha'])",
        "hasAnyTokens(tags, ['404'])",
        "hasAnyTokens(s, 'zzz')",
        "hasAnyTokens(s, [])",
        "hasAllTokens(s, '')",
        "hasAllTokens(s, ['naïve', 'a b'])",
    ],
)
def test_prunes_without_losing_rows(corpus, chdb_session: Session, where: str) -> None:
    dataset, path = corpus
    theirs = _clickhouse_ids(chdb_session, path, where)
    explanation = dataset.explain(where)
    kept = {group for _, group in explanation.row_groups()}
    assert {row // GROUP for row in theirs} <= kept
    assert len(kept) < ROWS // GROUP / 2, (where, len(kept))
    assert _ours(dataset, where) == theirs


def test_empty_needles_skip_every_row_group(corpus) -> None:
    dataset, _ = corpus
    for where in ("hasAnyTokens(s, [])", "hasAllTokens(s, [])", "hasAnyTokens(s, '!!')"):
        assert dataset.explain(where).row_groups() == [], where
    # Negated, they are true for every non-NULL row: nothing may be skipped.
    assert len(dataset.explain("NOT hasAllTokens(s, [])").row_groups()) == ROWS // GROUP


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("hasAnyTokens(s, 1)", "Expected: const String or const Array(String)"),
        ("hasAnyTokens(s, ['a', NULL])", "Expected: const String or const Array(String)"),
        ("hasAllTokens(s, id)", "Expected: const String or const Array(String)"),
        ("hasAnyTokens(id, 'a')", "1st argument 'input'"),
        ("hasAnyTokens(s)", "Expected 2 mandatory arguments and 1 optional argument"),
        ("hasAnyTokens(s, 'a', 'nope')", "Unknown tokenizer: 'nope'"),
        ("hasAnyTokens(s, 'a', 'ngrams')", "only the default tokenizer"),
        ("hasanytokens(s, 'a')", "does not exist"),
    ],
)
def test_errors(corpus, where: str, message: str) -> None:
    dataset, _ = corpus
    with pytest.raises(UnsupportedPredicateError, match=re.escape(message)):
        dataset.query(where)


def test_explicit_default_tokenizer_and_null_needle(corpus, chdb_session: Session) -> None:
    dataset, path = corpus
    for where in (
        "hasAnyTokens(s, 'x1 東京', 'splitByNonAlpha')",
        # A NULL needle makes the function NULL (alone, ClickHouse refuses it as a filter).
        "hasAllTokens(s, NULL) OR id = 7",
        "NOT hasAnyTokens(s, NULL) OR id < 3",
    ):
        assert _ours(dataset, where) == _clickhouse_ids(chdb_session, path, where), where


def test_a_list_of_numbers_is_refused(tmp_path, chdb_session: Session) -> None:
    """ClickHouse refuses an Array(Int64) input; the exact filter must not print its numbers."""
    path = tmp_path / "numbers.parquet"
    pq.write_table(
        pa.table({"id": [1, 2], "l": pa.array([[1], [2, 3]], pa.list_(pa.int64()))}), path
    )
    where = "hasAnyTokens(l, '1')"
    with pytest.raises(Exception, match="1st argument 'input'"):
        _clickhouse_ids(chdb_session, str(path), where)
    with pytest.raises(BloomskipError, match="VARCHAR"):
        Dataset(path).query(where)


def test_segmented_index_prunes_the_same(corpus, chdb_session: Session, tmp_path) -> None:
    """The bit-sliced parts of a segmented index answer the token-set atoms as the sidecar."""
    dataset, path = corpus
    segmented = Dataset(path, index_location=tmp_path / "index")
    segmented.build_index(INDEXES, progress=False)
    for where in (
        "hasAnyTokens(s, ['naïve', 'мир'])",
        "hasAllTokens(tags, 'alpha 404')",
        "hasAnyTokens(s, []) OR hasAllTokens(d, 'мир')",
    ):
        assert segmented.explain(where).row_groups() == dataset.explain(where).row_groups()
        assert _ours(segmented, where) == _clickhouse_ids(chdb_session, path, where), where
