"""``bloomskip demo``: a realistic log dataset, its index, and a race against a DuckDB full scan.

The data is generated with numpy and pyarrow compute kernels (no per-row Python):

* ``ts``: millisecond timestamps, increasing;
* ``user_id``: a high-cardinality 64-bit id (point lookups);
* ``trace_id``: 32 hex characters;
* ``level``: a dictionary-encoded column (INFO/WARN/ERROR/DEBUG);
* ``url``: built from a small vocabulary plus a numeric id;
* ``message``: free text from a vocabulary, a job id that lives for a few thousand rows (as
  deploys and batch jobs do in real logs), latencies, status codes, and a rare exception name.
"""

from __future__ import annotations

import time
from pathlib import Path

from bloomskip.dataset.report import human_size

ROW_GROUP_ROWS = 65_536
RARE_TOKEN = "OutOfMemoryError"
# One row in this many carries RARE_TOKEN.
RARE_TOKEN_EVERY = 2_000_000
ABSENT_USER_ID = 1_234_567_890_123_456_789
VERBS = [
    "GET",
    "POST",
    "PUT",
    "DELETE",
    "fetched",
    "stored",
    "updated",
    "deleted",
    "scanned",
    "retried",
    "queued",
    "served",
]
NOUNS = [
    "order",
    "cart",
    "invoice",
    "payment",
    "session",
    "profile",
    "report",
    "image",
    "token",
    "shipment",
    "review",
]
OUTCOMES = ["ok", "timeout", "retry", "not found", "forbidden", "conflict", "slow", "done"]
RESOURCES = ["users", "orders", "carts", "items", "search", "checkout", "auth", "feeds"]
LEVELS = ["INFO", "WARN", "ERROR", "DEBUG"]
DEMO_INDEXES = [
    "user_id TYPE bloom_filter(0.01)",
    "trace_id TYPE bloom_filter(0.01)",
    "message TYPE tokenbf_v1(8192, 3, 0)",
]


def _median_time(function, runs: int = 3):
    """Median wall time of ``runs`` calls and the last result."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - started)
    return sorted(times)[runs // 2], result


def generate_logs(rows: int, seed: int = 0, first_row: int = 0):
    """Generate ``rows`` log rows as a ``pyarrow.Table`` (vectorized).

    Args:
        rows: Number of rows.
        seed: Random seed (the same seed and ``first_row`` give the same rows).
        first_row: Global number of the first row, so that batches continue one another.

    Returns:
        A table with columns ts, user_id, trace_id, level, url, message.

    Example:
        >>> generate_logs(3).column_names
        ['ts', 'user_id', 'trace_id', 'level', 'url', 'message']
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    rng = np.random.default_rng([seed, first_row])
    row_numbers = np.arange(first_row, first_row + rows, dtype=np.int64)
    ts = pa.array(1_700_000_000_000 + row_numbers * 3, pa.timestamp("ms"))
    user_id = rng.integers(1, 1 << 62, rows, dtype=np.int64)
    hex_digits = np.frombuffer(b"0123456789abcdef", np.uint8)
    nibbles = rng.integers(0, 16, (rows, 32), dtype=np.uint8)
    trace_bytes = np.ascontiguousarray(hex_digits[nibbles]).view("S32").ravel()
    trace_id = pa.array(trace_bytes, pa.binary(32)).cast(pa.string())

    def pick(words: list[str], size: int):
        return pa.array(words).take(pa.array(rng.integers(0, len(words), size)))

    def numbers(low: int, high: int):
        return pc.cast(pa.array(rng.integers(low, high, rows)), pa.string())

    level = pa.DictionaryArray.from_arrays(
        pa.array(rng.choice(4, rows, p=[0.8, 0.12, 0.05, 0.03]).astype(np.int32)),
        pa.array(LEVELS),
    )
    url = pc.binary_join_element_wise(
        "https://api.example.com/v2", pick(RESOURCES, rows), numbers(1, 1_000_000), "/"
    )
    # A job id lives for ~5000 rows: a few distinct jobs per row group, as in real logs.
    job = pc.binary_join_element_wise(
        "job", pc.cast(pa.array(row_numbers // 5000 + rng.integers(0, 2, rows)), pa.string()), ""
    )
    rare = rng.random(rows) < 1.0 / RARE_TOKEN_EVERY
    outcome = pick(OUTCOMES, rows)
    outcome = pc.if_else(pa.array(rare), f"java.lang.{RARE_TOKEN}", outcome)
    message = pc.binary_join_element_wise(
        pick(VERBS, rows), pick(NOUNS, rows), "for", job, "in", numbers(0, 1000), "ms status",
        numbers(200, 205), outcome, " ",
    )  # fmt: skip
    return pa.table(
        {
            "ts": ts,
            "user_id": pa.array(user_id),
            "trace_id": trace_id,
            "level": level,
            "url": url,
            "message": message,
        }
    )


def write_logs(
    directory: str | Path,
    rows: int,
    files: int = 4,
    row_group_rows: int = ROW_GROUP_ROWS,
    seed: int = 0,
    **parquet_options,
) -> list[Path]:
    """Write a generated log dataset as ``files`` Parquet files (one file's rows in memory).

    Args:
        directory: Created if missing.
        rows: Total rows.
        files: Number of files.
        row_group_rows: Rows per Parquet row group.
        seed: Random seed.
        **parquet_options: Passed to ``pyarrow.parquet.write_table`` (e.g. bloom_filter_options).

    Returns:
        The files written.
    """
    import pyarrow.parquet as pq

    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    per_file = -(-rows // files)
    written = []
    for number in range(files):
        first = number * per_file
        count = min(per_file, rows - first)
        if count <= 0:
            break
        path = target / f"logs-{number:03d}.parquet"
        table = generate_logs(count, seed, first)
        temporary = path.with_name(f".{path.name}.tmp")
        pq.write_table(table, temporary, row_group_size=row_group_rows, **parquet_options)
        temporary.replace(path)
        written.append(path)
    return written


def run_demo(directory: str | Path, rows: int = 5_000_000, keep: bool = False) -> list[dict]:
    """Generate, index and query a log dataset; print a comparison table.

    The data folder's absolute path and size are printed before the queries run. Without
    ``keep`` the files the demo generated (``logs-*.parquet`` and the index) are removed when it
    ends, also when it fails or is interrupted, and so is the folder if the demo created it and
    nothing else is left in it; nothing else in the folder is touched.

    Args:
        directory: Where the dataset goes (reused when it already holds the demo data).
        rows: Rows to generate.
        keep: Leave the generated data for later queries (printed: how to remove it).

    Returns:
        One dict per query: query, rows matched, rows scanned, bloomskip seconds, DuckDB seconds.

    Example:
        >>> run_demo("bloomskip-demo", rows=200_000)  # doctest: +SKIP
    """
    target = Path(directory).absolute()
    created = not target.exists()
    try:
        results = _run_demo(target, rows)
    finally:
        if not keep:
            _remove_demo_data(target, created)
    if keep:
        kept = human_size(sum(_size(path) for path in demo_files(target)))
        print(f"kept {target} ({kept}); remove it with: {_removal_command(target)}")
    return results


def demo_files(target: Path) -> list[Path]:
    """The files a demo run writes into ``target``: its Parquet files and their index (the
    segmented index's folder, and a sidecar an older demo left).

    Args:
        target: The demo's data folder.

    Returns:
        The existing ones, sorted (files first, then the index).

    Example:
        >>> demo_files(Path("no-such-folder"))
        []
    """
    from bloomskip.dataset.locate import default_index_folder, default_sidecar_path

    index = [default_index_folder(target), default_sidecar_path(target)]
    return sorted(target.glob("logs-*.parquet")) + [path for path in index if path.exists()]


def _size(path: Path) -> int:
    """Bytes of a file, or of every file under a folder."""
    if path.is_dir():
        return sum(inner.stat().st_size for inner in path.rglob("*") if inner.is_file())
    return path.stat().st_size


def _remove_demo_data(target: Path, created: bool) -> None:
    """Remove what the demo wrote, and ``target`` itself when the demo created it and it is
    left empty; prints what was removed."""
    import shutil

    files = demo_files(target)
    removed = sum(_size(path) for path in files)
    for path in files:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    for stale in target.glob(".logs-*.parquet.tmp"):  # a write the interrupt cut short
        stale.unlink(missing_ok=True)
    gone = ""
    if created and target.is_dir() and not any(target.iterdir()):
        target.rmdir()
        gone = " and the folder"
    if files or gone:
        print(
            f"removed the demo data in {target} ({human_size(removed)}){gone}; "
            "run with --keep to keep it"
        )


def _data_size(target: Path) -> str:
    """The demo's Parquet files' total size, and how many there are."""
    files = sorted(target.glob("logs-*.parquet"))
    return f"{human_size(sum(path.stat().st_size for path in files))} in {len(files)} files"


def _removal_command(target: Path) -> str:
    """A shell command removing the demo data: the folder, when it holds nothing else."""
    import shlex

    quoted = shlex.quote(str(target))
    if set(target.iterdir()) <= set(demo_files(target)):
        return f"rm -r {quoted}"
    index = " ".join(shlex.quote(str(path)) for path in demo_files(target) if path.is_dir())
    return f"rm -r {quoted}/logs-*.parquet {index}".rstrip()


def _run_demo(target: Path, rows: int) -> list[dict]:
    """The demo itself, in ``target`` (absolute)."""
    import duckdb
    import pyarrow.parquet as pq

    from bloomskip.dataset.dataset import Dataset
    from bloomskip.dataset.sql.translate import clickhouse_to_duckdb

    started = time.perf_counter()
    existing = sorted(target.glob("logs-*.parquet"))
    if existing and sum(pq.ParquetFile(p).metadata.num_rows for p in existing) == rows:
        print(f"reusing {len(existing)} files in {target}")
    else:
        for stale in existing:
            stale.unlink()
        print(f"generating {rows:,} log rows in {target} ...")
        write_logs(target, rows)
    dataset = Dataset(target)
    build_started = time.perf_counter()
    report = dataset.build_index(DEMO_INDEXES)
    build_seconds = time.perf_counter() - build_started
    print(
        f"index: {Path(report.index).name}, {report.index_bytes / 1e6:.1f} MB, "
        f"built in {build_seconds:.2f} s ({len(report.rebuilt)} files indexed)"
    )
    print(f"data: {target} ({_data_size(target)})")
    load_started = time.perf_counter()
    for definition in DEMO_INDEXES:  # decode each index once, as a long-lived process would
        dataset.explain(f"{definition.split()[0]} = '0'")
    print(f"index loaded in {(time.perf_counter() - load_started) * 1000:.0f} ms")
    sample = pq.ParquetFile(dataset.backend.files[-1].path).read_row_group(0, columns=["user_id"])
    present = int(sample.column(0)[123].as_py())
    queries = [
        ("point lookup (present)", f"user_id = {present}"),
        # Inside the ids' min/max range, so Parquet statistics cannot rule it out.
        ("point lookup (absent)", f"user_id = {ABSENT_USER_ID}"),
        ("token search", f"hasToken(message, '{RARE_TOKEN}')"),
    ]
    files_sql = ", ".join("'" + str(f.path).replace("'", "''") + "'" for f in dataset.backend.files)
    results = []
    for label, where in queries:
        ours, table = _median_time(lambda w=where: dataset.query(w))
        result = dataset.explain(where)
        scanned = sum(
            int(s.layout.rows[keep].sum())
            for s, keep in zip(result.files, result.keep, strict=True)
        )
        sql = f"SELECT * FROM read_parquet([{files_sql}]) WHERE {clickhouse_to_duckdb(where)}"
        duck, duck_rows = _median_time(lambda s=sql: duckdb.sql(s).to_arrow_table())
        results.append(
            {
                "query": label,
                "where": where,
                "rows": table.num_rows,
                "duckdb_rows": duck_rows.num_rows,
                "scanned": scanned,
                "bloomskip_s": ours,
                "duckdb_s": duck,
            }
        )
    total_rows = sum(int(s.layout.rows.sum()) for s in result.files)
    print()
    print(f"{'query':<24} {'rows':>5} {'rows scanned':>14} {'bloomskip':>10} {'DuckDB full':>12}")
    for row in results:
        print(
            f"{row['query']:<24} {row['rows']:>5} {row['scanned']:>14,} "
            f"{row['bloomskip_s'] * 1000:>8.1f}ms {row['duckdb_s'] * 1000:>10.1f}ms"
        )
    print(f"(dataset: {total_rows:,} rows; DuckDB scans all of them; median of 3 runs)")
    print(f"demo finished in {time.perf_counter() - started:.1f} s")
    return results
