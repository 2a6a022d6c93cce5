"""Figures (the ``[plot]`` extra): fill heatmaps and what an explanation keeps, read back with
matplotlib itself (``imread`` for PNG sizes, the returned Figure's axes, the SVG's text)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from matplotlib.image import imread

from bloomskip import Dataset
from bloomskip.dataset.prune import index_fill
from bloomskip.errors import BloomskipError
from bloomskip.plots import DPI, WIDTH, plot_explain, plot_fill, save_figure

WORDS = ["GET", "POST", "alpha", "beta", "gamma", "delta", "error", "timeout"]


def _cli(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bloomskip", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("plots") / "data"
    directory.mkdir()
    rng = np.random.default_rng(3)
    for number in range(2):
        rows = 1000
        k = np.arange(number * rows, (number + 1) * rows) // 4
        picks = rng.integers(0, len(WORDS), (rows, 2)).tolist()
        text = pa.array([f"{WORDS[a]} {WORDS[b]}" for a, b in picks])
        pq.write_table(
            pa.table({"k": k, "s": text}), directory / f"p{number}.parquet", row_group_size=100
        )
    Dataset(directory).build_index(
        ["INDEX k_bf k TYPE bloom_filter(0.05)", "INDEX tiny s TYPE ngrambf_v1(3, 1, 2, 0)"]
    )
    return directory


def _png_shape(path: Path) -> tuple[int, int]:
    image = imread(path)
    return image.shape[0], image.shape[1]


def test_fill_heatmap_marks_the_saturated_granules(data: Path, tmp_path: Path) -> None:
    fill = index_fill(*Dataset(data).index_states(), 0.5)
    assert [item["name"] for item in fill] == ["k_bf", "tiny"]
    assert len(fill[0]["fill_ratio"]) == 20 and fill[0]["boundaries"] == [0, 10]
    # 1 byte of ngram filter holds nothing useful: every granule of "tiny" is saturated.
    assert fill[1]["saturated"].all() and not fill[0]["saturated"].any()
    figure = plot_fill(fill, "fill")
    axes = figure.axes[0]
    assert (axes.get_xlabel(), axes.get_ylabel()) == ("granule", "index")
    assert [tick.get_text() for tick in axes.get_yticklabels()] == ["k_bf", "tiny"]
    assert figure.axes[1].get_ylabel() == "fill ratio (bits set / bits)"
    [marks] = [c for c in axes.collections if len(c.get_offsets())]
    offsets = np.asarray(marks.get_offsets())
    assert offsets[:, 0].tolist() == list(range(20)) and set(offsets[:, 1]) == {1}
    path = tmp_path / "fill.png"
    save_figure(figure, path)
    width, height = figure.get_size_inches() * DPI
    assert _png_shape(path) == (round(height), round(width)) and round(width) == WIDTH * DPI


def test_index_status_plot_writes_png_and_svg(data: Path, tmp_path: Path) -> None:
    png = tmp_path / "status.png"
    result = _cli("index", "status", str(data), "--plot", str(png))
    assert result.returncode == 0, result.stderr
    assert _png_shape(png) == (round((1.6 + 0.45 * 2) * DPI), round(WIDTH * DPI))
    svg = tmp_path / "status.svg"
    assert _cli("index", "status", str(data), "--plot", str(svg)).returncode == 0
    text = svg.read_text()
    assert "<svg" in text and ">granule<" in text and ">tiny<" in text
    assert "saturated granule" in text


def test_a_segmented_index_draws_the_same_fill_as_the_sidecar(data: Path, tmp_path: Path):
    from bloomskip.dataset.backends.lake import LakeDataset

    index = tmp_path / "segments"
    lake = LakeDataset(str(data), index_location=str(index))
    lake.build_index(
        ["INDEX k_bf k TYPE bloom_filter(0.05)", "INDEX tiny s TYPE ngrambf_v1(3, 1, 2, 0)"],
        progress=False,
    )
    states, sidecar = lake.index_states()
    segmented = index_fill(states, sidecar, 0.5)
    sidecar = Dataset(data, sidecar=tmp_path / "one.index")
    sidecar.build_index(
        ["INDEX k_bf k TYPE bloom_filter(0.05)", "INDEX tiny s TYPE ngrambf_v1(3, 1, 2, 0)"],
        progress=False,
    )
    expected = index_fill(*sidecar.index_states(), 0.5)
    for mine, theirs in zip(segmented, expected, strict=True):
        assert np.array_equal(mine["fill_ratio"], theirs["fill_ratio"])
        assert np.array_equal(mine["saturated"], theirs["saturated"])
    png = tmp_path / "segmented.png"
    command = ("index", "status", str(data), "--index-location", str(index), "--plot", str(png))
    result = _cli(*command)
    assert result.returncode == 0, result.stderr
    assert _png_shape(png) == (round((1.6 + 0.45 * 2) * DPI), round(WIDTH * DPI))


def test_explain_plot_draws_rows_and_granules_kept(data: Path, tmp_path: Path) -> None:
    where = "k = 130 AND s LIKE '%zqxj%'"
    result = _cli("query", str(data), "--where", where, "--explain", "--json")
    facts = json.loads(result.stdout)
    figure = plot_explain(facts)
    rows_axes, granules_axes = figure.axes
    assert (rows_axes.get_xlabel(), granules_axes.get_xlabel()) == ("rows kept", "granules kept")
    labels = [tick.get_text() for tick in rows_axes.get_yticklabels()]
    # Bottom to top: each index, each (atom, index), then what is read.
    assert labels[::-1] == [
        "k_bf",
        "tiny",
        "k = 130 · k_bf",
        "s LIKE '%zqxj%' · tiny",
        "all indexes",
    ]
    widths = [patch.get_width() for patch in rows_axes.patches][::-1]
    k_bf = facts["indexes"][0]
    assert widths[0] == facts["read"]["rows"] - k_bf["rows_skipped"] < facts["read"]["rows"]
    assert widths[1] == facts["read"]["rows"]  # the saturated index keeps every row
    assert widths[-1] == facts["read"]["rows_to_read"]
    granules = [patch.get_width() for patch in granules_axes.patches][::-1]
    assert granules[0] == k_bf["granules"] - k_bf["granules_skipped"]
    png = tmp_path / "explain.png"
    run = _cli("query", str(data), "--where", where, "--analyze", "--plot", str(png))
    assert run.returncode == 0, run.stderr
    assert "tiny: saturated for this predicate: keeps all 20 granules; 20 of them" in run.stdout
    assert _png_shape(png) == (round((1.8 + 0.32 * 6) * DPI), round(WIDTH * DPI))


def test_unknown_picture_format_is_one_line(data: Path, tmp_path: Path) -> None:
    result = _cli("index", "status", str(data), "--plot", str(tmp_path / "fill.gif"))
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and ".png, .svg or .pdf" in result.stderr
    with pytest.raises(BloomskipError, match="nothing to plot"):
        plot_fill([])


def test_without_matplotlib_the_error_names_the_extra(data: Path, tmp_path: Path) -> None:
    probe = (
        "import runpy, sys\n"
        "sys.modules['matplotlib'] = None  # as if the [plot] extra were not installed\n"
        f"sys.argv = ['bloomskip', 'index', 'status', {str(data)!r}, '--plot', "
        f"{str(tmp_path / 'x.png')!r}]\n"
        "runpy.run_module('bloomskip', run_name='__main__')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'bloomskip[plot]'" in lines[0], result.stderr
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize(
    "start",
    [
        "import bloomskip",
        "import runpy, sys\nsys.argv = ['bloomskip', '--help']\ntry:\n"
        "    runpy.run_module('bloomskip', run_name='__main__')\nexcept SystemExit:\n    pass",
    ],
)
def test_start_up_imports_neither_matplotlib_nor_pandas(start: str) -> None:
    probe = (
        start + "\nimport sys\nprint(sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('matplotlib', 'pandas')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.strip().splitlines()[-1] == "[]"
