"""Which hash variant a file's filter was written with, and which series each reader misses.

A file does not record the tail variant of its filter. Rebuilding the filter from the file's own
series list tells it: a reader of one variant finds a series only if all of that series' bits
under that variant are set. A series whose bits are not all set is a false negative for that kind
of reader -- data it silently skips (Java readers use the signed tail, the C++ library and PyPI
``tsfile`` the unsigned tail).

Example:
    >>> with TsFileReader("cjk.tsfile") as reader:  # doctest: +SKIP
    ...     analysis = analyze_filter(reader)
    >>> analysis.hash_variant, analysis.rejected["signed-tail"][:1]  # doctest: +SKIP
    ('unsigned-tail', ['root.sg.设备.温度'])
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

from bloomskip.tsfile.filter import DEFAULT_ERROR_RATE
from bloomskip.tsfile.paths import DEFAULT_CHARSET, encode_path, encode_paths, is_utf8
from bloomskip.tsfile.reader import TsFileReader

#: The two kinds of reader and the tail each one hashes with.
READER_KINDS: dict[str, bool] = {"signed-tail": True, "unsigned-tail": False}
READER_NAMES = {"signed-tail": "Java", "unsigned-tail": "C++ / PyPI tsfile"}
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
        rejected: Per reader kind, the indexed series paths whose filter check fails.
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
        """True when some kind of reader misses an indexed series."""
        return any(self.rejected.values())

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dictionary (``inf`` estimates become None)."""
        result = asdict(self)
        for key, value in result.items():
            if isinstance(value, float) and not math.isfinite(value):
                result[key] = None
        result["saturated"] = self.saturated
        result["false_negatives"] = self.false_negatives
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
    paths = reader.series_paths()
    stored = reader.metadata.bloom_filter
    if stored is None:
        return FilterAnalysis(
            reader.path, reader.version, len(paths), False, 0, None, None, 0, None, None, None,
            error_rate, None,
        )  # fmt: skip
    rejected: dict[str, list[str]] = {}
    rebuilt: dict[str, np.ndarray] = {}
    for kind, signed_tail in READER_KINDS.items():
        batch = reader_batch(paths, signed_tail, reader.charset)
        found = stored.contains_with(batch, signed_tail)
        rejected[kind] = [paths[index] for index in np.flatnonzero(~found)]
        # Compare sets of bit positions rather than bitsets: a file may claim 2**31 bits.
        rebuilt[kind] = np.unique(stored.positions_batch(batch, signed_tail))
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
    )


def _classify(signed_ok: bool, unsigned_ok: bool) -> DetectedVariant:
    if signed_ok and unsigned_ok:
        return "both"
    if signed_ok:
        return "signed-tail"
    if unsigned_ok:
        return "unsigned-tail"
    return "neither"
