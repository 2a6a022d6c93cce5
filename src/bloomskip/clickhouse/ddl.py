"""ClickHouse skip-index definitions (``INDEX name expr TYPE ... GRANULARITY g``), via sqlglot.

Only the four Bloom-filter index types are modelled: ``bloom_filter[(fpr)]``,
``ngrambf_v1(n, size_bytes, hashes, seed)``, ``tokenbf_v1(size_bytes, hashes, seed)`` and
``sparse_grams(min_ngram_length, max_ngram_length[, min_cutoff_length], size_bytes, hashes,
seed)``. The argument checks are ClickHouse 26.9's (``bloomFilterIndexValidator``,
``bloomFilterIndexTextValidator``, ``BloomFilterParameters``, the sparse-grams tokenizer's
parameter checks), with messages naming the offending argument.

Index expressions: a column, a tuple of expressions ``(a, b)`` (one filter per element),
``lower(col)`` / ``upper(col)`` (ASCII case mapping, as ClickHouse's ``lower``/``upper``) and
``mapKeys(m)`` / ``mapValues(m)``. Other expressions are kept as SQL text (so a table that uses
them can still be described and read from disk) but cannot be evaluated over Arrow data.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from bloomskip.clickhouse.sizing import (
    DEFAULT_FALSE_POSITIVE_RATE,
    bloom_filter_parameters,
)
from bloomskip.clickhouse.types import (
    check_bloom_filter_type,
    check_text_type,
    parse_clickhouse_type,
    type_from_sqlglot,
)
from bloomskip.errors import IndexDefinitionError

__all__ = [
    "INDEX_TYPES",
    "IndexDefinition",
    "IndexDefinitionError",
    "IndexExpression",
    "parse_create_table",
    "parse_index_definition",
    "parse_table_statement",
]

#: The skip-index types bloomskip models. ``parquet_bloom_filter`` is bloomskip's own: a
#: dataset index holding each row group's Parquet split-block filter (docs/parquet-bloom.md).
INDEX_TYPES = ("bloom_filter", "ngrambf_v1", "tokenbf_v1", "sparse_grams", "parquet_bloom_filter")
PARQUET_BLOOM_FILTER = "parquet_bloom_filter"

# ClickHouse's MAX_BLOOM_FILTER_SIZE (bytes) for ngrambf_v1 / tokenbf_v1 / sparse_grams.
MAX_TEXT_FILTER_BYTES = 1 << 30
# The sparse-grams tokenizer's bounds (DEFAULT_SPARSE_GRAMS_MIN_LENGTH / _MAX_LENGTH).
SPARSE_GRAMS_MIN_LENGTH = 3
SPARSE_GRAMS_MAX_LENGTH = 100
_UINT64_LIMIT = 1 << 64
# Lower-cased name -> ClickHouse spelling of the functions an index expression may apply.
_SUPPORTED_FUNCTIONS = {
    "lower": "lower",
    "upper": "upper",
    "mapkeys": "mapKeys",
    "mapvalues": "mapValues",
}
_PLAIN_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def quote_identifier(name: str) -> str:
    """A name as ClickHouse SQL: as it is, or in backquotes when it is not a plain identifier.

    Example:
        >>> quote_identifier("user_id"), quote_identifier("user id")
        ('user_id', '`user id`')
    """
    if _PLAIN_IDENTIFIER.fullmatch(name):
        return name
    return "`" + name.replace("\\", "\\\\").replace("`", "\\`") + "`"


@dataclass(frozen=True)
class IndexExpression:
    """One index column: a source column, possibly under one supported function.

    Attributes:
        sql: The expression as ClickHouse SQL, e.g. ``"lower(msg)"``.
        column: The source column it reads (None when the expression is not supported).
        function: ``None`` for a plain column, else ``"lower"``, ``"upper"``, ``"mapKeys"`` or
            ``"mapValues"``.
        supported: Whether bloomskip can evaluate it over Arrow data.

    Example:
        >>> parse_index_definition("lower(s) TYPE tokenbf_v1(64, 2, 0)").index_columns[0].column
        's'
    """

    sql: str
    column: str | None
    function: str | None = None
    supported: bool = True

    def _require_supported(self) -> None:
        if not self.supported:
            raise IndexDefinitionError(
                f"index expression {self.sql!r} is not supported: bloomskip evaluates a column, a "
                "tuple of columns, lower(col), upper(col), mapKeys(m) and mapValues(m)"
            )

    def result_type(self, column_types: Mapping[str, str]) -> str:
        """The ClickHouse type of the expression's values.

        Args:
            column_types: ClickHouse type of each source column.

        Returns:
            The type name, e.g. ``Array(String)`` for ``mapKeys`` of ``Map(String, UInt8)``.

        Raises:
            IndexDefinitionError: If the expression is unsupported, its column has no type, or
                the function does not apply to that type.
        """
        self._require_supported()
        if self.column not in column_types:
            raise IndexDefinitionError(
                f"index expression {self.sql!r} reads column {self.column!r}, which has no type"
            )
        source = parse_clickhouse_type(column_types[self.column])
        if self.function is None:
            return str(source)
        if self.function in ("mapKeys", "mapValues"):
            if source.name != "Map":
                raise IndexDefinitionError(
                    f"{self.function} needs a Map column; {self.column!r} is {source}"
                )
            key, value = source.arguments
            return f"Array({key if self.function == 'mapKeys' else value})"
        base = source.base()
        if base.name not in ("String", "FixedString"):
            raise IndexDefinitionError(
                f"{self.function} needs a String or FixedString column; {self.column!r} is {source}"
            )
        return str(source)

    def evaluate(self, table: pa.Table) -> pa.ChunkedArray:
        """Evaluate the expression over an Arrow table.

        Args:
            table: A table holding the source column.

        Returns:
            The expression's values, one per row.

        Raises:
            IndexDefinitionError: If the expression is unsupported or the column is missing or of
                the wrong Arrow type for the function.
        """
        self._require_supported()
        if self.column not in table.column_names:
            raise IndexDefinitionError(
                f"index expression {self.sql!r} reads column {self.column!r}, which the table "
                f"does not have (columns: {', '.join(table.column_names)})"
            )
        column = table.column(self.column)
        if self.function is None:
            return column
        if self.function in ("mapKeys", "mapValues"):
            part_type = _map_part_type(column.type, self.function, self.sql)
            return pa.chunked_array(
                [_map_part(chunk, self.function, part_type) for chunk in column.chunks],
                type=part_type,
            )
        return pa.chunked_array(
            [_ascii_case(chunk, upper=self.function == "upper") for chunk in column.chunks],
            type=column.type,
        )


def _map_part_type(map_type: pa.DataType, function: str, sql: str) -> pa.DataType:
    if not pa.types.is_map(map_type):
        raise IndexDefinitionError(f"{sql}: {function} needs a map column, got {map_type}")
    return pa.list_(map_type.key_type if function == "mapKeys" else map_type.item_type)


def _map_part(chunk: pa.Array, function: str, part_type: pa.DataType) -> pa.Array:
    values = chunk.keys if function == "mapKeys" else chunk.items
    # keys/items are the flat children; the map's own offsets (slice-aware) give the rows.
    offsets = chunk.offsets
    if not chunk.null_count:
        return pa.ListArray.from_arrays(offsets, values, type=part_type)
    # Arrow refuses a validity mask with sliced offsets: rebase the offsets to start at 0.
    import pyarrow.compute as pc  # here only: a parse of a definition needs none of it

    first, last = offsets[0].as_py(), offsets[-1].as_py()
    rebased = pc.subtract(offsets, pa.scalar(first, offsets.type))
    return pa.ListArray.from_arrays(
        rebased, values.slice(first, last - first), type=part_type, mask=chunk.is_null()
    )


# ClickHouse's lower/upper change ASCII letters only (lowerUTF8/upperUTF8 are separate functions).
_ASCII_LOWER = np.arange(256, dtype=np.uint8)
_ASCII_LOWER[ord("A") : ord("Z") + 1] += 32
_ASCII_UPPER = np.arange(256, dtype=np.uint8)
_ASCII_UPPER[ord("a") : ord("z") + 1] -= 32


def _ascii_case(chunk: pa.Array, upper: bool) -> pa.Array:
    table = _ASCII_UPPER if upper else _ASCII_LOWER
    if pa.types.is_dictionary(chunk.type):
        return pa.DictionaryArray.from_arrays(chunk.indices, _ascii_case(chunk.dictionary, upper))
    t = pa.types
    if t.is_string_view(chunk.type) or t.is_binary_view(chunk.type):
        chunk = chunk.cast(pa.large_string() if t.is_string_view(chunk.type) else pa.large_binary())
    buffers = chunk.buffers()
    if t.is_fixed_size_binary(chunk.type):
        validity, data = buffers
        mapped = table[np.frombuffer(data, np.uint8)] if data is not None else np.empty(0, np.uint8)
        return pa.Array.from_buffers(
            chunk.type,
            len(chunk),
            [validity, pa.py_buffer(mapped.tobytes())],
            chunk.null_count,
            chunk.offset,
        )
    if not (
        t.is_string(chunk.type)
        or t.is_large_string(chunk.type)
        or t.is_binary(chunk.type)
        or t.is_large_binary(chunk.type)
    ):
        raise IndexDefinitionError(f"lower/upper needs a string column, got {chunk.type}")
    validity, offsets, data = buffers
    mapped = table[np.frombuffer(data, np.uint8)] if data is not None else np.empty(0, np.uint8)
    return pa.Array.from_buffers(
        chunk.type,
        len(chunk),
        [validity, offsets, pa.py_buffer(mapped.tobytes())],
        chunk.null_count,
        chunk.offset,
    )


@dataclass(frozen=True)
class IndexDefinition:
    """A ClickHouse Bloom-filter skip index definition.

    Attributes:
        name: Index name (``skp_idx_<name>.idx`` on disk).
        expressions: SQL text of each index column's expression.
        type: ``"bloom_filter"``, ``"ngrambf_v1"``, ``"tokenbf_v1"`` or ``"sparse_grams"``.
        granularity: Data granules per index granule (GRANULARITY), >= 1.
        arguments: The TYPE arguments as written (numbers).
        false_positive_rate: bloom_filter's fpr (default 0.025); None for text indexes.
        bits_per_row: bloom_filter bits per distinct value; None for text indexes.
        hash_functions: Number of hash functions (k).
        ngram_size: n of ngrambf_v1; None otherwise.
        min_ngram_length: sparse_grams' shortest gram in code points; None otherwise.
        max_ngram_length: sparse_grams' longest gram in code points; None otherwise.
        min_cutoff_length: sparse_grams' shortest gram kept, when building and when querying
            alike (ClickHouse's tokenizer drops shorter ones in both; every gram is kept when
            None); None for the other types.
        size_bytes: Filter size of the text indexes in bytes; None for bloom_filter.
        seed: Seed of the text indexes; None for bloom_filter.

    Example:
        >>> d = parse_index_definition("INDEX i msg TYPE tokenbf_v1(8192, 3, 0) GRANULARITY 2")
        >>> (d.name, d.size_bytes, d.hash_functions, d.granularity)
        ('i', 8192, 3, 2)
    """

    name: str
    expressions: tuple[str, ...]
    type: str
    granularity: int = 1
    arguments: tuple[int | float, ...] = ()
    false_positive_rate: float | None = None
    bits_per_row: int | None = None
    hash_functions: int = 0
    ngram_size: int | None = None
    min_ngram_length: int | None = None
    max_ngram_length: int | None = None
    min_cutoff_length: int | None = None
    size_bytes: int | None = None
    seed: int | None = None
    index_columns: tuple[IndexExpression, ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def create(
        cls,
        index_type: str,
        expressions: tuple[str, ...] | list[str] | str,
        arguments: tuple[int | float, ...] | list[int | float] = (),
        *,
        name: str | None = None,
        granularity: int = 1,
    ) -> IndexDefinition:
        """Build and validate a definition from its parts (what ``parse_index_definition`` does).

        Args:
            index_type: ``bloom_filter``, ``ngrambf_v1``, ``tokenbf_v1`` or ``sparse_grams``.
            expressions: One SQL expression or several (a multi-column index).
            arguments: The TYPE arguments (ints for text indexes, one float for bloom_filter).
            name: Index name; derived from the expressions when None.
            granularity: GRANULARITY.

        Returns:
            The validated definition.

        Raises:
            IndexDefinitionError: If ClickHouse would reject the arguments.

        Example:
            >>> IndexDefinition.create("ngrambf_v1", "s", (3, 256, 2, 0)).ngram_size
            3
        """
        texts = (expressions,) if isinstance(expressions, str) else tuple(expressions)
        parsed = tuple(_parse_expression_text(text) for text in texts)
        return _build_definition(name, parsed, index_type, tuple(arguments), granularity)

    @property
    def tokenizer(self) -> str | None:
        """``"ngram"``, ``"token"``, ``"sparse_grams"`` or None (bloom_filter)."""
        return {"ngrambf_v1": "ngram", "tokenbf_v1": "token", "sparse_grams": "sparse_grams"}.get(
            self.type
        )

    @property
    def tokenizer_argument(self) -> int:
        """The tokenizer's parameter as the C tokenizer takes it (``bits.text_granules``' ``n``).

        The n-gram size for ngrambf_v1, 1 for tokenbf_v1 (unused), and for sparse_grams its
        three lengths packed by :func:`bloomskip.bits.sparse_grams_parameter`.

        Example:
            >>> d = parse_index_definition("s TYPE sparse_grams(3, 100, 256, 2, 0)")
            >>> d.tokenizer_argument == 3 | 100 << 16
            True
        """
        if self.type == "sparse_grams":
            from bloomskip.bits import sparse_grams_parameter

            return sparse_grams_parameter(
                self.min_ngram_length or SPARSE_GRAMS_MIN_LENGTH,
                self.max_ngram_length or SPARSE_GRAMS_MAX_LENGTH,
                self.min_cutoff_length,
            )
        return self.ngram_size or 1

    @property
    def source_columns(self) -> tuple[str, ...]:
        """The distinct table columns the supported index expressions read, in order."""
        seen: dict[str, None] = {}
        for expression in self.index_columns:
            if expression.column is not None:
                seen.setdefault(expression.column)
        return tuple(seen)

    def index_column_types(self, column_types: Mapping[str, str]) -> tuple[str, ...]:
        """The ClickHouse type of every index column, checked against the index type.

        Args:
            column_types: ClickHouse type of each source column.

        Returns:
            One type name per index expression.

        Raises:
            IndexDefinitionError: If an expression cannot be typed or ClickHouse would reject the
                type for this index (e.g. Map, Decimal or Array(Nullable) for bloom_filter;
                anything but String/FixedString(/Array/LowCardinality) for the text indexes).
        """
        result = []
        for expression in self.index_columns:
            type_name = expression.result_type(column_types)
            self._check_index_column_type(expression, type_name)
            result.append(type_name)
        return tuple(result)

    def _check_index_column_type(self, expression: IndexExpression, type_name: str) -> None:
        if self.type == PARQUET_BLOOM_FILTER:
            return  # any column a Parquet filter can hold; the build checks the file's chunks
        try:
            if self.type == "bloom_filter":
                check_bloom_filter_type(type_name)
            else:
                check_text_type(type_name)
        except ValueError as exc:
            raise IndexDefinitionError(
                f"index {self.name!r}: column {expression.sql!r} of type {type_name}: {exc}"
            ) from exc

    def to_sql(self) -> str:
        """The definition as a ClickHouse ``INDEX`` clause.

        Returns:
            e.g. ``INDEX i (a, b) TYPE bloom_filter(0.01) GRANULARITY 1``.
        """
        expression = (
            self.expressions[0]
            if len(self.expressions) == 1
            else "(" + ", ".join(self.expressions) + ")"
        )
        arguments = ""
        if self.arguments:
            arguments = "(" + ", ".join(_format_argument(a) for a in self.arguments) + ")"
        return (
            f"INDEX {quote_identifier(self.name)} {expression} TYPE {self.type}{arguments} "
            f"GRANULARITY {self.granularity}"
        )


def _format_argument(argument: int | float) -> str:
    return repr(argument) if isinstance(argument, float) else str(argument)


def _argument_error(index_type: str, position: int, label: str, message: str, value) -> str:  # noqa: ANN001
    return f"{index_type} argument {position} ({label}) {message}, got {value!r}"


def _check_unsigned(index_type: str, position: int, label: str, value: int | float) -> int:
    # ClickHouse: "All parameters to *bf_v1 index must be unsigned integers" (UInt64 literals).
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < _UINT64_LIMIT:
        raise IndexDefinitionError(
            _argument_error(
                index_type, position, label, "must be an unsigned 64-bit integer", value
            )
        )
    return value


def _build_definition(
    name: str | None,
    expressions: tuple[IndexExpression, ...],
    index_type: str,
    arguments: tuple[int | float, ...],
    granularity: int,
) -> IndexDefinition:
    if not expressions:
        raise IndexDefinitionError("an index needs at least one expression")
    if index_type not in INDEX_TYPES:
        raise IndexDefinitionError(
            f"index type {index_type!r} is not a Bloom-filter index; expected one of "
            f"{', '.join(INDEX_TYPES)}"
        )
    # ClickHouse stores GRANULARITY as UInt64; a larger literal is rejected there too.
    if (
        isinstance(granularity, bool)
        or not isinstance(granularity, int)
        or not 1 <= granularity < _UINT64_LIMIT
    ):
        raise IndexDefinitionError(
            f"GRANULARITY must be a positive 64-bit integer, got {granularity!r}"
        )
    if name is None:
        name = re.sub(r"\W+", "_", "_".join(e.sql for e in expressions)).strip("_") or "index"
    common = {
        "name": name,
        "expressions": tuple(e.sql for e in expressions),
        "type": index_type,
        "granularity": granularity,
        "arguments": arguments,
        "index_columns": expressions,
    }
    if index_type == PARQUET_BLOOM_FILTER:
        return _parquet_bloom_definition(common, expressions, arguments, granularity)
    if index_type == "bloom_filter":
        if len(arguments) > 1:
            raise IndexDefinitionError(
                "bloom_filter takes at most one argument (false positive rate), "
                f"got {len(arguments)}"
            )
        rate = DEFAULT_FALSE_POSITIVE_RATE
        if arguments:
            rate = arguments[0]
            # ClickHouse requires a Float64 literal: bloom_filter(1) and bloom_filter(0) fail.
            # NaN passes its range check (both comparisons are false).
            if not isinstance(rate, float) or rate < 0 or rate > 1:
                raise IndexDefinitionError(
                    _argument_error(
                        "bloom_filter",
                        1,
                        "false positive rate",
                        "must be a floating-point number between 0 and 1",
                        rate,
                    )
                )
        bits_per_row, hashes = bloom_filter_parameters(rate)
        return IndexDefinition(
            **common, false_positive_rate=rate, bits_per_row=bits_per_row, hash_functions=hashes
        )
    labels = ("size_bytes", "hash_functions", "seed")
    if index_type == "ngrambf_v1":
        labels = ("n, ngram size", *labels)
    sparse: dict[str, int | None] = {}
    lengths = 0  # sparse_grams' leading length arguments, before the filter's three
    if index_type == "sparse_grams":
        sparse, arguments = _sparse_grams_lengths(arguments)
        lengths = len(common["arguments"]) - len(arguments)
    if len(arguments) != len(labels):
        short = "ngrambf" if index_type == "ngrambf_v1" else "tokenbf"
        raise IndexDefinitionError(
            f"`{short}` index must have exactly {len(labels)} arguments "
            f"({', '.join(labels)}), got {len(arguments)}"
        )
    values = [
        _check_unsigned(index_type, lengths + i + 1, label, value)
        for i, (label, value) in enumerate(zip(labels, arguments, strict=True))
    ]
    ngram_size = None
    if index_type == "ngrambf_v1":
        ngram_size = values.pop(0)
        if ngram_size < 1:
            raise IndexDefinitionError(
                _argument_error(index_type, 1, "n, ngram size", "must be at least 1", ngram_size)
            )
    size_bytes, hashes, seed = values
    first = (2 if index_type == "ngrambf_v1" else 1) + lengths
    if size_bytes == 0:
        raise IndexDefinitionError(
            _argument_error(index_type, first, "size_bytes", "cannot be zero", size_bytes)
        )
    if hashes == 0:
        raise IndexDefinitionError(
            _argument_error(index_type, first + 1, "hash_functions", "cannot be zero", hashes)
        )
    if size_bytes > MAX_TEXT_FILTER_BYTES:
        raise IndexDefinitionError(
            _argument_error(
                index_type,
                first,
                "size_bytes",
                f"cannot be more than {MAX_TEXT_FILTER_BYTES}",
                size_bytes,
            )
        )
    return IndexDefinition(
        **common,
        hash_functions=hashes,
        ngram_size=ngram_size,
        size_bytes=size_bytes,
        seed=seed,
        **sparse,
    )


def _sparse_grams_lengths(
    arguments: tuple[int | float, ...],
) -> tuple[dict[str, int | None], tuple[int | float, ...]]:
    """Split sparse_grams' arguments into its lengths, checked as ClickHouse checks them, and the
    filter's three (size_bytes, hash_functions, seed).

    ClickHouse accepts 5 or 6 arguments (the sixth being ``min_cutoff_length``, third) and checks
    the lengths when it first builds the index (verified with chdb: ``CREATE TABLE`` accepts
    ``sparse_grams(3, 200, 4096, 3, 0)``, the first ``INSERT`` fails): here they are checked at
    once, with ClickHouse's messages.
    """
    index_type = "sparse_grams"
    if len(arguments) not in (5, 6):
        raise IndexDefinitionError(
            "`sparseGrams` index must have exactly 5 or 6 arguments (min_ngram_length, "
            "max_ngram_length[, min_cutoff_length], size_bytes, hash_functions, seed), "
            f"got {len(arguments)}"
        )
    labels = ["min_ngram_length", "max_ngram_length"]
    if len(arguments) == 6:
        labels.append("min_cutoff_length")
    lengths = [
        _check_unsigned(index_type, i + 1, label, value)
        for i, (label, value) in enumerate(zip(labels, arguments, strict=False))
    ]
    low, high = lengths[0], lengths[1]
    cutoff = lengths[2] if len(lengths) == 3 else None
    problem = None
    if low < SPARSE_GRAMS_MIN_LENGTH:
        problem = f"minimal length must be at least {SPARSE_GRAMS_MIN_LENGTH}, but got {low}"
    elif high > SPARSE_GRAMS_MAX_LENGTH:
        problem = f"maximal length must be at most {SPARSE_GRAMS_MAX_LENGTH}, but got {high}"
    elif low > high:
        problem = f"minimal length {low} cannot be larger than maximal length {high}"
    elif cutoff is not None and cutoff < low:
        problem = f"minimal cutoff length {cutoff} cannot be smaller than minimal length {low}"
    elif cutoff is not None and cutoff > high:
        problem = f"minimal cutoff length {cutoff} cannot be larger than maximal length {high}"
    if problem:
        raise IndexDefinitionError(f"Unexpected parameter of tokenizer 'sparseGrams': {problem}")
    found = {"min_ngram_length": low, "max_ngram_length": high, "min_cutoff_length": cutoff}
    return found, arguments[len(lengths) :]


def _parquet_bloom_definition(
    common: dict,
    expressions: tuple[IndexExpression, ...],
    arguments: tuple[int | float, ...],
    granularity: int,
) -> IndexDefinition:
    """``parquet_bloom_filter([false_positive_rate])``: one plain column, GRANULARITY 1."""
    from bloomskip.parquet.harvest import DEFAULT_FPR

    if len(expressions) != 1 or expressions[0].function is not None:
        raise IndexDefinitionError(
            "parquet_bloom_filter indexes one column (a Parquet filter is one column chunk's), "
            f"got {', '.join(e.sql for e in expressions)}"
        )
    if granularity != 1:
        raise IndexDefinitionError(
            f"parquet_bloom_filter has one filter per row group: GRANULARITY must be 1, got "
            f"{granularity}"
        )
    if len(arguments) > 1:
        raise IndexDefinitionError(
            "parquet_bloom_filter takes at most one argument (false positive rate), "
            f"got {len(arguments)}"
        )
    rate = arguments[0] if arguments else DEFAULT_FPR
    # The writers' sizing needs 0 < fpp < 1 (log of 1 - fpp^(1/8)); NaN fails both tests.
    if isinstance(rate, bool) or not isinstance(rate, float) or not 0.0 < rate < 1.0:
        raise IndexDefinitionError(
            _argument_error(
                PARQUET_BLOOM_FILTER,
                1,
                "false positive rate",
                "must be a floating-point number strictly between 0 and 1",
                rate,
            )
        )
    return IndexDefinition(**common, false_positive_rate=rate)


# --------------------------------------------------------------------------------------------
# Parsing with sqlglot


def _parse_sql(sql: str, what: str):  # noqa: ANN202 - sqlglot expression
    from bloomskip._sql import SQLSyntaxError, parse_clickhouse

    try:
        return parse_clickhouse(sql)
    except SQLSyntaxError as exc:
        raise IndexDefinitionError(f"cannot parse {what}: {exc}") from exc


def _column_name(node) -> str:  # noqa: ANN001
    return ".".join(part.name for part in node.parts)


def _to_index_expressions(node) -> tuple[IndexExpression, ...]:  # noqa: ANN001
    from sqlglot import exp

    if isinstance(node, exp.Paren):
        return _to_index_expressions(node.this)
    # (a, b) parses as Tuple, tuple(a, b) as Struct: both mean one index column per element.
    if isinstance(node, exp.Tuple | exp.Struct):
        return tuple(_single_expression(child) for child in node.expressions)
    return (_single_expression(node),)


def _single_expression(node) -> IndexExpression:  # noqa: ANN001
    from sqlglot import exp

    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Column):
        name = _column_name(node)
        return IndexExpression(quote_identifier(name), name)
    function = None
    argument = None
    if isinstance(node, exp.Lower | exp.Upper):
        function, argument = type(node).__name__.lower(), node.this
    elif isinstance(node, exp.Anonymous) and len(node.expressions) == 1:
        function = _SUPPORTED_FUNCTIONS.get(str(node.this).lower())
        # mapKeys/mapValues are case-sensitive in ClickHouse; lower/upper are not.
        if function is not None and function != str(node.this) and function.startswith("map"):
            function = None
        argument = node.expressions[0]
    if function is not None and isinstance(argument, exp.Column):
        column = _column_name(argument)
        return IndexExpression(f"{function}({quote_identifier(column)})", column, function)
    return IndexExpression(node.sql(dialect="clickhouse"), None, None, supported=False)


def _parse_expression_text(text: str) -> IndexExpression:
    expressions = _to_index_expressions(
        _parse_index_clause(f"INDEX _i {text} TYPE minmax").expression
    )
    if len(expressions) != 1:
        raise IndexDefinitionError(f"{text!r} is a tuple; pass its elements separately")
    return expressions[0]


def _parse_index_clause(clause: str, text: str | None = None):  # noqa: ANN202
    from sqlglot import exp

    shown = f"index definition {text or repr(clause)}"
    statement = _parse_sql(f"CREATE TABLE _bloomskip_ ({clause})", shown)
    elements = statement.this.expressions if isinstance(statement, exp.Create) else []
    if len(elements) != 1 or not isinstance(elements[0], exp.IndexColumnConstraint):
        raise IndexDefinitionError(f"not an {shown}")
    return elements[0]


def _literal_value(node, index_type: str, position: int):  # noqa: ANN001, ANN202
    from sqlglot import exp

    negative = False
    if isinstance(node, exp.Neg):
        negative, node = True, node.this
    if isinstance(node, exp.HexString) and node.args.get("is_integer"):
        return -int(node.this, 16) if negative else int(node.this, 16)
    if isinstance(node, exp.Literal) and not node.is_string:
        text = node.this
        try:
            value: int | float = int(text) if re.fullmatch(r"\d+", text) else float(text)
        except ValueError:
            raise IndexDefinitionError(
                f"{index_type} argument {position} is not a number: {text!r}"
            ) from None
        return -value if negative else value
    if isinstance(node, exp.Column) and node.name.lower() in ("nan", "inf"):
        value = math.nan if node.name.lower() == "nan" else math.inf
        return -value if negative else value
    raise IndexDefinitionError(
        f"{index_type} argument {position} must be a number literal, got {node.sql('clickhouse')!r}"
    )


def _definition_from_node(node, default_name: bool) -> IndexDefinition:  # noqa: ANN001
    from sqlglot import exp

    expression = node.args.get("expression")
    if expression is None:
        raise IndexDefinitionError("the index definition has no expression")
    expressions = _to_index_expressions(expression)
    index_type_node = node.args.get("index_type")
    if isinstance(index_type_node, exp.Anonymous):
        index_type = str(index_type_node.this)
        raw_arguments = index_type_node.expressions
    elif isinstance(index_type_node, exp.Expression):
        index_type, raw_arguments = index_type_node.name, []
    else:
        # sqlglot leaves a non-node (e.g. True) here when the text has no TYPE clause.
        raise IndexDefinitionError("the index definition has no TYPE")
    arguments = tuple(
        _literal_value(argument, index_type, i + 1) for i, argument in enumerate(raw_arguments)
    )
    granularity_node = node.args.get("granularity")
    granularity = 1
    if isinstance(granularity_node, exp.Expression):
        granularity = _literal_value(granularity_node, "GRANULARITY", 1)
    name = None if default_name else node.name
    return _build_definition(name, expressions, index_type, arguments, granularity)


def parse_index_definition(text: str) -> IndexDefinition:
    """Parse ``[INDEX name] expr TYPE type[(args)] [GRANULARITY g]``.

    Args:
        text: The index clause, e.g. ``"INDEX i (a, lower(s)) TYPE bloom_filter(0.01)"``. The
            ``INDEX name`` prefix is optional (the name then derives from the expression) and
            GRANULARITY defaults to 1. ``ADD INDEX`` / a trailing ``;`` are accepted.

    Returns:
        The validated definition.

    Raises:
        IndexDefinitionError: On a syntax error, an index type other than the three
            Bloom-filter types, or an argument ClickHouse would reject (the message names it).

    Example:
        >>> d = parse_index_definition("v TYPE bloom_filter(0.092)")
        >>> (d.name, d.bits_per_row, d.hash_functions)
        ('v', 6, 2)
    """
    import sqlglot

    clause = text.strip().rstrip(";").strip()
    try:
        tokens = sqlglot.tokenize(clause, read="clickhouse")
    except sqlglot.errors.SqlglotError as exc:
        raise IndexDefinitionError(f"cannot parse {text!r}: {exc}") from exc
    words = [token.text.upper() for token in tokens[:2]]
    if words[:2] == ["ADD", "INDEX"]:
        clause = clause[tokens[0].end + 1 :].strip()
        words = ["INDEX"]
    default_name = not words or words[0] != "INDEX"
    if default_name:
        clause = f"INDEX _bloomskip_unnamed_ {clause}"
    return _definition_from_node(_parse_index_clause(clause, repr(text)), default_name)


def parse_create_table(sql: str) -> tuple[dict[str, str], list[IndexDefinition]]:
    """Read the columns and Bloom-filter skip indexes of a CREATE/ATTACH TABLE statement.

    Args:
        sql: e.g. the ``.sql`` file ClickHouse keeps in its metadata folder
            (``ATTACH TABLE _ UUID '...' (...) ENGINE = MergeTree ...``).

    Returns:
        ``(columns, indexes)``: each column's ClickHouse type in ClickHouse spelling, in table
        order, and the ``bloom_filter`` / ``ngrambf_v1`` / ``tokenbf_v1`` indexes (other index
        types such as minmax or set are not returned).

    Raises:
        IndexDefinitionError: If the text is not a CREATE/ATTACH TABLE with a column list, or an
            index has arguments ClickHouse would reject.

    Example:
        >>> columns, indexes = parse_create_table(
        ...     "CREATE TABLE t (a UInt64, INDEX i a TYPE bloom_filter) ENGINE = Log"
        ... )
        >>> columns, indexes[0].bits_per_row
        ({'a': 'UInt64'}, 8)
    """
    from sqlglot import exp

    statement = parse_table_statement(sql)
    if not isinstance(statement, exp.Create) or not isinstance(statement.this, exp.Schema):
        raise IndexDefinitionError("not a CREATE/ATTACH TABLE statement with a column list")
    columns: dict[str, str] = {}
    indexes: list[IndexDefinition] = []
    for element in statement.this.expressions:
        if isinstance(element, exp.ColumnDef):
            kind = element.args.get("kind")
            if kind is None:
                raise IndexDefinitionError(f"column {element.name!r} has no type")
            columns[element.name] = _type_text(kind)
        elif isinstance(element, exp.IndexColumnConstraint):
            index_type = element.args.get("index_type")
            if isinstance(index_type, exp.Anonymous):
                type_name = str(index_type.this)
            elif isinstance(index_type, exp.Expression):
                type_name = index_type.name
            else:  # sqlglot stores a missing TYPE as None or False
                raise IndexDefinitionError(f"index {element.name!r} has no TYPE")
            if type_name in INDEX_TYPES:
                indexes.append(_definition_from_node(element, default_name=False))
    # Column types are not checked against the indexes here: ClickHouse validated the table
    # when it was created, and a metadata file must stay readable.
    return columns, indexes


def parse_table_statement(sql: str):  # noqa: ANN201 - a sqlglot expression
    """Parse CREATE or ATTACH TABLE text with sqlglot (ClickHouse dialect).

    Args:
        sql: The DDL text (a trailing ``;`` is allowed).

    Returns:
        The sqlglot expression (an ``exp.Create`` for a table statement).

    Raises:
        IndexDefinitionError: The text does not parse.

    Example:
        >>> type(parse_table_statement("ATTACH TABLE t (a UInt8) ENGINE = Log")).__name__
        'Create'
    """
    import sqlglot

    text = sql.strip().rstrip(";")
    try:
        tokens = sqlglot.tokenize(text, read="clickhouse")
    except sqlglot.errors.SqlglotError as exc:
        raise IndexDefinitionError(f"cannot parse CREATE TABLE statement: {exc}") from exc
    # sqlglot has no ATTACH TABLE grammar; the statement is otherwise a CREATE TABLE.
    if tokens and tokens[0].text.upper() == "ATTACH":
        text = "CREATE" + text[tokens[0].end + 1 :]
    return _parse_sql(text, "CREATE TABLE statement")


def _type_text(kind) -> str:  # noqa: ANN001
    return str(type_from_sqlglot(kind))
