"""Series paths and their inverse: every (device, measurement) a path text can come from."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bloomskip.tsfile import (
    BloomFilter,
    PathProbe,
    device_path,
    encode_paths,
    null_tag_forms,
    series_path,
    split_tree_device,
    split_tree_nodes,
)
from bloomskip.tsfile.reader import _table_splits, _tree_splits

segment = st.one_of(st.none(), st.sampled_from(["null", "a.b", "设备", "", "x", "null.y"]))
name = st.sampled_from(["s1", "温度", "", "m.n", "null"])


@settings(max_examples=200, deadline=None)
@given(tags=st.lists(segment, min_size=0, max_size=4), measurement=name, extra=st.integers(0, 2))
def test_table_path_interpretations_include_the_truth(
    tags: list[str | None], measurement: str, extra: int
) -> None:
    # The schema may have more tags than the device keeps (Java drops trailing null tags).
    device = ("t1", *tags)
    path = series_path(device, measurement)
    assert path.startswith("t1.")
    candidates = set(_table_splits("t1", path[3:], len(tags) + extra))
    assert (device, measurement) in candidates
    assert all(series_path(d, m) == path for d, m in candidates)


@settings(max_examples=200, deadline=None)
@given(
    nodes=st.lists(
        st.sampled_from(["root", "sg", "d1", "设备", "`a.b`", "x"]), min_size=1, max_size=6
    ),
    measurement=st.sampled_from(["s1", "温度"]),
)
def test_tree_path_interpretations_include_the_truth(nodes: list[str], measurement: str) -> None:
    device_string = ".".join(nodes)
    device = split_tree_device(device_string)
    assert device_path(device) == device_string
    path = series_path(device, measurement)
    candidates = set(_tree_splits(path, device[0], split_tree_device))
    assert (device, measurement) in candidates
    assert all(series_path(d, m) == path for d, m in candidates)


def test_split_rules() -> None:
    assert split_tree_device("root") == ("root",)
    assert split_tree_device("root.x") == ("root", "x")
    assert split_tree_device("root.a.b.c") == ("root.a.b", "c")
    assert split_tree_device("x.y.z.w.v.u") == ("x.y.z", "w", "v", "u")
    assert split_tree_nodes("root.sg.`a.b`.c") == ["root", "sg", "`a.b`", "c"]


def test_charset_is_a_parameter() -> None:
    paths = ["root.sg.é.s1", "root.sg.d1.s1"]
    assert encode_paths(paths, "latin-1")[0] == b"root.sg.\xe9.s1"
    latin = BloomFilter.for_paths(paths, charset="latin-1")
    utf8 = BloomFilter.for_paths(paths)
    assert latin.contains_batch(paths).all() and utf8.contains_batch(paths).all()
    assert latin.positions("root.sg.é.s1") != utf8.positions("root.sg.é.s1")
    assert "root.sg.é.s1".encode("latin-1") in latin
    # Java's String.getBytes(charset) replaces what the charset cannot encode by "?".
    assert encode_paths(["设备", "a\udcff"], "latin-1") == [b"??", b"a?"]


def test_probe_in_another_charset_still_finds_utf8_written_paths() -> None:
    # The C++ writer (PyPI tsfile) hashes UTF-8 whatever charset Java readers use.
    paths = [f"root.sg.设备{i}.温度é" for i in range(50)]
    for variant in ("signed-tail", "unsigned-tail"):
        utf8 = BloomFilter.for_paths(paths, variant=variant)  # type: ignore[arg-type]
        latin = BloomFilter.for_paths(paths, variant=variant, charset="latin-1")  # type: ignore[arg-type]
        for charset in ("latin-1", "gbk", "utf-8"):
            probes = [PathProbe(path, charset=charset) for path in paths]
            assert all(probe.might_be_in(utf8) for probe in probes)
        assert all(PathProbe(path, charset="latin-1").might_be_in(latin) for path in paths)


def test_path_probe_matches_the_filter() -> None:
    paths = [f"root.sg.设备{i}.温度" for i in range(200)]
    for variant in ("signed-tail", "unsigned-tail", "both"):
        built = BloomFilter.for_paths(paths[:100], variant=variant)  # type: ignore[arg-type]
        other_shape = BloomFilter.for_paths(paths[:150], variant=variant)  # type: ignore[arg-type]
        for filter_ in (built, other_shape, built):
            expected = filter_.contains_batch(paths)
            for probe_variant in ("both", variant):
                probes = [PathProbe(p, variant=probe_variant) for p in paths]  # type: ignore[arg-type]
                got = [probe.might_be_in(filter_) for probe in probes]
                if probe_variant == variant or variant == "both":
                    assert got == expected.tolist()
                assert all(got[:100])


def test_public_names_resolve() -> None:
    import bloomskip.tsfile as package

    for name in package.__all__:
        assert getattr(package, name) is not None
    assert set(package.__all__) <= set(dir(package))
    with pytest.raises(AttributeError):
        _ = package.no_such_name


@settings(max_examples=300, deadline=None)
@given(tags=st.lists(st.one_of(st.none(), st.sampled_from(["bj", "null", "d.x", ""])), max_size=4))
def test_null_tag_forms_reach_each_writers_device(tags: list[str | None]) -> None:
    # The C++ writer stores (table, *tags); Java drops the trailing null tags (research, and the
    # Java-written files). Whichever form a lookup is given, both stored forms are tried.
    cpp_stored = ("t1", *tags)
    java_stored = cpp_stored
    while len(java_stored) > 1 and java_stored[-1] is None:
        java_stored = java_stored[:-1]
    for asked in (cpp_stored, java_stored):
        forms = null_tag_forms(asked, len(tags))
        assert forms[0] == asked
        assert cpp_stored in forms and java_stored in forms
        assert len(forms) == len(set(forms)) <= 2
    # A device with more segments than the schema has tags is no table-model device id.
    assert null_tag_forms(("t1", *tags, "x"), len(tags)) == (("t1", *tags, "x"),)
