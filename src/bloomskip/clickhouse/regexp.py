"""ClickHouse's ``OptimizedRegularExpression::analyze``: the literals a regular expression needs.

A ``match(s, pattern)`` predicate can use a text skip index only through literals: the
``required_substring`` every match contains, or ``alternatives`` of which every match contains
one. :func:`analyze_regexp` transcribes ClickHouse's ``analyzeImpl`` recursion, and gives up
(no literal at all) wherever ClickHouse's own result would require a literal that a match need
not contain: such a literal would skip granules holding matching rows.

Example:
    >>> analyze_regexp(b"abc(de|fg)h").alternatives
    [b'abcdeh', b'abcfgh']
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

__all__ = ["RegexpAnalysis", "analyze_regexp"]


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


class _Frame:
    """The state of one ``analyzeImpl`` call: a (sub)pattern up to its ``)``, ``|`` or end.

    Args:
        alternatives: The caller's alternatives, which the frame fills in place.
    """

    def __init__(self, alternatives: list[_Literal]) -> None:
        self.alternatives = alternatives
        self.depth = 0  # [] nesting; literals are collected at depth 0 only
        self.trivial = True
        self.prefix = True  # nothing but literals so far: a literal here starts every match
        self.in_curly = False
        self.in_square = False
        self.has_top_level_alternative = False
        self.has_case_insensitive_flag = False
        self.substrings: list[list] = [[bytearray(), False]]  # [literal, is_prefix]
        self.current: list[_Literal] = []

    def append(self, text: bytes) -> None:
        """Ordinary characters: at the top level, outside {} and [], they extend the literal."""
        if self.depth == 0 and not self.in_curly and not self.in_square:
            if not self.substrings[-1][0]:
                self.substrings[-1][1] = self.prefix
            self.substrings[-1][0] += text

    def finish_current(self) -> None:
        """Keep the pending group alternatives if their shortest beats the frame's."""
        if not self.current:
            return
        if not self.alternatives or _shortest(self.alternatives) < _shortest(self.current):
            self.alternatives[:] = self.current
        self.current = []

    def finish_non_trivial(self, create_new: bool = True) -> None:
        """A non-literal element ends the current literal (and starts a new one)."""
        self.trivial = False
        if create_new:
            self.prefix = False
        if self.depth != 0:
            return
        for alternative in self.current:
            if alternative.suffix:
                alternative.text += self.substrings[-1][0]
                alternative.suffix = False
        self.finish_current()
        if self.substrings[-1][0] and create_new:
            self.substrings.append([bytearray(), False])

    def finish_group(self, group_required: _Literal, group_alternatives: list[_Literal]) -> None:
        """Merge a group that must occur (no ``?``, ``*`` or ``{0`` after it)."""
        for alternative in group_alternatives:
            if alternative.prefix:
                alternative.text = self.substrings[-1][0] + alternative.text
                alternative.prefix = self.prefix
        if group_required.prefix:
            self.substrings[-1][0] += group_required.text
            self.substrings[-1][1] = self.prefix
        else:
            self.finish_non_trivial()
            self.substrings[-1][0] = bytearray(group_required.text)
            self.substrings[-1][1] = False
        self.prefix = self.prefix and group_required.prefix and group_required.suffix
        if self.substrings[-1][0] and not group_required.suffix:
            self.substrings.append([bytearray(), False])
        self.finish_current()
        self.current = group_alternatives

    def drop_quantified(self) -> None:
        """The atom before ``?``, ``*`` or ``{`` may occur zero times: drop it from the literal.

        ClickHouse drops one byte, which leaves part of a multi-byte character behind (a literal
        no row has to contain); the whole UTF-8 character is dropped here.
        """
        if self.depth == 0 and self.substrings[-1][0] and not self.in_square:
            literal = self.substrings[-1][0]
            while len(literal) > 1 and 0x80 <= literal[-1] < 0xC0:
                del literal[-1]
            del literal[-1]

    def choose_required(self, required: _Literal, is_first_call: bool) -> None:
        """The longest literal becomes the required substring (if it is long enough)."""
        best = None
        best_length = 0
        for index, (text, _) in enumerate(self.substrings):
            if len(text) > best_length and bytes(text) not in _IGNORED_LITERALS:
                best_length = len(text)
                best = index
        if best is not None and (
            best_length >= _MIN_REQUIRED_LENGTH or (not is_first_call and best_length > 0)
        ):
            required.text = bytearray(self.substrings[best][0])
            required.prefix = self.substrings[best][1]
            required.suffix = best + 1 == len(self.substrings)


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
        frame = _Frame(alternatives)
        required.text.clear()
        required.prefix = required.suffix = False
        while position != end:
            run = _ORDINARY_RUN.match(pattern, position)
            if run is not None:
                # A run of ordinary characters at once: nothing but the literal changes.
                frame.append(run.group())
                position = run.end()
                continue
            char = pattern[position]
            if char == 0:
                position = end
            elif char == ord("\\"):
                position += 1
                if position == end:
                    break
                if pattern[position] in _ESCAPED_LITERALS:
                    frame.append(pattern[position : position + 1])
                else:
                    if pattern[position] in _MULTI_CHAR_ESCAPES:
                        # ClickHouse skips only the letter and reads `\x41` as a literal "41".
                        self.unsound = True
                    # \d, \w, \x41, \Q...: not understood, so it ends the literal.
                    frame.finish_non_trivial()
                position += 1
            elif char == ord("|"):
                frame.trivial = False
                frame.prefix = False
                position += 1
                if frame.depth == 0:
                    frame.has_top_level_alternative = True
                    break
            elif char == ord("("):
                frame.trivial = False
                if frame.in_square:
                    position += 1
                    continue
                after = self._group(frame, position)
                if after is None:
                    return end, frame.trivial
                position = after
            elif char == ord("["):
                if (
                    pattern[position + 1 : position + 2] == b"]"
                    or pattern[position + 1 : position + 3] == b"^]"
                ):
                    # RE2 reads `[]a]` as a class holding `]`; ClickHouse closes it early and
                    # takes the rest as a literal, which is unsound.
                    self.unsound = True
                frame.in_square = True
                frame.depth += 1
                frame.finish_non_trivial()
                position += 1
            elif char == ord("]") and frame.in_square:
                frame.depth -= 1
                if frame.depth == 0:
                    frame.in_square = False
                frame.finish_non_trivial()
                position += 1
            elif char == ord(")"):
                if not frame.in_square:
                    break
                position += 1
            elif char in (ord("^"), ord("$"), ord("."), ord("+")):
                frame.finish_non_trivial()
                position += 1
            elif char in (ord("{"), ord("?"), ord("*")):
                if char == ord("{"):
                    frame.in_curly = True
                frame.drop_quantified()
                frame.finish_non_trivial()
                position += 1
            elif char == ord("}") and frame.in_curly:
                frame.in_curly = False
                position += 1
            else:
                frame.append(bytes((char,)))
                position += 1

        if not frame.trivial:
            frame.finish_non_trivial(False)
            if not frame.has_case_insensitive_flag:
                frame.choose_required(required, is_first_call)
        else:
            # The whole (sub)pattern is one literal, possibly empty: it is both prefix and suffix.
            required.text = bytearray(frame.substrings[0][0])
            required.prefix = required.suffix = True
        if frame.has_top_level_alternative:
            position = self._alternation(position, required, alternatives)
        return position, frame.trivial

    def _group(self, frame: _Frame, position: int) -> int | None:
        """The group opening at ``position``: flags or name skipped, analyzed, merged into
        ``frame``. Returns the position after it, None when the pattern ends inside it."""
        pattern, end = self.pattern, self.end
        if (
            position + 2 < end
            and pattern[position + 1] == ord("?")
            and pattern[position + 2] in _FLAG_CHARS
        ):
            offset = 2
            while position + offset < end:
                if pattern[position + offset] == ord("i"):
                    frame.has_case_insensitive_flag = True
                elif pattern[position + offset] not in _FLAG_CHARS:
                    break
                offset += 1
            position += offset
            if position == end:
                return None
            if pattern[position] == ord(")"):
                return position + 1
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
                or (pattern[position + 2] == ord("P") and pattern[position + 3] == ord("<"))
            )
        ):
            position = self._skip_group_name(
                position, 3 if pattern[position + 2] == ord("P") else 2
            )
        group_required = _Literal()
        group_alternatives: list[_Literal] = []
        position, _ = self.analyze(position + 1, group_required, group_alternatives)
        if position == end:
            return None
        optional_group = (position + 1 < end and pattern[position + 1] in (ord("?"), ord("*"))) or (
            position + 2 < end
            and pattern[position + 1] == ord("{")
            and pattern[position + 2] == ord("0")
        )
        if optional_group:
            frame.finish_non_trivial()
        else:
            frame.finish_group(group_required, group_alternatives)
        return position + 1

    def _alternation(self, position: int, required: _Literal, alternatives: list[_Literal]) -> int:
        """After a top-level ``|``: this branch's literal joins the alternatives, then the rest
        of the pattern is analyzed as further branches. Returns where the analysis stopped."""
        if not required.text and not alternatives:
            # ClickHouse drops a branch without literals (`.*|abc` -> ['abc']), which loses
            # the rows only that branch matches. An empty alternative keeps it: it requires
            # nothing, and wherever ClickHouse is sound it already lists an empty one.
            alternatives.append(_Literal())
        if _shortest(alternatives) < len(required.text):
            alternatives[:] = [_Literal(bytearray(required.text), required.prefix, required.suffix)]
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
        return position

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
