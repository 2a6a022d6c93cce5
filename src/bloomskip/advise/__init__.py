"""``bloomskip advise``: choose skip indexes from a dataset's own data and queries.

``advise(dataset, queries)`` builds candidate ``bloom_filter`` / ``tokenbf_v1`` /
``ngrambf_v1`` indexes over the data, probes them with the queries' real conditions, and
recommends one index (or none) per column; ``bloomskip.advise.figures`` and
``bloomskip.advise.report`` draw it (the ``[plot]`` extra). Importing this package loads
nothing heavy: the work is imported when it runs.

Example:
    >>> from bloomskip.advise import advise
    >>> advise("logs/", "queries.txt").recommendations[0].index  # doctest: +SKIP
    'user_id TYPE bloom_filter(0.01)'
"""

from __future__ import annotations

from bloomskip.advise.advisor import Advice, Recommendation, advise
from bloomskip.advise.candidates import Candidate
from bloomskip.advise.queries import Query, read_queries

__all__ = ["Advice", "Candidate", "Query", "Recommendation", "advise", "read_queries"]
