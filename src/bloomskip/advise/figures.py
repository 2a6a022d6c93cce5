"""The figures of ``bloomskip advise`` (the ``[plot]`` extra: matplotlib).

Each function returns a :class:`matplotlib.figure.Figure` drawn on the Agg canvas (no display,
no pyplot state shared with the caller); :func:`save_png` writes one. matplotlib is imported
only here, when a figure is drawn.

Example:
    >>> figure = pareto_figure(advice)  # doctest: +SKIP
    >>> figure.axes[0].get_xlabel()  # doctest: +SKIP
    'index bytes (whole dataset, log scale)'
"""

from __future__ import annotations

import io
import math
import os

from bloomskip.errors import BloomskipError

#: Figure size in inches and resolution: 1000 x 600 pixels.
FIGURE_SIZE = (10.0, 6.0)
DPI = 100

PARETO_X_LABEL = "index bytes (whole dataset, log scale)"
PARETO_Y_LABEL = "rows read after the index (weighted by query count)"
FPR_X_LABEL = "index bits per row"
FPR_Y_LABEL = "false-positive rate (granules)"

_MARKERS = {"bloom_filter": "o", "tokenbf_v1": "s", "ngrambf_v1": "^", "sparse_grams": "D"}


def _figure():
    """A new Figure on the Agg canvas, or the error naming the extra to install."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise BloomskipError(
            f"drawing figures needs matplotlib: pip install 'bloomskip[plot]' ({exc})"
        ) from exc
    figure = Figure(figsize=FIGURE_SIZE, dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def require_matplotlib() -> None:
    """Raise the error naming the ``[plot]`` extra when matplotlib cannot be imported.

    Raises:
        BloomskipError: ``pip install 'bloomskip[plot]'``.
    """
    _figure()


def _palette() -> list:
    """The colours of matplotlib's default property cycle."""
    import matplotlib

    return matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]


def pareto_figure(advice):
    """Index bytes against rows read for every candidate, one colour per column.

    Each column's Pareto front is a line, its recommendation a star; a column with no index
    recommended has a dotted line at 1.0 (reading everything).

    Args:
        advice: An :class:`~bloomskip.advise.advisor.Advice`.

    Returns:
        The ``Figure``.

    Raises:
        BloomskipError: matplotlib is not installed.
    """
    figure = _figure()
    axes = figure.add_subplot()
    colors = _palette()
    for number, recommendation in enumerate(advice.recommendations):
        column = recommendation.column
        color = colors[number % len(colors)]
        mine = [c for c in advice.candidates if c.column == column]
        for kind, marker in _MARKERS.items():
            points = [c for c in mine if c.type == kind]
            if points:
                axes.scatter(
                    [max(c.index_bytes, 1) for c in points],
                    [c.rows_read_fraction for c in points],
                    marker=marker,
                    color=color,
                    alpha=0.45,
                    label=f"{column}: {kind}",
                )
        front = sorted((c for c in mine if c.pareto), key=lambda c: c.index_bytes)
        if front:
            axes.step(
                [max(c.index_bytes, 1) for c in front],
                [c.rows_read_fraction for c in front],
                where="post",
                color=color,
                linewidth=1.5,
            )
        chosen = recommendation.candidate
        if chosen is not None:
            axes.scatter(
                [max(chosen.index_bytes, 1)],
                [chosen.rows_read_fraction],
                marker="*",
                s=320,
                color=color,
                edgecolors="black",
                zorder=5,
                label=f"{column}: recommended",
            )
        else:
            axes.axhline(1.0, color=color, linestyle=":", label=f"{column}: no index")
    axes.set_xscale("log")
    axes.set_ylim(-0.02, 1.05)
    axes.set_xlabel(PARETO_X_LABEL)
    axes.set_ylabel(PARETO_Y_LABEL)
    axes.set_title(
        f"Candidates over {advice.sample_rows:,} of {advice.rows:,} rows: the lower left is better"
    )
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize="small", loc="best")
    return figure


def fpr_figure(advice):
    """False-positive rate against bits per row: theory, the index's estimate, and measured.

    The theory curve is a Bloom filter holding one distinct item per row with the best hash
    count, ``min_k (1 - exp(-k / b)) ** k``; each candidate has its estimate from its fill
    (``fill ** hashes``, hollow) and the rate measured on the queries (granules kept without a
    matching row over granules without one, filled). A measured 0 is drawn at the bottom.

    Args:
        advice: An :class:`~bloomskip.advise.advisor.Advice`.

    Returns:
        The ``Figure``.

    Raises:
        BloomskipError: matplotlib is not installed.
    """
    figure = _figure()
    axes = figure.add_subplot()
    candidates = [c for c in advice.candidates if c.bits_per_row > 0]
    widest = max([c.bits_per_row for c in candidates] + [16.0])
    steps = 200
    xs = [widest * (i + 1) / steps for i in range(steps)]
    theory = [min((1 - math.exp(-k / b)) ** k for k in range(1, 16)) for b in xs]
    axes.plot(xs, theory, color="black", linewidth=1, label="theory: (1-e^(-k/b))^k, best k")
    floor = 1e-4
    colors = _palette()
    for number, (kind, marker) in enumerate(_MARKERS.items()):
        points = [c for c in candidates if c.type == kind]
        if not points:
            continue
        color = colors[number % len(colors)]
        axes.scatter(
            [c.bits_per_row for c in points],
            [max(c.expected_fpr, floor) for c in points],
            marker=marker,
            facecolors="none",
            edgecolors=color,
            label=f"{kind}: expected from fill",
        )
        measured = [c for c in points if c.measured_fpr is not None]
        axes.scatter(
            [c.bits_per_row for c in measured],
            [max(c.measured_fpr, floor) for c in measured],
            marker=marker,
            color=color,
            label=f"{kind}: measured",
        )
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_ylim(floor / 2, 1.5)
    axes.set_xlabel(FPR_X_LABEL)
    axes.set_ylabel(FPR_Y_LABEL)
    axes.set_title("False-positive rate per candidate (a measured 0 is drawn at 1e-4)")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize="small", loc="best")
    return figure


def png_bytes(figure) -> bytes:
    """The figure as PNG bytes (``FIGURE_SIZE`` at ``DPI``)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def save_png(figure, path: str | os.PathLike) -> None:
    """Write the figure as a PNG file, atomically.

    Raises:
        BloomskipError: The file cannot be written.

    Example:
        >>> save_png(pareto_figure(advice), "pareto.png")  # doctest: +SKIP
    """
    from bloomskip._atomic import write_atomically

    try:
        write_atomically(path, png_bytes(figure))
    except OSError as exc:
        raise BloomskipError(f"cannot write {os.fspath(path)}: {exc.strerror or exc}") from exc
