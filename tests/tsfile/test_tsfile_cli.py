"""``bloomskip tsfile inspect|lookup|find|verify|repair``."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from tsfile_corpus import CorpusFile

from bloomskip.tsfile import TsFileReader

Run = Callable[..., tuple[int, str, str]]


def test_inspect_json(corpus: dict[str, CorpusFile], run_cli: Run) -> None:
    status, out, err = run_cli("inspect", str(corpus["tree_10_cjk"].path), "--json")
    report = json.loads(out)
    assert status == 0 and err == ""
    with TsFileReader(corpus["tree_10_cjk"].path) as reader:
        stored = reader.bloom_filter
    assert report["format_version"] == 4
    assert report["series_count"] == 10
    assert report["byte_length"] == stored.byte_length
    assert (report["bit_count"], report["hash_function_count"]) == (256, 5)
    assert report["bits_set"] == stored.bits_set
    assert report["fill_ratio"] == pytest.approx(stored.bits_set / 256)
    assert report["estimated_fpr"] == pytest.approx((stored.bits_set / 256) ** 5)
    assert report["hash_variant"] == "unsigned-tail"
    status, out, _ = run_cli("inspect", str(corpus["table_ascii"].path))
    assert status == 0 and "hash_variant" in out and "both" in out


def test_lookup(corpus: dict[str, CorpusFile], run_cli: Run) -> None:
    path = str(corpus["table_small"].path)
    status, out, _ = run_cli(
        "lookup", path, "t1.bj.设备.温度", "t1.gz.null.s1", "t1.xx.s1", "--json"
    )
    rows = json.loads(out)
    assert status == 1  # one path is absent
    assert rows[0] == {"path": "t1.bj.设备.温度", "bloom": "maybe", "present": True}
    assert rows[1]["present"] is True
    assert rows[2]["present"] is False
    status, out, _ = run_cli("lookup", path, "t1.bj.设备.温度")
    assert status == 0 and "present=true" in out


@pytest.fixture
def archive(corpus: dict[str, CorpusFile], tmp_path: Path) -> Path:
    directory = tmp_path / "archive"
    (directory / "nested").mkdir(parents=True)
    for name in ["tree_1", "tree_10_cjk", "tree_1000", "table_small", "table_ascii"]:
        shutil.copyfile(corpus[name].path, directory / f"{name}.tsfile")
    shutil.copyfile(corpus["tree_10_cjk"].path, directory / "nested" / "copy.tsfile")
    (directory / "notes.txt").write_text("not a tsfile, not scanned")
    return directory


def test_find(archive: Path, run_cli: Run) -> None:
    status, out, err = run_cli("find", "root.sg.设备.温度", str(archive))
    assert status == 0 and err == ""  # no progress bar: stderr is not a terminal
    assert out.splitlines() == [
        str(archive / "nested" / "copy.tsfile"),
        str(archive / "tree_10_cjk.tsfile"),
    ]
    status, out, _ = run_cli("find", "root.sg.设备.温度", str(archive), "--json")
    report = json.loads(out)
    assert report["files_scanned"] == 6
    assert len(report["files"]) == 2
    assert report["skipped_by_filter"] + report["index_lookups"] == 6
    assert report["skipped_by_filter"] >= 3
    status, out, _ = run_cli("find", "root.nowhere.d.s1", str(archive))
    assert (status, out) == (1, "")


def test_find_reports_corrupt_files(archive: Path, run_cli: Run) -> None:
    (archive / "broken.tsfile").write_bytes(b"TsFile\x04" + bytes(20))
    status, out, err = run_cli("find", "root.sg.d1.s1", str(archive))
    assert status == 2
    assert str(archive / "tree_1.tsfile") in out.splitlines()
    assert "broken.tsfile" in err and "magic" in err


def test_verify_repair_verify(archive: Path, run_cli: Run) -> None:
    status, out, _ = run_cli("verify", str(archive))
    assert status == 1
    assert "FALSE NEGATIVES" in out and "root.sg.设备.温度" in out
    status, out, _ = run_cli("verify", str(archive / "tree_10_cjk.tsfile"), "--json")
    (report,) = json.loads(out)
    assert report["hash_variant"] == "unsigned-tail"
    assert "root.sg.设备.温度" in report["rejected"]["signed-tail"]
    assert report["rejected"]["unsigned-tail"] == []
    for file in sorted(archive.rglob("*.tsfile")):
        status, out, _ = run_cli("repair", str(file), "--json")
        assert status == 0 and json.loads(out)["variant"] == "both"
    status, out, _ = run_cli("verify", str(archive))
    assert status == 0 and "FALSE NEGATIVES" not in out
    status, out, _ = run_cli("verify", str(archive), "--json")
    assert {report["hash_variant"] for report in json.loads(out)} == {"both"}


def test_verify_flags_corrupt_and_saturated_files(
    corpus: dict[str, CorpusFile], tmp_path: Path, run_cli: Run
) -> None:
    broken = tmp_path / "broken.tsfile"
    broken.write_bytes(corpus["tree_1"].path.read_bytes()[:-1])
    status, out, _ = run_cli("verify", str(broken))
    assert status == 1 and "CORRUPT" in out
    # 200 devices with one measurement each: the C++ writer counts 1 path and writes 256 bits.
    status, out, _ = run_cli("verify", str(corpus["tree_same_measurement"].path), "--json")
    (report,) = json.loads(out)
    assert status == 0  # saturated is not a false negative
    assert report["bit_count"] == 256 and report["series_count"] == 200
    assert report["saturated"] and report["effective_fpr"] > 0.1
    status, out, _ = run_cli("verify", str(corpus["tree_1000"].path))
    assert "SATURATED" not in out


def test_repair_variants(copy_of: Callable[[str], Path], run_cli: Run) -> None:
    target = copy_of("tree_10_cjk")
    status, out, _ = run_cli("repair", str(target), "--variant", "signed-tail")
    assert status == 0 and "signed-tail" in out
    status, out, _ = run_cli("verify", str(target))
    assert status == 1
    assert "C++ / PyPI tsfile (unsigned-tail): tree-model series queries: 3 series hidden" in out
    status, _, _ = run_cli("repair", str(target), "--variant", "both", "--error-rate", "0.01")
    assert status == 0
    status, out, _ = run_cli("inspect", str(target), "--json")
    assert json.loads(out)["hash_function_count"] == 7


def test_missing_location_is_a_user_error(run_cli: Run, tmp_path: Path) -> None:
    from bloomskip.errors import BloomskipError

    with pytest.raises(BloomskipError):
        run_cli("verify", str(tmp_path / "missing"))


@pytest.mark.parametrize("command", [("verify",), ("find", "root.a.s1")])
def test_no_tsfile_in_the_directories_is_a_user_error(
    run_cli: Run, tmp_path: Path, command: tuple[str, ...]
) -> None:
    from bloomskip.errors import BloomskipError

    (tmp_path / "notes.txt").write_text("not a tsfile")
    with pytest.raises(BloomskipError, match="no .tsfile files in"):
        run_cli(*command, str(tmp_path))


def test_unreadable_file_is_a_user_error(run_cli: Run, tmp_path: Path) -> None:
    from bloomskip.errors import BloomskipError

    with pytest.raises(BloomskipError, match="No such file"):
        run_cli("inspect", str(tmp_path / "missing.tsfile"))
    with pytest.raises(BloomskipError, match=f"{tmp_path.name}: Is a directory"):
        run_cli("lookup", str(tmp_path), "root.a.s1")  # a directory: the message names it


@pytest.mark.parametrize(
    "arguments",
    [
        ("lookup", "f.tsfile", "root.a.s1", "--charset", "no-such-charset"),
        ("repair", "f.tsfile", "--error-rate", "nan"),
        ("verify", "f.tsfile", "--error-rate", "0"),
        ("inspect", "f.tsfile", "--error-rate", "1.5"),
        ("verify", "f.tsfile", "--limit", "-1"),
    ],
)
def test_bad_arguments_are_usage_errors(
    run_cli: Run, arguments: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        run_cli(*arguments)
    assert exit_info.value.code == 2
    assert "error: argument" in capsys.readouterr().err


def test_lookup_in_another_charset(corpus: dict[str, CorpusFile], run_cli: Run) -> None:
    # A non-ASCII path the charset cannot encode is hashed as Java does ("?"), and its UTF-8
    # bytes (what the C++ writer hashed) are probed too: still found, no traceback.
    path = corpus["tree_10_cjk"].path
    status, out, _ = run_cli("lookup", str(path), "root.sg.设备.温度", "--charset", "latin-1")
    assert (status, out.split()[1:]) == (0, ["bloom=maybe", "present=true"])
