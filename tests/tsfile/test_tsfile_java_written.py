"""Files written by the Apache TsFile Java library (v2.0.0), against Java's and PyPI's answers.

The shared folder holds each file with Java's own listing of its series and Java's
``BloomFilter.contains`` for each (``*.series.tsv``), paths that were not written with Java's
answer (``*.probes.tsv``) and Java's view of the file (``*.java_info.txt``). What PyPI ``tsfile``
(the C++ library) reads is asked of PyPI's reader here, in the test; nothing is taken from
bloomskip to check bloomskip.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import tsfile as pypi_tsfile
from tsfile import ColumnCategory
from tsfile_corpus import CorpusFile, pypi_row_counts, pypi_series, pypi_tree_rows

from bloomskip.tsfile import TsFileReader, find_series

Run = Callable[..., tuple[int, str, str]]
TREE = "java_tree_cjk.tsfile"
TABLE = "java_table_trailing_null.tsfile"
FILES = [TREE, TABLE]


@dataclass(frozen=True)
class JavaFile:
    """One Java-written file and Java's answers about it."""

    path: Path
    model: str
    series: dict[str, bool]  # path -> Java's contains (time columns end in ".")
    probes: dict[str, bool]  # unwritten path -> Java's contains
    info: dict[str, list[str]]  # java_info key -> values (one per line with that key)

    def java_devices(self) -> list[list[str | None]]:
        """Device segments as Java lists them (``<null>`` for a null segment)."""
        devices = []
        for value in self.info["device"]:
            listed = value.split("\t")[1].removeprefix("segments=[").removesuffix("]")
            devices.append([None if s == "<null>" else s for s in listed.split(" | ")])
        return devices


def _tsv(path: Path) -> dict[str, bool]:
    rows = [line.split("\t") for line in path.read_text("utf-8").splitlines() if line]
    assert all(answer in ("true", "false") for _, answer in rows)
    return {name: answer == "true" for name, answer in rows}


@pytest.fixture(scope="module")
def java(shared_dir: Path) -> dict[str, JavaFile]:
    folder = shared_dir / "research" / "tsfile" / "java_written"
    files = {}
    for name in FILES:
        info: dict[str, list[str]] = {}
        for line in (folder / f"{name}.java_info.txt").read_text("utf-8").splitlines():
            key, _, value = line.partition("\t")
            info.setdefault(key, []).append(value)
        files[name] = JavaFile(
            folder / name,
            "tree" if name == TREE else "table",
            _tsv(folder / f"{name}.series.tsv"),
            _tsv(folder / f"{name}.probes.tsv"),
            info,
        )
    return files


def _java_rows(java_file: JavaFile) -> dict[str, int]:
    return {
        value.split("\t")[0]: int(value.split("\t")[1])
        for value in java_file.info["java_read_rows"]
    }


def _pypi_corpus_file(java_file: JavaFile) -> CorpusFile:
    """PyPI's own listing of the file, in the form the corpus helpers read."""
    series = pypi_series(java_file.path, java_file.model)
    return CorpusFile(java_file.path.name, java_file.path, java_file.model, series, 0)


def _pypi_tree_rows(path: Path, device: str, measurement: str) -> int:
    reader = pypi_tsfile.TsFileReader(str(path))
    try:
        return pypi_tree_rows(reader, device, measurement)
    finally:
        reader.close()


def _tag_count(path: Path, table: str) -> int:
    reader = pypi_tsfile.TsFileReader(str(path))
    try:
        columns = reader.get_table_schema(table).get_columns()
    finally:
        reader.close()
    return sum(column.get_category() == ColumnCategory.TAG for column in columns)


def _cpp_forms(java_file: JavaFile) -> dict[str, str]:
    """Java's series path -> the same series in the C++ writer's form (one segment per tag)."""
    if java_file.model == "tree":
        return {path: path for path in java_file.series}
    forms = {}
    for device in java_file.java_devices():
        tags = _tag_count(java_file.path, device[0])  # type: ignore[arg-type]
        java_text = ".".join("null" if s is None else s for s in device)
        padded = [*device, *[None] * (tags + 1 - len(device))]
        cpp_text = ".".join("null" if s is None else s for s in padded)
        for path in java_file.series:
            measurement = path[len(java_text) + 1 :]
            if path.startswith(java_text + ".") and "." not in measurement:
                forms[path] = f"{cpp_text}.{measurement}"
    assert forms.keys() == java_file.series.keys()
    return forms


# ------------------------------------------------------------------ what the files are
def test_the_files_are_as_described(java: dict[str, JavaFile]) -> None:
    # Java's listing, including each table device's time column (a path ending in ".").
    for java_file in java.values():
        assert all(java_file.series.values())
        with TsFileReader(java_file.path) as reader:
            assert set(reader.series_paths()) == set(java_file.series)
            stored = reader.bloom_filter
        assert stored is not None
        assert (stored.bit_count, stored.hash_function_count) == (
            int(java_file.info["bloom_filter_size_bits"][0]),
            int(java_file.info["bloom_filter_hash_functions"][0]),
        )
        assert (
            stored.serialized_bits().hex()
            == (java_file.info["bloom_filter_bitset_hex_java_BitSet_toByteArray"][0])
        )
    assert "t1.bj.s1" in java[TABLE].series and "t1.null.d4.s1" in java[TABLE].series
    assert "t1.bj." in java[TABLE].series  # trailing null tag dropped, time column kept


@pytest.mark.parametrize("name", FILES)
def test_inspect_reports_the_signed_tail(
    java: dict[str, JavaFile], run_cli: Run, name: str
) -> None:
    status, out, _ = run_cli("inspect", str(java[name].path), "--json")
    report = json.loads(out)
    assert status == 0
    assert report["hash_variant"] == "signed-tail"
    assert report["exact_match"] == {"signed-tail": True, "unsigned-tail": False, "both": False}
    assert report["series_count"] == len(java[name].series)


@pytest.mark.parametrize("name", FILES)
def test_java_contains_answers_are_reproduced(java: dict[str, JavaFile], name: str) -> None:
    # Every path Java's contains rejects is rejected under the signed tail, and every path it
    # accepts (each series, and any genuine false positive among the probes) is accepted.
    answers = {**java[name].series, **java[name].probes}
    with TsFileReader(java[name].path, variant="signed-tail") as reader:
        stored = reader.bloom_filter
        verdicts = {path: reader.filter_verdict(path) for path in answers}
    assert stored is not None
    contains = stored.contains_with(list(answers), signed_tail=True).tolist()
    assert dict(zip(answers, contains, strict=True)) == answers
    assert {path: verdict == "maybe" for path, verdict in verdicts.items()} == answers
    assert not all(java[name].probes.values())


# ------------------------------------------------------------------ lookups in both forms
@pytest.mark.parametrize("name", FILES)
def test_lookup_finds_every_series_in_both_device_forms(
    java: dict[str, JavaFile], run_cli: Run, name: str
) -> None:
    forms = _cpp_forms(java[name])
    asked = [*forms, *forms.values()]
    if name == TABLE:
        assert forms["t1.bj.s1"] == "t1.bj.null.s1" and forms["t1.设备."] == "t1.设备.null."
        assert forms["t1.null.d4.s1"] == "t1.null.d4.s1"  # a null tag inside stays
    status, out, _ = run_cli("lookup", str(java[name].path), *asked, "--json")
    assert status == 0
    assert [(row["path"], row["bloom"], row["present"]) for row in json.loads(out)] == [
        (path, "maybe", True) for path in asked
    ]
    absent = [path for path, accepted in java[name].probes.items() if not accepted]
    status, out, _ = run_cli("lookup", str(java[name].path), *absent, "--json")
    assert status == 1 and not any(row["present"] for row in json.loads(out))


def test_find_and_lookup_series_take_either_form(
    java: dict[str, JavaFile], corpus: dict[str, CorpusFile], tmp_path: Path
) -> None:
    # The Java file in the C++ form, and a PyPI-written (C++) file in the Java form.
    archive = tmp_path / "archive"
    archive.mkdir()
    shutil.copyfile(java[TABLE].path, archive / "java.tsfile")
    shutil.copyfile(corpus["table_small"].path, archive / "cpp.tsfile")
    cpp_devices = {device for device, _ in corpus["table_small"].series}
    assert ("t1", "gz", None) in cpp_devices  # the C++ writer keeps the trailing null
    expected = {
        "t1.bj.null.s1": ["java.tsfile"],
        "t1.设备.null.温度": ["java.tsfile"],
        "t1.bj.s1": ["java.tsfile"],
        "t1.gz.s1": ["cpp.tsfile"],  # Java's form of the C++ series t1.gz.null.s1
        "t1.gz.null.s1": ["cpp.tsfile"],
        # Tags (null, "null"): the last is the text "null", which no writer drops.
        "t1.null.null.温度": ["cpp.tsfile"],
        "t1.gz.x": [],
        "t1.gz.null.x": [],
    }
    for path, files in expected.items():
        for jobs in (1, 2):
            results = list(find_series(path, sorted(archive.iterdir()), jobs=jobs))
            assert [Path(r.file).name for r in results if r.present] == files, (path, jobs)
    with TsFileReader(archive / "java.tsfile") as reader:
        assert reader.lookup_series(("t1", "bj", None), "s1").present
        assert reader.lookup_series(("t1", "bj"), "s1").present
    with TsFileReader(archive / "cpp.tsfile") as reader:
        assert reader.lookup_series(("t1", "gz"), "s1").present
        assert not reader.lookup_series(("t1", "gz"), "s9").present


# ------------------------------------------------------------------ verify: what each reader does
def _verify(run_cli: Run, path: Path) -> tuple[int, dict, str]:
    status, out, _ = run_cli("verify", str(path), "--json")
    (report,) = json.loads(out)
    text_status, text, _ = run_cli("verify", str(path), "--limit", "100")
    assert text_status == status
    return status, report, text


def test_verify_names_exactly_the_tree_series_pypi_hides(
    java: dict[str, JavaFile], run_cli: Run
) -> None:
    java_file = java[TREE]
    pypi = _pypi_corpus_file(java_file)
    rows = pypi_row_counts(java_file.path, pypi)
    assert rows.keys() == java_file.series.keys()  # PyPI lists the same series
    zero = sorted(path for path, count in rows.items() if count == 0)
    assert len(zero) == 21 and all(count in (0, 4) for count in rows.values())
    status, report, text = _verify(run_cli, java_file.path)
    assert status == 1 and report["model"] == "tree"
    cpp = report["readers"]["cpp"]
    assert cpp["tree_model_series_queries"]["filter_consulted"] is True
    assert sorted(cpp["tree_model_series_queries"]["hidden"]) == zero
    # Java's reader returns every row of every series (its own listing and contains answers).
    assert _java_rows(java_file) == dict.fromkeys(java_file.series, 4)
    assert report["readers"]["java"]["tree_model_series_queries"]["hidden"] == []
    assert "C++ / PyPI tsfile (unsigned-tail): tree-model series queries: 21 series hidden" in text
    assert "Java (signed-tail): tree-model series queries: none hidden" in text
    for path in zero:
        assert path in text


def test_verify_says_table_queries_do_not_consult_the_filter(
    java: dict[str, JavaFile], run_cli: Run
) -> None:
    java_file = java[TABLE]
    status, report, text = _verify(run_cli, java_file.path)
    assert report["model"] == "table"
    for reader in ("java", "cpp"):
        table_facts = report["readers"][reader]["table_model_queries"]
        assert (table_facts["filter_consulted"], table_facts["hidden"]) == (False, [])
    # PyPI's query_table returns every row of every series, whatever the filter says ...
    pypi = _pypi_corpus_file(java_file)
    selectable = {path: count for path, count in _java_rows(java_file).items()}
    assert pypi_row_counts(java_file.path, pypi) == selectable == dict.fromkeys(selectable, 3)
    # ... while its tree-model query of a table device (two segments, so that the device string
    # splits back into the same device) returns nothing exactly where the filter check fails.
    hidden = set(report["readers"]["cpp"]["tree_model_series_queries"]["hidden"])
    assert hidden and hidden <= set(selectable)
    checked = 0
    for path in selectable:
        device, _, measurement = path.rpartition(".")
        if device.count(".") == 1:
            assert (_pypi_tree_rows(java_file.path, device, measurement) == 0) == (path in hidden)
            checked += 1
    assert checked == 4 and {"t1.bj.温度", "t1.设备.s1"} <= hidden
    assert status == 1
    assert "table-model queries: filter not consulted, none hidden" in text


# ------------------------------------------------------------------ repair for both readers
def _metadata_start(path: Path) -> int:
    with TsFileReader(path) as reader:
        return reader.metadata.start


@pytest.mark.parametrize("name", FILES)
def test_repair_both_lets_pypi_read_every_row_and_java_find_every_series(
    java: dict[str, JavaFile], run_cli: Run, tmp_path: Path, name: str
) -> None:
    java_file = java[name]
    target = tmp_path / name
    shutil.copyfile(java_file.path, target)
    status, out, _ = run_cli("repair", str(target), "--variant", "both", "--json")
    assert status == 0 and json.loads(out)["variant"] == "both"
    pypi = _pypi_corpus_file(java_file)
    assert pypi_row_counts(target, pypi) == _java_rows(java_file)
    if name == TABLE:  # the tree-model queries PyPI can make of this file now find them too
        assert _pypi_tree_rows(target, "t1.bj", "温度") == 3
        assert _pypi_tree_rows(target, "t1.设备", "s1") == 3
    # Java's hash accepts every series Java lists, time columns included, in the repaired
    # filter. (The signed tail is Java's hash: it rebuilds Java's own bits of these files
    # exactly, see test_inspect_reports_the_signed_tail.)
    with TsFileReader(target) as reader:
        stored = reader.bloom_filter
        assert reader.metadata.start == _metadata_start(java_file.path)
    assert stored is not None
    assert stored.contains_with(list(java_file.series), signed_tail=True).all()
    assert (
        target.read_bytes()[: _metadata_start(java_file.path)]
        == (java_file.path.read_bytes()[: _metadata_start(java_file.path)])
    )
    status, report, _ = _verify(run_cli, target)
    assert status == 0 and report["hash_variant"] == "both"
