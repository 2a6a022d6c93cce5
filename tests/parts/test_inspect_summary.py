"""``clickhouse inspect``: the summary (saturated granules only) is the default past a screenful."""

from __future__ import annotations

import argparse
import json
import re

import numpy as np
import pytest

from bloomskip.clickhouse import part_cli

# A granule line of the text table: granule, rows, bits, set, fill, est.fpr.
GRANULE_LINE = re.compile(r"^\s+\d+\s+\d+\s+\d+\s+\d+\s+\d\.\d{3}\s+\S+")


def _run(argv: list[str], capsys) -> str:
    parser = argparse.ArgumentParser(prog="bloomskip clickhouse")
    part_cli.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    assert args.func(args) == 0
    return capsys.readouterr().out


def _args(built) -> list[str]:
    return ["inspect", str(built.part_dir), "--table-sql", str(built.table_sql)]


def test_json_defaults_to_the_summary_on_a_large_part(corpus, capsys):
    built = corpus["wide_plain"]
    summary = json.loads(_run([*_args(built), "--json", "--saturation-fpr", "0.3"], capsys))
    full = json.loads(
        _run([*_args(built), "--json", "--saturation-fpr", "0.3", "--granules"], capsys)
    )
    assert (summary["view"], full["view"]) == ("summary", "granules")
    lines = sum(len(entry["granule_statistics"]) for entry in full["indexes"])
    assert lines > part_cli.SCREENFUL
    assert summary["granule_lines"] == full["granule_lines"] == lines
    saturated_somewhere = False
    for short, long in zip(summary["indexes"], full["indexes"], strict=True):
        assert short["name"] == long["name"]
        assert "granule_statistics" not in short
        # The per index totals are the same in both views...
        assert short["summary"] == long["summary"]
        assert short["compressed_bytes"] == long["compressed_bytes"]
        # ...and the rows kept are exactly the saturated granules' rows, read from the full view.
        expected = [
            row
            for row in long["granule_statistics"]
            if row["granule"] in set(long["summary"]["saturated_granules"])
        ]
        assert short["saturated_granule_statistics"] == expected
        assert all(
            row["estimated_fpr"] >= 0.3 for row in expected if len(short["expressions"]) == 1
        )
        saturated_somewhere |= bool(expected)
    assert saturated_somewhere  # i_sat is built too small: the summary has something to show


def test_a_small_report_lists_every_granule_unless_summary_is_asked(corpus, capsys):
    built = corpus["wide_plain"]
    one = [*_args(built), "--index", "i_v", "--json"]
    full = json.loads(_run(one, capsys))
    assert full["view"] == "granules" and full["granule_lines"] <= part_cli.SCREENFUL
    assert len(full["indexes"][0]["granule_statistics"]) == full["granule_lines"]
    short = json.loads(_run([*one, "--summary"], capsys))
    assert short["view"] == "summary"
    assert short["indexes"][0]["saturated_granule_statistics"] == []
    assert short["indexes"][0]["summary"]["saturated_granules"] == []


def test_text_summary_prints_only_saturated_granule_lines(corpus, capsys):
    built = corpus["wide_plain"]
    full = json.loads(
        _run([*_args(built), "--json", "--granules", "--saturation-fpr", "0.3"], capsys)
    )
    # Per index, the saturated granules' lines, at most SHOWN_SATURATED granules of them.
    shown = sum(
        min(len(entry["summary"]["saturated_granules"]), part_cli.SHOWN_SATURATED)
        * len(entry["expressions"])
        for entry in full["indexes"]
    )
    text = _run([*_args(built), "--saturation-fpr", "0.3"], capsys)
    granule_lines = [line for line in text.splitlines() if GRANULE_LINE.match(line)]
    assert 0 < len(granule_lines) == shown < full["granule_lines"]
    assert f"summary of {full['granule_lines']} granule lines" in text
    for entry in full["indexes"]:
        assert f"index {entry['name']} " in text
        if not entry["summary"]["saturated_granules"]:
            assert text.count("no saturated granule") >= 1
    everything = _run([*_args(built), "--granules", "--saturation-fpr", "0.3"], capsys)
    every_line = [line for line in everything.splitlines() if GRANULE_LINE.match(line)]
    assert len(every_line) == full["granule_lines"]
    assert "summary of" not in everything


def test_summary_and_granules_together_are_refused(corpus, capsys):
    built = corpus["wide_plain"]
    with pytest.raises(SystemExit) as exit_info:
        _run([*_args(built), "--summary", "--granules"], capsys)
    assert exit_info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_inspect_plot_is_a_fill_heatmap_with_the_saturated_granules_marked(
    corpus, capsys, tmp_path
):
    from matplotlib.image import imread

    from bloomskip.clickhouse.part import Part
    from bloomskip.plots import DPI, WIDTH, plot_part_fill

    built = corpus["wide_plain"]
    png = tmp_path / "fill.png"
    _run([*_args(built), "--saturation-fpr", "0.3", "--plot", str(png)], capsys)
    part = Part.open(built.part_dir, built.table_sql.read_text())
    report = part_cli.inspect_part(part, saturation_fpr=0.3)
    figure = plot_part_fill(report)
    axes = figure.axes[0]
    assert (axes.get_xlabel(), axes.get_ylabel()) == ("granule", "index")
    names = [entry["name"] for entry in report["indexes"] if entry["materialized"]]
    assert [tick.get_text() for tick in axes.get_yticklabels()] == names
    width, height = figure.get_size_inches() * DPI
    assert imread(png).shape[:2] == (round(height), round(width)) and width == WIDTH * DPI
    # One marker per saturated granule, on its index's row.
    marked = sorted(
        (int(y), int(x)) for c in axes.collections for x, y in np.asarray(c.get_offsets())
    )
    expected = sorted(
        (row, granule)
        for row, entry in enumerate(e for e in report["indexes"] if e["materialized"])
        for granule in entry["summary"]["saturated_granules"]
    )
    assert marked == expected and any(name == "i_sat" for name in names)
    assert {names[row] for row, _ in marked} >= {"i_sat"}
