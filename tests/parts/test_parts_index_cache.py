"""The verified-index cache of Part.read_index: kept for a part written just now, never stale.

A cached index is served only for the same bytes: a file whose bytes changed is read again,
however its times, size and inode look.
"""

from __future__ import annotations

import os
import shutil
import time

import pytest

from bloomskip.clickhouse import compression
from bloomskip.clickhouse.marks import PackedArchive, write_skip_index_files
from bloomskip.clickhouse.part import Part
from bloomskip.clickhouse.part_cli import explain_part
from bloomskip.errors import FormatError

WHERE = "hasToken(s, 'w12')"


def _copy(built, tmp_path):
    target = tmp_path / built.layout
    shutil.copytree(built.part_dir, target)
    return target


def _open(built, part_dir) -> Part:
    return Part.open(part_dir, built.table_sql.read_text())


def _selected(built, part_dir, name="i_tok") -> int:
    return explain_part(_open(built, part_dir), WHERE, [name])["indexes"][0]["granules_selected"]


def test_an_index_of_a_part_written_just_now_is_kept(corpus, tmp_path):
    built = corpus["wide_plain"]
    part_dir = _copy(built, tmp_path)
    first = _open(built, part_dir).read_index("i_tok")
    assert _open(built, part_dir).read_index("i_tok") is first
    # New times, same bytes: recognised by the blocks' checksums.
    os.utime(part_dir / "skp_idx_i_tok.idx")
    assert _open(built, part_dir).read_index("i_tok") is first


@pytest.mark.parametrize("old_times", [False, True], ids=["written-now", "times-set-back"])
def test_an_index_rewritten_in_place_is_read_again(corpus, tmp_path, old_times):
    """Same inode, size and marks, and (when set back) the same modification time as the bytes
    read first: only the bytes tell the two apart (restored times are what tar and rsync -t
    leave; a part rewritten within the same second has the same coarse times)."""
    built = corpus["wide_plain"]
    part_dir = _copy(built, tmp_path)
    stored = _open(built, part_dir).read_index("i_tok").skip_index
    granules = [stored.granule_bytes(j) for j in range(stored.index_granule_count)]
    # Uncompressed, so that the rewrite below has the very same size and marks.
    idx, marks = write_skip_index_files(part_dir, "i_tok", granules, codec="NONE")
    old = time.time_ns() - 3600 * 10**9
    if old_times:
        os.utime(idx, ns=(old, old))
    kept = _selected(built, part_dir)
    assert kept == built.explain[("i_tok", WHERE)] < stored.index_granule_count
    before = idx.stat()

    # Every filter bit set: every granule is kept. Written over the same inode.
    (tmp_path / "other").mkdir()
    full, _ = write_skip_index_files(
        tmp_path / "other", "i_tok", [b"\xff" * len(g) for g in granules], codec="NONE"
    )
    assert (tmp_path / "other" / marks.name).read_bytes() == marks.read_bytes()
    idx.write_bytes(full.read_bytes())
    if old_times:
        os.utime(idx, ns=(old, old))
    after = idx.stat()
    assert (after.st_ino, after.st_size) == (before.st_ino, before.st_size)
    assert not old_times or after.st_mtime_ns == before.st_mtime_ns
    assert _selected(built, part_dir) == stored.index_granule_count


def test_an_index_corrupted_after_it_was_read_is_refused(corpus, tmp_path):
    built = corpus["wide_plain"]
    part_dir = _copy(built, tmp_path)
    idx = part_dir / "skp_idx_i_tok.idx"
    first = _open(built, part_dir).read_index("i_tok")
    original = idx.read_bytes()
    for position in (3, 16, 30, len(original) - 1):  # checksum, header, payload, last byte
        corrupt = bytearray(original)
        corrupt[position] ^= 0x20
        idx.write_bytes(bytes(corrupt))
        with pytest.raises(FormatError) as error:
            _open(built, part_dir).read_index("i_tok")
        assert error.value.source == str(idx)
    idx.write_bytes(original)
    assert _open(built, part_dir).read_index("i_tok") is first


def test_a_packed_index_corrupted_after_it_was_read_is_refused(corpus, tmp_path):
    built = corpus["compact_packed"]
    part_dir = _copy(built, tmp_path)
    archive_path = part_dir / "skp_idx.packed"
    first = _open(built, part_dir).read_index("i_tok")
    assert _open(built, part_dir).read_index("i_tok") is first
    original = archive_path.read_bytes()
    member = PackedArchive.parse(original).members["skp_idx_i_tok.idx"]
    corrupt = bytearray(original)
    corrupt[member.offset + member.size // 2] ^= 0x01
    archive_path.write_bytes(bytes(corrupt))
    with pytest.raises(FormatError) as error:
        _open(built, part_dir).read_index("i_tok")
    assert "skp_idx.packed" in str(error.value)
    archive_path.write_bytes(original)
    assert _open(built, part_dir).read_index("i_tok") is first


def test_stream_checksums_are_the_blocks_checksums_verified():
    blocks = [compression.compress_block(bytes([n]) * 100, "LZ4") for n in range(3)]
    stream = b"".join(blocks)
    assert compression.stream_checksums(stream) == b"".join(block[:16] for block in blocks)
    assert compression.read_compressed_stream_with_blocks(stream).checksums == (
        compression.stream_checksums(stream)
    )
    corrupt = bytearray(stream)
    corrupt[len(blocks[0]) + 30] ^= 1
    with pytest.raises(FormatError) as error:
        compression.stream_checksums(bytes(corrupt), "x.idx")
    assert (error.value.field, error.value.offset) == ("checksum", len(blocks[0]))
    with pytest.raises(FormatError):
        compression.stream_checksums(stream[:-1])
