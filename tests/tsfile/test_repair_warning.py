"""``tsfile repair --variant X`` warns, before writing, when the new filter hides series from a
reader (issue 17), and PyPI ``tsfile``'s own reader confirms the warned series are the ones it
then misses; a variant every reader finds (``both``, or ASCII-only paths) warns about nothing."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from tsfile_corpus import CorpusFile, pypi_row_counts, pypi_series, write_tree

from bloomskip.tsfile import TsFileReader, analyze_filter, repair_filter
from bloomskip.tsfile.repair import hidden_by_filter

Run = Callable[..., tuple[int, str, str]]
JAVA_TREE = "java_tree_cjk.tsfile"
# Tails (the last len % 16 bytes) of 温度, 湿度 and 状态 here hold bytes >= 0x80; of s1, ab not.
DEVICES = {"root.sg.d1": ["s1", "s2"], "root.sg.设备": ["s1", "温度", "湿度", "状态", "ab"]}
CJK_HIDDEN = ["root.sg.设备.温度", "root.sg.设备.湿度", "root.sg.设备.状态"]


def _cpp_written(tmp_path: Path, devices: dict[str, list[str]]) -> CorpusFile:
    """A tree-model file written by PyPI ``tsfile`` (the C++ writer: unsigned tail)."""
    path = tmp_path / "cpp.tsfile"
    write_tree(path, devices, rows=3)
    return CorpusFile(path.stem, path, "tree", pypi_series(path, "tree"), 3)


def _warnings(err: str) -> list[str]:
    lines = err.strip().splitlines()
    assert all(line.startswith("bloomskip: warning: ") for line in lines), err
    return lines


def _missed_by_pypi(corpus_file: CorpusFile) -> list[str]:
    return sorted(path for path, rows in pypi_row_counts(corpus_file.path, corpus_file).items()
                  if rows == 0)  # fmt: skip


def test_signed_tail_on_a_cpp_file_warns_of_what_pypi_then_misses(
    tmp_path: Path, run_cli: Run
) -> None:
    # Before: the repair printed its summary only, and PyPI's query_timeseries then returned
    # no rows for three series.
    corpus_file = _cpp_written(tmp_path, DEVICES)
    assert _missed_by_pypi(corpus_file) == []
    status, out, err = run_cli("repair", str(corpus_file.path), "--variant", "signed-tail")
    assert status == 0 and "new signed-tail filter for 7 series" in out
    (line,) = _warnings(err)
    assert "hides 3 series from C++ / PyPI tsfile readers (unsigned-tail hash)" in line
    assert "tree-model series queries" in line and "--variant both" in line
    missed = _missed_by_pypi(corpus_file)  # the real reader, on the file as repaired
    assert missed == sorted(CJK_HIDDEN)
    assert all(path in line for path in missed)
    # --json carries the count per reader, the warning still goes to stderr.
    status, out, err = run_cli(
        "repair", str(corpus_file.path), "--variant", "signed-tail", "--json"
    )
    assert json.loads(out)["hidden_series"] == {"cpp": 3}
    assert len(_warnings(err)) == 1


@pytest.mark.parametrize("variant", ["both", "unsigned-tail"])
def test_a_variant_pypi_reads_gives_it_no_warning(
    tmp_path: Path, run_cli: Run, variant: str
) -> None:
    corpus_file = _cpp_written(tmp_path, DEVICES)
    run_cli("repair", str(corpus_file.path), "--variant", "signed-tail")
    status, out, err = run_cli("repair", str(corpus_file.path), "--variant", variant, "--json")
    assert status == 0
    assert _missed_by_pypi(corpus_file) == []  # PyPI reads every row again
    hidden = json.loads(out)["hidden_series"]
    assert "cpp" not in hidden and "C++" not in err
    if variant == "both":
        assert hidden == {} and err == ""
    else:
        # Java readers hash the signed tail (the spec; verified on the Java-written files):
        # the C++ variant hides the same three series from them.
        (line,) = _warnings(err)
        assert hidden == {"java": 3} and "hides 3 series from Java readers" in line


def test_ascii_series_give_no_warning_for_any_variant(tmp_path: Path, run_cli: Run) -> None:
    corpus_file = _cpp_written(tmp_path, {"root.sg.d1": ["s1", "temperature"], "root.x": ["v"]})
    for variant in ("signed-tail", "unsigned-tail", "both"):
        status, _, err = run_cli("repair", str(corpus_file.path), "--variant", variant)
        assert (status, err) == (0, "")
        assert _missed_by_pypi(corpus_file) == []


def test_the_warning_comes_before_anything_is_written(tmp_path: Path) -> None:
    corpus_file = _cpp_written(tmp_path, DEVICES)
    original = corpus_file.path.read_bytes()
    seen = []

    def on_hidden(hidden: dict[str, list[str]]) -> None:
        # The file is as it was and no temporary file exists yet.
        assert corpus_file.path.read_bytes() == original
        assert [p.name for p in tmp_path.iterdir()] == [corpus_file.path.name]
        seen.append(hidden)

    result = repair_filter(corpus_file.path, variant="signed-tail", on_hidden=on_hidden)
    assert seen == [{"cpp": CJK_HIDDEN}] and result.hidden_series == {"cpp": 3}
    assert corpus_file.path.read_bytes() != original


def test_hidden_series_of_the_java_written_filter_are_what_each_reader_misses(
    shared_dir: Path, tmp_path: Path, run_cli: Run
) -> None:
    # The rule the warning applies, against both real readers on a file the Java library wrote:
    # Java's contains accepts every series (its series.tsv), PyPI misses exactly the "cpp" ones.
    source = shared_dir / "research" / "tsfile" / "java_written" / JAVA_TREE
    rows = {
        line.split("\t")[0]: line.split("\t")[1] == "true"
        for line in (source.parent / f"{JAVA_TREE}.series.tsv").read_text("utf-8").splitlines()
    }
    assert all(rows.values())
    target = tmp_path / JAVA_TREE
    shutil.copyfile(source, target)
    corpus_file = CorpusFile("java", target, "tree", pypi_series(target, "tree"), 4)
    with TsFileReader(target) as reader:
        hidden = hidden_by_filter(reader.bloom_filter, reader.series())
        assert analyze_filter(reader).hidden["cpp"]["tree_model_series_queries"] == hidden["cpp"]
    assert "java" not in hidden
    pypi_missed = _missed_by_pypi(corpus_file)
    assert sorted(hidden["cpp"]) == pypi_missed and len(pypi_missed) == 21
    # Repairing it to the spec's variant again keeps those hidden from PyPI: warned, 21.
    status, _, err = run_cli("repair", str(target), "--variant", "signed-tail")
    (line,) = _warnings(err)
    assert status == 0 and "hides 21 series from C++ / PyPI tsfile readers" in line
    assert _missed_by_pypi(corpus_file) == pypi_missed
