"""Query-side tokenizers of ClickHouse's text skip indexes (``ngrambf_v1``, ``tokenbf_v1``,
``sparse_grams``).

A text skip index stores, per granule, a Bloom filter of the tokens of every row. A query
constant is turned into tokens the same way, and a granule may match only if it holds every
token. These functions turn one query constant into the list of tokens ClickHouse would add to
the query filter, for each kind of predicate:

* :meth:`QueryTokenizer.string_tokens` -- ``stringToBloomFilter`` (``=``, ``IN``, ``has``,
  ``hasToken``, ``hasAny``/``hasAll``);
* :meth:`QueryTokenizer.like_tokens` -- ``stringLikeToBloomFilter`` (``LIKE``), which drops
  every token a wildcard touches and honours ``\\`` escapes (a pattern with any other escape
  is not used by ClickHouse at all, see :func:`like_pattern_is_indexable`);
* :func:`needle_tokens` -- the needles of ``hasAnyTokens`` / ``hasAllTokens`` (a string split by
  the default tokenizer, or an array of tokens);
* :meth:`QueryTokenizer.substring_tokens` -- ``substringToBloomFilter`` (``startsWith``,
  ``endsWith``, ``multiSearchAny``, ``match``), which for words keeps the needle's first and last
  token only when they are known to be whole tokens of the row.

Strings are split by the C tokenizer that also builds the index (one tokenizer for both
sides, as ClickHouse's ``ITokenExtractor``). What is written here is the one reading of a LIKE
pattern's escapes and wildcards, :func:`split_like_pattern`, which the LIKE rules, the SQL
translation (``bloomskip.dataset.sql.translate``) and the substring rules share. The literals a
regular expression requires are :mod:`bloomskip.clickhouse.regexp`'s.

Example:
    >>> QueryTokenizer("token").like_tokens(b"%x alpha5 beta%")
    [b'alpha5']
    >>> QueryTokenizer("ngram", 3).string_tokens("héllo".encode())
    [b'h\\xc3\\xa9l', b'\\xc3\\xa9ll', b'llo']
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from bloomskip import _native
from bloomskip.errors import UnsupportedPredicateError

if TYPE_CHECKING:
    from bloomskip.clickhouse.ddl import IndexDefinition

__all__ = [
    "DEFAULT_TOKENIZER",
    "TOKENIZER_NAMES",
    "TOKEN_SET_FUNCTIONS",
    "LikePattern",
    "LikeWildcard",
    "NeedleTokens",
    "QueryTokenizer",
    "like_affix",
    "like_pattern_is_indexable",
    "needle_tokens",
    "split_like_pattern",
    "utf8_sequence_length",
]

_TOKENIZERS = {
    "ngram": _native.TOKENIZER_NGRAM,
    "token": _native.TOKENIZER_TOKEN,
    "sparse_grams": _native.TOKENIZER_SPARSE_GRAMS,
}
# The bytes a sparse gram of a LIKE pattern must not hold (SparseGramsTokenExtractor::
# nextInStringLike drops every gram with a wildcard or a backslash).
_SPARSE_LIKE_SPECIAL = re.compile(rb"[%_\\]")

# hasAnyTokens / hasAllTokens and their singular aliases (ClickHouse 25.10+; names are
# case-sensitive): "any" or "all" of the needles.
TOKEN_SET_FUNCTIONS = {
    "hasAnyTokens": "any",
    "hasAnyToken": "any",
    "hasAllTokens": "all",
    "hasAllToken": "all",
}
# Their default tokenizer (that of tokenbf_v1), the one bloomskip reads, and every tokenizer
# name ClickHouse 26.9 accepts as their third argument.
DEFAULT_TOKENIZER = "splitByNonAlpha"
TOKENIZER_NAMES = frozenset({"splitByNonAlpha", "ngrams", "splitByString", "array", "sparseGrams"})

_Text = TypeVar("_Text", str, bytes)

# A backslash with the character it may escape, or an unescaped wildcard.
_LIKE_SPECIAL = {str: re.compile(r"\\[%_\\]?|[%_]"), bytes: re.compile(rb"\\[%_\\]?|[%_]")}
_LIKE_METACHARACTER = {str: re.compile(r"[%_\\]"), bytes: re.compile(rb"[%_\\]")}


def utf8_sequence_length(first_byte: int) -> int:
    """Return ClickHouse's ``UTF8::seqLength``: the byte length a UTF-8 lead byte announces.

    Continuation bytes and the invalid lead bytes 0xF8..0xFF count as one byte, as in ClickHouse
    26.9 (``seqLength`` returns 1 for ``first_octet >= 0xF8``; older releases read 5- and 6-byte
    forms there, and chdb's ``tokens(s, 'ngrams', n)`` confirms the 26.9 rule). The answer is
    the C n-gram tokenizer's, which builds and queries the index: its first one-code-point
    n-gram of the byte followed by three more.

    Args:
        first_byte: The byte value (0..255).

    Returns:
        1, 2, 3 or 4.

    Raises:
        ValueError: ``first_byte`` is not in 0..255.

    Example:
        >>> [utf8_sequence_length(b) for b in (0x41, 0xC3, 0xE2, 0xF0, 0x80, 0xF8)]
        [1, 2, 3, 4, 1, 1]
    """
    [(_, end), *_] = _native.tokenize(bytes((first_byte, 0, 0, 0)), _native.TOKENIZER_NGRAM, 1)
    return end


class LikeWildcard(enum.Enum):
    """An unescaped wildcard of a LIKE pattern."""

    ANY = "%"  # any run of characters, the empty one included
    ONE = "_"  # exactly one character


@dataclass(frozen=True)
class LikePattern(Generic[_Text]):
    """A ClickHouse LIKE pattern split into literal runs and wildcards.

    Attributes:
        pattern: The pattern as written (after SQL string-literal unescaping).
        parts: Maximal non-empty literal runs, escapes resolved, and :class:`LikeWildcard`
            members, in pattern order.
        lone_backslash: Some backslash escapes nothing (it precedes a character other than
            ``%``, ``_`` or a backslash) and so stands for itself.
    """

    pattern: _Text
    parts: tuple[_Text | LikeWildcard, ...]
    lone_backslash: bool

    def escaped(self) -> _Text:
        """The pattern's canonical spelling: ``%``, ``_`` and ``\\`` escaped in every literal.

        It matches exactly what :attr:`pattern` matches, in ClickHouse and in DuckDB's
        ``LIKE ... ESCAPE '\\'``.

        Returns:
            The escaped pattern, ``str`` or ``bytes`` as :attr:`pattern`.

        Example:
            >>> split_like_pattern(r"C:\\Users\\_%").escaped()
            'C:\\\\\\\\Users\\\\_%'
        """
        is_text = isinstance(self.pattern, str)
        metacharacter = _LIKE_METACHARACTER[type(self.pattern)]
        escape = r"\\\g<0>" if is_text else rb"\\\g<0>"
        pieces = [
            (part.value if is_text else part.value.encode())
            if isinstance(part, LikeWildcard)
            else metacharacter.sub(escape, part)
            for part in self.parts
        ]
        return self.pattern[:0].join(pieces)


_LIKE_WILDCARDS = {
    "%": LikeWildcard.ANY,
    "_": LikeWildcard.ONE,
    b"%": LikeWildcard.ANY,
    b"_": LikeWildcard.ONE,
}


def split_like_pattern(pattern: _Text) -> LikePattern[_Text]:
    """Split a LIKE pattern the way ClickHouse reads it (``likePatternToRegexp``).

    ``\\%``, ``\\_`` and ``\\\\`` are the escaped literal characters; a backslash before any other
    character is a literal backslash followed by that character (verified with chdb:
    ``'C:\\Users' LIKE '%\\Users'`` holds); a pattern ending in a lone backslash is refused. This
    is the only reading of LIKE escapes in bloomskip: the text-index rules and the SQL
    translation use it alike.

    Args:
        pattern: The pattern's text or bytes, after SQL string-literal unescaping.

    Returns:
        The pattern's parts; literal runs have the type of ``pattern``.

    Raises:
        UnsupportedPredicateError: The pattern ends in a backslash that escapes nothing
            (ClickHouse's "Invalid escape sequence at the end of LIKE pattern").

    Example:
        >>> split_like_pattern(b"%a\\\\%b_\\\\x").parts
        (<LikeWildcard.ANY: '%'>, b'a%b', <LikeWildcard.ONE: '_'>, b'\\\\x')
    """
    parts: list = []
    literal: list = []  # pieces of the current literal run
    lone_backslash = False
    position = 0
    for special in _LIKE_SPECIAL[type(pattern)].finditer(pattern):
        literal.append(pattern[position : special.start()])
        text = special.group()
        position = special.end()
        if text in _LIKE_WILDCARDS:
            _flush(literal, parts)
            parts.append(_LIKE_WILDCARDS[text])
        elif len(text) == 2:
            literal.append(text[1:])
        elif position == len(pattern):
            raise UnsupportedPredicateError(
                f"Invalid escape sequence at the end of LIKE pattern {pattern!r}"
            )
        else:
            literal.append(text)
            lone_backslash = True
    literal.append(pattern[position:])
    _flush(literal, parts)
    return LikePattern(pattern, tuple(parts), lone_backslash)


def _flush(literal: list, parts: list) -> None:
    """Move the pieces of a literal run into ``parts`` as one run (if it is not empty)."""
    run = literal[0][:0].join(literal) if literal else None
    if run:
        parts.append(run)
    literal.clear()


def like_pattern_is_indexable(pattern: bytes) -> bool:
    """Whether ClickHouse uses a text index for ``LIKE pattern`` at all.

    ClickHouse 26.9 leaves the ``ngrambf_v1`` / ``tokenbf_v1`` index out of
    ``EXPLAIN indexes = 1`` for every pattern with a lone backslash (one that escapes nothing,
    see :func:`split_like_pattern`; verified with chdb for ``LIKE``, ``NOT LIKE`` and
    ``like(...)``), so no tokens are derived from it: its tokenizer would drop the backslash and
    probe tokens the row does not hold. A pattern ending in a backslash fails the query.

    Args:
        pattern: The pattern's bytes.

    Returns:
        False when a backslash is followed by anything but ``%``, ``_`` or a backslash, or ends
        the pattern.

    Example:
        >>> like_pattern_is_indexable(b"%a\\\\%b%"), like_pattern_is_indexable(b"%\\\\Users%")
        (True, False)
    """
    try:
        return not split_like_pattern(pattern).lone_backslash
    except UnsupportedPredicateError:
        return False


def like_affix(pattern: bytes) -> tuple[bool, bytes] | None:
    """The literal of a LIKE pattern that is a perfect prefix (``'abc%'``) or suffix (``'%abc'``).

    ClickHouse 26.9 rewrites such a ``LIKE`` into ``startsWith`` / ``endsWith`` of the literal
    before any index sees it (verified with chdb: ``s LIKE 'C:\\Users%'`` probes the n-grams of
    ``C:\\Users`` with its backslash, where ``s LIKE '%C:\\Users%'`` uses no index). The literal
    is read by :func:`split_like_pattern`.

    Args:
        pattern: The pattern's bytes.

    Returns:
        ``(is_prefix, literal)``: True with the literal for ``literal%`` (any number of final
        ``%``), False for ``%literal``; None for any other pattern (another wildcard, both ends,
        none, a trailing backslash).

    Example:
        >>> like_affix(b"C:%"), like_affix(b"%%a"), like_affix(b"%a%"), like_affix(b"a_%")
        ((True, b'C:'), (False, b'a'), None, None)
    """
    try:
        parts = split_like_pattern(pattern).parts
    except UnsupportedPredicateError:
        return None
    literals = [i for i, part in enumerate(parts) if not isinstance(part, LikeWildcard)]
    if len(literals) != 1 or len(parts) == 1 or LikeWildcard.ONE in parts:
        return None
    if literals[0] == 0:
        return True, parts[0]
    if literals[0] == len(parts) - 1:
        return False, parts[-1]
    return None


@dataclass(frozen=True)
class QueryTokenizer:
    """The tokenizer of one text skip index, for query constants.

    Args:
        kind: ``"ngram"`` (``ngrambf_v1``), ``"token"`` (``tokenbf_v1``) or ``"sparse_grams"``.
        n: The n-gram length in code points (``ngram``), or the sparse-gram lengths packed by
            :func:`bloomskip.bits.sparse_grams_parameter` (``sparse_grams``).

    Raises:
        ValueError: Unknown ``kind``, ``n < 1`` for n-grams, invalid packed lengths.

    Example:
        >>> QueryTokenizer("token").substring_tokens(b"alpha5 beta", True, False)
        [b'alpha5']
    """

    kind: str
    n: int = 0

    def __post_init__(self) -> None:
        if self.kind not in _TOKENIZERS:
            raise ValueError(
                f"unknown tokenizer kind {self.kind!r} (expected 'ngram', 'token' or "
                "'sparse_grams')"
            )
        if self.kind == "ngram" and self.n < 1:
            raise ValueError(f"ngram length must be at least 1, got {self.n}")
        if self.kind == "sparse_grams":
            _native.tokenize(b"", _TOKENIZERS[self.kind], self.n)  # checks the packed lengths

    @classmethod
    def for_index(cls, definition: IndexDefinition) -> QueryTokenizer:
        """The query tokenizer of a text index definition.

        Args:
            definition: An ``ngrambf_v1``, ``tokenbf_v1`` or ``sparse_grams`` definition.

        Returns:
            Its tokenizer.

        Raises:
            ValueError: ``definition`` is not a text index.

        Example:
            >>> from bloomskip.clickhouse.ddl import parse_index_definition
            >>> d = parse_index_definition("s TYPE sparse_grams(3, 100, 256, 2, 0)")
            >>> QueryTokenizer.for_index(d).string_tokens(b"abcde")
            [b'abc', b'bcd', b'cde']
        """
        if definition.tokenizer is None:
            raise ValueError(f"a {definition.type} index has no tokenizer")
        return cls(definition.tokenizer, definition.tokenizer_argument)

    def string_tokens(self, data: bytes) -> list[bytes]:
        """Tokens of an exact-match constant (``stringToBloomFilter``).

        Args:
            data: The constant's bytes.

        Returns:
            The tokens in order (duplicates kept; adding one twice is harmless).
        """
        return [data[start:end] for start, end in self._spans(data)]

    def substring_tokens(self, data: bytes, is_prefix: bool, is_suffix: bool) -> list[bytes]:
        """Tokens of a substring needle (``substringToBloomFilter``).

        For n-grams every n-gram of the needle is an n-gram of any row containing it, and so is
        every sparse gram (whether a gram is one depends only on the code points it spans), so
        the flags are ignored. For words, a token that touches the needle's start (unless the needle
        is a prefix of the row) or its end (unless it is a suffix) may be a fragment of a longer
        row token, so it is dropped.

        Args:
            data: The needle's bytes.
            is_prefix: The needle is known to start the row (``startsWith``).
            is_suffix: The needle is known to end the row (``endsWith``).

        Returns:
            The tokens to probe.
        """
        if self.kind != "token":
            return self.string_tokens(data)
        length = len(data)
        return [
            data[start:end]
            for start, end in self._spans(data)
            if (start > 0 or is_prefix) and (end < length or is_suffix)
        ]

    def like_tokens(self, pattern: bytes) -> list[bytes] | None:
        """Tokens a ``LIKE`` pattern requires (``stringLikeToBloomFilter``).

        Every literal run of the pattern is a substring of a matching row, which starts the
        row when the run starts the pattern and ends it when the run ends the pattern: its
        tokens are the substring tokens of the run with those two flags (``nextInStringLike``:
        a word a wildcard touches is dropped, an n-gram never spans a wildcard).

        ClickHouse's ``nextInStringLike`` steps over the pattern's bytes by UTF-8 lead bytes, so
        an invalid lead byte before a wildcard, an escape or a separator swallows it into a
        token no row holds (verified with chdb 26.9: ``s LIKE '\\xC3 ab'`` on a tokenbf index,
        and ``s LIKE '\\xC3%ab'`` on an ngrambf one, skip the granule of the matching row).
        The runs here are split where the row's own tokenizer splits them, which keeps those
        rows.

        Args:
            pattern: The pattern's bytes (after SQL string-literal unescaping).

        Sparse grams are taken from the pattern as written, and a gram holding ``%``, ``_`` or
        a backslash is dropped (``SparseGramsTokenExtractor::nextInStringLike``: escapes are
        not resolved). Whether a gram is a sparse gram depends only on what it spans, so these
        are the sparse grams of the pattern's pieces between those characters, each a
        substring of every matching row.

        Returns:
            The tokens every matching row must contain, or None when ClickHouse does not use
            the index for this pattern (see :func:`like_pattern_is_indexable`).
        """
        if self.kind == "sparse_grams":
            if not like_pattern_is_indexable(pattern):
                return None
            return [
                gram
                for piece in _SPARSE_LIKE_SPECIAL.split(pattern)
                if piece
                for gram in self.string_tokens(piece)
            ]
        try:
            like = split_like_pattern(pattern)
        except UnsupportedPredicateError:
            return None
        if like.lone_backslash:
            return None
        last = len(like.parts) - 1
        tokens: list[bytes] = []
        for position, part in enumerate(like.parts):
            if not isinstance(part, LikeWildcard):
                tokens += self.substring_tokens(part, position == 0, position == last)
        return tokens

    def _spans(self, data: bytes) -> list[tuple[int, int]]:
        """(start, end) of every token, from the C tokenizer that builds the index: n-grams of
        n code points (``NgramTokenExtractor``), maximal runs of ASCII alphanumerics and bytes
        >= 0x80 (``SplitByNonAlphaTokenExtractor``) or sparse grams (``SparseGramsImpl<true>``)."""
        return _native.tokenize(data, _TOKENIZERS[self.kind], max(self.n, 1))


@dataclass(frozen=True)
class NeedleTokens:
    """The needles of ``hasAnyTokens`` / ``hasAllTokens``, as ClickHouse reads them.

    Attributes:
        tokens: The distinct needles that are tokens, in order of first appearance.
        complete: Every needle is a token. An array element that is not one (empty, or holding
            a separator) is in no row's tokens, so ``hasAllTokens`` is false wherever it is
            given one, and ``hasAnyTokens`` ignores it.
    """

    tokens: tuple[bytes, ...]
    complete: bool


def needle_tokens(needles: bytes | list[bytes]) -> NeedleTokens:
    """Read the needles of ``hasAnyTokens`` / ``hasAllTokens`` with the default tokenizer.

    ClickHouse 26.9 (verified with chdb) splits a string needle by its default tokenizer,
    ``splitByNonAlpha`` (the tokenizer of ``tokenbf_v1``: runs of ASCII alphanumerics and bytes
    >= 0x80), and takes the elements of an array needle as they are, without splitting them:
    ``hasAnyTokens('a b', ['a b'])`` is 0, ``hasAnyTokens('a b', 'a b')`` is 1. No needle at
    all (``''``, ``'!!'``, ``[]``) makes both functions 0.

    Args:
        needles: A string needle's bytes, or the elements of an array needle.

    Returns:
        The :class:`NeedleTokens`.

    Example:
        >>> needle_tokens(b"GET /api-v2")
        NeedleTokens(tokens=(b'GET', b'api', b'v2'), complete=True)
        >>> needle_tokens([b"GET", b"a b", b"GET"])
        NeedleTokens(tokens=(b'GET',), complete=False)
    """
    words = QueryTokenizer("token")
    if isinstance(needles, bytes):
        return NeedleTokens(tuple(dict.fromkeys(words.string_tokens(needles))), True)
    tokens = [needle for needle in needles if words.string_tokens(needle) == [needle]]
    return NeedleTokens(tuple(dict.fromkeys(tokens)), len(tokens) == len(needles))
