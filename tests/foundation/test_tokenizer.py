"""The C tokenizer of the ClickHouse text indexes, which both the build side (text_granules) and
the query side (bloomskip.clickhouse.tokenizers) use.

The token lists are compared with chdb's ``tokens()`` / ``ngrams()`` in
tests/clickhouse/test_tokenizers.py; here the kernel is fuzzed (it also runs under the
sanitizers, where chdb cannot load) and the engine's answers for invalid lead bytes are pinned.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bloomskip import _native
from bloomskip.clickhouse.tokenizers import QueryTokenizer

_TOKEN_RUN = re.compile(rb"[0-9A-Za-z\x80-\xff]+")


def _seq_length(byte: int) -> int:
    if byte < 0xC0 or byte >= 0xF8:
        return 1
    return 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4


def _model_spans(data: bytes, tokenizer: int, n: int) -> list[tuple[int, int]]:
    """ClickHouse's NgramTokenExtractor / SplitByNonAlphaTokenExtractor over a whole string."""
    if tokenizer == _native.TOKENIZER_TOKEN:
        return [match.span() for match in _TOKEN_RUN.finditer(data)]
    spans, position = [], 0
    while position < len(data):
        end, code_points = position, 0
        while code_points < n and end < len(data):
            end += _seq_length(data[end])
            code_points += 1
        if code_points < n:
            break
        spans.append((position, min(end, len(data))))
        position += _seq_length(data[position])
    return spans


@settings(max_examples=400, deadline=None)
@given(
    st.binary(max_size=40) | st.text(max_size=12).map(str.encode),
    st.sampled_from([_native.TOKENIZER_NGRAM, _native.TOKENIZER_TOKEN]),
    st.integers(1, 6),
)
def test_tokenize_matches_the_model_on_any_bytes(data: bytes, tokenizer: int, n: int) -> None:
    spans = _native.tokenize(data, tokenizer, n)
    assert spans == _model_spans(data, tokenizer, n)
    assert all(0 <= start < end <= len(data) for start, end in spans)


def test_tokenize_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="tokenizer"):
        _native.tokenize(b"abc", _native.TOKENIZER_SPARSE_GRAMS + 1, 3)
    with pytest.raises(ValueError, match="at least 1"):
        _native.tokenize(b"abc", _native.TOKENIZER_NGRAM, 0)
    with pytest.raises(ValueError, match="sparse-gram"):
        _native.tokenize(b"abc", _native.TOKENIZER_SPARSE_GRAMS, 3)
    with pytest.raises(TypeError):
        _native.tokenize("abc", _native.TOKENIZER_TOKEN, 1)


@pytest.mark.parametrize(
    ("data", "n", "expected"),
    [
        # chdb 26.9: tokens(unhex(...), 'ngrams', n). ClickHouse's UTF8::seqLength counts the
        # lead bytes 0xF8..0xFF as one byte; a 5- or 6-byte reading of them (older releases)
        # made query n-grams the index never holds.
        ("F8616263646566", 2, ["F861", "6162", "6263", "6364", "6465", "6566"]),
        ("FC41424344", 2, ["FC41", "4142", "4243", "4344"]),
        ("FF414243", 3, ["FF4142", "414243"]),
        ("F8E2988341424344", 3, ["F8E2988341", "E298834142", "414243", "424344"]),
        ("41FDFE42", 1, ["41", "FD", "FE", "42"]),
    ],
)
def test_query_ngrams_of_invalid_lead_bytes_equal_clickhouse(data, n, expected) -> None:
    tokens = QueryTokenizer("ngram", n).string_tokens(bytes.fromhex(data))
    assert [token.hex().upper() for token in tokens] == expected


# Whole characters and the one-byte invalid leads; no wildcard or escape.
_LITERAL_PIECES = [b"a", b"Z9", b" ", "é".encode(), "☃".encode(), "𝄞".encode(), b"\x80", b"\xf8"]
_LITERAL_PIECES += [b"\xfc", b"\xff"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_LITERAL_PIECES), max_size=10).map(b"".join), st.integers(1, 4))
def test_like_ngrams_of_a_literal_equal_its_string_ngrams(literal: bytes, n: int) -> None:
    # The LIKE rules (Python) and the string tokenizer (C) step over code points alike. (A lead
    # byte cut short by a wildcard differs: ClickHouse's nextInStringLike takes the wildcard
    # into the n-gram, a token no row holds; bloomskip's LIKE rule splits at the wildcard, see
    # tests/clickhouse/test_like_pattern.py.)
    tokenizer = QueryTokenizer("ngram", n)
    assert tokenizer.like_tokens(b"%" + literal + b"%") == tokenizer.string_tokens(literal)


def test_a_granule_holding_an_invalid_lead_byte_row_is_kept() -> None:
    # The query n-grams of '\xF8abcdef' once took 0xF8 for a 5-byte lead and probed an n-gram
    # the index never held: the granule with the matching row was skipped (a false negative).
    import pyarrow as pa

    from bloomskip.clickhouse.condition import compile_condition
    from bloomskip.clickhouse.ddl import parse_index_definition
    from bloomskip.clickhouse.index import SkipIndex

    columns = {"s": "String"}
    definition = parse_index_definition("INDEX i s TYPE ngrambf_v1(2, 256, 2, 0) GRANULARITY 1")
    rows = pa.array([bytes.fromhex("F8616263646566"), b"zzzz"], pa.binary())
    index = SkipIndex.build(definition, pa.table({"s": rows}), [1, 1], columns)
    condition = compile_condition("s = '\\xF8abcdef'", definition, columns)
    assert condition.may_match(index).tolist() == [True, False]
