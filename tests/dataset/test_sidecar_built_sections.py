"""Sections hashed as they are built, and a sidecar written in pieces: the same bytes as before.

``build_file`` appends each granule's payload to its index's section and adds it to the
section's SHA-256 as the granule is collected; ``write_sidecar`` reuses those digests (and the
ones a section read from a sidecar was verified against) and writes the file piece by piece
instead of joining it. None of that may change a byte of the sidecar, skip a checksum of a
section read from disk, or keep a part built on a Dask worker from pickling.
"""

from __future__ import annotations

import hashlib
import pickle
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bloomskip.dataset.build.indexing import build_file, granule_payloads, prepare_index
from bloomskip.dataset.index.sidecar import (
    FileEntry,
    SectionPayloads,
    Sidecar,
    encode_sidecar,
    read_sidecar,
    write_sidecar,
)
from bloomskip.dataset.listing.files import SourceFile
from bloomskip.errors import FormatError

DEFINITIONS = [
    "INDEX bu u TYPE bloom_filter(0.01) GRANULARITY 1",
    "INDEX ts s TYPE tokenbf_v1(256, 2, 0) GRANULARITY 1",
]


@pytest.fixture
def built(tmp_path: Path) -> tuple[Path, list, FileEntry]:
    """A Parquet file of five row groups (one empty) and its entry built on two threads."""
    path = tmp_path / "data.parquet"
    table = pa.table(
        {
            "u": pa.array([i * 7919 % 1000 for i in range(2300)], pa.uint64()),
            "s": pa.array([f"w{i % 37} x{i}" for i in range(2300)]),
        }
    )
    with pq.ParquetWriter(path, table.schema) as writer:
        for start, size in [(0, 1000), (1000, 0), (1000, 700), (1700, 599), (2299, 1)]:
            writer.write_table(table.slice(start, size), row_group_size=max(size, 1))
    prepared = [prepare_index(text, table.schema) for text in DEFINITIONS]
    with ThreadPoolExecutor(max_workers=2) as executor:
        entry = build_file(
            SourceFile(path, "parquet"), "data.parquet", prepared, "row-group", executor, 3, id
        )
    return path, prepared, entry


def test_sections_are_the_granules_in_order_with_their_digests(built) -> None:
    path, prepared, entry = built
    groups = pq.ParquetFile(path)
    assert entry.granule_rows == [1000, 0, 700, 599, 1]
    per_granule = [
        granule_payloads(groups.read_row_group(number), prepared)
        for number in range(groups.num_row_groups)
        if groups.metadata.row_group(number).num_rows
    ]
    for number in range(len(prepared)):
        expected = b"".join(payloads[number] for payloads in per_granule)
        assert bytes(entry.payloads[number]) == expected
        assert entry.digests[number] == hashlib.sha256(expected).digest()
        assert entry.payloads[number].readonly


def test_written_bytes_do_not_depend_on_where_the_digests_come_from(built, tmp_path) -> None:
    _, prepared, entry = built
    specs = [item.spec for item in prepared]
    plain = FileEntry(
        entry.path, entry.format, entry.identity, entry.granule_rows,
        [bytes(payload) for payload in entry.payloads],
    )  # fmt: skip
    assert plain.digests is None
    expected = encode_sidecar(Sidecar("row-group", specs, {plain.path: plain})).data
    written = tmp_path / "_bloomskip.index"
    write_sidecar(Sidecar("row-group", specs, {entry.path: entry}), written)
    assert written.read_bytes() == expected
    # Read back: its sections carry the digests they are verified against.
    again = read_sidecar(written)
    assert isinstance(again.files[entry.path].payloads, SectionPayloads)
    assert encode_sidecar(again).data == expected
    assert again == Sidecar("row-group", specs, {plain.path: plain})


def test_a_corrupt_section_read_back_is_still_refused(built, tmp_path) -> None:
    _, prepared, entry = built
    written = tmp_path / "_bloomskip.index"
    write_sidecar(
        Sidecar("row-group", [item.spec for item in prepared], {entry.path: entry}), written
    )
    data = bytearray(written.read_bytes())
    data[-1] ^= 0x01  # the last byte of the last section
    written.write_bytes(bytes(data))
    with pytest.raises(FormatError, match="corrupt"):
        encode_sidecar(read_sidecar(written))


def test_a_built_entry_pickles_with_its_payloads_as_bytes(built) -> None:
    _, _, entry = built
    copy = pickle.loads(pickle.dumps(entry))
    assert copy == entry
    assert all(type(payload) is bytes for payload in copy.payloads)
    assert copy.digests == entry.digests
