"""``bloomskip clickhouse inspect|explain`` through their argparse registration."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pyarrow as pa
import pytest
from parts_corpus import INDEXES, s_column

from bloomskip.clickhouse import part_cli
from bloomskip.clickhouse.ddl import parse_index_definition
from bloomskip.clickhouse.index import SkipIndex
from bloomskip.errors import BloomskipError

EXPLAIN_KEYS = {"name", "type", "granules_total", "granules_selected", "selected", "rows_selected"}


def _run(argv: list[str], capsys) -> tuple[int, str]:
    parser = argparse.ArgumentParser(prog="bloomskip clickhouse")
    part_cli.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    status = args.func(args)
    return status, capsys.readouterr().out


def _part_args(built) -> list[str]:
    return [str(built.part_dir), "--table-sql", str(built.table_sql)]


def test_explain_json_matches_clickhouse(corpus, capsys):
    built = corpus["compact_merged"]
    for predicate in ("v = 5", "hasToken(s, 'w12')", "has(arr, 20)"):
        status, out = _run(["explain", *_part_args(built), "--where", predicate, "--json"], capsys)
        assert status == 0
        report = json.loads(out)
        assert set(report) == {"indexes"}
        assert [entry["name"] for entry in report["indexes"]] == list(INDEXES)
        for entry in report["indexes"]:
            assert set(entry) == EXPLAIN_KEYS
            assert entry["granules_selected"] == built.explain[(entry["name"], predicate)]
            assert entry["rows_selected"] == sum(built.granule_rows[g] for g in entry["selected"])


def test_explain_one_index_and_text_output(corpus, capsys):
    built = corpus["wide_packed"]
    status, out = _run(
        ["explain", *_part_args(built), "--where", "v = 5", "--index", "i_v3"], capsys
    )
    assert status == 0
    expected = built.explain[("i_v3", "v = 5")]
    assert f"i_v3 (bloom_filter): {expected}/24 granules" in out
    assert "i_v " not in out


def test_explain_accepts_ddl_text(corpus, capsys):
    built = corpus["wide_plain"]
    ddl = built.table_sql.read_text()
    status, out = _run(
        ["explain", str(built.part_dir), "--table-ddl", ddl, "--where", "lc = 'c3'", "--json"],
        capsys,
    )
    kept = {entry["name"]: entry["granules_selected"] for entry in json.loads(out)["indexes"]}
    assert kept["i_multi"] == built.explain[("i_multi", "lc = 'c3'")]


def test_user_errors_are_bloomskip_errors(corpus, capsys, tmp_path):
    built = corpus["wide_plain"]
    with pytest.raises(BloomskipError):
        _run(["explain", *_part_args(built), "--where", "v = 5", "--index", "nope"], capsys)
    with pytest.raises(BloomskipError):
        _run(["inspect", str(tmp_path), "--table-sql", str(built.table_sql)], capsys)
    with pytest.raises(BloomskipError):
        _run(["inspect", str(built.part_dir), "--table-sql", str(tmp_path / "none.sql")], capsys)
    with pytest.raises(BloomskipError):
        _run(["explain", *_part_args(built), "--where", "v = = 5"], capsys)


def test_inspect_json_reports_clickhouse_sizes(corpus, capsys):
    built = corpus["compact_packed"]
    status, out = _run(["inspect", *_part_args(built), "--json", "--granules"], capsys)
    assert status == 0
    report = json.loads(out)
    assert (report["part_type"], report["rows"], report["granules"]) == ("Compact", 3000, 23)
    by_name = {entry["name"]: entry for entry in report["indexes"]}
    assert list(by_name) == list(INDEXES)
    for name, entry in by_name.items():
        sizes = (entry["compressed_bytes"], entry["uncompressed_bytes"], entry["marks_bytes"])
        assert sizes == built.index_sizes[name]
        assert entry["index_granules"] == -(-23 // entry["granularity"])
        stats = entry["granule_statistics"]
        assert len(stats) == entry["index_granules"] * len(entry["expressions"])
        assert sum(row["rows"] for row in stats) == 3000 * len(entry["expressions"])
    assert by_name["i_v"]["parameters"] == {
        "false_positive_rate": 0.025,
        "bits_per_row": 8,
        "hash_functions": 4,
    }
    assert by_name["i_ng"]["parameters"] == {
        "ngram_size": 3,
        "size_bytes": 512,
        "hash_functions": 2,
        "seed": 7,
    }
    assert by_name["i_v"]["summary"]["saturated_granules"] == []
    assert by_name["i_v"]["summary"]["recommendation"] is None


def test_inspect_flags_saturation_and_the_fix_works(corpus, capsys):
    """i_sat is too small; rebuilding it with the suggested parameters reaches the target."""
    built = corpus["wide_plain"]
    status, out = _run(
        ["inspect", *_part_args(built), "--index", "i_sat", "--json", "--saturation-fpr", "0.3"],
        capsys,
    )
    entry = json.loads(out)["indexes"][0]
    summary = entry["summary"]
    assert len(summary["saturated_granules"]) >= 6
    advice = summary["recommendation"]
    assert advice["type_clause"].startswith("ngrambf_v1(3, ")
    assert advice["size_bytes"] > 12
    rebuilt = parse_index_definition(f"s TYPE {advice['type_clause']} GRANULARITY 2")
    index = SkipIndex.build(
        rebuilt,
        pa.table({"s": pa.array(s_column(), pa.string())}),
        np.array(built.granule_rows),
        {"s": "String"},
    )
    fprs = index.granule_statistics().column("estimated_fpr").to_numpy()
    assert fprs.max() <= 2 * part_cli.DEFAULT_TARGET_FPR
    # Text output names the saturated granules and the suggested TYPE.
    status, text = _run(
        ["inspect", *_part_args(built), "--index", "i_sat", "--saturation-fpr", "0.3"], capsys
    )
    assert "SATURATED" in text and f"suggest TYPE {advice['type_clause']}" in text


def test_inspect_text_for_every_index(corpus, capsys):
    status, out = _run(["inspect", *_part_args(corpus["wide_fixed_zstd"])], capsys)
    assert status == 0
    for name in INDEXES:
        assert f"index {name} " in out
    assert "ZSTD" in out and ".cmrk" in out


def test_bloom_filter_recommendation_uses_clickhouse_sizing():
    definition = parse_index_definition("v TYPE bloom_filter(0.3)")
    advice = part_cli.recommend_parameters(definition, 50, 0.01)
    assert (advice["bits_per_row"], advice["hash_functions"]) == (10, 5)
    assert advice["type_clause"] == "bloom_filter(0.01)"


def test_distinct_item_estimate():
    # n items fill 1 - exp(-k n / m) of m bits with k hashes; the estimate inverts that.
    m, k, n = 8192, 3, 1500
    filled = m * (1 - np.exp(-k * n / m))
    assert part_cli.estimate_distinct_items(filled, m, k) == pytest.approx(n)
    assert part_cli.estimate_distinct_items(m, m, k) > part_cli.estimate_distinct_items(m - 5, m, k)


def test_bloomskip_main_dispatches_and_reports_errors(corpus, capsys):
    from bloomskip.cli import main

    built = corpus["wide_fixed_zstd"]
    argv = ["clickhouse", "explain", *_part_args(built), "--where", "fs = '103'", "--json"]
    assert main([*argv, "--index", "i_fs"]) == 0
    entry = json.loads(capsys.readouterr().out)["indexes"][0]
    assert entry["granules_selected"] == built.explain[("i_fs", "fs = '103'")]
    assert main([*argv, "--index", "missing"]) == 2
    assert "missing" in capsys.readouterr().err
