"""The C scan of TsFileMetadata and of index nodes, and ``find``'s filter-only path.

The C routines (``_native.tsfile_scan_metadata``, ``_native.tsfile_index_node``) are the only
parser of TsFile metadata. They must accept exactly what the Python oracle
(``tsfile_oracle.py``, itself checked against files written by PyPI ``tsfile`` and by Java in
the other tests) accepts and return the same values, and refuse what it refuses with the same
error: message, field, offset and kind (truncation or not). So every corpus file, the
Java-written files and thousands of corrupted variants are parsed both ways and compared.
Random bytes, truncations and nonsense arguments must give the oracle's answer
(``tools/sanitize.sh`` runs this file under AddressSanitizer and UBSan to catch out-of-bounds
reads).
"""

from __future__ import annotations

import random
import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tsfile_corpus import CorpusFile
from tsfile_oracle import error_of, parse_metadata, parse_node

from bloomskip import FormatError, _native
from bloomskip.errors import TruncatedError
from bloomskip.tsfile import TsFileReader, find
from bloomskip.tsfile.codec import ByteCursor
from bloomskip.tsfile.filter import PathProbe
from bloomskip.tsfile.find import find_series
from bloomskip.tsfile.hash import HashVariant
from bloomskip.tsfile.reader import HEAD_SIZE, TAIL_SIZE, TsFileMetadata, check_envelope

NAMES = [
    "tree_1",
    "tree_10_cjk",
    "tree_1000",
    "tree_wide",
    "tree_multiflush",
    "tree_devices",
    "tree_types",
    "table_small",
    "table_null_tags",
    "table_ascii",
]
SCAN_FIELDS = 11


@pytest.fixture
def scratch_file(tmp_path: Path) -> Path:
    return tmp_path / "scratch.tsfile"


def _summary(metadata: TsFileMetadata) -> tuple:
    """Everything TsFileMetadata holds, the root nodes parsed (so they must be valid too)."""
    roots = {name: metadata.table_roots[name] for name in metadata.table_roots}
    bloom = metadata.bloom_filter
    return (
        metadata.version, metadata.start, metadata.end, roots, metadata.table_schemas,
        metadata.meta_offset, None if bloom is None else (bloom.to_bytes(), bloom.variant),
        metadata.filter_start, metadata.filter_end, metadata.properties,
    )  # fmt: skip


def _both_ways(reader: TsFileReader, data: bytes, start: int) -> tuple[object, object]:
    """(oracle, C scan) of TsFileMetadata bytes: the summary, or the error's description."""
    return _parsed_both_ways(reader, data, start, reader.version)


def _described(error: FormatError | _native.TsFileScanError) -> tuple[object, ...]:
    """(text, field, offset, truncated) of an error of the oracle or of the C parsers."""
    if isinstance(error, _native.TsFileScanError):
        kind = TruncatedError if error.truncated else FormatError
        error = kind(error.message, field=error.field, offset=error.offset, source="fuzz")
    return (str(error), *error_of(error))


def _metadata(reader: TsFileReader) -> tuple[bytes, int]:
    metadata = reader.metadata
    return reader.read_bytes(metadata.start, metadata.end - metadata.start, "m"), metadata.start


@pytest.mark.parametrize("name", NAMES)
def test_scan_equals_the_python_parser(corpus: dict[str, CorpusFile], name: str) -> None:
    with TsFileReader(corpus[name].path) as reader:
        data, start = _metadata(reader)
        careful, scanned = _both_ways(reader, data, start)
        assert len(careful) == 10 and careful == scanned  # type: ignore[arg-type]
        assert _summary(reader.metadata) == careful


@pytest.mark.parametrize("name", NAMES)
def test_scan_agrees_on_corrupt_metadata(corpus: dict[str, CorpusFile], name: str) -> None:
    generator = random.Random(f"scan-{name}")
    outcomes = {"both accept": 0, "both refuse": 0}
    with TsFileReader(corpus[name].path) as reader:
        data, start = _metadata(reader)
        for trial in range(400):
            changed = bytearray(data)
            if trial % 4 == 0:
                del changed[generator.randrange(len(changed)) :]
            else:
                for _ in range(1 + trial % 3):
                    changed[generator.randrange(len(changed))] ^= generator.randrange(1, 256)
            careful, scanned = _both_ways(reader, bytes(changed), start)
            assert careful == scanned, (trial, careful, scanned)
            outcomes["both refuse" if len(careful) == 4 else "both accept"] += 1  # type: ignore[arg-type]
    assert outcomes["both refuse"] > 50


def _real_files(corpus: dict[str, CorpusFile], shared_dir: Path) -> list[Path]:
    """The PyPI-written corpus and the files the Java library wrote."""
    java = sorted((shared_dir / "research" / "tsfile" / "java_written").glob("*.tsfile"))
    assert len(java) >= 2
    return [*(corpus[name].path for name in NAMES), *java]


def test_scan_and_oracle_agree_on_real_files_and_their_truncations(
    corpus: dict[str, CorpusFile], shared_dir: Path
) -> None:
    refused: dict[str, int] = {}
    for path in _real_files(corpus, shared_dir):
        with TsFileReader(path) as reader:
            data, start = _metadata(reader)
            careful, scanned = _both_ways(reader, data, start)
            assert len(careful) == 10 and careful == scanned, path  # type: ignore[arg-type]
            for cut in range(len(data)):  # every truncation of TsFileMetadata
                careful, scanned = _both_ways(reader, data[:cut], start)
                assert careful == scanned, (path, cut)
                refused[careful[1]] = refused.get(careful[1], 0) + 1  # type: ignore[index]
            for start_node, end_node, device_level in _node_positions(reader):
                node = reader.read_bytes(start_node, min(end_node - start_node, 4096), "node")
                floor = reader.metadata.meta_offset
                for cut in (len(node), *range(0, len(node), max(1, len(node) // 40))):
                    careful, scanned = _parse_both(
                        reader, node[:cut], start_node, device_level, floor, start_node
                    )
                    assert careful == scanned, (path, start_node, cut)
    # The truncations meet many fields, each reported at the same offset by both parsers.
    assert len(refused) >= 8, refused


def test_reader_raises_the_scans_field_and_offset(
    corpus: dict[str, CorpusFile], tmp_path: Path
) -> None:
    path = corpus["table_small"].path
    data = path.read_bytes()
    with TsFileReader(path) as reader:
        start, end = reader.metadata.start, reader.metadata.end
    generator = random.Random("reader-errors")
    target = tmp_path / "changed.tsfile"
    checked = 0
    for _ in range(60):
        changed = bytearray(data)
        changed[generator.randrange(start, end)] ^= generator.randrange(1, 256)
        target.write_bytes(bytes(changed))
        try:
            expected = parse_metadata(bytes(changed[start:end]), start, 4, str(target))
        except FormatError as error:
            with pytest.raises(FormatError) as raised:
                TsFileReader(target)
            assert _described(raised.value) == _described(error)
            checked += 1
        else:
            with TsFileReader(target) as reader:
                assert _summary(reader.metadata) == _summary(expected)
    assert checked > 10


def _node_positions(reader: TsFileReader) -> list[tuple[int, int, bool]]:
    """(start, end, device_level) of every index node below the roots, after a full walk."""
    reader.series()
    return sorted(reader._node_cache)


def _parse_both(
    reader: TsFileReader, data: bytes, base: int, device_level: bool, floor: int, limit: int
) -> tuple[object, object]:
    kind = _key_kind(reader.version, device_level)
    return _node_both_ways(data, 0, kind, floor, limit, base)


def _key_kind(version: int, device_level: bool) -> int:
    if not device_level:
        return _native.TSFILE_KEY_MEASUREMENT
    return _native.TSFILE_KEY_DEVICE_V4 if version >= 4 else _native.TSFILE_KEY_DEVICE_V3


@pytest.mark.parametrize("name", ["tree_1000", "tree_wide", "table_null_tags", "tree_devices"])
def test_index_node_parser_agrees(corpus: dict[str, CorpusFile], name: str) -> None:
    generator = random.Random(f"node-{name}")
    refused = 0
    with TsFileReader(corpus[name].path) as reader:
        floor = reader.metadata.meta_offset
        for start, end, device_level in _node_positions(reader)[:40]:
            length = min(end - start, 4096)
            data = reader.read_bytes(start, length, "node")
            careful, scanned = _parse_both(reader, data, start, device_level, floor, start)
            assert isinstance(careful, tuple) and len(careful) == 5 and careful == scanned
            for trial in range(60):
                changed = bytearray(data)
                if trial % 5 == 0:
                    del changed[generator.randrange(len(changed)) :]
                else:
                    changed[generator.randrange(len(changed))] ^= generator.randrange(1, 256)
                careful, scanned = _parse_both(
                    reader, bytes(changed), start, device_level, floor, start
                )
                assert careful == scanned, (start, trial)
                refused += len(careful) == 4  # type: ignore[arg-type]
    assert refused > 0


# Fuzzing with an oracle: whatever the bytes, the C routines and the Python parser (itself checked
# against PyPI-written files) must accept the same inputs and return the same values. Random bytes
# alone are nearly always refused by both, so real metadata and nodes are mutated too.
def _reader(corpus: dict[str, CorpusFile]) -> TsFileReader:
    """A reader whose Python parser is run on bytes that are not its file's."""
    return TsFileReader(corpus["tree_1"].path)


def _parsed_both_ways(
    reader: TsFileReader, data: bytes, start: int, version: int
) -> tuple[object, object]:
    """(oracle, C scan) of TsFileMetadata bytes at file offset ``start``, as ``version``: the
    summary of each, or (message, field, offset, truncated) of its error."""
    try:
        careful: object = _summary(parse_metadata(data, start, version, reader.path))
    except FormatError as error:
        careful = _described(error)
    try:
        scanned = reader._scan_metadata(data, start, version)
    except FormatError as error:
        assert error.source == reader.path
        return careful, _described(error)
    return careful, _summary(scanned)  # roots the scan accepted must parse: no FormatError


def _mutate(data: bytes, edits: list[tuple[int, int]], cut: int, noise: bytes) -> bytes:
    changed = bytearray(data)
    for position, mask in edits:
        changed[position % len(changed)] ^= mask
    return bytes(changed[: len(changed) - cut % (len(changed) + 1)]) + noise


@settings(max_examples=400, deadline=None)
@given(
    data=st.binary(max_size=400),
    version=st.sampled_from([3, 4]),
    base=st.integers(0, 2**40),
    cut=st.integers(-3, 410),
)
def test_scan_of_random_bytes_agrees_with_the_parser(
    corpus: dict[str, CorpusFile], data: bytes, version: int, base: int, cut: int
) -> None:
    with _reader(corpus) as reader:
        for start, end in ((0, len(data)), (min(max(cut, 0), len(data)), len(data)), (0, cut)):
            if not 0 <= start <= end <= len(data):
                with pytest.raises(ValueError, match="bad arguments"):
                    _native.tsfile_scan_metadata(data, start, end, version, base)
                continue
            careful, scanned = _parsed_both_ways(reader, data[start:end], base, version)
            assert careful == scanned
            # A window of a larger buffer scans as the window alone, positions shifted.
            try:
                windowed = _native.tsfile_scan_metadata(data, start, end, version, base)
            except _native.TsFileScanError:
                assert len(scanned) == 4  # type: ignore[arg-type]
                continue
            alone = _native.tsfile_scan_metadata(data[start:end], 0, end - start, version, base)
            tables, schema_start, schema_count, meta_offset, *filter_fields, properties = windowed
            filter_start, bits_start, byte_length, bit_count, k, filter_end = filter_fields
            assert (
                [(name, at - start) for name, at in tables], schema_start - start, schema_count,
                meta_offset, filter_start - start, bits_start - start, byte_length, bit_count, k,
                filter_end - start, properties,
            ) == alone  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    name=st.sampled_from(NAMES),
    version=st.sampled_from([3, 4]),
    edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), max_size=3),
    cut=st.integers(0, 10**6),
    noise=st.binary(max_size=40),
)
def test_scan_agrees_with_the_parser_on_fuzzed_metadata(
    corpus: dict[str, CorpusFile],
    name: str,
    version: int,
    edits: list[tuple[int, int]],
    cut: int,
    noise: bytes,
) -> None:
    with TsFileReader(corpus[name].path) as reader:
        data, start = _metadata(reader)
        sample = _mutate(data, edits, cut if edits or noise else 0, noise)
        careful, scanned = _parsed_both_ways(reader, sample, start, version)
    assert careful == scanned
    if not edits and not noise and version == 4:
        assert len(careful) == 10  # type: ignore[arg-type]  # the file as written parses


def _node_both_ways(
    data: bytes, pos: int, kind: int, floor: int, limit: int, base: int = 0
) -> tuple[object, object]:
    """(oracle, C parse) of one index node at ``data[pos:]``, ``data[0]`` at file offset
    ``base``: (keys, offsets, end_offset, node_type, end) or (message, field, offset,
    truncated) of the error."""
    cursor = ByteCursor(data, base, "fuzz")
    cursor.pos = pos
    try:
        node = parse_node(cursor, kind, (floor, limit))
        careful: object = (node.keys, node.offsets, node.end_offset, node.node_type, cursor.pos)
    except FormatError as error:
        careful = _described(error)
    try:
        scanned: object = _native.tsfile_index_node(data, pos, kind, floor, limit, base)
    except _native.TsFileScanError as error:
        scanned = _described(error)
    return careful, scanned


@settings(max_examples=400, deadline=None)
@given(
    data=st.binary(max_size=400),
    pos=st.integers(-2, 410),
    kind=st.integers(-1, 3),
    floor=st.integers(-(2**63), 2**63 - 1),
    limit=st.integers(-(2**63), 2**63 - 1),
)
def test_index_node_of_random_bytes_agrees_with_the_parser(
    data: bytes, pos: int, kind: int, floor: int, limit: int
) -> None:
    for low, high in ((floor, limit), (HEAD_SIZE, 2**62)):
        if not (0 <= pos <= len(data) and 0 <= kind <= 2):
            with pytest.raises(ValueError, match="bad arguments"):
                _native.tsfile_index_node(data, pos, kind, low, high, 0)
            continue
        careful, scanned = _node_both_ways(data, pos, kind, low, high)
        assert careful == scanned
        if len(scanned) == 5:  # type: ignore[arg-type]
            keys, offsets, end_offset, _, end = scanned  # type: ignore[misc]
            assert len(keys) == len(offsets) and low <= end_offset <= high and end <= len(data)


@settings(max_examples=300, deadline=None)
@given(
    name=st.sampled_from(["tree_1000", "tree_wide", "table_null_tags", "tree_devices"]),
    node=st.integers(0, 40),
    edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), max_size=3),
    cut=st.integers(0, 10**6),
    shifts=st.tuples(st.integers(-300, 300), st.integers(-300, 300)),
)
def test_index_node_agrees_with_the_parser_on_fuzzed_nodes(
    corpus: dict[str, CorpusFile],
    name: str,
    node: int,
    edits: list[tuple[int, int]],
    cut: int,
    shifts: tuple[int, int],
) -> None:
    with TsFileReader(corpus[name].path) as reader:
        positions = _node_positions(reader)
        start, end, device_level = positions[node % len(positions)]
        data = reader.read_bytes(start, min(end - start, 4096), "node")
        floor = reader.metadata.meta_offset
    kind = _key_kind(reader.version, device_level)
    sample = _mutate(data, edits, cut if edits else 0, b"")
    careful, scanned = _node_both_ways(
        sample, 0, kind, floor + shifts[0], start + shifts[1], base=start
    )
    assert careful == scanned
    if not edits and shifts == (0, 0):
        assert len(careful) == 5  # type: ignore[arg-type]


def test_scan_validates_its_arguments() -> None:
    for arguments in (
        (b"", 1, 0, 4, 0),
        (b"", 0, 1, 4, 0),
        (b"\x00", 0, 1, 5, 0),
        (b"", 0, 0, 4, -1),
    ):
        with pytest.raises(ValueError, match="bad arguments"):
            _native.tsfile_scan_metadata(*arguments)
    with pytest.raises(ValueError, match="bad arguments"):
        _native.tsfile_index_node(b"\x00", 2, 0, 0, 0, 0)
    with pytest.raises(ValueError, match="index_node.entry_count"):
        # 2**31 - 1 entries claimed in 5 bytes: refused before anything is allocated.
        _native.tsfile_index_node(b"\xff\xff\xff\xff\x07", 0, 2, 0, 2**62, 0)


def test_scan_names_the_field_and_offset(corpus: dict[str, CorpusFile]) -> None:
    with TsFileReader(corpus["tree_1"].path) as reader:
        data, start = _metadata(reader)
        filter_start = reader.metadata.filter_start - start
    changed = data[: filter_start - 8] + struct.pack(">q", 2**63 - 1) + data[filter_start:]
    with pytest.raises(ValueError, match=f"meta_offset at offset {start + filter_start - 8}"):
        _native.tsfile_scan_metadata(changed, 0, len(changed), 4, start)


# ---------------------------------------------------------------------------- find's fast path
PROBES = ["root.sg.d1.s1", "root.sg.设备.温度", "root.sg.d1.s9", "t1.gz.null.s1", "root.h.d1.m1"]


def _verdict(data: bytes, tail_read: int, series: str) -> int:
    head, tail = data[:HEAD_SIZE], data[-tail_read:]
    probe = PathProbe(series)
    return _native.tsfile_tail_verdict(
        tail, head, len(data), probe.encodings[0], probe.signed_tails
    )


def _reader_verdict(path: Path, series: str) -> str:
    try:
        with TsFileReader(path) as reader:
            return reader.filter_verdict(series)
    except FormatError:
        return "error"


@pytest.mark.parametrize("name", NAMES)
def test_tail_verdict_is_the_readers(
    corpus: dict[str, CorpusFile], scratch_file: Path, name: str
) -> None:
    data = corpus[name].path.read_bytes()
    with TsFileReader(corpus[name].path) as reader:
        start, end = reader.metadata.start, reader.metadata.end
        paths = [*reader.series_paths()[:3], *PROBES]
        for series in paths:
            expected = 0 if reader.filter_verdict(series) == "absent" else 1
            assert _verdict(data, len(data), series) == expected
            # A tail that misses the start of TsFileMetadata: unsure, the reader must look.
            assert _verdict(data, len(data) - start - 1, series) == -1
    # Corrupted metadata: "absent" only where the reader opens the file and says so too.
    generator = random.Random(f"verdict-{name}")
    ruled_out = 0
    for trial in range(120):
        changed = bytearray(data)
        for _ in range(1 + trial % 3):
            changed[generator.randrange(start, end)] ^= generator.randrange(1, 256)
        scratch_file.write_bytes(bytes(changed))
        for series in paths[::2]:
            if _verdict(bytes(changed), 4096, series) == 0:
                ruled_out += 1
                assert _reader_verdict(scratch_file, series) == "absent"
    assert ruled_out > 0


_VARIANT_OF: dict[tuple[bool, ...], HashVariant] = {
    (True,): "signed-tail",
    (False,): "unsigned-tail",
    (True, False): "both",
}


def _python_verdict(
    reader: TsFileReader, tail: bytes, head: bytes, size: int, path: bytes, variants: tuple
) -> int:
    """The tail verdict the Python parser reaches: 0 absent, 1 maybe, -1 the tail cannot decide
    (an impossible envelope, TsFileMetadata beyond the tail, no filter, or malformed bytes)."""
    if not (HEAD_SIZE + TAIL_SIZE <= size <= 2**62 and TAIL_SIZE <= len(tail) <= size):
        return -1
    if len(head) < HEAD_SIZE:
        return -1
    tail_start = size - len(tail)
    try:
        version, start, end = check_envelope(head, tail, size, "fuzz")
        if start < tail_start:
            return -1
        metadata = parse_metadata(tail[start - tail_start : end - tail_start], start, version)
    except FormatError:
        return -1
    if metadata.bloom_filter is None:
        return -1
    return int(PathProbe(path, variant=_VARIANT_OF[variants]).might_be_in(metadata.bloom_filter))


@settings(max_examples=300, deadline=None)
@given(
    tail=st.binary(max_size=200),
    head=st.binary(max_size=10),
    size=st.integers(-(2**63), 2**63 - 1),
    path=st.binary(max_size=40),
    variants=st.sampled_from(list(_VARIANT_OF)),
)
def test_tail_verdict_of_random_bytes_is_the_parsers(
    corpus: dict[str, CorpusFile],
    tail: bytes,
    head: bytes,
    size: int,
    path: bytes,
    variants: tuple[bool, ...],
) -> None:
    with _reader(corpus) as reader:
        for candidate_tail, candidate_size in ((tail, size), (b"TsFile\x04" + tail, len(tail) + 7)):
            verdict = _native.tsfile_tail_verdict(
                candidate_tail, head, candidate_size, path, variants
            )
            expected = _python_verdict(reader, candidate_tail, head, candidate_size, path, variants)
            assert verdict == expected


@settings(max_examples=300, deadline=None)
@given(
    name=st.sampled_from(NAMES),
    edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), max_size=3),
    tail_read=st.sampled_from([None, 4096, 600, 64]),
    probe=st.sampled_from(PROBES),
    variants=st.sampled_from(list(_VARIANT_OF)),
)
def test_tail_verdict_of_fuzzed_files_is_the_parsers(
    corpus: dict[str, CorpusFile],
    name: str,
    edits: list[tuple[int, int]],
    tail_read: int | None,
    probe: str,
    variants: tuple[bool, ...],
) -> None:
    data = corpus[name].path.read_bytes()
    with TsFileReader(corpus[name].path) as reader:
        start = reader.metadata.start
        changed = bytearray(data)
        for position, mask in edits:  # inside TsFileMetadata and the tail
            changed[start + position % (len(data) - start)] ^= mask
        tail = bytes(changed[-(tail_read or len(data)) :])
        head = bytes(changed[:HEAD_SIZE])
        encoded = probe.encode()
        verdict = _native.tsfile_tail_verdict(tail, head, len(data), encoded, variants)
        assert verdict == _python_verdict(reader, tail, head, len(data), encoded, variants)
    if not edits and (tail_read is None or tail_read >= len(data) - start):
        assert verdict in (0, 1)  # the file as written: the tail decides


def test_tail_verdict_of_a_truncated_tail(corpus: dict[str, CorpusFile]) -> None:
    data = corpus["table_small"].path.read_bytes()
    decided = set()
    with _reader(corpus) as reader:
        for cut in range(len(data)):
            tail = data[cut:]  # the last bytes of a file of len(data) bytes
            for series in PROBES:
                probe = PathProbe(series)
                arguments = (tail, data[:HEAD_SIZE], len(data), probe.encodings[0])
                verdict = _native.tsfile_tail_verdict(*arguments, probe.signed_tails)
                assert verdict == _python_verdict(reader, *arguments, probe.signed_tails)
                decided.add(verdict)
    assert decided == {-1, 0, 1}  # too short a tail defers; a long enough one decides
    with pytest.raises(ValueError, match="one or two variants"):
        _native.tsfile_tail_verdict(data, data, len(data), b"x", ())


def _reader_answer(path: Path, series: str) -> tuple[object, ...]:
    """What find answered before it had a filter-only path: a TsFileReader lookup per file."""
    try:
        with TsFileReader(path) as reader:
            result = reader.lookup(series)
        return (result.bloom, result.present, None)
    except FormatError as error:
        return (None, False, str(error))


@pytest.fixture
def mixed_archive(corpus: dict[str, CorpusFile], tmp_path: Path) -> list[Path]:
    """Corpus files plus corrupted copies (flipped metadata bytes, a bad head, a cut tail)."""
    files = []
    for name in NAMES:
        target = tmp_path / f"{name}.tsfile"
        shutil.copyfile(corpus[name].path, target)
        files.append(target)
    generator = random.Random("archive")
    for index in range(60):
        source = corpus[NAMES[index % len(NAMES)]].path
        with TsFileReader(source) as reader:
            start, end = reader.metadata.start, reader.metadata.end
        data = bytearray(source.read_bytes())
        if index % 10 == 0:
            data[0] ^= 0x20
        elif index % 10 == 1:
            del data[generator.randrange(start, end) : end]
        else:
            for _ in range(1 + index % 3):
                data[generator.randrange(start, end)] ^= generator.randrange(1, 256)
        target = tmp_path / f"corrupt-{index}.tsfile"
        target.write_bytes(bytes(data))
        files.append(target)
    return files


@pytest.mark.parametrize("tail_read", [find.FILTER_TAIL_READ, 64])
def test_find_answers_as_a_reader_lookup(
    corpus: dict[str, CorpusFile],
    mixed_archive: list[Path],
    monkeypatch: pytest.MonkeyPatch,
    tail_read: int,
) -> None:
    # 64 bytes: no metadata fits in the tail read, every file goes to the reader.
    monkeypatch.setattr(find, "FILTER_TAIL_READ", tail_read)
    with TsFileReader(corpus["table_small"].path) as reader:
        table_paths = reader.series_paths()[:4]
    paths = [
        "root.sg.d1.s1", "root.sg.设备.温度", "root.sg.设备0.s1", "root.wide.d1.m7",
        "root.ty.d.m_text", "root.nowhere.d.s1", "root.sg.d1.s9", *table_paths,
    ]  # fmt: skip
    corpus_names = {f"{name}.tsfile" for name in NAMES}
    skipped = 0
    for series in paths:
        results = list(find_series(series, mixed_archive))
        assert [result.file for result in results] == [str(file) for file in mixed_archive]
        for file, result in zip(mixed_archive, results, strict=True):
            assert (result.bloom, result.present, result.error) == _reader_answer(file, series)
            skipped += result.bloom == "absent"
            if result.bloom == "absent" and tail_read > 64 and file.name in corpus_names:
                # A sound file ruled out by its filter costs the tail read and the head.
                assert result.bytes_read <= tail_read + HEAD_SIZE
    assert skipped > 100


def test_find_in_processes_answers_the_same(mixed_archive: list[Path]) -> None:
    for series in ("root.sg.设备.温度", "root.sg.d1.s1", "root.nowhere.d.s1"):
        alone = list(find_series(series, mixed_archive))
        assert list(find_series(series, iter(mixed_archive), jobs=3)) == alone
    assert list(find_series("root.sg.d1.s1", [], jobs=2)) == []


def test_find_cli_jobs(
    mixed_archive: list[Path], run_cli: Callable[..., tuple[int, str, str]]
) -> None:
    directory = str(mixed_archive[0].parent)
    alone = run_cli("find", "root.sg.设备.温度", directory, "--json")
    assert run_cli("find", "root.sg.设备.温度", directory, "--json", "--jobs", "2") == alone
    status, _, _ = alone
    assert status == 2  # the corrupt copies are reported
    with pytest.raises(SystemExit):
        run_cli("find", "root.sg.d1.s1", directory, "--jobs", "0")
