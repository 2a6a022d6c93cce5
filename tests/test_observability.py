"""``query --explain [--analyze] --json``: per index and per predicate atom, which granules were
skipped, the false positives observed next to those the fill predicts, what was avoided, and
the index saturated for a predicate. Every figure is checked against DuckDB reading the files
itself (``file_row_number``) or against the Parquet footers, not against the report's code."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bloomskip import Dataset
from bloomskip.clickhouse.ddl import parse_index_definition
from bloomskip.clickhouse.index import SkipIndex
from bloomskip.dataset.prune import MAX_ATOMS, predicate_atoms

WORDS = ["GET", "POST", "alpha", "beta", "gamma", "delta", "error", "timeout", "cart", "user"]
SEPARATORS = [" ", "-", "/", ", ", ":"]
# DuckDB's own reading of hasToken(s, W) on this data: W between separators (or the ends).
TOKEN_SQL = "regexp_matches(s, '(^|[ /,:-]){word}([ /,:-]|$)')"
K_BF = "INDEX k_bf k TYPE bloom_filter(0.05)"
S_TOK = "INDEX s_tok s TYPE tokenbf_v1(512, 2, 0)"
S_NGRAM = "INDEX s_ngram s TYPE ngrambf_v1(3, 256, 2, 7)"
FILES = [(900, 100), (1200, 150), (700, 100)]  # (rows, row group rows)


def _table(rows: int, first: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(first, first + rows)
    k = ids // 5 * 7 + rng.integers(0, 3, rows)  # clustered: row groups hold distinct ranges
    picks = rng.integers(0, len(WORDS), (rows, 3))
    seps = rng.integers(0, len(SEPARATORS), (rows, 2))
    texts = [  # test data only
        WORDS[a] + SEPARATORS[x] + WORDS[b] + SEPARATORS[y] + WORDS[c]
        for (a, b, c), (x, y) in zip(picks.tolist(), seps.tolist(), strict=True)
    ]
    texts[rows // 2] += " OutOfMemoryError"  # one rare token per file
    return pa.table({"id": ids, "k": k, "s": pa.array(texts)})


def _write(directory: Path) -> list[Path]:
    directory.mkdir(parents=True)
    first = 0
    paths = []
    for number, (rows, group_rows) in enumerate(FILES):
        path = directory / f"part-{number}.parquet"
        pq.write_table(_table(rows, first, number), path, row_group_size=group_rows)
        paths.append(path)
        first += rows
    return paths


def _cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bloomskip", *argv], capture_output=True, text=True, timeout=300
    )


def _explain(data: Path, where: str, *flags: str) -> dict:
    result = _cli("query", str(data), "--where", where, "--explain", "--json", *flags)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _matching_rows(paths: list[Path], condition: str) -> dict[str, np.ndarray]:
    """Per file name, the row numbers DuckDB finds matching ``condition`` (its own SQL)."""
    listing = ", ".join(f"'{p}'" for p in paths)
    found = duckdb.sql(
        f"SELECT filename, file_row_number FROM read_parquet([{listing}], filename = true, "
        f"file_row_number = true) WHERE {condition}"
    ).fetchall()
    rows: dict[str, list[int]] = {p.name: [] for p in paths}
    for name, row in found:
        rows[Path(name).name].append(row)
    return {name: np.array(sorted(values), np.int64) for name, values in rows.items()}


def _granule_sizes(path: Path, granule: int | None) -> np.ndarray:
    """Rows of each granule of a file: its row groups, or ``granule`` rows at a time."""
    metadata = pq.ParquetFile(path).metadata
    if granule is None:
        return np.array([metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)])
    total = metadata.num_rows
    return np.array([min(granule, total - start) for start in range(0, total, granule)])


def _holding(sizes: np.ndarray, rows: np.ndarray) -> np.ndarray:
    holds = np.zeros(len(sizes), bool)
    holds[np.searchsorted(np.cumsum(sizes), rows, side="right")] = True
    return holds


def _expand(skipped: list[dict]) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for item in skipped:
        for first, last in item["granules"]:
            out.setdefault(item["file"], set()).update(range(first, last + 1))
    return out


def _fill_fprs(path: Path, definition: str, sizes: np.ndarray) -> np.ndarray:
    """Each granule's fill ** k, from an index built over that file on its own."""
    table = pq.read_table(path)
    parsed = parse_index_definition(definition)
    index = SkipIndex.build(parsed, table, sizes, {"k": "Int64", "s": "String"})
    statistics = index.granule_statistics()
    return statistics.column("fill_ratio").to_numpy() ** parsed.hash_functions


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> tuple[Path, list[Path]]:
    data = tmp_path_factory.mktemp("observability") / "data"
    paths = _write(data)
    Dataset(data).build_index([K_BF, S_TOK, S_NGRAM])
    return data, paths


def test_predicate_atoms_split_and_or_not():
    assert predicate_atoms("k = 1") == ["k = 1"]
    assert predicate_atoms("k = 1 AND (hasToken(s, 'a') OR NOT s LIKE '%b%')") == [
        "k = 1",
        "hasToken(s, 'a')",
        "NOT (s LIKE '%b%')",
    ]
    # De Morgan is not applied: a NOT over an OR negates each of its atoms.
    assert predicate_atoms("NOT (k = 1 OR k = 2) AND k = 1") == [
        "NOT (k = 1)",
        "NOT (k = 2)",
        "k = 1",
    ]


def test_skipped_granules_per_index_and_per_atom(dataset):
    data, paths = dataset
    k_value = int(pq.read_table(paths[1]).column("k")[400].as_py())
    where = f"k = {k_value} AND hasToken(s, 'OutOfMemoryError')"
    facts = _explain(data, where)
    indexes = {entry["name"]: entry for entry in facts["indexes"]}
    atoms = {atom["predicate"]: atom for atom in facts["atoms"]}
    assert list(atoms) == [f"k = {k_value}", "hasToken(s, 'OutOfMemoryError')"]
    assert atoms[f"k = {k_value}"]["pruned_by"] == ["k_bf"]
    assert set(atoms["hasToken(s, 'OutOfMemoryError')"]["pruned_by"]) == {"s_tok", "s_ngram"}
    sizes = {p.name: _granule_sizes(p, None) for p in paths}
    truth = {
        atom: _matching_rows(paths, sql)
        for atom, sql in [
            (f"k = {k_value}", f"k = {k_value}"),
            ("hasToken(s, 'OutOfMemoryError')", TOKEN_SQL.format(word="OutOfMemoryError")),
        ]
    }
    for name, entry in indexes.items():
        skipped = _expand(entry["skipped_granules"])
        assert sum(len(g) for g in skipped.values()) == entry["granules_skipped"] > 0
        assert entry["rows_skipped"] == sum(
            int(sizes[f][sorted(g)].sum()) for f, g in skipped.items()
        )
        per_atom = [
            _expand(item["skipped_granules"])
            for atom in facts["atoms"]
            for item in atom["indexes"]
            if item["name"] == name and item["useful"]
        ]
        # An AND skips what any of its atoms skips, for each index.
        union: dict[str, set[int]] = {}
        for atom_skipped in per_atom:
            for f, g in atom_skipped.items():
                union.setdefault(f, set()).update(g)
        assert union == skipped
    # No atom ever skips a granule holding a row it matches (checked by DuckDB).
    for atom in facts["atoms"]:
        for item in atom["indexes"]:
            for f, granules in _expand(item["skipped_granules"]).items():
                holds = _holding(sizes[f], truth[atom["predicate"]][f])
                assert not holds[sorted(granules)].any()


def test_observed_false_positives_against_duckdb(dataset):
    data, paths = dataset
    where = "hasToken(s, 'OutOfMemoryError')"
    facts = _explain(data, where, "--analyze")
    assert facts["analyzed"] is True
    matches = _matching_rows(paths, TOKEN_SQL.format(word="OutOfMemoryError"))
    sizes = {p.name: _granule_sizes(p, None) for p in paths}
    holding = {f: _holding(sizes[f], rows) for f, rows in matches.items()}
    assert facts["read"]["rows_matched"] == sum(len(r) for r in matches.values()) == 3
    assert facts["read"]["row_groups_with_match"] == sum(int(h.sum()) for h in holding.values())
    for entry in facts["indexes"]:
        if not entry["useful"]:
            assert entry["observed"] is None
            continue
        skipped = _expand(entry["skipped_granules"])
        kept = {
            f: np.setdiff1d(np.arange(len(sizes[f])), sorted(skipped.get(f, ()))) for f in sizes
        }
        false_positives = sum(int((~holding[f][kept[f]]).sum()) for f in sizes)
        observed = entry["observed"]
        assert observed["granules_kept"] == sum(len(k) for k in kept.values())
        assert observed["granules_with_match"] == 3
        assert observed["false_positives"] == false_positives
        expected = sum(
            float(_fill_fprs(p, entry["definition"], sizes[p.name])[~holding[p.name]].sum())
            for p in paths
        )
        assert observed["expected_false_positives"] == pytest.approx(expected, abs=1e-3)
    read = facts["read"]
    assert read["row_groups_read_without_match"] == read["row_groups_to_read"] - 3


def test_observed_false_positives_with_row_count_granules(tmp_path):
    data = tmp_path / "data"
    paths = _write(data)
    Dataset(data).build_index([K_BF], granule="130")
    k_value = int(pq.read_table(paths[2]).column("k")[77].as_py())
    facts = _explain(data, f"k = {k_value} OR k = 5", "--analyze")
    matches = _matching_rows(paths, f"k = {k_value} OR k = 5")
    [entry] = facts["indexes"]
    skipped = _expand(entry["skipped_granules"])
    sizes = {p.name: _granule_sizes(p, 130) for p in paths}
    holding = {f: _holding(sizes[f], rows) for f, rows in matches.items()}
    kept = {f: np.setdiff1d(np.arange(len(sizes[f])), sorted(skipped.get(f, ()))) for f in sizes}
    assert entry["observed"]["granules_kept"] == sum(len(k) for k in kept.values())
    assert entry["observed"]["false_positives"] == sum(
        int((~holding[f][kept[f]]).sum()) for f in sizes
    )
    assert facts["read"]["rows_matched"] == sum(len(r) for r in matches.values())
    # OR of two atoms on one index: the index keeps what either atom keeps.
    per_atom = [_expand(atom["indexes"][0]["skipped_granules"]) for atom in facts["atoms"]]
    for f in sizes:
        both = set.intersection(*(atom.get(f, set()) for atom in per_atom))
        assert both == skipped.get(f, set())


def test_avoided_bytes_and_requests_match_the_footers(dataset):
    data, paths = dataset
    # With --select s the query reads column s only (without it: every column).
    facts = _explain(data, "hasToken(s, 'OutOfMemoryError')", "--select", "s")
    read = facts["read"]
    avoided = facts["avoided"]
    assert avoided["row_groups"] == read["row_groups"] - read["row_groups_to_read"] > 0
    assert avoided["requests"] == avoided["row_group_reads"] == avoided["row_groups"]
    assert avoided["footer_reads"] == 0  # a sidecar's pruning reads every footer
    # The stored column chunks of the column the WHERE reads (s, column 2), per row group.
    chunk_bytes = {
        p.name: np.array(
            [
                pq.ParquetFile(p).metadata.row_group(g).column(2).total_compressed_size
                for g in range(pq.ParquetFile(p).metadata.num_row_groups)
            ]
        )
        for p in paths
    }
    assert read["bytes"] == sum(int(sizes.sum()) for sizes in chunk_bytes.values())
    tok = next(entry for entry in facts["indexes"] if entry["name"] == "s_tok")
    skipped = _expand(tok["skipped_granules"])
    assert tok["bytes_skipped"] == sum(
        int(chunk_bytes[f][sorted(g)].sum()) for f, g in skipped.items()
    )
    assert avoided["bytes"] == read["bytes"] - read["bytes_to_read"] > 0
    assert avoided["rows"] == read["rows"] - read["rows_to_read"]


def test_an_index_too_small_is_saturated_for_the_predicate(tmp_path):
    data = tmp_path / "data"
    paths = _write(data)
    # 8 bytes of ngram filter per granule: every bit is set, every trigram "occurs" everywhere.
    Dataset(data).build_index(["INDEX tiny s TYPE ngrambf_v1(3, 8, 2, 0)"])
    where = "s LIKE '%zqxj%'"
    assert not any(len(r) for r in _matching_rows(paths, "s LIKE '%zqxj%'").values())
    facts = _explain(data, where)
    [entry] = facts["indexes"]
    [atom] = facts["atoms"]
    assert entry["saturated"] and atom["saturated"] and atom["pruned_by"] == []
    assert entry["granules_skipped"] == 0 and entry["mean_fill_ratio"] > 0.95
    text = _cli("query", str(data), "--where", where, "--explain")
    assert text.returncode == 0, text.stderr
    assert "saturated for this predicate: keeps all 24 granules" in text.stdout
    assert "the filters are too full" in text.stdout
    analyzed = _explain(data, where, "--analyze")
    assert analyzed["indexes"][0]["observed"]["false_positives"] == 24
    analyzed_text = _cli("query", str(data), "--where", where, "--analyze").stdout
    assert "24 of them held no matching row" in analyzed_text


def test_a_value_in_every_granule_is_not_called_a_full_filter(dataset):
    data, _ = dataset
    facts = _explain(data, "hasToken(s, 'GET')", "--analyze")
    tok = next(entry for entry in facts["indexes"] if entry["name"] == "s_tok")
    assert tok["saturated"] and tok["observed"]["false_positives"] == 0
    text = _cli("query", str(data), "--where", "hasToken(s, 'GET')", "--analyze").stdout
    assert "every one holds a matching row" in text
    # Without the exact filter the fill alone says the value is likely everywhere.
    text = _cli("query", str(data), "--where", "hasToken(s, 'GET')", "--explain").stdout
    assert "each token it looks for is likely in every granule" in text


def test_a_predicate_that_can_never_skip_is_not_saturated(dataset):
    data, _ = dataset
    facts = _explain(data, "NOT hasToken(s, 'GET') OR k = 7")
    assert not any(entry["saturated"] for entry in facts["indexes"])
    assert not any(atom["saturated"] for atom in facts["atoms"])
    k_bf = next(entry for entry in facts["indexes"] if entry["name"] == "k_bf")
    assert k_bf["useful"] and k_bf["granules_skipped"] == 0


def test_too_many_atoms_are_described_as_a_whole(dataset):
    data, _ = dataset
    where = " OR ".join(f"k = {n}" for n in range(MAX_ATOMS + 1))
    facts = _explain(data, where)
    assert facts["atoms"] is None
    assert facts["indexes"][0]["granules_skipped"] > 0


def test_analyze_errors_are_one_line(dataset):
    data, _ = dataset
    result = _cli("query", str(data), "--where", "nope = 1", "--analyze")
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "nope" in result.stderr


def test_analyze_on_arrow_ipc_and_a_partitioned_delta_table(tmp_path):
    """The exact filter reads record batches, and a table's partition values, as a query does."""
    import deltalake

    table = pa.table({"k": np.arange(3000) // 3, "p": ["x"] * 1500 + ["y"] * 1500})
    ipc = tmp_path / "a.arrow"
    with pa.ipc.new_file(ipc, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=500):
            writer.write_batch(batch)
    delta = tmp_path / "delta"
    deltalake.write_deltalake(delta, table, partition_by=["p"])
    for location in (ipc, delta):
        dataset = Dataset(location)
        dataset.build_index(["k TYPE bloom_filter(0.01)"])
        for where in ("k = 700 OR k = 1", "k = 100 OR (k = 700 AND p = 'y')", "p = 'x'"):
            facts = _explain(location, where, "--analyze")
            assert facts["read"]["rows_matched"] == dataset.query(where).num_rows > 0, where
            assert facts["read"]["row_groups_with_match"] <= facts["read"]["row_groups_to_read"]
