"""Query-side tokenizers of ClickHouse's ``ngrambf_v1`` and ``tokenbf_v1`` skip indexes.

A text skip index stores, per granule, a Bloom filter of the tokens of every row. A query
constant is turned into tokens the same way, and a granule may match only if it holds every
token. These functions turn one query constant into the list of tokens ClickHouse would add to
the query filter, for each kind of predicate:

* :meth:`QueryTokenizer.string_tokens` -- ``stringToBloomFilter`` (``=``, ``IN``, ``has``,
  ``hasToken``, ``hasAny``/``hasAll``);
* :meth:`QueryTokenizer.like_tokens` -- ``stringLikeToBloomFilter`` (``LIKE``), which drops
  every token a wildcard touches and honours ``\\`` escapes (a pattern with any other escape
  is not used by ClickHouse at all, see :func:`like_pattern_is_indexable`);
* :meth:`QueryTokenizer.substring_tokens` -- ``substringToBloomFilter`` (``startsWith``,
  ``endsWith``, ``multiSearchAny``, ``match``), which for words keeps the needle's first and last
  token only when they are known to be whole tokens of the row.

:func:`analyze_regexp` mirrors ``OptimizedRegularExpression::analyze``: the literal substrings a
regular expression requires (or alternatives of which one is required).

Strings are split by the C tokenizer that also builds the index (one tokenizer for both
sides, as ClickHouse's ``ITokenExtractor``); only the LIKE and substring rules, which look at a
pattern's wildcards and escapes, are written here.

Example:
    >>> QueryTokenizer("token").like_tokens(b"%x alpha5 beta%")
    [b'alpha5']
    >>> QueryTokenizer("ngram", 3).string_tokens("héllo".encode())
    [b'h\\xc3\\xa9l', b'\\xc3\\xa9ll', b'llo']
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from bloomskip import _native

__all__ = [
    "QueryTokenizer",
    "RegexpAnalysis",
    "analyze_regexp",
    "like_affix",
    "like_pattern_is_indexable",
    "utf8_sequence_length",
]

_TOKENIZERS = {"ngram": _native.TOKENIZER_NGRAM, "token": _native.TOKENIZER_TOKEN}
_WILDCARDS = (ord("%"), ord("_"))
_BACKSLASH = ord("\\")


def utf8_sequence_length(first_byte: int) -> int:
    """Return ClickHouse's ``UTF8::seqLength``: the byte length a UTF-8 lead byte announces.

    Continuation bytes and the invalid lead bytes 0xF8..0xFF count as one byte, as in ClickHouse
    26.9 (``seqLength`` returns 1 for ``first_octet >= 0xF8``; older releases read 5- and 6-byte
    forms there, and chdb's ``tokens(s, 'ngrams', n)`` confirms the 26.9 rule). The build side
    (the C tokenizer) uses the same rule.

    Args:
        first_byte: The byte value (0..255).

    Returns:
        1, 2, 3 or 4.

    Example:
        >>> [utf8_sequence_length(b) for b in (0x41, 0xC3, 0xE2, 0xF0, 0x80, 0xF8)]
        [1, 2, 3, 4, 1, 1]
    """
    if first_byte < 0xC0 or first_byte >= 0xF8:
        return 1
    if first_byte < 0xE0:
        return 2
    return 3 if first_byte < 0xF0 else 4


def like_pattern_is_indexable(pattern: bytes) -> bool:
    """Whether ClickHouse uses a text index for ``LIKE pattern`` at all.

    In a LIKE pattern (the bytes after SQL string-literal unescaping) ``\\%``, ``\\_`` and
    ``\\\\`` are escaped literals; a backslash before any other byte is a literal backslash
    followed by that byte (``'C:\\Users' LIKE '%\\U%'`` is true), and a trailing backslash makes
    the query fail. ClickHouse 26.9 leaves the ``ngrambf_v1`` / ``tokenbf_v1`` index out of
    ``EXPLAIN indexes = 1`` for every pattern with such a backslash (verified with chdb for
    ``LIKE``, ``NOT LIKE`` and ``like(...)``), so no tokens are derived from it: its tokenizer
    would drop the backslash and probe tokens the row does not hold.

    Args:
        pattern: The pattern's bytes.

    Returns:
        False when a backslash is followed by anything but ``%``, ``_`` or a backslash, or ends
        the pattern.

    Example:
        >>> like_pattern_is_indexable(b"%a\\%b%"), like_pattern_is_indexable(b"%\\Users%")
        (True, False)
    """
    position = pattern.find(b"\\")
    while position >= 0:
        following = pattern[position + 1 : position + 2]
        if following not in (b"%", b"_", b"\\"):
            return False
        position = pattern.find(b"\\", position + 2)
    return True


def like_affix(pattern: bytes) -> tuple[bool, bytes] | None:
    """The literal of a LIKE pattern that is a perfect prefix (``'abc%'``) or suffix (``'%abc'``).

    ClickHouse 26.9 rewrites such a ``LIKE`` into ``startsWith`` / ``endsWith`` of the literal
    before any index sees it (verified with chdb: ``s LIKE 'C:\\Users%'`` probes the n-grams of
    ``C:\\Users`` with its backslash, where ``s LIKE '%C:\\Users%'`` uses no index). In the
    literal ``\\%``, ``\\_`` and ``\\\\`` are the escaped characters and a backslash before
    anything else stays a backslash.

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
    units: list[bytes | None] = []  # None stands for an unescaped %
    position = 0
    while position < len(pattern):
        byte = pattern[position]
        if byte == _BACKSLASH:
            following = pattern[position + 1 : position + 2]
            if not following:
                return None
            units.append(following if following in (b"%", b"_", b"\\") else b"\\" + following)
            position += 2
        elif byte == ord("_"):
            return None
        else:
            units.append(None if byte == ord("%") else bytes((byte,)))
            position += 1
    wildcards = [i for i, unit in enumerate(units) if unit is None]
    if (
        not wildcards
        or None not in (units[0], units[-1])
        or (units[0] is None) == (units[-1] is None)
    ):
        return None
    is_prefix = units[-1] is None
    literal = units[: wildcards[0]] if is_prefix else units[wildcards[-1] + 1 :]
    if None in literal or len(literal) + len(wildcards) != len(units):
        return None
    return is_prefix, b"".join(literal)


def _is_separator(byte: int) -> bool:
    """Whether ``byte`` is a SplitByNonAlpha separator (non-alphanumeric ASCII)."""
    return byte < 0x80 and not (
        0x30 <= byte <= 0x39 or 0x41 <= byte <= 0x5A or 0x61 <= byte <= 0x7A
    )


@dataclass(frozen=True)
class QueryTokenizer:
    """The tokenizer of one text skip index, for query constants.

    Args:
        kind: ``"ngram"`` (``ngrambf_v1``) or ``"token"`` (``tokenbf_v1``).
        n: The n-gram length in code points (``ngram`` only).

    Raises:
        ValueError: Unknown ``kind`` or ``n < 1`` for n-grams.

    Example:
        >>> QueryTokenizer("token").substring_tokens(b"alpha5 beta", True, False)
        [b'alpha5']
    """

    kind: str
    n: int = 0

    def __post_init__(self) -> None:
        if self.kind not in ("ngram", "token"):
            raise ValueError(f"unknown tokenizer kind {self.kind!r} (expected 'ngram' or 'token')")
        if self.kind == "ngram" and self.n < 1:
            raise ValueError(f"ngram length must be at least 1, got {self.n}")

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

        For n-grams every n-gram of the needle is an n-gram of any row containing it, so the
        flags are ignored. For words, a token that touches the needle's start (unless the needle
        is a prefix of the row) or its end (unless it is a suffix) may be a fragment of a longer
        row token, so it is dropped.

        Args:
            data: The needle's bytes.
            is_prefix: The needle is known to start the row (``startsWith``).
            is_suffix: The needle is known to end the row (``endsWith``).

        Returns:
            The tokens to probe.
        """
        if self.kind == "ngram":
            return self.string_tokens(data)
        length = len(data)
        return [
            data[start:end]
            for start, end in self._spans(data)
            if (start > 0 or is_prefix) and (end < length or is_suffix)
        ]

    def like_tokens(self, pattern: bytes) -> list[bytes] | None:
        """Tokens a ``LIKE`` pattern requires (``stringLikeToBloomFilter``).

        Args:
            pattern: The pattern's bytes (after SQL string-literal unescaping).

        Returns:
            The tokens every matching row must contain, or None when ClickHouse does not use
            the index for this pattern (see :func:`like_pattern_is_indexable`).
        """
        if not like_pattern_is_indexable(pattern):
            return None
        if self.kind == "token":
            return _like_words(pattern)
        return _like_ngrams(pattern, self.n)

    def _spans(self, data: bytes) -> list[tuple[int, int]]:
        """(start, end) of every token, from the C tokenizer that builds the index: n-grams of
        n code points (``NgramTokenExtractor``) or maximal runs of ASCII alphanumerics and bytes
        >= 0x80 (``SplitByNonAlphaTokenExtractor``)."""
        return _native.tokenize(data, _TOKENIZERS[self.kind], max(self.n, 1))


def _like_words(pattern: bytes) -> list[bytes]:
    """``SplitByNonAlphaTokenizer::nextInStringLike`` applied to the whole pattern."""
    tokens: list[bytes] = []
    token = bytearray()
    bad = False  # a wildcard touches the current token
    escaped = False
    position = 0
    length = len(pattern)
    while position < length:
        byte = pattern[position]
        if not escaped and byte in _WILDCARDS:
            token.clear()
            bad = True
            position += 1
        elif not escaped and byte == _BACKSLASH:
            escaped = True
            position += 1
        elif _is_separator(byte):
            # Escaped `%`, `_` and `\` land here too: they are non-alphanumeric ASCII.
            if not bad and token:
                tokens.append(bytes(token))
            token.clear()
            bad = False
            escaped = False
            position += 1
        else:
            size = utf8_sequence_length(byte)
            token += pattern[position : position + size]
            position += size
            escaped = False
    if not bad and token:
        tokens.append(bytes(token))
    return tokens


def _like_unit_length(pattern: bytes, position: int) -> int:
    """Length of the LIKE lexical unit at ``position``: ``\\x`` pairs count as one unit."""
    if pattern[position] == _BACKSLASH and position + 1 < len(pattern):
        return 1 + utf8_sequence_length(pattern[position + 1])
    return utf8_sequence_length(pattern[position])


def _like_ngrams(pattern: bytes, n: int) -> list[bytes]:
    """``NgramsTokenizer::nextInStringLike`` applied to the whole pattern.

    Each n-gram is n literal code points with no unescaped wildcard between them; the next window
    starts one lexical unit later.
    """
    tokens: list[bytes] = []
    length = len(pattern)
    start = 0
    while start < length:
        token = bytearray()
        code_points = 0
        escaped = False
        position = start
        found = False
        while position < length:
            byte = pattern[position]
            if escaped and byte in (*_WILDCARDS, _BACKSLASH):
                token.append(byte)
                code_points += 1
                escaped = False
                position += 1
            elif not escaped and byte in _WILDCARDS:
                # The window cannot span a wildcard: restart right after it.
                token.clear()
                code_points = 0
                position += 1
                start = position
            elif not escaped and byte == _BACKSLASH:
                escaped = True
                position += 1
            else:
                size = utf8_sequence_length(byte)
                token += pattern[position : position + size]
                position += size
                code_points += 1
                escaped = False
            if code_points == n:
                found = True
                break
        if not found:
            break
        tokens.append(bytes(token))
        start += _like_unit_length(pattern, start)
    return tokens


@dataclass
class RegexpAnalysis:
    """What ``OptimizedRegularExpression::analyze`` extracts from a regular expression.

    Attributes:
        required_substring: A literal every match contains (empty when none is known).
        alternatives: Literals of which every match contains at least one (empty when none).
        is_trivial: The whole expression is one literal.
    """

    required_substring: bytes = b""
    alternatives: list[bytes] = field(default_factory=list)
    is_trivial: bool = False


@dataclass
class _Literal:
    text: bytearray = field(default_factory=bytearray)
    prefix: bool = False
    suffix: bool = False


_CASE_INSENSITIVE_FLAG = re.compile(rb"\(\?[-imsUu]*i")
_MAX_ALTERNATIVES = 4096  # verified with chdb: 3,000 top-level alternatives are still used
_MIN_REQUIRED_LENGTH = 3  # MIN_LENGTH_FOR_STRSTR: shorter top-level literals are not used
_IGNORED_LITERALS = (b"://", b"http://", b"www", b"Windows ")  # ClickHouse's web-analytics hack
_ESCAPED_LITERALS = frozenset(b"|()^$.[]?*+-{}/")
_FLAG_CHARS = frozenset(b"-imsUu")
# Characters the analysis treats as ordinary wherever they are (the others are handled one by one).
_ORDINARY_RUN = re.compile(rb"[^\x00\\|()\[\]{}^$.+?*]+")
# Escapes whose argument follows the letter (\x41, \pL, \p{Greek}, \123, \Q...\E, \C).
_MULTI_CHAR_ESCAPES = frozenset(b"xpPQEC0123456789")


def _shortest(literals: list[_Literal]) -> int:
    return min((len(literal.text) for literal in literals), default=0)


class _RegexpAnalyzer:
    """A transcription of ClickHouse's ``analyzeImpl`` recursion over one pattern."""

    def __init__(self, pattern: bytes) -> None:
        self.pattern = pattern
        self.end = len(pattern)
        # Set where ClickHouse's analysis would require a literal that a match need not contain.
        self.unsound = False

    def analyze(
        self, position: int, required: _Literal, alternatives: list[_Literal]
    ) -> tuple[int, bool]:
        """Analyze up to the closing ``)`` or the end; return (position, is_trivial)."""
        pattern, end = self.pattern, self.end
        is_first_call = position == 0
        depth = 0
        state = {"trivial": True, "prefix": True}
        required.text.clear()
        required.prefix = required.suffix = False
        has_top_level_alternative = False
        has_case_insensitive_flag = False
        substrings: list[list] = [[bytearray(), False]]  # [literal, is_prefix]
        current: list[_Literal] = []

        def finish_current() -> None:
            nonlocal current
            if not current:
                return
            if not alternatives or _shortest(alternatives) < _shortest(current):
                alternatives[:] = current
            current = []

        def finish_non_trivial(create_new: bool = True) -> None:
            state["trivial"] = False
            if create_new:
                state["prefix"] = False
            if depth != 0:
                return
            for alternative in current:
                if alternative.suffix:
                    alternative.text += substrings[-1][0]
                    alternative.suffix = False
            finish_current()
            if substrings[-1][0] and create_new:
                substrings.append([bytearray(), False])

        def finish_group(group_required: _Literal, group_alternatives: list[_Literal]) -> None:
            nonlocal current
            for alternative in group_alternatives:
                if alternative.prefix:
                    alternative.text = substrings[-1][0] + alternative.text
                    alternative.prefix = state["prefix"]
            if group_required.prefix:
                substrings[-1][0] += group_required.text
                substrings[-1][1] = state["prefix"]
            else:
                finish_non_trivial()
                substrings[-1][0] = bytearray(group_required.text)
                substrings[-1][1] = False
            state["prefix"] = state["prefix"] and group_required.prefix and group_required.suffix
            if substrings[-1][0] and not group_required.suffix:
                substrings.append([bytearray(), False])
            finish_current()
            current = group_alternatives

        in_curly = False
        in_square = False
        while position != end:
            run = _ORDINARY_RUN.match(pattern, position)
            if run is not None:
                # A run of ordinary characters at once: each one is appended to the current
                # literal (at the top level, outside {} and []) and nothing else changes.
                if depth == 0 and not in_curly and not in_square:
                    if not substrings[-1][0]:
                        substrings[-1][1] = state["prefix"]
                    substrings[-1][0] += run.group()
                position = run.end()
                continue
            char = pattern[position]
            ordinary = False
            if char == 0:
                position = end
                continue
            if char == ord("\\"):
                position += 1
                if position == end:
                    break
                if pattern[position] in _ESCAPED_LITERALS:
                    ordinary = True
                    char = pattern[position]
                elif pattern[position] in _MULTI_CHAR_ESCAPES:
                    # ClickHouse skips only the letter and reads `\x41` as a literal "41": unsound.
                    self.unsound = True
                    finish_non_trivial()
                    position += 1
                    continue
                else:
                    # \d, \w, \x41, \Q...: not understood, so it ends the literal.
                    finish_non_trivial()
                    position += 1
                    continue
            elif char == ord("|"):
                state["trivial"] = False
                state["prefix"] = False
                position += 1
                if depth == 0:
                    has_top_level_alternative = True
                    break
                continue
            elif char == ord("("):
                state["trivial"] = False
                if not in_square:
                    if (
                        position + 2 < end
                        and pattern[position + 1] == ord("?")
                        and pattern[position + 2] in _FLAG_CHARS
                    ):
                        offset = 2
                        while position + offset < end:
                            if pattern[position + offset] == ord("i"):
                                has_case_insensitive_flag = True
                            elif pattern[position + offset] not in _FLAG_CHARS:
                                break
                            offset += 1
                        position += offset
                        if position == end:
                            return position, state["trivial"]
                        if pattern[position] == ord(")"):
                            position += 1
                            continue
                    elif (
                        position + 2 < end
                        and pattern[position + 1] == ord("?")
                        and pattern[position + 2] == ord(":")
                    ):
                        position += 2
                    elif (
                        position + 3 < end
                        and pattern[position + 1] == ord("?")
                        and (
                            pattern[position + 2] in (ord("<"), ord("'"))
                            or (
                                pattern[position + 2] == ord("P")
                                and pattern[position + 3] == ord("<")
                            )
                        )
                    ):
                        position = self._skip_group_name(
                            position, 3 if pattern[position + 2] == ord("P") else 2
                        )
                    group_required = _Literal()
                    group_alternatives: list[_Literal] = []
                    position, _ = self.analyze(position + 1, group_required, group_alternatives)
                    if position == end:
                        return position, state["trivial"]
                    optional_group = (
                        position + 1 < end and pattern[position + 1] in (ord("?"), ord("*"))
                    ) or (
                        position + 2 < end
                        and pattern[position + 1] == ord("{")
                        and pattern[position + 2] == ord("0")
                    )
                    if optional_group:
                        finish_non_trivial()
                    else:
                        finish_group(group_required, group_alternatives)
                position += 1
                continue
            elif char == ord("["):
                if (
                    pattern[position + 1 : position + 2] == b"]"
                    or pattern[position + 1 : position + 3] == b"^]"
                ):
                    # RE2 reads `[]a]` as a class holding `]`; ClickHouse closes it early and
                    # takes the rest as a literal, which is unsound.
                    self.unsound = True
                in_square = True
                depth += 1
                finish_non_trivial()
                position += 1
                continue
            elif char == ord("]"):
                if not in_square:
                    ordinary = True
                else:
                    depth -= 1
                    if depth == 0:
                        in_square = False
                    finish_non_trivial()
                    position += 1
                    continue
            elif char == ord(")"):
                if not in_square:
                    break
                position += 1
                continue
            elif char in (ord("^"), ord("$"), ord("."), ord("+")):
                finish_non_trivial()
                position += 1
                continue
            elif char in (ord("{"), ord("?"), ord("*")):
                if char == ord("{"):
                    in_curly = True
                # The quantified atom may occur zero times: drop it from the literal. ClickHouse
                # drops one byte, which leaves part of a multi-byte character behind (a literal
                # no row has to contain); we drop the whole UTF-8 character.
                if depth == 0 and substrings[-1][0] and not in_square:
                    literal = substrings[-1][0]
                    while len(literal) > 1 and 0x80 <= literal[-1] < 0xC0:
                        del literal[-1]
                    del literal[-1]
                finish_non_trivial()
                position += 1
                continue
            elif char == ord("}"):
                if in_curly:
                    in_curly = False
                    position += 1
                    continue
                ordinary = True
            else:
                ordinary = True
            if ordinary:
                if depth == 0 and not in_curly and not in_square:
                    if not substrings[-1][0]:
                        substrings[-1][1] = state["prefix"]
                    substrings[-1][0].append(char)
                position += 1

        if not state["trivial"]:
            finish_non_trivial(False)
            if not has_case_insensitive_flag:
                best = None
                best_length = 0
                for index, (text, _) in enumerate(substrings):
                    if len(text) > best_length and bytes(text) not in _IGNORED_LITERALS:
                        best_length = len(text)
                        best = index
                if best is not None and (
                    best_length >= _MIN_REQUIRED_LENGTH or (not is_first_call and best_length > 0)
                ):
                    required.text = bytearray(substrings[best][0])
                    required.prefix = substrings[best][1]
                    required.suffix = best + 1 == len(substrings)
        else:
            # The whole (sub)pattern is one literal, possibly empty: it is both prefix and suffix.
            required.text = bytearray(substrings[0][0])
            required.prefix = required.suffix = True

        if has_top_level_alternative:
            if not required.text and not alternatives:
                # ClickHouse drops a branch without literals (`.*|abc` -> ['abc']), which loses
                # the rows only that branch matches. An empty alternative keeps it: it requires
                # nothing, and wherever ClickHouse is sound it already lists an empty one.
                alternatives.append(_Literal())
            if _shortest(alternatives) < len(required.text):
                alternatives[:] = [
                    _Literal(bytearray(required.text), required.prefix, required.suffix)
                ]
            next_alternatives: list[_Literal] = []
            position, _ = self.analyze(position, required, next_alternatives)
            if not next_alternatives or _shortest(next_alternatives) < len(required.text):
                alternatives.append(
                    _Literal(bytearray(required.text), required.prefix, required.suffix)
                )
            else:
                alternatives.extend(next_alternatives)
            required.text = bytearray()
            required.prefix = required.suffix = False
        return position, state["trivial"]

    def _skip_group_name(self, position: int, offset: int) -> int:
        """Skip a group name (``(?<n>``, ``(?P<n>``, ...); return where the name ends."""
        closing = ord(">") if self.pattern[position + offset] == ord("<") else ord("'")
        offset += 1
        while position + offset < self.end:
            char = self.pattern[position + offset]
            if char == closing:
                return position + offset
            if chr(char).isascii() and chr(char).isalnum():
                offset += 1
            else:
                return position
        return position


@lru_cache(maxsize=64)
def _analyze(pattern: bytes) -> tuple[bytes, tuple[bytes, ...], bool]:
    """The analysis as an immutable tuple, computed once per pattern for all its indexes."""
    from bloomskip._sql import call_deep

    required = _Literal()
    alternatives: list[_Literal] = []
    analyzer = _RegexpAnalyzer(pattern)
    if _CASE_INSENSITIVE_FLAG.search(pattern):
        # ClickHouse skips the required substring under (?i) but still uses group alternatives,
        # which are case-sensitive literals: unsound, so we use nothing.
        return b"", (), False
    if pattern.count(b"|") > _MAX_ALTERNATIVES:
        return b"", (), False  # the analysis is quadratic in the alternatives: no atom
    try:
        # One level of recursion per alternative and per group: a large stack when needed.
        _, trivial = call_deep(analyzer.analyze, 0, required, alternatives)
    except RecursionError:
        # ClickHouse's own analyze gives up (and so the index is unused) on a stack overflow.
        return b"", (), False
    if analyzer.unsound:
        return b"", (), False
    return bytes(required.text), tuple(bytes(literal.text) for literal in alternatives), trivial


def analyze_regexp(pattern: bytes) -> RegexpAnalysis:
    """Extract the literals a regular expression requires, as ClickHouse's ``analyze`` does.

    ClickHouse's ``match`` predicate on a text index probes the ``required_substring`` or, when
    there are ``alternatives``, any one of them (each as a substring needle).

    Args:
        pattern: The RE2 pattern's bytes.

    Returns:
        The analysis; both fields empty means the index cannot help.

    Example:
        >>> analyze_regexp(b"abc(de|fg)h").alternatives
        [b'abcdeh', b'abcfgh']
        >>> analyze_regexp(b"x+hello.*").required_substring
        b'hello'
    """
    required, alternatives, trivial = _analyze(pattern)
    return RegexpAnalysis(
        required_substring=required, alternatives=list(alternatives), is_trivial=trivial
    )
