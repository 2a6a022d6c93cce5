"""``bloomskip advise`` on the command line: JSON, the figures, the HTML page in a real
Chromium, bad input as one line and exit status 2, and a light ``bloomskip --help``."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bloomskip.cli import main


def _error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture(scope="module")
def cli_run(advise_data, tmp_path_factory):
    """One ``advise --json --report --plot`` run: (JSON document, report path, plot path)."""
    directory, queries, _ = advise_data
    out = tmp_path_factory.mktemp("advise-cli")
    report, plot = out / "report.html", out / "pareto.png"
    command = [
        sys.executable, "-m", "bloomskip", "advise", str(directory), "--where-file", str(queries),
        "--json", "--report", str(report), "--plot", str(plot), "--table", "events",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), report, plot


def test_json_has_the_recommendations_and_candidates(cli_run, advise_data) -> None:
    document, _, _ = cli_run
    directory, _, wheres = advise_data
    recommendations = {r["column"]: r for r in document["recommendations"]}
    for item in document["recommendations"]:
        assert {"column", "index", "clickhouse_ddl", "rows_read_fraction", "index_bytes"} <= set(
            item
        )
    user = recommendations["user_id"]
    assert user["index"].startswith("user_id TYPE bloom_filter(")
    assert user["clickhouse_ddl"].startswith("ALTER TABLE events ADD INDEX user_id_bf user_id ")
    # One command builds every recommended index at the one granule (issue 33: it was one
    # command per recommendation, each with its own granule).
    indexes = [r["index"] for r in document["recommendations"] if r["index"] is not None]
    assert len(indexes) == 2
    assert document["build_command"] == (
        f"bloomskip index build {shlex.quote(str(directory))}"
        + "".join(f" --index {shlex.quote(index)}" for index in indexes)
        + f" --granule {document['granule']}"
    )
    assert recommendations["msg"]["derivation"].count("m = -n*k/ln(1-p^(1/k))") == 1
    code = recommendations["code"]
    assert code["index"] is None and code["clickhouse_ddl"] is None
    assert code["rows_read_fraction"] == 1.0 and code["index_bytes"] == 0
    assert [q["where"] for q in document["queries"]] == wheres
    candidates = document["candidates"]
    assert len(candidates) >= 30
    for candidate in candidates:
        assert 0.0 <= candidate["rows_read_fraction"] <= 1.0
        if candidate["granule"] == "row-group":  # 16,384-row groups: ClickHouse's 2 x 8,192
            assert candidate["clickhouse_granularity"] == 2
        else:
            assert candidate["clickhouse_granularity"] == candidate["granule"] // 8192


def test_the_plot_is_a_png_of_the_expected_size(cli_run) -> None:
    from matplotlib.image import imread

    from bloomskip.advise.figures import DPI, FIGURE_SIZE

    _, _, plot = cli_run
    pixels = imread(plot)
    assert pixels.shape[:2] == (FIGURE_SIZE[1] * DPI, FIGURE_SIZE[0] * DPI)
    assert pixels[..., :3].std() > 0.05  # drawn on, not blank


def test_the_figures_have_their_axis_labels(advice, tmp_path) -> None:
    from matplotlib.image import imread

    from bloomskip.advise import figures

    pareto = figures.pareto_figure(advice)
    axes = pareto.axes[0]
    assert axes.get_xlabel() == figures.PARETO_X_LABEL
    assert axes.get_ylabel() == figures.PARETO_Y_LABEL
    assert axes.get_xscale() == "log"
    labels = [text.get_text() for text in axes.get_legend().get_texts()]
    assert "user_id: recommended" in labels and "code: no index" in labels
    rates = figures.fpr_figure(advice).axes[0]
    assert (rates.get_xlabel(), rates.get_ylabel()) == (figures.FPR_X_LABEL, figures.FPR_Y_LABEL)
    figures.save_png(figures.fpr_figure(advice), tmp_path / "fpr.png")
    assert imread(tmp_path / "fpr.png").shape[:2] == (600, 1000)


def test_the_html_report_is_self_contained(cli_run) -> None:
    _, report, _ = cli_run
    page = report.read_text(encoding="utf-8")
    assert page.count('src="data:image/png;base64,') == 2
    assert "http://" not in page and "https://" not in page and "<script" not in page
    assert "ALTER TABLE events ADD INDEX user_id_bf" in page


def test_the_html_report_has_the_sizes_and_one_build_command(cli_run) -> None:
    import html

    document, report, _ = cli_run
    page = report.read_text(encoding="utf-8")
    assert page.count("bloomskip index build") == 1
    assert f"<pre>{html.escape(document['build_command'])}</pre>" in page
    for item in document["recommendations"]:
        assert f"<td class=n>{item['column_compressed_bytes']:,}</td>" in page
        if item["index"] is not None:
            assert f"<td class=n>{item['index_share_of_column']:.2%}</td>" in page


def test_the_html_report_renders_in_headless_chromium(cli_run, chromium, tmp_path) -> None:
    from matplotlib.image import imread

    _, report, _ = cli_run
    shot = tmp_path / "shot.png"
    command = [
        chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
        f"--screenshot={shot}", "--window-size=1200,1800", report.resolve().as_uri(),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0 and shot.is_file(), done.stderr
    pixels = imread(shot)[..., :3]
    assert pixels.shape[:2] == (1800, 1200)
    assert pixels.std() > 0.05
    # The embedded figures rendered: many distinct colours, not only text on white.
    colours = np.unique((pixels.reshape(-1, 3) * 255).astype(np.uint8), axis=0)
    assert len(colours) > 200


def test_text_output_shows_the_front_and_the_ddl(advise_data, capsys) -> None:
    directory, queries, _ = advise_data
    status = main(["advise", str(directory), "--where-file", str(queries), "--columns", "code"])
    out = capsys.readouterr().out
    assert status == 0
    assert "code: 2 queries (weight 75)" in out
    assert "no index: no index pays for itself" in out


# -- bad input: one line, exit status 2 --------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("# only a comment\n\n", "no WHERE clause"),
        ("user_id = 1\nnosuch = 2\n", ":2: Unknown expression or function identifier `nosuch`"),
        ("user_id = = 1\n", ":1: cannot parse WHERE"),
        ("0\tuser_id = 1\n", ":1: the count must be at least 1"),
    ],
)
def test_bad_query_files_are_one_line_errors(
    advise_data, tmp_path, capsys, content, expected
) -> None:
    directory, _, _ = advise_data
    queries = tmp_path / "q.txt"
    queries.write_text(content, encoding="utf-8")
    assert main(["advise", str(directory), "--where-file", str(queries)]) == 2
    line = _error_line(capsys)
    assert line.startswith("bloomskip: error: ") and expected in line


def test_an_unreadable_query_file_is_a_one_line_error(advise_data, tmp_path, capsys) -> None:
    directory, _, _ = advise_data
    for path in (tmp_path / "missing.txt", tmp_path):
        assert main(["advise", str(directory), "--where-file", str(path)]) == 2
        assert _error_line(capsys).startswith(f"bloomskip: error: cannot read {path}: ")
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"\xff\xfe user_id = 1")
    assert main(["advise", str(directory), "--where-file", str(binary)]) == 2
    assert "not UTF-8 text" in _error_line(capsys)


def test_columns_no_query_reads_are_refused(advise_data, capsys) -> None:
    directory, queries, _ = advise_data
    for columns, expected in ((["nosuch"], "is not a column"), (["msg", "x"], "is not a column")):
        status = main(
            ["advise", str(directory), "--where-file", str(queries), "--columns", *columns]
        )
        assert status == 2
        assert expected in _error_line(capsys)


def test_a_budget_no_candidate_meets_names_the_closest(advise_data, capsys) -> None:
    directory, queries, _ = advise_data
    status = main(
        [
            "advise", str(directory), "--where-file", str(queries), "--columns", "user_id",
            "--budget-bits-per-row", "0.000001",
        ]
    )  # fmt: skip
    assert status == 2
    line = _error_line(capsys)
    assert "no candidate fits --budget-bits-per-row 1e-06; the closest: user_id TYPE" in line
    assert line.count("bits/row") == 3


def test_without_matplotlib_the_extra_is_named(advise_data, capsys, monkeypatch) -> None:
    directory, queries, _ = advise_data
    for name in [name for name in sys.modules if name.split(".")[0] == "matplotlib"]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    status = main(["advise", str(directory), "--where-file", str(queries), "--plot", "out.png"])
    assert status == 2
    assert "pip install 'bloomskip[plot]'" in _error_line(capsys)
    assert not Path("out.png").exists()


def test_help_and_import_load_no_plotting_or_progress_library() -> None:
    code = (
        "import sys, bloomskip, bloomskip.advise\n"
        "from bloomskip.cli import build_parser\n"
        "build_parser()\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'matplotlib', 'tqdm', 'pandas', 'pyarrow', 'numpy'}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "[]"
