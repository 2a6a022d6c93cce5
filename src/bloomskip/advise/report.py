"""The text and HTML reports of ``bloomskip advise``.

:func:`text_report` is what the command prints; :func:`html_report` is one self-contained page
(both figures embedded as base64 PNG, no script, no external resource) with the
recommendations, each column's Pareto front, and the queries.

Example:
    >>> print(text_report(advice, "logs/"))  # doctest: +SKIP
    bloomskip advise logs/: 5,000,000 rows (all measured), 20 queries ...
"""

from __future__ import annotations

import base64
import html
import os
import shlex

from bloomskip.advise.candidates import granule_label
from bloomskip.errors import BloomskipError


def build_command(dataset: str, recommendation) -> str | None:
    """The ``bloomskip index build`` command line of a recommendation (None without an index).

    Example:
        >>> from bloomskip.advise.advisor import Recommendation
        >>> r = Recommendation("v", "v TYPE bloom_filter(0.01)", 8192, None, 0.1, 10, 1.0, "")
        >>> build_command("logs/", r)
        "bloomskip index build logs/ --index 'v TYPE bloom_filter(0.01)' --granule 8192"
    """
    if recommendation.index is None:
        return None
    return (
        f"bloomskip index build {shlex.quote(dataset)} --index {shlex.quote(recommendation.index)}"
        f" --granule {recommendation.granule}"
    )


def text_report(advice, dataset: str) -> str:
    """The advice as the command prints it: per column the Pareto front and the recommendation.

    Args:
        advice: An :class:`~bloomskip.advise.advisor.Advice`.
        dataset: The DATASET argument (for the build command).

    Returns:
        Lines of text, ending with a newline.
    """
    sampled = "all measured" if advice.sample_rows == advice.rows else (
        f"{advice.sample_rows:,} measured"
    )  # fmt: skip
    weight = sum(q.count for q, _ in advice.queries)
    lines = [
        f"bloomskip advise {dataset}: {advice.rows:,} rows ({sampled}), "
        f"{len(advice.queries)} queries (weight {weight:,}), {len(advice.candidates)} candidates "
        f"in {advice.seconds:.1f} s ({len(advice.candidates) / advice.seconds:.2f}/s)",
    ]
    for recommendation in advice.recommendations:
        column = recommendation.column
        mine = [q for q, cols in advice.queries if column in cols]
        lines.append("")
        noun = "query" if len(mine) == 1 else "queries"
        lines.append(f"{column}: {len(mine)} {noun} (weight {sum(q.count for q in mine):,})")
        front = sorted(
            (c for c in advice.candidates if c.column == column and c.pareto),
            key=lambda c: c.index_bytes,
        )
        if front:
            lines.append("  Pareto front (index bytes vs rows read, weighted by count):")
            lines.append(f"  {'index bytes':>14} {'bits/row':>9} {'rows read':>10}  candidate")
            for c in front:
                lines.append(
                    f"  {c.index_bytes:>14,} {c.bits_per_row:>9.3f} {c.rows_read_fraction:>10.2%}"
                    f"  {c.index} [{granule_label(c.granule)}]"
                )
        if recommendation.index is None:
            lines.append(f"  no index: {recommendation.reason}")
            continue
        lines.append(
            f"  recommended: {recommendation.index} [{granule_label(recommendation.granule)}]: "
            f"reads {recommendation.rows_read_fraction:.2%} of the rows, "
            f"{recommendation.index_bytes:,} B ({recommendation.bits_per_row:.3f} bits/row); "
            f"{recommendation.reason}"
        )
        lines.append(f"    {build_command(dataset, recommendation)}")
        if recommendation.candidate.derivation:
            lines.append(f"    sizing: {recommendation.candidate.derivation}")
        server = recommendation.clickhouse_candidate
        if server is None:
            lines.append(f"  ClickHouse: no index: {recommendation.clickhouse_reason}")
            continue
        read = server.clickhouse_rows_read_fraction
        lines.append(
            f"  ClickHouse (index_granularity 8192): reads {read:.2%}"
            f" of the rows (its index granules), {server.index_bytes:,} B; "
            f"{recommendation.clickhouse_reason}"
        )
        lines.append(f"    {recommendation.clickhouse_ddl}")
        if server.derivation and server is not recommendation.candidate:
            lines.append(f"    sizing: {server.derivation}")
    return "\n".join(lines) + "\n"


_STYLE = """
body { font-family: sans-serif; margin: 2em; color: #222; background: #fff; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #bbb; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }
th { background: #e8eef7; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
code { font-size: 0.9em; }
img { max-width: 100%; border: 1px solid #ddd; }
"""


def html_report(advice, dataset: str) -> str:
    """The advice as one self-contained HTML page.

    Args:
        advice: An :class:`~bloomskip.advise.advisor.Advice`.
        dataset: The DATASET argument (for the build commands).

    Returns:
        The page.

    Raises:
        BloomskipError: matplotlib is not installed (``pip install 'bloomskip[plot]'``).
    """
    from bloomskip.advise.figures import fpr_figure, pareto_figure, png_bytes

    def image(figure, alt: str) -> str:
        data = base64.b64encode(png_bytes(figure)).decode("ascii")
        return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'

    e = html.escape
    rows = []
    for r in advice.recommendations:
        rows.append(
            "<tr>"
            f"<td>{e(r.column)}</td>"
            f"<td><code>{e(r.index or 'none')}</code></td>"
            f"<td>{e(granule_label(r.granule) if r.granule is not None else '')}</td>"
            f"<td class=n>{r.rows_read_fraction:.2%}</td>"
            f"<td class=n>{r.index_bytes:,}</td>"
            f"<td class=n>{r.bits_per_row:.3f}</td>"
            f"<td><code>{e(r.clickhouse_ddl or r.clickhouse_reason or '')}</code>"
            + (
                f"<br><small>reads {r.clickhouse_candidate.clickhouse_rows_read_fraction:.2%}"
                " of the rows (its index granules)</small>"
                if r.clickhouse_candidate is not None
                else ""
            )
            + "</td>"
            f"<td>{e(r.reason)}"
            + (
                f"<br><small>{e(r.candidate.derivation)}</small>"
                if r.candidate is not None and r.candidate.derivation
                else ""
            )
            + "</td></tr>"
        )
    front_rows = []
    for c in sorted(
        (c for c in advice.candidates if c.pareto), key=lambda c: (c.column, c.index_bytes)
    ):
        fpr = "" if c.measured_fpr is None else f"{c.measured_fpr:.4f}"
        front_rows.append(
            f"<tr><td>{e(c.column)}</td><td><code>{e(c.index)}</code></td>"
            f"<td>{e(granule_label(c.granule))}</td><td class=n>{c.index_bytes:,}</td>"
            f"<td class=n>{c.bits_per_row:.3f}</td><td class=n>{c.rows_read_fraction:.2%}</td>"
            f"<td class=n>{c.expected_fpr:.4f}</td><td class=n>{fpr}</td></tr>"
        )
    query_rows = [
        f"<tr><td class=n>{q.line}</td><td class=n>{q.count:,}</td><td><code>{e(q.where)}</code>"
        f"</td><td>{e(', '.join(cols))}</td></tr>"
        for q, cols in advice.queries
    ]
    builds = [build_command(dataset, r) for r in advice.recommendations if r.index is not None]
    sampled = "all" if advice.sample_rows == advice.rows else f"{advice.sample_rows:,}"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>bloomskip advise: {e(dataset)}</title>
<style>{_STYLE}</style></head>
<body>
<h1>bloomskip advise: {e(dataset)}</h1>
<p>{advice.rows:,} rows ({sampled} measured), {len(advice.queries)} queries,
{len(advice.candidates)} candidates measured in {advice.seconds:.1f} s. Rows read are the rows
the exact filter still reads after the index, over all rows, weighted by query count.</p>
<h2>Recommendations</h2>
<table><tr><th>column</th><th>index</th><th>granule</th><th>rows read</th><th>index bytes</th>
<th>bits/row</th><th>ClickHouse DDL</th><th>why</th></tr>
{"".join(rows)}</table>
<pre>{e(chr(10).join(builds))}</pre>
<h2>Index bytes vs rows read</h2>
{image(pareto_figure(advice), "Pareto plot: index bytes against rows read")}
<h2>False-positive rate vs bits per row</h2>
{image(fpr_figure(advice), "false-positive rate against bits per row")}
<h2>Pareto fronts</h2>
<table><tr><th>column</th><th>candidate</th><th>granule</th><th>index bytes</th>
<th>bits/row</th><th>rows read</th><th>expected fpr</th><th>measured fpr</th></tr>
{"".join(front_rows)}</table>
<h2>Queries</h2>
<table><tr><th>line</th><th>count</th><th>WHERE</th><th>columns</th></tr>
{"".join(query_rows)}</table>
</body></html>
"""


def write_html_report(advice, dataset: str, path: str | os.PathLike) -> None:
    """Write :func:`html_report` to ``path``, atomically.

    Raises:
        BloomskipError: matplotlib is missing, or the file cannot be written.

    Example:
        >>> write_html_report(advice, "logs/", "report.html")  # doctest: +SKIP
    """
    from bloomskip._atomic import write_atomically

    page = html_report(advice, dataset).encode("utf-8")
    try:
        write_atomically(path, page)
    except OSError as exc:
        raise BloomskipError(f"cannot write {os.fspath(path)}: {exc.strerror or exc}") from exc
