"""Figures: how full each granule's filter is, and what an explanation kept.

* :func:`plot_fill` draws a per-granule fill heatmap, one row per index, saturated granules
  marked (``clickhouse inspect --plot``, ``index status --plot``);
  :func:`plot_part_fill` makes it from a ``clickhouse inspect`` report.
* :func:`plot_explain` draws the rows and granules each index, and each index for each predicate
  atom, keeps (``query --explain --plot``), from ``explain_json``'s facts.
* :func:`save_figure` writes a figure as PNG, SVG or PDF (by the file name), atomically.

matplotlib is the optional ``bloomskip[plot]`` extra: it is imported when a figure is drawn,
never by ``import bloomskip``. Figures are drawn on matplotlib's Agg canvas and never through
``pyplot``, so no window opens and the caller's own matplotlib backend is left alone. Each
function returns the ``matplotlib.figure.Figure``, whose axes labels can be read back.

Example:
    >>> from bloomskip.plots import plot_fill, save_figure  # doctest: +SKIP
    >>> figure = plot_fill([{"name": "i", "fill_ratio": [0.2, 0.9], "saturated": [False, True]}])
    >>> save_figure(figure, "fill.png")  # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bloomskip.errors import BloomskipError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Pixels per inch of the figures (a PNG is its size in inches times this).
DPI = 100
#: Width of every figure, in inches.
WIDTH = 10.0
#: The formats :func:`save_figure` writes, by file name suffix.
FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}
#: Bar labels longer than this are shortened (a long IN list is one atom).
LABEL_CHARACTERS = 48
INSTALL_HINT = "pip install 'bloomskip[plot]'"


def _new_figure(height: float) -> Figure:
    """A figure on the Agg canvas, ``WIDTH`` x ``height`` inches."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise BloomskipError(f"drawing a plot needs matplotlib: {INSTALL_HINT}") from exc
    figure = Figure(figsize=(WIDTH, height), dpi=DPI)
    FigureCanvasAgg(figure)
    return figure


def plot_fill(indexes: Sequence[dict[str, Any]], title: str = "filter fill per granule") -> Figure:
    """A heatmap of each granule's filter fill, one row per index, saturated granules marked.

    Args:
        indexes: Per index ``{"name", "fill_ratio", "saturated"}``: a fill ratio (bits set /
            bits) per granule, and a bool per granule; optional ``"boundaries"``, the granule
            numbers where a new file starts (drawn as thin lines).
        title: The figure's title.

    Returns:
        The figure: x axis ``granule``, y axis ``index``, a colour bar ``fill ratio``.

    Raises:
        BloomskipError: matplotlib is not installed, or there is no index to draw.

    Example:
        >>> figure = plot_fill([{"name": "i", "fill_ratio": [0.1, 1.0], "saturated": [0, 1]}])
        >>> figure.axes[0].get_xlabel()  # doctest: +SKIP
        'granule'
    """
    import numpy as np

    if not indexes:
        raise BloomskipError("nothing to plot: no materialized index")
    widest = max(len(item["fill_ratio"]) for item in indexes)
    grid = np.full((len(indexes), max(widest, 1)), np.nan)
    for row, item in enumerate(indexes):
        grid[row, : len(item["fill_ratio"])] = np.asarray(item["fill_ratio"], np.float64)
    figure = _new_figure(1.6 + 0.45 * len(indexes))
    axes = figure.add_subplot()
    image = axes.imshow(
        np.ma.masked_invalid(grid),
        aspect="auto",
        interpolation="nearest",
        cmap="viridis",
        vmin=0.0,
        vmax=1.0,
        extent=(-0.5, grid.shape[1] - 0.5, len(indexes) - 0.5, -0.5),
    )
    marked = False
    for row, item in enumerate(indexes):
        saturated = np.flatnonzero(np.asarray(item["saturated"], bool))
        if saturated.size:
            axes.scatter(
                saturated,
                np.full(saturated.size, row),
                marker="x",
                s=18,
                color="red",
                linewidths=1.0,
                label=None if marked else "saturated granule",
            )
            marked = True
        for boundary in item.get("boundaries", ()):
            axes.axvline(boundary - 0.5, color="white", linewidth=0.6, alpha=0.6)
    axes.set_yticks(range(len(indexes)), [str(item["name"]) for item in indexes])
    axes.set_xlim(-0.5, grid.shape[1] - 0.5)
    axes.set_xlabel("granule")
    axes.set_ylabel("index")
    axes.set_title(title)
    colorbar = figure.colorbar(image, ax=axes)
    colorbar.set_label("fill ratio (bits set / bits)")
    if marked:
        axes.legend(loc="upper right", fontsize="small", framealpha=0.8)
    figure.tight_layout()
    return figure


def plot_part_fill(report: dict[str, Any]) -> Figure:
    """:func:`plot_fill` of a ``clickhouse inspect`` report (``part_cli.inspect_part``).

    A granule of a multi-column index shows its fullest column.

    Args:
        report: The report, with each index's ``granule_statistics`` (the full view).

    Returns:
        The figure.

    Raises:
        BloomskipError: matplotlib is not installed, or no index is materialized.

    Example:
        >>> plot_part_fill(inspect_part(part))  # doctest: +SKIP
    """
    import numpy as np

    indexes = []
    for entry in report["indexes"]:
        if not entry.get("materialized"):
            continue
        statistics = entry["granule_statistics"]
        granules = np.array([row["granule"] for row in statistics], np.int64)
        fill = np.zeros(int(entry["index_granules"]))
        np.maximum.at(fill, granules, np.array([row["fill_ratio"] for row in statistics]))
        saturated = np.zeros(len(fill), bool)
        saturated[np.asarray(entry["summary"]["saturated_granules"], np.int64)] = True
        indexes.append({"name": entry["name"], "fill_ratio": fill, "saturated": saturated})
    return plot_fill(indexes, f"part {Path(report['part']).name}: filter fill per index granule")


def plot_explain(facts: dict[str, Any]) -> Figure:
    """Bars of the rows and granules kept, per index and per index for each predicate atom.

    Args:
        facts: ``bloomskip.dataset.report.explain_json``'s object.

    Returns:
        The figure: two panels side by side, x axes ``rows kept`` and ``granules kept``, one
        bar per index (``NAME``) and per index evaluating an atom (``ATOM · NAME``), and a
        bar ``all indexes`` (what is read); ``rows matched`` too when the exact filter ran.

    Raises:
        BloomskipError: matplotlib is not installed.

    Example:
        >>> plot_explain(explain_json(result, [])).axes[0].get_xlabel()  # doctest: +SKIP
        'rows kept'
    """
    read = facts["read"]
    bars: list[tuple[str, int, int | None, int | None]] = []  # label, rows, granules, of
    for entry in facts["indexes"]:
        if entry["useful"]:
            bars.append(
                (
                    entry["name"],
                    read["rows"] - entry["rows_skipped"],
                    entry["granules"] - entry["granules_skipped"],
                    entry["granules"],
                )
            )
    for atom in facts["atoms"] or ():
        for entry in atom["indexes"]:
            if entry["useful"]:
                bars.append(
                    (
                        f"{_shortened(atom['predicate'])} · {entry['name']}",
                        read["rows"] - entry["rows_skipped"],
                        entry["granules"] - entry["granules_skipped"],
                        entry["granules"],
                    )
                )
    bars.append(("all indexes", read["rows_to_read"], read["row_groups_to_read"], None))
    if "rows_matched" in read:
        bars.append(("rows matched", read["rows_matched"], read["row_groups_with_match"], None))
    labels = [label for label, *_ in reversed(bars)]
    figure = _new_figure(1.8 + 0.32 * len(bars))
    rows_axes, granules_axes = figure.subplots(1, 2, sharey=True)
    positions = range(len(bars))
    colours = ["tab:gray" if label in ("all indexes", "rows matched") else "tab:blue"
               for label in labels]  # fmt: skip
    rows_axes.barh(positions, [rows for _, rows, _, _ in reversed(bars)], color=colours)
    rows_axes.axvline(read["rows"], color="black", linewidth=0.8, linestyle="--")
    rows_axes.set_yticks(list(positions), labels, fontsize="small")
    rows_axes.set_xlabel("rows kept")
    rows_axes.set_title(f"of {read['rows']:,} rows", fontsize="small")
    granules_axes.barh(positions, [kept for _, _, kept, _ in reversed(bars)], color=colours)
    granules_axes.set_xlabel("granules kept")
    granules_axes.set_title(
        f"of {read['row_groups']:,} row groups (granules per index: its own)", fontsize="small"
    )
    for position, (_, _, kept, of) in zip(positions, reversed(bars), strict=True):
        if of is not None:
            granules_axes.annotate(
                f"/{of}", (kept, position), xytext=(3, 0), textcoords="offset points",
                va="center", fontsize="x-small",
            )  # fmt: skip
    figure.suptitle("what each index keeps", fontsize="medium")
    figure.tight_layout()
    return figure


def _shortened(text: str) -> str:
    return text if len(text) <= LABEL_CHARACTERS else text[: LABEL_CHARACTERS - 1] + "…"


def save_figure(figure: Figure, path: str | os.PathLike[str]) -> None:
    """Write ``figure`` to ``path`` as PNG, SVG or PDF (by its suffix), atomically.

    Args:
        figure: A figure of this module.
        path: The file; ``.png``, ``.svg`` or ``.pdf``.

    Raises:
        BloomskipError: Another suffix, or the file cannot be written.

    Example:
        >>> save_figure(plot_fill([...]), "fill.svg")  # doctest: +SKIP
    """
    import matplotlib

    from bloomskip._atomic import atomic_path

    target = Path(path)
    file_format = FORMATS.get(target.suffix.lower())
    if file_format is None:
        raise BloomskipError(
            f"cannot tell the picture format of {target.name!r}: name it .png, .svg or .pdf"
        )
    try:
        # SVG text stays text (searchable, selectable), not glyph outlines.
        with matplotlib.rc_context({"svg.fonttype": "none"}), atomic_path(target) as temporary:
            figure.savefig(temporary, format=file_format, dpi=DPI)
    except OSError as exc:
        raise BloomskipError(f"cannot write {path}: {exc}") from exc
