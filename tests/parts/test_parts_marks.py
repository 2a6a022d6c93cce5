"""Marks files and the skp_idx.packed archive, against what chdb wrote."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from parts_corpus import INDEXES

from bloomskip.clickhouse import compression
from bloomskip.clickhouse.marks import (
    MarksFormat,
    PackedArchive,
    read_marks,
    write_marks,
    write_skip_index_files,
)
from bloomskip.errors import FormatError

GRANULARITY = {name: int(body.rsplit(" ", 1)[1]) for name, body in INDEXES.items()}


def _skip_index_marks(part_dir):
    """(name, marks bytes, format) for every standalone skip-index marks file or packed member."""
    archive_path = part_dir / "skp_idx.packed"
    if archive_path.exists():
        archive = PackedArchive.parse(archive_path.read_bytes(), str(archive_path))
        for name in archive.members:
            if ".idx" not in name:
                yield name, archive.read(name), MarksFormat.from_name(name)
        return
    for path in sorted(part_dir.glob("skp_idx_*")):
        if path.suffix != ".idx":
            yield path.name, path.read_bytes(), MarksFormat.from_name(path.name)


def test_skip_index_marks_of_every_layout(corpus):
    """One mark per index granule, no final mark, rows = 1; plain marks re-encode identically."""
    seen_formats = set()
    for built in corpus.values():
        names = 0
        for name, data, fmt in _skip_index_marks(built.part_dir):
            seen_formats.add(fmt.extension)
            index = name[len("skp_idx_") : name.rindex(".")]
            marks = read_marks(data, fmt, name)
            expected = -(-len(built.granule_rows) // GRANULARITY[index])
            assert len(marks) == expected, (built.layout, name)
            assert (marks.block_offset[0, 0], marks.offset_in_block[0, 0]) == (0, 0)
            if fmt.has_rows:
                assert (marks.rows == 1).all()
            else:
                assert marks.rows is None
            encoded = write_marks(marks.block_offset, marks.offset_in_block, fmt)
            if fmt.compressed:
                assert compression.read_compressed_stream(encoded) == (
                    compression.read_compressed_stream(data)
                )
            else:
                assert encoded == data
            names += 1
        assert names == len(INDEXES), built.layout
    assert seen_formats == {".mrk", ".mrk2", ".mrk4", ".cmrk", ".cmrk2", ".cmrk4"}


def test_data_marks_rows_match_merge_tree_index(corpus):
    """.mrk2 / .mrk4 rows fields are ClickHouse's granule rows (mergeTreeIndex), plus a final 0."""
    for built in corpus.values():
        if built.part_type == "Compact":
            path = next(built.part_dir.glob("data.*mrk4"))
            substreams = sum(
                int(line.split()[0])
                for line in (built.part_dir / "columns_substreams.txt").read_text().splitlines()
                if "substreams for column" in line
            )
        else:
            path = next(built.part_dir.glob("k.*mrk*"))
            substreams = 1
        marks = read_marks(path.read_bytes(), MarksFormat.from_name(path.name), "", substreams)
        if marks.rows is None:
            assert len(marks) == len(built.granule_rows)
            continue
        assert marks.rows.tolist() == [*built.granule_rows, 0], built.layout


def test_write_skip_index_files_lays_out_like_clickhouse(corpus, tmp_path):
    built = corpus["wide_plain"]
    idx_path = built.part_dir / "skp_idx_i_big.idx"
    stream = compression.read_compressed_stream_with_blocks(idx_path.read_bytes())
    theirs = read_marks((built.part_dir / "skp_idx_i_big.mrk2").read_bytes(), MarksFormat(".mrk2"))
    starts = stream.resolve_marks(theirs.block_offset[:, 0], theirs.offset_in_block[:, 0])
    bounds = [*starts.tolist(), len(stream.data)]
    granules = [stream.data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    for extension in (".mrk2", ".cmrk2", ".mrk", ".cmrk4"):
        out = tmp_path / extension.strip(".")
        out.mkdir()
        idx, mrk = write_skip_index_files(
            out, "i_big", granules, codec="ZSTD(3)", marks_extension=extension
        )
        assert sorted(p.name for p in out.iterdir()) == sorted([idx.name, mrk.name])
        ours = read_marks(mrk.read_bytes(), MarksFormat.from_name(mrk.name))
        assert ours.offset_in_block.tolist() == theirs.offset_in_block.tolist()
        written = compression.read_compressed_stream_with_blocks(idx.read_bytes())
        assert written.data == stream.data
        assert written.block_starts.tolist() == stream.block_starts.tolist()


def test_packed_archive_members_agree_with_clickhouse(corpus):
    for layout in ("wide_packed", "compact_packed", "wide_fixed_plain_packed", "compact_merged"):
        built = corpus[layout]
        archive = PackedArchive.parse((built.part_dir / "skp_idx.packed").read_bytes())
        assert archive.version == 1
        for index, (compressed, uncompressed, _) in built.index_sizes.items():
            member = archive.members[f"skp_idx_{index}.idx"]
            assert member.size == compressed
            assert member.uncompressed_size == uncompressed
            assert len(compression.read_compressed_stream(archive.read(member.name))) == (
                uncompressed
            )


def test_every_truncated_archive_header_is_a_format_error(corpus):
    data = (corpus["wide_packed"].part_dir / "skp_idx.packed").read_bytes()
    header_end = min(member.offset for member in PackedArchive.parse(data).members.values())
    for length in range(header_end):
        with pytest.raises(FormatError):
            PackedArchive.parse(data[:length], "skp_idx.packed")
    # Cutting into the members leaves a header whose members run past the end.
    for length in range(header_end, len(data), 97):
        with pytest.raises(FormatError) as error:
            PackedArchive.parse(data[:length], "skp_idx.packed")
        assert error.value.field == "member_offset"


def test_corrupt_archive_headers(corpus):
    data = bytearray((corpus["compact_packed"].part_dir / "skp_idx.packed").read_bytes())
    cases = {
        "version": bytes([7]) + data[1:],
        "member_count": data[:1] + struct.pack("<Q", 2**60) + data[9:],
        "name_length": data[:9] + bytes([0xFF] * 12) + data[21:],
    }
    first_name_length = data[9]
    offset_field = 10 + first_name_length
    cases["member_offset"] = (
        data[:offset_field] + struct.pack("<Q", len(data) + 5) + data[offset_field + 8 :]
    )
    for field, corrupt in cases.items():
        with pytest.raises(FormatError) as error:
            PackedArchive.parse(bytes(corrupt), "skp_idx.packed")
        assert error.value.field == field, (field, error.value)


def test_marks_of_wrong_size_are_format_errors():
    with pytest.raises(FormatError):
        read_marks(bytes(23), MarksFormat(".mrk2"), "x.mrk2")
    with pytest.raises(FormatError):
        read_marks(bytes(48), MarksFormat(".mrk4"), "data.mrk4", substreams=2)
    with pytest.raises(FormatError):
        read_marks(bytes(40), MarksFormat(".mrk", compressed=True), "x.cmrk")
    assert len(read_marks(bytes(48), MarksFormat(".mrk4"), "data.mrk4", substreams=1)) == 2


def test_marks_format_names():
    assert MarksFormat.from_name("a/b/skp_idx_x.cmrk3") == MarksFormat(".mrk3", True)
    assert MarksFormat(".mrk4", True).extension == ".cmrk4"
    assert MarksFormat(".mrk").record_size() == 16
    assert MarksFormat(".mrk4").record_size(3) == 56
    for bad in ("x.idx", "x.mrk9", "mrk"):
        with pytest.raises(ValueError):
            MarksFormat.from_name(bad)
    with pytest.raises(ValueError):
        write_marks([0], [0], MarksFormat(".mrk"), rows=[1])
    assert np.frombuffer(write_marks([5], [6], MarksFormat(".mrk2"), rows=[7]), "<u8").tolist() == [
        5,
        6,
        7,
    ]
