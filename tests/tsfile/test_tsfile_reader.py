"""Reading files written by PyPI tsfile: series, filters, lookups, hash-variant detection."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import tsfile as pypi_tsfile
from tsfile_corpus import CorpusFile, pypi_series, write_table

from bloomskip.tsfile import (
    BloomFilter,
    TsFileReader,
    analyze_filter,
    series_path,
    split_tree_device,
    table_series_path,
    variants_differ,
    writer_sizing,
)
from bloomskip.tsfile import reader as reader_module
from bloomskip.tsfile.reader import DEFAULT_TAIL_READ, HEAD_SIZE, LookupResult, NodeType

ALL_FILES = [
    "tree_1", "tree_10_cjk", "tree_1000", "tree_wide", "tree_multiflush", "tree_devices",
    "tree_types", "tree_same_measurement", "tree_66k", "table_null_tags", "table_small",
    "table_ascii", "table_10k",
]  # fmt: skip


def _paths(corpus_file: CorpusFile) -> list[str]:
    return sorted(series_path(device, name) for device, name in corpus_file.series)


@pytest.mark.parametrize("name", ALL_FILES)
def test_series_and_filter_match_the_writer(corpus: dict[str, CorpusFile], name: str) -> None:
    corpus_file = corpus[name]
    with TsFileReader(corpus_file.path) as reader:
        assert reader.version == 4
        listed = {(series.device, series.measurement) for series in reader.series()}
        assert listed == corpus_file.series
        stored = reader.bloom_filter
        assert stored is not None
        paths = reader.series_paths()
    # The filter recomputed from the written series with the C++ (unsigned-tail) hash equals
    # the file's bytes; the spec (signed-tail) hash does so only when no path's tails differ.
    unsigned = BloomFilter(stored.bit_count, stored.hash_function_count, variant="unsigned-tail")
    unsigned.update(paths)
    assert unsigned.serialized_bits() == stored.serialized_bits()
    signed = BloomFilter(stored.bit_count, stored.hash_function_count, variant="signed-tail")
    signed.update(paths)
    differ = bool(variants_differ(paths).any())
    assert (signed.serialized_bits() == stored.serialized_bits()) == (not differ)
    assert differ == (
        name
        in {"tree_10_cjk", "tree_1000", "tree_wide", "table_small", "table_10k", "table_null_tags"}
    )


@pytest.mark.parametrize(
    ("name", "cpp_path_count"),
    [
        ("tree_1", 1),
        ("tree_1000", 1000),  # s1, 温度 alternate along the chunk list
        ("tree_multiflush", 300),  # the C++ writer counts chunks: 100 series x 3 flushes
        ("tree_same_measurement", 1),  # ... and changes of measurement name only
        ("table_10k", 9999),  # 1000 x (time "" + 9 fields), the first "" is not a change
    ],
)
def test_writer_sizing_of_real_files(
    corpus: dict[str, CorpusFile], name: str, cpp_path_count: int
) -> None:
    with TsFileReader(corpus[name].path) as reader:
        stored = reader.bloom_filter
        assert (stored.bit_count, stored.hash_function_count) == writer_sizing(cpp_path_count)


def test_tree_device_split_matches_the_writer(corpus: dict[str, CorpusFile]) -> None:
    reader = pypi_tsfile.TsFileReader(str(corpus["tree_devices"].path))
    try:
        devices = reader.get_all_devices()
    finally:
        reader.close()
    assert len(devices) == 6
    for device in devices:
        assert split_tree_device(device.path) == tuple(device.segments)
        assert split_tree_device(device.path)[0] == device.table_name


def test_table_paths_match_the_writer(corpus: dict[str, CorpusFile]) -> None:
    paths = set(_paths(corpus["table_small"]))
    assert table_series_path("T1", ["gz", None], "S1") in paths
    assert table_series_path("t1", ["bj", "设备"], "") in paths  # the aligned time column
    assert table_series_path("t1", [None, "null"], "温度") in paths
    assert "plant.l3.speed" in set(_paths(corpus["table_ascii"]))


@pytest.mark.parametrize("name", ALL_FILES)
def test_every_series_is_found(corpus: dict[str, CorpusFile], name: str) -> None:
    # Every series; one in 20 of the 66,000-series file (the lookups are the same walk).
    step = 20 if name == "tree_66k" else 1
    with TsFileReader(corpus[name].path) as reader:
        for path in _paths(corpus[name])[::step]:
            result = reader.lookup(path)
            assert (result.bloom, result.present) == ("maybe", True), path
        for device, measurement in sorted(corpus[name].series, key=repr)[:50]:
            assert reader.lookup_series(device, measurement).present


@pytest.mark.parametrize(
    ("name", "absent_template", "forms"),
    [
        ("tree_1000", "root.sg.设备{i}.湿度", 1),
        ("tree_1000", "root.sg.d{i}.s2", 1),
        ("tree_wide", "root.wide.d1.q{i}", 1),
        # One tag: "big.x.g1" is also looked up as "big.null.x.g1" (no tag, column "x.g1").
        ("table_10k", "big.设备{i:04d}.g1", 2),
        ("table_ascii", "plant.l{i}.pressure", 2),
    ],
)
def test_absent_series_are_rejected_at_the_expected_rate(
    corpus: dict[str, CorpusFile], name: str, absent_template: str, forms: int
) -> None:
    absent = [absent_template.format(i=i) for i in range(3000)]
    with TsFileReader(corpus[name].path) as reader:
        stored = reader.bloom_filter
        passed = stored.contains_batch(absent)
        results = [reader.lookup(path) for path in absent]
    assert not any(result.present for result in results)
    maybe = np.array([result.bloom == "maybe" for result in results])
    assert maybe[passed].all()  # never "absent" where the filter holds the path
    if forms == 1:
        assert maybe.tolist() == passed.tolist()
    # Under "both" a path passes if either variant's bits are all set: at most twice fill^k.
    expected = stored.estimated_fpr
    sigma = math.sqrt(2 * expected / len(absent))
    assert passed.mean() <= 2 * expected + 5 * sigma + 2e-3
    assert passed.mean() >= expected - 5 * sigma - 2e-3
    assert maybe.mean() <= forms * (2 * expected + 5 * sigma) + 2e-3


def test_dotted_and_null_tags(corpus: dict[str, CorpusFile]) -> None:
    with TsFileReader(corpus["table_small"].path) as reader:
        assert reader.index_contains_path("t1.sh.d.x.s1")
        assert reader.index_contains(("t1", "sh", "d.x"), "s1")
        assert not reader.index_contains(("t1", "sh", "d", "x"), "s1")
        assert reader.index_contains(("t1", "gz", None), "s1")
        assert not reader.index_contains(("t1", "gz", "null"), "s1")
        assert reader.index_contains(("t1", None, "null"), "温度")
        assert reader.index_contains_path("t1.null.null.温度")
        assert reader.index_contains_path("t1.bj.设备.")
        # Tags (gz, null): the C++ writer keeps the null (t1.gz.null), Java drops it (t1.gz).
        assert reader.index_contains_path("t1.gz.s1")
        assert (
            reader.lookup("t1.gz.s1").present and reader.lookup_series(("t1", "gz"), "s1").present
        )
        assert not reader.index_contains_path("t1.gz.s9")
        assert not reader.index_contains_path("t1.bj.设备.s9")
        assert not reader.index_contains_path("t2.bj.设备.s1")


def test_index_shapes_are_exercised(corpus: dict[str, CorpusFile]) -> None:
    with TsFileReader(corpus["tree_1000"].path) as reader:
        assert reader.metadata.table_roots["root.sg"].node_type == NodeType.INTERNAL_DEVICE
    with TsFileReader(corpus["tree_66k"].path) as reader:
        root = reader.metadata.table_roots["root.h"]
        measurement_root = reader._child(root, 0, False, 1)
        assert measurement_root.node_type == NodeType.INTERNAL_MEASUREMENT
        assert reader.lookup("root.h.d1.m65999").present
        assert not reader.index_contains(("root.h", "d1"), "m66000")
    with TsFileReader(corpus["tree_wide"].path) as reader:
        root = reader.metadata.table_roots["root.wide"]
        measurement_root = reader._child(root, 0, False, 1)
        # 300 measurements: one leaf entry per 256 TimeseriesMetadata, keyed by the first name.
        assert measurement_root.node_type == NodeType.LEAF_MEASUREMENT
        assert measurement_root.keys == ("m0", "m6")


def test_lookup_reads_kilobytes(corpus: dict[str, CorpusFile]) -> None:
    path = corpus["table_10k"].path
    assert path.stat().st_size > 900_000
    with TsFileReader(path) as reader:
        assert reader.lookup("big.设备0500.f3").present
        assert reader.bytes_read < 48 * 1024
    with TsFileReader(path) as reader:
        absent = next(
            p for p in (f"big.设备{i}.zz" for i in range(100)) if reader.lookup(p).bloom == "absent"
        )
        assert reader.lookup(absent).present is False
        # The filter ruled it out: only the head and the tail read at open were touched.
        assert reader.bytes_read <= DEFAULT_TAIL_READ + HEAD_SIZE


@pytest.mark.parametrize(
    ("name", "variant"),
    [
        ("tree_1", "both"),
        ("tree_10_cjk", "unsigned-tail"),
        ("table_small", "unsigned-tail"),
        ("table_ascii", "both"),
        ("table_10k", "unsigned-tail"),
    ],
)
def test_variant_detection(corpus: dict[str, CorpusFile], name: str, variant: str) -> None:
    with TsFileReader(corpus[name].path) as reader:
        analysis = analyze_filter(reader)
    assert analysis.hash_variant == variant
    assert analysis.exact_match["unsigned-tail"]
    assert not analysis.rejected["unsigned-tail"]
    if variant == "unsigned-tail":
        # research §0/§7: Java readers would reject these existing series.
        assert analysis.rejected["signed-tail"]
        assert all(not path.isascii() for path in analysis.rejected["signed-tail"])
        assert not analysis.exact_match["signed-tail"]


def test_cjk_series_named_in_the_research_are_hidden_from_java(
    corpus: dict[str, CorpusFile],
) -> None:
    with TsFileReader(corpus["tree_10_cjk"].path) as reader:
        analysis = analyze_filter(reader)
        assert "root.sg.设备.温度" in analysis.rejected["signed-tail"]
        stored = reader.bloom_filter
        # The reader's default ("both") never rejects it; a signed-only check would.
        assert reader.lookup("root.sg.设备.温度").present
        assert not stored.contains_with(["root.sg.设备.温度"], signed_tail=True)[0]
    assert np.all(stored.contains_with(reader.series_paths(), signed_tail=False))


@pytest.mark.parametrize("read_size", [1, 7, 64, 1000])
@pytest.mark.parametrize("name", ["tree_1000", "table_null_tags", "tree_wide"])
def test_index_nodes_read_by_any_prefix(
    corpus: dict[str, CorpusFile], monkeypatch: pytest.MonkeyPatch, name: str, read_size: int
) -> None:
    # Nodes are read by prefix and widened when cut short, wherever the cut falls.
    monkeypatch.setattr(reader_module, "NODE_READ_SIZE", read_size)
    with TsFileReader(corpus[name].path) as reader:
        assert {(s.device, s.measurement) for s in reader.series()} == corpus[name].series
    with TsFileReader(corpus[name].path) as reader:
        for device, measurement in sorted(corpus[name].series, key=repr)[::37]:
            assert reader.index_contains(device, measurement)


def test_null_tags_in_internal_device_nodes(corpus: dict[str, CorpusFile]) -> None:
    with TsFileReader(corpus["table_null_tags"].path) as reader:
        root = reader.metadata.table_roots["tn"]
        assert root.node_type == NodeType.INTERNAL_DEVICE
        assert any(None in key for key in root.keys)
        assert reader.lookup("tn.null.null.s1").present
        assert reader.index_contains(("tn", None, None), "s1")
        assert not reader.index_contains(("tn", "null", None), "s1")


def test_null_tag_forms_past_the_interpretation_limit(tmp_path: Path) -> None:
    # A tag with many dots splits into more (device, measurement) readings than are walked one by
    # one; the series list answers then, in both null-tag forms, and the filter cannot rule out.
    path = tmp_path / "dotted.tsfile"
    dotted = ".".join(f"n{i}" for i in range(25))
    write_table(path, "t9", ["a", "b"], ["s1"], [(dotted, None)])
    series = {(tuple(device), name) for device, name in pypi_series(path, "table")}
    assert (("t9", dotted, None), "s1") in series  # the C++ writer keeps the trailing null
    with TsFileReader(path) as reader:
        assert reader._other_forms(f"t9.{dotted}.s1") is None  # past the limit
        for asked in (f"t9.{dotted}.null.s1", f"t9.{dotted}.s1"):
            assert reader.lookup(asked) == LookupResult(asked, "maybe", True)
        assert not reader.lookup(f"t9.{dotted}.s2").present
