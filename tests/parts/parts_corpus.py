"""Build real ClickHouse parts with chdb and record what ClickHouse itself says about them.

Everything the part tests compare against comes from the engine: ``EXPLAIN indexes = 1`` per
index and predicate (other indexes ignored), ``mergeTreeIndex`` row counts per granule, and
``system.data_skipping_indices`` sizes. The parts are built in the run's shared chdb session (in
a database of their own, ``parts``) and copied out before the tests run, so the tests only read
those copies and these recorded answers.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chdb.session import Session

ROWS = 3000

COLUMNS = """
    k UInt64,
    v UInt32,
    n Nullable(Int32),
    s String,
    arr Array(UInt32),
    fs FixedString(3),
    lc LowCardinality(String),
    f Float64,
    d Date,
    data UInt8"""

INDEXES = {
    "i_v": "v TYPE bloom_filter(0.025) GRANULARITY 1",
    "i_v3": "v TYPE bloom_filter(0.01) GRANULARITY 3",
    "i_n": "n TYPE bloom_filter GRANULARITY 1",
    "i_multi": "(v, lc) TYPE bloom_filter(0.05) GRANULARITY 2",
    "i_arr": "arr TYPE bloom_filter GRANULARITY 1",
    "i_fs": "fs TYPE bloom_filter(0.1) GRANULARITY 1",
    "i_fd": "(f, d) TYPE bloom_filter GRANULARITY 1",
    "i_tok": "s TYPE tokenbf_v1(512, 3, 0) GRANULARITY 1",
    "i_ng": "s TYPE ngrambf_v1(3, 512, 2, 7) GRANULARITY 2",
    "i_small": "s TYPE tokenbf_v1(32, 4, 1) GRANULARITY 4",
    # Too small for its ngrams: most granules are saturated (inspect must flag them).
    "i_sat": "s TYPE ngrambf_v1(3, 12, 3, 0) GRANULARITY 2",
    # 30000-byte granules: ClickHouse groups them 3 to a 64 KiB block (or straddles small blocks).
    "i_big": "s TYPE tokenbf_v1(30000, 2, 0) GRANULARITY 1",
}

# Clustered values, so that most predicates keep only a few granules.
INSERT_SELECT = """
SELECT
    number AS k,
    intDiv(number, 40) AS v,
    if(number % 11 = 0, NULL, -toInt32(intDiv(number, 300))) AS n,
    concat('w', toString(intDiv(number, 64)), ' tok', toString(number % 7), '-x',
           if(number % 500 = 0, ' Привет мир', '')) AS s,
    arrayMap(x -> toUInt32(x + intDiv(number, 100)), range(number % 4)) AS arr,
    toFixedString(toString(100 + intDiv(number, 500)), 3) AS fs,
    concat('c', toString(intDiv(number, 250))) AS lc,
    intDiv(number, 100) / 4 AS f,
    toDate('2024-01-01') + intDiv(number, 200) AS d,
    -- A column named "data": Wide parts then hold data.bin + data.mrk2, like a Compact part's
    -- data.bin + data.mrk4.
    number % 3 AS data
FROM numbers({start}, {count})
"""

#: name -> (MergeTree settings, number of inserts merged into one part)
LAYOUTS = {
    "wide_packed": ("min_bytes_for_wide_part = 0", 1),
    "wide_plain": (
        "min_bytes_for_wide_part = 0, compress_marks = 0, packed_skip_index_max_bytes = 0",
        1,
    ),
    "wide_fixed_zstd": (
        "min_bytes_for_wide_part = 0, index_granularity_bytes = 0, "
        "packed_skip_index_max_bytes = 0, default_compression_codec = 'ZSTD(3)'",
        1,
    ),
    "wide_fixed_plain_packed": (
        "min_bytes_for_wide_part = 0, index_granularity_bytes = 0, compress_marks = 0",
        1,
    ),
    "compact_packed": ("min_bytes_for_wide_part = '1G'", 1),
    "compact_plain_zstd": (
        "min_bytes_for_wide_part = '1G', compress_marks = 0, packed_skip_index_max_bytes = 0, "
        "default_compression_codec = 'ZSTD(1)'",
        1,
    ),
    "compact_merged": ("min_bytes_for_wide_part = '1G'", 3),
    "wide_multiple_codec": (
        "min_bytes_for_wide_part = 0, packed_skip_index_max_bytes = 0, "
        "default_compression_codec = 'LZ4, ZSTD(1)', marks_compression_codec = 'ZSTD(1), LZ4'",
        1,
    ),
    # Small compress blocks: several granules per block, and granules straddling blocks; codec
    # NONE, so that a writer following ClickHouse's rules must reproduce the files byte for byte.
    "wide_small_blocks": (
        "min_bytes_for_wide_part = 0, packed_skip_index_max_bytes = 0, compress_marks = 0, "
        "min_compress_block_size = 1200, max_compress_block_size = 1500, "
        "default_compression_codec = 'NONE'",
        1,
    ),
}

#: Layouts on which every predicate is checked for every index; the others get a sample.
FULL_LAYOUTS = ("wide_packed", "compact_merged", "wide_fixed_zstd")

PREDICATES = [
    "v = 5",
    "5 = v",
    "v = 70",
    "v = 100000",
    "v IN (1, 33, 74)",
    "v IN (100001, 100002)",
    "v != 5",
    "NOT (v = 5)",
    "v NOT IN (1, 2)",
    "v = 5 OR v = 60",
    "v = 5 AND k > 100",
    "(v = 5 OR v = 6) AND lc = 'c0'",
    "lc = 'c3'",
    "lc = 'c99'",
    "(v, lc) = (30, 'c4')",
    "n = -4",
    "n = -1000",
    "n IS NULL",
    "n IN (-1, -9)",
    "has(arr, 20)",
    "has(arr, 100000)",
    "hasAny(arr, [5, 29])",
    "hasAll(arr, [12, 13])",
    "hasAll(arr, [])",
    "indexOf(arr, 20) > 0",
    "fs = '103'",
    "fs = '999'",
    "f = 2.5",
    "f = 1000.25",
    "d = '2024-01-05'",
    "d = '2030-01-01'",
    "(f, d) = (2.5, '2024-01-02')",
    "s = 'w3 tok3-x'",
    "hasToken(s, 'w12')",
    "hasToken(s, 'w999')",
    "hasToken(s, 'tok5')",
    "s LIKE '%w12 %'",
    "s LIKE 'w12 %'",
    "s LIKE '%w1%'",
    "s LIKE '%Привет%'",
    "s NOT LIKE '%w12 %'",
    "startsWith(s, 'w20 ')",
    "endsWith(s, ' tok1-x')",
    "multiSearchAny(s, [' tok2-', 'w40 '])",
    "s IN ('w1 tok1-x', 'w45 tok0-x')",
    "hasToken(s, 'w12') OR v = 70",
    "hasToken(s, 'w12') AND v = 70",
    "1 = 1",
    "v = 5 AND 0",
    "hasToken(s, 'w12') OR 1",
]

#: Predicates ClickHouse's analyzer folds to a constant false before any index is consulted, so
#: EXPLAIN reads nothing. Per-index evaluation does not model query-level folding of comparisons
#: between constants or of contradicting equalities; it must still never keep fewer granules.
FOLDED_PREDICATES = ["0 = 1", "v = 5 AND v = 60", "lc = 'c1' AND lc = 'c2'"]

#: The predicates checked on the sampled layouts.
SAMPLE_PREDICATES = [
    "v = 5",
    "v IN (1, 33, 74)",
    "lc = 'c3'",
    "n = -4",
    "has(arr, 20)",
    "fs = '103'",
    "f = 2.5",
    "hasToken(s, 'w12')",
    "s LIKE '%Привет%'",
    "startsWith(s, 'w20 ')",
    "v = 100000",
]

_GRANULES = re.compile(r"Granules:\s*(\d+)/(\d+)")
_READ_GRANULES = re.compile(r"Parts:\s*\d+\s*\|\s*Granules:\s*(\d+)")


@dataclass
class BuiltPart:
    """One part written by chdb, and what ClickHouse answered about it."""

    layout: str
    part_dir: Path
    table_sql: Path
    part_type: str
    rows: int
    granule_rows: list[int]
    index_sizes: dict[str, tuple[int, int, int]]  # name -> (compressed, uncompressed, marks)
    explain: dict[tuple[str, str], int] = field(default_factory=dict)  # (index, pred) -> selected


def parse_explain_selected(text: str, index: str) -> int:
    """Granules kept by ``index`` in ``EXPLAIN indexes = 1`` text; all of them if it is unused."""
    lines = text.splitlines()
    for position, line in enumerate(lines):
        if line.strip() == f"Name: {index}":
            for following in lines[position + 1 : position + 6]:
                match = _GRANULES.search(following)
                if match:
                    return int(match.group(1))
    # The index is not listed when the predicate gives it nothing to use: then the part's own
    # "Parts: p | Granules: g" line is what is read (everything, as nothing else prunes). A
    # predicate folded to a constant false has no such line: nothing is read.
    match = _READ_GRANULES.search(text)
    return int(match.group(1)) if match else 0


def build_corpus(chdb_session: Session, data_path: Path, root: Path) -> dict[str, BuiltPart]:
    """Create every layout in database ``parts`` of ``chdb_session`` and query the oracles.

    Args:
        chdb_session: The run's chdb session.
        data_path: Its data directory (``system.tables.metadata_path`` is relative to it).
        root: Where the parts and their ``.sql`` files are copied to (``root/parts``).

    Returns:
        The built parts by layout name, with ClickHouse's answers.
    """
    built: dict[str, BuiltPart] = {}
    chdb_session.query("CREATE DATABASE IF NOT EXISTS parts")
    index_sql = ",\n".join(f"    INDEX {name} {body}" for name, body in INDEXES.items())
    for layout, (settings, inserts) in LAYOUTS.items():
        chdb_session.query(
            f"CREATE TABLE parts.{layout} ({COLUMNS},\n{index_sql}\n) ENGINE = MergeTree "
            f"ORDER BY k SETTINGS index_granularity = 128, {settings}"
        )
        step = ROWS // inserts
        for start in range(0, ROWS, step):
            chdb_session.query(
                f"INSERT INTO parts.{layout} "
                + INSERT_SELECT.format(start=start, count=min(step, ROWS - start))
            )
        if inserts > 1:
            chdb_session.query(f"OPTIMIZE TABLE parts.{layout} FINAL")
        built[layout] = _describe(chdb_session, layout, data_path, root)
        predicates = PREDICATES if layout in FULL_LAYOUTS else SAMPLE_PREDICATES
        predicates = predicates + FOLDED_PREDICATES
        for index in INDEXES:
            others = ",".join(name for name in INDEXES if name != index)
            for predicate in predicates:
                text = _query(
                    chdb_session,
                    f"EXPLAIN indexes = 1 SELECT k FROM parts.{layout} "
                    f"WHERE {predicate} SETTINGS ignore_data_skipping_indices = '{others}', "
                    # Part-level statistics pruning would hide what the index alone does.
                    "use_query_condition_cache = 0, use_statistics_for_part_pruning = 0",
                )
                built[layout].explain[(index, predicate)] = parse_explain_selected(text, index)
    return built


def _query(chdb_session: Session, sql: str) -> str:
    return chdb_session.query(sql, "TSVRaw").bytes().decode()


def _describe(chdb_session: Session, layout: str, data_path: Path, root: Path) -> BuiltPart:
    rows = _query(
        chdb_session,
        "SELECT path, part_type, rows FROM system.parts "
        f"WHERE database = 'parts' AND table = '{layout}' AND active",
    ).strip()
    if "\n" in rows:
        raise AssertionError(f"{layout}: expected one active part, got {rows!r}")
    path, part_type, count = rows.split("\t")
    metadata = _query(
        chdb_session,
        f"SELECT metadata_path FROM system.tables WHERE database = 'parts' AND name = '{layout}'",
    ).strip()
    granules = _query(
        chdb_session,
        f"SELECT rows_in_granule FROM mergeTreeIndex('parts', '{layout}') ORDER BY mark_number",
    ).split()
    sizes = {}
    for line in _query(
        chdb_session,
        "SELECT name, data_compressed_bytes, data_uncompressed_bytes, marks_bytes "
        f"FROM system.data_skipping_indices WHERE database = 'parts' AND table = '{layout}'",
    ).splitlines():
        name, compressed, uncompressed, marks = line.split("\t")
        sizes[name] = (int(compressed), int(uncompressed), int(marks))
    # Copy the part and its .sql out of the session, as a user would hand them to the tool.
    part_copy = root / "parts" / layout
    shutil.copytree(path, part_copy)
    sql_path = Path(metadata)
    if not sql_path.is_absolute():
        sql_path = data_path / metadata
    sql_copy = root / "parts" / f"{layout}.sql"
    shutil.copyfile(sql_path, sql_copy)
    granule_rows = [int(value) for value in granules]
    # mergeTreeIndex lists the final mark (0 rows) of adaptive parts; it is not a granule.
    while granule_rows and granule_rows[-1] == 0:
        granule_rows.pop()
    return BuiltPart(layout, part_copy, sql_copy, part_type, int(count), granule_rows, sizes)


def s_column() -> list[str]:
    """The ``s`` column of every layout, in part order (ORDER BY k = number), as INSERT_SELECT."""
    return [
        f"w{number // 64} tok{number % 7}-x" + (" Привет мир" if number % 500 == 0 else "")
        for number in range(ROWS)
    ]
