"""Benchmark: ``find`` a series over 2,000 .tsfile files, bloomskip vs PyPI tsfile's own reader.

Writes 2,000 small tree-model files with PyPI ``tsfile`` (20 devices x 5 measurements each, a mix
of ASCII and CJK names; every series sits in 40 of the files), then asks, for 100 present and
100 absent series, "which files hold this series?":

* bloomskip: :func:`bloomskip.tsfile.find.find_series` (tail read, filter check under both hash
  variants, metadata index walk only when the filter passes);
* PyPI tsfile, two ways with its own reader (``tsfile.TsFileReader``):
  ``pypi-query``: ``query_timeseries`` the series; a file holds it when rows come back (the C++
  reader checks its own Bloom filter before the index, research/tsfile.md §7);
  ``pypi-index``: ``get_timeseries_metadata([device])``, the metadata index without the filter.

Both answer the same questions on the same files in the same run; the answers are compared.
Prints files/s for each and the ratio. Each tool is timed ``--repeat`` times, taking turns, and
its best round counts, so that a burst of load on a shared machine does not land on one tool.

Usage:
    python benchmarks/tsfile_find.py [--files 2000] [--queries 100] [--directory DIR] [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

GROUPS = 50
DEVICES_PER_FILE = 20
MEASUREMENTS = ["s0", "s1", "s2", "温度", "湿度"]


def generate(directory: Path, count: int) -> list[Path]:
    """Write ``count`` files; file i holds devices ``root.bench.g{i % 50}.*``."""
    from tsfile import Field, RowRecord, TimeseriesSchema, TSDataType, TsFileWriter

    paths = []
    for index in range(count):
        path = directory / f"part-{index:05d}.tsfile"
        paths.append(path)
        if path.exists():
            continue
        writer = TsFileWriter(str(path))
        group = index % GROUPS
        for device_number in range(DEVICES_PER_FILE):
            device = _device(group, device_number)
            for name in MEASUREMENTS:
                writer.register_timeseries(device, TimeseriesSchema(name, TSDataType.INT64))
            for row in range(2):
                fields = [Field(name, row, TSDataType.INT64) for name in MEASUREMENTS]
                writer.write_row_record(RowRecord(device, index * 10 + row, fields))
        writer.close()
    return paths


def _device(group: int, device_number: int) -> str:
    kind = "设备" if device_number % 2 else "d"
    return f"root.bench.g{group}.{kind}{device_number}"


def queries(count: int) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(device, measurement) pairs: ``count`` present somewhere, ``count`` present nowhere."""
    generator = random.Random(7)
    present, absent = [], []
    while len(present) < count:
        pair = (
            _device(generator.randrange(GROUPS), generator.randrange(DEVICES_PER_FILE)),
            generator.choice(MEASUREMENTS),
        )
        if pair not in present:
            present.append(pair)
    while len(absent) < count:
        group = generator.randrange(GROUPS)
        pair = generator.choice(
            [
                (_device(group, DEVICES_PER_FILE + generator.randrange(100)), "s1"),
                (
                    _device(group, generator.randrange(DEVICES_PER_FILE)),
                    f"s{generator.randrange(3, 99)}",
                ),
                (_device(group, generator.randrange(DEVICES_PER_FILE)), "压力"),
            ]
        )
        if pair not in absent:
            absent.append(pair)
    return present, absent


def bloomskip_find(files: list[Path], device: str, measurement: str) -> tuple[list[str], int]:
    from bloomskip.tsfile.find import find_series

    hits, skipped = [], 0
    for result in find_series(f"{device}.{measurement}", files):
        if result.error:
            raise RuntimeError(result.error)
        skipped += result.bloom == "absent"
        if result.present:
            hits.append(result.file)
    return hits, skipped


def pypi_query_find(files: list[Path], device: str, measurement: str) -> list[str]:
    import tsfile

    hits = []
    for file in files:
        reader = tsfile.TsFileReader(str(file))
        try:
            result = reader.query_timeseries(device, [measurement], 0, 1 << 62)
            found = result.next()
            result.close()
        except tsfile.LibraryError:
            found = False
        finally:
            reader.close()
        if found:
            hits.append(str(file))
    return hits


def pypi_index_find(files: list[Path], device: str, measurement: str) -> list[str]:
    import tsfile

    hits = []
    for file in files:
        reader = tsfile.TsFileReader(str(file))
        try:
            groups = reader.get_timeseries_metadata([device])
        finally:
            reader.close()
        if any(m.measurement_name == measurement for g in groups.values() for m in g.timeseries):
            hits.append(str(file))
    return hits


PYPI_TOOLS = {"pypi-query": pypi_query_find, "pypi-index": pypi_index_find}


def timed(run: Callable[[], object]) -> tuple[float, object]:
    """Return (seconds, result) of one call."""
    started = time.perf_counter()
    result = run()
    return time.perf_counter() - started, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=100, help="present and absent, each")
    parser.add_argument("--directory", type=Path, help="reuse/keep the generated files here")
    parser.add_argument("--repeat", type=int, default=3, help="rounds per tool; the best counts")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        directory = args.directory or Path(scratch)
        directory.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        files = generate(directory, args.files)
        total_bytes = sum(f.stat().st_size for f in files)
        print(
            f"{len(files)} files, {total_bytes / 1e6:.1f} MB, "
            f"{DEVICES_PER_FILE * len(MEASUREMENTS)} series each "
            f"(generated in {time.perf_counter() - started:.1f} s)"
        )
        present, absent = queries(args.queries)
        header = f"{'queries':<8} {'tool':<11} {'files/s':>9} {'skipped':>8} {'hits':>6}"
        print(f"{header} {'bloomskip/tool':>15}")
        for label, pairs in (("present", present), ("absent", absent)):
            checked_files = len(files) * len(pairs)

            def ours(pairs: list[tuple[str, str]] = pairs) -> dict:
                return {pair: bloomskip_find(files, *pair) for pair in pairs}

            tools: dict[str, Callable[[], object]] = {"bloomskip": ours}
            for tool, find in PYPI_TOOLS.items():
                tools[tool] = lambda find=find, pairs=pairs: {
                    pair: sorted(find(files, *pair)) for pair in pairs
                }
            best = dict.fromkeys(tools, float("inf"))
            answers: dict[str, object] = {}
            for _ in range(max(args.repeat, 1)):
                for tool, run in tools.items():
                    seconds, answers[tool] = timed(run)
                    best[tool] = min(best[tool], seconds)
            found: dict = answers["bloomskip"]  # type: ignore[assignment]
            expected = {pair: sorted(hits) for pair, (hits, _) in found.items()}
            skipped = sum(skipped for _, skipped in found.values())
            hit_count = sum(len(hits) for hits in expected.values())
            ours_rate = checked_files / best["bloomskip"]
            print(f"{label:<8} {'bloomskip':<11} {ours_rate:>9,.0f} {skipped:>8} {hit_count:>6}")
            for tool in PYPI_TOOLS:
                if answers[tool] != expected:
                    raise SystemExit(f"answers differ between bloomskip and {tool} ({label})")
                rate = checked_files / best[tool]
                ratio = ours_rate / rate
                print(
                    f"{label:<8} {tool:<11} {rate:>9,.0f} {'-':>8} {hit_count:>6} {ratio:>14.2f}x"
                )


if __name__ == "__main__":
    main()
