"""ClickHouse Bloom-filter skip indexes: ``bloom_filter``, ``ngrambf_v1``, ``tokenbf_v1`` and
``sparse_grams``.

The package is split like ClickHouse's own code (see docs/architecture.md):

* :mod:`bloomskip.clickhouse.ddl`: index definitions and CREATE TABLE statements (sqlglot);
* :mod:`bloomskip.clickhouse.sizing`: ``bloom_filter(fpr)`` -> (bits per row, hash count);
* :mod:`bloomskip.clickhouse.types`: per-type value hashing over Arrow arrays;
* :mod:`bloomskip.clickhouse.granule`: the granules of an index and their vectorized probes;
* :mod:`bloomskip.clickhouse.index`: :class:`~bloomskip.clickhouse.index.SkipIndex`, build and
  (de)serialization;
* the query side (tokenizers, condition, simulate) and the on-disk part readers.

Nothing is imported here, so ``import bloomskip.clickhouse.<module>`` stays cheap.
"""
