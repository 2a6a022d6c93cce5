"""Which hash variant a file's filter was written with, and which series each reader misses.

A file does not record the tail variant of its filter. Rebuilding the filter from the file's own
series list tells it: a reader of one variant finds a series only if all of that series' bits
under that variant are set (Java readers use the signed tail, the C++ library and PyPI ``tsfile``
the unsigned tail). Whether a failed check hides data depends on the query path, see
:data:`READERS`: tree-model series queries drop a series whose check fails -- data the reader
silently skips -- while table-model queries walk the index without consulting the filter.
A query path can also miss a series by itself, whatever the filter holds: the C++ reader's
tree-model query parses the path text back into a DeviceID, and a table device of two tags or
with a null tag does not come back. Such a miss is the reader's own (``missed``), never counted
as one the filter causes (``hidden``).

Example:
    >>> with TsFileReader("cjk.tsfile") as reader:  # doctest: +SKIP
    ...     analysis = analyze_filter(reader)
    >>> analysis.hash_variant, analysis.rejected["signed-tail"][:1]  # doctest: +SKIP
    ('unsigned-tail', ['root.sg.设备.温度'])
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

from bloomskip.tsfile.filter import DEFAULT_ERROR_RATE
from bloomskip.tsfile.paths import (
    DEFAULT_CHARSET,
    DeviceSegments,
    cpp_tree_query_series,
    encode_path,
    encode_paths,
    is_utf8,
)
from bloomskip.tsfile.reader import Series, TsFileReader

#: The two kinds of reader and the tail each one hashes with.
READER_KINDS: dict[str, bool] = {"signed-tail": True, "unsigned-tail": False}
#: The ways a reader selects data: series by path (tree model: Java ``TsFileExecutor``, PyPI
#: ``query_timeseries``) or a table's rows by tag (Java ``TableQueryExecutor``, PyPI
#: ``query_table``).
QUERY_PATHS = ("tree_model_series_queries", "table_model_queries")


@dataclass(frozen=True)
class ReaderBehaviour:
    """What one reader library does with the filter, per query path, and how that is known.

    Attributes:
        name: The library.
        hash_variant: The tail it hashes paths with (a key of :data:`READER_KINDS`).
        consults_filter: Per query path, whether a failed filter check drops the series.
        basis: Per query path, where the behaviour was established.
        tree_query_series: How its tree-model series queries turn a series path text into the
            series they read (None: they are given the stored DeviceID itself); a series that
            does not come back as itself is one that query path never returns.
        addressing_basis: Per query path, how it names a series and where that was established.
    """

    name: str
    hash_variant: str
    consults_filter: dict[str, bool]
    basis: dict[str, str]
    tree_query_series: Callable[[str], tuple[DeviceSegments, str] | None] | None
    addressing_basis: dict[str, str]


#: The readers' real behaviour. PyPI's is reproduced by tests/tsfile/test_tsfile_java_written.py
#: on files written by the Java library; Java's is read in its source (release v2.0.0).
READERS: dict[str, ReaderBehaviour] = {
    "java": ReaderBehaviour(
        "Java",
        "signed-tail",
        {"tree_model_series_queries": True, "table_model_queries": False},
        {
            "tree_model_series_queries": "Java source: TsFileExecutor drops each selected series "
            "whose BloomFilter.contains is false",
            "table_model_queries": "Java source: TableQueryExecutor walks the device index "
            "without the filter",
        },
        None,
        {
            "tree_model_series_queries": "Java source: Path(IDeviceID, measurement, ...) names "
            "the stored DeviceID itself; Java read every row of every series of the "
            "Java-written table file",
            "table_model_queries": "Java source: TableQueryExecutor selects devices by tag values",
        },
    ),
    "cpp": ReaderBehaviour(
        "C++ / PyPI tsfile",
        "unsigned-tail",
        {"tree_model_series_queries": True, "table_model_queries": False},
        {
            "tree_model_series_queries": "observed: PyPI tsfile 2.5 query_timeseries returns 0 "
            "rows, without an error, for a series whose filter check fails",
            "table_model_queries": "observed: PyPI tsfile 2.5 query_table returns every row "
            "whatever the filter holds",
        },
        cpp_tree_query_series,
        {
            "tree_model_series_queries": "observed: PyPI tsfile 2.5 query_timeseries parses "
            "the path text into a tree-model DeviceID and, whatever the filter holds, never "
            "returns a series that does not parse back to itself (a device of two tags, a null "
            "tag, a dot in a tag): it returns 0 rows, the rows of the series the text names, or "
            "InvalidPathError",
            "table_model_queries": "observed: PyPI tsfile 2.5 query_table returns every row "
            "of every series, null tags included",
        },
    ),
}
#: How far above the target false-positive rate a filter must be to count as saturated.
SATURATION_FACTOR = 2.0

DetectedVariant = Literal["signed-tail", "unsigned-tail", "both", "neither"]


def reader_batch(paths: list[str], signed_tail: bool, charset: str) -> list:
    """The bytes one kind of reader hashes for ``paths``.

    Java readers (signed tail) hash the platform charset, ``charset``; the C++ library and PyPI
    ``tsfile`` (unsigned tail) always hash UTF-8.

    Args:
        paths: Series path texts.
        signed_tail: The reader kind (see :data:`READER_KINDS`).
        charset: The Java writers' and readers' charset.

    Returns:
        A batch for :class:`BloomFilter` (``bytes`` items are hashed as they are).

    Example:
        >>> reader_batch(["a.é"], False, "latin-1")
        [b'a.\xc3\xa9']
    """
    if signed_tail or is_utf8(charset):
        return encode_paths(paths, charset)
    return [encode_path(path, DEFAULT_CHARSET) for path in paths]


@dataclass(frozen=True)
class FilterAnalysis:
    """A file's filter against its own series list.

    Attributes:
        hash_variant: Which kinds of reader find every series: ``both`` (e.g. ASCII-only paths,
            or a filter holding both variants' bits), ``signed-tail``, ``unsigned-tail`` or
            ``neither``; None when the file has no filter (readers then skip the check).
        exact_match: Per variant (``both`` = the union), whether rebuilding the filter from the
            series list gives exactly the stored bits.
        rejected: Per reader kind, the indexed series paths whose filter check fails (time
            columns included).
        hidden: Per reader (a key of :data:`READERS`) and query path, the series that path
            does not return because the filter check fails: the rejected paths, except time
            columns (never selected as series) and the reader's own misses, for paths that
            consult the filter (:func:`query_misses`).
        missed: Per reader and query path, the series that path does not return whatever the
            filter holds (the reader's own misses, not the filter's).
        model: ``tree``, ``table`` or ``mixed``: whether the series belong to table schemas.
        target_fpr: The error rate the writer's sizing aims at.
        effective_fpr: ``fill_ratio ** k``, the false-positive rate the filter actually has.
    """

    file: str
    version: int
    series_count: int
    has_filter: bool
    byte_length: int
    bit_count: int | None
    hash_function_count: int | None
    bits_set: int
    fill_ratio: float | None
    effective_fpr: float | None
    estimated_items: float | None
    target_fpr: float
    hash_variant: DetectedVariant | None
    exact_match: dict[str, bool] = field(default_factory=dict)
    rejected: dict[str, list[str]] = field(default_factory=dict)
    hidden: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    missed: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    model: Literal["tree", "table", "mixed"] = "tree"

    @property
    def saturated(self) -> bool:
        """True when the effective false-positive rate is over twice the writer's target.

        A filter sized by the writer formula sits right at its target when full, so only a clear
        excess (too few bits for the series, as the C++ writer's path count can cause) counts.
        """
        return (
            self.effective_fpr is not None
            and self.effective_fpr > SATURATION_FACTOR * self.target_fpr
        )

    @property
    def false_negatives(self) -> bool:
        """True when the filter makes some reader's query path silently miss an indexed series
        (a series the reader would return with a filter that holds its path)."""
        return any(any(paths.values()) for paths in self.hidden.values())

    @property
    def reader_misses(self) -> bool:
        """True when some reader's query path misses an indexed series whatever the filter
        holds (not the filter's doing)."""
        return any(any(paths.values()) for paths in self.missed.values())

    def readers(self) -> dict[str, dict[str, Any]]:
        """Per reader: its hash and, per query path, whether the filter is consulted, the
        series the filter hides, the series the reader misses by itself, and the basis of each
        claim (what ``verify --json`` prints).

        Returns:
            ``{reader: {"name", "hash_variant", query_path: {"filter_consulted", "hidden",
            "basis", "missed_by_reader", "missed_by_reader_basis"}}}`` for each reader of
            :data:`READERS` and path of :data:`QUERY_PATHS`.

        Example:
            >>> analysis.readers()["cpp"]["table_model_queries"]["hidden"]  # doctest: +SKIP
            []
        """
        report: dict[str, dict[str, Any]] = {}
        for key, reader in READERS.items():
            entry: dict[str, Any] = {"name": reader.name, "hash_variant": reader.hash_variant}
            for query_path in QUERY_PATHS:
                entry[query_path] = {
                    "filter_consulted": reader.consults_filter[query_path],
                    "hidden": self.hidden.get(key, {}).get(query_path, []),
                    "basis": reader.basis[query_path],
                    "missed_by_reader": self.missed.get(key, {}).get(query_path, []),
                    "missed_by_reader_basis": reader.addressing_basis[query_path],
                }
            report[key] = entry
        return report

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dictionary (``inf`` estimates become None)."""
        result = asdict(self)
        del result["hidden"], result["missed"]  # given per reader, with the query paths' facts
        for key, value in result.items():
            if isinstance(value, float) and not math.isfinite(value):
                result[key] = None
        result["readers"] = self.readers()
        result["saturated"] = self.saturated
        result["false_negatives"] = self.false_negatives
        result["reader_misses"] = self.reader_misses
        return result


def analyze_filter(reader: TsFileReader, error_rate: float = DEFAULT_ERROR_RATE) -> FilterAnalysis:
    """Rebuild the filter from the file's series and compare it with the stored one.

    Args:
        reader: An open reader (the whole index is read once).
        error_rate: The writer's configured error rate, for the saturation verdict.

    Returns:
        The analysis.

    Raises:
        FormatError: The file's index is corrupt.
    """
    series = reader.series()
    paths = [item.path for item in series]
    schemas = reader.metadata.table_schemas
    table_model = np.fromiter((item.device[0] in schemas for item in series), bool, len(series))
    model = (
        "table" if table_model.all() and len(series) else "mixed" if table_model.any() else "tree"
    )
    stored = reader.metadata.bloom_filter
    if stored is None:
        _, missed = query_misses(series, None)
        return FilterAnalysis(
            reader.path, reader.version, len(paths), False, 0, None, None, 0, None, None, None,
            error_rate, None, missed=missed, model=model,
        )  # fmt: skip
    rejected: dict[str, list[str]] = {}
    accepted: dict[str, np.ndarray] = {}
    rebuilt: dict[str, np.ndarray] = {}
    for kind, signed_tail in READER_KINDS.items():
        batch = reader_batch(paths, signed_tail, reader.charset)
        accepted[kind] = stored.contains_with(batch, signed_tail)
        rejected[kind] = [paths[index] for index in np.flatnonzero(~accepted[kind])]
        # Compare sets of bit positions rather than bitsets: a file may claim 2**31 bits.
        rebuilt[kind] = np.unique(stored.positions_batch(batch, signed_tail))
    hidden, missed = query_misses(series, accepted)
    rebuilt["both"] = np.union1d(rebuilt["signed-tail"], rebuilt["unsigned-tail"])
    stored_positions = stored.set_positions()
    exact = {
        kind: bool(np.array_equal(positions, stored_positions))
        for kind, positions in rebuilt.items()
    }
    return FilterAnalysis(
        file=reader.path,
        version=reader.version,
        series_count=len(paths),
        has_filter=True,
        byte_length=stored.byte_length,
        bit_count=stored.bit_count,
        hash_function_count=stored.hash_function_count,
        bits_set=stored.bits_set,
        fill_ratio=stored.fill_ratio,
        effective_fpr=stored.estimated_fpr,
        estimated_items=stored.estimated_items,
        target_fpr=error_rate,
        hash_variant=_classify(not rejected["signed-tail"], not rejected["unsigned-tail"]),
        exact_match=exact,
        rejected=rejected,
        hidden=hidden,
        missed=missed,
        model=model,
    )


def query_misses(
    series: Sequence[Series], accepted: Mapping[str, np.ndarray] | None
) -> tuple[dict[str, dict[str, list[str]]], dict[str, dict[str, list[str]]]]:
    """Per reader and query path, the series the filter hides and those the reader misses anyway.

    A query path returns a series only if it can name it and, where it consults the filter,
    the check passes under the reader's hash. Tree-model series queries of a reader with a
    :attr:`ReaderBehaviour.tree_query_series` name a series by its path text, and read the
    series that text parses back to: a series that does not come back as itself is missed
    whatever the filter holds -- the reader's miss. The filter hides only series the path
    could otherwise name. Time columns (measurement ``""``) are never selected, so neither.

    Args:
        series: The file's series (:meth:`TsFileReader.series`).
        accepted: Per reader kind (a key of :data:`READER_KINDS`), which series pass the
            filter check; None when the file has no filter (readers then skip the check).

    Returns:
        ``(hidden, missed)``, each ``{reader: {query_path: paths}}`` for every reader of
        :data:`READERS` and path of :data:`QUERY_PATHS`, paths in ``series`` order.

    Example:
        >>> with TsFileReader("java_table_trailing_null.tsfile") as reader:  # doctest: +SKIP
        ...     hidden, missed = query_misses(reader.series(), None)
        >>> missed["cpp"]["tree_model_series_queries"][:2]  # doctest: +SKIP
        ['t1.null.d4.s1', 't1.null.d4.温度']
    """
    paths = [item.path for item in series]
    selectable = np.fromiter((item.measurement != "" for item in series), bool, len(series))
    hidden: dict[str, dict[str, list[str]]] = {}
    missed: dict[str, dict[str, list[str]]] = {}
    for key, behaviour in READERS.items():
        named = {query_path: selectable for query_path in QUERY_PATHS}
        if behaviour.tree_query_series is not None:
            parse = behaviour.tree_query_series
            comes_back = np.fromiter(
                (parse(path) == (item.device, item.measurement)
                 for path, item in zip(paths, series, strict=True)),
                bool, len(series),
            )  # fmt: skip
            named["tree_model_series_queries"] = selectable & comes_back
        hidden[key], missed[key] = {}, {}
        for query_path in QUERY_PATHS:
            failing = np.zeros_like(selectable)
            if accepted is not None and behaviour.consults_filter[query_path]:
                failing = ~accepted[behaviour.hash_variant]
            hidden[key][query_path] = [
                paths[index] for index in np.flatnonzero(named[query_path] & failing)
            ]
            missed[key][query_path] = [
                paths[index] for index in np.flatnonzero(selectable & ~named[query_path])
            ]
    return hidden, missed


def _classify(signed_ok: bool, unsigned_ok: bool) -> DetectedVariant:
    if signed_ok and unsigned_ok:
        return "both"
    if signed_ok:
        return "signed-tail"
    if unsigned_ok:
        return "unsigned-tail"
    return "neither"
