"""A manifest costs a small constant times its own size in memory, and an oversized one is
refused by its listed size, before it is read.

A query once read the newest version whole and only then checked it against the 1 GiB bound: a
sparse 1.5 GiB version cost 1.5 GB of memory. A valid 40 MB manifest (400,000 files in one
segment) cost 447 MiB: its bytes, its text and a second, canonical text for the checksum were
alive together. The peak is measured in a new process (the kernel's own count, ``VmHWM``), and
the rows are checked against DuckDB.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bloomskip import Dataset
from bloomskip.dataset.index.segments import (
    MAX_MANIFEST_BYTES,
    decode_manifest,
    encode_manifest,
    version_key,
)

# The peak is this process's own (VmHWM): getrusage's ru_maxrss carries over the high-water
# mark of the process that spawned it (Linux keeps it across exec), the test runner's own.
QUERY = """
import json, re, sys
import bloomskip
dataset = bloomskip.Dataset(sys.argv[1], index_location=sys.argv[2] or None)
table = dataset.query("id = 5")
explanation = dataset.explain("id = 5")
with open("/proc/self/status") as status:
    peak_kib = int(re.search(r"VmHWM:\\s+(\\d+) kB", status.read()).group(1))
print(json.dumps({
    "ids": sorted(table.column("id").to_pylist()),
    "warnings": explanation.warnings,
    "peak_mib": peak_kib // 1024,
}))
"""


def _query_in_a_new_process(data, index) -> dict:
    """What ``QUERY`` printed, its rows checked against DuckDB's."""
    done = subprocess.run(
        [sys.executable, "-c", QUERY, str(data), str(index)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    result = json.loads(done.stdout)
    expected = duckdb.sql(f"SELECT id FROM read_parquet('{data}/a.parquet') WHERE id = 5")
    assert result["ids"] == [row[0] for row in expected.fetchall()]
    return result


@pytest.mark.parametrize("beside", [False, True], ids=["index-elsewhere", "index-beside"])
def test_an_oversized_newest_version_is_not_read(tmp_path, beside: bool) -> None:
    data = tmp_path / "data"
    data.mkdir()
    pq.write_table(pa.table({"id": list(range(2000))}), data / "a.parquet", row_group_size=500)
    index = data / "_bloomskip" if beside else tmp_path / "index"
    report = Dataset(data, index_location=index).build_index(
        ["id TYPE bloom_filter(0.01)"], progress=False
    )
    sparse = index / "versions" / f"{report.version + 1:020d}.json"
    with open(sparse, "wb") as handle:
        handle.truncate(MAX_MANIFEST_BYTES + (512 << 20))  # 1.5 GiB, no block written
    result = _query_in_a_new_process(data, index)
    assert any("too large for a manifest" in warning for warning in result["warnings"])
    assert result["peak_mib"] <= 400, result


@pytest.mark.parametrize("segments", [1, 40])
def test_a_large_valid_manifest_costs_a_small_multiple_of_its_size(tmp_path, segments) -> None:
    data = tmp_path / "data"
    data.mkdir()
    pq.write_table(pa.table({"id": list(range(2000))}), data / "a.parquet", row_group_size=500)
    index = tmp_path / "index"
    report = Dataset(data, index_location=index).build_index(
        ["id TYPE bloom_filter(0.01)"], progress=False
    )
    manifest = decode_manifest((index / version_key(report.version)).read_bytes(), "test")
    (indexed,) = manifest.segments
    # Files that were indexed and are gone since: kept in the manifest, never listed again.
    files = 400_000 // segments
    gone = [
        dataclasses.replace(
            indexed,
            key=f"segments/{segment + 1:x}-{0:016x}.bsk",  # never read: no file of it is listed
            files={
                f"year=2026/part-{segment:04d}/file-{number:07d}-0123456789abcdef.parquet": {
                    "size": 1_000_000 + number,
                    "mtime_ns": 1_764_000_000_000_000_000 + number,
                    "ctime_ns": 1_764_000_000_000_000_000 + number,
                }
                for number in range(files)
            },
        )
        for segment in range(segments)
    ]
    large = dataclasses.replace(manifest, version=report.version + 1, segments=(indexed, *gone))
    encoded = encode_manifest(large)
    assert len(encoded) >= 40_000_000
    (index / version_key(large.version)).write_bytes(encoded)
    del encoded, large, gone
    result = _query_in_a_new_process(data, index)
    assert not result["warnings"], result["warnings"]
    assert result["peak_mib"] <= 400, result
