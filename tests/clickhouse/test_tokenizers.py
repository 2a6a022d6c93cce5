"""Query-side tokenizers against ClickHouse's own ``tokens()`` / ``ngrams()`` and its analyzer.

String tokens are compared with chdb's ``tokens(s)`` (SplitByNonAlpha) and ``ngrams(s, n)`` on
random text, including non-ASCII and invalid UTF-8. LIKE, substring and regexp rules have no SQL
function of their own; they are checked here on the cases ClickHouse's sources and the verified
research document spell out, and end to end against ``EXPLAIN`` in test_condition_explain.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bloomskip.clickhouse.regexp import analyze_regexp
from bloomskip.clickhouse.tokenizers import (
    QueryTokenizer,
    like_pattern_is_indexable,
    utf8_sequence_length,
)

TOKEN = QueryTokenizer("token")

# Text that exercises separators, wildcards, escapes, multi-byte UTF-8 and stray bytes.
_ALPHABET = list("ab Z9_-%\\.,") + ["é", "☃", "Привет", "𝄞", "\x00"]


def _random_corpus(count: int, seed: int) -> list[bytes]:
    rng = np.random.default_rng(seed)
    corpus = [b"", b"a", b"ab", b"abc", "☃".encode(), b"\xc3", b"\xe2\x98", b"\xff\xfe", b"a\x80b"]
    for _ in range(count):
        pieces = rng.choice(len(_ALPHABET), size=rng.integers(0, 12))
        text = "".join(_ALPHABET[i] for i in pieces).encode()
        if rng.random() < 0.2:
            # Cut inside a multi-byte character, or append a stray byte: invalid UTF-8.
            text = text[: rng.integers(0, len(text) + 1)] + bytes([int(rng.integers(0x80, 0x100))])
        corpus.append(text)
    return corpus


def _chdb_tokens(clickhouse, strings: list[bytes], expression: str) -> list[list[bytes]]:
    """Evaluate ``expression`` (over ``s``) in chdb for each string; token lists as bytes."""
    literal = ", ".join(f"unhex('{s.hex()}')" for s in strings)
    table = clickhouse.arrow(
        f"SELECT arrayMap(x -> hex(x), {expression}) AS t "
        f"FROM (SELECT arrayJoin([{literal}]) AS s, rowNumberInAllBlocks() AS r) ORDER BY r"
    )
    return [[bytes.fromhex(h) for h in row] for row in table.column("t").to_pylist()]


def test_string_tokens_equal_clickhouse_tokens(clickhouse) -> None:
    corpus = _random_corpus(400, seed=1)
    expected = _chdb_tokens(clickhouse, corpus, "tokens(s)")
    assert [TOKEN.string_tokens(s) for s in corpus] == expected


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_string_ngrams_equal_clickhouse_ngrams(clickhouse, n: int) -> None:
    # ClickHouse's ngrams() only accepts valid UTF-8 lead bytes per window; the index tokenizer
    # clips at the end of the string, which ngrams() does too.
    corpus = [s for s in _random_corpus(300, seed=n) if _valid_utf8(s)]
    expected = _chdb_tokens(clickhouse, corpus, f"ngrams(s, {n})")
    assert [QueryTokenizer("ngram", n).string_tokens(s) for s in corpus] == expected


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_string_ngrams_equal_the_index_tokenizer_on_any_bytes(clickhouse, n: int) -> None:
    # tokens(s, 'ngrams', n) is the ngrambf_v1 tokenizer itself, invalid UTF-8 included: a lead
    # byte 0xF8-0xFF is one byte (the query side once read it as 5-6, keeping n-grams no granule
    # holds: a false negative).
    stray_leads = [bytes([lead]) + b"abcdef" for lead in range(0xF0, 0x100)]
    corpus = _random_corpus(300, seed=10 + n) + stray_leads
    expected = _chdb_tokens(clickhouse, corpus, f"tokens(s, 'ngrams', {n})")
    assert [QueryTokenizer("ngram", n).string_tokens(s) for s in corpus] == expected


def _valid_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(_ALPHABET), max_size=10))
def test_string_tokens_equal_clickhouse_tokens_property(clickhouse, pieces: list[str]) -> None:
    text = "".join(pieces).encode()
    [expected] = _chdb_tokens(clickhouse, [text], "tokens(s)")
    assert TOKEN.string_tokens(text) == expected


def test_utf8_sequence_length_follows_lead_byte() -> None:
    lengths = [utf8_sequence_length(b) for b in range(256)]
    assert lengths[:0xC0] == [1] * 0xC0
    assert set(lengths[0xC0:0xE0]) == {2}
    assert set(lengths[0xE0:0xF0]) == {3}
    assert set(lengths[0xF0:0xF8]) == {4}
    assert lengths[0xF8:] == [1] * 8  # not lead bytes in ClickHouse 26.9


@pytest.mark.parametrize(
    ("pattern", "tokens"),
    [
        # research/clickhouse.md §6, each verified against EXPLAIN in chdb 26.9.
        (b"%alpha5 beta%", []),
        (b"%alpha5%", []),
        (b"alpha5 %", [b"alpha5"]),
        (b"%x alpha5 beta%", [b"alpha5"]),
        (b"%beta-999 gamma%", [b"999"]),
        # Escaped wildcards and backslashes are separators for tokenbf.
        (b"%x a\\%b c%", [b"a", b"b"]),
        (b"%x a\\_b\\\\c d%", [b"a", b"b", b"c"]),
        # A wildcard touching a token drops it on either side.
        (b"ab_cd ef", [b"ef"]),
        (b"", []),
        ("%x ☃é y%".encode(), ["☃é".encode()]),
    ],
)
def test_token_like_tokens(pattern: bytes, tokens: list[bytes]) -> None:
    assert TOKEN.like_tokens(pattern) == tokens


@pytest.mark.parametrize(
    ("pattern", "n", "tokens"),
    [
        (b"%a1_ b%", 3, []),
        (b"abc%de", 2, [b"ab", b"bc", b"de"]),
        # \% is one literal code point; windows slide by lexical units.
        (b"ab\\%cd", 3, [b"ab%", b"b%c", b"%cd"]),
        (b"a\\\\%b", 2, [b"a\\"]),
        ("%При%".encode(), 2, ["Пр".encode(), "ри".encode()]),
        (b"ab", 3, []),
    ],
)
def test_ngram_like_tokens(pattern: bytes, n: int, tokens: list[bytes]) -> None:
    assert QueryTokenizer("ngram", n).like_tokens(pattern) == tokens


@pytest.mark.parametrize(
    ("needle", "prefix", "suffix", "tokens"),
    [
        # ClickHouse's own example (ITokenizer.cpp): "Serv" is a fragment either way.
        (b"Serv", True, False, []),
        (b"Service is", True, False, [b"Service"]),
        (b" not ", False, False, [b"not"]),
        (b"alpha5 ", True, False, [b"alpha5"]),
        (b"alpha5", True, False, []),
        (b"alpha5", True, True, [b"alpha5"]),
        (b" alpha5 beta", False, True, [b"alpha5", b"beta"]),
    ],
)
def test_token_substring_tokens(needle: bytes, prefix: bool, suffix: bool, tokens: list) -> None:
    assert TOKEN.substring_tokens(needle, prefix, suffix) == tokens


def test_ngram_substring_tokens_ignore_prefix_and_suffix() -> None:
    ngram = QueryTokenizer("ngram", 3)
    for prefix in (False, True):
        for suffix in (False, True):
            assert ngram.substring_tokens(b"abcd", prefix, suffix) == [b"abc", b"bcd"]


@pytest.mark.parametrize(
    ("pattern", "required", "alternatives"),
    [
        # The expectations of ClickHouse's own gtest (gtest_optimize_re.cpp) for analyze().
        (b"abc", b"abc", []),
        (b"c([^k]*)de", b"", []),
        (b"abc(de)fg", b"abcdefg", []),
        (b"abc(de|xyz)fg", b"abc", [b"abcdefg", b"abcxyzfg"]),
        (b"abc(de?f|xyz)fg", b"abc", [b"abcd", b"abcxyzfg"]),
        (b"abc|fgk|xyz", b"", [b"abc", b"fgk", b"xyz"]),
        (b"(abc)", b"abc", []),
        (b"(abc|fgk)", b"", [b"abc", b"fgk"]),
        (b"(abc|fgk)(e|f|zkh|)", b"", [b"abc", b"fgk"]),
        (b"abc(abc|fg)xyzz", b"xyzz", [b"abcabcxyzz", b"abcfgxyzz"]),
        (b"abc[k]xyzz", b"xyzz", []),
        (b"(abc[k]xyzz)", b"xyzz", []),
        (b"abc((de)fg(hi))jk", b"abcdefghijk", []),
        (b"abc((?:de)fg(?:hi))jk", b"abcdefghijk", []),
        (b"abc((de)fghi+zzz)jk", b"abcdefghi", []),
        (b"abc((de)fg(hi))?jk", b"abc", []),
        (b"abc((de)fghi?zzz)jk", b"abcdefgh", []),
        (b"abc(*cd)jk", b"cdjk", []),
        (b"abc(de|xyz|(\\{xx\\}))fg", b"abc", [b"abcdefg", b"abcxyzfg", b"abc{xx}fg"]),
        (b"abc(abc|fg)?xyzz", b"xyzz", []),
        (b"abc(abc|fg){0,1}xyzz", b"xyzz", []),
        (
            b"abc(abc|fg)xyzz|bcdd?k|bc(f|g|h?)z",
            b"",
            [b"abcabcxyzz", b"abcfgxyzz", b"bcd", b"bc"],
        ),
        (
            b"abc(abc|fg)xyzz|bc(dd?x|kk?y|(f))k|bc(f|g|h?)z",
            b"",
            [b"abcabcxyzz", b"abcfgxyzz", b"bcd", b"bck", b"bcfk", b"bc"],
        ),
        (b"((?:abc|efg|xyz)/[a-zA-Z0-9]{1-50})(/?[^ ]*|)", b"", [b"abc/", b"efg/", b"xyz/"]),
        (b"abc|(:?xx|yy|zz|x?)def", b"", [b"abc", b"def"]),
        (b"abc|(:?xx|yy|zz|x?){1,2}def", b"", [b"abc", b"def"]),
    ],
)
def test_analyze_regexp(pattern: bytes, required: bytes, alternatives: list[bytes]) -> None:
    analysis = analyze_regexp(pattern)
    assert (analysis.required_substring, analysis.alternatives) == (required, alternatives)


@pytest.mark.parametrize(
    "pattern",
    [
        # Where ClickHouse's analysis would require a literal that a match need not contain,
        # bloomskip requires nothing (the engine's result there can lose rows).
        b".*|abc",
        b"\\x41bc",
        b"(?i)(abc|def)",
        b"[]abc]",
        b"\\101bc",
    ],
)
def test_analyze_regexp_refuses_unsound_literals(pattern: bytes) -> None:
    analysis = analyze_regexp(pattern)
    assert analysis.required_substring == b""
    # No alternatives, or an empty one: either way no literal is required.
    assert analysis.alternatives == [] or b"" in analysis.alternatives


def test_analyze_regexp_drops_whole_utf8_character_before_quantifier() -> None:
    # ClickHouse drops one byte of "é" before "?", leaving a stray lead byte in the literal.
    assert analyze_regexp("abcé?".encode()).required_substring == b"abc"


def test_unknown_tokenizer_kind_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown tokenizer kind"):
        QueryTokenizer("words")
    with pytest.raises(ValueError, match="at least 1"):
        QueryTokenizer("ngram", 0)


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_ngrams_of_long_utf8_are_code_point_windows(n: int) -> None:
    """Constants over 64 bytes take the vectorized path: n-grams are windows of n code points
    of the decoded text (4-byte characters included)."""
    text = "a☃é𝄞 Привет-" * 9
    data = text.encode()
    assert len(data) > 64
    expected = [text[i : i + n].encode() for i in range(len(text) - n + 1)]
    assert QueryTokenizer("ngram", n).string_tokens(data) == expected
    invalid = data + b"\xff\xc3"  # not UTF-8: ClickHouse's byte stepping, clipped at the end
    tokens = QueryTokenizer("ngram", n).string_tokens(invalid)
    assert tokens[: len(expected)] == expected and all(tokens)


def test_like_pattern_is_indexable_follows_clickhouse_escapes() -> None:
    # Verified with chdb (test_condition_explain): only \%, \_ and \\ keep the index in use.
    assert like_pattern_is_indexable(b"%a\\%b\\_c\\\\d%")
    assert not like_pattern_is_indexable(b"%\\Users%")
    assert not like_pattern_is_indexable(b"ab\\")
    assert not like_pattern_is_indexable("%\\☃%".encode())
    assert TOKEN.like_tokens(b"%x \\Users y%") is None
    assert QueryTokenizer("ngram", 3).like_tokens(b"%\\b%") is None
