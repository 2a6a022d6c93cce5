"""``advise``: choose a skip index per column from a dataset's own data and queries.

For every column the queries read, the candidates of :mod:`bloomskip.advise.candidates` are
built over (a sample of) the data and probed with the real conditions
(:mod:`bloomskip.advise.measure`). Per column, the candidates no other beats on both index bytes
and rows read form the Pareto front.

A candidate is worth its bytes when an average query of the whole log saves more bytes of the
column (its compressed size from the Parquet footers, times the share of it the column's queries
no longer read, weighted by their counts over the counts of every query) than the index holds.
Per column, the recommendation is the smallest candidate worth its bytes whose rows read are
within 10 % (plus 0.1 percentage point) of the best such candidate's; a column where even the
best candidate skips less than 5 % of the rows its queries read, or where no candidate is worth
its bytes, gets no index. One build has one granule, so every recommendation has the same: the
granule at which the columns' recommendations together save the most bytes per query.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from bloomskip.advise.candidates import (
    CHOOSING_RATE,
    GRANULE_ROWS,
    NGRAM_SIZES,
    RATES,
    SPARSE_GRAMS_LENGTHS,
    Candidate,
    granule_label,
    text_size,
    tokenizer_arguments,
)
from bloomskip.advise.queries import Query, check_queries, read_queries
from bloomskip.errors import BloomskipError

#: An index must skip at least this share of its queries' rows to be recommended.
MIN_SKIPPED = 0.05
#: The recommendation reads at most this much more than the best candidate (relative) ...
RELATIVE_SLACK = 0.10
#: ... plus this much (a share of all rows).
ABSOLUTE_SLACK = 0.001

_SHORT_NAMES = {
    "bloom_filter": "bf",
    "tokenbf_v1": "tokenbf",
    "ngrambf_v1": "ngrambf",
    "sparse_grams": "sparsegrams",
}


@dataclass
class Recommendation:
    """The index advised for one column.

    Attributes:
        column: The column.
        index: The bloomskip ``--index`` text, or None when no index pays for itself or is
            worth its bytes.
        granule: Its ``--granule`` (``"row-group"`` or rows), None with no index.
        clickhouse_ddl: ``ALTER TABLE … ADD INDEX … GRANULARITY g``, None with no ClickHouse
            index (chosen on its own: a column may have one without a bloomskip index).
        rows_read_fraction: Rows the column's queries still read (1.0 with no index).
        index_bytes: Index bytes over the whole dataset (0 with no index).
        bits_per_row: Index bits per row.
        reason: Why this one (or why none).
        candidate: The chosen :class:`Candidate`, if any.
        closest: With no index because of the budget: the smallest candidates.
        clickhouse_candidate: The candidate of the DDL, chosen by the rows of its index granules
            (what ClickHouse reads) among those whose granules are 8,192 x GRANULARITY rows;
            None when none pays for itself there.
        clickhouse_reason: Why that one (or none).
        column_bytes: The column's stored bytes over the whole dataset (Parquet footers).
    """

    column: str
    index: str | None
    granule: str | int | None
    clickhouse_ddl: str | None
    rows_read_fraction: float
    index_bytes: int
    bits_per_row: float
    reason: str
    candidate: Candidate | None = None
    closest: list = field(default_factory=list)
    clickhouse_candidate: Candidate | None = None
    clickhouse_reason: str = ""
    column_bytes: int = 0

    @property
    def index_share(self) -> float | None:
        """The index's bytes over the column's (0 with no index; None for a column of none)."""
        return self.index_bytes / self.column_bytes if self.column_bytes else None

    @property
    def saved_share(self) -> float:
        """The share of the column an average query of the log saves (0 with no index)."""
        return self.candidate.saved_share if self.candidate is not None else 0.0

    def to_json(self) -> dict:
        """The recommendation as ``--json`` prints it."""
        chosen, server = self.candidate, self.clickhouse_candidate
        return {
            "column": self.column,
            "index": self.index,
            "granule": self.granule,
            "clickhouse_ddl": self.clickhouse_ddl,
            "rows_read_fraction": self.rows_read_fraction,
            "index_bytes": self.index_bytes,
            "bits_per_row": self.bits_per_row,
            "column_compressed_bytes": self.column_bytes,
            "index_share_of_column": self.index_share,
            "saved_share_per_query": self.saved_share,
            "reason": self.reason,
            "derivation": chosen.derivation if chosen is not None else None,
            "closest": self.closest,
            "clickhouse": None
            if server is None
            else {
                "index": server.index,
                "granularity": server.clickhouse_granularity,
                "rows_read_fraction": server.clickhouse_rows_read_fraction,
                "index_bytes": server.index_bytes,
                "index_share_of_column": server.index_share,
                "saved_share_per_query": server.clickhouse_saved_share,
                "derivation": server.derivation,
            },
            "clickhouse_reason": self.clickhouse_reason or None,
        }


@dataclass
class Advice:
    """What :func:`advise` measured and recommends.

    Attributes:
        dataset: The dataset path.
        table: The table name in the DDL.
        rows: Rows of the dataset.
        sample_rows: Rows the candidates were measured on.
        queries: The queries (with their columns).
        recommendations: One per column, in order of first use by the queries.
        candidates: Every candidate measured, per column in order.
        seconds: Wall time of the whole run.
        budget_bits_per_row: The budget, if one was given.
        granule: The one granule of every recommended index (one build has one granule),
            None when no index is recommended.
    """

    dataset: str
    table: str
    rows: int
    sample_rows: int
    queries: list
    recommendations: list
    candidates: list
    seconds: float
    budget_bits_per_row: float | None = None
    granule: str | int | None = None

    def build_command(self, dataset: str | None = None) -> str | None:
        """The one ``bloomskip index build`` command building every recommended index.

        Args:
            dataset: The DATASET to name in it (default: :attr:`dataset`).

        Returns:
            The command line, or None when no index is recommended.

        Example:
            >>> advise("logs/", "queries.txt").build_command()  # doctest: +SKIP
            "bloomskip index build logs/ --index 'user_id TYPE bloom_filter(0.001)' --index ..."
        """
        from bloomskip.advise.report import build_command

        indexes = [r.index for r in self.recommendations if r.index is not None]
        return build_command(self.dataset if dataset is None else dataset, indexes, self.granule)

    def to_json(self) -> dict:
        """Everything as ``bloomskip advise --json`` prints it.

        Example:
            >>> sorted(advise("logs/", "queries.txt").to_json())  # doctest: +SKIP
            ['budget_bits_per_row', 'candidates', 'candidates_per_second', ...]
        """
        return {
            "dataset": self.dataset,
            "rows": self.rows,
            "sample_rows": self.sample_rows,
            "budget_bits_per_row": self.budget_bits_per_row,
            "queries": [
                {"where": q.where, "count": q.count, "line": q.line, "columns": list(cols)}
                for q, cols in self.queries
            ],
            "granule": self.granule,
            "build_command": self.build_command(),
            "recommendations": [r.to_json() for r in self.recommendations],
            "candidates": [c.to_json() for c in self.candidates],
            "seconds": self.seconds,
            "candidates_per_second": len(self.candidates) / self.seconds if self.seconds else None,
        }


def advise(
    dataset: str | os.PathLike,
    queries: str | os.PathLike | Sequence[str] | Sequence[Query],
    *,
    columns: Sequence[str] | None = None,
    sample_rows: int | None = None,
    budget_bits_per_row: float | None = None,
    table: str | None = None,
    progress: bool | None = False,
) -> Advice:
    """Measure candidate skip indexes on a dataset's data with its queries and pick one per column.

    Args:
        dataset: A local Parquet file, folder or glob (or an Arrow IPC file).
        queries: A query file (one WHERE a line, optionally ``COUNT<TAB>WHERE``; see
            :mod:`bloomskip.advise.queries`), or the WHERE clauses themselves (each counted
            once), or :class:`~bloomskip.advise.queries.Query` objects.
        columns: Only advise on these columns (default: every column the queries read).
        sample_rows: Measure on about this many rows of whole row groups spread over the
            dataset (default: all rows).
        budget_bits_per_row: Only candidates of at most this many index bits per row.
        table: Table name for the ClickHouse DDL (default: from the dataset's name).
        progress: A progress bar on stderr; None: on a terminal only.

    Returns:
        An :class:`Advice`.

    Raises:
        BloomskipError: An unreadable or empty query file, a query that does not parse or
            names an unknown column, a ``columns`` entry no query reads (or not a column), a
            dataset that is not a local one, or a budget no candidate of any column meets (the
            message lists the smallest candidates).

    Example:
        >>> advice = advise("logs/", "queries.txt")  # doctest: +SKIP
        >>> advice.recommendations[0].index  # doctest: +SKIP
        'user_id TYPE bloom_filter(0.01)'
    """
    from bloomskip.dataset.dataset import Dataset
    from bloomskip.dataset.locate import is_remote, table_format

    started = time.perf_counter()
    if is_remote(dataset) or table_format(dataset) is not None:
        raise BloomskipError(
            f"{os.fspath(dataset)}: advise reads a local Parquet / Arrow IPC dataset (a file, "
            "folder or glob)"
        )
    ds = Dataset(dataset).backend
    origin, parsed = _queries(queries)
    if budget_bits_per_row is not None and not budget_bits_per_row > 0:
        raise BloomskipError(
            f"the budget must be a positive number of bits per row, not {budget_bits_per_row}"
        )
    scan_schema = ds.scan_schema()
    query_columns = check_queries(parsed, scan_schema, origin)
    targets = _target_columns(query_columns, columns, scan_schema)
    read_columns = list(dict.fromkeys(c for cols in query_columns for c in cols))
    plans = {column: _plan(column, ds, parsed, query_columns) for column in targets}

    from bloomskip.advise.measure import (
        count_false_positives,
        exact_matches,
        read_sample,
        rows_to_evaluate,
    )

    sample = read_sample(ds, read_columns, sample_rows)
    layouts = _granulations(sample)
    candidates = _measure_all(plans, sample, layouts, progress)
    by_granule = {layout.granule: layout for layout in layouts}
    rows = rows_to_evaluate(candidates, by_granule, sample, len(parsed))
    exact_matches(sample, parsed, scan_schema, rows)
    count_false_positives(candidates, by_granule, sample)
    _calibrate_rates(candidates)
    _mark(candidates, budget_bits_per_row)
    log_weight = sum(query.count for query in parsed)
    for candidate in candidates:
        candidate.weigh(sample.column_bytes[candidate.column], log_weight)
    mine = {column: [c for c in candidates if c.column == column] for column in targets}
    granule, choices = _common_granule(
        {column: [c for c in found if c.fits_budget] for column, found in mine.items()}
    )
    recommendations = [
        _recommend(
            column,
            mine[column],
            plans[column],
            budget_bits_per_row,
            table or _table_name(dataset),
            granule,
            choices.get(column),
            sample.column_bytes[column],
        )
        for column in targets
    ]
    if (
        budget_bits_per_row is not None
        and candidates
        and not any(c.fits_budget for c in candidates)
    ):
        raise BloomskipError(
            f"no candidate fits --budget-bits-per-row {budget_bits_per_row:g}; the closest: "
            + "; ".join(_describe(c) for c in _closest(candidates))
        )
    return Advice(
        dataset=os.fspath(dataset),
        table=table or _table_name(dataset),
        rows=sample.total_rows,
        sample_rows=sample.rows,
        queries=list(zip(parsed, query_columns, strict=True)),
        recommendations=recommendations,
        candidates=candidates,
        seconds=time.perf_counter() - started,
        budget_bits_per_row=budget_bits_per_row,
        granule=granule,
    )


def _queries(queries) -> tuple[str, list[Query]]:
    if isinstance(queries, str | os.PathLike):
        return os.fspath(queries), read_queries(queries)
    parsed = [
        q if isinstance(q, Query) else Query(str(q).strip(), 1, line)
        for line, q in enumerate(queries, start=1)
    ]
    if not parsed or any(not q.where for q in parsed):
        raise BloomskipError("queries: give at least one WHERE clause, none empty")
    return "queries", parsed


def _target_columns(query_columns, columns, schema) -> list[str]:
    used = list(dict.fromkeys(c for cols in query_columns for c in cols))
    if columns is None:
        return used
    for name in columns:
        if name not in schema.names:
            raise BloomskipError(
                f"--columns: {name!r} is not a column of the dataset (columns: "
                f"{', '.join(schema.names)})"
            )
        if name not in used:
            raise BloomskipError(f"--columns: no query reads {name!r}")
    return list(dict.fromkeys(columns))


@dataclass(eq=False)
class _Plan:
    """What can be tried on one column: its type and the index kinds some query can use."""

    column: str
    column_type: str | None
    queries: list
    bloom: bool = False
    token: bool = False
    ngrams: tuple = ()
    sparse: bool = False
    notes: list = field(default_factory=list)


def _plan(column: str, ds, queries: list[Query], query_columns) -> _Plan:
    from bloomskip.clickhouse.condition import compile_condition
    from bloomskip.clickhouse.ddl import quote_identifier
    from bloomskip.dataset.build.indexing import prepare_index

    mine = [(n, q) for n, (q, cols) in enumerate(zip(queries, query_columns, strict=True))
            if column in cols]  # fmt: skip
    plan = _Plan(column, None, mine)
    quoted = quote_identifier(column)
    conflicts = ds.schema_conflicts()

    def usable(clause: str) -> bool:
        kind = clause.split("(", 1)[0]
        try:
            prepared = prepare_index(f"{quoted} TYPE {clause}", ds.schema, None, conflicts)
        except BloomskipError as exc:
            plan.notes.append(f"{kind}: {exc}")
            return False
        types = dict(prepared.spec.column_types)
        plan.column_type = types[column]
        if any(compile_condition(q.where, prepared.definition, types).useful for _, q in mine):
            return True
        plan.notes.append(f"{kind}: no condition of these queries can use it")
        return False

    plan.bloom = usable("bloom_filter(0.01)")
    plan.token = usable("tokenbf_v1(256, 2, 0)")
    plan.ngrams = tuple(n for n in NGRAM_SIZES if usable(f"ngrambf_v1({n}, 256, 2, 0)"))
    lengths = ", ".join(map(str, SPARSE_GRAMS_LENGTHS))
    plan.sparse = usable(f"sparse_grams({lengths}, 256, 2, 0)")
    return plan


def _granulations(sample) -> list:
    """The distinct granulations. A fixed size cutting the sample exactly as the row groups
    do is left out, the row groups then standing for it (as ClickHouse index granules too);
    one cutting it as a smaller size does (files shorter than both) is left out too."""
    import numpy as np

    from bloomskip.advise.measure import granulation

    layouts = []
    for granule in ("row-group", *GRANULE_ROWS):
        layout = granulation(sample, granule)
        same = [other for other in layouts if np.array_equal(layout.rows, other.rows)]
        if not same:
            layouts.append(layout)
        elif same[0].clickhouse_rows is None:
            same[0].clickhouse_rows = layout.clickhouse_rows
    return layouts


def _measure_all(plans: dict, sample, layouts: list, progress: bool | None) -> list[Candidate]:
    """Measure the grid, pruned in two steps, on one thread per CPU (the builders run in C
    without the GIL).

    First each index kind (``bloom_filter``, ``tokenbf_v1``, ``ngrambf_v1`` with each n,
    ``sparse_grams``) is
    probed once, at the finest granules and rate 0.01: its best case, short of the lowest rate.
    A kind whose probe skips less than :data:`MIN_SKIPPED` cannot pay for itself at any size
    and is dropped; of the n-gram sizes only the best probe's n goes on. The kinds left are then
    measured at every granule and rate.
    """
    from concurrent.futures import ThreadPoolExecutor

    from tqdm import tqdm

    from bloomskip.advise.measure import distinct_items, measure
    from bloomskip.dataset.build.indexing import worker_count

    finest = max(layouts, key=lambda layout: len(layout.rows))
    measured: dict = {}
    sizes: dict = {}
    probes = sum(
        plan.bloom + plan.token + len(plan.ngrams) + plan.sparse for plan in plans.values()
    )
    with (
        ThreadPoolExecutor(max_workers=worker_count()) as executor,
        tqdm(
            total=probes,
            desc="measuring candidates",
            unit="index",
            disable=None if progress is None else not progress,
        ) as bar,
    ):

        def size_texts(jobs: list) -> None:
            # Distinct tokens / n-grams per granule, once per (kind, n, granule).
            wanted = list(dict.fromkeys(
                (plan, kind, n, layout) for plan, kind, n, layout, _ in jobs
                if kind != "bloom_filter" and (plan.column, kind, n, layout.granule) not in sizes
            ))  # fmt: skip
            counts = executor.map(
                lambda job: distinct_items(
                    sample, job[3], job[0].column, job[0].column_type, job[1], job[2]
                ),
                wanted,
            )
            for (plan, kind, n, layout), items in zip(wanted, counts, strict=True):
                sizes[(plan.column, kind, n, layout.granule)] = items

        def run(jobs: list) -> list[Candidate]:
            size_texts(jobs)
            candidates = [_candidate(sizes, *job) for job in jobs]
            fresh = list({
                (c.index, c.granule): (c, job) for c, job in zip(candidates, jobs, strict=True)
                if (c.index, c.granule) not in measured
            }.values())  # fmt: skip
            for candidate in executor.map(
                lambda item: measure(
                    item[0], sample, item[1][3], item[1][0].queries, item[1][0].column_type
                ),
                fresh,
            ):
                measured[(candidate.index, candidate.granule)] = candidate
            bar.update(len(jobs))
            return [measured[(c.index, c.granule)] for c in candidates]

        probe_jobs = []
        for plan in plans.values():
            kinds = [("bloom_filter", None)] * plan.bloom + [("tokenbf_v1", None)] * plan.token
            kinds += [("ngrambf_v1", n) for n in plan.ngrams]
            kinds += [("sparse_grams", SPARSE_GRAMS_LENGTHS)] * plan.sparse
            probe_jobs += [(plan, kind, n, finest, CHOOSING_RATE) for kind, n in kinds]
        kept: list = []
        by_column: dict = {}
        for job, probe in zip(probe_jobs, run(probe_jobs), strict=True):
            if probe.rows_read_fraction <= 1 - MIN_SKIPPED:
                by_column.setdefault(job[0].column, []).append((job, probe))
        for paying in by_column.values():
            grams = [item for item in paying if item[0][1] == "ngrambf_v1"]
            if grams:
                # n decides which queries an n-gram index serves at all; the size and the
                # granule then trade bytes for rows, as for the other kinds.
                best = min(
                    grams, key=lambda item: (item[1].rows_read_fraction, item[1].index_bytes)
                )
                paying = [item for item in paying if item[0][1] != "ngrambf_v1"] + [best]
            kept += [job[:3] for job, _ in paying]
        grid = [
            (plan, kind, n, layout, rate)
            for plan, kind, n in kept
            for layout in layouts
            for rate in RATES
            if layout is not finest or rate != CHOOSING_RATE
        ]
        bar.total = probes + len(grid)
        bar.refresh()
        run(grid)
    return list(measured.values())


def _candidate(sizes: dict, plan: _Plan, kind: str, ngram, layout, rate: float) -> Candidate:
    """The candidate of one grid point (a text index sized from ``sizes``); ``ngram`` is the
    tokenizer's arguments: None, ngrambf_v1's n, or sparse_grams' lengths (a tuple)."""
    from bloomskip.clickhouse.ddl import quote_identifier

    column = quote_identifier(plan.column)
    derivation = None
    if kind == "bloom_filter":
        clause = f"bloom_filter({rate:g})"
    else:
        size, hashes, sizing = text_size(sizes[(plan.column, kind, ngram, layout.granule)], rate)
        arguments = ", ".join(map(str, (*tokenizer_arguments(ngram), size, hashes, 0)))
        clause = f"{kind}({arguments})"
        derivation = f"{granule_label(layout.granule)}: {sizing}"
    return Candidate(
        plan.column,
        kind,
        f"{column} TYPE {clause}",
        layout.granule,
        rate,
        derivation,
        layout.clickhouse_rows,
    )


def _calibrate_rates(candidates: list[Candidate]) -> None:
    """Leave out of each candidate's measured false-positive rate the queries that no
    candidate of its column and type ever pruned a granule for.

    Such a condition cannot exclude anything at any size (a LIKE whose every token touches a
    wildcard, under ``tokenbf_v1``): its kept granules say nothing about the filter.
    """
    from bloomskip.advise.measure import measured_rate

    groups: dict = {}
    for candidate in candidates:
        groups.setdefault((candidate.column, candidate.type), []).append(candidate)
    for group in groups.values():
        never = frozenset(
            number
            for number in range(len(group[0].queries))
            if all(
                c.queries[number]["kept_without_match"]
                == c.queries[number]["granules_without_match"]
                for c in group
            )
        )
        for candidate in group:
            candidate.measured_fpr = measured_rate(candidate.queries, never)


def _mark(candidates: list[Candidate], budget: float | None) -> None:
    for candidate in candidates:
        candidate.fits_budget = budget is None or candidate.bits_per_row <= budget
    for candidate in candidates:
        rivals = [c for c in candidates if c.column == candidate.column and c.fits_budget]
        candidate.pareto = candidate.fits_budget and not any(
            other.index_bytes <= candidate.index_bytes
            and other.rows_read_fraction <= candidate.rows_read_fraction
            and (
                other.index_bytes < candidate.index_bytes
                or other.rows_read_fraction < candidate.rows_read_fraction
            )
            for other in rivals
        )


def _closest(candidates: list[Candidate], count: int = 3) -> list[Candidate]:
    return sorted(candidates, key=lambda c: (c.bits_per_row, c.rows_read_fraction))[:count]


def _describe(candidate: Candidate) -> str:
    return (
        f"{candidate.index} at {granule_label(candidate.granule)}: "
        f"{candidate.bits_per_row:.3g} bits/row, reads {candidate.rows_read_fraction:.1%}"
    )


def _choose(fitting: list[Candidate], clickhouse: bool = False) -> tuple[Candidate | None, str]:
    """The smallest candidate worth its bytes reading within the slack of the best one worth
    its bytes; None (and why) when even the best skips less than :data:`MIN_SKIPPED`, or when
    no candidate is worth its bytes (:meth:`Candidate.worth_its_bytes`).

    Args:
        fitting: Candidates of one column (within the budget).
        clickhouse: Weigh the rows ClickHouse reads (its index granules).
    """

    def rows(candidate: Candidate) -> float:
        if clickhouse:
            return candidate.clickhouse_rows_read_fraction
        return candidate.rows_read_fraction

    def saved(candidate: Candidate) -> float:
        return candidate.clickhouse_saved_share if clickhouse else candidate.saved_share

    best = min(rows(c) for c in fitting)
    if best > 1.0 - MIN_SKIPPED:
        return None, (
            f"no index pays for itself: the best candidate still reads {best:.1%} of the rows "
            f"(an index must skip at least {MIN_SKIPPED:.0%})"
        )
    worth = [c for c in fitting if c.worth_its_bytes(clickhouse)]
    if not worth:
        most = min(fitting, key=lambda c: (-saved(c), c.index_bytes))
        if not most.column_bytes:
            return None, (
                "no candidate is worth its bytes: the column has no stored bytes in the files, "
                "so no query saves any"
            )
        return None, (
            f"no candidate is worth its bytes: the one saving the most, {_label(most)}, reads "
            f"{rows(most):.2%} of the rows, so an average query of the log saves "
            f"{saved(most):.2%} of the column's {most.column_bytes:,} B, but the index is "
            f"{most.index_share:.2%} of it"
        )
    best = min(rows(c) for c in worth)
    limit = best * (1 + RELATIVE_SLACK) + ABSOLUTE_SLACK
    chosen = min((c for c in worth if rows(c) <= limit), key=lambda c: (c.index_bytes, rows(c)))
    reason = (
        f"the smallest candidate worth its bytes reading within {RELATIVE_SLACK:.0%} of the best "
        f"of them ({best:.2%} of the rows); per query of the log it saves {saved(chosen):.2%} of "
        f"the column, more than its own {chosen.index_share:.2%}"
    )
    return chosen, reason


def _label(candidate: Candidate) -> str:
    return f"{candidate.index} [{granule_label(candidate.granule)}]"


def _common_granule(fitting: dict) -> tuple[str | int | None, dict]:
    """The one granule of the recommendations, and each column's choice at it.

    A build has one granule for all its indexes, so the columns are advised at one granule:
    at each granule every column's choice is made (:func:`_choose`) among its candidates of that
    granule, and the granule whose choices save the most column bytes per query of the log
    (fewer index bytes breaking a tie) is the one.

    Args:
        fitting: Per column, its candidates within the budget.

    Returns:
        ``(granule, {column: (candidate, reason) | (None, reason)})``; ``(None, {})`` when no
        column has a candidate worth its bytes at any granule.
    """
    granules = list(dict.fromkeys(c.granule for found in fitting.values() for c in found))
    best, best_key = (None, {}), None
    for granule in granules:
        choices = {}
        for column, found in fitting.items():
            here = [c for c in found if c.granule == granule]
            if here:
                choices[column] = _choose(here)
        chosen = [c for c, _ in choices.values() if c is not None]
        if not chosen:
            continue
        key = (
            sum(c.saved_share * c.column_bytes for c in chosen),
            -sum(c.index_bytes for c in chosen),
        )
        if best_key is None or key > best_key:
            best, best_key = (granule, choices), key
    return best


def _recommend(
    column: str,
    candidates: list[Candidate],
    plan: _Plan,
    budget: float | None,
    table: str,
    granule: str | int | None,
    choice: tuple[Candidate | None, str] | None,
    column_bytes: int,
) -> Recommendation:
    """The recommendation of one column: its choice at the common ``granule`` (from
    :func:`_common_granule`), or none and why; and its ClickHouse DDL, chosen on its own
    (ClickHouse sets the GRANULARITY per index)."""
    from bloomskip.clickhouse.ddl import quote_identifier

    def none(reason: str, closest=(), ddl=None, server=None, server_reason="") -> Recommendation:
        return Recommendation(
            column, None, None, ddl, 1.0, 0, 0.0, reason, None, list(closest), server,
            server_reason, column_bytes,
        )  # fmt: skip

    if not candidates:
        # One line per index type, the n-gram sizes saying the same once.
        return none("no index can serve these queries: " + "; ".join(dict.fromkeys(plan.notes)))
    fitting = [c for c in candidates if c.fits_budget]
    if not fitting:
        closest = _closest(candidates)
        return none(
            f"no candidate fits --budget-bits-per-row {budget:g}; the closest: "
            + "; ".join(_describe(c) for c in closest),
            [c.to_json() for c in closest],
        )
    # ClickHouse reads its index granules, not row groups: its choice is made among the
    # candidates whose granules are ClickHouse index granules, by the rows of those granules.
    granular = [c for c in fitting if c.clickhouse_granularity is not None]
    server, server_reason = (
        _choose(granular, clickhouse=True)
        if granular
        else (None, "no candidate's granules are 8,192 x GRANULARITY rows")
    )
    ddl = None
    if server is not None:
        from bloomskip.clickhouse.ddl import parse_index_definition

        clause = server.index.split(" TYPE ", 1)[1]
        name = re.sub(r"\W", "_", f"{column}_{_SHORT_NAMES[server.type]}")
        definition = parse_index_definition(
            f"INDEX {quote_identifier(name)} {quote_identifier(column)} TYPE {clause} "
            f"GRANULARITY {server.clickhouse_granularity}"
        )
        ddl = f"ALTER TABLE {table} ADD {definition.to_sql()}"
    chosen, reason = choice if choice is not None else (None, "")
    if chosen is None:
        anywhere, anywhere_reason = _choose(fitting)
        if anywhere is None:
            reason = anywhere_reason
        else:
            # Worth its bytes only at another granule than the one the build uses.
            at = reason or "no candidate of that granule fits the budget"
            reason = (
                f"at the common granule ({granule_label(granule)}): {at}; {_label(anywhere)} "
                "would be, but one build has one granule, and that one saves the most bytes "
                "over all columns"
            )
        return none(reason, (), ddl, server, server_reason)
    return Recommendation(
        column,
        chosen.index,
        chosen.granule,
        ddl,
        chosen.rows_read_fraction,
        chosen.index_bytes,
        chosen.bits_per_row,
        reason,
        chosen,
        clickhouse_candidate=server,
        clickhouse_reason=server_reason,
        column_bytes=column_bytes,
    )


def _table_name(dataset) -> str:
    from pathlib import Path

    from bloomskip.clickhouse.ddl import quote_identifier

    stem = Path(os.fspath(dataset).rstrip("/*")).name.split(".")[0] or "events"
    return quote_identifier(re.sub(r"\W", "_", stem))
