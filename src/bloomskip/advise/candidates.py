"""The candidate indexes ``bloomskip advise`` measures, and how a text index is sized.

Per column the queries read, the grid is:

* ``bloom_filter`` at false-positive rates 0.1, 0.01 and 0.001 (ClickHouse sizes each granule
  by its distinct values: ``clickhouse.sizing.bloom_filter_parameters``);
* ``tokenbf_v1``, ``ngrambf_v1`` (n = 2..5) and ``sparse_grams(3, 100, ...)`` for String columns,
  sized for the same three rates from the distinct tokens / n-grams / sparse grams measured per
  granule (:func:`text_size`);
* each over granules of one row group and of 8,192, 16,384, 32,768 and 65,536 rows
  (ClickHouse ``GRANULARITY`` 1, 2, 4, 8 at ``index_granularity = 8192``).

An index type enters only when some query's condition can use it (the condition compiler's
``useful``, the same code a query runs); ``advisor._measure_all`` then probes each type once and
measures the full grid (up to 15 candidates) only for the types that pay, ``ngrambf_v1`` with
the one n whose probe reads the fewest rows.

Example:
    >>> round(filter_bits(1000, 0.01, 3))
    12364
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

#: ``bloom_filter`` rates tried, and the target rates a text index is sized for.
RATES = (0.1, 0.01, 0.001)
#: Rows per ClickHouse data granule (``index_granularity``) the DDL's GRANULARITY counts in.
INDEX_GRANULARITY = 8192
#: Fixed granule sizes tried, besides one row group.
GRANULE_ROWS = (8192, 16384, 32768, 65536)
#: Text index sizes are powers of two within these bounds (ClickHouse accepts any size).
MIN_TEXT_BYTES, MAX_TEXT_BYTES = 256, 65536
#: Hash counts a text index may use.
MAX_TEXT_HASHES = 5
#: n-gram sizes tried.
NGRAM_SIZES = (2, 3, 4, 5)
#: sparse_grams' min_ngram_length and max_ngram_length tried (ClickHouse's defaults).
SPARSE_GRAMS_LENGTHS = (3, 100)
#: The rate ``ngrambf_v1``'s n is chosen at.
CHOOSING_RATE = 0.01


@dataclass
class Candidate:
    """One index to measure, and what was measured.

    Attributes:
        column: The column indexed.
        type: ``bloom_filter``, ``tokenbf_v1``, ``ngrambf_v1`` or ``sparse_grams``.
        index: The bloomskip ``--index`` text, e.g. ``"user_id TYPE bloom_filter(0.01)"``.
        granule: ``"row-group"`` or rows per granule (``--granule``).
        target_rate: The false-positive rate it was sized for.
        derivation: For a text index, how its size and hash count follow from the measured
            distinct items per granule.
        clickhouse_granule_rows: The granules' rows when they are ClickHouse index granules
            (8,192 x GRANULARITY rows): fixed granules, or row groups that hold exactly that
            many rows; else None.
        index_bytes: Index bytes over the whole dataset (scaled from the sample).
        bits_per_row: ``8 * index_bytes / rows``.
        rows_read_fraction: Rows the exact filter still reads over all rows, averaged over the
            column's queries weighted by their counts (1.0 for a query it cannot help).
        clickhouse_rows_read_fraction: The same with the rows of the kept granules only, as
            ClickHouse reads them (a dataset query reads whole row groups).
        queries: Per query of the column: ``{"number", "where", "count", "useful",
            "rows_read_fraction",
            "clickhouse_granules_kept", "granules_without_match", "kept_without_match"}``
            (data granules of 8,192 rows kept, as ClickHouse's ``EXPLAIN indexes = 1`` counts
            them, None without ClickHouse granules; granules holding no matching row, and
            those of them kept, None where the index is not used).
        measured_fpr: Granules kept that hold no matching row, over granules that hold none,
            weighted by count, over the queries some candidate of the column and type prunes
            for; None when no such granule was probed.
        expected_fpr: Mean of ``fill_ratio ** hashes`` over the granules (the index's own
            estimate).
        seconds: Time spent building and probing it.
        column_bytes: The column's stored bytes over the whole dataset (Parquet footers:
            its column chunks' ``total_compressed_size``), what the index is weighed against.
        saved_share: The share of the column an average query of the whole log no longer
            reads: ``sum over the column's queries of count / log weight * (1 - rows read)``.
        clickhouse_saved_share: The same with ``clickhouse_rows_read_fraction``.
        pareto: On the column's Pareto front (no other candidate is smaller and reads no more,
            or reads less and is no larger).
        fits_budget: Within ``--budget-bits-per-row``.
        keeps: Per entry of ``queries``, the granules the index keeps (``bool``), or None
            where it is not used; not part of the JSON.
    """

    column: str
    type: str
    index: str
    granule: str | int
    target_rate: float
    derivation: str | None = None
    clickhouse_granule_rows: int | None = None
    index_bytes: int = 0
    bits_per_row: float = 0.0
    rows_read_fraction: float = 1.0
    clickhouse_rows_read_fraction: float = 1.0
    queries: list = field(default_factory=list)
    measured_fpr: float | None = None
    expected_fpr: float = 1.0
    seconds: float = 0.0
    column_bytes: int = 0
    saved_share: float = 0.0
    clickhouse_saved_share: float = 0.0
    pareto: bool = False
    fits_budget: bool = True
    keeps: list = field(default_factory=list, repr=False)

    @property
    def clickhouse_granularity(self) -> int | None:
        """The ClickHouse ``GRANULARITY`` whose index granules are this candidate's granules
        (``rows / 8192``, ClickHouse's default ``index_granularity``), or None for row groups
        that are not a whole number of 8,192-row granules.

        Example:
            >>> Candidate("v", "bloom_filter", "v TYPE bloom_filter", 32768, 0.01,
            ...           clickhouse_granule_rows=32768).clickhouse_granularity
            4
        """
        if self.clickhouse_granule_rows is None:
            return None
        return self.clickhouse_granule_rows // INDEX_GRANULARITY

    @property
    def index_share(self) -> float | None:
        """Index bytes over the column's stored bytes; None for a column of no stored bytes.

        Example:
            >>> Candidate("v", "bloom_filter", "v TYPE bloom_filter", 8192, 0.01,
            ...           index_bytes=250, column_bytes=1000).index_share
            0.25
        """
        return self.index_bytes / self.column_bytes if self.column_bytes else None

    def weigh(self, column_bytes: int, log_weight: int) -> None:
        """Set :attr:`column_bytes` and what an average query of the whole log saves of it.

        Args:
            column_bytes: The column's stored bytes over the whole dataset.
            log_weight: The counts of every query of the log added up, whatever it reads.

        Example:
            >>> c = Candidate("v", "bloom_filter", "v TYPE bloom_filter", 8192, 0.01,
            ...               rows_read_fraction=0.2, queries=[{"count": 1}])
            >>> c.weigh(1000, 4)
            >>> c.saved_share
            0.2
        """
        share = sum(item["count"] for item in self.queries) / log_weight
        self.column_bytes = column_bytes
        self.saved_share = share * (1.0 - self.rows_read_fraction)
        self.clickhouse_saved_share = share * (1.0 - self.clickhouse_rows_read_fraction)

    def worth_its_bytes(self, clickhouse: bool = False) -> bool:
        """Whether an average query of the log saves more bytes of the column than the index
        holds: ``saved_share * column_bytes > index_bytes``.

        Args:
            clickhouse: Weigh the rows ClickHouse reads (its index granules) instead.

        Example:
            >>> c = Candidate("v", "bloom_filter", "v TYPE bloom_filter", 8192, 0.01,
            ...               index_bytes=300, column_bytes=1000, saved_share=0.25)
            >>> c.worth_its_bytes()
            False
        """
        saved = self.clickhouse_saved_share if clickhouse else self.saved_share
        return saved * self.column_bytes > self.index_bytes

    def to_json(self) -> dict:
        """The candidate as ``--json`` prints it."""
        return {
            "column": self.column,
            "type": self.type,
            "index": self.index,
            "granule": self.granule,
            "clickhouse_granularity": self.clickhouse_granularity,
            "target_fpr": self.target_rate,
            "index_bytes": self.index_bytes,
            "bits_per_row": self.bits_per_row,
            "rows_read_fraction": self.rows_read_fraction,
            "clickhouse_rows_read_fraction": self.clickhouse_rows_read_fraction,
            "measured_fpr": self.measured_fpr,
            "expected_fpr": self.expected_fpr,
            "column_compressed_bytes": self.column_bytes,
            "index_share_of_column": self.index_share,
            "saved_share_per_query": self.saved_share,
            "clickhouse_saved_share_per_query": self.clickhouse_saved_share,
            "worth_its_bytes": self.worth_its_bytes(),
            "clickhouse_worth_its_bytes": self.worth_its_bytes(clickhouse=True),
            "pareto": self.pareto,
            "fits_budget": self.fits_budget,
            "derivation": self.derivation,
            "seconds": self.seconds,
            "queries": self.queries,
        }


def filter_bits(items: float, rate: float, hashes: int) -> float:
    """Bits a Bloom filter needs to hold ``items`` at false-positive ``rate`` with ``hashes``.

    The inverse of ``rate = (1 - exp(-k n / m)) ** k``: ``m = -n k / ln(1 - rate ** (1 / k))``.

    Args:
        items: n, distinct items (tokens or n-grams of a granule); at least 1 is used.
        rate: p, in (0, 1).
        hashes: k, at least 1.

    Returns:
        m, in bits (not rounded).

    Example:
        >>> round(filter_bits(100, 0.1, 1))
        949
    """
    return -max(items, 1.0) * hashes / math.log1p(-(rate ** (1.0 / hashes)))


def false_positive_rate(items: float, bits: float, hashes: int) -> float:
    """``(1 - exp(-k n / m)) ** k``: the chance that k positions of an absent item are all set.

    Example:
        >>> round(false_positive_rate(100, 949, 1), 3)
        0.1
    """
    return (1.0 - math.exp(-hashes * max(items, 1.0) / bits)) ** hashes


def tokenizer_arguments(tokenizer: int | tuple[int, ...] | None) -> tuple[int, ...]:
    """The TYPE arguments a text index's tokenizer takes before the filter's three.

    Args:
        tokenizer: None (tokenbf_v1), ngrambf_v1's n, or sparse_grams' lengths.

    Returns:
        The arguments, in DDL order.

    Example:
        >>> tokenizer_arguments(None), tokenizer_arguments(3), tokenizer_arguments((3, 100))
        ((), (3,), (3, 100))
    """
    if tokenizer is None:
        return ()
    return tokenizer if isinstance(tokenizer, tuple) else (tokenizer,)


def text_size(items: float, rate: float) -> tuple[int, int, str]:
    """Size a text index for granules of ``items`` distinct tokens / n-grams at ``rate``.

    The hash count k in 1..5 needing the fewest bits (:func:`filter_bits`) is chosen, the size
    rounded up to a power of two bytes within 256 B..64 KiB, and k chosen again for that size
    (the k of the lowest rate there).

    Args:
        items: Distinct items per granule (as measured).
        rate: Target false-positive rate.

    Returns:
        ``(size_bytes, hashes, derivation)``; the derivation is one line showing the formula.

    Example:
        >>> text_size(1000, 0.01)[:2]
        (2048, 5)
    """
    needed = {k: filter_bits(items, rate, k) for k in range(1, MAX_TEXT_HASHES + 1)}
    k = min(needed, key=needed.__getitem__)
    size = MIN_TEXT_BYTES
    while size * 8 < needed[k] and size < MAX_TEXT_BYTES:
        size *= 2
    best = min(range(1, MAX_TEXT_HASHES + 1), key=lambda h: false_positive_rate(items, 8 * size, h))
    expected = false_positive_rate(items, 8 * size, best)
    derivation = (
        f"n = {items:,.0f} distinct per granule, p = {rate:g}: m = -n*k/ln(1-p^(1/k)) = "
        f"{needed[k]:,.0f} bits at k = {k} -> {size:,} B (power of two in 256 B..64 KiB), "
        f"k = {best}: expected fpr (1-e^(-kn/m))^k = {expected:.2g}"
    )
    return size, best, derivation


def granule_label(granule: str | int) -> str:
    """``"row-group"`` or the row count with thousands separators.

    Example:
        >>> granule_label(16384)
        '16,384 rows'
    """
    return granule if isinstance(granule, str) else f"{granule:,} rows"
