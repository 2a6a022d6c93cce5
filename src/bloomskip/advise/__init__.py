"""``bloomskip advise``: choose skip indexes from a dataset's own data and queries.

``advise(dataset, queries)`` builds candidate ``bloom_filter`` / ``tokenbf_v1`` /
``ngrambf_v1`` / ``sparse_grams`` indexes over the data, probes them with the queries' real
conditions, and recommends one index (or none) per column, each worth its bytes against the
column's compressed size, all at one granule and built by one command;
``bloomskip.advise.figures`` and ``bloomskip.advise.report`` draw it (the ``[plot]`` extra).
Importing this package loads nothing heavy: the work is imported when it runs.

Example:
    >>> from bloomskip.advise import advise
    >>> advise("logs/", "queries.txt").recommendations[0].index  # doctest: +SKIP
    'user_id TYPE bloom_filter(0.01)'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bloomskip.advise.advisor import Advice, Recommendation, advise
    from bloomskip.advise.candidates import Candidate
    from bloomskip.advise.queries import Query, read_queries

__all__ = ["Advice", "Candidate", "Query", "Recommendation", "advise", "read_queries"]

_HOMES = {
    "Advice": "advisor",
    "Recommendation": "advisor",
    "advise": "advisor",
    "Candidate": "candidates",
    "Query": "queries",
    "read_queries": "queries",
}


def __getattr__(name: str):  # noqa: ANN202 - the names above
    # Loaded on first use: the CLI registers `advise` on every start, and needs none of them.
    if name not in _HOMES:
        raise AttributeError(f"module 'bloomskip.advise' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"bloomskip.advise.{_HOMES[name]}"), name)
