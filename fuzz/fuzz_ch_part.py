"""Whole MergeTree parts written by ClickHouse, one file of them replaced by the input.

The first byte chooses a part (from make_seeds.py), the second one of its files; the rest is the
file's new content. Reading the part's indexes must then give a bloomskip error naming the part,
or the answers of the intact part: the granules each index keeps for a predicate and the bits of
every granule; only an index whose files a corruption hid (a member renamed in skp_idx.packed)
may instead keep every granule (a corrupt part never loses a granule).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from common import main, require_work, selector

from bloomskip.clickhouse.part import Part
from bloomskip.clickhouse.part_cli import explain_part, inspect_part
from bloomskip.errors import BloomskipError

PREDICATE = "v = 5 OR hasToken(s, 'w12') OR s LIKE '%w2%' OR lc = 'c3'"
#: One index of each kind and shape (scalar, two columns, tokens, n-grams) keeps executions fast.
INDEXES = ["i_v", "i_multi", "i_tok", "i_ng"]
TEMPLATES = require_work("parts")
SCRATCH = Path(tempfile.mkdtemp(prefix="bloomskip-fuzz-part-"))


def _answers(opened: Part) -> dict[str, tuple]:
    """Per index: the granules the predicate keeps, and its bits (None: its files not found)."""
    explained = explain_part(opened, PREDICATE, INDEXES)["indexes"]
    inspected = {entry["name"]: entry for entry in inspect_part(opened, INDEXES)["indexes"]}
    answers = {}
    for entry in explained:
        stored = inspected[entry["name"]]
        bits = None
        if stored["materialized"]:
            rows = stored["granule_statistics"]
            bits = (stored["index_granules"], stored["uncompressed_bytes"],
                    [row["bits_set"] for row in rows])  # fmt: skip
        answers[entry["name"]] = ((entry["granules_total"], entry["selected"]), bits)
    return answers


def _check(answers: dict, intact: dict) -> None:
    """The intact answers, or every granule kept for an index whose files were hidden."""
    assert answers.keys() == intact.keys()
    for name, (selection, bits) in answers.items():
        if bits is None and intact[name][1] is not None:
            total, selected = selection
            assert selected == list(range(total)), name
        else:
            assert (selection, bits) == intact[name], name


def _load() -> list[tuple[Path, str, list[Path], dict]]:
    parts = []
    for sql in sorted(TEMPLATES.glob("*.sql")):
        work = SCRATCH / sql.stem
        shutil.copytree(TEMPLATES / sql.stem, work)
        table_sql = sql.read_text()
        answers = _answers(Part.open(work, table_sql))
        parts.append((work, table_sql, sorted(work.iterdir()), answers))
    return parts


PARTS = _load()


def test_one_input(data: bytes) -> None:
    choice, rest = selector(data, len(PARTS))
    work, table_sql, files, intact = PARTS[choice]
    number, content = selector(rest, len(files))
    target = files[number]
    original = (TEMPLATES / work.name / target.name).read_bytes()
    target.write_bytes(content)
    try:
        try:
            answers = _answers(Part.open(work, table_sql))
        except BloomskipError as exc:
            assert str(work) in str(exc), exc
            return
        _check(answers, intact)
    finally:
        target.write_bytes(original)


if __name__ == "__main__":
    main(test_one_input)
