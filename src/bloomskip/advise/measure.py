"""Measuring a candidate index on (a sample of) a dataset, with the code a query runs.

The sample is whole row groups (Arrow IPC record batches), spread evenly over the dataset, in
dataset order; with no ``--sample-rows`` it is all of them. A candidate's granules are built by
the ClickHouse engine (``SkipIndex.build``, the builder a sidecar build calls per granule), over
the granules a build with its ``--granule`` makes (row groups, or N rows per file carried across
row groups), and each query's condition is compiled and probed as pruning does
(``compile_condition`` / ``may_match``; a condition that is not ``useful`` keeps everything).
The rows the exact filter still reads are those a query reads: for a Parquet dataset, the rows
of the kept granules (the scan reads a granule of a row count by ``file_row_number`` range,
docs/queries.md); for Arrow IPC, whose record batches are read whole, the rows of the row groups
the kept granules overlap (``prune.granules_to_units``).

Whether a granule really holds a matching row comes from the exact predicate, evaluated once
per query over the sample in DuckDB with the query path's translation
(``translate.clickhouse_to_duckdb``): a kept granule without one is a false positive.

Example:
    >>> sample = read_sample(Dataset("logs/"), ["user_id"], None)  # doctest: +SKIP
    >>> granulation(sample, 8192).rows[:2]  # doctest: +SKIP
    array([8192, 8192])
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bloomskip.advise.candidates import INDEX_GRANULARITY, Candidate, tokenizer_arguments
from bloomskip.advise.queries import Query
from bloomskip.clickhouse.ddl import quote_identifier
from bloomskip.errors import BloomskipError

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

#: Granules probed to measure distinct tokens / n-grams per granule.
DISTINCT_PROBES = 8
# Filters this large (2 Mi bits, one hash) count up to about a million distinct items per granule.
_COUNTING_BYTES = 1 << 18


@dataclass
class Sample:
    """The rows a candidate is measured on.

    Attributes:
        table: The columns the queries read, for the sampled row groups, in dataset order.
        unit_rows: Rows of each sampled row group (none empty), ``int64``.
        unit_file: The file number of each sampled row group, ``int64``.
        total_rows: Rows of the whole dataset.
        column_bytes: Per column of ``table``, its stored bytes over the whole dataset: the
            ``total_compressed_size`` of its column chunks in the Parquet footers (for Arrow
            IPC, its buffers' bytes in the record batches); no data is read for it.
        matches: Per query, the exact predicate per sample row (``bool`` arrays; None for a
            query no candidate used), from :func:`exact_matches`.
        by_range: Whether a query reads a kept granule's rows only (Parquet), rather than the
            row groups it overlaps (Arrow IPC).
    """

    table: pa.Table
    unit_rows: np.ndarray
    unit_file: np.ndarray
    total_rows: int
    column_bytes: dict = field(default_factory=dict)
    matches: list = field(default_factory=list)
    by_range: bool = True

    @property
    def rows(self) -> int:
        """Rows in the sample."""
        return self.table.num_rows


@dataclass(eq=False)
class Granulation:
    """The granules a build with one ``--granule`` makes of the sample.

    Attributes:
        granule: ``"row-group"`` or rows per granule.
        rows: Rows of each granule, in order (granules never span files).
        bounds: ``int64[G + 1]`` row bounds of the granules in the sample.
        has_match: Per query, whether each granule holds a matching row (filled on demand).
        clickhouse_rows: Rows of a ClickHouse index granule these granules are (fixed
            granules; row groups cut exactly as a fixed size), else None.
    """

    granule: str | int
    rows: np.ndarray
    bounds: np.ndarray
    has_match: dict = field(default_factory=dict)
    clickhouse_rows: int | None = None

    def rows_read(self, keep: np.ndarray, sample: Sample) -> tuple[int, int]:
        """Rows a query reads when the index keeps the granules ``keep``.

        Returns:
            ``(dataset_rows, clickhouse_rows)``: the rows ``bloomskip query`` reads (those of
            the kept granules for Parquet; for Arrow IPC those of the record batches a kept
            granule overlaps), and rows of the kept granules themselves (what ClickHouse reads).
        """
        from bloomskip.dataset.prune import granules_to_units

        granule_rows = int(self.rows[keep].sum())
        if self.granule == "row-group" or sample.by_range:
            return granule_rows, granule_rows
        units = granules_to_units(self.rows, keep, sample.unit_rows)
        return int(sample.unit_rows[units].sum()), granule_rows

    def matched(self, number: int, sample: Sample) -> np.ndarray:
        """Whether each granule holds a row matching query ``number`` (exactly)."""
        import numpy as np

        if number not in self.has_match:
            before = np.concatenate(([0], np.cumsum(sample.matches[number], dtype=np.int64)))
            self.has_match[number] = before[self.bounds[1:]] > before[self.bounds[:-1]]
        return self.has_match[number]


def sampled_units(files: Sequence, sample_rows: int | None) -> tuple[list, int, dict]:
    """Choose the row groups of the sample: all, or evenly spread ones adding up to
    ``sample_rows`` or a little more; and weigh every column of the dataset, from the footers.

    Args:
        files: The dataset's files (``SourceFile``).
        sample_rows: Rows wanted; None (or at least the dataset's rows) for all.

    Returns:
        ``([(file number, row group, rows)], total rows of the dataset, {column: bytes})``,
        empty row groups left out; a column's bytes are its stored bytes in every file (the
        Parquet column chunks' ``total_compressed_size``; Arrow IPC buffers), 0 in a file
        without it.

    Raises:
        BloomskipError: A file cannot be read.

    Example:
        >>> sampled_units(Dataset("logs/").files, None)[2]  # doctest: +SKIP
        {'user_id': 1342436, 'msg': 2157600, 'code': 4098}
    """
    import math

    import numpy as np

    from bloomskip.dataset.listing.files import read_layout

    units = []
    column_bytes: dict = {}
    for number, source in enumerate(files):
        try:
            layout = read_layout(source)
        except OSError as exc:
            raise BloomskipError(f"{source.path}: cannot read it: {exc}") from exc
        units.extend((number, group, int(r)) for group, r in enumerate(layout.rows) if r > 0)
        for name, sizes in layout.column_bytes.items():
            column_bytes[name] = column_bytes.get(name, 0) + int(np.sum(sizes))
    total = sum(unit[2] for unit in units)
    if not units:
        raise BloomskipError("the dataset holds no rows")
    if sample_rows is None or sample_rows >= total:
        return units, total, column_bytes
    wanted = min(len(units), math.ceil(sample_rows * len(units) / total))
    chosen = np.unique(np.round(np.linspace(0, len(units) - 1, wanted)).astype(np.int64))
    picked = [units[i] for i in chosen]
    # Rounding may leave the sample short of the rows asked for: add the next row groups.
    extra = iter(i for i in range(len(units)) if i not in set(chosen.tolist()))
    while sum(unit[2] for unit in picked) < sample_rows:
        picked.append(units[next(extra)])
    picked.sort(key=lambda unit: (unit[0], unit[1]))
    return picked, total, column_bytes


def read_sample(dataset, columns: Sequence[str], sample_rows: int | None) -> Sample:
    """Read ``columns`` of the sampled row groups of a local dataset.

    A file without one of the columns reads it as NULLs of the dataset's type, as a build and
    the dataset's scan do.

    Args:
        dataset: A :class:`bloomskip.Dataset`.
        columns: Column names.
        sample_rows: See :func:`sampled_units`.

    Returns:
        A :class:`Sample` (its ``matches`` still empty).

    Raises:
        BloomskipError: A file cannot be read, or its column cannot be read as the dataset's
            type.
    """
    import numpy as np
    import pyarrow as pa

    from bloomskip.dataset.listing.files import open_parquet

    units, total, column_bytes = sampled_units(dataset.files, sample_rows)
    schema = pa.schema([dataset.schema.field(name) for name in columns])
    tables = []
    for number, source in enumerate(dataset.files):
        groups = [unit[1] for unit in units if unit[0] == number]
        if not groups:
            continue
        try:
            if source.format == "parquet":
                reader = open_parquet(source).reader()
                present = [name for name in columns if name in reader.schema_arrow.names]
                table = reader.read_row_groups(groups, columns=present)
            else:
                with pa.memory_map(str(source.path)) as handle:
                    ipc = pa.ipc.open_file(handle)
                    table = pa.Table.from_batches([ipc.get_batch(g) for g in groups], ipc.schema)
                    present = [name for name in columns if name in table.column_names]
                    table = table.select(present)
            for name in columns:
                if name not in table.column_names:
                    field = schema.field(name)
                    table = table.append_column(field, pa.nulls(table.num_rows, field.type))
            tables.append(table.select(list(columns)).cast(schema))
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise BloomskipError(f"{source.path}: cannot read it: {exc}") from exc
    unit_rows = np.array([unit[2] for unit in units], np.int64)
    unit_file = np.array([unit[0] for unit in units], np.int64)
    by_range = all(source.format == "parquet" for source in dataset.files)
    return Sample(
        pa.concat_tables(tables),
        unit_rows,
        unit_file,
        total,
        {name: column_bytes.get(name, 0) for name in columns},
        by_range=by_range,
    )


def exact_matches(sample: Sample, queries: Sequence[Query], scan_schema, rows: Sequence) -> list:
    """Evaluate each query exactly (DuckDB, the query path's translation) where it is needed.

    A row in a granule some index skipped holds no match (a Bloom filter has no false
    negatives), so each query is evaluated only over the rows of the granules some candidate
    kept for it; every other row is a non-match.

    Args:
        sample: The sample; ``sample.matches`` is set too.
        queries: The queries.
        scan_schema: The schema of the dataset's scan, which types the translation.
        rows: Per query, a ``bool`` mask of the sample rows to evaluate it on, or None when no
            candidate used it (it is not evaluated).

    Returns:
        Per query, a ``bool`` array over the sample's rows (NULL is no match, as in WHERE), or
        None for a query not evaluated.

    Raises:
        BloomskipError: DuckDB rejects a query.
    """
    import duckdb
    import numpy as np
    import pyarrow as pa

    from bloomskip.dataset.scan.query import connect
    from bloomskip.dataset.sql.translate import (
        clickhouse_to_duckdb,
        column_kinds,
        referenced_columns,
    )

    kinds = column_kinds(scan_schema)
    connection = connect()
    matches: list = []
    try:
        for query, mask in zip(queries, rows, strict=True):
            if mask is None:
                matches.append(None)
                continue
            condition = clickhouse_to_duckdb(query.where, kinds)
            rows_needed = sample.table.select(referenced_columns(query.where))
            if not mask.all():
                rows_needed = rows_needed.filter(pa.array(mask))
            connection.register("bloomskip_advise_rows", rows_needed)
            try:
                result = connection.sql(
                    f"SELECT COALESCE(({condition}), false) AS m FROM bloomskip_advise_rows"
                ).fetchnumpy()["m"]
            except duckdb.Error as exc:
                raise BloomskipError(f"line {query.line}: DuckDB rejects the query: {exc}") from exc
            found = np.zeros(sample.rows, bool)
            found[np.flatnonzero(mask)] = np.asarray(result, bool)
            matches.append(found)
            connection.unregister("bloomskip_advise_rows")
    finally:
        connection.close()
    sample.matches = matches
    return matches


def count_false_positives(candidates: Sequence[Candidate], layouts: dict, sample: Sample) -> None:
    """Fill each candidate's ``granules_without_match`` / ``kept_without_match`` per query.

    Args:
        candidates: Measured candidates (their ``keeps``).
        layouts: The :class:`Granulation` of each granule (``"row-group"`` or rows).
        sample: The sample, with its exact matches (:func:`exact_matches`).
    """
    for candidate in candidates:
        layout = layouts[candidate.granule]
        for item, keep in zip(candidate.queries, candidate.keeps, strict=True):
            if keep is None:
                continue
            absent = ~layout.matched(item["number"], sample)
            item["granules_without_match"] = int(absent.sum())
            item["kept_without_match"] = int((keep & absent).sum())
        candidate.measured_fpr = measured_rate(candidate.queries)


def rows_to_evaluate(candidates: Sequence[Candidate], layouts: dict, sample: Sample, count: int):
    """Per query, the rows of the granules some candidate kept for it (None: never used).

    Returns:
        A list of ``count`` entries: a ``bool`` mask over the sample rows, or None.
    """
    import numpy as np

    masks: list = [None] * count
    for candidate in candidates:
        rows = layouts[candidate.granule].rows
        for item, keep in zip(candidate.queries, candidate.keeps, strict=True):
            if keep is None:
                continue
            kept = np.repeat(keep, rows)
            number = item["number"]
            masks[number] = kept if masks[number] is None else masks[number] | kept
    return masks


def granulation(sample: Sample, granule: str | int) -> Granulation:
    """The granules of the sample for one ``--granule``.

    Args:
        sample: The sample.
        granule: ``"row-group"``, or rows per granule: each file's sampled rows are cut into
            granules of that many rows (the last of a file may be shorter), as a build cuts a
            file.

    Returns:
        A :class:`Granulation`.
    """
    import numpy as np

    if granule == "row-group":
        rows = sample.unit_rows
    else:
        files, starts = np.unique(sample.unit_file, return_index=True)
        file_rows = np.add.reduceat(sample.unit_rows, starts) if len(files) else sample.unit_rows
        parts = []
        for rows_of_file in file_rows.tolist():
            full, rest = divmod(rows_of_file, granule)
            parts.append(np.full(full, granule, np.int64))
            if rest:
                parts.append(np.array([rest], np.int64))
        rows = np.concatenate(parts)
    bounds = np.concatenate(([0], np.cumsum(rows))).astype(np.int64)
    clickhouse_rows = None if granule == "row-group" else granule
    return Granulation(granule, np.asarray(rows, np.int64), bounds, {}, clickhouse_rows)


def distinct_items(
    sample: Sample,
    layout: Granulation,
    column: str,
    column_type: str,
    index_type: str,
    ngram: int | tuple[int, ...] | None,
) -> float:
    """Distinct tokens (or n-grams) per granule: the 90th percentile over probed granules.

    Up to :data:`DISTINCT_PROBES` granules, evenly spread, are built by the index's own builder
    (the one C tokenizer of build and query) into 256 KiB single-hash filters, and their distinct
    items estimated from the fill (``part_cli.estimate_distinct_items``).

    Returns:
        The 90th percentile of the estimates.
    """
    import numpy as np
    import pyarrow as pa

    from bloomskip.clickhouse.ddl import IndexDefinition
    from bloomskip.clickhouse.index import SkipIndex
    from bloomskip.clickhouse.part_cli import estimate_distinct_items

    count = len(layout.rows)
    chosen = np.unique(np.round(np.linspace(0, count - 1, min(count, DISTINCT_PROBES))))
    chosen = chosen.astype(np.int64)
    values = sample.table.column(column)
    parts = [values.slice(int(layout.bounds[j]), int(layout.rows[j])) for j in chosen]
    table = pa.table({column: pa.chunked_array(parts, values.type)})
    arguments = (*tokenizer_arguments(ngram), _COUNTING_BYTES, 1, 0)
    definition = IndexDefinition.create(index_type, quote_identifier(column), arguments)
    index = SkipIndex.build(definition, table, layout.rows[chosen], {column: column_type})
    bit_count = 8 * _COUNTING_BYTES
    estimates = [
        estimate_distinct_items(bits_set, bit_count, 1)
        for bits_set in (fill_ratios(index) * bit_count).tolist()
    ]
    return float(np.percentile(estimates, 90))


def fill_ratios(index) -> np.ndarray:
    """The share of bits set in each granule's filter of a one-column index.

    A text index's filters are one ``(G, size)`` matrix, counted by the C kernel
    (``bits.popcount_rows``); a bloom_filter index's differ in size per granule and come from
    ``SkipIndex.granule_statistics``.
    """
    import numpy as np

    from bloomskip import bits

    if index.definition.type == "bloom_filter":
        return index.granule_statistics().column("fill_ratio").to_numpy()
    buffer, starts, sizes = index.column_filter_spans(0)
    count, size = len(starts), index.definition.size_bytes
    matrix = np.asarray(buffer[: count * size]).reshape(count, size)
    return bits.popcount_rows(matrix) / (8.0 * size)


def measured_rate(measured: Sequence[dict], excluded: frozenset = frozenset()) -> float | None:
    """Granules kept without a matching row over granules without one, weighted by count.

    Args:
        measured: A candidate's ``queries`` entries.
        excluded: Positions of queries left out (see ``advisor._calibrate_rates``).

    Returns:
        The rate, or None when no granule without a match was probed.

    Example:
        >>> measured_rate([{"count": 2, "granules_without_match": 10, "kept_without_match": 1}])
        0.1
    """
    kept = clean = 0
    for number, item in enumerate(measured):
        if number in excluded or not item.get("granules_without_match"):
            continue
        kept += item["count"] * item["kept_without_match"]
        clean += item["count"] * item["granules_without_match"]
    return kept / clean if clean else None


def measure(
    candidate: Candidate,
    sample: Sample,
    layout: Granulation,
    queries: Sequence[tuple[int, Query]],
    column_type: str,
) -> Candidate:
    """Build ``candidate`` over the sample and probe it with each of the column's queries.

    Args:
        candidate: The candidate; its measured fields are filled in.
        sample: The sample.
        layout: The granules of the candidate's ``granule``.
        queries: ``(query number, query)`` for each query reading the column.
        column_type: The column's ClickHouse type (as a build types it).

    Returns:
        ``candidate``.

    Raises:
        BloomskipError: The engine cannot build the index over the data.
    """
    import numpy as np

    from bloomskip.clickhouse.condition import compile_condition
    from bloomskip.clickhouse.ddl import parse_index_definition
    from bloomskip.clickhouse.index import SkipIndex

    started = time.perf_counter()
    definition = parse_index_definition(candidate.index)
    types = {candidate.column: column_type}
    try:
        index = SkipIndex.build(
            definition, sample.table.select([candidate.column]), layout.rows, types
        )
    except ValueError as exc:
        raise BloomskipError(f"index {candidate.index!r}: {exc}") from exc
    sample_bytes = len(index.to_bytes())
    candidate.index_bytes = round(sample_bytes * sample.total_rows / sample.rows)
    candidate.bits_per_row = 8 * sample_bytes / sample.rows
    candidate.expected_fpr = float(np.mean(fill_ratios(index) ** definition.hash_functions))
    # Data granules (marks of 8,192 rows) of each index granule, as EXPLAIN indexes = 1 counts.
    data_granules = None
    if layout.clickhouse_rows is not None:
        data_granules = -(-layout.rows // INDEX_GRANULARITY)
    weights = dataset_rows = clickhouse_rows = 0.0
    candidate.queries, candidate.keeps = [], []
    for number, query in queries:
        condition = compile_condition(query.where, definition, types)
        if condition.useful:
            keep = np.asarray(condition.may_match(index), bool)
            candidate.keeps.append(keep)
        else:
            keep = np.ones(len(layout.rows), bool)
            candidate.keeps.append(None)
        read, read_clickhouse = layout.rows_read(keep, sample)
        fraction = read / sample.rows
        candidate.queries.append(
            {
                "number": number,
                "where": query.where,
                "count": query.count,
                "useful": bool(condition.useful),
                "rows_read_fraction": fraction,
                "clickhouse_granules_kept": data_granules[keep].sum().item()
                if data_granules is not None
                else None,
                # Filled in by count_false_positives, once the exact matches are known.
                "granules_without_match": None,
                "kept_without_match": None,
            }
        )
        weights += query.count
        dataset_rows += query.count * fraction
        clickhouse_rows += query.count * read_clickhouse / sample.rows
    candidate.rows_read_fraction = dataset_rows / weights
    candidate.clickhouse_rows_read_fraction = clickhouse_rows / weights
    candidate.seconds = time.perf_counter() - started
    return candidate
