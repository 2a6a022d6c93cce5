"""Real .tsfile files written by PyPI ``tsfile`` (the C++ writer), and what that library reads back.

The writers are PyPI ``tsfile``'s own (TsFileWriter for the tree model, TsFileTableWriter for the
table model); the expected series come from PyPI ``tsfile``'s reader, never from bloomskip.
"""

from __future__ import annotations

import datetime
import itertools
from dataclasses import dataclass
from pathlib import Path

import tsfile as pypi_tsfile
from tsfile import (
    ColumnCategory,
    ColumnSchema,
    Field,
    RowRecord,
    TableSchema,
    Tablet,
    TimeseriesSchema,
    TSDataType,
    TsFileTableWriter,
    TsFileWriter,
)


@dataclass(frozen=True)
class CorpusFile:
    """A generated file and the series PyPI ``tsfile`` reports for it."""

    name: str
    path: Path
    model: str  # "tree" or "table"
    series: frozenset[tuple[tuple[str | None, ...], str]]  # (device segments, measurement)
    rows_per_series: int

    @property
    def non_ascii(self) -> bool:
        return any(
            any(not (s or "").isascii() for s in device) or not name.isascii()
            for device, name in self.series
        )


def write_tree(
    path: Path,
    devices: dict[str, list[str]],
    rows: int = 3,
    flushes: int = 1,
    data_types: dict[str, TSDataType] | None = None,
) -> None:
    """Write tree-model series ``device -> measurements``; ``flushes`` chunk groups per device."""
    data_types = data_types or {}
    writer = TsFileWriter(str(path))
    for device, measurements in devices.items():
        for name in measurements:
            writer.register_timeseries(
                device, TimeseriesSchema(name, data_types.get(name, TSDataType.INT64))
            )
    timestamp = 0
    for flush in range(flushes):
        for device, measurements in devices.items():
            for row in range(rows):
                values = [
                    Field(name, _value(_type(data_types, name), row), _type(data_types, name))
                    for name in measurements
                ]
                writer.write_row_record(RowRecord(device, timestamp + row, values))
        timestamp += rows
        if flush + 1 < flushes:
            writer.flush()
    writer.close()


def _type(data_types: dict[str, TSDataType], name: str) -> TSDataType:
    return data_types.get(name, TSDataType.INT64)


def _value(data_type: TSDataType, row: int) -> object:
    return {
        TSDataType.BOOLEAN: row % 2 == 0,
        TSDataType.INT32: row,
        TSDataType.INT64: row * 10,
        TSDataType.FLOAT: row + 0.5,
        TSDataType.DOUBLE: row + 0.25,
        TSDataType.TEXT: f"text{row}",
        TSDataType.STRING: f"string{row}",
        TSDataType.TIMESTAMP: 1_700_000_000_000 + row,
        TSDataType.DATE: datetime.date(2024, 1, 1 + row),
        TSDataType.BLOB: bytes([row, 0xFF]),
    }[data_type]


def write_table(
    path: Path,
    table: str,
    tags: list[str],
    fields: list[str],
    devices: list[tuple[str | None, ...]],
    rows: int = 2,
) -> None:
    """Write a table-model table: ``rows`` rows per device (tag tuple), INT64 fields."""
    schema = TableSchema(
        table,
        [ColumnSchema(tag, TSDataType.STRING, ColumnCategory.TAG) for tag in tags]
        + [ColumnSchema(name, TSDataType.INT64, ColumnCategory.FIELD) for name in fields],
    )
    writer = TsFileTableWriter(str(path), schema)
    total = rows * len(devices)
    tablet = Tablet(
        tags + fields, [TSDataType.STRING] * len(tags) + [TSDataType.INT64] * len(fields), total
    )
    index = 0
    for device_number, device in enumerate(devices):
        for row in range(rows):
            tablet.add_timestamp(index, row)
            for tag, value in zip(tags, device, strict=True):
                if value is not None:
                    tablet.add_value_by_name(tag, index, value)
            for name in fields:
                tablet.add_value_by_name(name, index, device_number * 100 + row)
            index += 1
    writer.write_table(tablet)
    writer.close()


def pypi_series(path: Path, model: str) -> frozenset[tuple[tuple[str | None, ...], str]]:
    """The series PyPI ``tsfile``'s reader lists, plus the aligned time column of table devices.

    PyPI's listing leaves the time column out; the writers index it (and add it to the filter)
    with an empty measurement name, which the filter-equality tests confirm.
    """
    reader = pypi_tsfile.TsFileReader(str(path))
    try:
        groups = reader.get_timeseries_metadata()
    finally:
        reader.close()
    series = set()
    for segments, group in groups.items():
        device = tuple(segments)
        for metadata in group.timeseries:
            series.add((device, metadata.measurement_name))
        if model == "table":
            series.add((device, ""))
    return frozenset(series)


def pypi_row_counts(path: Path, corpus_file: CorpusFile) -> dict[str, int]:
    """Rows PyPI ``tsfile``'s reader returns per series path (its own Bloom check included)."""
    reader = pypi_tsfile.TsFileReader(str(path))
    counts: dict[str, int] = {}
    try:
        for device, name in sorted(corpus_file.series, key=repr):
            if name == "":
                continue
            dotted = ".".join("null" if s is None else s for s in device)
            if corpus_file.model == "tree":
                counts[f"{dotted}.{name}"] = pypi_tree_rows(reader, dotted, name)
                continue
            result = reader.query_table(device[0], [name], tag_filter=_tag_filter(reader, device))
            count = 0
            while result.next():
                count += not result.is_null_by_name(name)
            result.close()
            counts[f"{dotted}.{name}"] = count
    finally:
        reader.close()
    return counts


def pypi_tree_rows(reader: pypi_tsfile.TsFileReader, device: str, measurement: str) -> int:
    """Rows PyPI's ``query_timeseries`` returns for one series (its own Bloom check included)."""
    result = reader.query_timeseries(device, [measurement], 0, 1 << 62)
    count = 0
    while result.next():
        count += 1
    result.close()
    return count


def pypi_table_rows(
    reader: pypi_tsfile.TsFileReader, device: tuple[str | None, ...], name: str
) -> list[tuple[int, object]]:
    """``(time, value)`` rows PyPI's ``query_table`` returns for one table-model series, its
    device selected by tag values (a null tag by ``tag_is_null``)."""
    result = reader.query_table(device[0], [name], tag_filter=_tag_filter(reader, device))
    rows = []
    while result.next():
        if not result.is_null_by_name(name):
            rows.append((result.get_value_by_index(1), result.get_value_by_name(name)))
    result.close()
    return rows


def pypi_tree_series_rows(
    reader: pypi_tsfile.TsFileReader, device: str, measurement: str
) -> list[tuple[int, object]]:
    """``(time, value)`` rows PyPI's ``query_timeseries`` returns for one series."""
    result = reader.query_timeseries(device, [measurement], 0, 1 << 62)
    rows = []
    while result.next():
        rows.append((result.get_value_by_index(1), result.get_value_by_index(2)))
    result.close()
    return rows


def _tag_filter(reader: pypi_tsfile.TsFileReader, device: tuple[str | None, ...]) -> object:
    schema = reader.get_table_schema(device[0])
    tag_names = [
        c.get_column_name() for c in schema.get_columns() if c.get_category() == ColumnCategory.TAG
    ]
    condition = None
    # A Java device drops trailing null tags: the tags it lacks are null.
    for tag, value in itertools.zip_longest(tag_names, device[1:]):
        atom = pypi_tsfile.tag_is_null(tag) if value is None else pypi_tsfile.tag_eq(tag, value)
        condition = atom if condition is None else condition & atom
    return condition


CJK_DEVICE = "root.sg.设备"
CJK_MEASUREMENT = "温度"


def build_corpus(directory: Path) -> dict[str, CorpusFile]:
    """Write every corpus file into ``directory`` and read its series back with PyPI."""
    specs: dict[str, tuple[str, int, object]] = {}

    def tree(name: str, devices: dict[str, list[str]], rows: int = 3, **options: object) -> None:
        path = directory / f"{name}.tsfile"
        write_tree(path, devices, rows=rows, **options)  # type: ignore[arg-type]
        specs[name] = ("tree", rows, path)

    def table(name: str, rows: int = 2, **options: object) -> None:
        path = directory / f"{name}.tsfile"
        write_table(path, rows=rows, **options)  # type: ignore[arg-type]
        specs[name] = ("table", rows, path)

    tree("tree_1", {"root.sg.d1": ["s1"]})
    tree(
        "tree_10_cjk",
        {"root.sg.d1": ["s1", "s2", "s3", "s4", "s5"],
         CJK_DEVICE: ["s1", CJK_MEASUREMENT, "湿度", "s4", "状态"]},
    )  # fmt: skip
    tree(
        "tree_1000",
        {(f"root.sg.设备{i}" if i % 2 else f"root.sg.d{i}"): ["s1", CJK_MEASUREMENT]
         for i in range(500)},
        rows=1,
    )  # fmt: skip
    tree(
        "tree_wide",
        {"root.wide.d1": [f"m{i}" for i in range(300)],
         "root.wide.设备": [f"温度{i}" for i in range(300)]},
        rows=1,
    )  # fmt: skip
    tree(
        "tree_multiflush",
        {f"root.mf.d{i}": [f"s{j}" for j in range(10)] for i in range(10)},
        rows=2,
        flushes=3,
    )
    # More than 256 x 256 series in one device: the measurement index gets an internal level.
    tree("tree_66k", {"root.h.d1": [f"m{i}" for i in range(66_000)]}, rows=1)
    # The C++ writer counts changes of measurement name: 200 devices of one "s1" count as 1.
    tree("tree_same_measurement", {f"root.same.d{i}": ["s1"] for i in range(200)}, rows=1)
    tree(
        "tree_devices",
        {"root": ["s1"], "root.x": ["s1"], "root.a.b.c": ["s1"], "root.a.b.c.d": ["s1"],
         "root.sg.`a.b`": ["s1"], "x.y.z.w.v.u": ["s1"]},
    )  # fmt: skip
    types = {
        f"m_{t.name.lower()}": t
        for t in (TSDataType.BOOLEAN, TSDataType.INT32, TSDataType.INT64, TSDataType.FLOAT,
                  TSDataType.DOUBLE, TSDataType.TEXT, TSDataType.STRING, TSDataType.TIMESTAMP,
                  TSDataType.DATE, TSDataType.BLOB)
    }  # fmt: skip
    tree("tree_types", {"root.ty.d": list(types)}, data_types=types, flushes=2)
    table(
        "table_small",
        table="t1",
        tags=["region", "dev"],
        fields=["s1", CJK_MEASUREMENT],
        devices=[("bj", "设备"), ("gz", None), ("sh", "d.x"), (None, "null")],
    )
    # Over 256 devices with null tags: internal device nodes whose keys hold null segments.
    null_tag_devices = {
        (
            None if i % 3 == 0 else f"r{i % 7}",
            None if i % 5 == 0 else f"设备{i}" if i % 2 else f"d{i}",
        )
        for i in range(700)
    }
    table(
        "table_null_tags",
        table="tn",
        tags=["region", "dev"],
        fields=["s1"],
        devices=sorted(null_tag_devices, key=repr),
        rows=1,
    )
    table(
        "table_ascii",
        table="Plant",
        tags=["line"],
        fields=["speed", "temp"],
        devices=[(f"l{i}",) for i in range(20)],
    )
    table(
        "table_10k",
        table="big",
        tags=["dev"],
        fields=[f"f{i}" for i in range(9)],
        devices=[(f"设备{i:04d}",) for i in range(1000)],
        rows=1,
    )
    return {
        name: CorpusFile(name, path, model, pypi_series(path, model), rows)  # type: ignore[arg-type]
        for name, (model, rows, path) in specs.items()
    }
