"""A metadata index that contradicts itself is refused, and every real file's index agrees.

TsFile has no checksums: a corrupt index can list a series that a lookup, which searches the
index by the greatest key not above its target and picks the root by the device's table, then
cannot find. Each contradiction is made here by editing a few bytes of a file written by PyPI
``tsfile``; the reader must name it with a FormatError instead of listing such series.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest
from tsfile_corpus import CorpusFile

from bloomskip.errors import FormatError
from bloomskip.tsfile.reader import TsFileReader

JAVA_FILES = ["java_tree_cjk.tsfile", "java_table_trailing_null.tsfile"]


def _replace(path: Path, offset: int, old: bytes, new: bytes) -> None:
    data = bytearray(path.read_bytes())
    assert data[offset : offset + len(old)] == old and len(old) == len(new)
    data[offset : offset + len(old)] = new
    path.write_bytes(bytes(data))


def _root_offset(path: Path, table: str) -> int:
    with TsFileReader(path) as reader:
        return reader.metadata.table_roots[table].position


def _refusal(path: Path) -> FormatError:
    """Open the file (which must work), list it, and return the FormatError the listing raises."""
    with TsFileReader(path) as reader, pytest.raises(FormatError) as caught:
        reader.series()
    assert caught.value.source == str(path)
    return caught.value


def test_device_keys_out_of_order(copy_of: Callable[[str], Path]) -> None:
    path = copy_of("tree_multiflush")  # one leaf root: (root.mf, d0) ... (root.mf, d9)
    data = path.read_bytes()
    offset = data.index(b"d3", _root_offset(path, "root.mf"))
    _replace(path, offset, b"d3", b"d9")
    error = _refusal(path)
    assert error.field == "index_node.device" and "strictly increasing" in str(error)
    assert error.offset == _root_offset(path, "root.mf")


def test_measurement_out_of_order(copy_of: Callable[[str], Path]) -> None:
    # One flipped bit in a measurement name ("温度" -> "温約"), as the fuzzer found it.
    path = copy_of("tree_wide")
    data = path.read_bytes()
    with TsFileReader(path) as reader:
        meta_offset = reader.metadata.meta_offset
    name = "温度261".encode()
    offset = data.index(name, meta_offset)
    _replace(path, offset, name, "温約261".encode())
    error = _refusal(path)
    assert error.field == "timeseries_metadata.measurement"
    # The next name is the first that does not follow: its length byte is the field's offset.
    assert "温度262" in str(error) and error.offset == data.index("温度262".encode(), offset) - 1


def _internal_root(path: Path) -> tuple[int, int]:
    """tree_1000's root: an internal device node keyed (root.sg, d0), (root.sg, 设备11)."""
    with TsFileReader(path) as reader:
        root = reader.metadata.table_roots["root.sg"]
        assert root.keys == (("root.sg", "d0"), ("root.sg", "设备11"))
        return root.position, root.offsets[1]


def test_entry_key_is_not_its_childs_first_key(copy_of: Callable[[str], Path]) -> None:
    path = copy_of("tree_1000")
    root, child = _internal_root(path)
    offset = path.read_bytes().index("设备11".encode(), root)
    _replace(path, offset, "设备11".encode(), "设备19".encode())
    error = _refusal(path)
    assert error.field == "index_node.device" and error.offset == child
    assert "first key 'root.sg.设备11' is not its entry's key 'root.sg.设备19'" in str(error)


def test_child_reaches_past_the_next_entry(copy_of: Callable[[str], Path]) -> None:
    # The second child and its entry both start at 设备10 now, below the first child's last keys.
    path = copy_of("tree_1000")
    root, child = _internal_root(path)
    data = path.read_bytes()
    for start in (root, child):
        offset = data.index("设备11".encode(), start)
        assert offset - start < 48  # the key of the first entry or the second
        _replace(path, offset, "设备11".encode(), "设备10".encode())
    with TsFileReader(path) as reader:
        first_child = reader.metadata.table_roots["root.sg"].offsets[0]
    error = _refusal(path)
    assert error.field == "index_node.device" and error.offset == first_child
    assert "does not precede the next key 'root.sg.设备10' of its parent" in str(error)


def test_device_under_another_tables_root(copy_of: Callable[[str], Path]) -> None:
    path = copy_of("tree_1")
    root = _root_offset(path, "root.sg")
    offset = path.read_bytes().index(b"root.sg", root)  # the device key's first segment
    _replace(path, offset, b"root.sg", b"root.sx")
    error = _refusal(path)
    assert error.field == "index_node.device" and error.offset == root
    assert "'root.sx.d1' is listed under table 'root.sg'" in str(error)


def test_tree_device_split_another_way(copy_of: Callable[[str], Path]) -> None:
    path = copy_of("tree_devices")  # holds the device root.sg.`a.b`: segments (root.sg, `a.b`)
    root = _root_offset(path, "root.sg")
    offset = path.read_bytes().index(b"`a.b`", root)
    _replace(path, offset, b"`a.b`", b"xa.bx")  # the text root.sg.xa.bx splits another way
    error = _refusal(path)
    assert error.field == "index_node.device" and error.offset == root
    assert "'root.sg.xa.bx' is not split into segments as its path text splits" in str(error)


def _schema_offset(path: Path) -> tuple[bytes, int]:
    """The file's bytes and where TsFileMetadata's table schema section may start."""
    with TsFileReader(path) as reader:
        metadata = reader.metadata
        root = metadata.table_roots["t1"]
        return path.read_bytes(), root.position


def test_table_without_schema(copy_of: Callable[[str], Path]) -> None:
    path = copy_of("table_small")
    data, root = _schema_offset(path)
    with TsFileReader(path) as reader:
        filter_start = reader.metadata.filter_start
    offset = data.rindex(b"\x04t1", root, filter_start)  # the schema's table name
    _replace(path, offset, b"\x04t1", b"\x04t2")
    with TsFileReader(path) as reader:
        assert set(reader.metadata.table_schemas) == {"t2"}
    error = _refusal(path)
    assert error.field == "index_node.device" and error.offset == root
    assert "listed under table 't1', which has no table schema" in str(error)


def test_more_tags_than_the_schema(copy_of: Callable[[str], Path]) -> None:
    path = copy_of("table_small")  # tags region, dev
    data, root = _schema_offset(path)
    column = data.index(b"\x00\x00\x00\x03dev", root)
    properties = column + 7 + 3  # after the name, the data type, encoding and compressor
    assert data[properties : properties + 4] == b"\x00\x00\x00\x00"
    _replace(path, properties + 4, b"\x00\x00\x00\x00", b"\x00\x00\x00\x01")  # TAG -> FIELD
    with TsFileReader(path) as reader:
        assert reader.metadata.table_schemas["t1"].tag_count == 1
    error = _refusal(path)
    assert error.field == "index_node.device" and error.offset == root
    assert "has 2 tags, more than the 1 of the schema of table 't1'" in str(error)


def _real_files(corpus: dict[str, CorpusFile], shared_dir: Path) -> list[Path]:
    java = shared_dir / "research" / "tsfile" / "java_written"
    return [item.path for item in corpus.values()] + [java / name for name in JAVA_FILES]


def test_every_listed_series_is_found(corpus: dict[str, CorpusFile], shared_dir: Path) -> None:
    for path in _real_files(corpus, shared_dir):
        with TsFileReader(path) as reader:
            series = reader.series()
            step = max(1, len(series) // 2000)  # the 66,000-series file: a sample across it
            missing = [s.path for s in series[::step] if not reader.lookup(s.path).present]
            assert series and not missing, (path.name, missing[:5])


@pytest.mark.parametrize("name", ["tree_10_cjk", "tree_devices", "table_small"])
def test_corrupt_index_is_refused_or_agrees(
    corpus: dict[str, CorpusFile], tmp_path: Path, name: str
) -> None:
    """One flipped bit in the index region: either a FormatError, or every listed series found."""
    generator = random.Random(f"consistency-{name}")
    original = corpus[name].path.read_bytes()
    with TsFileReader(corpus[name].path) as reader:
        index_start, index_end = reader.metadata.meta_offset, reader.metadata.filter_start
    target = tmp_path / "flipped.tsfile"
    outcomes = {"refused": 0, "agreed": 0}
    for _ in range(400):
        data = bytearray(original)
        data[generator.randrange(index_start, index_end)] ^= 1 << generator.randrange(8)
        target.write_bytes(bytes(data))
        try:
            with TsFileReader(target) as reader:
                series = reader.series()
                missing = [s.path for s in series if not reader.index_contains_path(s.path)]
        except FormatError:
            outcomes["refused"] += 1
            continue
        assert not missing, missing[:5]
        outcomes["agreed"] += 1
    assert outcomes["refused"] > 5 and outcomes["agreed"] > 5, outcomes
