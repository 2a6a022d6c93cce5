"""Small multi-file test datasets with nulls, dictionaries, lists and non-ASCII text."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

WORDS = [
    "alpha", "beta", "gamma", "delta", "error", "timeout", "GET", "POST", "user", "cart",
    "Привет", "мир", "café", "naïve", "☃snow", "東京", "x1", "v2", "404", "500",
]  # fmt: skip
SEPARATORS = [" ", " ", " ", "-", "_", "/", ", ", ".", ":", "%"]
CATEGORIES = ["red", "green", "blue", "ünïcode", "black", "white"]
INDEXES = [
    "INDEX k_bf k TYPE bloom_filter(0.05)",
    "INDEX s_tok s TYPE tokenbf_v1(512, 2, 0)",
    "INDEX s_ngram s TYPE ngrambf_v1(3, 512, 2, 7)",
    "INDEX d_bf d TYPE bloom_filter",
    "INDEX tags_bf tags TYPE bloom_filter(0.01)",
    "INDEX tags_tok tags TYPE tokenbf_v1(256, 2, 1)",
]


def make_table(rows: int, seed: int, first_id: int) -> pa.Table:
    """Rows with ids ``first_id..``: k clustered by row, text with rare words, nulls, lists."""
    rng = np.random.default_rng(seed)
    ids = np.arange(first_id, first_id + rows, dtype=np.int64)
    # k is clustered (like a timestamp-correlated id) so that row groups hold distinct ranges.
    k = (ids // 7) * 13 + rng.integers(0, 3, rows)
    word_count = rng.integers(0, 6, rows)
    # Rare words (the tail of WORDS) are much rarer than common ones.
    weights = np.linspace(30, 1, len(WORDS)) ** 2
    weights /= weights.sum()
    texts = []
    picks = rng.choice(len(WORDS), size=(rows, 6), p=weights)
    seps = rng.integers(0, len(SEPARATORS), size=(rows, 6))
    for row in range(rows):  # test data only: the library itself never loops over rows
        parts = []
        for j in range(word_count[row]):
            parts.append(WORDS[picks[row, j]])
            parts.append(SEPARATORS[seps[row, j]])
        texts.append("".join(parts[:-1]) if parts else "")
    s = pa.array(texts, pa.string())
    s_nulls = rng.random(rows) < 0.05
    s = pa.array([None if n else t for t, n in zip(texts, s_nulls, strict=True)], pa.string())
    d = pa.DictionaryArray.from_arrays(
        pa.array(rng.integers(0, len(CATEGORIES), rows).astype(np.int32),
                 mask=rng.random(rows) < 0.03),
        pa.array(CATEGORIES),
    )  # fmt: skip
    tags = []
    for _ in range(rows):
        count = int(rng.integers(0, 4))
        if rng.random() < 0.05:
            tags.append(None)
        else:
            tags.append([WORDS[int(i)] for i in rng.choice(len(WORDS), count, p=weights)])
    k_mask = rng.random(rows) < 0.04
    return pa.table(
        {
            "id": pa.array(ids),
            "k": pa.array(k, mask=k_mask),
            "s": s,
            "d": d,
            "tags": pa.array(tags, pa.list_(pa.string())),
            "v": pa.array(rng.normal(size=rows)),
        }
    )


def write_dataset(directory: Path, sizes: list[tuple[int, int]], seed: int = 0) -> list[Path]:
    """Write one Parquet file per ``(rows, row_group_rows)`` into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    first = 0
    for number, (rows, group_rows) in enumerate(sizes):
        path = directory / f"part-{number}.parquet"
        pq.write_table(make_table(rows, seed + number, first), path, row_group_size=group_rows)
        paths.append(path)
        first += rows
    return paths


def write_indexed_parts(
    folder, files: int, rows: int, row_group: int, seed: int, granule
) -> list[pa.Table]:
    """``files`` Parquet files of :func:`make_table` rows (ids continuing from file to file)
    in ``folder`` (created), indexed with :data:`INDEXES` at ``granule``; returns the tables."""
    from bloomskip.dataset import Dataset

    folder.mkdir(parents=True, exist_ok=True)
    tables = []
    for number in range(files):
        table = make_table(rows, seed + number, number * rows)
        pq.write_table(table, folder / f"part-{number}.parquet", row_group_size=row_group)
        tables.append(table)
    Dataset(folder).build_index(INDEXES, granule=granule, progress=False)
    return tables
