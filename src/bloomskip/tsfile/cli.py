"""``bloomskip tsfile …``: inspect, lookup, find, verify and repair .tsfile Bloom filters.

This module only declares the parsers; each handler imports the machinery it needs, so that
``bloomskip --help`` stays fast.

Example:
    $ bloomskip tsfile inspect data.tsfile --json
    $ bloomskip tsfile lookup data.tsfile root.sg.d1.s1 'root.sg.设备.温度'
    $ bloomskip tsfile find root.sg.d1.s1 archive/
    $ bloomskip tsfile verify archive/ && echo "no reader misses a series"
    $ bloomskip tsfile repair data.tsfile --variant both
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from typing import Any

from bloomskip._cli import (
    EXIT_ERROR,
    EXIT_NO,
    EXIT_OK,
    os_errors_as_user_errors,
    positive_int,
    print_json,
    probability,
    warn,
)

_VARIANTS = ("both", "signed-tail", "unsigned-tail")
_DEFAULT_ERROR_RATE = 0.05


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``tsfile`` command group and its sub-commands.

    Args:
        subparsers: The top-level ``bloomskip`` sub-parser collection.

    Example:
        >>> parser = argparse.ArgumentParser(prog="bloomskip")
        >>> register(parser.add_subparsers())
        >>> parser.parse_args(["tsfile", "lookup", "f.tsfile", "root.a.s1"]).paths
        ['root.a.s1']
    """
    group = subparsers.add_parser(
        "tsfile", help="Apache TsFile Bloom filters: inspect, lookup, find, verify, repair"
    )
    commands = group.add_subparsers(dest="tsfile_command", metavar="COMMAND", required=True)

    inspect = commands.add_parser(
        "inspect",
        help="format version, series count, the filter's parameters and hash variant",
        description="Exit status 0, or 2 when the file cannot be read or is corrupt.",
    )
    inspect.add_argument("file", help="a .tsfile")
    _add_common(inspect, json_flag=True, charset=True, error_rate=True)
    inspect.set_defaults(func=os_errors_as_user_errors(_inspect))

    lookup = commands.add_parser(
        "lookup",
        help="exact series lookups: the filter first, the metadata index second",
        description="Exit status 0 when every path is present, 1 otherwise.",
    )
    lookup.add_argument("file", help="a .tsfile")
    lookup.add_argument("paths", nargs="+", metavar="PATH", help="series path, e.g. root.sg.d1.s1")
    _add_common(lookup, json_flag=True, charset=True, variant=True)
    lookup.set_defaults(func=os_errors_as_user_errors(_lookup))

    find = commands.add_parser(
        "find",
        help="which files hold a series (files the filter rules out cost no index read)",
        description="Prints the files holding the series (or, on stderr, that none of the N "
        "files read does). Exit status 0 when at least one does, 1 when none does, 2 when a "
        "file could not be read.",
    )
    find.add_argument("path", metavar="PATH", help="series path")
    find.add_argument("locations", nargs="+", metavar="FILE_OR_DIR", help="files or directories")
    _add_common(find, json_flag=True, charset=True, variant=True)
    find.add_argument(
        "--jobs", "-j", type=positive_int, default=1, metavar="N",
        help="worker processes (default 1)",
    )  # fmt: skip
    find.set_defaults(func=os_errors_as_user_errors(_find))

    verify = commands.add_parser(
        "verify",
        help="per file: hash variant, saturation, and, per reader and query path, the series "
        "the filter hides",
        description="For Java (signed-tail) and C++ / PyPI tsfile (unsigned-tail) readers, and "
        "for tree-model series queries (which drop a series whose filter check fails) and "
        "table-model queries (which do not consult the filter), lists the series the filter "
        "hides, and apart from them the series a query path misses whatever the filter holds "
        "(the C++ tree-model query cannot name a device of two tags or with a null tag). Exit "
        "status 1 when the filter hides a series from some reader's query path, or a file is "
        "corrupt; the readers' own misses do not count.",
    )
    verify.add_argument("locations", nargs="+", metavar="FILE_OR_DIR", help="files or directories")
    _add_common(verify, json_flag=True, charset=True, error_rate=True)
    verify.add_argument(
        "--limit", type=positive_int, default=10,
        help="series listed per reader and query path in text output (default 10)",
    )  # fmt: skip
    verify.set_defaults(func=os_errors_as_user_errors(_verify))

    repair = commands.add_parser(
        "repair",
        help="rewrite only the Bloom filter, atomically, from the file's own series",
        description="A symbolic link is written through: the file it finally points to is "
        "repaired in place (the new file is made in that file's directory) and the link stays "
        "a link. Exit status 0, or 2 when the file cannot be read or is corrupt (it is then "
        "left untouched).",
    )
    repair.add_argument(
        "file", help="a .tsfile (rewritten in place; through a symbolic link, its target)"
    )
    repair.add_argument(
        "--variant", choices=_VARIANTS, default="both",
        help="both: Java and C++ readers find every series (default); signed-tail: the spec; "
        "unsigned-tail: the C++ library; a warning on stderr, before anything is written, names "
        "each reader the new filter hides series from, and how many",
    )  # fmt: skip
    _add_common(repair, json_flag=True, charset=True, error_rate=True)
    repair.set_defaults(func=os_errors_as_user_errors(_repair))


def _add_common(
    parser: argparse.ArgumentParser,
    *,
    json_flag: bool = False,
    charset: bool = False,
    variant: bool = False,
    error_rate: bool = False,
) -> None:
    if json_flag:
        parser.add_argument("--json", action="store_true", help="print JSON")
    if charset:
        parser.add_argument(
            "--charset", type=_charset, default="utf-8",
            help="charset Java hashes paths in (default utf-8; C++ / PyPI tsfile always use UTF-8)",
        )  # fmt: skip
    if variant:
        parser.add_argument(
            "--variant", choices=_VARIANTS, default="both",
            help="hash variant(s) to trust the filter under; 'both' (default) never rejects a "
            "series any writer could have indexed",
        )  # fmt: skip
    if error_rate:
        parser.add_argument(
            "--error-rate", type=probability, default=_DEFAULT_ERROR_RATE,
            help="the writer sizing's target false-positive rate (default 0.05)",
        )  # fmt: skip


def _progress(items: Iterable, description: str, total: int | None = None) -> Iterable:
    """Wrap ``items`` in a tqdm bar when stderr is a terminal."""
    if not sys.stderr.isatty():
        return items
    from tqdm import tqdm

    return tqdm(items, desc=description, unit="file", file=sys.stderr, total=total)


def _charset(name: str) -> str:
    import codecs

    try:
        codecs.lookup(name)
    except LookupError:
        raise argparse.ArgumentTypeError(f"unknown charset {name!r}") from None
    return name


def _expand(locations: list[str]) -> list:
    from bloomskip.errors import BloomskipError
    from bloomskip.tsfile.find import iter_tsfiles

    try:
        files = list(iter_tsfiles(locations))
    except FileNotFoundError as exc:
        raise BloomskipError(str(exc)) from None
    if not files:
        # Silence would read as "nothing found" or "all files verified".
        raise BloomskipError(f"no .tsfile files in {', '.join(locations)}")
    return files


# ---------------------------------------------------------------------- handlers
def _inspect(args: argparse.Namespace) -> int:
    from bloomskip.tsfile.analysis import analyze_filter
    from bloomskip.tsfile.reader import TsFileReader

    with TsFileReader(args.file, charset=args.charset) as reader:
        analysis = analyze_filter(reader, args.error_rate)
        report = {
            "file": args.file,
            "format_version": reader.version,
            "series_count": analysis.series_count,
            "tables": sorted(reader.metadata.table_roots),
            "table_schemas": sorted(reader.metadata.table_schemas),
            "has_filter": analysis.has_filter,
            "byte_length": analysis.byte_length,
            "bit_count": analysis.bit_count,
            "hash_function_count": analysis.hash_function_count,
            "bits_set": analysis.bits_set,
            "fill_ratio": analysis.fill_ratio,
            "estimated_fpr": analysis.effective_fpr,
            "estimated_items": analysis.to_dict()["estimated_items"],
            "hash_variant": analysis.hash_variant,
            "exact_match": analysis.exact_match,
        }
    if args.json:
        print_json(report, pretty=True)
    else:
        width = max(len(key) for key in report)
        for key, value in report.items():
            print(f"{key:<{width}}  {value}")
    return EXIT_OK


def _lookup(args: argparse.Namespace) -> int:
    from bloomskip.tsfile.reader import TsFileReader

    with TsFileReader(args.file, variant=args.variant, charset=args.charset) as reader:
        results = [reader.lookup(path) for path in args.paths]
    rows = [{"path": r.path, "bloom": r.bloom, "present": r.present} for r in results]
    if args.json:
        print_json(rows, pretty=True)
    else:
        for row in rows:
            print(f"{row['path']}\tbloom={row['bloom']}\tpresent={str(row['present']).lower()}")
    return EXIT_OK if all(row["present"] for row in rows) else EXIT_NO


def _find(args: argparse.Namespace) -> int:
    from bloomskip.tsfile.find import find_series

    files = _expand(args.locations)
    hits: list[str] = []
    errors: list[dict[str, str]] = []
    skipped = 0
    results = find_series(
        args.path, files, variant=args.variant, charset=args.charset, jobs=args.jobs
    )
    # The bar follows answers, not submissions: with --jobs, files are handed out in chunks.
    for result in _progress(results, "find", total=len(files)):
        if result.error is not None:
            errors.append({"file": result.file, "error": result.error})
            print(f"bloomskip: {result.error}", file=sys.stderr)
        elif result.bloom == "absent":
            skipped += 1
        elif result.present:
            hits.append(result.file)
            if not args.json:
                print(result.file, flush=True)
    if args.json:
        print_json(
            {
                "path": args.path,
                "files": hits,
                "files_scanned": len(files),
                "skipped_by_filter": skipped,
                "index_lookups": len(files) - skipped - len(errors),
                "errors": errors,
            },
            pretty=True,
        )
    elif not hits:
        # On stderr: standard output lists files only (``| xargs``), and silence would read as
        # a command that did nothing.
        read = len(files) - len(errors)
        print(
            f"bloomskip: {args.path} not found in {read} files"
            + (f" ({len(errors)} could not be read)" if errors else ""),
            file=sys.stderr,
        )
    if errors:
        return EXIT_ERROR
    return EXIT_OK if hits else EXIT_NO


def _verify(args: argparse.Namespace) -> int:
    from bloomskip.errors import FormatError
    from bloomskip.tsfile.analysis import analyze_filter
    from bloomskip.tsfile.reader import TsFileReader

    files = _expand(args.locations)
    reports: list[dict[str, Any]] = []
    failed = False
    for file in _progress(files, "verify"):
        try:
            with TsFileReader(file, charset=args.charset) as reader:
                analysis = analyze_filter(reader, args.error_rate)
        except (FormatError, OSError) as exc:
            failed = True
            reports.append({"file": str(file), "error": str(exc)})
            if not args.json:
                print(f"{file}: CORRUPT: {exc}")
            continue
        failed |= analysis.false_negatives
        reports.append(analysis.to_dict())
        if not args.json:
            _print_verify_text(analysis, args.limit)
    if args.json:
        print_json(reports, pretty=True)
    return EXIT_NO if failed else EXIT_OK


def _print_verify_text(analysis: Any, limit: int) -> None:
    if not analysis.has_filter:
        print(f"{analysis.file}: OK: no Bloom filter ({analysis.series_count} series)")
        _print_reader_misses(analysis, limit)
        return
    status = "FALSE NEGATIVES" if analysis.false_negatives else "OK"
    print(
        f"{analysis.file}: {status}: variant={analysis.hash_variant} model={analysis.model} "
        f"series={analysis.series_count} bits={analysis.bit_count} k={analysis.hash_function_count}"
        f" fill={analysis.fill_ratio:.3f} effective_fpr={analysis.effective_fpr:.4f}"
        f" (target {analysis.target_fpr:g}{', SATURATED' if analysis.saturated else ''})"
    )
    for reader in analysis.readers().values():
        facts = []
        for query_path in _QUERY_PATH_NAMES:
            fact = reader[query_path]
            if not fact["filter_consulted"]:
                facts.append(f"{_QUERY_PATH_NAMES[query_path]}: filter not consulted, none hidden")
                continue
            hidden = fact["hidden"]
            facts.append(
                f"{_QUERY_PATH_NAMES[query_path]}: "
                + (
                    f"{len(hidden)} series hidden by the filter: {_shown(hidden, limit)}"
                    if hidden
                    else "none hidden"
                )
            )
        print(f"  {reader['name']} ({reader['hash_variant']}): " + "; ".join(facts))
    _print_reader_misses(analysis, limit)


def _print_reader_misses(analysis: Any, limit: int) -> None:
    """One line per reader and query path that misses series by itself: not the filter's
    doing, so neither in the lists above nor in the exit status."""
    for reader in analysis.readers().values():
        for query_path, name in _QUERY_PATH_NAMES.items():
            missed = reader[query_path]["missed_by_reader"]
            if missed:
                print(
                    f"  {reader['name']}: {name} miss {len(missed)} series whatever the filter "
                    f"holds (the reader's own misses, not the filter's): {_shown(missed, limit)}"
                )


def _shown(paths: list[str], limit: int) -> str:
    return ", ".join(paths[:limit]) + (" …" if len(paths) > limit else "")


_QUERY_PATH_NAMES = {
    "tree_model_series_queries": "tree-model series queries",
    "table_model_queries": "table-model queries",
}


def _repair(args: argparse.Namespace) -> int:
    from bloomskip.tsfile.repair import repair_filter

    def warn_hidden(hidden: dict[str, list[str]]) -> None:
        # Before anything is written: the user learns what the variant costs even if the
        # write then fails.
        for line in _hidden_warnings(args.file, args.variant, hidden):
            warn(line)

    result = repair_filter(
        args.file,
        variant=args.variant,
        error_rate=args.error_rate,
        charset=args.charset,
        on_hidden=warn_hidden,
    )
    if args.json:
        print_json(result.to_dict(), pretty=True)
    else:
        through = "" if result.target == result.file else f" (-> {result.target})"
        print(
            f"{result.file}{through}: new {result.variant} filter for {result.series_count} "
            f"series: {result.bit_count} bits, k={result.hash_function_count}, "
            f"{result.new_filter_bytes} bytes (was {result.old_filter_bytes})"
        )
    return EXIT_OK


def _hidden_warnings(file: str, variant: str, hidden: dict[str, list[str]]) -> list[str]:
    """One line per reader a ``variant`` filter hides series from, naming the reader, the query
    path that misses them, how many and the first few."""
    from bloomskip.tsfile.analysis import READERS

    lines = []
    for key, paths in hidden.items():
        reader = READERS[key]
        consulted = [_QUERY_PATH_NAMES[path] for path, on in reader.consults_filter.items() if on]
        shown = ", ".join(paths[:3]) + (", …" if len(paths) > 3 else "")
        lines.append(
            f"{file}: the new {variant} filter hides {len(paths)} series from {reader.name} "
            f"readers ({reader.hash_variant} hash): their {' and '.join(consulted)} return no "
            f"rows for them ({shown}); --variant both serves every reader"
        )
    return lines
