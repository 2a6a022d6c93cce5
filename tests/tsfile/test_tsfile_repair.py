"""repair: only the filter changes, atomically, and PyPI tsfile then reads every row back."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from tsfile_corpus import CorpusFile, pypi_row_counts

from bloomskip import FormatError
from bloomskip.tsfile import (
    TsFileReader,
    analyze_filter,
    hash32,
    repair_filter,
    series_path,
    writer_sizing,
)


def _layout(path: Path) -> tuple[int, bytes, bytes]:
    """(TsFileMetadata start, bytes before the filter in TsFileMetadata, properties bytes)."""
    with TsFileReader(path) as reader:
        metadata = reader.metadata
        data = path.read_bytes()
        return (
            metadata.start,
            data[metadata.start : metadata.filter_start],
            data[metadata.filter_end : metadata.end],
        )


@pytest.mark.parametrize("name", ["tree_10_cjk", "tree_1000", "table_small", "table_10k"])
def test_repair_both_keeps_everything_else(
    corpus: dict[str, CorpusFile], copy_of: Callable[[str], Path], name: str
) -> None:
    original = corpus[name].path
    target = copy_of(name)
    result = repair_filter(target)
    assert result.variant == "both"
    start, head, properties = _layout(original)
    new_start, new_head, new_properties = _layout(target)
    assert new_start == start
    assert target.read_bytes()[:start] == original.read_bytes()[:start]
    assert (new_head, new_properties) == (head, properties)
    assert target.read_bytes()[-6:] == b"TsFile"
    with TsFileReader(target) as reader:
        assert {(s.device, s.measurement) for s in reader.series()} == corpus[name].series
        analysis = analyze_filter(reader)
        stored = reader.bloom_filter
    assert analysis.hash_variant == "both"
    assert not analysis.false_negatives
    # Sized by the writer formula, a path counted twice when its two variants hash differently.
    paths = analysis_paths(corpus[name])
    differing = sum(
        hash32(p.encode(), 5) != hash32(p.encode(), 5, signed_tail=False) for p in paths
    )
    assert differing > 0
    expected = writer_sizing(len(paths) + differing)
    assert (stored.bit_count, stored.hash_function_count) == expected
    assert (result.bit_count, result.hash_function_count) == expected
    assert result.series_count == len(corpus[name].series)


def analysis_paths(corpus_file: CorpusFile) -> list[str]:
    return [series_path(device, name) for device, name in corpus_file.series]


@pytest.mark.parametrize("name", ["tree_10_cjk", "tree_1000", "table_small"])
def test_pypi_reads_every_row_after_repair(
    corpus: dict[str, CorpusFile], copy_of: Callable[[str], Path], name: str
) -> None:
    corpus_file = corpus[name]
    expected = pypi_row_counts(corpus_file.path, corpus_file)
    assert expected and all(count == corpus_file.rows_per_series for count in expected.values())
    target = copy_of(name)
    repair_filter(target, variant="both")
    assert pypi_row_counts(target, corpus_file) == expected


def test_spec_filter_hides_non_ascii_series_from_pypi(
    corpus: dict[str, CorpusFile], copy_of: Callable[[str], Path]
) -> None:
    # research §7, reproduced: PyPI tsfile's reader checks the filter with the unsigned tail.
    corpus_file = corpus["tree_10_cjk"]
    target = copy_of("tree_10_cjk")
    repair_filter(target, variant="signed-tail")
    counts = pypi_row_counts(target, corpus_file)
    assert counts["root.sg.设备.温度"] == 0
    assert counts["root.sg.d1.s1"] == corpus_file.rows_per_series
    with TsFileReader(target) as reader:
        analysis = analyze_filter(reader)
    assert analysis.hash_variant == "signed-tail"
    assert analysis.exact_match["signed-tail"]
    assert "root.sg.设备.温度" in analysis.rejected["unsigned-tail"]
    # bloomskip's own lookup (variant "both") still finds it.
    with TsFileReader(target) as reader:
        assert reader.lookup("root.sg.设备.温度").present
    repair_filter(target)
    assert pypi_row_counts(target, corpus_file)["root.sg.设备.温度"] == corpus_file.rows_per_series


def test_repair_sizing_and_error_rate(copy_of: Callable[[str], Path]) -> None:
    target = copy_of("table_ascii")  # ASCII only: both variants coincide, no double count
    result = repair_filter(target, variant="unsigned-tail", error_rate=0.01)
    assert (result.bit_count, result.hash_function_count) == writer_sizing(60, 0.01)
    result = repair_filter(target, variant="both")
    assert (result.bit_count, result.hash_function_count) == writer_sizing(60)


@pytest.mark.parametrize(
    ("name", "failing", "message"),
    [("tree_10_cjk", "replace", "simulated crash"), ("table_small", "fsync", "disk full")],
)
def test_crash_leaves_the_original(
    copy_of: Callable[[str], Path],
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    failing: str,
    message: str,
) -> None:
    # A crash before the rename (os.replace) or while writing (os.fsync).
    target = copy_of(name)
    before = target.read_bytes()

    def crash(*_: object) -> None:
        raise OSError(message)

    monkeypatch.setattr(os, failing, crash)
    with pytest.raises(OSError, match=message):
        repair_filter(target)
    assert target.read_bytes() == before
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name]


def test_corrupt_file_is_not_repaired(copy_of: Callable[[str], Path]) -> None:
    target = copy_of("tree_1")
    data = bytearray(target.read_bytes())
    data[-10:-6] = (2**31 - 1).to_bytes(4, "big")
    target.write_bytes(bytes(data))
    with pytest.raises(FormatError):
        repair_filter(target)
    assert target.read_bytes() == bytes(data)


def test_repair_keeps_the_file_mode(copy_of: Callable[[str], Path]) -> None:
    target = copy_of("tree_1")
    target.chmod(0o640)
    repair_filter(target)
    assert target.stat().st_mode & 0o777 == 0o640


def test_repair_in_a_java_charset_still_serves_pypi(
    corpus: dict[str, CorpusFile], copy_of: Callable[[str], Path]
) -> None:
    # Java hashes its platform charset, the C++ reader always UTF-8: a "both" repair for a GBK
    # Java site must keep every series visible to PyPI tsfile too.
    corpus_file = corpus["tree_10_cjk"]
    expected = pypi_row_counts(corpus_file.path, corpus_file)
    target = copy_of("tree_10_cjk")
    result = repair_filter(target, charset="gbk")
    assert pypi_row_counts(target, corpus_file) == expected
    paths = analysis_paths(corpus_file)
    with TsFileReader(target, charset="gbk") as reader:
        assert not analyze_filter(reader).false_negatives
        stored = reader.bloom_filter
    # Java's GBK bytes with the signed tail are in, and sizing counted the differing paths twice.
    assert stored is not None
    assert stored.contains_with([p.encode("gbk") for p in paths], signed_tail=True).all()
    non_ascii = sum(not p.isascii() for p in paths)
    assert (result.bit_count, result.hash_function_count) == writer_sizing(len(paths) + non_ascii)


@pytest.mark.parametrize("relative", [False, True])
def test_repair_writes_through_a_symlink(
    corpus: dict[str, CorpusFile], tmp_path: Path, relative: bool
) -> None:
    # The link stays a link and the file it names is repaired (before: the link was replaced by
    # a repaired regular file and the real file kept the filter that hides series from Java).
    store = tmp_path / "store"
    store.mkdir()
    real = store / "real.tsfile"
    shutil.copyfile(corpus["tree_10_cjk"].path, real)
    link = tmp_path / "link.tsfile"
    link.symlink_to("store/real.tsfile" if relative else real)
    result = repair_filter(link)
    assert (result.variant, result.file, Path(result.target)) == ("both", str(link), real.resolve())
    assert link.is_symlink() and link.resolve() == real.resolve()
    with TsFileReader(real) as reader:
        assert analyze_filter(reader).hash_variant == "both"
    assert sorted(p.name for p in store.iterdir()) == ["real.tsfile"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.tsfile", "store"]
    assert pypi_row_counts(real, corpus["tree_10_cjk"]) == pypi_row_counts(
        corpus["tree_10_cjk"].path, corpus["tree_10_cjk"]
    )


def test_repair_cli_help_says_links_are_written_through(
    run_cli: Callable[..., tuple[int, str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        run_cli("repair", "--help")
    assert "symbolic link is written through" in " ".join(capsys.readouterr().out.split())
