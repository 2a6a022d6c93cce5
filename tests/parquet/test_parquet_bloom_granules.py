"""The granules of a ``parquet_bloom_filter`` index and the plain part a segment keeps them in:
probes equal DuckDB's ``parquet_bloom_probe`` over the pyarrow- and DuckDB-written filters
they hold; damaged bytes give a FormatError naming the field (never another exception)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bloomskip.clickhouse.condition import compile_condition
from bloomskip.clickhouse.ddl import parse_index_definition
from bloomskip.clickhouse.types import clickhouse_type_for
from bloomskip.dataset.index.plain_part import decode_part, encode_part, read_part_header
from bloomskip.errors import BloomskipError, FormatError
from bloomskip.parquet.granules import ParquetBloomGranules, encode_granule
from bloomskip.parquet.harvest import harvest_open


def _granules(path: Path, column: str, type_name: str) -> ParquetBloomGranules:
    parquet = pq.ParquetFile(path)
    with pa.OSFile(str(path)) as file:
        found = harvest_open(parquet, file, str(path), [column])
    payload = b"".join(encode_granule(bloom) for bloom in found.filters[column])
    definition = parse_index_definition(f"{column} TYPE parquet_bloom_filter")
    return ParquetBloomGranules.from_bytes(
        definition, payload, len(found.filters[column]), [type_name]
    )


def _duckdb_keeps(path: Path, column: str, literal: str) -> list[bool]:
    rows = duckdb.sql(
        f"SELECT row_group_id, bloom_filter_excludes FROM parquet_bloom_probe('{path}', "
        f"'{column}', {literal}) ORDER BY row_group_id"
    ).fetchall()
    return [not excludes for _rg, excludes in rows]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("granules")
    rng = np.random.default_rng(11)
    table = pa.table(
        {
            "i32": pa.array(rng.integers(-1000, 1000, 20_000), pa.int32()),
            "u64": pa.array(rng.integers(0, 2**63, 20_000).astype(np.uint64)),
            "f": pa.array(rng.integers(0, 300, 20_000) / 4.0, pa.float32()),
            "s": pa.array([f"k{x}" for x in rng.integers(0, 3_000, 20_000).tolist()]),
            "d": pa.array(rng.integers(19_000, 21_000, 20_000).astype(np.int32), pa.date32()),
            "ts": pa.array(rng.integers(0, 5_000, 20_000) * 1_000_000 + 1_704_067_200_000_000).cast(
                pa.timestamp("us")
            ),
            "sec": pa.array(rng.integers(0, 5_000, 20_000) + 1_704_067_200).cast(pa.timestamp("s")),
        }
    )
    pyarrow_file = base / "pyarrow.parquet"
    pq.write_table(
        table,
        pyarrow_file,
        row_group_size=5_000,
        bloom_filter_options={name: {"fpp": 0.05} for name in table.column_names},
    )
    duckdb_file = base / "duckdb.parquet"
    duckdb.sql(
        f"COPY (SELECT * FROM read_parquet('{pyarrow_file}')) TO '{duckdb_file}' "
        "(FORMAT parquet, ROW_GROUP_SIZE 5000)"
    )
    return {"pyarrow": pyarrow_file, "duckdb": duckdb_file}


@pytest.mark.parametrize("writer", ["pyarrow", "duckdb"])
@pytest.mark.parametrize(
    "column, literals",
    [
        ("i32", ["7", "-999", "5000"]),
        ("u64", ["12345", "9223372036854775000"]),
        # (f = 0.1 is no atom: ClickHouse compares in Float64, no float32 equals it)
        ("f", ["2.25", "74.75", "0.5", "1000.5"]),
        ("s", ["'k42'", "'k2999'", "'nope'"]),
        ("d", ["'2022-01-05'", "'2024-07-01'", "'1999-01-01'"]),
        ("ts", ["'2024-01-01 00:00:05'", "'2024-01-01 01:00:00'"]),
        # seconds: pyarrow stores milliseconds, DuckDB microseconds
        ("sec", ["'2024-01-01 00:00:05'", "'2024-01-01 01:00:00'"]),
    ],
)
def test_probes_equal_duckdbs(files, writer, column, literals) -> None:
    """Where the writer stored a filter, the row groups kept are DuckDB's; where it stored
    none (DuckDB writes filters for dictionary-encoded chunks only) the computed filter keeps
    at least the row groups holding the value (DuckDB keeps them all)."""
    path = files[writer]
    type_name = clickhouse_type_for(pq.ParquetFile(path).schema_arrow.field(column).type)
    granules = _granules(path, column, type_name)
    definition = granules.definition
    metadata = pq.ParquetFile(path).metadata
    position = metadata.schema.to_arrow_schema().names.index(column)
    stored = np.array(
        [
            metadata.row_group(rg).column(position).bloom_filter_offset is not None
            for rg in range(metadata.num_row_groups)
        ]
    )
    holds = duckdb.sql(
        f"SELECT DISTINCT file_row_number // 5000 AS rg, {column} FROM "
        f"read_parquet('{path}', file_row_number = true)"
    ).fetchall()

    def check(where: str, literal_values: list[str]) -> None:
        kept = compile_condition(where, definition, [type_name]).may_match(granules)
        duck = np.any([_duckdb_keeps(path, column, v) for v in literal_values], axis=0)
        assert kept[stored].tolist() == duck[stored].tolist(), where
        wanted = {str(duckdb.sql(f"SELECT {v}::{_duck_type(type_name)}").fetchall()[0][0])
                  for v in literal_values}  # fmt: skip
        for rg, value in holds:
            if str(value) in wanted:
                assert kept[rg], (where, rg)

    for literal in literals:
        check(f"{column} = {literal}", [literal])
    check(f"{column} IN ({', '.join(literals)})", literals)
    if writer == "pyarrow":
        assert stored.all()


def _duck_type(type_name: str) -> str:
    names = {"Int32": "INTEGER", "UInt64": "UBIGINT", "Float32": "FLOAT", "String": "VARCHAR"}
    names["Date"] = "DATE"
    return "TIMESTAMP" if type_name.startswith("DateTime") else names[type_name]


def test_a_plain_part_round_trips_and_checks_its_bytes(files) -> None:
    granules = _granules(files["pyarrow"], "s", "String")
    part = encode_part(granules)
    header = read_part_header(part, "p", len(part))
    assert header.granule_count == 4 and header.definition == granules.definition
    assert decode_part(part).to_bytes() == granules.to_bytes()
    damaged = bytearray(part)
    damaged[-1] ^= 1
    with pytest.raises(FormatError, match="granules SHA-256"):
        decode_part(bytes(damaged))
    damaged = bytearray(part)
    damaged[20] ^= 1
    with pytest.raises(FormatError, match="header SHA-256"):
        read_part_header(bytes(damaged))
    with pytest.raises(FormatError, match="part length"):
        read_part_header(part, "p", len(part) + 1)


def test_damaged_granules_raise_format_errors_only(files) -> None:
    """Random flips and cuts of the granule bytes: each parse gives granules or a
    BloomskipError (a pure-Python run of fuzz/fuzz_parquet_granules.py's rule)."""
    granules = _granules(files["duckdb"], "i32", "Int32")
    payload = granules.to_bytes()
    definition = granules.definition
    rng = np.random.default_rng(2)
    errors = 0
    for _ in range(3_000):
        data = bytearray(payload[: rng.integers(0, 200)] if rng.random() < 0.3 else payload)
        for _flip in range(rng.integers(1, 4)):
            if data:
                data[rng.integers(0, len(data))] = rng.integers(0, 256)
        try:
            parsed = ParquetBloomGranules.from_bytes(definition, bytes(data), 4, ["Int32"])
        except BloomskipError:
            errors += 1
            continue
        assert (parsed.filter_sizes() % 32 == 0).all()
        assert parsed.literals_present(0, pa.array([1, None]), "Int32").shape == (4, 2)
    assert errors > 100
    with pytest.raises(FormatError, match="follow the last"):
        ParquetBloomGranules.from_bytes(definition, payload + b"\x00", 4)
    with pytest.raises(FormatError, match="physical type 9"):
        ParquetBloomGranules.from_bytes(definition, b"\x09" + payload[1:], 4)


def test_docstring_examples() -> None:
    import doctest

    from bloomskip.dataset.index import plain_part

    assert doctest.testmod(plain_part, optionflags=doctest.ELLIPSIS).failed == 0
