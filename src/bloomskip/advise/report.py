"""The text and HTML reports of ``bloomskip advise``.

:func:`text_report` is what the command prints; :func:`html_report` is one self-contained page
(both figures embedded as base64 PNG, no script, no external resource) with the
recommendations, each column's Pareto front, and the queries. Both show each column's compressed
size beside the index's share of it, and end with the one :func:`build_command` that builds
every recommended index.

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


def build_command(dataset: str, indexes: list[str], granule: str | int | None) -> str | None:
    """The one ``bloomskip index build`` command building ``indexes`` (a build has one granule).

    Args:
        dataset: The DATASET argument.
        indexes: The ``--index`` texts, in order.
        granule: Their one ``--granule``.

    Returns:
        The command line, or None without an index.

    Example:
        >>> build_command("logs/", ["v TYPE bloom_filter(0.01)", "m TYPE tokenbf_v1(512, 3, 0)"],
        ...               8192)
        "bloomskip index build logs/ --index 'v TYPE bloom_filter(0.01)' --index 'm TYPE \
tokenbf_v1(512, 3, 0)' --granule 8192"
    """
    if not indexes:
        return None
    options = "".join(f" --index {shlex.quote(index)}" for index in indexes)
    return f"bloomskip index build {shlex.quote(dataset)}{options} --granule {granule}"


def _share(share: float | None) -> str:
    return "-" if share is None else f"{share:.2%}"


def text_report(advice, dataset: str) -> str:
    """The advice as the command prints it: per column its compressed size, the Pareto front
    and the recommendation; then the one build command.

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
        "An index is worth its bytes when an average query of the log saves more of its column "
        "(saved/query) than the index holds (of column).",
    ]
    for recommendation in advice.recommendations:
        column = recommendation.column
        mine = [q for q, cols in advice.queries if column in cols]
        lines.append("")
        noun = "query" if len(mine) == 1 else "queries"
        mine_weight = sum(q.count for q in mine)
        lines.append(
            f"{column}: {len(mine)} {noun} (weight {mine_weight:,}), {mine_weight / weight:.2%} "
            f"of the log's weight; column {recommendation.column_bytes:,} B compressed"
        )
        front = sorted(
            (c for c in advice.candidates if c.column == column and c.pareto),
            key=lambda c: c.index_bytes,
        )
        if front:
            lines.append("  Pareto front (index bytes vs rows read, weighted by count):")
            lines.append(
                f"  {'index bytes':>14} {'of column':>10} {'bits/row':>9} {'rows read':>10} "
                f"{'saved/query':>11}  candidate"
            )
            for c in front:
                lines.append(
                    f"  {c.index_bytes:>14,} {_share(c.index_share):>10} {c.bits_per_row:>9.3f}"
                    f" {c.rows_read_fraction:>10.2%} {c.saved_share:>11.2%}"
                    f"  {c.index} [{granule_label(c.granule)}]"
                )
        if recommendation.index is None:
            lines.append(f"  no index: {recommendation.reason}")
        else:
            lines.append(
                f"  recommended: {recommendation.index} "
                f"[{granule_label(recommendation.granule)}]: reads "
                f"{recommendation.rows_read_fraction:.2%} of the rows, "
                f"{recommendation.index_bytes:,} B ({recommendation.bits_per_row:.3f} bits/row, "
                f"{_share(recommendation.index_share)} of the column); {recommendation.reason}"
            )
            if recommendation.candidate.derivation:
                lines.append(f"    sizing: {recommendation.candidate.derivation}")
        server = recommendation.clickhouse_candidate
        if server is None:
            if recommendation.clickhouse_reason not in ("", recommendation.reason):
                lines.append(f"  ClickHouse: no index: {recommendation.clickhouse_reason}")
            continue
        read = server.clickhouse_rows_read_fraction
        lines.append(
            f"  ClickHouse (index_granularity 8192): reads {read:.2%}"
            f" of the rows (its index granules), {server.index_bytes:,} B "
            f"({_share(server.index_share)} of the column); {recommendation.clickhouse_reason}"
        )
        lines.append(f"    {recommendation.clickhouse_ddl}")
        if server.derivation and server is not recommendation.candidate:
            lines.append(f"    sizing: {server.derivation}")
    lines.append("")
    command = advice.build_command(dataset)
    if command is None:
        lines.append("No index is recommended: nothing to build.")
    else:
        lines.append(
            f"Build every recommended index at once (one build has one granule: "
            f"{granule_label(advice.granule)}, the one saving the most bytes over all columns):"
        )
        lines.append(f"  {command}")
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
            f"<td class=n>{r.column_bytes:,}</td>"
            f"<td class=n>{_share(r.index_share)}</td>"
            f"<td class=n>{r.saved_share:.2%}</td>"
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
            f"<td class=n>{_share(c.index_share)}</td>"
            f"<td class=n>{c.bits_per_row:.3f}</td><td class=n>{c.rows_read_fraction:.2%}</td>"
            f"<td class=n>{c.saved_share:.2%}</td>"
            f"<td class=n>{c.expected_fpr:.4f}</td><td class=n>{fpr}</td></tr>"
        )
    query_rows = [
        f"<tr><td class=n>{q.line}</td><td class=n>{q.count:,}</td><td><code>{e(q.where)}</code>"
        f"</td><td>{e(', '.join(cols))}</td></tr>"
        for q, cols in advice.queries
    ]
    command = advice.build_command(dataset)
    build = (
        f"<p>Every recommended index, built at once at the one granule "
        f"({e(granule_label(advice.granule))}):</p>\n<pre>{e(command)}</pre>"
        if command is not None
        else "<p>No index is recommended: nothing to build.</p>"
    )
    sampled = "all" if advice.sample_rows == advice.rows else f"{advice.sample_rows:,}"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>bloomskip advise: {e(dataset)}</title>
<style>{_STYLE}</style></head>
<body>
<h1>bloomskip advise: {e(dataset)}</h1>
<p>{advice.rows:,} rows ({sampled} measured), {len(advice.queries)} queries,
{len(advice.candidates)} candidates measured in {advice.seconds:.1f} s. Rows read are the rows
the exact filter still reads after the index, over all rows, weighted by query count. An index
is worth its bytes when an average query of the log saves more of its column (saved per query)
than the index holds (share of the column's compressed bytes).</p>
<h2>Recommendations</h2>
<table><tr><th>column</th><th>index</th><th>granule</th><th>rows read</th><th>index bytes</th>
<th>bits/row</th><th>column bytes (compressed)</th><th>index share of column</th>
<th>saved per query</th><th>ClickHouse DDL</th><th>why</th></tr>
{"".join(rows)}</table>
{build}
<h2>Index bytes vs rows read</h2>
{image(pareto_figure(advice), "Pareto plot: index bytes against rows read")}
<h2>False-positive rate vs bits per row</h2>
{image(fpr_figure(advice), "false-positive rate against bits per row")}
<h2>Pareto fronts</h2>
<table><tr><th>column</th><th>candidate</th><th>granule</th><th>index bytes</th>
<th>share of column</th><th>bits/row</th><th>rows read</th><th>saved per query</th>
<th>expected fpr</th><th>measured fpr</th></tr>
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
