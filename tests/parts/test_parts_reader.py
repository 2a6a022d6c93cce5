"""The part reader against ClickHouse: granules, sizes, bits, EXPLAIN indexes = 1, bad input."""

from __future__ import annotations

import shutil
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from parts_corpus import FOLDED_PREDICATES, FULL_LAYOUTS, INDEXES, LAYOUTS

from bloomskip.clickhouse import compression
from bloomskip.clickhouse.marks import (
    MarksFormat,
    PackedArchive,
    escape_for_file_name,
    read_marks,
    write_marks,
    write_skip_index_files,
)
from bloomskip.clickhouse.part import Part, PartError, table_settings
from bloomskip.clickhouse.part_cli import explain_part
from bloomskip.errors import FormatError


def _open(built, part_dir=None) -> Part:
    return Part.open(part_dir or built.part_dir, built.table_sql.read_text())


def _standalone_copy(built, tmp_path):
    """A writable copy of a part whose skip indexes are standalone files."""
    target = tmp_path / built.layout
    shutil.copytree(built.part_dir, target)
    return target


def test_part_type_and_granule_rows_match_clickhouse(corpus):
    for built in corpus.values():
        part = _open(built)
        assert part.part_type == built.part_type, built.layout
        assert part.rows == built.rows
        assert part.granule_rows.tolist() == built.granule_rows, built.layout
    # The merged compact part really has irregular granules, and a compact part a long last one.
    assert len(set(corpus["compact_merged"].granule_rows)) > 1
    assert corpus["compact_packed"].granule_rows[-1] > 128


def test_index_sizes_match_system_data_skipping_indices(corpus):
    for built in corpus.values():
        part = _open(built)
        assert set(part.indexes) == set(INDEXES)
        for name in INDEXES:
            stored = part.read_index(name)
            sizes = (stored.compressed_bytes, stored.uncompressed_bytes, stored.marks_bytes)
            assert sizes == built.index_sizes[name], (built.layout, name)


def _clickhouse_granule_popcounts(
    stored_stream: bytes, starts, ends, definition
) -> list[list[int]]:
    """Popcount of each index column's filter bytes, cut from ClickHouse's granule bytes."""
    result = []
    columns = len(definition.expressions)
    for start, end in zip(starts, ends, strict=True):
        granule = stored_stream[start:end]
        header = 0
        if definition.type == "bloom_filter":
            while granule[header] & 0x80:
                header += 1
            header += 1
        size = (len(granule) - header) // columns
        counts = []
        for column in range(columns):
            chunk = granule[header + column * size : header + (column + 1) * size]
            counts.append(int(np.unpackbits(np.frombuffer(chunk, np.uint8)).sum()))
        result.append(counts)
    return result


@pytest.mark.parametrize("layout", ["wide_plain", "compact_plain_zstd", "wide_small_blocks"])
def test_bits_set_equal_popcount_of_clickhouse_granules(corpus, layout):
    built = corpus[layout]
    part = _open(built)
    for name in INDEXES:
        stored = part.read_index(name)
        idx = (built.part_dir / f"skp_idx_{name}.idx").read_bytes()
        marks_path = next(built.part_dir.glob(f"skp_idx_{name}.*mrk*"))
        marks = read_marks(marks_path.read_bytes(), MarksFormat.from_name(marks_path.name))
        stream = compression.read_compressed_stream_with_blocks(idx)
        starts = stream.resolve_marks(marks.block_offset[:, 0], marks.offset_in_block[:, 0])
        ends = [*starts[1:].tolist(), len(stream.data)]
        expected = _clickhouse_granule_popcounts(
            stream.data, starts.tolist(), ends, stored.definition
        )
        table = stored.skip_index.granule_statistics().to_pylist()
        for row in table:
            column = stored.definition.expressions.index(row["column"])
            assert row["bits_set"] == expected[row["granule"]][column], (name, row)
            assert row["fill_ratio"] == pytest.approx(row["bits_set"] / row["bit_count"])
        rows_per_index_granule = {row["granule"]: row["rows"] for row in table}
        assert sum(rows_per_index_granule.values()) == built.rows


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_explain_matches_clickhouse(corpus, layout):
    """granules_selected equals EXPLAIN indexes = 1 for every recorded (index, predicate)."""
    built = corpus[layout]
    part = _open(built)
    mismatches = []
    for (name, predicate), expected in sorted(built.explain.items()):
        entry = explain_part(part, predicate, [name])["indexes"][0]
        assert entry["granules_total"] == len(built.granule_rows)
        assert entry["granules_selected"] == len(entry["selected"])
        assert entry["rows_selected"] == sum(built.granule_rows[g] for g in entry["selected"])
        if predicate in FOLDED_PREDICATES:
            # ClickHouse folds these to false and reads nothing; we may keep more, never fewer.
            assert expected == 0
            continue
        if entry["granules_selected"] != expected:
            mismatches.append((name, predicate, entry["granules_selected"], expected))
    assert not mismatches, "\n".join(map(repr, mismatches))
    assert len(built.explain) >= len(INDEXES) * (40 if layout in FULL_LAYOUTS else 10)


def test_explain_corpus_prunes(corpus):
    """The corpus is not vacuous: many checks keep some but not all granules."""
    built = corpus["wide_packed"]
    total = len(built.granule_rows)
    partial = [key for key, kept in built.explain.items() if 0 < kept < total]
    dropped_all = [key for key, kept in built.explain.items() if kept == 0]
    assert len(partial) >= 70 and len(dropped_all) >= 20
    assert {name for name, _ in partial} >= set(INDEXES) - {"i_sat"}


def test_granularity_counts_data_granules(corpus):
    built = corpus["compact_merged"]
    part = _open(built)
    entry = explain_part(part, "v = 5", ["i_v3"])["indexes"][0]
    # GRANULARITY 3: whole groups of 3 data granules are kept or dropped.
    assert entry["granules_selected"] % 3 == 0 and 0 < entry["granules_selected"] < 24
    groups = {granule // 3 for granule in entry["selected"]}
    assert entry["selected"] == [
        g for group in sorted(groups) for g in range(3 * group, 3 * group + 3)
    ]


# -- bad input ---------------------------------------------------------------------------------


def test_every_truncation_of_an_index_file_is_a_format_error(corpus, tmp_path):
    part_dir = _standalone_copy(corpus["wide_plain"], tmp_path)
    idx = part_dir / "skp_idx_i_v.idx"
    original = idx.read_bytes()
    for length in range(len(original)):
        idx.write_bytes(original[:length])
        with pytest.raises(FormatError) as error:
            _open(corpus["wide_plain"], part_dir).read_index("i_v")
        assert "skp_idx_i_v" in str(error.value) and error.value.offset is not None


@pytest.mark.parametrize("layout", ["wide_plain", "compact_plain_zstd", "wide_multiple_codec"])
def test_every_index_file_rejects_random_corruption(corpus, tmp_path, layout):
    part_dir = _standalone_copy(corpus[layout], tmp_path)
    rng = np.random.default_rng(5)
    for name in INDEXES:
        idx = part_dir / f"skp_idx_{name}.idx"
        original = idx.read_bytes()
        for _ in range(6):
            corrupt = bytearray(original)
            for position in rng.integers(0, len(corrupt), rng.integers(1, 4)):
                corrupt[position] ^= int(rng.integers(1, 256))
            idx.write_bytes(bytes(corrupt))
            with pytest.raises(FormatError):
                _open(corpus[layout], part_dir).read_index(name)
        idx.write_bytes(original)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_packed_archive_corruption_is_a_format_error(corpus, tmp_path_factory, data):
    built = corpus["compact_packed"]
    part_dir = tmp_path_factory.mktemp("packed")
    shutil.copytree(built.part_dir, part_dir, dirs_exist_ok=True)
    archive_path = part_dir / "skp_idx.packed"
    original = archive_path.read_bytes()
    archive = PackedArchive.parse(original)
    name = data.draw(st.sampled_from(sorted(INDEXES)))
    member = archive.members[f"skp_idx_{name}.idx"]
    position = data.draw(st.integers(member.offset, member.offset + member.size - 1))
    corrupt = bytearray(original)
    corrupt[position] ^= data.draw(st.integers(1, 255))
    archive_path.write_bytes(bytes(corrupt))
    with pytest.raises(FormatError) as error:
        _open(built, part_dir).read_index(name)
    assert "skp_idx.packed" in str(error.value)


def _rewrite_marks(path, fmt, change):
    marks = read_marks(path.read_bytes(), fmt)
    block_offset, inside = marks.block_offset[:, 0].copy(), marks.offset_in_block[:, 0].copy()
    block_offset, inside = change(block_offset, inside)
    path.write_bytes(write_marks(block_offset, inside, fmt))


@pytest.mark.parametrize(
    "change",
    [
        lambda b, i: (b + np.uint64(10_000), i),  # block past the end of the file
        lambda b, i: (b + np.uint64(3), i),  # not a block start
        lambda b, i: (b, i + np.uint64(1 << 40)),  # far past the end of its block
        lambda b, i: (b, i + np.uint64(1)),  # shifted by one byte: granule lengths disagree
        lambda b, i: (b[:-1], i[:-1]),  # one mark missing
        lambda b, i: (b[::-1], i[::-1]),  # out of order
    ],
)
def test_bad_marks_are_format_errors(corpus, tmp_path, change):
    part_dir = _standalone_copy(corpus["wide_plain"], tmp_path)
    for name in ("i_v", "i_tok"):
        marks_path = part_dir / f"skp_idx_{name}.mrk2"
        original = marks_path.read_bytes()
        _rewrite_marks(marks_path, MarksFormat(".mrk2"), change)
        with pytest.raises(FormatError) as error:
            _open(corpus["wide_plain"], part_dir).read_index(name)
        assert f"skp_idx_{name}" in str(error.value)
        marks_path.write_bytes(original)


def test_granule_shorter_than_its_declared_filter(corpus, tmp_path):
    """A bloom_filter granule whose row count claims a bigger filter than its marks leave room for;
    the block is re-framed with a valid checksum, so only the granule check can catch it."""
    part_dir = _standalone_copy(corpus["wide_plain"], tmp_path)
    idx = part_dir / "skp_idx_i_v.idx"
    stream = compression.read_compressed_stream_with_blocks(idx.read_bytes())
    marks = read_marks((part_dir / "skp_idx_i_v.mrk2").read_bytes(), MarksFormat(".mrk2"))
    starts = stream.resolve_marks(marks.block_offset[:, 0], marks.offset_in_block[:, 0])
    assert len(stream.block_offsets) == 1
    data = bytearray(stream.data)
    granule = 3
    assert data[starts[granule]] < 0x7F
    data[starts[granule]] += 1  # one more distinct value: a filter one or more bytes longer
    idx.write_bytes(compression.compress_block(bytes(data), "NONE"))
    with pytest.raises(FormatError) as error:
        _open(corpus["wide_plain"], part_dir).read_index("i_v")
    assert error.value.offset == int(starts[granule])
    assert error.value.source.endswith("skp_idx_i_v.idx")


def test_data_marks_and_count_disagree(corpus, tmp_path):
    for layout in ("wide_plain", "wide_fixed_plain_packed", "compact_plain_zstd"):
        part_dir = _standalone_copy(corpus[layout], tmp_path)
        # Fixed granularity cannot see a few rows missing from the last granule; adaptive can.
        for wrong_count in ("9999", "2999") if "fixed" not in layout else ("9999", "2900"):
            (part_dir / "count.txt").write_text(wrong_count)
            with pytest.raises(FormatError):
                _open(corpus[layout], part_dir)
        (part_dir / "count.txt").write_text("lots")
        with pytest.raises(FormatError):
            _open(corpus[layout], part_dir)
        (part_dir / "count.txt").unlink()
        with pytest.raises(PartError):
            _open(corpus[layout], part_dir)


def test_truncated_data_marks(corpus, tmp_path):
    part_dir = _standalone_copy(corpus["compact_plain_zstd"], tmp_path)
    marks = part_dir / "data.mrk4"
    original = marks.read_bytes()
    for length in (len(original) - 1, len(original) - 8, 13):
        marks.write_bytes(original[:length])
        with pytest.raises(FormatError):
            _open(corpus["compact_plain_zstd"], part_dir)


def test_index_not_materialized_keeps_everything(corpus, tmp_path):
    built = corpus["wide_plain"]
    part_dir = _standalone_copy(built, tmp_path)
    for path in part_dir.glob("skp_idx_i_v.*"):
        path.unlink()
    part = _open(built, part_dir)
    assert part.read_index("i_v") is None
    entry = explain_part(part, "v = 5", ["i_v"])["indexes"][0]
    assert entry["granules_selected"] == entry["granules_total"] == len(built.granule_rows)
    with pytest.raises(PartError):
        part.read_index("no_such_index")


def test_idx_without_marks(corpus, tmp_path):
    part_dir = _standalone_copy(corpus["wide_plain"], tmp_path)
    (part_dir / "skp_idx_i_v.mrk2").unlink()
    with pytest.raises(PartError):
        _open(corpus["wide_plain"], part_dir).read_index("i_v")


def test_not_a_part_directory(tmp_path, corpus):
    with pytest.raises(PartError):
        _open(corpus["wide_plain"], tmp_path / "missing")
    with pytest.raises(PartError):
        _open(corpus["wide_plain"], tmp_path)


def test_granule_lengths_checked_before_decoding(corpus, tmp_path):
    """A huge row count in a granule header is refused without building its filter."""
    part_dir = _standalone_copy(corpus["wide_plain"], tmp_path)
    idx = part_dir / "skp_idx_i_v.idx"
    data = compression.read_compressed_stream(idx.read_bytes())
    huge = bytes([0xFF] * 9 + [0x01]) + data[1:]
    idx.write_bytes(compression.compress_block(huge, "NONE"))
    with pytest.raises(FormatError) as error:
        _open(corpus["wide_plain"], part_dir).read_index("i_v")
    assert error.value.offset is not None
    assert struct.calcsize("<Q") == 8


def test_file_names_and_settings():
    # chdb 26.9 stored INDEX `i-x.y é` as skp_idx_i%2Dx%2Ey%20%C3%A9.idx / .cmrk2.
    assert escape_for_file_name("i-x.y é") == "i%2Dx%2Ey%20%C3%A9"
    assert escape_for_file_name("i_v3") == "i_v3"
    ddl = (
        "ATTACH TABLE _ UUID '0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0' (`k` UInt64) "
        "ENGINE = MergeTree ORDER BY k SETTINGS index_granularity = 256, compress_marks = 0"
    )
    assert table_settings(ddl) == {"index_granularity": "256", "compress_marks": "0"}
    with pytest.raises(PartError):
        table_settings("ATTACH TABLE (((")


_INTACT_ANSWERS: dict[str, dict] = {}


def _index_answers(part: Part) -> dict[str, tuple]:
    """Per index: the granules a predicate keeps, and the index bits (inspect's per-granule
    bits_set; rows may differ when a corruption moves rows between data granules and keeps
    their sum). An index whose files are not found is ``(kept granules, None)``."""
    from bloomskip.clickhouse.part_cli import inspect_part

    explained = explain_part(part, "v = 5 OR hasToken(s, 'w12')")["indexes"]
    inspected = {entry["name"]: entry for entry in inspect_part(part)["indexes"]}
    answers = {}
    for entry in explained:
        stored = inspected[entry["name"]]
        bits = None
        if stored["materialized"]:
            rows = stored["granule_statistics"]
            bits = (stored["index_granules"], stored["uncompressed_bytes"],
                    [row["bits_set"] for row in rows])  # fmt: skip
        answers[entry["name"]] = ((entry["granules_total"], entry["selected"]), bits)
    return answers


def _check_against_intact(answers: dict, intact: dict) -> None:
    """The intact part's answers, or, for an index whose files a corruption hid (a member name
    changed in skp_idx.packed), every granule kept: the index unused, never a granule lost."""
    assert answers.keys() == intact.keys()
    for name, (selection, bits) in answers.items():
        if bits is None and intact[name][1] is not None:
            total, selected = selection
            assert selected == list(range(total)), name
        else:
            assert (selection, bits) == intact[name], name


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_corrupting_any_file_is_refused_or_changes_nothing(corpus, tmp_path_factory, data):
    """Any truncation or byte change in any part file: a BloomskipError naming a file, or the
    answers of the intact part (never a granule lost, never another exception)."""
    from bloomskip.errors import BloomskipError

    layout = data.draw(st.sampled_from(sorted(corpus)))
    built = corpus[layout]
    if layout not in _INTACT_ANSWERS:
        _INTACT_ANSWERS[layout] = _index_answers(_open(built))
    intact = _INTACT_ANSWERS[layout]
    part_dir = tmp_path_factory.mktemp("fuzz") / "part"
    shutil.copytree(built.part_dir, part_dir)
    target = part_dir / data.draw(st.sampled_from(sorted(p.name for p in part_dir.iterdir())))
    content = bytearray(target.read_bytes())
    if data.draw(st.booleans()) and content:
        del content[data.draw(st.integers(0, len(content) - 1)) :]
    else:
        for _ in range(data.draw(st.integers(1, 4))):
            if content:
                content[data.draw(st.integers(0, len(content) - 1))] = data.draw(
                    st.integers(0, 255)
                )
    target.write_bytes(bytes(content))
    try:
        answers = _index_answers(_open(built, part_dir))
    except FormatError as exc:
        assert exc.source and str(part_dir) in exc.source, exc
    except BloomskipError as exc:
        assert str(part_dir) in str(exc), exc
    else:
        _check_against_intact(answers, intact)


def test_written_index_files_are_read_back(corpus, tmp_path):
    """Files from write_skip_index_files replace ClickHouse's and read back to the same index."""
    built = corpus["wide_plain"]
    part_dir = _standalone_copy(built, tmp_path)
    theirs = _open(built, part_dir).read_index("i_multi").skip_index
    granules = [theirs.granule_bytes(j) for j in range(theirs.index_granule_count)]
    for path in part_dir.glob("skp_idx_i_multi.*"):
        path.unlink()
    idx, marks = write_skip_index_files(part_dir, "i_multi", granules, codec="ZSTD(3)")
    assert (idx.name, marks.name) == ("skp_idx_i_multi.idx", "skp_idx_i_multi.mrk2")
    ours = _open(built, part_dir).read_index("i_multi").skip_index
    assert ours.to_bytes() == theirs.to_bytes()
    assert (
        explain_part(_open(built, part_dir), "lc = 'c3'", ["i_multi"])["indexes"][0][
            "granules_selected"
        ]
        == built.explain[("i_multi", "lc = 'c3'")]
    )
    odd, _ = write_skip_index_files(tmp_path, "i-x.y é", granules, codec="NONE")
    assert odd.name == "skp_idx_i%2Dx%2Ey%20%C3%A9.idx"
