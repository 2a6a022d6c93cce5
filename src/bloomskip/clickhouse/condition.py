"""WHERE expression -> RPN of index atoms -> which granules of a skip index may match.

This is ClickHouse's ``MergeTreeIndexConditionBloomFilter`` (``bloom_filter``) and
``MergeTreeConditionBloomFilterText`` (``ngrambf_v1`` / ``tokenbf_v1``), rebuilt on a sqlglot
parse of the predicate:

1. The predicate is parsed with sqlglot's ClickHouse dialect and turned into reverse Polish
   notation: ``AND`` / ``OR`` / ``NOT`` operators over *atoms*. An atom is a comparison the index
   understands (``=``, ``IN``, ``has``, ``LIKE``, ``startsWith``, ...) with its constant already
   reduced to hashes or tokens; anything else is ``unknown``; a numeric constant is ``always
   true`` / ``always false``.
2. For an index, every atom is tested against every granule at once: the bit positions of all
   its query values (``bits.seeded_positions`` / ``bits.pair_positions``) are looked up in the
   ``(granules, bytes)`` filter matrix with ``bits.test_bits``, giving a ``can be true`` mask.
3. The RPN is evaluated over pairs of masks ``(can_be_true, can_be_false)`` exactly as
   ClickHouse's ``BoolMask`` stack does. A granule is skipped only where ``can_be_true`` is false.

An atom never claims more than the index can prove, so a granule holding a matching row is never
skipped; ``!=``, ``NOT IN`` and ``NOT LIKE`` never prune (their atom is ``(true, maybe)``).
Constant folding is limited to literals, ``-x``, arrays, tuples, ``CAST`` and ``toType(...)``;
other constant expressions (``'a' || 'b'``, ``concat(...)``) make the atom unknown, where
ClickHouse would fold them and possibly prune.

Example:
    >>> from bloomskip.clickhouse.ddl import parse_index_definition
    >>> d = parse_index_definition("INDEX i msg TYPE tokenbf_v1(256, 2, 0)")
    >>> cond = compile_condition("hasToken(msg, 'error') OR msg LIKE '%x%'", d, {"msg": "String"})
    >>> cond.useful
    True
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING

import numpy as np

from bloomskip.clickhouse.tokenizers import QueryTokenizer, analyze_regexp
from bloomskip.errors import BloomskipError

if TYPE_CHECKING:
    import pyarrow as pa
    from sqlglot import exp

    from bloomskip.clickhouse.ddl import IndexDefinition
    from bloomskip.clickhouse.index import SkipIndex
    from bloomskip.clickhouse.types import ClickHouseType

__all__ = ["ConditionError", "IndexCondition", "compile_condition"]

_INT_RANGES = {
    "UInt8": (0, 2**8 - 1),
    "UInt16": (0, 2**16 - 1),
    "UInt32": (0, 2**32 - 1),
    "UInt64": (0, 2**64 - 1),
    "Int8": (-(2**7), 2**7 - 1),
    "Int16": (-(2**15), 2**15 - 1),
    "Int32": (-(2**31), 2**31 - 1),
    "Int64": (-(2**63), 2**63 - 1),
    "Bool": (0, 1),
}
_UNKNOWN = object()  # an atom slot ClickHouse fills with FUNCTION_UNKNOWN
_PROBE_BATCH = 1 << 22  # bit positions tested per bits.test_bits call
# A function node as (ClickHouse function name, arguments).
_Function = tuple[str, list]


class ConditionError(BloomskipError, ValueError):
    """A WHERE expression that cannot be parsed as ClickHouse SQL."""


# ------------------------------------------------------------------------------------------
# Constants


@dataclass(frozen=True)
class _Constant:
    """A folded SQL constant: kind is int, float, string (bytes), null, bool, array or tuple."""

    kind: str
    value: object

    def is_numeric(self) -> bool:
        return self.kind in ("int", "float", "bool")


class _ConstantReader:
    """Folds the literal sub-expressions ClickHouse would treat as constants."""

    def __init__(self, sql: str) -> None:
        self.sql = sql

    def read(self, node: exp.Expression) -> _Constant | None:
        from sqlglot import exp

        if isinstance(node, exp.Paren):
            return self.read(node.this)
        if isinstance(node, exp.Null):
            return _Constant("null", None)
        if isinstance(node, exp.Boolean):
            return _Constant("bool", bool(node.this))
        if isinstance(node, exp.Literal):
            if node.is_string:
                return _Constant("string", self._string_bytes(node))
            return _number(node.this)
        if isinstance(node, exp.HexString):
            text = str(node.this)
            return _Constant("int", int(text, 16)) if text else None
        if isinstance(node, exp.Neg):
            inner = self.read(node.this)
            if inner is not None and inner.kind in ("int", "float"):
                return _Constant(inner.kind, -inner.value)
            return None
        if isinstance(node, exp.Array):
            items = [self.read(item) for item in node.expressions]
            return None if any(i is None for i in items) else _Constant("array", tuple(items))
        if isinstance(node, (exp.Tuple, exp.Struct)):
            items = [self.read(item) for item in node.expressions]
            return None if any(i is None for i in items) else _Constant("tuple", tuple(items))
        if isinstance(node, exp.Cast):
            inner = self.read(node.this)
            if inner is None:
                return None
            return _cast_constant(inner, node.to.sql("clickhouse"))
        if isinstance(node, exp.Anonymous) and len(node.expressions) == 1:
            # toUInt8(5), toUUID('...'), toDate('...'): conversions ClickHouse folds.
            match = re.fullmatch(r"to([A-Z][A-Za-z0-9]*)", str(node.this))
            inner = self.read(node.expressions[0])
            if match is None or inner is None:
                return None
            return _cast_constant(inner, match.group(1))
        return None

    def _string_bytes(self, node: exp.Literal) -> bytes:
        # sqlglot decodes `\xHH` escapes into characters and then re-encodes ambiguously (a lone
        # `\xFF` and the text "ÿ" look the same), so literals with `\x` escapes are decoded from
        # the original SQL text instead.
        start, end = node.meta.get("start"), node.meta.get("end")
        if start is not None and end is not None:
            raw = self.sql[start : end + 1]
            if "\\x" in raw or "\\X" in raw:
                decoded = _decode_clickhouse_literal(raw)
                if decoded is not None:
                    return decoded
        return node.this.encode("utf-8")


_SIMPLE_ESCAPES = {
    "b": b"\b",
    "f": b"\f",
    "n": b"\n",
    "r": b"\r",
    "t": b"\t",
    "0": b"\0",
    "a": b"\a",
    "v": b"\v",
    "e": b"\x1b",
    "\\": b"\\",
    "'": b"'",
    '"': b'"',
    "N": b"",
}


def _decode_clickhouse_literal(raw: str) -> bytes | None:
    """Bytes of a single-quoted ClickHouse string literal (with quotes), as ClickHouse reads it."""
    if len(raw) < 2 or raw[0] != "'" or raw[-1] != "'":
        return None
    body = raw[1:-1]
    out = bytearray()
    i = 0
    while i < len(body):
        char = body[i]
        if char == "'" and body[i + 1 : i + 2] == "'":
            out += b"'"
            i += 2
        elif char == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in "xX" and re.fullmatch(r"[0-9A-Fa-f]{2}", body[i + 2 : i + 4]):
                out.append(int(body[i + 2 : i + 4], 16))
                i += 4
            elif nxt in _SIMPLE_ESCAPES:
                out += _SIMPLE_ESCAPES[nxt]
                i += 2
            else:
                # Unknown escapes keep their backslash (ClickHouse reads '\q' as two bytes).
                out += ("\\" + nxt).encode("utf-8")
                i += 2
        else:
            out += char.encode("utf-8")
            i += 1
    return bytes(out)


def _number(text: str) -> _Constant | None:
    try:
        return _Constant("int", int(text))
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return None
    return _Constant("float", value)


def _cast_constant(constant: _Constant, type_text: str) -> _Constant | None:
    """``CAST(constant AS type)`` for the scalar types a comparison constant can carry."""
    from bloomskip.clickhouse.types import UnsupportedTypeError, parse_clickhouse_type

    try:
        target = parse_clickhouse_type(type_text).base()
    except UnsupportedTypeError:
        return None
    converted = _convert_scalar(constant, target)
    if converted is None:
        return None
    if target.name in _INT_RANGES:
        return _Constant("int", converted)
    if target.name in ("Float32", "Float64"):
        return _Constant("float", converted)
    if target.name in ("String", "FixedString"):
        return _Constant("string", converted)
    if target.name in ("Date", "Date32", "DateTime", "UUID") and constant.kind == "string":
        return constant  # valid text of the type; the comparison converts it again
    return None


# ------------------------------------------------------------------------------------------
# convertFieldToType for the bloom_filter index


def _convert_scalar(constant: _Constant, target: ClickHouseType) -> object | None:
    """Convert a constant to ``target`` as ClickHouse's ``convertFieldToType`` does.

    Returns the value in the representation types.value_hashes reads (an int for integer-like
    types, a float, bytes for strings, UUID text), or None where ClickHouse gets NULL (the value
    does not fit the type) -- the index then has no atom for it.
    """
    name = target.name
    kind, value = constant.kind, constant.value
    if kind == "null":
        return None
    if kind == "bool":
        kind, value = "int", int(value)
    if name in _INT_RANGES:
        if kind == "string":
            parsed = _number(value.decode("utf-8", "replace").strip())
            if parsed is None:
                return None
            kind, value = parsed.kind, parsed.value
        if kind == "float":
            if not math.isfinite(value) or value != math.floor(value):
                return None
            value = int(value)
        elif kind != "int":
            return None
        low, high = _INT_RANGES[name]
        return value if low <= value <= high else None
    if name in ("Float32", "Float64"):
        if kind == "string":
            parsed = _number(value.decode("utf-8", "replace").strip())
            if parsed is None:
                return None
            kind, value = parsed.kind, parsed.value
        if kind not in ("int", "float"):
            return None
        as_float = float(value)
        if kind == "int" and int(as_float) != value:
            return None  # not exactly representable
        with np.errstate(over="ignore"):
            narrowed = float(np.float32(as_float))
        if name == "Float32" and narrowed != as_float:
            return None  # ClickHouse refuses a lossy Float64 -> Float32 conversion
        return as_float
    if name == "String":
        return value if kind == "string" else None
    if name == "FixedString":
        if kind != "string" or len(value) > target.arguments[0]:
            return None
        return value.ljust(target.arguments[0], b"\0")
    if name in ("Date", "Date32"):
        if kind != "string":
            return None
        try:
            days = (date.fromisoformat(value.decode("ascii")) - date(1970, 1, 1)).days
        except (ValueError, UnicodeDecodeError):
            return None
        low, high = (0, 2**16 - 1) if name == "Date" else (-25567, 120529)
        return days if low <= days <= high else None
    if name == "DateTime":
        if kind == "int":
            return value if 0 <= value < 2**32 else None
        if kind != "string" or (target.arguments and target.arguments[0] not in (None, "UTC")):
            return None  # time zones other than UTC are not modelled: no atom
        try:
            moment = datetime.fromisoformat(value.decode("ascii"))
        except (ValueError, UnicodeDecodeError):
            return None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        seconds = int(moment.timestamp())
        return seconds if 0 <= seconds < 2**32 else None
    if name == "UUID":
        if kind != "string":
            return None
        text = value.decode("ascii", "replace")
        return (
            text
            if re.fullmatch(r"[0-9A-Fa-f]{8}(-?[0-9A-Fa-f]{4}){3}-?[0-9A-Fa-f]{12}", text)
            else None
        )
    return None


def _arrow_type_for(target: ClickHouseType) -> pa.DataType:
    import pyarrow as pa

    name = target.name
    if name in _INT_RANGES or name in ("Date", "Date32", "DateTime"):
        unsigned = name.startswith("UInt") or name in ("Bool", "Date", "DateTime")
        return pa.uint64() if unsigned else pa.int64()
    if name in ("Float32", "Float64"):
        return pa.float64()
    if name == "UUID":
        return pa.string()
    if name == "FixedString":
        return pa.binary(target.arguments[0])
    return pa.binary()


def _hash_values(
    values: list, element_type: ClickHouseType, all_required: bool = False
) -> np.ndarray:
    """bloom_filter value hashes of converted constants of ClickHouse type ``element_type``.

    Floats hash their bit pattern, so 0.0 and -0.0 hash apart although they compare equal.
    ClickHouse probes only the constant's own sign and loses the rows holding the other one
    (verified with chdb: ``f = -0.0`` counts 0 rows with the index, 1 without). Here a zero is
    probed with both signs when any value may match, and dropped when all must (hasAll).
    """
    import pyarrow as pa

    from bloomskip.clickhouse.types import value_hashes

    if element_type.base().name in ("Float32", "Float64"):
        zeros = [v for v in values if v == 0.0]
        values = [v for v in values if v != 0.0]
        if zeros and not all_required:
            values += [0.0, -0.0]
    if not values:
        return np.empty(0, np.uint64)
    array = pa.array(values, _arrow_type_for(element_type.base()))
    hashes, _ = value_hashes(array, str(element_type.base()))
    return hashes


# ------------------------------------------------------------------------------------------
# Atoms


@dataclass(frozen=True)
class _BloomAtom:
    """A bloom_filter atom: AND over components, each any/all of its value hashes matching."""

    function: str  # equals, not_equals, in, not_in, has, has_any, has_all
    components: tuple[tuple[int, np.ndarray], ...]

    @property
    def negated(self) -> bool:
        return self.function in ("not_equals", "not_in")

    @property
    def useful(self) -> bool:
        # ClickHouse 26.9 lists a bloom_filter index only for positive atoms (`x != 1` alone
        # leaves it out of EXPLAIN), verified with chdb.
        return not self.negated

    def evaluate(self, filters: _GranuleFilters) -> np.ndarray:
        result = np.ones(filters.granule_count, dtype=bool)
        for column, hashes in self.components:
            present = filters.hashes_present(column, hashes)  # (granules, values)
            if self.function == "has_all":
                result &= present.all(axis=1)
            else:
                result &= present.any(axis=1)
        return result


@dataclass(frozen=True)
class _TextAtom:
    """A text-index atom: any/all over alternatives, each an AND of (column, tokens) probes."""

    function: str  # equals, not_equals, has, in, not_in, multi_search, has_any, has_all, match
    alternatives: tuple[tuple[tuple[int, tuple[bytes, ...]], ...], ...]

    @property
    def negated(self) -> bool:
        return self.function in ("not_equals", "not_in")

    @property
    def useful(self) -> bool:
        # MergeTreeConditionBloomFilterText::alwaysUnknownOrTrue counts NOT_EQUALS / NOT_IN too.
        return True

    def evaluate(self, filters: _GranuleFilters) -> np.ndarray:
        count = filters.granule_count
        # alternative_ok[g, a]: granule g holds every token alternative a needs, on every column.
        alternative_ok = np.ones((count, len(self.alternatives)), dtype=bool)
        columns = {column for probes in self.alternatives for column, _ in probes}
        for column in columns:
            token_lists = [
                [
                    token
                    for probe_column, tokens in probes
                    if probe_column == column
                    for token in tokens
                ]
                for probes in self.alternatives
            ]
            alternative_ok &= filters.token_sets_present(column, token_lists)
        if self.function == "has_all":
            return alternative_ok.all(axis=1)
        return alternative_ok.any(axis=1)


_AtomResult = _BloomAtom | _TextAtom | object | None


@dataclass(frozen=True)
class _Element:
    """One RPN element: an operator, a constant, ``unknown`` or an atom."""

    op: str  # atom, unknown, true, false, not, and, or
    atom: _BloomAtom | _TextAtom | None = None


# ------------------------------------------------------------------------------------------
# Granule filters of one index, for vectorized probing


class _GranuleFilters:
    """The filters of one index, probed for all granules at once.

    Probing works on each column's ``(flat, offsets)`` filters as the index holds them, computing
    absolute bit positions per granule, so no per-granule matrix is ever materialized.
    """

    def __init__(self, index: SkipIndex, definition: IndexDefinition) -> None:
        self.index = index
        self.definition = definition
        self.granule_count = int(index.index_granule_count)

    def _spans(self, column: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(buffer, starts, sizes)``: granule j's filter is ``buffer[starts[j]:][:sizes[j]]``.

        A SkipIndex hands out views of its stored bytes (no gather); any other index object
        (the duck-typed contract: ``column_filters``) its gathered filters.
        """
        spans = getattr(self.index, "column_filter_spans", None)
        if spans is not None:
            return spans(column)
        flat, offsets = self.index.column_filters(column)
        return flat, offsets[:-1], np.diff(offsets)

    @staticmethod
    def _all_bits_set(
        flat: np.ndarray,
        granules: np.ndarray,
        starts: np.ndarray,
        per_item: int,
        relative: Callable[[np.ndarray], np.ndarray],
    ) -> np.ndarray:
        """``out[i, v]``: every bit of probe v is set in the filter of granule ``granules[i]``.

        ``relative(chunk)`` gives the probes' bit positions inside the filters of a chunk of
        granules, shape ``(len(chunk), probes, k)`` or broadcastable to it; each position is
        offset by its filter's first bit in ``flat``. Chunks bound the temporary arrays to about
        ``_PROBE_BATCH`` positions, whatever the number of granules and probes.
        """
        from bloomskip import bits

        out = []
        step = max(1, _PROBE_BATCH // max(1, per_item))
        for first in range(0, granules.size, step):
            chunk = granules[first : first + step]
            first_bits = starts[chunk].astype(np.uint64) * np.uint64(8)
            absolute = first_bits[:, None, None] + relative(chunk)
            present = bits.test_bits(flat, absolute.reshape(-1)).reshape(absolute.shape)
            out.append(present.all(axis=2))
        return np.concatenate(out) if out else np.ones((0, 0), dtype=bool)

    def hashes_present(self, column: int, value_hashes: np.ndarray) -> np.ndarray:
        """bloom_filter: ``out[g, i]`` = all k bits of value hash i are set in granule g.

        Each granule has its own filter size, so the position of seed s in granule g is
        ``Hash128to64(h, s) mod (8 * width_g)``: the hashes are computed once and only the modulo
        is per granule.
        """
        from bloomskip import bits, hashing

        count, k = self.granule_count, self.definition.hash_functions
        result = np.ones((count, len(value_hashes)), dtype=bool)
        if not len(value_hashes) or not count:
            return result
        flat, starts, sizes = self._spans(column)
        widths = sizes.astype(np.uint64) * np.uint64(8)
        values = np.asarray(value_hashes, dtype=np.uint64)
        seeds = np.array(bits.BF_HASH_SEEDS[:k], dtype=np.uint64)
        mixed = hashing.hash128_to_64(np.repeat(values, k), np.tile(seeds, values.size))
        mixed = mixed.reshape(values.size, k)
        granules = np.flatnonzero(widths > 0)  # an empty filter proves nothing: keep the granule
        if granules.size:
            result[granules] = self._all_bits_set(
                flat, granules, starts, mixed.size,
                lambda chunk: mixed[None, :, :] % widths[chunk, None, None],
            )  # fmt: skip
        return result

    def token_sets_present(self, column: int, token_lists: list[list[bytes]]) -> np.ndarray:
        """Text index: ``out[g, a]`` = the query filter of ``token_lists[a]`` is a subset of
        granule g's filter (an empty token list is contained in every filter)."""
        from bloomskip import bits

        result = np.ones((self.granule_count, len(token_lists)), dtype=bool)
        unique = sorted({token for tokens in token_lists for token in tokens})
        if not unique:
            return result
        size = self.definition.size_bytes
        positions = bits.pair_positions(
            unique, self.definition.seed, 8 * size, self.definition.hash_functions
        )
        number = {token: i for i, token in enumerate(unique)}
        # Each alternative's tokens as a run of token numbers; reduceat ANDs every run.
        order = [number[token] for tokens in token_lists for token in tokens]
        lengths = np.array([len(tokens) for tokens in token_lists])
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        non_empty = lengths > 0
        flat, filter_starts, widths = self._spans(column)
        granules = np.flatnonzero(widths == size)  # a malformed width keeps its granule
        if not granules.size:
            return result
        token_present = self._all_bits_set(
            flat, granules, filter_starts, positions.size, lambda chunk: positions[None, :, :]
        )[:, order]
        runs = np.logical_and.reduceat(token_present, starts[non_empty], axis=1)
        block = np.ones((len(granules), len(token_lists)), dtype=bool)
        block[:, non_empty] = runs
        result[granules] = block
        return result


# ------------------------------------------------------------------------------------------
# The compiled condition


class IndexCondition:
    """A WHERE expression compiled against one skip index.

    Attributes:
        where: The predicate text.
        useful: False when no atom of the predicate can use this index (ClickHouse then leaves
            the index out of ``EXPLAIN indexes = 1`` and reads every granule).

    Example:
        >>> from bloomskip.clickhouse.ddl import parse_index_definition
        >>> d = parse_index_definition("v TYPE bloom_filter")
        >>> compile_condition("v != 3", d, {"v": "UInt64"}).useful
        False
    """

    def __init__(self, where: str, definition: IndexDefinition, rpn: list[_Element]) -> None:
        self.where = where
        self.definition = definition
        self.rpn = rpn
        self.useful = _is_useful(rpn)

    @property
    def atom_count(self) -> int:
        """How many atoms of the predicate the index can evaluate."""
        return sum(1 for element in self.rpn if element.op == "atom")

    def may_match(self, index: SkipIndex) -> np.ndarray:
        """Which index granules may hold a row satisfying the predicate.

        Args:
            index: A built or loaded :class:`~bloomskip.clickhouse.index.SkipIndex` (anything
                with ``index_granule_count`` and ``column_filters(c)``).

        Returns:
            A bool array, one per index granule; False means the granule can be skipped.
        """
        filters = _GranuleFilters(index, self.definition)
        count = filters.granule_count
        ones = np.ones(count, dtype=bool)
        zeros = np.zeros(count, dtype=bool)
        stack: list[tuple[np.ndarray, np.ndarray]] = []
        for element in self.rpn:
            if element.op == "unknown":
                stack.append((ones, ones))
            elif element.op == "true":
                stack.append((ones, zeros))
            elif element.op == "false":
                stack.append((zeros, ones))
            elif element.op == "atom":
                matches = element.atom.evaluate(filters)
                mask = (matches, ones)
                stack.append((mask[1], mask[0]) if element.atom.negated else mask)
            elif element.op == "not":
                can_be_true, can_be_false = stack.pop()
                stack.append((can_be_false, can_be_true))
            else:
                right_true, right_false = stack.pop()
                left_true, left_false = stack.pop()
                if element.op == "and":
                    stack.append((left_true & right_true, left_false | right_false))
                else:
                    stack.append((left_true | right_true, left_false & right_false))
        if len(stack) != 1:
            raise ConditionError(f"malformed condition for {self.where!r}")
        return stack[0][0].copy()


def _is_useful(rpn: list[_Element]) -> bool:
    """ClickHouse's ``rpnEvaluatesAlwaysUnknownOrTrue``, negated: can the index prune at all?"""
    stack: list[str] = []
    for element in rpn:
        if element.op == "true":
            stack.append("always_true")
        elif element.op == "false":
            stack.append("always_false")
        elif element.op == "unknown":
            stack.append("unknown")
        elif element.op == "atom":
            stack.append("useful" if element.atom.useful else "unknown")
        elif element.op == "not":
            continue  # ClickHouse leaves the state unchanged under NOT
        else:
            right, left = stack.pop(), stack.pop()
            short, other = (
                ("always_false", "always_true")
                if element.op == "and"
                else ("always_true", "always_false")
            )
            if short in (left, right):
                stack.append(short)
            elif "useful" in (left, right):
                stack.append("useful")
            elif "unknown" in (left, right):
                stack.append("unknown")
            else:
                stack.append(other)
    return bool(stack) and stack[0] == "useful"


# ------------------------------------------------------------------------------------------
# Compilation


def _canonical(node: exp.Expression) -> str:
    """A comparable name for an expression (ClickHouse compares column names of DAG nodes)."""
    from sqlglot import exp

    if isinstance(node, exp.Paren):
        return _canonical(node.this)
    if isinstance(node, exp.Column) and not node.table:
        return node.name
    return node.sql(dialect="clickhouse")


def _parse(sql: str) -> exp.Expression:
    from bloomskip._sql import SQLSyntaxError, parse_clickhouse

    try:
        return parse_clickhouse(sql)
    except SQLSyntaxError as exc:
        raise ConditionError(f"cannot parse WHERE expression {sql!r}: {exc}") from exc


def _index_column_types(
    definition: IndexDefinition, column_types: Mapping[str, str] | Sequence[str]
) -> list[ClickHouseType]:
    from bloomskip.clickhouse.types import parse_clickhouse_type

    expressions = list(definition.expressions)
    if column_types is None:
        raise ConditionError("column types are needed to compile a condition")
    if isinstance(column_types, Mapping):
        if all(expression in column_types for expression in expressions):
            texts = [column_types[expression] for expression in expressions]
        else:
            texts = list(definition.index_column_types(dict(column_types)))
    else:
        texts = list(column_types)
        if len(texts) != len(expressions):
            raise ConditionError(
                f"{len(texts)} column types given for an index of {len(expressions)} columns"
            )
    return [parse_clickhouse_type(str(text)) for text in texts]


def compile_condition(
    where: str, definition: IndexDefinition, column_types: Mapping[str, str] | Sequence[str]
) -> IndexCondition:
    """Compile a WHERE expression against one skip index.

    Args:
        where: The predicate, ClickHouse SQL (what follows ``WHERE``).
        definition: The index (:class:`~bloomskip.clickhouse.ddl.IndexDefinition`).
        column_types: ClickHouse types: a mapping of source column (or index expression) to type,
            or a sequence with one type per index expression.

    Returns:
        The compiled condition; evaluate it with :meth:`IndexCondition.may_match`.

    Raises:
        ConditionError: If the predicate is not valid SQL.

    Example:
        >>> from bloomskip.clickhouse.ddl import parse_index_definition
        >>> d = parse_index_definition("INDEX i v TYPE bloom_filter(0.01)")
        >>> compile_condition("v IN (1, 2) AND w > 3", d, {"v": "UInt32"}).atom_count
        1
    """
    tree = _parse(where)
    types = _index_column_types(definition, column_types)
    keys = [_canonical(_parse(expression)) for expression in definition.expressions]
    if definition.type == "bloom_filter":
        builder: _RpnBuilder = _BloomRpnBuilder(where, keys, types)
    else:
        tokenizer = QueryTokenizer(definition.tokenizer, definition.ngram_size or 0)
        builder = _TextRpnBuilder(where, keys, types, tokenizer)
    return IndexCondition(where, definition, builder.build(tree))


_IN_AS_COMPARISON = {"in": "equals", "globalIn": "equals", "notIn": "notEquals"}
_IN_AS_COMPARISON["globalNotIn"] = "notEquals"
_INVERSE = {"equals": "notEquals", "notEquals": "equals", "in": "notIn", "notIn": "in"}
_INVERSE.update({"like": "notLike", "notLike": "like", "globalIn": "globalNotIn"})
_INVERSE["globalNotIn"] = "globalIn"


def _function_of(node: exp.Expression) -> _Function | None:
    """The ClickHouse function name and arguments of a sqlglot node, or None for non-functions."""
    from sqlglot import exp

    binary = {
        exp.EQ: "equals",
        exp.NEQ: "notEquals",
        exp.GT: "greater",
        exp.GTE: "greaterOrEquals",
        exp.LT: "less",
        exp.LTE: "lessOrEquals",
        exp.ArrayContains: "has",
        exp.StartsWith: "startsWith",
        exp.EndsWith: "endsWith",
        exp.RegexpLike: "match",
    }
    for klass, name in binary.items():
        if type(node) is klass:
            return name, [node.this, node.expression]
    if isinstance(node, exp.Like):
        return ("notLike" if node.args.get("negate") else "like"), [node.this, node.expression]
    if isinstance(node, exp.In):
        name = "globalIn" if node.args.get("is_global") else "in"
        if node.args.get("query") is not None:
            return name, [node.this, None]
        values = node.expressions or ([node.args["field"]] if node.args.get("field") else [])
        return name, [node.this, ("set", values)]
    if isinstance(node, exp.Bracket) and len(node.expressions) == 1:
        return "arrayElement", [node.this, node.expressions[0]]
    if isinstance(node, (exp.Tuple, exp.Struct)):
        return "tuple", list(node.expressions)
    if isinstance(node, exp.Anonymous):
        return str(node.this), list(node.expressions)
    return None


class _RpnBuilder:
    """WHERE tree -> RPN, with the atom extraction left to the index type."""

    def __init__(self, sql: str, keys: list[str], types: list[ClickHouseType]) -> None:
        self.sql = sql
        self.constants = _ConstantReader(sql)
        self.keys = keys
        self.types = types

    def key_position(self, node: exp.Expression) -> int | None:
        name = _canonical(node)
        return self.keys.index(name) if name in self.keys else None

    def named_key(self, text: str) -> int | None:
        name = _canonical(_parse(text))
        return self.keys.index(name) if name in self.keys else None

    def build(self, tree: exp.Expression) -> list[_Element]:
        rpn: list[_Element] = []
        self._traverse(tree, rpn, negate=False)
        return rpn

    def _traverse(self, node: exp.Expression, rpn: list[_Element], negate: bool) -> None:
        from sqlglot import exp

        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, (exp.And, exp.Or)):
            # ClickHouse pushes NOT down to the atoms (De Morgan) before building the RPN.
            is_and = isinstance(node, exp.And) != negate
            self._traverse(node.this, rpn, negate)
            self._traverse(node.expression, rpn, negate)
            rpn.append(_Element("and" if is_and else "or"))
            return
        if isinstance(node, exp.Not):
            self._traverse(node.this, rpn, not negate)
            return
        constant = self.constants.read(node)
        if negate and constant is not None and constant.is_numeric():
            # ClickHouse folds `NOT 0` into the constant 1 before the index sees it.
            rpn.append(_Element("false" if constant.value else "true"))
            return
        function = _function_of(node)
        if negate and function is not None and function[0] in _INVERSE:
            # not(equals) -> notEquals and so on: the inverse atom, as ClickHouse rewrites it.
            self._append_atom(node, (_INVERSE[function[0]], function[1]), rpn)
            return
        self._append_atom(node, function, rpn)
        if negate:
            rpn.append(_Element("not"))

    def _append_atom(
        self, node: exp.Expression, function: _Function | None, rpn: list[_Element]
    ) -> None:
        constant = self.constants.read(node)
        if constant is None and function is not None and self._is_empty_string_test(function):
            rpn.append(_Element("unknown"))
            return
        if constant is not None:
            if constant.kind in ("int", "float", "bool"):
                rpn.append(_Element("true" if constant.value else "false"))
            else:
                rpn.append(_Element("unknown"))
            return
        atom = self.atom(node, function) if function is not None else None
        if atom is None or atom is _UNKNOWN:
            rpn.append(_Element("unknown"))
        else:
            rpn.append(_Element("atom", atom))

    def atom(self, node: exp.Expression, function: _Function) -> _AtomResult:
        """The atom for one non-logical node, ``_UNKNOWN``, or None (no atom)."""
        raise NotImplementedError

    def _is_empty_string_test(self, function: _Function) -> bool:
        """``s = ''`` / ``s != ''`` on a plain String or FixedString index column.

        ClickHouse rewrites these into ``empty(s)`` / ``notEmpty(s)``, which no Bloom-filter
        index understands (verified with chdb for bloom_filter and tokenbf_v1). The rewrite does
        not happen for Nullable or LowCardinality columns.
        """
        name, arguments = function
        if name not in ("equals", "notEquals") or len(arguments) != 2:
            return False
        for key, other in (arguments, arguments[::-1]):
            constant = self.constants.read(other)
            if constant is None or constant.kind != "string" or constant.value != b"":
                continue
            position = self.key_position(key)
            if position is not None and self.types[position].name in ("String", "FixedString"):
                return True
        return False

    def set_values(self, argument: object) -> list[_Constant] | None:
        """The explicit elements of an IN set, or None (subquery, table, non-constant)."""
        from sqlglot import exp

        if argument is None:
            return None
        if isinstance(argument, tuple) and argument[0] == "set":
            items = argument[1]
            if len(items) == 1:
                # `x IN (1, 2)` parses as a list, `x IN ((1, 2))` and `x IN [1, 2]` as one item.
                single = self.constants.read(items[0])
                if single is not None and single.kind in ("array",):
                    return list(single.value)
            values = [self.constants.read(item) for item in items]
            return None if any(v is None for v in values) else values
        if isinstance(argument, (exp.Tuple, exp.Array, exp.Paren, exp.Literal)):
            constant = self.constants.read(argument)
            if constant is None:
                return None
            return list(constant.value) if constant.kind in ("tuple", "array") else [constant]
        return None


# ------------------------------------------------------------------------------------------
# bloom_filter


class _BloomRpnBuilder(_RpnBuilder):
    """``MergeTreeIndexConditionBloomFilter::extractAtomFromTree``."""

    def atom(
        self, node: exp.Expression, function: _Function, parent: _Function | None = None
    ) -> _AtomResult:
        name, arguments = function
        if parent is None:
            # indexOf(...) is looked for one level down, inside a comparison.
            for argument in arguments:
                inner = _function_of(argument) if argument is not None else None
                if inner is not None and inner[0] == "indexOf":
                    found = self.atom(argument, inner, parent=function)
                    if found is not None:
                        return found
        if len(arguments) != 2:
            return None
        if (name == "indexOf") != (parent is not None):
            return None
        left, right = arguments
        if name in ("in", "globalIn", "notIn", "globalNotIn"):
            values = self.set_values(right)
            if values is None:
                return None
            if len(values) == 1 and values[0].kind != "tuple":
                # ClickHouse rewrites a one-element IN into a comparison (verified with chdb:
                # `x IN (300)` on UInt8 leaves the index unused, as `x = 300` does).
                return self._equals(_IN_AS_COMPARISON[name], left, values[0], None)
            return self._in(name, left, values)
        if name in ("equals", "notEquals", "has", "mapContains", "indexOf", "hasAny", "hasAll"):
            constant = self.constants.read(right)
            if constant is not None:
                return self._equals(name, left, constant, parent)
            constant = self.constants.read(left)
            if constant is not None and name in ("equals", "notEquals"):
                return self._equals(name, right, constant, parent)
        return None

    def _equals(
        self, name: str, key: exp.Expression, constant: _Constant, parent: _Function | None
    ) -> _AtomResult:
        position = self.key_position(key)
        if position is not None:
            index_type = self.types[position]
            is_array = index_type.name == "Array"
            if name in ("has", "indexOf"):
                if not is_array:
                    return None
                if name == "indexOf" and not _index_of_implies_has(parent, self.constants):
                    return _UNKNOWN
                element_type = index_type.nested.base()
                converted = _convert_scalar(constant, element_type)
                if converted is None:
                    return None
                return _BloomAtom("has", ((position, _hash_values([converted], element_type)),))
            if name in ("hasAny", "hasAll"):
                if not is_array or constant.kind != "array":
                    return None
                element_type = index_type.nested.base()
                converted_values = []
                for element in constant.value:
                    if element.kind not in ("int", "float", "string", "bool"):
                        return None  # NULL, nested arrays, tuples
                    converted = _convert_scalar(element, element_type)
                    if converted is None:
                        return None
                    converted_values.append(converted)
                function = "has_any" if name == "hasAny" else "has_all"
                hashes = _hash_values(converted_values, element_type, function == "has_all")
                return _BloomAtom(function, ((position, hashes),))
            if is_array:
                return None  # ClickHouse rejects `array = constant` for this index
            element_type = index_type.base()
            converted = _convert_scalar(constant, element_type)
            if converted is None:
                return None
            function = "equals" if name == "equals" else "not_equals"
            return _BloomAtom(function, ((position, _hash_values([converted], element_type)),))
        if name in ("mapContains", "has"):
            map_keys = self.named_key(f"mapKeys({_canonical(key)})")
            if map_keys is None or self.types[map_keys].name != "Array":
                return None
            element_type = self.types[map_keys].nested.base()
            converted = _convert_scalar(constant, element_type)
            if converted is None:
                return None
            return _BloomAtom("has", ((map_keys, _hash_values([converted], element_type)),))
        key_function = _function_of(key)
        if key_function is None:
            return None
        key_name, key_arguments = key_function
        if key_name == "tuple" and constant.kind == "tuple":
            if len(constant.value) != len(key_arguments):
                return None
            components = []
            function = None
            for argument, value in zip(key_arguments, constant.value, strict=True):
                found = self._equals(name, argument, value, key_function)
                if isinstance(found, _BloomAtom):
                    components.extend(found.components)
                    function = found.function
            return _BloomAtom(function, tuple(components)) if components else None
        if key_name == "arrayElement" and name in ("equals", "notEquals"):
            return self._map_element(name, key_arguments, [constant])
        return None

    def _map_element(self, name: str, key_arguments: list, values: list[_Constant]) -> _AtomResult:
        """``m['k'] = v`` / ``m['k'] IN (...)`` with a mapKeys(m) or mapValues(m) index."""
        map_node, lookup = key_arguments
        # A missing key reads as the default value, so comparing with it proves nothing.
        if any(_is_default(value) for value in values):
            return None
        map_name = _canonical(map_node)
        map_keys = self.named_key(f"mapKeys({map_name})")
        map_values = self.named_key(f"mapValues({map_name})")
        negated = name in ("notEquals", "notIn", "globalNotIn")
        function = (
            ("not_equals" if negated else "equals")
            if "quals" in name
            else ("not_in" if negated else "in")
        )
        if map_keys is not None:
            lookup_constant = self.constants.read(lookup)
            if lookup_constant is None:
                return None
            element_type = self.types[map_keys].nested.base()
            converted = _convert_scalar(lookup_constant, element_type)
            if converted is None:
                return None
            return _BloomAtom(function, ((map_keys, _hash_values([converted], element_type)),))
        if map_values is not None:
            element_type = self.types[map_values].nested.base()
            kept = _set_elements(_scalar_set(values), element_type)
            if kept is None:
                return None
            return _BloomAtom(function, ((map_values, _hash_values(kept, element_type)),))
        return None

    def _in(self, name: str, key: exp.Expression, values: list[_Constant]) -> _AtomResult:
        function = "not_in" if name in ("notIn", "globalNotIn") else "in"
        position = self.key_position(key)
        if position is not None:
            index_type = self.types[position]
            if index_type.name == "Array":
                return None
            element_type = index_type.base()
            kept = _set_elements(_scalar_set(values), element_type)
            if kept is None:
                return None
            return _BloomAtom(function, ((position, _hash_values(kept, element_type)),))
        key_function = _function_of(key)
        if key_function is None:
            return None
        key_name, key_arguments = key_function
        if key_name == "tuple":
            rows = [value.value for value in values if value.kind == "tuple"]
            if len(rows) != len(values) or any(len(r) != len(key_arguments) for r in rows):
                return None
            components = []
            for column, argument in enumerate(key_arguments):
                found = self._in(name, argument, [row[column] for row in rows])
                if isinstance(found, _BloomAtom):
                    components.extend(found.components)
            return _BloomAtom(function, tuple(components)) if components else None
        if key_name == "arrayElement":
            return self._map_element(name, key_arguments, values)
        return None


def _scalar_set(values: list[_Constant]) -> list[_Constant]:
    """The elements of a set compared with one column: ``x IN ((1, 2))`` means ``x IN (1, 2)``."""
    if len(values) == 1 and values[0].kind == "tuple":
        return list(values[0].value)
    return values


def _set_elements(values: list[_Constant], element_type: ClickHouseType) -> list | None:
    """Set elements converted to the key's type, or None when the set cannot be used.

    ClickHouse builds the set in the key's type and leaves out NULLs and numbers the type cannot
    hold (``x IN (5, 300)`` on UInt8 is ``x IN (5)``); anything else that does not convert
    leaves the index unused here rather than risk dropping a value that matches.
    """
    kept = []
    for value in values:
        if value.kind == "null":
            continue
        if value.kind in ("array", "tuple"):
            return None
        converted = _convert_scalar(value, element_type)
        if converted is None:
            if value.kind in ("int", "float", "bool") and element_type.name in _INT_RANGES:
                continue
            return None
        kept.append(converted)
    # With every element left out ClickHouse does not use the index at all (verified with chdb:
    # `x IN (300, 400)` on UInt8 is not listed by EXPLAIN), rather than skipping every granule.
    return kept or None


def _is_default(constant: _Constant) -> bool:
    return constant.value in (0, 0.0, b"", False) or constant.kind == "null"


def _index_of_implies_has(parent: _Function | None, constants: _ConstantReader) -> bool:
    """Whether the comparison around ``indexOf(arr, x)`` implies that arr contains x."""
    if parent is None:
        return True
    name, arguments = parent
    if name == "and":
        return True
    if name not in ("equals", "greater", "greaterOrEquals", "less", "lessOrEquals"):
        return False
    if len(arguments) != 2:
        return False
    reversed_ = False
    constant = constants.read(arguments[0])
    if constant is not None:
        reversed_ = True
    else:
        constant = constants.read(arguments[1])
    if constant is None or constant.kind not in ("int", "float", "bool"):
        return False
    value = constant.value
    if name == "equals":
        return value != 0
    if name == ("less" if reversed_ else "greater"):
        return value >= 0
    if name == ("lessOrEquals" if reversed_ else "greaterOrEquals"):
        return value > 0
    return False


# ------------------------------------------------------------------------------------------
# ngrambf_v1 / tokenbf_v1


_TEXT_FUNCTIONS = {
    "equals",
    "notEquals",
    "has",
    "mapContains",
    "mapContainsKey",
    "mapContainsKeyLike",
    "mapContainsValue",
    "mapContainsValueLike",
    "match",
    "like",
    "notLike",
    "startsWith",
    "endsWith",
    "multiSearchAny",
    "hasAny",
    "hasAll",
}


class _TextRpnBuilder(_RpnBuilder):
    """``MergeTreeConditionBloomFilterText::extractAtomFromTree``."""

    def __init__(
        self, sql: str, keys: list[str], types: list[ClickHouseType], tokenizer: QueryTokenizer
    ) -> None:
        super().__init__(sql, keys, types)
        self.tokenizer = tokenizer

    def atom(self, node: exp.Expression, function: _Function) -> _AtomResult:
        name, arguments = function
        if len(arguments) != 2:
            return None
        left, right = arguments
        if name in ("in", "globalIn", "notIn", "globalNotIn", "nullIn", "globalNullIn"):
            if name in ("globalNotIn",):
                return None  # not mapped to an atom by ClickHouse
            return self._in(name, left, right)
        if name in _TEXT_FUNCTIONS or name.startswith("hasToken"):
            constant = self.constants.read(right)
            if constant is not None:
                return self._equals(name, left, constant)
            constant = self.constants.read(left)
            if constant is not None and name in ("equals", "has", "hasAny", "notEquals"):
                return self._equals(name, right, constant)
        return None

    def _equals(self, name: str, key: exp.Expression, constant: _Constant) -> _AtomResult:
        if constant.kind not in ("string", "array"):
            return None
        key_position = self.key_position(key)
        key_name = _canonical(key)
        map_keys = self.named_key(f"mapKeys({key_name})")
        map_values = self.named_key(f"mapValues({key_name})")
        key_function = _function_of(key)
        if key_function is not None and key_function[0] == "arrayElement":
            if _is_default(constant) or (constant.kind == "array" and not constant.value):
                return None
            map_node, lookup = key_function[1]
            map_name = _canonical(map_node)
            keys_index = self.named_key(f"mapKeys({map_name})")
            if keys_index is not None:
                lookup_constant = self.constants.read(lookup)
                if lookup_constant is None or lookup_constant.kind not in ("string", "array"):
                    return None
                constant = lookup_constant
                key_position = keys_index
            else:
                key_position = self.named_key(f"mapValues({map_name})")
                if key_position is None:
                    return None
        tokens = self.tokenizer
        if name.startswith("hasToken"):
            case_insensitive = name.startswith("hasTokenCaseInsensitive")
            position = self.named_key(f"lower({key_name})") if case_insensitive else key_position
            if position is None or constant.kind != "string":
                return None
            value = constant.value.lower() if case_insensitive else constant.value
            return self._single("equals", position, tokens.string_tokens(value))
        if key_position is None and map_keys is None and map_values is None:
            return None
        if map_keys is not None:
            if constant.kind != "string":
                return None
            if name in ("has", "mapContainsKey", "mapContains"):
                return self._single("has", map_keys, tokens.string_tokens(constant.value))
            if name == "mapContainsKeyLike":
                return self._single("has", map_keys, tokens.like_tokens(constant.value))
            return None
        if map_values is not None:
            if constant.kind != "string":
                return None
            if name == "mapContainsValue":
                return self._single("has", map_values, tokens.string_tokens(constant.value))
            if name == "mapContainsValueLike":
                return self._single("has", map_values, tokens.like_tokens(constant.value))
            return None
        if (name == "has" and constant.kind == "array") or name in ("hasAny", "hasAll"):
            if constant.kind != "array" or any(e.kind != "string" for e in constant.value):
                return None
            alternatives = tuple(
                ((key_position, tuple(tokens.string_tokens(e.value))),) for e in constant.value
            )
            return _TextAtom("has_all" if name == "hasAll" else "has_any", alternatives)
        if name == "multiSearchAny":
            if constant.kind != "array" or any(e.kind != "string" for e in constant.value):
                return None
            alternatives = tuple(
                ((key_position, tuple(tokens.substring_tokens(e.value, False, False))),)
                for e in constant.value
            )
            return _TextAtom("multi_search", alternatives)
        if constant.kind != "string":
            return None
        value = constant.value
        simple = {
            "has": ("has", lambda: tokens.string_tokens(value)),
            "equals": ("equals", lambda: tokens.string_tokens(value)),
            "notEquals": ("not_equals", lambda: tokens.string_tokens(value)),
            "like": ("equals", lambda: tokens.like_tokens(value)),
            "notLike": ("not_equals", lambda: tokens.like_tokens(value)),
            "startsWith": ("equals", lambda: tokens.substring_tokens(value, True, False)),
            "endsWith": ("equals", lambda: tokens.substring_tokens(value, False, True)),
        }
        if name in simple:
            function, make_tokens = simple[name]
            return self._single(function, key_position, make_tokens())
        if name == "match":
            analysis = analyze_regexp(value)
            if analysis.alternatives:
                alternatives = tuple(
                    ((key_position, tuple(tokens.substring_tokens(a, False, False))),)
                    for a in analysis.alternatives
                )
                return _TextAtom("match", alternatives)
            if analysis.required_substring:
                needle = analysis.required_substring
                return self._single(
                    "match", key_position, tokens.substring_tokens(needle, False, False)
                )
            return None
        return None

    @staticmethod
    def _single(function: str, position: int, token_list: list[bytes]) -> _TextAtom:
        return _TextAtom(function, (((position, tuple(token_list)),),))

    def _in(self, name: str, left: exp.Expression, right: object) -> _AtomResult:
        values = self.set_values(right)
        if values is None:
            return None
        left_function = _function_of(left)
        if left_function is not None and left_function[0] == "tuple":
            mapping = [
                (i, self.key_position(argument))
                for i, argument in enumerate(left_function[1])
                if self.key_position(argument) is not None
            ]
            rows = []
            for value in values:
                if value.kind != "tuple" or len(value.value) != len(left_function[1]):
                    return None
                rows.append(value.value)
        else:
            position = self.key_position(left)
            mapping = [(0, position)] if position is not None else []
            rows = [(value,) for value in _scalar_set(values)]
        if not mapping:
            return None
        kept_rows = []
        for row in rows:
            if any(c.kind == "null" for c in row):
                # A NULL element never equals a row; ClickHouse drops it from the set.
                continue
            if any(c.kind != "string" for c in row):
                return None  # every set component must be a string
            kept_rows.append(row)
        alternatives = []
        for row in kept_rows:
            probes = []
            for tuple_index, position in mapping:
                value = row[tuple_index].value
                column_type = self.types[position].base()
                if column_type.name == "FixedString":
                    width = column_type.arguments[0]
                    if len(value) > width:
                        break
                    value = value.ljust(width, b"\0")  # set elements take the key's type
                probes.append((position, tuple(self.tokenizer.string_tokens(value))))
            else:
                alternatives.append(tuple(probes))
        function = "not_in" if name == "notIn" else "in"
        return _TextAtom(function, tuple(alternatives))
