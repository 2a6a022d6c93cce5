"""Human-readable pruning reports (``bloomskip query --explain``) and query output writers."""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from bloomskip._atomic import atomic_path, write_atomically
from bloomskip.dataset.prune import Explanation
from bloomskip.errors import BloomskipError, FormatError

OUTPUT_FORMATS = ("table", "csv", "json", "parquet")


#: The exact filter of ``--analyze`` reads the kept row groups of a file this many rows at a time.
OBSERVE_CHUNK_ROWS = 1 << 20


@dataclass
class Observation:
    """Where the rows matching a WHERE are, among the row groups an explanation keeps.

    Made by :func:`observe_matches` (``query --explain --analyze``): the exact filter ran over
    every kept row group. A row group or granule the index skipped holds no matching row (a
    Bloom filter has no false negatives), so the figures cover the whole dataset.

    Attributes:
        rows_matched: Rows satisfying the WHERE.
        unit_match: Per file, a bool per row group: it holds a matching row.
        granule_match: Per file, a bool per sidecar granule (None for a file without a valid
            sidecar entry): it holds a matching row.
        atoms: For a WHERE of several predicate atoms, the same for each atom alone that some
            index evaluates (over the row groups those indexes keep for it).
    """

    rows_matched: int
    unit_match: list
    granule_match: list
    atoms: dict = field(default_factory=dict)


def observe_matches(
    result: Explanation, where: str, table_files: dict | None = None
) -> Observation:
    """Run the exact filter over the kept row groups and find the ones holding a match.

    Only the columns the WHERE reads are read, a chunk of :data:`OBSERVE_CHUNK_ROWS` rows of a
    file at a time, each row numbered within its file. DuckDB applies the same translated WHERE
    (ClickHouse's typing, over the explanation's schema) as a query does, so the rows found are
    the rows a query returns.

    Args:
        result: From ``Dataset.explain`` (its schema known) for ``where``.
        where: The ClickHouse WHERE.
        table_files: For a Delta or Iceberg table, its ``TableFile`` per key: its partition
            values fill their columns, and the rows its snapshot deleted do not count.

    Returns:
        An :class:`Observation`.

    Raises:
        UnsupportedPredicateError: The WHERE has no exact translation.
        BloomskipError: DuckDB rejects it, or the explanation has no schema.

    Example:
        >>> observe_matches(ds.explain("k = 5"), "k = 5").rows_matched  # doctest: +SKIP
        7
    """
    import numpy as np

    from bloomskip.dataset.prune import atom_outcomes

    observation = _observe(result, where, table_files)
    atoms = atom_outcomes(result) or []
    if _several_atoms(atoms):
        for atom in atoms:
            useful = [item for item in atom.indexes if item.useful]
            if not useful:
                continue
            keep = [
                np.logical_or.reduce([item.keep[i] for item in useful])
                for i in range(len(result.files))
            ]
            observation.atoms[atom.predicate] = _observe(
                replace(result, keep=keep), atom.predicate, table_files
            )
    return observation


def _observe(result: Explanation, where: str, table_files: dict | None) -> Observation:
    """:func:`observe_matches` for ``where`` alone, over the row groups ``result`` keeps."""
    import duckdb
    import numpy as np
    import pyarrow as pa

    from bloomskip.dataset.scan.query import ROW_COLUMN, _rejected, connect, interrupting_on_sigint
    from bloomskip.dataset.sql.translate import (
        clickhouse_to_duckdb,
        column_kinds,
        referenced_columns,
    )

    if result.schema_source is None:
        raise BloomskipError("this explanation has no schema: make it with Dataset.explain")
    schema = result.schema_source()
    condition = clickhouse_to_duckdb(where, column_kinds(schema))
    # A name the schema lacks (a lambda's parameter, a misspelt column) is DuckDB's to judge.
    columns = [name for name in referenced_columns(where) if name in schema.names]
    table_files = table_files or {}
    unit_match, granule_match = [], []
    total = 0
    connection = connect()
    cursor = connection.cursor()
    try:
        for state, keep in zip(result.files, result.keep, strict=True):
            rows = np.asarray(state.layout.rows, np.int64)
            found = [np.zeros(0, np.int64)]
            groups = np.flatnonzero(keep)
            chunk_of = (np.cumsum(rows[groups]) - 1) // OBSERVE_CHUNK_ROWS if groups.size else []
            for chunk in np.split(groups, np.flatnonzero(np.diff(chunk_of)) + 1):
                if not chunk.size:
                    continue
                table_file = table_files.get(state.relative_path)
                table, positions = _read_rows(state, chunk, columns, schema, table_file)
                table = table.append_column(ROW_COLUMN, pa.array(positions))
                cursor.register("bloomskip_observed", table)
                sql = f'SELECT "{ROW_COLUMN}" FROM bloomskip_observed WHERE {condition}'
                try:
                    with interrupting_on_sigint(cursor):
                        matched = cursor.execute(sql).fetchnumpy()[ROW_COLUMN]
                except (duckdb.Error, RuntimeError) as exc:
                    raise _rejected(where, exc) from exc
                finally:
                    cursor.unregister("bloomskip_observed")
                found.append(np.asarray(matched, np.int64))
            matched = np.concatenate(found)
            total += len(matched)
            unit_match.append(_holding(rows, matched))
            granule_match.append(
                _holding(np.asarray(state.entry.granule_rows, np.int64), matched)
                if state.entry is not None
                else None
            )
    finally:
        cursor.close()
        connection.close()
    return Observation(total, unit_match, granule_match)


def _holding(sizes, positions):
    """Bool per consecutive range of ``sizes`` rows: it holds one of the row ``positions``."""
    import numpy as np

    holds = np.zeros(len(sizes), bool)
    holds[np.searchsorted(np.cumsum(sizes), positions, side="right")] = True
    return holds


def _read_rows(state, groups, columns: list[str], schema, table_file):
    """The ``columns`` of some row groups of a file (typed as ``schema``) and each row's number
    in the file; rows a table's snapshot deleted are left out."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.dataset as pads
    import pyarrow.fs as pafs

    from bloomskip.dataset.prune import _fragment_table, _held_by_field_id, _partition_expression

    rows = np.asarray(state.layout.rows, np.int64)
    starts = np.cumsum(rows) - rows
    lengths = rows[groups]
    # Row i of the concatenated groups is row (start of its group + offset in it) of the file.
    positions = np.repeat(starts[groups] - (np.cumsum(lengths) - lengths), lengths) + np.arange(
        int(lengths.sum()), dtype=np.int64
    )
    if state.source.format == "parquet":
        filesystem = state.source.filesystem or pafs.LocalFileSystem()
        parquet = pads.ParquetFileFormat()
        fragment = parquet.make_fragment(
            str(state.source.path),
            filesystem,
            _partition_expression(table_file, schema),
            row_groups=[int(g) for g in groups],
        )
        held = _held_by_field_id(table_file, state, fragment)
        if held is None:
            data = pads.FileSystemDataset([fragment], schema, parquet, filesystem)
            table = data.to_table(columns=columns)
        else:  # a table's columns under other names in this file: read by field id
            table = _fragment_table(fragment, schema, held, columns)
    else:
        reader = pa.ipc.open_file(pa.memory_map(str(state.source.path)))
        stored = pa.Table.from_batches([reader.get_batch(int(g)) for g in groups])
        # As the dataset's schema types them; a column this file lacks reads as nulls.
        table = stored.select([])
        for name in columns:
            column_type = schema.field(name).type
            if name in stored.column_names:
                table = table.append_column(name, stored.column(name).cast(column_type))
            else:
                table = table.append_column(name, pa.nulls(stored.num_rows, column_type))
    if table.num_rows != len(positions):
        raise FormatError(
            f"holds {table.num_rows} rows in row groups {groups[:3].tolist()}…, its layout "
            f"says {len(positions)}",
            source=str(state.source.path),
        )
    if table_file is not None and table_file.deleted is not None:
        alive = ~np.isin(positions, table_file.deleted)
        table, positions = table.filter(pa.array(alive)), positions[alive]
    return table, positions


def explain_json(
    result: Explanation, columns: list[str], observation: Observation | None = None
) -> dict:
    """What each index skipped and what is left to read, as one JSON-ready object.

    Args:
        result: The pruning result.
        columns: Columns the query reads (bytes are counted over these; all when empty).
        observation: Where the matching rows are (:func:`observe_matches`), when the exact
            filter ran (``--analyze``): the observed false positives are then reported.

    Returns:
        ``{"table", "indexes", "atoms", "across", "read", "avoided", "io", "analyzed",
        "warnings", "files_changed", "files_not_indexed"}``.

        ``table`` (a Delta or Iceberg table, else None): ``format``, ``snapshot``,
        ``snapshot_files``, ``files_kept`` (by the table's partition values and statistics),
        ``pruning_predicate`` (what they were given, or None) and ``files_changed_behind``
        (files whose size in storage is not the one the table's metadata states: scanned,
        never pruned).

        ``indexes``, one per index: ``name``, ``definition``, ``useful``, ``note`` (why it was
        not used), ``granules`` (indexed granules considered), ``granules_skipped``,
        ``rows_skipped``, ``row_groups_skipped`` and ``bytes_skipped`` (of the columns read;
        None when the files' footers were not read), ``skipped_granules`` (per file
        ``{"file", "granules": [[first, last], ...]}``, inclusive runs of sidecar granule
        numbers), ``saturated`` (it can evaluate the WHERE yet keeps every granule),
        ``mean_fill_ratio`` and ``mean_estimated_fpr`` (over its granules, a granule's fullest
        column; None when it was not evaluated), ``expected_false_positives_if_absent`` (the
        granules its fill would keep were the value in none) and, with an observation,
        ``observed`` (None for an index not evaluated): ``granules_kept``,
        ``granules_with_match``, ``false_positives`` (granules kept that held no matching row)
        and ``expected_false_positives`` (the sum of ``fill_ratio ** hash_functions`` over the
        granules that held no matching row: the rate of one probed value or token; a predicate
        needing several tokens at once expects fewer, one of several values more). These
        count against the whole WHERE: a granule another atom rules out counts too; each
        atom's own (``atoms``) are the index's false positives proper.

        ``atoms``: per predicate atom (:func:`~bloomskip.dataset.prune.predicate_atoms`; None
        past :data:`~bloomskip.dataset.prune.MAX_ATOMS` atoms): ``predicate``, ``pruned_by``
        (names of the indexes that skip a granule for it alone), ``saturated`` (some index can
        evaluate it, none skips a granule), ``rows_matched`` (with an observation, else None)
        and ``indexes`` (per index the fields above but the bytes, ``observed`` for the atom
        alone).

        ``across`` (None unless tried: an OR or NOT over atoms that different indexes
        evaluate, see :func:`~bloomskip.dataset.prune.decide_across_indexes`): ``granules``,
        and the ``granules_skipped`` and ``rows_skipped`` once each atom is decided by the
        indexes that evaluate it and the WHERE's AND / OR combines those verdicts.

        ``read``: ``files``, ``files_to_read``, ``row_groups``, ``row_groups_to_read``,
        ``rows``, ``rows_to_read``, ``bytes``, ``bytes_to_read`` (None when not known) and,
        with an observation, ``rows_matched``, ``row_groups_with_match`` and
        ``row_groups_read_without_match``.

        ``avoided``: what a scan of every row group would read that this one does not:
        ``files`` (not opened), ``row_groups``, ``rows``, ``bytes`` (column chunks of the
        columns read; None when not known), ``row_group_reads`` (one coalesced read of column
        chunks per row group), ``footer_reads`` (files left out whose footer pruning did not
        read: a segmented index's) and ``requests`` (their sum).

        ``io``: the requests and bytes the index cost (``index_requests``, ``index_bytes``) and
        ``data_footers_read``, on a store that counts them (else empty). ``analyzed``: whether
        the exact filter ran.

        ``files_changed`` and ``files_not_indexed``: the files scanned whole because they
        changed since they were indexed, or are not in the index
        (:attr:`~bloomskip.dataset.prune.Explanation.changed_files`,
        :attr:`~bloomskip.dataset.prune.Explanation.unindexed_files`); ``warnings`` sums them
        up in a line each.

    Example:
        >>> explain_json(result, ["user_id"])["indexes"][0]["granules_skipped"]  # doctest: +SKIP
        303
    """
    from bloomskip.dataset.prune import atom_outcomes

    unit_rows = [state.layout.rows for state in result.files]
    unit_bytes = [state.layout.bytes_of(columns) for state in result.files]
    # Files read from an object store's index are described by their granules alone (their
    # footers are not fetched to prune), so their bytes are known only where they were read:
    # the files with surviving row groups, when the explanation was asked to describe them.
    sized = all(state.layout.column_bytes for state in result.files)
    survivors_sized = all(
        state.layout.column_bytes
        for state, keep in zip(result.files, result.keep, strict=True)
        if keep.any()
    )
    conditions: dict = {}  # each atom's compiled condition, shared by its verdict and saturation
    memo: dict = {}  # each index's fill statistics
    known_bytes = unit_bytes if sized else None
    indexes = [
        _index_json(outcome, result, known_bytes, observation, conditions, memo)
        for outcome in result.indexes
    ]
    outcomes = result.atoms if result.atoms is not None else atom_outcomes(result, conditions)
    atoms = _atoms_json(outcomes, result, observation, conditions, memo)
    read = _read_json(result, unit_rows, unit_bytes, sized, survivors_sized, observation)
    return {
        "table": _table_json(result.table),
        "indexes": indexes,
        "atoms": atoms,
        "across": _across_json(result.across),
        "read": read,
        "avoided": _avoided_json(read, result.io),
        "io": {key: int(value) for key, value in result.io.items()},
        "analyzed": observation is not None,
        "warnings": list(result.warnings),
        "files_changed": list(result.changed_files),
        "files_not_indexed": list(result.unindexed_files),
    }


def _across_json(across) -> dict | None:
    if across is None:
        return None
    return {
        "granules": across.granules,
        "granules_skipped": across.granules_skipped,
        "rows_skipped": across.rows_skipped,
    }


def _index_json(
    outcome,
    result: Explanation,
    unit_bytes: list | None,
    observation: Observation | None,
    conditions: dict,
    memo: dict,
) -> dict:
    """One index's entry in :func:`explain_json`'s ``indexes``: its verdict for the WHERE.

    Args:
        outcome: The index's verdict for the WHERE.
        result: The pruning result.
        unit_bytes: Per file, the bytes of each row group's columns read; None when some
            file's are not known.
        observation: Where the matching rows are, when the exact filter ran.
        conditions: Each atom's compiled condition, filled as they are compiled.
        memo: Each index's fill statistics, filled as they are computed.

    Returns:
        The entry, with the row groups and bytes the index skips.
    """
    skipped_bytes = None
    if outcome.useful and unit_bytes is not None:
        skipped_bytes = sum(
            int(sizes[~keep].sum()) for sizes, keep in zip(unit_bytes, outcome.keep, strict=True)
        )
    skips = {
        "row_groups_skipped": int(sum(int((~keep).sum()) for keep in outcome.keep)),
        "bytes_skipped": skipped_bytes,
    }
    return _verdict_json(outcome, result, result.where, observation, conditions, memo, skips)


def _verdict_json(
    outcome,
    result: Explanation,
    where: str | None,
    observation: Observation | None,
    conditions: dict,
    memo: dict,
    skips: dict | None = None,
) -> dict:
    """One index's entry for ``where`` (the WHERE or one atom) in :func:`explain_json`.

    Args:
        outcome: The index's verdict for ``where``.
        result: The pruning result.
        where: The predicate the verdict is for.
        observation: Where the rows matching ``where`` are, or None.
        conditions: Each atom's compiled condition, filled as they are compiled.
        memo: Each index's fill statistics, filled as they are computed.
        skips: The WHERE's ``row_groups_skipped`` and ``bytes_skipped``, placed between the
            counts and the fill; None for an atom.

    Returns:
        The counts and skipped granules, ``skips``, the fill and, with an observation,
        ``observed``.
    """
    entry = {
        **_outcome_json(outcome, result, where, conditions),
        **(skips or {}),
        **_fill(outcome, result, memo),
    }
    if observation is not None:
        entry["observed"] = _observed(outcome, result, observation, memo)
    return entry


def _atoms_json(
    atoms, result: Explanation, observation: Observation | None, conditions: dict, memo: dict
) -> list[dict] | None:
    """:func:`explain_json`'s ``atoms``: per predicate atom the indexes' verdicts for it alone.

    Args:
        atoms: ``atom_outcomes`` of the result, or None past ``MAX_ATOMS`` atoms.
        result: The pruning result.
        observation: Where the matching rows are, when the exact filter ran.
        conditions: Each atom's compiled condition, shared with the indexes' verdicts.
        memo: Each index's fill statistics, shared with the indexes' verdicts.

    Returns:
        One entry per atom, or None when ``atoms`` is None.
    """
    if atoms is None:
        return None
    entries = []
    for atom in atoms:
        seen = None
        if observation is not None:
            # One atom: the WHERE's own observation; several: the atom's, if it was made.
            seen = observation.atoms.get(atom.predicate) if _several_atoms(atoms) else observation
        per_index = [
            _verdict_json(item, result, atom.predicate, seen, conditions, memo)
            for item in atom.indexes
        ]
        useful = [item for item in per_index if item["useful"]]
        entries.append(
            {
                "predicate": atom.predicate,
                "pruned_by": [item["name"] for item in useful if item["granules_skipped"]],
                "saturated": bool(useful) and all(item["saturated"] for item in useful),
                "rows_matched": seen.rows_matched if seen is not None else None,
                "indexes": per_index,
            }
        )
    return entries


def _several_atoms(atoms) -> bool:
    """Whether a WHERE's predicate atoms are described (and observed) one by one.

    A WHERE of a single atom is that atom: its indexes' verdicts and observation are the
    WHERE's own. None (past ``MAX_ATOMS`` atoms) is not described atom by atom either.
    """
    return atoms is not None and len(atoms) > 1


def _read_json(
    result: Explanation,
    unit_rows: list,
    unit_bytes: list,
    sized: bool,
    survivors_sized: bool,
    observation: Observation | None,
) -> dict:
    """:func:`explain_json`'s ``read``: the files, row groups, rows and bytes, and those left.

    Args:
        result: The pruning result.
        unit_rows: Per file, the rows of each row group.
        unit_bytes: Per file, the bytes of each row group's columns read.
        sized: Every file's bytes are known.
        survivors_sized: The bytes of every file with a row group to read are known.
        observation: Where the matching rows are, when the exact filter ran.

    Returns:
        The ``read`` object.
    """
    import numpy as np

    pairs = list(zip(unit_rows, unit_bytes, result.keep, strict=True))
    read_bytes = int(sum(int(sizes[keep].sum()) for _, sizes, keep in pairs))
    read = {
        "files": len(result.files),
        "files_to_read": int(sum(bool(keep.any()) for keep in result.keep)),
        "row_groups": int(sum(len(rows) for rows in unit_rows)),
        "row_groups_to_read": int(sum(int(np.count_nonzero(keep)) for keep in result.keep)),
        "rows": int(sum(int(rows.sum()) for rows in unit_rows)),
        # The access plan's rows: with granules of a row count, those of the kept granules.
        "rows_to_read": result.plan.rows,
        "bytes": int(sum(int(sizes.sum()) for sizes in unit_bytes)) if sized else None,
        "bytes_to_read": read_bytes if sized or survivors_sized else None,
    }
    if observation is not None:
        with_match = sum(int(match.sum()) for match in observation.unit_match)
        read.update(
            {
                "rows_matched": observation.rows_matched,
                "row_groups_with_match": with_match,
                "row_groups_read_without_match": read["row_groups_to_read"] - with_match,
            }
        )
    return read


def _avoided_json(read: dict, io: dict) -> dict:
    """:func:`explain_json`'s ``avoided``: what a scan of every row group would read more.

    Args:
        read: :func:`_read_json`'s object.
        io: The explanation's I/O counters (``data_footers_read`` when pruning read footers).

    Returns:
        The ``avoided`` object.
    """
    footer_reads = read["files"] - read["files_to_read"] if "data_footers_read" in io else 0
    row_group_reads = read["row_groups"] - read["row_groups_to_read"]
    return {
        "files": read["files"] - read["files_to_read"],
        "row_groups": row_group_reads,
        "rows": read["rows"] - read["rows_to_read"],
        # Every file's bytes known: so are those read.
        "bytes": read["bytes"] - read["bytes_to_read"] if read["bytes"] is not None else None,
        "row_group_reads": row_group_reads,
        "footer_reads": footer_reads,
        "requests": row_group_reads + footer_reads,
    }


def _table_json(table: dict | None) -> dict | None:
    """:func:`explain_json`'s ``table``: a Delta or Iceberg snapshot's own file pruning."""
    if table is None:
        return None
    return {
        "format": table["format"],
        "snapshot": table["snapshot"],
        "snapshot_files": table["files"],
        "files_kept": table["files_kept"],
        "pruning_predicate": table["predicate"] or None,
        "files_changed_behind": list(table.get("changed_behind", ())),
    }


def _index_name(definition: str) -> str:
    from bloomskip.clickhouse.ddl import parse_index_definition

    return parse_index_definition(definition).name


def _outcome_json(outcome, result: Explanation, where: str | None, conditions: dict) -> dict:
    """The counts of one index's verdict (for the WHERE or one atom) and the granules it skips."""
    from bloomskip.dataset.prune import saturated

    skipped = []
    for state, keep in zip(result.files, outcome.granule_keep, strict=False):
        if keep is not None and not keep.all():
            skipped.append({"file": state.relative_path, "granules": _runs(~keep)})
    return {
        "name": _index_name(outcome.definition),
        "definition": outcome.definition,
        "useful": outcome.useful,
        "note": outcome.note or ("" if outcome.useful else "not used"),
        "granules": outcome.granules,
        "granules_skipped": outcome.granules_skipped,
        "rows_skipped": outcome.rows_skipped,
        "skipped_granules": skipped,
        "saturated": where is not None and saturated(outcome, where, conditions),
    }


def _runs(mask) -> list[list[int]]:
    """``[True, True, False, True]`` -> ``[[0, 1], [3, 3]]``: inclusive runs of True."""
    import numpy as np

    edges = np.diff(np.concatenate(([0], np.asarray(mask, np.int8), [0])))
    starts, stops = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return [[int(a), int(b) - 1] for a, b in zip(starts, stops, strict=True)]


def _granule_fprs(outcome, result: Explanation, memo: dict) -> dict:
    """An evaluated index's fill: ``per_file`` (each sidecar granule's estimated
    false-positive rate for one probe, the largest over the index's columns, 0 for an empty
    granule; None for a file it does not cover), ``mean_fill_ratio`` and
    ``mean_estimated_fpr``. Computed once per index (``memo``)."""
    import numpy as np

    spec, index, usable = outcome.engine
    if id(index) in memo:
        return memo[id(index)]
    statistics = index.granule_statistics()
    columns = index.column_count
    fpr = statistics.column("estimated_fpr").to_numpy().reshape(-1, columns).max(axis=1)
    per_file: list = [None] * len(result.files)
    position = 0
    for i in usable:
        rows = np.asarray(result.files[i].entry.granule_rows, np.int64)
        values = np.zeros(len(rows))
        nonempty = np.flatnonzero(rows > 0)
        values[nonempty] = fpr[position : position + len(nonempty)]
        position += len(nonempty)
        per_file[i] = values
    fills = statistics.column("fill_ratio").to_numpy()
    memo[id(index)] = {
        "per_file": per_file,
        "mean_fill_ratio": float(fills.mean()) if len(fills) else None,
        "mean_estimated_fpr": float(fpr.mean()) if len(fpr) else None,
    }
    return memo[id(index)]


def _fill(outcome, result: Explanation, memo: dict) -> dict:
    """An index's mean fill and estimated false-positive rate over its granules, and the false
    positives that predicts if no granule held the value (None when it was not evaluated)."""
    if outcome.engine is None:
        return {
            "mean_fill_ratio": None,
            "mean_estimated_fpr": None,
            "expected_false_positives_if_absent": None,
        }
    fill = _granule_fprs(outcome, result, memo)
    return {
        "mean_fill_ratio": fill["mean_fill_ratio"],
        "mean_estimated_fpr": fill["mean_estimated_fpr"],
        "expected_false_positives_if_absent": round(
            float(sum(values.sum() for values in fill["per_file"] if values is not None)), 3
        ),
    }


def _observed(outcome, result: Explanation, observation: Observation, memo: dict) -> dict | None:
    """Granules an index kept that held no matching row, and how many its fill predicts."""
    if outcome.engine is None:
        return None
    kept = with_match = 0
    expected = 0.0
    fprs = _granule_fprs(outcome, result, memo)["per_file"]
    for i, keep in enumerate(outcome.granule_keep):
        if keep is None:
            continue
        match = observation.granule_match[i]
        kept += int(keep.sum())
        with_match += int((keep & match).sum())
        expected += float(fprs[i][~match].sum())
    return {
        "granules_kept": kept,
        "granules_with_match": with_match,
        "false_positives": kept - with_match,
        "expected_false_positives": round(expected, 3),
    }


def explain_text(
    result: Explanation,
    columns: list[str],
    observation: Observation | None = None,
    facts: dict | None = None,
) -> str:
    """Describe what each index skipped and what is left to read.

    Args:
        result: The pruning result.
        columns: Columns the query reads (bytes are counted over these; all when empty).
        observation: Where the matching rows are, when the exact filter ran (``--analyze``).
        facts: :func:`explain_json` of the same arguments, when already made.

    Returns:
        Multi-line text: per index the granules, rows and bytes it skips on its own (and, with
        an observation, its false positives next to the number its fill predicts), a note for
        an index saturated for the WHERE, per predicate atom the indexes that prune it, then
        the total, what was avoided, and any warnings; the facts of :func:`explain_json`.

    Example:
        >>> print(explain_text(result, ["user_id"]))  # doctest: +SKIP
        index INDEX user_id user_id TYPE bloom_filter(0.01) GRANULARITY 1
          granules skipped: 303/305, rows skipped: 19,857,408, bytes skipped: 158.9 MB
        ...
    """
    facts = facts if facts is not None else explain_json(result, columns, observation)
    lines = _table_text(facts["table"])
    for outcome in facts["indexes"]:
        lines.extend(_index_text(outcome, facts["atoms"]))
    lines.extend(_atoms_text(facts["atoms"]))
    lines.extend(_across_text(facts["across"]))
    lines.extend(_read_text(facts["read"], observation is not None))
    lines.append(_avoided_text(facts["avoided"]))
    lines.extend(_io_text(facts["io"], facts["read"]))
    lines.extend(f"warning: {warning}" for warning in facts["warnings"])
    lines.extend(_scanned_text(facts))
    return "\n".join(lines)


def explanation_text(result: Explanation) -> str:
    """``str(explanation)``: :func:`explain_text` as ``bloomskip query --explain`` prints it
    without ``--select`` or ``--analyze`` (bytes over every column)."""
    return explain_text(result, [])


def _scanned_text(facts: dict) -> list[str]:
    """One line per file scanned whole for being out of date, under the warnings that sum
    them up."""
    table = facts["table"] or {}
    named = (
        ("changed since indexed", facts["files_changed"]),
        ("not indexed", facts["files_not_indexed"]),
        ("changed behind the table's back", table.get("files_changed_behind", ())),
    )
    return [f"  {label}: {name}" for label, names in named for name in names]


def _table_text(table: dict | None) -> list[str]:
    """The line of a Delta or Iceberg snapshot's own file pruning (none for other data)."""
    if table is None:
        return []
    return [
        f"table {table['format']} snapshot {table['snapshot']}: its partition values and "
        f"statistics keep {table['files_kept']}/{table['snapshot_files']} files"
        + (
            f" (by {table['pruning_predicate']})"
            if table["pruning_predicate"]
            else " (nothing to prune by)"
        )
    ]


def _index_text(outcome: dict, atoms: list | None) -> list[str]:
    """The lines of one index's verdict for the WHERE.

    Args:
        outcome: Its entry in :func:`explain_json`'s ``indexes``.
        atoms: :func:`explain_json`'s ``atoms``.

    Returns:
        Its definition, then what it skips (or why it was not used), its observed false
        positives and why it keeps every granule, when it does.
    """
    lines = [f"index {outcome['definition']}"]
    if not outcome["useful"]:
        return [*lines, f"  {outcome['note']}"]
    skipped = outcome["bytes_skipped"]
    lines.append(
        f"  granules skipped: {outcome['granules_skipped']}/{outcome['granules']}, "
        f"rows skipped: {outcome['rows_skipped']:,}"
        + (f", bytes skipped: {human_size(skipped)}" if skipped is not None else "")
    )
    # A single atom is the WHERE: what was observed are the index's own false positives, and
    # its saturation is told here; of several, they count against the whole WHERE (a granule
    # another atom rules out counts too) and each atom's are told with the atoms.
    one_atom = atoms is not None and len(atoms) == 1
    observed = outcome.get("observed")
    if observed is not None:
        lines.append(
            f"  observed: {observed['false_positives']} of {observed['granules_kept']} kept "
            + (
                "granules held no matching row (false positives)"
                if one_atom
                else "granules held no row matching the WHERE"
            )
            + f"; {_expected_from_fill(observed)}"
        )
    if outcome["saturated"] and one_atom:
        lines.append("  " + _saturation(outcome))
    elif outcome["granules"] and not outcome["granules_skipped"]:
        lines.append(
            f"  keeps all {outcome['granules']} granules"
            + (
                ": see the predicate atoms"
                if outcome["saturated"]
                else " whatever its filters hold (a negation, or an OR with what it "
                "cannot evaluate)"
            )
        )
    return lines


def _atoms_text(atoms: list | None) -> list[str]:
    """Per predicate atom of several, the verdict of each index that can evaluate it."""
    if atoms is None:
        return ["predicate atoms: too many to describe one by one"]
    if not _several_atoms(atoms):
        return []
    lines = ["predicate atoms, each alone:"]
    for atom in atoms:
        lines.append(f"  {_short(atom['predicate'])}:")
        useful = [item for item in atom["indexes"] if item["useful"]]
        if not useful:
            lines.append("    no index can evaluate it")
        for item in useful:
            lines.append(f"    {item['name']}: " + _atom_verdict(item))
    return lines


def _across_text(across: dict | None) -> list[str]:
    if across is None:
        return []
    return [
        "atoms combined (each decided by the indexes that evaluate it): granules skipped: "
        f"{across['granules_skipped']}/{across['granules']}, "
        f"rows skipped: {across['rows_skipped']:,}"
    ]


def _read_text(read: dict, analyzed: bool) -> list[str]:
    """What is left to read and, when the exact filter ran, where the matching rows were."""
    # Each figure is what is read of the whole: "9 of 120 row groups (in 8 of 60 files)".
    lines = [
        f"read: {read['row_groups_to_read']} of {read['row_groups']} row groups (in "
        f"{read['files_to_read']} of {read['files']} files), {read['rows_to_read']:,} of "
        f"{read['rows']:,} rows"
        + (
            f", {human_size(read['bytes_to_read'])} of {human_size(read['bytes'])}"
            if read["bytes"] is not None
            else ""
        )
    ]
    if analyzed:
        lines.append(
            f"matched: {read['rows_matched']:,} rows in {read['row_groups_with_match']} row "
            f"groups; {read['row_groups_read_without_match']} row groups read held none"
        )
    return lines


def _avoided_text(avoided: dict) -> str:
    """What a scan of every row group would read more."""
    return (
        f"avoided: {avoided['row_groups']} row groups, {avoided['files']} files, "
        f"{avoided['rows']:,} rows"
        + (f", {human_size(avoided['bytes'])}" if avoided["bytes"] is not None else "")
        + f"; {avoided['requests']} read requests"
    )


def _io_text(io: dict, read: dict) -> list[str]:
    """The requests and bytes the index cost and the data reads left, on a store counting
    them (nothing elsewhere)."""
    lines = []
    if io:
        lines.append(
            f"index I/O: {io['index_requests']} requests, {human_size(io['index_bytes'])} read"
        )
    if "data_footers_read" in io:
        lines.append(
            f"data I/O: {read['row_groups_to_read']} row groups in {read['files_to_read']} "
            "files to read"
            + (
                f", {human_size(read['bytes_to_read'])} of column chunks"
                if read["bytes_to_read"] is not None
                else ""
            )
            + f"; {io['data_footers_read']} footers read to tell"
        )
    return lines


def _expected_from_fill(observed: dict) -> str:
    """The false positives an index's fill predicts, as every observed verdict words them."""
    return f"{observed['expected_false_positives']:.1f} expected from the fill"


def _saturation(item: dict) -> str:
    """The note for an index saturated for a predicate: it keeps every granule, and why."""
    text = f"saturated for this predicate: keeps all {item['granules']} granules"
    observed = item.get("observed")
    if observed is not None:
        if observed["false_positives"] == 0:
            return (
                f"keeps all {item['granules']} granules: every one holds a matching row, so no "
                "index could skip any"
            )
        return (
            f"{text}; {observed['false_positives']} of them held no matching row "
            f"({_expected_from_fill(observed)})"
        )
    absent = item.get("expected_false_positives_if_absent")
    if absent is None:
        return text
    if absent >= item["granules"] / 2:
        verdict = (
            "the filters are too full (clickhouse inspect or index status --plot shows their fill)"
        )
    elif any(kind in item["definition"] for kind in ("ngrambf_v1", "tokenbf_v1", "sparse_grams")):
        # A text index tests the predicate's n-grams or tokens, not the value: a needle absent
        # from the data can have every one of them in every granule.
        units = {"ngrambf_v1": "n-gram", "sparse_grams": "sparse gram", "tokenbf_v1": "token"}
        unit = next(units[kind] for kind in units if kind in item["definition"])
        verdict = (
            f"each {unit} it looks for is likely in every granule (smaller granules, or data "
            "ordered by this column, would let it skip)"
        )
    else:
        verdict = "the value is likely in every granule"
    return (
        f"{text}; were the value in none, the fill (mean {item['mean_fill_ratio']:.2f}) would "
        f"keep {absent:.1f}: {verdict} (--analyze counts the false positives)"
    )


def _atom_verdict(item: dict) -> str:
    """One index's verdict for one predicate atom."""
    if item["saturated"]:
        return _saturation(item)
    text = f"skips {item['granules_skipped']}/{item['granules']} granules"
    if not item["granules_skipped"]:
        text += " (this predicate can never skip a granule of this index)"
    observed = item.get("observed")
    if observed is not None:
        text += (
            f"; {observed['false_positives']} of {observed['granules_kept']} kept held no "
            f"matching row ({_expected_from_fill(observed)})"
        )
    return text


def _short(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def human_size(count: int) -> str:
    """A byte count in B, KB, MB or GB (powers of 1000), as the reports print it.

    Args:
        count: Bytes.

    Returns:
        The text, e.g. ``"158.9 MB"``.

    Example:
        >>> human_size(158_900_000)
        '158.9 MB'
    """
    value = float(count)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{count} B"


def write_output(table, output_format: str, output: str | None, connection=None) -> None:
    """Write a query result to ``output`` (a file) or standard output.

    Args:
        table: The ``pyarrow.Table`` to write.
        output_format: ``table``, ``csv``, ``json`` (one JSON object per line) or ``parquet``.
        output: A file path; None for standard output.
        connection: The DuckDB connection that formats the table and writes CSV and JSON (a
            cursor of it); a new one when None. Opening one costs 20-30 ms of a command.

    Raises:
        BloomskipError: Parquet to a terminal, an unknown format, or an unwritable ``output``.
    """
    import duckdb

    from bloomskip._cli import interrupted
    from bloomskip.dataset.scan.query import interrupting_on_sigint

    if output_format not in OUTPUT_FORMATS:
        raise BloomskipError(f"unknown format {output_format!r}; use one of {OUTPUT_FORMATS}")
    if output_format == "table":
        text = "(no columns)\n"
        if table.num_columns:
            with _cursor_of(connection) as cursor:
                text = str(cursor.from_arrow(table))
        if output is None:
            sys.stdout.write(text)
        else:
            _to_file(output, lambda: write_atomically(output, text.encode("utf-8")))
        return
    if output_format == "parquet" and output is None and sys.stdout.isatty():
        raise BloomskipError("--format parquet writes binary: give --output FILE or redirect")

    def write(path: Path) -> None:
        if output_format == "parquet":
            import pyarrow.parquet as pq

            pq.write_table(table, path)
            return
        # DuckDB writes every Arrow type (lists included) as CSV or JSON lines.
        options = "FORMAT csv, HEADER true" if output_format == "csv" else "FORMAT json"
        with _cursor_of(connection) as cursor:  # its own view names
            try:
                cursor.register("result", table)
                escaped = str(path).replace("'", "''")
                with interrupting_on_sigint(cursor):
                    cursor.execute(f"COPY result TO '{escaped}' ({options})")
            except (duckdb.Error, RuntimeError) as exc:
                if interrupted(exc):
                    raise KeyboardInterrupt from exc
                raise

    if output is not None:

        def write_file() -> None:
            with atomic_path(output) as temporary:
                write(temporary)

        _to_file(output, write_file)
        return
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / f"result.{output_format}"
        write(path)
        sys.stdout.flush()
        with open(path, "rb") as handle:
            shutil.copyfileobj(handle, sys.stdout.buffer)
        sys.stdout.buffer.flush()


@contextlib.contextmanager
def _cursor_of(connection):
    """A cursor of ``connection``, or of a connection opened (and closed) for it when None."""
    from bloomskip.dataset.scan.query import connect

    owned = connect() if connection is None else None
    cursor = (owned or connection).cursor()
    try:
        yield cursor
    finally:
        cursor.close()
        if owned is not None:
            owned.close()


def _to_file(output: str, writer) -> None:
    """Run ``writer()``, reporting an unwritable ``output`` as a user error, not a traceback."""
    try:
        writer()
    except OSError as exc:
        raise BloomskipError(f"cannot write {output}: {exc}") from exc
